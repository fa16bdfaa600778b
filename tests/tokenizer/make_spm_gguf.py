"""Writes a GGUF holding only a SentencePiece-style ("llama") tokenizer, as llama.cpp's converter
stores Llama 2's: tokens, scores (no merges), token types, BOS/EOS/UNK ids. Tokens come from a
tokenizer.json (the @lenml Llama 2 package); a piece's score is minus its id, as in SentencePiece BPE
models, so the merges transformers recovers from the scores follow the vocabulary's order.
With ARCH gemma2 the file is written as llama.cpp writes Gemma's: no space prefix, runs of "▁" stored
as real spaces, and scores that do not give the merge order (all 0 here): a reader must respell the
blanks and rank merges by the tokens' order, as transformers' gemma_tokenizer does.
usage: make_spm_gguf.py TOKENIZER_JSON OUT.gguf [ARCH]"""
import json
import sys

import gguf

src, out = sys.argv[1], sys.argv[2]
arch = sys.argv[3] if len(sys.argv) > 3 else "llama"
t = json.load(open(src))
vocab = t["model"]["vocab"]
tokens = [None] * len(vocab)
for tok, i in vocab.items():
    tokens[i] = tok
special = {a["content"]: a["id"] for a in t["added_tokens"] if a["special"]}
# added tokens that are not special are user-defined pieces (type 4), as llama.cpp's converter marks them
user = {a["content"] for a in t["added_tokens"] if not a["special"]}
types, scores = [], []
for i, tok in enumerate(tokens):
    if tok == "<unk>":
        types.append(2)
    elif tok in special:
        types.append(3)
    elif tok in user:
        types.append(4)
    elif len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
        types.append(6)
    else:
        types.append(1)
    scores.append(0.0 if types[-1] != 1 else -float(i))
if arch == "gemma2":
    tokens = [" " * len(tok) if len(tok) > 1 and set(tok) == {"\u2581"} else tok for tok in tokens]
    scores = [0.0] * len(tokens)
w = gguf.GGUFWriter(out, arch)
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
w.add_bos_token_id(special.get("<s>", special.get("<bos>", 1)))
w.add_eos_token_id(special.get("</s>", special.get("<eos>", 2)))
if arch == "gemma2":
    w.add_add_space_prefix(False)
w.add_unk_token_id(vocab.get("<unk>", 0))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
