"""Writes a GGUF holding only a SentencePiece-style ("llama") tokenizer, as llama.cpp's converter
stores Llama 2's: tokens, scores (no merges), token types, BOS/EOS/UNK ids. Tokens come from a
tokenizer.json (the @lenml Llama 2 package); a piece's score is minus its id, as in SentencePiece BPE
models, so the merges transformers recovers from the scores follow the vocabulary's order.
usage: make_spm_gguf.py TOKENIZER_JSON OUT.gguf"""
import json
import sys

import gguf

src, out = sys.argv[1], sys.argv[2]
t = json.load(open(src))
vocab = t["model"]["vocab"]
tokens = [None] * len(vocab)
for tok, i in vocab.items():
    tokens[i] = tok
special = {a["content"]: a["id"] for a in t["added_tokens"] if a["special"]}
types, scores = [], []
for i, tok in enumerate(tokens):
    if tok == "<unk>":
        types.append(2)
    elif tok in special:
        types.append(3)
    elif len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
        types.append(6)
    else:
        types.append(1)
    scores.append(0.0 if types[-1] != 1 else -float(i))
w = gguf.GGUFWriter(out, "llama")
w.add_block_count(1)
w.add_context_length(64)
w.add_embedding_length(8)
w.add_feed_forward_length(16)
w.add_head_count(2)
w.add_layer_norm_rms_eps(1e-5)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(special.get("<s>", 1))
w.add_eos_token_id(special.get("</s>", 2))
w.add_unk_token_id(vocab.get("<unk>", 0))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
