#!/bin/bash
# Tests tools/fetch_weights.sh (make weights) against a local HTTP server on
# 127.0.0.1: a good download, a corrupted file, and a server that is down.
set -u
cd "$(dirname "$0")/.."
if ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then
    echo "SKIP fetch tests: need curl and python3"
    exit 0
fi
T=$(mktemp -d)
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
mkdir -p "$T/www"
S=../shared/models/bert-base-uncased
if [ -f $S/vocab.txt ]; then
    # The published config.json and vocab.txt, checked against the real hashes.
    cp $S/config.json $S/vocab.txt "$T/www/"
    grep -v model.safetensors tools/weights.manifest >"$T/manifest"
else
    echo "SKIP real_hashes: ../shared/models/bert-base-uncased absent; using made-up files"
    printf '{"x":1}\n' >"$T/www/config.json"
    : >"$T/manifest"
    echo "config.json $(wc -c <"$T/www/config.json") $(sha256sum "$T/www/config.json" | cut -d' ' -f1)" >>"$T/manifest"
fi
head -c 100000 /dev/urandom >"$T/www/model.safetensors"
echo "model.safetensors 100000 $(sha256sum "$T/www/model.safetensors" | cut -d' ' -f1)" >>"$T/manifest"

port=""
for try in 1 2 3 4 5; do
    p=$((20000 + RANDOM % 20000))
    python3 -m http.server --bind 127.0.0.1 "$p" --directory "$T/www" >/dev/null 2>&1 &
    srv=$!
    for _ in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$p/config.json" && { port=$p; break; }
        sleep 0.1
    done
    [ -n "$port" ] && break
    kill $srv 2>/dev/null
    srv=""
done
[ -n "$port" ] || { echo "FAIL fetch: could not start a local HTTP server"; exit 1; }
export ATTNVIZ_HF_BASE="http://127.0.0.1:$port" ATTNVIZ_WEIGHTS_MANIFEST="$T/manifest"

if tools/fetch_weights.sh "$T/w/good" >"$T/log" 2>&1 && cmp -s "$T/w/good/model.safetensors" "$T/www/model.safetensors" \
    && cmp -s "$T/w/good/config.json" "$T/www/config.json"; then
    echo "PASS fetch_installs_verified_files"
else
    echo "FAIL fetch_installs_verified_files: $(cat "$T/log")"
fi

# corrupt one byte: same size, wrong hash
printf 'X' | dd of="$T/www/model.safetensors" bs=1 seek=500 conv=notrunc 2>/dev/null
tools/fetch_weights.sh "$T/w/bad" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "model.safetensors: sha256 .* does not match" "$T/log" && [ ! -e "$T/w/bad" ] \
    && [ -z "$(ls -A "$T/w" | grep -v '^good$')" ]; then
    echo "PASS fetch_rejects_a_corrupted_file_and_leaves_nothing"
else
    echo "FAIL fetch_rejects_a_corrupted_file_and_leaves_nothing: rc=$rc $(cat "$T/log"); $(ls -A "$T/w")"
fi

kill $srv 2>/dev/null
wait $srv 2>/dev/null
srv=""
tools/fetch_weights.sh "$T/w/down" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "failed (offline, or the server is down?)" "$T/log" && [ ! -e "$T/w/down" ]; then
    echo "PASS fetch_reports_a_server_that_is_down"
else
    echo "FAIL fetch_reports_a_server_that_is_down: rc=$rc $(cat "$T/log")"
fi
