#!/bin/bash
# Encoder-decoder models (BART, Marian, T5 / Flan-T5; F32 and BF16) against transformers: encoder,
# decoder and cross attention of `attnviz --decoder-text` and `--generate` (token for token), and the
# tokenizers' ids: tests/ref/seq2seq_check.py. Checkpoints are cached under ~/.cache/attnviz, keyed
# by the script's hash, so CI writes them once.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init seq2seq_check
ref_build attnviz
ref_cache seq2seq tests/ref/seq2seq_check.py
"$py" tests/ref/seq2seq_check.py ./attnviz "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
