"""The transformers peer on a batch of sentences, as users batch it: padded batches of B sentences
(attention_mask), BertModel with eager attention and output_attentions=True on PyPI's torch, each
sentence's attention cut back to its own tokens and written as a JSON line (the same job as
attnviz --batch). torch uses its default thread count.

usage: peer_hf_batch.py MODEL_DIR IDS_JSON OUT_JSONL BATCH_SIZE
Prints total_s, forward_s and write_s on stderr.
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
    model_dir, ids_path, out_path, bs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    t_start = time.perf_counter()
    model = BertModel.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32,
                                      add_pooling_layer=False).eval()
    cases = json.load(open(ids_path))
    t_fwd = t_write = 0.0
    with open(out_path, "w") as f, torch.inference_mode():
        for i in range(0, len(cases), bs):
            chunk = cases[i:i + bs]
            n = max(len(c["input_ids"]) for c in chunk)
            ids = torch.zeros((len(chunk), n), dtype=torch.long)
            tt = torch.zeros_like(ids)
            mask = torch.zeros_like(ids)
            for j, c in enumerate(chunk):
                k = len(c["input_ids"])
                ids[j, :k] = torch.tensor(c["input_ids"])
                tt[j, :k] = torch.tensor(c["token_type_ids"])
                mask[j, :k] = 1
            t0 = time.perf_counter()
            r = model(input_ids=ids, token_type_ids=tt, attention_mask=mask, output_attentions=True)
            t_fwd += time.perf_counter() - t0
            t0 = time.perf_counter()
            att = torch.stack(r.attentions, dim=1)  # (batch, layers, heads, n, n)
            for j, c in enumerate(chunk):
                k = len(c["input_ids"])
                json.dump({"input_ids": c["input_ids"], "attention": att[j, :, :, :k, :k].tolist()}, f)
                f.write("\n")
            t_write += time.perf_counter() - t0
    total = time.perf_counter() - t_start
    print(f"total_s={total:.2f} forward_s={t_fwd:.2f} write_s={t_write:.2f} torch={torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
