#!/usr/bin/env bash
# Every fixture checkpoint in tests/checkpoints/ (README there) loads and gives the numbers
# recorded when it was written, bit for bit: the loss at the training length, beyond it, and
# after one AdamW step; and every stem has its fixtures (a registered encoding without one
# fails, naming the command that records it).
#   tests/checkpoints.sh BUILD_DIR check "STEMS" "RP_STEMS"   (make test-checkpoints builds
#       BUILD_DIR/checkpoint_loss_<stem> for every stem first; RP_STEMS: the stems that take
#       randomized positions, whose <stem>_rp fixture must exist too)
#   tests/checkpoints.sh BUILD_DIR record STEM   (make record-fixture PE=<name> [DAPE=...]): writes
#       STEM's fixtures (and STEM_rp's where the encoding takes randomized positions) that
#       tests/checkpoints/ lacks and appends their numbers to losses.txt; one it has stays as
#       it is, and a stem that has both is refused
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: tests/checkpoints.sh BUILD_DIR check STEMS RP_STEMS | BUILD_DIR record STEM}
MODE=${2:?usage: tests/checkpoints.sh BUILD_DIR check STEMS RP_STEMS | BUILD_DIR record STEM}
DIR=tests/checkpoints

# the recorded line of a fixture: the loss binary of its stem on it
loss_line() {
    local bin=$BUILD/checkpoint_loss_${1%_rp}
    [ -x "$bin" ] || { echo "error: $bin is missing; run \`make test-checkpoints\`" >&2; exit 1; }
    OMP_NUM_THREADS=1 "$bin" loss "$DIR/$1.bin" "$DIR/tokens.bin"
}

if [ "$MODE" = record ]; then
    stem=${3:?usage: tests/checkpoints.sh BUILD_DIR record STEM}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp "$DIR/tokens.bin" "$tmp/"
    "$BUILD/checkpoint_loss_$stem" write "$tmp"
    recorded=0
    for f in "$tmp/$stem.bin" "$tmp/${stem}_rp.bin"; do
        [ -e "$f" ] || continue
        name=$(basename "$f" .bin)
        if grep -qE "^${name} " "$DIR/losses.txt" || [ -e "$DIR/$name.bin" ]; then continue; fi
        mv "$f" "$DIR/$name.bin"
        echo "$name $(loss_line "$name")" >> "$DIR/losses.txt"
        echo "recorded $DIR/$name.bin: $(tail -1 "$DIR/losses.txt")"
        recorded=$((recorded + 1))
    done
    if [ "$recorded" -eq 0 ]; then
        echo "error: $stem has its fixtures in $DIR already (a change of their numbers rewrites them by hand, and says why)" >&2; exit 1
    fi
    sort -o "$DIR/losses.txt" "$DIR/losses.txt"
    exit 0
fi

[ "$MODE" = check ] || { echo "error: unknown mode '$MODE' (check or record)" >&2; exit 1; }
STEMS=${3:?usage: tests/checkpoints.sh BUILD_DIR check STEMS RP_STEMS} RP_STEMS=${4-}
fail=0 n=0
while read -r name expected; do
    got=$(loss_line "$name")
    n=$((n + 1))
    if [ "$got" != "$expected" ]; then echo "  FAIL  $name: $got, recorded $expected"; fail=1; fi
done < "$DIR/losses.txt"
[ "$n" -gt 0 ] || { echo "FAIL: no fixtures in $DIR/losses.txt"; exit 1; }
for stem in $STEMS; do
    want=$stem
    case " $RP_STEMS " in *" $stem "*) want="$stem ${stem}_rp" ;; esac
    for name in $want; do
        if ! grep -q "^$name " "$DIR/losses.txt"; then
            echo "  FAIL  $name has no fixture: record it with make record-fixture $(echo "$stem" | sed -E 's/^([a-z0-9_]+)_dape([a-z0-9]+)$/PE=\1 DAPE=\2/; t; s/^/PE=/') (tests/checkpoints/README.md)"
            fail=1
        fi
    done
done
[ "$fail" -eq 0 ] || { echo "FAIL: checkpoints whose numbers changed, or stems without a fixture (tests/checkpoints/README.md)"; exit 1; }
echo "  ok    $n checkpoints: the loss at and beyond the training length and after one step, bit for bit; every stem has its fixtures"
