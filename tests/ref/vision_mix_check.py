"""ALTI and attention rollout of vision encoders (attnviz --image IMG --measure alti,rollout) against float64
implementations written here from the papers' equations over transformers' hooks (nothing of attnviz's code):

Attention rollout (Abnar & Zuidema 2020, section 3): A^ = 0.5 mean_h(A_h) + 0.5 I, rows re-normalised,
rollout(l) = A^(l) rollout(l-1), rollout(0) = A^(0).

ALTI (Ferrando, Gállego & Costa-jussà 2022, section 3) for pre-norm ViT-style layers, per layer, output
token i, input token j:
    T_i(x_j) = s * sum_h W_O^h alpha^h_ij v^h_j  +  [i = j] x_i
v^h_j the value projection's output for the normed x_j (a forward hook: its bias included), W_O^h the output
projection's columns of head h, s DINOv2's layer scale (lambda1; 1 elsewhere); y_i = x_i + the attention
block's output as it joins the residual (a hook on the module that gives it: ViT/DeiT's attention, DINOv2's
layer_scale1, CLIP/SigLIP's self_attn). The bias s * b_O belongs to no token but is part of y_i.
    c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), divided by their row's sum; ALTI(l) = C(l) ALTI(l-1).
The reconstruction (sum over j of T plus s * b_O) is asserted against the hooked y first, and the attention
attnviz captured against transformers'. The pixels both read are attnviz's (build/vis_dump writes them; its
preprocessing is checked against transformers' image processors by tests/ref/image_check.sh).

Checkpoints: the committed ViT (tests/data/small-vit), DINOv2 with registers (small-dinov2; its layer scales
are 1) and SigLIP (small-siglip: its vision tower), and DeiT (distillation token), DINOv2 with layer scales
drawn from [0.5, 1.5] and CLIP's vision tower (pre_layrnorm, quick_gelu) made here at the same tiny size with
random weights. Every kernel path in
--kernels (ATTNVIZ_KERNEL). One PASS/FAIL line per checkpoint and kernel; exit 1 on any FAIL.

usage: vision_mix_check.py ATTNVIZ VIS_DUMP [--tol 1e-4] [--kernels avx512,avx2,scalar]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402

np.seterr(invalid="raise", divide="raise")
import torch  # noqa: E402
import transformers as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.path.join(ROOT, "tests/data/vision-picture.png")
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
            patch_size=8, qkv_bias=True, layer_norm_eps=1e-12)


def make_tiny(kind, out):
    """DeiT, DINOv2 with layer scales other than 1 and CLIP's vision tower at the committed fixtures' size:
    random weights, peaky attention."""
    torch.manual_seed(sum(map(ord, kind)))
    if kind == "deit":
        model = T.DeiTModel(T.DeiTConfig(**TINY), add_pooling_layer=False)
        pre = {"image_processor_type": "DeiTImageProcessor", "do_center_crop": True, "do_normalize": True,
               "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
               "image_std": [0.229, 0.224, 0.225], "resample": 3, "crop_size": {"height": 32, "width": 32},
               "size": {"height": 36, "width": 36}}
    elif kind == "dinov2":
        model = T.Dinov2Model(T.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                             image_size=32, patch_size=8, layerscale_value=1.0))
        pre = {"image_processor_type": "BitImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
               "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
               "image_std": [0.229, 0.224, 0.225], "resample": 3, "crop_size": {"height": 32, "width": 32},
               "size": {"shortest_edge": 36}}
    else:
        cfg = {k: v for k, v in TINY.items() if k not in ("qkv_bias",)}
        model = T.CLIPVisionModelWithProjection(T.CLIPVisionConfig(**cfg, hidden_act="quick_gelu", projection_dim=16))
        pre = {"image_processor_type": "CLIPImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
               "do_normalize": True, "do_rescale": True, "do_resize": True,
               "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
               "resample": 3, "crop_size": {"height": 32, "width": 32}, "size": {"shortest_edge": 32}}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("query", "key.", "q_proj", "k_proj")):
                p.mul_(8.0)
            elif "lambda1" in name:
                p.copy_(0.5 + torch.rand_like(p))  # layer scales away from their init of 1
            elif any(k in name for k in ("cls_token", "distillation_token", "class_embedding")):
                p.normal_(0, 1.0)
    model.eval().save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f)
    return out


def tower_of(model):
    """The vision tower and, per layer, dict(v=value module, wo, bo, out=module whose output joins the residual,
    scale=layer scale vector or None)."""
    t = model.config.model_type
    if t in ("siglip", "clip"):
        model = model.vision_model
    elif hasattr(model, "vision_model"):
        model = model.vision_model
    enc = getattr(model, "encoder", None)
    layers = getattr(model, "layers", None) or getattr(enc, "layer", None) or getattr(enc, "layers")
    res = []
    for l in layers:
        a = getattr(l, "attention", None) or l.self_attn
        inner = getattr(a, "attention", a)  # older transformers: ViTAttention.attention.value, .output.dense
        v = getattr(inner, "v_proj", None) or getattr(inner, "value")
        o = getattr(a, "o_proj", None) or getattr(a, "out_proj", None) or a.output.dense
        ls = getattr(l, "layer_scale1", None)  # DINOv2: lambda1 * attention's output joins the residual
        res.append(dict(v=v, wo=o.weight, bo=o.bias, out=ls if ls is not None else a,
                        scale=ls.lambda1.detach().numpy() if ls is not None else None))
    return model, res


def first(o):
    return o[0] if isinstance(o, (tuple, list)) else o


def pixels(vis_dump, model_dir, tmp):
    """attnviz's preprocessed pixels of IMAGE for model_dir: (1, 3, h, w) float64."""
    prefix = os.path.join(tmp, "px")
    r = subprocess.run([vis_dump, model_dir, IMAGE, prefix], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"vis_dump failed: {r.stderr.strip()}")
    meta = json.loads(r.stdout)
    px = np.fromfile(prefix + ".pixels", np.float32).reshape(3, meta["pixels_h"], meta["pixels_w"])
    return torch.from_numpy(px.astype(np.float64))[None]


def reference(model_dir, px):
    model = T.AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64).eval()
    tower, parts = tower_of(model)
    nh = tower.config.num_attention_heads
    grab, hooks = {}, []
    for li, p in enumerate(parts):
        hooks.append(p["v"].register_forward_hook(lambda _m, _i, out, li=li: grab.__setitem__(("v", li), out[0].detach())))
        hooks.append(p["out"].register_forward_hook(
            lambda _m, _i, out, li=li: grab.__setitem__(("out", li), first(out)[0].detach())))
    with torch.no_grad():
        out = tower(pixel_values=px, output_attentions=True, output_hidden_states=True)
    for hk in hooks:
        hk.remove()
    L, n = len(out.attentions), out.attentions[0].shape[-1]
    r = {k: np.zeros((L, n, n)) for k in ("alti", "alti_layer", "rollout", "rollout_layer")}
    recon = 0.0
    for li in range(L):
        p = parts[li]
        alpha = out.attentions[li][0].numpy()                 # (nh, n, n)
        x = out.hidden_states[li][0].numpy()                  # (n, hidden): the layer's input
        hidden = x.shape[1]
        dh = hidden // nh
        v = grab[("v", li)].numpy().reshape(n, nh, dh)
        wo, bo = p["wo"].detach().numpy(), p["bo"].detach().numpy()
        s = p["scale"] if p["scale"] is not None else np.ones(hidden)
        a = 0.5 * alpha.mean(0) + 0.5 * np.eye(n)
        a = a / a.sum(1, keepdims=True)
        r["rollout_layer"][li] = a
        r["rollout"][li] = a if li == 0 else a @ r["rollout"][li - 1]
        heads = np.zeros((n, n, hidden))                      # [i, j]: sum_h alpha^h_ij W_O^h v^h_j
        for h in range(nh):
            f = v[:, h, :] @ wo[:, h * dh:(h + 1) * dh].T
            heads += alpha[h][:, :, None] * f[None, :, :]
        Tt = heads * s + np.eye(n)[:, :, None] * x[:, None, :]
        y = x + grab[("out", li)].numpy()
        recon = max(recon, float(np.abs(Tt.sum(1) + s * bo - y).max() / np.abs(y).max()))
        c = np.maximum(np.abs(y).sum(1)[:, None] - np.abs(y[:, None, :] - Tt).sum(2), 0.0)
        tot = c.sum(1, keepdims=True)
        c = np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
        r["alti_layer"][li] = c
        r["alti"][li] = c if li == 0 else c @ r["alti"][li - 1]
    att = np.stack([a[0].numpy() for a in out.attentions])  # (L, nh, n, n)
    return r, att, recon


def run_cli(attnviz, model_dir, kernel):
    run = subprocess.run([attnviz, "--model", model_dir, "--image", IMAGE, "--measure", "alti,rollout", "--json", "-",
                          "--precision", "9", "--quiet"], capture_output=True, text=True,
                         env=dict(os.environ, ATTNVIZ_KERNEL=kernel))
    if run.returncode != 0:
        return None, run.stderr.strip()
    return json.loads(run.stdout), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("vis_dump")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--kernels", default="scalar")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="attnviz-vismix-")
    ok = True
    try:
        models = [("ViT", os.path.join(ROOT, "tests/data/small-vit")),
                  ("DINOv2 with registers", os.path.join(ROOT, "tests/data/small-dinov2")),
                  ("DINOv2 (layer scales 0.5 to 1.5)", make_tiny("dinov2", os.path.join(tmp, "dinov2"))),
                  ("SigLIP (vision tower)", os.path.join(ROOT, "tests/data/small-siglip")),
                  ("DeiT (distillation token)", make_tiny("deit", os.path.join(tmp, "deit"))),
                  ("CLIP vision (pre_layrnorm)", make_tiny("clip", os.path.join(tmp, "clip")))]
        for label, d in models:
            ref, att, recon = reference(d, pixels(a.vis_dump, d, tmp))
            for k in a.kernels.split(","):
                got, err = run_cli(a.attnviz, d, k)
                if got is None:
                    print(f"FAIL vision mix {label} [{k}]: {err}")
                    ok = False
                    continue
                errs = {m: float(np.abs(np.asarray(got[m]) - ref[m]).max()) for m in ref}
                att_err = float(np.abs(np.asarray(got["attention"]) - att).max())
                good = all(e <= a.tol for e in errs.values()) and recon <= 1e-9 and att_err <= a.tol
                ok &= good
                print(f"{'PASS' if good else 'FAIL'} vision mix {label} [{k}]: max |diff| alti {errs['alti']:.2e}, "
                      f"alti_layer {errs['alti_layer']:.2e}, rollout {errs['rollout']:.2e}, rollout_layer "
                      f"{errs['rollout_layer']:.2e} (tol {a.tol:g}); attention {att_err:.2e}; the reference's sum of "
                      f"parts against transformers' {recon:.1e} relative (tol 1e-9); {ref['alti'].shape[1]} tokens")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
