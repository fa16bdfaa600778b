#!/bin/bash
# attnviz diff's divergences against transformers' attention and scipy's jensenshannon
# (tests/ref/diff_check.py) on synthetic BERT and GPT-2 checkpoints. scipy is not among the
# reference Python's pins: it is installed (no dependencies; numpy is the venv's) into a cache
# folder beside the checkpoints; offline, the check says so and uses numpy's formula instead.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init diff_check
ref_build attnviz
ref_cache diff tests/ref/make_checkpoint.py
sci=$(dirname "$work")/scipy-1.17.1
if ! PYTHONPATH=$sci "$py" -c "import scipy.spatial.distance" 2>/dev/null; then
    "$py" -m pip install --quiet --no-deps --target "$sci" scipy==1.17.1 >/dev/null 2>&1 ||
        echo "  (scipy could not be installed: the reference is numpy's formula)"
fi
ref_start
PYTHONPATH=$sci "$py" tests/ref/diff_check.py ./attnviz "$work" "$@" 2>&1 | grep -v "Loading weights"
ref_exit "${PIPESTATUS[0]}"
