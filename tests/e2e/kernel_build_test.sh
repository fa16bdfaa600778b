#!/bin/bash
# kernel_build_test.sh — ATTNVIZ_KERNEL chooses every vectorized loop of the pass, so "the AVX2 path" on an
# AVX-512 machine runs what an AVX2-only CPU runs (vecfn.h, gemm.h):
#   - the code: in the normal build, every function with an AVX-512 instruction (a zmm, mask or
#     upper-16 register, or an EVEX-only operation) is one of the AVX-512 builds that the kernel choice
#     dispatches to (gemm.c's *512 kernels, vecfn.h's *_vec512 loops); in a build with -march=haswell
#     and -DVEC_ONE_BUILD (one build of the element-wise loops, for Haswell, no dispatch), only gemm.c's
#     AVX-512 kernels, which ATTNVIZ_KERNEL=avx2 never calls;
#   - the outputs: that build and the normal one, both run with ATTNVIZ_KERNEL=avx2, write every output
#     of tools/same_outputs.sh's cases (the demo model, every fixture family, the GGUF, the subcommands,
#     errors, the live server) byte for byte the same.
# One more build of the sources (~1 minute of CPU) into build-haswell; products outside the pass that
# OpenBLAS computes (--attribution and --flow's, generation's one-token steps on unquantized weights) pick
# OpenBLAS's kernels by the CPU, not ATTNVIZ_KERNEL (docs/models-at-scale.md); one-token steps on quantized
# weights are quant_matvec's, whose AVX2 path the Haswell build has too.
set -u
cd "$(dirname "$0")/../.."
. tests/e2e/lib.sh
HB=${HASWELL_B:-build-haswell}
if ! ATTNVIZ_KERNEL=avx2 ./attnviz --version >/dev/null 2>&1; then
    skip "kernel_build" "this CPU has no AVX2 (or ./attnviz is not built)"
    exit 0
fi
if [ ! -f weights/demo/model.safetensors ]; then
    fail "kernel_build" "no demo model (make demo-model)"
    exit 1
fi
t0=$(date +%s)
if ! make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" B="$HB" BIN="$HB/attnviz" \
    OPT="-O3 -march=haswell -DVEC_ONE_BUILD" "$HB/attnviz" >"$T/build.log" 2>&1; then
    fail "kernel_build_haswell" "the -march=haswell -DVEC_ONE_BUILD build failed: $(grep -m3 -E 'error|Error' "$T/build.log")"
    exit 1
fi
pass "kernel_build_haswell: -march=haswell -DVEC_ONE_BUILD into $HB ($(($(date +%s) - t0)) s)"

# avx512 BIN: the functions of BIN with an AVX-512 instruction
avx512_functions() {
    objdump -d --no-show-raw-insn "$1" | awk '
        /^[0-9a-f]+ <.*>:$/ { fn = substr($2, 2, length($2) - 3); next }
        /%zmm|%k[1-7]|\{%k|%[xy]mm(1[6-9]|2[0-9]|3[01])/ || /\tv(pternlog|permt2|permi2|pmov[dqw][bdw]|prol|pror|rndscale|range|fixupimm|getexp|getmant|scalef|rcp14|rsqrt14|pcompress|pexpand|pconflict|plzcnt|pabsq|pmaxsq|pminsq|pmaxuq|pminuq|psraq|pmullq|cvt[a-z]*2u|cvt[a-z]*qq)/ { seen[fn] = 1 }
        END { for (f in seen) print f }' | sort
}
avx512_functions ./attnviz >"$T/native"
avx512_functions "$HB/attnviz" >"$T/haswell"
stray=$(grep -vE '512' "$T/native")
if [ -s "$T/native" ] && [ -z "$stray" ] && grep -q '_vec512$' "$T/native"; then
    pass "kernel_build_avx512_code_only_in_dispatched_builds ($(grep -c '' "$T/native") functions, each an avx512 kernel or a _vec512 loop)"
else
    fail "kernel_build_avx512_code_only_in_dispatched_builds" "AVX-512 outside the dispatched builds: $(echo "$stray" | head -5 | tr '\n' ' ')"
fi
stray=$(grep -vE '512' "$T/haswell"; grep -E '_vec512' "$T/haswell")
if [ -z "$stray" ] && [ "$(grep -c '' "$T/haswell")" -lt "$(grep -c '' "$T/native")" ]; then
    pass "kernel_build_haswell_has_avx512_only_in_gemm_kernels ($(tr '\n' ' ' <"$T/haswell"))"
else
    fail "kernel_build_haswell_has_avx512_only_in_gemm_kernels" "$(echo "$stray" | head -5 | tr '\n' ' ')"
fi
t0=$(date +%s)
if ATTNVIZ_KERNEL=avx2 tools/same_outputs.sh ./attnviz "$HB/attnviz" >"$T/same.log" 2>&1; then
    pass "kernel_build_avx2_outputs_byte_identical_to_a_haswell_build ($(tail -1 "$T/same.log"); $(($(date +%s) - t0)) s)"
else
    fail "kernel_build_avx2_outputs_byte_identical_to_a_haswell_build" "$(grep -m5 DIFF "$T/same.log" | tr '\n' ' ') $(tail -1 "$T/same.log")"
fi
