#!/bin/bash
# attnviz --image on the trained DINOv2-small (tools/pymodel.sh dinov2-small) and on the committed
# vision fixtures against transformers in float64 fed its own image processor's pixels, and the trained
# model's known behaviour on examples/images/cat-on-grey.png: the class token's attention and rollout
# on the cat (tests/ref/trained_vision_check.py).
set -u
cd "$(dirname "$0")/../.."
if ! tools/pyref.sh --check >/dev/null 2>&1; then
    echo "SKIP trained_vision_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
py=$(tools/pyimg.sh) || { echo "FAIL trained_vision_check: tools/pyimg.sh could not build the image reference Python"; exit 1; }
dino=$(tools/pymodel.sh dinov2-small) || { echo "FAIL trained_vision_check: tools/pymodel.sh dinov2-small failed"; exit 1; }
make -s -j2 attnviz >/dev/null || { echo "FAIL trained_vision_check: build failed"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" tests/ref/trained_vision_check.py ./attnviz "$dino" "$work" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
