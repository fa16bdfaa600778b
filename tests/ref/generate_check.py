"""attnviz --generate N against transformers' generate(): greedy generation on the trained
SmolLM2-135M-Instruct Q4_1 GGUF and the synthetic Llama (SmolLM2's shape), GPT-2, Qwen2
(separate lm_head, 151,936 rows), Mistral (generation past its sliding window), Gemma 2, Gemma 3
(past its window), Mixtral and Qwen3-MoE (mixtures of experts) and Phi-3 (LongRoPE's long factors, partial rotary; and a generation that crosses
the original context, where generate() drops the cache and runs the whole sequence again) of
lm_checkpoints.py, an end token given only by
generation_config.json, and sampled generation's reproducibility and validity.

usage: generate_check.py ATTNVIZ WORKDIR [--repo DIR] [--gguf FILE] [--only NAME] [--tokens N]

Greedy: attnviz --generate N --precision 9 --json against model.generate(input_ids,
do_sample=False, max_new_tokens=N, output_attentions=True, output_logits=True,
return_dict_in_generate=True) with eager attention in float32. Checked: the prompt's ids equal
the tokenizer's; the generated ids are identical (the same stop; a divergence is excused only
where transformers' two most probable tokens are within 1e-5, and then the check stops there);
"generation"'s counts, stop_reason, strategy and text; each step's position, id, token, prob
(softmax of transformers' logits at that step, within 1e-4) and top-K (as predict_check.py
compares them); the attention rows: step 0's full prompt matrices, and each later step's row
(out.attentions[step][layer][0, head, -1, :]) against attnviz's row at that position, within
1e-4; and the whole final sequence's attention against one forward pass over it (which also
covers the last token's row, and the zeros above the diagonal). One run adds --predict 5 and
checks "predictions" over the final sequence. generation_config.json: a copy of the Llama folder
whose generation_config.json names an extra end token (one the greedy run generates) must stop
there in attnviz and in transformers. Qwen2: a prompt whose greedy next token is a matrix row
past the tokenizer's tokens generates as in transformers. --stop: a greedy run with a stop string ends at
the first token whose text completes it, with ids a prefix of the full run's.
Sampled (--temperature 0.8 --top-p 0.9): seed 7 twice gives identical output; seed 7 and seed
8 are valid: every chosen token is inside the top-p nucleus of softmax(logits / 0.8) at its
position, and each step's prob and top-K are the model's own softmax(logits) (before temperature
and top-p, as attnviz's page says).
One PASS/FAIL line per check with its max errors; exit 1 on any FAIL.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # imports lm_checkpoints / predict_check: no __pycache__ in the tree
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_checkpoints  # noqa: E402
from predict_check import PROB_TOL, RANKS, TIE_TOL, compare_predictions, compare_top, load_hf, run_attnviz, spelling  # noqa: E402

ATTN_TOL = 1e-4
PROMPTS = {
    "smollm2-gguf": "The capital of France is",
    "llama": "The cat sat on the mat because it was tired.",
    "gpt2": "The cat sat on the mat because it was tired.",
    "qwen2": "The cat sat on the mat because it was tired.",
    "mistral": "The cat sat on the mat because it was tired.",
    "gemma2": "The cat sat on the mat because it was tired.",
    "gemma3": "The cat sat on the mat because it was tired.",
    "phi3": "The cat sat on the mat because it was tired.",
    "phi3-cross": "The cat sat on the mat because it was tired.",
    "mixtral": "The cat sat on the mat because it was tired.",
    "qwen3moe": "The cat sat on the mat because it was tired.",
    "gptoss": "The cat sat on the mat because it was tired.",
}


def eos_ids(model):
    ids = set()
    for src in (model.generation_config, model.config):
        e = getattr(src, "eos_token_id", None)
        if e is not None:
            ids.update(e if isinstance(e, (list, tuple)) else [e])
    return ids


def hf_generate(model, ids, n):
    with torch.no_grad():
        return model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              do_sample=False, max_new_tokens=n, output_attentions=True, output_logits=True,
                              return_dict_in_generate=True, pad_token_id=min(eos_ids(model) or {0}))


def full_forward(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return out.logits[0].double().softmax(-1).numpy(), torch.stack([a[0] for a in out.attentions]).numpy()


def decode_variants(tok, prompt_ids, ids):
    """The continuation's text as transformers can decode it: the generated ids alone, or the
    whole sequence's text past the prompt's (a SentencePiece-style decoder drops the leading
    space of a sequence's first piece), with and without special tokens and clean-up."""
    out = set()
    for skip in (True, False):
        for clean in (True, False):
            def dec(x):
                return tok.decode(x, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
            out.add(dec(ids))
            whole, head = dec(prompt_ids + ids), dec(prompt_ids)
            if whole.startswith(head):
                out.add(whole[len(head):])
    return out


def text_diff(got, texts):
    """Where attnviz's text first departs from the closest of transformers' decodings."""
    if not isinstance(got, str):
        return f"text {got!r} is not a string"

    def common(a, b):
        return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    ref = max(texts, key=lambda t: common(got, t))
    i = common(got, ref)
    return (f"text differs from transformers' decoding at character {i}: attnviz {got[max(0, i - 12):i + 12]!r}, "
            f"transformers {ref[max(0, i - 12):i + 12]!r} ({len(got)} vs {len(ref)} characters)")


def check_greedy(attnviz, name, model_path, tok, model, n, tmpdir, predict_k=None):
    problems = []
    RANKS.update(all=0, strict=0, same=0)
    prompt = PROMPTS[name]
    ref_prompt = tok(prompt)["input_ids"]
    args = ["--generate", str(n)] + (["--predict", str(predict_k)] if predict_k else [])
    t0 = time.time()
    out = run_attnviz(attnviz, model_path, args, prompt, tmpdir)
    av_s = time.time() - t0
    if isinstance(out, str):
        print(f"FAIL generate {name}: {out}")
        return False, None
    g = out.get("generation") or {}
    ids = out.get("input_ids") or []
    P = g.get("prompt_tokens")
    if P != len(ref_prompt) or ids[:len(ref_prompt)] != ref_prompt:
        problems.append(f"prompt: prompt_tokens {P}, ids {ids[:len(ref_prompt)]}; transformers' tokenizer "
                        f"{len(ref_prompt)} ids {ref_prompt}")
        P = len(ref_prompt)
    t0 = time.time()
    hf = hf_generate(model, ids[:P], n)
    hf_s = time.time() - t0
    hf_gen = hf.sequences[0, P:].tolist()
    av_gen = ids[P:]
    eos = eos_ids(model)
    # the generated ids; a divergence is excused only at a near tie of transformers' top two
    upto, note = len(hf_gen), ""
    if av_gen != hf_gen:
        g0 = next((i for i in range(min(len(av_gen), len(hf_gen))) if av_gen[i] != hf_gen[i]),
                  min(len(av_gen), len(hf_gen)))
        if g0 < len(hf.logits):
            p = hf.logits[g0][0].double().softmax(-1)
            top2 = p.topk(2).values.tolist()
        else:
            top2 = [1.0, 0.0]
        if g0 < len(av_gen) and g0 < len(hf_gen) and top2[0] - top2[1] < TIE_TOL:
            note = f"; diverged at step {g0} on a near tie ({top2[0]:.9g} vs {top2[1]:.9g}), compared up to it"
            upto = g0
        else:
            problems.append(f"generated ids differ from step {g0}: attnviz {av_gen[g0:g0 + 5]}... "
                            f"({len(av_gen)} tokens), transformers {hf_gen[g0:g0 + 5]}... ({len(hf_gen)} tokens); "
                            f"transformers' top two at that step {top2}")
            upto = g0
    G = len(av_gen)
    if g.get("generated_tokens") != G or len(g.get("steps") or []) != G:
        problems.append(f"generated_tokens {g.get('generated_tokens')}, steps {len(g.get('steps') or [])}, "
                        f"ids after the prompt {G}")
    want_stop = "eos" if av_gen and av_gen[-1] in eos else "length"
    if g.get("stop_reason") != want_stop or (want_stop == "length" and G != n):
        problems.append(f"stop_reason {g.get('stop_reason')!r} after {G} of {n} tokens (last id "
                        f"{av_gen[-1] if av_gen else None}, eos {sorted(eos)}): want {want_stop!r}")
    if g.get("strategy") != "greedy":
        problems.append(f"strategy {g.get('strategy')!r}, want 'greedy'")
    texts = decode_variants(tok, ids[:P], av_gen)
    if g.get("text") not in texts:
        problems.append(text_diff(g.get("text"), texts))
    # the sequence's "tokens": the vocabulary's spellings, prompt and generated
    spell = spelling(tok)
    bad = [(i, t, spell(x)) for i, (x, t) in enumerate(zip(ids, out.get("tokens") or []))
           if spell(x) is not None and t != spell(x)]
    if len(out.get("tokens") or []) != len(ids) or bad:
        problems.append(f"\"tokens\" ({len(out.get('tokens') or [])} for {len(ids)} ids) differ from the "
                        f"vocabulary's spellings, first (position, attnviz, vocabulary): {bad[:1]}")
    # steps: position, id, token, prob, top-K
    k = predict_k or 10
    worst_p = 0.0
    for s, st in enumerate((g.get("steps") or [])[:upto]):
        ref = hf.logits[s][0].double().softmax(-1).numpy()
        where = f"step {s}"
        if st.get("position") != P + s or st.get("id") != av_gen[s]:
            problems.append(f"{where}: position {st.get('position')} id {st.get('id')}, want {P + s} {av_gen[s]}")
            continue
        if spell(st["id"]) is not None and st.get("token") != spell(st["id"]):
            problems.append(f"{where}: token {st.get('token')!r}, the vocabulary has {spell(st['id'])!r}")
        d = abs(float(st.get("prob", -1)) - ref[st["id"]])
        worst_p = max(worst_p, d)
        if d > PROB_TOL:
            problems.append(f"{where}: prob {st.get('prob')} of id {st['id']}, transformers {ref[st['id']]:.9g}")
        pr, w = compare_top(st.get("top"), ref, k, where, spell)
        problems += pr
        worst_p = max(worst_p, w)
    # attention: generate()'s per-step rows (the cache path) and one pass over the final sequence
    att = np.asarray(out.get("attention"), dtype=np.float64)
    L, H = len(hf.attentions[0]), hf.attentions[0][0].shape[1]
    n_all = len(ids)
    worst_a = worst_full = 0.0
    if att.shape != (L, H, n_all, n_all):
        problems.append(f"attention shape {att.shape}, want {(L, H, n_all, n_all)}")
    else:
        # Phi-3's generate() drops the cache once the sequence passes LongRoPE's original context
        # and runs it whole again: that step's attention is the full matrix, which rewrote the
        # rows before it (in attnviz too); those rows are compared with it, not with their own steps
        redo = next((s for s in range(1, len(hf.attentions)) if hf.attentions[s][0].shape[-2] > 1), None)
        if redo is None:
            a0 = torch.stack([a[0] for a in hf.attentions[0]]).numpy()  # (L, H, P, P)
            worst_a = float(np.abs(att[:, :, :P, :P] - a0).max())
        for s in range(1, min(upto + 1, len(hf.attentions), G)):
            q = P + s - 1  # the query: the token fed at step s (generated at step s - 1)
            if redo is not None and s < redo:
                continue
            if s == redo:
                full_s = torch.stack([a[0] for a in hf.attentions[s]]).numpy()  # (L, H, q + 1, q + 1)
                d = float(np.abs(att[:, :, :q + 1, :q + 1] - full_s).max())
                worst_a = max(worst_a, d)
                if d > ATTN_TOL:
                    problems.append(f"attention at step {s} (the whole sequence again, {q + 1} tokens): max |diff| {d:.2e}")
                    break
                continue
            for l, a in enumerate(hf.attentions[s]):
                # (H, m): with a sliding window the cache holds only the last m keys (m <= q + 1);
                # the keys before them are masked, which the full-sequence comparison checks
                row = a[0, :, -1, :].numpy()
                m = row.shape[-1]
                d = np.abs(att[l, :, q, q + 1 - m:q + 1] - row)
                worst_a = max(worst_a, float(d.max()))
                if d.max() > ATTN_TOL:
                    h, j = np.unravel_index(d.argmax(), d.shape)
                    problems.append(f"attention at step {s} (row {q}), layer {l} head {h} key {q + 1 - m + j}: "
                                    f"attnviz {att[l, h, q, q + 1 - m + j]:.9g}, transformers {row[h, j]:.9g}")
                    break
            if any(p.startswith("attention at step") for p in problems):
                break
        if worst_a > ATTN_TOL and not any(p.startswith("attention") for p in problems):
            problems.append(f"prompt attention (step 0) max |diff| {worst_a:.2e}")
        probs_full, a_full = full_forward(model, ids)
        worst_full = float(np.abs(att - a_full).max())
        if worst_full > ATTN_TOL:
            l, h, i, j = np.unravel_index(np.abs(att - a_full).argmax(), att.shape)
            problems.append(f"final sequence's attention vs one forward pass: max |diff| {worst_full:.2e} at layer {l} "
                            f"head {h} row {i} key {j} (attnviz {att[l, h, i, j]:.9g}, transformers {a_full[l, h, i, j]:.9g})")
        if predict_k:
            pr, w, c = compare_predictions(out.get("predictions"), probs_full, range(n_all), predict_k,
                                           "predictions", spell)
            problems += pr
            worst_p = max(worst_p, w)
    ok = not problems
    print(f"{'PASS' if ok else 'FAIL'} generate {name}: greedy {G} tokens after a {P}-token prompt (stop "
          f"{g.get('stop_reason')}){' with --predict ' + str(predict_k) if predict_k else ''}, ids "
          f"{'identical to' if av_gen == hf_gen else 'differ from'} transformers' generate(){note}; {RANKS['all']} top-K "
          f"ranks: {RANKS['strict']} outside near ties, {RANKS['same']} with transformers' very id; max |diff| of step probs {worst_p:.2e}, of attention rows "
          f"{worst_a:.2e}, of the final sequence's attention {worst_full:.2e} (tol {ATTN_TOL:g}); "
          f"attnviz {av_s:.1f} s, transformers {hf_s:.1f} s")
    for p in problems[:8]:
        print(f"  {name}: {p}")
    return ok, out


def check_stop(attnviz, name, model_path, tok, full, tmpdir):
    """--stop STRING: the run ends at the first generated token whose text (the continuation's,
    not the prompt's) contains STRING, with the full run's ids up to it; a string the
    continuation never contains changes nothing. Strings: one that straddles two tokens, the
    prompt's last word (in the prompt, perhaps later too), and one never generated."""
    g = full["generation"]
    P, gen = g["prompt_tokens"], full["input_ids"][g["prompt_tokens"]:]
    pieces = [tok.decode(gen[:i + 1], skip_special_tokens=True) for i in range(len(gen))]
    stops = []
    cut = next((i for i in range(1, len(gen)) if pieces[i - 1].strip() and pieces[i] != pieces[i - 1]), None)
    if cut is not None:  # the last character of token cut - 1's text and the first of token cut's
        stops.append(pieces[cut][len(pieces[cut - 1]) - 1:len(pieces[cut - 1]) + 1])
    stops.append(" " + PROMPTS[name].split()[-1])
    stops.append("\u2603never\u2603")
    ok = True
    for stop in stops:
        first = next((i for i in range(len(gen)) if stop in pieces[i]), None)
        out = run_attnviz(attnviz, model_path, ["--generate", str(len(gen)), "--stop", stop], PROMPTS[name], tmpdir)
        if isinstance(out, str):
            print(f"FAIL generate_stop {name} {stop!r}: {out}")
            ok = False
            continue
        sg = out.get("generation") or {}
        got = out.get("input_ids", [])[P:]
        if first is None:
            want_ids, want_reason = gen, g.get("stop_reason")
        else:
            want_ids, want_reason = gen[:first + 1], "stop"
        good = sg.get("stop_reason") == want_reason and got == want_ids and sg.get("generated_tokens") == len(want_ids)
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} generate_stop {name} {stop!r}: ended after {len(got)} tokens "
              f"(stop_reason {sg.get('stop_reason')!r}); want {want_reason!r} after {len(want_ids)}, the full "
              f"run's ids up to there{'' if got == want_ids else ' (they differ)'}")
    return ok


def check_config_eos(attnviz, name, model_dir, full, tmpdir):
    """generation_config.json's eos_token_id counts: a copy of the folder (weights linked) whose
    generation_config.json adds, as a second end token, an id that the greedy run generated
    first at step >= 3; attnviz and transformers must both stop right after it, with "eos"."""
    from transformers import AutoModelForCausalLM
    g = full["generation"]
    P, gen = g["prompt_tokens"], full["input_ids"][g["prompt_tokens"]:]
    step = next((i for i in range(3, len(gen)) if gen[i] not in gen[:i]), None)
    if step is None:
        print(f"SKIP generate_config_eos {name}: the greedy run repeats itself from step 3")
        return True
    var = os.path.join(tmpdir, name + "-eos")
    os.makedirs(var, exist_ok=True)
    for f in os.listdir(model_dir):
        if f != "generation_config.json" and not os.path.exists(os.path.join(var, f)):
            os.symlink(os.path.abspath(os.path.join(model_dir, f)), os.path.join(var, f))
    gc = json.load(open(os.path.join(model_dir, "generation_config.json")))
    base = gc.get("eos_token_id")
    gc["eos_token_id"] = (base if isinstance(base, list) else [base] if base is not None else []) + [gen[step]]
    json.dump(gc, open(os.path.join(var, "generation_config.json"), "w"))
    out = run_attnviz(attnviz, var, ["--generate", str(len(gen))], PROMPTS[name], tmpdir)
    if isinstance(out, str):
        print(f"FAIL generate_config_eos {name}: {out}")
        return False
    model = AutoModelForCausalLM.from_pretrained(var, attn_implementation="eager", dtype=torch.float32).eval()
    hf = hf_generate(model, full["input_ids"][:P], len(gen)).sequences[0, P:].tolist()
    got = out["input_ids"][P:]
    want = gen[:step + 1]
    ok = got == want and hf == want and (out.get("generation") or {}).get("stop_reason") == "eos"
    print(f"{'PASS' if ok else 'FAIL'} generate_config_eos {name}: generation_config.json's eos_token_id "
          f"{gc['eos_token_id']}: attnviz stopped after {len(got)} tokens (stop_reason "
          f"{(out.get('generation') or {}).get('stop_reason')!r}), transformers after {len(hf)}; want {step + 1}, 'eos'")
    return ok


def check_padded_row(attnviz, name, model_dir, tok, model, tmpdir):
    """A vocabulary row past the tokenizer's last token (Qwen's matrices have 151,936 rows for
    151,669 tokens) is a token transformers can generate (it decodes to nothing). Finds a prompt
    whose greedy next token is such a row (random prompts from a fixed word list, seeded), then
    compares attnviz --generate 3 with generate() on it."""
    import random
    n_tok = len(tok)
    if model.config.vocab_size <= n_tok:
        print(f"SKIP generate_padded_row {name}: no rows past the tokenizer's {n_tok} tokens")
        return True
    words = "the cat sat on a mat dog ran far away because it was tired and hungry so we went home early today".split()
    rng = random.Random(1)
    found, tried = None, 0
    while found is None and tried < 512:
        batch = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(16)]
        tried += len(batch)
        enc = [tok(t)["input_ids"] for t in batch]
        enc = [e[:min(map(len, enc))] for e in enc]  # prefixes of equal length: one batch
        with torch.no_grad():
            h = model.model(torch.tensor(enc)).last_hidden_state
            top = model.lm_head(h)
        am = top.argmax(-1)
        for b, ids in enumerate(enc):
            for i in range(len(ids)):
                if int(am[b, i]) >= n_tok:
                    text = tok.decode(ids[:i + 1])
                    if tok(text)["input_ids"] == ids[:i + 1]:
                        found = (text, ids[:i + 1], int(am[b, i]))
                        break
            if found:
                break
    if found is None:
        print(f"SKIP generate_padded_row {name}: no prompt of {tried} picks a row past the tokenizer greedily")
        return True
    text, ids, row = found
    hf = hf_generate(model, ids, 3).sequences[0, len(ids):].tolist()
    out = run_attnviz(attnviz, model_dir, ["--generate", "3"], text, tmpdir)
    got = out["input_ids"][len(ids):] if isinstance(out, dict) else out
    ok = got == hf
    print(f"{'PASS' if ok else 'FAIL'} generate_padded_row {name}: prompt {text!r} ({len(ids)} tokens; found in "
          f"{tried} tries), greedy next token is row {row} (the tokenizer has {n_tok}): transformers generates "
          f"{hf}, {'attnviz ' + str(got) if isinstance(got, list) else got}")
    return ok


def check_sampled(attnviz, name, model_path, tok, model, tmpdir):
    prompt = PROMPTS[name]
    base = ["--generate", "16", "--temperature", "0.8", "--top-p", "0.9"]
    runs = {}
    for label, seed in (("a", 7), ("b", 7), ("c", 8)):
        out = run_attnviz(attnviz, model_path, base + ["--seed", str(seed)], prompt, tmpdir)
        if isinstance(out, str):
            print(f"FAIL generate_sample {name}: seed {seed}: {out}")
            return False
        runs[label] = out
    ok = True
    same = runs["a"].get("input_ids") == runs["b"].get("input_ids") and \
        runs["a"].get("generation") == runs["b"].get("generation")
    ok &= same
    print(f"{'PASS' if same else 'FAIL'} generate_sample_reproducible {name}: seed 7 twice gives "
          f"{'identical' if same else 'different'} output ({runs['a']['generation'].get('text')!r}"
          f"{'' if same else ' vs ' + repr(runs['b']['generation'].get('text'))})")
    for label, seed in (("a", 7), ("c", 8)):
        out = runs[label]
        g = out.get("generation") or {}
        ids = out.get("input_ids") or []
        P = g.get("prompt_tokens")
        gen = ids[P:] if isinstance(P, int) else []
        problems, kinds = [], set()
        if g.get("strategy") != "sample":
            problems.append(f"strategy {g.get('strategy')!r}, want 'sample'")
        eos = eos_ids(model)
        if not 1 <= len(gen) <= 16 or g.get("generated_tokens") != len(gen) or len(g.get("steps") or []) != len(gen):
            problems.append(f"{len(gen)} ids after the prompt, generated_tokens {g.get('generated_tokens')}, "
                            f"steps {len(g.get('steps') or [])}")
        elif g.get("stop_reason") != ("eos" if gen[-1] in eos else "length") or (gen[-1] not in eos and len(gen) != 16):
            problems.append(f"stop_reason {g.get('stop_reason')!r} after {len(gen)} tokens, last id {gen[-1]}")
        if gen:
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0].double()
            for s, st in enumerate(g.get("steps") or []):
                if s >= len(gen) or st.get("id") != gen[s] or st.get("position") != P + s:
                    problems.append(f"step {s}: id {st.get('id')} position {st.get('position')}, want "
                                    f"{gen[s] if s < len(gen) else None} {P + s}")
                    break
                raw = logits[P + s - 1].softmax(-1)
                temp = (logits[P + s - 1] / 0.8).softmax(-1)
                sp, order = temp.sort(descending=True)
                before = sp.cumsum(0) - sp  # mass of the tokens ranked above each
                nucleus = order[before < 0.9 + 1e-4]
                i = st["id"]
                if i not in set(nucleus.tolist()):
                    problems.append(f"step {s}: id {i} (tempered p {temp[i]:.3g}, rank "
                                    f"{int((order == i).nonzero()[0, 0])}) is outside the top-p nucleus of "
                                    f"{len(nucleus)} tokens")
                    break
                # prob and top-K are the model's own distribution, before temperature and top-p
                # (what attnviz's page says of a sampled step); the tempered and renormalized
                # values are named when they are what was printed instead
                kept = temp[nucleus].sum()
                cand = {"raw softmax": raw[i], "tempered softmax": temp[i], "renormalized nucleus": temp[i] / kept}
                match = [k for k, v in cand.items() if abs(float(st.get("prob", -1)) - float(v)) <= PROB_TOL]
                kinds.update(match)
                if "raw softmax" not in match:
                    problems.append(f"step {s}: prob {st.get('prob')} of id {i} is not the model's softmax; "
                                    + ", ".join(f"{k} {float(v):.6g}" for k, v in cand.items()))
                    break
                pr, w = compare_top(st.get("top"), raw.numpy(), 10, f"step {s}", spelling(tok))
                if pr:
                    problems += pr
                    break
        good = not problems
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} generate_sample_valid {name} seed {seed}: {len(gen)} tokens "
              f"(stop {g.get('stop_reason')}), "
              f"{'every one inside' if good else 'checked against'} the top-p 0.9 nucleus at temperature 0.8; "
              f"step probs match {' / '.join(sorted(kinds)) or '-'} (want the model's softmax, top-10 too); "
              f"text {g.get('text')!r}")
        for p in problems[:5]:
            print(f"  {name} seed {seed}: {p}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("--repo", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    ap.add_argument("--gguf", help="SmolLM2-135M-Instruct Q4_1 GGUF (tools/pymodel.sh smollm2)")
    ap.add_argument("--only")
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(args.workdir, exist_ok=True)
    ok = True
    t_all = time.time()
    sampled_done = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("smollm2-gguf", "llama", "gpt2", "qwen2", "mistral", "gemma2", "gemma3", "phi3", "phi3-cross", "mixtral",
                     "qwen3moe", "gptoss"):
            if args.only and name != args.only:
                continue
            t0 = time.time()
            if name == "smollm2-gguf":
                if not (args.gguf and os.path.isfile(args.gguf)):
                    print("SKIP generate smollm2-gguf: no SmolLM2 GGUF (tools/pymodel.sh smollm2)")
                    continue
                path = args.gguf
                tok, model = load_hf(*os.path.split(os.path.abspath(path)), workdir=args.workdir)
            else:
                miss = lm_checkpoints.missing(name, args.repo)
                if miss and not os.path.exists(os.path.join(args.workdir, name, "config.json")):
                    print(f"FAIL generate {name}: tokenizer source {miss} is absent (tools/deps.sh test: npm ci, tools/refdata.sh)")
                    ok = False
                    continue
                path = lm_checkpoints.build(name, args.workdir, args.repo)
                tok, model = load_hf(path)
            load_s = time.time() - t0
            good, full = check_greedy(args.attnviz, name, path, tok, model, args.tokens, tmp,
                                      predict_k=5 if name in ("llama", "mixtral") else None)
            ok &= good
            if name == "smollm2-gguf" and full is not None:
                ok &= check_stop(args.attnviz, name, path, tok, full, tmp)
            if name == "qwen2":
                ok &= check_padded_row(args.attnviz, name, path, tok, model, tmp)
            if name == "llama" and full is not None:
                ok &= check_config_eos(args.attnviz, name, path, full, tmp)
            # one model suffices: the trained one when present. Not phi3-cross: the sampled check's
            # reference is one pass over the final sequence, whose softmax before the crossing (long
            # factors) is not what those steps chose from (short ones, in transformers too)
            if not sampled_done and name != "phi3-cross":
                ok &= check_sampled(args.attnviz, name, path, tok, model, tmp)
                sampled_done = True
            print(f"  {name}: {time.time() - t0:.1f} s (transformers load {load_s:.1f} s)")
    print(f"  generate_check: {time.time() - t_all:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
