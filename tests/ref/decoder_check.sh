#!/bin/bash
# Llama-style decoders (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3, Mixtral, Qwen3-MoE, OLMoE, gpt-oss; F32, BF16, sharded;
# rotary scalings, LongRoPE, partial rotary). Options go to decoder_check.py (--only NAME,NAME; --long) against transformers' eager attention on synthetic checkpoints transformers
# writes itself (tests/ref/decoder_check.py). Checkpoints are cached under ~/.cache/attnviz,
# keyed by the script's hash, so CI writes them once.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP decoder_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 build/fwd_dump >/dev/null || { echo "FAIL decoder_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/decoder_check.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/decoders-$key
mkdir -p "$work" || { echo "FAIL decoder_check: cannot create $work"; exit 1; }
"$py" tests/ref/decoder_check.py build/fwd_dump "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
