"""Encoder-decoder models (BART, Marian, T5 / Flan-T5) against transformers itself: tiny random
checkpoints written by transformers' own config and model classes (2 encoder and 2 decoder layers,
4 heads), F32 and BF16, each beside a tokenizer trained here with the `tokenizers` library in its
family's layout (BART: byte-level BPE with RoBERTa's template, saved both as vocab.json + merges.txt
and as tokenizer.json; Marian and T5: a Unigram tokenizer.json with Metaspace and a `$A </s>`
template — transformers has no converter that writes a tokenizer.json for Marian's SentencePiece
files, so the Marian fixture's is made the way T5's is).

usage: seq2seq_check.py ATTNVIZ WORKDIR [--only NAME[,NAME...]]
       seq2seq_check.py --fixture OUT_DIR   (writes the committed tests/data/small-bart, small-marian,
                                             small-t5: 16 wide, 2 + 2 layers, 2 heads, F32)

Per checkpoint:
  - teacher forcing: `attnviz --model DIR SOURCE --decoder-text TARGET --npy` on source/target pairs
    of several lengths, its encoder, decoder and cross attention (.npy, float32 as written) against
    transformers' eager attention (output_attentions) in float64 on decoder_start_token_id followed
    by the target's tokens; the tokens of both sides (--json) against the tokenizers library's
  - greedy generation: `attnviz --generate N` token for token against generate(do_sample=False,
    num_beams=1) with no logit processors (attnviz's greedy is the plain argmax, stopping at eos),
    and the attention over what was generated against transformers on that sequence
  - --predict 5 with the teacher forcing: the top-5 ids after every decoder token against transformers' logits
    (probabilities within TOL)
  - sampled generation (--temperature 0.8 --top-p 0.9 --seed): reproducible, every token inside transformers'
    nucleus, its prob and top-K transformers'
  - long sources (check_long): up to 1,024 tokens (BART's 1,024 positions, Marian's 512; T5 1,024 x 1,024)
  - the source's token ids (--tokens-only) against the tokenizers library on the tokenizer corpus
And a folder laid out as OPUS-MT's (SentencePiece files, vocab.json) given a tokenizer.json by
tools/marian_tokenizer.py, and T5's tokenizer.json as transformers' T5Converter writes it from a
SentencePiece model: attnviz's ids against the tokenizers library's and SentencePiece's (MarianTokenizer's).
Prints PASS/FAIL lines; exit 1 on any FAIL.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

sys.dont_write_bytecode = True
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")  # MarianTokenizer's, without Moses
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

TOL = 1e-4
VOCAB = 400
HERE = os.path.dirname(os.path.abspath(__file__))
SHAPE = dict(d_model=64, layers=2, heads=4, ffn=96)
# name: (family, dtype, extra config)
SPECS = {
    "bart-f32": ("bart", "float32", {}),
    "bart-bf16": ("bart", "bfloat16", {"scale_embedding": True}),
    "marian-f32": ("marian", "float32", {}),
    "marian-bf16": ("marian", "bfloat16", {}),
    "t5-f32": ("t5", "float32", {"feed_forward_proj": "relu"}),
    "flan-t5-bf16": ("t5", "bfloat16", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
    "mt5-f32": ("mt5", "float32", {"feed_forward_proj": "gated-gelu"}),
    # unequal depths: a distilled BART's shallower decoder (distilbart-cnn-12-6's shape), a T5 whose
    # num_decoder_layers passes num_layers (t5-efficient-*'s DL variants)
    "distilbart-f32": ("bart", "float32", {"encoder_layers": 3}),
    "t5-deepdec-f32": ("t5", "float32", {"feed_forward_proj": "relu", "num_decoder_layers": 3}),
}


def corpus_lines():
    with open(os.path.join(HERE, "../data/corpus/sentences.txt"), encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def tok_corpus():
    with open(os.path.join(HERE, "../tokenizer/corpus.tsv"), encoding="utf-8") as f:
        return [l.rstrip("\n").split("\t")[0] for l in f if l.strip()]


def make_bpe(out):
    """BART's layout: byte-level BPE with a prefix space, <s> A </s> (RobertaProcessing)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines() + tok_corpus(), trainer)
    tok.add_special_tokens([AddedToken(s, lstrip=(s == "<mask>"), normalized=False) for s in specials])
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)  # vocab.json and merges.txt, the files BART's folders hold
    return tok


def make_unigram(out, specials, eos):
    """SentencePiece's layout in tokenizer.json: Metaspace, Unigram, `$A </s>`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=VOCAB, special_tokens=specials, unk_token="<unk>",
                                      show_progress=False)
    # the English sentences only: the tokenizer corpus's many scripts need more pieces than VOCAB (they are <unk>)
    tok.train_from_iterator(corpus_lines(), trainer)
    tok.add_special_tokens([AddedToken(s, normalized=False) for s in specials])
    tok.post_processor = processors.TemplateProcessing(single=f"$A {eos}", pair=f"$A $B {eos}",
                                                       special_tokens=[(eos, tok.token_to_id(eos))])
    tok.save(os.path.join(out, "tokenizer.json"))
    return tok


def build(name, workdir, S=SHAPE, out=None):
    fam, dtype, extra = SPECS[name]
    extra = dict(extra)
    enc_layers = extra.pop("encoder_layers", S["layers"])  # BART/Marian: the decoder keeps S's
    out = out or os.path.join(workdir, name)
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    os.makedirs(out, exist_ok=True)
    if fam == "bart":
        tok = make_bpe(out)
        V = tok.get_vocab_size()
        cfg = transformers.BartConfig(vocab_size=V, d_model=S["d_model"], encoder_layers=enc_layers,
                                      decoder_layers=S["layers"], encoder_attention_heads=S["heads"],
                                      decoder_attention_heads=S["heads"], encoder_ffn_dim=S["ffn"],
                                      decoder_ffn_dim=S["ffn"], max_position_embeddings=S.get("positions", 1024),
                                      pad_token_id=1,
                                      bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                                      forced_bos_token_id=None, forced_eos_token_id=None, **extra)
        model = transformers.BartForConditionalGeneration(cfg)
    elif fam == "marian":
        tok = make_unigram(out, ["</s>", "<unk>", "<pad>"], "</s>")
        V = tok.get_vocab_size()
        pad = tok.token_to_id("<pad>")
        cfg = transformers.MarianConfig(vocab_size=V, d_model=S["d_model"], encoder_layers=enc_layers,
                                        decoder_layers=S["layers"], encoder_attention_heads=S["heads"],
                                        decoder_attention_heads=S["heads"], encoder_ffn_dim=S["ffn"],
                                        decoder_ffn_dim=S["ffn"], max_position_embeddings=S.get("positions", 512),
                                        pad_token_id=pad,
                                        eos_token_id=tok.token_to_id("</s>"), decoder_start_token_id=pad,
                                        scale_embedding=True, activation_function="swish", **extra)
        model = transformers.MarianMTModel(cfg)
    else:
        tok = make_unigram(out, ["<pad>", "</s>", "<unk>"], "</s>")
        V = tok.get_vocab_size()
        Config = transformers.MT5Config if fam == "mt5" else transformers.T5Config
        cfg = Config(vocab_size=V, d_model=S["d_model"], d_kv=S["d_model"] // S["heads"], d_ff=S["ffn"],
                                    num_layers=S["layers"], num_heads=S["heads"], relative_attention_num_buckets=8,
                                    relative_attention_max_distance=20, pad_token_id=0, eos_token_id=1,
                                    decoder_start_token_id=0, **extra)
        model = (transformers.MT5ForConditionalGeneration if fam == "mt5" else transformers.T5ForConditionalGeneration)(cfg)
    torch.manual_seed(sum(map(ord, name)))
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_((0.0 if "bias" in pname else 1.0) + 0.1 * torch.randn_like(p))
            elif "relative_attention_bias" in pname:
                p.normal_(0.0, 1.0)
            elif any(k in pname for k in ("q_proj", "k_proj", ".q.", ".k.")):
                # attention peaky, not flat; T5 does not scale q . k, so its q and k carry d_kv^-1/4 each
                # (its own initialization folds the scale in the same way)
                p.normal_(0.0, 1.5 / p.shape[1] ** 0.5 / (2.0 if fam in ("t5", "mt5") else 1.0))
            elif "embed" in pname or "shared" in pname:
                p.normal_(0.0, 0.5)
            else:
                p.normal_(0.0, 1.0 / p.shape[1] ** 0.5)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.copy_(0.1 * torch.randn_like(model.final_logits_bias))
    model.to(getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"decoder_start_token_id": cfg.decoder_start_token_id, "eos_token_id": cfg.eos_token_id,
                   "pad_token_id": cfg.pad_token_id}, f)
    return out


def gen_cache(model):
    """generate()'s cache option: a T5 decoder deeper than its encoder overruns transformers' cache, which
    is sized by num_layers (the encoder's), so that one decodes without a cache (the same greedy tokens)."""
    c = model.config
    deep = c.model_type in ("t5", "mt5") and c.num_decoder_layers > c.num_layers
    return {"use_cache": False} if deep else {}


def load_tok(model_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))


_MODELS = {}


def reference(model_dir, src_ids, dec_ids):
    """Encoder, decoder and cross attention (L, H, rows, cols) of transformers' eager path in float64, the model,
    and the decoder's next-token probabilities after every row (rows, vocab)."""
    if model_dir not in _MODELS:
        _MODELS[model_dir] = transformers.AutoModelForSeq2SeqLM.from_pretrained(
            model_dir, attn_implementation="eager", dtype=torch.float64).eval()
    model = _MODELS[model_dir]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([src_ids]), decoder_input_ids=torch.tensor([dec_ids]),
                    output_attentions=True)
    st = lambda t: torch.stack([a[0] for a in t]).double().numpy()  # noqa: E731
    probs = out.logits[0].double().softmax(-1).numpy()
    return st(out.encoder_attentions), st(out.decoder_attentions), st(out.cross_attentions), model, probs


def run_attnviz(attnviz, model_dir, args, prefix, json_out=True):
    """attnviz's document (None without json_out: a long input's JSON is large and only the .npy is read) and
    its three stacks."""
    r = subprocess.run([attnviz, "--model", model_dir, "--quiet", "--npy", prefix + ".npy"]
                       + (["--json", prefix + ".json"] if json_out else []) + args, capture_output=True, text=True)
    if r.returncode != 0:
        return f"attnviz {' '.join(args[:1])[:30]}... failed: {r.stderr.strip()}"
    d = json.load(open(prefix + ".json")) if json_out else None
    return (d, np.load(prefix + ".npy"), np.load(prefix + ".decoder.npy"), np.load(prefix + ".cross.npy"))


def compare(name, what, got, ref):
    """Max |diff| of the three stacks, or a string saying why they cannot be compared."""
    worst = 0.0
    for g, r, k in zip(got, ref, ("encoder", "decoder", "cross")):
        if g.shape != r.shape:
            return f"{what}: {k} attention shape {g.shape}, transformers {r.shape}"
        worst = max(worst, float(np.abs(g - r).max()))
    return worst


def check_model(attnviz, model_dir, name):
    fam = SPECS[name][0]
    tok = load_tok(model_dir)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    start = cfg["decoder_start_token_id"]
    lines = corpus_lines()
    # source/target pairs of several lengths: a word to three sentences (check_long: to 1,024 tokens)
    pairs = [("hello", "world"), (lines[0], lines[1]), (lines[2] + " " + lines[3], lines[4]),
             (lines[5], lines[6] + " " + lines[7]), (" ".join(lines[10:13]), lines[14])]
    ok, worst, peak, lens = True, 0.0, [], []
    pred_bad, pworst, n_rows = [], 0.0, 0
    prefix = os.path.join(os.path.dirname(model_dir), name + ".out")
    model = None
    for src, tgt in pairs:
        got = run_attnviz(attnviz, model_dir, [src, "--decoder-text", tgt, "--predict", str(PRED_K)], prefix)
        if isinstance(got, str):
            print(f"FAIL seq2seq {name}: {got}")
            return False
        d, ea, da, xa = got
        se, te = tok.encode(src), tok.encode(tgt)
        dec_ids = [start] + te.ids
        want_dec = [tok.id_to_token(i) for i in dec_ids]
        if d["encoder_tokens"] != se.tokens or d["decoder_tokens"] != want_dec:
            print(f"FAIL seq2seq {name}: tokens {d['encoder_tokens'][:6]} / {d['decoder_tokens'][:6]}, tokenizers "
                  f"{se.tokens[:6]} / {want_dec[:6]}")
            return False
        re_, rd, rx, model, probs = reference(model_dir, se.ids, dec_ids)
        diff = compare(name, f"{len(se.ids)}x{len(dec_ids)}", (ea, da, xa), (re_, rd, rx))
        pw, pb = compare_predictions(d.get("predictions"), probs)
        pworst, n_rows = max(pworst, pw), n_rows + len(dec_ids)
        pred_bad += [f"{len(se.ids)}x{len(dec_ids)}: {b}" for b in pb]
        if isinstance(diff, str):
            print(f"FAIL seq2seq {name}: {diff}")
            return False
        worst = max(worst, diff)
        peak.append(float(rx.max(axis=-1).mean()))
        lens.append(f"{len(se.ids)}x{len(dec_ids)}")
    good = worst <= TOL
    ok &= good
    print(f"{'PASS' if good else 'FAIL'} seq2seq {name} ({SPECS[name][1]}): encoder, decoder and cross attention "
          f"max |diff| {worst:.2e} from float64 transformers eager (tol {TOL:g}), source x decoder tokens "
          f"{','.join(lens)}, mean cross row max {np.mean(peak):.2f}")
    good = not pred_bad and pworst <= TOL
    ok &= good
    print(f"{'PASS' if good else 'FAIL'} seq2seq_predict {name}: --predict {PRED_K} after each of {n_rows} decoder "
          f"tokens: transformers' top-{PRED_K} ids, probabilities max |diff| {pworst:.2e} (tol {TOL:g}; softmax of "
          f"float64 logits)")
    for b in pred_bad[:3]:
        print(f"  {b}")
    # greedy generation, token for token, then the attention over what was generated
    gen_bad, gworst, n_tok = [], 0.0, 0
    for src in (lines[20], lines[21] + " " + lines[22], "the cat"):
        N = 12
        got = run_attnviz(attnviz, model_dir, [src, "--generate", str(N)], prefix)
        if isinstance(got, str):
            print(f"FAIL seq2seq_generate {name}: {got}")
            return False
        d, ea, da, xa = got
        se = tok.encode(src)
        with torch.no_grad():
            ref = model.generate(torch.tensor([se.ids]), max_new_tokens=N, do_sample=False, num_beams=1, min_length=0,
                                 no_repeat_ngram_size=0, forced_bos_token_id=None, forced_eos_token_id=None,
                                 bad_words_ids=None, repetition_penalty=1.0, length_penalty=1.0,
                                 decoder_start_token_id=start, **gen_cache(model))[0].tolist()
        want = [tok.id_to_token(i) for i in ref]
        if d["decoder_tokens"] != want:
            gen_bad.append(f"{src[:30]!r}: attnviz {d['decoder_tokens']}, transformers {want}")
            continue
        n_tok += len(ref) - 1
        re_, rd, rx, _, _ = reference(model_dir, se.ids, ref)
        diff = compare(name, "generated", (ea, da, xa), (re_, rd, rx))
        if isinstance(diff, str):
            gen_bad.append(diff)
            continue
        gworst = max(gworst, diff)
    good = not gen_bad and gworst <= TOL
    ok &= good
    print(f"{'PASS' if good else 'FAIL'} seq2seq_generate {name}: greedy --generate 12 on 3 sources, {n_tok} tokens "
          f"identical to transformers generate(); attention over them max |diff| {gworst:.2e} (tol {TOL:g})")
    for b in gen_bad[:3]:
        print(f"  {b}")
    ok &= check_sampled(attnviz, model_dir, name, tok, prefix)
    ok &= check_long(attnviz, model_dir, name, tok, cfg, prefix)
    # the source tokenizer against the tokenizers library, on the whole tokenizer corpus (its sentence pairs
    # too) and the sentences, through one --tokens-only --batch run; once per layout (the BF16 fixtures' files
    # are the same)
    if SPECS[name][1] != "float32":
        return ok
    texts = [l.rstrip("\n") for l in open(os.path.join(HERE, "../tokenizer/corpus.tsv"), encoding="utf-8")]
    texts = [t for t in texts + lines if t.strip() and not t.startswith("\t")]
    # lines longer than the model's positions are truncated (a tested path of its own): left out here
    limit = cfg.get("max_position_embeddings", 1 << 30) if fam not in ("t5", "mt5") else 1 << 30
    n_all = len(texts)
    texts = [t for t in texts if len(tok.encode(*t.split("\t", 1)).ids) <= limit]
    batch = prefix + ".corpus.txt"
    with open(batch, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    r = subprocess.run([attnviz, "--model", model_dir, "--tokens-only", "--quiet", "--batch", batch], capture_output=True,
                       text=True)
    got = [json.loads(l)["input_ids"] for l in r.stdout.splitlines()] if r.returncode == 0 else []
    bad = [] if len(got) == len(texts) else [f"attnviz gave {len(got)} lines for {len(texts)}: {r.stderr.strip()[:200]}"]
    for t, g in zip(texts, got):
        want = tok.encode(*t.split("\t", 1)).ids
        if g != want:
            bad.append(f"{t[:40]!r}: attnviz {str(g)[:60]}, tokenizers {want[:10]}")
    good = not bad
    ok &= good
    print(f"{'PASS' if good else 'FAIL'} seq2seq_tokens {name}: {len(texts) - len(bad)}/{len(texts)} lines of the "
          f"tokenizer corpus and the sentences (pairs included) with the tokenizers library's ids ({fam} layout; "
          f"{n_all - len(texts)} longer than the {limit if limit < 1 << 30 else 'unbounded'} positions left out)")
    for b in bad[:3]:
        print(f"  {b}")
    return ok


PRED_K = 5


def compare_predictions(preds, probs):
    """attnviz's --predict entries against transformers' probabilities (rows, vocab): the top-K ids in order
    (an exchange of two whose probabilities are within 1e-6 of each other is a tie, not a difference) and their
    probabilities. Returns (max |diff|, problems)."""
    if not isinstance(preds, list) or len(preds) != probs.shape[0]:
        return 0.0, [f"{len(preds) if isinstance(preds, list) else preds!r} predictions for {probs.shape[0]} rows"]
    worst, bad = 0.0, []
    for i, p in enumerate(preds):
        ids = [t["id"] for t in p.get("top", [])]
        order = np.argsort(-probs[i], kind="stable")[:len(ids)].tolist()
        if p.get("position") != i or len(ids) != PRED_K:
            bad.append(f"row {i}: position {p.get('position')}, {len(ids)} entries")
            continue
        if ids != order and any(abs(probs[i][a] - probs[i][b]) > 1e-6 for a, b in zip(ids, order) if a != b):
            bad.append(f"row {i}: top ids {ids}, transformers {order}")
            continue
        worst = max(worst, max(abs(t["prob"] - probs[i][t["id"]]) for t in p["top"]))
    return worst, bad


def check_sampled(attnviz, model_dir, name, tok, prefix):
    """--generate 12 --temperature 0.8 --top-p 0.9: seed 7 twice gives one document; for seeds 7 and 8, every
    step's token inside transformers' top-p nucleus of the tempered softmax after the decoder's tokens before it
    (a teacher-forced pass over what was sampled), its prob the model's own softmax (before temperature, as the
    decoder-only path reports) and its top-K transformers'."""
    T, P, N = 0.8, 0.9, 12
    src = corpus_lines()[23]
    runs, problems, n_steps = {}, [], 0
    for label, seed in (("a", 7), ("b", 7), ("c", 8)):
        got = run_attnviz(attnviz, model_dir, [src, "--generate", str(N), "--temperature", str(T), "--top-p", str(P),
                                               "--seed", str(seed)], prefix)
        if isinstance(got, str):
            print(f"FAIL seq2seq_sample {name}: seed {seed}: {got}")
            return False
        runs[label] = got[0]
    same = runs["a"] == runs["b"]
    se = tok.encode(src)
    for label in ("a", "c"):
        d = runs[label]
        g, ids = d.get("generation") or {}, d.get("decoder_input_ids") or []
        if g.get("strategy") != "sample" or g.get("seed") != (7 if label == "a" else 8) or \
                len(g.get("steps") or []) != len(ids) - 1 or not 1 <= len(ids) - 1 <= N:
            problems.append(f"seed {g.get('seed')}: strategy {g.get('strategy')!r}, {len(g.get('steps') or [])} "
                            f"steps for {len(ids)} decoder ids")
            continue
        _, _, _, _, probs = reference(model_dir, se.ids, ids)
        logits = np.log(probs)  # log-softmax: tempering it is tempering the logits (a constant cancels)
        for s, st in enumerate(g["steps"]):
            row, i = s, st["id"]
            if i != ids[s + 1] or st.get("position") != s + 1:
                problems.append(f"step {s}: id {i} at {st.get('position')}, decoder ids {ids}")
                break
            temp = np.exp((logits[row] - logits[row].max()) / T)
            temp /= temp.sum()
            order = np.argsort(-temp, kind="stable")
            before = np.cumsum(temp[order]) - temp[order]
            nucleus = set(order[before < P + 1e-4].tolist())
            if i not in nucleus:
                problems.append(f"step {s}: id {i} (tempered p {temp[i]:.3g}) outside the top-p nucleus of "
                                f"{len(nucleus)}")
                break
            if abs(st["prob"] - probs[row][i]) > TOL:
                problems.append(f"step {s}: prob {st['prob']}, transformers' softmax {probs[row][i]:.6g}")
                break
            top = [t["id"] for t in st["top"]]
            want = np.argsort(-probs[row], kind="stable")[:len(top)].tolist()
            if top != want and any(abs(probs[row][a] - probs[row][b]) > 1e-6 for a, b in zip(top, want) if a != b):
                problems.append(f"step {s}: top {top}, transformers {want}")
                break
            n_steps += 1
    good = same and not problems
    print(f"{'PASS' if good else 'FAIL'} seq2seq_sample {name}: --generate {N} --temperature {T} --top-p {P}: seed 7 "
          f"twice {'the same' if same else 'a different'} document; {n_steps} sampled steps (seeds 7, 8) inside "
          f"transformers' nucleus, their probs and top-10 transformers' (tol {TOL:g})")
    for p in problems[:3]:
        print(f"  {p}")
    return good


def long_source(tok, want):
    """The longest run of corpus words (repeated as needed) that tokenizes to want tokens or fewer."""
    words = " ".join(corpus_lines()).split()
    while len(words) < 4 * want:
        words += words
    lo, hi = 1, 4 * want
    while lo < hi:  # the most words whose encoding fits
        mid = (lo + hi + 1) // 2
        if len(tok.encode(" ".join(words[:mid])).ids) <= want:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    for _ in range(8):  # short words to reach want exactly where the last word's pieces overshot
        if len(tok.encode(text + " a").ids) > want:
            break
        text += " a"
    return text


def check_long(attnviz, model_dir, name, tok, cfg, prefix):
    """Long sources: 256, 512 and 1,024 tokens, or up to the model's positions where it has fewer (BART: 1,024
    positions; Marian: 512; T5's relative positions have no limit), with a 64-token decoder text, and 1,024 / 1,024 on
    T5: the three stacks (--npy) against transformers in float64."""
    fam = SPECS[name][0]
    limit = cfg.get("max_position_embeddings") if fam in ("bart", "marian") else None
    targets = sorted({min(t, limit) if limit else t for t in (256, 512, 1024)})
    cases = [(t, 64) for t in targets] + ([(1024, 1024)] if limit is None else [])
    worst, lens, bad = 0.0, [], []
    for n_src, n_dec in cases:
        src = long_source(tok, n_src)
        # the decoder's start token takes a position of its own
        tgt = long_source(tok, n_dec - 1)
        got = run_attnviz(attnviz, model_dir, [src, "--decoder-text", tgt], prefix, json_out=False)
        if isinstance(got, str):
            bad.append(got)
            continue
        _, ea, da, xa = got
        se, te = tok.encode(src), tok.encode(tgt)
        dec_ids = [cfg["decoder_start_token_id"]] + te.ids
        re_, rd, rx, _, _ = reference(model_dir, se.ids, dec_ids)
        diff = compare(name, f"{len(se.ids)}x{len(dec_ids)}", (ea, da, xa), (re_, rd, rx))
        if isinstance(diff, str):
            bad.append(diff)
            continue
        worst = max(worst, diff)
        lens.append(f"{len(se.ids)}x{len(dec_ids)}")
    good = not bad and worst <= TOL and len(lens) == len(cases) and \
        max(int(x.split("x")[0]) for x in lens) >= min(1024, limit or 1024) - 8
    print(f"{'PASS' if good else 'FAIL'} seq2seq_long {name}: source x decoder tokens {','.join(lens)} (positions: "
          f"{limit if limit else 'relative, unbounded'}): the three stacks max |diff| {worst:.2e} from float64 "
          f"transformers (tol {TOL:g})")
    for b in bad[:3]:
        print(f"  {b}")
    return good


GOLDEN_SOURCE = "The cat sat on the mat."
GOLDEN_TARGET = "A cat sat."


def fixture(out):
    """Small F32 checkpoints for the CLI and page tests (tests/seq2seq_test.sh), each with golden.json:
    transformers' eager attention in float32 on GOLDEN_SOURCE / GOLDEN_TARGET (the decoder's ids after
    decoder_start_token_id) and the tokens greedy generate() makes in 6 steps."""
    small = dict(d_model=16, layers=2, heads=2, ffn=32, positions=128)
    for name, folder in (("bart-f32", "small-bart"), ("marian-f32", "small-marian"), ("t5-f32", "small-t5"),
                         ("distilbart-f32", "small-distilbart"), ("t5-deepdec-f32", "small-t5-deepdec")):
        d = build(name, out, small, os.path.join(out, folder))
        tok = load_tok(d)
        start = json.load(open(os.path.join(d, "config.json")))["decoder_start_token_id"]
        src = tok.encode(GOLDEN_SOURCE).ids
        dec = [start] + tok.encode(GOLDEN_TARGET).ids
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(d, attn_implementation="eager",
                                                                   dtype=torch.float32).eval()
        with torch.no_grad():
            o = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec]), output_attentions=True)
            gen = model.generate(torch.tensor([src]), max_new_tokens=6, do_sample=False, num_beams=1,
                                 decoder_start_token_id=start, **gen_cache(model))[0].tolist()
        st = lambda t: [[[[round(float(v), 8) for v in r] for r in h] for h in a[0]] for a in t]  # noqa: E731
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump({"source": GOLDEN_SOURCE, "decoder_text": GOLDEN_TARGET, "encoder_ids": src, "decoder_ids": dec,
                       "generated_ids": gen, "generated_tokens": [tok.id_to_token(i) for i in gen],
                       "encoder_attention": st(o.encoder_attentions), "decoder_attention": st(o.decoder_attentions),
                       "cross_attention": st(o.cross_attentions),
                       "made_by": "tests/ref/seq2seq_check.py --fixture (transformers " + transformers.__version__
                                  + ", eager, float32)"}, f)


def check_marian_spm(attnviz, workdir):
    """A folder laid out as OPUS-MT's (source.spm, target.spm, vocab.json by MarianTokenizer.save_pretrained; a
    SentencePiece Unigram model trained here, Marian's numbering: </s> 0, <unk> 1, <pad> last) given a
    tokenizer.json by tools/marian_tokenizer.py: attnviz's ids against MarianTokenizer's own (SentencePiece in
    Python) on the tokenizer corpus and the sentences."""
    import sentencepiece as spm
    out = os.path.join(workdir, "marian-spm")
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        os.makedirs(out, exist_ok=True)
        src = os.path.join(out, "train.txt")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join(corpus_lines()) + "\n")
        spm.SentencePieceTrainer.train(input=src, model_prefix=os.path.join(out, "m"), model_type="unigram",
                                       vocab_size=VOCAB, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, num_threads=1,
                                       minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "m.model"))
        vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        vocab["<pad>"] = len(vocab)
        with open(os.path.join(out, "v.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        mt = transformers.MarianTokenizer(source_spm=os.path.join(out, "m.model"),
                                          target_spm=os.path.join(out, "m.model"), vocab=os.path.join(out, "v.json"))
        mt.save_pretrained(out)
        for f in ("m.model", "v.json", "train.txt"):
            os.remove(os.path.join(out, f))
        transformers.MarianConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                                  decoder_ffn_dim=16, max_position_embeddings=4096, pad_token_id=len(vocab) - 1,
                                  decoder_start_token_id=len(vocab) - 1, eos_token_id=0).save_pretrained(out)
        r = subprocess.run([sys.executable, os.path.join(HERE, "../../tools/marian_tokenizer.py"), out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL seq2seq_marian_spm: tools/marian_tokenizer.py failed: {r.stderr.strip()[-300:]}")
            return False
    mt = transformers.MarianTokenizer.from_pretrained(out)
    texts = [l.rstrip("\n").split("\t")[0] for l in open(os.path.join(HERE, "../tokenizer/corpus.tsv"), encoding="utf-8")]
    texts = [t for t in texts + corpus_lines() if t.strip()]
    batch = os.path.join(workdir, "marian-spm.corpus.txt")
    with open(batch, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    r = subprocess.run([attnviz, "--model", out, "--tokens-only", "--quiet", "--batch", batch], capture_output=True,
                       text=True)
    got = [json.loads(l)["input_ids"] for l in r.stdout.splitlines()] if r.returncode == 0 else []
    from tokenizers import Tokenizer
    rust = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    bad = [] if len(got) == len(texts) else [f"attnviz gave {len(got)} lines for {len(texts)}: {r.stderr.strip()[:200]}"]
    conv = []  # lines where the tokenizer.json itself (the Rust library) differs from SentencePiece
    for t, g in zip(texts, got):
        parts = t.split("\t", 1)  # a TAB makes a --batch line a pair: A B </s> in MarianTokenizer too
        want, via_json = mt(*parts)["input_ids"], rust.encode(*parts).ids
        if g != via_json:
            bad.append(f"{t[:40]!r}: attnviz {str(g)[:70]}, tokenizers {str(via_json)[:70]}")
        if via_json != want:
            conv.append(f"{[hex(ord(c)) for c in t[:8]]}: tokenizers {via_json[:8]}, MarianTokenizer {want[:8]}")
    # the conversion's own differences (tokenizers' Precompiled normalizer against SentencePiece's on stacked
    # combining marks) are counted, and bounded so that a broken conversion fails
    good = not bad and len(conv) <= len(texts) // 100
    print(f"{'PASS' if good else 'FAIL'} seq2seq_marian_spm: tools/marian_tokenizer.py's tokenizer.json: attnviz "
          f"equals the tokenizers library on {len(texts) - len(bad)}/{len(texts)} lines of the tokenizer corpus and "
          f"the sentences, and that equals MarianTokenizer's SentencePiece ids on {len(texts) - len(conv)} "
          f"(bound: under 1% apart)")
    for b in (bad + conv)[:5]:
        print(f"  {b}")
    return good


def check_t5_spm(attnviz, workdir):
    """T5's own tokenizer.json layout, as transformers' T5Converter writes it from a SentencePiece model (the
    Precompiled charsmap, Metaspace, `$A </s>`; a Unigram model trained here, T5's numbering: <pad> 0, </s> 1,
    <unk> 2): attnviz's ids against the tokenizers library's and SentencePiece's on the tokenizer corpus."""
    import types
    import sentencepiece as spm
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import T5Converter
    out = os.path.join(workdir, "t5-spm")
    model = os.path.join(out, "m.model")
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        os.makedirs(out, exist_ok=True)
        src = os.path.join(out, "train.txt")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join(corpus_lines()) + "\n")
        spm.SentencePieceTrainer.train(input=src, model_prefix=os.path.join(out, "m"), model_type="unigram",
                                       vocab_size=VOCAB, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1,
                                       minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=model)
        # what T5Converter reads of a slow T5Tokenizer
        slow = types.SimpleNamespace(vocab_file=model, _extra_ids=0, extra_ids=0, legacy=True, add_prefix_space=True,
                                     convert_tokens_to_ids=sp.piece_to_id)
        T5Converter(slow).converted().save(os.path.join(out, "tokenizer.json"))
        transformers.T5Config(vocab_size=sp.get_piece_size(), d_model=16, d_kv=8, d_ff=16, num_layers=1,
                              num_heads=2).save_pretrained(out)
    sp = spm.SentencePieceProcessor(model_file=model)
    rust = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    texts = [l.rstrip("\n").split("\t")[0] for l in open(os.path.join(HERE, "../tokenizer/corpus.tsv"), encoding="utf-8")]
    texts = [t for t in texts + corpus_lines() if t.strip()]
    batch = os.path.join(workdir, "t5-spm.corpus.txt")
    with open(batch, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    r = subprocess.run([attnviz, "--model", out, "--tokens-only", "--quiet", "--batch", batch], capture_output=True,
                       text=True)
    got = [json.loads(l)["input_ids"] for l in r.stdout.splitlines()] if r.returncode == 0 else []
    bad = [] if len(got) == len(texts) else [f"attnviz gave {len(got)} lines for {len(texts)}: {r.stderr.strip()[:200]}"]
    conv = []
    for t, g in zip(texts, got):
        parts = t.split("\t", 1)  # a TAB makes a --batch line a pair: A </s> B </s>
        via_json, want = rust.encode(*parts).ids, [i for p in parts for i in sp.encode(p) + [1]]
        if g != via_json:
            bad.append(f"{t[:40]!r}: attnviz {str(g)[:70]}, tokenizers {str(via_json)[:70]}")
        if via_json != want:
            conv.append(f"{[hex(ord(c)) for c in t[:8]]}: tokenizers {via_json[:8]}, SentencePiece {want[:8]}")
    good = not bad and len(conv) <= len(texts) // 100
    print(f"{'PASS' if good else 'FAIL'} seq2seq_t5_spm: T5's tokenizer.json as transformers' T5Converter writes it: "
          f"attnviz equals the tokenizers library on {len(texts) - len(bad)}/{len(texts)} lines of the tokenizer "
          f"corpus and the sentences, and that equals SentencePiece on {len(texts) - len(conv)} (bound: under 1% apart)")
    for b in (bad + conv)[:5]:
        print(f"  {b}")
    return good


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fixture":
        fixture(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("attnviz")
    ap.add_argument("workdir")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    names = [n for n in SPECS if not a.only or n in a.only.split(",")]
    ok = True
    if not a.only or "marian-spm" in a.only.split(","):
        ok &= check_marian_spm(os.path.abspath(a.attnviz), a.workdir)
    if not a.only or "t5-spm" in a.only.split(","):
        ok &= check_t5_spm(os.path.abspath(a.attnviz), a.workdir)
    for n in names:
        d = build(n, a.workdir)
        ok &= check_model(os.path.abspath(a.attnviz), d, n)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
