#!/bin/bash
# ALTI and attention rollout (--measure alti|rollout) against float64 implementations of the papers'
# equations over transformers' hooks (tests/ref/mix_check.py): the BERT, GPT-2 and Llama (GQA) fixtures
# through the CLI's JSON, Gemma 3 (sandwich norms) and gpt-oss (learned sinks) through build/fwd_dump --mix,
# the trained all-MiniLM-L6-v2 (CLI) and SmolLM2-135M-Instruct Q4_1 GGUF (quantized weights, fwd_dump) when
# tools/pymodel.sh has them, else SKIP lines. On the kernel this CPU picks, as the other live checks
# (the kernels give the same bits; `mix_check.sh --kernels avx512,avx2,scalar` checks each here).
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP mix_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz build/fwd_dump >/dev/null || { echo "FAIL mix_check: build failed"; exit 1; }
extra=()
if d=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null); then extra+=(--minilm "$d"); else echo "SKIP mix_check MiniLM: not installed (tools/pymodel.sh)"; fi
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    extra+=(--gguf "$d/SmolLM2-135M-Instruct.Q4_1.gguf")
else
    echo "SKIP mix_check SmolLM2 GGUF: not installed (tools/pymodel.sh)"
fi
kernels=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
start=$(date +%s)
"$py" tests/ref/mix_check.py ./attnviz build/fwd_dump --kernels "${kernels:-scalar}" "${extra[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "de-quantizing"
rc=${PIPESTATUS[0]}
echo "  mix_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
