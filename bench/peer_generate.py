"""The generation peer: transformers' causal LM continuing a prompt greedily with every step's
attention returned (eager attention, generate(output_attentions=True, return_dict_in_generate=True)),
on PyPI's torch (tools/pyref.sh).

usage: peer_generate.py MODEL IDS_JSON MAX_NEW [--repeat R]    MODEL: an HF folder or a .gguf file
Prints generate_ms=... (best of R) new_tokens=... ids=... on stdout.
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def main():
    path, ids_path, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    kw = dict(attn_implementation="eager", dtype=torch.float32)
    if path.endswith(".gguf"):
        d, f = os.path.split(os.path.abspath(path))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, **kw).eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, **kw).eval()
    ids = torch.tensor([json.load(open(ids_path))])
    best, out = float("inf"), None
    with torch.inference_mode():
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new, do_sample=False,
                                 output_attentions=True, return_dict_in_generate=True, pad_token_id=0)
            best = min(best, time.perf_counter() - t0)
    new = out.sequences[0, ids.shape[1]:].tolist()
    print(f"generate_ms={best * 1e3:.1f} new_tokens={len(new)} ids={','.join(map(str, new))}")


if __name__ == "__main__":
    main()
