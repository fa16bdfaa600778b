#!/bin/bash
# Image decoding (libpng, libjpeg-turbo) and preprocessing against PIL and transformers' own PIL
# image processors (tests/ref/image_check.py): images of many sizes, aspect ratios and modes
# written by PIL in the test set-up, compared byte for byte after decoding and in 8-bit steps
# after rescale. The reference Python for images is tools/pyimg.sh's (Pillow over tools/pyref.sh's).
# Images are cached under ~/.cache/attnviz/images-<hash of image_check.py>.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init image_check --image
ref_build build/img_dump
ref_cache images tests/ref/image_check.py tools/pyimg-requirements.txt
"$py" tests/ref/image_check.py build/img_dump "$work"
