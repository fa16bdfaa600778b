#!/bin/bash
# attnviz --flow (information-flow routes) against the paper's contribution formula written over
# transformers' hooks on the synthetic GPT-2 and Llama checkpoints that transformers writes
# (tests/ref/flow_check.py), on the kernel this CPU picks (the kernels give the same bits).
# Checkpoints are shared with tests/ref/predict_check.sh (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP flow_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL flow_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/lm_checkpoints.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/predict-$key
mkdir -p "$work" || { echo "FAIL flow_check: cannot create $work"; exit 1; }
start=$(date +%s)
"$py" tests/ref/flow_check.py ./attnviz "$work" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "Writing model shards" -e "Warning" -e "warn("
rc=${PIPESTATUS[0]}
echo "  flow_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
