"""Compares build/tokenize --tokens with tokjson_oracle.py --tokens, line by line: ids must be equal
and so must the token strings, except that where the Rust library's Unigram model gives an unknown
stretch it spells the token as that stretch of text, and attnviz as the vocabulary's unk piece
(the id is the same); those are counted apart.

usage: tokens_compare.py OURS REF   -> "SAME TOTAL UNK_SPELLED FIRST_DIFF" (FIRST_DIFF 0 when none)"""
import json
import sys

ours = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
ref = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
same = unk_spelled = first = 0
for i, (a, b) in enumerate(zip(ours, ref), 1):
    ok = a.get("ids") == b["ids"] and len(a.get("tokens", [])) == len(b["tokens"])
    if ok:
        for ta, tb in zip(a["tokens"], b["tokens"]):
            if ta != tb:
                if ta == "<unk>":
                    unk_spelled += 1
                else:
                    ok = False
    if ok:
        same += 1
    elif not first:
        first = i
if len(ours) != len(ref) and not first:
    first = min(len(ours), len(ref)) + 1
print(same, len(ref), unk_spelled, first)
