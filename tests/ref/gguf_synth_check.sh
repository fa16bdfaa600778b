#!/bin/bash
# GGUF files of every type attnviz widens (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
# Q5_K, Q6_K), written with the gguf package, against transformers reading the same files
# (tests/ref/gguf_synth_check.py); the other architectures (Qwen2, Qwen3, Gemma 2, Gemma 3,
# Phi-3 and its LongRoPE) in F32 and Q8_0. An optional ARCH,ARCH list runs only those.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init gguf_synth_check
ref_build build/fwd_dump
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" tests/ref/gguf_synth_check.py build/fwd_dump "$T" "$@" 2>&1 | grep -v "quantizing"
exit "${PIPESTATUS[0]}"
