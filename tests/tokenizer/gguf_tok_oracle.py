"""transformers' tokenizer built from a GGUF file (AutoTokenizer.from_pretrained(dir,
gguf_file=...)) encoding each input of a JSONL file: the oracle for gguf_tok_check.sh.
usage: gguf_tok_oracle.py FILE.gguf INPUTS_JSONL  -> one {"ids": [...]} line per input"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from transformers import AutoTokenizer  # noqa: E402

d, f = os.path.split(os.path.abspath(sys.argv[1]))
t = AutoTokenizer.from_pretrained(d, gguf_file=f)
with open(sys.argv[2], encoding="utf-8") as inp:
    for line in inp:
        print(json.dumps({"ids": t(json.loads(line))["input_ids"]}))
