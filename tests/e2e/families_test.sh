#!/bin/bash
# families_test.sh — the BERT-shaped families added beside BERT's own (XLM-RoBERTa with its Unigram
# tokenizer.json, ELECTRA with embeddings_project) through every command, on their committed
# fixtures (tests/data/small-xlmr, small-electra): a run (--json: the template's tokens, the
# attention's shape, rows summing to 1), --predict (one top-3 per mask, in order of probability),
# attnviz heads (a score per layer and head), attnviz diff (per-head divergences; 0 for a text
# against itself) and attnviz serve (tests/e2e/serve_check.py family: the CLI's tokens, attention and
# predictions over HTTP).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=${BIN:-./attnviz}
PY=${PYTHON:-python3}
for fam in "xlmr <mask> <s> </s>" "electra [MASK] [CLS] [SEP]"; do
    read -r name mask cls sep <<<"$fam"
    M=$PWD/tests/data/small-$name
    text="the cat {m} on the mat"
    t=${text//\{m\}/$mask}
    if "$BIN" --model "$M" --quiet --predict 3 --json "$T/$name.json" "$t" 2>"$T/err" &&
        "$PY" - "$T/$name.json" "$cls" "$sep" "$mask" <<'PY' 2>"$T/perr"; then
import json, sys
d, cls, sep, mask = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
toks, A = d["tokens"], d["attention"]
assert toks[0] == cls and toks[-1] == sep and toks.count(mask) == 1, toks
n, L, H = len(toks), d["config"]["layers"], d["config"]["heads"]
assert len(A) == L and all(len(a) == H and all(len(r) == n for r in a) for a in A)
assert all(abs(sum(row) - 1) < 1e-4 for a in A for h in a for row in h)
P = d["predictions"]
assert [p["position"] for p in P] == [toks.index(mask)], P
probs = [e["prob"] for e in P[0]["top"]]
assert len(probs) == 3 and probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1, probs
PY
        pass "family_$name: run and --predict (tokens ${cls}..${sep}, attention rows, one top-3 at the mask)"
    else
        fail "family_$name: run and --predict" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    if "$BIN" heads --model "$M" --quiet --json "$T/$name.heads.json" "the cat sat on the mat" >/dev/null 2>"$T/err" &&
        "$PY" -c "
import json, sys
d = json.load(open(sys.argv[1])); L, H = int(sys.argv[2]), int(sys.argv[3])
assert len(d['heads']) == L * H and {(h['layer'], h['head']) for h in d['heads']} == {(l, h) for l in range(L) for h in range(H)}
" "$T/$name.heads.json" 2 4 2>"$T/perr"; then
        pass "family_$name: attnviz heads scores every layer and head"
    else
        fail "family_$name: attnviz heads" "$(cat "$T/err" "$T/perr" | tail -3)"
    fi
    if "$BIN" diff --model "$M" --quiet --json "$T/$name.diff.json" "the cat sat on the mat" "the dog sat on a mat" >/dev/null 2>"$T/err" &&
        "$BIN" diff --model "$M" --quiet --json "$T/$name.same.json" "the cat sat" "the cat sat" >/dev/null 2>>"$T/err" &&
        "$PY" -c "
import json, sys
d, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ph = d['divergence']['per_head']
assert len(ph) == 2 and all(len(r) == 4 for r in ph) and any(v > 0 for r in ph for v in r), ph
assert all(v == 0 for r in s['divergence']['per_head'] for v in r)
" "$T/$name.diff.json" "$T/$name.same.json" 2>"$T/perr"; then
        pass "family_$name: attnviz diff (per-head divergence; 0 for a text against itself)"
    else
        fail "family_$name: attnviz diff" "$(cat "$T/err" "$T/perr" | tail -3)"
    fi
    BIN=$BIN "$PY" tests/e2e/serve_check.py "$BIN" family "$M" "$text" "$mask"
done
exit 0
