#!/bin/bash
# serve_test.sh — attnviz serve end to end, on loopback (tests/e2e/serve_check.py):
# responses against the CLI's outputs, 40+ hostile requests (also under
# AddressSanitizer when make test has built build-asan/attnviz), 10,000 mixed
# requests at 4-16 connections, the bounded queue on the real SmolLM2 GGUF, and
# a long input's tiles and exact rows against the full matrix (tiles mode), 4,000 slow connections
# from another process while a normal client is answered within 1 s (starve mode), uploaded pictures
# (image mode: POST /api/image against the CLI's --image, bombs, truncated files, wrong types), q/k kept in
# 16 bits against the f32 server (qkprec mode), and encoder-decoder runs under
# AddressSanitizer (seq2seq mode; tests/e2e/seq2seq_test.sh runs it on ./attnviz).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null; then
    skip "attnviz serve" "no python3 for the HTTP client"
    exit 0
fi
"$PY" tests/e2e/serve_check.py ./attnviz functional
"$PY" tests/e2e/serve_check.py ./attnviz hostile
"$PY" tests/e2e/serve_check.py ./attnviz norm
"$PY" tests/e2e/serve_check.py ./attnviz tiles
"$PY" tests/e2e/serve_check.py ./attnviz qkprec
"$PY" tests/e2e/serve_check.py ./attnviz image
if [ -x build-asan/attnviz ]; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$PY" tests/e2e/serve_check.py build-asan/attnviz hostile | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [asan] /'
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$PY" tests/e2e/serve_check.py build-asan/attnviz tiles | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [asan] /'
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$PY" tests/e2e/serve_check.py build-asan/attnviz seq2seq | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [asan] /'
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$PY" tests/e2e/serve_check.py build-asan/attnviz image | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 [asan] /'
else
    skip "serve hostile requests under AddressSanitizer" "build-asan/attnviz not built (make test builds it)"
fi
"$PY" tests/e2e/serve_check.py ./attnviz load 10000
# 4,000 slow connections without the token from another process: the user is still answered
"$PY" tests/e2e/serve_check.py ./attnviz starve 4000
gguf=""
if d=$(tools/pymodel.sh smollm2 2>/dev/null); then gguf="$d/SmolLM2-135M-Instruct.Q4_1.gguf"; fi
"$PY" tests/e2e/serve_check.py ./attnviz queue "$gguf"
"$PY" tests/e2e/serve_check.py ./attnviz chat "$gguf"

# usage errors: one line, exit 2
expect_exit "serve: a host name is refused (numeric only)" 2 "numeric" ./attnviz serve --host example.com --model weights/demo
expect_exit "serve: --port out of range" 2 "--port" ./attnviz serve --port 70000
expect_exit "serve: with --batch" 2 "^attnviz: --batch goes with .*, not attnviz serve" ./attnviz serve --batch x.txt
expect_exit "serve options without serve" 2 "^attnviz: --port goes with attnviz serve, not a run" ./attnviz --port 1234 "hello"
expect_exit "serve: --long-from 0 is refused" 2 "--long-from" ./attnviz serve --long-from 0
expect_exit "serve: --long-from past 8192 is refused" 2 "1 to 8192" ./attnviz serve --long-from 9000
expect_exit "--idle-timeout without serve" 2 "^attnviz: --idle-timeout goes with attnviz serve, not a run" ./attnviz --idle-timeout 5 "hello"
expect_exit "--long-from without serve, with an output the long page cannot honour" 2 "--long-from writes a long input's page" \
    ./attnviz --long-from 100 --json - "hello"
expect_exit "serve: --qk-precision f8 is refused" 2 "--qk-precision is f32, f16 or bf16, not 'f8'" ./attnviz serve --qk-precision f8
expect_exit "serve: --qk-precision F16 (case matters) is refused" 2 "--qk-precision is f32, f16 or bf16" ./attnviz serve --qk-precision F16
expect_exit "--qk-precision without serve" 2 "^attnviz: --qk-precision goes with attnviz serve, not a run" ./attnviz --qk-precision f16 "hello"
expect_exit "serve: a model that is not there, named once" 1 "^attnviz: /nonexistent: no such file or directory$" \
    ./attnviz serve --port 0 --model /nonexistent
exit 0
