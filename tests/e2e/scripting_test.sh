#!/bin/bash
# End-to-end tests of the scripting features: selections, --no-special,
# --words, .npy output (read back with numpy), --out-dir, --stats, --strict,
# and sharding a batch with GNU parallel and with --shard I/N. Uses tests/data/small-f32.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
M=$PWD/tests/data/small-f32
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
NPY=/usr/bin/python3
. tests/e2e/lib.sh

"$BIN" --model "$M" --json "$T/full.json" --qk --precision 9 --quiet "zebra time flies" "hello world"
"$BIN" --model "$M" --json "$T/sel.json" --qk --precision 9 --quiet --layers 1 --heads 1,3 "zebra time flies" "hello world"
check selection_keeps_only_the_chosen_layers_and_heads python3 - "$T/full.json" "$T/sel.json" <<'PY'
import json, sys
f, s = (json.load(open(p)) for p in sys.argv[1:3])
assert s["layers"] == [1] and s["heads"] == [1, 3], (s["layers"], s["heads"])
assert len(s["attention"]) == 1 and len(s["attention"][0]) == 2
assert s["attention"][0][1] == f["attention"][1][3]
assert s["queries"][0][0] == f["queries"][1][1]
PY

"$BIN" --model "$M" --json "$T/ns.json" --precision 9 --quiet --no-special "zebra time flies" "hello world"
check no_special_drops_cls_sep_and_renormalizes python3 - "$T/full.json" "$T/ns.json" <<'PY'
import json, sys
f, s = (json.load(open(p)) for p in sys.argv[1:3])
keep = [i for i, t in enumerate(f["tokens"]) if t not in ("[CLS]", "[SEP]")]
assert s["tokens"] == [f["tokens"][i] for i in keep]
for l in range(2):
    for h in range(4):
        A = f["attention"][l][h]
        for a, i in enumerate(keep):
            tot = sum(A[i][j] for j in keep)
            for b, j in enumerate(keep):
                assert abs(s["attention"][l][h][a][b] - A[i][j] / tot) < 1e-6
assert s["sentence_b_start"] == s["tokens"].index("hello")
PY

"$BIN" --model "$M" --json "$T/w.json" --precision 9 --quiet --words "zebra time flies" "hello world"
check words_merge_pieces_sum_keys_mean_queries python3 - "$T/full.json" "$T/w.json" <<'PY'
import json, sys
f, w = (json.load(open(p)) for p in sys.argv[1:3])
groups = []
for i, t in enumerate(f["tokens"]):
    if t.startswith("##") and groups and f["tokens"][groups[-1][0]] not in ("[CLS]", "[SEP]"):
        groups[-1].append(i)
    else:
        groups.append([i])
assert len(groups) < len(f["tokens"]), "the input must have ## pieces"
assert w["tokens"] == ["".join(f["tokens"][i].removeprefix("##") for i in g) for g in groups], w["tokens"]
assert "zebra" in w["tokens"]
for l in range(2):
    for h in range(4):
        A = f["attention"][l][h]
        for a, g in enumerate(groups):
            for b, k in enumerate(groups):
                want = sum(sum(A[i][j] for j in k) for i in g) / len(g)
                assert abs(w["attention"][l][h][a][b] - want) < 1e-6
            assert abs(sum(w["attention"][l][h][a]) - 1) < 1e-5
PY

if $NPY -c "import numpy" 2>/dev/null; then
    "$BIN" --model "$M" --npy "$T/a.npy" --json "$T/a.json" --qk --precision 9 --quiet --heads 0,2 "time flies like an arrow"
    check npy_loads_with_numpy_and_equals_the_json $NPY - "$T" <<'PY'
import json, sys
import numpy as np
t = sys.argv[1]
d = json.load(open(f"{t}/a.json"))
a = np.load(f"{t}/a.npy")
assert a.dtype == np.float32 and a.shape == (2, 2, 7, 7), (a.dtype, a.shape)
assert np.abs(a - np.array(d["attention"], dtype=np.float32)).max() < 1e-6
q, k = np.load(f"{t}/a.queries.npy"), np.load(f"{t}/a.keys.npy")
assert q.shape == (2, 2, 7, 8) and np.abs(q - np.array(d["queries"])).max() < 1e-5
assert np.abs(k - np.array(d["keys"])).max() < 1e-5
PY
else
    echo "SKIP npy_loads_with_numpy_and_equals_the_json: /usr/bin/python3 has no numpy"
fi

printf 'time flies like an arrow\nthe cat sat\tit was tired\nhello world\n' >"$T/batch.txt"
"$BIN" --model "$M" --batch "$T/batch.txt" --out-dir "$T/out" --html --npy --quiet
check out_dir_writes_one_file_set_per_line bash -c "cd '$T/out' && ls | tr '\n' ' ' | grep -qx '000001.html 000001.json 000001.npy 000002.html 000002.json 000002.npy 000003.html 000003.json 000003.npy '"
check out_dir_files_match_single_runs bash -c "'$BIN' --model '$M' --json - --quiet 'the cat sat' 'it was tired' | cmp -s - '$T/out/000002.json' || { echo differ; exit 1; }"

printf 'good\n\nbad \xff\nlast\n' >"$T/bad.txt"
"$BIN" --model "$M" --batch "$T/bad.txt" --json "$T/bad.jsonl" 2>"$T/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "bad.txt:2: empty line; skipped" "$T/err" && grep -q "bad.txt:3: invalid UTF-8" "$T/err" \
    && grep -q "2 of 4 lines failed" "$T/err" && [ "$(wc -l <"$T/bad.jsonl")" -eq 2 ]; then
    pass batch_reports_and_counts_bad_lines
else
    fail batch_reports_and_counts_bad_lines "rc=$rc $(cat "$T/err")"
fi
"$BIN" --model "$M" --batch "$T/bad.txt" --strict --json "$T/strict.jsonl" 2>"$T/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "bad.txt:2: empty line$" "$T/err" && [ ! -e "$T/strict.jsonl" ]; then
    pass strict_stops_at_the_first_bad_line
else
    fail strict_stops_at_the_first_bad_line "rc=$rc $(cat "$T/err"); $(ls "$T")"
fi

"$BIN" --model "$M" --stats --quiet "time flies like an arrow" >"$T/table.txt"
check stats_prints_a_table bash -c "head -2 '$T/table.txt' | grep -q 'entropy' && [ \$(wc -l <'$T/table.txt') -eq 10 ]"
"$BIN" --model "$M" --batch "$T/batch.txt" --stats --json "$T/stats.json" --quiet
"$BIN" --model "$M" --batch "$T/batch.txt" --json "$T/all.jsonl" --precision 9 --quiet
check stats_are_the_mean_over_the_batch python3 - "$T/stats.json" "$T/all.jsonl" <<'PY'
import json, math, sys
st = json.load(open(sys.argv[1]))
docs = [json.loads(l) for l in open(sys.argv[2])]
assert st["inputs"] == 3 and len(st["heads"]) == 8
def per_input(d, l, h):
    A, toks = d["attention"][l][h], d["tokens"]
    n = len(A)
    ent = sum(-sum(p * math.log(p) for p in r if p > 0) for r in A) / n
    dist = sum(sum(p * abs(i - j) for j, p in enumerate(r)) for i, r in enumerate(A)) / n
    cls = sum(sum(p for j, p in enumerate(r) if toks[j] == "[CLS]") for r in A) / n
    prev = sum(A[i][i - 1] for i in range(1, n)) / (n - 1)
    return ent, dist, cls, prev
for e in st["heads"]:
    vals = [per_input(d, e["layer"], e["head"]) for d in docs]
    mean = [sum(v[k] for v in vals) / 3 for k in range(4)]
    got = [e["entropy"], e["mean_distance"], e["cls"], e["previous"]]
    assert all(abs(a - b) < 1e-4 for a, b in zip(mean, got)), (e, mean)
PY

check bad_selection_is_a_usage_error bash -c "'$BIN' --model '$M' --layers 0,7 hi 2>&1; [ \$? -eq 2 ]" 
check malformed_list_is_a_usage_error bash -c "'$BIN' --model '$M' --heads 1-x hi 2>&1; [ \$? -eq 2 ]"

if command -v parallel >/dev/null; then
    for i in $(seq 1 40); do echo "line $i time flies like an arrow"; done >"$T/corpus.txt"
    "$BIN" --model "$M" --batch "$T/corpus.txt" --quiet --layers 1 >"$T/single.jsonl"
    parallel --pipe -k -N 7 -j 2 "'$BIN' --model '$M' --batch - --quiet --layers 1" <"$T/corpus.txt" >"$T/merged.jsonl"
    check gnu_parallel_shards_merge_to_the_single_run cmp "$T/single.jsonl" "$T/merged.jsonl"
else
    echo "SKIP gnu_parallel_shards_merge_to_the_single_run: GNU parallel not installed"
fi
# --shard I/N: shard I takes the lines numbered (from 0) I modulo N, every line counted, so
# shards need no coordinator; joined (stats --merge; JSON Lines interleaved as docs/batch.md
# does; --out-dir's files named by line number) they are the single run, byte for byte
for i in $(seq 1 41); do echo "shard line $i $(printf 'time flies %.0s' $(seq 1 $((i % 9))))"; done >"$T/sc.txt"
"$BIN" --model "$M" --batch "$T/sc.txt" --quiet >"$T/sc.single.jsonl"
"$BIN" --model "$M" --batch "$T/sc.txt" --quiet --stats --json "$T/sc.single.stats"
"$BIN" heads --model "$M" --batch "$T/sc.txt" --quiet --json "$T/sc.single.heads"
"$BIN" --model "$M" --batch "$T/sc.txt" --quiet --out-dir "$T/sc.single.d" --npy
rc_all=0
for i in 0 1 2; do
    "$BIN" --model "$M" --batch "$T/sc.txt" --quiet --shard "$i/3" --json "$T/sc.$i.jsonl" || rc_all=1
    "$BIN" --model "$M" --batch "$T/sc.txt" --quiet --shard "$i/3" --stats --json "$T/sc.$i.stats" || rc_all=1
    "$BIN" heads --model "$M" --batch "$T/sc.txt" --quiet --shard "$i/3" --json "$T/sc.$i.heads" || rc_all=1
    "$BIN" --model "$M" --batch "$T/sc.txt" --quiet --shard "$i/3" --out-dir "$T/sc.d" --npy || rc_all=1
done
check shard_takes_lines_i_modulo_n bash -c "[ $rc_all -eq 0 ] && [ \$(wc -l <'$T/sc.0.jsonl') -eq 14 ] && [ \$(wc -l <'$T/sc.2.jsonl') -eq 13 ] &&
    cmp <(sed -n '2~3p' '$T/sc.single.jsonl') '$T/sc.1.jsonl'"
check shard_json_lines_interleave_to_the_single_run bash -c \
    "paste -d '\n' '$T/sc.0.jsonl' '$T/sc.1.jsonl' '$T/sc.2.jsonl' | sed '/^\$/d' | cmp - '$T/sc.single.jsonl'"
check shard_stats_merge_to_the_single_run bash -c "'$BIN' stats --merge '$T/sc.2.stats' '$T/sc.0.stats' '$T/sc.1.stats' --json - | cmp - '$T/sc.single.stats'"
check shard_heads_merge_to_the_single_run bash -c "'$BIN' stats --merge '$T/sc.'?.heads --json - | cmp - '$T/sc.single.heads'"
check shard_out_dirs_share_one_folder diff -r "$T/sc.single.d" "$T/sc.d"
# more shards than lines: the shards past the end hold no inputs and still merge exactly
rm -f "$T"/sc.many.*
for i in $(seq 0 44); do "$BIN" --model "$M" --batch "$T/sc.txt" --quiet --shard "$i/45" --stats --json "$T/sc.many.$i"; done
check shard_past_the_end_merges_to_the_single_run bash -c "'$BIN' stats --merge '$T'/sc.many.* --json - | cmp - '$T/sc.single.stats'"
# a blank line is counted (line 5 of a 6-line file): shard 0/2 takes 1, 3, 5 and reports 5
printf 'a b\nc d\ne f\ng h\n\ni j\n' >"$T/blank.txt"
"$BIN" --model "$M" --batch "$T/blank.txt" --shard 0/2 --quiet --json "$T/blank.0.jsonl" 2>"$T/blank.0.err"
rc0=$?
"$BIN" --model "$M" --batch "$T/blank.txt" --shard 1/2 --quiet --json "$T/blank.1.jsonl" 2>"$T/blank.1.err"
rc1=$?
if [ $rc0 -eq 1 ] && [ $rc1 -eq 0 ] && grep -q 'blank.txt:5: empty line; skipped' "$T/blank.0.err" &&
    grep -q '1 of 3 lines of shard 0/2 failed' "$T/blank.0.err" && [ "$(wc -l <"$T/blank.0.jsonl")" -eq 2 ] &&
    [ "$(wc -l <"$T/blank.1.jsonl")" -eq 3 ] && [ ! -s "$T/blank.1.err" ]; then
    pass shard_counts_blank_lines
else
    fail shard_counts_blank_lines "exit $rc0/$rc1: $(cat "$T/blank.0.err" "$T/blank.1.err")"
fi
# make install / uninstall into a scratch prefix; the installed binary finds its demo model
if [ -f weights/demo/model.safetensors ]; then
    make --no-print-directory install PREFIX="$T/inst" >/dev/null 2>&1
    if [ -x "$T/inst/bin/attnviz" ] && [ -f "$T/inst/share/man/man1/attnviz.1" ] \
        && (cd / && env -u ATTNVIZ_MODEL "$T/inst/bin/attnviz" --json - --quiet "time flies" | python3 -c "import json,sys; assert json.load(sys.stdin)['demo']"); then
        pass install_puts_binary_man_page_and_demo_model_under_prefix
    else
        fail install_puts_binary_man_page_and_demo_model_under_prefix "$(ls -R "$T/inst" 2>&1 | head)"
    fi
    make --no-print-directory uninstall PREFIX="$T/inst" >/dev/null 2>&1
    [ -z "$(find "$T/inst" -type f)" ] && pass uninstall_removes_what_install_put || fail uninstall_removes_what_install_put "$(find "$T/inst" -type f)"
else
    echo "SKIP install_puts_binary_man_page_and_demo_model_under_prefix: demo model not generated"
fi
exit 0
