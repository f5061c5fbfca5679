"""Draws the loss by position from positions.csv (the trainer's, or several encodings'
concatenated): the mean validation loss in each position bucket of the window, one line
per encoding, log-scaled positions, a dashed mark at the training length. Each bucket is
drawn as a step over the positions it covers ([0, 1) is drawn from 0.5, for the log axis).

usage: plot_positions.py CSV PNG "caption" [--mode nonoverlap|sliding|last<N>] [--eval-len N] [--set NAME]

By default every encoding is drawn at the longest length it was evaluated at in the
non-overlapping mode (an encoding that stops earlier, `learned` beyond its maxT, is drawn
as far as it goes, its length in the legend), on the file's first test set. Files written
before the `set` column existed hold one set. A file holds the rows of every evaluation of a
run (column `step`): each bucket is drawn from its latest row.
"""
import argparse
import csv

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

parser = argparse.ArgumentParser()
parser.add_argument("csv")
parser.add_argument("png")
parser.add_argument("caption")
parser.add_argument("--mode", default="nonoverlap", help="nonoverlap, sliding or last<N> (default nonoverlap)")
parser.add_argument("--eval-len", type=int, default=0, help="draw this length only (default: each encoding's longest)")
parser.add_argument("--set", default=None, help="the test set (default: the file's first)")
args = parser.parse_args()

rows = list(csv.DictReader(open(args.csv)))
for r in rows:
    r["set"] = r.get("set") or "val"
latest = {(r["pe"], r["set"], r["eval_len"], r["mode"], r["pos_lo"]): r for r in rows}  # the last evaluation of each bucket
rows = list(latest.values())
test_set = args.set or (rows[0]["set"] if rows else "val")
rows = [r for r in rows if r["mode"] == args.mode and r["set"] == test_set]
if not rows:
    raise SystemExit("%s: no %s rows of the set %s" % (args.csv, args.mode, test_set))
pes = list(dict.fromkeys(r["pe"] for r in rows))
train_lens = sorted({int(r["train_len"]) for r in rows})
longest = max(int(r["eval_len"]) for r in rows)

colors = plt.get_cmap("tab20").colors  # up to 20 encodings: no two lines share a color
fig, ax = plt.subplots(figsize=(10, 5.5))
drawn = []
for n, pe in enumerate(pes):
    mine = [r for r in rows if r["pe"] == pe]
    L = args.eval_len or max(int(r["eval_len"]) for r in mine)
    buckets = sorted((int(r["pos_lo"]), int(r["pos_hi"]), float(r["loss"])) for r in mine if int(r["eval_len"]) == L)
    if not buckets:
        continue
    edges = [max(lo, 0.5) for lo, _, _ in buckets] + [buckets[-1][1]]
    drawn += [loss for _, _, loss in buckets]
    style = "-" if pe.startswith("cable") or pe == "kcable" else ":" if "_dape" in pe else "--"
    label = pe if L == longest else "%s (%d)" % (pe, L)
    ax.stairs([loss for _, _, loss in buckets], edges, baseline=None, linestyle=style,
              color=colors[(2 * n) % 20 + (2 * n) // 20], label=label, linewidth=2 if pe == "cable" else 1.2)
for T in train_lens:
    ax.axvline(T, color="black", linestyle=":", linewidth=1)
    ax.annotate("training length %d" % T, (T, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                textcoords="offset points", fontsize=8)
margin = 0.05 * (max(drawn) - min(drawn) + 1e-3)
ax.set_ylim(min(drawn) - margin, max(drawn) + 3 * margin)  # room for the label at the top
ax.set_xscale("log", base=2)
ticks = [0.5] + [2 ** k for k in range(0, longest.bit_length())]
ax.set_xticks(ticks)
ax.set_xticklabels(["0"] + [str(2 ** k) for k in range(0, longest.bit_length())], fontsize=8)
ax.set_xlabel("position in the window (buckets [0,1), [1,2), [2,4), ...)")
ax.set_ylabel("mean validation loss (nats)")
ax.set_title("loss by position, %s windows" % args.mode + (" of %d tokens" % args.eval_len if args.eval_len else ""))
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8, ncol=2)
fig.suptitle(args.caption, fontsize=9)
fig.tight_layout()
fig.savefig(args.png, dpi=110)
