#!/usr/bin/env bash
# Exact resume and crash-safe checkpoints, for one encoding (default: cable):
#  1. a run killed with SIGKILL in the middle of training and resumed with -y 1 ends
#     with the same checkpoint, bit for bit, and the same main.log as an uninterrupted run;
#  2. a run killed while it writes a checkpoint leaves the previous checkpoint loadable,
#     and resuming from it again ends bit-identical to the uninterrupted run;
#  3. with update skipping on (-sl, -sg), a run resumed past the outlier detector's
#     128-step window prints the same z-scores and skips the same steps;
#  4. a resume without the run's flags takes them from its state file (bit-exact), and one
#     with -a 1 overfits the same batch (bit-exact); one with another -lb says so in a line;
#  5. what an output directory and a resume refuse, with one line and a nonzero exit: a new
#     run over an old one, a second trainer into a directory in use, a resume past the new
#     -x, changed -b/-t/-d/-a/-e/-i, an old state file, a FIFO as the state file, -x 0 -y 1
#     with another -e or without a checkpoint, a main.log or .lock that is a symbolic link, a
#     resume of a run with no checkpoint and no record of its flags; an evaluation-only run
#     into the directory leaves main.log's lines as they are;
#  6. a run killed before its first checkpoint, resumed with `-o DIR -y 1` alone, starts
#     again from step 0 with its own flags and ends bit-identical to an uninterrupted run; a
#     run with every evaluation flag (-j sets, -n, -v, -V, -E, -K, -W, -L, -H, -P, -s 0) killed
#     after a checkpoint and resumed with `-o DIR -y 1` alone ends with the main.log, the four
#     evaluation tables and the checkpoints of an uninterrupted run, and so does that run killed
#     after its evaluations and before its first checkpoint, started again from step 0;
#  7. a trainer removes only the temporary files whose writer is gone: a user's files and a
#     tokenizer writing into the directory at the same time are left alone;
#  8. a resume with another number of OpenMP threads (not bit-exact) says so in a warning.
#  9. (learned) a run with randomized positions (-rp) killed with SIGKILL and resumed without
#     -rp (the checkpoint has it) draws the same positions: bit-identical checkpoint and
#     main.log; a resume with another -rp is refused.
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
wait_for_tmp() { # wait_for_tmp FILE SECONDS: a temporary file of FILE (.llmc-tmp.<host>.<pid>.<n>.<name>) appears
    local pattern="$(dirname "$1")/.llmc-tmp.*.$(basename "$1")"
    for _ in $(seq 1 $(( $2 * 20 ))); do compgen -G "$pattern" > /dev/null && return 0; sleep 0.05; done
    fail "timed out waiting for $pattern"
}
wait_for_tmp "$DIR/save/model_00000010.bin" 120
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

echo "=== $PE: a resume takes the run's flags from its state file; -a 1 resumes on the same batch"
DATA=(-i "data/starter/starter_train_*.bin" -j "data/starter/starter_val_*.bin")
SMALL=(-e nano -b 2 -t 32 -l 2e-3 -u 2 -v 0 -m 1 -s 0 -E none "${DATA[@]}")
"$BIN" "${SMALL[@]}" -x 6 -n 3 -o "$DIR/r" > /dev/null
mkdir -p "$DIR/r2"
cp "$DIR"/r/{model_00000003.bin,state_00000003_00000.bin,DONE_00000003,main.log} "$DIR/r2/"
"$BIN" -v 0 -m 1 -s 0 -E none "${DATA[@]}" -o "$DIR/r2" -y 1 > "$DIR/r2.log"
grep -q "resume: flags of the run, from its state file: -b 2 -t 32 -x 6 -u 2 -l 0.002" "$DIR/r2.log" || { cat "$DIR/r2.log"; fail "the recorded flags were not taken"; }
"$TEST" compare "$DIR/r/model_00000006.bin" "$DIR/r2/model_00000006.bin" 0 > /dev/null || fail "resumed with the recorded flags, the checkpoint differs"
"$BIN" "${SMALL[@]}" -a 1 -x 6 -n 3 -o "$DIR/a" > /dev/null
mkdir -p "$DIR/a2"
cp "$DIR"/a/{model_00000003.bin,state_00000003_00000.bin,DONE_00000003,main.log} "$DIR/a2/"
"$BIN" "${SMALL[@]}" -a 1 -x 6 -n 3 -o "$DIR/a2" -y 1 > /dev/null
"$TEST" compare "$DIR/a/model_00000006.bin" "$DIR/a2/model_00000006.bin" 0 > /dev/null || fail "-a 1: the resumed checkpoint differs"
echo "ok: steps 4-6 resumed without flags, and with -a 1, are bit-identical"
# a resume with another -lb says so, as one with another -l; a state file that does not count its
# flags (word 14 = 0: written before -lb was recorded) resumes with the run's -lb, silently
for lb in lb lb_old; do
    mkdir -p "$DIR/$lb"
    cp "$DIR"/r/{model_00000003.bin,state_00000003_00000.bin,DONE_00000003,main.log} "$DIR/$lb/"
done
printf '\0\0\0\0' | dd of="$DIR/lb_old/state_00000003_00000.bin" bs=1 seek=56 conv=notrunc status=none
"$BIN" "${SMALL[@]}" -x 6 -lb 0 -o "$DIR/lb" -y 1 > "$DIR/lb.log"
grep -q "^resume: -lb 0 replaces this run's -lb [0-9]* from step 3 on" "$DIR/lb.log" || { grep resume "$DIR/lb.log"; fail "another -lb: no line"; }
"$BIN" "${SMALL[@]}" -x 6 -lb 0 -o "$DIR/lb_old" -y 1 > "$DIR/lb_old.log"
! grep -q -- "-lb" "$DIR/lb_old.log" || { grep -- "-lb" "$DIR/lb_old.log"; fail "a state file without -lb: a line about it"; }
"$TEST" compare "$DIR/r/model_00000006.bin" "$DIR/lb_old/model_00000006.bin" 0 > /dev/null || fail "a state file without -lb: the resumed checkpoint differs"
echo "ok: $(grep "^resume: -lb" "$DIR/lb.log"); a state file without it resumes as before"

echo "=== $PE: what an output directory and a resume refuse"
# refused WHAT TEXT ARGS...: a nonzero exit within 60 s and one line on stderr containing TEXT
refused() {
    local what=$1 text=$2 rc; shift 2
    set +e
    timeout 60 "$BIN" "$@" > "$DIR/refused.out" 2> "$DIR/refused.err"
    rc=$?
    set -e
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(wc -l < "$DIR/refused.err")" -eq 1 ] && grep -q -- "$text" "$DIR/refused.err"; then
        printf "  ok    %-44s %s\n" "$what" "$(cat "$DIR/refused.err")"
    else
        echo "  FAIL  $what: exit $rc, stderr:"; cat "$DIR/refused.err"; tail -3 "$DIR/refused.out"; fail "$what"
    fi
}
cp "$DIR/r/main.log" "$DIR/r.main.log"
ls "$DIR/r" > "$DIR/r.files"
refused "a new run into a directory with a run" "holds a run" "${SMALL[@]}" -x 2 -o "$DIR/r"
refused "a resume past the new -x" "is at step 6, past the last step, 4" "${SMALL[@]}" -x 4 -n 3 -o "$DIR/r" -y 1
refused "a resume with another -b" "resume: -b 4 differs from this run's -b 2" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -b 4
refused "a resume with another -t" "resume: -t 16 differs from this run's -t 32" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -t 16
refused "a resume with another -d" "resume: -d 128 differs from this run's -d 64" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -d 128
refused "a resume with another -a" "resume: -a 1 differs from this run's -a 0" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -a 1
refused "a resume with another -e" "resume: -e cpu is not the model this run started from" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -e cpu
refused "a resume with other training data" "the training data .* is not this run's" "${SMALL[@]}" -x 8 -o "$DIR/r" -y 1 -i "data/starter/starter_val_*.bin"
cmp "$DIR/r.main.log" "$DIR/r/main.log" || fail "a refused run changed main.log"
diff "$DIR/r.files" <(ls "$DIR/r") || fail "a refused run changed the files of the run"
# an evaluation-only run into the directory appends to main.log and keeps its lines
"$BIN" -e "$DIR/r/model_00000006.bin" -x 0 -E 32 -K 64 "${DATA[@]}" -o "$DIR/r" > /dev/null
head -c "$(stat -c %s "$DIR/r.main.log")" "$DIR/r/main.log" | cmp - "$DIR/r.main.log" || fail "an evaluation-only run changed main.log's lines"
echo "  ok    an evaluation-only run keeps main.log's $(wc -l < "$DIR/r.main.log") lines"
# a state file of the previous version (101, which did not record the flags)
mkdir -p "$DIR/old"
cp "$DIR"/r/{model_00000003.bin,state_00000003_00000.bin,DONE_00000003,main.log} "$DIR/old/"
printf '\x65\x00\x00\x00' | dd of="$DIR/old/state_00000003_00000.bin" bs=1 seek=4 conv=notrunc status=none
refused "a resume from a state file of version 101" "state version 101 is from an older trainer" "${SMALL[@]}" -x 6 -o "$DIR/old" -y 1
rm "$DIR/old/state_00000003_00000.bin"
mkfifo "$DIR/old/state_00000003_00000.bin"
refused "a FIFO as the state file" "state_00000003_00000.bin is not a regular file" "${SMALL[@]}" -x 6 -o "$DIR/old" -y 1
# one epoch (-x -1) of a 641-token shard is 10 steps at -d 64; a resume with -d 128 would
# make it 5 steps, behind the run
python3 - "$DIR/tiny_000000.bin" <<'PY'
import struct, sys
toks = [(7 * i) % 50000 for i in range(641)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *[0] * 253))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PY
EPOCH=(-e nano -b 2 -t 32 -v 0 -m 1 -s 0 -E none -x -1 -i "$DIR/tiny_*.bin" -j "data/starter/starter_val_*.bin")
"$BIN" "${EPOCH[@]}" -n 5 -o "$DIR/epoch" > /dev/null
[ -e "$DIR/epoch/DONE_00000010" ] || fail "one epoch was not 10 steps"
refused "one epoch resumed with another -d" "resume: -d 128 differs from this run's -d 64" "${EPOCH[@]}" -d 128 -o "$DIR/epoch" -y 1
"$BIN" "${EPOCH[@]}" -o "$DIR/epoch" -y 1 > "$DIR/epoch2.log"
grep -q "already ended at step 10 (-x -1): nothing to train" "$DIR/epoch2.log" || fail "a finished run resumed did not say so"
echo "  ok    a finished run resumed says so and stops: $(tail -1 "$DIR/epoch2.log")"
# evaluation only with -y 1: the run's latest checkpoint, so -e is refused, and so is a directory without one
refused "-x 0 -y 1 with another -e" "-x 0 -y 1 evaluates the latest checkpoint in $DIR/r; -e $DIR/r/model_00000003.bin names another model" \
    -e "$DIR/r/model_00000003.bin" -x 0 -y 1 -E 32 -K 64 "${DATA[@]}" -o "$DIR/r"
mkdir -p "$DIR/empty"
refused "-x 0 -y 1 without a checkpoint" "-x 0 -y 1: $DIR/empty holds no complete checkpoint to evaluate" -x 0 -y 1 -E 32 -K 64 "${DATA[@]}" -o "$DIR/empty"
# main.log and .lock are written in place: a symbolic link there (to a file outside -o) is refused
echo "outside" > "$DIR/outside.txt"
mkdir -p "$DIR/link" "$DIR/lock"
ln -s "$DIR/outside.txt" "$DIR/link/main.log"
ln -s "$DIR/outside.txt" "$DIR/lock/.lock"
refused "an evaluation into a main.log that is a link" "$DIR/link/main.log is a symbolic link" \
    -e "$DIR/r/model_00000006.bin" -x 0 -E 32 -K 64 "${DATA[@]}" -o "$DIR/link"
refused "a run into a .lock that is a link" "$DIR/lock/.lock is a symbolic link" "${SMALL[@]}" -x 2 -o "$DIR/lock"
[ "$(cat "$DIR/outside.txt")" = outside ] || fail "a file outside -o was written through a link"
# a directory that holds a run (main.log) but no checkpoint and no record of its flags
mkdir -p "$DIR/nolog"
printf 's:0 tel:10.0000\n' > "$DIR/nolog/main.log"
refused "a resume of a run with neither a checkpoint nor its flags" "holds a run (main.log) but neither a complete checkpoint nor the flags" \
    -o "$DIR/nolog" -y 1
[ "$(cat "$DIR/nolog/main.log")" = "s:0 tel:10.0000" ] || fail "a refused resume changed main.log"
# a second trainer into a directory in use
"$BIN" "${SMALL[@]}" -x 100000 -o "$DIR/busy" > /dev/null 2>&1 &
busy=$!
for _ in $(seq 1 1200); do grep -q "^s:1 " "$DIR/busy/main.log" 2> /dev/null && break; sleep 0.05; done
refused "a second trainer into a directory in use" "is in use by another trainer (process $busy holds" "${SMALL[@]}" -x 2 -o "$DIR/busy" -y 1
kill $busy; wait $busy 2> /dev/null || true
echo "ok: every case refused with one line; main.log and the run's files untouched"

echo "=== $PE: a run killed before its first checkpoint, resumed with -o DIR -y 1 alone"
# the run of $DIR/r, killed while it writes its first checkpoint (held 3 s before its commit)
LLMC_SLOW_WRITE_MS=3000 "$BIN" "${SMALL[@]}" -x 6 -n 3 -o "$DIR/killed" > /dev/null &
pid=$!
wait_for_tmp "$DIR/killed/model_00000003.bin" 120
kill -9 $pid; wait $pid 2> /dev/null || true
[ ! -e "$DIR/killed/DONE_00000003" ] || fail "the first checkpoint completed before the kill"
"$BIN" -o "$DIR/killed" -y 1 > "$DIR/killed.log"
grep -q "the run starts again at step 0 with its flags" "$DIR/killed.log" || { cat "$DIR/killed.log"; fail "no restart with the run's flags"; }
"$TEST" compare "$DIR/r/model_00000006.bin" "$DIR/killed/model_00000006.bin" 0 > /dev/null || fail "the restarted run's checkpoint differs"
cmp "$DIR/r.main.log" "$DIR/killed/main.log" || fail "the restarted run's main.log differs"
echo "ok: started again from step 0 with the run's flags: checkpoint and main.log bit-identical to an uninterrupted run"

echo "=== $PE: a run with every evaluation flag, killed after a checkpoint, resumed with -o DIR -y 1 alone"
doc() { printf '%d\n%s' "$(printf %s "$1" | wc -c)" "$1"; }
{ printf '0 2\n'; doc "The grass is"; doc " green."; doc " blue."; printf '1 2\n'; doc "The sky is"; doc " green."; doc " blue."; } \
    | ./tokenizer eval "$DIR/hellaswag.bin" > /dev/null
FLAGS=(-e nano -b 2 -t 32 -x 6 -n 2 -v 2 -m 1 -s 0 -V 3 -E 32,80 -K 64 -W 16 -L 16 -H "$DIR/hellaswag.bin" -P 1 -Pd 2
       -l 2e-3 -u 2 -i "data/starter/starter_train_*.bin" -j "val=data/starter/starter_val_*.bin,tr=data/starter/starter_train_*.bin")
TABLES="extrapolation.csv positions.csv hellaswag.csv passkey.csv"
"$BIN" "${FLAGS[@]}" -o "$DIR/full" > /dev/null
# the run killed after the evaluation at step 3 and before the checkpoint of step 4: its
# checkpoint of step 2, its flags, and main.log and the tables as far as it got (here: to the end)
mkdir -p "$DIR/full2"
cp "$DIR"/full/{model_00000002.bin,state_00000002_00000.bin,DONE_00000002,cmdline,main.log} "$DIR/full2/"
for f in $TABLES; do cp "$DIR/full/$f" "$DIR/full2/"; done
"$BIN" -o "$DIR/full2" -y 1 > "$DIR/full2.log"
grep -q "resumed from step 2" "$DIR/full2.log" || fail "did not resume from step 2"
! grep -q "^generating:" "$DIR/full2.log" || fail "the resumed run samples (its -s 0 was lost)"
cmp "$DIR/full/main.log" "$DIR/full2/main.log" || { diff "$DIR/full/main.log" "$DIR/full2/main.log"; fail "main.log differs"; }
for f in $TABLES; do
    [ "$(cut -d, -f1 --complement "$DIR/full/$f" | awk -F, 'NR > 1' | wc -l)" -gt 0 ] || fail "$f is empty"
    cmp "$DIR/full/$f" "$DIR/full2/$f" || { diff "$DIR/full/$f" "$DIR/full2/$f" | head; fail "$f differs"; }
done
[ "$(ls "$DIR/full" | grep -c '^DONE_')" -eq 3 ] && diff <(ls "$DIR/full" | grep '^DONE_') <(ls "$DIR/full2" | grep '^DONE_') \
    || fail "the checkpoints differ: $(ls "$DIR/full2" | grep '^DONE_' | tr '\n' ' ')"
"$TEST" compare "$DIR/full/model_00000006.bin" "$DIR/full2/model_00000006.bin" 0 > /dev/null || fail "the resumed run's checkpoint differs"
echo "ok: resumed with its own flags: main.log, $TABLES and checkpoints 2, 4, 6 of the uninterrupted run"
# the run killed before its first checkpoint, after evaluations: its flags, main.log and the
# tables' rows (here: of every step), no checkpoint; started again from step 0, it must leave
# the tables as the uninterrupted run did (their rows of the steps after 0 dropped, as main.log's)
mkdir -p "$DIR/full3"
cp "$DIR"/full/{cmdline,main.log} "$DIR/full3/"
for f in $TABLES; do cp "$DIR/full/$f" "$DIR/full3/"; done
"$BIN" -o "$DIR/full3" -y 1 > "$DIR/full3.log"
grep -q "the run starts again at step 0 with its flags" "$DIR/full3.log" || fail "no restart from step 0"
cmp "$DIR/full/main.log" "$DIR/full3/main.log" || { diff "$DIR/full/main.log" "$DIR/full3/main.log"; fail "main.log differs"; }
for f in $TABLES; do
    cmp "$DIR/full/$f" "$DIR/full3/$f" || { diff "$DIR/full/$f" "$DIR/full3/$f" | head; fail "started again: $f differs"; }
done
echo "ok: started again from step 0 without a checkpoint: main.log and $TABLES of the uninterrupted run"

echo "=== $PE: only temporary files whose writer is gone are removed"
[ -x ./tokenizer ] || fail "./tokenizer is not built (make tokenizer)"
touch "$DIR/r/notes.2024.1.tmp" "$DIR/r/model_00000003.bin.999.0.tmp"
printf '11\nhello world' > "$DIR/doc.stream"
# a tokenizer killed while it writes a shard into the directory leaves a temporary file
LLMC_SLOW_WRITE_MS=60000 ./tokenizer shard -s val "$DIR/r/dead" < "$DIR/doc.stream" > /dev/null 2>&1 &
pid=$!
wait_for_tmp "$DIR/r/dead_val_000000.bin" 60
kill -9 $pid; wait $pid 2> /dev/null || true
# a tokenizer writing a shard into the directory while a trainer starts there
LLMC_SLOW_WRITE_MS=5000 ./tokenizer shard -s val "$DIR/r/live" < "$DIR/doc.stream" > /dev/null 2> "$DIR/live.err" &
pid=$!
wait_for_tmp "$DIR/r/live_val_000000.bin" 60
"$BIN" -e "$DIR/r/model_00000006.bin" -x 0 -E 32 -K 64 "${DATA[@]}" -o "$DIR/r" > /dev/null
wait $pid || { cat "$DIR/live.err"; fail "the tokenizer writing into the directory failed"; }
[ -e "$DIR/r/live_val_000000.bin" ] || fail "the tokenizer's shard is missing"
[ -e "$DIR/r/notes.2024.1.tmp" ] && [ -e "$DIR/r/model_00000003.bin.999.0.tmp" ] || fail "a user's file was removed"
[ -z "$(ls -A "$DIR/r" | grep '^\.llmc-tmp\.')" ] || fail "a dead writer's temporary file is left: $(ls -A "$DIR/r" | grep '^\.llmc-tmp\.')"
echo "ok: a user's *.tmp files and a running tokenizer's shard kept, a killed writer's temporary file removed"

echo "=== $PE: a resume with another number of OpenMP threads says so"
OMP_NUM_THREADS=2 "$BIN" "${SMALL[@]}" -x 4 -n 2 -o "$DIR/omp" > /dev/null
for threads in 2 1; do
    mkdir -p "$DIR/omp$threads"
    cp "$DIR"/omp/{model_00000002.bin,state_00000002_00000.bin,DONE_00000002,main.log} "$DIR/omp$threads/"
    OMP_NUM_THREADS=$threads "$BIN" "${SMALL[@]}" -x 4 -n 2 -o "$DIR/omp$threads" -y 1 > /dev/null 2> "$DIR/omp$threads.err"
done
[ ! -s "$DIR/omp2.err" ] || { cat "$DIR/omp2.err"; fail "a warning with the same number of threads"; }
grep -q "state_00000002_00000.bin was written with 2 OpenMP threads, this run has 1: the steps from here on are not bit-identical" "$DIR/omp1.err" \
    || { cat "$DIR/omp1.err"; fail "no warning when the number of threads changes"; }
"$TEST" compare "$DIR/omp/model_00000004.bin" "$DIR/omp2/model_00000004.bin" 0 > /dev/null || fail "a resume with the same threads differs"
echo "ok: $(cat "$DIR/omp1.err")"

if [ "$PE" = learned ]; then
    echo "=== $PE: randomized positions (-rp 128): kill -9, then resume"
    RP=(-e nano -b 2 -t 32 -x 12 -v 6 -m 2 -s 0 -E none -l 1e-3 -u 2 -rp 128 "${DATA[@]}")
    "$BIN" "${RP[@]}" -n 6 -o "$DIR/rpref" > "$DIR/rpref.log"
    grep -q "randomized positions  | from \[0, 128)" "$DIR/rpref.log" || fail "the -rp run does not say so"
    LLMC_SLOW_WRITE_MS=3000 "$BIN" "${RP[@]}" -n 3 -o "$DIR/rprun" > /dev/null &
    pid=$!
    wait_for "$DIR/rprun/DONE_00000006" 120
    kill -9 $pid; wait $pid 2>/dev/null || true
    [ ! -e "$DIR/rprun/DONE_00000012" ] || fail "the -rp run finished before it could be killed"
    refused "a resume with another -rp" "resume: -rp 64 differs from this run's -rp 128" -o "$DIR/rprun" -y 1 -rp 64
    "$BIN" -o "$DIR/rprun" -y 1 -v 6 -m 2 -s 0 -E none "${DATA[@]}" -n 3 > "$DIR/rprun2.log"
    grep -q "resumed from step 6" "$DIR/rprun2.log" || fail "the -rp run did not resume from step 6"
    "$TEST" compare "$DIR/rpref/model_00000012.bin" "$DIR/rprun/model_00000012.bin" 0 > /dev/null || fail "-rp: the resumed checkpoint differs"
    cmp "$DIR/rpref/main.log" "$DIR/rprun/main.log" || fail "-rp: main.log differs"
    echo "ok: a -rp run resumed after kill -9 draws the same positions (checkpoint and main.log bit-identical)"
fi
