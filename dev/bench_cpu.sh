#!/usr/bin/env bash
# CPU speed: this trainer against llm.c's own train_gpt2.c on GPT-2 124M (B=4, T=64), and
# PE=cable against PE=learned at T=256. Runs alternate (A, B, A, B, ...) so that whatever
# else the machine does weighs on both alike; each figure is the median step time over the
# steps after the first.
#
#   dev/bench_cpu.sh [LLMC_DIR]
#
# LLMC_DIR: a directory with llm.c's train_gpt2.c and its llmc/ headers (not part of this
# repository; put it in a folder git ignores). Without it, only the second comparison runs.
set -euo pipefail
cd "$(dirname "$0")/.."
LLMC=${1:-}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-6}
W=$(mktemp -d /tmp/bench_cpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
make -s starter build/train_gpt2_learned build/train_gpt2_cable

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ours() { # ours PE MODEL T -> median ms per step (the first step, with its allocations, left out)
    build/train_gpt2_$1 -e "$2" -t $3 -b 4 -x $STEPS -v 0 -m 1 -s 0 -E none -u 1 2>&1 \
        | grep "^step" | tail -n +2 | sed -E 's/.*\| ([0-9.]+) ms.*/\1/' | median
}

# a GPT-2 124M checkpoint (one step from the d12 init; llm.c reads it as its gpt2_124M.bin)
build/train_gpt2_learned -e d12 -t 64 -b 4 -x 1 -v 0 -m 1 -s 0 -E none -o "$W/init" > /dev/null
cp "$W/init/model_00000001.bin" "$W/d12.bin"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"

if [ -n "$LLMC" ]; then
    gcc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -o "$W/llmc_train_gpt2" "$LLMC/train_gpt2.c" -lm
    mkdir -p "$W/llmc/dev/data/tinyshakespeare"
    ln -s "$W/d12.bin" "$W/llmc/gpt2_124M.bin"
    ln -s "$(realpath data/starter/starter_train_000000.bin)" "$W/llmc/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
    ln -s "$(realpath data/starter/starter_val_000000.bin)" "$W/llmc/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
    for r in $(seq 1 $ROUNDS); do
        # llm.c's main runs 40 steps with samples; its first STEPS steps are enough
        (cd "$W/llmc" && stdbuf -oL "$W/llmc_train_gpt2" 2>&1 | grep -m $STEPS "^step" || true) \
            | tail -n +2 | sed -E 's/.*took ([0-9.]+) ms.*/\1/' | median > "$W/llmc_ms_$r"
        ours learned "$W/d12.bin" 64 > "$W/ours_$r"
        echo "round $r: llm.c $(cat "$W/llmc_ms_$r") ms/step, ours (learned) $(cat "$W/ours_$r") ms/step"
    done
    l=$(cat "$W"/llmc_ms_* | median); o=$(cat "$W"/ours_* | median)
    awk -v l="$l" -v o="$o" 'BEGIN { printf "GPT-2 124M, B=4, T=64: llm.c %.0f ms/step (%.0f tok/s), ours %.0f ms/step (%.0f tok/s): %.2fx\n", l, 256000 / l, o, 256000 / o, l / o }'
fi

for r in $(seq 1 $ROUNDS); do
    ours learned d12 256 > "$W/learned256_$r"
    ours cable d12 256 > "$W/cable256_$r"
    echo "round $r: T=256 learned $(cat "$W/learned256_$r") ms/step, cable $(cat "$W/cable256_$r") ms/step"
done
l=$(cat "$W"/learned256_* | median); c=$(cat "$W"/cable256_* | median)
awk -v l="$l" -v c="$c" 'BEGIN { printf "GPT-2 124M, B=4, T=256: learned %.0f ms/step, cable %.0f ms/step: cable/learned = %.3f\n", l, c, c / l }'
