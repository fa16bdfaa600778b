#!/bin/bash
# attnviz --predict K against transformers' LM heads (tests/ref/predict_check.py): synthetic
# GPT-2, Llama (SmolLM2's shape, tied embeddings), Qwen2 (separate lm_head, 151,936 rows), Mistral,
# Gemma 2 (soft-capped logits), Gemma 3, Phi-3 (LongRoPE), BERT, RoBERTa, DistilBERT, XLM-RoBERTa and ELECTRA checkpoints that transformers writes itself (tests/ref/lm_checkpoints.py),
# and the trained SmolLM2-135M-Instruct Q4_1 GGUF; plus the refusal of --predict on a headless
# BERT. Checkpoints are cached under ~/.cache/attnviz/predict-<hash of lm_checkpoints.py>, shared
# with tests/ref/generate_check.sh, so CI writes them once.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP predict_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL predict_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/lm_checkpoints.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/predict-$key
mkdir -p "$work" || { echo "FAIL predict_check: cannot create $work"; exit 1; }
gguf=()
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    gguf=(--gguf "$d/SmolLM2-135M-Instruct.Q4_1.gguf")
fi
start=$(date +%s)
"$py" tests/ref/predict_check.py ./attnviz "$work" "${gguf[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "de-quantizing" -e "Writing model shards"
rc=${PIPESTATUS[0]}
echo "  predict_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
