"""attnviz --predict K against transformers' own LM heads: the synthetic checkpoints of
lm_checkpoints.py (GPT-2, Llama at SmolLM2's shape with tied embeddings, Qwen2 with a separate
lm_head and 151,936 rows, Mistral, Gemma 2 with soft-capped logits, Gemma 3, Phi-3 (LongRoPE, partial
rotary), BERT / RoBERTa / DistilBERT / XLM-RoBERTa (Unigram tokenizer) / ELECTRA (embeddings_project,
generator head) with their MLM heads) and, when given,
the trained SmolLM2-135M-Instruct Q4_1 GGUF (transformers dequantizes the same file).

usage: predict_check.py ATTNVIZ WORKDIR [--repo DIR] [--gguf FILE] [--only NAME|smollm2|refusal]
       predict_check.py --selftest

For every input: attnviz --predict K --precision 9 --json, then the transformers model
(AutoModelForCausalLM / AutoModelForMaskedLM, eager attention, float32) on attnviz's input_ids.
Checked: input_ids equal the transformers tokenizer's; "predictions" has one entry per position
(causal) or per mask position (masked), in order; each top list has K distinct ids with
non-increasing probs; each prob is within 1e-4 of softmax(logits)[id]; the ids at each rank
are transformers' ids at that rank, except inside runs of probabilities whose neighbours differ
by less than 1e-5 (compared as sets; a run cut by rank K as a subset); each "token" is the
vocabulary's spelling (tokenizer.convert_ids_to_tokens). One PASS/FAIL line per model with the
max |diff| of the probs and the count of compared positions; a headless BERT with --predict
(and K outside 1..100) must exit 2 with one line on stderr. Exit 1 on any FAIL.
--selftest runs the comparison on hand-made predictions with planted errors (no models).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # imports lm_checkpoints / predict_check: no __pycache__ in the tree
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402

PROB_TOL = 1e-4
TIE_TOL = 1e-5
# ranks compared by compare_top, and how many of them were held to the exact id (their
# neighbours' probabilities 1e-5 or more away) rather than compared as part of a near tie
RANKS = {"all": 0, "strict": 0, "same": 0}  # same: attnviz's id is transformers' id at that rank

CAUSAL_TEXTS = [
    ("The capital of France is", 10),
    ("time flies like an arrow; fruit flies like a banana. The cat sat on the mat because it was tired.", 100),
    ("def add(a, b):\n    return a + b  # naïve café 😀", 5),
]
# {m} is the model's mask token; the space before it is kept (RoBERTa's <mask> takes it)
MASKED_TEXTS = [
    ("the capital of france is {m}.", 10),
    ("{m} flies like an arrow and fruit flies like a {m}.", 100),
    ("the cat sat on the mat because it was tired.", 5),  # no mask: no predictions
    ("{m} {m} {m} and the {m} of the {m} were {m} in the year {m}.", 7),
    ("the cat sat on the {m}.\tit was {m} and hungry.", 10),  # a sentence pair (TAB): token types
]


def compare_top(top, ref, k, where, tok_spell=None):
    """Checks one attnviz top list against the reference distribution ref (numpy, vocab-sized).
    Returns (problems, max |prob diff|)."""
    probs_ref = np.asarray(ref, dtype=np.float64)
    V = probs_ref.shape[0]
    problems = []
    want = min(k, V)
    if not isinstance(top, list) or len(top) != want:
        return [f"{where}: {len(top) if isinstance(top, list) else type(top).__name__} entries, want {want}"], 0.0
    ids, ps = [], []
    for r, e in enumerate(top):
        i, p = e.get("id"), e.get("prob")
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < V:
            return [f"{where} rank {r}: id {i!r} not an integer in 0..{V - 1}"], 0.0
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
            return [f"{where} rank {r}: prob {p!r} not in [0, 1]"], 0.0
        if not isinstance(e.get("token"), str) or not isinstance(e.get("display"), str):
            problems.append(f"{where} rank {r}: token/display not strings: {e.get('token')!r} {e.get('display')!r}")
        if tok_spell is not None:
            spell = tok_spell(i)
            if spell is not None and e.get("token") != spell:
                problems.append(f"{where} rank {r}: id {i} token {e.get('token')!r}, the vocabulary has {spell!r}")
        ids.append(i)
        ps.append(float(p))
    if len(set(ids)) != len(ids):
        problems.append(f"{where}: repeated ids {ids}")
    if any(ps[r] < ps[r + 1] for r in range(len(ps) - 1)):
        problems.append(f"{where}: probs not in descending order {ps}")
    diffs = np.abs(np.array(ps) - probs_ref[ids])
    worst = float(diffs.max()) if len(diffs) else 0.0
    r = int(diffs.argmax()) if len(diffs) else 0
    if worst > PROB_TOL:
        problems.append(f"{where} rank {r}: id {ids[r]} prob {ps[r]:.9g}, transformers {probs_ref[ids[r]]:.9g}")
    # ranks: transformers' order, runs of near-equal neighbours (gap < TIE_TOL) as one cluster
    order = np.argsort(-probs_ref, kind="stable")
    sp = probs_ref[order]
    cluster = np.concatenate([[0], np.cumsum(sp[:-1] - sp[1:] >= TIE_TOL)])
    rank_of = np.empty(V, dtype=np.int64)
    rank_of[order] = np.arange(V)
    size = np.bincount(cluster)
    RANKS["all"] += len(ids)
    RANKS["strict"] += int(sum(size[cluster[r]] == 1 for r in range(len(ids))))
    RANKS["same"] += int(sum(int(order[r]) == i for r, i in enumerate(ids)))
    for r, i in enumerate(ids):
        if cluster[rank_of[i]] != cluster[r]:
            problems.append(f"{where} rank {r}: id {i} (p {ps[r]:.9g}); transformers has id {int(order[r])} "
                            f"(p {sp[r]:.9g}) there, and ranks id {i} {int(rank_of[i])} (p {probs_ref[i]:.9g})")
            break
    return problems, worst


def compare_predictions(preds, probs, positions, k, label, tok_spell=None):
    """preds: attnviz's "predictions"; probs: (n, V) reference distributions; positions: the
    positions that must have an entry, in order. Returns (problems, max |diff|, compared)."""
    if not isinstance(preds, list):
        return [f"{label}: no \"predictions\" list (got {type(preds).__name__})"], 0.0, 0
    got = [p.get("position") if isinstance(p, dict) else None for p in preds]
    if got != list(positions):
        return [f"{label}: prediction positions {got}, want {list(positions)}"], 0.0, 0
    problems, worst = [], 0.0
    for p in preds:
        pr, w = compare_top(p.get("top"), probs[p["position"]], k, f"{label} position {p['position']}", tok_spell)
        problems += pr
        worst = max(worst, w)
    return problems, worst, len(preds)


def selftest():
    """The comparison must pass a faithful copy and catch each planted error."""
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 3, size=(4, 50))
    logits[1, 7] = logits[1, 9] = logits[1, 11] = 8.0  # an exact three-way tie at the top
    logits[2, 3], logits[2, 4] = 12.0, 12.0 + 1e-7  # a near tie at the top (probs 3e-8 apart)
    logits[3, 40], logits[3, 41] = 12.0, 12.0 - 2e-4  # no tie: probs ~9e-5 apart, within PROB_TOL
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)

    def entry(pos, i):
        return {"token": f"t{i}", "display": f"t{i}", "id": int(i), "prob": float(f"{probs[pos, i]:.9g}")}

    def faithful(k):
        return [{"position": pos, "top": [entry(pos, i) for i in np.argsort(-probs[pos], kind="stable")[:k]]}
                for pos in range(4)]

    def swap_ids(top, a, b):  # ids (and spellings) trade places, probs stay
        for key in ("id", "token", "display"):
            top[a][key], top[b][key] = top[b][key], top[a][key]

    def planted(k, change):
        t = faithful(k)
        change(t)
        return t

    o0 = np.argsort(-probs[0], kind="stable")
    cases = [  # (name, K, predictions, must pass)
        ("faithful", 5, faithful(5), True),
        ("exact tie permuted", 5, planted(5, lambda t: t[1]["top"].__setitem__(slice(0, 3), t[1]["top"][2::-1])), True),
        ("near tie, ids swapped", 5, planted(5, lambda t: swap_ids(t[2]["top"], 0, 1)), True),
        ("no tie (9e-5 apart), ids swapped", 5, planted(5, lambda t: swap_ids(t[3]["top"], 0, 1)), False),
        ("tie cut by K, another member", 2, planted(2, lambda t: t[1]["top"].__setitem__(1, entry(1, 11))), True),
        ("prob off by 5e-5 (in tolerance)", 5,
         planted(5, lambda t: t[3]["top"][0].__setitem__("prob", t[3]["top"][0]["prob"] + 5e-5)), True),
        ("ids of ranks 2 and 3 swapped, probs kept", 5, planted(5, lambda t: swap_ids(t[0]["top"], 2, 3)), False),
        ("entries of ranks 2 and 3 swapped", 5,
         planted(5, lambda t: t[0]["top"].__setitem__(slice(2, 4), t[0]["top"][3:1:-1])), False),
        ("prob off by 2e-4", 5,
         planted(5, lambda t: t[3]["top"][0].__setitem__("prob", t[3]["top"][0]["prob"] + 2e-4)), False),
        ("K-1 entries", 5, planted(5, lambda t: t[2]["top"].pop()), False),
        ("position missing", 5, planted(5, lambda t: t.pop()), False),
        ("rank 4 holds rank 6's id", 5, planted(5, lambda t: t[0]["top"].__setitem__(4, entry(0, o0[6]))), False),
        ("repeated id", 5, planted(5, lambda t: t[0]["top"].__setitem__(4, dict(t[0]["top"][3]))), False),
        ("token spelling", 5, planted(5, lambda t: t[0]["top"][0].__setitem__("token", "wrong")), False),
        ("id past the vocabulary", 5, planted(5, lambda t: t[0]["top"][4].__setitem__("id", 50)), False),
    ]
    ok = True
    for name, k, preds, want in cases:
        pr, _, _ = compare_predictions(preds, probs, range(4), k, "selftest", tok_spell=lambda i: f"t{i}")
        good = (not pr) == want
        ok &= good
        print(f"  selftest {name}: {'passes' if not pr else 'fails: ' + pr[0]}{'' if good else '  <-- WRONG'}")
    print(f"{'PASS' if ok else 'FAIL'} predict_selftest: the comparison passes faithful predictions and catches "
          f"{sum(1 for c in cases if not c[3])} planted errors")
    return ok


def run_attnviz(attnviz, model, args, text, tmpdir):
    """attnviz's JSON (dict), or a string saying why not. A TAB in text separates TEXT and TEXT_B."""
    out = os.path.join(tmpdir, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [attnviz, "--model", model] + args + ["--precision", "9", "--json", out, "--quiet"] + text.split("\t")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"attnviz exited {r.returncode}: {r.stderr.strip()[-400:]}"
    try:
        return json.load(open(out, encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"attnviz's JSON unreadable: {e}"


def load_hf(model_dir, gguf_file=None, masked=False, workdir=None):
    """transformers' tokenizer and model (eager, float32) of a folder or of a GGUF file; for a
    GGUF with a workdir, the model comes from lm_checkpoints.gguf_reference's saved copy of
    transformers' own dequantization, and the tokenizer, which transformers builds from the file
    (47 s for Gemma 3's 262,144 pieces on a loaded machine), from its save_pretrained copy beside it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
    kw = {"gguf_file": gguf_file} if gguf_file else {}
    cls = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    if gguf_file and workdir:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import lm_checkpoints
        ref = lm_checkpoints.gguf_reference(os.path.join(model_dir, gguf_file), workdir)
        tdir = os.path.join(ref, "tokenizer")
        if not os.path.exists(os.path.join(tdir, "tokenizer_config.json")):
            tok = AutoTokenizer.from_pretrained(model_dir, **kw)
            tmp = f"{tdir}.tmp{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tok.save_pretrained(tmp)
            try:
                os.rename(tmp, tdir)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        tok = AutoTokenizer.from_pretrained(tdir)
        model_dir, kw = ref, {}
    else:
        tok = AutoTokenizer.from_pretrained(model_dir, **kw)
    model = cls.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32, **kw).eval()
    return tok, model


def spelling(tok):
    def f(i):
        s = tok.convert_ids_to_tokens(int(i))
        return s if isinstance(s, str) and s else None
    return f


def check_model(attnviz, name, model_path, masked, tmpdir, gguf=False, workdir=None):
    import torch
    t0 = time.time()
    d, f = (os.path.split(os.path.abspath(model_path)) if gguf else (model_path, None))
    tok, model = load_hf(d, f, masked, workdir)
    load_s = time.time() - t0
    arch = type(model).__name__
    texts = MASKED_TEXTS if masked else CAUSAL_TEXTS
    problems, worst, count, ks, av_s = [], 0.0, 0, [], 0.0
    RANKS.update(all=0, strict=0, same=0)
    for idx, (text, k) in enumerate(texts):
        if masked:
            text = text.replace("{m}", tok.mask_token)
        ks.append(k)
        t1 = time.time()
        out = run_attnviz(attnviz, model_path, ["--predict", str(k)], text, tmpdir)
        av_s += time.time() - t1
        label = f"input {idx}"
        if isinstance(out, str):
            problems.append(f"{label}: {out}")
            continue
        ids = out.get("input_ids")
        enc = tok(*text.split("\t"))
        ref_ids = enc["input_ids"]
        if ids != ref_ids:
            problems.append(f"{label}: input_ids {ids} differ from transformers' tokenizer's {ref_ids}")
            if not isinstance(ids, list) or not ids:
                continue
        kw = {}
        if "\t" in text and "token_type_ids" in enc and getattr(model.config, "type_vocab_size", 0) > 1:
            kw["token_type_ids"] = torch.tensor([out.get("token_type_ids") or enc["token_type_ids"]])
            if out.get("token_type_ids") != enc["token_type_ids"]:
                problems.append(f"{label}: token_type_ids {out.get('token_type_ids')}, transformers' {enc['token_type_ids']}")
        with torch.no_grad():
            logits = model(torch.tensor([ids]), **kw).logits[0].double()
        probs = torch.softmax(logits, -1).numpy()
        if masked:
            positions = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
        else:
            positions = list(range(len(ids)))
        pr, w, c = compare_predictions(out.get("predictions"), probs, positions, k, label, spelling(tok))
        problems += pr
        worst, count = max(worst, w), count + c
    ok = not problems
    print(f"{'PASS' if ok else 'FAIL'} predict {name} ({arch}, vocab {model.config.vocab_size}): {count} positions "
          f"compared over {len(texts)} inputs (K {'/'.join(map(str, ks))}; {RANKS['all']} ranks: {RANKS['strict']} outside "
          f"near ties, {RANKS['same']} with transformers' very id), max |diff| of probs {worst:.2e} "
          f"(tol {PROB_TOL:g}); attnviz {av_s:.1f} s, transformers load {load_s:.1f} s")
    for p in problems[:8]:
        print(f"  {name}: {p}")
    if len(problems) > 8:
        print(f"  {name}: ... {len(problems) - 8} more")
    return ok


def check_refusals(attnviz, headless, with_head, tmpdir):
    """--predict on a checkpoint without an MLM head, and K outside 1..100: exit 2, one line on
    stderr (with --quiet, which silences the informational lines) naming --predict."""
    ok = True
    cases = [("headless BERT", headless, "5"), ("K 0", with_head, "0"), ("K 101", with_head, "101")]
    for label, model, k in cases:
        out = os.path.join(tmpdir, "refused.json")
        r = subprocess.run([attnviz, "--model", model, "--predict", k, "--json", out, "--quiet", "the [MASK] sat."],
                           capture_output=True, text=True, timeout=300)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        good = r.returncode == 2 and len(lines) == 1 and "predict" in lines[0]
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} predict_refused {label}: exit {r.returncode} (want 2), "
              f"{len(lines)} stderr line(s) (want 1): {r.stderr.strip()[:200]!r}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz", nargs="?")
    ap.add_argument("workdir", nargs="?")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    ap.add_argument("--gguf", help="SmolLM2-135M-Instruct Q4_1 GGUF (tools/pymodel.sh smollm2)")
    ap.add_argument("--only")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return 0 if selftest() else 1
    if not args.attnviz or not args.workdir:
        ap.error("ATTNVIZ and WORKDIR are required")
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lm_checkpoints
    torch.set_num_threads(2)
    os.makedirs(args.workdir, exist_ok=True)
    ok = selftest()
    t_all = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        masked = ("bert", "roberta", "distilbert", "xlmr", "electra")
        for name in ["gpt2", "llama", "qwen2", "mistral", "gemma2", "gemma3", "phi3", *masked]:
            if args.only and name != args.only:
                continue
            miss = lm_checkpoints.missing(name, args.repo)
            d = os.path.join(args.workdir, name)
            if miss and not os.path.exists(os.path.join(d, "config.json")):
                print(f"FAIL predict {name}: tokenizer source {miss} is absent (tools/deps.sh test: npm ci, tools/refdata.sh)")
                ok = False
                continue
            t0 = time.time()
            d = lm_checkpoints.build(name, args.workdir, args.repo)
            built = time.time() - t0
            ok &= check_model(args.attnviz, name, d, name in masked, tmp)
            print(f"  {name}: {time.time() - t0:.1f} s (checkpoint {built:.1f} s)")
        if not args.only or args.only == "smollm2":
            if args.gguf and os.path.isfile(args.gguf):
                t0 = time.time()
                ok &= check_model(args.attnviz, "smollm2-gguf", args.gguf, False, tmp, gguf=True, workdir=args.workdir)
                print(f"  smollm2-gguf: {time.time() - t0:.1f} s")
            else:
                print("SKIP predict smollm2-gguf: no SmolLM2 GGUF (tools/pymodel.sh smollm2)")
        if not args.only or args.only == "refusal":
            if lm_checkpoints.missing("bert-nohead", args.repo) and not os.path.exists(
                    os.path.join(args.workdir, "bert-nohead", "config.json")):
                print("FAIL predict_refused: bert-base-uncased's vocabulary is absent (tools/refdata.sh)")
                ok = False
            else:
                headless = lm_checkpoints.build("bert-nohead", args.workdir, args.repo)
                with_head = lm_checkpoints.build("bert", args.workdir, args.repo)
                ok &= check_refusals(args.attnviz, headless, with_head, tmp)
    print(f"  predict_check: {time.time() - t_all:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
