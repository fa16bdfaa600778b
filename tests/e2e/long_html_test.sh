#!/bin/bash
# long_html_test.sh — the command line's own page of a long input (--html past
# --long-from): byte for byte attnviz serve's Download page of the same input,
# every number against the full matrix on a short input forced long, peak
# memory against the n^2 the whole attention would take (tests/e2e/serve_check.py
# longhtml), and the options it cannot honour refused with one usage line.
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
PY=${PYTHON:-python3}
if command -v "$PY" >/dev/null; then
    "$PY" tests/e2e/serve_check.py ./attnviz longhtml
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
expect_exit "--long-from 0 with serve is refused" 2 "0 goes with a run.s page" ./attnviz serve --long-from 0
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
# The long-input budget (docs/long-inputs.md, run/plan.c): small-llama given 8,192 positions. Before a run the
# capture, run state and page are estimated; where the whole matrices would pass --max-capture or make a page
# past 50 MB, the page is the long input's, said in one line with how to force the whole matrices; a run is
# refused only where nothing fits, naming every remedy that would.
mkdir -p "$T/l8k"
sed 's/"max_position_embeddings": *64/"max_position_embeddings": 8192/' tests/data/small-llama/config.json >"$T/l8k/config.json"
ln -s "$PWD/tests/data/small-llama/model.safetensors" "$PWD/tests/data/small-llama/tokenizer.json" "$T/l8k/"
mid=$(printf 'the cat sat. %.0s' $(seq 150)) # 1,502 tokens: 8 heads' matrices take 73 MB
# peak_rss_kb CMD...: runs CMD (stderr to $T/err), prints its peak resident set in kB; the status is CMD's
peak_rss_kb() {
    python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:], stderr=open(sys.argv[1], "w")).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)' "$T/err" "$@"
}
if rss_long=$(peak_rss_kb ./attnviz --model "$T/l8k" --max-capture 20M --html "$T/auto.html" "$mid") &&
    [ "$(grep -c "writing the long input's page" "$T/err")" -eq 1 ] &&
    grep -qE "^attnviz: 1502 tokens: the whole matrices need 73.0 MB, above the 20.0 MB allowed \(--max-capture\): writing the long input's page \(.*; [0-9.]+ MB held\); --long-from 0 --max-capture 1G writes the whole matrices$" "$T/err" &&
    grep -q '"embedded":' "$T/auto.html" && ! grep -q 'id="av-att-0"' "$T/auto.html"; then
    pass "budget: past --max-capture the page is the long input's, said in one line with how to force the whole matrices"
else
    fail "budget: past --max-capture the page is the long input's" "$(cat "$T/err")"
fi
if rss_whole=$(peak_rss_kb ./attnviz --quiet --model "$T/l8k" --long-from 0 --max-capture 1G --html "$T/whole.html" "$mid") &&
    grep -q 'id="av-att-0"' "$T/whole.html" && [ -n "$rss_long" ] && [ $((rss_long + 40000)) -lt "$rss_whole" ]; then
    pass "budget: the long page's run holds less than the whole matrices (peak RSS ${rss_long} kB vs --long-from 0's ${rss_whole} kB)"
else
    fail "budget: the long page's run holds less than the whole matrices" "long ${rss_long:-?} kB, whole ${rss_whole:-?} kB: $(cat "$T/err")"
fi
# past the page bound with the memory to spare: 6,502 tokens would make a page past 50 MB
big=$(printf 'the cat sat. %.0s' $(seq 650))
if ./attnviz --model "$T/l8k" --html "$T/big.html" "$big" 2>"$T/err" &&
    grep -qE "^attnviz: 6502 tokens: the whole matrices would hold [0-9.]+ GB and make a page of up to [0-9.]+ MB \(a browser struggles past 50 MB\): writing the long input's page \(.*; [0-9.]+ MB held\); --long-from 0 writes the whole matrices$" "$T/err" &&
    [ "$(stat -c %s "$T/big.html")" -le 50000000 ] && grep -qE "^attnviz: wrote $T/big.html \([0-9.]+ [kM]B\): 6502 tokens: a long input's page" "$T/err"; then
    pass "budget: past the page bound the page is the long input's, its size said"
else
    fail "budget: past the page bound the page is the long input's" "$(cat "$T/err")"
fi
if ./attnviz --quiet --model "$T/l8k" --html "$T/small.html" "$(printf 'the cat sat. %.0s' $(seq 20))" 2>"$T/err" &&
    grep -q 'id="av-att-0"' "$T/small.html"; then
    pass "budget: within both bounds the page holds the whole matrices"
else
    fail "budget: within both bounds the page holds the whole matrices" "$(cat "$T/err")"
fi
# nothing of the whole matrices fits and --json needs them: one line naming every remedy, each of which then runs
expect_exit "budget: refused with --json, every remedy named" 1 \
    "^attnviz: capturing 1502 tokens x 2 layers x 4 heads needs 73.0 MB, above the 20.0 MB allowed \(--max-capture\): what fits: the long input's page \(without --json: --html FILE alone\), attnviz serve, select fewer with --layers/--heads \([0-9] of the 8 heads fit\), --telemetry 8 --json FILE .*, a shorter input \(--max-tokens [0-9]+ fits\), --max-capture 1G" \
    ./attnviz --model "$T/l8k" --max-capture 20M --json "$T/x.json" "$mid"
if [ "$(wc -l <"$T/err")" -eq 2 ]; then pass "budget: the refusal is one line (after the model's)"; else fail "budget: the refusal is one line" "$(cat "$T/err")"; fi
fits=$(sed -n 's/.*--max-tokens \([0-9]*\) fits.*/\1/p' "$T/err")
heads=$(sed -n 's/.*(\([0-9]*\) of the 8 heads fit).*/\1/p' "$T/err")
check "budget: the named --max-tokens fits" ./attnviz --quiet --model "$T/l8k" --max-capture 20M --max-tokens "$fits" --json "$T/x.json" "$mid"
check "budget: the named count of heads fits" ./attnviz --quiet --model "$T/l8k" --max-capture 20M --layers 0 --heads "0-$((heads - 1))" --json "$T/x.json" "$mid"
check "budget: --telemetry fits" ./attnviz --quiet --model "$T/l8k" --max-capture 20M --telemetry 8 --json "$T/x.json" "$mid"
# a budget even the long page passes: refused, the long page not offered
expect_exit "budget: nothing but a shorter input fits" 1 "needs 73.0 MB, above the 1 kB allowed \(--max-capture\): what fits: a shorter input \(--max-tokens [0-9]+ fits\)" \
    ./attnviz --model "$T/l8k" --max-capture 1k --html "$T/x.html" "$mid"

# under AddressSanitizer + UBSan (when make test has built build-asan/attnviz): the pass, the grids and the writer
if [ -x build-asan/attnviz ]; then
    text=$(printf 'the cat sat. %.0s' $(seq 120))
    mkdir -p "$T/llama"
    sed 's/"max_position_embeddings": *64/"max_position_embeddings": 4096/' tests/data/small-llama/config.json >"$T/llama/config.json"
    ln -s "$PWD/tests/data/small-llama/model.safetensors" "$PWD/tests/data/small-llama/tokenizer.json" "$T/llama/"
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
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
