#!/usr/bin/env bash
# Downloads FineWeb-Edu's sample-10BT (14 parquet files, about 28 GB) and writes GPT-2 token
# shards as llm.c does: 100M tokens each, the first one the validation split.
#
#   bash data/fineweb.sh   ->  data/fineweb10B/edu_fineweb_val_000000.bin,
#                              data/fineweb10B/edu_fineweb_train_000001.bin, ...
#
# Run from the repository root after `make tokenizer vocab` (or use `make fineweb10B`).
# Needs the internet, curl and python3 with pyarrow (python3 -m pip install pyarrow), which
# reads the parquet files. Downloads resume and are checked (size and sha256 from the dataset's
# file listing); rerunning skips finished files and rewrites the shards.
set -euo pipefail

fail() { echo "error: $*" >&2; exit 1; }

repo="https://huggingface.co/datasets/HuggingFaceFW/fineweb-edu"
listing="https://huggingface.co/api/datasets/HuggingFaceFW/fineweb-edu/tree/main/sample/10BT"
out=data/fineweb10B
shard_tokens=${SHARD_TOKENS:-100000000}
[ -x ./tokenizer ] || fail "./tokenizer not found; run this from the repository root after \`make tokenizer vocab\`"
command -v python3 > /dev/null || fail "python3 not found; it reads the parquet files (with pyarrow)"
python3 -c "import pyarrow.parquet" 2> /dev/null || fail "python3 cannot import pyarrow, needed to read the parquet files (python3 -m pip install pyarrow)"

mkdir -p "$out/parquet"
curl --fail --location --silent --show-error --retry 5 --retry-delay 5 --output "$out/files.json" "$listing"
# one line per parquet file, in name order: path, size, sha256
python3 - "$out/files.json" > "$out/files.txt" <<'PY'
import json, sys
files = [f for f in json.load(open(sys.argv[1])) if f.get("path", "").endswith(".parquet")]
if not files:
    sys.exit("error: the dataset listing has no parquet files")
for f in sorted(files, key=lambda f: f["path"]):
    lfs = f.get("lfs") or {}
    print(f["path"], lfs.get("size", f["size"]), lfs.get("oid", "-"))
PY

parquets=()
while read -r path size sha; do
    dest="$out/parquet/$(basename "$path")"
    bash data/download.sh "$dest" "$size" "$sha" "$repo/resolve/main/$path" < /dev/null
    parquets+=("$dest")
done < "$out/files.txt"

rm -f "$out"/edu_fineweb_*.bin
python3 data/parquet_docs.py "${parquets[@]}" | ./tokenizer shard -n "$shard_tokens" "$out/edu_fineweb"
./tokenizer info "$out"/edu_fineweb_*.bin | tail -n 1
