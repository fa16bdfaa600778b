#!/bin/bash
# Llama-style decoders (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, Mixtral, Qwen3-MoE, OLMoE, gpt-oss; F32, BF16, sharded;
# rotary scalings, LongRoPE, partial rotary). Options go to decoder_check.py (--only NAME,NAME; --long) against transformers' eager attention on synthetic checkpoints transformers
# writes itself (tests/ref/decoder_check.py). Checkpoints are cached under ~/.cache/attnviz,
# keyed by the script's hash, so CI writes them once.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init decoder_check
ref_build build/fwd_dump
ref_cache decoders tests/ref/decoder_check.py
"$py" tests/ref/decoder_check.py build/fwd_dump "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
