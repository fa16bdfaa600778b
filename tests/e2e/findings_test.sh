#!/bin/bash
# docs/findings.md's published findings, reproduced on the trained models the test set-up installs
# (tools/pymodel.sh: SmolLM2-135M-Instruct, Gemma 3 270M, all-MiniLM-L6-v2) by tests/e2e/findings.py, once on
# every kernel path this CPU runs (ATTNVIZ_KERNEL; a kernel the CPU lacks is a SKIP line). Each line states
# the claim, the measured figure and the bound.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
make -s -j2 attnviz >/dev/null || { fail findings_build "make attnviz failed"; exit 1; }
S=$(tools/pymodel.sh smollm2 2>/dev/null)/SmolLM2-135M-Instruct.Q4_1.gguf
G=$(tools/pymodel.sh gemma3-270m 2>/dev/null)/gemma-3-270m-q4_k_m.gguf
M=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null)
for f in "$S" "$G" "$M/config.json"; do
    # the trained models are part of the test set-up (tools/deps.sh test): missing is a failure
    [ -f "$f" ] || { fail findings_models "$f is missing (tools/pymodel.sh; tools/deps.sh test installs it)"; exit 1; }
done
kernels=$(./attnviz --version | sed -n 's/.*built with \([a-z0-9|]*\);.*/\1/p' | tr '|' ' ')
for k in ${kernels:-scalar}; do
    if ! ATTNVIZ_KERNEL=$k ./attnviz --version >/dev/null 2>&1; then
        skip "findings[$k]" "this CPU cannot run the $k kernel"
        continue
    fi
    start=$(date +%s)
    ATTNVIZ_KERNEL=$k python3 tests/e2e/findings.py ./attnviz --smollm2 "$S" --gemma3 "$G" --minilm "$M" |
        sed "s/^\(PASS\|FAIL\) findings/\1 findings[$k]/"
    echo "  findings[$k]: $(($(date +%s) - start)) s"
done
