#!/bin/bash
# attnviz --generate against transformers' generate() (tests/ref/generate_check.py): greedy
# generation of 64 tokens on the trained SmolLM2-135M-Instruct Q4_1 GGUF and the synthetic Llama
# (SmolLM2's shape), GPT-2, Qwen2, Mistral, Gemma 2, Gemma 3 and Phi-3 of tests/ref/lm_checkpoints.py (ids, step probabilities and top-K,
# every step's attention rows), --stop, and sampled generation (reproducible for a seed, every
# token inside the top-p nucleus). Checkpoints are shared with tests/ref/predict_check.sh
# (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init generate_check
ref_build attnviz
ref_cache predict tests/ref/lm_checkpoints.py
gguf=()
g=$(ref_smollm2_gguf) && gguf=(--gguf "$g")
ref_start
"$py" tests/ref/generate_check.py ./attnviz "$work" "${gguf[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "de-quantizing" -e "Writing model shards"
ref_exit "${PIPESTATUS[0]}"
