#!/bin/bash
# gptoss_test.sh — gpt-oss's attention sinks through the CLI on the committed fixture
# (tests/data/small-gptoss; small-llama's tokenizer.json): --json's "sinks" [layer][head][query]
# with each row's weights plus its sink summing to 1, config.attention_sinks, the experts;
# FILE.sinks.npy equal to the JSON; a --layers/--heads selection the full run's slice; --no-special
# and --words (rows and sink still summing to 1); a --batch (packed inputs) equal to each input alone;
# --generate's prompt rows as the run's; attnviz heads and serve (tests/e2e/serve_check.py family).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=${BIN:-./attnviz}
PY=${PYTHON:-python3}
M=$PWD/tests/data/small-gptoss
text="the cat sat on the mat because it was tired"
# the shared checks: the sinks of a JSON document, and .npy read without numpy
cat >"$T/sinks.py" <<'PY'
import json, struct

def load(p):
    return json.load(open(p))

def rows_sum_to_one(d, tol=2e-6):
    """every row of attention plus its sink sums to 1; the shapes are [L][H][n] / [L][H][n][n]"""
    a, s = d["attention"], d["sinks"]
    assert len(a) == len(s) and all(len(x) == len(y) for x, y in zip(a, s)), "shapes"
    worst = 0.0
    for al, sl in zip(a, s):
        for ah, sh in zip(al, sl):
            assert len(sh) == len(ah) == len(d["tokens"]), (len(sh), len(ah))
            for row, sk in zip(ah, sh):
                assert 0 <= sk <= 1, sk
                worst = max(worst, abs(sum(row) + sk - 1))
    assert worst < tol, worst
    return worst

def npy(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY", "magic"
    hl = struct.unpack("<H", b[8:10])[0]
    hdr = b[10:10 + hl].decode()
    shape = tuple(int(x) for x in hdr.split("(")[1].split(")")[0].split(",") if x.strip())
    n = 1
    for x in shape:
        n *= x
    return shape, struct.unpack("<%df" % n, b[10 + hl:10 + hl + 4 * n])
PY

if "$BIN" --model "$M" --quiet --precision 9 --json "$T/run.json" --npy "$T/run.npy" "$text" 2>"$T/err" &&
    PYTHONPATH=$T "$PY" - "$T/run.json" "$T/run.sinks.npy" >"$T/worst" <<'PY' 2>"$T/perr"; then
import sys
from sinks import load, npy, rows_sum_to_one
d = load(sys.argv[1])
assert d["config"]["attention_sinks"] is True
worst = rows_sum_to_one(d)
shape, flat = npy(sys.argv[2])
L, H, n = len(d["sinks"]), len(d["sinks"][0]), len(d["tokens"])
assert shape == (L, H, n), shape
js = [v for l in d["sinks"] for h in l for v in h]
assert max(abs(a - b) for a, b in zip(js, flat)) < 1e-7
# the sinks matter: some rows give them most of their weight, others little
assert max(js) > 0.5 and min(js) < 0.1, (min(js), max(js))
x = d["experts"]
assert x["k"] == 2 and all(abs(sum(w) - 1) < 1e-6 for l in x["weights"] for w in l)
print(f"{worst:.1e}")
PY
    pass "gptoss: --json sinks [L][H][n] (rows + sink = 1, worst $(cat "$T/worst")), .sinks.npy = JSON, experts renormalized"
else
    fail "gptoss: run --json/--npy" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi

if "$BIN" --model "$M" --quiet --precision 9 --layers 1 --heads 2,3 --json "$T/sel.json" "$text" 2>"$T/err" &&
    PYTHONPATH=$T "$PY" - "$T/sel.json" "$T/run.json" <<'PY' 2>"$T/perr"; then
import sys
from sinks import load, rows_sum_to_one
s, r = load(sys.argv[1]), load(sys.argv[2])
rows_sum_to_one(s)
assert len(s["sinks"]) == 1 and len(s["sinks"][0]) == 2
for hi, h in enumerate((2, 3)):
    assert max(abs(a - b) for a, b in zip(s["sinks"][0][hi], r["sinks"][1][h])) < 1e-6
PY
    pass "gptoss: --layers 1 --heads 2,3 keeps the full run's sinks of those heads"
else
    fail "gptoss: selection" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi

if "$BIN" --model "$M" --quiet --precision 9 --no-special --json "$T/ns.json" "$text" 2>"$T/err" &&
    "$BIN" --model "$M" --quiet --precision 9 --words --json "$T/w.json" "$text" 2>>"$T/err" &&
    PYTHONPATH=$T "$PY" - "$T/ns.json" "$T/w.json" "$T/run.json" <<'PY' 2>"$T/perr"; then
import sys
from sinks import load, rows_sum_to_one
ns, w, r = (load(p) for p in sys.argv[1:4])
assert ns["tokens"] == r["tokens"][1:] and len(w["tokens"]) < len(r["tokens"])
rows_sum_to_one(ns), rows_sum_to_one(w)
# a kept row's sink: its share over the kept keys and itself
a, s = r["attention"][0][1], r["sinks"][0][1]
for i in range(1, len(r["tokens"])):
    want = s[i] / (s[i] + sum(a[i][1:]))
    assert abs(ns["sinks"][0][1][i - 1] - want) < 1e-6, (i, ns["sinks"][0][1][i - 1], want)
PY
    pass "gptoss: --no-special (each kept row's sink over its kept keys and itself) and --words: rows + sink = 1"
else
    fail "gptoss: --no-special / --words" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi

printf '%s\n%s\n%s\n' "$text" "the dog" "a mat because it was tired" >"$T/batch.txt"
: >"$T/alone.jsonl"
ok=1
while IFS= read -r line; do
    "$BIN" --model "$M" --quiet --precision 9 --json - "$line" >>"$T/alone.jsonl" 2>"$T/err" || ok=0
done <"$T/batch.txt"
if [ "$ok" = 1 ] && "$BIN" --model "$M" --quiet --precision 9 --batch "$T/batch.txt" >"$T/batch.jsonl" 2>>"$T/err" &&
    "$PY" - "$T/batch.jsonl" "$T/alone.jsonl" <<'PY' 2>"$T/perr"; then
import json, sys
b = [json.loads(x) for x in open(sys.argv[1])]
a = [json.loads(x) for x in open(sys.argv[2])]
assert len(b) == len(a) == 3
worst = 0.0
for x, y in zip(b, a):
    assert x["tokens"] == y["tokens"]
    for lx, ly in zip(x["sinks"], y["sinks"]):
        for hx, hy in zip(lx, ly):
            worst = max(worst, max(abs(p - q) for p, q in zip(hx, hy)))
assert worst < 1e-6, worst
PY
    pass "gptoss: --batch (packed inputs) gives each input's sinks as alone"
else
    fail "gptoss: --batch" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi

if "$BIN" --model "$M" --quiet --precision 9 --generate 5 --json "$T/gen.json" "$text" 2>"$T/err" &&
    PYTHONPATH=$T "$PY" - "$T/gen.json" "$T/run.json" <<'PY' 2>"$T/perr"; then
import sys
from sinks import load, rows_sum_to_one
g, r = load(sys.argv[1]), load(sys.argv[2])
p = g["generation"]["prompt_tokens"]
assert g["generation"]["generated_tokens"] >= 1
rows_sum_to_one(g)
for lg, lr in zip(g["sinks"], r["sinks"]):
    for hg, hr in zip(lg, lr):
        assert max(abs(a - b) for a, b in zip(hg[:p], hr[:p])) < 1e-5
PY
    pass "gptoss: --generate captures every step's sinks (the prompt's as the run's)"
else
    fail "gptoss: --generate" "$(cat "$T/err" "$T/perr" 2>/dev/null | tail -3)"
fi

if "$BIN" heads --model "$M" --quiet --json "$T/heads.json" "$text" >/dev/null 2>"$T/err"; then
    pass "gptoss: attnviz heads runs"
else
    fail "gptoss: attnviz heads" "$(tail -3 "$T/err")"
fi
BIN=$BIN "$PY" tests/e2e/serve_check.py "$BIN" family "$M" "$text" "-"
