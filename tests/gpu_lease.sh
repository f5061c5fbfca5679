#!/usr/bin/env bash
# The dry run of a GPU lease (make test-gpu-lease), on a machine without a GPU (about 50 s of CPU):
#
#  1. the plan: the two commands fit the run tool's 2000 characters and their timeouts the lease
#  2. the kit's packing: a kit of make test's own GPU-vs-CPU tests (test_gpt2cu_<stem>_fp32, built
#     as the kit builds them) and stand-ins for every other program (tests/gpu_stub.sh) is staged,
#     checked and packed by dev/gpu_kit.sh; a binary that needs another library fails the check
#  3. command 1 and command 2 from that kit without a device: every stage runs its no-device path
#     and the summaries say so (no run is ok), at most 8 files come back, nothing is left over
#  4. command 1 with a pretended GPU (the stand-ins answer as a GPU would, the trainers are the
#     CUDA trainer in the CPU emulation on a tiny model): the tables read the programs' outputs, a
#     crash, a hang and a failed check are each a FAIL and the runs after them go on
#  5. the deadline: with every run hanging, command 1 stops by its deadline, the units it did not
#     reach are "not run" and in left1.txt, and command 2 retries them on the same machine; its
#     timing rows read the emulated attention benchmarks' `time` mode (kerple's, CoPE's)
#
# What the full kit adds (make gpu-kit, not run by make test: 17 minutes of CPU): the real
# programs in bf16 and fp32 for every stem, built without MPI, NCCL and OpenBLAS for x86-64-v3,
# and llm.c's trainer, in at most 40 MB.
#   usage: gpu_lease.sh BUILD_DIR STEM    (the emulated trainer and CPU test of STEM, and the
#                                          emulated attention of kerple and cope are built;
#                                          KIT_STEMS, KIT_PES, KIT_BENCH: the Makefile's lists)
set -uo pipefail
build=$1
stem=$2
D=$build/gpu_lease
rm -rf "$D"
mkdir -p "$D"
unset KIT_LLMC GPU_STUB GPU_STUB_CRASH GPU_STUB_HANG GPU_STUB_FAIL GPU_CHECKS_CAP GPU_CHECKS_SHAPE DEADLINE OUT
failed=0
section=0 # failures before the current section
fail() { echo "gpu_lease: FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "gpu_lease: $*"; }

# 1. the plan
plan=$(bash dev/gpu_checks.sh plan) || fail "plan: the timeouts do not fit the lease: $plan"
for n in 1 2; do
    cmd=$(sed -n "s/^command $n: timeout_s [0-9]*, stops itself at [0-9]* s: //p" <<< "$plan")
    if [ -n "$cmd" ] && [ ${#cmd} -le 2000 ]; then pass "plan: command $n '$cmd' (${#cmd} characters)"
    else fail "plan: no command $n of at most 2000 characters: $plan"; fi
done
grep -q "^start + command 1 + command 2: .* s of [0-9]*$" <<< "$plan" && pass "plan: $(tail -n 1 <<< "$plan")"

# 2. the kit: stand-ins, make test's fp32 tests, the library check, the packing
gcc -O1 -DSTUB_SCRIPT="\"$PWD/tests/gpu_stub.sh\"" -o "$D/stub" tests/gpu_stub.c || exit 1
files=()
for s in $KIT_STEMS; do files+=("$D/stub=test_gpt2_$s" "$D/stub=test_gpt2cu_$s" "$build/test_gpt2cu_${s}_fp32"); done
for pe in $KIT_BENCH; do files+=("$D/stub=train_gpt2cu_$pe"); done
for pe in $KIT_PES; do files+=("$D/stub=attention_$pe"); done
files+=("$D/stub=mma_check")
if bash dev/gpu_kit.sh stage "$D/stage" "${files[@]}" && KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage" "$D/kit"; then
    pass "kit: $(grep -c '^bin ' "$D/stage/manifest") binaries staged, libraries allowed, packed"
else
    fail "kit: staging or packing failed"
fi
echo 'int gpu_lease_fake(void) { return 1; }' > "$D/fake.c"
gcc -shared -fPIC -o "$D/libgpulease_fake.so" "$D/fake.c" &&
    gcc -o "$D/needs_fake" tests/gpu_stub.c -DSTUB_SCRIPT='"x"' -L"$D" -Wl,--no-as-needed -lgpulease_fake || exit 1
if out=$(bash dev/gpu_kit.sh libs "$D/stub" "$D/needs_fake" 2>&1); then fail "kit: a binary that needs libgpulease_fake.so passed the library check"
elif [[ $out == *"needs_fake needs libgpulease_fake.so"* ]]; then pass "kit: the library check refuses a binary that needs libgpulease_fake.so"
else fail "kit: the library check failed without naming the library: $out"; fi

# the checks of one command's output folder; $1 the folder, $2 the command
outputs() {
    local n
    n=$(ls "$1" | wc -l)
    [ "$n" -le 8 ] && [ -s "$1/summary$2.md" ] && [ -s "$1/logs$2.tar.gz" ] && [ -e "$1/left$2.txt" ] ||
        fail "command $2: $n files in $1 (at most 8, summary$2.md, logs$2.tar.gz, left$2.txt): $(ls "$1" | tr '\n' ' ')"
}

# 3. without a device
section=$failed
export GPU_KIT=$D/kit GPU_CHECKS_WORK=$D/work
bash dev/gpu_checks.sh 1 "$D/out1" > "$D/run1.log" 2>&1 && fail "command 1 without a device: exit 0"
outputs "$D/out1" 1
S=$D/out1/summary1.md
R=$D/work/logs1/results.tsv
grep -q "no CUDA device" "$S" || fail "command 1: the summary does not say there is no CUDA device"
[ "$(cut -f3 "$R" | grep -cvE '^(SKIPPED|not run) \(')" = 0 ] || fail "command 1 without a device: runs neither SKIPPED nor not run: $(grep -vE $'\t(SKIPPED|not run) \\(' "$R" | tr '\t\n' ' ;')"
grep -qE '\| ok \|' "$S" && fail "command 1 without a device: an ok in the summary"
for s in $KIT_STEMS; do
    grep -qE "^\| $s( \| SKIPPED \(no CUDA device\)){4} \|$" "$S" || fail "command 1: no row of SKIPPED for $s"
done
grep -q "^test_${KIT_STEMS%% *}_fp32"$'\t' "$R" || fail "command 1: make test's fp32 test did not run"
[ -s "$D/out1/left1.txt" ] && fail "command 1 without a device left units: $(cat "$D/out1/left1.txt")"
grep -q "^| llm.c | 8 | .* | SKIPPED (llm.c not in the kit" "$S" || fail "command 1: no llm.c row saying it is not in the kit"
bash dev/gpu_checks.sh 2 "$D/out2" > "$D/run2.log" 2>&1 && fail "command 2 without a device: exit 0"
outputs "$D/out2" 2
[ "$(cut -f3 "$D/work/logs2/results.tsv" | grep -cvE '^(SKIPPED|not run) \(')" = 0 ] || fail "command 2 without a device: runs neither SKIPPED nor not run"
[ $(grep -c "^| ours: .* | SKIPPED (no CUDA device) |$" "$D/out2/summary2.md") = $(wc -w <<< "$KIT_PES") ] || fail "command 2: not every encoding's timing row SKIPPED"
[ $failed != $section ] || pass "without a device: $(wc -l < "$R") runs of command 1 and $(wc -l < "$D/work/logs2/results.tsv") of command 2, each SKIPPED or not run, every stem's row, $(ls "$D/out1" | wc -l) files"

# 4. a pretended GPU: stand-ins that answer, crash, hang and fail, the emulated trainer (a tiny
# checkpoint of the CPU test, shards of random tokens of its vocabulary), llm.c
"$build/test_gpt2_$stem" debug-state-tiny "$D/tiny" > /dev/null || exit 1
python3 - "$D" <<'PY' || exit 1
import random, struct, sys
random.seed(1)
for split, n in (("train", 20000), ("val", 2000)):  # the shards' format (DESIGN.md), tokens below the tiny model's 250
    with open("%s/tiny_%s_000000.bin" % (sys.argv[1], split), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *(random.randrange(250) for _ in range(n))))
PY
mkdir -p "$D/llmc/llmc"
echo "stub" > "$D/llmc/REVISION"
touch "$D/llmc/Makefile" "$D/llmc/train_gpt2.cu"
files=()
for s in learned cable; do files+=("$D/stub=test_gpt2_$s" "$D/stub=test_gpt2cu_$s" "$D/stub=test_gpt2cu_${s}_fp32"); done
files+=("$build/emulate/attention_kerple" "$build/emulate/attention_cope")
files+=("$D/stub=train_gpt2cu_learned" "$D/stub=train_gpt2cu_cable" "$D/stub=mma_check" "$D/stub=llmc_train_gpt2cu")
KIT_STEMS="learned cable" KIT_PES="kerple cope" KIT_BENCH=learned KIT_LLMC=$D/llmc bash dev/gpu_kit.sh stage "$D/stage_gpu" "${files[@]}" > /dev/null &&
    KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage_gpu" "$D/kit_gpu" > /dev/null || fail "the pretended GPU's kit"
export GPU_KIT=$D/kit_gpu GPU_CHECKS_WORK=$D/work_gpu GPU_STUB=device GPU_STUB_TRAINER=$PWD/$build/emulate/train_gpt2cu_${stem}_fp32 \
       GPU_STUB_MODEL=$PWD/$D/tiny_model.bin GPU_STUB_DATA=$PWD/$D
GPU_CHECKS_CAP=20 GPU_STUB_CRASH="test_gpt2cu_cable:reference" GPU_STUB_HANG="test_gpt2cu_learned_fp32:attention" GPU_STUB_FAIL=mma_check \
    bash dev/gpu_checks.sh 1 "$D/out_gpu" > "$D/run_gpu.log" 2>&1
outputs "$D/out_gpu" 1
S=$D/out_gpu/summary1.md
expect() { grep -qE -- "$1" "$S" && pass "a pretended GPU: $2" || fail "a pretended GPU: $2: no line '$1' in $S"; }
expect '^\| mma_check .* \| FAIL \(exit 1, failed checks: 1\) \|$' "a failed check is a FAIL"
expect '^\| cable \| FAIL \(signal SEGV\) \| ok \| ok \| ok \|$' "a crash is a FAIL, the stem's other runs go on"
expect '^\| learned \| ok \| ok \| ok \| FAIL \(timeout after 20 s\) \|$' "a hang is a FAIL after its timeout"
expect '^\| llm.c \| 8 \| 100.0 \| 81920 \| 40.0% \| 11.500000 -> 15.500000 \| - \| - \| ok \|$' "llm.c's step lines: ms, tokens/s, MFU, loss"
expect '^\| learned \| 32 \| [0-9.]+ \| [0-9]+ \| - \| [0-9.]+ -> [0-9.]+ \| [0-9.]+ \| - \| ok \|$' "the trainer's step lines and peak memory (emulated)"
expect '^\| cable, GPT-Small, -x 0: .* \| FAIL \(exit 0 without its success line\) \|$' "an evaluation without its 16k row is a FAIL"
expect '^\[[0-9]+ s\] end: ' "the summary ends"

# 5. the deadline: every run hangs; command 1 stops in time, leaves its units; command 2 retries
export GPU_CHECKS_WORK=$D/work_late
start=$(date +%s)
DEADLINE=12 GPU_STUB_HANG="mma_check test_gpt2cu_learned test_gpt2cu_cable" bash dev/gpu_checks.sh 1 "$D/out_late" > "$D/run_late.log" 2>&1
took=$(( $(date +%s) - start ))
R=$D/work_late/logs1/results.tsv
if [ $took -le 20 ]; then pass "deadline 12 s: command 1 ended after $took s"; else fail "deadline 12 s: command 1 took $took s"; fi
grep -q $'^mma_check\t.*\tFAIL (timeout after' "$R" || fail "deadline: mma_check did not time out within the deadline"
grep -q $'\tnot run (deadline)$' "$R" || fail "deadline: no run marked not run (deadline)"
grep -qx "bench learned 32" "$D/out_late/left1.txt" && grep -qx "eval" "$D/out_late/left1.txt" ||
    fail "deadline: left1.txt lacks the units not reached: $(tr '\n' ';' < "$D/out_late/left1.txt")"
DEADLINE=60 GPU_CHECKS_SHAPE="64 1 2 32" bash dev/gpu_checks.sh 2 "$D/out_retry" > "$D/run_retry.log" 2>&1
S=$D/out_retry/summary2.md
grep -q "retrying what command 1 left" "$S" && grep -qE '^\| learned \| 32 \| .* \| ok \|$' "$S" &&
    pass "deadline: command 2 retried the $(wc -l < "$D/out_late/left1.txt") units command 1 left" ||
    fail "deadline: command 2 did not retry what command 1 left ($S)"
grep -qx '| ours: kerple | 0.000 | 0.00 | 0.000 | 0.00 | timed |' "$S" && grep -qx '| ours: cope | 0.000 | - | 0.000 | - | timed |' "$S" &&
    pass "command 2: the timing rows of the emulated kernels' time mode (no clock: 0 ms)" ||
    fail "command 2: no timing rows of kerple's and cope's emulated kernels in $S"

[ $failed = 0 ] && echo "gpu_lease: the dry run passed" || echo "gpu_lease: $failed checks FAILED (logs: $D)"
[ $failed = 0 ]
