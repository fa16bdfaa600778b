"""The published findings docs/findings.md reproduces, each a check on the trained models the test set-up
installs (tools/pymodel.sh: all-MiniLM-L6-v2, SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M), through
attnviz's own outputs (--json's sinks_summary and massive_activations, attnviz heads, --stats with and
without --measure norm, --predict, --logit-lens, --ablate, --explain). Standard library only (tests/e2e/findings_test.sh
runs it with the system python3, once per kernel path).

usage: findings.py ATTNVIZ --smollm2 GGUF --gemma3 GGUF --minilm DIR
Each check prints one line: PASS/FAIL, the claim, the measured figure and the bound.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Natural text: four sentences of different kinds (narrative, history, science), each its own input.
CORPUS = [
    "The old lighthouse keeper climbed the stairs every evening to light the lamp before the ships came in.",
    "In 1905 Albert Einstein published four papers that changed how physicists think about space, time and light.",
    "She opened the letter slowly, afraid of what it might say, and read it twice before she put it down.",
    "Rivers carry sediment from the mountains to the sea, building deltas where the water finally slows.",
]
# Sixteen unrelated words, repeated: nothing but the first copy predicts the second.
WORDS = "window purple gravel hammer lantern orbit velvet canyon pepper saddle thimble meadow walrus cobalt ferry quartz"
REPEATED = WORDS + " " + WORDS
# attnviz heads' inputs: two sentences and the repeated words (duplicate tokens), plus its random sequences.
HEADS_INPUT = [CORPUS[1], REPEATED, CORPUS[0]]

RESULTS = []


def run(attnviz, args, stdin=None):
    cmd = args[:1] + ["--quiet"] + args[1:] if args[0] == "heads" else ["--quiet"] + args
    p = subprocess.run([attnviz] + cmd, capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        raise RuntimeError(f"attnviz {' '.join(args[:6])}...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def batch_json(attnviz, model, lines, extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        out = run(attnviz, ["--model", model, "--batch", path, "--json", "-"] + list(extra))
    finally:
        os.unlink(path)
    return [json.loads(line) for line in out.splitlines()]


def heads_json(attnviz, model, scores):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(HEADS_INPUT) + "\n")
        path = f.name
    try:
        args = ["heads", "--model", model, "--batch", path, "--json", "-", "--induction-seqs", "4"]
        for s in scores:
            args += ["--score", s]
        out = run(attnviz, args)
    finally:
        os.unlink(path)
    return json.loads(out)


def stats_json(attnviz, model, measure):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(CORPUS) + "\n")
        path = f.name
    try:
        out = run(attnviz, ["--model", model, "--batch", path, "--stats", "--measure", measure, "--json", "-"])
    finally:
        os.unlink(path)
    return json.loads(out)


def check(model, finding, claim, figure, ok, bound):
    RESULTS.append(dict(model=model, finding=finding, claim=claim, figure=figure, bound=bound, ok=bool(ok)))
    print(f"{'PASS' if ok else 'FAIL'} findings {model}: {finding} — claim: {claim}; measured: {figure}; bound: {bound}")


def sinks(name, docs, bound):
    """Xiao et al. 2024: the share of heads from layer 2 on whose mean first-token weight is at least 0.5."""
    first = [d["sinks_summary"]["first"] for d in docs]
    L, H = len(first[0]), len(first[0][0])
    mean = [[statistics.mean(f[l][h] for f in first) for h in range(H)] for l in range(L)]
    late = [mean[l][h] for l in range(2, L) for h in range(H)]
    early = [mean[l][h] for l in range(min(2, L)) for h in range(H)]
    share = sum(v >= 0.5 for v in late) / len(late)
    tok = docs[0]["sinks_summary"]["first_token"]
    check(name, "attention sinks (Xiao et al. 2024)",
          "past the first two layers, a large share of heads put most of their attention on the initial token, whatever it is",
          f"{sum(v >= 0.5 for v in late)} of {len(late)} heads from layer 2 on ({share:.0%}) give the first token "
          f"(“{tok.get('display', tok['token'])}”) at least half their weight, mean over {len(docs)} texts; layers 0-1: "
          f"{sum(v >= 0.5 for v in early)} of {len(early)}", share >= bound, f"share >= {bound:.0%}")
    return share


def massive(name, docs, max_dims, min_ratio):
    """Sun et al. 2024: a few fixed dimensions, on the first token (and delimiters), 1,000x+ the median."""
    entries = [e for d in docs for e in d["massive_activations"]["entries"]]
    dims = {}
    for e in entries:
        dims[e["dim"]] = dims.get(e["dim"], 0) + 1
    top = sorted(dims.items(), key=lambda kv: -kv[1])[:max_dims]
    covered = sum(c for _, c in top) / max(1, len(entries))
    first = [d for d in docs if any(e["position"] == 0 for e in d["massive_activations"]["entries"])]
    ratio = max((e["ratio"] for e in entries), default=0)
    layers = sorted({e["layer"] for e in entries})
    others = sorted({(e.get("display") or e["token"]) for e in entries if e["position"] != 0})
    ok = entries and covered >= 0.95 and len(first) == len(docs) and ratio >= min_ratio
    check(name, "massive activations (Sun et al. 2024)",
          "a few residual-stream entries reach 1,000x-100,000x the median magnitude, in a few fixed dimensions, on the "
          "first token (and delimiters)",
          f"{len(entries)} entries over {len(docs)} texts, dimensions {', '.join(f'{d} ({c})' for d, c in top)} hold "
          f"{covered:.0%}; the first token has them in {len(first)} of {len(docs)} texts; up to {ratio:,.0f}x the median; "
          f"layers {layers[0] if layers else '-'}-{layers[-1] if layers else '-'}; other tokens: "
          f"{', '.join(repr(t) for t in others[:6]) or 'none'}",
          ok, f"<= {max_dims} dimensions hold >= 95%, the first token in every text, a ratio >= {min_ratio:,}x")
    return top


def heads_scores(name, hj, score, floor, factor, min_heads=1):
    vals = sorted(((h[score], h["layer"], h["head"]) for h in hj["heads"] if h.get(score) is not None), reverse=True)
    med = statistics.median(v for v, _, _ in vals)
    strong = [x for x in vals if x[0] >= floor and x[0] >= factor * med]
    return vals, med, strong


def induction(name, hj):
    vals, med, strong = heads_scores(name, hj, "induction", 0.3, 10)
    top = vals[0]
    check(name, "induction heads: prefix matching (Olsson et al. 2022)",
          "a few heads attend from a repeated token to the token after its earlier copy, far above the others",
          f"top head {top[1]}.{top[2]} scores {top[0]:.3f} on 4 random repeated sequences (median head {med:.4f}); "
          f"{len(strong)} heads >= 0.3 and >= 10x the median: "
          f"{', '.join(f'{l}.{h} {v:.2f}' for v, l, h in strong[:5])}",
          len(strong) >= 1, "at least one head >= 0.3 and >= 10x the median head")
    return top


def previous(name, hj, min_heads):
    vals, med, strong = heads_scores(name, hj, "previous", 0.5, 1)
    check(name, "previous-token heads (Voita et al. 2019; Olsson et al. 2022)",
          "some heads put most of their attention on the previous token",
          f"{len(strong)} heads put >= 0.5 of their weight on the previous token: "
          f"{', '.join(f'{l}.{h} {v:.2f}' for v, l, h in strong[:5])} (median head {med:.3f})",
          len(strong) >= min_heads, f">= {min_heads} head{'s' if min_heads > 1 else ''} with share >= 0.5")


def duplicate(name, hj):
    vals, med, strong = heads_scores(name, hj, "duplicate", 0.05, 10)
    top = vals[0]
    check(name, "duplicate-token heads (Wang et al. 2022)",
          "some heads attend to earlier copies of the current token, far more than the others",
          f"top head {top[1]}.{top[2]} puts {top[0]:.3f} of its weight on earlier copies (median head {med:.4f}); "
          f"{len(strong)} heads >= 0.05 and >= 10x the median",
          len(strong) >= 1, "at least one head >= 0.05 and >= 10x the median head")


def repeat_offset(ids):
    """Where the second copy of WORDS starts in the token ids (the words' first token differs: no leading space)."""
    for o in range(3, len(ids)):
        if ids[o:o + 5] == ids[2:7]:
            return o - 2
    raise RuntimeError("the repeated words' second copy was not found in the tokens")


def copying(name, attnviz, model, doc, top, acc_bound, ablate_bound):
    ids = doc["input_ids"]
    n = len(ids)
    off = repeat_offset(ids)
    pred = [p["top"][0]["id"] for p in doc["predictions"]]
    second = list(range(off + 1, n - 1))
    first_half = list(range(1, off - 1))
    acc2 = sum(pred[p] == ids[p + 1] for p in second) / len(second)
    acc1 = sum(pred[p] == ids[p + 1] for p in first_half) / len(first_half)
    figure = (f"the second copy's next token is predicted at {acc2:.0%} of its positions, the first copy's at {acc1:.0%}")
    ok = acc2 >= acc_bound and acc1 <= 0.15
    bound = f"second copy >= {acc_bound:.0%}, first <= 15%"
    if ablate_bound is not None:
        right = [p for p in second if pred[p] == ids[p + 1]]
        pos = right[-1]
        d = json.loads(run(attnviz, ["--model", model, "--ablate", f"{top[1]}.{top[2]}", "--position", str(pos),
                                     "--json", "-", REPEATED]))
        eff = d["ablation"]["effects"][top[1]][top[2]]
        figure += (f"; zeroing the top prefix-matching head {top[1]}.{top[2]} at the last correctly copied position "
                   f"({pos}) changes the copied token's log-probability by {eff:+.2f} nats")
        ok = ok and eff <= ablate_bound
        bound += f", that change <= {ablate_bound} nats"
    check(name, "induction: copying (Olsson et al. 2022)",
          "on a repeated random sequence the model copies the second half from the first, through its induction heads",
          figure, ok, bound)


def composition(name, attnviz, model, top, hj, min_share):
    """Elhage et al. 2021, Olsson et al. 2022: an induction head's key reads what a previous-token head wrote."""
    prev = {f"L{h['layer']}.H{h['head']}": h["previous"] for h in hj["heads"] if h.get("previous") is not None}
    d = json.loads(run(attnviz, ["--model", model, "--explain", f"{top[1]}.{top[2]}", "--json", "-", REPEATED]))
    e = d["explain"]
    rows, ok = [], True
    for p in e["pairs"]:
        m = p["matrix"]
        keys = [sum(r[j] for r in m) for j in range(len(m[0]))]
        j = max(range(len(keys)), key=lambda i: keys[i])
        part, share = e["parts"][j], keys[j] / p["score"]
        ok = ok and prev.get(part, 0) >= 0.5 and share >= min_share
        rows.append(f"{p['query']}→{p['key']} ('{p['key_token'].strip()}', weight {p['weight']:.2f}): {part} "
                    f"(previous-token share {prev.get(part, 0):.2f}) {keys[j]:+.2f} of {p['score']:.2f}")
    check(name, "induction heads compose with previous-token heads (Elhage et al. 2021; Olsson et al. 2022)",
          "the induction head finds its key through what a previous-token head wrote into the key's residual stream",
          f"--explain {top[1]}.{top[2]} on the repeated words, its {len(rows)} strongest pairs, the key side's largest "
          f"part: " + "; ".join(rows), ok and len(rows) >= 3,
          f"in each of >= 3 pairs an earlier head with previous-token share >= 0.5, its part >= {min_share:.0%} of the score")


def logit_lens(name, doc):
    """nostalgebraist 2020; Belrose et al. 2023: the final prediction's rank falls with depth."""
    lens = doc["logit_lens"]
    L, n = len(lens), len(lens[0])
    med = [statistics.median(lens[i][p]["rank"] for p in range(n)) for i in range(L)]
    third = med[:max(1, L // 3)]
    # Spearman's rank correlation of depth against the median rank (ties averaged)
    order = sorted(range(L), key=lambda i: med[i])
    rk = [0.0] * L
    i = 0
    while i < L:
        j = i
        while j + 1 < L and med[order[j + 1]] == med[order[i]]:
            j += 1
        for k in range(i, j + 1):
            rk[order[k]] = (i + j) / 2
        i = j + 1
    mx, my = (L - 1) / 2, statistics.mean(rk)
    cov = sum((a - mx) * (b - my) for a, b in zip(range(L), rk))
    rho = cov / ((sum((a - mx) ** 2 for a in range(L)) * sum((b - my) ** 2 for b in rk)) ** 0.5)
    ok = med[-1] == 0 and min(third) >= 100 and rho <= -0.7
    check(name, "logit lens (nostalgebraist 2020; Belrose et al. 2023)",
          "read through the final norm and unembedding, the residual stream moves towards the final prediction with depth: "
          "its rank starts far down and reaches the top in the last layers",
          f"median rank of the final prediction over {n} positions: {', '.join(f'L{i} {m:g}' for i, m in enumerate(med) if i % 3 == 0 or i == L - 1)}; "
          f"Spearman's rho of depth and rank {rho:.2f}",
          ok, "0 at the last layer, >= 100 in the first third, rho <= -0.7")
    return med


def kobayashi(name, raw, norm):
    def share(st):
        hs = st["heads"]
        return statistics.mean(h["cls"] + h["sep"] for h in hs)
    a, b = share(raw), share(norm)
    check(name, "weight is not contribution (Kobayashi et al. 2020)",
          "much of the attention goes to [CLS] and [SEP], whose transformed values are small: weighted by value norms, "
          "their share falls",
          f"[CLS]+[SEP] share, mean over heads and {raw['inputs']} texts: attention {a:.3f}, value-weighted "
          f"(--measure norm) {b:.3f} ({b / a:.2f}x)", a >= 0.3 and b <= 0.5 * a, "attention >= 0.3, value-weighted <= half of it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--gemma3", required=True)
    ap.add_argument("--minilm", required=True)
    a = ap.parse_args()
    av = a.attnviz
    try:
        # SmolLM2-135M-Instruct (decoder, no BOS of its own in this GGUF's template: the first token is a word)
        docs = batch_json(av, a.smollm2, CORPUS)
        sinks("SmolLM2-135M", docs, 0.4)
        massive("SmolLM2-135M", docs, 1, 5000)
        hj = heads_json(av, a.smollm2, ["induction", "previous", "duplicate"])
        top = induction("SmolLM2-135M", hj)
        previous("SmolLM2-135M", hj, 2)
        duplicate("SmolLM2-135M", hj)
        doc = json.loads(run(av, ["--model", a.smollm2, "--predict", "1", "--logit-lens", "1", "--json", "-", REPEATED]))
        copying("SmolLM2-135M", av, a.smollm2, doc, top, 0.35, -0.5)
        composition("SmolLM2-135M", av, a.smollm2, top, hj, 0.4)
        logit_lens("SmolLM2-135M", doc)
        # Gemma 3 270M
        docs = batch_json(av, a.gemma3, CORPUS)
        sinks("Gemma-3-270M", docs, 0.4)
        massive("Gemma-3-270M", docs, 2, 5000)
        hj = heads_json(av, a.gemma3, ["induction", "previous", "duplicate"])
        top = induction("Gemma-3-270M", hj)
        previous("Gemma-3-270M", hj, 1)
        duplicate("Gemma-3-270M", hj)
        doc = json.loads(run(av, ["--model", a.gemma3, "--predict", "1", "--json", "-", REPEATED]))
        copying("Gemma-3-270M", av, a.gemma3, doc, top, 0.8, None)
        composition("Gemma-3-270M", av, a.gemma3, top, hj, 0.4)
        # all-MiniLM-L6-v2 (encoder)
        docs = batch_json(av, a.minilm, CORPUS)
        sinks("all-MiniLM-L6-v2", docs, 0.2)
        kobayashi("all-MiniLM-L6-v2", stats_json(av, a.minilm, "attention"), stats_json(av, a.minilm, "norm"))
        hj = heads_json(av, a.minilm, ["previous", "duplicate"])
        previous("all-MiniLM-L6-v2", hj, 1)
        duplicate("all-MiniLM-L6-v2", hj)
    except (RuntimeError, OSError, KeyError, IndexError, ValueError) as err:
        print(f"FAIL findings: {err}")
        return 1
    return 0 if all(r["ok"] for r in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
