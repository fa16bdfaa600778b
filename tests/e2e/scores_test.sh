#!/bin/bash
# --stats and attnviz heads scored from the engine's row sums (no n x n matrices kept; capture.h's
# sc_sum) against the same commands scoring the kept matrices (ATTNVIZ_SCORE_MATRIX=1), end to end:
# the same JSON members and every score within 1e-6, on committed fixtures of several kinds
# (bidirectional BERT and ModernBERT, causal Llama with grouped queries, GPT-2), with heads'
# exclusions and patterns, --measure norm, packed batches; shards of the row sums merge to one
# run's bytes; an input whose matrices exceed --max-capture is still scored. The engine's own
# check is tests/test_scores.c.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
. tests/e2e/lib.sh

printf 'the cat sat on the mat and the cat saw the other cat\ntime flies like an arrow\tfruit flies like a banana\nhello world hello\nthe dog\n' >"$T/lines.txt"

# same_scores NAME ARGS...: ARGS run twice (row sums, then the matrices); JSON compared
same_scores() {
    local name=$1
    shift
    if ! "$BIN" "$@" --quiet --json "$T/rows.json" 2>"$T/err" ||
        ! ATTNVIZ_SCORE_MATRIX=1 "$BIN" "$@" --quiet --json "$T/matrix.json" 2>>"$T/err"; then
        fail "$name" "$(head -2 "$T/err")"
        return
    fi
    check "$name" python3 - "$T/rows.json" "$T/matrix.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert list(a) == list(b) and a["scores"] == b["scores"] and len(a["heads"]) == len(b["heads"]) > 0, (list(a), list(b))
worst = 0.0
for x, y in zip(a["heads"], b["heads"]):
    assert list(x) == list(y) and (x["layer"], x["head"]) == (y["layer"], y["head"]) and x["count"] == y["count"]
    for k in a["scores"]:
        assert (x[k] is None) == (y[k] is None), (k, x[k], y[k])
        if x[k] is not None:
            worst = max(worst, abs(x[k] - y[k]))
assert worst < 1e-6, worst
if "top" in a:  # the rankings agree wherever scores are not within the error of each other
    for k, top in a["top"].items():
        for s, t in zip(top, b["top"][k]):
            assert abs(s["score"] - t["score"]) < 1e-6, (k, s, t)
PY
}

for fx in small-f32 small-llama small-gpt2 small-modernbert; do
    M=tests/data/$fx
    same_scores "stats_rows_equal_matrices_$fx" --model "$M" --batch "$T/lines.txt" --stats
    same_scores "stats_norm_rows_equal_matrices_$fx" --model "$M" --batch "$T/lines.txt" --stats --measure norm
    same_scores "heads_rows_equal_matrices_$fx" heads --model "$M" --batch "$T/lines.txt" --induction-len 6
    same_scores "heads_excluded_pattern_rows_equal_matrices_$fx" heads --model "$M" --batch "$T/lines.txt" \
        --exclude-bos --exclude-current --pattern "offset -2" --induction-len 6
    same_scores "heads_norm_rows_equal_matrices_$fx" heads --model "$M" --batch "$T/lines.txt" --measure norm \
        --exclude-bos --induction-len 6 --pack-tokens 0
done

# heads with the subcommand first (attnviz heads ...), as users write it
same_scores heads_selected_layers_heads heads --model tests/data/small-llama --batch "$T/lines.txt" --layers 1 --heads 0,3

# shards of the row sums merge to the bytes of one run
"$BIN" --model tests/data/small-llama --quiet --batch "$T/lines.txt" --stats --json "$T/all.json" &&
    for i in 0 1 2; do
        "$BIN" --model tests/data/small-llama --quiet --batch "$T/lines.txt" --shard $i/3 --stats --json "$T/s$i.json"
    done && "$BIN" stats --merge "$T/s0.json" "$T/s1.json" "$T/s2.json" --json "$T/merged.json" --quiet
check stats_row_sum_shards_merge_to_one_runs_bytes cmp "$T/all.json" "$T/merged.json"

# the row sums keep no matrix: an input whose matrices (and q/k) exceed --max-capture is scored
expect_exit stats_matrices_refused_past_max_capture 1 "max-capture" env ATTNVIZ_SCORE_MATRIX=1 "$BIN" \
    --model tests/data/small-llama --quiet --max-capture 40k --stats "$(head -1 "$T/lines.txt") $(head -1 "$T/lines.txt")"
check stats_rows_fit_under_max_capture "$BIN" --model tests/data/small-llama --quiet --max-capture 40k --stats \
    "$(head -1 "$T/lines.txt") $(head -1 "$T/lines.txt")"
check heads_rows_fit_under_max_capture "$BIN" heads --model tests/data/small-llama --quiet --max-capture 40k \
    --induction-len 8 "$(head -1 "$T/lines.txt") $(head -1 "$T/lines.txt")"
