#!/bin/bash
# attnviz --telemetry end to end: on committed fixtures of several kinds (bidirectional BERT,
# causal Llama with grouped queries, GPT-2, Gemma 2's windows and soft-caps), each row's
# statistics and top keys against their definitions recomputed in Python from the same run's full
# attention (--json without --telemetry); a batch (packed inputs) equal to single runs; the
# refusals. The engine's own check against the matrices is tests/test_telemetry.c.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
PY=python3
. tests/e2e/lib.sh

TEXT="the cat sat on the mat and the cat saw the other cat sit on the mat by the door"
# small-gemma2 has no tokenizer (the suites feed it ids): a copy with small-llama's (the same
# 40-token vocabulary), as tools/same_outputs.sh runs it
mkdir -p "$T/small-gemma2"
ln -s "$PWD"/tests/data/small-gemma2/* "$T/small-gemma2/"
ln -s "$PWD/tests/data/small-llama/tokenizer.json" "$T/small-gemma2/"
for fx in small-f32 small-llama small-gpt2 small-gemma2; do
    M=tests/data/$fx
    [ "$fx" = small-gemma2 ] && M=$T/small-gemma2
    if ! "$BIN" --quiet --model "$M" --precision 9 --json "$T/full.json" "$TEXT" 2>"$T/err" ||
        ! "$BIN" --quiet --model "$M" --precision 9 --telemetry 4 --json "$T/tel.json" "$TEXT" 2>>"$T/err"; then
        fail "telemetry_$fx" "$(head -2 "$T/err")"
        continue
    fi
    check "telemetry_${fx}_is_its_definitions_over_the_full_matrices" $PY - "$T/full.json" "$T/tel.json" <<'PY'
import json, math, sys
full, tel = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert "attention" not in tel and tel["tokens"] == full["tokens"]
t = tel["telemetry"]
assert t["fields"] == ["sink", "sink4", "entropy", "prev", "self", "dup", "distance"] and t["top_k"] == 4, t["fields"]
ids, worst, dups = full["input_ids"], 0.0, 0
for l, layer in enumerate(full["attention"]):
    for h, A in enumerate(layer):
        for i, p in enumerate(A):
            want = [p[0], sum(p[:4]), -sum(x * math.log(x) for x in p if x > 0), p[i - 1] if i else 0.0, p[i],
                    sum(p[j] for j in range(i) if ids[j] == ids[i]), sum(x * abs(i - j) for j, x in enumerate(p))]
            got = t["rows"][l][h][i]
            worst = max(worst, max(abs(g - w) / (len(p) if k == 6 else 1) for k, (g, w) in enumerate(zip(got, want))))
            dups += want[5] > 0
            order = sorted((j for j in range(len(p)) if p[j] > 0), key=lambda j: (-p[j], j))[:4]
            assert [k for k, _ in t["top"][l][h][i]] == order, (l, h, i, t["top"][l][h][i], order)
            assert all(abs(w - p[k]) <= 1e-9 * max(1, p[k]) for k, w in t["top"][l][h][i])
assert worst < 2e-6, worst  # 9 significant digits each side
assert dups > 0
PY
done

# a batch (inputs packed into shared passes) gives each line what a single run gives
printf 'the cat sat on the mat\nthe dog\nthe cat saw the other cat\n' >"$T/lines.txt"
"$BIN" --quiet --model tests/data/small-llama --telemetry 2 --batch "$T/lines.txt" --json "$T/batch.jsonl" 2>"$T/err"
n=0 same=1
while IFS= read -r line; do
    n=$((n + 1))
    "$BIN" --quiet --model tests/data/small-llama --telemetry 2 --json "$T/one.json" "$line" 2>/dev/null
    $PY -c 'import json,sys; a=json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[3])]); b=json.load(open(sys.argv[2]))
sys.exit(0 if a["telemetry"] == b["telemetry"] and a["tokens"] == b["tokens"] else 1)' "$T/batch.jsonl" "$T/one.json" $((n - 1)) ||
        same=0
done <"$T/lines.txt"
if [ "$same" = 1 ] && [ "$n" = 3 ]; then pass telemetry_batch_lines_equal_single_runs
else fail telemetry_batch_lines_equal_single_runs "a batch line's telemetry differs from its single run"; fi

expect_exit telemetry_needs_json 2 "writes to --json" "$BIN" --model tests/data/small-llama --telemetry 3 "x"
expect_exit telemetry_not_with_html 2 "instead of the matrices" "$BIN" --model tests/data/small-llama --telemetry 3 --json - --html "$T/a.html" "x"
expect_exit telemetry_not_with_predict 2 "instead of the matrices" "$BIN" --model tests/data/small-llama --telemetry 3 --json - --predict 3 "x"
expect_exit telemetry_not_with_heads 2 "^attnviz: --telemetry goes with a run \(attnviz TEXT\), not attnviz heads" "$BIN" heads --model tests/data/small-llama --telemetry 3 --batch "$T/lines.txt"
expect_exit telemetry_top_out_of_range 2 "from 0 to 64" "$BIN" --telemetry 65 --json - "x"
expect_exit telemetry_top_not_a_number 2 "from 0 to 64" "$BIN" --telemetry many --json - "x"
