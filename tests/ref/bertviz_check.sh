#!/bin/bash
# attnviz against bertviz itself (head view, model view and neuron view) on the trained
# all-MiniLM-L6-v2, in the reference Python (tools/pyref.sh): tests/ref/bertviz_compare.py.
. "$(dirname "$0")/lib.sh" || exit 1
ref_init bertviz_check "the reference Python is not built (tools/pyref.sh)"
model=$(tests/ref/minilm.sh bertviz_check) || { echo "$model"; exit 0; }
if out=$("$py" tests/ref/bertviz_compare.py ./attnviz "$model" \
    "time flies like an arrow	fruit flies like a banana" \
    "the cat sat on the mat" \
    "Héllo, wörld! Don't stop — 42 times?	It's 3.14, isn't it?" \
    "a [MASK] sat on the mat" \
    "the quick brown fox jumps over the lazy dog and keeps running through the forest until night falls" 2>&1); then
    echo "$out"
    echo "PASS bertviz_views_show_the_same_attention_tokens_and_neuron_vectors"
else
    echo "FAIL bertviz_views_show_the_same_attention_tokens_and_neuron_vectors: $out"
fi
