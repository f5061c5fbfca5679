#!/usr/bin/env bash
# Exact resume and crash-safe checkpoints, for one encoding (default: cable):
#  1. a run killed with SIGKILL in the middle of training and resumed with -y 1 ends
#     with the same checkpoint, bit for bit, and the same main.log as an uninterrupted run;
#  2. a run killed while it writes a checkpoint leaves the previous checkpoint loadable,
#     and resuming from it again ends bit-identical to the uninterrupted run;
#  3. with update skipping on (-sl, -sg), a run resumed past the outlier detector's
#     128-step window prints the same z-scores and skips the same steps.
set -euo pipefail
PE=${1:-cable}
BIN=build/train_gpt2_$PE
TEST=build/test_gpt2_$PE
DIR=$(mktemp -d /tmp/test_resume.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
ARGS=(-e nano -b 4 -t 64 -x 20 -v 10 -m 2 -s 0 -E none -l 1e-3 -u 5
      -i "data/starter/starter_train_*.bin" -j "data/starter/starter_val_*.bin")

fail() { echo "FAIL: $*"; exit 1; }
wait_for() { # wait_for FILE SECONDS
    for _ in $(seq 1 $(( $2 * 20 ))); do [ -e "$1" ] && return 0; sleep 0.05; done
    fail "timed out waiting for $1"
}

echo "=== $PE: uninterrupted reference run"
"$BIN" "${ARGS[@]}" -n 10 -o "$DIR/ref" > "$DIR/ref.log"

echo "=== $PE: kill -9 in the middle of training, then resume"
# checkpoints every 5 steps, each held 3 s before its commit (test hook): the kill
# right after step 10's checkpoint lands in steps 11-15, long before the end
LLMC_SLOW_WRITE_MS=3000 "$BIN" "${ARGS[@]}" -n 5 -o "$DIR/run" > "$DIR/run1.log" &
pid=$!
wait_for "$DIR/run/DONE_00000010" 120
kill -9 $pid; wait $pid 2>/dev/null || true
[ ! -e "$DIR/run/DONE_00000020" ] || fail "the run finished before it could be killed"
"$BIN" "${ARGS[@]}" -n 5 -o "$DIR/run" -y 1 > "$DIR/run2.log"
grep -q "resumed from step 10" "$DIR/run2.log" || fail "did not resume from step 10"
"$TEST" compare "$DIR/ref/model_00000020.bin" "$DIR/run/model_00000020.bin" 0 | tail -1
"$TEST" compare "$DIR/ref/model_00000020.bin" "$DIR/run/model_00000020.bin" 0 > /dev/null || fail "resumed checkpoint differs"
diff <(grep "^step" "$DIR/ref.log" | sed -n '11,20p' | cut -d'|' -f1-3) \
     <(grep "^step" "$DIR/run2.log" | cut -d'|' -f1-3) || fail "losses after the resume differ"
cmp "$DIR/ref/main.log" "$DIR/run/main.log" || fail "main.log differs"
echo "ok: steps 11-20 after kill -9 and resume are bit-identical (checkpoint, losses, main.log)"

echo "=== $PE: kill -9 while a checkpoint is being written"
LLMC_SLOW_WRITE_MS=3000 "$BIN" "${ARGS[@]}" -n 5 -o "$DIR/save" > "$DIR/save1.log" &
pid=$!
wait_for "$DIR/save/model_00000010.bin.tmp" 120
sleep 0.5 # the write has finished; the commit waits in the test hook before its rename
kill -9 $pid; wait $pid 2>/dev/null || true
[ ! -e "$DIR/save/DONE_00000010" ] || fail "the save completed before the kill"
[ -e "$DIR/save/DONE_00000005" ] || fail "the previous checkpoint is missing"
"$BIN" -e "$DIR/save/model_00000005.bin" -x 0 -E none -j "data/starter/starter_val_*.bin" > /dev/null \
    || fail "the previous checkpoint does not load"
"$BIN" "${ARGS[@]}" -n 5 -o "$DIR/save" -y 1 > "$DIR/save2.log"
grep -q "resumed from step 5" "$DIR/save2.log" || fail "did not resume from step 5"
"$TEST" compare "$DIR/ref/model_00000020.bin" "$DIR/save/model_00000020.bin" 0 > /dev/null || fail "checkpoint after the interrupted save differs"
echo "ok: a kill during a save leaves the previous checkpoint, and resuming from it is exact"

echo "=== $PE: resume with the outlier detector's window full"
# thresholds near 0: after the window fills at step 128, every step above the mean is skipped
HEALTH=(-e nano -b 2 -t 16 -x 150 -v 0 -s 0 -E none -l 1e-3 -u 5 -sl 0.01 -sg 0.01
        -i "data/starter/starter_train_*.bin" -j "data/starter/starter_val_*.bin")
"$BIN" "${HEALTH[@]}" -n 140 -o "$DIR/health" > "$DIR/health.log"
mkdir -p "$DIR/health2"
cp "$DIR"/health/{model_00000140.bin,state_00000140_00000.bin,DONE_00000140,main.log} "$DIR/health2/"
"$BIN" "${HEALTH[@]}" -n 140 -o "$DIR/health2" -y 1 > "$DIR/health2.log"
grep -q "resumed from step 140" "$DIR/health2.log" || fail "did not resume from step 140"
skips=$(grep -c "update skipped" "$DIR/health.log" || true)
[ "$skips" -gt 0 ] || fail "no update was skipped: the test checks nothing"
diff <(grep "^step" "$DIR/health.log" | sed -n '/^step  141\//,$p' | cut -d'|' -f1-3) \
     <(grep "^step" "$DIR/health2.log" | cut -d'|' -f1-3) || fail "z-scores or skipped steps differ after the resume"
"$TEST" compare "$DIR/health/model_00000150.bin" "$DIR/health2/model_00000150.bin" 0 > /dev/null || fail "checkpoint differs"
echo "ok: steps 141-150 after a resume have the same z-scores, skips and checkpoint ($skips updates skipped in all)"
