#!/usr/bin/env bash
# The checks of the CUDA path that need a GPU, from the GPU kit (make gpu-kit), in the two
# commands of a 15-minute lease of one H100 or H200 (docs/gpu-lease.md):
#
#   dev/gpu_checks.sh 1 [OUTDIR]   command 1 (timeout 420 s): mma_check; the CPU references;
#                                  every stem GPU vs CPU in bf16 and fp32; compute-sanitizer
#                                  on the attention of six encodings and on DAPE's kernels;
#                                  evaluation memory at 16k; GPT-Small at T = 1024 beside
#                                  llm.c; the evaluation at 16k; the HF export in transformers
#   dev/gpu_checks.sh 2 [OUTDIR]   command 2 (timeout 270 s): the attention alone at B = 8,
#                                  T = 1024, 12 heads of 64, timed only, beside PyTorch SDPA
#                                  (flash) and FlexAttention with the same biases; then what
#                                  command 1 left
#   dev/gpu_checks.sh plan         the lease's arithmetic and the two commands (exit 1 if the
#                                  timeouts do not fit the lease)
#
# Each command stops by its deadline (its timeout less MARGIN_S) and writes its summary as the
# runs end: OUTDIR (default $OUT, else out/gpu-lease/outN) gets summaryN.md, logsN.tar.gz
# (every log, packed after each stage) and leftN.txt (the units the deadline left out), at most
# 8 files. Every run has its own timeout; a crash or a hang is a FAIL in the summary and the
# script goes on; a program that finds no GPU is SKIPPED, never ok. The work (the unpacked kit,
# the CPU references, logs) stays in out/gpu-lease, so that command 2, on the same machine, finds
# it; on a fresh machine it writes the references it needs again. Command 2 retries the units
# of left1.txt from out/gpu-lease (the same machine) or from the kit's folder (copied there).
#
# Environment: GPU_KIT (the kit's folder, default out/gpukit), GPU_CHECKS_WORK (default
# out/gpu-lease), GPU_CHECKS_CAP (the longest one run may take, default 600 s), DEADLINE
# (seconds, instead of the command's own), GPU_CHECKS_SHAPE (command 2's attention shape).
set -uo pipefail # no -e: a failed run is a row of the summary, not the end of the script

# the lease (device time in all, a machine's start included) and the commands' timeouts
LEASE_S=900
START_S=120
TIMEOUT_1=420
TIMEOUT_2=270
MARGIN_S=25 # from a command's deadline to its timeout: the last pack and the files' return

cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
KIT_DIR=${GPU_KIT:-out/gpukit}
WORK=${GPU_CHECKS_WORK:-out/gpu-lease}
CAP=${GPU_CHECKS_CAP:-600}
SHAPE=${GPU_CHECKS_SHAPE:-1024 8 12 64} # T B NH HS: the attention of one GPT-Small layer at B = 8
# compute-sanitizer: a tool on the attention check of an encoding, each tool on at least one
SANITIZE="memcheck:alibi racecheck:t5 synccheck:cable racecheck:fire memcheck:kerple_power racecheck:cope"
SANITIZE_DAPE=kerple_dape1x3 # DAPE's kernels: its test_gpt2cu reference under memcheck and racecheck
FLEX="flash alibi kerple t5 cable nobias"     # dev/cuda/sdpa_bench.py's cases
BENCH_STEPS=20 # GPT-Small steps per run; the mean of steps 3.. is timed

plan() {
    local d1=$((TIMEOUT_1 - MARGIN_S)) d2=$((TIMEOUT_2 - MARGIN_S)) total=$((START_S + TIMEOUT_1 + TIMEOUT_2))
    echo "lease: ${LEASE_S} s of device time; a machine's start at most ${START_S} s"
    echo "command 1: timeout_s ${TIMEOUT_1}, stops itself at ${d1} s: bash dev/gpu_checks.sh 1 \"\$OUT\""
    echo "command 2: timeout_s ${TIMEOUT_2}, stops itself at ${d2} s: bash dev/gpu_checks.sh 2 \"\$OUT\""
    echo "carry: $KIT_DIR data/starter"
    echo "start + command 1 + command 2: ${START_S} + ${TIMEOUT_1} + ${TIMEOUT_2} = ${total} s of ${LEASE_S}"
    [ $d1 -gt 0 ] && [ $d2 -gt 0 ] && [ $total -le $LEASE_S ] || { echo "the timeouts do not fit the lease" >&2; return 1; }
}

if [ $# -lt 1 ] || { [ "$1" != 1 ] && [ "$1" != 2 ] && [ "$1" != plan ]; }; then
    echo "usage: $0 1|2 [OUTDIR] | plan" >&2
    exit 1
fi
if [ "$1" = plan ]; then plan; exit; fi
N=$1
OUTDIR=${2:-${OUT:-$WORK/out$N}}
mkdir -p "$OUTDIR" "$WORK" || exit 1
if [ $N = 1 ]; then timeout_s=$TIMEOUT_1; else timeout_s=$TIMEOUT_2; fi
DEADLINE=${DEADLINE:-$((timeout_s - MARGIN_S))}
SUMMARY=$OUTDIR/summary$N.md
LEFT=$OUTDIR/left$N.txt
LOGS=$WORK/logs$N
RESULTS=$LOGS/results.tsv
REF=$WORK/ref
rm -rf "$LOGS"
mkdir -p "$LOGS" "$REF"
: > "$SUMMARY"
: > "$LEFT"
T0=$(date +%s)

# ----------------------------------------------------------------------------
# the summary, the logs, the deadline

elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(date +%s) + T0 )); }
say() { echo "[$(elapsed) s] $*" | tee -a "$SUMMARY"; }
# a row of the current table; units that run in the background write theirs to ROWS, a file
# the summary gets when they end
row() { echo "$*" | tee -a "${ROWS:-$SUMMARY}"; }
table() { printf '\n%s\n' "$1" >> "$SUMMARY"; echo "$1" | sed 's/[^|]//g; s/|/|---/g; s/---$//' >> "$SUMMARY"; echo "$1"; }
pack() { cp "$SUMMARY" "$LOGS/" 2>/dev/null; tar -C "$WORK" -czf "$OUTDIR/logs$N.tar.gz.tmp" "logs$N" && mv "$OUTDIR/logs$N.tar.gz.tmp" "$OUTDIR/logs$N.tar.gz"; }
finish() {
    local pids
    pids=$(jobs -p)
    [ -z "$pids" ] || kill $pids 2>/dev/null
    awk '!seen[$0]++' "$LEFT" > "$LEFT.tmp" && mv "$LEFT.tmp" "$LEFT" # once each, in the order left
    [ $N = 2 ] || cp "$LEFT" "$WORK/left1.txt"
    local ok all
    ok=$(grep -c $'\tok$' "$RESULTS" 2>/dev/null)
    all=$(cat "$RESULTS" 2>/dev/null | wc -l)
    say "end: $ok ok, $(grep -c $'\tFAIL' "$RESULTS" 2>/dev/null) failed, $(grep -c $'\tSKIPPED' "$RESULTS" 2>/dev/null) skipped," \
        "$(grep -c $'\tnot run' "$RESULTS" 2>/dev/null) not run; $(wc -l < "$LEFT") units left ($(basename "$LEFT"))"
    pack
    [ "$all" -gt 0 ] && [ "$ok" = "$all" ] && exit 0 # every run ok: the only success
    exit 1
}
trap finish EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

# result NAME RESULT SECONDS: one line of results.tsv (every run, also those that did not run)
result() { printf '%s\t%s\t%s\n' "$1" "$3" "$2" >> "$RESULTS"; }
# leave: the current unit (UNIT) did not run to its end for lack of time; command 2 retries it
leave() { [ -z "${UNIT:-}" ] || echo "$UNIT" >> "$LEFT"; }

# run NAME CAP PASS CMD...: CMD with its output in $LOGS/NAME.log, within CAP seconds (and
# GPU_CHECKS_CAP, and the time left); the result (printed, and in results.tsv): ok (exit 0 and a
# line matching the extended regex PASS), SKIPPED (the program found no GPU), FAIL (exit status,
# signal, timeout, or no PASS line), not run (too little time left: the unit is left)
run() {
    local name=$1 cap=$2 pass=$3 t log=$LOGS/$1.log rc start took sig
    shift 3
    t=$(( $(left) - 3 ))
    [ $cap -lt $t ] && t=$cap
    [ $CAP -lt $t ] && t=$CAP
    if [ $t -lt 5 ]; then
        result "$name" "not run (deadline)" 0
        leave
        echo "not run (deadline)"
        return
    fi
    start=$(date +%s)
    timeout -k 5 $t "$@" < /dev/null > "$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    if [ "$(stat -c %s "$log")" -gt 4000000 ]; then # a flood of errors: its start and its end come back
        { head -c 2000000 "$log"; printf '\n[... cut ...]\n'; tail -c 2000000 "$log"; } > "$log.cut" && mv "$log.cut" "$log"
    fi
    local r detail
    # what a failure printed: compute-sanitizer's count, the number of failed checks, or its last line
    detail=", $(grep -m1 -oE 'SUMMARY: [1-9][0-9]* (errors|hazards)' "$log")"
    [ "$detail" != ", " ] || detail=", failed checks: $(grep -cw FAIL "$log")"
    [ "$detail" != ", failed checks: 0" ] || detail=": $(grep . "$log" | tail -n 1 | tr -d '|' | cut -c1-100)"
    if [ $rc = 124 ] || { [ $rc = 137 ] && [ $took -ge $t ]; }; then r="FAIL (timeout after $t s)"
    elif grep -qE "no CUDA device|no CUDA-capable device" "$log"; then r="SKIPPED (no CUDA device)"
    elif [ "${DEVICE:-0}" = 0 ] && grep -q "CUDA driver version is insufficient" "$log"; then r="SKIPPED (no CUDA device: no driver)" # llm.c's words
    elif grep -qE '^[a-z_]+: skipped \(' "$log"; then r="SKIPPED ($(grep -m1 -oE 'skipped \(.*' "$log" | cut -c10- | tr -d ')'))"
    elif [ $rc -gt 128 ]; then sig=$(kill -l $((rc - 128)) 2>/dev/null); r="FAIL (signal ${sig:-$((rc - 128))})"
    elif [ $rc != 0 ]; then r="FAIL (exit $rc$detail)"
    elif ! grep -qE -- "$pass" "$log"; then r="FAIL (exit 0 without its success line)"
    else r=ok; fi
    result "$name" "$r" $took
    echo "$r"
}

# pool: at most POOL of the functions given to `spawn` at once
POOL=6
pool_pids=()
spawn() {
    "$@" &
    pool_pids+=($!)
    local alive p
    while [ ${#pool_pids[@]} -ge $POOL ]; do
        wait -n "${pool_pids[@]}" 2> /dev/null || sleep 0.2 # (bash before 5.1: -n takes no ids)
        alive=()
        for p in "${pool_pids[@]}"; do kill -0 $p 2>/dev/null && alive+=($p); done
        pool_pids=(${alive[@]+"${alive[@]}"})
    done
}
pool_wait() { local p; for p in ${pool_pids[@]+"${pool_pids[@]}"}; do wait $p; done; pool_pids=(); }

# ----------------------------------------------------------------------------
# the kit: unpacked once per kit (kept for command 2), complete, its libraries found

manifest() { sed -n "s/^$1 //p" "$BIN/../manifest"; }
open_kit() {
    local tarball=$KIT_DIR/kit.tar.xz sum missing extra lib d
    if [ ! -f "$tarball" ]; then say "FAIL: no kit at $tarball (make gpu-kit, and carry $KIT_DIR)"; return 1; fi
    sum=$(sha256sum "$tarball" | cut -c1-16)
    if [ "$(cat "$WORK/kit/sum" 2>/dev/null)" != "$sum" ]; then
        rm -rf "$WORK/kit"
        mkdir -p "$WORK/kit"
        if ! { xz -dc "$tarball" | tar -C "$WORK/kit" -xf -; } 2>> "$LOGS/kit.log" &&
           ! python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$tarball" "$WORK/kit" 2>> "$LOGS/kit.log"; then
            say "FAIL: the kit does not unpack ($LOGS/kit.log)"
            return 1
        fi
        echo "$sum" > "$WORK/kit/sum"
        rm -rf "$REF" && mkdir -p "$REF" # another kit: its own references
    fi
    rm -f "$REF"/*.busy # a reference being written by a command that has ended
    BIN=$WORK/kit/bin
    missing=$(for b in $(manifest bin); do [ -x "$BIN/$b" ] || echo "$b"; done)
    extra=$(ls "$BIN" | grep -vxF -f <(manifest bin))
    if [ -n "$missing$extra" ]; then say "FAIL: the kit differs from its manifest: missing $(echo $missing), extra $(echo $extra)"; return 1; fi
    say "kit $(manifest revision) (tree $(git rev-parse --short HEAD 2>/dev/null || echo unknown)), llm.c $(manifest llmc): $(manifest bin | wc -l) binaries, complete;" \
        "they need glibc $(manifest glibc), here $(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')"
    # libraries: the toolkit's and torch's folders where the loader does not find them
    missing=$(ldd "$BIN"/* 2>&1 | sed -n 's/^\t*\(lib[^ ]*\) => not found/\1/p' | sort -u)
    for lib in $missing; do
        for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(ls -d /usr/local/cuda-*/lib64 2>/dev/null) \
                 $(python3 -c "import nvidia, os; [print(os.path.join(p, q, 'lib')) for p in nvidia.__path__ for q in sorted(os.listdir(p))]" 2>/dev/null); do
            if [ -e "$d/$lib" ]; then export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; break; fi
        done
    done
    missing=$(ldd "$BIN"/* 2>&1 | grep "not found" | sed 's/^[[:space:]]*//' | sort -u)
    if [ -n "$missing" ]; then # the last resort: the kit's binaries built here
        say "libraries not found: $(echo $missing); building the kit here (make gpu-kit-bins)"
        UNIT="" run kit_rebuild 300 "^staged " make -j"$(nproc)" gpu-kit-bins $([ -d "$WORK/kit/llmc" ] && echo LLMC_DIR="$WORK/kit/llmc") > /dev/null
        BIN=build/kit/stage/bin
        missing=$(ldd "$BIN"/* 2>&1 | grep "not found" | sed 's/^[[:space:]]*//' | sort -u)
        [ -z "$missing" ] || { say "FAIL: libraries not found after the rebuild: $(echo $missing)"; return 1; }
    fi
    say "libraries: all found${LD_LIBRARY_PATH:+ (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)}"
    STEMS=$(manifest stems)
    PES=$(manifest pes)
    STEM0=${STEMS%% *}
}

# the machine, once per command: DEVICE=1 with a usable GPU
machine() {
    {
        date -u; uname -a; nproc; free -g
        nvidia-smi; nvcc --version; command -v compute-sanitizer gcc make xz python3
        python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
        ldconfig -p | grep -E "cublas|gomp|nccl|mpi|openblas"
    } > "$LOGS/machine.txt" 2>&1
    local gpu
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    DEVICE=0
    timeout 60 "$BIN/test_gpt2cu_${STEM0}_fp32" device > /dev/null 2>&1 && DEVICE=1
    if [ $DEVICE = 1 ]; then say "GPU: ${gpu:-(nvidia-smi gave nothing)}; $(nproc) cores; deadline ${DEADLINE} s"
    else say "no CUDA device (test_gpt2cu_${STEM0}_fp32 device): every GPU run below is SKIPPED or FAILS; deadline ${DEADLINE} s"; fi
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
    TRAIN="data/starter/starter_train_*.bin"
    VAL="data/starter/starter_val_*.bin"
    ls $TRAIN $VAL > /dev/null 2>&1 || say "no data/starter shards (carry data/starter): the trainers FAIL"
}

# ----------------------------------------------------------------------------
# the units: each runs on its own (command 2 retries them by name) and writes its own rows

# the tensor-core instructions against the layouts the CPU emulation implements
u_mma() { row "| mma_check (mma.sync, ldmatrix, cp.async as emulated) | $(run mma_check 60 '^ok$' "$BIN/mma_check") |"; }

# the CPU reference of a stem (llmc/debug_state.h: 167 MB), on one core: $REF/STEM.busy while
# it is written, $REF/STEM.done once it is
u_ref() {
    local s=$1
    if [ -e "$REF/$s.done" ]; then return; fi
    if [ $DEVICE = 0 ]; then result "ref_$s" "not run (no CUDA device to compare with)" 0; return; fi
    touch "$REF/$s.busy"
    [ "$(OMP_NUM_THREADS=1 run "ref_$s" 300 '^wrote ' "$BIN/test_gpt2_$s" debug-state "$REF/$s")" = ok ] && touch "$REF/$s.done"
    rm -f "$REF/$s.busy"
}
# the reference of a stem for a unit that compares with it: waits for the one being written, or
# writes it; prints why there is none
need_ref() {
    local s=$1
    [ $DEVICE = 1 ] || return 0
    while [ -e "$REF/$s.busy" ] && [ $(left) -gt 10 ]; do sleep 1; done
    [ -e "$REF/$s.done" ] || grep -q "^ref_$s"$'\t' "$RESULTS" || u_ref "$s"
    [ -e "$REF/$s.done" ] || { echo "not run (reference: $(grep "^ref_$s"$'\t' "$RESULTS" | tail -n 1 | cut -f3))"; return 1; }
}

# GPU vs CPU of a stem: bf16 and fp32, against the reference (logits, loss, gradients, 10
# steps) and the attention kernels alone at T = 4096 and shapes that are no multiple of the tiles
u_test() {
    local s=$1 a16 a32 r16 r32 why
    # the attention first: it needs no reference, which may still be written
    a16=$(OMP_NUM_THREADS=2 run "attention_$s" 120 '^all GPU tests passed' "$BIN/test_gpt2cu_$s" attention)
    a32=$(OMP_NUM_THREADS=2 run "attention_${s}_fp32" 120 '^all GPU tests passed' "$BIN/test_gpt2cu_${s}_fp32" attention)
    if why=$(need_ref "$s"); then
        r16=$(run "test_$s" 120 '^all GPU tests passed' "$BIN/test_gpt2cu_$s" reference "$REF/$s")
        r32=$(run "test_${s}_fp32" 120 '^all GPU tests passed' "$BIN/test_gpt2cu_${s}_fp32" reference "$REF/$s")
    else
        r16=$why; r32=$why
        result "test_$s" "$why" 0
        result "test_${s}_fp32" "$why" 0
        [[ $why == *deadline* ]] && leave
    fi
    row "| $s | $r16 | $a16 | $r32 | $a32 |"
}

# compute-sanitizer TOOL on a program of the kit; no errors and the program's own success
u_sanitizer() {
    local tool=$1 prog=$2 r
    shift 2
    if [ -z "$CS" ]; then r="SKIPPED (compute-sanitizer not found)"; result "${tool}_$prog" "$r" 0
    else r=$(run "${tool}_$prog" 90 'SUMMARY: 0 (errors|hazards)' "$CS" --tool "$tool" --error-exitcode 9 "$BIN/$prog" "$@"); fi
    row "| $tool | $prog $* | $r |"
}
u_sanitize_attention() {
    if [ -x "$BIN/attention_$2" ]; then u_sanitizer "$1" "attention_$2" check
    else result "${1}_attention_$2" "SKIPPED (not in the kit)" 0; row "| $1 | attention_$2 check | SKIPPED (not in the kit) |"; fi
}
u_sanitize_dape() {
    local tool=$1 s=$2 why
    if [ ! -x "$BIN/test_gpt2cu_$s" ]; then why="SKIPPED (not in the kit)"
    elif why=$(need_ref "$s"); then u_sanitizer "$tool" "test_gpt2cu_$s" reference "$REF/$s"; return; fi
    result "${tool}_test_gpt2cu_$s" "$why" 0
    row "| $tool | test_gpt2cu_$s reference | $why |"
}

# evaluation memory at 16k tokens (test_gpt2cu memory, bf16): alone on the GPU, whose free
# memory it reads
u_memory() { row "| $1 | $(run "memory_$1" 60 '^all GPU tests passed' "$BIN/test_gpt2cu_$1" memory) |"; }

# GPT-Small at T = 1024, B sequences: ours (PE) or llm.c's trainer (llm.c) on the same shards,
# alone; milliseconds from the step lines (the mean of steps 3..), tokens/s from them, the
# trainers' MFU of those steps, the peak memory of the model (ours) and of the device
u_bench() {
    local name=$1 B=$2 r log smi sp cmd
    log=$LOGS/bench_${name}_b$B.log
    if [ "$name" = llm.c ] && [ "$(manifest llmc)" = none ]; then
        r="SKIPPED (llm.c not in the kit: make gpu-kit LLMC_DIR=...)"
        result "bench_llm.c_b$B" "$r" 0
        row "| llm.c | $B | - | - | - | - | - | - | $r |"
        return
    fi
    if [ "$name" = llm.c ]; then # -v 0 divides by zero in llm.c: one validation batch at the start and the end
        cmd=("$BIN/llmc_train_gpt2cu" -e d12 -b "$B" -t 1024 -x $BENCH_STEPS -v 100000 -m 1 -s 0 -i "$TRAIN" -j "$VAL")
    else
        cmd=("$BIN/train_gpt2cu_$name" -e small -b "$B" -t 1024 -x $BENCH_STEPS -u 5 -m 0 -s 0 -E 1024 -K 8192 -W -1 -i "$TRAIN" -j "$VAL")
    fi
    smi=$LOGS/smi_${name}_b$B.csv
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 < /dev/null > "$smi" 2> /dev/null &
    sp=$!
    r=$(run "bench_${name}_b$B" 150 '^step +[0-9]+/' "${cmd[@]}")
    kill $sp 2> /dev/null
    wait $sp 2> /dev/null
    local fields
    fields=$(awk -v bt=$((B * 1024)) '
        /^step +[0-9]+\// { n++; for (i = 2; i <= NF; i++) { if ($i == "loss" && !l1) l1 = $(i + 1); if ($i == "loss") ln = $(i + 1) }
                            if (n < 3) next
                            for (i = 2; i <= NF; i++) if ($i == "ms") { ms += $(i - 1); k++ }
                            for (i = 2; i <= NF; i++) if ($i == "MFU") { v = $(i - 2); sub(/%/, "", v); mfu += v; km++ } }
        END { if (k) printf "%.1f | %.0f | %s | %s -> %s", ms / k, bt / (ms / k) * 1000, km ? sprintf("%.1f%%", mfu / km) : "-", l1, ln
              else printf "- | - | - | -" }' "$log")
    local peak
    peak=$(awk -F'|' '$3 ~ /nonoverlap/ { gsub(/ /, "", $8); print $8; exit }' "$log")
    row "| $name | $B | $fields | ${peak:--} | $(sort -n "$smi" 2> /dev/null | tail -n 1 | grep . || echo -) | $r |"
}

# cable's evaluation of GPT-Small at 1k, 4k and 16k tokens, alone: peak memory per length
u_eval() {
    local r log=$LOGS/eval_cable.log
    r=$(run eval_cable 120 '^\| +16384 \| nonoverlap' "$BIN/train_gpt2cu_cable" -e small -t 1024 -x 0 -E 1024,4096,16384 -K 16384 -W -1 -i "$TRAIN" -j "$VAL")
    local rows
    rows=$(awk -F'|' '$3 ~ /nonoverlap/ { gsub(/ /, ""); print }' "$log" | awk -F'|' '{ printf "%s %s MiB; ", $2, $8 }')
    row "| cable, GPT-Small, -x 0: peak memory by length: ${rows:--} | $r |"
}

# the HF export of learned's reference checkpoint, loaded by transformers' GPT2LMHeadModel:
# its loss on the reference's batch against the C trainer's (python/hf_check.py)
u_hf() {
    local r
    if ! python3 -c "import torch, transformers" 2> /dev/null; then r="SKIPPED (python3 has no torch or no transformers)"; result hf "$r" 0
    elif ! r=$(need_ref learned) || [ ! -e "$REF/learned.done" ]; then r=${r:-"not run (no CUDA device: no reference)"}; result hf "$r" 0
    else r=$(run hf 120 '^hf_check: .* ok$' bash -c "python3 python/export_hf.py '$REF/learned_model.bin' '$WORK/hf' && python3 python/hf_check.py '$WORK/hf' '$REF/learned'"); fi
    row "| HF export of learned, transformers GPT2LMHeadModel: $(grep -m1 '^hf_check:' "$LOGS/hf.log" 2>/dev/null | cut -c11- | grep . || echo -) | $r |"
}

# the attention alone at SHAPE, the trainer's kernels timed only (dev/cuda/attention_bias time)
u_time() {
    local pe=$1 r log=$LOGS/time_$1.log
    r=$(run "time_$pe" 60 '^timed only' "$BIN/attention_$pe" time $SHAPE)
    [ "$r" = ok ] && r=timed
    local f b
    f=$(awk '/^  forward/ { print $2 " | " ($5 == "TFLOP/s" ? $4 : "-") }' "$log")
    b=$(awk '/^  backward/ { print $2 " | " ($5 == "TFLOP/s" ? $4 : "-") }' "$log")
    row "| ours: $pe | ${f:-- | -} | ${b:-- | -} | $r |"
}

# PyTorch at the same shape: SDPA's flash backend, FlexAttention with the biases as score_mod
u_torch() {
    local r log=$LOGS/torch.log
    r=$(run torch 150 'backward' python3 dev/cuda/sdpa_bench.py $SHAPE $FLEX)
    awk '$2 == "forward" { f[$1] = $3 " | " $5 } $2 == "backward" { print "| torch: " $1 " | " f[$1] " | " $3 " | " $5 " | measured |" }' "$log" |
        while read -r line; do row "$line"; done
    grep -E "FAILED|skipped" "$log" | while read -r line; do row "| torch: $line | - | - | - | - | - |"; done
    row "| torch: every case ($FLEX) | - | - | - | - | $r |"
}

# ----------------------------------------------------------------------------
# the commands

command1() {
    table "| run | result |"
    UNIT=mma u_mma
    pack
    # the references, one core each; beside them compute-sanitizer on the GPU (by the middle
    # of the command: memory and speed then have the GPU alone) and the HF check
    local s t
    for s in $STEMS; do
        [ $DEVICE = 0 ] || [ -e "$REF/$s.done" ] || touch "$REF/$s.busy" # before any unit waits for it
        UNIT="ref $s" u_ref "$s" &
    done
    (
        DEADLINE=$((DEADLINE / 2))
        ROWS=$LOGS/sanitizer.md
        for t in $SANITIZE; do UNIT="sanitize_attention ${t/:/ }" u_sanitize_attention ${t/:/ }; done
        for t in memcheck racecheck; do UNIT="sanitize_dape $t $SANITIZE_DAPE" u_sanitize_dape $t $SANITIZE_DAPE; done
    ) > /dev/null &
    (UNIT=hf ROWS=$LOGS/hf.md u_hf > /dev/null) &
    table "| stem | bf16 vs CPU | bf16 attention | fp32 vs CPU | fp32 attention |"
    for s in $STEMS; do UNIT="test $s" spawn u_test "$s"; done
    pool_wait
    pack
    say "waiting for compute-sanitizer and the HF check"
    wait
    table "| compute-sanitizer | program | result |"
    cat "$LOGS/sanitizer.md" >> "$SUMMARY" 2> /dev/null
    table "| check | result |"
    cat "$LOGS/hf.md" >> "$SUMMARY" 2> /dev/null
    pack
    # alone on the GPU: memory, then speed
    table "| evaluation memory at 16k (bf16) | result |"
    for s in $STEMS; do UNIT="memory $s" u_memory "$s"; done
    pack
    table "| trainer | B | ms/step | tokens/s | MFU | loss first -> last | peak MiB (model) | peak MiB (device) | result |"
    local B pe
    for B in 8 32; do
        UNIT="bench llm.c $B" u_bench llm.c $B
        for pe in $(manifest bench); do UNIT="bench $pe $B" u_bench "$pe" $B; done
        pack
    done
    table "| evaluation | result |"
    UNIT=eval u_eval
}

command2() {
    table "| attention (B T NH HS = $SHAPE) | forward ms | forward TFLOP/s | backward ms | backward TFLOP/s | result |"
    local pe unit
    for pe in $PES; do UNIT="time $pe" u_time "$pe"; done
    pack
    UNIT=torch u_torch
    pack
    local from=$WORK/left1.txt
    [ -s "$from" ] || from=$KIT_DIR/left1.txt
    if [ -s "$from" ]; then
        local units
        mapfile -t units < "$from"
        say "retrying what command 1 left ($from): $(printf '%s; ' "${units[@]}")"
        table "| retried | result |"
        for unit in "${units[@]}"; do
            UNIT=$unit
            case $unit in
                mma|eval|hf) u_$unit ;;
                ref\ *|test\ *|sanitize_attention\ *|sanitize_dape\ *|memory\ *|bench\ *) u_${unit%% *} ${unit#* } ;;
                *) say "left1: unknown unit '$unit'" ;;
            esac
        done
    else
        say "command 1 left nothing (no left1.txt in $WORK or $KIT_DIR)"
    fi
}

say "GPU checks, command $N of 2 (dev/gpu_checks.sh), $(date -u +%Y-%m-%dT%H:%MZ)"
open_kit || exit 1
machine
pack
if [ $N = 1 ]; then command1; else command2; fi
