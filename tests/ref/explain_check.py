"""attnviz --explain L.H against TransformerLens's residual decomposition, on the synthetic GPT-2 and Llama
checkpoints of lm_checkpoints.py (transformers writes them: GPT-2 124M's shape, SmolLM2-135M's shape with
9 query heads over 3 kv heads and rotary positions; 2 layers), in float64.

TransformerLens (TransformerBridge in compatibility mode, fold_ln: the layer norm's weight folded into W_Q
and W_K, its bias into b_Q and b_K; no centring of the writing weights) decomposes the stream entering
layer L: cache.get_full_resid_decomposition(layer=L, expand_neurons=False, apply_ln=True) -- every head's
result, every MLP's output, embed (+ pos_embed), the accumulated biases -- each centred (LayerNorm) and
divided by the layer's cached ln1 scale. Each part times W_Q[L, h] (b_Q added to the bias part), rotated by
transformers' own rotary cos/sin for its token (Llama), against each key part times W_K[L, h]:
    matrix[c][c'] = q_c(i) . k_c'(j) / sqrt(d_head)
compared with attnviz's "explain" matrix (embed and pos_embed are attnviz's one "embeddings" part).

usage: explain_check.py ATTNVIZ WORKDIR [--repo DIR] [--kernels avx512,avx2,scalar]
For every head of layer 1, two texts, the pairs attnviz picks (its 3 strongest) and one given with --query
and --key; on every kernel in --kernels:
- attnviz's parts sum to its score: |parts_sum - score| <= 1e-5 |score|;
- its score against TransformerLens's blocks.1.attn.hook_attn_scores: <= 1e-4 max(1, |score|);
- its matrix against the decomposition above: max |diff| <= 1e-4 max(1, max |matrix|);
- the decomposition itself sums to TransformerLens's score (<= 1e-6 relative: transformers' rotary tables are
  float32), so the reference is whole.
One PASS/FAIL line per model and kernel; exit 1 on any FAIL.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_checkpoints  # noqa: E402
from tl_bridge import bridge, run  # noqa: E402

TEXTS = ["The cat sat on the mat. The cat sat on the", "time flies like an arrow; fruit flies like a banana"]
LAYER = 1


def rotary(hf, n):
    """transformers' cos and sin (n, d_head) for positions 0..n-1, or None (learned positions)."""
    inner = getattr(hf, "model", None)
    rot = getattr(inner, "rotary_emb", None) if inner is not None else None
    if rot is None:
        return None
    x = torch.zeros(1, n, hf.config.hidden_size, dtype=torch.float64)
    cos, sin = rot(x, torch.arange(n)[None])
    return cos[0].double().numpy(), sin[0].double().numpy()


def rotate(v, cos, sin):
    half = v.shape[-1] // 2
    rh = np.concatenate([-v[..., half:], v[..., :half]], -1)
    return v * cos + rh * sin


def reference(b, hf, ids, layer):
    """per head: (labels, q parts (C, n, dh), k parts (C, n, dh), scores (n, n)); parts in attnviz's order."""
    t = torch.tensor([ids])
    n = len(ids)
    with torch.no_grad():
        _, cache = b.run_with_cache(t)
        stack, labels = cache.get_full_resid_decomposition(layer=layer, expand_neurons=False, apply_ln=True,
                                                           return_labels=True)
    stack = stack[:, 0].numpy()  # (C, n, d_model)
    # attnviz's order: embeddings, then per earlier layer its heads and its MLP, then biases
    emb = sum(stack[i] for i, lab in enumerate(labels) if lab in ("embed", "pos_embed"))
    order = [emb]
    names = ["embeddings"]
    for l in range(layer):
        for h in range(b.cfg.n_heads):
            order.append(stack[labels.index(f"L{l}H{h}")])
            names.append(f"L{l}.H{h}")
        order.append(stack[labels.index(f"{l}_mlp_out")])
        names.append(f"MLP {l}")
    order.append(stack[labels.index("bias")])
    names.append("biases")
    # attnviz's "rounding" part (its float32 pass's stream beyond the parts it recomputes): none in float64
    order.append(np.zeros_like(emb))
    names.append("rounding")
    parts = np.stack(order)  # (C, n, d_model)
    rot = rotary(hf, n)
    with torch.no_grad():
        WQ, WK = b.W_Q[layer].double().numpy(), b.W_K[layer].double().numpy()
        # a bias-free projection (Llama) has no stacked b_Q / b_K
        bQ = b.b_Q[layer].double().numpy() if b.blocks[0].attn.b_Q is not None else np.zeros(WQ.shape[::2])
        bK = b.b_K[layer].double().numpy() if b.blocks[0].attn.b_K is not None else np.zeros(WK.shape[::2])
    scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][0].double().numpy()  # (heads, n, n)
    nh = b.cfg.n_heads
    group = nh // WK.shape[0] if WK.shape[0] != nh else 1
    out = []
    for h in range(nh):
        kh = h // group if WK.shape[0] != nh else h
        q = parts @ WQ[h]  # (C, n, dh)
        k = parts @ WK[kh]
        q[-2] += bQ[h]  # the biases part (the last is attnviz's rounding)
        k[-2] += bK[kh]
        if rot is not None:
            q = rotate(q, rot[0][None], rot[1][None])
            k = rotate(k, rot[0][None], rot[1][None])
        out.append((names, q, k, scores[h]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    ap.add_argument("--kernels", default="avx512,avx2,scalar")
    a = ap.parse_args()
    failed = 0
    for name in ("gpt2", "llama"):
        miss = lm_checkpoints.missing(name, a.repo)
        if miss:
            print(f"FAIL explain {name}: tokenizer source {miss} is absent (tools/deps.sh test)")
            failed = 1
            continue
        path = lm_checkpoints.build(name, a.workdir, a.repo)
        b, hf = bridge(path, center_writing_weights=False)
        refs = {}
        for kernel in a.kernels.split(","):
            problems, worst_sum, worst_score, worst_m, worst_ref, pairs = [], 0.0, 0.0, 0.0, 0.0, 0
            for text in TEXTS:
                for h in range(b.cfg.n_heads):
                    docs = [run(a.attnviz, path, text, kernel, ["--explain", f"{LAYER}.{h}"])]
                    p0 = docs[0]["explain"]["pairs"][0]
                    docs.append(run(a.attnviz, path, text, kernel, ["--explain", f"{LAYER}.{h}", "--query",
                                                                    str(len(docs[0]["input_ids"]) - 1), "--key", "1"]))
                    ids = docs[0]["input_ids"]
                    key = (text, tuple(ids))
                    if key not in refs:
                        refs[key] = reference(b, hf, ids, LAYER)
                    names, q, k, scores = refs[key][h]
                    for doc in docs:
                        x = doc["explain"]
                        if x["parts"] != names:
                            problems.append(f"head {h}: parts {x['parts'][:4]}..., TransformerLens {names[:4]}...")
                            continue
                        for pr in x["pairs"]:
                            i, j = pr["query"], pr["key"]
                            m = np.array(pr["matrix"])
                            ref = np.einsum("cd,ed->ce", q[:, i], k[:, j]) / np.sqrt(q.shape[-1])
                            worst_ref = max(worst_ref, abs(ref.sum() - scores[i, j]) / max(1.0, abs(scores[i, j])))
                            worst_sum = max(worst_sum, abs(pr["parts_sum"] - pr["score"]) / max(abs(pr["score"]), 1e-30))
                            worst_score = max(worst_score, abs(pr["score"] - scores[i, j]) / max(1.0, abs(scores[i, j])))
                            worst_m = max(worst_m, float(np.abs(m - ref).max()) / max(1.0, float(np.abs(ref).max())))
                            pairs += 1
                    if p0["query"] < 1 or p0["key"] < 1:
                        problems.append(f"head {h}: the strongest pair ({p0['query']}, {p0['key']}) reads position 0")
            ok = not problems and worst_sum <= 1e-5 and worst_score <= 1e-4 and worst_m <= 1e-4 and worst_ref <= 1e-6
            print(f"{'PASS' if ok else 'FAIL'} explain {name} [{kernel}]: {pairs} pairs over {b.cfg.n_heads} heads of "
                  f"layer {LAYER}: parts sum to the score within {worst_sum:.1e} relative (tol 1e-5); score vs "
                  f"TransformerLens's hook_attn_scores {worst_score:.1e}, part matrix vs its decomposition "
                  f"{worst_m:.1e} (tol 1e-4, relative to max(1, size)); the reference's own sum {worst_ref:.1e}")
            for pr in problems[:5]:
                print("  " + pr)
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
