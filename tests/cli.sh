#!/usr/bin/env bash
# Bad input to the trainer: every case must end with a nonzero exit and exactly one
# line on stderr that names the problem (never a crash, a hang or silent garbage).
set -uo pipefail
PE=${1:-learned}
BIN=$(realpath "build/train_gpt2_$PE")
DIR=$(mktemp -d /tmp/test_cli.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
TRAIN="$(realpath data/starter)/starter_train_*.bin"
VAL="$(realpath data/starter)/starter_val_*.bin"
OK=(-e nano -b 2 -t 32 -x 2 -v 0 -s 0 -E none -i "$TRAIN" -j "$VAL")
failures=0

# expect "what" "expected text" args... (run in $DIR so gpt2_tokenizer.bin is under our control;
# LIMIT, if set, is a shell command run first, e.g. a ulimit)
expect() {
    local what=$1 text=$2; shift 2
    (cd "$DIR" && eval "${LIMIT:-true}" && timeout 120 "$BIN" "$@" > "$DIR/out" 2> "$DIR/err")
    local rc=$? lines
    lines=$(wc -l < "$DIR/err")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$lines" -eq 1 ] && grep -q -- "$text" "$DIR/err"; then
        printf "  ok    %-48s %s" "$what" "$(cat "$DIR/err")"; echo
    else
        printf "  FAIL  %-48s exit %d, %d stderr lines:\n" "$what" $rc "$lines"; cat "$DIR/err"; failures=$((failures + 1))
    fi
}

echo "=== $PE: bad flags and files"
expect "batch size 0" "flag -b must be in" "${OK[@]}" -b 0
expect "sequence length 0" "flag -t must be in" "${OK[@]}" -t 0
expect "not a number" "expects an integer" "${OK[@]}" -t 12x
expect "flag without a value" "needs a value" "${OK[@]}" -x
expect "unknown flag" "unknown flag -Z" "${OK[@]}" -Z 1
expect "final lr fraction out of range" "flag -q must be in" "${OK[@]}" -q 2
expect "total batch not divisible" "not a multiple of B\*T" "${OK[@]}" -d 1000
expect "unknown preset" "neither a .bin checkpoint nor a preset" "${OK[@]}" -e nonsense
expect "missing checkpoint" "cannot open" "${OK[@]}" -e "$DIR/missing.bin"
expect "no shard matches" "no file matches" "${OK[@]}" -i "$DIR/none_*.bin"
expect "output directory not creatable" "cannot create directory" "${OK[@]}" -o /etc/passwd/out
expect "resume without an output directory" "needs an output directory" "${OK[@]}" -y 1
expect "total batch 0" "flag -d: a total batch of 0" "${OK[@]}" -d 0
expect "total batch 0, one epoch" "flag -d: a total batch of 0" "${OK[@]}" -d 0 -x -1
expect "B*T overflows 32 bits" "tokens per micro-step, more than" "${OK[@]}" -b 65536 -t 65536
expect "empty -E list" "flag -E expects lengths" "${OK[@]}" -E ""
expect "-E of a comma" "flag -E expects lengths" "${OK[@]}" -E ","
expect "-E with an empty item" "flag -E expects lengths" "${OK[@]}" -E 64,,128
expect "-W 0" "flag -W: a stride of 0" "${OK[@]}" -W 0
expect "-g beyond the bound" "flag -g must be in \[1, 1024\]" "${OK[@]}" -g 100000 -s 1
expect "ZeRO stage 1 on the CPU trainer" "only in the CUDA trainer" "${OK[@]}" -z 1
expect "-g 0, with the bound it has" "flag -g must be in \[1, 1024\]" "${OK[@]}" -g 0 -s 1
expect "-E with a length given twice" "flag -E: 64 is given twice" "${OK[@]}" -E 64,32,64
expect "-rf without a static -rs method" "flag -rf: the static RoPE scaling factor is used only by -rs pi, ntk or yarn" "${OK[@]}" -rf 2
LONG="$DIR$(printf '/missing%.0s' $(seq 1 150)).bin" # 1200 characters: the reason comes after them
expect "a long path does not hide the reason" "missing.bin (No such file or directory)" "${OK[@]}" -e "$LONG"
expect "-j item without a pattern" "flag -j: 'a=' is not name=pattern" "${OK[@]}" -j "a=$VAL,a="
expect "-j set given twice" "the set 'a' is given twice" "${OK[@]}" -j "a=$VAL,a=$VAL"
expect "-j set name with a character of a path" "may hold letters, digits" "${OK[@]}" -j "a=$VAL,x y=$VAL"
expect "-j set name of 300 characters" "is longer than 64 characters" "${OK[@]}" -j "$(printf 'n%.0s' $(seq 300))=$VAL"
# a pattern whose text before its first '=' is no set name (a '/' in it) is one plain pattern
expect "-j pattern with '=' in a directory, no shard" "no file matches the data pattern 'x/y=" "${OK[@]}" -j "x/y=$VAL"
expect "-j set without shards" "no file matches" "${OK[@]}" -j "a=$VAL,b=$DIR/none_*.bin"
expect "-L below 0" "flag -L must be in" "${OK[@]}" -L -1
expect "-Pd of one depth" "flag -Pd must be in" "${OK[@]}" -P 1 -Pd 1
expect "-P without gpt2_passkey.bin" "gpt2_passkey.bin not found" "${OK[@]}" -P 1
expect "-H of a missing file" "cannot open" "${OK[@]}" -H "$DIR/missing_hellaswag.bin"
printf 'garbage' > "$DIR/hellaswag.bin"
expect "-H of a file shorter than its header" "is not an eval file" "${OK[@]}" -H "$DIR/hellaswag.bin"
head -c 2048 "$(realpath data/starter)/starter_val_000000.bin" > "$DIR/hellaswag.bin"
expect "-H of a token shard" "bad magic 20240520" "${OK[@]}" -H "$DIR/hellaswag.bin"
mkfifo "$DIR/fifo.bin" "$DIR/fifo_000000.bin"
expect "a FIFO as the checkpoint" "fifo.bin is not a regular file" "${OK[@]}" -e "$DIR/fifo.bin"
expect "a FIFO as a shard" "fifo_000000.bin is not a regular file" "${OK[@]}" -i "$DIR/fifo_*.bin"
mkdir -p "$DIR/done"
touch "$DIR/done/DONE_99999999999"
expect "a checkpoint marker beyond int" "DONE_99999999999: a checkpoint marker whose step is beyond" "${OK[@]}" -o "$DIR/done" -y 1
# every shard of every test set is read whole before the first step: a token outside the
# vocabulary in the second shard of a set stops the run before it trains
mkdir -p "$DIR/badset"
python3 - "$DIR/badset" <<'PY'
import struct, sys
for k, bad in ((0, None), (1, 5000)):
    toks = [(11 * i) % 50000 for i in range(8000)]
    if bad is not None:
        toks[bad] = 60000
    with open("%s/bad_%06d.bin" % (sys.argv[1], k), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *[0] * 253))
        f.write(struct.pack("<%dH" % len(toks), *toks))
PY
expect "-j set with a token outside the vocabulary" "bad_000001.bin: token 60000 at position 5000 is out of range" \
    "${OK[@]}" -E 32 -K 64 -j "val=$VAL,bad=$DIR/badset/bad_*.bin" -o "$DIR/badrun"
if grep -q "^step" "$DIR/out" || [ -e "$DIR/badrun/main.log" ]; then
    echo "  FAIL  -j set with a bad token: the run trained before the check"; failures=$((failures + 1))
fi
# a file the trainer writes that is a FIFO is refused (never replaced or written into)
mkdir -p "$DIR/fifo_log" "$DIR/fifo_csv"
mkfifo "$DIR/fifo_log/main.log" "$DIR/fifo_csv/extrapolation.csv"
expect "main.log that is a FIFO" "fifo_log/main.log is a FIFO, not a regular file" "${OK[@]}" -o "$DIR/fifo_log"
(cd "$DIR" && "$BIN" "${OK[@]}" -o "$DIR/ck" > /dev/null 2>&1)
expect "extrapolation.csv that is a FIFO" "fifo_csv/extrapolation.csv is a FIFO, not a regular file" \
    -e "$DIR/ck/model_00000002.bin" -x 0 -m 1 -E 32 -K 64 -j "$VAL" -o "$DIR/fifo_csv"
if [ -p "$DIR/fifo_log/main.log" ] && [ -p "$DIR/fifo_csv/extrapolation.csv" ]; then echo "  ok    the FIFOs are left as they were"
else echo "  FAIL  a FIFO was replaced"; failures=$((failures + 1)); fi
# a plain -j path whose directory holds '=' is one pattern, the set val
mkdir -p "$DIR/a=b"
cp "$(realpath data/starter)/starter_val_000000.bin" "$DIR/a=b/"
if (cd "$DIR" && "$BIN" -e "$DIR/ck/model_00000002.bin" -x 0 -m 1 -E 32 -K 64 -j "$DIR/a=b/starter_val_*.bin" > "$DIR/out" 2> "$DIR/err") \
    && grep -q "test set val ($DIR/a=b/starter_val_\*.bin)" "$DIR/out"; then
    echo "  ok    a -j path with '=' in its directory is the set val"
else echo "  FAIL  a -j path with '=' in its directory: $(cat "$DIR/err")"; failures=$((failures + 1)); fi
# a set name of 64 characters, the longest, is written whole in every row of the CSVs
NAME64=$(printf 's%.0s' $(seq 64))
(cd "$DIR" && "$BIN" -e "$DIR/ck/model_00000002.bin" -x 0 -m 1 -E 32 -K 64 -j "$NAME64=$VAL" -o "$DIR/long" > /dev/null 2>&1)
if [ "$(tail -n +2 "$DIR/long/extrapolation.csv" | awk -F, -v n=$NAME64 'NF == 10 && $8 == n' | wc -l)" -eq 2 ] \
    && [ "$(tail -n +2 "$DIR/long/positions.csv" | awk -F, -v n=$NAME64 'NF != 10 || $9 != n' | wc -l)" -eq 0 ]; then
    echo "  ok    a set name of 64 characters, whole in every CSV row"
else echo "  FAIL  a set name of 64 characters in the CSVs"; cat "$DIR/long/extrapolation.csv"; failures=$((failures + 1)); fi
# last<N> scores N tokens a window at every length, or is n/a: -L 24 at -E 16 is n/a
(cd "$DIR" && "$BIN" -e "$DIR/ck/model_00000002.bin" -x 0 -m 1 -E 16,32 -K 48 -W -1 -L 24 -j "$VAL" -o "$DIR/lastn" > /dev/null 2>&1)
if [[ "$(awk -F, '$4 == "last24" { print $3 ":" $5 ":" $6 }' "$DIR/lastn/extrapolation.csv" | tr '\n' ' ')" == "16:0:n/a 32:48:"* ]] \
    && ! awk -F, '$4 == "last24" && $3 == 16' "$DIR/lastn/positions.csv" | grep -q .; then
    echo "  ok    -L 24: the row at length 16 is n/a, the one at 32 scores 2 x 24 tokens"
else echo "  FAIL  -L beyond an -E length"; cat "$DIR/lastn/extrapolation.csv"; failures=$((failures + 1)); fi
# -K, -W and -L only shape the perplexity windows: without them (-E none) a note says they do nothing
(cd "$DIR" && "$BIN" "${OK[@]}" -x 0 -m 1 -K 64 -W 8 -L 4 > "$DIR/out" 2> /dev/null)
if grep -q "^note: -K -W -L: no perplexity windows to score (-E none): ignored" "$DIR/out"; then
    echo "  ok    -K, -W, -L with -E none: a note that they are ignored"
else echo "  FAIL  -K, -W, -L with -E none: no note"; failures=$((failures + 1)); fi
# evaluation only: the default -E lengths and sliding stride both follow the checkpoint's
# training length (maxT = 32), not -t
(cd "$DIR" && "$BIN" -e "$DIR/ck/model_00000002.bin" -x 0 -t 16 -b 2 -m 1 -K 64 -j "$VAL" > "$DIR/out" 2> /dev/null)
lengths=$(grep -E '^\| +[0-9]+ \| nonoverlap' "$DIR/out" | awk '{print $2}' | tr '\n' ' ')
if [ "$lengths" = "32 64 128 256 512 " ] && grep -q "trained at T=32, step 0 (sliding stride 16)" "$DIR/out"; then
    echo "  ok    evaluation only: default -E 32..512 and stride 16 from the checkpoint's length 32"
else
    echo "  FAIL  evaluation only: default -E and stride from the checkpoint's length: lengths $lengths"; cat "$DIR/out"; failures=$((failures + 1))
fi
if [ "$PE" = learned ]; then
    expect "learned: T beyond maxT of a checkpoint" "beyond maxT" -e "$DIR/ck/model_00000002.bin" -t 64 -b 2 -x 2 -v 0 -s 0 -E none -i "$TRAIN" -j "$VAL"
    expect "learned: -rp beyond maxT of a checkpoint" "need as many rows of wpe" -e "$DIR/ck/model_00000002.bin" -x 0 -E none -rp 64 -j "$VAL"
    expect "-rp smaller than -t" "is more than the 16 randomized positions" "${OK[@]}" -rp 16
    expect "-ra without randomized positions" "flag -ra: the model has no randomized positions" "${OK[@]}" -ra 1
    # the training length is the checkpoint's (word 14), not maxT: a model trained at -t 32
    # with positions drawn from [0, 64) has maxT 64 and is evaluated against T = 32 (the gap at 64)
    (cd "$DIR" && "$BIN" "${OK[@]}" -x 1 -rp 64 -o "$DIR/rp" > /dev/null 2>&1)
    (cd "$DIR" && "$BIN" -e "$DIR/rp/model_00000001.bin" -x 0 -m 1 -E 32,64 -K 64 -W -1 -j "$VAL" -o "$DIR/rp_eval" > "$DIR/out" 2>&1)
    if grep -q "trained at T=32," "$DIR/out" && [ "$(awk -F, '$3 == 64 { print $9 }' "$DIR/rp_eval/extrapolation.csv")" != n/a ]; then
        echo "  ok    learned -rp 64 -t 32 evaluated alone: trained at T=32, a gap at 64"
    else echo "  FAIL  learned -rp 64 -t 32 evaluated alone: $(grep -o 'trained at T=[0-9]*' "$DIR/out")"; failures=$((failures + 1)); fi
    # a checkpoint without the word (an older trainer's) falls back to maxT, and says so
    cp "$DIR/rp/model_00000001.bin" "$DIR/old.bin"
    printf '\0\0\0\0' | dd of="$DIR/old.bin" bs=1 seek=56 conv=notrunc status=none
    (cd "$DIR" && "$BIN" -e "$DIR/old.bin" -x 0 -m 1 -E 32,64 -K 64 -W -1 -j "$VAL" > "$DIR/out" 2>&1)
    if grep -q "note: the checkpoint does not record its training length .*: taken as its maxT = 64" "$DIR/out" && grep -q "trained at T=64," "$DIR/out"; then
        echo "  ok    a checkpoint without its training length: maxT = 64 stands for it, and a note says so"
    else echo "  FAIL  a checkpoint without its training length"; cat "$DIR/out"; failures=$((failures + 1)); fi
    (cd "$DIR" && "$BIN" "${OK[@]}" -x 1 -s 1 -g 100 > "$DIR/out" 2> /dev/null)
    if grep -q "note: samples are cut at 31 tokens (-g 100): the learned positions end at maxT = 32" "$DIR/out"; then
        echo "  ok    learned: -g beyond maxT - 1 is cut, and says so"
    else
        echo "  FAIL  learned: -g beyond maxT - 1 is cut, and says so"; failures=$((failures + 1))
    fi
fi
if [ "$PE" = cable ]; then
    expect "-rp on an encoding without positions" "flag -rp: randomized positions exist for" "${OK[@]}" -rp 64
    expect "-po on an encoding without positions" "-po gives the rows positions, which cable takes none" "${OK[@]}" -po 256
else
    expect "-po below -t + 1" "the target length is at least -t + 1 = 33" "${OK[@]}" -po 32
    expect "-po with randomized positions" "would both set the training rows' positions" "${OK[@]}" -po 256 -rp 64
    expect "-po in an evaluation alone" "-po is a way of training" "${OK[@]}" -po 256 -x 0
fi
expect "-sk on an encoding without shape's offsets" "-rr, -sk: bad offset K 5 of shape" "${OK[@]}" -sk 5
expect "-cg on an encoding without cape's augmentation" "flags -cg, -cs, -cl: the augmentation of cape, which this binary's PE" "${OK[@]}" -cg 5
expect "-cs below 1" "flag -cs must be in \[1, 1000\], got 0.5" "${OK[@]}" -cs 0.5
expect "-cl neither 0 nor 1" "flag -cl" "${OK[@]}" -cl 2
expect "-ak on an encoding without shaw's tables" "flags -ak, -av: the tables of shaw, which this binary's PE" "${OK[@]}" -ak 8
expect "-ak 0" "flag -ak must be in \[1, 65536\], got 0" "${OK[@]}" -ak 0
expect "-av neither 0 nor 1" "flag -av" "${OK[@]}" -av 2
expect "-fr on an encoding without floater's refresh" "flag -fr: the refresh of floater's positions, which this binary's PE" "${OK[@]}" -fr 5
expect "-fr 0" "flag -fr" "${OK[@]}" -fr 0
expect "-rb on an encoding without rope's table" "flag -rb: RoPE's frequency table options (-rb, -rt, -rr) exist for rope" "${OK[@]}" -rb 500000
# a full disk (here: a file size limit of 10 MB) during a checkpoint: a clear error, and no
# temporary file left behind
mkdir -p "$DIR/full"
LIMIT="trap '' XFSZ; ulimit -f 10000" expect "disk full while writing a checkpoint" "write error in .*model_00000002.bin.*File too large" "${OK[@]}" -o "$DIR/full"
if [ -z "$(ls -A "$DIR/full" | grep '^\.llmc-tmp\.')" ]; then echo "  ok    disk full: no temporary file left"
else echo "  FAIL  disk full: temporary files left: $(ls -A "$DIR/full" | tr '\n' ' ')"; failures=$((failures + 1)); fi
# OpenBLAS's kernels as the CPU has them (train_gpt2.c: blas_select_kernels): with AVX-512 and no
# OPENBLAS_CORETYPE of the user's, the AVX-512 ones, whatever OpenBLAS chose by the CPU's model
compute=$(cd "$DIR" && env -u OPENBLAS_CORETYPE "$BIN" "${OK[@]}" -x 0 2>&1 | grep '^| compute')
if ! grep -q "OpenBLAS" <<< "$compute" || ! grep -qw avx512bw /proc/cpuinfo || ! grep -qw avx512dq /proc/cpuinfo; then
    echo "  skip  OpenBLAS's kernels: no OpenBLAS build or no AVX-512 here"
elif grep -Eqi "SkylakeX|CooperLake|SapphireRapids" <<< "$compute"; then echo "  ok    OpenBLAS's AVX-512 kernels on this AVX-512 CPU"
else echo "  FAIL  OpenBLAS's kernels on an AVX-512 CPU: $compute"; failures=$((failures + 1)); fi
head -c 3000 /dev/urandom > "$DIR/gpt2_tokenizer.bin"
expect "corrupt tokenizer file" "gpt2_tokenizer.bin" "${OK[@]}" -s 1
printf 'garbage' > "$DIR/shard_000000.bin"
expect "shard shorter than its header" "not a token shard" "${OK[@]}" -i "$DIR/shard_*.bin"
[ $failures -eq 0 ] || { echo "$failures FAILURES"; exit 1; }
echo "all bad-input cases gave one clear line and a nonzero exit"
