#!/bin/bash
# attnviz --predict K against transformers' LM heads (tests/ref/predict_check.py): synthetic
# GPT-2, Llama (SmolLM2's shape, tied embeddings), Qwen2 (separate lm_head, 151,936 rows), Mistral,
# Gemma 2 (soft-capped logits), Gemma 3, Phi-3 (LongRoPE), BERT, RoBERTa, DistilBERT, XLM-RoBERTa and ELECTRA checkpoints that transformers writes itself (tests/ref/lm_checkpoints.py),
# and the trained SmolLM2-135M-Instruct Q4_1 GGUF; plus the refusal of --predict on a headless
# BERT. Checkpoints are cached under ~/.cache/attnviz/predict-<hash of lm_checkpoints.py>, shared
# with tests/ref/generate_check.sh, so CI writes them once.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init predict_check
ref_build attnviz
ref_cache predict tests/ref/lm_checkpoints.py
gguf=()
g=$(ref_smollm2_gguf) && gguf=(--gguf "$g")
ref_start
"$py" tests/ref/predict_check.py ./attnviz "$work" "${gguf[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "de-quantizing" -e "Writing model shards"
ref_exit "${PIPESTATUS[0]}"
