#!/bin/bash
# attnviz serve's OpenAI-compatible routes through the official openai client (tools/pyopenai.sh)
# on the SmolLM2-135M-Instruct Q4_1 GGUF, then against transformers and attnviz --json
# (tests/ref/openai_client.py, tests/ref/openai_ref.py): chat and completions, streamed and not;
# the prompt's ids (chat: apply_chat_template) and greedy ids equal to transformers' generate();
# logprobs within 1e-4 of its log_softmax; every streamed attention row within 1e-5 of a
# teacher-forced pass over the final sequence; a seed repeating a sampled answer.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP openai_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
if ! opy=$(tools/pyopenai.sh --check 2>/dev/null); then
    echo "SKIP openai_check: the openai client's venv is not built (tools/pyopenai.sh)"
    exit 0
fi
if ! d=$(tools/pymodel.sh smollm2 2>/dev/null) || [ ! -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    echo "SKIP openai_check: no SmolLM2 GGUF (tools/pymodel.sh smollm2)"
    exit 0
fi
make -s -j2 attnviz >/dev/null || { echo "FAIL openai_check: build failed"; exit 1; }
gguf=$d/SmolLM2-135M-Instruct.Q4_1.gguf
# the dequantized reference model is shared with generate_check.sh and predict_check.sh
work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/predict-$(sha256sum tests/ref/lm_checkpoints.py | cut -c1-12)
mkdir -p "$work" || { echo "FAIL openai_check: cannot create $work"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
start=$(date +%s)
"$opy" tests/ref/openai_client.py ./attnviz "$gguf" "$T/client.json"
rc=$?
if [ -s "$T/client.json" ]; then
    "$py" tests/ref/openai_ref.py ./attnviz "$gguf" "$T/client.json" "$work" 2>&1 | grep -v "de-quantizing"
    [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
else
    echo "FAIL openai_check: the client wrote nothing to compare"
    rc=1
fi
echo "  openai_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
