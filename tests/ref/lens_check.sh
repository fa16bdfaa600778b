#!/bin/bash
# attnviz --logit-lens, --attribution/--target and --ablate against TransformerLens on synthetic
# GPT-2 and Llama checkpoints that transformers writes (tests/ref/lens_check.py), on the kernel this
# CPU picks, as the other live checks (test_lens runs under every kernel in make test, and the
# kernels give the same bits; `lens_check.sh --kernels avx512,avx2,scalar` checks each here). Checkpoints are shared with tests/ref/predict_check.sh
# (~/.cache/attnviz/predict-<hash of lm_checkpoints.py>).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init lens_check
ref_build attnviz
ref_cache predict tests/ref/lm_checkpoints.py
kernels=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
ref_start
"$py" tests/ref/lens_check.py ./attnviz "$work" --kernels "${kernels:-scalar}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "Writing model shards" -e "Warning" -e "warn("
ref_exit "${PIPESTATUS[0]}"
