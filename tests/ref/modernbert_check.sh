#!/bin/bash
# ModernBERT (F32, BF16; 4 layers so that local and global layers both occur, the real 128-token
# local window) against transformers' eager attention and its masked-LM head, on the products kernel
# this CPU picks, as the other live checks (the kernels give the same bits on every family, the
# committed ModernBERT fixture included: test_model; `--kernels avx512,avx2,scalar` runs each here
# too): tests/ref/modernbert_check.py. Checkpoints are cached
# under ~/.cache/attnviz, keyed by the script's hash, so CI writes them once.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP modernbert_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz build/fwd_dump >/dev/null || { echo "FAIL modernbert_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/modernbert_check.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/modernbert-$key
mkdir -p "$work" || { echo "FAIL modernbert_check: cannot create $work"; exit 1; }
"$py" tests/ref/modernbert_check.py ./attnviz build/fwd_dump "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
