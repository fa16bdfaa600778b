"""The peer users actually run: Hugging Face transformers' BertModel with eager attention and
output_attentions=True on PyPI's current torch (the reference Python, tools/pyref.sh), doing the
same job as bench/peer.py: load the checkpoint folder, forward pass returning every layer's
attention, write the attention as JSON. torch uses its default thread count (both cores).

usage: peer_hf.py MODEL_DIR IDS_JSON OUT_JSON [--repeat N]
Prints forward_ms (best of --repeat) and write_ms on stderr.
"""
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from transformers import BertModel  # noqa: E402


def main():
    model_dir, ids_path, out_path = sys.argv[1:4]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32,
                                      add_pooling_layer=False).eval()
    cases = json.load(open(ids_path))
    best = float("inf")
    t_write = 0.0
    with open(out_path, "w") as f, torch.inference_mode():
        for c in cases:
            ids = torch.tensor([c["input_ids"]])
            tt = torch.tensor([c["token_type_ids"]])
            for _ in range(repeat):
                t0 = time.perf_counter()
                r = model(input_ids=ids, token_type_ids=tt, output_attentions=True)
                best = min(best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            att = torch.stack([a[0] for a in r.attentions])
            json.dump({"input_ids": c["input_ids"], "attention": att.tolist()}, f)
            f.write("\n")
            t_write += time.perf_counter() - t0
    print(f"forward_ms={best * 1e3:.1f} write_ms={t_write * 1e3:.1f} torch={torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
