#!/bin/bash
# long_html_test.sh — the command line's own page of a long input (--html past
# --long-from): byte for byte attnviz serve's Download page of the same input,
# every number against the full matrix on a short input forced long, peak
# memory against the n^2 the whole attention would take (tests/serve_check.py
# longhtml), and the options it cannot honour refused with one usage line.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
PY=${PYTHON:-python3}
if command -v "$PY" >/dev/null; then
    "$PY" tests/serve_check.py ./attnviz longhtml
else
    skip "the command line's long page" "no python3 for the page's decoder"
fi

# usage errors: one line, exit 2, naming the option the long page cannot honour
for opt in "--json $T/x.json" "--npy $T/x.npy" --qk --hidden --stats "--measure norm" "--layers 0" "--heads 1" \
    --no-special --words "--generate 3" "--telemetry 4"; do
    # shellcheck disable=SC2086
    expect_exit "--long-from with ${opt%% *} is refused" 2 "^attnviz: --long-from writes a long input's page .*not with ${opt%% *}" \
        ./attnviz --model weights/demo --long-from 8 --html "$T/p.html" $opt "the cat sat on the mat"
done
expect_exit "--long-from with --batch is refused" 2 "not with --batch" ./attnviz --long-from 8 --batch /dev/null
expect_exit "--long-from with diff is refused" 2 "^attnviz: --long-from goes with a run \(attnviz TEXT\) or attnviz serve, not attnviz diff" ./attnviz diff --long-from 8 "a b" "c d"
expect_exit "--long-from 0 is refused" 2 "1 to 8192" ./attnviz --long-from 0 --html "$T/p.html" "hello"
expect_exit "--long-from past 8192 is refused" 2 "1 to 8192" ./attnviz --long-from 9000 --html "$T/p.html" "hello"
if [ "$(wc -l <"$T/err")" -eq 1 ]; then pass "a usage error is one line"; else fail "a usage error is one line" "$(cat "$T/err")"; fi

# forced on the demo model's short input: the long page (no av-att chunk), and without --long-from the whole page
if ./attnviz --quiet --model weights/demo --long-from 4 --html "$T/long.html" "the cat sat on the mat" &&
    grep -q '"embedded":' "$T/long.html" && ! grep -q 'id="av-att-0"' "$T/long.html"; then
    pass "--long-from 4 gives a 9-token input the long page"
else
    fail "--long-from 4 gives a 9-token input the long page" "$(head -c 300 "$T/long.html" 2>&1)"
fi
if ./attnviz --quiet --model weights/demo --html "$T/whole.html" "the cat sat on the mat" &&
    grep -q 'id="av-att-0"' "$T/whole.html" && ! grep -q '"embedded":' "$T/whole.html"; then
    pass "without --long-from a short input's page holds its whole matrices"
else
    fail "without --long-from a short input's page holds its whole matrices" "$(head -c 300 "$T/whole.html" 2>&1)"
fi
# under AddressSanitizer + UBSan (when make test has built build-asan/attnviz): the pass, the grids and the writer
if [ -x build-asan/attnviz ]; then
    text=$(printf 'the cat sat. %.0s' $(seq 120))
    mkdir -p "$T/llama"
    sed 's/"max_position_embeddings": *64/"max_position_embeddings": 4096/' tests/data/small-llama/config.json >"$T/llama/config.json"
    ln -s "$PWD/tests/data/small-llama/model.safetensors" "$PWD/tests/data/small-llama/tokenizer.json" "$T/llama/"
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/lsan.supp:print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build-asan/attnviz --quiet --model "$T/llama" \
        --long-from 256 --predict 2 --html "$T/asan.html" "$text" 2>"$T/asan.err" && grep -q '"embedded":2' "$T/asan.html"; then
        pass "[asan] a long page past --long-from 256, with --predict"
    else
        fail "[asan] a long page past --long-from 256, with --predict" "$(head -c 2000 "$T/asan.err")"
    fi
else
    skip "the long page under AddressSanitizer" "build-asan/attnviz not built (make test builds it)"
fi
exit 0
