#!/usr/bin/env bash
# The GPU kit (make gpu-kit; docs/gpu-lease.md): the binaries that dev/gpu_checks.sh runs on
# a GPU machine, built on this one, stripped and packed, so that a short lease builds nothing.
#
#   dev/gpu_kit.sh stage DIR FILE...   strips FILE... into DIR/bin (FILE=NAME: under that name),
#                                      writes DIR/manifest (KIT_STEMS, KIT_PES, KIT_BENCH,
#                                      KIT_EVAL, KIT_BLAS, KIT_TASKS (may be empty) from the
#                                      environment: the Makefile's lists) and checks the libraries; KIT_LLMC: a folder made
#                                      by `llmc` below, whose sources go to DIR/llmc (a rebuild on
#                                      the GPU machine starts there)
#   dev/gpu_kit.sh libs FILE...        the library check alone: every FILE needs only the
#                                      libraries a GPU machine with the CUDA toolkit and gcc has
#   dev/gpu_kit.sh pack DIR KIT        DIR (staged) into KIT/kit.tar.xz, at most KIT_MB (52) MB,
#                                      and its manifest beside it (KIT/kit.manifest)
#   dev/gpu_kit.sh llmc SRC DIR        llm.c's train_gpt2cu from SRC, a tree of llm.c or a tarball
#                                      of one (GitHub's): copied to DIR, its CUDA 13 fix applied
#                                      to the copy, built without MPI, NCCL and cuDNN, with NVML
#                                      where the toolkit has nvml.h, into DIR/llmc_train_gpt2cu
#   dev/gpu_kit.sh paths               the distinct attention paths among KIT_STEMS (below)
#
# The manifest: "revision", "stems", "pes", "bench", "eval", "tasks", "paths", "blas", "llmc" lines, one
# "bin NAME" line per binary, and "glibc" (the newest version of the C library they need);
# dev/gpu_checks.sh takes its lists from it and checks the kit against it.
#
# DIR of `stage` and `llmc` is made afresh: an existing DIR is deleted only when this script
# made it (its marker file .gpu_kit) or it is empty; any other folder is refused, untouched.
set -euo pipefail

die() { echo "gpu_kit.sh: $*" >&2; exit 1; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MARKER=.gpu_kit

# the libraries a binary may need: cuBLAS(Lt) of the CUDA toolkit (cudart is linked statically),
# NVML of the driver (llm.c's trainer where the toolkit has nvml.h), libgomp, and the C and C++
# runtimes; OpenBLAS is linked statically into the CPU reference writers
ALLOWED='^(libcublasLt|libcublas|libnvidia-ml|libgomp|libstdc\+\+|libgcc_s|libm|libc|libpthread|libdl|librt|ld-linux-x86-64)\.so(\.[0-9]+)*$'

libs() {
    local bad=0 f lib
    for f in "$@"; do
        [ -f "$f" ] || die "libs: no file $f"
        for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            if ! [[ $lib =~ $ALLOWED ]]; then
                echo "gpu_kit.sh: $f needs $lib, which a GPU machine may lack (the kit builds with NO_MPI=1 and OpenBLAS linked statically)" >&2
                bad=1
            fi
        done
    done
    return $bad
}

# fresh DIR: an existing DIR is deleted only when this script made it (its marker) or it is
# empty, so that a wrong argument never deletes a folder of someone else's
fresh_dir() {
    local dir=$1
    if [ -e "$dir" ] || [ -L "$dir" ]; then
        [ -d "$dir" ] && [ ! -L "$dir" ] || die "$dir exists and is no folder: not replacing it"
        [ -e "$dir/$MARKER" ] || [ -z "$(ls -A "$dir")" ] || die "$dir exists and was not made by gpu_kit.sh (no $MARKER in it): not deleting it"
        rm -rf "$dir"
    fi
    mkdir -p "$dir"
    echo "made by dev/gpu_kit.sh, which deletes and remakes this folder" > "$dir/$MARKER"
}

# the distinct attention paths among KIT_STEMS, by the registry (llmc/pe_list.h: name, file,
# kind) and the bias flags of pe/<file>.h: the first bias with a per-thread parameter gradient
# (PE_BIAS_GRAD), the first warp-level bias (PE_BIAS_WARP), every encoding with its own attention
# (ATTN), and every DAPE stem (a stem that is no encoding): each compiles other attention kernels
paths() {
    local name file kind thread="" warp="" s
    while read -r name file kind; do
        [[ " $KIT_STEMS " == *" $name "* ]] || continue
        case $kind in
            ATTN) echo "$name" ;;
            BIAS)
                if grep -q '^#define PE_BIAS_WARP' "$ROOT/pe/$file.h"; then [ -n "$warp" ] || { warp=$name; echo "$name"; }
                elif grep -q '^#define PE_BIAS_GRAD' "$ROOT/pe/$file.h"; then [ -n "$thread" ] || { thread=$name; echo "$name"; }; fi ;;
        esac
    done < <(sed -n 's/^ *X( *[0-9]*, *[A-Z0-9_]*, *\([a-z0-9_]*\), *\([a-z0-9_]*\), *\([A-Z]*\),.*/\1 \2 \3/p' "$ROOT/llmc/pe_list.h")
    for s in $KIT_STEMS; do
        grep -qE "^ *X\\( *[0-9]+, *[A-Z0-9_]+, *$s," "$ROOT/llmc/pe_list.h" || echo "$s"
    done
}

stage() {
    local dir=$1 f v
    shift
    [ $# -gt 0 ] || die "stage: no files"
    for v in KIT_STEMS KIT_PES KIT_BENCH KIT_EVAL KIT_BLAS; do [ -n "${!v:-}" ] || die "stage: $v is not set (make gpu-kit sets it)"; done
    # every input first: nothing is deleted or written for a call that cannot succeed
    for f in "$@"; do [ -f "${f%%=*}" ] || die "stage: no file ${f%%=*}"; done
    if [ -n "${KIT_LLMC:-}" ]; then
        for f in Makefile train_gpt2.cu llmc REVISION; do [ -e "$KIT_LLMC/$f" ] || die "stage: no $KIT_LLMC/$f (KIT_LLMC: a folder made by gpu_kit.sh llmc)"; done
    fi
    fresh_dir "$dir"
    mkdir -p "$dir/bin"
    local revision
    revision=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    git -C "$ROOT" diff --quiet HEAD 2>/dev/null || revision="$revision+changes"
    {
        echo "revision $revision"
        echo "stems $KIT_STEMS"
        echo "pes $KIT_PES"
        echo "bench $KIT_BENCH"
        echo "eval $KIT_EVAL"
        echo "tasks ${KIT_TASKS:-}"
        echo "paths $(paths | tr '\n' ' ' | sed 's/ $//')"
        echo "blas $KIT_BLAS"
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
    # sorted by name, so that the reference writers' copies of OpenBLAS lie side by side, and
    # -9 (a 64 MiB window), so that xz stores them once; -T0: every core; KIT_XZ: the level
    # (the dry run packs at -0)
    tar -C "$dir" --sort=name -cf - manifest bin $([ -d "$dir/llmc" ] && echo llmc) | xz -T0 "${KIT_XZ:--9}" > "$kit/kit.tar.xz.tmp"
    local mb=$(( $(stat -c %s "$kit/kit.tar.xz.tmp") / 1000000 ))
    # 52: what the run command carries is 64 MiB (67 MB), less the tree (5 MB) and
    # data/starter (4.6 MB), less room to grow
    if [ $mb -ge "${KIT_MB:-52}" ]; then
        rm -f "$kit/kit.tar.xz.tmp"
        die "pack: the kit takes $mb MB, more than ${KIT_MB:-52}"
    fi
    mv "$kit/kit.tar.xz.tmp" "$kit/kit.tar.xz"
    cp "$dir/manifest" "$kit/kit.manifest"
    echo "$kit/kit.tar.xz: $(ls "$dir/bin" | wc -l) binaries, $(du -sm "$dir/bin" | cut -f1) MB stripped, $mb MB packed ($(head -n 1 "$dir/manifest"))"
}

# llm.c's HEAD calls cudaMemAdvise with cudaCpuDeviceId, an int; CUDA 13 takes a
# cudaMemLocation there: the host's location is the same advice. Its revision: LLMC_REV, else
# the tarball's commit (git get-tar-commit-id), the tree's git HEAD, or a kit copy's REVISION.
llmc() {
    local src=$1 dir=$2 rev=${LLMC_REV:-}
    [ -e "$src" ] || die "llmc: no $src"
    if [ -d "$dir" ]; then # the copy must not hold its source, nor be it
        case "$(realpath "$src")/" in "$(realpath "$dir")"/*) die "llmc: $dir holds the source $src: not replacing it" ;; esac
    fi
    local tree=$src
    if [ -f "$src" ]; then # a tarball: unpacked into DIR/src
        local cat=cat
        case $src in *.gz|*.tgz) cat="gzip -dc" ;; *.xz) cat="xz -dc" ;; esac
        [ -n "$rev" ] || rev=$({ $cat "$src" | git get-tar-commit-id; } 2>/dev/null || true)
        fresh_dir "$dir"
        mkdir -p "$dir/src"
        $cat "$src" | tar -C "$dir/src" -xf - || die "llmc: $src does not unpack"
        tree=$(find "$dir/src" -name train_gpt2.cu -path '*/train_gpt2.cu' -printf '%h\n' | awk '{ print length, $0 }' | sort -n | head -n 1 | cut -d' ' -f2-)
        [ -n "$tree" ] || die "llmc: $src holds no train_gpt2.cu"
    fi
    [ -f "$tree/train_gpt2.cu" ] && [ -f "$tree/llmc/cuda_utils.cuh" ] || die "llmc: $src is not a tree of karpathy/llm.c (no train_gpt2.cu, llmc/cuda_utils.cuh)"
    if [ -z "$rev" ]; then
        if [ -f "$tree/REVISION" ]; then rev=$(cat "$tree/REVISION") # a kit's copy
        elif [ -e "$tree/.git" ]; then rev=$(git -C "$tree" rev-parse --short HEAD)
        else rev=unknown; fi
    fi
    [ -f "$src" ] || fresh_dir "$dir"
    cp -r "$tree/Makefile" "$tree/train_gpt2.cu" "$tree/llmc" "$dir/"
    rm -rf "$dir/src"
    echo "$rev" > "$dir/REVISION"
    local old='cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)'
    local new='cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})'
    if [ "$(grep -cF "$old" "$dir/llmc/cuda_utils.cuh")" = 1 ]; then
        sed -i "s/$old/$new/" "$dir/llmc/cuda_utils.cuh"
    elif ! grep -qF "$new" "$dir/llmc/cuda_utils.cuh"; then
        die "llmc: $src's llmc/cuda_utils.cuh has neither llm.c's cudaMemAdvise call nor the fix"
    fi
    # the flags as make: no MPI, NCCL or cuDNN; sm_90; NVML where the toolkit has nvml.h (llm.c
    # then uses it, and must link it)
    local nvcc nvml=""
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    [ -f "$(dirname "$nvcc")/../include/nvml.h" ] && nvml=-lnvidia-ml
    make -C "$dir" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 \
        NVCC_LDFLAGS="-lcublas -lcublasLt $nvml" > "$dir/build.log" 2>&1 || { tail -n 20 "$dir/build.log" >&2; die "llmc: the build failed ($dir/build.log)"; }
    [ -x "$dir/train_gpt2cu" ] || die "llmc: the build made no $dir/train_gpt2cu ($dir/build.log)"
    cp "$dir/train_gpt2cu" "$dir/llmc_train_gpt2cu"
    echo "llm.c $rev: $dir/llmc_train_gpt2cu${nvml:+ (with NVML)}"
}

[ $# -ge 1 ] || die "usage: gpu_kit.sh stage DIR FILE... | libs FILE... | pack DIR KIT | llmc SRC DIR | paths"
cmd=$1
shift
case $cmd in
    stage) [ $# -ge 2 ] || die "usage: gpu_kit.sh stage DIR FILE..."; stage "$@" ;;
    libs) [ $# -ge 1 ] || die "usage: gpu_kit.sh libs FILE..."; libs "$@" ;;
    pack) [ $# -eq 2 ] || die "usage: gpu_kit.sh pack DIR KIT"; pack "$@" ;;
    llmc) [ $# -eq 2 ] || die "usage: gpu_kit.sh llmc SRC DIR"; llmc "$@" ;;
    paths) [ -n "${KIT_STEMS:-}" ] || die "paths: KIT_STEMS is not set"; paths ;;
    *) die "unknown command '$cmd' (stage, libs, pack, llmc, paths)" ;;
esac
