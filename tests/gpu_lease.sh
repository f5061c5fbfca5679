#!/usr/bin/env bash
# The dry run of a GPU lease (make test-gpu-lease), on a machine without a GPU (50 s of CPU):
#
#  1. the plan: the two commands fit the run command's 2000 characters, their work on paper
#     their deadlines, their timeouts the lease
#  2. the kit's packing: a kit of make test's own GPU-vs-CPU tests (test_gpt2cu_<stem>_fp32, built
#     as the kit builds them), one CPU reference writer built as the kit builds it (OpenBLAS
#     linked in) and stand-ins for every other program (tests/gpu_stub.sh) is staged, checked and
#     packed by dev/gpu_kit.sh; the reference writer runs from the unpacked kit loading no
#     library but the C runtime's and libgomp; a binary that needs another library fails the
#     check; gpu_kit.sh deletes no folder it did not make, and builds llm.c from a tarball
#     (its revision from the tarball, NVML where the toolkit has nvml.h)
#  3. command 1 and command 2 from that kit without a device: every stage runs its no-device
#     path and the summaries say so (no run is ok), at most 8 files come back, nothing is left
#     over; without a kit the counts read 0; a relative OUTDIR is the caller's
#  4. command 1 with a pretended GPU (the stand-ins answer as a GPU would, the trainers are the
#     CUDA trainer in the CPU emulation on a tiny model; nvidia-smi and a compute-sanitizer that
#     the runtime refuses are stand-ins too): the tables read the programs' outputs (the worst
#     error over its tolerance, MFU by the script's formula), rows in list order, a crash, a hang
#     and a failed check are each a FAIL and the runs after them go on, every compute-sanitizer
#     row says it is unavailable; a driver's error is no "no CUDA device", a hung nvidia-smi holds
#     nothing, tar's exit 1 for a log that grew still packs the logs; a kit whose library is
#     missing is rebuilt, and a failed rebuild stops the command; a python with torch is found
#  5. the deadline: a run it stops (a stand-in that needs 20 s) is "not run (deadline)" and left,
#     never a FAIL; a unit is not started with less than its minimum time; command 2 retries what
#     command 1 left on the same machine (compute-sanitizer working: its errors and warnings
#     apart), its timing rows read the emulated attention benchmarks' `time` mode (kerple's,
#     CoPE's); on a fresh machine command 2's deadline comes from the lease's time left, less a
#     machine's start, and the references of the units it retries are written side by side first
#
# What the full kit adds (make gpu-kit, not run by make test: 17 minutes of CPU): the real
# programs in bf16 and fp32 for every stem, and llm.c's trainer, in at most 52 MB.
#   usage: gpu_lease.sh BUILD_DIR STEM KIT_REF KIT_TASKS_BIN
#                                                (the emulated trainer and CPU test of STEM and the
#                                                 emulated attention of kerple and cope are built;
#                                                 KIT_REF: STEM's CPU reference writer built as
#                                                 the kit builds it; KIT_TASKS_BIN: ./tasks built
#                                                 as the kit builds it; KIT_STEMS, KIT_PES,
#                                                 KIT_BENCH, KIT_EVAL, KIT_TASKS, KIT_BLAS: the
#                                                 Makefile's)
set -uo pipefail
build=$1
stem=$2
kit_ref=$3
kit_tasks=$4
D=$build/gpu_lease
rm -rf "$D"
mkdir -p "$D"
unset KIT_LLMC LLMC_REV GPU_STUB GPU_STUB_CRASH GPU_STUB_HANG GPU_STUB_FAIL GPU_STUB_SLOW GPU_STUB_DEVICE_ERROR GPU_STUB_SANITIZER \
      GPU_STUB_SANITIZER_ERRORS GPU_STUB_SANITIZER_WARNINGS GPU_CHECKS_CAP GPU_CHECKS_SHAPE DEADLINE OUT
failed=0
section=0 # failures before the current section
fail() { echo "gpu_lease: FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "gpu_lease: $*"; }
# the line number of the first line of FILE that starts with WORD and a tab (0: none)
line_of() { grep -n "^$2"$'\t' "$1" | head -n 1 | cut -d: -f1 | grep . || echo 0; }

# 1. the plan, from the Makefile's lists
plan=$(GPU_KIT=$D/nokit bash dev/gpu_checks.sh plan) || fail "plan: the commands do not fit the lease: $plan"
for n in 1 2 3; do
    cmd=$(sed -n "s/^command $n: .*: \(bash dev\/gpu_checks.sh .*\)$/\1/p" <<< "$plan")
    if [ -n "$cmd" ] && [ ${#cmd} -le 2000 ]; then pass "plan: command $n '$cmd' (${#cmd} characters)"
    else fail "plan: no command $n of at most 2000 characters: $plan"; fi
done
paper=$(sed -n 's/^  on paper: .* = \([0-9]*\) s of \([0-9]*\)$/\1 \2/p' <<< "$plan")
[ -n "$paper" ] && [ ${paper% *} -le ${paper#* } ] && pass "plan: command 1 on paper ${paper% *} s of its ${paper#* }" ||
    fail "plan: no arithmetic of command 1 within its deadline: $plan"
grep -q "^  on paper: .* = [0-9]* s, then what command 1 left$" <<< "$plan" && grep -q "LEFT" <<< "$plan" ||
    fail "plan: no arithmetic of command 2 and its timeout from the lease's time left: $plan"
grep -q "^start + command 1 + command 2: .* s of [0-9]*; then give the machine back$" <<< "$plan" && pass "plan: $(grep '^start + command 1' <<< "$plan")" ||
    fail "plan: no lease total: $plan"
paper=$(sed -n 's/^  on paper: open [0-9]* + \([0-9]*\) entries x [0-9]* tasks .* = \([0-9]*\) s of \([0-9]*\) (.*$/\1 \2 \3/p' <<< "$plan")
[ -n "$paper" ] && [ "${paper%% *}" = "$(wc -w <<< "$KIT_TASKS")" ] && [ "$(cut -d' ' -f2 <<< "$paper")" -le "${paper##* }" ] &&
    grep -q "start + command 3 = [0-9]* s of [0-9]*" <<< "$plan" && pass "plan: command 3, the tasks' study of $(wc -w <<< "$KIT_TASKS") entries, on paper $(cut -d' ' -f2 <<< "$paper") s of ${paper##* }" ||
    fail "plan: no arithmetic of command 3 within its deadline: $plan"

# 2. the kit: stand-ins, make test's fp32 tests, a reference writer as the kit builds it, the
# library check, the packing
gcc -O1 -DSTUB_SCRIPT="\"$PWD/tests/gpu_stub.sh\"" -o "$D/stub" tests/gpu_stub.c || exit 1
files=()
for s in $KIT_STEMS; do
    if [ "$s" = "$stem" ]; then files+=("$kit_ref"); else files+=("$D/stub=test_gpt2_$s"); fi
    files+=("$D/stub=test_gpt2cu_$s" "$build/test_gpt2cu_${s}_fp32")
done
for pe in $(echo $KIT_BENCH $KIT_EVAL $KIT_TASKS | tr " " "\n" | awk '!seen[$0]++'); do files+=("$D/stub=train_gpt2cu_$pe"); done
files+=("$kit_tasks")
for pe in $KIT_PES; do files+=("$D/stub=attention_$pe"); done
files+=("$D/stub=mma_check")
if bash dev/gpu_kit.sh stage "$D/stage" "${files[@]}" && KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage" "$D/kit"; then
    pass "kit: $(grep -c '^bin ' "$D/stage/manifest") binaries staged, libraries allowed, packed"
else
    fail "kit: staging or packing failed"
fi
plan=$(GPU_KIT=$D/kit bash dev/gpu_checks.sh plan) && grep -q "^lists ($D/kit/kit.manifest): $(wc -w <<< "$KIT_STEMS") stems" <<< "$plan" ||
    fail "plan: not from the kit's manifest: $plan"
echo 'int gpu_lease_fake(void) { return 1; }' > "$D/fake.c"
gcc -shared -fPIC -o "$D/libgpulease_fake.so" "$D/fake.c" &&
    gcc -o "$D/needs_fake" tests/gpu_stub.c -DSTUB_SCRIPT='"x"' -L"$D" -Wl,--no-as-needed -lgpulease_fake || exit 1
if out=$(bash dev/gpu_kit.sh libs "$D/stub" "$D/needs_fake" 2>&1); then fail "kit: a binary that needs libgpulease_fake.so passed the library check"
elif [[ $out == *"needs_fake needs libgpulease_fake.so"* ]]; then pass "kit: the library check refuses a binary that needs libgpulease_fake.so"
else fail "kit: the library check failed without naming the library: $out"; fi

# the CPU reference writer with OpenBLAS inside, run from the unpacked kit with no library path
# of the caller's: the loader's trace names every library it loads
mkdir -p "$D/unpacked"
xz -dc "$D/kit/kit.tar.xz" | tar -C "$D/unpacked" -xf - || fail "kit: does not unpack"
ref=$D/unpacked/bin/test_gpt2_$stem
grep -q "^blas openblas static" "$D/unpacked/manifest" || fail "kit: the manifest does not say OpenBLAS is linked in: $(grep '^blas' "$D/unpacked/manifest")"
grep -qa "OpenBLAS" "$ref" || fail "kit: test_gpt2_$stem holds no OpenBLAS (built without BLAS)"
readelf -d "$ref" | grep -qiE "NEEDED.*(openblas|gfortran)" && fail "kit: test_gpt2_$stem needs a shared OpenBLAS: $(readelf -d "$ref" | grep NEEDED | tr -s ' ')"
loaded=$(env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 LD_DEBUG=libs "$ref" debug-state-tiny "$D/blas_ref" 2>&1 > "$D/blas_ref.log" | sed -n 's/.*calling init: //p' | sort -u)
if [ -s "$D/blas_ref_state.bin" ] && [ -n "$loaded" ] && ! grep -vqE '/(libc|libm|libgomp|libgcc_s|ld-linux-x86-64)\.so' <<< "$loaded"; then
    pass "kit: test_gpt2_$stem (OpenBLAS linked in) wrote its reference from the unpacked kit, loading only $(echo $(basename -a $loaded))"
else
    fail "kit: test_gpt2_$stem from the unpacked kit: reference $(ls -s "$D/blas_ref_state.bin" 2>&1), loaded: $(echo $loaded)"
fi

# gpu_kit.sh deletes no folder it did not make: its inputs are checked first, a folder without
# its marker is refused, llm.c's copy never replaces the tree it copies
section=$failed
mkdir -p "$D/notkit" && echo keep > "$D/notkit/precious"
bash dev/gpu_kit.sh stage "$D/notkit" "${files[@]}" 2> "$D/refuse1.err" && fail "stage onto a folder it did not make: exit 0"
[ -f "$D/notkit/precious" ] || fail "stage deleted a folder it did not make ($D/notkit)"
grep -q "not made by gpu_kit.sh" "$D/refuse1.err" || fail "stage onto $D/notkit: no reason given: $(cat "$D/refuse1.err")"
staged=$(ls "$D/stage/bin" | wc -l)
bash dev/gpu_kit.sh stage "$D/stage" "$D/no_such_binary" "${files[@]}" 2> "$D/refuse2.err" && fail "stage with a missing input: exit 0"
[ "$(ls "$D/stage/bin" | wc -l)" = "$staged" ] && grep -q "no file $D/no_such_binary" "$D/refuse2.err" ||
    fail "stage with a missing input deleted the staged kit ($(ls "$D/stage/bin" | wc -l) of $staged binaries left) or gave no reason: $(cat "$D/refuse2.err")"
mkdir -p "$D/x/llm.c/llmc"
printf 'train_gpt2cu:\n\tprintf '"'"'#!/bin/sh\\necho $(NVCC_LDFLAGS)\\n'"'"' > $@ && chmod +x $@\n' > "$D/x/llm.c/Makefile"
echo "int main() {}" > "$D/x/llm.c/train_gpt2.cu"
echo "cudaMemAdvise(p, n, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId);" > "$D/x/llm.c/llmc/cuda_utils.cuh"
bash dev/gpu_kit.sh llmc "$D/x/llm.c" "$D/x" 2> "$D/refuse3.err" && fail "llmc into the folder that holds its source: exit 0"
[ -f "$D/x/llm.c/train_gpt2.cu" ] && grep -q "holds the source" "$D/refuse3.err" || fail "llmc into the folder holding its source deleted it or gave no reason: $(cat "$D/refuse3.err")"
bash dev/gpu_kit.sh llmc "$D/x/llm.c" "$D/notkit" 2> "$D/refuse4.err" && fail "llmc into a folder it did not make: exit 0"
[ -f "$D/notkit/precious" ] || fail "llmc deleted a folder it did not make ($D/notkit)"
[ $failed != $section ] || pass "gpu_kit.sh: refused to stage onto a folder it did not make and without an input, and llm.c's copy into its own source's folder; nothing deleted"
# llm.c from GitHub's kind of tarball: its commit from the tarball; NVML where the toolkit has nvml.h
section=$failed
git -C "$D/x/llm.c" init -q && git -C "$D/x/llm.c" add -A && git -C "$D/x/llm.c" -c user.name=t -c user.email=t commit -qm llm.c &&
    git -C "$D/x/llm.c" archive --prefix=llm.c-master/ -o "$PWD/$D/llmc.tar.gz" HEAD || exit 1
commit=$(git -C "$D/x/llm.c" rev-parse HEAD)
mkdir -p "$D/toolkit/bin" "$D/toolkit/include"
printf '#!/bin/sh\nexit 0\n' > "$D/toolkit/bin/nvcc" && chmod +x "$D/toolkit/bin/nvcc"
bash dev/gpu_kit.sh llmc "$D/llmc.tar.gz" "$D/llmc_tar" > /dev/null 2>&1 || fail "llmc from a tarball: $(tail -n 3 "$D/llmc_tar/build.log" 2>&1)"
[ "$(cat "$D/llmc_tar/REVISION" 2>&1)" = "$commit" ] || fail "llmc from a tarball: REVISION $(cat "$D/llmc_tar/REVISION" 2>&1), not the tarball's commit $commit"
grep -qF 'cudaMemLocation{cudaMemLocationTypeHost, 0}' "$D/llmc_tar/llmc/cuda_utils.cuh" || fail "llmc from a tarball: the CUDA 13 fix is not applied"
PATH=$PWD/$D/toolkit/bin:$PATH bash dev/gpu_kit.sh llmc "$D/llmc.tar.gz" "$D/llmc_tar" > /dev/null 2>&1
[[ "$("$D/llmc_tar/llmc_train_gpt2cu")" != *-lnvidia-ml* ]] || fail "llmc: NVML linked where the toolkit has no nvml.h"
touch "$D/toolkit/include/nvml.h"
PATH=$PWD/$D/toolkit/bin:$PATH bash dev/gpu_kit.sh llmc "$D/llmc.tar.gz" "$D/llmc_tar" > /dev/null 2>&1
[[ "$("$D/llmc_tar/llmc_train_gpt2cu")" == *-lnvidia-ml* ]] || fail "llmc: NVML not linked where the toolkit has nvml.h: $("$D/llmc_tar/llmc_train_gpt2cu")"
LLMC_REV=v1 bash dev/gpu_kit.sh llmc "$D/llmc.tar.gz" "$D/llmc_tar" > /dev/null 2>&1
[ "$(cat "$D/llmc_tar/REVISION")" = v1 ] || fail "llmc: LLMC_REV not taken: $(cat "$D/llmc_tar/REVISION")"
[ $failed != $section ] || pass "gpu_kit.sh llmc: from a tarball, its commit ${commit:0:12} from git get-tar-commit-id (or LLMC_REV), NVML linked where nvml.h is"

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
    grep -qE "^\| $s( \| SKIPPED \(no CUDA device\)){2} \| -( \| SKIPPED \(no CUDA device\)){2} \| - \|$" "$S" || fail "command 1: no row of SKIPPED for $s"
done
grep -q "^test_${KIT_STEMS%% *}_fp32"$'\t' "$R" || fail "command 1: make test's fp32 test did not run"
[ -s "$D/out1/left1.txt" ] && fail "command 1 without a device left units: $(cat "$D/out1/left1.txt")"
grep -q "^| llm.c | 8 | .* | SKIPPED (llm.c not in the kit" "$S" || fail "command 1: no llm.c row saying it is not in the kit"
paths=$(sed -n 's/^paths //p' "$D/stage/manifest")
[ "$(grep -c '^| memcheck | .* | SKIPPED (no CUDA device) |$' "$S")" -gt 0 ] && [ "$(grep -c '^memory_' "$R")" = "$(wc -w <<< "$paths")" ] ||
    fail "command 1: compute-sanitizer's rows and memory of the $(wc -w <<< "$paths") attention paths ($paths) not as the manifest lists them"
bash dev/gpu_checks.sh 2 "$D/out2" > "$D/run2.log" 2>&1 && fail "command 2 without a device: exit 0"
outputs "$D/out2" 2
[ "$(cut -f3 "$D/work/logs2/results.tsv" | grep -cvE '^(SKIPPED|not run) \(')" = 0 ] || fail "command 2 without a device: runs neither SKIPPED nor not run"
[ $(grep -c "^| ours: .* | SKIPPED (no CUDA device) |$" "$D/out2/summary2.md") = $(wc -w <<< "$KIT_PES") ] || fail "command 2: not every encoding's timing row SKIPPED"
bash dev/gpu_checks.sh 3 "$D/out3" > "$D/run3.log" 2>&1 && fail "command 3 without a device: exit 0"
outputs "$D/out3" 3
n=$(grep -cE '^\| [a-z0-9_]+ \| no: not run \(' "$D/out3/summary3.md")
[ "$n" = "$(wc -w <<< "$KIT_TASKS")" ] && grep -q "test_[a-z0-9_]*: SKIPPED (no CUDA device)" "$D/out3/summary3.md" &&
    grep -q "^| no entry shown equal to the CPU path by command 1: nothing to run | not run |$" "$D/out3/summary3.md" ||
    fail "command 3 without a device: not every one of the $(wc -w <<< "$KIT_TASKS") entries refused for command 1's SKIPPED runs ($n): $(cat "$D/out3/summary3.md")"
[ $failed != $section ] || pass "without a device: $(wc -l < "$R") runs of command 1 and $(wc -l < "$D/work/logs2/results.tsv") of command 2, each SKIPPED or not run, every stem's row, $(ls "$D/out1" | wc -l) files; command 3 runs no entry of the $(wc -w <<< "$KIT_TASKS"), command 1 having shown none equal"
# without a kit: the counts are numbers; a relative OUTDIR is the caller's
section=$failed
mkdir -p "$D/caller"
(cd "$D/caller" && GPU_KIT=$PWD/../nokit GPU_CHECKS_WORK=$PWD/../work_nokit bash "$OLDPWD/dev/gpu_checks.sh" 1 out_rel > /dev/null 2>&1) && fail "command 1 without a kit: exit 0"
grep -q "end: 0 ok, 0 failed, 0 skipped, 0 not run; 0 units left" "$D/caller/out_rel/summary1.md" 2>/dev/null ||
    fail "command 1 without a kit: no summary in the caller's out_rel, or no counts: $(tail -n 1 "$D/caller/out_rel/summary1.md" 2>&1)"
[ -e out_rel ] && fail "command 1: the relative OUTDIR out_rel was made in the project's root, not the caller's folder"
[ $failed != $section ] || pass "without a kit: 'end: 0 ok, 0 failed, ...' in the caller's relative OUTDIR"

# 4. a pretended GPU: stand-ins that answer, crash, hang and fail, the emulated trainer (a tiny
# checkpoint of the CPU test, shards of random tokens of its vocabulary), llm.c, nvidia-smi, and
# a compute-sanitizer that the runtime refuses
"$build/test_gpt2_$stem" debug-state-tiny "$D/tiny" > /dev/null || exit 1
python3 - "$D" <<'PY' || exit 1
import random, struct, sys
random.seed(1)
for split, n in (("train", 20000), ("val", 2000)):  # the shards' format (DESIGN.md), tokens below the tiny model's 250
    with open("%s/tiny_%s_000000.bin" % (sys.argv[1], split), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *(random.randrange(250) for _ in range(n))))
PY
mkdir -p "$D/llmc/llmc" "$D/tools"
echo "stub" > "$D/llmc/REVISION"
touch "$D/llmc/Makefile" "$D/llmc/train_gpt2.cu"
for t in nvidia-smi compute-sanitizer tar; do printf '#!/bin/sh\nexec bash %s %s "$@"\n' "$PWD/tests/gpu_stub.sh" $t > "$D/tools/$t"; chmod +x "$D/tools/$t"; done
files=()
for s in learned kerple; do files+=("$D/stub=test_gpt2_$s" "$D/stub=test_gpt2cu_$s" "$D/stub=test_gpt2cu_${s}_fp32"); done
files+=("$build/emulate/attention_kerple" "$build/emulate/attention_cope")
files+=("$D/stub=train_gpt2cu_learned" "$D/stub=train_gpt2cu_cable" "$D/stub=mma_check" "$D/stub=llmc_train_gpt2cu")
KIT_STEMS="learned kerple" KIT_PES="kerple cope" KIT_BENCH=learned KIT_EVAL=cable KIT_LLMC=$D/llmc bash dev/gpu_kit.sh stage "$D/stage_gpu" "${files[@]}" > /dev/null &&
    KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage_gpu" "$D/kit_gpu" > /dev/null || fail "the pretended GPU's kit"
export GPU_KIT=$D/kit_gpu GPU_CHECKS_WORK=$D/work_gpu GPU_STUB=device GPU_STUB_TRAINER=$PWD/$build/emulate/train_gpt2cu_${stem}_fp32 \
       GPU_STUB_MODEL=$PWD/$D/tiny_model.bin GPU_STUB_DATA=$PWD/$D PATH=$PWD/$D/tools:$PATH
GPU_CHECKS_CAP=20 GPU_STUB_CRASH="test_gpt2cu_kerple:reference" GPU_STUB_HANG="test_gpt2cu_learned_fp32:attention" GPU_STUB_FAIL=mma_check \
    GPU_STUB_SANITIZER=refused bash dev/gpu_checks.sh 1 "$D/out_gpu" > "$D/run_gpu.log" 2>&1
outputs "$D/out_gpu" 1
S=$D/out_gpu/summary1.md
R=$D/work_gpu/logs1/results.tsv
expect() { grep -qE -- "$1" "$S" && pass "a pretended GPU: $2" || fail "a pretended GPU: $2: no line '$1' in $S"; }
expect '^\[[0-9]+ s\] GPU: NVIDIA H100 80GB HBM3, ' "nvidia-smi's GPU in the summary"
expect '^\| mma_check .* \| FAIL \(exit 1, failed checks: 1\) \|$' "a failed check is a FAIL"
expect '^\| kerple \| FAIL \(signal SEGV\) \| ok \| 0\.30: dq, dk, dv \| ok \| ok \| 0\.50: grad wte \|$' "a crash is a FAIL, the stem's other runs go on; the worst error over its tolerance per precision"
expect '^\| learned \| ok \| ok \| 0\.50: grad wte \| ok \| FAIL \(timeout after 20 s\) \| 0\.50: grad wte \|$' "a hang is a FAIL after its timeout"
[ "$(grep -nE '^\| learned \| ok' "$S" | cut -d: -f1)" -lt "$(grep -nE '^\| kerple \| FAIL' "$S" | cut -d: -f1)" ] 2>/dev/null &&
    pass "a pretended GPU: the stems' rows in list order (learned, which hangs, before kerple)" || fail "a pretended GPU: the stems' rows not in list order"
expect '^\| trainer \| B \| ms/step \| tokens/s \| MFU \(of 989\.4 TFLOP/s\)' "MFU against the H100's peak"
expect '^\| llm.c \| 8 \| 100.0 \| 81920 \| 6\.7% \| 11.500000 -> 15.500000 \| - \| 1234 \| ok \|$' "llm.c's step lines: ms, tokens/s, MFU by the script's formula (not llm.c's -100%), loss, device memory"
expect '^\| learned \| 32 \| [0-9.]+ \| [0-9]+ \| [0-9.]+% \| [0-9.]+ -> [0-9.]+ \| [0-9.]+ \| 1234 \| ok \|$' "the trainer's step lines, MFU and peak memory (emulated)"
expect '^\| cable, GPT-Small, -x 0: .* \| FAIL \(exit 0 without its success line\) \|$' "an evaluation without its 16k row is a FAIL"
expect '^\| kerple \| ok \|$' "the evaluation memory of the kit's one attention path"
expect '^\| compute-sanitizer.s probe .* \| compute-sanitizer unavailable: Device not supported' "a compute-sanitizer the runtime refuses: the probe says so"
n=$(grep -cE '^\| (memcheck|racecheck) \| attention_kerple check \| - \| - \| SKIPPED \(compute-sanitizer unavailable: Device not supported' "$S")
[ "$n" = 2 ] && [ "$(grep -cE $'^(sanitizer_probe|memcheck_|racecheck_).*\t0\tSKIPPED \\(compute-sanitizer unavailable' "$R")" = 3 ] &&
    pass "a pretended GPU: every compute-sanitizer row unavailable, at no cost, and no FAIL for it" ||
    fail "a pretended GPU: compute-sanitizer's rows ($n) not all unavailable at no cost: $(grep -E '^(sanitizer_probe|memcheck|racecheck)' "$R" | tr '\t\n' ' ;')"
expect '^\[[0-9]+ s\] end: ' "the summary ends"
# a driver's error at the device probe: its words, not "no CUDA device"; a hung nvidia-smi
# holds the command 10 s at most; tar's exit 1 (a log that grew while it was read) still packs
# the logs
start=$(date +%s)
DEADLINE=8 GPU_CHECKS_WORK=$D/work_driver GPU_STUB_DEVICE_ERROR="CUDA driver version is insufficient for CUDA runtime version" GPU_STUB_TAR_CHANGED=1 \
    GPU_STUB_HANG=nvidia-smi timeout 60 bash dev/gpu_checks.sh 1 "$D/out_driver" > /dev/null 2>&1
took=$(( $(date +%s) - start ))
grep -q "the CUDA device does not answer (.*CUDA driver version is insufficient.*nvidia-smi: nothing" "$D/out_driver/summary1.md" &&
    ! grep -q "no CUDA device (" "$D/out_driver/summary1.md" && [ $took -le 30 ] &&
    pass "a driver's error at the device probe is reported in its words; a hung nvidia-smi held the command $took s" ||
    fail "a driver's error at the device probe, nvidia-smi hung: $took s, $(grep -m1 -iE 'device' "$D/out_driver/summary1.md")"
[ "$(tar -tzf "$D/out_driver/logs1.tar.gz" 2>/dev/null | grep -c "logs1/device.log")" = 1 ] && [ -z "$(ls "$D/out_driver" | grep tmp)" ] &&
    pass "the logs packed although tar ended in exit 1 (a file that changed)" || fail "tar's exit 1: no logs1.tar.gz with the logs: $(ls "$D/out_driver")"

# a kit whose libraries the GPU machine lacks is rebuilt there (make gpu-kit-bins); a rebuild that
# fails ends the command, and the kit is never taken from what the rebuild did not make
rm -rf "$D/stage_nolib" && cp -r "$D/stage_gpu" "$D/stage_nolib" && cp "$D/needs_fake" "$D/stage_nolib/bin/" && echo "bin needs_fake" >> "$D/stage_nolib/manifest"
mkdir -p "$D/tools_make" && printf '#!/bin/sh\nexec bash %s make "$@"\n' "$PWD/tests/gpu_stub.sh" > "$D/tools_make/make" && chmod +x "$D/tools_make/make"
KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage_nolib" "$D/kit_nolib" > /dev/null || fail "the kit that needs a missing library"
GPU_KIT=$D/kit_nolib GPU_CHECKS_WORK=$D/work_nolib PATH=$PWD/$D/tools_make:$PATH bash dev/gpu_checks.sh 1 "$D/out_nolib" > /dev/null 2>&1
S=$D/out_nolib/summary1.md
grep -q "libraries not found: libgpulease_fake.so" "$S" && grep -q "FAIL: the rebuild: FAIL (exit 2" "$S" && ! grep -q "libraries: all found" "$S" &&
    pass "a kit whose library is missing: the rebuild ran, failed, and the command stopped there" || fail "a kit whose library is missing: $(grep -E 'librar|rebuild' "$S")"
# python3 without torch: the GPU machine's python with torch (GPU_CHECKS_PYTHON, a stand-in here)
printf '#!/bin/sh\nexec python3 "$@"\n' > "$D/tools_make/torch_python" && chmod +x "$D/tools_make/torch_python"
DEADLINE=40 GPU_CHECKS_WORK=$D/work_py GPU_CHECKS_PYTHON=$PWD/$D/tools_make/torch_python bash dev/gpu_checks.sh 1 "$D/out_py" > /dev/null 2>&1
py=$PWD/$D/tools_make/torch_python
python3 -c "import torch" 2> /dev/null && py=python3 # a python3 with torch is taken first
grep -q "SKIPPED ($py has no torch or no transformers)" "$D/out_py/summary1.md" &&
    pass "python3 without torch: the checks take GPU_CHECKS_PYTHON" || fail "python3 without torch: $(grep -m1 'HF export' "$D/out_py/summary1.md")"

# command 3 with a pretended GPU: a kit whose command 1 (another lease's results, copied beside
# it as results1.tsv) showed learned equal and kerple not; the study of the entries that pass
# runs with the emulated CUDA trainer on a tiny task study; the deadline stops one that is slow
section=$failed
files=("$D/stub=test_gpt2_learned" "$D/stub=test_gpt2cu_learned" "$D/stub=test_gpt2cu_learned_fp32" "$D/stub=test_gpt2_kerple" "$D/stub=test_gpt2cu_kerple"
       "$D/stub=test_gpt2cu_kerple_fp32" "$D/stub=train_gpt2cu_learned" "$D/stub=train_gpt2cu_nope" "$D/stub=mma_check" "$kit_tasks")
KIT_STEMS="learned kerple" KIT_PES="learned kerple" KIT_BENCH=learned KIT_EVAL=learned KIT_TASKS="learned kerple_dape1x3 nope" \
    bash dev/gpu_kit.sh stage "$D/stage_tasks" "${files[@]}" > /dev/null && KIT_XZ=-0 bash dev/gpu_kit.sh pack "$D/stage_tasks" "$D/kit_tasks" > /dev/null ||
    fail "the task study's kit"
printf 'test_learned\t9\tok\ntest_learned_fp32\t9\tok\nattention_learned\t3\tok\nattention_learned_fp32\t3\tok\ntest_kerple\t1\tFAIL (signal SEGV)\n' > "$D/kit_tasks/results1.tsv"
tiny_study=(GPU_TASKS_N=3 GPU_TASKS_MODEL=task GPU_TASKS_STEPS=3 GPU_TASKS_B=4 GPU_TASKS_WARMUP=1 GPU_TASKS_LENGTHS=2,3,5 GPU_TASKS_TEST=4 GPU_TASKS_JOBS=2)
# (exit 1: the entries not run are no success)
env "${tiny_study[@]}" GPU_TASKS_TASKS=copy GPU_KIT=$D/kit_tasks GPU_CHECKS_WORK=$D/work_tasks DEADLINE=200 bash dev/gpu_checks.sh 3 "$D/out_tasks" > "$D/run_tasks.log" 2>&1
outputs "$D/out_tasks" 3
S=$D/out_tasks/summary3.md
grep -qx '| learned | yes |' "$S" && grep -qx '| kerple_dape1x3 | no: not run (no stem of its DAPE variant (_dape1x3) in command 1) |' "$S" &&
    grep -qx '| nope | no: not run (not a stem of command 1) |' "$S" && pass "command 3: learned runs (command 1 showed it equal), kerple_dape1x3 and nope do not" ||
    fail "command 3: the entries' rows: $(grep -E '^\| (learned|kerple_dape1x3|nope) \|' "$S" | tr '\n' ';')"
grep -qE '^\| the study \(N=3 .*\): Runs finished: 1 of the 1 planned .*\| ok \|$' "$S" && grep -qE '^\| copy \| learned_s1 \| 3/3 \| [0-9.]+ \| [0-9.]+ \| evaluated \|$' "$S" &&
    [ "$(grep -c '^learned,1,kerple_dape1x3,' "$D/out_tasks/tasks.csv")" = 3 ] && [ -s "$D/out_tasks/tasks.md" ] &&
    pass "command 3: the study ran on the CUDA trainer (emulated): $(grep -m1 '^Runs finished' "$D/out_tasks/tasks.md"), its step reached and ms/step, tasks.md and tasks.csv back" ||
    fail "command 3: the study: $(grep -E 'study|copy' "$S" | tr '\n' ';') tasks.csv: $(cat "$D/out_tasks/tasks.csv" 2>&1 | head -n 3)"
start=$(date +%s)
env "${tiny_study[@]}" GPU_TASKS_TASKS="copy reverse" GPU_STUB_SLOW="train_gpt2cu_learned=100" GPU_KIT=$D/kit_tasks GPU_CHECKS_WORK=$D/work_tasks_late DEADLINE=60 \
    bash dev/gpu_checks.sh 3 "$D/out_tasks_late" > /dev/null 2>&1
took=$(( $(date +%s) - start ))
grep -qE '^\| the study .*Runs finished: 0 of the 2 planned.*\| ok, not every run: the deadline' "$D/out_tasks_late/summary3.md" && grep -qx tasks "$D/out_tasks_late/left3.txt" && [ $took -le 65 ] &&
    pass "command 3: the deadline stopped the study's slow runs after $took s, the unit left (left3.txt)" ||
    fail "command 3 under a deadline: $took s, $(grep -E '^\| the study' "$D/out_tasks_late/summary3.md"), left: $(cat "$D/out_tasks_late/left3.txt" 2>&1)"
[ -e "$D/work/left1.txt" ] && [ ! -s "$D/work/left1.txt" ] || fail "command 3 touched command 1's left1.txt"
[ $failed != $section ] || pass "command 3: its gate, its study and its deadline"

# 5. the deadline: a stand-in run that needs 20 s and a 16 s deadline: stopped, left, no FAIL
export GPU_CHECKS_WORK=$D/work_late
start=$(date +%s)
DEADLINE=16 GPU_STUB_SLOW="mma_check=20" bash dev/gpu_checks.sh 1 "$D/out_late" > "$D/run_late.log" 2>&1
took=$(( $(date +%s) - start ))
R=$D/work_late/logs1/results.tsv
if [ $took -le 22 ]; then pass "deadline 16 s: command 1 ended after $took s"; else fail "deadline 16 s: command 1 took $took s"; fi
grep -q $'^mma_check\t[1-9][0-9]*\tnot run (deadline)$' "$R" && [ -e "$D/work_late/logs1/mma_check.log" ] && grep -qx mma "$D/out_late/left1.txt" &&
    pass "deadline: mma_check, stopped by the deadline after $(grep ^mma_check "$R" | cut -f2) s, is not run (deadline) and left" ||
    fail "deadline: mma_check, stopped by the deadline: $(grep ^mma_check "$R" | tr '\t' ' '), left: $(tr '\n' ';' < "$D/out_late/left1.txt")"
grep -q $'\tFAIL' "$R" && fail "deadline: a FAIL in a run the deadline stopped: $(grep $'\tFAIL' "$R" | tr '\t\n' ' ;')"
grep -qx "bench learned 32" "$D/out_late/left1.txt" && grep -qx "eval" "$D/out_late/left1.txt" && grep -qx "test kerple" "$D/out_late/left1.txt" ||
    fail "deadline: left1.txt lacks the units not reached: $(tr '\n' ';' < "$D/out_late/left1.txt")"
# minimum times: with a 30 s deadline no trainer (30 s) and no compute-sanitizer run (60 s) starts
DEADLINE=30 GPU_CHECKS_WORK=$D/work_min bash dev/gpu_checks.sh 1 "$D/out_min" > /dev/null 2>&1
R=$D/work_min/logs1/results.tsv
n=$(grep -cE $'^(bench_|memcheck_|racecheck_|eval_).*\t0\tnot run \\(deadline\\)$' "$R")
if [ "$n" = 7 ] && [ -z "$(ls "$D/work_min/logs1" | grep -E '^(bench_|memcheck_|racecheck_|eval_).*\.log$')" ] && grep -q $'^mma_check\t.*\tok$' "$R" &&
   grep -qx "bench llm.c 8" "$D/out_min/left1.txt" && grep -qx '| llm.c | 8 | - | - | - | - | - | - | not run (deadline) |' "$D/out_min/summary1.md"; then pass "deadline 30 s: the trainers, compute-sanitizer and the evaluation are not started (their minimum time) and left"
else fail "deadline 30 s: units started with less than their minimum time: $(grep -E '^(bench_|memcheck_|racecheck_|eval_)' "$R" | tr '\t\n' ' ;') logs: $(ls "$D/work_min/logs1" | tr '\n' ' ')"; fi
# command 2 on the same machine: what command 1 left, compute-sanitizer working (errors and
# warnings apart), the emulated kernels timed
DEADLINE=150 GPU_CHECKS_SHAPE="64 1 2 32" GPU_STUB_SANITIZER_ERRORS=memcheck:attention_kerple GPU_STUB_SANITIZER_WARNINGS=racecheck:attention_kerple \
    bash dev/gpu_checks.sh 2 "$D/out_retry" > "$D/run_retry.log" 2>&1
S=$D/out_retry/summary2.md
grep -q "retrying what command 1 left" "$S" && grep -qE '^\| learned \| 32 \| .* \| ok \|$' "$S" && grep -qE '^\| mma_check .* \| ok \|$' "$S" &&
    pass "deadline: command 2 retried the $(wc -l < "$D/out_late/left1.txt") units command 1 left" ||
    fail "deadline: command 2 did not retry what command 1 left ($S)"
[ "$(grep -n '^| mma_check' "$S" | cut -d: -f1)" -lt "$(grep -n '^| attention (T B NH HS' "$S" | cut -d: -f1)" ] 2>/dev/null &&
    [ "$(grep -n '^| attention (T B NH HS' "$S" | cut -d: -f1)" -lt "$(grep -n '^| learned | 32' "$S" | cut -d: -f1)" ] 2>/dev/null &&
    pass "command 2: the retried correctness first, then the timing, then the rest" || fail "command 2: not in the order correctness, timing, the rest ($S)"
grep -qx '| memcheck | attention_kerple check | 2 | 0 | FAIL (2 compute-sanitizer errors) |' "$S" && grep -qx '| racecheck | attention_kerple check | 0 | 3 | ok |' "$S" &&
    grep -q -- "--kernel-name-exclude regex=gemm|" "$D/work_late/logs2/memcheck_attention_kerple.log" &&
    pass "command 2: compute-sanitizer filtered to the project's kernels, its warnings (ok) and errors (FAIL) apart" ||
    fail "command 2: compute-sanitizer's rows: $(grep -E '^\| (memcheck|racecheck) ' "$S" | tr '\n' ';')"
grep -qx '| ours: kerple | 0.000 | 0.00 | 0.000 | 0.00 | timed |' "$S" && grep -qx '| ours: cope | 0.000 | - | 0.000 | - | timed |' "$S" &&
    pass "command 2: the timing rows of the emulated kernels' time mode (no clock: 0 ms)" ||
    fail "command 2: no timing rows of kerple's and cope's emulated kernels in $S"
# command 2 on a fresh machine, 200 s of the lease left: its deadline 200 - 120 - 25; the
# references of the retried units (a slow one for learned) written side by side first
printf 'test learned\ntest kerple\n' > "$D/kit_gpu/left1.txt"
GPU_CHECKS_WORK=$D/work_cold GPU_CHECKS_SHAPE="64 1 2 32" GPU_STUB_SLOW="test_gpt2_learned=4 test_gpt2_kerple=2" \
    bash dev/gpu_checks.sh 2 "$D/out_cold" 200 > "$D/run_cold.log" 2>&1
S=$D/out_cold/summary2.md
R=$D/work_cold/logs2/results.tsv
grep -q "on a fresh machine" "$S" && grep -q "deadline 55 s (the lease's 200 s left less a machine's start (120 s) and 25)" "$S" &&
    pass "command 2 on a fresh machine: deadline 55 s from the lease's 200 s left" || fail "command 2 on a fresh machine: $(grep -m1 -E 'deadline' "$S")"
[ "$(line_of "$R" ref_kerple)" -gt 0 ] && [ "$(line_of "$R" ref_kerple)" -lt "$(line_of "$R" test_learned)" ] && grep -q $'^test_kerple\t.*\tok$' "$R" &&
    pass "command 2: the retried units' references written side by side before the units" ||
    fail "command 2: the references not written first: $(cut -f1,3 "$R" | tr '\t\n' ' ;')"

[ $failed = 0 ] && echo "gpu_lease: the dry run passed" || echo "gpu_lease: $failed checks FAILED (logs: $D)"
[ $failed = 0 ]
