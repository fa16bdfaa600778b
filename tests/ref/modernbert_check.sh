#!/bin/bash
# ModernBERT (F32, BF16; 4 layers so that local and global layers both occur, the real 128-token
# local window) against transformers' eager attention and its masked-LM head, on every products
# kernel this CPU runs (ATTNVIZ_KERNEL): tests/ref/modernbert_check.py. Checkpoints are cached
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
kernels=()
for k in avx512 avx2 neon scalar; do
    ATTNVIZ_KERNEL=$k ./attnviz --version >/dev/null 2>&1 && kernels+=("$k")
done
[ "${#kernels[@]}" -ge 1 ] || { echo "FAIL modernbert_check: no kernel runs here"; exit 1; }
kl=$(IFS=,; echo "${kernels[*]}")
"$py" tests/ref/modernbert_check.py ./attnviz build/fwd_dump "$work" --kernels "$kl" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
