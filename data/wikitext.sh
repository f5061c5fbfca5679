#!/usr/bin/env bash
# Downloads raw WikiText-103 or WikiText-2 and writes GPT-2 token shards with the official
# splits, one document per article (see data/wikitext_docs.js):
#
#   bash data/wikitext.sh 103   ->  data/wikitext103/wikitext103_{train,val,test}_NNNNNN.bin
#   bash data/wikitext.sh 2     ->  data/wikitext2/wikitext2_{train,val,test}_NNNNNN.bin
#
# Run from the repository root after `make tokenizer vocab` (or use `make wikitext103`).
# Needs the internet, curl, unzip and node. The download resumes and is checked (size and
# sha256); rerunning rewrites the shards.
set -euo pipefail

fail() { echo "error: $*" >&2; exit 1; }

case "${1:-}" in
    103) size=191984949 sha=91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794 ;;
    2)   size=4721645   sha=ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11 ;;
    *)   fail "usage: bash data/wikitext.sh 103|2" ;;
esac
name="wikitext$1"
zip="wikitext-$1-raw-v1.zip"
out="data/$name"
[ -x ./tokenizer ] || fail "./tokenizer not found; run this from the repository root after \`make tokenizer vocab\`"
command -v unzip > /dev/null || fail "unzip not found (apt-get install unzip)"
command -v node > /dev/null || fail "node not found (apt-get install nodejs)"

bash data/download.sh "$out/$zip" "$size" "$sha" \
    "https://wikitext.smerity.com/$zip" \
    "https://s3.amazonaws.com/research.metamind.io/wikitext/$zip"
unzip -o -q "$out/$zip" -d "$out"

rm -f "$out/${name}"_*.bin
for split in train valid test; do
    shard_split=$split
    [ "$split" = valid ] && shard_split=val  # the trainers' -j pattern is *_val_*.bin
    node data/wikitext_docs.js "$out/wikitext-$1-raw/wiki.$split.raw" | ./tokenizer shard -s "$shard_split" "$out/$name"
done
./tokenizer info "$out/${name}"_*.bin
