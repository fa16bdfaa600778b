/* vecfn.h — element-wise loops (softmax, activations, norms, dequantization)
 * built three times on x86-64 GCC, for AVX-512, for AVX2 and for baseline
 * x86-64, and chosen per call by gemm_vec_level(): by the product kernel in
 * use. So ATTNVIZ_KERNEL=avx2 runs, in every loop of the pass, the code a CPU
 * without AVX-512 runs, and a test that forces each kernel compares every
 * build of these loops too. (GCC's target_clones picked by the CPU alone, at
 * load time, which an AVX-512 machine could not steer.)
 *
 * A loop is written once, as the body after the macro:
 *
 *     VEC_VOID(static, scale_row, (float *r, int n, float s), (r, n, s)) { ... }
 *     VEC_FN(, int, kern_first_above, (const float *x, int n, float t), (x, n, t)) { ... }
 *
 * The body is an always-inline function; each build is a wrapper with its
 * own target that inlines it, so the vectorizer sees the body with that
 * target's registers. Rounding is the same in every build: ISO C mode keeps
 * a*b+c unfused, and no loop reassociates a sum. Elsewhere (other CPUs, clang),
 * or built with -DVEC_ONE_BUILD (to time one target alone, e.g. with
 * -march=haswell, or the portable baseline), the macros make one plain
 * function. */
#ifndef ATTNVIZ_VECFN_H
#define ATTNVIZ_VECFN_H

#include "gemm.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(VEC_ONE_BUILD)
#define VEC_BODY_(NAME) NAME##_vec_body
#define VEC_DEFINE_(SCOPE, RET, NAME, PARAMS, ARGS, T512, T2, CALL)                                              \
    static inline __attribute__((always_inline)) RET VEC_BODY_(NAME) PARAMS;                                       \
    __attribute__((target(T512))) static RET NAME##_vec512 PARAMS { CALL(VEC_BODY_(NAME) ARGS); }                 \
    __attribute__((target(T2))) static RET NAME##_vec2 PARAMS { CALL(VEC_BODY_(NAME) ARGS); }                     \
    static RET NAME##_vec0 PARAMS { CALL(VEC_BODY_(NAME) ARGS); }                                                  \
    SCOPE RET NAME PARAMS {                                                                                        \
        switch (gemm_vec_level()) {                                                                                \
        case 2: CALL(NAME##_vec512 ARGS);                                                                          \
        case 1: CALL(NAME##_vec2 ARGS);                                                                            \
        default: CALL(NAME##_vec0 ARGS);                                                                           \
        }                                                                                                          \
    }                                                                                                              \
    static inline __attribute__((always_inline)) RET VEC_BODY_(NAME) PARAMS
#define VEC_RETURN_(x) return x
#define VEC_CALL_(x) \
    do {             \
        x;           \
        return;      \
    } while (0)
/* the engine's loops: the same targets its clones had */
#define VEC_FN(SCOPE, RET, NAME, PARAMS, ARGS) VEC_DEFINE_(SCOPE, RET, NAME, PARAMS, ARGS, "avx512f", "avx2", VEC_RETURN_)
#define VEC_VOID(SCOPE, NAME, PARAMS, ARGS) VEC_DEFINE_(SCOPE, void, NAME, PARAMS, ARGS, "avx512f", "avx2", VEC_CALL_)
/* dequantization: x86-64-v4 (AVX-512 with byte and word lanes) for its per-lane shifts */
#define VEC_VOID_V4(SCOPE, NAME, PARAMS, ARGS) \
    VEC_DEFINE_(SCOPE, void, NAME, PARAMS, ARGS, "arch=x86-64-v4", "avx2", VEC_CALL_)
#else
#define VEC_FN(SCOPE, RET, NAME, PARAMS, ARGS) SCOPE RET NAME PARAMS
#define VEC_VOID(SCOPE, NAME, PARAMS, ARGS) SCOPE void NAME PARAMS
#define VEC_VOID_V4(SCOPE, NAME, PARAMS, ARGS) SCOPE void NAME PARAMS
#endif

#endif
