#!/usr/bin/env bash
# The CUDA build's MPI and NCCL flags (cuda.mk, dev/cuda/mpi_flags.sh) with fake MPI wrappers
# of each style and fake NCCL installs: `make cuda-flags` must print the expected flags. The
# flags that only the host compiler knows are then given to nvcc on a one-line program.
#
#   bash tests/mpi_flags.sh
set -euo pipefail
cd "$(dirname "$0")/.."
W=build/fake_mpi
rm -rf "$W"
mkdir -p "$W"
fails=0

# a fake wrapper: the queries it answers (query=output lines), anything else fails as a compiler would
wrapper() {
    local name=$1
    shift
    {
        echo '#!/bin/sh'
        echo 'case "$1" in'
        for qa in "$@"; do echo "  ${qa%%=*}) echo '${qa#*=}' ;;"; done
        echo '  *) echo "gcc: error: unrecognized command-line option $1" >&2; exit 1 ;;'
        echo 'esac'
    } > "$W/$name"
    chmod +x "$W/$name"
}

D="-DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX"
# expect NAME MAKEARGS COMPILE LINK NOTE: make cuda-flags with MAKEARGS prints these lines
expect() {
    local name=$1 args=$2 compile=$3 link=$4 note=$5 got want
    # shellcheck disable=SC2086
    got=$(make -s --no-print-directory cuda-flags NCCL_DIRS="$PWD/$W/none" $args)
    want=$(printf 'compile: %s\nlink: %s\n%s' "$compile" "$link" "$note")
    if [ "$got" == "$want" ]; then
        echo "  ok    $name"
    else
        echo "  FAIL  $name"
        echo "--- expected"; echo "$want"; echo "--- got"; echo "$got"
        fails=$((fails + 1))
    fi
}

echo "=== MPI and NCCL flags of the CUDA build (fake wrappers) ==="
wrapper openmpi_debian \
    "--showme:incdirs=/usr/lib/x86_64-linux-gnu/openmpi/include /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi" \
    "--showme:libdirs=/usr/lib/x86_64-linux-gnu/openmpi/lib" "--showme:libs=mpi" \
    "--showme:compile=-I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi" \
    "--showme:link=-L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi"
expect "OpenMPI (Debian)" "MPICC=$W/openmpi_debian" \
    "$D -I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi" \
    "-L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi" ""

# OpenMPI built from source (HPC-X, Spack): -pthread and an rpath, which nvcc rejects as they are
wrapper openmpi_source \
    "--showme:incdirs=/opt/hpcx/ompi/include" "--showme:libdirs=/opt/hpcx/ompi/lib" "--showme:libs=mpi" \
    "--showme:compile=-I/opt/hpcx/ompi/include -pthread" \
    "--showme:link=-I/opt/hpcx/ompi/include -pthread -L/opt/hpcx/ompi/lib -Wl,-rpath -Wl,/opt/hpcx/ompi/lib -Wl,--enable-new-dtags -lmpi"
expect "OpenMPI (from source)" "MPICC=$W/openmpi_source" \
    "$D -I/opt/hpcx/ompi/include -Xcompiler -pthread" \
    "-L/opt/hpcx/ompi/lib -lmpi -Xcompiler -pthread -Xlinker -rpath -Xlinker /opt/hpcx/ompi/lib -Xlinker --enable-new-dtags" ""

# MPICH (and MVAPICH, Intel MPI): the wrapper's command line
wrapper mpich \
    "-compile_info=gcc -I/usr/include/x86_64-linux-gnu/mpich" \
    "-link_info=gcc -I/usr/include/x86_64-linux-gnu/mpich -L/usr/lib/x86_64-linux-gnu -Wl,-z,relro -lmpich"
expect "MPICH" "MPICC=$W/mpich" \
    "$D -I/usr/include/x86_64-linux-gnu/mpich" \
    "-L/usr/lib/x86_64-linux-gnu -Xlinker -z -Xlinker relro -lmpich" ""

# a wrapper that answers none of the queries: no MPI, and the build says so
wrapper unknown
expect "no usable wrapper" "MPICC=$W/unknown" "" "" \
    "note: $W/unknown names no MPI library (neither OpenMPI's --showme:libs nor MPICH's -link_info): the CUDA trainer is built without MPI"
expect "NO_MPI=1" "MPICC=$W/openmpi_debian NO_MPI=1" "" "" ""

# NCCL: the header alone is not enough
mkdir -p "$W/nccl_header/include" "$W/nccl/include" "$W/nccl/lib64"
touch "$W/nccl_header/include/nccl.h" "$W/nccl/include/nccl.h" "$W/nccl/lib64/libnccl.so"
expect "NCCL header without library" "MPICC=$W/mpich NCCL_DIRS=$PWD/$W/nccl_header" \
    "$D -I/usr/include/x86_64-linux-gnu/mpich" \
    "-L/usr/lib/x86_64-linux-gnu -Xlinker -z -Xlinker relro -lmpich" ""
expect "NCCL header and library" "MPICC=$W/mpich NCCL_DIRS=$PWD/$W/nccl" \
    "$D -I/usr/include/x86_64-linux-gnu/mpich -DUSE_NCCL -I$PWD/$W/nccl/include" \
    "-L/usr/lib/x86_64-linux-gnu -Xlinker -z -Xlinker relro -lmpich -L$PWD/$W/nccl/lib64 -lnccl" ""

# nvcc takes the passed-through flags of the from-source style (the MPI library itself left out)
NVCC=$(make -s --no-print-directory --eval 'print-nvcc: ; @echo $(NVCC)' print-nvcc)
if [ -n "$NVCC" ] && [ -x "$NVCC" ]; then
    echo 'int main() { return 0; }' > "$W/empty.cu"
    if "$NVCC" -Xcompiler -pthread -Xlinker -rpath -Xlinker /opt/hpcx/ompi/lib -Xlinker --enable-new-dtags \
            -o "$W/empty" "$W/empty.cu" && "$W/empty"; then
        echo "  ok    nvcc takes -Xcompiler -pthread and -Xlinker -rpath"
    else
        echo "  FAIL  nvcc rejects the passed-through flags"
        fails=$((fails + 1))
    fi
else
    echo "  (no nvcc: the flags were not given to it)"
fi

[ "$fails" -eq 0 ] || { echo "mpi_flags: $fails failed"; exit 1; }
echo "mpi_flags: all passed"
