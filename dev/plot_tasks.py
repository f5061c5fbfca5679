#!/usr/bin/env python3
"""The algorithmic tasks' results (dev/tasks.sh): tables and a plot of accuracy against length.

    python3 dev/plot_tasks.py tasks.csv tasks.png tasks.md N "caption"

tasks.csv: seed,pe,train_len,step,task,min_len,max_len,examples,correct,accuracy,tokens,
tokens_correct,token_accuracy (the trainers' tasks.csv rows with the seed of their run); N the
longest training length. A test file holds one length (min_len = max_len); a length the model
cannot run (n/a: learned beyond its positions) counts as accuracy 0, the model gives no answer.

tasks.md: for exact match and token accuracy, the mean over the unseen lengths (> N) of each
encoding on each task, mean and spread (standard deviation) over the seeds, the same at the
training lengths, and the mean by length of each task; then the two studies' comparisons:
Kazemnejad et al.'s mean reciprocal rank of their five encodings (NoPE, T5, ALiBi, RoPE and
their APE, sinusoidal) over every (task, seed) column, ranked by exact match on the unseen
lengths (ties share the mean of their ranks), and Ruoss et al.'s randomized positions against
plain ones (token accuracy on the unseen lengths, the mean over tasks and seeds). tasks.png: exact match (top row) and
token accuracy (bottom row) against length, one panel per task, one line per encoding (mean
over seeds); randomized positions dashed, in their encoding's colour.
"""
import csv
import math
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    """acc[(metric, pe, task, length)][seed] = value; the order of encodings and tasks as in the file"""
    acc = defaultdict(dict)
    pes, tasks, lengths = [], [], defaultdict(set)
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["min_len"] != row["max_len"]:
                continue
            pe, task, length, seed = row["pe"], row["task"], int(row["max_len"]), int(row["seed"])
            for metric, column in (("exact", "accuracy"), ("token", "token_accuracy")):
                value = row[column]
                acc[(metric, pe, task, length)][seed] = 0.0 if value == "n/a" else float(value)
            if pe not in pes:
                pes.append(pe)
            if task not in tasks:
                tasks.append(task)
            lengths[task].add(length)
    return acc, pes, tasks, {t: sorted(ls) for t, ls in lengths.items()}


def mean_sd(values):
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, sd


def per_seed_mean(acc, metric, pe, task, lens):
    """each seed's mean over the lengths lens"""
    seeds = sorted(acc[(metric, pe, task, lens[0])])
    return [sum(acc[(metric, pe, task, L)][s] for L in lens) / len(lens) for s in seeds]


def summary_table(acc, pes, tasks, lengths, metric, unseen, n):
    what = "unseen lengths (> %d)" % n if unseen else "training lengths (1..%d)" % n
    out = ["| encoding | " + " | ".join(tasks) + " | mean |", "|---|" + "---:|" * (len(tasks) + 1)]
    for pe in pes:
        cells, means = [], []
        for task in tasks:
            lens = [L for L in lengths[task] if (L > n) == unseen]
            if not lens or (metric, pe, task, lens[0]) not in acc:
                cells.append("-")
                continue
            m, sd = mean_sd(per_seed_mean(acc, metric, pe, task, lens))
            means.append(m)
            cells.append("%.2f ± %.2f" % (m, sd))
        cells.append("%.2f" % (sum(means) / len(means)) if len(means) == len(tasks) else "-")
        out.append("| `%s` | " % pe + " | ".join(cells) + " |")
    return what, out


KAZEMNEJAD = ["nope", "t5", "alibi", "rope", "sinusoidal"]  # their order: NoPE, T5, ALiBi, Rotary, APE


def mrr_table(acc, pes, tasks, lengths, n):
    """Kazemnejad et al.'s aggregate: the mean over (task, seed) of 1 / rank among their five"""
    five = [pe for pe in KAZEMNEJAD if pe in pes]
    rr = defaultdict(list)
    for task in tasks:
        lens = [L for L in lengths[task] if L > n]
        for i, seed in enumerate(sorted(acc[("exact", five[0], task, lens[0])])):
            score = {pe: per_seed_mean(acc, "exact", pe, task, lens)[i] for pe in five}
            for pe in five:
                better = sum(score[q] > score[pe] for q in five)
                equal = sum(score[q] == score[pe] for q in five)
                rr[pe].append(1.0 / (better + (equal + 1) / 2))
    out = ["| encoding | mean reciprocal rank | the paper's (Fig. 1) |", "|---|---:|---:|"]
    paper = {"nope": 0.69, "t5": 0.55, "alibi": 0.50, "rope": 0.33, "sinusoidal": 0.22}
    for pe in sorted(five, key=lambda p: -sum(rr[p]) / len(rr[p])):
        out.append("| `%s` | %.2f | %.2f |" % (pe, sum(rr[pe]) / len(rr[pe]), paper[pe]))
    return out


def rp_table(acc, pes, tasks, lengths, n):
    """Ruoss et al.'s comparison: each encoding with randomized positions against without"""
    out = ["| encoding | plain | randomized positions | difference |", "|---|---:|---:|---:|"]
    diffs = []
    for pe in pes:
        rps = [q for q in pes if q.startswith(pe + "_rp")]
        if not rps:
            continue
        means = []
        for q in (pe, rps[0]):
            vals = [v for task in tasks for v in per_seed_mean(acc, "token", q, task, [L for L in lengths[task] if L > n])]
            means.append(sum(vals) / len(vals))
        diffs.append(means[1] - means[0])
        out.append("| `%s` / `%s` | %.3f | %.3f | %+.3f |" % (pe, rps[0], means[0], means[1], means[1] - means[0]))
    if diffs:
        out.append("| mean | | | %+.3f |" % (sum(diffs) / len(diffs)))
    return out


def length_table(acc, pes, task, lens, metric):
    out = ["| encoding | " + " | ".join(str(L) for L in lens) + " |", "|---|" + "---:|" * len(lens)]
    for pe in pes:
        if (metric, pe, task, lens[0]) not in acc:
            continue
        cells = ["%.2f" % mean_sd(list(acc[(metric, pe, task, L)].values()))[0] for L in lens]
        out.append("| `%s` | " % pe + " | ".join(cells) + " |")
    return out


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: plot_tasks.py tasks.csv tasks.png tasks.md N caption")
    path, png, md, n, caption = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    acc, pes, tasks, lengths = read(path)
    if not pes:
        sys.exit("%s: no rows of single-length test files" % path)
    names = {"exact": "exact match (greedy)", "token": "token accuracy (teacher-forced)"}
    lines = ["# Algorithmic tasks: accuracy by length", "", caption, ""]
    for metric in ("exact", "token"):
        for unseen in (True, False):
            what, table = summary_table(acc, pes, tasks, lengths, metric, unseen, n)
            lines += ["## %s, %s: mean and spread over seeds" % (names[metric], what), ""] + table + [""]
    if all(pe in pes for pe in KAZEMNEJAD):
        lines += ["## Kazemnejad et al.'s five encodings: mean reciprocal rank, exact match on the unseen lengths", ""]
        lines += mrr_table(acc, pes, tasks, lengths, n) + [""]
    if any("_rp" in pe for pe in pes):
        lines += ["## Randomized positions (Ruoss et al.): token accuracy on the unseen lengths, mean over tasks and seeds", ""]
        lines += rp_table(acc, pes, tasks, lengths, n) + [""]
    for metric in ("exact", "token"):
        for task in tasks:
            lines += ["## %s: %s by length (mean over seeds)" % (task, names[metric]), ""]
            lines += length_table(acc, pes, task, lengths[task], metric) + [""]
    with open(md, "w") as f:
        f.write("\n".join(lines))

    bases = []
    for pe in pes:
        base = pe.split("_rp")[0]
        if base not in bases:
            bases.append(base)
    cmap = plt.get_cmap("tab20")
    colour = {b: cmap(i % 20) for i, b in enumerate(bases)}
    width = 3.4 * len(tasks) + 1.7  # the legend's column: 1.7 inches
    fig, axes = plt.subplots(2, len(tasks), figsize=(width, 6.4), squeeze=False, sharey=True)
    for row, metric in enumerate(("exact", "token")):
        for col, task in enumerate(tasks):
            ax = axes[row][col]
            lens = lengths[task]
            for pe in pes:
                if (metric, pe, task, lens[0]) not in acc:
                    continue
                ys = [mean_sd(list(acc[(metric, pe, task, L)].values()))[0] for L in lens]
                ax.plot(lens, ys, color=colour[pe.split("_rp")[0]], linestyle="--" if "_rp" in pe else "-",
                        marker=".", linewidth=1.1, label=pe)
            ax.axvline(n, color="grey", linestyle=":", linewidth=1)
            ax.set_xscale("log")
            ax.set_xticks(lens)
            ax.set_xticklabels([str(L) for L in lens], fontsize=7)
            ax.minorticks_off()
            ax.set_ylim(-0.03, 1.03)
            if row == 0:
                ax.set_title(task)
            else:
                ax.set_xlabel("length")
            if col == 0:
                ax.set_ylabel(names[metric])
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle(caption, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1 - 1.7 / width, 0.95))
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - 1.65 / width, 0.5), fontsize=7, frameon=False)
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
