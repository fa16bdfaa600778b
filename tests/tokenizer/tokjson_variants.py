"""Writes variants of real tokenizer.json files that exercise the components the four shipped
files do not use (NFKC/NFD/Lowercase/Strip, Replace with a regex, Whitespace, WhitespaceSplit,
Punctuation, Digits, every Split behavior and invert, Metaspace's schemes, ByteLevel's prefix
space, Roberta/Bert processing), for tokjson_check.sh to compare with the Rust library.
usage: tokjson_variants.py LLAMA3_JSON LLAMA2_JSON OUT_DIR  -> prints the file names written"""
import copy
import json
import os
import sys

llama3, llama2, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def variant(base, name, **parts):
    t = copy.deepcopy(base)
    t.update(parts)
    path = os.path.join(out, f"variant-{name}.json")
    json.dump(t, open(path, "w"))
    print(path)


def split(pattern, behavior, invert=False, regex=True):
    return {"type": "Split", "pattern": {"Regex" if regex else "String": pattern}, "behavior": behavior, "invert": invert}


variant(llama3, "nfkc-lower", normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]})
variant(llama3, "nfd-strip-replace", normalizer={"type": "Sequence", "normalizers": [
    {"type": "NFD"}, {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]})
variant(llama3, "whitespace", pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, BL]})
variant(llama3, "whitespacesplit", pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, BL]})
variant(llama3, "punct-digits", pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}]})
variant(llama3, "digits-runs", pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": False}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}]})
for behavior in ("Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
    for invert in (False, True):
        variant(llama3, f"split-{behavior}-{'inv' if invert else 'plain'}",
                pre_tokenizer={"type": "Sequence", "pretokenizers": [split("\\s+|[,.!?]", behavior, invert), BL]})
variant(llama3, "split-string", pre_tokenizer={"type": "Sequence", "pretokenizers": [split(" ", "MergedWithNext", regex=False), BL]})
variant(llama3, "roberta-post", post_processor={"type": "RobertaProcessing", "sep": ["<|end_of_text|>", 128001],
                                                "cls": ["<|begin_of_text|>", 128000], "trim_offsets": True, "add_prefix_space": False})
variant(llama3, "bert-post", post_processor={"type": "BertProcessing", "sep": ["<|end_of_text|>", 128001],
                                             "cls": ["<|begin_of_text|>", 128000]})
for scheme in ("always", "first", "never"):
    for split_ in (True, False):
        variant(llama2, f"metaspace-{scheme}-{'split' if split_ else 'whole'}", normalizer=None,
                pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split_})
# a word's last character with an end_of_word_suffix the vocabulary lacks: its bytes, the suffix's
# included, through byte_fallback (Llama 2's <0xNN> tokens), as the Rust library's merge_word takes them
eow = copy.deepcopy(llama2)
eow["model"]["end_of_word_suffix"] = "</w>"
variant(eow, "eow-bytefallback")
