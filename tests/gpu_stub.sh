#!/usr/bin/env bash
# The stand-ins of the GPU kit's programs in the dry run of dev/gpu_checks.sh (tests/gpu_lease.sh),
# run by tests/gpu_stub.c as: gpu_stub.sh NAME ARGS..., NAME the program it stands for.
#
#   GPU_STUB=none     no CUDA device: each program prints its own skip line or error, as the real
#                     one does without a GPU (test_gpt2.cu, dev/cuda/*.cu, train_gpt2.cu, llm.c)
#   GPU_STUB=device   a GPU: each prints its success line (the CPU reference writers write empty
#                     files); the trainers are the CUDA trainer run in the CPU emulation
#                     (GPU_STUB_TRAINER) on a tiny checkpoint (GPU_STUB_MODEL) and shards of its
#                     vocabulary (GPU_STUB_DATA/tiny_{train,val}_000000.bin); llm.c's step lines
#                     are written out as its train_gpt2.cu prints them
#   GPU_STUB_CRASH, GPU_STUB_HANG, GPU_STUB_FAIL   words NAME or NAME:ARG1 (the first argument):
#                     those runs end by SIGSEGV, never end, or fail a check instead
set -u
name=$1
shift
for w in ${GPU_STUB_CRASH:-}; do [ "$w" = "$name" ] || [ "$w" = "$name:${1:-}" ] && kill -SEGV $$; done
for w in ${GPU_STUB_HANG:-}; do [ "$w" = "$name" ] || [ "$w" = "$name:${1:-}" ] && exec sleep 100000; done
for w in ${GPU_STUB_FAIL:-}; do
    if [ "$w" = "$name" ] || [ "$w" = "$name:${1:-}" ]; then echo "  a planted check                FAIL  (1, tolerance 0.1)"; echo "1 FAILURES"; exit 1; fi
done

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
    test_gpt2cu_*) [ "${1:-}" = device ] || echo "all GPU tests passed (${name#test_gpt2cu_}, stub)" ;;
    mma_check) echo ok ;;
    test_gpt2_*) : > "$2_model.bin"; : > "$2_state.bin"; echo "wrote $2_model.bin and $2_state.bin (stub)" ;;
    train_gpt2cu_*)
        tiny=(-e "$GPU_STUB_MODEL" -i "$GPU_STUB_DATA/tiny_train_000000.bin" -j "$GPU_STUB_DATA/tiny_val_000000.bin" -W -1)
        if [[ " $* " == *" -x 0 "* ]]; then exec "$GPU_STUB_TRAINER" "${tiny[@]}" -x 0 -E 32 -K 64; fi
        exec "$GPU_STUB_TRAINER" "${tiny[@]}" -b 2 -t 32 -x 5 -u 1 -m 0 -s 0 -E 32 -K 64 ;;
    llmc_train_gpt2cu)
        for s in 1 2 3 4 5; do
            printf 'step %4d/5 | loss %7.6f (+0.00z)| norm %6.4f (+0.00z)| lr 6.00e-04 | %.2f ms | 40.0%% bf16 MFU | 80000 tok/s\n' $s "1$s.5" 1.5 100
        done ;;
    *) echo "gpu_stub: no stand-in for $name" >&2; exit 2 ;;
esac
