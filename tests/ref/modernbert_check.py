"""ModernBERT against transformers itself: synthetic ModernBertForMaskedLM checkpoints made by
transformers' own config and model classes at ModernBERT-base's block shape (768 wide, 12 heads,
GeGLU 1152, no biases, the real 128-token local window and rotary bases 160k / 10k) with 4 layers
(global, local, local, global: global_attn_every_n_layers 3), F32 and BF16, beside a byte-level BPE
tokenizer.json laid out as ModernBERT's (NFC, ByteLevel pre-tokenizer without a prefix space,
[CLS] A [SEP] B [SEP], [MASK] taking the space before it) trained here with the `tokenizers`
library, since no package carries ModernBERT's own file.

usage: modernbert_check.py ATTNVIZ FWD_DUMP WORKDIR [--only NAME[,NAME...]] [--kernels K1,K2,...]
       modernbert_check.py --fixture OUT_DIR   (writes the committed tests/data/small-modernbert)

Per checkpoint: attention and q/k (as the eager attention function receives them: after rotary,
before the scale) from attnviz's engine (FWD_DUMP on token ids) against transformers with
attn_implementation="eager" in float64 (the bound) and float32 (printed beside it), inputs of 1 to
1,024 tokens (longer than the window, so that the local layers' mask matters); then `attnviz
--predict` against AutoModelForMaskedLM (predict_check.py's comparison: same ids per rank outside
near ties, probabilities within 1e-4) and the tokens against the tokenizers library. Attention and
predictions are checked on each products kernel of --kernels (ATTNVIZ_KERNEL; modernbert_check.sh
names every one the CPU has), against one reference run per input.
Prints PASS/FAIL lines; exit 1 on any FAIL.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import predict_check  # noqa: E402

TOL = 1e-4
VOCAB = 1024  # the trained tokenizer's size; the model's rows (a multiple of 64, as ModernBERT pads) cover it
HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = dict(hidden_size=768, intermediate_size=1152, num_attention_heads=12, num_hidden_layers=4,
             global_attn_every_n_layers=3, local_attention=128, global_rope_theta=160000.0,
             local_rope_theta=10000.0, max_position_embeddings=8192, norm_eps=1e-5, norm_bias=False,
             attention_bias=False, mlp_bias=False, decoder_bias=True, classifier_bias=False,
             hidden_activation="gelu", classifier_activation="gelu", tie_word_embeddings=True)
SPECS = {"modernbert-f32": "float32", "modernbert-bf16": "bfloat16"}
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
TEXTS = ["time flies like an arrow", "The cat sat on the mat.\tIt was tired.", "naïve café 😀  tabs\tand\nnewlines",
         "x[MASK]y  [MASK] [MASK]", "def add(a, b):\n    return a + b"]


def corpus_lines():
    lines = []
    for p in ("../data/corpus/sentences.txt", "../tokenizer/corpus.tsv"):
        with open(os.path.join(HERE, p), encoding="utf-8") as f:
            lines += [l.rstrip("\n") for l in f]
    return lines


def make_tokenizer(out, vocab=VOCAB):
    """ModernBERT's tokenizer.json layout on a small trained vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import AddedToken
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(), trainer)
    tok.add_special_tokens([AddedToken(s, lstrip=(s == "[MASK]"), normalized=False) for s in SPECIALS])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "cls_token": "[CLS]", "sep_token": "[SEP]",
                   "pad_token": "[PAD]", "mask_token": "[MASK]", "unk_token": "[UNK]",
                   "model_max_length": 8192, "clean_up_tokenization_spaces": True}, f)
    return {s: tok.token_to_id(s) for s in SPECIALS}


def build(name, workdir):
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    os.makedirs(out, exist_ok=True)
    sp = make_tokenizer(out)
    torch.manual_seed(sum(map(ord, name)))
    cfg = transformers.ModernBertConfig(vocab_size=(VOCAB + 63) // 64 * 64, pad_token_id=sp["[PAD]"],
                                        cls_token_id=sp["[CLS]"], sep_token_id=sp["[SEP]"],
                                        bos_token_id=sp["[CLS]"], eos_token_id=sp["[SEP]"], **SHAPE)
    model = transformers.ModernBertForMaskedLM(cfg).float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_((0.0 if "bias" in pname else 1.0) + 0.1 * torch.randn_like(p))
            elif "Wqkv" in pname:
                p[:2 * cfg.hidden_size].mul_(4.0)  # q and k rows: attention peaky, not flat
            elif "tok_embeddings" in pname:
                p.normal_(0.0, 0.2)  # logits spread over several units: top-K orders mean something
    model.to(getattr(torch, SPECS[name])).save_pretrained(out, safe_serialization=True)
    return out


def reference(model_dir, ids, dtype):
    """attention (L, H, n, n), q and k (L, H, n, dh) from transformers' eager path in dtype."""
    model = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=dtype).eval()
    mod = sys.modules[type(model).__module__]
    orig, qs, ks = mod.eager_attention_forward, [], []

    def wrapped(module, query, key, *a, **k):
        qs.append(query[0].detach().clone())
        ks.append(key[0].detach().clone())
        return orig(module, query, key, *a, **k)

    mod.eager_attention_forward = wrapped
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
    finally:
        mod.eager_attention_forward = orig
    attn = torch.stack([a[0] for a in out.attentions]).double().numpy()
    return attn, torch.stack(qs).double().numpy(), torch.stack(ks).double().numpy()


def fwd_dump(fwd, model_dir, name, ids, kernel):
    """attnviz's attention (L, H, n, n), q, k (L, H, n, dh) and its JSON line, or a string saying why not."""
    prefix = os.path.join(os.path.dirname(model_dir), name + ".out")
    env = dict(os.environ, ATTNVIZ_KERNEL=kernel)
    r = subprocess.run([fwd, model_dir, prefix] + [str(i) for i in ids], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return f"attnviz failed on {len(ids)} tokens: {r.stderr.strip()}"
    meta = json.loads(r.stdout)
    L, H, dh, n = meta["layers"], meta["heads"], meta["head_dim"], len(ids)
    a = np.fromfile(prefix + ".attn", dtype=np.float32).reshape(L, H, n, n)
    q = np.fromfile(prefix + ".q", dtype=np.float32).reshape(L, H, n, dh)
    k = np.fromfile(prefix + ".k", dtype=np.float32).reshape(L, H, n, dh)
    return a, q, k, meta


def check_attention(fwd, model_dir, name, lengths, rng, kernels):
    """Every kernel's attention against one float64 (the bound) and one float32 reference per input."""
    worst = {kn: [0.0, 0.0, 0.0] for kn in kernels}  # attention, q/k, float32's attention
    window_mass = 0.0
    for n in lengths:
        ids = [int(x) for x in rng.integers(len(SPECIALS), VOCAB - len(SPECIALS), size=n)]
        if n >= 32:
            ids[n // 2:n // 2 + 16] = ids[:16]
        ra, rq, rk = reference(model_dir, ids, torch.float64)
        ra32 = reference(model_dir, ids, torch.float32)[0]
        line = []
        for kn in kernels:
            got = fwd_dump(fwd, model_dir, name, ids, kn)
            if isinstance(got, str):
                print(f"FAIL modernbert {name} ({kn}): {got}")
                return False
            a, q, k, meta = got
            if ra.shape != a.shape:
                print(f"FAIL modernbert {name}: attention shape {a.shape}, transformers {ra.shape}")
                return False
            L, H, dh = meta["layers"], meta["heads"], meta["head_dim"]
            far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) > SHAPE["local_attention"] // 2
            for l in range(L):
                if l % SHAPE["global_attn_every_n_layers"] and far.any():
                    window_mass = max(window_mass, float(np.abs(a[l][:, far]).max()))
            da, da32 = float(np.abs(ra - a).max()), float(np.abs(ra32 - a).max())
            dq = float(max(np.abs(rq - q).max(), np.abs(rk - k).max()))
            w = worst[kn]
            w[0], w[1], w[2] = max(w[0], da), max(w[1], dq), max(w[2], da32)
            line.append(f"{kn} {da:.2e} (float32 {da32:.2e}), q/k {dq:.2e}")
        peak = float(ra.max(axis=-1).mean())
        print(f"  {name} n={n}: attention " + "; ".join(line) + f" (mean row max {peak:.2f})")
    ok = True
    for kn in kernels:
        worst_a, worst_qk, worst_a32 = worst[kn]
        good = worst_a <= TOL and window_mass == 0.0
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} modernbert {name} ({meta['dtype']}, {L} layers, {H} heads, head_dim {dh}, "
              f"kernel {kn}): attention max |diff| {worst_a:.2e} from float64 transformers (tol {TOL:g}; float32: "
              f"{worst_a32:.2e}), q/k {worst_qk:.2e}, weight outside the local window {window_mass:g}, "
              f"lengths {','.join(map(str, lengths))}")
    return ok


def check_tokens(attnviz, model_dir, name):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    texts = TEXTS + corpus_lines()[:200]
    bad = []
    for t in texts:
        parts = t.split("\t", 1)
        ref = tok.encode(*parts).ids
        r = subprocess.run([attnviz, "--model", model_dir, "--tokens-only", "--quiet"] + parts, capture_output=True,
                           text=True)
        got = json.loads(r.stdout)["input_ids"] if r.returncode == 0 else r.stderr.strip()
        if got != ref:
            bad.append(f"{t[:40]!r}: attnviz {str(got)[:80]}, tokenizers {ref[:12]}")
    print(f"{'PASS' if not bad else 'FAIL'} modernbert_tokens {name}: {len(texts) - len(bad)}/{len(texts)} inputs "
          f"with the tokenizers library's ids (sentence pairs and [MASK] included)")
    for b in bad[:5]:
        print(f"  {b}")
    return not bad


def fixture(out):
    """A tiny ModernBertForMaskedLM (16 wide, 3 layers: global, local, local; a local window of
    |i - j| <= 2; biases in the norms and linears, so that every optional tensor is read) with a
    300-token tokenizer, and golden.json from transformers' eager attention in float32 (the format
    of make_decoder_goldens.py's fixtures), for test_model.c and the CLI tests."""
    os.makedirs(out, exist_ok=True)
    sp = make_tokenizer(out, 300)
    torch.manual_seed(31)
    cfg = transformers.ModernBertConfig(
        vocab_size=320, hidden_size=16, intermediate_size=24, num_attention_heads=4, num_hidden_layers=3,
        global_attn_every_n_layers=3, local_attention=4, global_rope_theta=160000.0, local_rope_theta=10000.0,
        max_position_embeddings=64, norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True,
        pad_token_id=sp["[PAD]"], cls_token_id=sp["[CLS]"], sep_token_id=sp["[SEP]"], bos_token_id=sp["[CLS]"],
        eos_token_id=sp["[SEP]"])
    model = transformers.ModernBertForMaskedLM(cfg).float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_((0.0 if "bias" in pname else 1.0) + 0.1 * torch.randn_like(p))
            elif "Wqkv" in pname:
                p.normal_(0, 0.5)
            else:
                p.normal_(0, 0.3)
    model.save_pretrained(out, safe_serialization=True)
    ref = transformers.AutoModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(3)
    cases = []
    r4 = lambda t: [[[[round(float(x), 7) for x in row] for row in m] for m in h] for h in t]  # noqa: E731
    for n in (1, 12):
        ids = torch.randint(len(SPECIALS), 300, (n,), generator=gen).tolist()
        attn, q, k = reference(out, ids, torch.float32)
        with torch.no_grad():
            o = ref(torch.tensor([ids]))
        cases.append({"input_ids": ids, "token_type_ids": [0] * n, "attention": r4(attn), "queries": r4(q),
                      "keys": r4(k), "last_hidden": [[round(float(x), 7) for x in row] for row in o.last_hidden_state[0]]})
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(cases, f)
    print(out, os.path.getsize(os.path.join(out, "model.safetensors")), "bytes")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fixture":
        fixture(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("fwd_dump")
    ap.add_argument("workdir")
    ap.add_argument("--only")
    ap.add_argument("--kernels", default=os.environ.get("ATTNVIZ_KERNEL", ""),
                    help="products kernels to check (comma-separated; default: the best one)")
    args = ap.parse_args()
    kernels = [k for k in args.kernels.split(",") if k] or [""]
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(2)
    ok = True
    for name in SPECS:
        if args.only and name not in args.only.split(","):
            continue
        t0 = time.time()
        d = build(name, args.workdir)
        rng = np.random.default_rng(11)
        lengths = [1, 9, 65, 66, 130, 300, 1024] if name.endswith("f32") else [1, 67, 200, 1024]
        ok &= check_attention(args.fwd_dump, d, name, lengths, rng, kernels)
        for kn in kernels:
            os.environ["ATTNVIZ_KERNEL"] = kn
            with tempfile.TemporaryDirectory() as tmp:
                print(f"  {name}: --predict with kernel {kn or 'best'}")
                ok &= predict_check.check_model(args.attnviz, name, d, True, tmp)
        ok &= check_tokens(args.attnviz, d, name)
        print(f"  {name}: {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
