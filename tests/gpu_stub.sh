#!/usr/bin/env bash
# The stand-ins of the GPU kit's programs and of the GPU machine's tools in the dry run of
# dev/gpu_checks.sh (tests/gpu_lease.sh), run by tests/gpu_stub.c (or a tools folder's script)
# as: gpu_stub.sh NAME ARGS..., NAME the program it stands for.
#
#   GPU_STUB=none     no CUDA device: each program prints its own skip line or error, as the real
#                     one does without a GPU (test_gpt2.cu, dev/cuda/*.cu, train_gpt2.cu, llm.c)
#   GPU_STUB=device   a GPU: each prints its success line (test_gpt2cu its check lines, the CPU
#                     reference writers write empty files); the trainers are the CUDA trainer run
#                     in the CPU emulation (GPU_STUB_TRAINER) on a tiny checkpoint
#                     (GPU_STUB_MODEL) and shards of its vocabulary
#                     (GPU_STUB_DATA/tiny_{train,val}_000000.bin), or, given task files (-A),
#                     on the arguments given (the tasks' study); llm.c's table and step lines
#                     are written out as its train_gpt2.cu prints them
#   GPU_STUB_CRASH, GPU_STUB_HANG, GPU_STUB_FAIL   words NAME or NAME:ARG1 (the first argument):
#                     those runs end by SIGSEGV, never end, or fail a check instead
#   GPU_STUB_SLOW     words NAME=SECONDS or NAME:ARG1=SECONDS: those runs take that long first
#   GPU_STUB_DEVICE_ERROR   test_gpt2cu's device probe fails with these words (a driver's error)
#
# The GPU machine's tools (GPU_STUB=device):
#   nvidia-smi          an H100 SXM (--query-gpu=name,...), its memory in use (memory.used)
#   make                a build that fails (the kit's rebuild on the GPU machine)
#   tar                 the real one; with GPU_STUB_TAR_CHANGED, an archive it writes ends in
#                       exit 1, as when a file grows while it is read ("file changed as we read it")
#   compute-sanitizer   GPU_STUB_SANITIZER=refused: a runtime that refuses it (gVisor's "Device
#                       not supported", then error 999 in the program); else it prints its
#                       options, the program's success line (the program is not run) and the
#                       tool's summary: 2 errors for the words TOOL:PROGRAM of
#                       GPU_STUB_SANITIZER_ERRORS, 3 warnings (racecheck's) for those of
#                       GPU_STUB_SANITIZER_WARNINGS
set -u
name=$1
shift
match() { [ "$1" = "$name" ] || [ "$1" = "$name:${2:-}" ]; }
for w in ${GPU_STUB_SLOW:-}; do match "${w%%=*}" "${1:-}" && sleep "${w#*=}"; done
for w in ${GPU_STUB_CRASH:-}; do match "$w" "${1:-}" && kill -SEGV $$; done
for w in ${GPU_STUB_HANG:-}; do match "$w" "${1:-}" && exec sleep 100000; done
for w in ${GPU_STUB_FAIL:-}; do
    if match "$w" "${1:-}"; then echo "  a planted check                FAIL  (1, tolerance 0.1)"; echo "1 FAILURES"; exit 1; fi
done

if [ "$name" = tar ]; then
    command -p tar "$@" || exit
    [[ -z "${GPU_STUB_TAR_CHANGED:-}" || " $* " != *" -czf "* ]] || { echo "tar: a log: file changed as we read it" >&2; exit 1; }
    exit 0
fi

if [ "$name" = make ]; then # a rebuild of the kit on the GPU machine that fails
    echo "make: *** [gpukit.mk] the stand-in's build fails"
    exit 2
fi

if [ "${GPU_STUB:-none}" = none ]; then
    case $name in
        test_gpt2cu_*) [ "${1:-}" = device ] && exit 1; echo "test_gpt2cu: no CUDA device, skipped" ;;
        attention_cope) echo "attention_cope: no CUDA device, skipped" ;;
        attention_*) echo "attention_bias: no CUDA device, skipped" ;;
        mma_check) echo "mma_check: no CUDA device, skipped" ;;
        train_gpt2cu_*) echo "error: no CUDA device available: the CUDA trainer needs an NVIDIA GPU" >&2; exit 1 ;;
        llmc_train_gpt2cu) printf '[CUDA ERROR] at file llmc/cuda_common.h:60:\nno CUDA-capable device is detected\n'; exit 1 ;;
        *) echo "gpu_stub: no stand-in for $name" >&2; exit 2 ;;
    esac
    exit 0
fi

case $name in
    test_gpt2cu_*)
        case ${1:-} in
            device) [ -z "${GPU_STUB_DEVICE_ERROR:-}" ] || { echo "error: CUDA error 35 in cudaGetDeviceCount: ${GPU_STUB_DEVICE_ERROR}"; exit 1; } ;;
            reference)
                echo "  logits: relative L2 error (max abs 1.00e-02)                ok    (0.004, tolerance 0.02)"
                echo "  grad wte         12800: relative L2 error (max abs 2.00e-03)  ok    (0.025, tolerance 0.05)"
                echo "all GPU tests passed (${name#test_gpt2cu_}, stub)" ;;
            attention)
                echo "  dq, dk, dv                         rel L2 3.00e-03  max abs 1.00e-02  ok   (tolerance 1e-02)"
                echo "all GPU tests passed (${name#test_gpt2cu_}, stub)" ;;
            *) echo "all GPU tests passed (${name#test_gpt2cu_}, stub)" ;;
        esac ;;
    mma_check) echo ok ;;
    test_gpt2_*) : > "$2_model.bin"; : > "$2_state.bin"; echo "wrote $2_model.bin and $2_state.bin (stub)" ;;
    train_gpt2cu_*)
        if [[ " $* " == *" -A "* ]]; then exec "$GPU_STUB_TRAINER" "$@"; fi # the tasks' study: its own data and settings
        tiny=(-e "$GPU_STUB_MODEL" -i "$GPU_STUB_DATA/tiny_train_000000.bin" -j "$GPU_STUB_DATA/tiny_val_000000.bin" -W -1)
        if [[ " $* " == *" -x 0 "* ]]; then exec "$GPU_STUB_TRAINER" "${tiny[@]}" -x 0 -E 32 -K 64; fi
        exec "$GPU_STUB_TRAINER" "${tiny[@]}" -b 2 -t 32 -x 5 -u 1 -m 0 -s 0 -E 32 -K 64 ;;
    llmc_train_gpt2cu)
        printf '| num_layers L          | %-50d |\n| channels C            | %-50d |\n| num_parameters        | %-50d |\n' 12 768 124475904
        for s in 1 2 3 4 5; do
            printf 'step %4d/5 | loss %7.6f (+0.00z)| norm %6.4f (+0.00z)| lr 6.00e-04 | %.2f ms | -100.0%% bf16 MFU | 80000 tok/s\n' $s "1$s.5" 1.5 100
        done ;;
    nvidia-smi)
        case "$*" in
            *--query-gpu=name*) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04" ;;
            *memory.used*) echo 1234 ;;
            *) echo "NVIDIA-SMI 580.159.04 (stand-in)" ;;
        esac ;;
    compute-sanitizer)
        tool=memcheck
        echo "========= COMPUTE-SANITIZER (stand-in) $*"
        while [ $# -gt 0 ] && [[ $1 == --* ]]; do [ "$1" = --tool ] && tool=$2; shift 2; done
        prog=$(basename "$1")
        if [ "${GPU_STUB_SANITIZER:-}" = refused ]; then
            echo "========= Error: Device not supported. Please refer to the \"Supported Devices\" section of the sanitizer documentation"
            echo "error: CUDA error 999 (unknown error) in cudaMalloc"
            echo "========= ERROR SUMMARY: 0 errors"
            exit 1
        fi
        case $prog in test_gpt2cu_*) echo "all GPU tests passed (${prog#test_gpt2cu_}, stub)" ;; *) echo ok ;; esac
        e=0 w=0
        for x in ${GPU_STUB_SANITIZER_ERRORS:-}; do [ "$x" = "$tool:$prog" ] && e=2; done
        for x in ${GPU_STUB_SANITIZER_WARNINGS:-}; do [ "$x" = "$tool:$prog" ] && w=3; done
        if [ $tool = racecheck ]; then echo "========= RACECHECK SUMMARY: $((e + w)) hazards displayed ($e errors, $w warnings)"
        else echo "========= ERROR SUMMARY: $e errors"; fi ;;
    *) echo "gpu_stub: no stand-in for $name" >&2; exit 2 ;;
esac
