"""The vision peer: transformers' CLIPVisionModelWithProjection or SiglipVisionModel with eager
attention and output_attentions=True on PyPI's torch (the reference Python, tools/pyref.sh), on the
same checkpoint and the same preprocessed picture as bench/vis_bench.c (the folder's own PIL image
processor): the image pass with every layer's attention returned and the pooled output. torch uses
its default thread count.

usage: peer_vision.py MODEL_DIR IMAGE [--repeat N]      prints forward_ms (best of N) on stderr
       peer_vision.py --make clip|siglip OUT_DIR        writes a checkpoint at CLIP ViT-B/16's or
                                                         SigLIP-base-patch16-224's vision shape (12
                                                         layers, F32) with its preprocessor config
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import transformers as T  # noqa: E402
from PIL import Image  # noqa: E402
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil  # noqa: E402
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil  # noqa: E402

SHAPE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224,
             patch_size=16)
PRE = {
    "clip": {"image_processor_type": "CLIPImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
             "resample": 3, "crop_size": {"height": 224, "width": 224}, "size": {"shortest_edge": 224}},
    "siglip": {"image_processor_type": "SiglipImageProcessor", "resample": 3, "size": {"height": 224, "width": 224},
               "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
}


def make(kind, out):
    torch.manual_seed(5)
    if kind == "clip":
        model = T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(**SHAPE, projection_dim=512))
    else:
        model = T.SiglipVisionModel(T.SiglipVisionConfig(**SHAPE))
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(PRE[kind], f)


def main():
    if sys.argv[1] == "--make":
        make(sys.argv[2], sys.argv[3])
        return
    model_dir, image = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    siglip = cfg["model_type"].startswith("siglip")
    cls = T.SiglipVisionModel if siglip else T.CLIPVisionModelWithProjection
    pcls = SiglipImageProcessorPil if siglip else CLIPImageProcessorPil
    pre = {k: v for k, v in json.load(open(os.path.join(model_dir, "preprocessor_config.json"))).items()
           if k != "image_processor_type"}
    pv = pcls(**pre)(images=Image.open(image), return_tensors="pt")["pixel_values"]
    model = cls.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32).eval()
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeat + 1):
            t0 = time.perf_counter()
            out = model(pixel_values=pv, output_attentions=True)
            _ = [a.numpy() for a in out.attentions]
            best = min(best, time.perf_counter() - t0)
    print(f"forward_ms={best * 1e3:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
