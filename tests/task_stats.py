#!/usr/bin/env python3
"""The study's statistics (dev/task_stats.py) against tabulated values (SciPy 1.10.1's, which
the printed tables of Student's t agree with to their digits) and, where SciPy is installed,
against SciPy on random cases. Exits 1 on any difference beyond its tolerance.

    python3 tests/task_stats.py
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dev"))
import task_stats as st  # noqa: E402

failures = 0


def check(what, got, want, tol):
    global failures
    ok = abs(got - want) <= tol
    failures += not ok
    print("  %s  %-62s %.10g (expected %.10g, tolerance %g)" % ("ok  " if ok else "FAIL", what, got, want, tol))


check("t quantile 0.975, 4 degrees of freedom", st.t_quantile(0.975, 4), 2.7764451051977987, 1e-9)
check("t quantile 0.975, 9 degrees of freedom", st.t_quantile(0.975, 9), 2.2621571627409915, 1e-9)
check("two-sided tail of t = 2, 5 degrees of freedom", st.t_sf2(2.0, 5), 0.10193947882985828, 1e-12)
check("two-sided tail of t = 8.6, 4 degrees of freedom", st.t_sf2(8.6, 4), 0.0010045941244978154, 1e-12)
d, p = st.paired_t([0.9, 0.8, 0.95, 0.7, 0.85], [0.5, 0.6, 0.4, 0.55, 0.7])
check("paired t-test of five pairs: the mean difference", d, 0.29, 1e-12)
check("paired t-test of five pairs: p (scipy.stats.ttest_rel)", p, 0.02197934902891009, 1e-12)
check("paired t-test: the same difference in every pair, p", st.paired_t([1, 1, 1], [0, 0, 0])[1], 0.0, 0)
check("paired t-test: no difference, p", st.paired_t([0.5, 0.5], [0.5, 0.5])[1], 1.0, 0)
m, h = st.mean_ci([0.9, 0.8, 0.95, 0.7, 0.85])
check("mean of five", m, 0.84, 1e-12)
check("95% half-width of five (t 2.776 x sd / sqrt 5)", h, 2.7764451051977987 * 0.0961769203083567 / 5 ** 0.5, 1e-9)
holm = st.holm([0.01, 0.04, 0.03, 0.005])
for got, want, i in zip(holm, [0.03, 0.06, 0.06, 0.02], range(4)):
    check("Holm's adjustment of (0.01, 0.04, 0.03, 0.005), p %d" % i, got, want, 1e-12)
try:
    from scipy import stats
except ImportError:
    print("  (SciPy not installed: the random cases against it are skipped)")
else:
    rng = random.Random(1)
    worst = 0.0
    for _ in range(200):
        df = rng.randint(1, 30)
        t = rng.uniform(0, 12)
        worst = max(worst, abs(st.t_sf2(t, df) - 2 * stats.t.sf(t, df)))
        q = rng.uniform(0.51, 0.9999)
        worst = max(worst, abs(st.t_quantile(q, df) - stats.t.ppf(q, df)) / stats.t.ppf(q, df))
    check("200 random tails and quantiles against SciPy: the largest error", worst, 0, 1e-8)
sys.exit(1 if failures else 0)
