#!/bin/bash
# attnviz serve's OpenAI-compatible routes through the official openai client (tools/pyopenai.sh)
# on the SmolLM2-135M-Instruct Q4_1 GGUF, then against transformers and attnviz --json
# (tests/ref/openai_client.py, tests/ref/openai_ref.py): chat and completions, streamed and not;
# the prompt's ids (chat: apply_chat_template) and greedy ids equal to transformers' generate();
# logprobs within 1e-4 of its log_softmax; every streamed attention row within 1e-5 of a
# teacher-forced pass over the final sequence; a seed repeating a sampled answer. Then Gemma 3 270M
# Q4_K_M (tools/pymodel.sh gemma3-270m): one short greedy completion, streamed and not, against the
# same references (transformers' dequantization of the GGUF, ~60 s, saved once under the work folder).
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init openai_check
if ! opy=$(tools/pyopenai.sh --check 2>/dev/null); then
    echo "SKIP openai_check: the openai client's venv is not built (tools/pyopenai.sh)"
    exit 0
fi
if ! gguf=$(ref_smollm2_gguf); then
    echo "SKIP openai_check: no SmolLM2 GGUF (tools/pymodel.sh smollm2)"
    exit 0
fi
ref_build attnviz
# the dequantized reference model is shared with generate_check.sh and predict_check.sh
ref_cache predict tests/ref/lm_checkpoints.py
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ref_start
"$opy" tests/ref/openai_client.py ./attnviz "$gguf" "$T/client.json"
rc=$?
if [ -s "$T/client.json" ]; then
    "$py" tests/ref/openai_ref.py ./attnviz "$gguf" "$T/client.json" "$work" 2>&1 | grep -v "de-quantizing"
    [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
else
    echo "FAIL openai_check: the client wrote nothing to compare"
    rc=1
fi
if g=$(tools/pymodel.sh gemma3-270m 2>/dev/null) && [ -f "$g/gemma-3-270m-q4_k_m.gguf" ]; then
    gg=$g/gemma-3-270m-q4_k_m.gguf
    "$opy" tests/ref/openai_client.py ./attnviz "$gg" "$T/gemma.json" --completion-only | sed 's/^\(PASS\|FAIL\) openai client: /\1 openai client: Gemma 3 270M /'
    [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
    if [ -s "$T/gemma.json" ]; then
        "$py" tests/ref/openai_ref.py ./attnviz "$gg" "$T/gemma.json" "$work" "Gemma 3 270M" 2>&1 | grep -v "de-quantizing"
        [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
    else
        echo "FAIL openai_check: Gemma 3 270M: the client wrote nothing to compare"
        rc=1
    fi
else
    echo "FAIL openai_check: no Gemma 3 270M GGUF (tools/pymodel.sh gemma3-270m)"
    rc=1
fi
ref_exit "$rc"
