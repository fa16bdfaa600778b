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
# Other families: ids drawn from the vocabulary with each family's specials
# (RoBERTa's <s> A </s></s> B </s>, one case with a literal <pad> whose position
# is padding_idx; DistilBERT's [CLS]/[SEP]; GPT-2 none), up to the last position.
gen_family() { # name family dtype naming act seed
    $py make_checkpoint.py "$out/$1" --family "$2" --shape small --dtype "$3" --naming "$4" --act "$5" --seed "$6"
    $py - "$out/$1" "$2" <<'PY'
import json, random, sys
d, family = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{d}/config.json"))
V = cfg["vocab_size"]
n_pos = cfg.get("n_positions") or cfg["max_position_embeddings"] - (2 if family == "roberta" else 0)
rng = random.Random(8)
def rand(k, lo):
    return [rng.randrange(lo, V - 1) for _ in range(k)]
cases = []
longest = n_pos if d.endswith(("small-gpt2", "small-roberta")) else 24
for n, pair in ((7, False), (12, True), (1 if family == "gpt2" else 3, False), (longest, True)):
    if family == "gpt2":
        ids = rand(n, 0)
    elif family == "roberta":
        ids = [0] + rand(n - 2, 4) + [2]
        if pair:
            b = n // 2
            ids[b - 1], ids[b] = 2, 2
    else:
        ids = [2] + rand(n - 2, 5) + [3]
        if pair:
            ids[n // 2 - 1] = 3
    cases.append({"input_ids": ids, "token_type_ids": [0] * n})
if family == "roberta":
    cases.append({"input_ids": [0, 9, 1, 10, 1, 11, 2], "token_type_ids": [0] * 7})
json.dump(cases, open(f"{d}/golden_in.json", "w"))
PY
    $py torch_ref.py "$out/$1" "$out/$1/golden_in.json" "$out/$1/golden.json"
    rm "$out/$1/golden_in.json"
}
gen small-f32 F32 hf gelu 11
gen small-f32-google F32 google gelu 12
gen small-f16 F16 hf gelu_new 13
gen small-bf16 BF16 google relu 14
gen_family small-gpt2 gpt2 F32 hf gelu_new 15
gen_family small-gpt2-f16 gpt2 F16 prefixed gelu_new 16
gen_family small-roberta roberta F32 prefixed gelu 17
gen_family small-distilbert distilbert BF16 hf gelu 18
gen_family small-distilbert-prefixed distilbert F32 prefixed relu 19
# The GPT-2 fixture again as torch.save writes it (pytorch_model.bin, zip +
# pickle; F16 so the converted path is covered): attnviz must read the same
# tensors from it as from model.safetensors.
mkdir -p "$out/small-gpt2-bin"
cp "$out/small-gpt2-f16/config.json" "$out/small-gpt2-f16/vocab.json" "$out/small-gpt2-f16/merges.txt" "$out/small-gpt2-bin/"
$py - "$out/small-gpt2-f16/model.safetensors" "$out/small-gpt2-bin/pytorch_model.bin" <<'PY'
import collections, sys, torch
import stio
w = stio.load(sys.argv[1])
sd = collections.OrderedDict((k, v.to(torch.float16)) for k, v in w.items())
torch.save(sd, sys.argv[2])
PY
