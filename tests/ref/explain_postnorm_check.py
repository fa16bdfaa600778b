"""attnviz --explain L.H on post-norm encoders (BERT, MiniLM) against a float64 decomposition written here over
transformers' hooks (nothing of attnviz's code; TransformerLens has no decomposition of a post-norm encoder).

A post-norm layer l is h = LN1(x_l + sum_h W_O^h z^h + b_O), x_{l+1} = LN2(h + MLP(h)). Each LayerNorm frozen at
the scale it measured on its whole input (s = sqrt(var + eps)) is linear: LN(v) = gamma * (v - mean(v)) / s +
beta. So the stream entering layer L is a sum of parts, each taken through every later norm that way: the
embeddings (after the embeddings' LayerNorm, as layer 0 reads them), each earlier head's W_O^h z^h (z: the
attention's context, hooked), each earlier MLP's output (hooked, its bias in it) and the biases (b_O, every
beta). The parts are checked to sum to the hooked stream (<= 1e-9 relative). Then, for head h of layer L,
    q_c(i) = W_Q^h part_c(i)  (b_Q with the biases),   k_c'(j) likewise with W_K,
    matrix[c][c'] = q_c(i) . k_c'(j) / sqrt(d_head),
against attnviz's JSON "explain" matrix (its rounding part, what float32 holds beyond the parts, left out):
max |diff| <= 1e-4 max(1, max |matrix|); attnviz's parts sum to its score (<= 1e-5 relative); its score
against transformers' hooked q . k / sqrt(d_head) (<= 1e-4 max(1, |score|)).

usage: explain_postnorm_check.py ATTNVIZ [--kernels avx512,avx2,scalar] [--minilm DIR]
On the BERT fixture (tests/data/small-f32: every head of layer 1) and the trained all-MiniLM-L6-v2 (--minilm:
heads of layer 3), two inputs each; one PASS/FAIL line per model and kernel; exit 1 on any FAIL.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = [("the quick brown fox", "jumps over the lazy dog"), ("a cat sat on the mat and the cat slept", None)]


def ln_parts(parts, ln, inp, bias):
    """LN frozen at its measured scale on inp (n, H), applied to every part (P, n, H); beta to part `bias`."""
    s = np.sqrt(inp.var(1) + ln.eps)[None, :, None]
    g = ln.weight.detach().numpy()
    out = g * (parts - parts.mean(2, keepdims=True)) / s
    out[bias] += ln.bias.detach().numpy()
    return out


def reference(model, enc, L):
    """parts (P, n, H) of the stream entering layer L, their names, and the hooked q, k of layer L (n, NH*dh)."""
    cfg = model.config
    NH, H = cfg.num_attention_heads, cfg.hidden_size
    dh = H // NH
    grab, hooks = {}, []
    for l, lay in enumerate(model.encoder.layer):
        hooks.append(lay.attention.self.register_forward_hook(
            lambda _m, _i, out, l=l: grab.__setitem__(("z", l), (out[0] if isinstance(out, tuple) else out)[0].detach())))
        hooks.append(lay.output.dense.register_forward_hook(lambda _m, _i, out, l=l: grab.__setitem__(("mlp", l), out[0].detach())))
        hooks.append(lay.attention.output.LayerNorm.register_forward_hook(
            lambda _m, inp, _o, l=l: grab.__setitem__(("ln1_in", l), inp[0][0].detach())))
        hooks.append(lay.output.LayerNorm.register_forward_hook(
            lambda _m, inp, _o, l=l: grab.__setitem__(("ln2_in", l), inp[0][0].detach())))
        hooks.append(lay.attention.self.query.register_forward_hook(lambda _m, _i, out, l=l: grab.__setitem__(("q", l), out[0].detach())))
        hooks.append(lay.attention.self.key.register_forward_hook(lambda _m, _i, out, l=l: grab.__setitem__(("k", l), out[0].detach())))
    with torch.no_grad():
        out = model(**{k: torch.tensor([v]) for k, v in enc.items()}, output_hidden_states=True)
    for hk in hooks:
        hk.remove()
    hs = [h[0].numpy() for h in out.hidden_states]
    n = hs[0].shape[0]
    names = ["embeddings"] + [f"L{l}.H{h}" if h < NH else f"MLP {l}" for l in range(L) for h in range(NH + 1)] + ["biases"]
    P = len(names)
    parts = np.zeros((P, n, H))
    parts[0] = hs[0]
    bias = P - 1
    recon = 0.0
    for l in range(L):
        lay = model.encoder.layer[l]
        z = grab[("z", l)].numpy()
        wo, bo = lay.attention.output.dense.weight.detach().numpy(), lay.attention.output.dense.bias.detach().numpy()
        for h in range(NH):
            parts[1 + l * (NH + 1) + h] = z[:, h * dh:(h + 1) * dh] @ wo[:, h * dh:(h + 1) * dh].T
        parts[bias] += bo
        ln1_in = grab[("ln1_in", l)].numpy()
        recon = max(recon, float(np.abs(parts.sum(0) - ln1_in).max() / np.abs(ln1_in).max()))
        parts = ln_parts(parts, lay.attention.output.LayerNorm, ln1_in, bias)
        parts[1 + l * (NH + 1) + NH] = grab[("mlp", l)].numpy()
        ln2_in = grab[("ln2_in", l)].numpy()
        recon = max(recon, float(np.abs(parts.sum(0) - ln2_in).max() / np.abs(ln2_in).max()))
        parts = ln_parts(parts, lay.output.LayerNorm, ln2_in, bias)
        recon = max(recon, float(np.abs(parts.sum(0) - hs[l + 1]).max() / np.abs(hs[l + 1]).max()))
    return parts, names, grab[("q", L)].numpy(), grab[("k", L)].numpy(), recon


def check(attnviz, model_dir, L, kernels, label):
    model = T.AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64).eval()
    lay = model.encoder.layer[L]
    NH = model.config.num_attention_heads
    dh = model.config.hidden_size // NH
    ok, refs = True, {}
    for k in kernels:
        worst = dict(matrix=0.0, sum=0.0, score=0.0, recon=0.0)
        pairs = 0
        for a, b in TEXTS:
            for h in range(NH):
                cmd = [attnviz, "--model", model_dir, "--explain", f"{L}.{h}", "--json", "-", "--precision", "9",
                       "--quiet", a] + ([b] if b else [])
                r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ATTNVIZ_KERNEL=k))
                if r.returncode != 0:
                    print(f"FAIL explain post-norm {label} [{k}]: {r.stderr.strip()}")
                    return False
                d = json.loads(r.stdout)
                key = (tuple(d["input_ids"]), tuple(d["token_type_ids"]))
                if key not in refs:  # the parts do not depend on the head: one pass per input
                    refs[key] = reference(model, {"input_ids": d["input_ids"], "token_type_ids": d["token_type_ids"]}, L)
                parts, names, qh, kh, recon = refs[key]
                worst["recon"] = max(worst["recon"], recon)
                x = d["explain"]
                assert x["parts"][:-1] == names and x["parts"][-1] == "rounding", (x["parts"], names)
                wq, bq = lay.attention.self.query.weight.detach().numpy(), lay.attention.self.query.bias.detach().numpy()
                wk, bk = lay.attention.self.key.weight.detach().numpy(), lay.attention.self.key.bias.detach().numpy()
                sl = slice(h * dh, (h + 1) * dh)
                for p in x["pairs"]:
                    i, j = p["query"], p["key"]
                    qc = parts[:, i, :] @ wq[sl].T
                    kc = parts[:, j, :] @ wk[sl].T
                    qc[-1] += bq[sl]
                    kc[-1] += bk[sl]
                    ref = qc @ kc.T / np.sqrt(dh)
                    got = np.asarray(p["matrix"])[:-1, :-1]
                    worst["matrix"] = max(worst["matrix"], float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max())))
                    worst["sum"] = max(worst["sum"], abs(p["parts_sum"] - p["score"]) / max(abs(p["score"]), 1e-12))
                    s_tf = float(qh[i, sl] @ kh[j, sl]) / np.sqrt(dh)
                    worst["score"] = max(worst["score"], abs(p["score"] - s_tf) / max(1.0, abs(s_tf)))
                    pairs += 1
        good = worst["matrix"] <= 1e-4 and worst["sum"] <= 1e-5 and worst["score"] <= 1e-4 and worst["recon"] <= 1e-9
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} explain post-norm {label} [{k}]: matrix {worst['matrix']:.1e} (tol 1e-4 of "
              f"max(1, |matrix|)), parts sum vs score {worst['sum']:.1e} (tol 1e-5), score vs transformers "
              f"{worst['score']:.1e} (tol 1e-4); the reference's parts against transformers' stream {worst['recon']:.1e} "
              f"(tol 1e-9); {pairs} pairs, every head of layer {L}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("--kernels", default="scalar")
    ap.add_argument("--minilm")
    a = ap.parse_args()
    ks = a.kernels.split(",")
    ok = check(a.attnviz, os.path.join(ROOT, "tests/data/small-f32"), 1, ks, "BERT (small-f32)")
    if a.minilm:
        ok &= check(a.attnviz, a.minilm, 3, ks, "all-MiniLM-L6-v2 (trained)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
