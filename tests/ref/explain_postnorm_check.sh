#!/bin/bash
# --explain L.H on post-norm encoders against a float64 decomposition over transformers' hooks
# (tests/ref/explain_postnorm_check.py: every LayerNorm frozen at its measured scale): the BERT fixture
# (tests/data/small-f32) and the trained all-MiniLM-L6-v2 when tools/pymodel.sh has it (else a SKIP line).
# On the kernel this CPU picks, as the other live checks (`explain_postnorm_check.sh --kernels
# avx512,avx2,scalar` checks each here).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init explain_postnorm_check
ref_build attnviz
ref_start
extra=()
if d=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null); then extra+=(--minilm "$d"); else echo "SKIP explain_postnorm_check MiniLM: not installed (tools/pymodel.sh)"; fi
kernels=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
"$py" tests/ref/explain_postnorm_check.py ./attnviz --kernels "${kernels:-scalar}" "${extra[@]}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "^\[transformers\]"
ref_exit "${PIPESTATUS[0]}"
