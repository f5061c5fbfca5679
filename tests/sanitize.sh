#!/usr/bin/env bash
# The CPU trainer (learned, plain-loop matmuls, one thread, no MPI) and the tokenizer built
# with AddressSanitizer and UndefinedBehaviorSanitizer (make test-sanitize), run as programs:
#   1. a short training with checkpoints, validation, samples and a periodic evaluation of
#      every suite, then resumed with -o DIR -y 1
#   2. an evaluation alone with every suite: two test sets, non-overlapping, sliding and
#      last-N windows, the context-use gap, randomized positions and plain ones, the loss by
#      position, passkey retrieval, HellaSwag (a fixture written by the tokenizer)
#   3. the start-up flags summary of a 4200-character -i and two -E lengths (it overflowed a
#      stack buffer), and a 300-character test set name (refused)
#   4. the tokenizer's commands: encode, decode, shard, info, dump, write-bin, eval,
#      write-passkey
#   5. ./tasks' commands: write, check, show, baseline (sum, mod, even, copy, sort, add), solve
#      (dup of 6147 bits, whose answer outgrew its buffer), and check of a dup file whose input is longer than its rows' lengths
#      (refused); a task file of one token that is not PAD given to -A (refused)
# A sanitizer's report ends the program with a nonzero status, which fails the test. The
# model is the passkey template's (test_gpt2 passkey-remap: 560 tokens, 2 layers of 64
# channels), so that everything runs in about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/build/asan_train_gpt2_learned
TOK=$ROOT/build/asan_tokenizer
TASKS=$ROOT/build/asan_tasks
for need in "$BIN" "$TOK" "$TASKS" build/test_gpt2_learned gpt2_passkey.bin gpt2_tokenizer.bin data/gpt2/encoder.json; do
    [ -e "$need" ] || { echo "error: $need is missing; run the test with \`make test-sanitize\`" >&2; exit 1; }
done
DIR=$(mktemp -d /tmp/test_sanitize.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
# run WHAT CMD...: the command must exit 0
run() {
    local what=$1; shift
    "$@" > "$DIR/out" 2> "$DIR/err" || { tail -40 "$DIR/err"; fail "$what: exit $?"; }
    echo "  ok    $what"
}
# refused WHAT TEXT CMD...: exit 1 (not a sanitizer's 99 or a signal) and one line with TEXT
refused() {
    local what=$1 text=$2 rc=0; shift 2
    "$@" > "$DIR/out" 2> "$DIR/err" || rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l < "$DIR/err")" -eq 1 ] && grep -q -- "$text" "$DIR/err" || { tail -40 "$DIR/err"; fail "$what: exit $rc"; }
    echo "  ok    $what: $(cut -c1-100 "$DIR/err")"
}

echo "=== the tokenizer's commands"
doc() { printf '%d\n%s' "$(printf %s "$1" | wc -c)" "$1"; }
{ printf '0 2\n'; doc "The grass is"; doc " green."; doc " blue."; printf '1 2\n'; doc "The sky is"; doc " green."; doc " blue.";
  printf '0 3\n'; doc "The pass key is 10005. Remember it. 10005 is the"; doc " pass key."; doc " sky."; doc " grass."; } > "$DIR/examples"
run "eval: an example stream to an eval file" "$TOK" eval "$DIR/hellaswag_gpt2.bin" < "$DIR/examples"
run "encode" "$TOK" encode README.md
mv "$DIR/out" "$DIR/ids"
run "decode" "$TOK" decode < "$DIR/ids"
cmp -s "$DIR/out" README.md || fail "decode(encode(README.md)) is not README.md"
{ doc "$(head -c 20000 README.md)"; doc "Caf$(printf '\xc3\xa9\xff') and more"; } > "$DIR/docs"
run "shard: two documents into shards of 2000 tokens" "$TOK" -t 2 shard -n 2000 "$DIR/sh/doc" < "$DIR/docs"
run "info" "$TOK" info "$DIR"/sh/doc_*.bin
run "dump" "$TOK" dump "$DIR/sh/doc_val_000000.bin"
run "write-bin" "$TOK" write-bin "$DIR/gpt2_tokenizer.bin"
cmp -s "$DIR/gpt2_tokenizer.bin" gpt2_tokenizer.bin || fail "write-bin differs from gpt2_tokenizer.bin"
run "write-passkey" "$TOK" write-passkey "$DIR/gpt2_passkey.bin"
cmp -s "$DIR/gpt2_passkey.bin" gpt2_passkey.bin || fail "write-passkey differs from gpt2_passkey.bin"

echo "=== ./tasks' commands"
run "write: every task" "$TASKS" write -n 4 -e 16 -v 4 -x 4 -l 2,8 "$DIR/tasks"
run "check: every file" "$TASKS" check "$DIR"/tasks/*/*.bin
run "show" "$TASKS" show "$DIR/tasks/dup/test_0008.bin" 4
for t in sum mod even copy sort add; do run "baseline: $t" "$TASKS" -w 5 baseline $t 1,5,6,40; done
bits=$(printf '01%.0s' $(seq 3073))0
run "solve: dup of 6147 bits" "$TASKS" solve dup "$bits"
[ "$(cat "$DIR/out")" = "$bits$bits" ] || fail "dup of 6147 bits: a wrong answer"
python3 - "$DIR/dup_long.bin" <<'PY'
import struct, sys
R = 3 * 4096 + 3 # dup's rows for lengths up to 4096: an input of R - 2 bits, then SEP
toks = [1] + [7] * (R - 2) + [2, 0]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 2, len(toks), R, 43, 8, 1, 4096, 1, 1, *[0] * 246))
    f.write(struct.pack("<%dH" % len(toks), *toks))
    f.write(bytes(len(toks)))
PY
refused "check: a dup input of 12289 bits (an answer of 24578)" "example 0 has length 12289, outside the header's 1..4096" "$TASKS" check "$DIR/dup_long.bin"
python3 - "$DIR/one_token.bin" <<'PY'
import struct, sys
with open(sys.argv[1], "wb") as f: # a task file (copy) of one token, 5, not PAD: no example
    f.write(struct.pack("<256i", 20240520, 2, 1, 13, 43, 2, 1, 5, 1, 0, *[0] * 246))
    f.write(struct.pack("<H", 5) + bytes(1))
PY

echo "=== the trainer: training, resume, evaluation with every suite"
mkdir -p "$DIR/pk"
build/test_gpt2_learned passkey-remap "$DIR/pk" gpt2_passkey.bin 80 400 100 "$DIR/hellaswag_gpt2.bin" > /dev/null
cp gpt2_tokenizer.bin "$DIR/pk/"
cd "$DIR/pk"
EVAL=(-E 40,80,160 -K 160 -W 20 -L 40 -P 2 -Pd 2 -H eval.bin -j "val=pk_val_*.bin,tr=pk_train_*.bin")
run "training: checkpoints, validation, samples, an evaluation every 2 steps" \
    "$BIN" -e init.bin -t 80 -b 4 -x 4 -n 2 -v 2 -m 1 -s 2 -g 8 -V 2 -l 5e-3 -u 2 -i "pk_train_*.bin" "${EVAL[@]}" -o run
[ -e run/DONE_00000004 ] && [ "$(grep -c '^HellaSwag:' "$DIR/out")" -eq 2 ] || fail "the training run's checkpoints or evaluations are missing"
run "resumed with -o DIR -y 1 to step 6" "$BIN" -o run -y 1 -x 6
[ -e run/DONE_00000006 ] || fail "the resumed run's checkpoint is missing"
run "evaluation alone: every suite, two sets, randomized positions and plain ones" \
    "$BIN" -e run/model_00000006.bin -x 0 -m 2 -rp 80 -ra 1 "${EVAL[@]}" -o run
[ "$(grep -c '^extrapolation:' "$DIR/out")" -eq 2 ] && grep -q '^passkey retrieval' "$DIR/out" && grep -q '^HellaSwag:' "$DIR/out" \
    || fail "the evaluation's tables are missing"
LONG="$(printf './%.0s' $(seq 2100))pk_train_*.bin"
refused "a 4200-character -i and two -E lengths" "no file matches the data pattern './././" "$BIN" -e init.bin -t 80 -b 4 -x 1 -i "$LONG" -E 40,80 -j "pk_val_*.bin"
refused "a test set name of 300 characters" "is longer than 64 characters" "$BIN" -e init.bin -x 0 -j "$(printf 'n%.0s' $(seq 300))=pk_val_*.bin"
refused "-A: a task file of one token, not PAD" "one_token.bin holds no example" "$BIN" -e init.bin -x 0 -j "pk_val_*.bin" -A "$DIR/one_token.bin"
echo "sanitizers: no report"
