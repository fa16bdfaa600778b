"""quant_diff_check.py DIR QUANT... — checks `attnviz diff --json` files DIR/QUANT-I.json (F16 as A,
QUANT as B, one text each I) against a recomputation from the attention they hold, and that the
first QUANT (the finest) diverges less than the others. Prints PASS/FAIL lines and each quant's
figures."""
import glob
import json
import sys

import numpy as np


def recompute(d):
    """Per-head mean row JSD (bits) and each side's sink mass, from the JSON's attention."""
    A = np.array(d["a"]["attention"], dtype=np.float64)  # [L, H, n, n]
    B = np.array(d["b"]["attention"], dtype=np.float64)
    A /= A.sum(-1, keepdims=True)
    B /= B.sum(-1, keepdims=True)
    M = (A + B) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ta = np.where(A > 0, A * np.log2(A / M), 0.0)
        tb = np.where(B > 0, B * np.log2(B / M), 0.0)
    jsd = (0.5 * (ta + tb)).sum(-1).mean(-1)  # one text on two models: every row aligns
    raw_a = np.array(d["a"]["attention"], dtype=np.float64)
    raw_b = np.array(d["b"]["attention"], dtype=np.float64)
    return jsd, raw_a[:, :, 1:, 0].mean(-1), raw_b[:, :, 1:, 0].mean(-1)


def main(folder, quants):
    ok = True
    figures = {}
    for q in quants:
        worst_jsd = worst_sink = 0.0
        jsds, moves, worst_head = [], [], (0.0, None)
        for path in sorted(glob.glob(f"{folder}/{q}-*.json")):
            d = json.load(open(path))
            jsd, sa, sb = recompute(d)
            got = np.array(d["divergence"]["per_head"])
            sk = d["sink"]
            worst_jsd = max(worst_jsd, float(np.abs(got - jsd).max()))
            worst_sink = max(worst_sink, float(np.abs(np.array(sk["a"]) - sa).max()),
                             float(np.abs(np.array(sk["b"]) - sb).max()),
                             float(np.abs(np.array(sk["change"]) - (np.array(sk["b"]) - np.array(sk["a"]))).max()))
            jsds.append(got.mean())
            moves.append(np.abs(np.array(sk["change"])).mean())
            top = d["divergence"]["ranking"][0]
            if top["jsd"] > worst_head[0]:
                worst_head = (top["jsd"], f"L{top['layer']} H{top['head']}")
        if not jsds:
            print(f"FAIL quant_diff_{q}: no diff outputs in {folder}")
            return 1
        # the JSON's attention has 6 significant digits: the recomputation agrees to about 1e-5
        good = worst_jsd < 5e-5 and worst_sink < 2e-6
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} quant_diff_{q}_recomputed: per-head divergence within {worst_jsd:.1e} "
              f"(tol 5e-5) and sink mass within {worst_sink:.1e} (tol 2e-6) of a recomputation from the "
              f"attention written, {len(jsds)} texts")
        figures[q] = (float(np.mean(jsds)), float(np.mean(moves)), worst_head)
    fine = quants[0]
    for q in quants[1:]:
        good = figures[fine][0] < figures[q][0] and figures[fine][1] < figures[q][1]
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} quant_diff_{fine}_closer_than_{q}: mean divergence from F16 "
              f"{figures[fine][0]:.2e} vs {figures[q][0]:.2e} bits, mean |sink change| "
              f"{figures[fine][1]:.2e} vs {figures[q][1]:.2e}")
    for q in quants:
        j, m, (top, where) = figures[q]
        print(f"quant_diff: {q} vs F16: mean per-head divergence {j:.2e} bits, mean |sink change| {m:.4f}, "
              f"most divergent head {where} ({top:.4f} bits)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
