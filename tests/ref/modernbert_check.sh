#!/bin/bash
# ModernBERT (F32, BF16; 4 layers so that local and global layers both occur, the real 128-token
# local window) against transformers' eager attention and its masked-LM head, on the products kernel
# this CPU picks, as the other live checks (the kernels give the same bits on every family, the
# committed ModernBERT fixture included: test_model; `--kernels avx512,avx2,scalar` runs each here
# too): tests/ref/modernbert_check.py. Checkpoints are cached
# under ~/.cache/attnviz, keyed by the script's hash, so CI writes them once.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init modernbert_check
ref_build attnviz build/fwd_dump
ref_cache modernbert tests/ref/modernbert_check.py
"$py" tests/ref/modernbert_check.py ./attnviz build/fwd_dump "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
