#!/usr/bin/env bash
# The papers' experiment at small scale: train the CPU preset model on the starter
# corpus with every encoding (same T, data order, steps and seed), evaluate each at
# 1x, 2x, 4x, 8x and 16x the training length in both modes (non-overlapping windows,
# sliding window), and write one CSV, a markdown table and the plot.
#
#   dev/extrapolation.sh [--quick] [OUTDIR]     (default OUTDIR: out/extrapolation)
#
# --quick: 4 encodings, a few steps, short lengths (a smoke test; CI runs it and checks
# that the CSV has every expected row with finite numbers).
#
# An entry <base>_dape<variant> is the base with DAPE (llmc/dape.h; e.g. kerple_dape1x3 is
# DAPE_1x3-Kerple), built as build/train_gpt2_<entry> (make ... PE=<base> DAPE=<variant>).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
OUT=${1:-out/extrapolation}
if [ $QUICK -eq 1 ]; then
    PES=(learned alibi cable kerple_dape1x3)
    MODEL=nano; T=32; B=4; STEPS=30; K=512; LR=3e-3; WARMUP=5
else
    PES=(learned sinusoidal rope nope alibi t5 kerple fire cable cable_nw cable_v1 kcable
         kerple_dapemlp kerple_dape1x3 alibi_dape1x3 nope_dape1x3)
    MODEL=cpu; T=128; B=8; STEPS=${STEPS:-200}; K=${K:-4096}; LR=2e-3; WARMUP=20
fi
STRIDE=$T # sliding window: score the last T tokens of each window
LENS="$T,$((2 * T)),$((4 * T)),$((8 * T)),$((16 * T))"
mkdir -p "$OUT"
make -s starter $(for pe in "${PES[@]}"; do echo build/train_gpt2_$pe; done)
start=$(date +%s)
for pe in "${PES[@]}"; do
    t0=$(date +%s)
    build/train_gpt2_$pe -e $MODEL -t $T -b $B -x $STEPS -l $LR -u $WARMUP -q 0.1 -c 0.1 -v 0 -m 10 -s 0 \
        -R 42 -E "$LENS" -K $K -W $STRIDE -o "$OUT/$pe" > "$OUT/$pe.log"
    echo "$pe: $(grep '^val loss' "$OUT/$pe.log" | tail -1), $(( $(date +%s) - t0 ))s"
done
elapsed=$(( $(date +%s) - start ))

# one CSV with every row
{ head -1 "$OUT/${PES[0]}/extrapolation.csv"; for pe in "${PES[@]}"; do tail -n +2 "$OUT/$pe/extrapolation.csv"; done; } \
    > "$OUT/extrapolation.csv"

# every expected row, with finite numbers (learned beyond its training length: n/a)
expected=$(( ${#PES[@]} * 5 * 2 ))
rows=$(tail -n +2 "$OUT/extrapolation.csv" | wc -l)
[ "$rows" -eq "$expected" ] || { echo "FAIL: $rows rows in $OUT/extrapolation.csv, expected $expected"; exit 1; }
awk -F, -v T=$T 'NR > 1 {
    if ($1 == "learned" && $3 > T) { if ($6 != "n/a") bad = bad " " $1 "@" $3 "(should be n/a)"; next }
    if ($6 == "n/a" || $6 + 0 != $6 || $6 <= 0 || $7 <= 1 || $5 <= 0) bad = bad " " $1 "@" $3 "/" $4
} END { if (bad != "") { print "FAIL: bad rows:" bad; exit 1 } }' "$OUT/extrapolation.csv"
echo "ok: $rows rows, all finite; $elapsed s for ${#PES[@]} encodings ($MODEL, T=$T, $STEPS steps of $((B * T)) tokens)"

# table and plot (python3 with matplotlib: Debian's python3-matplotlib)
PY=python3
$PY -c "import matplotlib" 2> /dev/null || PY=/usr/bin/python3
$PY dev/plot_extrapolation.py "$OUT/extrapolation.csv" "$OUT/extrapolation.png" "$OUT/extrapolation.md" \
    "$MODEL model, trained at T=$T for $STEPS steps ($((STEPS * B * T)) tokens); $K scored tokens per length; sliding stride $STRIDE"
echo "wrote $OUT/extrapolation.csv, $OUT/extrapolation.md, $OUT/extrapolation.png"
