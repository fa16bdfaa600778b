#!/bin/bash
# Value-weighted attention (--measure norm) against the paper's formula over transformers' hooks
# (tests/ref/norm_check.py): the BERT, GPT-2 and Llama (GQA) fixtures through the CLI's JSON, and
# SmolLM2-shaped checkpoints transformers writes (F32, BF16; cached under ~/.cache/attnviz, keyed
# by the script's hash) through build/fwd_dump --norm; and the trained SmolLM2 Q4_1 GGUF when
# tools/pymodel.sh has it (quantized W_O against transformers' dequantized load), else a SKIP line.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init norm_check
ref_build attnviz build/fwd_dump
ref_cache norm tests/ref/norm_check.py
gguf=()
g=$(ref_smollm2_gguf) && gguf=(--gguf "$g")
"$py" tests/ref/norm_check.py ./attnviz build/fwd_dump "$work" "${gguf[@]}" "$@" 2>&1 | grep -v "Loading weights\|de-quantizing"
exit "${PIPESTATUS[0]}"
