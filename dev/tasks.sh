#!/usr/bin/env bash
# Length generalization on algorithmic tasks (docs/tasks.md): every encoding of the
# Makefile's PE_LIST, each one that takes randomized positions also with them (-rp), and
# DAPE_1x3-Kerple, trained on each task's examples of lengths 1..N (the loss on the answers
# only), then scored at lengths up to 8N: exact match (greedy) and token accuracy, several
# seeds. Writes OUTDIR/tasks.csv (every run's rows with its seed), tasks.md (the tables),
# tasks.png (accuracy against length, one panel per task).
#
#   dev/tasks.sh [--quick] [OUTDIR]        (default OUTDIR: out/tasks, --quick: out/tasks_quick)
#   ONLY="rope rope_rp512" TASKS="copy sum" SEEDS="1 2" dev/tasks.sh OUTDIR   a part of it
#
# Entries: <pe>, <pe>_rp<L> (randomized positions from [0, L)), kerple_dape1x3. Each run is
# OUTDIR/runs/<task>/<entry>_s<seed>, trained single-threaded (OMP_NUM_THREADS=1, the
# machines this runs on are shared). Resumable and safe to interrupt: a run with its
# tasks.csv is done and skipped; any other resumes from its last checkpoint (-y 1; one every
# CKPT steps), or is evaluated alone if its training had ended. A finished run keeps its
# log, tasks.csv and final model. --quick: 3 entries, 2 tasks, 1 seed, 150 steps (minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
if [ $QUICK -eq 1 ]; then OUT=${1:-out/tasks_quick}; else OUT=${1:-out/tasks}; fi
N=${N:-10}            # training lengths 1..N; test lengths N/2 .. 8N
RP=${RP:-512}         # randomized positions' range: 3x the longest test row (163 tokens)
B=${B:-32}; LR=${LR:-3e-3}; WARMUP=${WARMUP:-50}; CKPT=${CKPT:-250}
if [ $QUICK -eq 1 ]; then
    ENTRIES=(learned rope_rp$RP nope)
    TASKS=${TASKS:-"copy sum"}; SEEDS=${SEEDS:-1}; STEPS=${STEPS:-150}; TRAIN=4800; TEST=32
else
    TASKS=${TASKS:-"sum copy reverse cycle even"}; SEEDS=${SEEDS:-"1 2 3"}; STEPS=${STEPS:-800}; TRAIN=32768; TEST=128
fi
make -s tasks $(for pe in $(make -s pe-list); do echo build/train_gpt2_$pe; done) build/train_gpt2_kerple_dape1x3
if [ $QUICK -eq 0 ]; then
    ENTRIES=()
    for pe in $(make -s pe-list); do
        ENTRIES+=("$pe")
        # the binary says whether the encoding takes randomized positions (it refuses -rp otherwise)
        if build/train_gpt2_$pe -rp 8 -h > /dev/null 2>&1; then ENTRIES+=("${pe}_rp$RP"); fi
    done
    ENTRIES+=(kerple_dape1x3)
fi
if [ -n "${ONLY:-}" ]; then read -r -a ENTRIES <<< "$ONLY"; fi
binary() { echo "build/train_gpt2_${1%_rp*}"; }
rp_flags() { case $1 in *_rp*) echo "-rp ${1##*_rp}" ;; esac; }
export OMP_NUM_THREADS=1

DATA=$OUT/data
mkdir -p "$OUT"
if [ ! -e "$DATA/.complete" ]; then # the same bytes every time (seed 1)
    ./tasks write -n $N -e $TRAIN -v 256 -x $TEST $DATA $TASKS
    touch "$DATA/.complete"
fi
start=$(date +%s)
runs=0
for seed in $SEEDS; do # seed by seed: an interrupted study has every task and entry of the first seeds
    for task in $TASKS; do
        for entry in "${ENTRIES[@]}"; do
            run=$OUT/runs/$task/${entry}_s$seed
            [ -e "$run/tasks.csv" ] && continue
            mkdir -p "$OUT/runs/$task"
            t0=$(date +%s)
            flags=(-i "$DATA/$task/train.bin" -j "$DATA/$task/val.bin" -A "$DATA/$task/test_*.bin" -o "$run")
            if [ -e "$run/DONE_$(printf %08d $STEPS)" ]; then # trained, not evaluated: evaluate its last checkpoint
                $(binary $entry) "${flags[@]}" -x 0 -y 1 >> "$run.log"
            else
                $(binary $entry) -e task -b $B -x $STEPS -l $LR -u $WARMUP -q 0.1 -v 0 -m 8 -n $CKPT -R $seed \
                    $(rp_flags $entry) "${flags[@]}" -y 1 >> "$run.log"
            fi
            rm -f "$run"/state_* "$run"/DONE_*
            find "$run" -name 'model_*.bin' ! -name "model_$(printf %08d $STEPS).bin" -delete
            runs=$((runs + 1))
            echo "$task $entry seed $seed: $(grep '^val loss' "$run.log" | tail -1), $(( $(date +%s) - t0 ))s"
        done
    done
done
echo "$runs runs in $(( $(date +%s) - start ))s"

# one CSV: every run's rows of its last evaluation, with the seed
{
    echo "seed,$(head -1 "$(ls $OUT/runs/*/*/tasks.csv | head -1)")"
    for task in $TASKS; do
        for entry in "${ENTRIES[@]}"; do
            for seed in $SEEDS; do
                f=$OUT/runs/$task/${entry}_s$seed/tasks.csv
                [ -e "$f" ] || { echo "missing: $f" >&2; exit 1; }
                awk -F, -v s=$seed 'NR > 1 { if ($3 > last) { last = $3; n = 0 } if ($3 == last) row[n++] = $0 }
                    END { for (i = 0; i < n; i++) print s "," row[i] }' "$f"
            done
        done
    done
} > "$OUT/tasks.csv"
PY=python3
$PY -c "import matplotlib" 2> /dev/null || PY=/usr/bin/python3
$PY dev/plot_tasks.py "$OUT/tasks.csv" "$OUT/tasks.png" "$OUT/tasks.md" $N \
    "task model (2 layers, 2 heads of 32), trained on lengths 1..$N for $STEPS steps of $B examples; mean of seeds $SEEDS"
echo "wrote $OUT/tasks.csv, $OUT/tasks.md, $OUT/tasks.png"
