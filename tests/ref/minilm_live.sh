#!/bin/bash
# Live check on trained weights: attnviz vs Hugging Face transformers (eager) on all-MiniLM-L6-v2
# over tests/ref/data/minilm_inputs.txt (one input a line; TAB separates a pair). Needs the
# reference Python (tools/pyref.sh) and the MiniLM package (tests/ref/minilm.sh); skips visibly.
. "$(dirname "$0")/lib.sh" || exit 1
name=minilm_same_numbers_as_transformers
ref_init $name "no reference Python (tools/pyref.sh)"
dir=$(tests/ref/minilm.sh $name 2>&1) || { echo "$dir"; exit 0; }
[ -x ./attnviz ] || { echo "FAIL $name: ./attnviz not built"; exit 1; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
inputs=tests/ref/data/minilm_inputs.txt
if ! ./attnviz --model "$dir" --batch "$inputs" --qk --hidden --json "$T/out.jsonl" --precision 9 2>"$T/err"; then
    echo "FAIL $name: attnviz failed: $(tail -n 1 "$T/err")"
    exit 1
fi
"$py" tests/ref/hf_minilm_check.py "$dir" "$inputs" "$T/out.jsonl" 2>"$T/pyerr"
rc=$?
[ $rc -eq 0 ] || tail -n 3 "$T/pyerr"
exit $rc
