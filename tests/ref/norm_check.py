"""Value-weighted attention (--measure norm) against the formula of Kobayashi et al. 2020,
"Attention is not only a weight", written here over transformers' hooks:

    norm_attention[l][h][i][j] = || alpha_ij^h f_h(x_j) ||,   f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h

alpha from transformers' eager attention (output_attentions=True), x_j W_V^h + b_V^h from a forward
hook on the value projection (its output, bias included; query head h reads its kv group's values
under GQA), W_O^h the columns of the output projection's weight that head h's context multiplies
(rows of GPT-2's Conv1D weight). The output projection's bias is added once to the sum over heads
and tokens and belongs to no token: left out, as the paper does. The norm is taken of the whole
vector alpha_ij f_h(x_j) (hidden_size numbers) for every (i, j), not factored. transformers runs in
float64: the bound is attnviz's error alone.

usage: norm_check.py ATTNVIZ FWD_DUMP WORKDIR [--tol 1e-4] [--gguf SMOLLM2_Q4_1.gguf]
Two kinds of checkpoint, both written by transformers:
  - the repository's fixtures with a tokenizer (tests/data/small-f32: BERT; small-gpt2: Conv1D
    weights and a value bias; small-llama: Llama with 4 query heads over 2 kv heads), through the
    CLI: attnviz --batch --json - --measure norm, its "norm_attention" and "value_norms";
  - SmolLM2-135M's shape (576 wide, 9 query heads over 3 kv heads; layers reduced to 2) in F32 and
    BF16, made with transformers' own LlamaConfig and save_pretrained as tests/ref/decoder_check.py
    makes its checkpoints (cached in WORKDIR), through build/fwd_dump --norm on token ids (the same
    capture option and normattn.c the CLI runs);
  - with --gguf, the trained SmolLM2-135M-Instruct Q4_1 file (its output projection kept quantized by
    attnviz, dequantized by transformers' gguf_file loading), through build/fwd_dump --norm.
Prints one PASS/FAIL line per checkpoint; each of these within the bound: the max |diff| of
norm_attention, that difference divided by its key's value norm (an error of the attention weights
is multiplied by the norms, which reach 100+ in trained models: SmolLM2-135M's median is about 24,
so the absolute figure is meaningful only at these checkpoints' scale of a few units), and the
value norms' relative error. Exit 1 on any FAIL.
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
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModel  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB = 512
TEXTS = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat and the cat slept",
         "hello world"]


def v_o_modules(model):
    """Per layer: (value module, slice of its output or None, W_O as a (hidden, heads*dh) tensor)."""
    family = model.config.model_type
    if family == "gpt2":
        h = model.config.n_embd
        # Conv1D computes x @ weight + bias, weight (in, out): W_O (out, in) is its transpose
        return [(b.attn.c_attn, (2 * h, 3 * h), b.attn.c_proj.weight.T) for b in model.h]
    if family in ("bert", "roberta"):
        return [(l.attention.self.value, None, l.attention.output.dense.weight) for l in model.encoder.layer]
    if family == "distilbert":
        return [(l.attention.v_lin, None, l.attention.out_lin.weight) for l in model.transformer.layer]
    return [(l.self_attn.v_proj, None, l.self_attn.o_proj.weight) for l in model.layers]


def heads_of(cfg):
    nh = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv = getattr(cfg, "num_key_value_heads", None) or nh
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    dh = getattr(cfg, "head_dim", None) or hidden // nh
    return nh, kv, dh


def reference(model_dir, inputs, gguf_file=None):
    """[(norm_attention (L, H, n, n), value norms (L, H, n))] per input {input_ids, token_type_ids?}."""
    kw = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float64, **kw).eval()
    nh, kv, dh = heads_of(model.config)
    group = nh // kv
    mods = v_o_modules(model)
    values = {}
    hooks = []
    for li, (vm, sl, _wo) in enumerate(mods):
        def hook(_m, _i, out, li=li, sl=sl):
            values[li] = (out if sl is None else out[..., sl[0]:sl[1]])[0].detach()
        hooks.append(vm.register_forward_hook(hook))
    res = []
    for inp in inputs:
        ids = torch.tensor([inp["input_ids"]])
        kw = {}
        if "token_type_ids" in inp and model.config.model_type == "bert":
            kw["token_type_ids"] = torch.tensor([inp["token_type_ids"]])
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True, **kw)
        n = ids.shape[1]
        L = len(out.attentions)
        na = np.zeros((L, nh, n, n))
        vn = np.zeros((L, nh, n))
        for li in range(L):
            alpha = out.attentions[li][0].numpy()                    # (H, n, n)
            v = values[li].numpy().reshape(n, kv, dh)                 # (n, KV, dh) with the value bias
            wo = mods[li][2].detach().numpy()                          # (hidden, H * dh)
            for h in range(nh):
                f = v[:, h // group, :] @ wo[:, h * dh:(h + 1) * dh].T  # (n, hidden): f_h(x_j)
                vn[li, h] = np.linalg.norm(f, axis=1)
                # || alpha_ij f_h(x_j) || over the whole vector, for every query i and key j
                na[li, h] = np.linalg.norm(alpha[h][:, :, None] * f[None, :, :], axis=2)
        res.append((na, vn))
    for hk in hooks:
        hk.remove()
    return res


def scaled_errors(got, na, gotv, vn):
    """max |diff| of norm_attention, and of norm_attention over its key's value norm (alpha's own scale:
    an error in the weights grows with the norms, which reach 100+ in trained models), and the value
    norms' relative error."""
    d = np.abs(got - na)
    return (float(d.max()), float((d / np.maximum(vn[:, :, None, :], 1e-12)).max()),
            float((np.abs(gotv - vn) / np.maximum(vn, 1e-12)).max()))


def report(label, errs, scale, tol, absolute=True):
    """absolute: the max |diff| is bounded too (checkpoints whose norms are a few units); a trained model's
    norms reach 100+, where only the figures relative to the norms can be held to the bound."""
    worst, rel, relv = (max(e[k] for e in errs) for k in range(3))
    ok = (worst <= tol or not absolute) and rel <= tol and relv <= tol
    print(f"{'PASS' if ok else 'FAIL'} norm {label}: norm_attention max |diff| {worst:.2e}"
          f"{'' if absolute else ' (not bounded at this scale)'}, over the key's value norm "
          f"{rel:.2e}; value norms relative {relv:.2e} ({'each ' if absolute else 'these two '}tol {tol:g}); "
          f"largest norm_attention {scale:.3g}, {len(errs)} inputs")
    return ok


def check_cli(attnviz, model_dir, label, tol):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(TEXTS) + "\n")
        batch = f.name
    try:
        run = subprocess.run([attnviz, "--model", model_dir, "--batch", batch, "--json", "-", "--measure", "norm",
                              "--precision", "9", "--quiet"], capture_output=True, text=True)
    finally:
        os.unlink(batch)
    if run.returncode != 0:
        print(f"FAIL norm {label}: attnviz failed: {run.stderr.strip()}")
        return False
    outs = [json.loads(line) for line in run.stdout.splitlines()]
    refs = reference(model_dir, outs)
    errs, scale = [], 0.0
    for out, (na, vn) in zip(outs, refs):
        got, gotv = np.array(out["norm_attention"]), np.array(out["value_norms"])
        if got.shape != na.shape or gotv.shape != vn.shape:
            print(f"FAIL norm {label}: shapes {got.shape}/{gotv.shape}, reference {na.shape}/{vn.shape}")
            return False
        # and it is the attention weighted, as the JSON's own attention says
        if np.abs(np.array(out["attention"]) * gotv[:, :, None, :] - got).max() > 1e-6 * max(1.0, na.max()):
            print(f"FAIL norm {label}: norm_attention is not attention x value_norms")
            return False
        errs.append(scaled_errors(got, na, gotv, vn))
        scale = max(scale, float(na.max()))
    return report(label + " (CLI --json)", errs, scale, tol)


def build(name, workdir, dtype):
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    torch.manual_seed(sum(map(ord, name)))
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                                   num_key_value_heads=3, num_hidden_layers=2, rope_theta=100000.0, rms_norm_eps=1e-5,
                                   tie_word_embeddings=True, max_position_embeddings=8192)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif "q_proj" in pname or "k_proj" in pname:
                p.mul_(6.0)  # peaky attention, as decoder_check.py's
    model.to(dtype).save_pretrained(out, safe_serialization=True)
    return out


def check_dump(fwd, model_dir, label, tol, rng):
    errs, scale = [], 0.0
    for n in (1, 9, 130):
        ids = [int(x) for x in rng.integers(0, VOCAB, size=n)]
        prefix = model_dir + ".out"
        r = subprocess.run([fwd, "--norm", model_dir, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL norm {label}: fwd_dump failed on {n} tokens: {r.stderr.strip()}")
            return False
        meta = json.loads(r.stdout)
        L, H = meta["layers"], meta["heads"]
        got = np.fromfile(prefix + ".nattn", dtype=np.float32).reshape(L, H, n, n)
        gotv = np.fromfile(prefix + ".vnorm", dtype=np.float32).reshape(L, H, n)
        ((na, vn),) = reference(model_dir, [{"input_ids": ids}])
        errs.append(scaled_errors(got, na, gotv, vn))
        scale = max(scale, float(na.max()))
        print(f"  {label} n={n}: norm_attention {errs[-1][0]:.2e}, over the value norm {errs[-1][1]:.2e}, "
              f"value norms relative {errs[-1][2]:.2e} (largest value norm {float(vn.max()):.3g})")
    return report(label + f" (fwd_dump, {meta['dtype']}, {H} heads / {meta['kv_heads']} kv)", errs, scale, tol)


def check_gguf(fwd, gguf, tol):
    """The trained SmolLM2-135M-Instruct Q4_1 GGUF: attnviz keeps W_O quantized and widens it as the pass
    does; transformers dequantizes the same file (gguf_file=...) to float64."""
    from transformers import AutoTokenizer
    d, f = os.path.split(os.path.abspath(gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    texts = ["The quick brown fox jumps over the lazy dog.",
             "In the beginning the city was a small settlement around a river crossing; over the centuries it grew "
             "into a market town whose merchants traded wool, cloth and grain along the coast. " * 2]
    inputs = [{"input_ids": tok(t)["input_ids"][:160]} for t in texts]
    refs = reference(d, inputs, gguf_file=f)
    errs, scale = [], 0.0
    for inp, (na, vn) in zip(inputs, refs):
        ids, n = inp["input_ids"], len(inp["input_ids"])
        prefix = os.path.join(tempfile.mkdtemp(), "g")
        r = subprocess.run([fwd, "--norm", gguf, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL norm SmolLM2 GGUF: fwd_dump failed: {r.stderr.strip()}")
            return False
        meta = json.loads(r.stdout)
        L, H = meta["layers"], meta["heads"]
        got = np.fromfile(prefix + ".nattn", dtype=np.float32).reshape(L, H, n, n)
        gotv = np.fromfile(prefix + ".vnorm", dtype=np.float32).reshape(L, H, n)
        errs.append(scaled_errors(got, na, gotv, vn))
        scale = max(scale, float(na.max()))
        print(f"  SmolLM2 GGUF n={n}: norm_attention {errs[-1][0]:.2e}, over the value norm {errs[-1][1]:.2e}, "
              f"value norms relative {errs[-1][2]:.2e} (value norms up to {float(vn.max()):.3g})")
    return report(f"SmolLM2-135M-Instruct Q4_1 GGUF (fwd_dump, W_O kept {meta['dtype']})", errs, scale, tol,
                  absolute=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("fwd_dump")
    ap.add_argument("workdir")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--gguf", help="the SmolLM2-135M-Instruct Q4_1 GGUF (tools/pymodel.sh smollm2), if cached")
    a = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(a.workdir, exist_ok=True)
    ok = True
    for fixture, label in (("small-f32", "BERT fixture"), ("small-gpt2", "GPT-2 fixture"),
                           ("small-llama", "Llama GQA fixture")):
        ok &= check_cli(a.attnviz, os.path.join(ROOT, "tests", "data", fixture), label, a.tol)
    rng = np.random.default_rng(32)
    for name, dtype in (("smollm2-shape-f32", torch.float32), ("smollm2-shape-bf16", torch.bfloat16)):
        ok &= check_dump(a.fwd_dump, build(name, a.workdir, dtype), name, a.tol, rng)
    if a.gguf:
        ok &= check_gguf(a.fwd_dump, a.gguf, a.tol)
    else:
        print("SKIP norm SmolLM2 GGUF: not cached (tools/pymodel.sh smollm2)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
