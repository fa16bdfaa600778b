"""What trained heads do: the top-3 heads per category of attnviz --stats on all-MiniLM-L6-v2 over
tests/data/corpus/sentences.txt, and an independent recomputation of the statistics with transformers.

usage: real_heads.py ATTNVIZ MODEL_DIR CORPUS [--expect FILE] [--write FILE] [--check-first N]
--expect: exit 1 unless the ranking equals FILE's; --write: write the ranking to FILE.
--check-first N: recompute every statistic for the first N corpus lines from transformers' BertModel
(eager attention) as docs/batch.md's --stats defines them, and compare with attnviz --stats on those lines.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CATEGORIES = [  # (name in the ranking, --stats key, what it is)
    ("cls", "cls", "share of attention on [CLS]"),
    ("sep", "sep", "share on [SEP]"),
    ("previous", "previous", "share on the previous token"),
    ("next", "next", "share on the next token"),
    ("self", "self", "share on the token itself"),
    ("broad", "entropy", "entropy (nats): broad attention"),
]


def stats(attnviz, model, corpus):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([attnviz, "--model", model, "--quiet", "--batch", corpus, "--stats", "--json", f.name],
                       check=True)
        return json.load(open(f.name))


def ranking(st):
    lines = []
    for name, key, _ in CATEGORIES:
        top = sorted(st["heads"], key=lambda h: -h[key])[:3]
        lines.append(name + ": " + " ".join(f"L{h['layer']}H{h['head']}={h[key]:.3f}" for h in top))
    return lines


def heads_only(lines):
    return [" ".join(tok.split("=")[0] for tok in line.split()) for line in lines]


def recompute(model_dir, corpus_lines, attnviz):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import AutoTokenizer, BertModel
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    keys = ["entropy", "mean_distance", "cls", "sep", "self", "previous", "next"]
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    sums = torch.zeros(L, H, len(keys), dtype=torch.float64)
    for line in corpus_lines:
        parts = line.split("\t")
        enc = tok(*parts, return_tensors="pt", truncation=True, max_length=512)
        with torch.no_grad():
            att = torch.stack(model(**enc, output_attentions=True).attentions)[:, 0].double()  # L,H,n,n
        n = att.shape[-1]
        ids = enc["input_ids"][0]
        i = torch.arange(n)
        dist = (i[:, None] - i[None, :]).abs().double()
        ent = -(att * torch.where(att > 0, att.log(), torch.zeros_like(att))).sum(-1).mean(-1)
        md = (att * dist).sum(-1).mean(-1)
        cls = att[..., ids == cls_id].sum(-1).mean(-1)
        sep = att[..., ids == sep_id].sum(-1).mean(-1)
        diag = att.diagonal(dim1=-2, dim2=-1)
        selfs = diag.mean(-1)
        prev = att.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
        nxt = att.diagonal(offset=1, dim1=-2, dim2=-1).mean(-1)
        sums += torch.stack([ent, md, cls, sep, selfs, prev, nxt], -1)
    ref = sums / len(corpus_lines)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(corpus_lines) + "\n")
    try:
        ours = stats(attnviz, model_dir, f.name)
    finally:
        os.unlink(f.name)
    worst = 0.0
    for h in ours["heads"]:
        for k, key in enumerate(keys):
            worst = max(worst, abs(h[key] - ref[h["layer"], h["head"], k].item()))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("model")
    ap.add_argument("corpus")
    ap.add_argument("--expect")
    ap.add_argument("--write")
    ap.add_argument("--check-first", type=int, default=0)
    a = ap.parse_args()
    st = stats(a.attnviz, a.model, a.corpus)
    lines = ranking(st)
    print(f"{st['inputs']} inputs")
    print("\n".join(lines))
    if a.write:
        open(a.write, "w").write("\n".join(heads_only(lines)) + "\n")
    rc = 0
    if a.check_first:
        corpus_lines = [x for x in open(a.corpus).read().splitlines() if x.strip()][:a.check_first]
        worst = recompute(a.model, corpus_lines, a.attnviz)
        print(f"--stats vs statistics recomputed from transformers over {len(corpus_lines)} inputs: "
              f"max |diff| {worst:.2e}")
        if worst > 1e-4:
            print(f"statistics differ from transformers' by {worst:.2e} > 1e-4")
            rc = 1
    if a.expect:
        want = open(a.expect).read().splitlines()
        got = heads_only(lines)
        if got != want:
            print("top-3 heads changed:\n  expected " + "\n  expected ".join(want) + "\n  got      "
                  + "\n  got      ".join(got))
            rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
