#!/usr/bin/env bash
# rope's frequency table (-rb, -rt, -rr; llmc/pe.h RopeTable) through the trainer:
#  1. bad values: one line on stderr naming the flag, a nonzero exit;
#  2. a new run with the base 10000 given ends with the default run's checkpoint, bit for bit;
#     a run with the three options writes them into its checkpoints (header words 15-17);
#  3. a fine-tuning run from a checkpoint with another base (ABF) says so in one line and its
#     checkpoints hold the new base; without the flag it keeps the checkpoint's;
#  4. a resumed run that changes the base says so in one line, as the other flags, and its
#     later checkpoints hold the new base;
#  5. an evaluation with another table says so in one line; its rows are named after the table.
set -uo pipefail
BIN=$(realpath build/train_gpt2_rope)
DIR=$(mktemp -d /tmp/test_rope_table.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
TRAIN="$(realpath data/starter)/starter_train_*.bin"
VAL="$(realpath data/starter)/starter_val_*.bin"
ARGS=(-b 2 -t 32 -v 0 -s 0 -E none -i "$TRAIN" -j "$VAL")
export OMP_NUM_THREADS=1
failures=0

ok() { printf "  ok    %s\n" "$1"; }
bad() { printf "  FAIL  %s\n" "$1"; failures=$((failures + 1)); }
# words 15-17 of a checkpoint's header
words() { od -An -t d4 -j 60 -N 12 "$1" | xargs; }
# expect_line WHAT FILE TEXT: FILE holds exactly one line with TEXT
expect_line() { if [ "$(grep -cF -- "$3" "$2")" = 1 ]; then ok "$1: $3"; else bad "$1: no line '$3' in"; cat "$2"; fi; }

echo "=== rope: the frequency table's flags"
for c in "-rb 1|flag -rb must be in [2, 2147483647], got 1" "-rb 1e6|flag -rb expects an integer, got '1e6'" \
         "-rt -1|flag -rt must be in [0, 16777216], got -1" "-rr 2|flag -rr must be in [0, 1], got 2"; do
    flag=${c%%|*} text=${c#*|}
    # shellcheck disable=SC2086
    (cd "$DIR" && timeout 60 "$BIN" -e nano "${ARGS[@]}" -x 1 $flag > "$DIR/out" 2> "$DIR/err")
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(wc -l < "$DIR/err")" -eq 1 ] && grep -qF -- "$text" "$DIR/err"; then ok "$flag: $(cat "$DIR/err")"
    else bad "$flag: exit $rc, stderr:"; cat "$DIR/err"; fi
done

"$BIN" -e nano "${ARGS[@]}" -x 2 -o "$DIR/plain" > /dev/null || bad "the plain run"
"$BIN" -e nano "${ARGS[@]}" -x 2 -rb 10000 -o "$DIR/given" > /dev/null || bad "the run with -rb 10000"
if cmp -s "$DIR/plain/model_00000002.bin" "$DIR/given/model_00000002.bin"; then ok "-rb 10000: the default run's checkpoint, bit for bit"
else bad "-rb 10000: another checkpoint than the default run's"; fi
"$BIN" -e nano "${ARGS[@]}" -x 2 -rb 500000 -rt 64 -rr 1 -o "$DIR/all" > /dev/null || bad "the run with -rb -rt -rr"
w=$(words "$DIR/all/model_00000002.bin")
if [ "$w" = "500000 64 1" ] && [ "$(words "$DIR/plain/model_00000002.bin")" = "0 0 0" ]; then ok "checkpoint words 15-17: $w (plain: 0 0 0)"
else bad "checkpoint words 15-17: $w"; fi

# fine-tuning from the plain checkpoint with ABF's base, and from the ABF one without -rb
"$BIN" -e "$DIR/plain/model_00000002.bin" "${ARGS[@]}" -x 2 -n 1 -rb 500000 -o "$DIR/abf" > "$DIR/out" || bad "the fine-tuning run"
expect_line "fine-tuning" "$DIR/out" "-rb 500000 replaces the checkpoint's -rb 10000 in the training from it and its checkpoints"
w=$(words "$DIR/abf/model_00000002.bin")
if [ "$w" = "500000 0 0" ]; then ok "the fine-tuned checkpoint holds base 500000"; else bad "the fine-tuned checkpoint: words $w"; fi
"$BIN" -e "$DIR/abf/model_00000002.bin" "${ARGS[@]}" -x 1 -o "$DIR/keep" > "$DIR/out" || bad "the run from the ABF checkpoint"
if ! grep -q replaces "$DIR/out" && [ "$(words "$DIR/keep/model_00000001.bin")" = "500000 0 0" ]; then ok "without -rb a run keeps its checkpoint's base"
else bad "without -rb: $(grep replaces "$DIR/out"), words $(words "$DIR/keep/model_00000001.bin")"; fi

# a resume that changes the base
"$BIN" -o "$DIR/abf" -y 1 -x 4 -rb 1000000 > "$DIR/out" || bad "the resume with -rb 1000000"
expect_line "resume" "$DIR/out" "resume: -rb 1000000 replaces this run's -rb 500000 from step 2 on"
w=$(words "$DIR/abf/model_00000004.bin")
if [ "$w" = "1000000 0 0" ]; then ok "the resumed run's checkpoint holds base 1000000"; else bad "the resumed run's checkpoint: words $w"; fi

# an evaluation with another table
"$BIN" -e "$DIR/abf/model_00000004.bin" -b 2 -t 32 -m 1 -j "$VAL" -x 0 -E 32 -rt 64 -rr 1 -o "$DIR/eval" > "$DIR/out" \
    || bad "the evaluation with -rt 64 -rr 1"
expect_line "evaluation" "$DIR/out" "-rt 64 replaces the checkpoint's -rt 0 in this evaluation"
expect_line "evaluation" "$DIR/out" "-rr 1 replaces the checkpoint's -rr 0 in this evaluation"
if grep -q "^rope_rb1000000_rt64_rr,32,32,nonoverlap," "$DIR/eval/extrapolation.csv"; then ok "its rows: rope_rb1000000_rt64_rr"
else bad "its rows:"; cat "$DIR/eval/extrapolation.csv"; fi

[ $failures -eq 0 ] || { echo "$failures FAILURES"; exit 1; }
echo "rope's frequency table: every flag case as expected"
