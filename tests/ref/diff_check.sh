#!/bin/bash
# attnviz diff's divergences against transformers' attention and scipy's jensenshannon
# (tests/ref/diff_check.py) on synthetic BERT and GPT-2 checkpoints. scipy is not among the
# reference Python's pins: it is installed (no dependencies; numpy is the venv's) into a cache
# folder beside the checkpoints; offline, the check says so and uses numpy's formula instead.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP diff_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL diff_check: build failed"; exit 1; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz
key=$(sha256sum tests/ref/make_checkpoint.py | cut -c1-12)
work=$cache/diff-$key
sci=$cache/scipy-1.17.1
mkdir -p "$work" || { echo "FAIL diff_check: cannot create $work"; exit 1; }
if ! PYTHONPATH=$sci "$py" -c "import scipy.spatial.distance" 2>/dev/null; then
    "$py" -m pip install --quiet --no-deps --target "$sci" scipy==1.17.1 >/dev/null 2>&1 ||
        echo "  (scipy could not be installed: the reference is numpy's formula)"
fi
start=$(date +%s)
PYTHONPATH=$sci "$py" tests/ref/diff_check.py ./attnviz "$work" "$@" 2>&1 | grep -v "Loading weights"
rc=${PIPESTATUS[0]}
echo "  diff_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
