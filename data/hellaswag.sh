#!/usr/bin/env bash
# Downloads HellaSwag's validation set (10,042 examples, rowanz/hellaswag) and writes it in
# llm.c's eval file format with the C tokenizer, for the trainers' -H flag:
#
#   bash data/hellaswag.sh   ->  data/hellaswag/hellaswag_val.jsonl, data/hellaswag/hellaswag_val.bin
#
# Run from the repository root after `make tokenizer vocab` (or use `make hellaswag`). Needs
# the internet, curl and node (which reads the jsonl). The download is checked against the
# file's git blob id in the dataset's repository (size and content); rerunning skips it and
# rewrites the .bin. HELLASWAG_JSONL=FILE converts a local file instead of downloading.
set -euo pipefail

fail() { echo "error: $*" >&2; exit 1; }

url="https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
blob=0f5ee25d72216f12317d5d8a7b92deafa423d81e  # git's id of data/hellaswag_val.jsonl there
out=${HELLASWAG_OUT:-data/hellaswag}
[ -x ./tokenizer ] || fail "./tokenizer not found; run this from the repository root after \`make tokenizer vocab\`"
command -v node > /dev/null || fail "node not found (apt-get install nodejs)"

# git's blob id of a file: sha1 of "blob <size>\0" and the bytes
blob_id() { { printf 'blob %d\0' "$(stat -c %s "$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1; }

jsonl=${HELLASWAG_JSONL:-}
if [ -z "$jsonl" ]; then
    jsonl="$out/hellaswag_val.jsonl"
    mkdir -p "$out"
    if [ ! -e "$jsonl" ]; then
        command -v curl > /dev/null || fail "curl not found (apt-get install curl)"
        curl --fail --location --silent --show-error --retry 5 --retry-delay 5 --output "$jsonl.part" "$url" \
            || fail "cannot download $url"
        [ "$(blob_id "$jsonl.part")" = "$blob" ] || { rm -f "$jsonl.part"; fail "$url: the download is not the expected file (git blob $blob)"; }
        mv "$jsonl.part" "$jsonl"
    fi
    [ "$(blob_id "$jsonl")" = "$blob" ] || fail "$jsonl is not the expected file (git blob $blob); delete it and rerun"
fi
mkdir -p "$out"
stream=$(mktemp)
trap 'rm -f "$stream"' EXIT
node data/hellaswag_docs.js "$jsonl" > "$stream"
./tokenizer eval "$out/hellaswag_val.bin" < "$stream"
