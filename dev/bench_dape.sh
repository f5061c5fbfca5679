#!/usr/bin/env bash
# CPU cost of DAPE: kerple, DAPE-kerple (DAPE=mlp) and DAPE_1x3-kerple at T=256, and the
# peak memory of an evaluation at 16384 tokens; STEMS="nope cope" compares other builds
# (the first is the base, the memory is measured for the first and the last). Two measures
# of a training step, the runs alternating (kerple, mlp, 1x3, kerple, ...) so that whatever
# else the machine does weighs on all alike:
#   wall  the median step time of a run (2 OpenMP threads, steps after the first); on a
#         machine shared with other work this swings by tens of percent from run to run
#   cpu   the CPU time of one step on one thread: (user + sys of a 5-step run - that of a
#         1-step run) / 4, which another process's load hardly changes
#
#   dev/bench_dape.sh            (MODEL=cpu T=256 B=4 ROUNDS=2 STEPS=8; MEMORY=0 skips the evaluation)
#   STEMS="nope cope" dev/bench_dape.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-cpu}
T=${T:-256}
B=${B:-4}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-8}
MEMORY=${MEMORY:-1}
read -r -a STEMS <<< "${STEMS:-kerple kerple_dapemlp kerple_dape1x3}"
BASE=${STEMS[0]}
W=$(mktemp -d /tmp/bench_dape.XXXXXX)
trap 'rm -rf "$W"' EXIT
make -s starter $(for s in "${STEMS[@]}"; do echo build/train_gpt2_$s; done)

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
args() { printf '%s ' -e $MODEL -t $T -b $B -x $1 -v 0 -m 1 -s 0 -E none -u 1; } # args STEPS
cpu_seconds() { # cpu_seconds STEM STEPS -> user + sys of a one-thread run
    OMP_NUM_THREADS=1 /usr/bin/time -f "%U %S" -o "$W/time" build/train_gpt2_$1 $(args $2) > /dev/null
    awk '{ print $1 + $2 }' "$W/time"
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 $ROUNDS); do
    for s in "${STEMS[@]}"; do
        build/train_gpt2_$s $(args $STEPS) 2>&1 | grep "^step" | tail -n +2 | sed -E 's/.*\| ([0-9.]+) ms.*/\1/' | median > "$W/wall.$s.$r"
        c1=$(cpu_seconds $s 1); c5=$(cpu_seconds $s 5)
        awk -v a="$c1" -v b="$c5" 'BEGIN { print (b - a) / 4 * 1000 }' > "$W/cpu.$s.$r"
        echo "round $r: $s wall $(cat "$W/wall.$s.$r") ms, cpu $(cat "$W/cpu.$s.$r") ms"
    done
done
for m in wall cpu; do
    base=$(cat "$W"/$m.$BASE.* | median)
    for s in "${STEMS[@]}"; do
        v=$(cat "$W"/$m.$s.* | median)
        awk -v s=$s -v v="$v" -v b="$base" -v m=$m -v model=$MODEL -v T=$T -v B=$B \
            -v base=$BASE 'BEGIN { printf "%s, B=%d, T=%d, %-4s: %-15s %7.0f ms/step, %+.1f%% against %s\n", model, B, T, m, s, v, 100 * (v / b - 1), base }'
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

[ "$MEMORY" = 1 ] || exit 0
# evaluation at 1024, 4096 and 16384 tokens (16384 scored tokens each, non-overlapping
# windows) from a one-step checkpoint; peak resident memory from /usr/bin/time -v
for s in $BASE ${STEMS[-1]}; do
    build/train_gpt2_$s -e $MODEL -t 128 -b 8 -x 1 -v 0 -s 0 -E none -o "$W/mem_$s" > /dev/null
    /usr/bin/time -v build/train_gpt2_$s -e "$W/mem_$s/model_00000001.bin" -x 0 -E 1024,4096,16384 -K 16384 -W -1 \
        > "$W/eval_$s.log" 2> "$W/time_$s.log"
    echo "$s: evaluation (peak mem MiB per length as the trainer reports it):"
    grep -E "^\| +[0-9]+ \| nonoverlap" "$W/eval_$s.log"
    echo "$s: $(grep -E 'Maximum resident' "$W/time_$s.log" | xargs), $(grep -E 'Elapsed' "$W/time_$s.log" | xargs)"
done
