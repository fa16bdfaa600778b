#!/bin/bash
# The vision encoders (ViT, DeiT, DINOv2 with and without registers, CLIP and SigLIP whole and their
# vision towers) against transformers' eager attention in float64 fed attnviz's own pixel_values, on
# every kernel path (tests/ref/vision_check.py): checkpoints transformers writes at published shapes
# with 2 layers (a whole CLIP with CLIP's real tokenizer: the command line's text), cached under ~/.cache/attnviz/vision-<hash of vision_check.py>, and a test picture
# PIL draws there.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init vision_check --image
ref_build build/vis_dump attnviz
# CLIP's real tokenizer (clip-b16-text-f16 reads a text through it)
CLIP_TOKENIZER=$(tools/pymodel.sh clip-tokenizer) || { echo "FAIL vision_check: no CLIP tokenizer (tools/pymodel.sh clip-tokenizer)"; exit 1; }
export CLIP_TOKENIZER
ref_cache vision tests/ref/vision_check.py
if [ ! -f "$work/picture.png" ]; then
    "$py" -c '
import sys, numpy as np
from PIL import Image
rng = np.random.default_rng(5)
y, x = np.mgrid[0:480, 0:640]
img = np.stack([127 + 120 * np.sin(x / 40.0), 127 + 120 * np.cos(y / 30.0), (x + y) / 4.5], -1)
img += rng.normal(0, 10, img.shape)
Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(sys.argv[1])' "$work/picture.png" ||
        { echo "FAIL vision_check: cannot draw the test picture"; exit 1; }
fi
"$py" tests/ref/vision_check.py build/vis_dump "$work" "$work/picture.png" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
