#!/bin/bash
# Encoder-decoder models (BART, Marian, T5 / Flan-T5; F32 and BF16) against transformers: encoder,
# decoder and cross attention of `attnviz --decoder-text` and `--generate` (token for token), and the
# tokenizers' ids: tests/ref/seq2seq_check.py. Checkpoints are cached under ~/.cache/attnviz, keyed
# by the script's hash, so CI writes them once.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP seq2seq_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL seq2seq_check: build failed"; exit 1; }
key=$(sha256sum tests/ref/seq2seq_check.py | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/seq2seq-$key
mkdir -p "$work" || { echo "FAIL seq2seq_check: cannot create $work"; exit 1; }
"$py" tests/ref/seq2seq_check.py ./attnviz "$work" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
