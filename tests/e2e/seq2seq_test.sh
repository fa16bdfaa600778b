#!/bin/bash
# seq2seq_test.sh — encoder-decoder models run natively, on their committed fixtures
# (tests/data/small-bart, small-marian, small-t5, written by tests/ref/seq2seq_check.py --fixture with
# transformers' attention and greedy tokens in each golden.json):
# --decoder-text and --generate through the writers: JSON (encoder and decoder tokens, the three
# stacks' shapes, rows summing to 1, the decoder causal, the decoder starting at
# decoder_start_token_id), --npy (three files, the JSON's numbers), the page (its three stacks'
# chunks), the same document on every run, --generate's stacks over what it made, and --tokens-only
# on the source; attnviz serve's runs of them (serve_check.py seq2seq). Numbers against
# transformers: tests/ref/seq2seq_check.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=${BIN:-./attnviz}
PY=${PYTHON:-python3}
SRC="The cat sat on the mat."
TGT="A cat sat."

# check_doc NAME JSON START_TOKEN EOS_TOKEN: the document's shapes and rows
check_doc() {
    "$PY" - "$2" "$3" "$4" <<'PY'
import json, sys
d, start, eos = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
et, dt, c = d["encoder_tokens"], d["decoder_tokens"], d["config"]
L, Ld, H, ne, nd = c["layers"], c["decoder_layers"], c["heads"], len(et), len(dt)
assert c["encoder_decoder"] is True, c
depth = {"encoder": L, "decoder": Ld, "cross": Ld}
# unequal depths (small-distilbart, small-t5-deepdec): each stack names its layers; equal: none do
assert all(d.get(k + "_layers") == (list(range(depth[k])) if L != Ld else None) for k in depth), d.keys()
assert dt[0] == start, dt
assert et[-1] == eos, et
for name, rows, cols in (("encoder", ne, ne), ("decoder", nd, nd), ("cross", nd, ne)):
    A = d[name + "_attention"]
    assert len(A) == depth[name] and all(len(a) == H and len(h) == rows and all(len(r) == cols for r in h) for a in A for h in a), name
    assert all(abs(sum(r) - 1) < 1e-5 for a in A for h in a for r in h), name + " rows sum to 1"
    assert all(v >= 0 for a in A for h in a for r in h for v in r), name
D = d["decoder_attention"]
assert all(D[l][h][i][j] == 0 for l in range(Ld) for h in range(H) for i in range(nd) for j in range(i + 1, nd)), "causal"
assert any(D[l][h][i][j] > 0 for l in range(Ld) for h in range(H) for i in range(nd) for j in range(i + 1)), "not all zero"
PY
}

# npy_equal JSON NPY_PREFIX: the three .npy files hold the JSON's stacks (to its 6 digits)
npy_equal() {
    "$PY" - "$1" "$2" <<'PY'
import json, struct, sys
d, pre = json.load(open(sys.argv[1])), sys.argv[2]
def load(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY", p
    n = struct.unpack("<H", b[8:10])[0]
    hdr = b[10:10 + n].decode()
    shape = tuple(int(x) for x in hdr.split("(")[1].split(")")[0].split(",") if x.strip())
    vals = struct.unpack("<%df" % (len(b[10 + n:]) // 4), b[10 + n:])
    return shape, vals
def flat(a):
    return [v for x in a for v in (flat(x) if isinstance(x, list) else [x])]
for name, path in (("encoder", pre + ".npy"), ("decoder", pre + ".decoder.npy"), ("cross", pre + ".cross.npy")):
    A = d[name + "_attention"]
    shape, vals = load(path)
    assert shape == (len(A), len(A[0]), len(A[0][0]), len(A[0][0][0])), (name, shape)
    want = flat(A)
    assert len(vals) == len(want) and all(abs(a - b) <= 1e-6 * max(1, abs(b)) for a, b in zip(vals, want)), name
PY
}

# small-distilbart (3 encoder, 2 decoder layers) and small-t5-deepdec (2, 3): each stack its own layers
for fam in "bart </s> </s>" "marian <pad> </s>" "t5 <pad> </s>" "distilbart </s> </s>" "t5-deepdec <pad> </s>"; do
    read -r name start eos <<<"$fam"
    M=tests/data/small-$name
    if "$BIN" --model "$M" --quiet --json "$T/$name.json" --npy "$T/$name.npy" --html "$T/$name.html" "$SRC" \
        --decoder-text "$TGT" 2>"$T/err" && check_doc "$name" "$T/$name.json" "$start" "$eos" 2>"$T/perr"; then
        pass "seq2seq_$name: --decoder-text to JSON (three stacks, rows sum to 1, decoder causal, starts at $start)"
    else
        fail "seq2seq_$name: --decoder-text" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
        continue
    fi
    # the committed golden.json: transformers' eager attention in float32 on the same texts
    if gold=$("$PY" - "$T/$name.json" "$M/golden.json" <<'PY' 2>"$T/perr"
import json, sys
d, g = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["input_ids"] == g["encoder_ids"], (d["input_ids"], g["encoder_ids"])
assert d["decoder_input_ids"] == g["decoder_ids"], (d["decoder_input_ids"], g["decoder_ids"])
assert d["text"] == g["source"] and d["text_b"] == g["decoder_text"]
worst = 0.0
for k in ("encoder_attention", "decoder_attention", "cross_attention"):
    a, b = d[k], g[k]
    assert len(a) == len(b) and all(len(x) == len(y) for x, y in zip(a, b)), k
    for x, y in zip(a, b):
        for hx, hy in zip(x, y):
            assert len(hx) == len(hy), k
            for rx, ry in zip(hx, hy):
                worst = max(worst, max(abs(u - v) for u, v in zip(rx, ry)))
assert worst <= 1e-5, worst
print(f"{worst:.1e}")
PY
    ); then
        pass "seq2seq_$name: the three stacks within $gold of transformers' (float32, the fixture's golden.json; bound 1e-5)"
    else
        fail "seq2seq_$name: golden" "$(tail -3 "$T/perr")"
    fi
    if npy_equal "$T/$name.json" "$T/$name" 2>"$T/perr"; then
        pass "seq2seq_$name: --npy writes the encoder, decoder and cross stacks (the JSON's numbers)"
    else
        fail "seq2seq_$name: --npy" "$(tail -3 "$T/perr")"
    fi
    if grep -q 'id="av-encoder-0"' "$T/$name.html" && grep -q 'id="av-decoder-1"' "$T/$name.html" &&
        grep -q 'id="av-cross-1"' "$T/$name.html" && grep -q '"stacks":\[' "$T/$name.html"; then
        pass "seq2seq_$name: the page carries the three stacks for every layer"
    else
        fail "seq2seq_$name: page" "no av-encoder/decoder/cross chunks in $T/$name.html"
    fi
    if "$BIN" --model "$M" --quiet --json "$T/$name.2.json" "$SRC" --decoder-text "$TGT" 2>"$T/err" &&
        cmp -s "$T/$name.json" "$T/$name.2.json"; then
        pass "seq2seq_$name: the same document on a second run"
    else
        fail "seq2seq_$name: deterministic" "$(cat "$T/err") $(cmp "$T/$name.json" "$T/$name.2.json" 2>&1)"
    fi
    # --layers: the three stacks hold the selected layer only, the full run's numbers
    if "$BIN" --model "$M" --quiet --json "$T/$name.l1.json" --html "$T/$name.l1.html" --layers 1 "$SRC" \
        --decoder-text "$TGT" 2>"$T/err" &&
        "$PY" - "$T/$name.l1.json" "$T/$name.json" <<'PY' 2>"$T/perr" &&
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["layers"] == [1], a["layers"]
for k in ("encoder_attention", "decoder_attention", "cross_attention"):
    assert len(a[k]) == 1 and a[k][0] == b[k][1], k
PY
        grep -q 'id="av-cross-0"' "$T/$name.l1.html" && ! grep -q 'id="av-cross-1"' "$T/$name.l1.html"; then
        pass "seq2seq_$name: --layers 1 keeps that layer of the three stacks (the full run's numbers; one chunk per stack on the page)"
    else
        fail "seq2seq_$name: --layers" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # --generate: the decoder's tokens are what greedy decoding made, every one a row of the stacks
    if "$BIN" --model "$M" --quiet --json "$T/$name.gen.json" "$SRC" --generate 6 2>"$T/err" &&
        check_doc "$name" "$T/$name.gen.json" "$start" "$eos" 2>"$T/perr" &&
        "$PY" - "$T/$name.gen.json" <<'PY' 2>>"$T/perr"; then
import json, sys
d = json.load(open(sys.argv[1]))
n = len(d["decoder_tokens"])
assert 2 <= n <= 7, d["decoder_tokens"]
assert d["text_b"] is not None, "the generated text"
PY
        "$PY" -c "
import json, sys
d, g = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d['decoder_tokens'] == g['generated_tokens'], (d['decoder_tokens'], g['generated_tokens'])
" "$T/$name.gen.json" "$M/golden.json" 2>>"$T/perr"
        pass "seq2seq_$name: --generate 6: transformers' generate() tokens (golden.json), the three stacks over them"
    else
        fail "seq2seq_$name: --generate" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # sampled --generate: seed 7 twice gives one document, seed 8 (or 9) another; the steps are the decoder's
    # tokens after the start token, with --predict's top-K after every decoder token
    for seed in 7 7b 8 9; do
        "$BIN" --model "$M" --quiet --json "$T/$name.s$seed.json" "$SRC" --generate 8 --temperature 1.5 --top-p 0.95 \
            --seed "${seed%b}" --predict 3 --npy "$T/$name.s$seed.npy" 2>"$T/err" || break
    done
    if [ -f "$T/$name.s9.json" ] && cmp -s "$T/$name.s7.json" "$T/$name.s7b.json" &&
        [ "$(grep -o '"predictions"' "$T/$name.s7.json" | wc -l)" = 1 ] &&
        [ "$(grep -o '"generation"' "$T/$name.s7.json" | wc -l)" = 1 ] &&
        "$PY" - "$T/$name.s7.json" "$T/$name.s8.json" "$T/$name.s9.json" <<'PY' 2>"$T/perr"; then
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:])
assert a["decoder_input_ids"] != b["decoder_input_ids"] or a["decoder_input_ids"] != c["decoder_input_ids"], "seeds"
for d in (a, b, c):
    g, ids = d["generation"], d["decoder_input_ids"]
    assert g["strategy"] == "sample" and g["temperature"] == 1.5 and g["top_p"] == 0.95, g
    assert g["seed"] in (7, 8, 9) and g["prompt_tokens"] == 1 and g["generated_tokens"] == len(ids) - 1, g
    assert [s["id"] for s in g["steps"]] == ids[1:] and [s["position"] for s in g["steps"]] == list(range(1, len(ids)))
    assert [s["token"] for s in g["steps"]] == d["decoder_tokens"][1:]
    p = d["predictions"]
    assert [q["position"] for q in p] == list(range(len(ids))) and all(len(q["top"]) == 3 for q in p), p
    # a step's top-K is --predict's at the position before it (one distribution, two views)
    for s in g["steps"]:
        assert [t["id"] for t in s["top"]] == [t["id"] for t in p[s["position"] - 1]["top"]][:len(s["top"])]
# --npy: the predictions' arrays beside the stacks, the JSON's numbers
import struct
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    hdr = b[10:10 + n].decode()
    shape = tuple(int(x) for x in hdr.split("(")[1].split(")")[0].split(",") if x.strip())
    return shape, struct.unpack("<%d%s" % (len(b[10 + n:]) // 4, "f" if "<f4" in hdr else "i"), b[10 + n:])
pre, P = sys.argv[1][:-len(".json")], a["predictions"]
(si, pi), (sp, pp), (sn, pn) = (load(pre + s) for s in (".pred_ids.npy", ".pred_probs.npy", ".pred_positions.npy"))
assert si == sp == (len(P), 3) and sn == (len(P),), (si, sp, sn)
assert list(pn) == [q["position"] for q in P]
assert list(pi) == [t["id"] for q in P for t in q["top"]]
assert max(abs(x - t["prob"]) for x, t in zip(pp, (t for q in P for t in q["top"]))) < 1e-5
PY
        pass "seq2seq_$name: sampled --generate (--temperature 1.5 --top-p 0.95): one seed one document, other seeds other tokens; --predict 3 after every decoder token (JSON and .npy)"
    else
        fail "seq2seq_$name: sampling" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # --stop: a string of greedy's own text stops it there (the tokens a prefix of greedy's, the reason "stop")
    stop=$("$PY" -c "
import json, sys
g = json.load(open(sys.argv[1]))['generation']
t = g['text'].strip()
print(t[len(t) // 2:len(t) // 2 + 1] if len(t) > 1 else '')
" "$T/$name.gen.json")
    if [ -n "$stop" ] && "$BIN" --model "$M" --quiet --json "$T/$name.stop.json" "$SRC" --generate 6 --stop "$stop" 2>"$T/err" &&
        "$PY" - "$T/$name.stop.json" "$T/$name.gen.json" "$stop" <<'PY' 2>"$T/perr"; then
import json, sys
s, g, stop = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
ids, full = s["decoder_input_ids"], g["decoder_input_ids"]
assert full[:len(ids)] == ids and s["generation"]["stop_reason"] == "stop", (ids, full, s["generation"]["stop_reason"])
assert stop in s["generation"]["text"], s["generation"]["text"]
PY
        pass "seq2seq_$name: --stop ends decoding once the text holds the string (a prefix of greedy's tokens, stop_reason 'stop')"
    else
        fail "seq2seq_$name: --stop" "stop '$stop' $(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # greedy is sampling at temperature 0: --generate with and without --temperature 0 make one document
    if "$BIN" --model "$M" --quiet --json "$T/$name.t0.json" "$SRC" --generate 6 --temperature 0 2>"$T/err" &&
        cmp -s "$T/$name.t0.json" "$T/$name.gen.json"; then
        pass "seq2seq_$name: --temperature 0 is greedy --generate (the same document)"
    else
        fail "seq2seq_$name: temperature 0" "$(cat "$T/err") $(cmp "$T/$name.t0.json" "$T/$name.gen.json" 2>&1)"
    fi
    # --batch: SOURCE<TAB>TARGET lines, one document each, the single runs' own; a line without a TAB fails
    # alone (no --generate); with --generate, lines are sources
    printf '%s\t%s\nHello there.\tHi.\nno target\n' "$SRC" "$TGT" >"$T/$name.batch"
    "$BIN" --model "$M" --quiet --json "$T/$name.h.json" "Hello there." --decoder-text "Hi." 2>/dev/null
    "$BIN" --model "$M" --quiet --batch "$T/$name.batch" >"$T/$name.jsonl" 2>"$T/err"
    brc=$?
    if [ $brc -eq 1 ] && grep -q ":3: no decoder text: give SOURCE<TAB>TARGET, or --generate N" "$T/err" &&
        "$PY" - "$T/$name.jsonl" "$T/$name.json" "$T/$name.h.json" <<'PY' 2>"$T/perr"; then
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 2, len(lines)
for l, f in zip(lines, sys.argv[2:]):
    assert json.loads(l) == json.load(open(f)), f
PY
        pass "seq2seq_$name: --batch SOURCE<TAB>TARGET lines: the single runs' documents; a line without a target fails alone (exit 1)"
    else
        fail "seq2seq_$name: --batch" "exit $brc $(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # --out-dir: the directory made, a document (and the three .npy) per good line, the stream's documents
    if "$BIN" --model "$M" --quiet --batch "$T/$name.batch" --out-dir "$T/$name.od" --npy 2>"$T/err"; [ $? -eq 1 ] &&
        [ -f "$T/$name.od/000002.cross.npy" ] && [ ! -e "$T/$name.od/000003.json" ] &&
        "$PY" -c "
import json, sys
assert json.load(open(sys.argv[1])) == json.loads(open(sys.argv[2]).readline())
" "$T/$name.od/000001.json" "$T/$name.jsonl" 2>"$T/perr"; then
        pass "seq2seq_$name: --batch --out-dir --npy: a document and three .npy per good line, the stream's documents"
    else
        fail "seq2seq_$name: --out-dir" "$(ls "$T/$name.od" 2>&1 | head -3) $(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    printf '%s\n' "$SRC" >"$T/$name.gbatch"
    if "$BIN" --model "$M" --quiet --batch "$T/$name.gbatch" --generate 6 >"$T/$name.g.jsonl" 2>"$T/err" &&
        "$PY" -c "
import json, sys
a, b = json.loads(open(sys.argv[1]).readline()), json.load(open(sys.argv[2]))
assert a == b, 'generate batch'
" "$T/$name.g.jsonl" "$T/$name.gen.json" 2>"$T/perr"; then
        pass "seq2seq_$name: --batch with --generate: each line a source, the single run's document"
    else
        fail "seq2seq_$name: --batch --generate" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # --stats over the batch: each stack's scores recomputed here from the documents' matrices
    if "$BIN" --model "$M" --quiet --batch "$T/$name.batch" --stats --json "$T/$name.stats.json" 2>"$T/err"; [ $? -eq 1 ] &&
        "$PY" - "$T/$name.stats.json" "$T/$name.json" "$T/$name.h.json" <<'PY' 2>"$T/perr"; then
import json, math, sys
st = json.load(open(sys.argv[1]))
docs = [json.load(open(f)) for f in sys.argv[2:]]
assert st["kind"] == "stats" and st["stack"] == "encoder" and st["inputs"] == 2, st.get("stack")
assert set(st["stacks"]) == {"decoder", "cross"}
SPECIAL = {"<s>": "cls", "</s>": "sep"}  # BART's; T5 and Marian have </s> only
def scores(A, toks, diag):
    n, m = len(A), len(A[0])
    out = {"entropy": 0, "cls": 0, "sep": 0, "mean_distance": 0, "self": 0, "previous": 0, "next": 0}
    cnt = dict.fromkeys(out, 0)
    for i, r in enumerate(A):
        out["entropy"] -= sum(p * math.log(p) for p in r if p > 0); cnt["entropy"] += 1
        for k in ("cls", "sep"):
            out[k] += sum(p for p, t in zip(r, toks) if SPECIAL.get(t) == k); cnt[k] += 1
        if diag:
            out["mean_distance"] += sum(p * abs(i - j) for j, p in enumerate(r)); cnt["mean_distance"] += 1
            out["self"] += r[i]; cnt["self"] += 1
            if i > 0: out["previous"] += r[i - 1]; cnt["previous"] += 1
            if i < m - 1: out["next"] += r[i + 1]; cnt["next"] += 1
    return {k: out[k] / cnt[k] if cnt[k] else None for k in out}
for stack, key, cols, diag, where in (("encoder", "encoder_attention", "encoder_tokens", True, st),
                                      ("decoder", "decoder_attention", "decoder_tokens", True, st["stacks"]["decoder"]),
                                      ("cross", "cross_attention", "encoder_tokens", False, st["stacks"]["cross"])):
    heads = {(h["layer"], h["head"]): h for h in where["heads"]}
    for l in range(len(docs[0][key])):
        for h in range(len(docs[0][key][l])):
            per = [scores(d[key][l][h], d[cols], diag) for d in docs]
            for k in per[0]:
                got = heads[(l, h)][k]
                if per[0][k] is None:
                    assert got is None, (stack, l, h, k, got)
                else:
                    want = sum(p[k] for p in per) / len(per)
                    assert abs(got - want) < 1e-5, (stack, l, h, k, got, want)
PY
        pass "seq2seq_$name: --stats per stack (encoder at the top level, \"stacks\": decoder, cross): each score the mean recomputed from the documents; cross has no distance/self/previous/next (null)"
    else
        fail "seq2seq_$name: --stats" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # heads over the batch (SOURCE<TAB>TARGET lines): each stack's scores recomputed here, TransformerLens's
    # detect_head "mul" (attention on the pattern / all attention) per input, then the mean; cross attention
    # takes first, sep, duplicate (source tokens with the decoder token's id) and entropy, the rest null
    if "$BIN" heads --model "$M" --quiet --batch "$T/$name.batch" --json "$T/$name.heads.json" 2>"$T/err"; [ $? -eq 1 ] &&
        "$BIN" heads --model "$M" --quiet "$SRC" "$TGT" >"$T/$name.heads.txt" 2>>"$T/err" &&
        grep -q "^# cross attention" "$T/$name.heads.txt" &&
        "$PY" - "$T/$name.heads.json" "$T/$name.json" "$T/$name.h.json" <<'PY' 2>"$T/perr"; then
import json, math, sys
hj = json.load(open(sys.argv[1]))
docs = [json.load(open(f)) for f in sys.argv[2:]]
assert hj["kind"] == "heads" and hj["stack"] == "encoder" and hj["inputs"] == 2 and set(hj["stacks"]) == {"decoder", "cross"}
def score(k, A, rid, cid, rtok, ctok, cross):
    n, m = len(A), len(A[0])
    if k in ("entropy", "distance"):
        if cross and k == "distance":
            return None
        return sum(-p * math.log(p) if k == "entropy" else p * abs(i - j)
                   for i, r in enumerate(A) for j, p in enumerate(r) if k == "distance" or p > 0) / n
    pat = {"previous": lambda i, j: j == i - 1, "next": lambda i, j: j == i + 1, "self": lambda i, j: j == i,
           "first": lambda i, j: j == 0, "sep": lambda i, j: ctok[j] == "</s>",
           "duplicate": (lambda i, j: cid[j] == rid[i]) if cross else (lambda i, j: j < i and cid[j] == rid[i])}
    if k not in pat or (cross and k not in ("first", "sep", "duplicate")):
        return None
    tot = sum(sum(r) for r in A)
    return sum(p for i, r in enumerate(A) for j, p in enumerate(r) if pat[k](i, j)) / tot
for stack, key, rows, cols, where in (("encoder", "encoder_attention", "input_ids", "input_ids", hj),
                                      ("decoder", "decoder_attention", "decoder_input_ids", "decoder_input_ids", hj["stacks"]["decoder"]),
                                      ("cross", "cross_attention", "decoder_input_ids", "input_ids", hj["stacks"]["cross"])):
    toks = "encoder_tokens" if cols == "input_ids" else "decoder_tokens"
    heads = {(h["layer"], h["head"]): h for h in where["heads"]}
    for l in range(len(docs[0][key])):
        for h in range(len(docs[0][key][l])):
            for k in hj["scores"]:
                vals = [score(k, d[key][l][h], d[rows], d[cols], None, d[toks], stack == "cross") for d in docs]
                got = heads[(l, h)][k]
                if k == "induction" or vals[0] is None:
                    assert got is None, (stack, l, h, k, got)
                else:
                    assert abs(got - sum(vals) / len(vals)) < 1e-5, (stack, l, h, k, got, sum(vals) / len(vals))
PY
        pass "seq2seq_$name: heads per stack (JSON: encoder at the top level, \"stacks\": decoder, cross; table: three sections): detect_head shares recomputed from the documents; cross: first, sep, duplicate, entropy only"
    else
        fail "seq2seq_$name: heads" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    # diff: two sources, one --decoder-text: each stack's divergence recomputed here from the two runs' documents
    # (JSD in bits over the merged key axis, the alignment the JSON's, checked to be a longest common
    # subsequence); the decoder's first layer sees no source (0); one source on the model twice: all 0
    SRC_B="The dog sat on a mat."
    "$BIN" --model "$M" --quiet --json "$T/$name.b.json" "$SRC_B" --decoder-text "$TGT" 2>/dev/null
    if "$BIN" diff --model "$M" --quiet "$SRC" "$SRC_B" --decoder-text "$TGT" --json "$T/$name.diff.json" \
        >"$T/$name.diff.txt" 2>"$T/err" && grep -q "^# cross attention" "$T/$name.diff.txt" &&
        "$BIN" diff --model "$M" --model "$M" --quiet "$SRC" --decoder-text "$TGT" --json "$T/$name.diff2.json" \
            >/dev/null 2>>"$T/err" &&
        "$PY" - "$T/$name.diff.json" "$T/$name.json" "$T/$name.b.json" "$T/$name.diff2.json" <<'PY' 2>"$T/perr"; then
import json, math, sys
df, A, B, same = (json.load(open(f)) for f in sys.argv[1:])
assert df["format"] == "attnviz-diff" and df["mode"] == "texts" and df["decoder_text"] == B["text_b"]
def lcs_len(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a)):
        for j in range(len(b)):
            t[i + 1][j + 1] = t[i][j] + 1 if a[i] == b[j] else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]
def check_align(al, a, b):
    pairs = [(i, j) for i, j in enumerate(al["a_to_b"]) if j >= 0]
    assert all(a[i] == b[j] for i, j in pairs) and all(p[1] < q[1] for p, q in zip(pairs, pairs[1:]))
    assert len(pairs) == lcs_len(a, b) == al["pairs"]
    return al["a_to_b"], al["b_to_a"]
s_ab, s_ba = check_align(df["alignment"]["source"], A["input_ids"], B["input_ids"])
d_ab, d_ba = check_align(df["alignment"]["decoder"], A["decoder_input_ids"], B["decoder_input_ids"])
def jsd_row(p, q, ab, ba):
    p = [x / sum(p) for x in p]; q = [x / sum(q) for x in q]
    v = 0.5 * sum(x for i, x in enumerate(p) if ab[i] < 0) + 0.5 * sum(x for j, x in enumerate(q) if ba[j] < 0)
    for i, j in enumerate(ab):
        if j < 0: continue
        a, b = p[i], q[j]
        if a > 0: v += 0.5 * a * math.log2(2 * a / (a + b))
        if b > 0: v += 0.5 * b * math.log2(2 * b / (a + b))
    return v
def head(MA, MB, rows_ab, keys_ab, keys_ba):
    v = [jsd_row(MA[i], MB[j], keys_ab, keys_ba) for i, j in enumerate(rows_ab) if j >= 0]
    return sum(v) / len(v)
for stack, key, rows, keys in (("encoder", "encoder_attention", (s_ab,), (s_ab, s_ba)),
                               ("decoder", "decoder_attention", (d_ab,), (d_ab, d_ba)),
                               ("cross", "cross_attention", (d_ab,), (s_ab, s_ba))):
    got = df["stacks"][stack]["per_head"]
    for l in range(len(A[key])):
        for h in range(len(A[key][l])):
            want = head(A[key][l][h], B[key][l][h], rows[0], *keys)
            assert abs(got[l][h] - want) < 1e-5, (stack, l, h, got[l][h], want)
            sink = lambda M: sum(r[0] for r in M) / len(M) if stack == "cross" else (sum(r[0] for r in M[1:]) / (len(M) - 1))
            assert abs(df["stacks"][stack]["sink"]["a"][l][h] - sink(A[key][l][h])) < 1e-5, (stack, "sink")
assert all(v == 0 for v in df["stacks"]["decoder"]["per_head"][0]), "decoder layer 0 sees no source"
assert any(v > 0.01 for r in df["stacks"]["cross"]["per_head"] for v in r)
assert same["mode"] == "models" and all(v == 0 for st in same["stacks"].values() for r in st["per_head"] for v in r)
PY
        pass "seq2seq_$name: diff of two sources with one --decoder-text: each stack's JSD and sink mass recomputed from the runs (alignment a longest common subsequence); decoder layer 0 unmoved; one model twice all 0"
    else
        fail "seq2seq_$name: diff" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    if out=$("$BIN" --model "$M" --quiet --tokens-only -- "$SRC" 2>&1) &&
        "$PY" -c "
import json, sys
d, enc = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
assert d['tokens'] == enc['encoder_tokens'], (d['tokens'], enc['encoder_tokens'])
" "$out" "$T/$name.json" 2>"$T/perr"; then
        pass "seq2seq_$name: --tokens-only gives the source's tokens as the run's encoder_tokens"
    else
        fail "seq2seq_$name: --tokens-only" "$out $(cat "$T/perr")"
    fi
done
# unequal depths, --layers: each stack keeps the selected layers it has (small-distilbart: encoder 0-2, decoder
# and cross 0-1), the full run's numbers; a selection that leaves a stack none is refused in one line (exit 2)
M=tests/data/small-distilbart
if "$BIN" --model "$M" --quiet --json "$T/ud.json" --npy "$T/ud.npy" --html "$T/ud.html" --layers 1-2 "$SRC" \
    --decoder-text "$TGT" 2>"$T/err" &&
    "$PY" - "$T/ud.json" "$T/distilbart.json" "$T/ud" "$T/ud.html" <<'PY' 2>"$T/perr"; then
import json, re, struct, sys
a, full, pre, page = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], open(sys.argv[4]).read()
own = {"encoder": [1, 2], "decoder": [1], "cross": [1]}
assert a["layers"] == [1, 2], a["layers"]
for k, ls in own.items():
    assert a[k + "_layers"] == ls, (k, a[k + "_layers"])
    assert a[k + "_attention"] == [full[k + "_attention"][l] for l in ls], k
for k, path in (("encoder", pre + ".npy"), ("decoder", pre + ".decoder.npy"), ("cross", pre + ".cross.npy")):
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    shape = tuple(int(x) for x in b[10:10 + n].decode().split("(")[1].split(")")[0].split(",") if x.strip())
    assert shape[0] == len(own[k]) and shape[1:] == (len(a[k + "_attention"][0]), len(a[k + "_attention"][0][0]),
                                                   len(a[k + "_attention"][0][0][0])), (k, shape)
chunks = re.findall(r'id="av-(encoder|decoder|cross)-(\d+)"', page)
assert sorted(chunks) == sorted([("encoder", "0"), ("encoder", "1"), ("decoder", "0"), ("cross", "0")]), chunks
meta = json.loads(re.search(r'<script type="application/json" id="av-meta">(.*?)</script>', page, re.S).group(1))
assert [st.get("layers") for st in meta["stacks"]] == [[1, 2], [1], [1]], meta["stacks"]
PY
    pass "seq2seq_unequal: --layers 1-2 on 3 encoder and 2 decoder layers: the encoder keeps 1-2, decoder and cross 1 (JSON *_layers, .npy shapes, page chunks and meta; the full run's numbers)"
else
    fail "seq2seq_unequal: --layers" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi
"$BIN" --model "$M" --quiet --json "$T/ud2.json" --layers 2 "$SRC" --decoder-text "$TGT" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "none of the decoder's 2 layers (0-1) is selected" "$T/err" &&
    [ ! -e "$T/ud2.json" ]; then
    pass "seq2seq_unequal: --layers 2 leaves the 2-layer decoder none: one line, exit 2"
else
    fail "seq2seq_unequal: --layers 2" "exit $rc: $(cat "$T/err")"
fi
"$BIN" --model "$M" --quiet --json "$T/ud3.json" --layer 3 "$SRC" --decoder-text "$TGT" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "layer 3 is out of range: the model has 3 layers" "$T/err"; then
    pass "seq2seq_unequal: --layer 3 past the deeper stack: one line, exit 2"
else
    fail "seq2seq_unequal: --layer 3" "exit $rc: $(cat "$T/err")"
fi
# --stats' and heads' tables: a section per stack, the decoder's and cross attention's over their 2 layers
if "$BIN" --model "$M" --quiet --stats "$SRC" --decoder-text "$TGT" >"$T/ud.stats.txt" 2>"$T/err" &&
    "$BIN" heads --model "$M" --quiet "$SRC" "$TGT" >"$T/ud.heads.txt" 2>>"$T/err" &&
    "$PY" - "$T/ud.stats.txt" "$T/ud.heads.txt" <<'PY' 2>"$T/perr"; then
import sys
for f in sys.argv[1:]:
    secs, cur = {}, None
    for line in open(f):
        if line.startswith("# ") and len(line.split()) == 3 and line.split()[2] == "attention":
            cur = line.split()[1]; secs[cur] = set(); continue
        w = line.split()
        if cur and len(w) > 2 and w[0].isdigit() and w[1].isdigit():
            secs[cur].add(int(w[0]))
    assert secs == {"encoder": {0, 1, 2}, "decoder": {0, 1}, "cross": {0, 1}}, (f, secs)
PY
    pass "seq2seq_unequal: --stats and heads tables: encoder layers 0-2, decoder and cross 0-1"
else
    fail "seq2seq_unequal: --stats/heads" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi
# heads where a score has no value (induction on every stack, previous/next/self/distance across): "-" in the
# table, a line saying so in the top K, left out of the JSON's ranking; never "nan"
if "$BIN" heads --model tests/data/small-bart --quiet "$SRC" "$TGT" >"$T/nv.txt" 2>"$T/err" &&
    "$BIN" heads --model tests/data/small-bart --quiet --json "$T/nv.json" "$SRC" "$TGT" 2>>"$T/err" &&
    "$PY" - "$T/nv.txt" "$T/nv.json" <<'PY' 2>"$T/perr"; then
import json, sys
t = open(sys.argv[1]).read()
assert "nan" not in t.lower(), t
assert "induction  - (no input gives it a value here)" in t and "previous   - (no input gives it a value here)" in t, t
cross = t[t.index("# cross attention"):]
row = [l.split() for l in cross.splitlines() if l.split()[:2] == ["0", "0"]][0]
assert row[2:5] == ["-", "-", "-"] and row[5] != "-", row  # previous, next, self: no value; first has one
d = json.load(open(sys.argv[2]))
assert d["top"]["induction"] == [] and d["stacks"]["cross"]["top"]["previous"] == [], d["top"]
assert all(e["score"] is not None for s in [d] + list(d["stacks"].values()) for v in s["top"].values() for e in v)
PY
    pass "seq2seq: heads without a value show '-' and are not ranked (no nan)"
else
    fail "seq2seq: heads without a value" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi
# attnviz serve on the same fixtures: each stack's codes against the CLI's JSON, the page byte for byte,
# bad requests (tests/e2e/serve_check.py seq2seq)
"$PY" tests/e2e/serve_check.py "$BIN" seq2seq
exit 0
