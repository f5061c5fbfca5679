"""The statistics of the algorithmic tasks' study (dev/plot_tasks.py), in plain Python so that
any machine that runs the study can make its tables (no SciPy needed; tests/task_stats.py holds
these functions to tabulated values and to SciPy's where it is installed).

- mean_ci: the mean over seeds and the half-width of its 95% interval, Student's t with n - 1
  degrees of freedom (n seeds; with one seed no interval).
- paired_t: two entries' difference, paired by seed (the same data, test set and initial draw
  of the trainer's seed), and the two-sided p-value of Student's paired t-test.
- holm: Holm's step-down adjustment of a family of p-values (its familywise error rate at the
  level the adjusted p-values are compared with).
"""
import math


def _betacf(a, b, x):
    """the continued fraction of the regularized incomplete beta function (modified Lentz)"""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """the regularized incomplete beta function I_x(a, b)"""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf2(t, df):
    """the two-sided tail P(|T| >= |t|) of Student's t with df degrees of freedom"""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(q, df):
    """the q-quantile of Student's t (q > 0.5), by bisection on the tail"""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf2(mid, df) / 2 > 1 - q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def mean_ci(values):
    """the mean and the half-width of its 95% interval (0 for one value)"""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return m, t_quantile(0.975, n - 1) * sd / math.sqrt(n)


def paired_t(a, b):
    """the mean of a - b (paired lists) and the two-sided p-value of the paired t-test; a
    difference that is the same for every pair has p 0 (1 if it is 0)"""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    m = sum(d) / n
    if n < 2:
        return m, 1.0
    sd = math.sqrt(sum((v - m) ** 2 for v in d) / (n - 1))
    if sd == 0:
        return m, 1.0 if m == 0 else 0.0
    return m, t_sf2(m / (sd / math.sqrt(n)), n - 1)


def holm(pvalues):
    """Holm's adjusted p-values, in the order given"""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
