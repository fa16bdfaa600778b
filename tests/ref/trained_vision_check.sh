#!/bin/bash
# attnviz --image on the trained DINOv2-small (tools/pymodel.sh dinov2-small) and on the committed
# vision fixtures against transformers in float64 fed its own image processor's pixels, and the trained
# model's known behaviour on examples/images/cat-on-grey.png: the class token's attention and rollout
# on the cat (tests/ref/trained_vision_check.py).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init trained_vision_check --image
dino=$(tools/pymodel.sh dinov2-small) || { echo "FAIL trained_vision_check: tools/pymodel.sh dinov2-small failed"; exit 1; }
ref_build attnviz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" tests/ref/trained_vision_check.py ./attnviz "$dino" "$work" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
