#!/bin/bash
# attnviz diff end to end on the demo model: two texts (alignment, JSON, table,
# page), identical inputs (every divergence exactly 0), and one text on two
# models: the demo and a copy whose layer L head H query weights are zeroed,
# where nothing before layer L and no other head of layer L may diverge, and
# that head must. Numbers are checked against the JSON's own attentions (the
# divergence recomputed here in Python from them), not against attnviz's
# earlier output.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
BIN=$PWD/attnviz
DEMO=$PWD/weights/demo
if [ ! -f "$DEMO/model.safetensors" ]; then
    fail diff_demo "no demo model (make demo-model)"
    exit 1
fi
PY=python3

# ---- two texts on one model
A="the cat sat on the mat" B="the dog sat on a mat"
"$BIN" diff --model "$DEMO" --quiet --json "$T/d.json" --html "$T/d.html" "$A" "$B" >"$T/table" 2>"$T/err"
rc=$?
if [ $rc -ne 0 ]; then fail diff_two_texts "exit $rc: $(cat "$T/err")"; else pass diff_two_texts; fi
# the JSON: alignment of the demo's WordPiece ids, both attentions, and divergences that a
# recomputation from those attentions (merged key axis, log base 2) reproduces
check diff_json_two_texts $PY - "$T/d.json" "$T/table" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "attnviz-diff" and d["mode"] == "texts", d["mode"]
a, b, al = d["a"], d["b"], d["alignment"]
assert a["tokens"] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"], a["tokens"]
assert b["tokens"] == ["[CLS]", "the", "dog", "sat", "on", "a", "mat", "[SEP]"], b["tokens"]
assert al["pairs"] == [[0, 0], [1, 1], [3, 3], [4, 4], [6, 6], [7, 7]], al["pairs"]
assert al["only_a"] == [2, 5] and al["only_b"] == [2, 5]
assert al["a_to_b"] == [0, 1, -1, 3, 4, -1, 6, 7]
dv = d["divergence"]
assert dv["log_base"] == 2 and dv["layers"] == [0, 1] and len(dv["heads"]) == 12
def row_jsd(p, q):
    sp, sq = sum(p), sum(q)
    keys = [(p[i] / sp, q[j] / sq) for i, j in al["pairs"]]
    keys += [(p[i] / sp, 0.0) for i in al["only_a"]] + [(0.0, q[j] / sq) for j in al["only_b"]]
    t = 0.0
    for x, y in keys:
        m = (x + y) / 2
        if x > 0: t += 0.5 * x * math.log2(x / m)
        if y > 0: t += 0.5 * y * math.log2(y / m)
    return t
worst = 0
for l in range(2):
    for h in range(12):
        want = sum(row_jsd(a["attention"][l][h][i], b["attention"][l][h][j]) for i, j in al["pairs"]) / len(al["pairs"])
        worst = max(worst, abs(want - dv["per_head"][l][h]))
assert worst < 2e-5, worst  # the JSON's attentions have 6 significant digits
r = dv["ranking"]
assert len(r) == 24 and all(r[k]["jsd"] >= r[k + 1]["jsd"] for k in range(23))
# sink mass: each side's mean weight on token 0 over query rows 1..n-1, and B - A
sk = d["sink"]
assert sk["key"] == 0, sk
worst = 0
for l in range(2):
    for h in range(12):
        wa = sum(row[0] for row in a["attention"][l][h][1:]) / (len(a["tokens"]) - 1)
        wb = sum(row[0] for row in b["attention"][l][h][1:]) / (len(b["tokens"]) - 1)
        worst = max(worst, abs(wa - sk["a"][l][h]), abs(wb - sk["b"][l][h]),
                    abs((sk["b"][l][h] - sk["a"][l][h]) - sk["change"][l][h]))
assert worst < 2e-6, worst
table = open(sys.argv[2]).read().splitlines()
assert "6 aligned (2 only in A, 2 only in B)" in table[0], table[0]
top = table[3].split()
assert (int(top[1]), int(top[2])) == (r[0]["layer"], r[0]["head"]), (top, r[0])
assert len([x for x in table if x.strip()[:1].isdigit()]) == 10  # --top's default
PY
# the page: B's attention chunks beside A's, the comparison in the meta, the diff view first
check diff_page_payload $PY - "$T/d.html" <<'PY'
import json, re, sys
s = open(sys.argv[1]).read()
assert len(re.findall(r'id="av-att-\d+"', s)) == 2 and len(re.findall(r'id="av-attb-\d+"', s)) == 2
meta = json.loads(re.search(r'<script type="application/json" id="av-meta">(.*?)</script>', s, re.S).group(1))
assert meta["init_view"] == "diff" and meta["diff"]["side_b"]["tokens"][2] == "dog"
r = meta["diff"]["divergence"]["ranking"][0]
assert (meta["init_layer"], meta["init_head"]) == (r["layer"], r["head"])
PY

# ---- identical inputs: every divergence exactly 0, every token aligned
"$BIN" diff --model "$DEMO" --quiet --json "$T/same.json" "$A" "$A" >/dev/null 2>"$T/err"
check diff_identical_is_zero $PY - "$T/same.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["alignment"]["only_a"] == [] and d["alignment"]["only_b"] == []
assert all(v == 0 for row in d["divergence"]["per_head"] for v in row), d["divergence"]["per_head"]
PY

# ---- --json - writes the JSON alone on stdout; --layers/--heads select what is compared; --top N rows
"$BIN" diff --model "$DEMO" --quiet --json - --layers 1 --heads 3,8 "$A" "$B" >"$T/sel.json" 2>"$T/err"
check diff_selection_json_stdout $PY - "$T/sel.json" "$T/d.json" <<'PY'
import json, sys
d, full = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
dv = d["divergence"]
assert dv["layers"] == [1] and dv["heads"] == [3, 8]
assert [x for x in dv["per_head"][0]] == [full["divergence"]["per_head"][1][3], full["divergence"]["per_head"][1][8]]
assert len(d["a"]["attention"]) == 1 and len(d["a"]["attention"][0]) == 2
PY
"$BIN" diff --model "$DEMO" --quiet --top 3 --json "$T/t.json" "$A" "$B" >"$T/table3" 2>/dev/null
n=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$T/table3")
if [ "$n" -eq 3 ]; then pass diff_top; else fail diff_top "$n rows: $(cat "$T/table3")"; fi
# without --json or --html the page goes to attnviz-diff.html
(cd "$T" && "$BIN" diff --model "$DEMO" --quiet "$A" "$B" >/dev/null 2>&1)
if [ -s "$T/attnviz-diff.html" ]; then pass diff_default_page; else fail diff_default_page "no attnviz-diff.html"; fi

# ---- one text on two models: the demo and a copy with one head's query weights zeroed
edit_head() { # DIR LAYER HEAD: zero the head's 64 rows of the query weight (and its bias)
    $PY - "$1/model.safetensors" "$2" "$3" <<'PY'
import json, struct, sys
p, l, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]; hdr = json.loads(b[8:8 + n])
for name, rows in (("weight", 768), ("bias", 1)):
    t = hdr["encoder.layer.%d.attention.self.query.%s" % (l, name)]
    o = 8 + n + t["data_offsets"][0] + h * 64 * rows * 4
    b[o:o + 64 * rows * 4] = bytes(64 * rows * 4)
open(p, "wb").write(b)
PY
}
for spec in "1 3" "0 5"; do
    set -- $spec
    L=$1 H=$2 M2=$T/demo-l$1h$2
    rm -rf "$M2" && cp -r "$DEMO" "$M2" && edit_head "$M2" "$L" "$H"
    "$BIN" diff --model "$DEMO" --model "$M2" --quiet --json "$T/m.json" "time flies like an arrow" >"$T/mtable" 2>"$T/err"
    rc=$?
    if [ $rc -ne 0 ]; then fail "diff_two_models_l${L}h${H}" "exit $rc: $(cat "$T/err")"; continue; fi
    check "diff_two_models_l${L}h${H}" $PY - "$T/m.json" "$L" "$H" <<'PY'
import json, sys
d, L, H = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
assert d["mode"] == "models" and d["a"]["input_ids"] == d["b"]["input_ids"]
ph = d["divergence"]["per_head"]
for l in range(L):
    assert all(v == 0 for v in ph[l]), ("layer before the edit diverges", l, ph[l])
assert ph[L][H] > 0.01, ph[L]
assert all(v == 0 for h, v in enumerate(ph[L]) if h != H), ("another head of the edited layer diverges", ph[L])
r = d["divergence"]["ranking"][0]
assert (r["layer"], r["head"]) == (L, H), r
PY
done
if grep -q "one text, 7 tokens, on demo (A) and demo-l0h5 (B)" "$T/mtable"; then pass diff_two_models_table
else fail diff_two_models_table "$(head -2 "$T/mtable")"; fi
