#!/usr/bin/env bash
# Resumable, verified download of one file.
#
#   bash data/download.sh DEST SIZE SHA256 URL [URL...]
#
# Downloads into DEST.part, resuming whatever an earlier run left there (curl -C -), trying each
# URL in turn, and renames it to DEST only once its size is SIZE bytes and its sha256 is SHA256
# ("-": not checked). A DEST that is already there and right is kept (a second run is a no-op).
# Any failure is one line on stderr and a nonzero exit; rerunning resumes.
set -euo pipefail

fail() { echo "error: $*" >&2; exit 1; }

[ $# -ge 4 ] || fail "usage: data/download.sh DEST SIZE SHA256 URL [URL...]"
dest=$1 size=$2 sha=$3
shift 3
[[ $size =~ ^[0-9]+$ ]] || fail "size must be a number of bytes, got '$size'"
command -v curl > /dev/null || fail "curl not found (apt-get install curl)"

file_size() { stat -c %s "$1"; }

# checks the sha256 of a file of the right size; prints nothing when it matches
sha_mismatch() {
    [ "$sha" = "-" ] && return 1
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" != "$sha" ]
}

if [ -e "$dest" ]; then
    [ "$(file_size "$dest")" = "$size" ] || fail "$dest exists with $(file_size "$dest") bytes, expected $size; delete it and rerun"
    ! sha_mismatch "$dest" || fail "$dest has the wrong sha256; delete it and rerun"
    echo "$dest: already downloaded"
    exit 0
fi

mkdir -p "$(dirname "$dest")"
part="$dest.part"
if [ -e "$part" ] && [ "$(file_size "$part")" -gt "$size" ]; then
    rm -f "$part"  # longer than the file can be: not a prefix of it
fi
for url in "$@"; do
    have=0
    [ -e "$part" ] && have=$(file_size "$part")
    if [ "$have" -lt "$size" ]; then
        echo "$dest: downloading $url (from byte $have of $size)"
        curl --fail --location --silent --show-error --retry 5 --retry-delay 5 --continue-at - \
             --output "$part" "$url" || echo "$dest: download from $url stopped; trying on" >&2
    fi
    [ -e "$part" ] && [ "$(file_size "$part")" = "$size" ] && break
done
[ -e "$part" ] || fail "could not download $dest from any of: $*"
got=$(file_size "$part")
if [ "$got" -gt "$size" ]; then
    rm -f "$part"
    fail "$dest: got $got bytes, more than the expected $size; the download was removed"
fi
[ "$got" = "$size" ] || fail "$dest: got $got of $size bytes; rerun to resume"

if sha_mismatch "$part"; then
    rm -f "$part"
    fail "$dest: sha256 mismatch (expected $sha); the partial download was removed, rerun to fetch it again"
fi
mv "$part" "$dest"
echo "$dest: ok ($size bytes)"
