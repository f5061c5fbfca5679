#!/usr/bin/env bash
# Training health: a step with a non-finite loss or gradient norm skips its update and is
# reported; five in a row stop the run with a message, and no checkpoint of the failed
# state is written (the last good one stays the newest).
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
grep -q "5 consecutive steps with a non-finite loss or gradient: stopping" "$DIR/err" || { cat "$DIR/err"; fail "no stop message"; }
[ -z "$(ls "$DIR/run" | grep model_)" ] || fail "a checkpoint of the failed run was written"
echo "ok: 5 non-finite steps skipped and reported, then a stop with: $(cat "$DIR/err")"
