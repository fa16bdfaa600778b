"""ALTI and attention rollout (attnviz --measure alti|rollout) against float64 implementations written here
from the papers' equations, over transformers' hooks (nothing of attnviz's code):

Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", section 3): the
residual connection is added as an identity, Â = 0.5 W_att + 0.5 I, W_att the attention averaged over the
heads; rows re-normalised; rollout(l) = Â(l) rollout(l-1), rollout(0) = Â(0).

ALTI (Ferrando, Gállego & Costa-jussà 2022, "Measuring the Mixing of Contextual Information in the
Transformer", section 3), per layer, for output token i and input token j:
    T_i(x_j) = sum_h W_O^h alpha^h_ij (W_V^h x_j + b_V^h)  +  [i = j] x_i
the value vectors read from the value projection's output (a forward hook: its bias included; for pre-norm
models that is the projection of the normed x_j), W_O^h the output projection's columns of head h (a GQA
head reads its key/value group's values). Post-norm (BERT): y_i = LN(sum_j T_i(x_j) + b_O) is the
LayerNorm's output (a hook), and LN is split over the T_i(x_j) as the linear map L_i(v) = gamma * (v -
mean(v)) / s_i with s_i its input's measured standard deviation (sqrt(var + eps)). Pre-norm (GPT-2, Llama):
y_i = x_i + the attention's output (a hook on the module whose output joins the residual), T~ = T; with a
norm after attention (Gemma's post_attention_layernorm, followed by a pre_feedforward_layernorm) its
measured scale divides the heads' part. Contributions
    c_ij = max(0, ||y_i||_1 - ||y_i - T~_i(x_j)||_1),  divided by their row's sum,
aggregated as rollout does: ALTI(l) = C(l) ALTI(l-1).
Each reconstruction (sum over j of T~ plus the biases) is asserted against the hooked output first.

usage: mix_check.py ATTNVIZ FWD_DUMP [--tol 1e-4] [--kernels avx512,avx2,scalar] [--minilm DIR] [--gguf FILE]
  - BERT (tests/data/small-f32, post-norm), GPT-2 (small-gpt2: Conv1D, biases), Llama (small-llama: 4 query
    heads over 2 kv heads) through the CLI (attnviz --batch --json - --measure alti / rollout);
  - Gemma 3 (small-gemma3: sandwich norms, no tokenizer) and gpt-oss (small-gptoss: learned sinks, rows of
    attention summing below 1) through build/fwd_dump --mix on token ids;
  - MiniLM (--minilm, tools/pymodel.sh all-MiniLM-L6-v2) through the CLI;
  - the trained SmolLM2-135M-Instruct Q4_1 GGUF (--gguf; quantized weights, transformers dequantizes the
    file) through build/fwd_dump --mix.
Every kernel path in --kernels (ATTNVIZ_KERNEL). One PASS/FAIL line per checkpoint and kernel with the max
|diff| of the four matrices (through each layer and each layer's own); exit 1 on any FAIL.
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

import numpy as np  # noqa: E402

np.seterr(invalid="raise", divide="raise")
import torch  # noqa: E402
from transformers import AutoModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat and the cat slept", "hello world"]


def layers_of(model):
    """Per layer: dict(v=(module, slice or None), wo=(hidden, H*dh) tensor, bo=tensor or None, post_ln=module or
    None, out=module whose output joins the residual (pre-norm), out_first=its output is a tuple)."""
    t = model.config.model_type
    res = []
    if t in ("bert", "roberta", "xlm-roberta", "electra"):
        for l in model.encoder.layer:
            a = l.attention
            res.append(dict(v=(a.self.value, None), wo=a.output.dense.weight, bo=a.output.dense.bias,
                            post_ln=a.output.LayerNorm))
        return res
    if t == "distilbert":
        for l in model.transformer.layer:
            res.append(dict(v=(l.attention.v_lin, None), wo=l.attention.out_lin.weight, bo=l.attention.out_lin.bias,
                            post_ln=l.sa_layer_norm))
        return res
    if t == "gpt2":
        h = model.config.n_embd
        for b in model.h:
            res.append(dict(v=(b.attn.c_attn, (2 * h, 3 * h)), wo=b.attn.c_proj.weight.T, bo=b.attn.c_proj.bias,
                            post_ln=None, out=b.attn, out_first=True, sandwich=None))
        return res
    for l in model.layers:
        a = l.self_attn
        # a norm on attention's output before the residual: Gemma's post_attention_layernorm, when the MLP has a
        # pre_feedforward_layernorm of its own (Llama's post_attention_layernorm is the MLP's pre-norm)
        sandwich = l.post_attention_layernorm if hasattr(l, "pre_feedforward_layernorm") else None
        res.append(dict(v=(a.v_proj, None), wo=a.o_proj.weight, bo=a.o_proj.bias, post_ln=None,
                        out=sandwich if sandwich is not None else a, out_first=sandwich is None, sandwich=sandwich))
    return res


def heads_of(cfg):
    nh = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv = getattr(cfg, "num_key_value_heads", None) or nh
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    dh = getattr(cfg, "head_dim", None) or hidden // nh
    return nh, kv, dh


def rms_gain(norm, dim):
    """An RMSNorm's per-dimension gain, whatever its parametrisation (Gemma's 1 + w): norm(ones) * sqrt(1 + eps)."""
    eps = getattr(norm, "eps", None) or getattr(norm, "variance_epsilon", 1e-6)
    one = torch.ones(1, 1, dim, dtype=torch.float64)
    with torch.no_grad():
        return (norm(one)[0, 0] * np.sqrt(1.0 + eps)).numpy(), eps


def rel(a, b):
    """max |a - b| over max |b|: how far a reconstruction is from the hooked output."""
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def reference(model_dir, inputs, gguf_file=None):
    """[dict(alti, alti_layer, rollout, rollout_layer: (L, n, n))] per input, and the worst reconstruction error."""
    kw = {"gguf_file": gguf_file} if gguf_file else {}
    cfg_path = os.path.join(model_dir, "config.json")
    if os.path.exists(cfg_path) and json.load(open(cfg_path)).get("model_type") == "gpt_oss":
        kw["experts_implementation"] = "eager"  # transformers' default grouped_mm takes no float64
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64, **kw).eval()
    nh, kv, dh = heads_of(model.config)
    group = nh // kv
    parts = layers_of(model)
    # the sandwich norms' gains, read before any hook is on them (the probe would overwrite what the hooks keep)
    hidden_size = getattr(model.config, "hidden_size", None) or model.config.n_embd
    gains = [rms_gain(p["sandwich"], hidden_size) if p.get("sandwich") is not None else None for p in parts]
    grab = {}
    hooks = []
    for li, p in enumerate(parts):
        vm, sl = p["v"]

        def vhook(_m, _i, out, li=li, sl=sl):
            grab[("v", li)] = (out if sl is None else out[..., sl[0]:sl[1]])[0].detach()
        hooks.append(vm.register_forward_hook(vhook))
        if p["post_ln"] is not None:
            def lnhook(_m, inp, out, li=li):
                grab[("ln_in", li)] = inp[0][0].detach()
                grab[("ln_out", li)] = out[0].detach()
            hooks.append(p["post_ln"].register_forward_hook(lnhook))
        else:
            def ohook(_m, _i, out, li=li, first=p["out_first"]):
                grab[("out", li)] = (out[0] if first else out)[0].detach()
            hooks.append(p["out"].register_forward_hook(ohook))
            if p["sandwich"] is not None:
                def shook(_m, inp, _o, li=li):
                    grab[("sand_in", li)] = inp[0][0].detach()
                hooks.append(p["sandwich"].register_forward_hook(shook))
    results, recon = [], 0.0
    for inp in inputs:
        ids = torch.tensor([inp["input_ids"]])
        extra = {}
        if "token_type_ids" in inp and model.config.model_type == "bert":
            extra["token_type_ids"] = torch.tensor([inp["token_type_ids"]])
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True, output_hidden_states=True, **extra)
        n = ids.shape[1]
        L = len(out.attentions)
        r = {k: np.zeros((L, n, n)) for k in ("alti", "alti_layer", "rollout", "rollout_layer")}
        for li in range(L):
            p = parts[li]
            alpha = out.attentions[li][0].numpy()          # (nh, n, n)
            x = out.hidden_states[li][0].numpy()           # (n, hidden): the layer's input
            hidden = x.shape[1]
            v = grab[("v", li)].numpy().reshape(n, kv, dh)
            wo = p["wo"].detach().numpy()
            bo = p["bo"].detach().numpy() if p["bo"] is not None else np.zeros(hidden)
            # rollout
            a = 0.5 * alpha.mean(0) + 0.5 * np.eye(n)
            a = a / a.sum(1, keepdims=True)
            r["rollout_layer"][li] = a
            r["rollout"][li] = a if li == 0 else a @ r["rollout"][li - 1]
            # ALTI: T[i, j] (n, n, hidden), the heads' part and the residual apart
            heads = np.zeros((n, n, hidden))
            for h in range(nh):
                f = v[:, h // group, :] @ wo[:, h * dh:(h + 1) * dh].T    # (n, hidden) f_h(x_j)
                heads += alpha[h][:, :, None] * f[None, :, :]
            eye = np.eye(n)[:, :, None]
            if p["post_ln"] is not None:
                ln = p["post_ln"]
                T = heads + eye * x[:, None, :]
                z = T.sum(1) + bo
                recon = max(recon, rel(z, grab[("ln_in", li)].numpy()))
                s = np.sqrt(z.var(1) + ln.eps)                               # (n) the measured scale
                g = ln.weight.detach().numpy()
                Tt = g * (T - T.mean(2, keepdims=True)) / s[:, None, None]
                y = grab[("ln_out", li)].numpy()
                yr = Tt.sum(1) + g * (bo - bo.mean()) / s[:, None] + ln.bias.detach().numpy()
                recon = max(recon, rel(yr, y))
            else:
                attn_out = heads.sum(1) + bo
                if p["sandwich"] is not None:
                    recon = max(recon, rel(attn_out, grab[("sand_in", li)].numpy()))
                    gain, eps = gains[li]
                    scale = gain[None, :] / np.sqrt((attn_out ** 2).mean(1) + eps)[:, None]   # (n, hidden)
                    Tt = heads * scale[:, None, :] + eye * x[:, None, :]
                    yr = x + attn_out * scale
                else:
                    Tt = heads + eye * x[:, None, :]
                    yr = x + attn_out
                y = x + grab[("out", li)].numpy()
                recon = max(recon, rel(yr, y))
            c = np.abs(y).sum(1)[:, None] - np.abs(y[:, None, :] - Tt).sum(2)
            c = np.maximum(c, 0.0)
            # the paper divides by the row's sum; a row with no positive contribution (every T~ at least as far
            # from y as 0 is) has none to divide: it stays 0, as attnviz documents
            tot = c.sum(1, keepdims=True)
            c = np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
            r["alti_layer"][li] = c
            r["alti"][li] = c if li == 0 else c @ r["alti"][li - 1]
        results.append(r)
    for hk in hooks:
        hk.remove()
    return results, recon


def compare(got, ref):
    return {k: float(np.abs(np.asarray(got[k]) - ref[k]).max()) for k in ref}


def report(label, errs, recon, tol):
    worst = {k: max(e[k] for e in errs) for k in errs[0]}
    # transformers' Gemma RMSNorm computes in float32 inside a float64 model: its hooked output is that close
    ok = all(v <= tol for v in worst.values()) and recon <= 1e-6
    print(f"{'PASS' if ok else 'FAIL'} mix {label}: max |diff| alti {worst['alti']:.2e}, alti_layer "
          f"{worst['alti_layer']:.2e}, rollout {worst['rollout']:.2e}, rollout_layer {worst['rollout_layer']:.2e} "
          f"(tol {tol:g}); the reference's sum of parts against transformers' output {recon:.1e} relative (tol 1e-6); "
          f"{len(errs)} inputs")
    return ok


def run_cli(attnviz, model_dir, measure, kernel):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(TEXTS) + "\n")
        batch = f.name
    try:
        env = dict(os.environ, ATTNVIZ_KERNEL=kernel)
        run = subprocess.run([attnviz, "--model", model_dir, "--batch", batch, "--json", "-", "--measure", measure,
                              "--precision", "9", "--quiet"], capture_output=True, text=True, env=env)
    finally:
        os.unlink(batch)
    if run.returncode != 0:
        raise RuntimeError(f"attnviz --measure {measure} failed: {run.stderr.strip()}")
    return [json.loads(line) for line in run.stdout.splitlines()]


def check_cli(attnviz, model_dir, label, tol, kernels):
    ok = True
    refs = None
    for kernel in kernels:
        try:
            alti = run_cli(attnviz, model_dir, "alti", kernel)
            roll = run_cli(attnviz, model_dir, "rollout", kernel)
        except RuntimeError as err:
            print(f"FAIL mix {label} [{kernel}]: {err}")
            ok = False
            continue
        if refs is None:
            refs, recon = reference(model_dir, alti)
        errs = []
        for a, b, ref in zip(alti, roll, refs):
            if a["measure"] != "alti" or b["measure"] != "rollout" or np.asarray(a["alti"]).shape != ref["alti"].shape:
                print(f"FAIL mix {label} [{kernel}]: measure {a.get('measure')}/{b.get('measure')}, shape "
                      f"{np.asarray(a.get('alti')).shape} vs {ref['alti'].shape}")
                return False
            got = {"alti": a["alti"], "alti_layer": a["alti_layer"], "rollout": b["rollout"],
                   "rollout_layer": b["rollout_layer"]}
            errs.append(compare(got, ref))
        ok &= report(f"{label} [{kernel}] (CLI --json)", errs, recon, tol)
    return ok


def check_dump(fwd, model_dir, label, tol, kernels, inputs, gguf_file=None):
    ok = True
    refs, recon = reference(model_dir, inputs, gguf_file=gguf_file)
    for kernel in kernels:
        errs = []
        for inp, ref in zip(inputs, refs):
            ids = inp["input_ids"]
            n = len(ids)
            prefix = os.path.join(tempfile.mkdtemp(), "m")
            target = os.path.join(model_dir, gguf_file) if gguf_file else model_dir
            run = subprocess.run([fwd, "--mix", target, prefix] + [str(i) for i in ids], capture_output=True,
                                 text=True, env=dict(os.environ, ATTNVIZ_KERNEL=kernel))
            if run.returncode != 0:
                print(f"FAIL mix {label} [{kernel}]: fwd_dump failed: {run.stderr.strip()}")
                return False
            L = json.loads(run.stdout)["layers"]
            got = {k: np.fromfile(prefix + "." + k, dtype=np.float32).reshape(L, n, n) for k in ref}
            errs.append(compare(got, ref))
        ok &= report(f"{label} [{kernel}] (fwd_dump --mix)", errs, recon, tol)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("fwd_dump")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--kernels", default="avx512,avx2,scalar")
    ap.add_argument("--minilm")
    ap.add_argument("--gguf")
    a = ap.parse_args()
    kernels = a.kernels.split(",")
    ok = True
    data = os.path.join(ROOT, "tests", "data")
    for name, label in (("small-f32", "BERT (post-norm)"), ("small-gpt2", "GPT-2 (pre-norm, Conv1D)"),
                        ("small-llama", "Llama (GQA 4/2)")):
        ok &= check_cli(a.attnviz, os.path.join(data, name), label, a.tol, kernels)
    rng = np.random.default_rng(49)
    for name, label in (("small-gemma3", "Gemma 3 (sandwich norms, GQA)"), ("small-gptoss", "gpt-oss (learned sinks)")):
        d = os.path.join(data, name)
        vocab = json.load(open(os.path.join(d, "config.json")))["vocab_size"]
        inputs = [{"input_ids": [int(t) for t in rng.integers(0, vocab, size=n)]} for n in (1, 7, 19)]
        ok &= check_dump(a.fwd_dump, d, label, a.tol, kernels, inputs)
    if a.minilm:
        ok &= check_cli(a.attnviz, a.minilm, "all-MiniLM-L6-v2 (trained, post-norm)", a.tol, kernels)
    if a.gguf:
        from transformers import AutoTokenizer
        d, f = os.path.split(os.path.abspath(a.gguf))
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        texts = ["The quick brown fox jumps over the lazy dog.",
                 "In the beginning the city was a small settlement around a river crossing; it grew into a market town."]
        inputs = [{"input_ids": tok(t)["input_ids"]} for t in texts]
        ok &= check_dump(a.fwd_dump, d, "SmolLM2-135M-Instruct Q4_1 (trained, quantized)", a.tol, kernels, inputs,
                         gguf_file=f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
