#!/usr/bin/env bash
# Multi-process training (MPI), for one encoding (default: cable):
#  1. mpirun -np 2 with B/2 per rank gives the same losses, step by step, and the same
#     final checkpoint as one process with B (tolerance: floating-point summation order);
#  2. ranks started with different flags, built with different encodings (two binaries under
#     one mpirun) or holding different models (the same -e naming another file on each) are
#     stopped at start-up with one line naming the rank, and for builds and models both sides;
#  3. a rank that fails (a bad token only it reads) or is killed ends the whole job
#     within seconds, never a hang.
set -euo pipefail
PE=${1:-cable}
BIN=build/train_gpt2_$PE
TEST=build/test_gpt2_$PE
command -v mpirun > /dev/null || { echo "skipped: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 0; }
DIR=$(mktemp -d /tmp/test_mpi.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
export OMP_NUM_THREADS=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x OMP_NUM_THREADS)
ARGS=(-e nano -t 64 -x 10 -v 5 -m 2 -s 0 -E none -l 1e-3 -u 3
      -i "data/starter/starter_train_*.bin" -j "data/starter/starter_val_*.bin")
fail() { echo "FAIL: $*"; exit 1; }

echo "=== $PE: 1 process x B=4 vs 2 processes x B=2"
"${MPIRUN[@]}" -np 1 "$BIN" "${ARGS[@]}" -b 4 -o "$DIR/np1" > "$DIR/np1.log"
"${MPIRUN[@]}" -np 2 "$BIN" "${ARGS[@]}" -b 2 -o "$DIR/np2" > "$DIR/np2.log"
paste <(grep "^step" "$DIR/np1.log" | awk '{print $5}') <(grep "^step" "$DIR/np2.log" | awk '{print $5}') \
    > "$DIR/losses"
[ "$(wc -l < "$DIR/losses")" -eq 10 ] || fail "expected 10 steps from each run"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "max loss difference over 10 steps: %.2e (tolerance 1e-4)\n", m; exit !(m <= 1e-4) }' \
    "$DIR/losses" || fail "losses differ"
"$TEST" compare "$DIR/np1/model_00000010.bin" "$DIR/np2/model_00000010.bin" 1e-4 | tail -1
"$TEST" compare "$DIR/np1/model_00000010.bin" "$DIR/np2/model_00000010.bin" 1e-4 > /dev/null || fail "final checkpoints differ"

# stopped WHAT TEXT CMD...: the job must end with an error within 60 s, its output holding TEXT
stopped() {
    local what=$1 text=$2 rc; shift 2
    echo "=== $PE: $what"
    set +e
    timeout 60 "$@" > "$DIR/stopped.log" 2>&1
    rc=$?
    set -e
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$what: exit code $rc"
    grep -q -- "$text" "$DIR/stopped.log" || { cat "$DIR/stopped.log"; fail "$what: no line with '$text'"; }
    echo "ok: stopped at start-up: $(grep -o "rank 1 was started.*" "$DIR/stopped.log")"
}

# a number (-b) and a list (-E: its items, not only their count) that differ on rank 1
for flag in "-b" "-E"; do
    stopped "ranks started with a different $flag" "rank 1 was started with a different configuration" \
        "${MPIRUN[@]}" -x FLAG="$flag" -np 2 bash -c \
        'r=$OMPI_COMM_WORLD_RANK; if [ "$FLAG" = -b ]; then v=$((2 + r)); else v=64,$((128 * (1 + r))); fi; exec "$0" "$@" "$FLAG" "$v"' \
        "$BIN" "${ARGS[@]}" -b 2
done

# two binaries under one mpirun: both builds named
OTHER=$([ "$PE" = learned ] && echo cable || echo learned)
stopped "ranks that run different builds" \
    "error (rank 0): rank 1 was started with a different build than rank 0: train_gpt2 with PE '$OTHER' (revision 0) on rank 1, train_gpt2 with PE '$PE' (revision 0) on rank 0" \
    "${MPIRUN[@]}" -np 1 "$BIN" "${ARGS[@]}" -b 2 : -np 1 "build/train_gpt2_$OTHER" "${ARGS[@]}" -b 2

# one -e path naming another file on each rank (each rank in its own folder): both models named
STARTER=$(realpath data/starter)
for t in 32 64; do
    "$BIN" -e nano -b 2 -t $t -x 1 -v 0 -s 0 -E none -i "$STARTER/starter_train_*.bin" -j "$STARTER/starter_val_*.bin" -o "$DIR/m$t" > /dev/null
done
mkdir -p "$DIR/rank0" "$DIR/rank1"
cp "$DIR/m32/model_00000001.bin" "$DIR/rank0/model.bin"
cp "$DIR/m64/model_00000001.bin" "$DIR/rank1/model.bin"
stopped "ranks that read different models" \
    "error (rank 0): rank 1 was started with a different model than rank 0: L=2 NH=4 C=128 maxT=64 .* on rank 1, L=2 NH=4 C=128 maxT=32 .* on rank 0" \
    "${MPIRUN[@]}" -x DIR="$DIR" -np 2 bash -c 'cd "$DIR/rank$OMPI_COMM_WORLD_RANK" && exec "$0" "$@"' "$(realpath "$BIN")" \
    -e model.bin -x 0 -b 2 -t 32 -m 1 -E none -j "$STARTER/starter_val_*.bin"

echo "=== $PE: a rank reads a bad token"
# rank 1 alone reads tokens 64..128 of the first batch (B=2, T=32 per rank)
python3 - "$DIR" <<'PY'
import struct, sys
toks = [(7 * i) % 50000 for i in range(4000)]
toks[100] = 60000
with open(sys.argv[1] + "/bad_000000.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *[0] * 253))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PY
set +e
start=$(date +%s)
timeout 60 "${MPIRUN[@]}" -np 2 "$BIN" -e nano -b 2 -t 32 -x 5 -v 0 -s 0 -E none -i "$DIR/bad_*.bin" \
    -j "data/starter/starter_val_*.bin" > "$DIR/bad.log" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "bad token: exit code $rc"
grep -q "error (rank 1):.*token 60000 at position 100 is out of range" "$DIR/bad.log" || { cat "$DIR/bad.log"; fail "no message naming rank 1"; }
echo "ok: the job ended in ${elapsed}s with the error of rank 1"

echo "=== $PE: a rank is killed"
"${MPIRUN[@]}" -np 2 "$BIN" "${ARGS[@]}" -b 2 -x 100000 > "$DIR/kill.log" 2>&1 &
mpipid=$!
for _ in $(seq 1 600); do grep -q "^step    3" "$DIR/kill.log" && break; sleep 0.1; done
victim=$(pgrep -f "$BIN" | while read -r p; do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$'; then echo $p; fi; done | head -1)
[ -n "$victim" ] || fail "could not find rank 1"
start=$(date +%s)
kill -9 "$victim"
set +e
timeout 60 tail --pid=$mpipid -f /dev/null
waited=$?
wait $mpipid
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $waited -eq 0 ] || fail "the job still runs 60 s after rank 1 was killed"
[ $rc -ne 0 ] || fail "the job exited with 0 after rank 1 was killed"
echo "ok: the job ended ${elapsed}s after rank 1 was killed (exit code $rc)"
