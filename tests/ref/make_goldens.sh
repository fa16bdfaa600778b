#!/bin/sh
# Regenerates the committed small checkpoints and their PyTorch goldens in
# tests/data/ (needs Debian's python3-torch). `make test` checks attnviz
# against these without torch; CI also compares live at bert-base shape.
set -eu
cd "$(dirname "$0")"
out=../data
py=/usr/bin/python3
gen() { # name dtype naming act seed
    $py make_checkpoint.py "$out/$1" --shape small --dtype "$2" --naming "$3" --act "$4" --seed "$5"
    $py - "$out/$1" <<'PY'
import json, random, sys
d = sys.argv[1]
vocab = [l.rstrip("\n") for l in open(f"{d}/vocab.txt")]
n_pos = json.load(open(f"{d}/config.json"))["max_position_embeddings"]
rng = random.Random(7)
cases = []
# Only the first fixture runs to the last position; the others stay small.
longest = n_pos if d.endswith("small-f32") else 24
for n, pair in ((7, False), (12, True), (3, False), (longest, True)):
    ids = [2] + [rng.randrange(5, len(vocab)) for _ in range(n - 2)] + [3]
    types = [0] * n
    if pair:
        b = n // 2
        ids[b - 1] = 3
        types = [0] * b + [1] * (n - b)
    cases.append({"input_ids": ids, "token_type_ids": types})
json.dump(cases, open(f"{d}/golden_in.json", "w"))
PY
    $py torch_ref.py "$out/$1" "$out/$1/golden_in.json" "$out/$1/golden.json"
    rm "$out/$1/golden_in.json"
}
gen small-f32 F32 hf gelu 11
gen small-f32-google F32 google gelu 12
gen small-f16 F16 hf gelu_new 13
gen small-bf16 BF16 google relu 14
