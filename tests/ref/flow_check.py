"""attnviz --flow (information-flow routes, Ferrando & Voita 2024) against an independent implementation of
the paper's contribution formula over transformers' own hooks (eager attention, output_attentions, each
layer's input, its attention module's output, the value projection and the output projection's weights, the
MLP's output; float64), on the synthetic GPT-2 and Llama checkpoints of lm_checkpoints.py (2 layers), and the GPT-2 one with random
biases (transformers initializes them to 0).

usage: flow_check.py ATTNVIZ WORKDIR [--repo DIR]

Per layer and query token i (the paper's formula, L1 distances):
  mid_i  = x_i + attention module output (b_O in the whole)          whole of the attention block
  part   = a^h_ij * (v^h_j W_O^h)   (v^h_j with the value bias)       per key token j and head h
  prox(p, y) = max(||y||_1 - ||y - p||_1, 0), share = prox / (sum over the parts and the residual x_i)
  MLP block: whole = the layer's output, parts = the MLP's output and mid_i.
Graph: from token pos at the top layer down, as the LLM Transparency Tool traces it (flow.h says how).
Compared: every edge attnviz lists against the reference's share of that (layer, from, to, head, kind), and
the edge sets (a pair whose summed share is within the bound of the threshold may differ), at the default
threshold and at 0.005, at the last token, with --position, and over the top layer only (--layers 1);
--npy's table against the JSON.
One PASS/FAIL line per model with the max |diff|; exit 1 on any FAIL.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_checkpoints  # noqa: E402

TOL = 1e-4
TEXTS = [
    "The cat sat on the mat. The cat sat",
    "time flies like an arrow; fruit flies like a banana. When in Rome, do as the Romans do, said the",
]
KINDS = {"attention": 0, "residual": 1, "mlp": 2}


def capture(model, name, ids):
    """Per layer: x (input), attention output, v (n, kv, dh), alpha (H, n, n), W_O^h (H, dh, d), MLP output, post."""
    cfg = model.config
    gpt2 = name == "gpt2"
    layers = model.transformer.h if gpt2 else model.model.layers
    nh = cfg.n_head if gpt2 else cfg.num_attention_heads
    d = cfg.n_embd if gpt2 else cfg.hidden_size
    dh = d // nh if gpt2 else getattr(cfg, "head_dim", None) or d // nh
    nkv = nh if gpt2 else cfg.num_key_value_heads
    got = [dict() for _ in layers]
    hooks = []
    for l, layer in enumerate(layers):
        g = got[l]

        def pre(mod, args, kwargs, g=g):
            g["x"] = (args[0] if args else kwargs["hidden_states"])[0].detach()

        def post(mod, args, out, g=g):
            g["post"] = (out[0] if isinstance(out, tuple) else out)[0].detach()

        def attn_out(mod, args, out, g=g):
            g["attn"] = (out[0] if isinstance(out, tuple) else out)[0].detach()

        def mlp_out(mod, args, out, g=g):
            g["mlp"] = out[0].detach()

        attn = layer.attn if gpt2 else layer.self_attn
        if gpt2:
            def vproj(mod, args, out, g=g):
                g["v"] = out[0, :, 2 * d:].detach()
            hooks.append(attn.c_attn.register_forward_hook(vproj))
        else:
            def vproj(mod, args, out, g=g):
                g["v"] = out[0].detach()
            hooks.append(attn.v_proj.register_forward_hook(vproj))
        hooks += [layer.register_forward_pre_hook(pre, with_kwargs=True), layer.register_forward_hook(post),
                  attn.register_forward_hook(attn_out), layer.mlp.register_forward_hook(mlp_out)]
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    for h in hooks:
        h.remove()
    res = []
    for l, layer in enumerate(layers):
        g = got[l]
        attn = layer.attn if gpt2 else layer.self_attn
        if gpt2:  # Conv1D: out = ctx @ W (QW, d)
            W = attn.c_proj.weight.detach().double()
            wo = torch.stack([W[h * dh:(h + 1) * dh, :] for h in range(nh)])
        else:  # Linear: out = W (d, QW) ctx
            W = attn.o_proj.weight.detach().double()
            wo = torch.stack([W[:, h * dh:(h + 1) * dh].T for h in range(nh)])
        n = len(ids)
        res.append(dict(x=g["x"].double().numpy(), attn=g["attn"].double().numpy(), mlp=g["mlp"].double().numpy(),
                        post=g["post"].double().numpy(), v=g["v"].double().numpy().reshape(n, nkv, dh),
                        alpha=out.attentions[l][0].double().numpy(), wo=wo.numpy(), group=nh // nkv))
    return res


def prox(parts, whole):
    """max(||y||_1 - ||y - p||_1, 0) for parts (..., d) and whole (d)"""
    return np.maximum(np.abs(whole).sum() - np.abs(whole - parts).sum(-1), 0)


def shares(layer, i):
    """(attn (n, H) shares in mid_i, residual share, MLP share in post_i)"""
    x, v, alpha, wo = layer["x"], layer["v"], layer["alpha"], layer["wo"]
    nh = wo.shape[0]
    mid = x[i] + layer["attn"][i]
    f = np.stack([v[:, h // layer["group"]] @ wo[h] for h in range(nh)], 1)  # (n, H, d): f^h(x_j)
    parts = alpha[:, i, :].T[:, :, None] * f  # (n, H, d)
    pa = prox(parts, mid)
    pa[alpha[:, i, :].T == 0] = 0
    pr = prox(x[i], mid)
    s = pa.sum() + pr
    post = layer["post"][i]
    pm, pq = prox(layer["mlp"][i], post), prox(mid, post)
    return pa / s, pr / s, pm / (pm + pq)


def graph(layers, pos, thr, lo=0):
    """{(layer, from, to, head, kind): weight} and the pairs near the threshold, layers lo to the last"""
    edges, near = {}, set()
    act = {pos}
    for l in range(len(layers) - 1, lo - 1, -1):
        nxt = set()
        for i in sorted(act):
            sa, sr, sm = shares(layers[l], i)
            if sm > thr:
                edges[(l, i, i, None, 2)] = sm
            if abs(sm - thr) <= TOL or abs(1 - sm - thr) <= TOL:
                near.add((l, i, i))
            if not (sm > thr or 1 - sm > thr):
                continue
            for j in range(i + 1):
                w = sa[j].sum() + (sr if j == i else 0)
                if abs(w - thr) <= TOL:
                    near.add((l, j, i))
                if w > thr:
                    nxt.add(j)
                    for h in range(sa.shape[1]):
                        if sa[j, h] > 0:
                            edges[(l, j, i, h, 0)] = sa[j, h]
                    if j == i and sr > 0:
                        edges[(l, i, i, None, 1)] = sr
        act = nxt
    return edges, near


def with_biases(path, workdir):
    """A copy of the GPT-2 checkpoint whose biases (b_V, b_O, the LayerNorms', the MLP's) are random, not
    transformers' zeros: the value bias in each part and b_O in the whole then count."""
    out = os.path.join(workdir, "flow-gpt2-biases")
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    import shutil
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(path, tmp, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    gen = torch.Generator().manual_seed(32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(tmp, safe_serialization=True)
    os.replace(tmp, out)
    return out


def run(attnviz, path, text, extra):
    cmd = [attnviz, "--quiet", "--model", path, "--precision", "9", "--json", "-"] + extra + [text]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def compare(doc, layers, pos, thr, lo):
    f = doc["flow"]
    problems = []
    if f["position"] != pos or abs(f["threshold"] - thr) > 1e-9 or f["layers"] != [lo, len(layers) - 1]:
        problems.append(f"flow header {f['position']} {f['threshold']} {f['layers']}, want {pos} {thr}")
    ref, near = graph(layers, pos, thr, lo)
    got = {(e["layer"], e["from"], e["to"], e["head"], KINDS[e["kind"]]): e["weight"] for e in f["edges"]}
    worst = 0.0
    # a head whose share is 0 in one and a rounding error in the other is listed by one only: its
    # weight is the difference; a whole pair only the other lists is a wrong graph (unless near the threshold)
    pairs_got, pairs_ref = {k[:3] for k in got}, {k[:3] for k in ref}
    for k, w in got.items():
        worst = max(worst, abs(w - ref.get(k, 0.0)))
        if k[:3] not in pairs_ref and k[:3] not in near:
            problems.append(f"edge {k} ({w:.3g}) is not in the reference graph")
    for k, w in ref.items():
        if k not in got:
            worst = max(worst, w)
        if k[:3] not in pairs_got and k[:3] not in near:
            problems.append(f"reference edge {k} ({w:.3g}) is missing")
    return worst, len(got), problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    args = ap.parse_args()
    failed = 0
    for name in ("gpt2", "gpt2-biases", "llama"):
        base = name.split("-")[0]
        miss = lm_checkpoints.missing(base, args.repo)
        if miss:
            print(f"FAIL flow {name}: tokenizer source {miss} is absent (tools/deps.sh test)")
            failed = 1
            continue
        path = lm_checkpoints.build(base, args.workdir, args.repo)
        if name == "gpt2-biases":
            path = with_biases(path, args.workdir)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float64,
                                                                  attn_implementation="eager").eval()
        worst, edges, problems = 0.0, 0, []
        for text in TEXTS:
            for extra, thr in (([], 0.04), (["--flow", "0.005"], 0.005), (["--flow=0.02", "--position", "5"], 0.02),
                               (["--flow", "0.01", "--layers", "1"], 0.01)):
                doc = run(args.attnviz, path, text, extra or ["--flow"])
                ids = doc["input_ids"]
                pos = 5 if "--position" in extra else len(ids) - 1
                layers = capture(model, base, ids)
                w, ne, pr = compare(doc, layers, pos, thr, 1 if "--layers" in extra else 0)
                worst, edges = max(worst, w), edges + ne
                problems += [f"{text[:20]!r} {' '.join(extra) or '--flow'}: {m}" for m in pr]
        # --npy: the edge table holds what the JSON lists
        with tempfile.TemporaryDirectory() as tmp:
            doc = run(args.attnviz, path, TEXTS[0], ["--flow", "--npy", os.path.join(tmp, "a.npy")])
            t = np.load(os.path.join(tmp, "a.flow.npy"))
            want = np.array([[e["layer"], e["from"], e["to"], -1 if e["head"] is None else e["head"], KINDS[e["kind"]],
                              e["weight"]] for e in doc["flow"]["edges"]], dtype=np.float64)
            if t.shape != want.shape or t.dtype != np.float32 or np.max(np.abs(t - want)) > 1e-6:
                problems.append(f"--npy flow table {t.shape} {t.dtype} differs from the JSON {want.shape}")
        ok = not problems and worst <= TOL and edges > 0
        print(f"{'PASS' if ok else 'FAIL'} flow {name}: {edges} edges over {len(TEXTS) * 4} graphs; max |diff| of an "
              f"edge's weight {worst:.2e} (bound {TOL:g})")
        for m in problems[:10]:
            print(f"    {m}")
        failed |= not ok
    return failed


if __name__ == "__main__":
    sys.exit(main())
