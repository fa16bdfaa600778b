"""The Rust tokenizers library (PyPI's `tokenizers`) encoding each input of a JSONL file with a
tokenizer.json: the oracle for tests/tokenizer/tokjson_check.sh.
usage: tokjson_oracle.py TOKENIZER_JSON INPUTS_JSONL [--tokens]  -> one {"ids": [...]} line per input
(with --tokens {"ids": [...], "tokens": [...]}: the encoding's token strings as well)"""
import json
import sys

from tokenizers import Tokenizer

t = Tokenizer.from_file(sys.argv[1])
# a file's batch settings (MiniLM's pads and truncates to 128) are not tokenization: attnviz
# truncates to the model's positions and never pads
t.no_truncation()
t.no_padding()
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        enc = t.encode(json.loads(line))
        if "--tokens" in sys.argv[3:]:
            print(json.dumps({"ids": enc.ids, "tokens": enc.tokens}, ensure_ascii=False))
        else:
            print(json.dumps({"ids": enc.ids}))
