#!/usr/bin/env python3
"""The algorithmic tasks' study (dev/tasks.sh): its tables, their tests, and a plot, from what
the study has finished so far.

    python3 dev/plot_tasks.py OUTDIR

reads OUTDIR/study.txt (the study's settings, key=value: N, W, entries, tasks, seeds, ...),
OUTDIR/tasks.csv (entry,seed, then the trainers' tasks.csv columns: every finished run's rows)
and OUTDIR/baselines.csv (./tasks baseline's rows of every task and test length), and writes
OUTDIR/tasks.md (every table), OUTDIR/summary.md (the entries by task and the reading) and,
where matplotlib is installed, OUTDIR/tasks.png.

Exact match is scored by length; in distribution means the mean over the single-length test files
of lengths <= N (the training lengths 1..N), beyond training the mean over those > N, each length
with equal weight; a length the model cannot run (n/a: learned beyond its positions) counts 0.
Per (entry, task): the mean over seeds and its 95% interval (Student's t). An entry learned a
task when its mean in distribution is >= LEARNED (0.95); only those are compared: every pair of
them on the beyond-training exact match, paired by seed (the seeds both have), Student's paired
t-test, Holm's adjustment over the task's pairs; each also against the task's best local
shortcut (./tasks baseline: a reader of W symbols at the input's ends; one-sample t-test, Holm
over the task's entries). A difference is a claim only at an adjusted p < ALPHA (0.05); every
other ordering is a tie. Entries and tasks of study.txt without a finished run are listed as not
yet run.
"""
import csv
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_stats as st  # noqa: E402

LEARNED = 0.95
ALPHA = 0.05


def read_study(path):
    """study.txt: key=value lines"""
    study = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                study[k] = v
    return study


def read_results(path):
    """exact[(entry, task, length)][seed] and token[...] of single-length files; the entries
    and tasks in the order first met"""
    exact, token = defaultdict(dict), defaultdict(dict)
    entries, tasks = [], []
    if not os.path.exists(path):
        return exact, token, entries, tasks
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["min_len"] != row["max_len"]:
                continue
            key = (row["entry"], row["task"], int(row["max_len"]))
            seed = int(row["seed"])
            exact[key][seed] = 0.0 if row["accuracy"] == "n/a" else float(row["accuracy"])
            token[key][seed] = 0.0 if row["token_accuracy"] == "n/a" else float(row["token_accuracy"])
            if row["entry"] not in entries:
                entries.append(row["entry"])
            if row["task"] not in tasks:
                tasks.append(row["task"])
    return exact, token, entries, tasks


def read_baselines(path):
    """(chance, shortcut, bound) by (task, length)"""
    base = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            base[(row["task"], int(row["length"]))] = (float(row["chance"]), float(row["shortcut"]), row["bound"] == "1")
    return base


class Study:
    def __init__(self, outdir):
        self.study = read_study(os.path.join(outdir, "study.txt"))
        self.n = int(self.study["N"])
        self.exact, self.token, found, tasks = read_results(os.path.join(outdir, "tasks.csv"))
        self.base = read_baselines(os.path.join(outdir, "baselines.csv"))
        planned = self.study.get("entries", "").split()
        self.entries = planned + [e for e in found if e not in planned]
        self.tasks = [t for t in self.study.get("tasks", "").split() if t in tasks] + [t for t in tasks if t not in self.study.get("tasks", "").split()]
        self.planned_tasks = self.study.get("tasks", "").split()
        self.lengths = {t: sorted({L for (e, t2, L) in self.exact if t2 == t}) for t in self.tasks}

    def seeds(self, entry, task):
        """the seeds with a result at every length of the task"""
        sets = [set(self.exact[(entry, task, L)]) for L in self.lengths[task] if (entry, task, L) in self.exact]
        return sorted(set.intersection(*sets)) if len(sets) == len(self.lengths[task]) else []

    def lens(self, task, inside):
        return [L for L in self.lengths[task] if (L <= self.n) == inside]

    def per_seed(self, entry, task, inside, metric="exact"):
        """each seed's mean over the in-distribution (inside) or beyond-training lengths"""
        table = self.exact if metric == "exact" else self.token
        lens = self.lens(task, inside)
        return {s: sum(table[(entry, task, L)][s] for L in lens) / len(lens) for s in self.seeds(entry, task)} if lens else {}

    def baseline(self, task, inside):
        """the mean chance and shortcut over the lengths, and whether they are bounds"""
        rows = [self.base[(task, L)] for L in self.lens(task, inside) if (task, L) in self.base]
        if not rows:
            return None
        return sum(r[0] for r in rows) / len(rows), sum(r[1] for r in rows) / len(rows), any(r[2] for r in rows)

    def learned(self, entry, task):
        inside = self.per_seed(entry, task, True)
        return bool(inside) and sum(inside.values()) / len(inside) >= LEARNED


def fmt_ci(values):
    m, h = st.mean_ci(values)
    return "%.2f" % m if len(values) < 2 else "%.2f [%.2f, %.2f]" % (m, max(0.0, m - h), min(1.0, m + h))


def fmt_base(x, bound):
    s = "%.2f" % x if x >= 0.005 else ("%.0e" % x if x > 0 else "0")
    return ("≤ " if bound else "") + s


def fmt_p(p):
    return "p %.2g" % p if p >= 1e-4 else "p < 1e-4"


def task_table(S, task):
    """the task's entries: seeds, exact match in distribution and beyond, learned or not; chance
    and the shortcut"""
    n = S.n
    out = ["| entry | seeds | exact match, lengths 1..%d | exact match, lengths > %d | token accuracy > %d | learned (>= %.2f) |" % (n, n, n, LEARNED),
           "|---|---:|---:|---:|---:|---|"]
    for e in S.entries:
        inside, beyond = S.per_seed(e, task, True), S.per_seed(e, task, False)
        if not inside:
            out.append("| `%s` | 0 | not yet run | not yet run | | |" % e)
            continue
        tok = S.per_seed(e, task, False, "token")
        out.append("| `%s` | %d | %s | %s | %s | %s |" % (e, len(inside), fmt_ci(list(inside.values())), fmt_ci(list(beyond.values())),
                                                        fmt_ci(list(tok.values())), "yes" if S.learned(e, task) else "**no**: not compared"))
    for what, i in (("chance", 0), ("best local shortcut (%s symbols at the ends)" % S.study.get("W", "?"), 1)):
        b_in, b_out = S.baseline(task, True), S.baseline(task, False)
        out.append("| %s | | %s | %s | | |" % (what, fmt_base(b_in[i], b_in[2]) if b_in else "-", fmt_base(b_out[i], b_out[2]) if b_out else "-"))
    return out


def comparisons(S, task):
    """the learned entries' beyond-training exact match: every pair (paired by seed, Holm over
    the pairs) and each against the shortcut (Holm over the entries); rows and the claims"""
    ok = [e for e in S.entries if S.learned(e, task)]
    beyond = {e: S.per_seed(e, task, False) for e in ok}
    pairs = []
    for i, a in enumerate(ok):
        for b in ok[i + 1:]:
            common = sorted(set(beyond[a]) & set(beyond[b]))
            if len(common) >= 2:
                d, p = st.paired_t([beyond[a][s] for s in common], [beyond[b][s] for s in common])
                pairs.append((a, b, d, p))
    adjusted = st.holm([p for (_, _, _, p) in pairs])
    above, below = defaultdict(list), defaultdict(list)
    for (a, b, d, _), q in zip(pairs, adjusted):
        if q < ALPHA:
            hi, lo = (a, b) if d > 0 else (b, a)
            above[hi].append((lo, q))
            below[lo].append((hi, q))
    shortcut = S.baseline(task, False)
    vs_short = []
    for e in ok:
        vals = list(beyond[e].values())
        d, p = st.paired_t(vals, [shortcut[1]] * len(vals)) if shortcut else (0, 1)
        vs_short.append((e, d, p))
    adj_short = st.holm([p for (_, _, p) in vs_short])
    order = sorted(ok, key=lambda e: -sum(beyond[e].values()) / len(beyond[e]))
    out = ["| entry (learned) | exact match, lengths > %d | against the shortcut (%s) | significantly above | significantly below |" % (S.n, fmt_base(shortcut[1], shortcut[2]) if shortcut else "-"),
           "|---|---:|---|---|---|"]
    short_of = {e: (d, q) for (e, d, _), q in zip(vs_short, adj_short)}
    for e in order:
        d, q = short_of[e]
        vs = ("above, " if d > 0 else "below, ") + fmt_p(q) if q < ALPHA else "tie, " + fmt_p(q)
        out.append("| `%s` | %s | %s | %s | %s |" % (e, fmt_ci(list(beyond[e].values())), vs,
                                                   ", ".join("`%s` (%s)" % (x, fmt_p(q)) for x, q in above[e]) or "-",
                                                   ", ".join("`%s` (%s)" % (x, fmt_p(q)) for x, q in below[e]) or "-"))
    claims = ["`%s` > `%s` (%s)" % (hi, lo, fmt_p(q)) for hi in order for lo, q in above[hi]]
    return out, ok, claims, len(pairs), [e for e in order if short_of[e][1] < ALPHA and short_of[e][0] > 0]


def length_table(S, task):
    lens = S.lengths[task]
    out = ["| entry | " + " | ".join(("%d" if L <= S.n else "**%d**") % L for L in lens) + " |", "|---|" + "---:|" * len(lens)]
    for e in S.entries:
        if not S.seeds(e, task):
            continue
        out.append("| `%s` | " % e + " | ".join("%.2f" % st.mean_ci([S.exact[(e, task, L)][s] for s in S.seeds(e, task)])[0] for L in lens) + " |")
    for what, i in (("chance", 0), ("shortcut", 1)):
        out.append("| %s | " % what + " | ".join(fmt_base(S.base[(task, L)][i], S.base[(task, L)][2]) if (task, L) in S.base else "-" for L in lens) + " |")
    return out


def progress(S):
    """how much of the planned study has finished, by task"""
    seeds = S.study.get("seeds", "").split()
    planned = S.study.get("entries", "").split()
    by_task = []
    for t in S.planned_tasks:
        done = sum(1 for e in planned for s in seeds if t in S.lengths and int(s) in S.seeds(e, t))
        by_task.append("%s %d of %d" % (t, done, len(planned) * len(seeds)))
    total = sum(int(x.split()[1]) for x in by_task)
    whole = len(planned) * len(S.planned_tasks) * len(seeds)
    line = "Runs finished: %d of the %d planned (%d entries x %d tasks x %d seeds): %s; an entry with fewer seeds says how many." % (
        total, whole, len(planned), len(S.planned_tasks), len(seeds), ", ".join(by_task))
    if total < whole:
        line += (" **The study is incomplete**: these are the runs finished so far, not its result; no encoding is"
                 " claimed to beat another until every planned run has finished.")
    return [line]


def settings(S):
    """the study's settings and the tables' rules, one paragraph"""
    s = S.study
    return ("Made by `python3 dev/plot_tasks.py %s` from that folder's `tasks.csv` (the study: `%s`). "
            "Settings: trainer `%s`, model `%s`, training lengths 1..%d, %s steps of %s examples, learning rate %s, seeds %s; %s test examples per length. "
            "Exact match is greedy decoding's (`-A`); an interval is the 95%% interval of the mean over seeds (Student's t). An entry learned a task "
            "when its mean exact match in distribution is >= %.2f; only those are compared. Comparisons: Student's paired t-test over seeds, Holm's "
            "adjustment over the task's pairs (and, against the shortcut, over its entries); a difference is stated only at an adjusted p < %.2f, "
            "every other ordering is a tie." % (s.get("outdir", "OUTDIR"), s.get("command", "dev/tasks.sh"), s.get("trainer", "?"), s.get("model", "?"), S.n,
                                                s.get("steps", "?"), s.get("batch", "?"), s.get("lr", "?"), s.get("seeds", "?"), s.get("examples", "?"), LEARNED, ALPHA))


def summary(S, reading):
    """summary.md: the entries by task, in distribution / beyond training with the latter's
    interval, the progress, and the generated reading (what dev/tasks.sh --docs puts into
    docs/tasks.md and the README)"""
    cells = ["| entry | " + " | ".join("%s: in / beyond" % t for t in S.tasks) + " |", "|---|" + "---:|" * len(S.tasks)]
    for e in S.entries:
        row = []
        for t in S.tasks:
            inside, beyond = S.per_seed(e, t, True), S.per_seed(e, t, False)
            if not inside:
                row.append("not yet run")
                continue
            m_in = sum(inside.values()) / len(inside)
            cell = ("%.2f / %s" if S.learned(e, t) else "(%.2f / %s, not learned)") % (m_in, fmt_ci(list(beyond.values())))
            planned = len(S.study.get("seeds", "").split())
            row.append(cell + (" (%d seed%s)" % (len(inside), "s" if len(inside) > 1 else "") if len(inside) < planned else ""))
        cells.append("| `%s` | " % e + " | ".join(row) + " |")
    for what, i in (("chance", 0), ("shortcut", 1)):
        row = []
        for t in S.tasks:
            b_in, b_out = S.baseline(t, True), S.baseline(t, False)
            row.append("%s / %s" % (fmt_base(b_in[i], b_in[2]) if b_in else "-", fmt_base(b_out[i], b_out[2]) if b_out else "-"))
        cells.append("| %s | " % what + " | ".join(row) + " |")
    return "\n".join([settings(S), ""] + progress(S) + [""] + cells + [""] + reading) + "\n"


def markdown(S):
    lines = ["# Algorithmic tasks: exact match in distribution and beyond training", "", settings(S), ""]
    lines += progress(S) + [""]
    reading, sections = [], []
    for task in S.tasks:
        sections += ["## %s" % task, ""] + task_table(S, task) + [""]
        rows, ok, claims, npairs, above_short = comparisons(S, task)
        not_learned = [e for e in S.entries if S.seeds(e, task) and not S.learned(e, task)]
        if ok:
            sections += ["Beyond training, the entries that learned %s (%d pairs compared):" % (task, npairs), ""] + rows + [""]
        sections += ["Exact match by length (mean over seeds; beyond training in bold):", ""] + length_table(S, task) + [""]
        sentence = "**%s**: " % task
        sentence += ("learned by %s" % ", ".join("`%s`" % e for e in ok)) if ok else "learned by no entry"
        sentence += ("; not learned by %s." % ", ".join("`%s`" % e for e in not_learned)) if not_learned else "."
        if ok:
            sentence += " Above the best local shortcut beyond training: %s." % (", ".join("`%s`" % e for e in above_short) or "none")
            sentence += " Significant differences: %s; every other ordering among them is a tie." % ("; ".join(claims) if claims else "none")
        reading += [sentence, ""]
    lines += ["## Reading (generated from the tests below)", ""] + reading + sections
    return "\n".join(lines) + "\n", reading


def plot(S, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_tasks: matplotlib not installed: no %s" % png)
        return
    cmap = plt.get_cmap("tab20")
    fig, axes = plt.subplots(1, len(S.tasks), figsize=(3.4 * len(S.tasks) + 1.7, 3.6), squeeze=False, sharey=True)
    for col, task in enumerate(S.tasks):
        ax = axes[0][col]
        lens = S.lengths[task]
        for i, e in enumerate(S.entries):
            seeds = S.seeds(e, task)
            if not seeds:
                continue
            ys = [sum(S.exact[(e, task, L)][s] for s in seeds) / len(seeds) for L in lens]
            ax.plot(lens, ys, color=cmap(i % 20), linestyle="-" if S.learned(e, task) else ":", marker=".", linewidth=1.1, label=e)
        ax.plot(lens, [S.base[(task, L)][1] if (task, L) in S.base else float("nan") for L in lens], color="black", linestyle="--", linewidth=0.8, label="shortcut")
        ax.axvline(S.n, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_xticks(lens)
        ax.set_xticklabels([str(L) for L in lens], fontsize=7)
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(task)
        ax.set_xlabel("length")
        if col == 0:
            ax.set_ylabel("exact match (greedy)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    width = 3.4 * len(S.tasks) + 1.7
    fig.tight_layout(rect=(0, 0, 1 - 1.7 / width, 1))
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - 1.65 / width, 0.5), fontsize=7, frameon=False)
    fig.savefig(png, dpi=110)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_tasks.py OUTDIR  (its study.txt, tasks.csv and baselines.csv: dev/tasks.sh)")
    outdir = sys.argv[1]
    for f in ("study.txt", "baselines.csv"):
        if not os.path.exists(os.path.join(outdir, f)):
            sys.exit("plot_tasks: %s has no %s (dev/tasks.sh writes it)" % (outdir, f))
    S = Study(outdir)
    text, reading = markdown(S)
    with open(os.path.join(outdir, "tasks.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(summary(S, reading))
    if S.tasks:
        plot(S, os.path.join(outdir, "tasks.png"))


if __name__ == "__main__":
    main()
