#!/bin/sh
# Builds and runs each libFuzzer target named on the command line for
# FUZZ_SECONDS from its seed corpus in tests/fuzz/corpus_NAME. Called by
# `make fuzz`, which first builds build-fuzz/libattnviz.a with the fuzzer's
# instrumentation and passes FUZZ_SAN, INCLUDES (the header folders), PKG_CFLAGS and LDLIBS in the environment.
# A crash leaves its input in build-fuzz/crash_NAME-* to turn into a regression test.
set -u
: "${FUZZ_SECONDS:=20}" "${FUZZ_SAN:=}" "${PKG_CFLAGS:=}" "${LDLIBS:=}"
: "${INCLUDES:=-Iinclude $(find src -type d | sort | sed 's/^/-I/' | tr '\n' ' ')}"
for t in "$@"; do
    # shellcheck disable=SC2086 # flag lists are word lists
    clang -O1 -g $FUZZ_SAN -fsanitize=fuzzer $INCLUDES $PKG_CFLAGS -o "build-fuzz/fuzz_$t" \
        "tests/fuzz/fuzz_$t.c" build-fuzz/libattnviz.a $LDLIBS || exit 1
    mkdir -p "build-fuzz/corpus_$t" || exit 1
    echo "fuzzing $t for $FUZZ_SECONDS s"
    log=build-fuzz/fuzz_$t.log
    if "build-fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -max_len=65536 \
        -artifact_prefix="build-fuzz/crash_$t-" -print_final_stats=0 \
        "build-fuzz/corpus_$t" "tests/fuzz/corpus_$t" >"$log" 2>&1; then
        echo "PASS fuzz_$t: $(grep -o 'DONE.*' "$log" | head -1)"
    else
        echo "FAIL fuzz_$t: $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$log")"
        tail -n 30 "$log"
        exit 1
    fi
done
