#!/usr/bin/env bash
# The whole CUDA path of every encoding and DAPE variant, run in the CPU emulation, against the
# CPU path (make test-cuda-emulate). For each stem, the tiny model's reference written by the
# CPU test (test_gpt2 debug-state-tiny: 2 layers, 2 heads of 32, B = 2, T = 37) plain (where
# test_gpt2cu also holds given positions 0..T-1 equal to none, bit for bit), at randomized and
# at given positions (the stems of RP_STEMS, which take positions), with two thirds of the
# targets unscored (answer-only data) and under the encoding's own test variants (test_gpt2
# variants: rope's frequency table), each compared by the emulated test_gpt2cu (fp32): the
# logits, the loss, every parameter gradient tensor by tensor, and the losses of the
# reference's AdamW steps.
# Then the planted sign flips: for every parameter tensor of the encoding (and DAPE's:
# test_gpt2cu pe-tensors), its gradient negated at the end of the CUDA backward pass
# (EMU_FLIP_GRAD, dev/cuda/emulate/prepare.py) must make the plain comparison fail on that
# tensor's own line; all of a stem's flips in one run (each line compares one tensor, and a
# flip at the end of the backward pass changes no other's). A tensor whose gradient vanishes
# identically cannot show a flip: only one that the encoding's file declares so
# (PE_REF_ROW_CONSTANT, marked by pe-tensors) may vanish.
#   usage: trainers.sh BUILD_DIR EMU_DIR "STEMS" "RP_STEMS"   (JOBS: stems at a time, default 2)
set -uo pipefail
BUILD=$1 EMU=$2 STEMS=$3 RP_STEMS=$4
export BUILD EMU RP_STEMS

# one stem: its variants, then its flips; prints its lines, the last "ok STEM ..." or "FAIL ..."
one_stem() {
    local s=$1 log=$BUILD/emulate_trainers_$1.log ref variants="" flips=0 caught=0 vanish="" out="" names fail=0
    : > "$log"
    local list="plain mask"
    case " $RP_STEMS " in *" $s "*) list="plain rp pos mask" ;; esac
    list="$list $("$BUILD/test_gpt2_$s" variants)" || { echo "FAIL $s: test_gpt2 variants"; return 1; }
    for v in $list; do
        ref=$BUILD/ref_tiny_${s}_$v
        if ! "$BUILD/test_gpt2_$s" debug-state-tiny "$ref" $([ "$v" = plain ] || echo "$v") >> "$log" 2>&1 \
           || ! "$EMU/test_gpt2cu_${s}_fp32" reference "$ref" >> "$log" 2>&1; then
            echo "FAIL $s ($v): the CUDA path in the emulation differs from the CPU path; log: $log"
            grep -E 'FAIL|error|emu:' "$log" | head -20
            return 1
        fi
        variants="$variants $v"
    done
    ref=$BUILD/ref_tiny_${s}_plain
    local tensors
    tensors=$("$EMU/test_gpt2cu_${s}_fp32" pe-tensors "$ref" 2>&1) || { echo "FAIL $s: test_gpt2cu pe-tensors: $tensors"; return 1; }
    # every tensor flipped in one run: each line compares one tensor, so each flip shows on its own
    names=$(awk 'NF { printf "%s%s", sep, $1; sep = "," }' <<< "$tensors")
    [ -z "$names" ] || out=$(EMU_FLIP_GRAD=$names "$EMU/test_gpt2cu_${s}_fp32" gradients "$ref" 2>&1)
    while read -r t mark; do
        [ -n "$t" ] || continue
        flips=$((flips + 1))
        if grep -qE "^  grad $t +[0-9]+: vanishes" <<< "$out"; then
            if [ "$mark" = vanishing ]; then flips=$((flips - 1)); vanish="$vanish, $t vanishing identically"; continue; fi
            echo "FAIL $s: the gradient of $t vanishes in the tiny model, so a sign error in it goes unseen"; fail=1; continue
        fi
        if grep -qE "^  grad $t +[0-9]+: .*FAIL" <<< "$out"; then
            caught=$((caught + 1))
        else
            echo "FAIL $s: a sign flip of $t's CUDA gradient is not caught by the comparison with the CPU path"; fail=1
        fi
    done <<< "$tensors"
    [ $fail -eq 0 ] || return 1
    local flipped="$caught of $flips planted gradient sign flips caught$vanish"
    [ "$flips$vanish" != 0 ] || flipped="no parameters of its own"
    echo "ok   $s:$variants equal to the CPU path; $flipped"
}
export -f one_stem

# the stems JOBS at a time, each's lines into its own file, printed in the order of STEMS
status=0
printf '%s\n' $STEMS | xargs -P "${JOBS:-2}" -I{} bash -c 'one_stem {} > "$BUILD/emulate_trainers_{}.out" 2>&1' || status=1
n=0
for s in $STEMS; do
    cat "$BUILD/emulate_trainers_$s.out"
    if grep -q '^ok' "$BUILD/emulate_trainers_$s.out"; then n=$((n + 1)); fi
done
echo "$n of $(wc -w <<< "$STEMS") stems: the emulated CUDA trainer equal to the CPU trainer"
exit $status
