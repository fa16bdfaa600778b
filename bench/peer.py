#!/usr/bin/python3
"""The peer attnviz is measured against: PyTorch doing the same job on the same
checkpoint — load model.safetensors, forward pass returning every layer's
attention, write the attention as JSON. Configured at its fastest here:
torch.set_num_threads(1) lets OpenBLAS use both cores itself.

usage: peer.py MODEL_DIR IDS_JSON OUT_JSON [--repeat N] [--batch FILE]
Prints forward_ms (best of --repeat) and write_ms on stderr.
"""
import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../tests/ref")
import stio  # noqa: E402
import torch_ref  # noqa: E402


def main():
    model_dir, ids_path, out_path = sys.argv[1:4]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    torch.set_num_threads(1)
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = stio.load(f"{model_dir}/model.safetensors")
    cases = json.load(open(ids_path))
    best = float("inf")
    t_write = 0.0
    with open(out_path, "w") as f:
        for c in cases:
            for _ in range(repeat):
                t0 = time.perf_counter()
                r = torch_ref.forward(cfg, w, c["input_ids"], c["token_type_ids"], want_qk=False)
                best = min(best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            json.dump({"input_ids": c["input_ids"], "attention": r["attention"].tolist()}, f)
            f.write("\n")
            t_write += time.perf_counter() - t0
    print(f"forward_ms={best * 1e3:.1f} write_ms={t_write * 1e3:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
