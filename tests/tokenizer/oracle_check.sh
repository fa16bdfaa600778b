#!/bin/sh
# oracle_check.sh — regenerates the tokenizer oracles' output with node and diffs it
# against the committed files the Check suites compare attnviz with:
#   expected.jsonl              BERT uncased  (oracle.mjs, bert-base-uncased/tokenizer.json)
#   expected_cased.jsonl        BERT cased    (oracle.mjs, the same tokenizer.json with
#                               "lowercase": false, "strip_accents": null, built here)
#   bpe_gpt2_expected.jsonl     GPT-2         (bpe_oracle.mjs: js-tiktoken, cross-checked
#                               with @huggingface/tokenizers)
#   bpe_roberta_expected.jsonl  RoBERTa       (bpe_oracle.mjs: @huggingface/tokenizers)
# The tokenizer files are bert-base-uncased's tokenizer.json and GPT-2's encoder.json +
# vocab.bpe from tools/refdata.sh ($ATTNVIZ_REFDATA when tests/run_all.sh set it).
# One PASS/FAIL/SKIP line per file; exit 1 on any difference. Without node or node_modules
# (npm ci) it prints SKIP; without the tokenizer files (tools/deps.sh test fetches them) FAIL.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/tokenizer"
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP tokenizer oracle check: node is not installed"; exit 0
fi
if [ ! -d "$root/node_modules/@huggingface/tokenizers" ]; then
    echo "SKIP tokenizer oracle check: node_modules/@huggingface/tokenizers is absent (npm ci)"; exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
rd=${ATTNVIZ_REFDATA:-}
if [ -z "$rd" ] && ! rd=$("$root/tools/refdata.sh"); then
    echo "FAIL tokenizer oracle check: no reference tokenizer files (tools/refdata.sh said why above)"
    exit 1
fi
tok="$rd/bert-base-uncased/tokenizer.json"
gpt2="$rd/gpt2"

# compare NAME EXPECTED_FILE COMMAND...: runs COMMAND into a temp file and diffs.
compare() {
    name=$1 expected=$2
    shift 2
    if ! "$@" > "$tmp/out"; then
        echo "FAIL $name oracle check: the oracle failed: $*"
        failed=1
        return
    fi
    if cmp -s "$expected" "$tmp/out"; then
        echo "PASS $name oracle check: $(wc -l < "$tmp/out") lines match $(basename "$expected")"
        return
    fi
    diff -u "$expected" "$tmp/out" | head -40
    echo "FAIL $name oracle check: $(basename "$expected") differs from the live oracle (diff above)"
    failed=1
}

if [ ! -f "$tok" ]; then
    echo "FAIL BERT tokenizer oracle checks: $tok is absent"
    failed=1
else
    compare "BERT uncased" "$here/expected.jsonl" node "$here/oracle.mjs" --tokenizer "$tok"
    if node -e '
        const fs = require("fs");
        const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
        if (j.normalizer?.type !== "BertNormalizer") throw new Error("no BertNormalizer");
        j.normalizer.lowercase = false;
        j.normalizer.strip_accents = null;
        fs.writeFileSync(process.argv[2], JSON.stringify(j));' "$tok" "$tmp/cased.json"; then
        compare "BERT cased" "$here/expected_cased.jsonl" node "$here/oracle.mjs" --tokenizer "$tmp/cased.json"
    else
        echo "FAIL BERT cased oracle check: cannot build the cased tokenizer.json"
        failed=1
    fi
fi

if [ ! -f "$gpt2/encoder.json" ] || [ ! -f "$gpt2/vocab.bpe" ]; then
    echo "FAIL GPT-2/RoBERTa tokenizer oracle checks: $gpt2 (encoder.json, vocab.bpe) is absent"
    failed=1
elif [ ! -d "$root/node_modules/js-tiktoken" ]; then
    echo "SKIP GPT-2/RoBERTa tokenizer oracle checks: node_modules/js-tiktoken is absent (npm ci)"
else
    compare "GPT-2" "$here/bpe_gpt2_expected.jsonl" node "$here/bpe_oracle.mjs" --style gpt2 --gpt2 "$gpt2"
    compare "RoBERTa" "$here/bpe_roberta_expected.jsonl" node "$here/bpe_oracle.mjs" --style roberta --gpt2 "$gpt2"
fi
exit $failed
