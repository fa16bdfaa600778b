#!/bin/bash
# SmolVLM / Idefics3 against transformers' eager float64 pass and its Idefics3Processor (tests/ref/smolvlm_check.py):
# a checkpoint transformers writes at SmolVLM-256M's published shape with 2 layers a tower, cached under
# ~/.cache/attnviz/smolvlm-<hash of smolvlm_check.py>; pictures of several sizes and aspect ratios (1 to 16 tiles).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init smolvlm_check --image
ref_build attnviz
ref_cache smolvlm tests/ref/smolvlm_check.py
if [ ! -f "$work/wide.png" ]; then
    "$py" -c '
import sys, numpy as np
from PIL import Image
rng = np.random.default_rng(51)
for name, w, h in (("picture", 640, 480), ("tall", 300, 900), ("small", 200, 200), ("wide", 1500, 400)):
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([127 + 120 * np.sin(x / 40.0), 127 + 120 * np.cos(y / 30.0), (x + y) / (w + h) * 255], -1)
    img += rng.normal(0, 10, img.shape)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(f"{sys.argv[1]}/{name}.png")
Image.open(f"{sys.argv[1]}/tall.png").convert("L").save(f"{sys.argv[1]}/gray.jpg", quality=90)' "$work" ||
        { echo "FAIL smolvlm_check: cannot draw the test pictures"; exit 1; }
fi
ref_start
"$py" tests/ref/smolvlm_check.py ./attnviz "$work" "$work/picture.png" "$work/tall.png" "$work/small.png" \
    "$work/wide.png" "$work/gray.jpg" 2>&1 | grep -E "^(PASS|FAIL|SKIP)|Error|error"
ref_exit "${PIPESTATUS[0]}"
