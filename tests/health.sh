#!/usr/bin/env bash
# Training health: a step with a non-finite loss or gradient norm skips its update and is
# reported; five in a row stop the run with a message that names the last complete
# checkpoint, and no checkpoint of the failed state is written. Non-finite values never get
# into a complete checkpoint: a NaN in a state file stops the resume, a model that becomes
# non-finite is not saved; a diverged checkpoint evaluated alone is an error, not NaN rows or
# a HellaSwag score.
set -euo pipefail
PE=${1:-cable}
BIN=build/train_gpt2_$PE
DIR=$(mktemp -d /tmp/test_health.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
ARGS=(-t 32 -b 2 -v 0 -s 0 -E none -i "data/starter/starter_train_*.bin" -j "data/starter/starter_val_*.bin")
fail() { echo "FAIL: $*"; exit 1; }

# a good checkpoint, then a copy whose token embeddings are all 3e38: finite, so it loads,
# but the first layernorm's sums overflow and every loss is NaN
"$BIN" "${ARGS[@]}" -e nano -x 1 -o "$DIR/good" > /dev/null
python3 - "$DIR/good/model_00000001.bin" "$DIR/poisoned.bin" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
header = struct.unpack("<256i", data[:1024])
n = header[7] * header[6]  # wte: Vp x C floats, the first tensor
data[1024:1024 + 4 * n] = struct.pack("<f", 3e38) * n
open(sys.argv[2], "wb").write(data)
PY
set +e
"$BIN" "${ARGS[@]}" -e "$DIR/poisoned.bin" -x 20 -n 100 -o "$DIR/run" > "$DIR/out" 2> "$DIR/err"
rc=$?
set -e
[ $rc -ne 0 ] || fail "the run did not stop"
[ "$(grep -c "update skipped (non-finite" "$DIR/out")" -eq 5 ] || { cat "$DIR/out"; fail "expected 5 skipped updates"; }
grep -q "5 consecutive steps with a non-finite loss or gradient: stopping (no complete checkpoint exists)" "$DIR/err" || { cat "$DIR/err"; fail "no stop message"; }
[ -z "$(ls "$DIR/run" | grep model_)" ] || fail "a checkpoint of the failed run was written"
echo "ok: 5 non-finite steps skipped and reported, then a stop with: $(cat "$DIR/err")"

# refused WHAT TEXT CMD...: a nonzero exit and one line on stderr containing TEXT
refused() {
    local what=$1 text=$2 rc; shift 2
    set +e
    timeout 120 "$@" > "$DIR/out" 2> "$DIR/err"
    rc=$?
    set -e
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(wc -l < "$DIR/err")" -eq 1 ] && grep -q -- "$text" "$DIR/err" \
        || { cat "$DIR/err"; fail "$what: exit $rc"; }
    echo "ok: $what: $(cat "$DIR/err")"
}
refused "a diverged checkpoint evaluated alone" "validation: the loss is not finite" \
    "$BIN" -e "$DIR/poisoned.bin" -x 0 -E 32 -K 64 -j "data/starter/starter_val_*.bin"
refused "a diverged checkpoint evaluated at one length" "evaluation at length 32: the loss is not finite" \
    "$BIN" -e "$DIR/poisoned.bin" -x 0 -E 32 -K 64 -m 0 -j "data/starter/starter_val_*.bin"
# HellaSwag: NaN losses would make the first completion of every example the choice (2/2
# here, both labels 0)
doc() { printf '%d\n%s' "$(printf %s "$1" | wc -c)" "$1"; }
{ printf '0 2\n'; doc "The grass is"; doc " green."; doc " blue."; printf '0 2\n'; doc "The sky is"; doc " blue."; doc " green."; } \
    | ./tokenizer eval "$DIR/hellaswag.bin" > /dev/null
refused "a diverged checkpoint on HellaSwag" "HellaSwag: example 0: the loss is not finite" \
    "$BIN" -e "$DIR/poisoned.bin" -x 0 -E none -m 0 -H "$DIR/hellaswag.bin" -j "data/starter/starter_val_*.bin"

# a NaN in v of a state file: the resume stops at once, naming the file
mkdir -p "$DIR/nanv"
cp "$DIR"/good/* "$DIR/nanv/"
python3 - "$DIR/nanv/state_00000001_00000.bin" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[136:144])[0]  # header words 34-35: the length of m and v
data[1024 + 4 * n + 4 * 1000:1024 + 4 * n + 4 * 1001] = struct.pack("<f", float("nan"))  # v[1000]
open(sys.argv[1], "wb").write(data)
PY
refused "a NaN in the optimizer state" "state_00000001_00000.bin: corrupt optimizer state: .* v = nan at index 1000" \
    "$BIN" "${ARGS[@]}" -m 1 -x 3 -o "$DIR/nanv" -y 1
[ ! -e "$DIR/nanv/DONE_00000003" ] || fail "a checkpoint was marked complete after a corrupt state"

# a model that becomes non-finite is never marked complete: the first padded row of wte
# (which the loss never reads) at 3e38, then one update with lr 10 and weight decay 10
# overflows it to -inf while the loss stays finite
python3 - "$DIR/good/model_00000001.bin" "$DIR/padded.bin" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
header = struct.unpack("<256i", data[:1024])
V, C = header[3], header[6]
data[1024 + 4 * V * C:1024 + 4 * (V + 1) * C] = struct.pack("<f", 3e38) * C
open(sys.argv[2], "wb").write(data)
PY
refused "a model that became non-finite" "step 1: 128 non-finite values in the model and 0 in the optimizer state: stopping without a checkpoint of this step (no complete checkpoint exists)" \
    "$BIN" "${ARGS[@]}" -m 1 -e "$DIR/padded.bin" -x 1 -l 10 -c 10 -u 0 -o "$DIR/inf"
[ -z "$(ls "$DIR/inf" | grep -E 'DONE_|model_|state_')" ] || fail "files of a non-finite checkpoint were left: $(ls "$DIR/inf")"
