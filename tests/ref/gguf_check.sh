#!/bin/bash
# Our GGUF reader + dequantizers (MXFP4 among them) against the gguf Python package: random
# tensors quantized by gguf.quants.quantize, and every tensor of the real
# SmolLM2 GGUF, compared bit for bit with gguf.quants.dequantize.
set -u
. "$(dirname "$0")/lib.sh" || exit 1
ref_init gguf_check
ref_build build/gguf_dump build/tests/test_gguf
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
