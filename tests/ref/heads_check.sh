#!/bin/bash
# attnviz heads against TransformerLens's head detector on a synthetic GPT-2 (tests/ref/heads_check.py):
# previous-token, duplicate-token (with and without detect_head's exclusions), induction and a
# user template, every head within 1e-4.
. "$(dirname "$0")/lib.sh" || exit 1
ref_init heads_vs_transformerlens "the reference Python is not built (tools/pyref.sh)"
"$py" -c 'import transformer_lens' 2>/dev/null ||
    { echo "SKIP heads_vs_transformerlens: transformer_lens is not in the reference Python (tools/pyref-requirements.txt)"; exit 0; }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
if out=$("$py" tests/ref/heads_check.py ./attnviz "$work" 2>&1); then
    echo "$out"
    echo "PASS heads_vs_transformerlens"
else
    echo "FAIL heads_vs_transformerlens: $out"
fi
