"""attnviz heads against TransformerLens's head detector (transformer_lens.head_detector).

usage: heads_check.py ATTNVIZ WORKDIR

Builds a synthetic GPT-2 checkpoint (make_checkpoint.py: 3 layers x 4 heads, byte-level BPE,
peaky random attention), loads it in TransformerLens (TransformerBridge.boot_transformers: raw
Hugging Face weights, no LayerNorm folding or centering, so its attention is the checkpoint's)
and compares, per layer and head:
  - previous_token_head and duplicate_token_head: detect_head(model, lines, name) (the mean over
    the lines, BOS prepended by TransformerLens; attnviz reads the same lines with
    <|endoftext|> written in front) with attnviz heads --score previous/duplicate; also with
    exclude_bos=True, exclude_current_token=True against --exclude-bos --exclude-current;
  - induction_head: attnviz's own random repeated sequences (the ids its JSON records), run
    through TransformerLens and scored by detect_head's steps on token ids
    (get_induction_head_detection_pattern, compute_head_attention_similarity_score; detect_head
    itself takes text, and random ids do not survive decoding and re-tokenizing);
  - a user pattern: a 64 x 64 .npy template (keys i-2 and 0) through --pattern, against
    detect_head(model, line, template[:n, :n]) per line.
Prints the largest |difference| per score; exit 1 when one exceeds 1e-4.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import transformers

TOL = 1e-4
LINES = [
    "the cat sat on the mat and the cat sat",
    "a dog saw a cat; the dog ran",
    "one two three one two three",
    "hello world hello",
    "time flies like an arrow",
    "fruit flies like a banana, fruit flies",
]
BOS = "<|endoftext|>"


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def table(doc, name):
    """{(layer, head): mean} of one score from attnviz heads --json."""
    return {(h["layer"], h["head"]): h[name] for h in doc["heads"]}


def main():
    attnviz, work = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    ckpt, tl_dir = os.path.join(work, "gpt2"), os.path.join(work, "gpt2_tl")
    run([sys.executable, os.path.join(here, "make_checkpoint.py"), ckpt, "--family", "gpt2", "--shape", "small"])
    # TransformerLens loads the tokenizer through AutoTokenizer: the same vocab.json and merges.txt
    shutil.copytree(ckpt, tl_dir)
    with open(os.path.join(tl_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer", "bos_token": BOS, "eos_token": BOS, "unk_token": BOS,
                   "add_prefix_space": False}, f)
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("".join(BOS + l + "\n" for l in LINES))
    n_max = 64
    template = np.zeros((n_max, n_max), dtype=np.float32)
    for i in range(n_max):
        template[i, 0] = 1
        if i >= 2:
            template[i, i - 2] = 1
    tpath = os.path.join(work, "template.npy")
    np.save(tpath, template)

    t0 = time.time()
    base = [attnviz, "heads", "--model", ckpt, "--quiet", "--batch", corpus]
    out = os.path.join(work, "heads.json")
    run(base + ["--json", out, "--seed", "7", "--induction-seqs", "4", "--induction-len", "12", "--pattern", tpath])
    ours = json.load(open(out))
    out_ex = os.path.join(work, "heads_ex.json")
    run(base + ["--json", out_ex, "--score", "previous", "--score", "duplicate", "--exclude-bos", "--exclude-current"])
    ours_ex = json.load(open(out_ex))
    toks = [json.loads(l)["input_ids"] for l in
            run([attnviz, "--model", ckpt, "--quiet", "--tokens-only", "--batch", corpus]).splitlines()]
    t_ours = time.time() - t0

    from transformer_lens import head_detector as hd
    from transformer_lens.model_bridge import TransformerBridge
    t0 = time.time()
    model = TransformerBridge.boot_transformers(tl_dir)
    model.eval()
    for line, ids in zip(LINES, toks):
        theirs = model.to_tokens(line)[0].tolist()
        if theirs != ids:
            sys.exit(f"tokens differ for {line!r}: TransformerLens {theirs}, attnviz {ids}")
    L, H = model.cfg.n_layers, model.cfg.n_heads
    results = []

    def compare(label, tl, mine):
        worst = max(abs(float(tl[l, h]) - mine[(l, h)]) for l in range(L) for h in range(H))
        results.append((label, worst))

    with torch.no_grad():
        for name, score in [("previous_token_head", "previous"), ("duplicate_token_head", "duplicate")]:
            compare(f"{score} (detect_head {name})", hd.detect_head(model, LINES, name), table(ours, score))
            tl = torch.stack([hd.detect_head(model, l, name, exclude_bos=True, exclude_current_token=True)
                              for l in LINES]).mean(0)
            compare(f"{score} --exclude-bos --exclude-current", tl, table(ours_ex, score))
        per = []
        for block in ours["induction"]:
            for ids in block["ids"]:
                tokens = torch.tensor([ids])
                pattern = hd.get_induction_head_detection_pattern(tokens)
                _, cache = model.run_with_cache(tokens, remove_batch_dim=True)
                m = torch.zeros(L, H)
                for l in range(L):
                    for h in range(H):
                        m[l, h] = hd.compute_head_attention_similarity_score(
                            cache["pattern", l, "attn"][h], detection_pattern=pattern, exclude_bos=False,
                            exclude_current_token=False, error_measure="mul")
                per.append(m)
        compare(f"induction ({len(per)} random repeated sequences)", torch.stack(per).mean(0), table(ours, "induction"))
        tl = torch.stack([hd.detect_head(model, l, torch.from_numpy(template[:len(ids), :len(ids)]))
                          for l, ids in zip(LINES, toks)]).mean(0)
        compare("pattern (.npy template, detect_head with a tensor)", tl, table(ours, "pattern"))
    t_tl = time.time() - t0
    bad = 0
    for label, worst in results:
        print(f"  {label}: max |attnviz - TransformerLens| = {worst:.2e}")
        bad += not worst <= TOL
    print(f"  {L} layers x {H} heads, {len(LINES)} lines; attnviz {t_ours:.2f} s, TransformerLens {t_tl:.2f} s")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
