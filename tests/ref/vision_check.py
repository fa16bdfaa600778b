"""The vision encoders against transformers itself: synthetic checkpoints made by transformers' own
config and model classes at published shapes with 2 layers (ViT-B/16, DeiT-B/16 distilled,
DINOv2-S/14 with and without registers, CLIP ViT-B/16 whole and its vision tower with projection,
SigLIP-B/16 whole and its vision tower), q and k weights scaled so that attention is peaky,
saved with save_pretrained in F32, F16 and BF16 beside the preprocessor_config.json the published
checkpoint has; run by attnviz's engine (build/vis_dump: decode, preprocess, embed, every layer)
and by transformers (attn_implementation="eager", float64) fed attnviz's own pixel_values.

usage: vision_check.py VIS_DUMP WORKDIR IMAGE [--only NAME[,NAME...]]
Prints one PASS/FAIL line per checkpoint and kernel path (ATTNVIZ_KERNEL: every one the CPU has):
the max |diff| of every layer's and head's attention over class/distillation/register tokens and
patches (bound 1e-4), of SigLIP's pooling head's attention (1e-4), of the pooled embedding and of
CLIP's and SigLIP's image-text similarity (1e-5), and of the text tower's attention (1e-4).
clip-b16-text-f16 is a whole CLIP at ViT-B/16's published text shape too (49,408 tokens, 512 wide, 8 heads,
77 positions, eos_token_id 2 as the openai configs have) with CLIP's real tokenizer (tools/pymodel.sh
clip-tokenizer, CLIP_TOKENIZER): its text goes through the command line (attnviz --image PIC TEXT --json),
whose input_ids must be transformers' CLIPTokenizer's, then the same checks on those ids.
Exit 1 on any FAIL.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

TOL_ATTN = 1e-4
TOL_POOL = 1e-5

VIT_B = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072, image_size=224,
             patch_size=16)
DINO_S = dict(hidden_size=384, num_hidden_layers=2, num_attention_heads=6, mlp_ratio=4, image_size=518, patch_size=14,
              layerscale_value=1.0)
CLIP_TEXT = dict(vocab_size=1000, hidden_size=512, num_hidden_layers=2, num_attention_heads=8, intermediate_size=2048,
                 max_position_embeddings=77, eos_token_id=2, bos_token_id=998)
CLIP_TEXT_B16 = dict(vocab_size=49408, hidden_size=512, num_hidden_layers=2, num_attention_heads=8,
                     intermediate_size=2048, max_position_embeddings=77, eos_token_id=2, bos_token_id=49406,
                     pad_token_id=1)
CLIP_TEXT_PROMPT = "a photo of a Cat, sitting on the grey SOFA: 2 ears & 1,000 whiskers!"
SIGLIP_TEXT = dict(vocab_size=1000, hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                   intermediate_size=3072, max_position_embeddings=64)
PRE_VIT = {"image_processor_type": "ViTImageProcessor", "do_normalize": True, "do_rescale": True, "do_resize": True,
           "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2,
           "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224}}
PRE_DEIT = {"image_processor_type": "DeiTImageProcessor", "do_center_crop": True, "do_normalize": True,
            "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
            "image_std": [0.229, 0.224, 0.225], "resample": 3, "crop_size": {"height": 224, "width": 224},
            "size": {"height": 256, "width": 256}}
PRE_DINO = {"image_processor_type": "BitImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
            "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
            "image_std": [0.229, 0.224, 0.225], "resample": 3, "crop_size": {"height": 224, "width": 224},
            "size": {"shortest_edge": 256}}
PRE_CLIP = {"image_processor_type": "CLIPImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
            "do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
            "resample": 3, "crop_size": {"height": 224, "width": 224}, "size": {"shortest_edge": 224}}
PRE_SIGLIP = {"image_processor_type": "SiglipImageProcessor", "do_normalize": True, "do_rescale": True,
              "do_resize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 3,
              "size": {"height": 224, "width": 224}}

# name -> (kind, config, model class, preprocessor config, dtype, text ids or None); QK_SCALE: what q and k
# weights are multiplied by (SigLIP's wider initialization needs less for the same peakiness)
SPECS = {
    "vit-b16-f32": ("vit", lambda: T.ViTConfig(**VIT_B), T.ViTModel, PRE_VIT, "float32", None),
    "deit-b16-distilled-bf16": ("deit", lambda: T.DeiTConfig(**VIT_B), T.DeiTModel, PRE_DEIT, "bfloat16", None),
    "dinov2-s14-f16": ("dinov2", lambda: T.Dinov2Config(**DINO_S), T.Dinov2Model, PRE_DINO, "float16", None),
    "dinov2-s14-reg-f32": ("dinov2_reg", lambda: T.Dinov2WithRegistersConfig(**DINO_S, num_register_tokens=4),
                           T.Dinov2WithRegistersModel, PRE_DINO, "float32", None),
    "clip-b16-f32": ("clip", lambda: T.CLIPConfig(text_config=CLIP_TEXT,
                                                  vision_config=dict(VIT_B, hidden_act="quick_gelu"),
                                                  projection_dim=512), T.CLIPModel, PRE_CLIP, "float32",
                     [998, 17, 305, 44, 8, 611, 999]),
    "clip-b16-text-f16": ("clip", lambda: T.CLIPConfig(text_config=CLIP_TEXT_B16,
                                                       vision_config=dict(VIT_B, hidden_act="quick_gelu"),
                                                       projection_dim=512), T.CLIPModel, PRE_CLIP, "float16",
                          CLIP_TEXT_PROMPT),
    "clip-b16-vision-bf16": ("clip_vision", lambda: T.CLIPVisionConfig(**VIT_B, projection_dim=512),
                             T.CLIPVisionModelWithProjection, PRE_CLIP, "bfloat16", None),
    "siglip-b16-f32": ("siglip", lambda: T.SiglipConfig(text_config=SIGLIP_TEXT, vision_config=dict(VIT_B)),
                       T.SiglipModel, PRE_SIGLIP, "float32", [5, 88, 402, 17, 3, 951, 1, 1, 1, 1]),
    "siglip-b16-vision-f16": ("siglip_vision", lambda: T.SiglipVisionConfig(**VIT_B), T.SiglipVisionModel, PRE_SIGLIP,
                              "float16", None),
}


QK_SCALE = {"siglip": 3.0, "siglip_vision": 3.0}


def build(name, workdir):
    kind, make_cfg, cls, pre, dtype, _ = SPECS[name]
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    torch.manual_seed(sum(map(ord, name)))
    model = cls._from_config(make_cfg(), attn_implementation="eager").float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if any(k in pname for k in ("query", "key.", "q_proj", "k_proj")):
                p.mul_(QK_SCALE.get(kind, 8.0))  # peaky attention: scores spread over several units
            elif "in_proj_weight" in pname:
                p[:2 * p.shape[1]].mul_(QK_SCALE.get(kind, 8.0))  # the pooling head's q and k rows
            elif "lambda1" in pname:
                p.copy_(0.5 + torch.rand_like(p))  # layer scales away from their init of 1
            elif "cls_token" in pname or "distillation_token" in pname or "register_tokens" in pname \
                    or "class_embedding" in pname or "probe" in pname:
                p.normal_(0, 1.0)
            elif "logit_bias" in pname:
                p.fill_(-3.0)
    model.to(getattr(torch, dtype)).save_pretrained(tmp, safe_serialization=True)
    with open(os.path.join(tmp, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f)
    if isinstance(SPECS[name][5], str):  # a text: CLIP's real tokenizer beside the weights
        for f in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
            shutil.copy(os.path.join(os.environ["CLIP_TOKENIZER"], f), tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


def kernels(vis_dump, model_dir, image, prefix):
    """The kernel paths this CPU runs (ATTNVIZ_KERNEL), the best first."""
    found = []
    for k in ("avx512", "avx2", "neon", "scalar"):
        r = subprocess.run([vis_dump, model_dir, image, prefix], env=dict(os.environ, ATTNVIZ_KERNEL=k),
                           capture_output=True, text=True)
        if r.returncode == 0:
            found.append(k)
        elif "kernel" not in r.stderr:
            raise SystemExit(f"vis_dump failed: {r.stderr.strip()}")
    return found


def run_attnviz(vis_dump, model_dir, image, prefix, kernel, ids):
    r = subprocess.run([vis_dump, model_dir, image, prefix] + [str(i) for i in (ids or [])],
                       env=dict(os.environ, ATTNVIZ_KERNEL=kernel), capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    meta = json.loads(r.stdout)
    L, H, n = meta["layers"], meta["heads"], meta["tokens"]
    out = {"meta": meta,
           "pixels": np.fromfile(prefix + ".pixels", np.float32).reshape(3, meta["pixels_h"], meta["pixels_w"]),
           "attn": np.fromfile(prefix + ".attn", np.float32).reshape(L, H, n, n)}
    if meta["embed_dim"]:
        out["embed"] = np.fromfile(prefix + ".embed", np.float32)
    if meta["pool"]:
        out["pool_attn"] = np.fromfile(prefix + ".pool_attn", np.float32).reshape(H, n)
    if ids:
        t = len(ids)
        out["text_attn"] = np.fromfile(prefix + ".text_attn", np.float32).reshape(meta["text_layers"],
                                                                                   meta["text_heads"], t, t)
        out["text_embed"] = np.fromfile(prefix + ".text_embed", np.float32)
    return out, None


def reference(name, model_dir, pixels, ids):
    kind, _, cls, _, _, _ = SPECS[name]
    model = cls.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64).eval()
    pv = torch.from_numpy(pixels.astype(np.float64))[None]
    ref = {}
    with torch.no_grad():
        vision = model.vision_model if hasattr(model, "vision_model") else model
        vout = vision(pixel_values=pv, output_attentions=True)
        ref["attn"] = torch.stack([a[0] for a in vout.attentions]).numpy()
        if kind in ("clip", "clip_vision"):
            proj = model.visual_projection
            ref["embed"] = proj(vout.pooler_output)[0].numpy()
        elif kind in ("siglip", "siglip_vision"):
            ref["embed"] = vout.pooler_output[0].numpy()
            head = vision.head
            hs = vout.last_hidden_state
            _, w = head.attention(head.probe, hs, hs, need_weights=True, average_attn_weights=False)
            ref["pool_attn"] = w[0, :, 0, :].numpy()
        if ids:
            out = model(input_ids=torch.tensor([ids]), pixel_values=pv, output_attentions=True)
            ref["text_attn"] = torch.stack([a[0] for a in out.text_model_output.attentions]).numpy()
            ref["similarity"] = float(out.logits_per_image[0, 0])
            ref["image_embed_model"] = out.image_embeds[0].numpy()
    return ref


def text_ids(attnviz, model_dir, image, text):
    """The ids the command line tokenizes text into (its --json's image.text), and transformers' CLIPTokenizer's."""
    r = subprocess.run([attnviz, "--quiet", "--model", model_dir, "--image", image, text, "--json", "-"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"attnviz --image with a text failed: {r.stderr.strip()}")
    got = json.loads(r.stdout)["image"]["text"]
    ref = T.CLIPTokenizer.from_pretrained(model_dir)(text)["input_ids"]
    return got["input_ids"], ref, got["tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vis_dump")
    ap.add_argument("workdir")
    ap.add_argument("image")
    ap.add_argument("--only", default="")
    ap.add_argument("--attnviz", default="./attnviz")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    fails = 0
    for name in SPECS:
        if only and name not in only:
            continue
        ids = SPECS[name][5]
        if isinstance(ids, str) and not os.environ.get("CLIP_TOKENIZER"):
            print(f"FAIL vision {name}: CLIP_TOKENIZER (tools/pymodel.sh clip-tokenizer) is not set")
            fails += 1
            continue
        model_dir = build(name, a.workdir)
        if isinstance(ids, str):
            text = ids
            ids, ref_ids, toks = text_ids(a.attnviz, model_dir, a.image, text)
            ok = ids == ref_ids
            print(f"{'PASS' if ok else 'FAIL'} vision {name}: {text!r} tokenized by attnviz as transformers' "
                  f"CLIPTokenizer does ({len(ids)} ids: {' '.join(toks)})" + ("" if ok else f": {ids} vs {ref_ids}"))
            fails += not ok
        prefix = os.path.join(a.workdir, name + ".out")
        ref = None
        for kernel in kernels(a.vis_dump, model_dir, a.image, prefix):
            got, err = run_attnviz(a.vis_dump, model_dir, a.image, prefix, kernel, ids)
            if got is None:
                print(f"FAIL vision {name} ({kernel}): {err}")
                fails += 1
                continue
            if ref is None:
                ref = reference(name, model_dir, got["pixels"], ids)
            meta = got["meta"]
            errs = {"attention": float(np.abs(got["attn"] - ref["attn"]).max())}
            bounds = {"attention": TOL_ATTN}
            if "embed" in ref:
                errs["pooled"] = float(np.abs(got["embed"] - ref["embed"]).max())
                bounds["pooled"] = TOL_POOL
            if "pool_attn" in ref:
                errs["pooling attention"] = float(np.abs(got["pool_attn"] - ref["pool_attn"]).max())
                bounds["pooling attention"] = TOL_ATTN
            if ids:
                errs["text attention"] = float(np.abs(got["text_attn"] - ref["text_attn"]).max())
                bounds["text attention"] = TOL_ATTN
                errs["similarity"] = abs(meta["similarity"] - ref["similarity"])
                bounds["similarity"] = TOL_POOL
            peak = float(ref["attn"].max(axis=-1).mean())
            ok = all(errs[k] <= bounds[k] for k in errs)
            detail = ", ".join(f"{k} {v:.2e}" for k, v in errs.items())
            print(f"{'PASS' if ok else 'FAIL'} vision {name} ({kernel}, {meta['dtype']}, {meta['tokens']} tokens = "
                  f"{meta['prefix']} + {meta['rows']}x{meta['cols']} patches, mean row max {peak:.2f}): {detail}"
                  + ("" if not ids else f"; similarity {ref['similarity']:.5f}"), flush=True)
            fails += not ok
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
