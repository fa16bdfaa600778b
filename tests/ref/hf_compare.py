"""Compares attnviz with Hugging Face transformers' own model classes (BertModel, GPT2Model,
RobertaModel, DistilBertModel) on a checkpoint folder, eager attention, in float64 (the bound) and float32 (printed beside it).

usage: hf_compare.py ATTNVIZ MODEL_DIR [--tol 1e-4] [--label L] TEXT[\tTEXT_B] ...
Runs attnviz once with --batch --json --qk --precision 9, feeds each input's ids (and token
types where the family has them) to the transformers model, prints the max |diff| of attention,
queries and keys (queries/keys from forward hooks on the attention's projections, split per head,
after bias and before 1/sqrt(d), as src/engine/capture.h defines them) and exits 1 when attention
differs by more than --tol.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from transformers import AutoModel  # noqa: E402


def qk_modules(model, family):
    """(query module, key module, slice of the output) per layer."""
    if family == "gpt2":
        h = model.config.n_embd
        return [(b.attn.c_attn, b.attn.c_attn, (0, h), (h, 2 * h)) for b in model.h]
    if family == "distilbert":
        return [(l.attention.q_lin, l.attention.k_lin, None, None) for l in model.transformer.layer]
    return [(l.attention.self.query, l.attention.self.key, None, None) for l in model.encoder.layer]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("model")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--label", default="")
    ap.add_argument("texts", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(2)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(a.texts) + "\n")
        batch = f.name
    try:
        run = subprocess.run([a.attnviz, "--model", a.model, "--batch", batch, "--json", "-", "--qk",
                              "--precision", "9", "--quiet"], check=True, capture_output=True)
    finally:
        os.unlink(batch)
    outs = [json.loads(line) for line in run.stdout.decode().splitlines()]
    worst = {}
    for dtype in (torch.float64, torch.float32):
        refs = reference(a, outs, dtype)
        for key in ("attention", "queries", "keys"):
            for (text_n, ref), out in zip(refs, outs):
                got = torch.tensor(out[key], dtype=torch.float64)
                if got.shape != ref[key].shape:
                    sys.exit(f"{a.label}: {key} shape {tuple(got.shape)} vs transformers {tuple(ref[key].shape)}")
                err = (got - ref[key].double()).abs().max().item()
                w = worst.setdefault((key, dtype), (0.0, ""))
                if err > w[0]:
                    worst[(key, dtype)] = (err, f"{text_n} tokens")
    # The bound holds against transformers run in float64: a float32 run's own
    # rounding is of the order of the bound on long inputs, so the difference of
    # two float32 runs cannot show whose error it is. The float32 figures are
    # printed beside them.
    print(f"{a.label}: {len(outs)} inputs vs transformers {reference.name} in float64 (float32): "
          + ", ".join(f"{k} max |diff| {worst[(k, torch.float64)][0]:.2e} ({worst[(k, torch.float32)][0]:.2e}; "
                      f"{worst[(k, torch.float64)][1]})" for k in ("attention", "queries", "keys")))
    if worst[("attention", torch.float64)][0] > a.tol:
        sys.exit(f"{a.label}: attention differs from float64 transformers by "
                 f"{worst[('attention', torch.float64)][0]:.2e} > {a.tol}")


def reference(a, outs, dtype):
    """[(n, {attention, queries, keys})] from transformers' model in dtype, eager attention."""
    model = AutoModel.from_pretrained(a.model, attn_implementation="eager", dtype=dtype)
    model.eval()
    reference.name = model.__class__.__name__
    family = model.config.model_type
    if model.config._attn_implementation != "eager":
        sys.exit(f"{a.label}: transformers did not honour attn_implementation='eager'")
    nh = model.config.num_attention_heads if hasattr(model.config, "num_attention_heads") else model.config.n_head
    captured = {}
    hooks = []
    for li, (qm, km, qs, ks) in enumerate(qk_modules(model, family)):
        def hook(name, sl, li=li):
            def f(_m, _i, out):
                captured[(name, li)] = out if sl is None else out[..., sl[0]:sl[1]]
            return f
        hooks.append(qm.register_forward_hook(hook("q", qs)))
        hooks.append(km.register_forward_hook(hook("k", ks)))
    refs = []
    for out in outs:
        ids = torch.tensor([out["input_ids"]])
        kw = {}
        if family in ("bert",):
            kw["token_type_ids"] = torch.tensor([out["token_type_ids"]])
        with torch.no_grad():
            r = model(input_ids=ids, output_attentions=True, **kw)
        ref_att = torch.stack([t[0] for t in r.attentions])  # (layers, heads, n, n)
        n = ids.shape[1]

        def per_head(x):
            return x[0].reshape(n, nh, -1).permute(1, 0, 2)
        ref_q = torch.stack([per_head(captured[("q", l)]) for l in range(ref_att.shape[0])])
        ref_k = torch.stack([per_head(captured[("k", l)]) for l in range(ref_att.shape[0])])
        refs.append((n, {"attention": ref_att, "queries": ref_q, "keys": ref_k}))
    for h in hooks:
        h.remove()
    del model
    return refs


if __name__ == "__main__":
    main()
