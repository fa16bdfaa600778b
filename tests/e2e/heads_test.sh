#!/bin/bash
# attnviz heads and attnviz stats --merge, end to end: the demo model's constructed heads rank
# first for their own scores; scores recomputed in Python from the JSON attention; a corpus run
# whole and in shards merges to the same bytes; bad merges and patterns fail with one line.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
DEMO=$PWD/weights/demo
M=$PWD/tests/data/small-f32
. tests/e2e/lib.sh

# Pairs that share words, so the cross-sentence head (0.9) finds matches instead of sinking into [CLS].
printf 'time flies like an arrow\tfruit flies like a banana\nthe cat sat on the mat\tthe cat was tired\nhello world\tthe quick brown fox jumps over the lazy dog\n' >"$T/pairs.txt"

ranked() { # NAME SCORE PATTERN-LABELS [extra args]: the demo heads with these labels are the top of SCORE
    local name=$1 score=$2 labels=$3
    shift 3
    if ! "$BIN" heads --model "$DEMO" --quiet --batch "$T/pairs.txt" --score "$score" --top 24 --json "$T/r.json" "$@" 2>"$T/err"; then
        fail "$name" "$(cat "$T/err")"
        return
    fi
    check "$name" python3 - "$DEMO/heads.json" "$T/r.json" "$score" "$labels" <<'PY'
import json, sys
labels = set(sys.argv[4].split(","))
want = {(h["layer"], h["head"]) for h in json.load(open(sys.argv[1]))["heads"] if h["pattern"] in labels}
top = json.load(open(sys.argv[2]))["top"][sys.argv[3]]
got = [(t["layer"], t["head"]) for t in top]
assert want and set(got[:len(want)]) == want, f"want {sorted(want)} first, got {got[:len(want) + 2]}"
# and clearly ahead of the rest
assert top[len(want) - 1]["score"] > top[len(want)]["score"] + 0.02, top[:len(want) + 1]
PY
}
ranked demo_previous_heads_rank_first_for_previous previous previous
ranked demo_next_heads_rank_first_for_next next next
ranked demo_self_heads_rank_first_for_self self self
ranked demo_cls_heads_rank_first_for_first first cls
ranked demo_sep_heads_rank_first_for_sep sep sep
ranked demo_same_token_heads_rank_first_for_duplicate duplicate same-token
ranked demo_induction_head_ranks_first_for_induction induction induction
ranked demo_broad_heads_rank_first_for_entropy entropy sentence,other-sentence
ranked demo_previous2_heads_rank_first_for_offset_minus2 pattern previous-2 --pattern "offset -2"
ranked demo_next2_heads_rank_first_for_offset_2 pattern next-2 --pattern "offset 2"
ranked demo_previous3_head_ranks_first_for_offset_minus3 pattern previous-3 --pattern "offset -3"
ranked demo_next3_head_ranks_first_for_offset_3 pattern next-3 --pattern "offset 3"

# Every score recomputed from the attention attnviz writes (--precision 9), by their definitions.
printf 'zebra time flies time\nhello world hello\tworld zebra\n' >"$T/two.txt"
"$BIN" --model "$M" --quiet --batch "$T/two.txt" --precision 9 >"$T/two.jsonl" &&
"$BIN" heads --model "$M" --quiet --batch "$T/two.txt" --score previous --score next --score self --score first \
    --score sep --score duplicate --score distance --score entropy --score pattern --pattern "offset -2" --json "$T/two.json"
check heads_scores_match_their_definitions_recomputed_from_json python3 - "$T/two.jsonl" "$T/two.json" <<'PY'
import json, math, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
ours = json.load(open(sys.argv[2]))
def share(A, ids, roles, k):
    n = len(A); tot = hit = 0.0
    for i in range(n):
        for j in range(n):
            tot += A[i][j]
            on = {"previous": j == i - 1, "next": j == i + 1, "self": i == j, "first": j == 0,
                  "sep": roles[j] == "[SEP]", "duplicate": j < i and ids[j] == ids[i], "pattern": j == i - 2}[k]
            hit += A[i][j] * on
    return hit / tot
worst = 0
for h in ours["heads"]:
    l, hd = h["layer"], h["head"]
    for k in ours["scores"]:
        vals = []
        for d in docs:
            A = d["attention"][l][hd]; n = len(A)
            if k == "distance": v = sum(A[i][j] * abs(i - j) for i in range(n) for j in range(n)) / n
            elif k == "entropy": v = -sum(p * math.log(p) for r in A for p in r if p > 0) / n
            else: v = share(A, d["input_ids"], d["tokens"], k)
            vals.append(v)
        worst = max(worst, abs(sum(vals) / len(vals) - h[k]))
assert worst < 1e-6, worst
assert ours["inputs"] == 2
PY

# Exact merging: the corpus whole, and in three shards (each drawing the same induction sequences).
for i in 1 2 3 4 5 6 7; do echo "line $i: the cat sat on the mat $i times, the cat"; done >"$T/corpus.txt"
head -n 2 "$T/corpus.txt" >"$T/s1.txt"; sed -n 3,5p "$T/corpus.txt" >"$T/s2.txt"; tail -n 2 "$T/corpus.txt" >"$T/s3.txt"
for s in corpus s1 s2 s3; do
    "$BIN" heads --model "$M" --quiet --batch "$T/$s.txt" --pattern "offset -1" --json "$T/$s.heads.json" &&
    "$BIN" --model "$M" --quiet --batch "$T/$s.txt" --stats --json "$T/$s.stats.json" || fail merge_inputs "run $s"
done
"$BIN" stats --merge "$T/s1.heads.json" "$T/s2.heads.json" "$T/s3.heads.json" --json "$T/merged.heads.json" --quiet
check heads_merge_of_shards_is_byte_identical_to_the_whole_run cmp "$T/corpus.heads.json" "$T/merged.heads.json"
"$BIN" stats --merge "$T/s3.stats.json" "$T/s1.stats.json" "$T/s2.stats.json" --json "$T/merged.stats.json" --quiet
check stats_merge_of_shards_in_any_order_is_byte_identical_to_the_whole_run cmp "$T/corpus.stats.json" "$T/merged.stats.json"
check stats_merge_prints_a_table bash -c "'$BIN' stats --merge '$T/s1.stats.json' '$T/s2.stats.json' | grep -q '^# attention statistics, mean over 5 inputs'"
check merged_means_are_the_weighted_mean_of_the_shards python3 - "$T/corpus.heads.json" "$T/s1.heads.json" "$T/s2.heads.json" "$T/s3.heads.json" <<'PY'
import json, sys
whole, *shards = (json.load(open(p)) for p in sys.argv[1:])
assert whole["inputs"] == sum(s["inputs"] for s in shards) == 7
for i, h in enumerate(whole["heads"]):
    for k in ("previous", "entropy", "pattern"):
        m = sum(s["heads"][i][k] * s["inputs"] for s in shards) / 7
        assert abs(m - h[k]) < 1e-9, (k, m, h[k])
    # induction: the same random sequences in every shard, counted once
    assert h["induction"] == shards[0]["heads"][i]["induction"]
PY
"$BIN" heads --model "$M" --quiet --batch "$T/s2.txt" --pattern "offset -1" --seed 5 --json "$T/s2b.heads.json"
"$BIN" stats --merge "$T/s1.heads.json" "$T/s2b.heads.json" --json "$T/two_seeds.json" --quiet
check merging_other_seeds_adds_their_induction_sequences python3 - "$T/two_seeds.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["seed"] for r in d["induction"]] == ["0", "5"] and d["inputs"] == 5  # 2 + 3 lines
assert d["heads"][0]["count"][d["scores"].index("induction")] == 16
PY

# Bad merges and patterns: one line naming the file, exit 1. (A file merged twice, missing shards and
# shards of other corpora: tests/bad_inputs.sh.)
printf '{"kind":"heads",' >"$T/cut.json"
expect_exit merge_rejects_corrupt_json 1 "cut.json: not valid JSON" "$BIN" stats --merge "$T/s1.heads.json" "$T/cut.json"
expect_exit merge_rejects_stats_with_heads 1 "s1.stats.json: a \"stats\" file, but .*s1.heads.json is \"heads\"" \
    "$BIN" stats --merge "$T/s1.heads.json" "$T/s1.stats.json"
"$BIN" --model "$DEMO" --quiet --batch "$T/s1.txt" --stats --json "$T/demo.stats.json"
expect_exit merge_rejects_another_model 1 "demo.stats.json: model 'attnviz-demo', but" \
    "$BIN" stats --merge "$T/s1.stats.json" "$T/demo.stats.json"
"$BIN" --model "$M" --quiet --batch "$T/s1.txt" --stats --layers 0 --json "$T/l0.stats.json"
expect_exit merge_rejects_other_heads 1 "l0.stats.json: other layers or heads" "$BIN" stats --merge "$T/s1.stats.json" "$T/l0.stats.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['heads'][0]['sum']; json.dump(d,open(sys.argv[2],'w'))" "$T/s1.stats.json" "$T/nosum.json"
expect_exit merge_rejects_missing_sums 1 "nosum.json: layer 0 head 0 lacks \"sum\"" "$BIN" stats --merge "$T/nosum.json"
expect_exit merge_rejects_a_missing_file 1 "nope.json" "$BIN" stats --merge "$T/nope.json"
expect_exit merge_needs_files 2 "needs FILE" "$BIN" stats --merge
# the table opens with what a reader came for: the top K per score, then every head
"$BIN" heads --model "$DEMO" --quiet --score previous --score next --top 2 "time flies like an arrow" >"$T/table.txt" 2>"$T/err"
check heads_table_opens_with_the_top_k python3 - "$T/table.txt" <<'PY'
import sys
L = open(sys.argv[1]).read().splitlines()
assert L[0].startswith("# head scores, mean over 1 input") and L[1] == "# top 2 heads per score (layer.head score)", L[:3]
assert L[2].split()[0] == "previous" and len(L[2].split()) == 5 and L[3].split()[0] == "next", L[2:4]
assert L[4] == "" and L[5] == "# every head" and L[6].split() == ["layer", "head", "previous", "next"], L[4:7]
assert len(L) == 7 + 24, len(L)
PY
expect_exit heads_needs_input 2 "heads needs TEXT" "$BIN" heads --model "$M"
expect_exit heads_rejects_unknown_score 2 "--score is previous" "$BIN" heads --model "$M" --score bogus x
expect_exit pattern_rule_needs_a_number 1 "offset K" "$BIN" heads --model "$M" --quiet --pattern "offset two" "a b"
printf '[[1,0],[1]]' >"$T/ragged.json"
expect_exit pattern_rejects_a_ragged_template 1 "ragged.json: row 1 is not an array of 2 numbers" \
    "$BIN" heads --model "$M" --quiet --pattern "$T/ragged.json" "a b"
printf '[[0,0],[1,0]]' >"$T/small.json"
expect_exit pattern_shorter_than_the_input_is_an_error 1 "longer than the 2 x 2 pattern" \
    "$BIN" heads --model "$M" --quiet --pattern "$T/small.json" "a b c d"
python3 -c "
import struct,sys
h=b\"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\"; h+=b' '*(63-len(h))+b'\n'
open(sys.argv[1],'wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(h))+h+b'\0'*24)" "$T/rect.npy"
expect_exit pattern_rejects_a_non_square_npy 1 "rect.npy: the pattern must be a square" \
    "$BIN" heads --model "$M" --quiet --pattern "$T/rect.npy" "a b"
