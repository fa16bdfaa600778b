#!/bin/bash
# What trained heads do (docs/real-heads.md): attnviz --stats on all-MiniLM-L6-v2 over the committed
# corpus must give the same top-3 heads per category (tests/data/corpus/top_heads.txt), and its
# statistics must equal those recomputed from transformers' attention (tests/ref/real_heads.py).
. "$(dirname "$0")/lib.sh" || exit 1
ref_init real_heads "the reference Python is not built (tools/pyref.sh)"
model=$(tests/ref/minilm.sh real_heads) || exit 0
if out=$("$py" tests/ref/real_heads.py ./attnviz "$model" tests/data/corpus/sentences.txt \
    --expect tests/data/corpus/top_heads.txt --check-first 80 2>&1); then
    echo "$out"
    echo "PASS minilm_top3_heads_per_category_unchanged_and_stats_match_transformers"
else
    echo "FAIL minilm_top3_heads_per_category_unchanged_and_stats_match_transformers: $out"
fi
