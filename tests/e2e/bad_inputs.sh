#!/bin/bash
# The catalog of bad inputs attnviz has been tried on, with the expected exit
# code and message. Each case builds its input from tests/data/small-f32, runs
# attnviz, and checks: the exit code; exactly one stderr line, matching the
# expected message; no crash; no temporary or half-written output left.
# With SANITIZED=BINARY (make test: build-asan/attnviz, built with ASan and UBSan)
# every case also runs that build: no sanitizer report (invalid access, undefined
# behaviour, leak) and the same exit code. With VALGRIND=1 every case also runs
# under valgrind (no invalid reads, no definite leaks); slower, by hand.
#
#   case_ NAME EXIT REGEX -- ARGS...    (ARGS may use $M: a fresh copy of the model;
#                                        LINES=N case_ ... when N stderr lines are expected;
#                                        VMEM=KB case_ ... runs under ulimit -v KB;
#                                        THEN=CMD case_ ... also requires CMD to succeed in the
#                                        output folder afterwards)
# Every case runs under a 60 s timeout: a hang (exit 124) is a failure.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
ROOT=$PWD
[ -z "${SANITIZED:-}" ] || SANITIZED=$(realpath "$SANITIZED")
GPT2=$PWD/tests/data/small-gpt2
SRC=$PWD/tests/data/small-f32
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=python3
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP
n_case=0

fresh() { rm -rf "$T/m" && cp -r "$SRC" "$T/m" && rm -f "$T/m/golden.json"; M=$T/m; }

# st_edit PY-EXPR: rewrite model.safetensors' header with a Python edit of dict h
# (and optionally the data bytes d), keeping everything else.
st_edit() {
    $PY - "$M/model.safetensors" "$1" <<'PY'
import json, struct, sys
p, code = sys.argv[1], sys.argv[2]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); d = b[8 + n:]
exec(code)
hb = json.dumps(h).encode() if isinstance(h, dict) else h
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + d)
PY
}
cfg_edit() {
    $PY - "$M/config.json" "$1" <<'PY'
import json, sys
p, code = sys.argv[1], sys.argv[2]
c = json.load(open(p)); exec(code); json.dump(c, open(p, "w"))
PY
}

# The sanitized build's settings: leaks inside OpenBLAS's thread pool are not ours (as the Check suites)
SAN_ENV=(env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    LSAN_OPTIONS=suppressions=$ROOT/tests/unit/lsan.supp:print_suppressions=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)

case_() { # name exit regex -- args...
    local name=$1 want=$2 re=$3
    shift 4
    n_case=$((n_case + 1))
    rm -rf "$T/out" && mkdir -p "$T/out"
    [ -z "${BEFORE_RUN:-}" ] || eval "$BEFORE_RUN"
    (cd "$T/out" && { [ -z "${VMEM:-}" ] || ulimit -v "$VMEM"; } &&
        timeout -k 5 60 "$BIN" "$@" >"$T/stdout" 2>"$T/stderr" </dev/null)
    local rc=$?
    local lines
    lines=$(grep -c '' "$T/stderr")
    if [ $rc -ne "$want" ]; then
        echo "FAIL bad_input_$name: exit $rc, want $want: $(head -c 300 "$T/stderr")"
    elif [ "$want" -ne 0 ] && [ "$lines" -ne "${LINES:-1}" ]; then
        echo "FAIL bad_input_$name: $lines stderr lines, want ${LINES:-1}: $(head -c 300 "$T/stderr")"
    elif [ -n "$re" ] && ! grep -qE -- "$re" "$T/stderr"; then
        echo "FAIL bad_input_$name: stderr lacks /$re/: $(head -c 300 "$T/stderr")"
    elif LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$T/stderr"; then
        echo "FAIL bad_input_$name: a raw control character on stderr: $(head -c 300 "$T/stderr" | od -c | head -3)"
    elif ls -a "$T/out" "$T" | grep -q '\.tmp\.'; then
        echo "FAIL bad_input_$name: temporary file left behind"
    elif [ "$want" -ne 0 ] && [ -z "${KEEP_OUTPUT:-}" ] && [ -n "$(ls "$T/out")" ]; then
        echo "FAIL bad_input_$name: output written on failure: $(ls "$T/out")"
    elif [ -n "${THEN:-}" ] && ! (cd "$T/out" && eval "$THEN") >/dev/null 2>&1; then
        echo "FAIL bad_input_$name: the output fails: $THEN"
    else
        echo "PASS bad_input_$name"
    fi
    if [ -n "${SANITIZED:-}" ]; then
        rm -rf "$T/out" && mkdir -p "$T/out"
        [ -z "${BEFORE_RUN:-}" ] || eval "$BEFORE_RUN"
        (cd "$T/out" && "${SAN_ENV[@]}" timeout -k 5 120 "$SANITIZED" "$@" >/dev/null 2>"$T/san" </dev/null)
        rc=$?
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/san"; then
            echo "FAIL sanitizers_$name: $(grep -m1 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/san" | head -c 300)"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL sanitizers_$name: no answer within 120 s"
        elif [ $rc -ne "$want" ]; then echo "FAIL sanitizers_$name: exit $rc under ASan+UBSan, want $want: $(head -c 300 "$T/san")"
        else echo "PASS sanitizers_$name"; fi
    fi
    if [ "${VALGRIND:-0}" = 1 ]; then
        rm -rf "$T/out" && mkdir -p "$T/out"
        [ -z "${BEFORE_RUN:-}" ] || eval "$BEFORE_RUN"
        # --read-inline-info=no: most of a case's time under valgrind is reading the debug info at
        # start; errors are found the same, their stacks just name the function an inlined frame was
        # inlined into (rerun by hand without it for the full stack)
        (cd "$T/out" && timeout -k 5 300 valgrind -q --read-inline-info=no --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite --show-leak-kinds=definite "$BIN" "$@" >/dev/null 2>"$T/vg" </dev/null)
        rc=$?
        if [ $rc -eq 99 ]; then echo "FAIL valgrind_$name: $(grep -m3 '==' "$T/vg")"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL valgrind_$name: no answer within 300 s under valgrind"
        else echo "PASS valgrind_$name"; fi
    fi
}
Q=(--quiet --json out.json)

# ---- safetensors
fresh; head -c 5 "$SRC/model.safetensors" >"$M/model.safetensors"
case_ st_shorter_than_8_bytes 1 "model.safetensors: not a safetensors file, shorter than the 8-byte header length \(5 bytes" -- --model "$M" "${Q[@]}" hi
fresh; printf '\xff\xff\x00\x00\x00\x00\x00\x00{}' >"$M/model.safetensors"
case_ st_header_past_end 1 "header length 65535 runs past the end of the file" -- --model "$M" "${Q[@]}" hi
fresh; printf '\x00\x00\x00\x00\x00\x00\x00\x10{}' >"$M/model.safetensors"
case_ st_header_absurd 1 "header length [0-9]+ is absurd" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h = b"this is not json"'
case_ st_header_not_json 1 "safetensors header is not valid JSON" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h = b"[1, 2, 3]"'
case_ st_header_not_object 1 "safetensors header is not a JSON object" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["pooler.dense.bias"]["dtype"] = "Q4_K"'
case_ st_unknown_dtype 1 "tensor 'pooler.dense.bias': unknown dtype 'Q4_K'" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["pooler.dense.bias"]["data_offsets"] = [len(d) - 4, len(d) + 124]'
case_ st_offsets_out_of_range 1 "data_offsets .* run past the data section" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'o = h["pooler.dense.bias"]["data_offsets"]; h["pooler.dense.bias"]["data_offsets"] = [o[1], o[0]]'
case_ st_offsets_reversed 1 "data_offsets .* are reversed" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'o = h["encoder.layer.0.attention.self.key.bias"]["data_offsets"]; h["encoder.layer.0.attention.self.query.bias"]["data_offsets"] = o'
case_ st_offsets_overlap 1 "overlap in the data section" -- --model "$M" "${Q[@]}" hi
# issue 47: a key twice in a JSON document: cJSON reads the first, Python's json (safetensors, transformers) the last
fresh; st_edit 'e = json.dumps(h["pooler.dense.bias"]); o = h["pooler.dense.weight"]["data_offsets"]; h = (json.dumps(h)[:-1] + ", \"pooler.dense.bias\": " + json.dumps(dict(h["pooler.dense.bias"], data_offsets=[o[0], o[0] + 128])) + "}").encode()'
case_ st_tensor_listed_twice 1 "model.safetensors: key \"pooler.dense.bias\" appears twice in the top-level object" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h.update({f"x{i}": {} for i in range(1000000)})'
case_ st_million_entries 1 "model.safetensors: safetensors header lists more than 100000 entries \(1000[0-9]+\)" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["pooler.dense.bias"]["shape"] = [33]'
case_ st_offsets_mismatch_shape 1 "data_offsets span 128 bytes but F32 x shape needs 132" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["pooler.dense.bias"]["shape"] = [2**40, 2**40, 16]'
case_ st_shape_overflows 1 "element count overflows" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'del h["encoder.layer.1.output.dense.weight"]'
case_ st_missing_tensor 1 "missing tensor 'encoder.layer.1.output.dense.weight' \(expected shape \[32, 64\]\)" -- --model "$M" "${Q[@]}" hi
fresh; head -c 60000 "$SRC/model.safetensors" >"$M/model.safetensors"
case_ st_truncated_data 1 "run past the data section .*truncated" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["intermediate_size"] = 48'
case_ st_shape_differs_from_config 1 "tensor 'encoder.layer.0.intermediate.dense.weight' has shape \[64, 32\]; config.json implies \[48, 32\]" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["embeddings.LayerNorm.weight"]["dtype"] = "I32"'
case_ st_integer_weights 1 "tensor 'embeddings.LayerNorm.weight' has dtype I32; expected F32, F16 or BF16" -- --model "$M" "${Q[@]}" hi
fresh; $PY - "$M/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); o = h["encoder.layer.0.attention.self.query.weight"]["data_offsets"][0] + 8 + n
b[o:o + 4] = struct.pack("<f", float("nan")); open(p, "wb").write(b)
PY
case_ st_nan_weights 1 "attention in layer 0 is not finite" -- --model "$M" "${Q[@]}" hi
# short lines are packed into one pass (another path to the heads): each line fails, named, and nothing is written
printf 'hi there\nsecond line\n' >"$T/two.txt"
KEEP_OUTPUT=1 LINES=3 case_ st_nan_weights_packed_batch 1 "two.txt:2: .*attention in layer 0 is not finite" -- --model "$M" --quiet --batch "$T/two.txt" --json out.jsonl
fresh; rm "$M/model.safetensors"
case_ st_missing_file 1 "model.safetensors: cannot open: No such file" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/model.safetensors" && mkdir "$M/model.safetensors"
case_ st_is_a_directory 1 "model.safetensors: not a regular file" -- --model "$M" "${Q[@]}" hi

# ---- config.json
fresh; cfg_edit 'del c["num_attention_heads"]'
case_ cfg_missing_key 1 "config.json: missing key \"num_attention_heads\"" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["hidden_size"] = "32"'
case_ cfg_wrong_type 1 "config.json: \"hidden_size\" must be an integer" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["num_attention_heads"] = 5'
case_ cfg_heads_do_not_divide 1 "hidden_size 32 is not divisible by num_attention_heads 5" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["num_hidden_layers"] = 0'
case_ cfg_zero_layers 1 "\"num_hidden_layers\" = 0 is out of range" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["intermediate_size"] = 10**12'
case_ cfg_absurd_size 1 "\"intermediate_size\" = 1000000000000 is out of range" -- --model "$M" "${Q[@]}" hi
# issue 47: echoed values are cut short (err.c): a 300-digit number, a 521-byte tensor name
fresh; $PY -c 'import json, sys; t = json.dumps(json.load(open(sys.argv[1]))); open(sys.argv[1], "w").write(t.replace("\"hidden_size\": 32", "\"hidden_size\": " + "9" * 300))' "$M/config.json"
case_ cfg_300_digit_number_echoed_short 1 "config.json: \"hidden_size\" = 100000000000...\(301 digits\) is out of range \[1, [0-9]+\]$" -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["x" * 521] = dict(h.pop("pooler.dense.bias"), dtype="Q4_K")'
case_ st_521_byte_name_echoed_short 1 "model.safetensors: tensor 'x{160}': unknown dtype 'Q4_K'$" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["hidden_act"] = "cubic"'
case_ cfg_unknown_activation 1 "unknown hidden_act \"cubic\"" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["eos_token_id"] = [2, 10**9]'
case_ cfg_eos_outside_vocabulary 1 "\"eos_token_id\" holds 1e\+09, not an id below vocab_size" -- --model "$M" "${Q[@]}" hi
fresh; cfg_edit 'c["eos_token_id"] = "</s>"'
case_ cfg_eos_not_an_id 1 "\"eos_token_id\" must be an id or a list of ids" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"eos_token_id": [1,' >"$M/generation_config.json"
case_ generation_config_not_json 1 "generation_config.json: not a JSON object" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"eos_token_id": [%s]}' "$(seq -s, 1 9)" >"$M/generation_config.json"
case_ generation_config_too_many_eos 1 "generation_config.json: \"eos_token_id\" lists more than 8 ids" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"vocab_size": 1,' >"$M/config.json"
case_ cfg_not_json 1 "config.json: not valid JSON" -- --model "$M" "${Q[@]}" hi
fresh; $PY -c 'import json, sys; c = json.load(open(sys.argv[1])); t = json.dumps(c); open(sys.argv[1], "w").write(t[:-1] + ", \"hidden_act\": \"relu\"}")' "$M/config.json"
case_ cfg_key_twice 1 "config.json: key \"hidden_act\" appears twice in the top-level object \(JSON readers disagree on which one counts\)" -- --model "$M" "${Q[@]}" hi
fresh; $PY -c 'import json, sys; c = json.load(open(sys.argv[1])); t = json.dumps(c); open(sys.argv[1], "w").write(t.replace("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"gelu\\u0000 and more\""))' "$M/config.json"
case_ cfg_nul_in_a_string 1 "config.json: a string holds .u0000 \(byte [0-9]+\): a NUL character" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"eos_token_id": 1, "eos_token_id": 2}' >"$M/generation_config.json"
case_ generation_config_key_twice 1 "generation_config.json: key \"eos_token_id\" appears twice" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"do_lower_case": true, "do_lower_case": false}' >"$M/tokenizer_config.json"
case_ tokenizer_config_key_twice 1 "tokenizer_config.json: key \"do_lower_case\" appears twice" -- --model "$M" "${Q[@]}" hi
fresh; printf '{"heads": [{"layer": 0, "head": 0, "pattern": "x", "pattern": "y"}]}' >"$M/heads.json"
case_ heads_json_key_twice 1 "heads.json: key \"pattern\" appears twice in heads\[0\]" -- --model "$M" "${Q[@]}" hi
fresh; mv "$M/model.safetensors" "$M/model-00001-of-00001.safetensors"
printf '{"weight_map": {"pooler.dense.bias": "model-00001-of-00001.safetensors", "pooler.dense.bias": "other.safetensors"}}' >"$M/model.safetensors.index.json"
case_ shard_index_key_twice 1 "model.safetensors.index.json: key \"pooler.dense.bias\" appears twice in weight_map" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/config.json"
case_ cfg_missing 1 "no config.json in the model folder" -- --model "$M" "${Q[@]}" hi

# ---- vocab.txt
fresh; : >"$M/vocab.txt"
case_ vocab_empty 1 "vocab.txt" -- --model "$M" "${Q[@]}" hi
fresh; sed -i 's/^\[UNK\]$/[UNKNOWN]/' "$M/vocab.txt"
case_ vocab_missing_unk 1 "vocab.txt.*\[UNK\]" -- --model "$M" "${Q[@]}" hi
fresh; sed -i 's/^\[SEP\]$/[SEPARATOR]/' "$M/vocab.txt"
case_ vocab_missing_sep 1 "vocab.txt.*\[SEP\]" -- --model "$M" "${Q[@]}" hi
fresh; sed -i 's/^cat$/dog/' "$M/vocab.txt"
case_ vocab_duplicate_token 1 "vocab.txt: line [0-9]+: duplicate token \"dog\"" -- --model "$M" "${Q[@]}" hi
fresh; sed -i 's/$/\r/' "$M/vocab.txt"
case_ vocab_crlf_is_accepted 0 "" -- --model "$M" "${Q[@]}" "the cat sat"
fresh; { head -n 50 "$SRC/vocab.txt"; head -c 5000 /dev/zero | tr '\0' 'x'; echo; tail -n +52 "$SRC/vocab.txt"; } >"$M/vocab.txt"
case_ vocab_very_long_line 1 "vocab.txt: line 51" -- --model "$M" "${Q[@]}" hi
fresh; echo "extra" >>"$M/vocab.txt"
case_ vocab_size_differs_from_config 1 "vocab.txt: 120 tokens, but config.json says vocab_size 119" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/vocab.txt"
case_ vocab_missing 1 "no vocab.txt in the model folder" -- --model "$M" "${Q[@]}" hi

# ---- pytorch_model.bin (no model.safetensors): read by the zip + pickle reader, never unpickled
TB=$PWD/tests/data/torchbin
fresh; rm "$M/model.safetensors"; cp "$TB/evil_reduce.bin" "$M/pytorch_model.bin"
case_ torchbin_code_running_pickle 1 "pytorch_model.bin: .*refusing pickle global" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/model.safetensors"; cp "$TB/deflate.bin" "$M/pytorch_model.bin"
case_ torchbin_compressed_entry 1 "pytorch_model.bin: .*compress" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/model.safetensors"; cp "$TB/legacy.bin" "$M/pytorch_model.bin"
case_ torchbin_legacy_format 1 "pytorch_model.bin: legacy torch.save format" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/model.safetensors"; cp "$TB/f32.bin" "$M/pytorch_model.bin"
case_ torchbin_state_dict_without_the_model 1 "pytorch_model.bin: missing tensor 'embeddings.word_embeddings.weight'" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/model.safetensors"
case_ no_weights_file 1 "model.safetensors: .*No such file" -- --model "$M" "${Q[@]}" hi

# ---- text
fresh
case_ text_invalid_utf8 1 "invalid UTF-8 at byte offset 4" -- --model "$M" "${Q[@]}" $'time\xe2\x28flies'
case_ text_b_invalid_utf8 1 "sentence B: invalid UTF-8 at byte offset 0" -- --model "$M" "${Q[@]}" "fine" $'\xff'
printf 'ok line\nnul\0byte\n' >"$T/nul.txt"
# a batch adds its summary line ("1 of 2 lines failed") and keeps the good lines' output
KEEP_OUTPUT=1 LINES=2 case_ text_nul_byte_in_batch 1 "nul.txt:2: contains a NUL byte; skipped" -- --model "$M" --quiet --batch "$T/nul.txt" --json out.jsonl
head -c 10000000 /dev/zero | tr '\0' 'a' | sed 's/a\{50\}/& /g' >"$T/big.txt"
echo >>"$T/big.txt"
case_ text_10MB_line_is_truncated 0 "big.txt:1: longer than the model's 64 positions" -- --model "$M" --batch "$T/big.txt" --json out.jsonl
case_ text_only_whitespace 0 "" -- --model "$M" "${Q[@]}" $' \t\n  '
case_ text_only_control_chars 0 "" -- --model "$M" "${Q[@]}" $'\x01\x02\x7f\x1b'
case_ text_longer_than_positions 0 "dropped [0-9]+ tokens" -- --model "$M" --json out.json "$(printf 'cat %.0s' $(seq 1 100))"

# ---- options
case_ opt_unknown_flag 2 "unknown option '--colour'" -- --model "$M" --colour hi
case_ opt_missing_value 2 "option '--json' needs a value" -- --model "$M" hi --json
case_ opt_layer_out_of_range 2 "--layer 2 is out of range" -- --model "$M" "${Q[@]}" --layer 2 hi
case_ opt_head_out_of_range 2 "--head 9 is out of range" -- --model "$M" "${Q[@]}" --head 9 hi
case_ opt_bad_precision 2 "--precision needs 1 to 9" -- --model "$M" --precision 0 hi
case_ opt_bad_threads 2 "--threads needs 1 to 1024" -- --model "$M" --threads abc hi
case_ opt_measure_bogus 2 "--measure is attention, norm, alti or rollout, or all, comma-separated, not 'bogus'" -- --model "$M" "${Q[@]}" --measure bogus hi
case_ opt_measure_empty 2 "--measure is attention, norm, alti or rollout, or all, comma-separated, not ''" -- --model "$M" "${Q[@]}" --measure "" hi
case_ opt_measure_missing_value 2 "option '--measure' needs a value" -- --model "$M" hi --measure
case_ opt_measure_tokens_only 2 "--tokens-only runs no model: no --measure norm" -- --model "$M" --tokens-only --measure norm hi
case_ opt_measure_diff 2 "^attnviz: --measure goes with .*, not attnviz diff" -- diff --model "$M" "${Q[@]}" --measure norm a b
case_ opt_measure_render 2 "^attnviz: --measure goes with .*, not attnviz render" -- render x.npz --quiet --json out.json --measure norm
case_ opt_measure_merge 2 "^attnviz: --measure goes with .*, not attnviz stats" -- stats --merge --json out.json --measure norm a.json
case_ opt_measure_alti_words 2 "--measure alti mixes the raw tokens through every layer: not with --no-special or --words" -- --model "$M" "${Q[@]}" --measure alti --words hi
case_ opt_measure_rollout_serve 2 "serve computes attention and value-weighted attention \(--measure norm\): --measure rollout is the command line's" -- serve --model "$M" --measure rollout
case_ opt_measure_list_trailing_comma 2 "--measure is attention, norm, alti or rollout, or all, comma-separated, not 'norm,'" -- --model "$M" "${Q[@]}" --measure norm, hi
case_ opt_measure_list_with_stats 2 "--stats scores one measure: give --measure one name" -- --model "$M" "${Q[@]}" --stats --measure norm,alti hi
case_ opt_view_compare_without_measure 2 "--view compare draws the measures side by side: add --measure LIST" -- --model "$M" "${Q[@]}" --html p.html --view compare hi
case_ opt_explain_not_a_head 2 "--explain needs one head as LAYER.HEAD \(e.g. 5.1\), got 'x'" -- --model "$M" "${Q[@]}" --explain x hi
case_ opt_explain_two_heads 2 "--explain needs one head as LAYER.HEAD \(e.g. 5.1\), got '0.1,1.0'" -- --model "$M" "${Q[@]}" --explain 0.1,1.0 hi
case_ opt_query_without_explain 2 "--query and --key go with --explain L.H" -- --model "$M" "${Q[@]}" --query 1 hi
case_ opt_key_negative 2 "--key needs a token index >= 0, got '-1'" -- --model "$M" "${Q[@]}" --explain 0.0 --key -1 hi
case_ opt_explain_batch 2 "--explain reads one input's residual stream: not with --batch" -- --model "$M" "${Q[@]}" --explain 0.0 --batch x.txt
case_ opt_explain_encoder_decoder 2 "small-bart is an encoder-decoder \(bart\) model: .*or the residual-stream options\)" -- --model "$ROOT/tests/data/small-bart" "${Q[@]}" --explain 0.0 --decoder-text "a b" hi
case_ opt_explain_head_out_of_range 2 "--explain 0.9: the model has 3 layers \(0 to 2\) of 4 heads \(0 to 3\)" -- --model "$GPT2" "${Q[@]}" --explain 0.9 hi
case_ opt_explain_query_out_of_range 2 "--query 99: the input has [0-9]+ tokens" -- --model "$GPT2" "${Q[@]}" --explain 1.0 --query 99 hi
case_ opt_text_and_batch 2 "--batch takes its inputs from the file" -- --model "$M" --batch - hi
case_ opt_unwritable_output 1 "/nonexistent-dir/out.json: cannot write" -- --model "$M" --quiet --json /nonexistent-dir/out.json hi
case_ opt_output_is_a_directory 1 "/tmp: cannot write: is a directory" -- --model "$M" --quiet --json /tmp hi
case_ opt_model_not_a_folder 1 "^attnviz: /nonexistent: no such file or directory$" -- --model /nonexistent --quiet hi
case_ opt_max_tokens_absurd 2 "--max-tokens 999999999999 is out of range: at most 2147483647" -- --model "$M" --max-tokens 999999999999 hi
case_ opt_max_tokens_zero 2 "--max-tokens needs a count >= 1, got '0'" -- --model "$M" --max-tokens 0 hi
# --shard I/N: integers with 0 <= I < N, nothing else; slurm needs an array task's variables
case_ opt_shard_index_not_below_count 2 "--shard 4/4: the index I must be below the count N \\(0 to 3\\)" -- --model "$M" --batch - --shard 4/4
case_ opt_shard_zero_count 2 "--shard 0/0: the count N must be at least 1" -- --model "$M" --batch - --shard 0/0
case_ opt_telemetry_too_many_keys 2 "--telemetry needs a count of top keys from 0 to 64" -- --model "$M" --telemetry 65 --json - x
case_ opt_telemetry_without_json 2 "--telemetry writes to --json" -- --model "$M" --telemetry 3 x
case_ opt_telemetry_with_page 2 "instead of the matrices" -- --model "$M" --telemetry 3 --json - --html out.html x
case_ opt_shard_negative 2 "--shard needs I/N \\(0 <= I < N, e.g. 0/4\\) or slurm, got '-1/4'" -- --model "$M" --batch - --shard -1/4
case_ opt_shard_junk 2 "--shard needs I/N .* got '1/4x'" -- --model "$M" --batch - --shard 1/4x
case_ opt_shard_no_count 2 "--shard needs I/N .* got '3'" -- heads --model "$M" --batch - --shard 3
case_ opt_shard_huge 2 "--shard 1/99999999999 is out of range: at most 2147483647" -- --model "$M" --batch - --stats --shard 1/99999999999
case_ opt_shard_without_batch 2 "--shard goes with --batch FILE" -- --model "$M" --shard 0/2 hi
case_ opt_shard_slurm_outside_an_array 2 "--shard slurm: SLURM_ARRAY_TASK_ID is not set" -- --model "$M" --batch - --shard slurm
SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=5 \
    case_ opt_shard_slurm_array_with_gaps 2 "--shard slurm: the array is not one range in steps of 1 .*--array=0-2" -- --model "$M" --batch - --shard slurm
case_ opt_shard_with_merge 2 "^attnviz: --shard goes with .*, not attnviz stats" -- stats --merge x.json --shard 0/2
# the command table's parser (src/cli/): every refusal one line, exit 2, nothing written
case_ opt_mistyped_command 2 "^attnviz: 'sever' is not a command: did you mean serve\\?" -- sever --model "$M" hi
case_ opt_command_after_options 2 "^attnviz: 'heads' is a command: write it first" -- --model "$M" heads
case_ opt_unknown_near_a_known_one 2 "^attnviz: unknown option '--layres': did you mean --layers\\?" -- --model "$M" --layres 0 hi
case_ opt_option_of_another_command 2 "^attnviz: --open goes with attnviz serve, not a run" -- --model "$M" --open hi
case_ opt_given_twice 2 "^attnviz: --layers given twice \\('0', then '1'\\)" -- --model "$M" --layers 0 --layers 1 hi
case_ opt_flag_with_a_value 2 "^attnviz: --qk takes no value, got 'yes'" -- --model "$M" --qk=yes hi
case_ opt_empty_file_name 2 "^attnviz: --json needs a file name, got ''" -- --model "$M" --json "" hi
case_ opt_option_name_of_10k_letters 2 "^attnviz: unknown option '--a{60}" -- --model "$M" "--$(head -c 10000 /dev/zero | tr '\0' a)" hi
case_ opt_output_unknown_extension 2 "^attnviz: -o out.txt: the extension names what to write" -- --model "$M" -o out.txt hi
case_ opt_output_and_json_disagree 2 "^attnviz: -o a.json and --json b.json both name the JSON" -- --model "$M" -o a.json --json b.json hi
case_ opt_batch_with_a_page_file 2 "^attnviz: --batch writes JSON Lines; --html FILE holds one input's page: add --out-dir DIR" -- --model "$M" --batch - --html b.html
case_ opt_batch_with_an_array_file 2 "^attnviz: --batch writes JSON Lines; --npy FILE holds one input's arrays: add --out-dir DIR" -- --model "$M" --batch - --npy b.npy
case_ opt_out_dir_with_json 2 "^attnviz: --out-dir writes one file per input line \\(DIR/000001.json\\): not with --json" -- --model "$M" --batch - --out-dir d --json j.jsonl
case_ opt_completions_unknown_shell 2 "^attnviz: --completions is bash, zsh or fish, not 'tcsh'" -- --completions tcsh
case_ opt_man_template_missing 1 "nope.1.in" -- --man nope.1.in
case_ opt_help_unknown_command 2 "^attnviz: help takes a command's name \\(serve render diff heads stats help\\), not 'sever'" -- help sever
ln -sfn "$T/loop" "$T/loop"
case_ opt_model_symlink_loop 1 "loop: cannot resolve the model path: Too many levels of symbolic links" -- --model "$T/loop" --quiet hi

# ---- Llama-style decoders: Hugging Face folders (tokenizer.json, shards) and GGUF files
LLS=$PWD/tests/data/small-llama
lfresh() { rm -rf "$T/m" && cp -r "$LLS" "$T/m" && rm -f "$T/m/golden.json"; M=$T/m; }
tj_edit() {
    $PY - "$M/tokenizer.json" "$1" <<'PY'
import json, sys
p, code = sys.argv[1], sys.argv[2]
t = json.load(open(p)); exec(code); json.dump(t, open(p, "w"))
PY
}
lfresh; tj_edit 't["normalizer"] = {"type": "BertNormalizer"}'
case_ tokjson_unsupported_normalizer 1 "tokenizer.json: normalizer \"BertNormalizer\" is not supported" -- --model "$M" "${Q[@]}" hi
lfresh; tj_edit 't["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"}'
case_ tokjson_invalid_regex 1 "tokenizer.json: Split pre-tokenizer: invalid regex" -- --model "$M" "${Q[@]}" hi
lfresh; tj_edit 't["model"]["merges"].append("q zz")'
case_ tokjson_merge_outside_vocab 1 "tokenizer.json: merge 8 .* names a token not in the vocabulary" -- --model "$M" "${Q[@]}" hi
lfresh; tj_edit 't["model"]["vocab"]["x"] = 99'
case_ tokjson_more_ids_than_embeddings 1 "tokenizer.json: 100 tokens, but config.json says vocab_size 40" -- --model "$M" "${Q[@]}" hi
lfresh; printf '{"model": {"type": "BPE", "vocab": ' >"$M/tokenizer.json"
case_ tokjson_not_json 1 "tokenizer.json: not valid JSON" -- --model "$M" "${Q[@]}" hi
lfresh; $PY -c 'import json, sys; t = json.load(open(sys.argv[1])); s = json.dumps(t); open(sys.argv[1], "w").write(s.replace("\"vocab\": {", "\"vocab\": {\"a\": 7, ", 1))' "$M/tokenizer.json"
case_ tokjson_vocab_entry_twice 1 "tokenizer.json: key \"a\" appears twice in model.vocab" -- --model "$M" "${Q[@]}" hi
lfresh; tj_edit 't["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "h"}, "content": "h" * 100}] * 8}'
VMEM=2000000 case_ tokjson_normalizer_grows_without_bound 1 "tokenizer.json: the normalizer grows the text past 128 bytes, the limit for 2 input bytes \(32x \+ 64\)" -- --model "$M" "${Q[@]}" hi
# ---- XLM-R's Unigram tokenizer.json: the Precompiled charsmap (base64 of a u32 trie size, the
# double-array trie, the replacements) and the vocab of [piece, score]
XLS=$PWD/tests/data/small-xlmr
xfresh() { rm -rf "$T/m" && cp -r "$XLS" "$T/m" && rm -f "$T/m/golden.json"; M=$T/m; }
cm_edit() { # python over the decoded charsmap b (bytes), re-encoded into the file
    tj_edit "import base64, struct; b = base64.b64decode(t['normalizer']['precompiled_charsmap']); $1; t['normalizer']['precompiled_charsmap'] = base64.b64encode(b).decode()"
}
xfresh; tj_edit 't["normalizer"]["precompiled_charsmap"] = "@@not base64@@"'
case_ unigram_charsmap_not_base64 1 "tokenizer.json: Precompiled normalizer: precompiled_charsmap is not base64" -- --model "$M" "${Q[@]}" hi
xfresh; cm_edit 'b = b[:4 + (struct.unpack("<I", b[:4])[0] // 2)]'
case_ unigram_charsmap_truncated_trie 1 "tokenizer.json: Precompiled normalizer: a trie of [0-9]+ bytes does not fit the [0-9]+ bytes after the header" -- --model "$M" "${Q[@]}" hi
xfresh; cm_edit 'b = struct.pack("<I", 0xfffffff0) + b[4:]'
case_ unigram_charsmap_absurd_size 1 "tokenizer.json: Precompiled normalizer: a trie of 4294967280 bytes does not fit" -- --model "$M" "${Q[@]}" hi
xfresh; cm_edit 'b = b[:2]'
case_ unigram_charsmap_no_header 1 "tokenizer.json: Precompiled normalizer: precompiled_charsmap is 2 bytes, shorter than its header" -- --model "$M" "${Q[@]}" hi
xfresh; cm_edit 'b = b[:4] + struct.pack("<I", 0x7fffffff) + b[8:]'
case_ unigram_charsmap_offset_outside 1 "tokenizer.json: Precompiled normalizer: the charsmap's trie points outside itself" -- --model "$M" "${Q[@]}" hi
xfresh; cm_edit 'n = struct.unpack("<I", b[:4])[0]; b = b[:4 + n] + b"\xff\xfe" + b[4 + n:]'
case_ unigram_charsmap_replacements_not_utf8 1 "tokenizer.json: Precompiled normalizer: the replacements are not UTF-8" -- --model "$M" "${Q[@]}" hi
xfresh; tj_edit 't["model"]["vocab"][10][1] = "NaN"'
case_ unigram_score_not_a_number 1 "tokenizer.json: Unigram vocab entry 10 is not \[piece, score\]" -- --model "$M" "${Q[@]}" hi
xfresh; tj_edit 't["model"]["vocab"][10][1] = 12345.5'; sed -i 's/12345.5/1e999/' "$M/tokenizer.json"
case_ unigram_score_infinite 1 "tokenizer.json: Unigram piece 10 .* has a score that is not a finite number" -- --model "$M" "${Q[@]}" hi
xfresh; tj_edit 't["model"]["unk_id"] = 1000000'
case_ unigram_unk_id_outside 1 "tokenizer.json: the Unigram unk_id is not a piece's id \(0 to [0-9]+\)" -- --model "$M" "${Q[@]}" hi
xfresh; tj_edit 't["model"]["vocab"] = []'
case_ unigram_empty_vocab 1 "tokenizer.json: the Unigram vocab has 0 pieces" -- --model "$M" "${Q[@]}" hi
xfresh; tj_edit 't["model"]["vocab"] = {"a": 0}'
case_ unigram_vocab_not_a_list 1 "tokenizer.json: Unigram model needs a vocab list of \[piece, score\]" -- --model "$M" "${Q[@]}" hi
# issue 47: a piece of 100,000 bytes and a line of 120,000 'a's: Viterbi walked down the piece from
# every position (quadratic: minutes); the pieces ending at each position come from one pass now
xfresh; tj_edit 't["model"]["vocab"][50] = ["a" * 100000 + "b", -20.0]'
$PY -c 'print("a" * 120000)' >"$T/long_a.txt"
case_ unigram_piece_of_100k_bytes_tokenizes_in_time 0 "" -- --model "$M" --quiet --batch "$T/long_a.txt" --json out.jsonl
lfresh; cfg_edit 'c["num_key_value_heads"] = 3'
case_ decoder_heads_not_a_multiple_of_kv_heads 1 "num_attention_heads 4 is not a multiple of 3 key/value heads" -- --model "$M" "${Q[@]}" hi
# ---- the logit lens, attribution and ablation (issue 32): refusals name the option, exit 2
case_ lens_target_not_in_the_vocabulary 2 "--target 'qqqqqqqq' is not a token of the vocabulary \(the tokenizer reads it as [0-9]+ tokens\)" -- --model "$LLS" "${Q[@]}" --predict 1 --target qqqqqqqq hi
case_ lens_ablate_head_not_in_the_model 2 "--ablate 99.0: the model has 2 layers \(0 to 1\) of 4 heads \(0 to 3\)" -- --model "$LLS" "${Q[@]}" --ablate 99.0 hi
case_ lens_ablate_head_index_not_in_the_model 2 "--ablate 1.4: the model has 2 layers" -- --model "$LLS" "${Q[@]}" --ablate 0.0,1.4 hi
case_ lens_ablate_syntax 2 "--ablate needs all or heads as LAYER.HEAD" -- --model "$LLS" "${Q[@]}" --ablate 1- hi
case_ lens_position_past_the_input 2 "--position 500: the input has [0-9]+ tokens" -- --model "$LLS" "${Q[@]}" --ablate all --position 500 hi
case_ lens_encoder_logit_lens 2 "--logit-lens reads a causal model's residual stream; .* is a masked \(bert\) model" -- --model "$SRC" "${Q[@]}" --logit-lens 3 hi
case_ lens_attribution_without_predict 2 "--attribution and --target go with --predict K or --generate N" -- --model "$LLS" "${Q[@]}" --attribution hi
case_ lens_runs 0 "" -- --model "$LLS" "${Q[@]}" --predict 2 --logit-lens 3 --attribution --ablate all --npy out.npy hi
# ---- information-flow routes (--flow): one line, exit 2
case_ flow_threshold_zero 2 "--flow needs a threshold in \(0, 1\), got '0'" -- --model "$LLS" "${Q[@]}" --flow 0 hi
case_ flow_threshold_one 2 "--flow needs a threshold in \(0, 1\), got '1'" -- --model "$LLS" "${Q[@]}" --flow=1 hi
case_ flow_threshold_negative 2 "--flow needs a threshold in \(0, 1\), got '-0.2'" -- --model "$LLS" "${Q[@]}" --flow -0.2 hi
case_ flow_threshold_not_a_number 2 "--flow needs a threshold in \(0, 1\), got 'lots'" -- --model "$LLS" "${Q[@]}" --flow=lots hi
case_ flow_encoder 2 "--flow reads a causal pre-norm model's residual stream; .* is a masked \(bert\) model" -- --model "$SRC" "${Q[@]}" --flow hi
# small-gemma2 has no tokenizer (the suites feed it ids): a copy with small-llama's, as telemetry_test.sh does
mkdir -p "$T/gemma2" && ln -sf "$PWD"/tests/data/small-gemma2/* "$PWD/tests/data/small-llama/tokenizer.json" "$T/gemma2/"
case_ flow_sandwich_norm 2 "--flow: .* normalizes attention's output before the residual \(a sandwich norm\)" -- --model "$T/gemma2" "${Q[@]}" --flow hi
case_ flow_with_heads 2 "--flow weighs every head of the layers it traces: not with --heads" -- --model "$LLS" "${Q[@]}" --flow --heads 0 hi
case_ flow_layers_not_a_range 2 "--flow traces down through consecutive layers" -- --model "$LLS" "${Q[@]}" --flow --layers 0,2 hi
case_ flow_position_past_the_input 2 "--position 500: the input has [0-9]+ tokens" -- --model "$LLS" "${Q[@]}" --flow --position 500 hi
case_ flow_with_batch 2 "--flow read one input's own tokens: not with --batch" -- --model "$LLS" "${Q[@]}" --flow --batch in.txt
case_ flow_runs 0 "" -- --model "$LLS" "${Q[@]}" --flow 0.1 --layers 1 --position 1 --npy out.npy hi
lfresh; cfg_edit 'c["rope_scaling"] = {"rope_type": "proportional", "factor": 4.0}'
case_ decoder_unsupported_rope 1 "rope type \"proportional\" is not supported \(default, linear, dynamic, llama3, longrope, yarn\)" -- --model "$M" "${Q[@]}" hi
lfresh; cfg_edit 'c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}'
case_ decoder_longrope_factor_count 1 "short_factor/long_factor have 1 entries; rotary dims 8 need 4" -- --model "$M" "${Q[@]}" hi
lfresh; cfg_edit 'c["rope_scaling"] = {"type": "longrope", "short_factor": [1.0, 1.0, 1.0, 1.0], "long_factor": [2.0]}'
case_ decoder_longrope_factor_lengths_differ 1 "short_factor and long_factor differ in length \(4, 1\)" -- --model "$M" "${Q[@]}" hi
lfresh; cfg_edit 'c["partial_rotary_factor"] = 0.1'
case_ decoder_partial_rotary_too_small 1 "rotary dims 0 \(partial_rotary_factor\) must be even and within head_dim 8" -- --model "$M" "${Q[@]}" hi
lfresh; mv "$M/model.safetensors" "$M/model-00001-of-00002.safetensors"
printf '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}' >"$M/model.safetensors.index.json"
case_ sharded_missing_shard 1 "model-00002-of-00002.safetensors: cannot open" -- --model "$M" "${Q[@]}" hi
lfresh; rm "$M/model.safetensors"; printf '{"weight_map": {"a": "../../etc/passwd"}}' >"$M/model.safetensors.index.json"
case_ sharded_index_path_outside_folder 1 "weight_map\[\"a\"\] must be a file name in the same folder" -- --model "$M" "${Q[@]}" hi

# GGUF files: a tiny llama written here byte by byte, then broken one way at a time
mkgguf() { # OUT PY-EDIT: the file's kv dict, tensors dict and raw bytes may be edited
    $PY - "$1" "$2" <<'PY'
import struct, sys
out, code = sys.argv[1], sys.argv[2]
H, FF, V, L = 8, 16, 256, 1
alpha = [chr(b) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174 else None for b in range(256)]
n = 0
for b in range(256):
    if alpha[b] is None: alpha[b] = chr(256 + n); n += 1
kv = {"general.architecture": ("s", "llama"), "llama.block_count": ("u", L), "llama.context_length": ("u", 64),
      "llama.embedding_length": ("u", H), "llama.feed_forward_length": ("u", FF), "llama.attention.head_count": ("u", 2),
      "llama.attention.head_count_kv": ("u", 1), "llama.attention.layer_norm_rms_epsilon": ("f", 1e-5),
      "tokenizer.ggml.model": ("s", "gpt2"), "tokenizer.ggml.tokens": ("as", alpha), "tokenizer.ggml.merges": ("as", [])}
tensors = {"token_embd.weight": [H, V], "output_norm.weight": [H]}
for l in range(L):
    for nm, d in (("attn_norm", [H]), ("attn_q", [H, H]), ("attn_k", [H, 4]), ("attn_v", [H, 4]), ("attn_output", [H, H]),
                  ("ffn_norm", [H]), ("ffn_gate", [H, FF]), ("ffn_up", [H, FF]), ("ffn_down", [FF, H])):
        tensors[f"blk.{l}.{nm}.weight"] = d
cut = None
share = None  # (a, b): tensor b's data offset is a's (overlapping tensors)
exec(code)
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
body = b""
for k, (t, v) in kv.items():
    body += s(k)
    if t == "s": body += struct.pack("<I", 8) + s(v)
    elif t == "u": body += struct.pack("<IQ", 10, v)
    elif t == "f": body += struct.pack("<If", 6, v)
    elif t == "as": body += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(x) for x in v)
    elif t == "b": body += struct.pack("<IB", 7, 1 if v else 0)
    elif t == "af": body += struct.pack("<IIQ", 9, 6, len(v)) + b"".join(struct.pack("<f", x) for x in v)
    elif t == "ai": body += struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)
info, data, offs = b"", b"", {}
for name, dims in tensors.items():
    size = 4
    for d in dims: size *= d
    offs[name] = offs[share[0]] if share and name == share[1] else len(data)
    info += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", 0, offs[name])
    data += b"\x00\x00\x80\x3f" * (size // 4)
    data += b"\x00" * (-len(data) % 32)
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + body + info
blob = head + b"\x00" * (-len(head) % 32) + data
open(out, "wb").write(blob[:cut] if cut else blob)
PY
}
G=$T/g.gguf
mkgguf "$G" ''
case_ gguf_tiny_llama_runs 0 "" -- --model "$G" --quiet --json out.json hi
mkgguf "$G" 'cut = 300'
case_ gguf_truncated 1 "g.gguf: " -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv["general.architecture"] = ("s", "bert")'
case_ gguf_unsupported_architecture 1 "GGUF architecture \"bert\" is not supported" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'del tensors["blk.0.attn_q.weight"]'
case_ gguf_missing_tensor 1 "missing tensor 'blk.0.attn_q.weight' \(transformers' layers.0.self_attn.q_proj.weight" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'tensors["blk.0.attn_k.weight"] = [H, 8]'
case_ gguf_wrong_shape 1 "tensor 'blk.0.attn_k.weight' has shape \[8, 8\]; its metadata implies \[4, 8\]" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv["llama.block_count"] = ("u", 100000)'
case_ gguf_absurd_hyperparameters 1 "a hyper-parameter in the metadata is out of range" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv["tokenizer.ggml.model"] = ("s", "t5")'
case_ gguf_unsupported_tokenizer 1 "tokenizer model \"t5\" is not supported yet" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv["tokenizer.ggml.model"] = ("s", "llama"); del kv["tokenizer.ggml.merges"]'
case_ gguf_llama_tokenizer_without_scores 1 "a llama tokenizer without merges needs one tokenizer.ggml.scores entry per token" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv["tokenizer.ggml.eos_token_id"] = ("u", 99999)'
case_ gguf_eos_outside_vocabulary 1 "tokenizer.ggml.eos_token_id 99999 is outside the vocabulary" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" ''
case_ gguf_generate_absurd_count 2 "--generate 9999999999 is out of range: at most 1048576" -- --model "$G" --generate 9999999999 hi
case_ gguf_generate_runs_to_the_positions 0 "" -- --model "$G" --quiet --generate 100000 --predict 100 --json out.json hi
mkgguf "$G" 'kv["general.architecture"] = ("s", "gemma2")'
case_ gguf_gemma2_needs_its_own_keys 1 "gemma2.block_count" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv = {(k.replace("llama.", "gemma2.") if k.startswith("llama.") else k): v for k, v in kv.items()}; kv["general.architecture"] = ("s", "gemma2"); kv["gemma2.attn_logit_softcapping"] = ("f", -3.0)'
case_ gguf_gemma2_negative_softcap 1 "gemma2 soft-capping or sliding window out of range" -- --model "$G" "${Q[@]}" hi
# the memory a run may count on (ATTNVIZ_MEMORY): a size, and weights past it refused before any pass
mkgguf "$G" ''
export ATTNVIZ_MEMORY=lots
case_ memory_not_a_size 2 "ATTNVIZ_MEMORY=lots: expected a size like 16G or 500M" -- --model "$G" "${Q[@]}" hi
export ATTNVIZ_MEMORY=2k
case_ weights_past_the_memory 1 "g.gguf: the weights take .* \\(mapped from the file\\), .* but 2 kB is available \\(ATTNVIZ_MEMORY\\): .*a smaller quantization" -- --model "$G" "${Q[@]}" hi
unset ATTNVIZ_MEMORY
# Llama 3.1+'s rope scaling as llama.cpp writes it: one F32 factor per rotary pair (rope_freqs.weight)
mkgguf "$G" 'tensors["rope_freqs.weight"] = [2]'
case_ gguf_llama_rope_freqs_runs 0 "" -- --model "$G" --quiet --json out.json hi
mkgguf "$G" 'tensors["rope_freqs.weight"] = [3]'
case_ gguf_rope_freqs_not_half_the_rotary_dims 1 "rope_freqs has 3 entries; rotary dims 4 need 2" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'tensors["rope_freqs.weight"] = [1, 2]'
case_ gguf_rope_freqs_not_a_vector 1 "rope_freqs.weight must be one F32 vector of at most 512 factors" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'tensors["rope_freqs.weight"] = [2]; kv["llama.rope.scaling.type"] = ("s", "linear"); kv["llama.rope.scaling.factor"] = ("f", 2.0)'
case_ gguf_rope_freqs_and_a_scaling_type 1 "rope_freqs.weight with a rope scaling type as well" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'kv = {(k.replace("llama.", "qwen2.") if k.startswith("llama.") else k): v for k, v in kv.items()}; kv["general.architecture"] = ("s", "qwen2"); tensors["rope_freqs.weight"] = [2]'
case_ gguf_rope_freqs_outside_llama_files 1 "per-frequency rope factors \(rope_freqs\) in a qwen2 file are not supported" -- --model "$G" "${Q[@]}" hi
# Mixtral in a llama file: expert counts, the router and each projection's experts stacked (ffn_*_exps)
MOE='kv["llama.expert_count"] = ("u", 4); kv["llama.expert_used_count"] = ("u", 2)
for nm in ("ffn_gate", "ffn_up", "ffn_down"): del tensors[f"blk.0.{nm}.weight"]
tensors["blk.0.ffn_gate_inp.weight"] = [H, 4]; tensors["blk.0.ffn_gate_exps.weight"] = [H, FF, 4]
tensors["blk.0.ffn_up_exps.weight"] = [H, FF, 4]; tensors["blk.0.ffn_down_exps.weight"] = [FF, H, 4]'
mkgguf "$G" "$MOE"
case_ gguf_tiny_mixtral_runs 0 "" -- --model "$G" --quiet --json out.json hi
mkgguf "$G" "$MOE"'; kv["llama.expert_used_count"] = ("u", 5)'
case_ gguf_moe_top_k_over_experts 1 "expert_count 4 / expert_used_count 5 out of range" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$MOE"'; del tensors["blk.0.ffn_down_exps.weight"]'
case_ gguf_moe_missing_experts 1 "missing tensor 'blk.0.ffn_down_exps.weight' \(transformers' layers.0.block_sparse_moe.experts.w2.weight; expected shape \[4, 8, 16\]\)" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$MOE"'; tensors["blk.0.ffn_up_exps.weight"] = [H, FF, 3]'
case_ gguf_moe_wrong_expert_stack 1 "tensor 'blk.0.ffn_up_exps.weight' has shape \[3, 16, 8\]; its metadata implies \[4, 16, 8\]" -- --model "$G" "${Q[@]}" hi
# Phi-3: q/k/v fused in attn_qkv, gate/up in ffn_up, LongRoPE factors as two tensors
PHI3='kv = {(k.replace("llama.", "phi3.") if k.startswith("llama.") else k): v for k, v in kv.items()}; kv["general.architecture"] = ("s", "phi3")
for nm in ("attn_q", "attn_k", "attn_v", "ffn_gate"): del tensors[f"blk.0.{nm}.weight"]
tensors["blk.0.attn_qkv.weight"] = [H, H + 8]; tensors["blk.0.ffn_up.weight"] = [H, 2 * FF]
tensors["rope_factors_short.weight"] = [2]; tensors["rope_factors_long.weight"] = [2]'
mkgguf "$G" "$PHI3"
case_ gguf_tiny_phi3_runs 0 "" -- --model "$G" --quiet --json out.json hi
mkgguf "$G" "$PHI3"'; tensors["rope_factors_long.weight"] = [3]'
case_ gguf_phi3_rope_factors_differ 1 "rope_factors_short/long must be two F32 vectors of one length" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$PHI3"'; tensors["rope_factors_long.weight"] = [3]; tensors["rope_factors_short.weight"] = [3]'
case_ gguf_phi3_rope_factors_not_half_the_rotary_dims 1 "short_factor/long_factor have 3 entries; rotary dims 4 need 2" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$PHI3"'; tensors["blk.0.ffn_up.weight"] = [H, FF]'
case_ gguf_phi3_unfused_ffn_up 1 "tensor 'blk.0.ffn_up.weight' has shape \[16, 8\]; its metadata implies \[32, 8\]" -- --model "$G" "${Q[@]}" hi
# gpt-oss: sinks, biases, post_attention_norm before the MLP, biased router and experts, YaRN
GPTOSS='kv = {(k.replace("llama.", "gpt-oss.") if k.startswith("llama.") else k): v for k, v in kv.items()}; kv["general.architecture"] = ("s", "gpt-oss")
kv["gpt-oss.expert_count"] = ("u", 4); kv["gpt-oss.expert_used_count"] = ("u", 2); kv["gpt-oss.attention.sliding_window"] = ("u", 4)
kv["gpt-oss.rope.scaling.type"] = ("s", "yarn"); kv["gpt-oss.rope.scaling.factor"] = ("f", 8.0); kv["gpt-oss.rope.scaling.original_context_length"] = ("u", 16)
for nm in ("ffn_gate", "ffn_up", "ffn_down", "ffn_norm"): del tensors[f"blk.0.{nm}.weight"]
tensors["blk.0.post_attention_norm.weight"] = [H]
for nm, d in (("attn_q", [H]), ("attn_k", [4]), ("attn_v", [4]), ("attn_output", [H]), ("ffn_gate_inp", [4])): tensors[f"blk.0.{nm}.bias"] = d
tensors["blk.0.ffn_gate_inp.weight"] = [H, 4]
for nm, d in (("ffn_gate_exps", [H, FF, 4]), ("ffn_up_exps", [H, FF, 4]), ("ffn_down_exps", [FF, H, 4])):
    tensors[f"blk.0.{nm}.weight"] = d; tensors[f"blk.0.{nm}.bias"] = [d[1], 4]
tensors["blk.0.attn_sinks.weight"] = [2]'
mkgguf "$G" "$GPTOSS"
case_ gguf_tiny_gptoss_runs 0 "" -- --model "$G" --quiet --json out.json hi
mkgguf "$G" "$GPTOSS"'; del tensors["blk.0.attn_sinks.weight"]'
case_ gguf_gptoss_missing_sinks 1 "missing tensor 'blk.0.attn_sinks.weight' \(transformers' layers.0.self_attn.sinks; expected shape \[2\]\)" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$GPTOSS"'; tensors["blk.0.ffn_up_exps.bias"] = [FF, 3]'
case_ gguf_gptoss_expert_bias_shape 1 "tensor 'blk.0.ffn_up_exps.bias' has shape \[3, 16\]; its metadata implies \[4, 16\]" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$GPTOSS"'; del kv["gpt-oss.rope.scaling.original_context_length"]'
case_ gguf_gptoss_yarn_without_context 1 "gpt-oss.rope.scaling.original_context_length" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" "$GPTOSS"'; kv["gpt-oss.rope.scaling.factor"] = ("f", -2.0)'
case_ gguf_gptoss_yarn_factor_out_of_range 1 "a YaRN parameter in the metadata is out of range \(factor -2" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'share = ("blk.0.attn_q.weight", "blk.0.attn_output.weight")'
case_ gguf_tensors_overlap 1 "g.gguf: tensors 'blk.0.attn_(q|output).weight' and 'blk.0.attn_(q|output).weight' overlap in the data section" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'del kv["llama.embedding_length"]'
case_ gguf_missing_hyperparameter 1 "llama.embedding_length" -- --model "$G" "${Q[@]}" hi
# issue 47: rope.dimension_count 0 (config.json refuses 0 rotary dimensions too), and two tokens spelled alike
# (llama.cpp aborts on such a vocabulary: GGML_ASSERT(id_to_token.size() == token_to_id.size()))
mkgguf "$G" 'kv["llama.rope.dimension_count"] = ("u", 0)'
case_ gguf_rope_dimension_count_zero 1 "g.gguf: llama.rope.dimension_count is 0: rotary embeddings need at least 2 dimensions" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" 'alpha[200] = alpha[100]; kv["tokenizer.ggml.tokens"] = ("as", alpha)'
case_ gguf_two_tokens_spelled_alike 1 "g.gguf: tokens 100 and 200 are both spelled '.+' \(llama.cpp refuses such a vocabulary too\)" -- --model "$G" "${Q[@]}" hi
# issue 47: an input of no tokens gets one clear line on every model kind. A byte-level vocabulary
# without the bytes of the text's characters (and no unknown token) drops them all. An empty TEXT is
# refused by the command line before any model is read (issue 45: a variable left unset is a mistake,
# whatever the tokenizer would make of it); the run's own handling of "" (GPT-2: no tokens, refused;
# an encoder's [CLS] [SEP] and a decoder's start token: runs, as transformers makes them) is the
# library's, checked in tests/test_libapi.c.
for m in small-gpt2 small-f32 small-llama; do
    case_ "empty_text_$m" 2 "^attnviz: empty input: the first text is '' \(nothing to run\)$" -- --model "$PWD/tests/data/$m" "${Q[@]}" ""
done
mkgguf "$G" 'alpha[128:] = ["x%d" % i for i in range(128)]; kv["tokenizer.ggml.tokens"] = ("as", alpha)'
case_ gguf_vocabulary_lacks_the_texts_characters 1 "the input has no tokens this model knows: its tokenizer dropped every character" -- --model "$G" "${Q[@]}" "日本"
# issue 47: a SentencePiece-style tokenizer (scores, no merges) with one token of 400,000 bytes:
# recovering the merges tried every split of it and hashed both halves (quadratic: minutes)
SPM='kv["tokenizer.ggml.model"] = ("s", "llama"); del kv["tokenizer.ggml.merges"]; kv["tokenizer.ggml.bos_token_id"] = ("u", 1)
kv["tokenizer.ggml.scores"] = ("af", [-float(i) for i in range(V)])'
mkgguf "$G" "$SPM"'; alpha[255] = "a" * 400000; kv["tokenizer.ggml.tokens"] = ("as", alpha)'
case_ gguf_spm_token_of_400k_bytes_loads_in_time 0 "" -- --model "$G" --quiet --json out.json aaa
# ---- attnviz render: a .npz of attention arrays and its tokens
mknpz() { # OUT PY-EDIT: edit the entry bytes b (a valid attention.npy) or the archive bytes z
    $PY - "$1" "$2" <<'PY'
import io, json, struct, sys, zipfile, zlib
out, code = sys.argv[1], sys.argv[2]
n = 3
vals = [1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.2, 0.3, 0.5]
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 3, 3), }"
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
b = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<9f", *vals)
method = zipfile.ZIP_STORED
exec(code.split("||")[0])
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", method) as zf:
    zf.writestr("attention.npy", b)
z = buf.getvalue()
if "||" in code:
    exec(code.split("||")[1])
open(out, "wb").write(z)
json.dump({"tokens": ["a", "b", "c"], "causal": True}, open(out[:-4] + ".json", "w"))
PY
}
N=$T/r.npz
mknpz "$N" ''
case_ render_good_npz 0 "" -- render "$N" --quiet --json out.json
mknpz "$N" ''; printf '{"tokens": ["a", "b", "c"], "causal": true, "causal": false}' >"$T/r.json"
case_ render_meta_key_twice 1 "r.json: key \"causal\" appears twice in the top-level object" -- render "$N" --quiet --json out.json
mknpz "$N" '||z = z[:len(z) // 2]'
case_ render_npz_truncated 1 "r.npz: .*(zip|truncated)" -- render "$N" --quiet --json out.json
mknpz "$N" 'method = zipfile.ZIP_DEFLATED||i = z.index(b"PK\x01\x02"); z = z[:i - 8] + bytes(x ^ 0x55 for x in z[i - 8:i - 4]) + z[i - 4:]'
case_ render_npz_corrupt_deflate 1 "zip entry 'attention.npy' does not inflate to its 164 bytes" -- render "$N" --quiet --json out.json
mknpz "$N" 'b = b[:8] + struct.pack("<H", 60000) + b[10:]'
case_ render_npy_header_past_end 1 "'attention': .npy header runs past the array" -- render "$N" --quiet --json out.json
mknpz "$N" 'b = b[:-8]'
case_ render_npy_short_data 1 "'attention' holds 28 bytes, short of its shape's 9 elements" -- render "$N" --quiet --json out.json
mknpz "$N" 'b = b.replace(b"(1, 1, 3, 3)", b"(1, 1, 3, 9999999999999)")'
case_ render_npy_absurd_shape 1 "'attention'" -- render "$N" --quiet --json out.json
# issue 47: a 1 MB .npz whose entry inflates to 1 GiB (a zero-filled 16,384^2 array): its shape is
# checked against the tokens and --max-capture before anything is inflated (it was inflated first)
$PY - "$T/bomb.npz" <<'PY'
import struct, sys, zlib
n = 16384
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, %d, %d), }" % (n, n)
hdr = (hdr + " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n").encode()
head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr
def seg(data):  # whole deflate blocks, referring to nothing before them: they may be repeated
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)
chunk = 16 << 20
body = seg(head) + seg(bytes(chunk)) * (n * n * 4 // chunk) + b"\x03\x00"  # then a final empty block
usize, name = len(head) + n * n * 4, b"attention.npy"
local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 8, 0, 0, 0, len(body), usize, len(name), 0) + name
cd = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 8, 0, 0, 0, len(body), usize, len(name), 0, 0, 0, 0, 0, 0) + name
end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 1, 1, len(cd), len(local) + len(body), 0)
open(sys.argv[1], "wb").write(local + body + cd + end)
PY
printf '{"tokens": ["a", "b", "c"]}' >"$T/bomb.json"
VMEM=1000000 case_ render_npz_inflating_to_1gib_other_shape 1 "bomb.npz: 'attention' is 16384 x 16384 per head; the tokens say 3 x 3" -- render "$T/bomb.npz" --quiet --json out.json
$PY -c 'import json, sys; json.dump({"tokens": ["t%d" % i for i in range(16384)]}, open(sys.argv[1], "w"))' "$T/bomb.json"
VMEM=1000000 case_ render_npz_inflating_past_max_capture 1 "bomb.npz: 'attention' needs 2147 MB \(1074 MB inflated, 1074 MB as floats\).* above the 100 MB allowed \(--max-capture\)" -- render "$T/bomb.npz" --max-capture 100M --quiet --json out.json
mknpz "$N" 'b = b + bytes(64)'
case_ render_npy_longer_than_its_shape 1 "'attention' holds 100 bytes, more than its shape's 9 elements need" -- render "$N" --quiet --json out.json
# ---- attnviz diff: two texts on one model, or one text on two models
fresh; M2=$T/m2; rm -rf "$M2" && cp -r "$M" "$M2"
$PY - "$M2/vocab.txt" <<'PY'
import sys
p = sys.argv[1]; v = open(p).read().split("\n"); i, j = v.index("cat"), v.index("dog"); v[i], v[j] = v[j], v[i]
open(p, "w").write("\n".join(v))
PY
case_ diff_tokenizers_differ 1 "tokenize the text differently \(5 and 5 tokens; token 2 is 'cat' id 107 and 'cat' id 111\): --model A --model B needs one tokenizer" -- diff --model "$M" --model "$M2" "${Q[@]}" "the cat sat"
rm -rf "$M2" && cp -r "$M" "$M2" && M=$M2 cfg_edit 'c["num_attention_heads"] = 2'
case_ diff_shapes_differ 1 "has 2 layers x 4 heads but .* has 2 x 2: --model A --model B compares models of one shape" -- diff --model "$M" --model "$M2" "${Q[@]}" "the cat sat"
case_ diff_one_text 2 "diff takes TEXT_A TEXT_B \(one model\), or --model A --model B TEXT" -- diff --model "$M" "${Q[@]}" "the cat sat"
case_ diff_two_models_two_texts 2 "diff --model A --model B takes one TEXT" -- diff --model "$M" --model "$M" "${Q[@]}" "the cat" "a dog"
case_ diff_three_models 2 "diff compares at most two models" -- diff --model "$M" --model "$M" --model "$M" "${Q[@]}" "the cat"
case_ diff_with_batch 2 "^attnviz: --batch goes with .*, not attnviz diff" -- diff --model "$M" --batch - "${Q[@]}"
case_ diff_layer_out_of_range 2 "--layer 7 is out of range: the model has 2 layers \(0-1\)" -- diff --model "$M" --layer 7 "${Q[@]}" "the cat" "a dog"
case_ diff_heads_out_of_range 2 "--heads 4 is out of range: the model has 4 heads \(0-3\)" -- diff --model "$M" --heads 2-4 "${Q[@]}" "the cat" "a dog"
case_ diff_top_zero 2 "--top needs a count >= 1, got '0'" -- diff --model "$M" --top 0 "${Q[@]}" "the cat" "a dog"
case_ top_without_diff 2 "--top goes with attnviz diff" -- --model "$M" --top 3 "${Q[@]}" "the cat"
case_ view_diff_without_diff 2 "--view is head, model, neuron, matrix, lens, attribution, flow, compare or image, not 'diff'" -- --model "$M" --view diff "${Q[@]}" "the cat"
# ---- ModernBERT (tests/data/small-modernbert): its config keys and fused tensors
MBS=$PWD/tests/data/small-modernbert
mbfresh() { rm -rf "$T/m" && cp -r "$MBS" "$T/m" && rm -f "$T/m/golden.json"; M=$T/m; }
mbfresh; cfg_edit 'c["local_attention"] = -4'
case_ modernbert_local_attention_negative 1 "\"local_attention\" = -4 is out of range \\[2, 16777216\\]" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["local_attention"] = 10**12'
case_ modernbert_local_attention_absurd 1 "local_attention" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["global_attn_every_n_layers"] = 0; del c["layer_types"]'
case_ modernbert_global_every_zero 1 "global_attn_every_n_layers" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["layer_types"] = ["full_attention", "chunked_attention", "full_attention"]'
case_ modernbert_unknown_layer_type 1 "layer_types\[1\] must be \"full_attention\" or \"sliding_attention\"" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["rope_parameters"]["full_attention"] = {"rope_type": "yarn", "factor": 4.0}'
case_ modernbert_rope_scaling_refused 1 "rope_parameters.full_attention: only the default rope type is supported for modernbert" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["norm_bias"] = "yes"'
case_ modernbert_norm_bias_not_bool 1 "\"norm_bias\" must be true or false" -- --model "$M" "${Q[@]}" hi
mbfresh; cfg_edit 'c["intermediate_size"] = 20'
case_ modernbert_fused_wi_shape 1 "layers.0.mlp.Wi.weight' has shape \[48, 16\]" -- --model "$M" "${Q[@]}" hi
# ---- mixtures of experts (tests/data/small-mixtral, small-qwen3moe): routing keys and expert tensors
moefresh() { rm -rf "$T/m" && cp -r "$PWD/tests/data/small-$1" "$T/m" && rm -f "$T/m/golden.json"; M=$T/m; }
moefresh mixtral; cfg_edit 'c["num_local_experts"] = 10**6'
case_ moe_absurd_num_experts 1 "\"num_local_experts\" = 1000000 is out of range \[1, 1024\]" -- --model "$M" "${Q[@]}" hi
moefresh mixtral; cfg_edit 'c["num_experts_per_tok"] = 5'
case_ moe_top_k_over_experts 1 "config.json: num_experts_per_tok 5 exceeds the 4 experts" -- --model "$M" "${Q[@]}" hi
moefresh mixtral; st_edit 'del h["model.layers.1.block_sparse_moe.experts.3.w2.weight"]'
case_ moe_missing_expert_tensor 1 "model.safetensors: missing tensor 'layers.1.block_sparse_moe.experts.3.w2.weight' \(expected shape \[16, 24\]\)" -- --model "$M" "${Q[@]}" hi
moefresh mixtral; st_edit 'del h["model.layers.0.block_sparse_moe.gate.weight"]'
case_ moe_missing_router 1 "missing tensor 'layers.0.block_sparse_moe.gate.weight' \(expected shape \[4, 16\]\)" -- --model "$M" "${Q[@]}" hi
moefresh qwen3moe; cfg_edit 'c["mlp_only_layers"] = [7]'
case_ moe_dense_layer_not_in_model 1 "mlp_only_layers holds 7, not a layer of 2" -- --model "$M" "${Q[@]}" hi
moefresh qwen3moe; cfg_edit 'c["mlp_only_layers"] = []'
case_ moe_dense_layer_saved_as_dense 1 "missing tensor 'layers.1.mlp.gate.weight'" -- --model "$M" "${Q[@]}" hi
# ---- gpt-oss (tests/data/small-gptoss): sinks, stacked (in, out) experts, YaRN
moefresh gptoss; st_edit 'del h["model.layers.1.self_attn.sinks"]'
case_ gptoss_missing_sinks 1 "missing tensor 'layers.1.self_attn.sinks' \(expected shape \[4\]\)" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; st_edit 'del h["model.layers.0.mlp.experts.gate_up_proj"]'
case_ gptoss_missing_gate_up 1 "missing tensor 'layers.0.mlp.experts.gate_up_proj' \(expected shape \[4, 16, 48\], or its MXFP4 layers.0.mlp.experts.gate_up_proj_blocks and _scales\)" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; st_edit 'del h["model.layers.0.mlp.experts.down_proj_bias"]'
case_ gptoss_missing_expert_bias 1 "missing tensor 'layers.0.mlp.experts.down_proj_bias' \(expected shape \[4, 16\]\)" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; cfg_edit 'c["intermediate_size"] = 20'
case_ gptoss_gate_up_shape 1 "tensor 'model.layers.0.mlp.experts.gate_up_proj' has shape \[4, 16, 48\]; config.json implies \[4, 16, 40\]" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; st_edit 'del h["model.layers.0.mlp.router.bias"]'
case_ gptoss_missing_router_bias 1 "missing tensor 'layers.0.mlp.router.bias'" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; st_edit 'h["model.layers.0.mlp.experts.gate_up_proj_blocks"] = h.pop("model.layers.0.mlp.experts.gate_up_proj")'
case_ gptoss_mxfp4_rows_not_blocks 1 "'model.layers.0.mlp.experts.gate_up_proj_blocks' is MXFP4, whose blocks need rows of a multiple of 32 values \(config.json implies 16\)" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; cfg_edit 'c["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0}'
case_ gptoss_yarn_without_factor 1 "rope type \"yarn\" needs a \"factor\"" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; cfg_edit 'c["rope_parameters"]["beta_fast"] = "fast"'
case_ gptoss_yarn_beta_not_number 1 "\"beta_fast\"" -- --model "$M" "${Q[@]}" hi
moefresh gptoss; cfg_edit 'c["swiglu_limit"] = 0'
case_ gptoss_swiglu_limit_out_of_range 1 "\"swiglu_limit\"" -- --model "$M" "${Q[@]}" hi

# ---- encoder-decoder models (tests/data/small-bart, small-marian, small-t5): options, config keys, tensors
s2fresh() { rm -rf "$T/m" && cp -r "$PWD/tests/data/small-$1" "$T/m"; M=$T/m; }
fresh
case_ s2s_decoder_text_on_encoder 2 "--decoder-text goes with an encoder-decoder model \(bart, marian, t5 or mt5\); .* is a masked \(bert\) model" -- --model "$M" "${Q[@]}" hi --decoder-text there
s2fresh bart
case_ s2s_no_decoder_input 2 "is an encoder-decoder \(bart\) model: give the decoder's text \(--decoder-text TEXT\) or let it decode \(--generate N\)" -- --model "$M" "${Q[@]}" hi
case_ s2s_decoder_text_and_generate 2 "--decoder-text gives the decoder its tokens; --generate makes them: one or the other" -- --model "$M" "${Q[@]}" hi --decoder-text there --generate 3
case_ s2s_decoder_text_pair 2 "--decoder-text goes with one source TEXT: not with a second text" -- --model "$M" "${Q[@]}" hi there --decoder-text x
case_ s2s_decoder_text_with_heads 2 "^attnviz: --decoder-text goes with a run \\(attnviz TEXT\\) or attnviz diff, not attnviz heads" -- heads --model "$M" "${Q[@]}" a b --decoder-text x
case_ s2s_heads_selection_refused 2 "encoder-decoder \(bart\) model: .*--heads or the residual-stream options" -- --model "$M" "${Q[@]}" hi --decoder-text x --heads 0
case_ s2s_qk_refused 2 "encoder-decoder \(bart\) model: one source text with --decoder-text or --generate" -- --model "$M" "${Q[@]}" hi --decoder-text x --qk
case_ s2s_heads_needs_target 2 "attnviz heads on an encoder-decoder \(bart\) model scores SOURCE TARGET \(the decoder's text second\), or --batch lines SOURCE<TAB>TARGET" -- heads --model "$M" "${Q[@]}" hi
case_ s2s_diff_needs_decoder_text 2 "diff: .* is an encoder-decoder \(bart\) model: give the decoder's text \(--decoder-text TEXT\) for both sides" -- diff --model "$M" "${Q[@]}" a b
case_ s2s_capture_over_limit 1 "capturing 40 source and 5 decoder tokens needs 29.2 kB, above the 1.0 kB allowed \(--max-capture\)" -- --model "$M" "${Q[@]}" --max-capture 1K "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e" --decoder-text "c d"
s2fresh bart; st_edit 'h = {k: v for k, v in h.items() if not k.startswith("model.decoder.layers.1.")}'
case_ s2s_missing_decoder_layer 1 "model.safetensors: missing tensor 'decoder.layers.1.self_attn.q_proj.weight' \(expected shape \[16, 16\]\)" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh bart; st_edit 'del h["model.decoder.layers.0.encoder_attn.k_proj.weight"]'
case_ s2s_missing_cross_attention 1 "missing tensor 'decoder.layers.0.encoder_attn.k_proj.weight'" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh bart; cfg_edit 'c["decoder_attention_heads"] = 4'
case_ s2s_bart_heads_differ 1 "decoder_attention_heads 4 differs from encoder_attention_heads 2 \(not supported\)" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh bart; cfg_edit 'c["normalize_before"] = True'
case_ s2s_mbart_prenorm_refused 1 "normalize_before true \(mBART's pre-norm layers\) is not supported" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh bart; cfg_edit 'c["decoder_start_token_id"] = 10**6'
case_ s2s_start_token_out_of_range 1 "\"decoder_start_token_id\" = 1000000 is out of range \[0, 399\]" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh bart; cfg_edit 'c["decoder_layers"] = 3'
case_ s2s_layers_differ 1 "missing tensor 'decoder.layers.2.self_attn.q_proj.weight'" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh marian; cfg_edit 'c["share_encoder_decoder_embeddings"] = False'
case_ s2s_marian_separate_vocab 1 "share_encoder_decoder_embeddings false \(a separate decoder vocabulary\) is not supported" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh marian; rm "$M/tokenizer.json"
case_ s2s_marian_no_tokenizer_json 1 "tokenizer.json" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh marian; rm "$M/tokenizer.json"; printf 'spm' >"$M/source.spm"
case_ s2s_marian_spm_only 1 "no tokenizer.json in the model folder \(a marian model needs it\); source.spm is a SentencePiece model, which attnviz does not read" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh t5; cfg_edit 'c["feed_forward_proj"] = "gated-swiglu"'
case_ s2s_t5_unknown_ff_proj 1 "feed_forward_proj \"gated-swiglu\".*unknown act \"swiglu\"" -- --model "$M" "${Q[@]}" hi --decoder-text x
# issue 47: the capture budget of what decoding could make is checked before decoding (T5 decoded for seconds first)
s2fresh t5
case_ s2s_generate_past_max_capture 1 "--generate 6000: capturing [0-9]+ source and up to [0-9]+ decoder tokens needs .*above the 10.0 MB allowed \(--max-capture\)" -- --model "$M" "${Q[@]}" --generate 6000 --max-capture 10M hi
case_ s2s_generate_the_most_tokens_refused_at_once 1 "--generate 1048576: capturing [0-9]+ source and up to [0-9]+ decoder tokens needs [0-9.]+ GB, above" -- --model "$M" "${Q[@]}" --generate 1048576 --max-capture 8G hi
case_ decoder_generate_past_max_capture 1 "capturing [0-9]+ tokens x 2 layers x 4 heads needs .*above the 1 kB allowed \(--max-capture\)" -- --model "$LLS" "${Q[@]}" --generate 6000 --max-capture 1K hi
s2fresh t5; cfg_edit 'c["relative_attention_num_buckets"] = 2'
case_ s2s_t5_too_few_buckets 1 "relative_attention_num_buckets 2 and relative_attention_max_distance 20 leave no logarithmic buckets" -- --model "$M" "${Q[@]}" hi --decoder-text x
s2fresh t5; st_edit 'del h["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]'
case_ s2s_t5_missing_relative_bias 1 "missing tensor 'decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight' \(expected shape \[8, 2\]\)" -- --model "$M" "${Q[@]}" hi --decoder-text x

# ---- attnviz heads --pattern FILE: a .npy or JSON n x n template
fresh
mkpat() { # OUT PY-EDIT: edit the bytes b of a valid 4 x 4 float32 .npy (or write JSON to j)
    $PY - "$1" "$2" <<'PY'
import json, struct, sys
out, code = sys.argv[1], sys.argv[2]
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }"
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
b = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<16f", *([0.0] * 16))
j = None
exec(code)
open(out, "wb").write(json.dumps(j).encode() if j is not None else b)
PY
}
P=$T/p.npy
HQ=(heads --model "$M" --quiet --json out.json)
mkpat "$P" ''
case_ heads_pattern_good_npy 0 "" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b[:-8]'
case_ heads_pattern_npy_short_data 1 "p.npy: .npy data is shorter than its shape" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b"\x93NUMPX" + b[6:]'
case_ heads_pattern_npy_bad_magic 1 "p.npy: not a .npy file" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b.replace(b"(4, 4)", b"(4, 4, 1)")'
case_ heads_pattern_npy_3d 1 "p.npy: the pattern must be a (square )?2-D array" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b.replace(b"(4, 4)", b"(9000, 9000)")'
case_ heads_pattern_npy_too_large 1 "p.npy: a 9000 x 9000 pattern \(1 to 8192 rows\)" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b.replace(b"False", b"True ")'
case_ heads_pattern_npy_fortran 1 "p.npy: Fortran-order .npy is not supported" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b.replace(b"<f4", b"<c8")'
case_ heads_pattern_npy_complex 1 "p.npy: .npy dtype must be" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'b = b[:-4] + struct.pack("<f", float("nan"))'
case_ heads_pattern_npy_nan 1 "p.npy: element 15 is not a finite number" -- "${HQ[@]}" --pattern "$P" "a b"
P=$T/p.json
mkpat "$P" 'j = [[0, 1], [1, "x"]]'
case_ heads_pattern_json_not_a_number 1 "p.json: row 1, column 1 is not a number" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'j = {"pattern": [[1]]}'
case_ heads_pattern_json_not_rows 1 "p.json: a pattern is an array of rows" -- "${HQ[@]}" --pattern "$P" "a b"
mkpat "$P" 'j = []'
case_ heads_pattern_json_empty 1 "p.json: a 0 x 0 pattern" -- "${HQ[@]}" --pattern "$P" "a b"
printf '[[1, 0], [0' >"$P"
case_ heads_pattern_json_truncated 1 "p.json: not valid JSON" -- "${HQ[@]}" --pattern "$P" "a b"
case_ heads_pattern_missing_file 1 "nope.npy: cannot open" -- "${HQ[@]}" --pattern "$T/nope.npy" "a b"
case_ heads_pattern_bad_rule 1 "'offset 1.5': a rule is 'offset K'" -- "${HQ[@]}" --pattern "offset 1.5" "a b"
case_ heads_induction_too_long 1 "--induction-len 1000: 2002 tokens do not fit the model's" -- "${HQ[@]}" --induction-len 1000 "a b"
# ---- attnviz stats --merge FILES: --stats --json / heads --json outputs
S=$T/ok.stats.json H=$T/ok.heads.json
"$BIN" --model "$M" --quiet --stats --json "$S" "a b c"
"$BIN" heads --model "$M" --quiet --json "$H" "a b c"
mkjson() { # SRC OUT PY-EDIT on dict d (or raw text t)
    $PY - "$1" "$2" "$3" <<'PY'
import json, sys
src, out, code = sys.argv[1:4]
t = open(src).read(); d = json.loads(t)
exec(code)
open(out, "w").write(t if "t =" in code else json.dumps(d))
PY
}
X=$T/x.json X2=$T/x2.json
MQ=(stats --merge --json out.json)
# the shards of a two-line corpus (issue 47: files carry what they covered; a merge takes every shard once)
printf 'a b c\nd e f\n' >"$T/ab.txt"
S0=$T/s0.stats.json S1=$T/s1.stats.json H0=$T/h0.heads.json H1=$T/h1.heads.json
for i in 0 1; do
    "$BIN" --model "$M" --quiet --batch "$T/ab.txt" --shard $i/2 --stats --json "$T/s$i.stats.json"
    "$BIN" heads --model "$M" --quiet --batch "$T/ab.txt" --shard $i/2 --json "$T/h$i.heads.json"
done
case_ merge_good 0 "" -- "${MQ[@]}" "$H0" "$H1"
case_ merge_stats_shards_good 0 "" -- "${MQ[@]}" "$S1" "$S0"
case_ merge_same_shard_twice 1 "s0.stats.json: shard 0/2 is already in .*s0.stats.json: each shard once" -- "${MQ[@]}" "$S0" "$S0" "$S1"
cp "$S0" "$X"
case_ merge_renamed_copy_of_a_shard 1 "x.json: shard 0/2 is already in .*s0.stats.json: each shard once" -- "${MQ[@]}" "$S0" "$X" "$S1"
case_ merge_missing_shard 1 "missing shard 1 of 2 of .*s0.stats.json's corpus \(1 missing\): a merge adds every shard once" -- "${MQ[@]}" "$S0"
printf 'a b c\nother line\n' >"$T/ab2.txt"
"$BIN" --model "$M" --quiet --batch "$T/ab2.txt" --shard 1/2 --stats --json "$X"
case_ merge_shards_of_other_corpora 1 "s0.stats.json's shard 0/2 and .*x.json's shard 1/2 are shards of different corpora" -- "${MQ[@]}" "$S0" "$X"
"$BIN" --model "$M" --quiet --batch "$T/ab.txt" --shard 1/2 --max-tokens 3 --stats --json "$X" 2>/dev/null # (its truncation warning: expected)
case_ merge_shards_with_other_options 1 "x.json: another model or other options than .*s0.stats.json \(their setups differ" -- "${MQ[@]}" "$S0" "$X"
mkjson "$S0" "$X" 'del d["covered"], d["setup"], d["shard"]'
case_ merge_file_without_shards 1 "x.json: no \"covered\": written by an attnviz that did not record which lines it covered" -- "${MQ[@]}" "$X" "$S1"
"$BIN" --model "$M" --quiet --batch "$T/ab.txt" --stats --json "$X"
case_ merge_whole_corpus_and_one_of_its_shards 1 "x.json covers the whole corpus of .*s1.stats.json's shard 1/2: each line once" -- "${MQ[@]}" "$X" "$S1"
mkjson "$S" "$X" 't = t[: len(t) // 2]'
case_ merge_truncated 1 "x.json: not valid JSON" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'del d["kind"]'
case_ merge_no_kind 1 "x.json: no \"kind\"" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 't = t.replace("\"inputs\":", "\"inputs\": 999, \"inputs\":", 1)'
case_ merge_key_twice 1 "x.json: key \"inputs\" appears twice in the top-level object" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'del d["inputs"]'
case_ merge_missing_inputs 1 "x.json: missing \"inputs\"" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'd["layers"] = 3'
case_ merge_other_shape 1 "x.json: 3 layers x 4 heads, but .*ok.stats.json has 2 x 4" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'd["model"] = "other"'
case_ merge_other_model 1 "x.json: model 'other', but .*ok.stats.json has" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'd["heads"][0]["sum"][0] = 12.5'
case_ merge_sum_not_a_string 1 "x.json: layer 0 head 0: \"sum\" entries are whole numbers as strings" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'd["heads"][0]["sum"][0] = "9223372036854775808"'
case_ merge_sum_overflows_int64 1 "x.json: layer 0 head 0: \"sum\" entries" -- "${MQ[@]}" "$X"
mkjson "$S0" "$X" 'd["heads"][0]["sum"][0] = "9223372036854775807"'
mkjson "$S1" "$X2" 'd["heads"][0]["sum"][0] = "9223372036854775807"'
case_ merge_sums_overflow_when_added 1 "x2.json: entropy: the sum overflows" -- "${MQ[@]}" "$X" "$X2"
mkjson "$S" "$X" 'd["measure"] = "norm"'
case_ merge_attention_with_norm 1 "ok.stats.json scores attention, .*x.json value-weighted attention \(--measure norm\): they do not add up" -- "${MQ[@]}" "$S" "$X"
mkjson "$S" "$X" 'd["measure"] = "weights"'
case_ merge_measure_unknown 1 "x.json: \"measure\" is \"norm\", \"alti\" or \"rollout\" \(with one head per layer\), or absent" -- "${MQ[@]}" "$X"
mkjson "$S" "$X" 'd["measure"] = "alti"'
case_ merge_alti_with_many_heads 1 "x.json: \"measure\" is \"norm\", \"alti\" or \"rollout\" \(with one head per layer\)" -- "${MQ[@]}" "$X"
mkjson "$S" "$X" 'd["heads"][1] = d["heads"][0]'
case_ merge_head_twice 1 "x.json: layer 0 head 0 appears twice" -- "${MQ[@]}" "$X"
mkjson "$S" "$X" 'd["heads"][0]["layer"] = 7'
case_ merge_layer_out_of_range 1 "x.json: \"layer\" must be a whole number from 0 to 1" -- "${MQ[@]}" "$X"
mkjson "$S" "$X" 'd["fixed_point_bits"] = 16'
case_ merge_other_fixed_point 1 "x.json: \"fixed_point_bits\" must be a whole number from 32 to 32" -- "${MQ[@]}" "$X"
mkjson "$S" "$X" 'd["scores"][0] = "bogus"'
case_ merge_unknown_score 1 "x.json: \"scores\" entry 0 is not a stats score name" -- "${MQ[@]}" "$X"
mkjson "$H" "$X" 'd["scores"] = d["scores"][::-1]; [h.update(sum=h["sum"][::-1], count=h["count"][::-1]) for h in d["heads"]]'
case_ merge_scores_out_of_order 1 "x.json: \"scores\" are not in attnviz's order" -- "${MQ[@]}" "$X"
mkjson "$H" "$X" 'del d["options"]'
case_ merge_heads_without_options 1 "x.json: missing \"options\"" -- "${MQ[@]}" "$H" "$X"
mkjson "$H" "$X" 'd["options"]["exclude_bos"] = True'
case_ merge_other_options 1 "x.json: other options" -- "${MQ[@]}" "$H" "$X"
mkjson "$H" "$X" 'd["induction"][0]["ids"][0] = d["induction"][0]["ids"][0][:3]'
case_ merge_bad_induction_ids 1 "x.json: \"induction\" sequence 0 is not 20 repeated ids" -- "${MQ[@]}" "$X"
mkjson "$H" "$X" 'd["induction"].append(dict(d["induction"][0], seed="9"))'
case_ merge_induction_overlaps_in_part 1 "x.json: some of its induction sequences are in earlier files" -- "${MQ[@]}" "$H" "$X"
mkjson "$H1" "$X" 'i = d["scores"].index("induction"); d["heads"][0]["sum"][i] = "1"'
case_ merge_same_sequences_other_sums 1 "x.json: its induction sums differ from .*h0.heads.json's" -- "${MQ[@]}" "$H0" "$X"
case_ merge_stats_with_heads 1 "ok.heads.json: a \"heads\" file, but .*ok.stats.json is \"stats\"" -- "${MQ[@]}" "$S" "$H"
case_ merge_a_directory 1 "$T: " -- "${MQ[@]}" "$T"
# ---- strings from model files never reach the terminal raw (ESC/BEL/C1 are escaped)
fresh; cfg_edit 'c["model_type"] = "\u001b]0;pwned\u0007"'
case_ escape_model_type 1 'model type "\\x1b\]0;pwned\\x07" is not supported' -- --model "$M" "${Q[@]}" hi
fresh; printf '\033[2Jcat\n\033[2Jcat\n' >>"$M/vocab.txt"
case_ escape_vocabulary_entry 1 'duplicate token "\\x1b\[2Jcat"' -- --model "$M" "${Q[@]}" hi
fresh; st_edit 'h["\u009b31mevil\u0007"] = dict(h["pooler.dense.bias"], dtype="Q9")'
case_ escape_tensor_name 1 "tensor '\\\\u009b31mevil\\\\x07': unknown dtype 'Q9'" -- --model "$M" "${Q[@]}" hi
lfresh; tj_edit 't["model"]["merges"].append("\u001b[5m zz")'
case_ escape_merge 1 'merge 8 .*\\x1b\[5m' -- --model "$M" "${Q[@]}" hi
mkgguf "$G" 'kv["general.architecture"] = ("s", "\x1b]2;title\x07")'
case_ escape_gguf_architecture 1 'GGUF architecture "\\x1b\]2;title\\x07" is not supported' -- --model "$G" "${Q[@]}" hi
fresh
# ---- files that are not regular files: a FIFO would block a plain open() forever
fresh; rm "$M/model.safetensors" && mkfifo "$M/model.safetensors"
case_ fifo_as_weights 1 "model.safetensors: not a regular file \(a FIFO\)" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/config.json" && mkfifo "$M/config.json"
case_ fifo_as_config 1 "config.json: not a regular file \(a FIFO\)" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/config.json" && mkdir "$M/config.json"
case_ directory_as_config 1 "config.json: not a regular file \(a directory\)" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/vocab.txt" && mkfifo "$M/vocab.txt"
case_ fifo_as_vocabulary 1 "vocab.txt: not a regular file \(a FIFO\)" -- --model "$M" "${Q[@]}" hi
fresh; rm "$M/vocab.txt" && ln -s /dev/zero "$M/vocab.txt"
case_ char_device_as_vocabulary 1 "vocab.txt: not a regular file \(a character device\)" -- --model "$M" "${Q[@]}" hi
lfresh; rm "$M/tokenizer.json" && mkfifo "$M/tokenizer.json"
case_ fifo_as_tokenizer_json 1 "tokenizer.json: not a regular file \(a FIFO\)" -- --model "$M" "${Q[@]}" hi
rm -f "$T/f.gguf" && mkfifo "$T/f.gguf"
case_ fifo_as_gguf 1 "f.gguf: not a regular file \(a FIFO\)" -- --model "$T/f.gguf" "${Q[@]}" hi
rm -f "$T/f.npz" && mkfifo "$T/f.npz"
case_ fifo_as_render_input 1 "f.npz: not a regular file \(a FIFO\)" -- render "$T/f.npz" --quiet --json out.json
ln -sf /dev/null "$T/null.npz"
case_ char_device_as_render_input 1 "null.npz: not a regular file \(a character device\)" -- render "$T/null.npz" --quiet --json out.json
fresh; rm -f "$T/f.npy" && mkfifo "$T/f.npy"
case_ fifo_as_pattern 1 "f.npy: not a regular file \(a FIFO\)" -- heads --model "$M" --quiet --json out.json --pattern "$T/f.npy" "a b"
case_ fifo_as_merge_shard 1 "f.npy: not a regular file \(a FIFO\)" -- stats --merge --json out.json "$S" "$T/f.npy"
# --batch reads streams: a FIFO with a writer works; a directory does not
rm -f "$T/b.fifo" && mkfifo "$T/b.fifo"
# a writer started before each run of the case (VALGRIND=1 runs it twice)
BEFORE_RUN="(printf 'the cat sat\n' >'$T/b.fifo') &" case_ batch_from_a_fifo 0 "" -- --model "$M" --quiet --batch "$T/b.fifo" --json out.jsonl
wait
case_ batch_a_directory 1 "$T: cannot read: Is a directory" -- --model "$M" --quiet --batch "$T"
# ---- a run's outputs are committed together (issue 47): the page's folder is missing, so the JSON
# (written first, in the case's folder) must not be left either
fresh
case_ outputs_second_in_a_missing_folder 1 "nodir/p.html: cannot write: No such file or directory" -- --model "$M" --quiet --json out.json --npy out.npy --html nodir/p.html hi
# ---- --batch lines are bounded while they are read (/dev/zero: one endless line)
VMEM=1000000 case_ batch_endless_line 1 "/dev/zero:1: line longer than 16777216 bytes \(the --batch line limit\)" -- --model "$M" --quiet --batch /dev/zero
printf 'fine\n\tonly sentence B\n' >"$T/emptya.txt"
KEEP_OUTPUT=1 LINES=2 case_ batch_empty_sentence_a 1 "emptya.txt:2: sentence A is empty" -- --model "$M" --quiet --batch "$T/emptya.txt" --json out.jsonl
# ---- images (--image: libpng, libjpeg-turbo, preprocessor_config.json; tests/data/small-vit)
V=$PWD/tests/data/small-vit
PIC=$PWD/tests/data/vision-picture.png
vfresh() { rm -rf "$T/v" && cp -r "$V" "$T/v"; VM=$T/v; }
# a vision encoder's capture past --max-capture: its patches are not a text, so no long page or shorter input
case_ vit_capture_past_the_budget 1 "capturing 17 tokens x 2 layers x 4 heads needs 18 kB, above the 5 kB allowed \(--max-capture\): what fits: attnviz serve, select fewer with --layers/--heads \(2 of the 8 heads fit\), --max-capture 1G" -- --model "$V" --quiet --html out.html --image "$PIC" --max-capture 5k
# mkpng FILE W H [claim TYPE LEN | ztxt MB]: an RGB PNG whose header says W x H (its pixels when small, else
# one row), with a chunk claiming LEN bytes past the end, or a zTXt of MB megabytes of zeros
mkpng() {
    $PY - "$@" <<'PY'
import struct, sys, zlib
out, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[4:]
def chunk(t, d, length=None):
    n = len(d) if length is None else length
    return struct.pack(">I", n) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
b = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
if extra and extra[0] == "claim":     # a chunk whose length runs far past the end of the file
    b += chunk(extra[1].encode(), b"x" * 16, int(extra[2]))
elif extra and extra[0] == "ztxt":    # a zTXt chunk of N MB of zeros, compressed (a metadata bomb)
    b += chunk(b"zTXt", b"bomb\x00\x00" + zlib.compress(b"\x00" * (int(extra[1]) << 20), 9))
if not (extra and extra[0] == "claim"):
    rows = h if w * h <= 4096 else 1  # a whole small picture; a header-only bomb's first row
    b += chunk(b"IDAT", zlib.compress((b"\x00" + b"\x80" * (3 * min(w, 64))) * rows)) + chunk(b"IEND", b"")
open(out, "wb").write(b)
PY
}
mkpng "$T/bomb.png" 100000 100000
VMEM=400000 case_ image_png_decompression_bomb 1 "bomb.png: not a readable PNG: .*|bomb.png: the PNG is 100000 x 100000 pixels, above the 64 megapixels attnviz decodes" -- --model "$V" --quiet --json out.json --image "$T/bomb.png"
mkpng "$T/big.png" 60000 60000
VMEM=400000 case_ image_png_above_the_pixel_cap 1 "big.png: the PNG is 60000 x 60000 pixels, above the 64 megapixels attnviz decodes \(a decompression bomb\?\): scale it down first" -- --model "$V" --quiet --json out.json --image "$T/big.png"
# a JPEG whose frame header says 65000 x 65000 (SOF0), with nothing after it
$PY -c 'import sys; open(sys.argv[1], "wb").write(bytes.fromhex("ffd8ffc0000b08fde8fde80301220011"))' "$T/bomb.jpg"
VMEM=400000 case_ image_jpeg_decompression_bomb 1 "bomb.jpg: the JPEG is 65000 x 65000 pixels, above the 64 megapixels attnviz decodes|bomb.jpg: not a readable JPEG" -- --model "$V" --quiet --json out.json --image "$T/bomb.jpg"
head -c 60 "$PIC" >"$T/cut.png"
case_ image_png_truncated 1 "cut.png: not a readable PNG: " -- --model "$V" --quiet --json out.json --image "$T/cut.png"
head -c 40000 examples/images/coffee.jpg >"$T/cut.jpg" # cut in its scan data
case_ image_jpeg_truncated 1 "cut.jpg: truncated or corrupt JPEG data \(Premature end of JPEG file\)" -- --model "$V" --quiet --json out.json --image "$T/cut.jpg"
$PY -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[40:60] = bytes(20); open(sys.argv[2], "wb").write(d)' "$PIC" "$T/corrupt.png"
case_ image_png_corrupt 1 "corrupt.png: not a readable PNG: " -- --model "$V" --quiet --json out.json --image "$T/corrupt.png"
mkpng "$T/claim.png" 8 8 claim tEXt 2147483000
case_ image_png_chunk_length_past_the_end 1 "claim.png: not a readable PNG: " -- --model "$V" --quiet --json out.json --image "$T/claim.png"
# 64 MB of metadata compressed into 64 KB: libpng stops a chunk at 8 MB and skips it; the picture decodes
mkpng "$T/meta.png" 8 8 ztxt 64
VMEM=400000 case_ image_png_huge_metadata_chunk 0 "" -- --model "$V" --quiet --json out.json --image "$T/meta.png"
printf 'GIF89a\001\000\001\000' >"$T/a.gif"
case_ image_not_png_or_jpeg 1 "a.gif: not a PNG or JPEG image \(attnviz reads those two\)" -- --model "$V" --quiet --json out.json --image "$T/a.gif"
: >"$T/empty.png"
case_ image_empty_file 1 "empty.png: the image file is empty" -- --model "$V" --quiet --json out.json --image "$T/empty.png"
case_ image_missing_file 1 "nope.png: cannot open: No such file" -- --model "$V" --quiet --json out.json --image "$T/nope.png"
case_ image_a_directory 1 "$T: not a regular file \(a directory\)" -- --model "$V" --quiet --json out.json --image "$T"
rm -f "$T/img.fifo" && mkfifo "$T/img.fifo"
case_ image_a_fifo 1 "img.fifo: not a regular file \(a FIFO\)" -- --model "$V" --quiet --json out.json --image "$T/img.fifo"
case_ image_with_a_text_model 2 "--image goes with a vision encoder \(vit, deit, dinov2, clip, siglip\) or a vision-language model \(llava, gemma3, idefics3\); .* is a bert model" -- --model "$SRC" --quiet --json out.json --image "$PIC" hi
case_ vision_model_without_image 2 "small-vit is a vit model: give it an image \(--image FILE, PNG or JPEG\)" -- --model "$V" --quiet --json out.json "a text"
case_ vision_model_with_text 2 "small-vit is a vit model: it reads the image only, not a text" -- --model "$V" --quiet --json out.json --image "$PIC" "a text"
case_ image_with_no_special 2 "--image keeps every token" -- --model "$V" --quiet --json out.json --image "$PIC" --no-special
case_ image_with_predict 2 "--image runs one picture: not with --batch, --out-dir, --predict" -- --model "$V" --quiet --json out.json --image "$PIC" --predict 3
case_ image_with_explain 2 "--image runs one picture: .*the residual-stream options \(--explain among them\)" -- --model "$V" --quiet --json out.json --image "$PIC" --explain 0.0
case_ image_with_measure_named_twice 2 "--measure names rollout twice in 'rollout,alti,rollout'" -- --model "$V" --quiet --json out.json --image "$PIC" --measure rollout,alti,rollout
vfresh; rm "$VM/preprocessor_config.json"
case_ image_no_preprocessor_config 1 "no preprocessor_config.json: the model folder does not say how to prepare an image" -- --model "$VM" --quiet --json out.json --image "$PIC"
# the tables below: one case a line, NAME|EXIT|STDERR REGEX|what is written or edited (read from fd 3:
# nothing a case runs can eat the table)
# ViT's preprocessor_config.json as written
while IFS='|' read -r -u 3 name want re cfg; do
    vfresh; printf '%s' "$cfg" >"$VM/preprocessor_config.json"
    case_ "$name" "$want" "$re" -- --model "$VM" --quiet --json out.json --image "$PIC"
done 3<<'TABLE'
image_preprocessor_duplicate_key|1|preprocessor_config.json: "size" is given twice|{"size": {"height": 32, "width": 32}, "size": {"height": 64, "width": 64}}
image_preprocessed_size_is_not_the_models|1|the preprocessed image is 48 x 48, but the model's positions are for 32 x 32|{"size": {"height": 48, "width": 48}}
image_preprocessor_bad_crop|1|preprocessor_config.json: "crop_size" must have height and width, or shortest_edge|{"size": {"shortest_edge": 32}, "crop_size": {"height": 32}, "do_center_crop": true}
image_preprocessor_unknown_filter|1|preprocessor_config.json: "resample" must be an integer in \[0, 5\]|{"resample": 9}
image_preprocessor_two_means|1|preprocessor_config.json: "image_mean" must be a number or a list of 3|{"image_mean": [0.5, 0.5]}
TABLE
cfg_edit_v() { M=$VM cfg_edit "$1"; }
# ViT's config.json edited (Python on dict c)
while IFS='|' read -r -u 3 name want re edit; do
    vfresh; cfg_edit_v "$edit"
    case_ "$name" "$want" "$re" -- --model "$VM" --quiet --json out.json --image "$PIC"
done 3<<'TABLE'
vision_config_image_not_a_multiple_of_patch|1|config.json: image_size 32 is not a multiple of patch_size 5|c["patch_size"] = 5
vision_position_table_of_another_grid|1|tensor 'embeddings.position_embeddings' has shape \[1, 17, 32\]; config.json implies 1184 elements|c["image_size"] = 48
TABLE
vfresh; cfg_edit_v 'c["model_type"] = "qwen2_5_vl"'
case_ vision_language_model_refused 1 "config.json: \"qwen2_5_vl\" is a vision-language model attnviz does not run yet \(it runs llava, gemma3 and idefics3;" -- --model "$VM" --quiet --json out.json --image "$PIC"
vfresh; cfg_edit_v 'c["model_type"] = "smolvlm"'
case_ smolvlm_refused 1 "config.json: \"smolvlm\" is a vision-language model attnviz does not run yet \(it runs llava, gemma3 and idefics3;" -- --model "$VM" --quiet --json out.json --image "$PIC"
# ---- vision-language models (tests/data/small-llava: LLaVA's vision tower, projector and Llama)
LV=$PWD/tests/data/small-llava
lfresh() { rm -rf "$T/lv" && cp -r "$LV" "$T/lv"; VM=$T/lv; }
case_ vlm_text_without_image_token 2 "the text has no <image>: write it where the picture goes" -- --model "$LV" --quiet --json out.json --image "$PIC" "what is in the picture?"
case_ vlm_two_image_tokens 2 "the text has 2 <image>: one picture a run" -- --model "$LV" --quiet --json out.json --image "$PIC" "<image> and <image>"
case_ vlm_image_without_text 2 "small-llava is a vision-language model: with --image give its text too, with <image> where the picture goes" -- --model "$LV" --quiet --json out.json --image "$PIC"
case_ vlm_image_with_predict 2 "--image with a vision-language model runs one picture and text: not with --batch, --out-dir, --predict" -- --model "$LV" --quiet --json out.json --image "$PIC" --predict 3 "<image> what"
case_ vlm_image_with_explain 2 "--image with a vision-language model runs one picture and text: .*\(--explain among them; yet\)" -- --model "$LV" --quiet --json out.json --image "$PIC" --explain 0.0 "<image> what"
case_ vlm_image_with_measure_alti 2 "--measure alti with --image is for vision encoders \(ViT, DeiT, DINOv2, CLIP, SigLIP\): a vision-language model's tower and text are not yet checked against a reference" -- --model "$LV" --quiet --json out.json --image "$PIC" --measure alti "<image> what"
case_ vlm_tower_past_the_budget 1 "the vision tower's attention \(3 layers x 4 heads over 17 tokens\) needs 23 kB, and not even its last layer fits the 40 kB allowed \(--max-capture\) beside the decoder's 31 kB: --max-capture 1G keeps its last layer, attnviz serve runs the picture and text" -- --model "$LV" --quiet --json out.json --image "$PIC" --max-capture 40k "<image> what is in the picture?"
# LLaVA's config.json edited (Python on dict c)
while IFS='|' read -r -u 3 name want re edit; do
    lfresh; M=$VM cfg_edit "$edit"
    case_ "$name" "$want" "$re" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
done 3<<'TABLE'
vlm_text_config_not_llama|1|config.json: text_config: model_type "mistral": attnviz runs LLaVA with a Llama language model \(llama\)|c["text_config"]["model_type"] = "mistral"
vlm_feature_layers_as_a_list|1|"vision_feature_layer" as a list \(features of several layers\) is not supported|c["vision_feature_layer"] = [-2, -1]
vlm_feature_layer_out_of_range|1|"vision_feature_layer" = -9 is out of range \[-4, 3\]|c["vision_feature_layer"] = -9
TABLE
lfresh; $PY - "$VM/model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
h = {("multi_modal_projectr." + k[len("multi_modal_projector."):] if k.startswith("multi_modal_projector.") else k): v for k, v in h.items()}
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
PY
case_ vlm_checkpoint_without_projector 1 "model.safetensors: no projector \(linear_1 under multi_modal_projector. or model.multi_modal_projector.\)" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
lfresh; printf '{"size": {"height": 48, "width": 48}}' >"$VM/preprocessor_config.json"
case_ vlm_preprocessed_size_is_not_the_towers 1 "the preprocessed image is 48 x 48, but the model's positions are for 32 x 32" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
# ---- Idefics3 / SmolVLM (tests/data/small-idefics3: 32-pixel tiles of 4 x 4 patches, shuffled to 4 image tokens)
IV=$PWD/tests/data/small-idefics3
ifresh() { rm -rf "$T/iv" && cp -r "$IV" "$T/iv"; VM=$T/iv; }
case_ idefics3_runs 0 "" -- --model "$IV" --quiet --json out.json --image "$PIC" "user: <image> what is in the picture?"
case_ idefics3_text_without_image_token 2 "the text has no <image>: write it where the picture goes, e.g. \"<\|im_start\|>User:<image>" -- --model "$IV" --quiet --json out.json --image "$PIC" "what is in the picture?"
case_ idefics3_two_image_tokens 2 "the text has 2 <image>: one picture a run" -- --model "$IV" --quiet --json out.json --image "$PIC" "<image> and <image>"
ifresh; printf '{"image_processor_type": "Idefics3ImageProcessor", "size": {"longest_edge": 64}, "max_image_size": {"longest_edge": 48}}' >"$VM/preprocessor_config.json"
case_ idefics3_tiles_are_not_the_towers 1 "the preprocessed image is 48 x 48, but the model's positions are for 32 x 32" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; printf '{"image_processor_type": "Idefics3ImageProcessor", "size": {"longest_edge": 4096}, "max_image_size": {"longest_edge": 2}}' >"$VM/preprocessor_config.json"
case_ idefics3_too_many_tiles 1 "Idefics3ImageProcessor cuts the 4096 x 3414 picture into 2048 x 1707 tiles of 2 pixels, above the 256 tiles attnviz runs" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; printf '{"image_processor_type": "Idefics3ImageProcessor", "size": {"longest_edge": 512}, "max_image_size": {"longest_edge": 32}}' >"$VM/preprocessor_config.json"
case_ idefics3_more_image_tokens_than_positions 1 "the text and the picture's 900 tokens make 3787, above the model's 256 positions" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; printf '{"image_processor_type": "Idefics3ImageProcessor", "max_image_size": {"height": 32, "width": 32}}' >"$VM/preprocessor_config.json"
case_ idefics3_tile_size_not_a_longest_edge 1 "preprocessor_config.json: \"max_image_size\" must be \{\"longest_edge\": N\}" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; printf '{"image_processor_type": "CLIPImageProcessor", "size": {"longest_edge": 64}}' >"$VM/preprocessor_config.json"
case_ longest_edge_alone_outside_idefics3 1 "preprocessor_config.json: \"size\" with longest_edge alone is Idefics3's form" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; M=$VM cfg_edit 'c["scale_factor"] = 3'
case_ idefics3_scale_factor_not_dividing_the_grid 1 "config.json: scale_factor 3 does not divide the tower's 4 x 4 patches" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; M=$VM cfg_edit 'c["vision_config"]["model_type"] = "clip_vision_model"'
case_ idefics3_vision_config_not_idefics3 1 "config.json: vision_config: model_type \"clip_vision_model\": attnviz runs Idefics3 with a SigLIP-style vision tower \(idefics3_vision\)" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; M=$VM cfg_edit 'c["vision_config"]["vision_use_head"] = True'
case_ idefics3_vision_pooling_head 1 "vision_config: \"vision_use_head\": Idefics3's vision tower has no pooling head" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
ifresh; M=$VM st_edit 'h["model.connector.modality_projection.proj.wrong"] = h.pop("model.connector.modality_projection.proj.weight")'
case_ idefics3_checkpoint_without_connector 1 "no connector \(model.connector.modality_projection.proj.weight\)" -- --model "$VM" --quiet --json out.json --image "$PIC" "<image> what"
case_ idefics3_with_mmproj 2 "--mmproj goes with a llama.cpp text model \(a .gguf file\)" -- --model "$IV" --mmproj "$IV/model.safetensors" --quiet --json out.json --image "$PIC" "<image> what"
# ---- llama.cpp's LLaVA pair: --mmproj (a tiny legacy mmproj GGUF beside the tiny llama GGUF, whose
# tokenizer gains <image>)
MMPROJ_KV='kv = {"general.architecture": ("s", "clip"), "clip.has_vision_encoder": ("b", 1), "clip.has_text_encoder": ("b", 0),
    "clip.has_llava_projector": ("b", 1), "clip.projector_type": ("s", "mlp"), "clip.vision.image_size": ("u", 16),
    "clip.vision.patch_size": ("u", 8), "clip.vision.embedding_length": ("u", 8), "clip.vision.feed_forward_length": ("u", 16),
    "clip.vision.attention.head_count": ("u", 2), "clip.vision.attention.layer_norm_epsilon": ("f", 1e-5),
    "clip.vision.block_count": ("u", 1), "clip.vision.projection_dim": ("u", 0), "clip.vision.feature_layer": ("ai", [1]),
    "clip.vision.image_mean": ("af", [0.5, 0.5, 0.5]), "clip.vision.image_std": ("af", [0.5, 0.5, 0.5]), "clip.use_gelu": ("b", 0)}
tensors = {"mm.0.weight": [8, 8], "mm.0.bias": [8], "mm.2.weight": [8, 8], "mm.2.bias": [8], "v.class_embd": [8],
    "v.patch_embd.weight": [8, 8, 3, 8], "v.position_embd.weight": [8, 5], "v.pre_ln.weight": [8], "v.pre_ln.bias": [8]}
for nm, d in (("attn_q", [8, 8]), ("attn_k", [8, 8]), ("attn_v", [8, 8]), ("attn_out", [8, 8]), ("ln1", [8]), ("ln2", [8]),
              ("ffn_down", [8, 16]), ("ffn_up", [16, 8])):
    tensors[f"v.blk.0.{nm}.weight"] = d
    tensors[f"v.blk.0.{nm}.bias"] = [d[-1]] if len(d) == 2 else d
'
WITH_IMAGE='kv["tokenizer.ggml.tokens"] = ("as", alpha + ["<image>"]); kv["tokenizer.ggml.token_type"] = ("ai", [1] * 256 + [3]); tensors["token_embd.weight"] = [H, 257]'
mkgguf "$T/lt.gguf" "$WITH_IMAGE"
mkgguf "$T/mm.gguf" "$MMPROJ_KV"
case_ mmproj_pair_runs 0 "" -- --model "$T/lt.gguf" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
# the two files' bytes together against the memory: an mmproj padded by 8 MB it never reads, and a memory
# that holds the text model with a pass's buffers (the refusal without --mmproj says how much) and 2 MB more
mkgguf "$T/mm8.gguf" "$MMPROJ_KV"'tensors["v.pad"] = [2097152]'
alone=$(ATTNVIZ_MEMORY=1k "$BIN" --model "$T/lt.gguf" --quiet --json /dev/null hi 2>&1 |
    sed -n 's/.*, \([0-9.]*\) \(kB\|MB\) with the run.s buffers.*/\1 \2/p' | awk '{print int($1 * ($2 == "MB" ? 1000 : 1)) + 1}')
export ATTNVIZ_MEMORY=$((${alone:-0} + 2000))k
case_ mmproj_and_model_past_the_memory 1 "lt.gguf with .*mm8.gguf: the weights take .* but [0-9]+ MB is available \(ATTNVIZ_MEMORY\)" -- --model "$T/lt.gguf" --mmproj "$T/mm8.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
case_ model_alone_within_that_memory 0 "" -- --model "$T/lt.gguf" --quiet --json out.json "hi"
unset ATTNVIZ_MEMORY
# the pair with mm.gguf made from MMPROJ_KV and an edit (Python on its kv, tensors and bytes)
while IFS='|' read -r -u 3 name want re edit; do
    mkgguf "$T/mm.gguf" "$MMPROJ_KV$edit"
    case_ "$name" "$want" "$re" -- --model "$T/lt.gguf" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
done 3<<'TABLE'
mmproj_of_another_model|1|mm.gguf: its projector makes 16-wide image tokens; .*lt.gguf's hidden size is 8 \(another model's mmproj\?\)|tensors["mm.2.weight"] = [8, 16]; tensors["mm.2.bias"] = [16]
mmproj_without_llava_projector|1|mm.gguf: not an mmproj with a LLaVA or Gemma 3 projector|kv["clip.has_llava_projector"] = ("b", 0)
mmproj_other_projector|1|mm.gguf: clip.projector_type "ldp": attnviz reads LLaVA's two-layer "mlp" projector and Gemma 3's "gemma3"|kv["clip.projector_type"] = ("s", "ldp")
mmproj_absurd_sizes|1|mm.gguf: its clip.vision sizes are out of range|kv["clip.vision.block_count"] = ("u", 100000)
mmproj_truncated|1|mm.gguf: |cut = 400
TABLE
mkgguf "$T/mm.gguf" "$MMPROJ_KV"
mkgguf "$T/plain.gguf" ''
case_ mmproj_text_without_image_token 1 "plain.gguf: its tokenizer has no <image> token" -- --model "$T/plain.gguf" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "hi"
case_ mmproj_the_text_model_itself 1 "lt.gguf: not an mmproj with a LLaVA or Gemma 3 projector" -- --model "$T/lt.gguf" --mmproj "$T/lt.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
case_ mmproj_beside_a_folder 2 "--mmproj goes with a llama.cpp text model \(a .gguf file\)" -- --model "$LV" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
# ---- Gemma 3's pair (convert_hf_to_gguf.py, and with --mmproj: projector_type "gemma3", a SigLIP tower pooled
# 2 x 2 here, the soft norm and the input projection), the text a gemma3 GGUF whose tokenizer has the picture's tokens
GEMMA3_TEXT='kv = {(k.replace("llama.", "gemma3.") if k.startswith("llama.") else k): v for k, v in kv.items()}
kv["general.architecture"] = ("s", "gemma3")
for l in range(L):
    for nm in ("attn_q_norm", "attn_k_norm"): tensors[f"blk.{l}.{nm}.weight"] = [4]
    for nm in ("post_attention_norm", "post_ffw_norm"): tensors[f"blk.{l}.{nm}.weight"] = [H]
pic = ["<start_of_image>", "<image_soft_token>", "<end_of_image>"]
kv["tokenizer.ggml.tokens"] = ("as", alpha + pic); kv["tokenizer.ggml.token_type"] = ("ai", [1] * 256 + [3] * 3)
tensors["token_embd.weight"] = [H, 259]
'
GEMMA3_MMPROJ='del kv["clip.has_llava_projector"], kv["clip.vision.feature_layer"]; del tensors["v.class_embd"], tensors["v.pre_ln.weight"], tensors["v.pre_ln.bias"]
for k in ("mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias"): del tensors[k]
kv["clip.projector_type"] = ("s", "gemma3"); kv["clip.use_gelu"] = ("b", 1); kv["clip.vision.image_size"] = ("u", 32)
kv["clip.vision.projector.scale_factor"] = ("u", 2)
tensors.update({"v.patch_embd.bias": [8], "v.position_embd.weight": [8, 16], "v.post_ln.weight": [8], "v.post_ln.bias": [8],
                "mm.input_projection.weight": [8, 8], "mm.soft_emb_norm.weight": [8]})
'
mkgguf "$T/g3.gguf" "$GEMMA3_TEXT"
mkgguf "$T/g3mm.gguf" "$MMPROJ_KV$GEMMA3_MMPROJ"
G3P='<start_of_image>hi'
case_ gemma3_mmproj_pair_runs 0 "" -- --model "$T/g3.gguf" --mmproj "$T/g3mm.gguf" --quiet --json out.json --image "$PIC" "$G3P"
case_ gemma3_mmproj_beside_a_llama 1 "g3mm.gguf: a Gemma 3 projector does not go with .*lt.gguf, a llama model \(another model's mmproj\?\)" -- --model "$T/lt.gguf" --mmproj "$T/g3mm.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
case_ llava_mmproj_beside_gemma3 1 "mm.gguf: a LLaVA projector does not go with .*g3.gguf, a gemma3_text model \(another model's mmproj\?\)" -- --model "$T/g3.gguf" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "$G3P"
mkgguf "$T/g3plain.gguf" "$GEMMA3_TEXT"'kv["tokenizer.ggml.tokens"] = ("as", alpha + ["<x>", "<y>", "<z>"])'
case_ gemma3_text_without_its_picture_tokens 1 "g3plain.gguf: its tokenizer lacks Gemma 3's picture tokens \(<start_of_image>, <image_soft_token>, <end_of_image>\)" -- --model "$T/g3plain.gguf" --mmproj "$T/g3mm.gguf" --quiet --json out.json --image "$PIC" "$G3P"
mkgguf "$T/g3mm2.gguf" "$MMPROJ_KV$GEMMA3_MMPROJ"'tensors["mm.input_projection.weight"] = [16, 8]'
case_ gemma3_mmproj_of_another_model 1 "g3mm2.gguf: its projector makes 16-wide image tokens; .*g3.gguf's hidden size is 8 \(another model's mmproj\?\)" -- --model "$T/g3.gguf" --mmproj "$T/g3mm2.gguf" --quiet --json out.json --image "$PIC" "$G3P"
mkgguf "$T/g3mm2.gguf" "$MMPROJ_KV$GEMMA3_MMPROJ"'kv["clip.vision.projector.scale_factor"] = ("u", 3)'
case_ gemma3_mmproj_pooling_uneven 1 "g3mm2.gguf: clip.vision.projector.scale_factor 3 does not pool the 4 x 4 patches evenly" -- --model "$T/g3.gguf" --mmproj "$T/g3mm2.gguf" --quiet --json out.json --image "$PIC" "$G3P"
case_ gemma3_pair_text_without_the_placeholder 2 "the text has no <start_of_image>" -- --model "$T/g3.gguf" --mmproj "$T/g3mm.gguf" --quiet --json out.json --image "$PIC" "hi"
mkgguf "$T/mm.gguf" "$MMPROJ_KV"'del kv["clip.has_llava_projector"]; kv["clip.projector_type"] = ("s", "idefics3")'
case_ mmproj_idefics3_refused 1 "mm.gguf: clip.projector_type \"idefics3\": attnviz reads LLaVA's two-layer \"mlp\" projector and Gemma 3's \"gemma3\" \(SmolVLM / Idefics3: give its Hugging Face folder to --model\)" -- --model "$T/lt.gguf" --mmproj "$T/mm.gguf" --quiet --json out.json --image "$PIC" "<image> hi"
# ---- attnviz serve's OpenAI-compatible request bodies (src/serve/openai.c), sent with curl to a
# server on the tiny Llama fixture (under valgrind with VALGRIND=1): each answered with its status
# and one-line OpenAI error, in bounded time, the server still up; then a stop that leaves no leak.
if command -v curl >/dev/null; then
    vg=() sbin=$BIN
    [ "${VALGRIND:-0}" = 1 ] && vg=(valgrind -q --read-inline-info=no --error-exitcode=99 --leak-check=full
        --errors-for-leak-kinds=definite --show-leak-kinds=definite --log-file="$T/serve.vg")
    [ -n "${SANITIZED:-}" ] && vg=("${SAN_ENV[@]}") sbin=$SANITIZED
    "${vg[@]}" "$sbin" serve --port 0 --model "$PWD/tests/data/small-llama" >"$T/serve.url" 2>"$T/serve.err" &
    SPID=$!
    for _ in $(seq 600); do [ -s "$T/serve.url" ] && break; sleep 0.1; done
    url=$(head -1 "$T/serve.url")
    base=${url%%/?token=*} tok=${url##*token=}
    http_case_() { # name status regex path body-file
        local name=$1 want=$2 re=$3 path=$4 file=$5
        n_case=$((n_case + 1))
        local st
        st=$(timeout 120 curl -s -o "$T/hbody" -w '%{http_code}' -H "Authorization: Bearer $tok" "$base$path" \
            --data-binary @"$file")
        if [ "$st" != "$want" ]; then
            echo "FAIL bad_input_$name: status $st, want $want: $(head -c 300 "$T/hbody")"
        elif [ "$want" != 200 ] && ! $PY - "$T/hbody" "$re" <<'PY'
import json, re, sys
e = json.load(open(sys.argv[1]))["error"]
m = e["message"]
ok = set(e) == {"message", "type", "param", "code"} and "\n" not in m and not re.search(r"[\x00-\x1f\x7f]", m)
sys.exit(0 if ok and re.search(sys.argv[2], m) else 1)
PY
        then
            echo "FAIL bad_input_$name: not a one-line OpenAI error matching /$re/: $(head -c 300 "$T/hbody")"
        elif ! kill -0 "$SPID" 2>/dev/null; then
            echo "FAIL bad_input_$name: the server exited: $(tail -3 "$T/serve.err")"
        else
            echo "PASS bad_input_$name"
        fi
    }
    B=$T/hb
    $PY -c "print('[' * 200000)" >"$B"
    http_case_ openai_nesting_200000_deep 400 "not valid JSON" /v1/completions "$B"
    $PY -c "import json; print(json.dumps({'model': 'small-llama', 'prompt': 'a', **{'k%d' % i: 0 for i in range(60000)}}))" >"$B"
    http_case_ openai_60000_keys 400 "Unrecognized request argument" /v1/completions "$B"
    $PY -c "print('{' + ','.join(['\"model\":\"small-llama\"'] * 40000) + ',\"prompt\":\"a\"}')" >"$B"
    http_case_ openai_40000_duplicate_keys 400 "\"model\" appears twice" /v1/completions "$B"
    $PY -c "import json; print(json.dumps({'model': 'small-llama', 'messages': [{'role': 'user', 'content': 'x'}] * 2000}))" >"$B"
    http_case_ openai_2000_messages 400 "1 to 1024 messages" /v1/chat/completions "$B"
    printf '{"model":"small-llama","prompt":"a\\u0000b"}' >"$B"
    http_case_ openai_nul_escape 400 "NUL" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":"a\\\\u0000b","max_tokens":1}' >"$B"
    http_case_ openai_escaped_backslash_is_no_nul 200 "" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":"\\ud800"}' >"$B"
    http_case_ openai_lone_surrogate 400 "not valid JSON|UTF-8" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":"a","max_tokens":1e308}' >"$B"
    http_case_ openai_max_tokens_1e308 400 "max_tokens must be" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":"a","seed":1e300}' >"$B"
    http_case_ openai_seed_1e300 400 "seed must be" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":[1,2,1e10]}' >"$B"
    http_case_ openai_token_id_1e10 400 "whole numbers" /v1/completions "$B"
    $PY -c "print('{\"model\":\"small-llama\",\"prompt\":\"' + 'the cat ' * 120000 + '\"}')" >"$B"
    http_case_ openai_prompt_of_240000_tokens 400 "the prompt is [0-9]+ tokens; this model's 64 positions" /v1/completions "$B"
    $PY -c "import json; print(json.dumps({'model': 'small-llama', 'prompt': 'a', 'stop': 'x' * 300}))" >"$B"
    http_case_ openai_stop_300_bytes 400 "at most 256 bytes" /v1/completions "$B"
    $PY -c "import json; print(json.dumps({'model': 'small-llama', 'prompt': 'a', 'attention': {'layers': list(range(300))}}))" >"$B"
    http_case_ openai_attention_300_layers 400 "1 to 256 indices" /v1/completions "$B"
    printf '{"model":"small-llama","messages":[{"role":"user","content":"x"}],"attention":{"heads":[-1]}}' >"$B"
    http_case_ openai_attention_negative_head 400 "whole numbers from 0" /v1/chat/completions "$B"
    printf '{"model":"small-llama","messages":[{"role":"user"}],"n":1,"tools":null}' >"$B"
    http_case_ openai_chat_without_template 400 "chat template" /v1/chat/completions "$B"
    printf '{"model":"small-llama","messages":[{"role":"user","content":"x","weight":2}]}' >"$B"
    http_case_ openai_message_unknown_field 400 "unknown field \"weight\"" /v1/chat/completions "$B"
    printf '{"model":"small-llama","messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{}}]}]}' >"$B"
    http_case_ openai_text_part_unknown_field 400 "unknown field \"cache_control\" in a text part" /v1/chat/completions "$B"
    printf '{"model":"small-llama","messages":[{"role":"user","content":"x","name":7}]}' >"$B"
    http_case_ openai_message_name_a_number 400 "name must be a UTF-8 string" /v1/chat/completions "$B"
    printf '[]' >"$B"
    http_case_ openai_body_an_array 400 "a JSON object" /v1/completions "$B"
    printf '{"model":"small-llama","prompt":"\xc3\x28"}' >"$B"
    http_case_ openai_invalid_utf8 400 "UTF-8" /v1/completions "$B"
    kill "$SPID"
    wait "$SPID"
    rc=$?
    n_case=$((n_case + 1))
    if [ "${VALGRIND:-0}" = 1 ] && [ $rc -eq 99 ]; then echo "FAIL valgrind_openai_serve: $(grep -m3 '==' "$T/serve.vg")"
    elif grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/serve.err"; then
        echo "FAIL sanitizers_openai_serve: $(grep -m1 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/serve.err" | head -c 300)"
    elif [ $rc -ne 0 ]; then echo "FAIL bad_input_openai_serve_stops_cleanly: exit $rc: $(tail -3 "$T/serve.err")"
    else echo "PASS bad_input_openai_serve_stops_cleanly"; fi
else
    echo "SKIP bad_input_openai: no curl"
fi
# ---- chat templates (--chat, --chat-file; docs/chat.md): the tiny GGUF with a template in its metadata
CT='{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}'
mkgguf "$G" "kv['tokenizer.chat_template'] = ('s', '''$CT''')"
case_ chat_tiny_gguf_runs 0 "" -- --model "$G" --quiet --chat --json out.json hi
printf '[{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}]' >"$T/ok.json"
case_ chat_file_tiny_gguf_runs 0 "" -- --model "$G" --quiet --chat-file "$T/ok.json" --json out.json
# generation stops at the end of a turn (eot_token_id) as at the end of text: the all-ones model picks token 0
THEN='grep -q "\"generated_tokens\":5" out.json' case_ gguf_generates_without_an_eot 0 "" -- --model "$G" --quiet --chat --generate 5 --json out.json hi
mkgguf "$G" "kv['tokenizer.chat_template'] = ('s', '''$CT'''); kv['tokenizer.ggml.eot_token_id'] = ('u', 0)"
THEN='grep -q "\"generated_tokens\":1,\"stop_reason\":\"eos\"" out.json' case_ gguf_eot_token_stops_generation 0 "" -- --model "$G" --quiet --chat --generate 5 --json out.json hi
mkgguf "$G" "kv['tokenizer.ggml.eom_token_id'] = ('u', 99999)"
case_ gguf_eom_outside_vocabulary 1 "tokenizer.ggml.eom_token_id 99999 is outside the vocabulary" -- --model "$G" "${Q[@]}" hi
mkgguf "$G" ''
case_ chat_model_ships_no_template 1 "g.gguf ships no chat template \(no tokenizer.chat_template in its metadata\)" -- --model "$G" --chat "${Q[@]}" hi
fresh
case_ chat_masked_model 2 "is a masked \(encoder\) model: chat templates are for decoders" -- --model "$M" --chat "${Q[@]}" hi
case_ chat_with_a_sentence_pair 2 "--chat wraps one TEXT as a user message: not a sentence pair" -- --model "$M" --chat "${Q[@]}" a b
case_ chat_file_with_text 2 "--chat-file FILE is the input: no TEXT" -- --model "$M" --chat-file "$T/ok.json" "${Q[@]}" hi
case_ chat_with_serve 2 "--chat goes with a run \(attnviz TEXT\), not attnviz serve" -- serve --chat --model "$M"
# a template that loops without end, recurses, writes gigabytes, uses what the subset lacks, refuses the messages
for c in 'loops_without_end|{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}|tokenizer.chat_template:1:[0-9]+: rendering took more than [0-9]+ steps' \
         'recurses|{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}|tokenizer.chat_template:1:[0-9]+: macros nested deeper than 64' \
         'writes_gigabytes|{% set s = "x" * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}|the rendered text passed 32 MB' \
         'unsupported_syntax|hi {% with x = 1 %}{% endwith %}|tokenizer.chat_template:1:7: unsupported Jinja construct: \{% with %\}' \
         'unclosed_block|{% for m in messages %}{{ m.content }}|tokenizer.chat_template:1:[0-9]+: unexpected end of template: expected .endfor.' \
         'refuses_the_messages|{{ raise_exception("Conversation roles must alternate") }}|chat template refused the messages: Conversation roles must alternate'; do
    IFS='|' read -r name tpl re <<<"$c"
    mkgguf "$G" "kv['tokenizer.chat_template'] = ('s', '''$tpl''')"
    case_ "chat_template_$name" 1 "$re" -- --model "$G" --chat "${Q[@]}" hi
done
# messages.json: strict
mkgguf "$G" "kv['tokenizer.chat_template'] = ('s', '''$CT''')"
for c in 'not_an_array|{"role": "user", "content": "x"}|m.json: not a JSON array of messages' \
         'missing_role|[{"content": "x"}]|m.json: message 1: no "role"' \
         'duplicate_key|[{"role": "user", "content": "a", "content": "b"}]|m.json: message 1: the key "content" appears twice' \
         'nul_escape|[{"role": "user", "content": "a\u0000b"}]|m.json: a NUL character \(\\u0000\) at byte' \
         'unknown_role|[{"role": "tool", "content": "x"}]|m.json: message 1: role "tool" is not system, developer, user or assistant' \
         'image_part|[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]|m.json: message 1: content part 1 is not .* \(only text parts are supported\)' \
         'empty_array|[]|m.json: an empty array: no messages' \
         'not_json|[{"role": "user", "content": "x"}|m.json: not valid JSON' \
         'text_file|What is the capital of France?|m.json: not JSON messages .*; a text file.s contents as one user message: --chat "\$\(cat .*m.json\)"' \
         'empty_file| |m.json: empty: --chat-file takes JSON messages'; do
    IFS='|' read -r name json re <<<"$c"
    printf '%s' "$json" >"$T/m.json"
    case_ "chat_file_$name" 1 "$re" -- --model "$G" --chat-file "$T/m.json" "${Q[@]}"
done
printf '[{"role": "user", "content": "a\0b"}]' >"$T/m.json"
case_ chat_file_nul_byte 1 "m.json: a NUL byte at byte 31" -- --model "$G" --chat-file "$T/m.json" "${Q[@]}"
case_ chat_file_missing 1 "nope.json: cannot open: No such file or directory" -- --model "$G" --chat-file "$T/nope.json" "${Q[@]}"
echo "INFO bad-input catalog: $n_case cases"
