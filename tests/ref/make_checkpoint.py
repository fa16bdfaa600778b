#!/usr/bin/python3
"""Writes synthetic BERT checkpoints in the real Hugging Face layouts.

usage: make_checkpoint.py OUT_DIR [--shape small|base] [--dtype F32|F16|BF16]
                          [--naming hf|google] [--seed N] [--vocab FILE] [--act gelu|gelu_new|relu]

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="small", choices=SHAPES)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--naming", default="hf", choices=["hf", "google"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", help="vocab.txt to use (its size sets vocab_size)")
    ap.add_argument("--act", default="gelu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
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


if __name__ == "__main__":
    main()
