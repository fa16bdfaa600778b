"""attnviz --logit-lens, --attribution and --ablate against TransformerLens (TransformerBridge in
compatibility mode: fold_ln, center_writing_weights, no center_unembed, no fold_value_biases; float64)
on the synthetic GPT-2 and Llama checkpoints of lm_checkpoints.py (transformers writes them: GPT-2
124M's shape, SmolLM2-135M's shape; 2 layers).

usage: lens_check.py ATTNVIZ WORKDIR [--repo DIR] [--kernels avx512,avx2,scalar]

For every input and kernel (ATTNVIZ_KERNEL): attnviz --predict 1 --logit-lens 5 --attribution --ablate all
--precision 9 --json, on attnviz's input_ids in TransformerLens:
- logit lens: each listed top-K probability and the final prediction's probability against
  softmax(unembed(ln_final(blocks.L.hook_resid_post))) (ln_final with the layer's own scale), <= 1e-4;
  the top id is TransformerLens's argmax unless the two best are within 1e-5;
- attribution: each head's share, cache.stack_head_results(apply_ln=True) @ W_U[:, target], and each
  MLP's, cache.apply_ln_to_stack(hook_mlp_out) @ W_U[:, target], at every position, <= 1e-4; the target
  is the argmax;
- ablation (zero, then --ablate-mode mean): each head's change in log p(target) at the last position
  when TransformerLens's blocks.L.attn.hook_z of that head is zeroed (or set to its mean over the
  positions), <= 1e-4;
- --target TOKEN and --position N: the attribution of that token at that position only.
- --npy: the lens ids/probs/ranks, attribution and ablation arrays hold what the JSON says (NaN where null).
One PASS/FAIL line per model and kernel with the max |diff| of each; exit 1 on any FAIL.
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

TOL = 1e-4
TEXTS = [
    "The cat sat on the mat. The cat sat",
    "time flies like an arrow; fruit flies like a banana. When in Rome, do as the Romans do, said the",
]


def reference(b, ids, target_at=None):
    """Everything attnviz is compared with, from one TransformerLens run (and one per ablated head)."""
    t = torch.tensor([ids])
    with torch.no_grad():
        logits, cache = b.run_with_cache(t)
        L, H = b.cfg.n_layers, b.cfg.n_heads
        W_U = b.W_U  # (d_model, vocab), ln_final's weight folded in
        b_U = b.b_U
        final = logits[0].argmax(-1)  # (n)
        # logit lens: the stream after each layer through ln_final with its own scale
        lens = []
        for l in range(L):
            resid = cache[f"blocks.{l}.hook_resid_post"]
            x = b.ln_final(resid)
            lens.append(torch.softmax(x[0] @ W_U + b_U, -1).numpy())
        # attribution at every position for its argmax
        n = len(ids)
        heads = np.zeros((n, L, H))
        mlp = np.zeros((n, L))
        hr = cache.stack_head_results(layer=-1, apply_ln=True)  # (L*H, batch, pos, d)
        mo = torch.stack([cache[f"blocks.{l}.hook_mlp_out"] for l in range(L)])  # (L, batch, pos, d)
        mo = cache.apply_ln_to_stack(mo, layer=-1)
        for p in range(n):
            tid = int(final[p]) if target_at is None else target_at
            heads[p] = (hr[:, 0, p] @ W_U[:, tid]).reshape(L, H).numpy()
            mlp[p] = (mo[:, 0, p] @ W_U[:, tid]).numpy()
        # ablation at the last position, zero and mean
        last = n - 1
        tid = int(final[last])
        base = torch.log_softmax(logits[0, last], -1)[tid].item()
        abl = {}
        for mode in ("zero", "mean"):
            eff = np.zeros((L, H))
            for l in range(L):
                for h in range(H):
                    def hook(z, hook, h=h, mode=mode):
                        z = z.clone()
                        z[:, :, h, :] = 0 if mode == "zero" else z[:, :, h, :].mean(1, keepdim=True)
                        return z
                    out = b.run_with_hooks(t, fwd_hooks=[(f"blocks.{l}.attn.hook_z", hook)])
                    eff[l, h] = torch.log_softmax(out[0, last], -1)[tid].item() - base
            abl[mode] = eff
    return dict(final=final.numpy(), lens=lens, heads=heads, mlp=mlp, abl=abl, abl_target=tid, W_U=W_U, cache=cache,
                logits=logits[0].numpy())


def check_npy(attnviz, path, text, kernel):
    """--npy's arrays hold what the JSON says: lens ids, probs, ranks, attribution, ablation (NaN = null)."""
    import tempfile
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        stem = os.path.join(tmp, "a.npy")
        doc = run(attnviz, path, text, kernel, ["--predict", "1", "--logit-lens", "3", "--attribution", "--ablate", "0.1,1.0",
                                                "--npy", stem])
        ld = lambda s: np.load(os.path.join(tmp, "a." + s + ".npy"))
        ids, probs, rank = ld("logit_lens_ids"), ld("logit_lens_probs"), ld("logit_lens_rank")
        heads, mlp, abl = ld("attribution_heads"), ld("attribution_mlp"), ld("ablation")
        ll = doc["logit_lens"]
        if ids.shape != (len(ll), len(ll[0]), 3) or ids.dtype != np.int32 or probs.shape != ids.shape or rank.shape != ids.shape[:2]:
            problems.append(f"--npy lens shapes {ids.shape} {probs.shape} {rank.shape}")
        else:
            for i, layer in enumerate(ll):
                for p, e in enumerate(layer):
                    if [t["id"] for t in e["top"]] != list(ids[i, p]) or rank[i, p] != e["rank"] or \
                            max(abs(t["prob"] - probs[i, p, j]) for j, t in enumerate(e["top"])) > 1e-6:
                        problems.append(f"--npy lens layer {i} position {p} differs from the JSON")
        pos = doc["attribution"]["positions"]
        if heads.shape != (len(pos),) + np.array(pos[0]["heads"]).shape or mlp.shape != (len(pos), len(pos[0]["mlp"])):
            problems.append(f"--npy attribution shapes {heads.shape} {mlp.shape}")
        elif np.max(np.abs(heads - np.array([e["heads"] for e in pos]))) > 1e-5 * max(1, np.abs(heads).max()):
            problems.append("--npy attribution differs from the JSON")
        eff = np.array(doc["ablation"]["effects"], dtype=float)
        if abl.shape != eff.shape or not np.array_equal(np.isnan(abl), np.isnan(eff)) or \
                np.nanmax(np.abs(abl - eff)) > 1e-6 or np.isnan(eff).sum() != eff.size - 2:
            problems.append("--npy ablation differs from the JSON")
    return problems


def compare(doc, ref, mean_doc):
    """max |diff| of (lens probs, attribution, ablation) and problems."""
    problems = []
    d_lens = d_attr = d_abl = 0.0
    ll = doc["logit_lens"]
    if len(ll) != len(ref["lens"]):
        return 1, 1, 1, [f"logit_lens has {len(ll)} layers, want {len(ref['lens'])}"]
    for l, layer in enumerate(ll):
        for p, e in enumerate(layer):
            probs = ref["lens"][l][p]
            for r, top in enumerate(e["top"]):
                d_lens = max(d_lens, abs(top["prob"] - probs[top["id"]]))
            order = np.argsort(-probs)
            if e["top"][0]["id"] != order[0] and probs[order[0]] - probs[order[1]] > 1e-5:
                problems.append(f"layer {l} position {p}: top id {e['top'][0]['id']}, TransformerLens {order[0]}")
            d_lens = max(d_lens, abs(e["final_prob"] - probs[ref["final"][p]]))
    for p, fin in enumerate(doc["logit_lens_final"]):
        if fin["id"] != ref["final"][p]:
            problems.append(f"position {p}: prediction {fin['id']}, TransformerLens {ref['final'][p]}")
    for e in doc["attribution"]["positions"]:
        p = e["position"]
        d_attr = max(d_attr, float(np.max(np.abs(np.array(e["heads"]) - ref["heads"][p]))),
                     float(np.max(np.abs(np.array(e["mlp"]) - ref["mlp"][p]))))
    for mode, dd in (("zero", doc), ("mean", mean_doc)):
        a = dd["ablation"]
        if a["target_id"] != ref["abl_target"] or a["mode"] != mode:
            problems.append(f"ablation {mode}: target {a['target_id']} mode {a['mode']}, want {ref['abl_target']}")
        d_abl = max(d_abl, float(np.max(np.abs(np.array(a["effects"], dtype=float) - ref["abl"][mode]))))
    return d_lens, d_attr, d_abl, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    ap.add_argument("--kernels", default="avx512,avx2,scalar")
    args = ap.parse_args()
    failed = 0
    for name in ("gpt2", "llama"):
        miss = lm_checkpoints.missing(name, args.repo)
        if miss:
            print(f"FAIL lens {name}: tokenizer source {miss} is absent (tools/deps.sh test)")
            failed = 1
            continue
        path = lm_checkpoints.build(name, args.workdir, args.repo)
        b, _ = bridge(path, center_writing_weights=True)
        refs = {}
        for kernel in args.kernels.split(","):
            worst = [0.0, 0.0, 0.0]
            size = [0.0, 0.0]  # the reference's largest |attribution| and |ablation effect|: the bound means something
            problems = []
            count = 0
            for text in TEXTS:
                doc = run(args.attnviz, path, text, kernel, ["--predict", "1", "--logit-lens", "5", "--attribution", "--ablate", "all"])
                mean_doc = run(args.attnviz, path, text, kernel, ["--predict", "1", "--ablate", "all", "--ablate-mode", "mean"])
                ids = doc["input_ids"]
                if text not in refs:
                    refs[text] = reference(b, ids)
                ref = refs[text]
                size = [max(size[0], float(np.abs(ref["heads"]).max())),
                        max(size[1], float(np.abs(ref["abl"]["zero"]).max()))]
                d = compare(doc, ref, mean_doc)
                worst = [max(a, c) for a, c in zip(worst, d[:3])]
                problems += [f"{text[:20]!r}: {m}" for m in d[3]]
                count += len(ids)
                # --target and --position: one token's attribution at one position
                tok_doc = run(args.attnviz, path, text, kernel, ["--predict", "1", "--target", doc["logit_lens_final"][0]["token"],
                                                                  "--position", "2"])
                tid = doc["logit_lens_final"][0]["id"]
                pos = tok_doc["attribution"]["positions"]
                if tok_doc["attribution"]["target_id"] != tid or len(pos) != 1 or pos[0]["position"] != 2:
                    problems.append(f"--target/--position: {tok_doc['attribution']['target_id']} {len(pos)} positions")
                else:
                    cache, W_U = ref["cache"], ref["W_U"]
                    with torch.no_grad():
                        hr = cache.stack_head_results(layer=-1, apply_ln=True)[:, 0, 2] @ W_U[:, tid]
                    worst[1] = max(worst[1], float(np.max(np.abs(np.array(pos[0]["heads"]).ravel() - hr.numpy()))))
            problems += check_npy(args.attnviz, path, TEXTS[0], kernel)
            ok = not problems and max(worst) <= TOL
            print(f"{'PASS' if ok else 'FAIL'} lens {name} kernel={kernel}: {count} positions; max |diff| logit lens "
                  f"{worst[0]:.2e}, attribution {worst[1]:.2e}, ablation {worst[2]:.2e} (bound {TOL:g}; largest head "
                  f"attribution {size[0]:.3g}, ablation effect {size[1]:.3g})")
            for m in problems[:10]:
                print(f"    {m}")
            failed |= not ok
    return failed


if __name__ == "__main__":
    sys.exit(main())
