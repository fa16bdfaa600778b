#!/bin/bash
# attnviz --generate against transformers' generate() (tests/ref/generate_check.py): greedy
# generation of 64 tokens on the trained SmolLM2-135M-Instruct Q4_1 GGUF and the synthetic Llama
# (SmolLM2's shape), GPT-2, Qwen2, Mistral, Gemma 2, Gemma 3 and Phi-3 of tests/ref/lm_checkpoints.py (ids, step probabilities and top-K,
# every step's attention rows), --stop, and sampled generation (reproducible for a seed, every
# token inside the top-p nucleus). Checkpoints are shared with tests/ref/predict_check.sh
# (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP generate_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL generate_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/lm_checkpoints.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/predict-$key
mkdir -p "$work" || { echo "FAIL generate_check: cannot create $work"; exit 1; }
gguf=()
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    gguf=(--gguf "$d/SmolLM2-135M-Instruct.Q4_1.gguf")
fi
start=$(date +%s)
"$py" tests/ref/generate_check.py ./attnviz "$work" "${gguf[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "de-quantizing" -e "Writing model shards"
rc=${PIPESTATUS[0]}
echo "  generate_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
