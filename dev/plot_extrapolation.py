"""Draws the papers' figure from extrapolation.csv: perplexity against evaluation
length, one line per encoding, log-scaled x, one panel per evaluation mode (nonoverlap,
sliding, last<N>) and one row of panels per test set; and writes the numbers as markdown
tables (rows: encoding, columns: length), one per set and mode, and the context-use gap
(DAPE's Appendix A: loss of a window's last T tokens minus their loss alone) of the
non-overlapping windows. Rows of an evaluation variant (mode "nonoverlap+yarn": RoPE
scaling, xPos's "bca") are drawn as an encoding of their own, "rope+yarn". Files written
before the `set` and `gap` columns existed are read as one set, "val", without gaps. A file
holds the rows of every evaluation of a run (column `step`): each row is drawn from its
latest evaluation (the last row of its encoding, set, length and mode).

usage: plot_extrapolation.py CSV PNG MD "caption"
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

csv_path, png_path, md_path, caption = sys.argv[1:5]
rows = list(csv.DictReader(open(csv_path)))
for r in rows:  # "nonoverlap+yarn" of rope: mode "nonoverlap" of "rope+yarn"
    mode, _, variant = r["mode"].partition("+")
    r["mode"], r["pe"] = mode, r["pe"] + ("+" + variant if variant else "")
    r["set"] = r.get("set") or "val"
    r["gap"] = r.get("gap") or "n/a"
pes = list(dict.fromkeys(r["pe"] for r in rows))
sets = list(dict.fromkeys(r["set"] for r in rows))
lengths = sorted({int(r["eval_len"]) for r in rows})
modes = list(dict.fromkeys(r["mode"] for r in rows))
ppl = {(r["set"], r["pe"], int(r["eval_len"]), r["mode"]): r["ppl"] for r in rows}  # a later row replaces an earlier one
gap = {(r["set"], r["pe"], int(r["eval_len"]), r["mode"]): r["gap"] for r in rows}

# 20 lines in tab20's distinct hues (dark shades first), then 20 more in tab20b's
colors = [plt.get_cmap("tab20").colors[(2 * n) % 20 + (2 * n) // 20] for n in range(20)] + list(plt.get_cmap("tab20b").colors)
fig, axes = plt.subplots(len(sets), len(modes), figsize=(6.5 * len(modes), 5 * len(sets)), sharey="row", squeeze=False)
for row, test_set in zip(axes, sets):
    for ax, mode in zip(row, modes):
        for n, pe in enumerate(pes):
            xs = [L for L in lengths if ppl.get((test_set, pe, L, mode), "n/a") != "n/a"]
            ys = [float(ppl[(test_set, pe, L, mode)]) for L in xs]
            style = "-" if pe.startswith("cable") or pe == "kcable" else ":" if "_dape" in pe else "--"
            ax.plot(xs, ys, style, marker="o", color=colors[n % len(colors)], label=pe,
                    linewidth=2 if pe == "cable" else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths)
        ax.set_xticklabels([str(L) for L in lengths])
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_title(mode if len(sets) == 1 else "%s, %s" % (test_set, mode))
        ax.grid(True, which="both", alpha=0.3)
    row[0].set_ylabel("perplexity" if len(sets) > 1 else "validation perplexity")
axes[0][-1].legend(fontsize=8, ncol=2)
fig.suptitle(caption, fontsize=9)
fig.tight_layout()
fig.savefig(png_path, dpi=110)

def table(f, title, values, fmt):
    f.write("\n%s\n\n" % title)
    f.write("| encoding | " + " | ".join(str(L) for L in lengths) + " |\n")
    f.write("|---|" + "---:|" * len(lengths) + "\n")
    for pe in pes:
        cells = []
        for L in lengths:
            v = values(pe, L)
            cells.append(v if v == "n/a" else fmt % float(v))
        f.write("| %s | %s |\n" % (pe, " | ".join(cells)))

with open(md_path, "w") as f:
    f.write(caption + "\n")
    for test_set in sets:
        name = "" if len(sets) == 1 else "%s: " % test_set
        for mode in modes:
            table(f, "%s%s perplexity" % (name, mode), lambda pe, L: ppl.get((test_set, pe, L, mode), "n/a"), "%.1f")
        if any(v != "n/a" for k, v in gap.items() if k[0] == test_set):
            table(f, "%scontext-use gap (nats; nonoverlap windows: loss of the last T tokens minus their loss alone)" % name,
                  lambda pe, L: gap.get((test_set, pe, L, "nonoverlap"), "n/a"), "%+.3f")
