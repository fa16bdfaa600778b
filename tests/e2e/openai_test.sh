#!/bin/bash
# openai_test.sh — attnviz serve's OpenAI-compatible routes (/v1/...) with curl, on
# loopback: the server-sent events' framing and [DONE], streamed against whole answers,
# OpenAI's error bodies and statuses for refused requests, the token as Authorization:
# Bearer, Host refusal, stop strings, seeded sampling, the attention extension's shape;
# on the SmolLM2 GGUF (tools/pymodel.sh smollm2), the bounded queue's 429 and a client
# that leaves mid-stream (its place freed at once, the server's memory flat over repeats), 16 slow
# streams that starve no other request; a load of 300 requests from 16 clients (tests/e2e/openai_load.py).
# The answers' numbers against transformers and the official openai client:
# tests/ref/openai_check.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
PY=${PYTHON:-python3}
command -v curl >/dev/null || { skip "openai routes" "no curl"; exit 0; }
command -v "$PY" >/dev/null || { skip "openai routes" "no python3 to read JSON"; exit 0; }
make -s -j2 attnviz >/dev/null || { fail "openai routes" "build failed"; exit 0; }

# start_server ARGS...: sets BASE, TOK, PID (stdout to $T/url)
start_server() {
    : >"$T/url"
    ./attnviz serve --port 0 "$@" >"$T/url" 2>"$T/serve.err" &
    PID=$!
    for _ in $(seq 100); do [ -s "$T/url" ] && break; sleep 0.1; done
    local url
    url=$(head -1 "$T/url")
    BASE=${url%%/?token=*}
    TOK=${url##*token=}
}
stop_server() { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
# post PATH BODY [curl args...]: the body in $T/body, the status echoed
post() {
    local path=$1 body=$2
    shift 2
    curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' \
        "$@" "$BASE$path" --data-binary "$body"
}
# jcheck NAME PYTHON-EXPRESSION: the expression over j (the JSON in $T/body) must be true
jcheck() {
    local name=$1 expr=$2
    if out=$("$PY" -c "import json,sys; j=json.load(open('$T/body')); sys.exit(0 if ($expr) else 1)" 2>&1); then
        pass "$name"
    else
        fail "$name" "$(head -c 400 "$T/body") $out"
    fi
}
# refused NAME STATUS PARAM-OR-NONE PATTERN PATH BODY: an OpenAI error body with that status, param and message
refused() {
    local name=$1 want=$2 param=$3 pat=$4 path=$5 body=$6
    local st
    st=$(post "$path" "$body")
    if [ "$st" != "$want" ]; then fail "$name" "status $st, want $want: $(head -c 300 "$T/body")"; return; fi
    local p="None"
    [ "$param" != None ] && p="'$param'"
    if "$PY" - "$T/body" "$p" "$pat" <<'EOF'
import json, re, sys
e = json.load(open(sys.argv[1]))["error"]
ok = set(e) == {"message", "type", "param", "code"} and isinstance(e["message"], str) and isinstance(e["type"], str)
ok = ok and e["param"] == eval(sys.argv[2]) and re.search(sys.argv[3], e["message"])
sys.exit(0 if ok else 1)
EOF
    then pass "$name"; else fail "$name" "body $(head -c 300 "$T/body")"; fi
}

# ---------------------------------------------------------------- the tiny Llama fixture
start_server --model tests/data/small-llama
M=small-llama
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/models")
[ "$st" = 200 ] && jcheck "openai: GET /v1/models lists the model" "j['object'] == 'list' and [m['id'] for m in j['data']] == ['$M'] and j['data'][0]['object'] == 'model'" ||
    fail "openai: GET /v1/models" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/models/$M")
[ "$st" = 200 ] && jcheck "openai: GET /v1/models/ID" "j['id'] == '$M'" || fail "openai: GET /v1/models/ID" "status $st"

# the token: as Bearer, as X-Attnviz-Token; missing or wrong: 401 in OpenAI's shape
st=$(curl -s -o "$T/body" -w '%{http_code}' "$BASE/v1/models")
[ "$st" = 401 ] && jcheck "openai: no token: 401 invalid_api_key" "j['error']['code'] == 'invalid_api_key'" ||
    fail "openai: no token: 401" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer 0123" "$BASE/v1/models")
[ "$st" = 401 ] && pass "openai: a wrong Bearer token: 401" || fail "openai: a wrong Bearer token: 401" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Basic $TOK" "$BASE/v1/models")
[ "$st" = 401 ] && pass "openai: the token in another scheme than Bearer: 401" || fail "openai: Basic scheme" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "X-Attnviz-Token: $TOK" "$BASE/v1/models")
[ "$st" = 200 ] && pass "openai: X-Attnviz-Token is accepted too" || fail "openai: X-Attnviz-Token" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" -H "Host: attacker.example:80" "$BASE/v1/models")
[ "$st" = 403 ] && jcheck "openai: a foreign Host header: 403 in OpenAI's shape" "'Host' in j['error']['message']" ||
    fail "openai: a foreign Host: 403" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/api/models")
[ "$st" = 200 ] && pass "openai: Bearer opens the page's API too" || fail "openai: Bearer on /api/models" "status $st"

# a whole answer, and the same streamed: SSE framing, one finish, the same text
st=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":12,"temperature":0}')
cp "$T/body" "$T/whole"
[ "$st" = 200 ] && jcheck "openai: completions: a text_completion with usage" \
    "j['object'] == 'text_completion' and j['id'].startswith('cmpl-') and len(j['choices']) == 1 and j['choices'][0]['finish_reason'] in ('length', 'stop') and j['usage']['total_tokens'] == j['usage']['prompt_tokens'] + j['usage']['completion_tokens'] and j['usage']['completion_tokens'] <= 12" ||
    fail "openai: completions" "status $st $(head -c 300 "$T/body")"
curl -s -D "$T/headers" -o "$T/sse" -H "Authorization: Bearer $TOK" "$BASE/v1/completions" \
    --data-binary '{"model":"'$M'","prompt":"the cat","max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
if "$PY" - "$T/sse" "$T/whole" "$T/headers" <<'EOF'
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
whole = json.load(open(sys.argv[2]))
headers = open(sys.argv[3]).read().lower()
assert "content-type: text/event-stream" in headers, headers
assert raw.endswith("data: [DONE]\n\n"), raw[-80:]
events = raw.split("\n\n")[:-1]
assert all(e.startswith("data: ") and "\n" not in e for e in events), [e for e in events if not e.startswith("data: ")][:1]
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
fin = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
assert fin[-1] == whole["choices"][0]["finish_reason"] and all(f is None for f in fin[:-1]), fin
text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
assert text == whole["choices"][0]["text"], (text, whole["choices"][0]["text"])
usage = [c for c in chunks if not c["choices"]]
assert len(usage) == 1 and usage[0]["usage"] == whole["usage"], usage
EOF
then pass "openai: streamed completions: data: events, one finish, [DONE], the whole answer's text and usage"
else fail "openai: streamed completions" "$(head -c 600 "$T/sse")"; fi

# the attention extension: shapes, rows summing to 1, the sequence's ids
st=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":4,"temperature":0,"attention":{"layers":[1,0],"heads":[3],"top_k":2,"rows":true,"prompt":true}}')
[ "$st" = 200 ] && jcheck "openai: attention: layers and heads as asked, top-k, statistics, rows that sum to 1, the sequence" \
    "(lambda a, u: a['layers'] == [1, 0] and a['heads'] == [3] and len(a['prompt']) == u['prompt_tokens'] and len(a['tokens']) == u['completion_tokens'] and all(len(t['keys']) == 2 and len(t['keys'][0]) == 1 and len(t['keys'][0][0]) == 2 and len(t['rows'][0][0]) == t['position'] + 1 and abs(sum(t['rows'][1][0]) - 1) < 1e-5 and max(t['rows'][0][0]) == t['weights'][0][0][0] and t['sink'][0][0] == t['rows'][0][0][0] for t in a['prompt'] + a['tokens']) and a['sequence']['n_prompt'] == u['prompt_tokens'] and len(a['sequence']['ids']) == u['total_tokens'] and [t['position'] for t in a['tokens']] == list(range(u['prompt_tokens'], u['total_tokens'])))(j['attention'], j['usage'])" ||
    fail "openai: attention" "status $st $(head -c 300 "$T/body")"
st=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":4,"temperature":0}')
jcheck "openai: no attention unless asked" "'attention' not in j"

# stop strings: the text ends before the first; finish_reason stop
st=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":12,"temperature":0}')
stop=$("$PY" -c "import json; t=json.load(open('$T/body'))['choices'][0]['text']; print(t[3:5] if len(t) > 5 else '')")
if [ -n "$stop" ]; then
    st=$(post /v1/completions "$("$PY" -c "import json; print(json.dumps({'model':'$M','prompt':'the cat','max_tokens':12,'temperature':0,'stop':['zzzz', '''$stop''']}))")")
    want=$("$PY" -c "import json; t=json.load(open('$T/whole'))['choices'][0]['text']; print(json.dumps(t[:t.index('''$stop''')]))")
    jcheck "openai: stop: the text ends before the stop string, finish_reason stop" \
        "j['choices'][0]['finish_reason'] == 'stop' and j['choices'][0]['text'] == $want"
else
    fail "openai: stop" "the greedy text is too short to cut: $(head -c 200 "$T/whole")"
fi

# seeded sampling repeats; the two answers' texts
a=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":16,"temperature":1.0,"seed":11}'; cat "$T/body" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['choices'][0]['text'])")
b=$(post /v1/completions '{"model":"'$M'","prompt":"the cat","max_tokens":16,"temperature":1.0,"seed":11}'; cat "$T/body" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['choices'][0]['text'])")
[ "$a" = "$b" ] && pass "openai: a seed repeats a sampled answer" || fail "openai: seed" "'$a' vs '$b'"

# refusals: OpenAI's error body, the status, the field
refused "openai: n other than 1: 400 param n" 400 n "n must be 1" /v1/completions '{"model":"'$M'","prompt":"x","n":2}'
refused "openai: tools: 400 param tools" 400 tools "tools" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}'
refused "openai: a tool message: 400" 400 messages "tool" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"tool","content":"x"}]}'
refused "openai: not JSON: 400" 400 None "not valid JSON" /v1/completions '{"model":'
refused "openai: a duplicate key: 400 naming it" 400 None "\"prompt\" appears twice" /v1/completions '{"model":"'$M'","prompt":"a","prompt":"b"}'
refused "openai: a duplicate key inside attention: 400" 400 None "\"top_k\" appears twice" /v1/completions '{"model":"'$M'","prompt":"a","attention":{"top_k":1,"top_k":2}}'
refused "openai: an unknown field: 400 naming it" 400 None "Unrecognized request argument supplied: temprature" /v1/completions '{"model":"'$M'","prompt":"a","temprature":0}'
refused "openai: max_tokens 0: 400" 400 max_tokens "max_tokens must be" /v1/completions '{"model":"'$M'","prompt":"a","max_tokens":0}'
refused "openai: max_tokens past the limit: 400" 400 max_tokens "4096" /v1/completions '{"model":"'$M'","prompt":"a","max_tokens":100000}'
refused "openai: max_completion_tokens 1.5: 400" 400 max_completion_tokens "whole number" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":"x"}],"max_completion_tokens":1.5}'
refused "openai: temperature 3: 400" 400 temperature "0 to 2" /v1/completions '{"model":"'$M'","prompt":"a","temperature":3}'
refused "openai: top_p 0: 400" 400 top_p "top_p" /v1/completions '{"model":"'$M'","prompt":"a","top_p":0}'
refused "openai: five stop strings: 400" 400 stop "at most 4" /v1/completions '{"model":"'$M'","prompt":"a","stop":["a","b","c","d","e"]}'
refused "openai: an empty stop string: 400" 400 stop "non-empty" /v1/completions '{"model":"'$M'","prompt":"a","stop":""}'
refused "openai: top_logprobs 21: 400" 400 top_logprobs "0 to 20" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}'
refused "openai: an unknown model: 404 model_not_found" 404 model "does not exist" /v1/completions '{"model":"gpt-4o","prompt":"a"}'
refused "openai: no model: 400" 400 model "model parameter" /v1/completions '{"prompt":"a"}'
refused "openai: an empty prompt: 400" 400 prompt "empty" /v1/completions '{"model":"'$M'","prompt":""}'
refused "openai: several prompts: 400" 400 prompt "one prompt" /v1/completions '{"model":"'$M'","prompt":["a","b"]}'
refused "openai: a prompt longer than the positions: 400 with its length" 400 prompt "the prompt is [0-9]+ tokens; this model's 64 positions" /v1/completions "{\"model\":\"$M\",\"prompt\":\"$(printf 'the cat %.0s' $(seq 60))\"}"
refused "openai: a token id past the vocabulary: 400" 400 prompt "outside the model's vocabulary" /v1/completions '{"model":"'$M'","prompt":[1,2,4000]}'
refused "openai: attention layer out of range: 400" 400 attention.layers "layer 9 is not in the model" /v1/completions '{"model":"'$M'","prompt":"a","attention":{"layers":[9]}}'
refused "openai: attention top_k 65: 400" 400 attention.top_k "0 to 64" /v1/completions '{"model":"'$M'","prompt":"a","attention":{"top_k":65}}'
refused "openai: attention's unknown field: 400" 400 attention "unknown field \"row\"" /v1/completions '{"model":"'$M'","prompt":"a","attention":{"row":true}}'
refused "openai: chat on a model without a chat template: 400" 400 messages "chat template" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":"x"}]}'
refused "openai: an image part: 400" 400 messages "image_url" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
refused "openai: response_format json: 400" 400 response_format "only" /v1/chat/completions '{"model":"'$M'","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}'
refused "openai: stream_options without stream: 400" 400 stream_options "only allowed" /v1/completions '{"model":"'$M'","prompt":"a","stream_options":{"include_usage":true}}'
refused "openai: body not UTF-8: 400" 400 None "UTF-8" /v1/completions "$(printf '{"model":"%s","prompt":"\xff"}' $M)"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/completions")
[ "$st" = 405 ] && jcheck "openai: GET on a POST route: 405 in OpenAI's shape" "'takes POST' in j['error']['message']" || fail "openai: 405" "status $st"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/embeddings" -d '{}')
[ "$st" = 404 ] && jcheck "openai: an unknown /v1 route: 404 in OpenAI's shape" "j['error']['message'] == 'not found'" || fail "openai: 404" "status $st"
head -c 1100000 /dev/zero | tr '\0' ' ' >"$T/big"
st=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/completions" --data-binary @"$T/big")
[ "$st" = 413 ] && jcheck "openai: a body over 1 MB: 413 in OpenAI's shape" "'1 MB' in j['error']['message']" || fail "openai: 413" "status $st"
kill -0 "$PID" 2>/dev/null && pass "openai: the server is up after the refusals" || fail "openai: the server is up" "it exited: $(cat "$T/serve.err")"
stop_server

# load: 16 clients, mixed whole, streamed, attention, refused and left streams, RSS flat (make bench
# runs the same with 1,000 requests: bench/openai_bench.sh)
"$PY" tests/e2e/openai_load.py ./attnviz tests/data/small-llama small-llama 16 300

# ---------------------------------------------------------------- SmolLM2: queue and disconnects
if ! d=$(tools/pymodel.sh smollm2 2>/dev/null) || [ ! -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    skip "openai: 429 and disconnects on SmolLM2" "no SmolLM2 GGUF (tools/pymodel.sh smollm2)"
    exit 0
fi
start_server --model "$d/SmolLM2-135M-Instruct.Q4_1.gguf" --queue 1
M=SmolLM2-135M-Instruct.Q4_1.gguf
rss() { awk '/VmRSS/ {print $2}' /proc/"$PID"/status; }
# what a one-token request takes on its own (best of 3), to read the figures below by
base=999999
for _ in 1 2 3; do
    t0=$(date +%s%N)
    post /v1/completions '{"model":"'$M'","prompt":"hi","max_tokens":1}' >/dev/null
    t=$((($(date +%s%N) - t0) / 1000000))
    [ "$t" -lt "$base" ] && base=$t
done
long='{"model":"'$M'","prompt":"Once upon a time","max_tokens":2000,"temperature":0,"stream":true}'
# wait_free: until a one-token request is answered (not 429): the milliseconds in $ms, the status in $st
wait_free() {
    local t0
    t0=$(date +%s%N)
    for _ in $(seq 200); do
        st=$(post /v1/completions '{"model":"'$M'","prompt":"hi","max_tokens":1}')
        [ "$st" != 429 ] && break
        sleep 0.02
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
}
# stream_then_leave: a stream that is left after its first events (its place back before the next)
stream_then_leave() {
    wait_free
    : >"$T/partial"
    curl -sN -H "Authorization: Bearer $TOK" "$BASE/v1/completions" --data-binary "$long" >"$T/partial" &
    local c=$!
    for _ in $(seq 200); do [ "$(grep -c '^data: ' "$T/partial")" -ge 3 ] && break; sleep 0.02; done
    kill "$c" 2>/dev/null
    wait "$c" 2>/dev/null
    [ -n "${TRACE:-}" ] && echo "  stream left after $(grep -c '^data: ' "$T/partial") events; place back in ${ms} ms" >&2
}
# a whole completion generating (4,000 tokens asked) holds the one place (429 to a probe); meanwhile
# GET /v1/models and the page are answered before it ends (its client still waiting: the order is
# checked, not a time), and its client leaving frees the place at once. (A probe that took the place
# first turns the whole request away: it is sent again.)
for _ in 1 2 3 4 5; do
    curl -s -o /dev/null -H "Authorization: Bearer $TOK" "$BASE/v1/completions" \
        --data-binary '{"model":"'$M'","prompt":"Once upon a time","max_tokens":4000,"temperature":0}' &
    c=$!
    st=
    for _ in $(seq 200); do
        kill -0 "$c" 2>/dev/null || break
        st=$(post /v1/completions '{"model":"'$M'","prompt":"hi","max_tokens":1}')
        [ "$st" = 429 ] && break
        sleep 0.02
    done
    [ "$st" = 429 ] && break
    wait "$c" 2>/dev/null
done
t0=$(date +%s%N)
stm=$(curl -s --max-time 60 -o "$T/models" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/models")
stp=$(curl -s --max-time 60 -o /dev/null -w '%{http_code}' "$BASE/?token=$TOK")
t=$((($(date +%s%N) - t0) / 1000000))
if [ "$st" = 429 ] && [ "$stm" = 200 ] && [ "$stp" = 200 ] && grep -q "\"$M\"" "$T/models" && kill -0 "$c" 2>/dev/null; then
    pass "openai: a whole completion generating: GET /v1/models and the page answered before it ends (both in $t ms)"
else
    fail "openai: other clients during a whole completion" "probe $st, /v1/models $stm, page $stp, the completion's client $(kill -0 "$c" 2>/dev/null && echo waiting || echo done)"
fi
kill "$c" 2>/dev/null
wait "$c" 2>/dev/null
wait_free
[ "$st" = 200 ] && [ "$ms" -lt $((base + 3000)) ] &&
    pass "openai: a client leaving a whole completion frees its place (the next request answered after ${ms} ms; alone it takes ${base} ms)" ||
    fail "openai: a client leaving a whole completion frees its place" "status $st after ${ms} ms"
: >"$T/partial"
curl -sN -H "Authorization: Bearer $TOK" "$BASE/v1/completions" --data-binary "$long" >"$T/partial" &
c=$!
for _ in $(seq 100); do [ "$(grep -c '^data: ' "$T/partial")" -ge 2 ] && break; sleep 0.05; done
st=$(post /v1/completions '{"model":"'$M'","prompt":"hi","max_tokens":1}' -D "$T/h429")
[ "$st" = 429 ] && jcheck "openai: past --queue: 429 rate_limit_exceeded with Retry-After" \
    "j['error']['code'] == 'rate_limit_exceeded' and 'retry-after' in open('$T/h429').read().lower()" ||
    fail "openai: 429" "status $st $(head -c 200 "$T/body")"
kill "$c" 2>/dev/null
wait "$c" 2>/dev/null
wait_free
[ "$st" = 200 ] && [ "$ms" -lt $((base + 3000)) ] &&
    pass "openai: a client leaving mid-stream frees its place (the next request answered after ${ms} ms; alone it takes ${base} ms)" ||
    fail "openai: a client leaving mid-stream frees its place" "status $st after ${ms} ms"
for _ in 1 2 3; do stream_then_leave; done
before=$(rss)
for _ in $(seq 8); do stream_then_leave; done
wait_free
after=$(rss)
grow=$(((after - before) / 1024))
[ "$grow" -lt 16 ] && pass "openai: 8 streams left mid-way: RSS $((before / 1024)) -> $((after / 1024)) MB" ||
    fail "openai: RSS over streams left mid-way" "$((before / 1024)) -> $((after / 1024)) MB"
kill -0 "$PID" 2>/dev/null && pass "openai: the server is up after the disconnects" || fail "openai: the server is up" "$(cat "$T/serve.err")"
stop_server
# SIGTERM with two streams and a whole completion running: each ends with OpenAI's error (503, the
# server is stopping), the server exits 0
start_server --model "$d/SmolLM2-135M-Instruct.Q4_1.gguf"
for i in 1 2; do
    curl -sN -H "Authorization: Bearer $TOK" "$BASE/v1/completions" --data-binary "$long" >"$T/stop$i" &
done
curl -s -o "$T/stopw" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$BASE/v1/completions" \
    --data-binary '{"model":"'$M'","prompt":"Once upon a time","max_tokens":2000}' >"$T/stopst" &
for _ in $(seq 100); do [ "$(cat "$T/stop1" "$T/stop2" | grep -c '^data: ')" -ge 3 ] && break; sleep 0.05; done
kill "$PID"
wait "$PID"
rc=$?
wait
if [ $rc -eq 0 ] && [ "$(cat "$T/stopst")" = 503 ] && grep -q 'the server is stopping' "$T/stopw" &&
    [ "$(grep -c '^data: {"error":{"message":"the server is stopping"' "$T/stop1" "$T/stop2" | grep -c ':1$')" = 2 ]; then
    pass "openai: SIGTERM while generating: each stream's last event and the whole answer say 503 the server is stopping, exit 0"
else
    fail "openai: SIGTERM while generating" "exit $rc, whole $(cat "$T/stopst") $(head -c 200 "$T/stopw"), streams end $(tail -c 120 "$T/stop1") / $(tail -c 120 "$T/stop2")"
fi
# 16 streams and a whole completion waiting for the model hold no thread libmicrohttpd needs: the
# requests that need no model are answered meanwhile
"$PY" tests/e2e/openai_load.py ./attnviz "$d/SmolLM2-135M-Instruct.Q4_1.gguf" "$M" --slow-streams 16
exit 0
