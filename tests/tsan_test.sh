#!/bin/bash
# tsan_test.sh — the server and the batch path under ThreadSanitizer (make tsan
# builds build-tsan/attnviz): a --batch run whose long lines use the worker
# pool, and N mixed requests (default 600) at 4-16 connections to attnviz serve.
# Any ThreadSanitizer report is a failure. tests/tsan.supp lists what is
# suppressed in third-party code, and why.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
BIN=build-tsan/attnviz
N=${1:-600}
if [ ! -x "$BIN" ]; then
    fail "tsan" "$BIN is not built (make tsan)"
    exit 1
fi
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$PWD/tests/tsan.supp log_path=$T/tsan"
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
ATTNVIZ_NO_RSS_CHECK=1 python3 tests/serve_check.py "$BIN" load "$N" | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [tsan] /'
n=$(reports)
if [ "$n" -eq 0 ]; then
    pass "tsan: attnviz serve under $N requests, no data race"
else
    fail "tsan: attnviz serve under $N requests" "$n reports: $(summary)"
fi
exit 0
