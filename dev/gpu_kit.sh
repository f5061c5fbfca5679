#!/usr/bin/env bash
# The GPU kit (make gpu-kit; docs/gpu-lease.md): the binaries that dev/gpu_checks.sh runs on
# a GPU machine, built on this one, stripped and packed, so that a short lease builds nothing.
#
#   dev/gpu_kit.sh stage DIR FILE...   strips FILE... into DIR/bin (a fresh DIR; FILE=NAME: under
#                                      that name), writes DIR/manifest (KIT_STEMS, KIT_PES,
#                                      KIT_BENCH from the environment: the Makefile's lists) and
#                                      checks the libraries; KIT_LLMC: a folder made by `llmc`
#                                      below, whose sources go to DIR/llmc (a rebuild on the GPU
#                                      machine starts there)
#   dev/gpu_kit.sh libs FILE...        the library check alone: every FILE needs only the
#                                      libraries a GPU machine with the CUDA toolkit and gcc has
#   dev/gpu_kit.sh pack DIR KIT        DIR (staged) into KIT/kit.tar.xz, at most KIT_MB (40) MB
#   dev/gpu_kit.sh llmc SRC DIR        llm.c's train_gpt2cu from the tree SRC: copied to DIR, its
#                                      CUDA 13 fix applied to the copy, built without MPI, NCCL,
#                                      cuDNN and NVML into DIR/llmc_train_gpt2cu
#
# The manifest: "revision", "stems", "pes", "bench", "llmc" lines, one "bin NAME" line per binary,
# and "glibc" (the newest version of the C library they need); dev/gpu_checks.sh takes its lists
# from it and checks the kit against it.
set -euo pipefail

die() { echo "gpu_kit.sh: $*" >&2; exit 1; }

# the libraries a binary may need: cuBLAS(Lt) of the CUDA toolkit (cudart is linked statically),
# libgomp, and the C and C++ runtimes
ALLOWED='^(libcublasLt|libcublas|libgomp|libstdc\+\+|libgcc_s|libm|libc|libpthread|libdl|librt|ld-linux-x86-64)\.so(\.[0-9]+)*$'

libs() {
    local bad=0 f lib
    for f in "$@"; do
        [ -f "$f" ] || die "libs: no file $f"
        for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            if ! [[ $lib =~ $ALLOWED ]]; then
                echo "gpu_kit.sh: $f needs $lib, which a GPU machine may lack (build it with NO_MPI=1, NO_BLAS=1)" >&2
                bad=1
            fi
        done
    done
    return $bad
}

stage() {
    local dir=$1 f
    shift
    [ $# -gt 0 ] || die "stage: no files"
    for v in KIT_STEMS KIT_PES KIT_BENCH; do [ -n "${!v:-}" ] || die "stage: $v is not set (make gpu-kit sets it)"; done
    rm -rf "$dir"
    mkdir -p "$dir/bin"
    local revision
    revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD 2>/dev/null || revision="$revision+changes"
    {
        echo "revision $revision"
        echo "stems $KIT_STEMS"
        echo "pes $KIT_PES"
        echo "bench $KIT_BENCH"
        echo "llmc $([ -n "${KIT_LLMC:-}" ] && cat "$KIT_LLMC/REVISION" || echo none)"
    } > "$dir/manifest"
    if [ -n "${KIT_LLMC:-}" ]; then
        mkdir -p "$dir/llmc"
        cp -r "$KIT_LLMC/Makefile" "$KIT_LLMC/train_gpt2.cu" "$KIT_LLMC/llmc" "$KIT_LLMC/REVISION" "$dir/llmc/"
    fi
    local name
    for f in "$@"; do
        name=$(basename "${f#*=}")
        f=${f%%=*}
        [ -f "$f" ] || die "stage: no file $f"
        strip -o "$dir/bin/$name" "$f"
        echo "bin $name" >> "$dir/manifest"
    done
    # the newest C library the binaries need (a GPU machine with an older one rebuilds the kit)
    echo "glibc $(objdump -T "$dir"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 | cut -c7-)" >> "$dir/manifest"
    libs "$dir"/bin/*
    echo "staged $(ls "$dir/bin" | wc -l) binaries in $dir, their libraries allowed ($(head -n 1 "$dir/manifest"))"
}

pack() {
    local dir=$1 kit=$2
    [ -f "$dir/manifest" ] || die "pack: $dir is not a staged kit (no manifest)"
    mkdir -p "$kit"
    # -T0: every core; KIT_XZ: the level (-6; the dry run packs at -0)
    tar -C "$dir" -cf - manifest bin $([ -d "$dir/llmc" ] && echo llmc) | xz -T0 "${KIT_XZ:--6}" > "$kit/kit.tar.xz.tmp"
    local mb=$(( $(stat -c %s "$kit/kit.tar.xz.tmp") / 1000000 ))
    if [ $mb -ge "${KIT_MB:-40}" ]; then
        rm -f "$kit/kit.tar.xz.tmp"
        die "pack: the kit takes $mb MB, more than ${KIT_MB:-40}"
    fi
    mv "$kit/kit.tar.xz.tmp" "$kit/kit.tar.xz"
    echo "$kit/kit.tar.xz: $(ls "$dir/bin" | wc -l) binaries, $(du -sm "$dir/bin" | cut -f1) MB stripped, $mb MB packed ($(head -n 1 "$dir/manifest"))"
}

# llm.c's HEAD calls cudaMemAdvise with cudaCpuDeviceId, an int; CUDA 13 takes a
# cudaMemLocation there: the host's location is the same advice
llmc() {
    local src=$1 dir=$2
    [ -f "$src/train_gpt2.cu" ] && [ -f "$src/llmc/cuda_utils.cuh" ] || die "llmc: $src is not a tree of karpathy/llm.c (no train_gpt2.cu, llmc/cuda_utils.cuh)"
    [ "$(realpath "$src")" != "$(realpath -m "$dir")" ] || die "llmc: the copy would replace its source $src"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$src/Makefile" "$src/train_gpt2.cu" "$src/llmc" "$dir/"
    local old='cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)'
    local new='cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})'
    if [ "$(grep -cF "$old" "$dir/llmc/cuda_utils.cuh")" = 1 ]; then
        sed -i "s/$old/$new/" "$dir/llmc/cuda_utils.cuh"
    elif ! grep -qF "$new" "$dir/llmc/cuda_utils.cuh"; then
        die "llmc: $src/llmc/cuda_utils.cuh has neither llm.c's cudaMemAdvise call nor the fix"
    fi
    if [ -f "$src/REVISION" ]; then cp "$src/REVISION" "$dir/"  # a kit's copy
    elif [ -e "$src/.git" ]; then git -C "$src" rev-parse --short HEAD > "$dir/REVISION"
    else echo "unknown" > "$dir/REVISION"; fi
    # the flags as make: no MPI, NCCL or cuDNN; sm_90; no NVML (nvml.h is not in the toolkit here)
    make -C "$dir" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 \
        NVCC_LDFLAGS="-lcublas -lcublasLt" > "$dir/build.log" 2>&1 || { tail -n 20 "$dir/build.log" >&2; die "llmc: the build failed ($dir/build.log)"; }
    cp "$dir/train_gpt2cu" "$dir/llmc_train_gpt2cu"
}

[ $# -ge 1 ] || die "usage: gpu_kit.sh stage DIR FILE... | libs FILE... | pack DIR KIT | llmc SRC DIR"
cmd=$1
shift
case $cmd in
    stage) [ $# -ge 2 ] || die "usage: gpu_kit.sh stage DIR FILE..."; stage "$@" ;;
    libs) [ $# -ge 1 ] || die "usage: gpu_kit.sh libs FILE..."; libs "$@" ;;
    pack) [ $# -eq 2 ] || die "usage: gpu_kit.sh pack DIR KIT"; pack "$@" ;;
    llmc) [ $# -eq 2 ] || die "usage: gpu_kit.sh llmc SRC DIR"; llmc "$@" ;;
    *) die "unknown command '$cmd' (stage, libs, pack, llmc)" ;;
esac
