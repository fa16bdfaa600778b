#!/bin/bash
# XLM-RoBERTa and ELECTRA (F32 and BF16; ELECTRA's embeddings narrower and wider than the hidden
# state) against transformers' eager attention over 1 to 1,024 tokens (tests/ref/encoder_check.py),
# on checkpoints transformers writes itself with real tokenizer files: XLM-R's Unigram
# tokenizer.json made by sentencepiece + transformers (tests/tokenizer/make_unigram.py, cached as
# tokjson_check.sh caches it), ELECTRA's bert-base-uncased vocab.txt (tools/refdata.sh).
# Checkpoints are cached under ~/.cache/attnviz/encoders-<hash of encoder_check.py + make_unigram.py>.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init encoder_check
ref_build build/fwd_dump
bert=${ATTNVIZ_REFDATA:+$ATTNVIZ_REFDATA/bert-base-uncased}
[ -n "$bert" ] || bert=$(tools/refdata.sh bert-base-uncased) || { echo "FAIL encoder_check: tools/refdata.sh failed"; exit 1; }
ref_cache encoders tests/ref/encoder_check.py tests/tokenizer/make_unigram.py
if [ ! -f "$work/unigram/xlmr/tokenizer.json" ]; then
    rm -rf "$work/unigram.tmp" && mkdir -p "$work/unigram.tmp" &&
        "$py" tests/tokenizer/make_unigram.py "$work/unigram.tmp" >"$work/unigram.log" 2>&1 &&
        mv "$work/unigram.tmp" "$work/unigram" || { echo "FAIL encoder_check: make_unigram.py failed (see $work/unigram.log)"; exit 1; }
fi
"$py" tests/ref/encoder_check.py build/fwd_dump "$work" "$work/unigram/xlmr" "$bert/vocab.txt" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
