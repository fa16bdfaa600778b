# lib.sh — shared helpers of the end-to-end test scripts (sourced, not run).
# Each script prints one PASS/FAIL/SKIP line per case; tests/run_all.sh counts them.
# Sourcing sets T (a temporary folder removed on exit) unless the script set it.

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
skip() { echo "SKIP $1: $2"; }

# check NAME CMD...: the command must succeed; its output is shown when it does not
check() {
    local name=$1
    shift
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}

# expect_exit NAME CODE PATTERN CMD...: exit code and a stderr matching PATTERN
expect_exit() {
    local name=$1 code=$2 pat=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ "$rc" -ne "$code" ]; then fail "$name" "exit $rc, want $code; stderr: $(cat "$T/err")"; return; fi
    if [ -n "$pat" ] && ! grep -qE -- "$pat" "$T/err"; then fail "$name" "stderr lacks /$pat/: $(cat "$T/err")"; return; fi
    pass "$name"
}

# refdata_dir NAME: the folder of the reference files NAME (tools/refdata.sh: bert-base-uncased,
# all-MiniLM-L6-v2, gpt2), from $ATTNVIZ_REFDATA when tests/run_all.sh set it; on failure the
# reason is on stderr and the status is 1 (a test without them fails: they are not optional)
refdata_dir() {
    if [ -n "${ATTNVIZ_REFDATA:-}" ]; then echo "$ATTNVIZ_REFDATA/$1"; else tools/refdata.sh "$1"; fi
}

if [ -z "${T:-}" ]; then
    T=$(mktemp -d) || exit 1
    trap 'rm -rf "$T"' EXIT
fi
