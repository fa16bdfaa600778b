#!/bin/sh
# oracle_check.sh — regenerates the tokenizer oracle output with node and diffs it
# against the committed tests/tokenizer/expected.jsonl. Exit 1 on any difference;
# prints SKIP and exits 0 when node, node_modules or ../shared are missing.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
tok="$root/../shared/models/bert-base-uncased/tokenizer.json"
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP tokenizer oracle check: node is not installed"; exit 0
fi
if [ ! -d "$root/node_modules/@huggingface/tokenizers" ]; then
    echo "SKIP tokenizer oracle check: node_modules/@huggingface/tokenizers is absent (npm ci)"; exit 0
fi
if [ ! -f "$tok" ]; then
    echo "SKIP tokenizer oracle check: $tok is absent"; exit 0
fi
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
if ! node "$root/tests/tokenizer/oracle.mjs" --tokenizer "$tok" > "$tmp"; then
    echo "FAIL tokenizer oracle check: oracle.mjs failed"; exit 1
fi
if cmp -s "$root/tests/tokenizer/expected.jsonl" "$tmp"; then
    echo "PASS tokenizer oracle check: $(wc -l < "$tmp") lines match expected.jsonl"
    exit 0
fi
diff -u "$root/tests/tokenizer/expected.jsonl" "$tmp" | head -40
echo "FAIL tokenizer oracle check: expected.jsonl differs from the live oracle (diff above)"
exit 1
