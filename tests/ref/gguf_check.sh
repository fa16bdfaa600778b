#!/bin/bash
# Our GGUF reader + dequantizers (MXFP4 among them) against the gguf Python package: random
# tensors quantized by gguf.quants.quantize, and every tensor of the real
# SmolLM2 GGUF, compared bit for bit with gguf.quants.dequantize.
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP gguf_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s -j2 build/gguf_dump build/tests/test_gguf >/dev/null || { echo "FAIL gguf_check: build failed"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
real=""
if d=$(tools/pymodel.sh smollm2 2>/dev/null) && real=$(ls "$d"/*.gguf 2>/dev/null | head -1) && [ -n "$real" ]; then
    if ATTNVIZ_SMOLLM2_GGUF="$real" build/tests/test_gguf >"$T/check.log" 2>&1; then
        echo "PASS gguf_reads_real_smollm2"
    else
        echo "FAIL gguf_reads_real_smollm2: $(tail -1 "$T/check.log")"
    fi
else
    echo "SKIP gguf_smollm2: tools/pymodel.sh smollm2 gave no GGUF file"
    real=""
fi
"$py" tests/ref/gguf_check.py build/gguf_dump "$T" $real
