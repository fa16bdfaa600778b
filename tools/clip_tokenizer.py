"""CLIP's tokenizer as a Hugging Face folder, from the BPE file OpenAI published with CLIP
(bpe_simple_vocab_16e6.txt.gz, which PyPI's open-clip-torch carries): vocab.json and merges.txt
built the way CLIP's own SimpleTokenizer builds its vocabulary (the 256 byte characters, the same
with "</w>", the first 48,894 merges joined, <|startoftext|> and <|endoftext|>: the 49,408 tokens
of openai/clip-vit-base-patch32's vocab.json), then tokenizer.json written by transformers'
CLIPTokenizer from them (its converter's normalizer, pre-tokenizer, BPE with end_of_word_suffix
"</w>", RobertaProcessing).

usage: clip_tokenizer.py BPE_GZ OUT_DIR
"""
import gzip
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def bytes_to_unicode():
    """GPT-2's and CLIP's map of the 256 bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    src, out = sys.argv[1], sys.argv[2]
    lines = gzip.open(src).read().decode("utf-8").split("\n")
    merges = [tuple(m.split()) for m in lines[1:49152 - 256 - 2 + 1]]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab]
    vocab += ["".join(m) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    assert len(vocab) == 49408 and len(set(vocab)) == 49408, len(vocab)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
    import transformers
    tok = transformers.CLIPTokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    tok.save_pretrained(out)
    t = json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))
    assert t["model"]["type"] == "BPE" and t["model"].get("end_of_word_suffix") == "</w>", t["model"].get("end_of_word_suffix")
    ids = tok("a photo of a cat")["input_ids"]
    print(f"tokenizer.json: {len(t['model']['vocab'])} tokens, {len(t['model']['merges'])} merges; "
          f"'a photo of a cat' -> {ids}")


if __name__ == "__main__":
    main()
