#!/usr/bin/python3
"""Compares attnviz's attention, queries and keys with the PyTorch reference.

usage: compare.py ATTNVIZ MODEL_DIR [--tol 1e-4] [--tokens N ...] TEXT[\tTEXT_B] ...
Runs `ATTNVIZ --model MODEL_DIR --json - --qk --precision 9` per input, feeds
the same ids to torch_ref.forward, prints the max absolute errors, and exits 1
when attention differs by more than --tol.
"""
import argparse
import json
import subprocess
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import stio  # noqa: E402
import torch_ref  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("model")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--label", default="")
    ap.add_argument("texts", nargs="+")
    a = ap.parse_args()
    cfg = json.load(open(f"{a.model}/config.json"))
    w = stio.load(f"{a.model}/model.safetensors")
    # The bound holds against the reference computed in float64 from the same
    # (widened) weights: on long inputs a float32 reference's own rounding is of
    # the order of the bound. The float32 reference's figures are printed beside.
    w64 = {k: v.double() for k, v in w.items()}
    torch.set_num_threads(1)
    worst = {(k, p): 0.0 for k in ("attention", "queries", "keys") for p in (64, 32)}
    for text in a.texts:
        args = [a.attnviz, "--model", a.model, "--json", "-", "--qk", "--precision", "9", "--quiet"] + text.split("\t")
        out = json.loads(subprocess.run(args, check=True, capture_output=True).stdout)
        for p, weights in ((64, w64), (32, w)):
            ref = torch_ref.forward(cfg, weights, out["input_ids"], out["token_type_ids"])
            for key in ("attention", "queries", "keys"):
                got = torch.tensor(out[key], dtype=torch.float64)
                err = (got - ref[key].double()).abs().max().item()
                worst[(key, p)] = max(worst[(key, p)], err)
        rows = torch.tensor(out["attention"]).sum(-1)
        assert (rows - 1).abs().max() < 1e-4, "attention rows must sum to 1"
    print(f"{a.label or a.model}: {len(a.texts)} inputs, max abs error vs torch float64 (float32): "
          + ", ".join(f"{k} {worst[(k, 64)]:.3g} ({worst[(k, 32)]:.3g})" for k in ("attention", "queries", "keys")))
    if worst[("attention", 64)] > a.tol:
        print(f"FAIL: attention error {worst[('attention', 64)]:.3g} > {a.tol}")
        sys.exit(1)


if __name__ == "__main__":
    main()
