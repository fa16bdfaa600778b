#!/bin/bash
# gpt-oss in llama.cpp's gpt-oss GGUF files (tests/ref/gptoss_gguf_check.py): a checkpoint
# transformers writes, converted by llama.cpp's own convert_hf_to_gguf.py (F32), and that file
# with MXFP4 experts, against transformers on the checkpoint (attention, sink shares, routing);
# gpt-oss's o200k tokenizer through a folder and llama.cpp's GGUF of it (ids against the Rust library);
# and a Llama checkpoint with Llama 3.1's rope scaling (llama3), converted the same way: its factors in
# rope_freqs.weight, attention on every kernel path against float64 transformers.
# The converter comes from $ATTNVIZ_LLAMA_CPP (a llama.cpp source tree), else from PyPI's
# llama-cpp-python sdist, which vendors llama.cpp (pinned version and sha256; fetched once into
# ~/.cache/attnviz). Files are cached under ~/.cache/attnviz, keyed by the script's hash.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init gptoss_gguf_check
ref_build build/fwd_dump attnviz
o200k=${ATTNVIZ_REFDATA:+$ATTNVIZ_REFDATA/gptoss}
[ -n "$o200k" ] || o200k=$(tools/refdata.sh gptoss) || { echo "FAIL gptoss_gguf_check: no o200k tokenizer (tools/refdata.sh gptoss)"; exit 1; }
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
src=${ATTNVIZ_LLAMA_CPP:-}
if [ -z "$src" ]; then
    ver=0.3.36 sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
    dest=$cache/llama-cpp-python-$ver
    src=$dest/llama_cpp_python-$ver/vendor/llama.cpp
    if [ ! -f "$src/convert_hf_to_gguf.py" ] || [ ! -d "$src/gguf-py" ]; then
        tmp=$(mktemp -d "$cache/.llamacpp.XXXXXX") || exit 1
        trap 'rm -rf "$tmp"' EXIT
        if ! "$py" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$tmp" >"$tmp/pip.log" 2>&1; then
            echo "FAIL gptoss_gguf_check: cannot fetch llama-cpp-python $ver's sdist from PyPI: $(tail -1 "$tmp/pip.log")"
            exit 1
        fi
        got=$(sha256sum "$tmp/llama_cpp_python-$ver.tar.gz" | cut -c1-64)
        [ "$got" = "$sha" ] || { echo "FAIL gptoss_gguf_check: llama-cpp-python $ver's sdist has sha256 $got, not $sha"; exit 1; }
        mkdir "$tmp/x" && tar xzf "$tmp/llama_cpp_python-$ver.tar.gz" -C "$tmp/x" --wildcards \
            "llama_cpp_python-$ver/vendor/llama.cpp/convert_hf_to_gguf.py" "llama_cpp_python-$ver/vendor/llama.cpp/conversion/*" \
            "llama_cpp_python-$ver/vendor/llama.cpp/gguf-py/*" ||
            { echo "FAIL gptoss_gguf_check: cannot unpack the converter"; exit 1; }
        rm -rf "$dest" && mv "$tmp/x" "$dest" || { echo "FAIL gptoss_gguf_check: cannot move the converter to $dest"; exit 1; }
    fi
fi
[ -f "$src/convert_hf_to_gguf.py" ] && [ -d "$src/gguf-py" ] || { echo "FAIL gptoss_gguf_check: no convert_hf_to_gguf.py in $src"; exit 1; }
key=$(cat tests/ref/gptoss_gguf_check.py tests/data/small-llama/tokenizer.json "$o200k/tokenizer.json" | sha256sum | cut -c1-12)
work=$cache/gptoss-gguf-$key
mkdir -p "$work" || { echo "FAIL gptoss_gguf_check: cannot create $work"; exit 1; }
start=$(date +%s)
"$py" tests/ref/gptoss_gguf_check.py build/fwd_dump "$work" "$src" ./attnviz "$o200k/tokenizer.json" 2>&1 | grep -E "^(PASS|FAIL|SKIP)|Error|error"
rc=${PIPESTATUS[0]}
echo "  gptoss_gguf_check.sh: $(($(date +%s) - start)) s"
exit "$rc"
