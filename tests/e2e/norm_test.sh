#!/bin/bash
# norm_test.sh — --measure norm end to end (value-weighted attention; docs/beyond-attention.md): which outputs carry it
# (JSON, .npy siblings, --out-dir, --generate, the views --no-special / --words), --stats and heads say
# which measure they scored and merge only alike files, and a run without it carries none of it. The
# numbers themselves: tests/ref/norm_check.sh (transformers), test_normattn, test_kernels.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
M=tests/data/small-llama
B=tests/data/small-f32
PY=python3
Q=(--quiet)

# json_has FILE PY-EXPR: the expression (over d, the JSON object) is true
json_is() {
    local name=$1 file=$2 expr=$3
    if out=$("$PY" - "$file" "$expr" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
PY
    ); then pass "$name"; else fail "$name" "$expr is false for $file $out"; fi
}
# npy_shape FILE: the shape tuple of a .npy header
npy_shape() { "$PY" -c "import sys,ast; h=open(sys.argv[1],'rb').read(); n=h[8]|h[9]<<8; print(ast.literal_eval(h[10:10+n].decode())['shape'])" "$1"; }

./attnviz --model "$M" "${Q[@]}" --measure norm --json "$T/a.json" --npy "$T/a.npy" "the cat sat on the mat" || fail "norm run" "exit $?"
json_is "norm: JSON has measure, norm_attention and value_norms shaped like attention" "$T/a.json" \
    'd["measure"] == "norm" and len(d["norm_attention"]) == len(d["attention"]) and all(len(x) == len(y) and len(x[0]) == len(y[0]) for x, y in zip(d["norm_attention"], d["attention"])) and len(d["value_norms"][0][0]) == len(d["tokens"])'
json_is "norm: norm_attention is attention times the key's value norm" "$T/a.json" \
    'max(abs(a * v[j] - x) for A, N, V in zip(d["attention"], d["norm_attention"], d["value_norms"]) for Ah, Nh, v in zip(A, N, V) for ar, xr in zip(Ah, Nh) for j, (a, x) in enumerate(zip(ar, xr))) < 1e-4'
n=$("$PY" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['tokens']))" "$T/a.json")
if [ "$(npy_shape "$T/a.norm_attention.npy")" = "(2, 4, $n, $n)" ] && [ "$(npy_shape "$T/a.value_norms.npy")" = "(2, 4, $n)" ]; then
    pass "norm: --npy writes FILE.norm_attention.npy [L,H,n,n] and FILE.value_norms.npy [L,H,n]"
else
    fail "norm: --npy siblings" "$(ls "$T") $(npy_shape "$T/a.norm_attention.npy") $(npy_shape "$T/a.value_norms.npy")"
fi

./attnviz --model "$M" "${Q[@]}" --json "$T/p.json" --npy "$T/p.npy" "the cat sat on the mat"
json_is "norm: without --measure no norm fields" "$T/p.json" '"norm_attention" not in d and "value_norms" not in d and "measure" not in d'
if [ ! -e "$T/p.norm_attention.npy" ]; then pass "norm: without --measure no norm .npy"; else fail "norm: without --measure" "p.norm_attention.npy written"; fi
if cmp -s <("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['attention']))" "$T/a.json") \
          <("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['attention']))" "$T/p.json"); then
    pass "norm: the attention is the same with --measure norm"
else
    fail "norm: attention" "differs with --measure norm"
fi

./attnviz --model "$B" "${Q[@]}" --measure norm --no-special --json "$T/ns.json" "the quick brown fox"
json_is "norm: --no-special drops the specials' norms and does not renormalize" "$T/ns.json" \
    'len(d["value_norms"][0][0]) == len(d["tokens"]) and any(abs(sum(r) - 1) > 1e-3 for r in d["norm_attention"][0][0])'
./attnviz --model "$B" "${Q[@]}" --measure norm --words --json "$T/w.json" "unaffable tokenization"
json_is "norm: --words merges norm_attention and leaves value_norms out" "$T/w.json" \
    '"value_norms" not in d and len(d["norm_attention"][0][0]) == len(d["tokens"])'

./attnviz --model "$M" "${Q[@]}" --measure norm --generate 4 --json "$T/g.json" "the cat"
json_is "norm: --generate's value norms cover the generated tokens" "$T/g.json" \
    'len(d["value_norms"][0][0]) == len(d["tokens"]) == d["generation"]["prompt_tokens"] + d["generation"]["generated_tokens"]'

printf 'the cat sat\nhello world\n' > "$T/b.txt"
./attnviz --model "$M" "${Q[@]}" --measure norm --batch "$T/b.txt" --out-dir "$T/od" --npy
if [ -s "$T/od/000002.norm_attention.npy" ] && [ -s "$T/od/000002.value_norms.npy" ]; then
    pass "norm: --out-dir --npy writes the norm siblings per line"
else
    fail "norm: --out-dir" "$(ls "$T/od")"
fi

./attnviz --model "$M" "${Q[@]}" --measure norm --stats --json "$T/s1.json" "the cat sat on the mat"
./attnviz --model "$M" "${Q[@]}" --measure norm --stats --json "$T/s2.json" "a mat"
./attnviz --model "$M" "${Q[@]}" --stats --json "$T/s3.json" "a mat"
json_is "norm: --stats --json says measure norm" "$T/s1.json" 'd["kind"] == "stats" and d["measure"] == "norm"'
json_is "norm: --stats --json without it says nothing" "$T/s3.json" '"measure" not in d'
check "norm: stats --merge adds two norm files" ./attnviz stats --merge --json "$T/s12.json" "$T/s1.json" "$T/s2.json"
json_is "norm: the merged file keeps measure norm" "$T/s12.json" 'd["measure"] == "norm" and d["inputs"] == 2'
expect_exit "norm: stats --merge refuses norm with attention" 1 "s3.json attention: they do not add up" \
    ./attnviz stats --merge --json "$T/x.json" "$T/s1.json" "$T/s3.json"
if ./attnviz --model "$M" "${Q[@]}" --measure norm --stats "the cat sat on the mat" | head -1 | grep -q "value-weighted"; then
    pass "norm: the --stats table says value-weighted"
else
    fail "norm: --stats table" "no value-weighted in its first line"
fi
./attnviz heads --model "$M" "${Q[@]}" --measure norm --json "$T/h.json" "the cat sat on the mat the cat"
./attnviz heads --model "$M" "${Q[@]}" --json "$T/h0.json" "the cat sat on the mat the cat"
json_is "norm: heads --json says measure norm and scores differ from attention's" "$T/h.json" \
    'd["measure"] == "norm" and d["heads"] != json.load(open("'"$T/h0.json"'"))["heads"]'
exit 0
