#!/bin/bash
# Image decoding (libpng, libjpeg-turbo) and preprocessing against PIL and transformers' own PIL
# image processors (tests/ref/image_check.py): images of many sizes, aspect ratios and modes
# written by PIL in the test set-up, compared byte for byte after decoding and in 8-bit steps
# after rescale. The reference Python for images is tools/pyimg.sh's (Pillow over tools/pyref.sh's).
# Images are cached under ~/.cache/attnviz/images-<hash of image_check.py>.
set -u
cd "$(dirname "$0")/../.."
if ! tools/pyref.sh --check >/dev/null 2>&1; then
    echo "SKIP image_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
py=$(tools/pyimg.sh) || { echo "FAIL image_check: tools/pyimg.sh could not build the image reference Python"; exit 1; }
make -s -j2 build/img_dump >/dev/null || { echo "FAIL image_check: build failed"; exit 1; }
key=$(cat tests/ref/image_check.py tools/pyimg-requirements.txt | sha256sum | cut -c1-12)
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/images-$key
mkdir -p "$work" || { echo "FAIL image_check: cannot create $work"; exit 1; }
"$py" tests/ref/image_check.py build/img_dump "$work"
