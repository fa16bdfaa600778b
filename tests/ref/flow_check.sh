#!/bin/bash
# attnviz --flow (information-flow routes) against the paper's contribution formula written over
# transformers' hooks on the synthetic GPT-2 and Llama checkpoints that transformers writes
# (tests/ref/flow_check.py), on the kernel this CPU picks (the kernels give the same bits).
# Checkpoints are shared with tests/ref/predict_check.sh (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init flow_check
ref_build attnviz
ref_cache predict tests/ref/lm_checkpoints.py
ref_start
"$py" tests/ref/flow_check.py ./attnviz "$work" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "Writing model shards" -e "Warning" -e "warn("
ref_exit "${PIPESTATUS[0]}"
