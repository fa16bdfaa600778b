#!/bin/bash
# attnviz render end to end: attention arrays written here with Python's standard library (.npy
# inside .npz, stored and deflated; .safetensors with the tokens in its metadata), drawn by the
# same writers as a model run, and the checks every array gets (shapes, probabilities, causality,
# token counts, dtypes). PASS/FAIL/SKIP lines.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
PY=python3
. tests/e2e/lib.sh

# mk OUT KIND [EDIT]: KIND npz | npz-deflate | npz-layers | safetensors; EDIT is Python run on the
# arrays dict A (name -> (shape, flat list)) and the meta dict M before writing
mk() {
    $PY - "$@" <<'PY'
import json, struct, sys, zipfile, io
out, kind = sys.argv[1], sys.argv[2]
edit = sys.argv[3] if len(sys.argv) > 3 else ""
L, H, n, d = 2, 3, 5, 4
def causal_rows(l, h):
    rows = []
    for i in range(n):
        w = [((l + 1) * (h + 2) * (j + 1)) % 7 + 1.0 if j <= i else 0.0 for j in range(n)]
        s = sum(w)
        rows += [v / s for v in w]
    return rows
att = []
for l in range(L):
    for h in range(H):
        att += causal_rows(l, h)
q = [((i * 7) % 11 - 5) / 3 for i in range(L * H * n * d)]
k = [((i * 5) % 13 - 6) / 4 for i in range(L * H * n * d)]
A = {"attention": ([L, H, n, n], att), "queries": ([L, H, n, d], q), "keys": ([L, H, n, d], k)}
M = {"tokens": ["<|endoftext|>", "Ġthe", "Ġcat", "Ġsat", "."], "model": "made-up", "causal": True,
     "text": "the cat sat."}
dtype = "<f4"
exec(edit)
def npy(shape, vals, dt=None):
    dt = dt or dtype
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (dt, "".join(f"{s}, " for s in shape))
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    fmt = {"<f4": "f", "<f8": "d", "<f2": "e", "<i4": "i"}[dt]
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<%d%s" % (len(vals), fmt), *vals)
if kind.startswith("npz"):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if kind == "npz-deflate" else zipfile.ZIP_STORED) as z:
        for name, (shape, vals) in A.items():
            if kind == "npz-layers" and len(shape) == 4:
                per = len(vals) // shape[0]
                for l in range(shape[0]):
                    z.writestr(f"{name}.{l}.npy", npy(shape[1:], vals[l * per:(l + 1) * per]))
            else:
                z.writestr(name + ".npy", npy(shape, vals))
    if M is not None:
        json.dump(M, open(out[:-4] + ".json", "w"))
else:
    header, data = {}, b""
    for name, (shape, vals) in A.items():
        b = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    header["__metadata__"] = {"attnviz": json.dumps(M)}
    h = json.dumps(header).encode()
    open(out, "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}

for kind in npz npz-deflate npz-layers safetensors; do
    ext=npz; [ $kind = safetensors ] && ext=safetensors
    rm -f "$T/a.json" # npz kinds write their sidecar; safetensors carries its tokens inside
    mk "$T/a.$ext" $kind
    if "$BIN" render "$T/a.$ext" --json "$T/out.json" --html "$T/a.html" --qk --precision 9 --quiet 2>"$T/err"; then
        check "render_${kind//-/_}_gives_the_arrays_back" $PY - "$T/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n = 5
assert d["tokens"][1] == "Ġthe" and d["display_tokens"][1] == " the" and d["model"] == "made-up", d["tokens"]
assert d["config"]["causal"] is True and d["config"]["layers"] == 2 and d["config"]["heads"] == 3
A = d["attention"]
assert len(A) == 2 and len(A[0]) == 3 and len(A[0][0]) == n
for l in range(2):
    for h in range(3):
        for i in range(n):
            w = [((l + 1) * (h + 2) * (j + 1)) % 7 + 1.0 if j <= i else 0.0 for j in range(n)]
            want = [v / sum(w) for v in w]
            assert all(abs(a - b) < 1e-6 for a, b in zip(A[l][h][i], want)), (l, h, i)
Q = d["queries"]
assert abs(Q[1][2][4][3] - ((((1 * 3 + 2) * 5 + 4) * 4 + 3) * 7 % 11 - 5) / 3) < 1e-6
PY
        grep -q '"init_layer":0' "$T/a.html" && pass "render_${kind//-/_}_writes_the_page" || fail "render_${kind//-/_}_writes_the_page" "no page metadata"
    else
        fail "render_${kind//-/_}_gives_the_arrays_back" "$(cat "$T/err")"
    fi
done

# layers given apart from the model's (include_layers): their indices label them
mk "$T/l.npz" npz 'M["layers"] = [3, 7]'
"$BIN" render "$T/l.npz" --json "$T/l.json" --html "$T/l.html" --layer 7 --head 2 --view matrix --theme dark --show-heads 0,2 --quiet 2>"$T/err"
check render_keeps_the_given_layer_indices $PY -c "
import json; d = json.load(open('$T/l.json')); assert d['layers'] == [3, 7] and d['config']['layers'] == 8, d['layers']
h = open('$T/l.html').read(); assert '\"init_layer\":7' in h and '\"init_view\":\"matrix\"' in h and '\"theme\":\"dark\"' in h and '\"init_heads\":[0,2]' in h"

# an encoder-decoder model: each stack checked and written under its own name
mk "$T/ed.npz" npz '
def rows(r, c, causal):
    out = []
    for i in range(r):
        w = [float(j + 1) if (not causal or j <= i) else 0.0 for j in range(c)]
        out += [v / sum(w) for v in w]
    return out
ne, nd = 4, 3
A = {"encoder_attention": ([L, H, ne, ne], rows(ne, ne, False) * L * H),
     "decoder_attention": ([L, H, nd, nd], rows(nd, nd, True) * L * H),
     "cross_attention": ([L, H, nd, ne], rows(nd, ne, False) * L * H)}
M = {"encoder_tokens": ["▁Hello", "▁world", ".", "</s>"], "decoder_tokens": ["<pad>", "▁Hallo", "▁Welt"], "model": "t5-ish"}'
"$BIN" render "$T/ed.npz" --json "$T/ed.json" --html "$T/ed.html" --precision 9 --quiet 2>"$T/err"
check render_writes_encoder_decoder_stacks $PY - "$T/ed.json" "$T/ed.html" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
meta = json.loads(re.search(r'<script type="application/json" id="av-meta">(.*?)</script>', page, re.S).group(1))
assert [(s["name"], s["n_rows"], s["n_cols"]) for s in meta["stacks"]] == [("encoder", 4, 4), ("decoder", 3, 3), ("cross", 3, 4)], meta["stacks"]
assert meta["sides"]["decoder"]["tokens"] == d["decoder_tokens"] and meta["sides"]["encoder"]["tokens"] == d["encoder_tokens"]
assert all('id="av-%s-%d"' % (s, l) in page for s in ("encoder", "decoder", "cross") for l in (0, 1))
assert d["encoder_tokens"][0] == "▁Hello" and d["decoder_tokens"][2] == "▁Welt", d.keys()
assert "attention" not in d
X = d["cross_attention"]
assert len(X) == 2 and len(X[0]) == 3 and len(X[0][0]) == 3 and len(X[0][0][0]) == 4
assert abs(X[1][2][2][3] - 4 / 10) < 1e-7 and abs(d["decoder_attention"][0][0][0][0] - 1) < 1e-7
assert len(d["encoder_attention"][0][0]) == 4
PY
mk "$T/ed.npz" npz 'A = {"cross_attention": ([L, H, 3, 4], [0.25] * (L * H * 12))}; M = {"encoder_tokens": ["a", "b", "c", "d"]}'
expect_exit render_cross_needs_decoder_tokens 1 "\"decoder_tokens\" is missing" "$BIN" render "$T/ed.npz" --json "$T/x.json" --quiet
mk "$T/ed.npz" npz 'A = {"decoder_attention": ([L, H, 3, 3], [1 / 3] * (L * H * 9))}; M = {"decoder_tokens": ["a", "b", "c"]}'
expect_exit render_decoder_attention_must_be_causal 1 "decoder_attention, layer 0, head 0: row 0 attends to later token 1" "$BIN" render "$T/ed.npz" --json "$T/x.json" --quiet

# word pieces: where words start, by each vocabulary's convention ("merge word pieces" on the page)
for conv in 'ĠThe Ġcat s Ġsat' '▁The ▁cat s ▁sat' 'the cat ##s sat' 'the</w> cat s</w> sat</w>'; do
    mk "$T/w.npz" npz "M['tokens'] = '$conv'.split(); M['causal'] = False; A = {'attention': ([1, 1, 4, 4], [0.25] * 16)}"
    "$BIN" render "$T/w.npz" --html "$T/w.html" --quiet 2>"$T/err"
    grep -q '"word_start":\[1,1,0,1\]' "$T/w.html" && pass "render_word_starts_${conv%% *}" ||
        fail "render_word_starts_${conv%% *}" "$(grep -o '"word_start":[^]]*]' "$T/w.html") $(cat "$T/err")"
done
mk "$T/w.npz" npz "M['tokens'] = ['the</w>', 'cat</w>', 'a', 'b']; M['causal'] = False; A = {'attention': ([1, 1, 4, 4], [0.25] * 16)}"
"$BIN" render "$T/w.npz" --json "$T/w.json" --quiet 2>"$T/err"
check render_reads_end_of_word_marks $PY -c "import json; d = json.load(open('$T/w.json')); assert d['display_tokens'] == ['the', 'cat', 'a', 'b'], d.get('display_tokens')"

# no "text": the page's Input row reads the tokens as text (specials left out; B apart)
mk "$T/t.npz" npz "del M['text']; M['causal'] = False; M['tokens'] = ['[CLS]', 'the', 'cat', '##s', '[SEP]']; M['sentence_b_start'] = 3; A = {'attention': ([1, 1, 5, 5], [0.2] * 25)}"
"$BIN" render "$T/t.npz" --json "$T/t.json" --quiet 2>"$T/err"
check render_reads_tokens_as_text $PY -c "import json; d = json.load(open('$T/t.json')); assert (d['text'], d['text_b']) == ('the cat', 's'), (d['text'], d['text_b'])"
mk "$T/t.npz" npz "del M['text']"
"$BIN" render "$T/t.npz" --json "$T/t.json" --quiet 2>"$T/err"
check render_reads_byte_level_tokens_as_text $PY -c "import json; d = json.load(open('$T/t.json')); assert d['text'] == 'the cat sat.', d['text']"

# float64 and float16 arrays
mk "$T/f8.npz" npz 'dtype = "<f8"'
expect_exit render_reads_float64 0 "" "$BIN" render "$T/f8.npz" --json "$T/f8.json" --quiet
mk "$T/f2.npz" npz 'dtype = "<f2"'
expect_exit render_reads_float16 0 "" "$BIN" render "$T/f2.npz" --json "$T/f2.json" --quiet

# what it refuses, in one line
mk "$T/b.npz" npz 'A["attention"][1][7] = float("nan")'
expect_exit render_refuses_nan 1 "attention, layer 0, head 0, row 1, column 2 is nan: not a probability" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'A["attention"][1][5] *= 1.5'
expect_exit render_refuses_rows_that_do_not_sum_to_one 1 "row 1 sums to 1\.[0-9]+, not 1" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'A["attention"][1][0:2] = [0.5, 0.5]'
expect_exit render_refuses_a_causal_claim_it_breaks 1 "row 0 attends to later token 1 .* \"causal\" is true" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'M["tokens"] = M["tokens"][:4]'
expect_exit render_refuses_a_token_count_mismatch 1 "'attention' is 5 x 5 per head; the tokens say 4 x 4" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'A["attention"] = ([6, 5, 5], A["attention"][1][:150])'
expect_exit render_refuses_a_wrong_rank 1 "'attention' has shape \[6, 5, 5\]; expected \[layers, heads, rows, columns\]" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'A = {"attention": ([2, 3, 5, 5], [1] * 150)}; dtype = "<i4"'
expect_exit render_refuses_integer_arrays 1 "has dtype '<i4'; attention must be float16, float32 or float64" "$BIN" render "$T/b.npz" --quiet
rm -f "$T/b.json"; mk "$T/b.npz" npz 'M = None'
expect_exit render_needs_tokens 1 "no tokens: give --meta FILE.json" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz 'A["keys"] = ([2, 3, 5, 2], A["keys"][1][:60])'
expect_exit render_needs_queries_and_keys_alike 1 "'queries' and 'keys' go together" "$BIN" render "$T/b.npz" --quiet
mk "$T/b.npz" npz
printf 'not a zip' >"$T/b.npz"
expect_exit render_refuses_a_non_zip 1 "b.npz: not a zip archive" "$BIN" render "$T/b.npz" --meta "$T/l.json" --quiet
mk "$T/b.npz" npz
expect_exit render_layer_must_be_given 2 "--layer 5 is not among the given layers" "$BIN" render "$T/b.npz" --layer 5 --quiet
expect_exit render_takes_no_model 2 "^attnviz: --model goes with .*, not attnviz render" "$BIN" render "$T/b.npz" --model x --quiet
expect_exit render_needs_an_input 2 "render needs INPUT" "$BIN" render --quiet
expect_exit render_input_kind 1 "give a .npz or .safetensors file" "$BIN" render "$T/b.json" --quiet
exit 0
