"""Writes the small committed fixtures of the BERT-shaped families transformers adds beyond BERT's own
(test_model.c checks them without torch): one tiny checkpoint per family made by transformers' own
classes (…ForMaskedLM, save_pretrained), real tokenizer files, and golden.json from transformers'
eager attention in the encoder fixtures' format (per case input_ids, token_type_ids, attention,
queries, keys as the eager attention function receives them, last_hidden).

  small-xlmr     XLMRobertaForMaskedLM, F32, with make_unigram.py --tiny's Unigram tokenizer.json
                 (a charsmap compiled by sentencepiece; test_tokjson reads it too)
  small-electra  ElectraForMaskedLM, BF16, embeddings of 24 projected to a hidden state of 16
                 (embeddings_project; the generator head maps back to 24), a small WordPiece vocab.txt

usage: make_encoder_goldens.py OUT_DIR [NAME...]   (tests/data; run with tools/pyref.sh's python)
"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForMaskedLM, AutoTokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tokenizer"))
import make_unigram  # noqa: E402

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=4, num_hidden_layers=2)
TEXTS = ["time flies like an arrow.", "the cat sat on the mat\tit was tired"]


def electra_vocab(path):
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    toks += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks += ["the", "time", "flies", "like", "an", "arrow", "cat", "sat", "on", "mat", "it", "was", "tired"]
    toks = list(dict.fromkeys(toks))
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in toks))
    with open(os.path.join(os.path.dirname(path), "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "ElectraTokenizer"}, f)
    return len(toks)


def main(out_root, only):
    fixtures = {
        "small-xlmr": ("XLMRobertaConfig", dict(max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
                                                bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5), "float32"),
        "small-electra": ("ElectraConfig", dict(embedding_size=24, max_position_embeddings=64, type_vocab_size=2,
                                                pad_token_id=0), "bfloat16"),
    }
    for name, (cls, extra, dtype) in fixtures.items():
        if only and name not in only:
            continue
        out = os.path.join(out_root, name)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        vocab = make_unigram.tiny(out) if cls == "XLMRobertaConfig" else electra_vocab(os.path.join(out, "vocab.txt"))
        torch.manual_seed(sum(map(ord, name)))
        cfg = getattr(transformers, cls)(vocab_size=vocab, **dict(SMALL, **extra))
        model = AutoModelForMaskedLM.from_config(cfg, attn_implementation="eager").float().eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if p.dim() == 1:
                    p.copy_((0.0 if "bias" in pname else 1.0) + 0.1 * torch.randn_like(p))
                elif "query" in pname or "key" in pname:
                    p.normal_(0, 0.5)
                else:
                    p.normal_(0, 0.3)
        model.to(getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
        ref = AutoModelForMaskedLM.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(out)
        mod = sys.modules[type(ref.base_model.encoder.layer[0].attention.self).__module__]
        cases = []
        gen = torch.Generator().manual_seed(3)
        n_long = 40  # past test_model's 37-token kernel case; 64 positions for its 61
        inputs = [tok(*t.split("\t")) for t in TEXTS]
        inputs = [{"input_ids": e["input_ids"], "token_type_ids": e.get("token_type_ids") or [0] * len(e["input_ids"])}
                  for e in inputs]
        ids = torch.randint(5, vocab, (n_long,), generator=gen).tolist()
        inputs.append({"input_ids": ids, "token_type_ids": [0] * n_long})  # every position
        for inp in inputs:
            qs, ks = [], []
            orig = mod.eager_attention_forward

            def wrapped(module, query, key, *a, **k):
                qs.append(query[0].detach().clone())
                ks.append(key[0].detach().clone())
                return orig(module, query, key, *a, **k)

            mod.eager_attention_forward = wrapped
            try:
                with torch.no_grad():
                    o = ref.base_model(torch.tensor([inp["input_ids"]]),
                                       token_type_ids=torch.tensor([inp["token_type_ids"]]), output_attentions=True)
            finally:
                mod.eager_attention_forward = orig
            r4 = lambda t: [[[[round(float(x), 7) for x in row] for row in m] for m in h] for h in t]  # noqa: E731
            cases.append(dict(inp, attention=r4(torch.stack([a[0] for a in o.attentions])),
                              queries=r4(torch.stack(qs)), keys=r4(torch.stack(ks)),
                              last_hidden=[[round(float(x), 7) for x in row] for row in o.last_hidden_state[0]]))
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(cases, f)
        print(name, dtype, sorted(os.listdir(out)), os.path.getsize(os.path.join(out, "model.safetensors")), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data", set(sys.argv[2:]))
