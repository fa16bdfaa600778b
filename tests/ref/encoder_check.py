"""XLM-RoBERTa and ELECTRA against transformers itself: synthetic checkpoints made by transformers'
own config and model classes (…ForMaskedLM, published shapes with 2 layers), saved with
save_pretrained in F32 and BF16 next to real tokenizer files (XLM-R: the Unigram tokenizer.json of
tests/tokenizer/make_unigram.py, made by sentencepiece and transformers; ELECTRA: bert-base-uncased's
vocab.txt, as google/electra-* ship it), run by attnviz's engine (build/fwd_dump) and by transformers
with attn_implementation="eager" and output_attentions=True on the same token ids: the folder's
tokenizer on real text (tests/tokenizer/tokjson_corpus.jsonl), cut to each length.

usage: encoder_check.py FWD_DUMP WORKDIR XLMR_TOKENIZER_DIR BERT_VOCAB_TXT [--only NAME[,NAME...]]
Prints one PASS/FAIL line per checkpoint with the max |diff| of attention (bound 1e-4, against
float64 transformers; float32's beside it) and of q/k as the eager attention function receives
them. Exit 1 on any FAIL.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import contextlib  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForMaskedLM, AutoTokenizer  # noqa: E402

TOL = 1e-4
LENGTHS = [1, 9, 130, 600, 1024]

# name -> (config class, shape, dtype, tokenizer)
SPECS = {
    # xlm-roberta-base's shape (768 wide, 12 heads), 2 layers, positions for 1,024 tokens after
    # padding_idx + 1 (xlm-roberta-base has 514), the Unigram tokenizer's vocabulary
    "xlmr-f32": ("XLMRobertaConfig", dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                                          intermediate_size=3072, max_position_embeddings=1026, type_vocab_size=1,
                                          pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5),
                 "float32", "xlmr"),
    "xlmr-bf16": ("XLMRobertaConfig", dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                                           intermediate_size=3072, max_position_embeddings=1026, type_vocab_size=1,
                                           pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5),
                  "bfloat16", "xlmr"),
    # electra-small-discriminator's shape: embeddings of 128 projected to 256 (embeddings_project)
    "electra-small-f32": ("ElectraConfig", dict(embedding_size=128, hidden_size=256, num_hidden_layers=2,
                                                num_attention_heads=4, intermediate_size=1024,
                                                max_position_embeddings=1024), "float32", "bert"),
    # electra-base-generator's: embeddings of 768, wider than the 256 hidden state
    "electra-gen-bf16": ("ElectraConfig", dict(embedding_size=768, hidden_size=256, num_hidden_layers=2,
                                               num_attention_heads=4, intermediate_size=1024,
                                               max_position_embeddings=1024), "bfloat16", "bert"),
}


@contextlib.contextmanager
def capture_qk(model):
    """q and k as the modeling module's eager_attention_forward receives them, per layer (heads, n, dh)."""
    mod = sys.modules[type(model.base_model.encoder.layer[0].attention.self).__module__]
    orig = mod.eager_attention_forward
    qs, ks = [], []

    def wrapped(module, query, key, *a, **k):
        qs.append(query[0].detach().clone())
        ks.append(key[0].detach().clone())
        return orig(module, query, key, *a, **k)

    mod.eager_attention_forward = wrapped
    try:
        yield qs, ks
    finally:
        mod.eager_attention_forward = orig


def build(name, workdir, xlmr_tok, bert_vocab):
    cls_name, shape, dtype, tok = SPECS[name]
    out = os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    if tok == "xlmr":
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(xlmr_tok, f), os.path.join(tmp, f))
        vocab = len(json.load(open(os.path.join(xlmr_tok, "tokenizer.json")))["model"]["vocab"])
    else:
        shutil.copyfile(bert_vocab, os.path.join(tmp, "vocab.txt"))
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True, "tokenizer_class": "ElectraTokenizer"}, f)
        vocab = sum(1 for _ in open(bert_vocab, encoding="utf-8"))
    torch.manual_seed(sum(map(ord, name)))
    cfg = getattr(transformers, cls_name)(vocab_size=vocab, **shape)
    model = AutoModelForMaskedLM.from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "query" in pname or "key" in pname:
                # peaky attention: scores spread over several units (ELECTRA's narrower heads need more)
                p.mul_(6.0 if tok == "xlmr" else 12.0)
            elif "word_embeddings" in pname:
                p.normal_(0, 0.2)  # predictions spread over several units
    model.to(getattr(torch, dtype)).save_pretrained(tmp, safe_serialization=True)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


def reference(model_dir, ids, dtype):
    model = AutoModelForMaskedLM.from_pretrained(model_dir, attn_implementation="eager", dtype=dtype).eval()
    with capture_qk(model) as (qs, ks), torch.no_grad():
        out = model.base_model(torch.tensor([ids]), output_attentions=True)
    return (torch.stack([a[0] for a in out.attentions]).numpy(), torch.stack(qs).numpy(),
            torch.stack(ks).numpy())


def token_ids(model_dir, text, n):
    """The folder's tokenizer (transformers) on text, cut to n tokens with the template's end kept."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok(text)["input_ids"]
    if len(ids) < n:
        raise SystemExit(f"the text gives {len(ids)} tokens, fewer than {n}")
    return ids[:1] if n == 1 else ids[:n - 1] + ids[-1:]


def check(fwd, model_dir, name, text):
    worst_a = worst_qk = worst_a32 = 0.0
    for n in LENGTHS:
        ids = token_ids(model_dir, text, n)
        prefix = os.path.join(os.path.dirname(model_dir), name + ".out")
        r = subprocess.run([fwd, model_dir, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL encoder {name}: attnviz failed on {n} tokens: {r.stderr.strip()}")
            return False
        meta = json.loads(r.stdout)
        L, H, dh = meta["layers"], meta["heads"], meta["head_dim"]
        a = np.fromfile(prefix + ".attn", dtype=np.float32).reshape(L, H, n, n)
        q = np.fromfile(prefix + ".q", dtype=np.float32).reshape(L, H, n, dh)
        k = np.fromfile(prefix + ".k", dtype=np.float32).reshape(L, H, n, dh)
        ra, rq, rk = reference(model_dir, ids, torch.float64)
        da32 = float(np.abs(reference(model_dir, ids, torch.float32)[0] - a).max())
        if ra.shape != a.shape:
            print(f"FAIL encoder {name}: attention shape {a.shape}, transformers {ra.shape}")
            return False
        da = float(np.abs(ra - a).max())
        dq = float(max(np.abs(rq - q).max(), np.abs(rk - k).max()))
        worst_a, worst_qk, worst_a32 = max(worst_a, da), max(worst_qk, dq), max(worst_a32, da32)
        print(f"  {name} n={n}: attention {da:.2e} (float32 transformers {da32:.2e}), q/k {dq:.2e} "
              f"(mean row max {float(ra.max(axis=-1).mean()):.2f})")
    ok = worst_a <= TOL
    print(f"{'PASS' if ok else 'FAIL'} encoder {name} ({meta['dtype']}, {L} layers, {H} heads, head_dim {dh}): "
          f"attention max |diff| {worst_a:.2e} from float64 transformers (tol {TOL:g}; float32: {worst_a32:.2e}), "
          f"q/k {worst_qk:.2e}, lengths {','.join(map(str, LENGTHS))}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fwd_dump")
    ap.add_argument("workdir")
    ap.add_argument("xlmr_tok")
    ap.add_argument("bert_vocab")
    ap.add_argument("--only")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(2)
    here = os.path.dirname(os.path.abspath(__file__))
    corpus = os.path.join(here, "..", "tokenizer", "tokjson_corpus.jsonl")
    text = " ".join(json.loads(l) for l in open(corpus, encoding="utf-8"))
    ok = True
    for name in SPECS:
        if args.only and name not in args.only.split(","):
            continue
        t0 = time.time()
        d = build(name, args.workdir, args.xlmr_tok, args.bert_vocab)
        ok &= check(args.fwd_dump, d, name, text)
        print(f"  {name}: {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
