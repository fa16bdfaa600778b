"""Compares attnviz with Hugging Face transformers' own model classes (BertModel, GPT2Model,
RobertaModel, DistilBertModel) on a checkpoint folder, eager attention, float32.

usage: hf_compare.py ATTNVIZ MODEL_DIR [--tol 1e-4] [--label L] TEXT[\tTEXT_B] ...
Runs attnviz once with --batch --json --qk --precision 9, feeds each input's ids (and token
types where the family has them) to the transformers model, prints the max |diff| of attention,
queries and keys (queries/keys from forward hooks on the attention's projections, split per head,
after bias and before 1/sqrt(d), as include/capture.h defines them) and exits 1 when attention
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
    model = AutoModel.from_pretrained(a.model, attn_implementation="eager", dtype=torch.float32)
    model.eval()
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
    worst = {"attention": (0.0, ""), "queries": (0.0, ""), "keys": (0.0, "")}
    for text, out in zip(a.texts, outs):
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
        for key, ref in (("attention", ref_att), ("queries", ref_q), ("keys", ref_k)):
            got = torch.tensor(out[key])
            if got.shape != ref.shape:
                sys.exit(f"{a.label}: {key} shape {tuple(got.shape)} vs transformers {tuple(ref.shape)}")
            err = (got - ref).abs().max().item()
            if err > worst[key][0]:
                worst[key] = (err, f"{n} tokens")
    for h in hooks:
        h.remove()
    print(f"{a.label}: {len(outs)} inputs vs transformers {model.__class__.__name__}: "
          + ", ".join(f"{k} max |diff| {v[0]:.2e} ({v[1]})" for k, v in worst.items()))
    if worst["attention"][0] > a.tol:
        sys.exit(f"{a.label}: attention differs by {worst['attention'][0]:.2e} > {a.tol}")


if __name__ == "__main__":
    main()
