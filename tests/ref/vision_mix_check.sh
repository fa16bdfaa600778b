#!/bin/bash
# ALTI and attention rollout of vision encoders (attnviz --image IMG --measure alti,rollout) against
# float64 implementations of the papers' equations over transformers' hooks (tests/ref/vision_mix_check.py):
# the committed ViT, DINOv2 (registers) and SigLIP fixtures, and DeiT, DINOv2 with layer scales other than 1
# and CLIP's vision tower made at the same tiny size; the pixels are attnviz's own (build/vis_dump). On the
# kernel this CPU picks, as the other live checks (`vision_mix_check.sh --kernels avx512,avx2,scalar` checks
# each here).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init vision_mix_check
ref_build attnviz build/vis_dump
ref_start
kernels=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
"$py" tests/ref/vision_mix_check.py ./attnviz build/vis_dump --kernels "${kernels:-scalar}" "$@" 2>&1 |
    grep -v -e "Loading weights" -e "Writing model shards" -e "^\[transformers\]"
ref_exit "${PIPESTATUS[0]}"
