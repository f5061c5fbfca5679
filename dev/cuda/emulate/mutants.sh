#!/usr/bin/env bash
# Shows that the emulated tests catch real bugs: every mutant of mutate.py (a wrong fragment
# index, a wrong ldmatrix address, each barrier and cp.async wait of the tensor-core kernels
# left out, the __syncwarp() that ends t5's and fire's staging of a warp's pairs left out, a
# wrong layout in the emulated mma, a parameter gradient's sign flipped where a block's partial
# is written) is planted in a fresh copy of the sources, built for its
# encoding with the emulation's compiler command, and its test (attention_bias check, or
# mma_check) must fail with the mutant's text in its output: the emulation's report for a
# missing barrier, __syncwarp() or wait, a failed comparison for a wrong index or layout.
#   usage: mutants.sh EMU_DIR CXX      (from the repository root; make test-cuda-emulate)
set -uo pipefail
emu=$1
cxx=$2
failed=0
while read -r name test pe expect; do
    PE_FLAG=-DPE_$(echo "$pe" | tr a-z A-Z)
    dir="$emu/mutant_$name"
    rm -rf "$dir"
    python3 dev/cuda/emulate/prepare.py . "$dir" && python3 dev/cuda/emulate/mutate.py "$dir" "$name" || exit 1
    if [ "$test" = mma ]; then src=dev/cuda/mma_check.cu; args=""; else src=dev/cuda/attention_bias.cu; args=check; fi
    # shellcheck disable=SC2086  # the compiler command is words
    $cxx -I"$dir/dev/cuda/emulate" -DENABLE_BF16 $PE_FLAG -o "$dir/test" "$dir/$src" || { echo "mutant $name: does not compile"; exit 1; }
    if "$dir/test" $args > "$dir/log" 2>&1; then
        echo "mutant $name: NOT CAUGHT (its test passed; log: $dir/log)"
        failed=1
    elif ! grep -qE -- "$expect" "$dir/log"; then
        echo "mutant $name: NOT CAUGHT as expected (no '$expect' in its output; log: $dir/log)"
        failed=1
    else
        echo "mutant $name ($pe): caught ($(grep -m1 -E -- "$expect" "$dir/log" | tr -s ' ' | cut -c1-110))"
    fi
    rm -f "$dir/test"
done < <(python3 dev/cuda/emulate/mutate.py --list)
exit $failed
