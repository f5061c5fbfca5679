#!/usr/bin/env bash
# Every fixture checkpoint in tests/checkpoints/ (README there) loads and gives the numbers
# recorded when it was written, bit for bit: the loss at the training length, beyond it, and
# after one AdamW step. usage: tests/checkpoints.sh BUILD_DIR (make test-checkpoints builds
# BUILD_DIR/checkpoint_loss_<stem> for every stem first)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: tests/checkpoints.sh BUILD_DIR}
DIR=tests/checkpoints
fail=0 n=0
while read -r name expected; do
    stem=${name%_rp}
    bin=$BUILD/checkpoint_loss_$stem
    [ -x "$bin" ] || { echo "error: $bin is missing; run \`make test-checkpoints\`" >&2; exit 1; }
    got=$(OMP_NUM_THREADS=1 "$bin" loss "$DIR/$name.bin" "$DIR/tokens.bin")
    n=$((n + 1))
    if [ "$got" != "$expected" ]; then echo "  FAIL  $name: $got, recorded $expected"; fail=1; fi
done < "$DIR/losses.txt"
[ "$n" -gt 0 ] || { echo "FAIL: no fixtures in $DIR/losses.txt"; exit 1; }
[ "$fail" -eq 0 ] || { echo "FAIL: checkpoints whose numbers changed (tests/checkpoints/README.md)"; exit 1; }
echo "  ok    $n checkpoints: the loss at and beyond the training length and after one step, bit for bit"
