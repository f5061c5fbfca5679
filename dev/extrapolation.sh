#!/usr/bin/env bash
# The papers' experiment at small scale: train the CPU preset model on the starter
# corpus with every encoding (same T, data order, steps and seed), evaluate each at
# 1x, 2x, 4x, 8x and 16x the training length in three modes (non-overlapping windows,
# sliding window, DAPE's last-T windows; each row with the context-use gap), and write one
# CSV, a markdown table and the plot, the loss by position of every encoding
# (positions.csv, positions.png), and the passkey retrieval grid (passkey.csv, .md, .png:
# lengths x depths of the key). RoPE is evaluated with every scaling method as well (-rs),
# xPos with blockwise causal attention (-xb 1), and the models trained with randomized
# positions at plain positions 0..T-1 as well (-ra 1).
#
#   dev/extrapolation.sh [--quick] [OUTDIR]     (default OUTDIR: out/extrapolation)
#   ONLY="cope" dev/extrapolation.sh OUTDIR      only these entries, with the same settings (the
#                                               rows of a run of the others stay valid: every
#                                               entry trains alone, from the same seed)
#
# --quick: 8 entries, a few steps, short lengths (a smoke test; CI runs it and checks
# that the CSVs have every expected row with finite numbers).
# PASSKEY=N keys per passkey cell (0: no passkey test), LAST=N the last-N mode (0: none).
#
# An entry <base>_dape<variant> is the base with DAPE (pe/dape.h; e.g. kerple_dape1x3 is
# DAPE_1x3-Kerple), built as build/train_gpt2_<entry> (make ... PE=<base> DAPE=<variant>);
# an entry <pe>_rp<L> is <pe> trained with randomized positions from [0, L) (-rp L; its
# rows in the CSVs carry that name, as the trainer writes them).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
OUT=${1:-out/extrapolation}
if [ $QUICK -eq 1 ]; then
    PES=(learned alibi cable rope xpos kerple_dape1x3 txl learned_rp512)
    MODEL=nano; T=32; B=4; STEPS=30; K=512; LR=3e-3; WARMUP=5
    ROPE_SCALING=yarn,dynamic-ntk
    PASSKEY=${PASSKEY:-1}; DEPTHS=2
else
    # every registered encoding (llmc/pe_list.h), then DAPE and randomized positions
    read -r -a PES <<< "$(make -s pe-list) kerple_dapemlp kerple_dape1x3 alibi_dape1x3 nope_dape1x3 learned_rp2048 rope_rp2048"
    MODEL=cpu; T=128; B=8; STEPS=${STEPS:-200}; K=${K:-4096}; LR=2e-3; WARMUP=20
    PASSKEY=${PASSKEY:-10}; DEPTHS=5
fi
if [ -n "${ONLY:-}" ]; then read -r -a PES <<< "$ONLY"; fi
LAST=${LAST:-$T} # DAPE's protocol: the last T tokens of each window
ROPE_SCALING=${ROPE_SCALING:-pi,ntk,yarn,dynamic-pi,dynamic-ntk,dynamic-yarn}
# the binary of an entry (<pe>_rp<L>: <pe>'s), and its randomized positions' flags
binary() { echo "build/train_gpt2_${1%_rp*}"; }
rp_flags() { case $1 in *_rp*) echo "-rp ${1##*_rp} -ra 1" ;; esac; }
# the evaluation variants of an encoding: each adds a set of rows (mode "nonoverlap+yarn", ...)
variant_flags() {
    case $1 in
        rope) echo "-rs $ROPE_SCALING" ;;
        xpos) echo "-xb 1" ;;
    esac
}
variant_count() {
    case $1 in
        rope) echo $(( $(tr -cd , <<< "$ROPE_SCALING" | wc -c) + 1 )) ;;
        xpos|*_rp*) echo 1 ;;
        *) echo 0 ;;
    esac
}
STRIDE=$T # sliding window: score the last T tokens of each window
LENS="$T,$((2 * T)),$((4 * T)),$((8 * T)),$((16 * T))"
MODES=$(( LAST > 0 ? 3 : 2 ))
mkdir -p "$OUT"
make -s starter gpt2_passkey.bin $(for pe in "${PES[@]}"; do binary $pe; done | sort -u)
start=$(date +%s)
for pe in "${PES[@]}"; do
    t0=$(date +%s)
    rm -rf "$OUT/$pe" # a rerun starts over (the trainer refuses a new run over an old one)
    $(binary $pe) -e $MODEL -t $T -b $B -x $STEPS -l $LR -u $WARMUP -q 0.1 -c 0.1 -v 0 -m 10 -s 0 \
        -R 42 -E "$LENS" -K $K -W $STRIDE -L $LAST -P $PASSKEY -Pd $DEPTHS $(variant_flags $pe) $(rp_flags $pe) -o "$OUT/$pe" > "$OUT/$pe.log"
    echo "$pe: $(grep '^val loss' "$OUT/$pe.log" | tail -1), $(( $(date +%s) - t0 ))s"
done
elapsed=$(( $(date +%s) - start ))

# one CSV with every row
{ head -1 "$OUT/${PES[0]}/extrapolation.csv"; for pe in "${PES[@]}"; do tail -n +2 "$OUT/$pe/extrapolation.csv"; done; } \
    > "$OUT/extrapolation.csv"

# every expected row, with finite numbers (learned beyond its training length: n/a)
expected=0
for pe in "${PES[@]}"; do expected=$(( expected + (1 + $(variant_count $pe)) * 5 * MODES )); done
rows=$(tail -n +2 "$OUT/extrapolation.csv" | wc -l)
[ "$rows" -eq "$expected" ] || { echo "FAIL: $rows rows in $OUT/extrapolation.csv, expected $expected"; exit 1; }
awk -F, -v T=$T 'NR > 1 {
    if ($1 == "learned" && $3 > T) { if ($6 != "n/a") bad = bad " " $1 "@" $3 "(should be n/a)"; next }
    if ($6 == "n/a" || $6 + 0 != $6 || $6 <= 0 || $7 <= 1 || $5 <= 0) bad = bad " " $1 "@" $3 "/" $4
    if (($3 > T) != ($9 != "n/a") || ($9 != "n/a" && $9 + 0 != $9)) bad = bad " " $1 "@" $3 "/" $4 "(gap " $9 ")"
} END { if (bad != "") { print "FAIL: bad rows:" bad; exit 1 } }' "$OUT/extrapolation.csv"
echo "ok: $rows rows, all finite, a context-use gap beyond T; $elapsed s for ${#PES[@]} encodings ($MODEL, T=$T, $STEPS steps of $((B * T)) tokens)"

# loss by position: every evaluated row (not the n/a ones) has its scored positions tiled
# without gap or overlap by the buckets [0,1), [1,2), [2,4), ... (cut to the scored range),
# each bucket with windows x its width tokens and a finite loss, the tokens adding up to
# the row's in extrapolation.csv
{ head -1 "$OUT/${PES[0]}/positions.csv"; for pe in "${PES[@]}"; do tail -n +2 "$OUT/$pe/positions.csv"; done; } \
    > "$OUT/positions.csv"
awk -F, -v S=$STRIDE -v N=$LAST '
FNR == 1 { next }
FILENAME == ARGV[1] { if ($5 > 0) { key = $1 "," $3 "," $4; total[key] = $5; L[key] = $3
                                    first[key] = $4 ~ /^sliding/ && S < $3 ? $3 - S : $4 ~ /^last/ && N < $3 ? $3 - N : 0
                                    next_lo[key] = first[key] }
                      next }
{   key = $1 "," $3 "," $4
    if (!(key in total)) { bad = bad " " key "(unexpected)"; next }
    edge = 1; while (edge <= $5) edge *= 2
    windows = total[key] / (L[key] - first[key])
    if ($5 != next_lo[key] || $6 != (edge < L[key] ? edge : L[key]) || $7 != windows * ($6 - $5) || !($8 > 0 && $8 < 1000))
        bad = bad " " key "@" $5
    next_lo[key] = $6; sum[key] += $7; rows++
}
END {
    for (key in total) {
        want = 0; lo = 0; hi = 1  # the buckets [lo, hi) that meet [first, L)
        while (lo < L[key]) { if (hi > first[key]) want++; lo = hi; hi *= 2 }
        if (next_lo[key] != L[key] || sum[key] != total[key]) bad = bad " " key "(tokens " sum[key] " of " total[key] ")"
        expected += want
    }
    if (rows != expected) bad = bad " (" rows " rows, expected " expected ")"
    if (bad != "") { print "FAIL: positions.csv:" bad; exit 1 }
    print "ok: positions.csv: " rows " rows, buckets tile every evaluated row, tokens add up, losses finite"
}' "$OUT/extrapolation.csv" "$OUT/positions.csv"

# table and plot (python3 with matplotlib: Debian's python3-matplotlib)
PY=python3
$PY -c "import matplotlib" 2> /dev/null || PY=/usr/bin/python3
$PY dev/plot_extrapolation.py "$OUT/extrapolation.csv" "$OUT/extrapolation.png" "$OUT/extrapolation.md" \
    "$MODEL model, trained at T=$T for $STEPS steps ($((STEPS * B * T)) tokens); $K scored tokens per length; sliding stride $STRIDE"
$PY dev/plot_positions.py "$OUT/positions.csv" "$OUT/positions.png" \
    "$MODEL model, trained at T=$T for $STEPS steps; mean loss by position bucket, non-overlapping windows of each encoding's longest evaluated length"
echo "wrote $OUT/extrapolation.csv, $OUT/extrapolation.md, $OUT/extrapolation.png, $OUT/positions.csv, $OUT/positions.png"
[ "$PASSKEY" -gt 0 ] || exit 0

# passkey retrieval: every encoding's grid (5 lengths x the depths), accuracies in [0, 1] and
# finite log-probabilities, n/a only for learned beyond its positions and lengths shorter
# than the prompt (every prompt fits in 128 tokens)
{ head -1 "$OUT/${PES[0]}/passkey.csv"; for pe in "${PES[@]}"; do tail -n +2 "$OUT/$pe/passkey.csv"; done; } > "$OUT/passkey.csv"
awk -F, -v T=$T -v n=$(( ${#PES[@]} * 5 * DEPTHS )) 'NR > 1 {
    rows++
    if ($7 == "n/a") { if (!($1 == "learned" && $3 > T) && $3 >= 128) bad = bad " " $1 "@" $3 "(n/a)"; next }
    if ($7 < 0 || $7 > 1 || $8 + 0 != $8 || $8 > 0 || $5 < 1) bad = bad " " $1 "@" $3 "/" $4
} END { if (rows != n) bad = bad " (" rows " rows, expected " n ")"; if (bad != "") { print "FAIL: passkey.csv:" bad; exit 1 }
        print "ok: passkey.csv: " rows " cells" }' "$OUT/passkey.csv"
$PY dev/plot_passkey.py "$OUT/passkey.csv" "$OUT/passkey.png" \
    "$MODEL model, trained at T=$T for $STEPS steps; passkey retrieval, $PASSKEY keys per cell (greedy accuracy, mean log P(key))" "$OUT/passkey.md"
echo "wrote $OUT/passkey.csv, $OUT/passkey.md, $OUT/passkey.png"
