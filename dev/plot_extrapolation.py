"""Draws the papers' figure from extrapolation.csv: perplexity against evaluation
length, one line per encoding, log-scaled x, one panel per evaluation mode; and
writes the numbers as markdown tables (rows: encoding, columns: length). Rows of an
evaluation variant (mode "nonoverlap+yarn": RoPE scaling, xPos's "bca") are drawn as an
encoding of their own, "rope+yarn".

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
pes = list(dict.fromkeys(r["pe"] for r in rows))
lengths = sorted({int(r["eval_len"]) for r in rows})
modes = ["nonoverlap", "sliding"]
ppl = {(r["pe"], int(r["eval_len"]), r["mode"]): r["ppl"] for r in rows}

# 20 lines in tab20's distinct hues (dark shades first), then 20 more in tab20b's
colors = [plt.get_cmap("tab20").colors[(2 * n) % 20 + (2 * n) // 20] for n in range(20)] + list(plt.get_cmap("tab20b").colors)
fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
for ax, mode in zip(axes, modes):
    for n, pe in enumerate(pes):
        xs = [L for L in lengths if ppl.get((pe, L, mode), "n/a") != "n/a"]
        ys = [float(ppl[(pe, L, mode)]) for L in xs]
        style = "-" if pe.startswith("cable") or pe == "kcable" else ":" if "_dape" in pe else "--"
        ax.plot(xs, ys, style, marker="o", color=colors[n % len(colors)], label=pe,
                linewidth=2 if pe == "cable" else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(L) for L in lengths])
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_title(mode)
    ax.grid(True, which="both", alpha=0.3)
axes[0].set_ylabel("validation perplexity")
axes[1].legend(fontsize=8, ncol=2)
fig.suptitle(caption, fontsize=9)
fig.tight_layout()
fig.savefig(png_path, dpi=110)

with open(md_path, "w") as f:
    f.write(caption + "\n")
    for mode in modes:
        f.write("\n%s perplexity\n\n" % mode)
        f.write("| encoding | " + " | ".join(str(L) for L in lengths) + " |\n")
        f.write("|---|" + "---:|" * len(lengths) + "\n")
        for pe in pes:
            cells = []
            for L in lengths:
                v = ppl.get((pe, L, mode), "n/a")
                cells.append(v if v == "n/a" else "%.1f" % float(v))
            f.write("| %s | %s |\n" % (pe, " | ".join(cells)))
