#!/usr/bin/python3
"""Writes synthetic checkpoints in the real Hugging Face layouts.

usage: make_checkpoint.py OUT_DIR [--family bert|roberta|distilbert|gpt2] [--shape small|base]
                          [--dtype F32|F16|BF16] [--naming hf|google|prefixed] [--seed N]
                          [--vocab FILE] [--merges FILE] [--act gelu|gelu_new|relu]

Families: bert (BertModel names), roberta (BERT's names, type_vocab_size 1,
positions from padding_idx + 1, vocab.json + merges.txt), distilbert (q_lin,
sa_layer_norm, ffn.lin1, ... and no token types), gpt2 (wte/wpe, h.N.attn.c_attn
as Conv1D (in, 3 * out), ln_f; vocab.json + merges.txt). --naming prefixed puts
the task model's prefix (roberta., distilbert., transformer.) before every name.

--naming hf: tensor names as transformers' BertModel saves them (no prefix,
LayerNorm weight/bias); google: "bert." prefix and LayerNorm gamma/beta, as
google-bert/bert-base-uncased's own model.safetensors. Extra tensors (pooler,
cls.* heads, position_ids) are written too, as real files have them.

Random weights with std 0.02 give near-uniform attention, which hides bugs, so
query/key weights are scaled per layer to make attention peaky everywhere.
"""
import argparse
import json
import os

import torch

import stio

SHAPES = {
    "small": dict(vocab_size=None, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64),
    "base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512),
}


def small_vocab():
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    toks += [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    toks += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks += ["the", "time", "flies", "like", "an", "arrow", "fruit", "a", "banana", "cat", "sat", "on", "mat",
             "dog", "##ing", "run", "it", "was", "tired", "hello", "world"]
    return list(dict.fromkeys(toks))


def bpe_vocab(words):
    """A small byte-level BPE vocabulary: the 256 byte symbols of GPT-2's
    bytes_to_unicode, then left-to-right merges spelling each word."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_sym = [chr(c) for c in cs]
    toks, merges = list(byte_sym), []
    for w in words:
        syms = [chr(cs[bs.index(b)]) for b in w.encode()]
        cur = syms[0]
        for nxt in syms[1:]:
            if (cur, nxt) not in merges:
                merges.append((cur, nxt))
            cur = cur + nxt
            if cur not in toks:
                toks.append(cur)
    return toks, merges


BPE_WORDS = ["time", " time", " flies", " like", " an", " arrow", " the", " cat", " sat", " on", " mat", "The",
             " dog", "ing", " hello", " world", "hello", "."]


def write_bpe(out, toks, merges, specials_first, specials_last):
    vocab = specials_first + toks + specials_last
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return len(vocab)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="bert", choices=["bert", "roberta", "distilbert", "gpt2"])
    ap.add_argument("--merges", help="merges.txt to use with --vocab vocab.json (roberta, gpt2)")
    ap.add_argument("out")
    ap.add_argument("--shape", default="small", choices=SHAPES)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--naming", default="hf", choices=["hf", "google", "prefixed"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", help="vocab.txt to use (its size sets vocab_size)")
    ap.add_argument("--act", default="gelu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.family != "bert":
        return other_family(a)
    cfg = dict(SHAPES[a.shape])
    if a.vocab:
        vocab = [l.rstrip("\r\n") for l in open(a.vocab, encoding="utf-8")]
    elif a.shape == "small":
        vocab = small_vocab()
    else:
        vocab = small_vocab()
        vocab += [f"[unused{i}]" for i in range(cfg["vocab_size"] - len(vocab))]
    cfg["vocab_size"] = len(vocab)
    cfg.update(model_type="bert", architectures=["BertForMaskedLM"], type_vocab_size=2, layer_norm_eps=1e-12,
               hidden_act=a.act, position_embedding_type="absolute", pad_token_id=0)
    g = torch.Generator().manual_seed(a.seed)
    H, FF, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]

    def rnd(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    w = {}
    w["embeddings.word_embeddings.weight"] = rnd(cfg["vocab_size"], H, std=1.0)
    w["embeddings.position_embeddings.weight"] = rnd(cfg["max_position_embeddings"], H, std=0.5)
    w["embeddings.token_type_embeddings.weight"] = rnd(2, H, std=0.5)
    w["embeddings.LayerNorm.weight"] = 1 + rnd(H, std=0.1)
    w["embeddings.LayerNorm.bias"] = rnd(H, std=0.1)
    # Logit std ~ s^2 * H for LayerNorm'd inputs: pick s so logits spread by 3-8 nats per layer.
    for l in range(L):
        p = f"encoder.layer.{l}."
        s = (float(3 + 5 * (l % 3) / 2) / H) ** 0.5
        w[p + "attention.self.query.weight"] = rnd(H, H, std=s)
        w[p + "attention.self.query.bias"] = rnd(H, std=0.2)
        w[p + "attention.self.key.weight"] = rnd(H, H, std=s)
        w[p + "attention.self.key.bias"] = rnd(H, std=0.2)
        w[p + "attention.self.value.weight"] = rnd(H, H, std=H ** -0.5)
        w[p + "attention.self.value.bias"] = rnd(H, std=0.1)
        w[p + "attention.output.dense.weight"] = rnd(H, H, std=H ** -0.5)
        w[p + "attention.output.dense.bias"] = rnd(H, std=0.1)
        w[p + "attention.output.LayerNorm.weight"] = 1 + rnd(H, std=0.1)
        w[p + "attention.output.LayerNorm.bias"] = rnd(H, std=0.1)
        w[p + "intermediate.dense.weight"] = rnd(FF, H, std=H ** -0.5)
        w[p + "intermediate.dense.bias"] = rnd(FF, std=0.1)
        w[p + "output.dense.weight"] = rnd(H, FF, std=FF ** -0.5)
        w[p + "output.dense.bias"] = rnd(H, std=0.1)
        w[p + "output.LayerNorm.weight"] = 1 + rnd(H, std=0.1)
        w[p + "output.LayerNorm.bias"] = rnd(H, std=0.1)
    # Values are generated in float32 and rounded to the stored dtype once, so
    # the reference reads exactly what attnviz reads.
    extra = {"pooler.dense.weight": rnd(H, H), "pooler.dense.bias": rnd(H)}
    if a.naming == "google":
        out = {}
        for k, v in w.items():
            k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
            out["bert." + k] = v
        for k, v in extra.items():
            out["bert." + k] = v
        out["cls.predictions.bias"] = rnd(cfg["vocab_size"])
        out["cls.seq_relationship.weight"] = rnd(2, H)
    else:
        out = dict(w)
        out.update(extra)
    stio.save(os.path.join(a.out, "model.safetensors"), out, a.dtype)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True}, f)


FAMILY_SHAPES = {
    "roberta": {"small": (32, 2, 4, 64, 64), "base": (768, 12, 12, 3072, 512)},
    "distilbert": {"small": (32, 2, 4, 64, 64), "base": (768, 6, 12, 3072, 512)},
    "gpt2": {"small": (32, 3, 4, 128, 64), "base": (768, 12, 12, 3072, 1024)},
}
PREFIX = {"roberta": "roberta.", "distilbert": "distilbert.", "gpt2": "transformer."}


def other_family(a):
    H, L, NH, FF, P = FAMILY_SHAPES[a.family][a.shape]
    g = torch.Generator().manual_seed(a.seed)

    def rnd(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    # vocabulary first: its size shapes the embeddings
    if a.family == "distilbert":
        if a.vocab:
            vocab = [l.rstrip("\r\n") for l in open(a.vocab, encoding="utf-8")]
        else:
            vocab = small_vocab()
            if a.shape == "base":
                vocab += [f"[unused{i}]" for i in range(30522 - len(vocab))]
        V = len(vocab)
        with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
            json.dump({"do_lower_case": True}, f)
    else:
        if a.vocab:
            enc = json.load(open(a.vocab, encoding="utf-8"))
            toks = [t for t, _ in sorted(enc.items(), key=lambda kv: kv[1])]
            merges = [tuple(l.rstrip("\n").split(" ")) for l in open(a.merges, encoding="utf-8")
                      if l.strip() and not l.startswith("#version")]
        else:
            toks, merges = bpe_vocab(BPE_WORDS)
        if a.family == "gpt2":
            if "<|endoftext|>" not in toks:
                toks = toks + ["<|endoftext|>"]
            V = write_bpe(a.out, toks, merges, [], [])
        else:
            toks = [t for t in toks if t != "<|endoftext|>"]
            V = write_bpe(a.out, toks, merges, ["<s>", "<pad>", "</s>", "<unk>"], ["<mask>"])

    w = {}
    def qk_std(l):
        return (float(3 + 5 * (l % 3) / 2) / H) ** 0.5

    if a.family == "gpt2":
        cfg = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], vocab_size=V, n_embd=H, n_layer=L,
                   n_head=NH, n_positions=P, n_ctx=P, n_inner=None, activation_function=a.act if a.act != "gelu"
                   else "gelu_new", layer_norm_epsilon=1e-5, scale_attn_weights=True,
                   scale_attn_by_inverse_layer_idx=False, bos_token_id=V - 1, eos_token_id=V - 1)
        w["wte.weight"] = rnd(V, H, std=1.0)
        w["wpe.weight"] = rnd(P, H, std=0.5)
        for l in range(L):
            p = f"h.{l}."
            s = qk_std(l)
            w[p + "ln_1.weight"] = 1 + rnd(H, std=0.1)
            w[p + "ln_1.bias"] = rnd(H, std=0.1)
            # Conv1D: weight (in, out); q | k | v side by side
            w[p + "attn.c_attn.weight"] = torch.cat([rnd(H, H, std=s), rnd(H, H, std=s), rnd(H, H, std=H ** -0.5)], 1)
            w[p + "attn.c_attn.bias"] = torch.cat([rnd(H, std=0.2), rnd(H, std=0.2), rnd(H, std=0.1)])
            w[p + "attn.c_proj.weight"] = rnd(H, H, std=H ** -0.5)
            w[p + "attn.c_proj.bias"] = rnd(H, std=0.1)
            w[p + "ln_2.weight"] = 1 + rnd(H, std=0.1)
            w[p + "ln_2.bias"] = rnd(H, std=0.1)
            w[p + "mlp.c_fc.weight"] = rnd(H, FF, std=H ** -0.5)
            w[p + "mlp.c_fc.bias"] = rnd(FF, std=0.1)
            w[p + "mlp.c_proj.weight"] = rnd(FF, H, std=FF ** -0.5)
            w[p + "mlp.c_proj.bias"] = rnd(H, std=0.1)
            # older checkpoints carry the causal mask buffers: attnviz must ignore them
            w[p + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        w["ln_f.weight"] = 1 + rnd(H, std=0.1)
        w["ln_f.bias"] = rnd(H, std=0.1)
    elif a.family == "roberta":
        cfg = dict(model_type="roberta", architectures=["RobertaForMaskedLM"], vocab_size=V, hidden_size=H,
                   num_hidden_layers=L, num_attention_heads=NH, intermediate_size=FF, max_position_embeddings=P + 2,
                   type_vocab_size=1, layer_norm_eps=1e-5, hidden_act=a.act, pad_token_id=1, bos_token_id=0,
                   eos_token_id=2, position_embedding_type="absolute")
        w["embeddings.word_embeddings.weight"] = rnd(V, H, std=1.0)
        w["embeddings.position_embeddings.weight"] = rnd(P + 2, H, std=0.5)
        w["embeddings.token_type_embeddings.weight"] = rnd(1, H, std=0.5)
        w["embeddings.LayerNorm.weight"] = 1 + rnd(H, std=0.1)
        w["embeddings.LayerNorm.bias"] = rnd(H, std=0.1)
        for l in range(L):
            p = f"encoder.layer.{l}."
            s = qk_std(l)
            for name, shape, std in (("attention.self.query", (H, H), s), ("attention.self.key", (H, H), s),
                                     ("attention.self.value", (H, H), H ** -0.5),
                                     ("attention.output.dense", (H, H), H ** -0.5),
                                     ("intermediate.dense", (FF, H), H ** -0.5), ("output.dense", (H, FF), FF ** -0.5)):
                w[p + name + ".weight"] = rnd(*shape, std=std)
                w[p + name + ".bias"] = rnd(shape[0], std=0.2 if std == s else 0.1)
            for name in ("attention.output.LayerNorm", "output.LayerNorm"):
                w[p + name + ".weight"] = 1 + rnd(H, std=0.1)
                w[p + name + ".bias"] = rnd(H, std=0.1)
    else:
        cfg = dict(model_type="distilbert", architectures=["DistilBertForMaskedLM"], vocab_size=V, dim=H,
                   n_layers=L, n_heads=NH, hidden_dim=FF, max_position_embeddings=P, activation=a.act,
                   sinusoidal_pos_embds=False, dropout=0.1, attention_dropout=0.1, pad_token_id=0)
        w["embeddings.word_embeddings.weight"] = rnd(V, H, std=1.0)
        w["embeddings.position_embeddings.weight"] = rnd(P, H, std=0.5)
        w["embeddings.LayerNorm.weight"] = 1 + rnd(H, std=0.1)
        w["embeddings.LayerNorm.bias"] = rnd(H, std=0.1)
        for l in range(L):
            p = f"transformer.layer.{l}."
            s = qk_std(l)
            for name, shape, std in (("attention.q_lin", (H, H), s), ("attention.k_lin", (H, H), s),
                                     ("attention.v_lin", (H, H), H ** -0.5), ("attention.out_lin", (H, H), H ** -0.5),
                                     ("ffn.lin1", (FF, H), H ** -0.5), ("ffn.lin2", (H, FF), FF ** -0.5)):
                w[p + name + ".weight"] = rnd(*shape, std=std)
                w[p + name + ".bias"] = rnd(shape[0], std=0.2 if std == s else 0.1)
            for name in ("sa_layer_norm", "output_layer_norm"):
                w[p + name + ".weight"] = 1 + rnd(H, std=0.1)
                w[p + name + ".bias"] = rnd(H, std=0.1)
    out = {}
    pre = PREFIX[a.family] if a.naming == "prefixed" else ""
    for k, v in w.items():
        out[pre + k] = v
    # task heads real files carry beside the base model
    if a.family == "distilbert":
        out["vocab_transform.weight"] = rnd(H, H)
        out["vocab_layer_norm.weight"] = 1 + rnd(H, std=0.1)
        out["vocab_projector.bias"] = rnd(V)
    elif a.family == "roberta":
        out["lm_head.dense.weight"] = rnd(H, H)
        out["lm_head.bias"] = rnd(V)
    stio.save(os.path.join(a.out, "model.safetensors"), out, a.dtype)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
