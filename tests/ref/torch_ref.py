#!/usr/bin/python3
"""PyTorch reference for attnviz: independent forward passes written from the
Hugging Face model definitions (BertModel, RobertaModel, DistilBertModel,
GPT2Model) over the same safetensors checkpoint.

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


PREFIXES = {"bert": "bert.", "roberta": "roberta.", "distilbert": "distilbert.", "gpt2": "transformer."}


def get(w, name, family="bert"):
    for p in ("", PREFIXES[family]):
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


def forward(cfg, w, ids, types, want_qk=True):
    family = cfg.get("model_type", "bert")
    if family == "gpt2":
        return forward_gpt2(cfg, w, ids, want_qk)
    if family == "distilbert":
        return forward_distilbert(cfg, w, ids, want_qk)
    return forward_bert(cfg, w, ids, types, want_qk, family)


def new_gelu(x):
    """transformers' NewGELUActivation, GPT-2's gelu_new, written out."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


@torch.no_grad()
def forward_gpt2(cfg, w, ids, want_qk=True):
    """GPT2Model: pre-LN blocks, Conv1D (x @ W + b, W stored (in, out)), causal mask
    filled with finfo.min before the softmax, ln_f on the last hidden state."""
    H, NH = cfg["n_embd"], cfg["n_head"]
    dh = H // NH
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act_name = cfg.get("activation_function", "gelu_new")
    act = new_gelu if act_name == "gelu_new" else act_fn(act_name)
    g = lambda name: get(w, name, "gpt2")  # noqa: E731
    n = len(ids)
    x = g("wte.weight")[torch.tensor(ids)] + g("wpe.weight")[torch.arange(n)]
    ln = torch.nn.functional.layer_norm
    conv1d = lambda t, p: torch.addmm(g(p + ".bias"), t, g(p + ".weight"))  # noqa: E731
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    attn, qs, ks = [], [], []
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        h = ln(x, (H,), g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        q, k, v = conv1d(h, p + "attn.c_attn").split(H, dim=1)
        q, k, v = (t.view(n, NH, dh).transpose(0, 1) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        if cfg.get("scale_attn_by_inverse_layer_idx"):
            scores = scores / float(l + 1)
        scores = torch.where(causal, scores, torch.tensor(torch.finfo(scores.dtype).min))
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, H)
        x = x + conv1d(ctx, p + "attn.c_proj")
        h = ln(x, (H,), g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        x = x + conv1d(act(conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        attn.append(probs)
        qs.append(q)
        ks.append(k)
    x = ln(x, (H,), g("ln_f.weight"), g("ln_f.bias"), eps)
    out = {"attention": torch.stack(attn), "last_hidden": x}
    if want_qk:
        out["queries"] = torch.stack(qs)
        out["keys"] = torch.stack(ks)
    return out


@torch.no_grad()
def forward_distilbert(cfg, w, ids, want_qk=True):
    """DistilBertModel: BERT's post-LN block under other names, no token types;
    q is scaled by 1/sqrt(dh) before q k^T, as DistilBERT's MultiHeadSelfAttention does."""
    H, NH = cfg["dim"], cfg["n_heads"]
    dh = H // NH
    eps = 1e-12
    act = act_fn(cfg.get("activation", "gelu"))
    g = lambda name: get(w, name, "distilbert")  # noqa: E731
    n = len(ids)
    x = g("embeddings.word_embeddings.weight")[torch.tensor(ids)] + g("embeddings.position_embeddings.weight")[:n]
    ln = torch.nn.functional.layer_norm
    lin = lambda t, p: torch.nn.functional.linear(t, g(p + ".weight"), g(p + ".bias"))  # noqa: E731
    x = ln(x, (H,), g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    attn, qs, ks = [], [], []
    for l in range(cfg["n_layers"]):
        p = f"transformer.layer.{l}."
        q = lin(x, p + "attention.q_lin").view(n, NH, dh).transpose(0, 1)
        k = lin(x, p + "attention.k_lin").view(n, NH, dh).transpose(0, 1)
        v = lin(x, p + "attention.v_lin").view(n, NH, dh).transpose(0, 1)
        scores = torch.matmul(q / math.sqrt(dh), k.transpose(-1, -2))
        probs = torch.nn.functional.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(0, 1).reshape(n, H)
        x = ln(lin(ctx, p + "attention.out_lin") + x, (H,), g(p + "sa_layer_norm.weight"), g(p + "sa_layer_norm.bias"), eps)
        f = lin(act(lin(x, p + "ffn.lin1")), p + "ffn.lin2")
        x = ln(f + x, (H,), g(p + "output_layer_norm.weight"), g(p + "output_layer_norm.bias"), eps)
        attn.append(probs)
        qs.append(q)
        ks.append(k)
    out = {"attention": torch.stack(attn), "last_hidden": x}
    if want_qk:
        out["queries"] = torch.stack(qs)
        out["keys"] = torch.stack(ks)
    return out


@torch.no_grad()
def forward_bert(cfg, w, ids, types, want_qk=True, family="bert"):
    """BertModel, and RobertaModel: the same block, with position ids counted
    from padding_idx + 1 (create_position_ids_from_input_ids, no padding here)."""
    H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = H // NH
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = act_fn(cfg.get("hidden_act", "gelu"))
    ids_t = torch.tensor(ids)
    types_t = torch.tensor(types)
    n = len(ids)
    g = lambda name: get(w, name, family)  # noqa: E731
    pos = torch.arange(n)
    if family == "roberta":
        pad = cfg.get("pad_token_id", 1)
        mask = (ids_t != pad).int()
        pos = torch.cumsum(mask, dim=0) * mask + pad
    x = g("embeddings.word_embeddings.weight")[ids_t] + g("embeddings.position_embeddings.weight")[pos] \
        + g("embeddings.token_type_embeddings.weight")[types_t]
    ln = torch.nn.functional.layer_norm
    x = ln(x, (H,), g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    lin = torch.nn.functional.linear
    attn, qs, ks = [], [], []
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        q = lin(x, g(p + "attention.self.query.weight"), g(p + "attention.self.query.bias"))
        k = lin(x, g(p + "attention.self.key.weight"), g(p + "attention.self.key.bias"))
        v = lin(x, g(p + "attention.self.value.weight"), g(p + "attention.self.value.bias"))
        q = q.view(n, NH, dh).transpose(0, 1)
        k = k.view(n, NH, dh).transpose(0, 1)
        v = v.view(n, NH, dh).transpose(0, 1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        probs = torch.softmax(scores, dim=-1)
        ctx = (probs @ v).transpose(0, 1).reshape(n, H)
        a = lin(ctx, g(p + "attention.output.dense.weight"), g(p + "attention.output.dense.bias"))
        x = ln(a + x, (H,), g(p + "attention.output.LayerNorm.weight"), g(p + "attention.output.LayerNorm.bias"), eps)
        f = act(lin(x, g(p + "intermediate.dense.weight"), g(p + "intermediate.dense.bias")))
        f = lin(f, g(p + "output.dense.weight"), g(p + "output.dense.bias"))
        x = ln(f + x, (H,), g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"), eps)
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
