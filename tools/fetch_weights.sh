#!/bin/sh
# Downloads google-bert/bert-base-uncased (config.json, vocab.txt,
# model.safetensors) into DEST, verifying every file's size and sha256.
#   tools/fetch_weights.sh DEST
# Environment:
#   ATTNVIZ_HF_BASE           base URL (default: the Hugging Face hub's resolve/main URL)
#   ATTNVIZ_WEIGHTS_MANIFEST  "file size sha256" lines (default: tools/weights.manifest)
# Files are downloaded into a temporary folder and moved into DEST only when all
# of them verify: a failed or interrupted download leaves nothing behind.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: fetch_weights.sh DEST}
base=${ATTNVIZ_HF_BASE:-https://huggingface.co/google-bert/bert-base-uncased/resolve/main}
manifest=${ATTNVIZ_WEIGHTS_MANIFEST:-$here/weights.manifest}
command -v curl >/dev/null 2>&1 || { echo "attnviz: make weights needs curl (apt-get install curl)" >&2; exit 1; }
command -v sha256sum >/dev/null 2>&1 || { echo "attnviz: make weights needs sha256sum (coreutils)" >&2; exit 1; }

all_present=1
while read -r name size sum; do
    case $name in ''|'#'*) continue ;; esac
    if [ -f "$dest/$name" ] && [ "$(wc -c <"$dest/$name")" -eq "$size" ]; then :; else all_present=0; fi
done <"$manifest"
if [ $all_present -eq 1 ]; then
    echo "attnviz: $dest already holds every file of the manifest"
    exit 0
fi

parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM HUP

while read -r name size sum; do
    case $name in ''|'#'*) continue ;; esac
    echo "attnviz: downloading $base/$name ($size bytes)"
    if ! curl -fL --retry 2 --connect-timeout 10 -sS -o "$tmp/$name" "$base/$name"; then
        echo "attnviz: download of $name from $base failed (offline, or the server is down?); nothing was installed" >&2
        exit 1
    fi
    got=$(wc -c <"$tmp/$name")
    if [ "$got" -ne "$size" ]; then
        echo "attnviz: $name: got $got bytes, expected $size; nothing was installed" >&2
        exit 1
    fi
    have=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
    if [ "$have" != "$sum" ]; then
        echo "attnviz: $name: sha256 $have does not match the expected $sum; nothing was installed" >&2
        exit 1
    fi
done <"$manifest"

mkdir -p "$dest"
for f in "$tmp"/*; do mv -f "$f" "$dest/"; done
echo "attnviz: installed $(ls "$dest" | tr '\n' ' ')in $dest"
echo "attnviz: try: ./attnviz --model $dest \"time flies like an arrow\""
