"""Writes tokenizer.json for a Marian (OPUS-MT) model folder, which ships only SentencePiece files
(source.spm, target.spm) and vocab.json, and for which transformers has no converter. attnviz reads
the folder's tokenizer.json; this makes one from the source side, as MarianTokenizer encodes a source
text: source.spm's Unigram pieces (its scores, normalizer and whitespace handling, through
transformers' SpmConverter) numbered by vocab.json, then </s>.

usage: python3 tools/marian_tokenizer.py MODEL_DIR [OUT_FILE]     (default MODEL_DIR/tokenizer.json)
Needs sentencepiece, protobuf, tokenizers and transformers (the reference Python: tools/pyref.sh).

What it does not reproduce (MarianTokenizer's Python steps around SentencePiece): Moses punctuation
normalization (only when sacremoses is installed and the config names a source language); a >>xx<<
language code is a special token anywhere in the text, not only at its start; a piece of source.spm
missing from vocab.json (MarianTokenizer: <unk>) is not a piece here, so the text around it is cut
otherwise; the target side (target.spm) is not read: one tokenizer serves both sides.
"""
import json
import os
import sys
import types

from tokenizers import AddedToken, processors
from transformers.convert_slow_tokenizer import SpmConverter


class MarianSourceConverter(SpmConverter):
    """source.spm's model, normalizer and pre-tokenizer; vocab.json's numbering; `$A </s>`."""

    def __init__(self, spm_path, vocab, unk, eos):
        self.ids, self.unk, self.eos = vocab, unk, eos
        super().__init__(types.SimpleNamespace(vocab_file=spm_path, add_prefix_space=True, legacy=True))

    def vocab(self, proto):
        scores = {p.piece: p.score for p in proto.pieces if p.type in (1, 4)}  # normal and user-defined pieces
        floor = min(scores.values()) if scores else 0.0
        by_id = sorted(self.ids.items(), key=lambda kv: kv[1])
        if [i for _, i in by_id] != list(range(len(by_id))):
            raise SystemExit("vocab.json's ids are not 0..n-1 without gaps")
        # vocab.json's pieces the source model never makes (target-only pieces, <pad>, language codes) get a
        # score no segmentation prefers: MarianTokenizer cannot produce them from text either
        return [(piece, scores.get(piece, floor - 1e4)) for piece, _ in by_id]

    def unk_id(self, proto):
        return self.ids[self.unk]

    def post_processor(self):
        return processors.TemplateProcessing(single=f"$A {self.eos}", pair=f"$A $B {self.eos}",
                                             special_tokens=[(self.eos, self.ids[self.eos])])


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    d = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(d, "tokenizer.json")
    vocab = json.load(open(os.path.join(d, "vocab.json"), encoding="utf-8"))
    cfg_path = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8")) if os.path.exists(cfg_path) else {}
    tok_name = lambda k, dflt: (cfg.get(k) or {}).get("content", dflt) if isinstance(cfg.get(k), dict) else cfg.get(k, dflt)  # noqa: E731
    unk, eos, pad = tok_name("unk_token", "<unk>"), tok_name("eos_token", "</s>"), tok_name("pad_token", "<pad>")
    for t in (unk, eos, pad):
        if t not in vocab:
            raise SystemExit(f"{d}/vocab.json has no {t}")
    tok = MarianSourceConverter(os.path.join(d, "source.spm"), vocab, unk, eos).converted()
    codes = [p for p in vocab if p.startswith(">>") and p.endswith("<<")]
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in [eos, unk, pad] + codes])
    tok.save(out)
    print(f"wrote {out}: {tok.get_vocab_size()} pieces ({len(codes)} language codes)")


if __name__ == "__main__":
    main()
