#!/bin/sh
# nvcc's flags for MPI, from the MPI compiler wrapper (cuda.mk):
#
#   dev/cuda/mpi_flags.sh compile|link MPICC
#
# OpenMPI (Debian's, or built from source as in HPC-X and Spack): the directories and
# libraries of --showme:incdirs, --showme:libdirs and --showme:libs, and the other flags of
# --showme:compile / --showme:link. MPICH, MVAPICH and Intel MPI: -compile_info / -link_info
# (the wrapper's command line, its compiler first). -I, -D, -L and -l pass as they are; -Wl,
# options go through -Xlinker, one by one; any other flag (-pthread, ...) through -Xcompiler to
# the host compiler (nvcc itself rejects them). Prints nothing when the wrapper names no
# library: cuda.mk then builds without MPI.
set -u
if [ $# -ne 2 ] || { [ "$1" != compile ] && [ "$1" != link ]; }; then
    echo "usage: $0 compile|link MPICC" >&2
    exit 2
fi
what=$1
mpicc=$2

out=""
add() { out="$out $*"; }
# the flags of a wrapper's list, by kind; $1: compile keeps -I and -D, link -L, -l and -Wl,
flags() {
    keep=$1
    shift
    for t in "$@"; do
        case $t in
            -I*|-D*) [ "$keep" = compile ] && add "$t" ;;
            -L*|-l*) [ "$keep" = link ] && add "$t" ;;
            -Wl,*)
                if [ "$keep" = link ]; then
                    rest=${t#-Wl,}
                    old_ifs=$IFS
                    IFS=,
                    for w in $rest; do add "-Xlinker $w"; done
                    IFS=$old_ifs
                fi ;;
            *) add "-Xcompiler $t" ;;
        esac
    done
}

# shellcheck disable=SC2046
if libs=$("$mpicc" --showme:libs 2>/dev/null) && [ -n "$libs" ]; then
    # OpenMPI
    if [ "$what" = compile ]; then
        for d in $("$mpicc" --showme:incdirs 2>/dev/null); do add "-I$d"; done
        flags compile $("$mpicc" --showme:compile 2>/dev/null | tr ' ' '\n' | grep -v -e '^-I' -e '^-L' -e '^-l' -e '^-Wl,')
    else
        for d in $("$mpicc" --showme:libdirs 2>/dev/null); do add "-L$d"; done
        for l in $libs; do add "-l$l"; done
        flags link $("$mpicc" --showme:link 2>/dev/null | tr ' ' '\n' | grep -v -e '^-I' -e '^-D' -e '^-L' -e '^-l')
    fi
elif info=$("$mpicc" -link_info 2>/dev/null) && case " $info " in *" -l"*) true ;; *) false ;; esac; then
    # MPICH and its derivatives: the first word is the compiler
    [ "$what" = compile ] && info=$("$mpicc" -compile_info 2>/dev/null)
    set -- $info # shellcheck disable=SC2086
    shift
    flags "$what" "$@"
else
    exit 0
fi
echo $out
