#!/usr/bin/env bash
# The emulation's reports (make test-cuda-emulate):
#  - every planted defect of defects.cu must end its run with a nonzero exit and its report
#    (the expected text, * matching anything: kernel, block, thread and address), and the
#    same patterns done right (defects --clean) must run with none
#  - the order of blocks shows: a kernel whose result depends on it gives another result in
#    reverse order and in the default random order than in forward order
#  - a machine without a usable GPU (EMU_DEVICES): the test programs skip (exit 0, their
#    skip line) when there is no device or no driver, and fail with the runtime's message
#    when the driver is older than the runtime; the trainer fails with one line in each case
#   usage: defects.sh EMU_DIR STEM PE   (the emulated test_gpt2cu and trainer of STEM in fp32,
#                                        the attention check of PE)
set -uo pipefail
emu=$1
stem=$2
pe=$3
failed=0
fail() { echo "$1"; failed=1; }

while IFS=$'\t' read -r name expect; do
    out=$("$emu/defects" "$name" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && [[ $out == *$expect* ]]; then
        echo "defect $name: reported ($(grep -m1 '^emu:' <<< "$out" | cut -c1-110))"
    else
        fail "defect $name: NOT REPORTED (exit $rc, expected '$expect'): $out"
    fi
done < <("$emu/defects" --list)

out=$("$emu/defects" --clean 2>&1)
rc=$?
if [ $rc -eq 0 ] && ! grep -q "^emu:" <<< "$out"; then
    echo "the same patterns done right: $(wc -l <<< "$out") kernels, no report"
else
    fail "clean kernels: exit $rc or a report: $out"
fi

forward=$(EMU_BLOCK_ORDER=forward "$emu/defects" block_order)
reverse=$(EMU_BLOCK_ORDER=reverse "$emu/defects" block_order)
random=$("$emu/defects" block_order)
if [ "$forward" != "$reverse" ] && [ "$forward" != "$random" ]; then
    echo "block order: forward, reverse and random differ for a kernel that depends on it ($forward; $reverse; $random)"
else
    fail "block order: NOT SHOWN ($forward; $reverse; $random)"
fi

# every test program, then the trainer, without a usable device
tests=("$emu/test_gpt2cu_${stem}_fp32 reference none:test_gpt2cu: no CUDA device, skipped"
       "$emu/attention_$pe check:attention_bias: no CUDA device, skipped"
       "$emu/mma_check:mma_check: no CUDA device, skipped")
old="CUDA error 'CUDA driver version is insufficient for CUDA runtime version' in cudaGetDeviceCount"
for t in "${tests[@]}"; do
    cmd=${t%%:*}
    skip=${t#*:}
    for devices in 0 no-driver; do
        out=$(EMU_DEVICES=$devices $cmd 2>&1)
        rc=$?
        [ $rc -eq 0 ] && [ "$out" = "$skip" ] || fail "EMU_DEVICES=$devices $cmd: exit $rc, not the skip line: $out"
    done
    out=$(EMU_DEVICES=old-driver $cmd 2>&1)
    rc=$?
    [ $rc -ne 0 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && [[ $out == *$old* ]] || fail "EMU_DEVICES=old-driver $cmd: exit $rc, not one line with the runtime's message: $out"
done
for devices in 0 no-driver old-driver; do
    out=$(EMU_DEVICES=$devices "$emu/train_gpt2cu_${stem}_fp32" -e nano -x 1 2>&1 >/dev/null)
    rc=$?
    want="no CUDA device available"
    [ $devices = old-driver ] && want=$old
    [ $rc -ne 0 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && [[ $out == *$want* ]] || fail "EMU_DEVICES=$devices train_gpt2cu: exit $rc, not one line '$want': $out"
done
[ $failed -eq 0 ] && echo "no usable device: the tests skip (none, no driver) or fail with the runtime's message (an old driver); the trainer fails with one line"
exit $failed
