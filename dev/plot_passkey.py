"""Draws passkey.csv (the trainer's, or several encodings' concatenated) as heatmaps: one
panel per encoding, evaluation length down, depth of the key across, the color the accuracy
(greedy decoding gives the key back), each cell labelled with the accuracy and the mean
log-probability of the key's tokens; n/a cells (a learned model beyond its positions) are
grey. Also writes the grid as a markdown table (accuracy / mean log P(key)) if MD is given.
A file holds the rows of every evaluation of a run (column `step`): each cell is drawn from
its latest row.

usage: plot_passkey.py CSV PNG "caption" [MD]
"""
import csv
import math
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

csv_path, png_path, caption = sys.argv[1:4]
md_path = sys.argv[4] if len(sys.argv) > 4 else None
rows = list(csv.DictReader(open(csv_path)))
if not rows:
    raise SystemExit("%s: no rows" % csv_path)
pes = list(dict.fromkeys(r["pe"] for r in rows))
lengths = sorted({int(r["eval_len"]) for r in rows})
depths = sorted({float(r["depth"]) for r in rows})
cell = {(r["pe"], int(r["eval_len"]), float(r["depth"])): r for r in rows}  # a later row replaces an earlier one

cols = min(len(pes), 3)
nrows = math.ceil(len(pes) / cols)
fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 0.5 * len(lengths) * nrows + 1.6 * nrows), squeeze=False)
cmap = plt.get_cmap("viridis").copy()
cmap.set_bad("lightgrey")
for n, pe in enumerate(pes):
    ax = axes[n // cols][n % cols]
    grid = [[math.nan] * len(depths) for _ in lengths]
    for i, L in enumerate(lengths):
        for j, d in enumerate(depths):
            r = cell.get((pe, L, d))
            if r is None or r["accuracy"] == "n/a":
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=7, color="dimgrey")
                continue
            grid[i][j] = float(r["accuracy"])
            ax.text(j, i, "%.2f\n%.1f" % (float(r["accuracy"]), float(r["key_logprob"])), ha="center", va="center",
                    fontsize=7, color="white" if float(r["accuracy"]) < 0.6 else "black")
    image = ax.imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(depths)))
    ax.set_xticklabels(["%.0f%%" % (100 * d) for d in depths], fontsize=8)
    ax.set_yticks(range(len(lengths)))
    ax.set_yticklabels([str(L) for L in lengths], fontsize=8)
    ax.set_xlabel("depth of the key", fontsize=8)
    ax.set_ylabel("length (tokens)", fontsize=8)
    ax.set_title(pe, fontsize=10)
for n in range(len(pes), nrows * cols):
    axes[n // cols][n % cols].axis("off")
fig.colorbar(image, ax=axes, shrink=0.8, label="accuracy (cells: accuracy, mean log P(key))")
fig.suptitle(caption, fontsize=9)
fig.savefig(png_path, dpi=110, bbox_inches="tight")

if md_path:
    with open(md_path, "w") as f:
        f.write(caption + "\n\naccuracy / mean log P(key) per cell; columns: depth of the key\n")
        for pe in pes:
            f.write("\n%s\n\n| length | %s |\n" % (pe, " | ".join("%.0f%%" % (100 * d) for d in depths)))
            f.write("|---:|" + "---:|" * len(depths) + "\n")
            for L in lengths:
                cells = []
                for d in depths:
                    r = cell.get((pe, L, d))
                    ok = r is not None and r["accuracy"] != "n/a"
                    cells.append("%.2f / %.1f" % (float(r["accuracy"]), float(r["key_logprob"])) if ok else "n/a")
                f.write("| %d | %s |\n" % (L, " | ".join(cells)))
