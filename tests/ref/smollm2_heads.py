"""What SmolLM2-135M-Instruct's heads do (docs/real-heads.md): attention from attnviz's engine
(build/fwd_dump on the Q4_1 GGUF, weights kept quantized), token ids from transformers' tokenizer
built from the same file. Four scores per head, each a mean over rows:
  sink       attention on the first token (rows 1..n-1)
  previous   attention on the token just before (rows 1..n-1)
  line-start attention on the first token of the row's own line, for rows past it (newline-separated
             text: code and verse), excluding the first line
  induction  on a random token sequence repeated twice: attention from the second copy's token j to
             the token after its first occurrence (TransformerLens' induction score)
usage: smollm2_heads.py FWD_DUMP GGUF_FILE CORPUS [--top 3]
"""
import argparse
import os
import subprocess
import sys

import numpy as np
from transformers import AutoTokenizer


def attention(fwd, gguf, ids, prefix):
    r = subprocess.run([fwd, gguf, prefix] + [str(i) for i in ids], capture_output=True, text=True, check=True)
    import json
    m = json.loads(r.stdout)
    n = len(ids)
    return np.fromfile(prefix + ".attn", dtype=np.float32).reshape(m["layers"], m["heads"], n, n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fwd")
    ap.add_argument("gguf")
    ap.add_argument("corpus")
    ap.add_argument("--top", type=int, default=3)
    a = ap.parse_args()
    d, f = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    prefix = "/tmp/smollm2_heads"
    lines = [l.strip() for l in open(a.corpus, encoding="utf-8") if l.strip()]
    sink = prev = None
    count = 0
    for text in lines[:60]:
        ids = tok(text)["input_ids"]
        if len(ids) < 4:
            continue
        A = attention(a.fwd, a.gguf, ids, prefix)
        s = A[:, :, 1:, 0].mean(axis=-1)
        p = np.stack([A[:, :, i, i - 1] for i in range(1, len(ids))], axis=-1).mean(axis=-1)
        sink = s if sink is None else sink + s
        prev = p if prev is None else prev + p
        count += 1
    sink, prev = sink / count, prev / count
    # line starts: code and verse, one line per row of text
    texts = ["def area(r):\n    pi = 3.14159\n    return pi * r * r\n\nprint(area(2))\nprint(area(3))\n",
             "Roses are red,\nviolets are blue,\nsugar is sweet,\nand so are you.\n",
             "for i in range(10):\n    if i % 2:\n        print(i)\n    else:\n        continue\n",
             "The first line is short.\nThe second line is a little longer than the first.\nA third.\n"]
    ls_sum, ls_n = None, 0
    for text in texts:
        enc = tok(text, return_offsets_mapping=True)
        ids, offs = enc["input_ids"], enc["offset_mapping"]
        starts, cur = [], 0
        for i, (s0, _) in enumerate(offs):
            if i > 0 and "\n" in text[offs[i - 1][0]:offs[i - 1][1]]:
                cur = i
            starts.append(cur)
        A = attention(a.fwd, a.gguf, ids, prefix)
        rows = [i for i in range(len(ids)) if starts[i] > 0 and i > starts[i]]
        v = np.stack([A[:, :, i, starts[i]] for i in rows], axis=-1).mean(axis=-1)
        ls_sum = v if ls_sum is None else ls_sum + v
        ls_n += 1
    line_start = ls_sum / ls_n
    rng = np.random.default_rng(0)
    ind_sum = None
    for _ in range(4):
        seq = [int(x) for x in rng.integers(1000, 40000, 50)]
        ids = seq + seq
        A = attention(a.fwd, a.gguf, ids, prefix)
        v = np.stack([A[:, :, 50 + j, j + 1] for j in range(49)], axis=-1).mean(axis=-1)
        ind_sum = v if ind_sum is None else ind_sum + v
    induction = ind_sum / 4
    L, H = sink.shape
    print(f"SmolLM2-135M-Instruct Q4_1: {L} layers x {H} heads; sink/previous over {count} corpus lines, "
          f"line-start over {ls_n} code/verse texts, induction over 4 repeated random sequences of 50 tokens")
    for name, s in (("sink", sink), ("previous", prev), ("line-start", line_start), ("induction", induction)):
        order = np.argsort(-s, axis=None)[: a.top]
        best = ", ".join(f"L{i // H}H{i % H} {s.flat[i]:.3f}" for i in order)
        print(f"{name:10s} top {a.top}: {best}; median head {np.median(s):.3f}; heads above 0.5: {(s > 0.5).sum()}")
    print(f"sink by layer (mean over heads): " + " ".join(f"{v:.2f}" for v in sink.mean(axis=1)))


if __name__ == "__main__":
    sys.exit(main())
