#!/bin/bash
# Value-weighted attention (--measure norm) against the paper's formula over transformers' hooks
# (tests/ref/norm_check.py): the BERT, GPT-2 and Llama (GQA) fixtures through the CLI's JSON, and
# SmolLM2-shaped checkpoints transformers writes (F32, BF16; cached under ~/.cache/attnviz, keyed
# by the script's hash) through build/fwd_dump --norm; and the trained SmolLM2 Q4_1 GGUF when
# tools/pymodel.sh has it (quantized W_O against transformers' dequantized load), else a SKIP line.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP norm_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz build/fwd_dump >/dev/null || { echo "FAIL norm_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/norm_check.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/norm-$key
mkdir -p "$work" || { echo "FAIL norm_check: cannot create $work"; exit 1; }
gguf=()
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    gguf=(--gguf "$d/SmolLM2-135M-Instruct.Q4_1.gguf")
fi
"$py" tests/ref/norm_check.py ./attnviz build/fwd_dump "$work" "${gguf[@]}" "$@" 2>&1 | grep -v "Loading weights\|de-quantizing"
exit "${PIPESTATUS[0]}"
