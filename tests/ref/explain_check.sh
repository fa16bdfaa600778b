#!/bin/bash
# attnviz --explain L.H against TransformerLens's residual decomposition on synthetic GPT-2 and Llama
# checkpoints that transformers writes (tests/ref/explain_check.py), on the kernel this CPU picks, as the
# other live checks (the kernels give the same bits; `explain_check.sh --kernels avx512,avx2,scalar`
# checks each here). Checkpoints are shared with tests/ref/predict_check.sh
# (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP explain_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL explain_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/lm_checkpoints.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/predict-$key
mkdir -p "$work" || { echo "FAIL explain_check: cannot create $work"; exit 1; }
kernels=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
start=$(date +%s)
"$py" tests/ref/explain_check.py ./attnviz "$work" --kernels "${kernels:-scalar}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "Writing model shards" -e "Warning" -e "warn("
rc=${PIPESTATUS[0]}
echo "  explain_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
