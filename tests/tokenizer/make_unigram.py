"""Unigram tokenizer.json files made the way XLM-R's are: a SentencePiece Unigram model trained by
the `sentencepiece` package (so the Precompiled normalizer's charsmap is SentencePiece's own
nmt_nfkc, compiled by it), converted by transformers' XLMRobertaConverter or loaded into
transformers' XLMRobertaTokenizer and saved. The training text is the tokenizer checks' own inputs
(tests/tokenizer/corpus.tsv, tokjson_corpus.jsonl), so a file's pieces fit what it is tested on.

usage: make_unigram.py OUT_DIR          the reference files (tokjson_check.sh, lm_checkpoints.py):
         OUT_DIR/xlmr-converter.json      XLMRobertaConverter: Precompiled + Strip + Replace(" {2,}"),
                                          Metaspace; 2,000 pieces over every line (characters under
                                          coverage 0.995 are unknown)
         OUT_DIR/xlmr-unk.json            trained on the ASCII lines only: the other scripts are unk runs
         OUT_DIR/xlmr-bytefallback.json   the same with byte_fallback (<0x00>..<0xFF> pieces)
         OUT_DIR/xlmr/                    XLMRobertaTokenizer(vocab, charsmap).save_pretrained: the
                                          layout of a model folder (WhitespaceSplit + Metaspace, <mask>)
         OUT_DIR/xlmr-250k.json           that folder's file grown to XLM-R's 250,002 pieces with random
                                          ones (seeded; many scripts, scores -5 to -16): the trie and
                                          Viterbi at full size, many pieces competing
       make_unigram.py --tiny OUT_DIR    a small one for committed fixtures (tests/data/small-xlmr):
                                          120 pieces, a charsmap of a few hand rules (full-width
                                          letters and digits, the fi ligature, NBSP, e + U+0301)
Run with the reference Python (tools/pyref.sh).
"""
import base64
import json
import os
import random
import sys
import tempfile

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import sentencepiece as spm  # noqa: E402
from transformers import XLMRobertaTokenizer  # noqa: E402
from transformers.convert_slow_tokenizer import XLMRobertaConverter  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def lines():
    out = [l.rstrip("\n") for l in open(os.path.join(HERE, "corpus.tsv"), encoding="utf-8")]
    out += [json.loads(l) for l in open(os.path.join(HERE, "tokjson_corpus.jsonl"), encoding="utf-8")]
    return [l for l in out if l.strip()]


class _Slow:
    """What the converter reads of a slow tokenizer: the model file and the template's ids."""

    def __init__(self, path):
        self.vocab_file = path

    def convert_tokens_to_ids(self, t):
        return {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}[t]


def train(tmp, name, text, **kw):
    src = os.path.join(tmp, name + ".txt")
    with open(src, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")
    prefix = os.path.join(tmp, name)
    spm.SentencePieceTrainer.train(input=src, model_prefix=prefix, model_type="unigram", num_threads=1,
                                   minloglevel=2, **kw)
    return prefix + ".model"


def convert(model, byte_fallback, out):
    class Conv(XLMRobertaConverter):
        handle_byte_fallback = byte_fallback

    Conv(_Slow(model)).converted().save(out)


def folder(converted_json, out):
    """transformers' own XLMRobertaTokenizer over the converted vocabulary and charsmap, saved."""
    d = json.load(open(converted_json, encoding="utf-8"))
    cm = base64.b64decode(d["normalizer"]["normalizers"][0]["precompiled_charsmap"])
    tok = XLMRobertaTokenizer(vocab=[tuple(x) for x in d["model"]["vocab"]], _spm_precompiled_charsmap=cm)
    tok.save_pretrained(out)
    return len(d["model"]["vocab"])


def grow(src, size, out):
    d = json.load(open(src, encoding="utf-8"))
    rng = random.Random(5)
    alpha = ("abcdefghijklmnopqrstuvwxyzéèàüöñçß" "абвгдежзийклмнопрстуфхцчшщыэюя" "日本語中文的一是不了人我在有他这"
             "αβγδεζηθικλμνξοπρστυφχψω" "กขคงจ" "0123456789.,-")
    vocab, mask = d["model"]["vocab"][:-1], d["model"]["vocab"][-1]
    seen = {p for p, _ in vocab}
    while len(vocab) < size - 1:
        w = ("▁" if rng.random() < 0.4 else "") + "".join(rng.choice(alpha) for _ in range(rng.randint(1, 9)))
        if w not in seen:
            seen.add(w)
            vocab.append([w, -rng.uniform(5, 16)])
    d["model"]["vocab"] = vocab + [mask]
    for a in d["added_tokens"]:
        if a["content"] == mask[0]:
            a["id"] = size - 1
    with open(out, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)


def reference(out):
    os.makedirs(out, exist_ok=True)
    text = lines()
    ascii_only = [l for l in text if l.isascii()]
    with tempfile.TemporaryDirectory() as tmp:
        full = train(tmp, "full", text, vocab_size=2000, character_coverage=0.995)
        convert(full, False, os.path.join(out, "xlmr-converter.json"))
        folder(os.path.join(out, "xlmr-converter.json"), os.path.join(out, "xlmr"))
        grow(os.path.join(out, "xlmr", "tokenizer.json"), 250002, os.path.join(out, "xlmr-250k.json"))
        unk = train(tmp, "ascii", ascii_only, vocab_size=1500, character_coverage=1.0)
        convert(unk, False, os.path.join(out, "xlmr-unk.json"))
        bf = train(tmp, "ascii-bf", ascii_only, vocab_size=1500, character_coverage=1.0, byte_fallback=True)
        convert(bf, True, os.path.join(out, "xlmr-bytefallback.json"))


def tiny(out):
    os.makedirs(out, exist_ok=True)
    rules = [(0xFF21 + i, 0x41 + i) for i in range(26)] + [(0xFF41 + i, 0x61 + i) for i in range(26)]
    rules += [(0xFF10 + i, 0x30 + i) for i in range(10)]
    with tempfile.TemporaryDirectory() as tmp:
        tsv = os.path.join(tmp, "rules.tsv")
        with open(tsv, "w") as f:
            for a, b in rules:
                f.write(f"{a:X}\t{b:X}\n")
            f.write("FB01\t66 69\n")     # the fi ligature -> f i
            f.write("A0\t20\n")          # NBSP -> space
            f.write("65 301\tE9\n")      # e + combining acute (one grapheme) -> é
        model = train(tmp, "tiny", [l for l in lines() if l.isascii()][:300], vocab_size=120,
                      character_coverage=1.0, hard_vocab_limit=False, normalization_rule_tsv=tsv)
        conv = os.path.join(tmp, "tiny.json")
        convert(model, False, conv)
        n = folder(conv, out)
    return n


if __name__ == "__main__":
    if sys.argv[1:2] == ["--tiny"]:
        print(tiny(sys.argv[2]))
    else:
        reference(sys.argv[1])
