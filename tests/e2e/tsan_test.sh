#!/bin/bash
# tsan_test.sh — the server and the batch path under ThreadSanitizer (make tsan
# builds build-tsan/attnviz): a --batch run whose long lines use the worker
# pool, N mixed requests (default 600) at 4-16 connections to attnviz serve,
# and N/2 to its OpenAI-compatible routes from 16 clients (whole and streamed
# completions at once, with attention, refused, and streams the client leaves
# mid-way: tests/e2e/openai_load.py), then 16 streams waiting for the model while
# other requests are answered, all left at once, and a stop with streams
# running. Any ThreadSanitizer report is a failure. tests/e2e/tsan.supp lists
# what is suppressed in third-party code, and why.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=build-tsan/attnviz
N=${1:-600}
if [ ! -x "$BIN" ]; then
    fail "tsan" "$BIN is not built (make tsan)"
    exit 1
fi
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$PWD/tests/e2e/tsan.supp log_path=$T/tsan"
reports() { cat "$T"/tsan.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer'; }
summary() { cat "$T"/tsan.* 2>/dev/null | grep 'SUMMARY: ThreadSanitizer' | sort | uniq -c | head -5; }

# the batch path: lines of 20 to 110 words, packed and alone, on two threads
python3 - >"$T/batch.txt" <<'PY'
import random
random.seed(1)
w = open("tools/demo_words.txt").read().split()[:300]
for i in range(30):
    print(" ".join(random.choice(w) for _ in range(20 + i * 3)))
PY
"$BIN" --model weights/demo --threads 2 --quiet --batch "$T/batch.txt" --json "$T/out.jsonl"
rc=$?
n=$(reports)
if [ "$rc" -eq 0 ] && [ "$n" -eq 0 ] && [ "$(wc -l <"$T/out.jsonl")" -eq 30 ]; then
    pass "tsan: --batch on two threads, 30 lines, no data race"
else
    fail "tsan: --batch on two threads" "exit $rc, $n reports: $(summary)"
fi
rm -f "$T"/tsan.*

# the server: mixed requests at 16, 4 and 8 connections
ATTNVIZ_NO_RSS_CHECK=1 python3 tests/e2e/serve_check.py "$BIN" load "$N" | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [tsan] /'
n=$(reports)
if [ "$n" -eq 0 ]; then
    pass "tsan: attnviz serve under $N requests, no data race"
else
    fail "tsan: attnviz serve under $N requests" "$n reports: $(summary)"
fi
rm -f "$T"/tsan.*

# the OpenAI-compatible routes: completions whole and streamed at once from 16 clients, streams left
# mid-way (their generation cancelled, the connection closed while suspended or while sending)
python3 tests/e2e/openai_load.py "$BIN" tests/data/small-llama small-llama 16 $((N / 2)) | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [tsan] /'
# 16 streams waiting for the model (their connections suspended, resumed by the generating threads),
# a whole completion waiting, the clients leaving all at once (SmolLM2: its first stream generates
# for longer than the other requests take)
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    python3 tests/e2e/openai_load.py "$BIN" "$d/SmolLM2-135M-Instruct.Q4_1.gguf" SmolLM2-135M-Instruct.Q4_1.gguf \
        --slow-streams 16 | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [tsan] /'
else
    skip "tsan: 16 waiting streams" "no SmolLM2 GGUF (tools/pymodel.sh smollm2)"
fi
# a stop while streams run: every stream's thread ends and resumes its connection before
# libmicrohttpd stops
"$BIN" serve --port 0 --model tests/data/small-llama >"$T/url" 2>/dev/null &
spid=$!
for _ in $(seq 300); do [ -s "$T/url" ] && break; sleep 0.1; done
url=$(head -1 "$T/url")
base=${url%%/?token=*} tok=${url##*token=}
for i in $(seq 8); do
    curl -sN -H "Authorization: Bearer $tok" "$base/v1/completions" \
        -d '{"model":"small-llama","prompt":"the cat","max_tokens":60,"stream":true,"seed":'"$i"'}' >/dev/null &
done
sleep 1
kill "$spid"
wait "$spid"
src=$?
wait
n=$(reports)
if [ "$n" -eq 0 ] && [ "$src" -eq 0 ]; then
    pass "tsan: the OpenAI routes under $((N / 2)) requests, waiting streams left at once, a stop with 8 streams: no data race"
else
    fail "tsan: the OpenAI routes" "stop exit $src, $n reports: $(summary)"
fi
exit 0
