"""attnviz's image decoding and preprocessing against PIL and transformers' own image processors.

usage: image_check.py IMG_DUMP WORK_DIR

Writes images of many sizes, aspect ratios and modes with PIL (and, for what PIL cannot write,
by hand: 16-bit RGB and interlaced PNGs) into WORK_DIR, then for each:
  - decoding: attnviz's RGB (build/img_dump) against transformers' convert_to_rgb of PIL's
    Image.open, byte for byte;
  - preprocessing: pixel_values against the transformers PIL image processor a preprocessor
    config names (ViT, DeiT, CLIP, Bit -- DINOv2's --, SigLIP; fixed and shortest-edge sizes,
    older integer sizes, every PIL filter, a crop larger than the resized image), in 8-bit steps
    after rescale: |ours - theirs| * std / rescale_factor, the worst of each processor and mode
    printed; a step of 0.5 or more fails (the bound is one step: a 2x margin).
What is not reproduced, and so is compared otherwise (said in the output):
  - 16-bit grayscale PNGs: PIL opens them as "I;16" and convert("RGB") clips every value above
    255 to white; attnviz keeps the high byte, as PIL itself does for 16-bit RGB. The reference
    is the processor on PIL's image of the high bytes.
  - processors that do not convert to RGB (ViT's and DeiT's leave do_convert_rgb unset) get
    grayscale or transparent images as 1 or 4 channels, which their normalization refuses, and
    an RGB image with a tRNS colour as it is; attnviz converts every image (transparency onto
    white): the reference runs them with do_convert_rgb=True.
  - Pillow 13 chooses which of the two resampling passes goes first (Pillow 12 and before: always
    the horizontal one), which moves some values by a few steps; tools/pyimg-requirements.txt
    pins Pillow 12.3.0, whose Resample.c attnviz follows.
Prints PASS/FAIL lines; exit 1 on any failure.
"""
import io
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

from transformers.image_transforms import convert_to_rgb
from transformers.models.bit.image_processing_pil_bit import BitImageProcessorPil
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.deit.image_processing_pil_deit import DeiTImageProcessorPil
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

IMG_DUMP, WORK = sys.argv[1], sys.argv[2]
fails = 0


def report(ok, what):
    global fails
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    fails += not ok


# ---------------------------------------------------------------- images


def content(w, h, seed):
    """A picture with smooth gradients, noise and hard edges, (h, w, 3) uint8."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([
        127.5 + 127.5 * np.sin(x / max(w / 5.0, 1) + seed),
        127.5 + 127.5 * np.cos(y / max(h / 3.0, 1) - seed),
        255.0 * (x + y) / max(w + h - 2, 1),
    ], axis=-1)
    img += rng.normal(0, 18, img.shape)
    for _ in range(4):  # rectangles with sharp edges
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        img[y0:y0 + max(h // 4, 1), x0:x0 + max(w // 5, 1)] = rng.integers(0, 256, 3)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def png_chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)


def png_rgb16(arr):
    """16-bit RGB PNG (PIL writes none)."""
    h, w, _ = arr.shape
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)) +
            png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def png_interlaced(arr):
    """8-bit RGBA (or RGB) PNG with Adam7 interlacing (PIL writes none)."""
    h, w, c = arr.shape
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = arr[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        raw += b"".join(b"\x00" + sub[y].tobytes() for y in range(sub.shape[0]))
    ct = 6 if c == 4 else 2
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ct, 0, 0, 1)) +
            png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def make_images():
    """{name: path}: every mode at one or two sizes, RGB at many."""
    out = {}
    d = os.path.join(WORK, "images")
    os.makedirs(d, exist_ok=True)

    def save(name, im, **kw):
        p = os.path.join(d, name)
        im.save(p, **kw)
        out[name] = p

    def raw(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        out[name] = p

    sizes = [(224, 224), (640, 480), (480, 640), (1000, 300), (300, 1000), (37, 53), (5, 400), (1, 1), (227, 229)]
    for i, (w, h) in enumerate(sizes):
        save(f"rgb_{w}x{h}.png", Image.fromarray(content(w, h, i)))
    w, h = 320, 240
    base = content(w, h, 42)
    rgb = Image.fromarray(base)
    save("jpeg_420.jpg", rgb, quality=90)
    save("jpeg_444.jpg", rgb, quality=95, subsampling=0)
    save("jpeg_progressive.jpg", rgb, quality=85, progressive=True)
    save("jpeg_gray.jpg", rgb.convert("L"), quality=90)
    save("jpeg_cmyk.jpg", rgb.convert("CMYK"), quality=90)
    save("jpeg_tall_420.jpg", Image.fromarray(content(301, 777, 7)), quality=80)
    save("gray.png", rgb.convert("L"))
    save("gray_1bit.png", rgb.convert("1"))
    la = Image.merge("LA", [rgb.convert("L"), Image.fromarray(content(w, h, 3)[..., 0])])
    save("gray_alpha.png", la)
    alpha = content(w, h, 5)[..., 1]
    alpha[:40] = 0  # fully transparent rows, and fully opaque ones
    alpha[-40:] = 255
    rgba = Image.merge("RGBA", list(rgb.split()) + [Image.fromarray(alpha)])
    save("rgba.png", rgba)
    save("palette.png", rgb.quantize(colors=64))
    pt = rgb.quantize(colors=32)
    save("palette_trns.png", pt, transparency=3)
    save("rgb_trns.png", rgb, transparency=(int(base[0, 0, 0]), int(base[0, 0, 1]), int(base[0, 0, 2])))
    g16 = (np.arange(w * h, dtype=np.uint32).reshape(h, w) * 61 % 65536).astype(np.uint16)
    save("gray16.png", Image.fromarray(g16))
    raw("rgb16.png", png_rgb16((content(w, h, 9).astype(np.uint16) * 257 + 97).astype(np.uint16)))
    raw("interlaced_rgba.png", png_interlaced(np.asarray(rgba)))
    raw("interlaced_rgb.png", png_interlaced(base))
    return out


def reference_rgb(path):
    """transformers' convert_to_rgb of PIL's image; 16-bit gray by its high bytes (see above)."""
    im = Image.open(path)
    if im.mode in ("I;16", "I;16B", "I"):
        im = Image.fromarray((np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8))
    return im, convert_to_rgb(im, return_numpy=True)


# ---------------------------------------------------------------- processors

IMAGENET_DEFAULT = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
PROCESSORS = {
    # name: (class, preprocessor_config.json)
    "vit": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "do_normalize": True,
                                   "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
                                   "image_std": [0.5, 0.5, 0.5], "resample": 2, "rescale_factor": 0.00392156862745098,
                                   "size": {"height": 224, "width": 224}}),
    "vit_legacy_int": (ViTImageProcessorPil, {"feature_extractor_type": "ViTFeatureExtractor", "size": 224,
                                              "resample": 2}),
    "deit": (DeiTImageProcessorPil, {"image_processor_type": "DeiTImageProcessor", "size": {"height": 256, "width": 256},
                                     "crop_size": {"height": 224, "width": 224}, "do_center_crop": True,
                                     "resample": 3, "image_mean": IMAGENET_DEFAULT[0], "image_std": IMAGENET_DEFAULT[1]}),
    "clip": (CLIPImageProcessorPil, {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 224},
                                     "crop_size": {"height": 224, "width": 224}, "do_center_crop": True,
                                     "do_convert_rgb": True, "resample": 3}),
    "clip_legacy_int": (CLIPImageProcessorPil, {"feature_extractor_type": "CLIPFeatureExtractor", "size": 224,
                                                "crop_size": 224}),
    "dinov2_bit": (BitImageProcessorPil, {"image_processor_type": "BitImageProcessor", "size": {"shortest_edge": 256},
                                          "crop_size": {"height": 224, "width": 224}, "do_center_crop": True,
                                          "resample": 3, "image_mean": IMAGENET_DEFAULT[0],
                                          "image_std": IMAGENET_DEFAULT[1]}),
    "siglip": (SiglipImageProcessorPil, {"image_processor_type": "SiglipImageProcessor",
                                         "size": {"height": 224, "width": 224}, "resample": 3}),
    "siglip_384_bilinear": (SiglipImageProcessorPil, {"image_processor_type": "SiglipImageProcessor",
                                                      "size": {"height": 384, "width": 384}, "resample": 2}),
    "lanczos": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "resample": 1,
                                       "size": {"height": 160, "width": 192}}),
    "box": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "resample": 4}),
    "hamming": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "resample": 5}),
    "nearest": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "resample": 0,
                                       "size": {"height": 96, "width": 300}}),
    "shortest_longest": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor",
                                                "size": {"shortest_edge": 200, "longest_edge": 320}, "resample": 3}),
    "crop_pads": (DeiTImageProcessorPil, {"image_processor_type": "DeiTImageProcessor",
                                          "size": {"height": 200, "width": 150},
                                          "crop_size": {"height": 224, "width": 224}, "do_center_crop": True}),
    "no_rescale": (ViTImageProcessorPil, {"image_processor_type": "ViTImageProcessor", "do_rescale": False,
                                          "image_mean": [120.0, 110.0, 100.0], "image_std": [60.0, 50.0, 70.0]}),
}
# every processor sees every mode at 320 x 240; the many-sizes RGB set goes through the common ones
MANY_SIZES = ("vit", "deit", "clip", "dinov2_bit", "siglip", "shortest_longest", "crop_pads", "lanczos")


def proc_dir(name, cfg):
    d = os.path.join(WORK, "proc", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def reference_pixels(cls, cfg, im, rgb_needed):
    kw = {k: v for k, v in cfg.items() if k not in ("image_processor_type", "feature_extractor_type")}
    proc = cls(**kw)
    args = {"do_convert_rgb": True} if rgb_needed else {}
    return np.asarray(proc(images=im, return_tensors="np", **args)["pixel_values"][0], dtype=np.float32), proc


def run_dump(proc, path):
    prefix = os.path.join(WORK, "out")
    r = subprocess.run([IMG_DUMP, proc, path, prefix], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    meta = json.loads(r.stdout)
    rgb = np.fromfile(prefix + ".rgb", dtype=np.uint8).reshape(meta["h"], meta["w"], 3)
    px = None
    if proc != "-":
        px = np.fromfile(prefix + ".pixels", dtype=np.float32).reshape(3, meta["pixels_h"], meta["pixels_w"])
    return (meta, rgb, px), None


def main():
    images = make_images()
    # decoding
    worst_decode = 0
    for name, path in sorted(images.items()):
        got, err = run_dump("-", path)
        im, ref = reference_rgb(path)
        if got is None:
            report(False, f"image_check decode {name}: {err}")
            continue
        meta, rgb, _ = got
        same_shape = rgb.shape == ref.shape
        diff = int(np.abs(rgb.astype(int) - ref.astype(int)).max()) if same_shape else -1
        worst_decode = max(worst_decode, diff)
        report(same_shape and diff == 0,
               f"image_check decode {name} ({meta['mode']}, {meta['bits']}-bit, {meta['w']}x{meta['h']}): "
               f"RGB equal to transformers' convert_to_rgb of PIL's image (max |diff| {diff})")
    # preprocessing
    table = {}
    for pname, (cls, cfg) in PROCESSORS.items():
        d = proc_dir(pname, cfg)
        for name, path in sorted(images.items()):
            if name.startswith("rgb_") and "x" in name and pname not in MANY_SIZES:
                continue
            got, err = run_dump(d, path)
            if got is None:
                report(False, f"image_check {pname} {name}: {err}")
                continue
            meta, _, px = got
            im, _ = reference_rgb(path)
            ref, proc = reference_pixels(cls, cfg, im, im.mode != "RGB" or "transparency" in im.info)
            if ref.shape != px.shape:
                report(False, f"image_check {pname} {name}: shape {px.shape}, transformers {ref.shape}")
                continue
            std = np.asarray(proc.image_std if proc.do_normalize else [1.0, 1.0, 1.0], dtype=np.float64)
            unit = proc.rescale_factor if proc.do_rescale else 1.0
            steps = float((np.abs(px.astype(np.float64) - ref.astype(np.float64)) * std[:, None, None] / unit).max())
            mode = meta["mode"] + ("-jpeg" if name.endswith(".jpg") else "")
            key = (pname, "RGB (9 sizes)" if name.startswith("rgb_") and "x" in name else mode)
            table[key] = max(table.get(key, 0.0), steps)
            if steps >= 0.5:
                report(False, f"image_check {pname} {name}: {steps:.3f} 8-bit steps from transformers' "
                              f"{type(proc).__name__} (shape {px.shape})")
    print("worst difference from transformers' PIL image processors, in 8-bit steps after rescale:")
    for (pname, mode), steps in sorted(table.items()):
        print(f"  {pname:20s} {mode:16s} {steps:.3g}")
    worst = max(table.values()) if table else float("inf")
    report(worst < 0.5, f"image_check preprocessing: {len(table)} processor x mode groups, worst {worst:.3g} "
                        f"8-bit steps (bound 1)")
    print("not reproduced: 16-bit grayscale PNGs are read by their high bytes (PIL's convert clips them to 255); "
          "images are always converted to RGB (ViT and DeiT processors leave that unset)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
