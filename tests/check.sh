#!/bin/bash
# check.sh — the quick tier (make check): every Check suite once, on this CPU's best kernel and
# without the sanitizers, then the command line's end-to-end script. It reads nothing the build
# and `make test`'s set-up do not provide; a reference file it cannot find fails its case, as in
# make test. What it leaves to make test: the other kernels, AddressSanitizer/UBSan, the
# bad-input catalog under valgrind, the fuzzers, the browser and the reference checks.
# Usage: tests/check.sh BUILD/tests/test_*   (make check passes the suites it built)
set -u
cd "$(dirname "$0")/.."
t0=$SECONDS
pass=0 fail=0 skip=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if refdata=$(tools/refdata.sh 2>"$log"); then
    export ATTNVIZ_REFDATA=$refdata
else
    echo "FAIL reference files: $(cat "$log") (make deps-test installs them)"
    fail=$((fail + 1))
fi
if d=$(tools/pymodel.sh smollm2 2>/dev/null); then
    export ATTNVIZ_SMOLLM2_GGUF="$d/SmolLM2-135M-Instruct.Q4_1.gguf"
fi
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-4}
failed=()
for t in "$@"; do
    "$t" >"$log" 2>&1
    line=$(grep -E 'Checks: [0-9]+' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        cat "$log"
        echo "FAIL $t: no Check summary"
        fail=$((fail + 1)) failed+=("$t")
        continue
    fi
    c=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
    e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
    s=$(grep -c '^SKIP ' "$log")
    if [ $((f + e)) -gt 0 ]; then
        grep -vE '^(PASS |Running suite)' "$log" | tail -n 20
        failed+=("$t")
    fi
    grep '^SKIP ' "$log"
    echo "$line  ${t##*/}"
    pass=$((pass + c - f - e - s)) fail=$((fail + f + e)) skip=$((skip + s))
done
tests/e2e/cli_test.sh >"$log" 2>&1
grep -E '^(FAIL|SKIP) ' "$log"
p=$(grep -c '^PASS ' "$log") f=$(grep -c '^FAIL ' "$log") s=$(grep -c '^SKIP ' "$log")
echo "tests/e2e/cli_test.sh: $p passed, $f failed, $s skipped"
[ "$f" -gt 0 ] && failed+=(tests/e2e/cli_test.sh)
pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]} (run one alone to see it whole: docs/testing.md)"
echo "check: $pass passed, $fail failed, $skip skipped in $((SECONDS - t0)) s (make test runs the rest)"
[ "$fail" -eq 0 ]
