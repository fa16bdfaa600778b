"""attnviz diff against an independent reference: transformers' own model classes (eager
attention, float32) run on the token ids attnviz reports, and scipy's jensenshannon (squared:
scipy returns the distance, the square root of the divergence; base 2) over the merged key
axis (aligned keys, then each input's unaligned keys with weight 0 on the other side), averaged
over aligned query rows. The alignment is checked to be a common subsequence of the ids as long
as a plain dynamic-programming LCS.

usage: diff_check.py ATTNVIZ WORKDIR [--tol 1e-5]
Cases: two texts on a synthetic BERT and on a synthetic GPT-2 (tests/ref/make_checkpoint.py),
one text on two BERTs of one vocabulary (seeds 31, 32). Prints the max |divergence - reference|
per case and exits 1 above --tol.
"""
import argparse
import json
import os
import warnings
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModel  # noqa: E402

try:
    from scipy.spatial.distance import jensenshannon
    REF = "scipy.spatial.distance.jensenshannon(base=2)**2"
except ImportError:  # the wrapper installs scipy; without it, the textbook formula in numpy
    REF = "numpy: 0.5 KL(p||m) + 0.5 KL(q||m), base 2 (scipy not available)"

    def jensenshannon(p, q, base=2):
        p, q = np.asarray(p, float) / np.sum(p), np.asarray(q, float) / np.sum(q)
        m = (p + q) / 2
        kl = lambda x: np.sum(np.where(x > 0, x * np.log(np.where(x > 0, x, 1) / m), 0.0))  # noqa: E731
        return np.sqrt((0.5 * kl(p) + 0.5 * kl(q)) / np.log(base))

warnings.filterwarnings("ignore", "invalid value encountered in sqrt")
HERE = os.path.dirname(os.path.abspath(__file__))


def checkpoint(work, name, family, seed):
    d = os.path.join(work, name)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_checkpoint.py"), d, "--family", family,
                        "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)
    return d


def lcs_len(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            t[i][j] = t[i + 1][j + 1] + 1 if a[i] == b[j] else max(t[i + 1][j], t[i][j + 1])
    return t[0][0]


def hf_attention(model_dir, side):
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    kw = {"input_ids": torch.tensor([side["input_ids"]])}
    if model.config.model_type == "bert":
        kw["token_type_ids"] = torch.tensor([side["token_type_ids"]])
    with torch.no_grad():
        out = model(**kw, output_attentions=True)
    return np.stack([a[0].double().numpy() for a in out.attentions])  # (L, H, n, n)


def reference(A, B, al):
    pairs, only_a, only_b = al["pairs"], al["only_a"], al["only_b"]
    L, H = A.shape[:2]
    out = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            tot = 0.0
            for i, j in pairs:
                p, q = A[l, h, i], B[l, h, j]
                pv = [p[x] for x, _ in pairs] + [p[x] for x in only_a] + [0.0] * len(only_b)
                qv = [q[y] for _, y in pairs] + [0.0] * len(only_a) + [q[y] for y in only_b]
                js = jensenshannon(pv, qv, base=2)
                if np.isnan(js):  # scipy takes the root of a rounding-negative 0 for (near) equal rows
                    assert np.allclose(np.array(pv) / sum(pv), np.array(qv) / sum(qv), atol=1e-12), (l, h, i, j)
                    js = 0.0
                tot += js ** 2
            out[l, h] = tot / len(pairs)
    return out


def run_case(attnviz, label, models, texts, tol):
    args = [attnviz, "diff", "--quiet", "--precision", "9", "--json", "-"]
    for m in models:
        args += ["--model", m]
    d = json.loads(subprocess.run(args + texts, check=True, capture_output=True).stdout)
    a, b, al = d["a"], d["b"], d["alignment"]
    ia, ib = a["input_ids"], b["input_ids"]
    assert all(ia[i] == ib[j] for i, j in al["pairs"]), "aligned tokens differ"
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in zip(al["pairs"], al["pairs"][1:])), "not monotone"
    assert len(al["pairs"]) == lcs_len(ia, ib), (label, len(al["pairs"]), lcs_len(ia, ib))
    A = hf_attention(models[0], a)
    B = hf_attention(models[-1], b)
    att = max(np.abs(A - np.array(a["attention"])).max(), np.abs(B - np.array(b["attention"])).max())
    ref = reference(A, B, al)
    got = np.array(d["divergence"]["per_head"])
    worst = float(np.abs(got - ref).max())
    print(f"  {label}: {len(ia)} + {len(ib)} tokens, {len(al['pairs'])} aligned; attention vs transformers "
          f"max |diff| {att:.2e}; divergence vs reference max |diff| {worst:.2e} (largest {ref.max():.4f} bits)")
    return worst <= tol, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("work")
    ap.add_argument("--tol", type=float, default=1e-5)
    o = ap.parse_args()
    torch.set_num_threads(2)
    bert = checkpoint(o.work, "bert-31", "bert", 31)
    bert2 = checkpoint(o.work, "bert-32", "bert", 32)
    gpt2 = checkpoint(o.work, "gpt2-33", "gpt2", 33)
    print("  reference: " + REF)
    cases = [
        ("diff_ref_bert_two_texts", [bert], ["the cat sat on the mat", "the dog sat on a mat and it was tired"]),
        ("diff_ref_gpt2_two_texts", [gpt2], ["time flies like the cat sat on the mat", "the dog sat on the mat like an arrow"]),
        ("diff_ref_bert_two_models", [bert, bert2], ["hello world it was tired"]),
    ]
    ok = True
    for name, models, texts in cases:
        try:
            good, worst = run_case(o.attnviz, name, models, texts, o.tol)
            print(("PASS " if good else "FAIL ") + name + ("" if good else f": max |diff| {worst:.2e} > {o.tol}"))
            ok &= good
        except (AssertionError, subprocess.CalledProcessError) as e:
            print(f"FAIL {name}: {e}")
            ok = False
    # nothing in common (GPT-2 has no [CLS]): one line, exit 1, no output
    r = subprocess.run([o.attnviz, "diff", "--quiet", "--model", gpt2, "--json", os.path.join(o.work, "none.json"),
                        "time flies", "cat dog"], capture_output=True, text=True)
    good = r.returncode == 1 and r.stderr.count("\n") == 1 and "no token of A (2) is also in B (4)" in r.stderr \
        and not os.path.exists(os.path.join(o.work, "none.json"))
    print("PASS diff_ref_nothing_aligned" if good else f"FAIL diff_ref_nothing_aligned: exit {r.returncode}: {r.stderr}")
    ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
