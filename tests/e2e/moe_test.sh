#!/bin/bash
# moe_test.sh — the mixture-of-experts decoders (Mixtral, Qwen3-MoE, OLMoE) through every command on
# their committed fixtures (tests/data/small-mixtral, small-qwen3moe, small-olmoe; small-llama's
# tokenizer.json): a run with --predict (--json's "experts": the sparse layers, one row of k distinct
# experts per token, weights in descending order, summing to 1 where the family renormalizes; a
# prediction at every position), --generate (every token routed, the prompt's rows as the run's),
# --no-special / --words (rows kept / left out), attnviz heads, attnviz diff and attnviz serve
# (tests/e2e/serve_check.py family: the CLI's tokens, attention and predictions over HTTP).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=${BIN:-./attnviz}
PY=${PYTHON:-python3}
for fam in "mixtral 1 0,1" "qwen3moe 1 0" "olmoe 0 0,1"; do
    read -r name renorm sparse <<<"$fam"
    M=$PWD/tests/data/small-$name
    text="the cat sat on the mat"
    if "$BIN" --model "$M" --quiet --predict 3 --precision 9 --json "$T/$name.json" "$text" 2>"$T/err" &&
        "$PY" - "$T/$name.json" "$renorm" "$sparse" <<'PY' 2>"$T/perr"; then
import json, sys
d, renorm, sparse = json.load(open(sys.argv[1])), sys.argv[2] == "1", [int(x) for x in sys.argv[3].split(",")]
n, c, x = len(d["tokens"]), d["config"], d["experts"]
assert c["num_experts"] == x["num_experts"] == 4 and c["experts_per_token"] == x["k"] == 2, (c, x["k"])
assert x["layers"] == sparse, x["layers"]
assert len(x["ids"]) == len(x["weights"]) == len(sparse)
for ids, ws in zip(x["ids"], x["weights"]):
    assert len(ids) == len(ws) == n
    for i, w in zip(ids, ws):
        assert len(set(i)) == 2 and all(0 <= e < 4 for e in i), i
        assert w == sorted(w, reverse=True) and w[-1] > 0, w
        assert (abs(sum(w) - 1) < 1e-6) if renorm else sum(w) < 1, w
assert [p["position"] for p in d["predictions"]] == list(range(n))
PY
        pass "moe_$name: run and --predict (experts of layers $sparse: k distinct ids, descending weights, renormalized=$renorm)"
    else
        fail "moe_$name: run and --predict" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    if "$BIN" --model "$M" --quiet --generate 4 --precision 9 --json "$T/$name.gen.json" "$text" 2>"$T/err" &&
        "$PY" - "$T/$name.gen.json" "$T/$name.json" <<'PY' 2>"$T/perr"; then
import json, sys
g, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n, p = len(g["tokens"]), g["generation"]["prompt_tokens"]
assert g["generation"]["generated_tokens"] >= 1 and n == p + g["generation"]["generated_tokens"]
x, y = g["experts"], r["experts"]
assert all(len(rows) == n for rows in x["ids"])
assert all(e >= 0 for rows in x["ids"] for row in rows for e in row)  # the generated tokens routed too
assert [rows[:p] for rows in x["ids"]] == [rows[:p] for rows in y["ids"]]
PY
        pass "moe_$name: --generate routes every token (the prompt's experts as the run's)"
    else
        fail "moe_$name: --generate" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    if "$BIN" --model "$M" --quiet --no-special --json "$T/$name.ns.json" "$text" 2>"$T/err" &&
        "$BIN" --model "$M" --quiet --words --json "$T/$name.w.json" "$text" 2>>"$T/err" &&
        "$PY" - "$T/$name.ns.json" "$T/$name.w.json" "$T/$name.json" <<'PY' 2>"$T/perr"; then
import json, sys
ns, w, r = (json.load(open(p)) for p in sys.argv[1:4])
assert r["tokens"][0] == "<s>" and ns["tokens"] == r["tokens"][1:]
assert [rows[1:] for rows in r["experts"]["ids"]] == ns["experts"]["ids"]
assert "experts" not in w
PY
        pass "moe_$name: --no-special keeps the other tokens' experts; --words leaves them out"
    else
        fail "moe_$name: --no-special / --words" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
    fi
    if "$BIN" heads --model "$M" --quiet --json "$T/$name.heads.json" "$text" >/dev/null 2>"$T/err" &&
        "$PY" -c "
import json, sys
d = json.load(open(sys.argv[1])); L, H = json.load(open(sys.argv[2]))['config']['layers'], json.load(open(sys.argv[2]))['config']['heads']
assert len(d['heads']) == L * H and {(h['layer'], h['head']) for h in d['heads']} == {(l, h) for l in range(L) for h in range(H)}
" "$T/$name.heads.json" "$T/$name.json" 2>"$T/perr"; then
        pass "moe_$name: attnviz heads scores every layer and head"
    else
        fail "moe_$name: attnviz heads" "$(cat "$T/err" "$T/perr" | tail -3)"
    fi
    if "$BIN" diff --model "$M" --quiet --json "$T/$name.diff.json" "the cat sat on the mat" "the dog sat on a mat" >/dev/null 2>"$T/err" &&
        "$BIN" diff --model "$M" --quiet --json "$T/$name.same.json" "the cat sat" "the cat sat" >/dev/null 2>>"$T/err" &&
        "$PY" -c "
import json, sys
d, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ph = d['divergence']['per_head']
assert len(ph) >= 2 and any(v > 0 for r in ph for v in r), ph
assert all(v == 0 for r in s['divergence']['per_head'] for v in r)
" "$T/$name.diff.json" "$T/$name.same.json" 2>"$T/perr"; then
        pass "moe_$name: attnviz diff (per-head divergence; 0 for a text against itself)"
    else
        fail "moe_$name: attnviz diff" "$(cat "$T/err" "$T/perr" | tail -3)"
    fi
    BIN=$BIN "$PY" tests/e2e/serve_check.py "$BIN" family "$M" "$text" "-"
done
