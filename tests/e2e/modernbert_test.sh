#!/bin/bash
# ModernBERT end to end on the committed fixture (tests/data/small-modernbert: 3 layers, global
# then two local ones with a window of |i - j| <= 2, its own BPE tokenizer.json, an MLM head):
# a run, --predict, heads, diff and serve. Numbers against transformers: tests/unit/test_model.c's
# goldens and tests/ref/modernbert_check.sh.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
MB=$PWD/tests/data/small-modernbert
PY=python3
. tests/e2e/lib.sh
TEXT="the cat sat on the mat because it was tired"

"$BIN" --model "$MB" --json "$T/run.json" --html "$T/run.html" --quiet "$TEXT" "and B" 2>"$T/err" ||
    fail modernbert_runs "$(cat "$T/err")"
check modernbert_local_layers_see_a_window_both_ways $PY - "$T/run.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c, A = d["config"], d["attention"]
assert c["model_type"] == "modernbert" and not c["causal"] and c["positions"] == "rotary", c
assert c["sliding_window"] == 3 and c["sliding_layers"] == [1, 2] and c["sliding_window_bidirectional"] is True, c
n = len(d["tokens"])
assert d["tokens"][0] == "[CLS]" and d["tokens"][-1] == "[SEP]" and n > 8, d["tokens"]
for l, layer in enumerate(A):
    for head in layer:
        for i, row in enumerate(head):
            assert abs(sum(row) - 1) < 1e-4
            for j, v in enumerate(row):
                if l in c["sliding_layers"] and abs(i - j) >= c["sliding_window"]:
                    assert v == 0, (l, i, j, v)   # outside the window: exactly 0
                else:
                    assert v > 0, (l, i, j, v)    # inside, and every key of the global layer: seen
PY
grep -q '"sliding_window_bidirectional":true' "$T/run.html" && pass modernbert_page_carries_the_window_flag ||
    fail modernbert_page_carries_the_window_flag "no flag in the page"

"$BIN" --model "$MB" --predict 4 --json "$T/p.json" --quiet "the cat [MASK] on the mat. it [MASK] tired" 2>"$T/err" ||
    fail modernbert_predict_runs "$(cat "$T/err")"
check modernbert_predicts_at_every_mask $PY - "$T/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
masks = [i for i, t in enumerate(d["tokens"]) if t == "[MASK]"]
P = d["predictions"]
assert len(masks) == 2 and [p["position"] for p in P] == masks, (masks, P)
for p in P:
    probs = [e["prob"] for e in p["top"]]
    assert len(probs) == 4 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6, probs
    assert len({e["id"] for e in p["top"]}) == 4
PY

printf '%s\nthe quick brown fox\tjumps over the lazy dog\nhello world\n' "$TEXT" >"$T/lines.txt"
"$BIN" heads --model "$MB" --quiet --batch "$T/lines.txt" --top 5 --json "$T/h.json" >/dev/null 2>"$T/err" ||
    fail modernbert_heads_runs "$(cat "$T/err")"
check modernbert_heads_ranks_every_head $PY - "$T/h.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["top"], d.keys()
for score, top in d["top"].items():
    assert 1 <= len(top) <= 5 and all(0 <= t["layer"] < 3 and 0 <= t["head"] < 4 for t in top), (score, top)
PY

"$BIN" diff --model "$MB" --quiet --json "$T/d.json" "$TEXT" "the dog sat on the mat because it was tired" \
    >/dev/null 2>"$T/err" || fail modernbert_diff_runs "$(cat "$T/err")"
check modernbert_diff_compares_every_head $PY - "$T/d.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = d["divergence"]
assert v["layers"] == [0, 1, 2] and v["heads"] == [0, 1, 2, 3], v
ph = v["per_head"]
assert len(ph) == 3 and all(len(r) == 4 and all(0 < x <= 1 for x in r) for r in ph), ph  # one word changed: every head moves
PY

check modernbert_serve_gives_the_cli_attention $PY - "$BIN" "$MB" "$T/run.json" "$TEXT" <<'PY'
import http.client, json, re, subprocess, sys, zlib
binary, model, ref_path, text = sys.argv[1:5]
ref = json.load(open(ref_path))
p = subprocess.Popen([binary, "serve", "--port", "0", "--model", model], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)
try:
    m = re.match(r"^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{32})$", p.stdout.readline().strip())
    port, token = int(m.group(1)), m.group(2)
    h = {"Host": f"127.0.0.1:{port}", "X-Attnviz-Token": token, "Content-Type": "application/json"}
    def req(method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    st, data = req("POST", "/api/run", json.dumps({"text": text, "text_b": "and B", "model": 0, "predict": 0}))
    res = json.loads(data)
    assert st == 200 and res["meta"]["tokens"] == ref["tokens"], (st, data[:300])
    assert res["meta"]["config"]["sliding_window_bidirectional"] is True
    n, H = res["n"], 4
    worst = 0.0
    for l in range(3):
        st, z = req("GET", f"/api/attention?run={res['run']}&layer={l}")
        raw = zlib.decompress(z)
        k = H * n * n
        codes = [raw[i] | raw[k + i] << 8 for i in range(k)]
        for hh in range(H):
            for i in range(n):
                for j in range(n):
                    worst = max(worst, abs(codes[(hh * n + i) * n + j] / 1e4 - ref["attention"][l][hh][i][j]))
    assert worst <= 5.001e-5, worst
finally:
    p.terminate()
    p.wait(10)
PY
