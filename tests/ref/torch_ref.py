#!/usr/bin/python3
"""PyTorch reference for attnviz: an independent BERT forward pass (written from
the Hugging Face BertModel definition) over the same safetensors checkpoint.

usage: torch_ref.py MODEL_DIR IDS_JSON OUT_JSON
  IDS_JSON: [{"input_ids": [...], "token_type_ids": [...]}, ...]
  OUT_JSON: the same list with "attention" [L][H][n][n], "queries"/"keys"
            [L][H][n][d] and "last_hidden" [n][hidden] added.
"""
import json
import math
import re
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import stio  # noqa: E402


def get(w, name):
    for p in ("", "bert."):
        for n in (name, name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")):
            if p + n in w:
                return w[p + n]
    raise KeyError(name)


def act_fn(name):
    if name == "gelu":
        return lambda x: torch.nn.functional.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    if name == "relu":
        return torch.relu
    raise ValueError(name)


@torch.no_grad()
def forward(cfg, w, ids, types, want_qk=True):
    H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = H // NH
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = act_fn(cfg.get("hidden_act", "gelu"))
    ids_t = torch.tensor(ids)
    types_t = torch.tensor(types)
    n = len(ids)
    x = get(w, "embeddings.word_embeddings.weight")[ids_t] + get(w, "embeddings.position_embeddings.weight")[:n] \
        + get(w, "embeddings.token_type_embeddings.weight")[types_t]
    ln = torch.nn.functional.layer_norm
    x = ln(x, (H,), get(w, "embeddings.LayerNorm.weight"), get(w, "embeddings.LayerNorm.bias"), eps)
    lin = torch.nn.functional.linear
    attn, qs, ks = [], [], []
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        q = lin(x, get(w, p + "attention.self.query.weight"), get(w, p + "attention.self.query.bias"))
        k = lin(x, get(w, p + "attention.self.key.weight"), get(w, p + "attention.self.key.bias"))
        v = lin(x, get(w, p + "attention.self.value.weight"), get(w, p + "attention.self.value.bias"))
        q = q.view(n, NH, dh).transpose(0, 1)
        k = k.view(n, NH, dh).transpose(0, 1)
        v = v.view(n, NH, dh).transpose(0, 1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        probs = torch.softmax(scores, dim=-1)
        ctx = (probs @ v).transpose(0, 1).reshape(n, H)
        a = lin(ctx, get(w, p + "attention.output.dense.weight"), get(w, p + "attention.output.dense.bias"))
        x = ln(a + x, (H,), get(w, p + "attention.output.LayerNorm.weight"), get(w, p + "attention.output.LayerNorm.bias"), eps)
        f = act(lin(x, get(w, p + "intermediate.dense.weight"), get(w, p + "intermediate.dense.bias")))
        f = lin(f, get(w, p + "output.dense.weight"), get(w, p + "output.dense.bias"))
        x = ln(f + x, (H,), get(w, p + "output.LayerNorm.weight"), get(w, p + "output.LayerNorm.bias"), eps)
        attn.append(probs)
        qs.append(q)
        ks.append(k)
    out = {"attention": torch.stack(attn), "last_hidden": x}
    if want_qk:
        out["queries"] = torch.stack(qs)
        out["keys"] = torch.stack(ks)
    return out


def main():
    model_dir, ids_path, out_path = sys.argv[1:4]
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = stio.load(f"{model_dir}/model.safetensors")
    cases = json.load(open(ids_path))
    torch.set_num_threads(1)
    for c in cases:
        r = forward(cfg, w, c["input_ids"], c["token_type_ids"])
        for key, t in r.items():
            c[key] = t.tolist()
    # 8 significant digits keep the goldens small and far below the 1e-4 tolerance.
    text = json.dumps(cases, separators=(",", ":"))
    text = re.sub(r"-?\d+\.\d+(?:e-?\d+)?", lambda m: "%.8g" % float(m.group()), text)
    with open(out_path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
