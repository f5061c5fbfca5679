#!/usr/bin/env bash
# The checks of the CUDA path that need a GPU, for a session on one H100/H200:
#
#   dev/gpu_checks.sh OUTDIR [STAGE...]     STAGE: test dev bench (default: all three)
#
#   test   builds every encoding's CPU test and CUDA test (bf16 and fp32), writes the CPU
#          reference of each encoding (./test_gpt2 debug-state) and runs test_gpt2cu on it
#          (GPU vs CPU, the attention kernels alone at T = 4096, evaluation memory at 16k)
#   dev    dev/cuda/mma_check (the GPU's tensor-core instructions against the fragment
#          layouts the CPU emulation implements), then dev/cuda/attention_bias for every
#          encoding at GPT-Small's attention shape (B = 8, T = 1024, 12 heads of 64): each
#          version checked against the CPU reference and timed (ms, TFLOP/s, forward and
#          backward; version 3 is the tensor-core kernel of the bf16 trainer), beside PyTorch's
#          SDPA flash backend at the same shape in the same run (dev/cuda/sdpa_bench.py,
#          if torch is installed)
#   bench  GPT-Small (-e small: 12L 12H 768) at T = 1024, B = 8: tokens/s, MFU and peak
#          GPU memory of learned, alibi and cable (30 steps each), and the evaluation
#          memory of cable at 1k, 4k and 16k tokens; with LLMC_DIR=<a checkout of llm.c>,
#          llm.c's train_gpt2cu (d12, same B and T, same data) for comparison
#
# Each stage builds what it needs (make is incremental), so stages can also run as
# separate commands. Logs go to OUTDIR/<stage>/, a summary to OUTDIR/summary.md.
# Data: data/starter if it is there (carry it along), otherwise random token shards.
# Budget (estimated, not yet measured with the tensor-core kernels) on one H100 with 16
# cores: `test` about 5 minutes, `dev` 5 to 8 (36 CPU references at B = 8, T = 1024, 12
# heads), `bench` about 4; run them as separate commands if a command is limited to 10
# minutes.
set -euo pipefail

if [ $# -lt 1 ]; then echo "usage: $0 OUTDIR [test] [dev] [bench]" >&2; exit 1; fi
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
shift
STAGES="${*:-test dev bench}"
cd "$(dirname "$0")/.."
JOBS=$(nproc)
PES=$(sed -n 's/^PE_LIST := //p' Makefile) # every encoding the Makefile knows
# the test stage also runs the DAPE combinations that make test-dape builds (their own kernels)
TEST_PES="$PES $(sed -n 's/^DAPE_CUDA_TESTS := //p' Makefile)"
SUMMARY="$OUT/summary.md"
export PATH="$PATH:/usr/local/cuda/bin"

stage() { echo; echo "=================================================================="; echo "== $*"; echo "=================================================================="; }
note() { echo "$*" | tee -a "$SUMMARY"; }
# the main Makefile includes cuda.mk once the fragment is hooked in; until then, both
MK="-f Makefile"
grep -q "cuda.mk" Makefile || MK="-f Makefile -f cuda.mk"

stage "GPU and toolchain"
{ echo "# GPU checks of the CUDA path ($(date -u +%Y-%m-%dT%H:%MZ))"; echo; } >> "$SUMMARY"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$SUMMARY" || note "nvidia-smi not available"
nvcc --version | tail -n 2
note "stages: $STAGES; $JOBS cores"

# ----------------------------------------------------------------------------
if [[ " $STAGES " == *" test "* ]]; then
    stage "test: build CPU tests and CUDA tests (bf16, fp32)"
    mkdir -p "$OUT/test"
    targets=""
    for pe in $TEST_PES; do targets="$targets build/test_gpt2_$pe build/test_gpt2cu_$pe build/test_gpt2cu_${pe}_fp32"; done
    t0=$(date +%s)
    make $MK -j"$JOBS" $targets > "$OUT/test/build.log" 2>&1 || { tail -n 30 "$OUT/test/build.log"; exit 1; }
    echo "built in $(( $(date +%s) - t0 )) s"

    stage "test: CPU references (./test_gpt2 debug-state), in parallel"
    pids=""
    for pe in $TEST_PES; do
        OMP_NUM_THREADS=2 build/test_gpt2_$pe debug-state "build/ref_$pe" > "$OUT/test/ref_$pe.log" 2>&1 &
        pids="$pids $!"
    done
    for pid in $pids; do wait "$pid" || { echo "a CPU reference failed (logs: $OUT/test/ref_*.log)"; exit 1; }; done
    for pe in $TEST_PES; do tail -n 1 "$OUT/test/ref_$pe.log"; done

    stage "test: GPU vs CPU, attention alone, evaluation memory"
    { echo; echo "## test_gpt2cu (GPU vs CPU reference, attention kernels at T=4096, memory at 16k)"; echo;
      echo "| encoding | bf16 | fp32 |"; echo "|---|---|---|"; } >> "$SUMMARY"
    fails=0
    for pe in $TEST_PES; do
        row="| $pe"
        for suffix in "" _fp32; do
            log="$OUT/test/test_gpt2cu_${pe}${suffix}.log"
            echo "--- test_gpt2cu_${pe}${suffix}"
            if build/test_gpt2cu_${pe}${suffix} "build/ref_$pe" > "$log" 2>&1; then
                row="$row | ok"
            else
                row="$row | FAIL ($(grep -c FAIL "$log" || true) checks)"; fails=$((fails + 1))
                grep -E "FAIL|error" "$log" | head -n 20
            fi
            tail -n 1 "$log"
        done
        echo "$row |" >> "$SUMMARY"
    done
    note ""
    note "test failures: $fails (logs: test/test_gpt2cu_<pe>[_fp32].log)"
fi

# ----------------------------------------------------------------------------
if [[ " $STAGES " == *" dev "* ]]; then
    stage "dev: tensor-core instructions; dev/cuda/attention_bias, every version, every encoding; PyTorch SDPA"
    mkdir -p "$OUT/dev"
    targets="mma_check"
    # CoPE's attention is its own kernels: dev/cuda/attention_cope, versions 1 and 2 (ms only)
    dev_binary() { if [ "$1" = cope ]; then echo attention_cope; else echo "attention_bias_$1"; fi; }
    for pe in $PES; do targets="$targets $(dev_binary "$pe")"; done
    make -C dev/cuda -j"$JOBS" $targets > "$OUT/dev/build.log" 2>&1 || { tail -n 30 "$OUT/dev/build.log"; exit 1; }
    note ""
    if dev/cuda/mma_check > "$OUT/dev/mma_check.log" 2>&1; then note "mma_check (GPU instructions = emulated layouts): ok"
    else note "mma_check: FAILED (the emulation's layouts differ from this GPU: $OUT/dev/mma_check.log)"; cat "$OUT/dev/mma_check.log"; fi
    SHAPE="1024 8 12 64" # T B NH HS: one layer of GPT-Small at B = 8
    { echo; echo "## attention alone (T B NH HS = $SHAPE, bf16): ms and TFLOP/s (forward 4, backward 10 x pairs x hs)"; echo;
      echo "| encoding | version | check | forward ms | forward TFLOP/s | backward ms | backward TFLOP/s |";
      echo "|---|---|---|---|---|---|---|"; } >> "$SUMMARY"
    python3 dev/cuda/sdpa_bench.py $SHAPE > "$OUT/dev/sdpa.log" 2>&1 || true
    f=$(awk '/sdpa-flash forward/ {print $3" | "$5}' "$OUT/dev/sdpa.log")
    b=$(awk '/sdpa-flash backward/ {print $3" | "$5}' "$OUT/dev/sdpa.log")
    echo "| (PyTorch SDPA flash, causal, no bias) | - | - | ${f:-- | -} | ${b:-- | -} |" | tee -a "$SUMMARY"
    [ -n "$f" ] || note "SDPA: $(head -n 1 "$OUT/dev/sdpa.log")"
    for pe in $PES; do
        versions="1 2 3"
        if [ "$pe" = cope ]; then versions="1 2"; fi
        for v in $versions; do
            log="$OUT/dev/attention_bias_${pe}_v$v.log"
            status=ok
            "dev/cuda/$(dev_binary "$pe")" $v $SHAPE > "$log" 2>&1 || status=FAIL
            f=$(awk '/^  forward/ {print $2" | "$4}' "$log")
            b=$(awk '/^  backward/ {print $2" | "$4}' "$log")
            echo "| $pe | $v | $status | ${f:-- | -} | ${b:-- | -} |" | tee -a "$SUMMARY"
        done
    done
fi

# ----------------------------------------------------------------------------
if [[ " $STAGES " == *" bench "* ]]; then
    stage "bench: GPT-Small at T=1024 (learned, alibi, cable), cable evaluation memory"
    mkdir -p "$OUT/bench"
    make $MK -j"$JOBS" build/train_gpt2cu_learned build/train_gpt2cu_alibi build/train_gpt2cu_cable > "$OUT/bench/build.log" 2>&1 \
        || { tail -n 30 "$OUT/bench/build.log"; exit 1; }
    if [ -f data/starter/starter_train_000000.bin ] && [ -f data/starter/starter_val_000000.bin ]; then
        TRAIN="data/starter/starter_train_*.bin"; VAL="data/starter/starter_val_*.bin"; DATA="starter"
    else # random GPT-2 tokens: two shards written by a small C program
        DATA="random tokens"
        mkdir -p "$OUT/bench/data"
        cat > "$OUT/bench/data/shard.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
int main(int argc, char** argv) {
    int n = atoi(argv[2]);
    int header[256] = {20240520, 1, n};
    FILE* f = fopen(argv[1], "wb");
    fwrite(header, sizeof(int), 256, f);
    uint64_t s = (uint64_t)atoi(argv[3]) * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint16_t t = (uint16_t)(s % 50257);
        fwrite(&t, 2, 1, f);
    }
    return fclose(f) != 0;
}
EOF
        gcc -O2 -o "$OUT/bench/data/shard" "$OUT/bench/data/shard.c"
        "$OUT/bench/data/shard" "$OUT/bench/data/rand_train_000000.bin" 2000000 1
        "$OUT/bench/data/shard" "$OUT/bench/data/rand_val_000000.bin" 200000 2
        TRAIN="$OUT/bench/data/rand_train_*.bin"; VAL="$OUT/bench/data/rand_val_*.bin"
    fi
    note ""
    note "## GPT-Small (12L 12H 768), B=8 T=1024, 30 steps, bf16 ($DATA)"
    { echo; echo "| encoding | ms/step | tokens/s | MFU (mean of steps 2..30) | peak MiB (model) | peak MiB (nvidia-smi) |";
      echo "|---|---|---|---|---|---|"; } >> "$SUMMARY"
    for pe in learned alibi cable; do
        log="$OUT/bench/train_$pe.log"
        echo "--- $pe"
        smi="$OUT/bench/smi_$pe.csv"
        (nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$smi" 2>/dev/null &
         echo $! > "$OUT/bench/smi.pid")
        build/train_gpt2cu_$pe -e small -b 8 -t 1024 -x 30 -u 5 -v 0 -m 2 -s 0 -E 1024 -K 8192 -W -1 \
            -i "$TRAIN" -j "$VAL" > "$log" 2>&1 || { tail -n 20 "$log"; kill "$(cat "$OUT/bench/smi.pid")" 2>/dev/null || true; exit 1; }
        kill "$(cat "$OUT/bench/smi.pid")" 2>/dev/null || true
        grep -E "^step +(1|2|30)/" "$log" || true
        ms=$(awk '/total average iteration time/ {print $5}' "$log")
        tps=$(awk '/total average iteration time/ {gsub(/\(/, "", $7); print $7}' "$log")
        mfu=$(awk '/^step/ && !/^step +1\// { for (i = 1; i <= NF; i++) if ($i ~ /%$/ && $(i+2) == "MFU") { s += $i; n++ } } END { if (n) printf "%.1f%%", s / n; else print "-" }' "$log")
        peak=$(awk -F'|' '/\| +1024 \| nonoverlap/ {gsub(/ /, "", $7); print $7}' "$log")
        smipeak=$(sort -n "$smi" 2>/dev/null | tail -n 1)
        echo "| $pe | $ms | $tps | $mfu | ${peak:--} | ${smipeak:--} |" | tee -a "$SUMMARY"
    done

    if [ -n "${LLMC_DIR:-}" ]; then # llm.c's own trainer on the same data, for the tokens/s comparison
        log="$OUT/bench/train_llmc.log"
        echo "--- llm.c ($LLMC_DIR)"
        if make -C "$LLMC_DIR" train_gpt2cu > "$OUT/bench/build_llmc.log" 2>&1 \
           && "$LLMC_DIR/train_gpt2cu" -e d12 -b 8 -t 1024 -x 30 -v 0 -s 0 -i "$TRAIN" -j "$VAL" > "$log" 2>&1; then
            tps=$(awk '/^step/ && !/^step +1\// { for (i = 1; i <= NF; i++) if ($i ~ /tok\/s/) { v = $(i-1); gsub(/[^0-9.]/, "", v); s += v; n++ } } END { if (n) printf "%.0f", s / n; else print "-" }' "$log")
            echo "| llm.c (d12, its own attention) | - | ${tps:--} | - | - | - |" | tee -a "$SUMMARY"
        else
            note "llm.c: did not build or run (logs: bench/build_llmc.log, bench/train_llmc.log)"
        fi
    fi

    note ""
    note "## cable: evaluation memory (-x 0, one process per length, GPT-Small, B*T = 8192 tokens per batch)"
    { echo; echo "| eval length | loss | peak MiB (model) | peak MiB (nvidia-smi) |"; echo "|---|---|---|---|"; } >> "$SUMMARY"
    for L in 1024 4096 16384; do
        log="$OUT/bench/eval_cable_$L.log"
        smi="$OUT/bench/smi_eval_$L.csv"
        (nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$smi" 2>/dev/null &
         echo $! > "$OUT/bench/smi.pid")
        build/train_gpt2cu_cable -e small -b 8 -t 1024 -x 0 -E $L -K 16384 -W -1 -i "$TRAIN" -j "$VAL" > "$log" 2>&1 \
            || { tail -n 20 "$log"; kill "$(cat "$OUT/bench/smi.pid")" 2>/dev/null || true; exit 1; }
        kill "$(cat "$OUT/bench/smi.pid")" 2>/dev/null || true
        row=$(awk -F'|' -v L=$L '$2 + 0 == L && /nonoverlap/ {gsub(/ /, "", $5); gsub(/ /, "", $7); print $5" | "$7}' "$log")
        smipeak=$(sort -n "$smi" 2>/dev/null | tail -n 1)
        echo "| $L | ${row:-- | -} | ${smipeak:--} |" | tee -a "$SUMMARY"
    done
fi

stage "summary ($SUMMARY)"
cat "$SUMMARY"
