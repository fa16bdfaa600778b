#!/bin/bash
# same_outputs.sh OLD NEW — runs two attnviz binaries over the same cases and compares,
# byte for byte, everything each case leaves: stdout, stderr, the exit code and every file it
# writes. The cases cover the demo model, every committed fixture family (tests/unit/test_model.c's
# FIXTURES plus the pytorch_model.bin one), the subcommands (run with json/npy/html, --batch,
# heads, stats --merge, diff, render, predict/generate) and usage/runtime errors; and the live
# server's answers (tests/e2e/serve_check.py's client). A reshape of the code must leave them all equal.
# Each case runs twice in the same folder under the same name ($W/attnviz, a copy of OLD then of
# NEW), so paths and argv[0] in messages are the same. Prints one line per difference and a count;
# exit 1 if anything differs. Needs the demo model (make demo-model) and python3 for the inputs.
set -u
cd "$(dirname "$0")/.." || exit 2
[ $# -eq 2 ] || { echo "usage: tools/same_outputs.sh OLD_BINARY NEW_BINARY" >&2; exit 2; }
OLD=$(readlink -f "$1") NEW=$(readlink -f "$2")
ROOT=$PWD
DEMO=$ROOT/weights/demo
[ -f "$DEMO/model.safetensors" ] || { echo "same_outputs: no demo model (make demo-model)" >&2; exit 2; }
T=$(mktemp -d)
# KEEP=1 keeps the outputs (their folder is named on stderr) to look at a difference
if [ -n "${KEEP:-}" ]; then echo "same_outputs: outputs kept in $T" >&2; else trap 'rm -rf "$T"' EXIT; fi
W=$T/w         # the folder every case runs in
IN=$T/in       # inputs shared by the cases
mkdir -p "$IN"
cases=0 files=0 diffs=0

# run_case NAME ARGS...: runs "attnviz ARGS" (old, then new) in an empty $W; stdin from $IN/stdin
# when it exists; ARGS may name $IN files. Results kept under $T/old/NAME and $T/new/NAME.
run_case() {
    local name=$1
    shift
    local side bin
    for side in old new; do
        [ $side = old ] && bin=$OLD || bin=$NEW
        rm -rf "$W" && mkdir -p "$W" && cp "$bin" "$W/attnviz"
        (cd "$W" && ./attnviz "$@" <"${STDIN:-/dev/null}" >"$W/.stdout" 2>"$W/.stderr"; echo $? >"$W/.exit")
        rm -f "$W/attnviz"
        mkdir -p "$T/$side" && rm -rf "$T/$side/$name" && mv "$W" "$T/$side/$name"
    done
    compare "$name"
}

compare() {
    local name=$1 f
    cases=$((cases + 1))
    while IFS= read -r f; do
        files=$((files + 1))
        if [ ! -e "$T/new/$name/$f" ]; then
            echo "DIFF $name: $f only in the old run"; diffs=$((diffs + 1))
        elif ! cmp -s "$T/old/$name/$f" "$T/new/$name/$f"; then
            echo "DIFF $name: $f differs"; diffs=$((diffs + 1))
            case $f in ./.stderr | ./.exit) diff "$T/old/$name/$f" "$T/new/$name/$f" | head -6 | sed 's/^/    /' ;; esac
        fi
    done < <(cd "$T/old/$name" && find . -type f | sort)
    while IFS= read -r f; do
        [ -e "$T/old/$name/$f" ] || { echo "DIFF $name: $f only in the new run"; diffs=$((diffs + 1)); }
    done < <(cd "$T/new/$name" && find . -type f | sort)
}

# -- inputs
printf 'time flies like an arrow\nthe cat sat\tit was tired\nhello world\n' >"$IN/batch.txt"
printf 'good line\n\xff\xfe bad\nanother good\n' >"$IN/bad.txt"
printf 'the cat sat on the mat\nthe dog sat on the log\tand slept\na b c d e f g\n' >"$IN/s1.txt"
printf 'one two three four five six\nseven eight nine\n' >"$IN/s2.txt"
python3 - "$IN" <<'PY'
import json, struct, sys, zipfile, io
d = sys.argv[1]
L, H, n, dh = 2, 3, 5, 4
att, q, k = [], [], []
for l in range(L):
    for h in range(H):
        for i in range(n):
            w = [((l + 1) * (h + 2) * (j + 1)) % 7 + 1.0 if j <= i else 0.0 for j in range(n)]
            s = sum(w)
            att += [v / s for v in w]
q = [((i * 7) % 11 - 5) / 3 for i in range(L * H * n * dh)]
k = [((i * 5) % 13 - 6) / 4 for i in range(L * H * n * dh)]
meta = {"tokens": ["<|endoftext|>", "\u0120the", "\u0120cat", "\u0120sat", "."], "model": "made-up", "causal": True,
        "text": "the cat sat."}
def npy(shape, vals):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}, " for s in shape)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack(f"<{len(vals)}f", *vals)
with zipfile.ZipFile(f"{d}/r.npz", "w") as z:
    z.writestr("attention.npy", npy([L, H, n, n], att))
    z.writestr("queries.npy", npy([L, H, n, dh], q))
    z.writestr("keys.npy", npy([L, H, n, dh], k))
json.dump(meta, open(f"{d}/r.json", "w"))
# safetensors with the tokens in its metadata
tensors, blob = {}, b""
for name, shape, vals in (("attention", [L, H, n, n], att), ("queries", [L, H, n, dh], q)):
    b = struct.pack(f"<{len(vals)}f", *vals)
    tensors[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(b)]}
    blob += b
tensors["__metadata__"] = {"attnviz": json.dumps(meta)}
h = json.dumps(tensors).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(f"{d}/r.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + blob)
# a bad one: rows that do not sum to 1
with zipfile.ZipFile(f"{d}/bad.npz", "w") as z:
    z.writestr("attention.npy", npy([L, H, n, n], [0.5] * (L * H * n * n)))
json.dump(meta, open(f"{d}/bad.json", "w"))
PY

# -- the demo model (BERT-shaped, constructed): every output kind and the subcommands
D=(--model "$DEMO")
run_case demo_default "${D[@]}" "time flies like an arrow" --layer 0 --head 8
run_case demo_pair_json_qk_hidden "${D[@]}" --json out.json --qk --hidden "the cat sat on the mat" "it was tired"
run_case demo_json_stdout "${D[@]}" --json - --precision 3 "hello world"
run_case demo_npy_qk "${D[@]}" --npy a.npy --qk --json j.json "time flies like an arrow"
run_case demo_all_outputs "${D[@]}" --json j.json --npy a.npy --html p.html --view matrix --theme dark \
    --show-heads 0-3 "time flies like an arrow"
run_case demo_selection "${D[@]}" --json - --layers 1 --heads 3,8 --no-special "time flies like an arrow"
run_case demo_words "${D[@]}" --json - --words "unaffable tokenization happens"
run_case demo_max_tokens "${D[@]}" --json - --max-tokens 5 "one two three four five six seven eight"
run_case demo_stats "${D[@]}" --stats "time flies like an arrow"
run_case demo_stats_json "${D[@]}" --stats --json s.json "time flies like an arrow"
run_case demo_tokens_only "${D[@]}" --tokens-only "Héllo, wörld!"
run_case demo_templates_dir "${D[@]}" --templates "$ROOT/templates" --html t.html "hello"
run_case demo_batch "${D[@]}" --batch "$IN/batch.txt"
run_case demo_batch_progress "${D[@]}" --batch "$IN/batch.txt" --json b.jsonl
run_case demo_batch_nopack "${D[@]}" --batch "$IN/batch.txt" --pack-tokens 0 --quiet
run_case demo_batch_outdir "${D[@]}" --batch "$IN/batch.txt" --out-dir maps --html --npy --quiet
run_case demo_batch_stats "${D[@]}" --batch "$IN/s1.txt" --stats --json st.json --quiet
run_case demo_batch_tokens "${D[@]}" --batch "$IN/batch.txt" --tokens-only --quiet
run_case demo_batch_bad_line "${D[@]}" --batch "$IN/bad.txt"
run_case demo_batch_bad_strict "${D[@]}" --batch "$IN/bad.txt" --strict
STDIN=$IN/batch.txt run_case demo_batch_stdin "${D[@]}" --batch - --quiet
run_case demo_heads heads "${D[@]}" --batch "$IN/s1.txt" --top 3
run_case demo_heads_json heads "${D[@]}" --batch "$IN/s1.txt" --score previous --score induction --json h.json
run_case demo_heads_pattern heads "${D[@]}" "the cat sat on the mat" --pattern "offset -1" --json -
run_case demo_diff_texts diff "${D[@]}" "the cat sat on the mat" "the dog sat on the log"
run_case demo_diff_json diff "${D[@]}" --json d.json --html d.html --top 3 "time flies" "fruit flies"
run_case demo_diff_sel diff "${D[@]}" --json - --layers 1 --heads 3,8 "time flies" "fruit flies"
run_case demo_predict_mlm "${D[@]}" --predict 5 --json - "the cat [MASK] on the mat"
run_case version --version
run_case help --help

# stats --merge over shards made by the new binary itself (both sides merge the same files)
"$NEW" heads "${D[@]}" --quiet --batch "$IN/s1.txt" --pattern "offset -1" --json "$IN/s1.heads.json"
"$NEW" heads "${D[@]}" --quiet --batch "$IN/s2.txt" --pattern "offset -1" --json "$IN/s2.heads.json"
"$NEW" "${D[@]}" --quiet --batch "$IN/s1.txt" --stats --json "$IN/s1.stats.json"
"$NEW" "${D[@]}" --quiet --batch "$IN/s2.txt" --stats --json "$IN/s2.stats.json"
run_case stats_merge_heads stats --merge "$IN/s1.heads.json" "$IN/s2.heads.json"
run_case stats_merge_stats stats --merge "$IN/s2.stats.json" "$IN/s1.stats.json" --json m.json
run_case stats_merge_mixed stats --merge "$IN/s1.heads.json" "$IN/s1.stats.json"

# render: attention computed elsewhere
run_case render_npz render "$IN/r.npz" --html r.html --json r.json
run_case render_npz_meta render "$IN/r.npz" --meta "$IN/r.json" --npy r.npy
run_case render_safetensors render "$IN/r.safetensors" --layers 1 --heads 0,2 --json -
run_case render_bad_rows render "$IN/bad.npz"
run_case render_missing render "$IN/nope.npz"
run_case render_bad_layer render "$IN/r.npz" --layers 5

# -- every fixture family: run with every output, a pair, batch, stats, predict/generate.
# The decoder fixtures other than small-llama have no tokenizer (the suites feed them ids): a copy
# of each with small-llama's tokenizer.json (the same 40-token vocabulary) runs them end to end,
# and the folder as committed still gives its error.
fixtures=()
for dir in "$ROOT"/tests/data/small-*; do
    fixtures+=("$dir")
    if grep -q '"vocab_size": *40' "$dir/config.json" && [ ! -e "$dir/tokenizer.json" ]; then
        mkdir -p "$IN/$(basename "$dir")-tok"
        ln -s "$dir"/* "$IN/$(basename "$dir")-tok/"
        ln -s "$ROOT/tests/data/small-llama/tokenizer.json" "$IN/$(basename "$dir")-tok/"
        fixtures+=("$IN/$(basename "$dir")-tok")
    fi
done
for dir in "${fixtures[@]}"; do
    f=$(basename "$dir")
    M=(--model "$dir")
    run_case "$f.run" "${M[@]}" --json o.json --npy o.npy --html o.html --qk --hidden "the cat sat on the mat"
    run_case "$f.pair" "${M[@]}" --json - "time flies" "like an arrow"
    run_case "$f.batch" "${M[@]}" --batch "$IN/batch.txt" --stats --json st.json
    run_case "$f.batchjson" "${M[@]}" --batch "$IN/s1.txt" --precision 9
    run_case "$f.predict" "${M[@]}" --predict 3 --json - "the cat [MASK] sat on the mat"
    run_case "$f.generate" "${M[@]}" --generate 4 --predict 2 --json g.json --html g.html "the cat"
    run_case "$f.sample" "${M[@]}" --generate 3 --temperature 0.8 --top-p 0.9 --seed 7 --json - "the"
    run_case "$f.heads" heads "${M[@]}" --batch "$IN/s1.txt" --json -
    run_case "$f.diff" diff "${M[@]}" --json - "the cat sat" "the dog sat"
    run_case "$f.bad_layer" "${M[@]}" --layers 7 --json - "hi"
    run_case "$f.bad_head" "${M[@]}" --heads 99 --json - "hi"
done
run_case diff_two_models diff --model "$ROOT/tests/data/small-f32" --model "$ROOT/tests/data/small-f16" --json - "the cat sat"
run_case diff_two_models_mismatch diff --model "$ROOT/tests/data/small-f32" --model "$ROOT/tests/data/small-gpt2" "the cat sat"

# -- a llama.cpp file (GGUF reader, its tokenizer, quantized weights): the trained SmolLM2 when
# tools/pymodel.sh has it (make test fetches it); said, not silently skipped, when it is not there
if g=$(tools/pymodel.sh smollm2 2>/dev/null); then
    G=(--model "$g/SmolLM2-135M-Instruct.Q4_1.gguf")
    run_case gguf.run "${G[@]}" --json o.json --html o.html --layers 0,29 "The cat sat on the mat. The cat sat"
    run_case gguf.predict "${G[@]}" --predict 3 --json - --layers 1 --heads 0-2 "The capital of France is"
    run_case gguf.generate "${G[@]}" --generate 4 --predict 2 --layers 2 --json - "The capital of France is"
    run_case gguf.batch "${G[@]}" --batch "$IN/s1.txt" --layers 3 --stats
    run_case gguf.heads heads "${G[@]}" "a b c a b c" --score induction --top 3
    run_case gguf.bad_layer "${G[@]}" --layers 40 "hi"
else
    echo "same_outputs: no SmolLM2 GGUF (tools/pymodel.sh smollm2): the GGUF cases are not run" >&2
fi

# -- errors: usage (exit 2) and runtime (exit 1)
run_case err_no_args
run_case err_unknown_option --frobnicate "hi"
run_case err_bad_layers "${D[@]}" --layers 3-1 "hi"
run_case err_layer_out_of_range "${D[@]}" --layers 5 "hi"
run_case err_head_out_of_range "${D[@]}" --heads 12 "hi"
run_case err_initial_head "${D[@]}" --head 40 "hi"
run_case err_precision "${D[@]}" --precision 12 "hi"
run_case err_view "${D[@]}" --view nope "hi"
run_case err_three_texts "${D[@]}" a b c
run_case err_batch_and_text "${D[@]}" --batch "$IN/batch.txt" "hi"
run_case err_missing_model --model /nonexistent "hi"
run_case err_missing_batch "${D[@]}" --batch "$IN/nope.txt"
run_case err_predict_range "${D[@]}" --predict 500 "hi"
run_case err_generate_encoder "${D[@]}" --generate 3 "hi"
run_case err_predict_no_mask "${D[@]}" --predict 3 --json - "no mask here"
run_case err_max_capture "${D[@]}" --max-capture 1K "time flies like an arrow"
run_case err_diff_one_text diff "${D[@]}" "only one"
run_case err_stats_no_merge stats
run_case err_heads_bad_score heads "${D[@]}" --score nope "hi"
run_case err_serve_host serve --host example.com --model "$DEMO"
run_case err_serve_port serve --port 70000
run_case err_serve_batch serve --batch x.txt
run_case err_port_without_serve --port 1234 "hello"
run_case err_serve_missing_model serve --port 0 --model /nonexistent
run_case err_out_dir_without_batch "${D[@]}" --out-dir x "hi"
run_case err_json_unwritable "${D[@]}" --json /nonexistent/dir/o.json "hi"
run_case err_diff_pack diff "${D[@]}" --pack-tokens 5 a b
run_case err_score_without_heads --score previous hi
run_case err_score_pattern_needs_rule heads "${D[@]}" --score pattern x
run_case err_merge_without_files stats --merge
run_case err_merge_without_stats --merge a
run_case err_meta_without_render --meta x hi
run_case err_meta_with_serve serve --meta x
run_case err_render_two_inputs render a b
run_case err_option_needs_value --layers
run_case err_view_diff_only "${D[@]}" --view diff hi
run_case err_generate_pair "${D[@]}" --generate 2 a b
run_case err_sampling_without_generate "${D[@]}" --temperature 0.5 hi

# -- the live server: a fixed sequence of requests, answers (status, body) compared
serve_case() {
    local side bin
    for side in old new; do
        [ $side = old ] && bin=$OLD || bin=$NEW
        rm -rf "$W" && mkdir -p "$W" && cp "$bin" "$W/attnviz"
        (cd "$W" && python3 - ./attnviz "$DEMO" "$ROOT/tests/data/small-gpt2" <<'PY' >"$W/.stdout" 2>"$W/.stderr"
import http.client, json, re, signal, subprocess, sys
b, demo, gpt2 = sys.argv[1:4]
p = subprocess.Popen([b, "serve", "--port", "0", "--model", demo, "--model", gpt2, "--max-tokens", "6"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
m = re.match(r"^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{32})$", p.stdout.readline().strip())
port, tok = int(m.group(1)), m.group(2)
n = 0
def req(method, path, body=None):
    global n
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers={"Host": f"127.0.0.1:{port}", "X-Attnviz-Token": tok})
    r = c.getresponse()
    data = r.read().replace(tok.encode(), b"TOKEN")
    shown = re.sub(rb'"ms":\{[^}]*\}', b'"ms":{TIMES}', data)  # run times differ run to run
    n += 1
    open(f"r{n:02d}", "wb").write(f"{method} {path} -> {r.status} {r.getheader('Content-Type')}\n".encode() + shown)
    return data if r.status == 200 and data[:1] == b"{" else b""
req("GET", "/api/models")
run = lambda body: json.loads(req("POST", "/api/run", json.dumps(body)) or b"{}")
a = run({"text": "time flies like an arrow", "model": 0})
bb = run({"text": "one two three four five six seven eight nine", "model": 0})
c = run({"text": "the cat sat on", "model": 1, "predict": 3})
run({"text": "the cat", "text_b": "sat", "model": 0})
run({"text": "", "model": 0})
run({"text": "x", "model": 5})
req("POST", "/api/run", "not json")
for r in (a, bb, c):
    if "run" in r:
        req("GET", f"/api/attention?run={r['run']}&layer=1")
        req("GET", f"/api/attention?run={r['run']}&layer=0&heads=2,1")
        req("GET", f"/api/thumbs?run={r['run']}")
        req("GET", f"/api/qk?run={r['run']}&layer=1&head=1")
        req("GET", f"/api/page?run={r['run']}")
        req("GET", f"/api/page?run={r['run']}&layers=1")
req("GET", "/api/attention?run=999&layer=0")
req("GET", "/")
p.send_signal(signal.SIGTERM)
rc = p.wait(timeout=30)
print("exit", rc)
sys.stdout.write(p.stderr.read().replace(tok, "TOKEN"))
PY
        )
        rm -f "$W/attnviz"
        mkdir -p "$T/$side" && rm -rf "$T/$side/serve" && mv "$W" "$T/$side/serve"
    done
    compare serve
}
serve_case

echo "same_outputs: $cases cases, $files outputs compared, $diffs differ"
[ $diffs -eq 0 ]
