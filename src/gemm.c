/* gemm.c — yT = W xT with one chain of fused multiply-adds per output, in k
 * order (gemm.h). Blocked as BLAS kernels are: a panel of GEMM_MR rows of W
 * times GEMM_KC inputs is copied contiguous (so that its broadcasts come from
 * one cache line per step), and a micro-kernel keeps a tile of outputs in
 * registers, vectors along the tokens. Between blocks of k the partial sums
 * wait in yT: storing a float and loading it back is exact, so blocking does
 * not change the chain. Token tails use masked lanes (x86) or zero-padded
 * copies through the same micro-kernel (NEON), not other code. */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "safetensors.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_X86 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define GEMM_NEON 1
#endif

static inline float elem(const void *w, GemmType type, size_t i) {
    switch (type) {
    case GEMM_BF16: return st_bf16_to_f32(((const uint16_t *)w)[i]);
    case GEMM_F16: return st_f16_to_f32(((const uint16_t *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

static inline const void *elem_ptr(const void *w, GemmType type, size_t i) {
    return type == GEMM_F32 ? (const void *)((const float *)w + i) : (const void *)((const uint16_t *)w + i);
}

void gemm_rows_naive(float *yT, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT, int n,
                     int rows, int in) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            float total = 0.0f;
            for (int b = 0; b < in; b += GEMM_KB) {
                float acc = 0.0f;
                for (int k = b; k < in && k < b + GEMM_KB; k++)
                    acc = fmaf(elem(w, type, (size_t)r * w_row + (size_t)k * w_col), xT[(size_t)k * n + j], acc);
                total = total + acc;
            }
            yT[(size_t)r * n + j] = total;
        }
}

/* panel (kc, GEMM_MR) = W rows [0, mr) x inputs [k0, k0 + kc), rows past mr zero */
static void pack_panel(float *panel, const void *w, GemmType type, size_t w_row, size_t w_col, int mr, int k0, int kc) {
    for (int kk = 0; kk < kc; kk++)
        for (int i = 0; i < GEMM_MR; i++)
            panel[kk * GEMM_MR + i] = i < mr ? elem(w, type, (size_t)i * w_row + (size_t)(k0 + kk) * w_col) : 0.0f;
}

#ifdef GEMM_X86
/* 16 consecutive elements of W from i, widened to float */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 load16(const void *w, GemmType type, size_t i) {
    switch (type) {
    case GEMM_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)elem_ptr(w, type, i))), 16));
    case GEMM_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)elem_ptr(w, type, i)));
    default: return _mm512_loadu_ps((const float *)w + i);
    }
}

/* pack_panel's result for 16 rows of a row-major W, a 16 x 16 transpose at a
 * time in registers; the tail of kc past a multiple of 16 by pack_panel. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
pack16_avx512_t(float *panel, const void *w, const GemmType type, size_t w_row, int k0, int kc) {
    int kk = 0;
    for (; kk + 16 <= kc; kk += 16) {
        __m512 r[16], t[16], u[16];
        for (int i = 0; i < 16; i++) r[i] = load16(w, type, (size_t)i * w_row + (size_t)(k0 + kk));
        for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        for (int g = 0; g < 4; g++) {
            __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
            __m512d c = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
            u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
            u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
        }
        /* u[4g + m]: rows 4g..4g+3 of columns m, 4 + m, 8 + m, 12 + m, one per 128-bit lane */
        float *dst = panel + (size_t)kk * GEMM_MR;
        for (int m = 0; m < 4; m++) {
            __m512 ve = _mm512_shuffle_f32x4(u[m], u[m + 4], 0x88), vo = _mm512_shuffle_f32x4(u[m], u[m + 4], 0xDD);
            __m512 we = _mm512_shuffle_f32x4(u[m + 8], u[m + 12], 0x88), wo = _mm512_shuffle_f32x4(u[m + 8], u[m + 12], 0xDD);
            _mm512_storeu_ps(dst + (size_t)m * GEMM_MR, _mm512_shuffle_f32x4(ve, we, 0x88));
            _mm512_storeu_ps(dst + (size_t)(8 + m) * GEMM_MR, _mm512_shuffle_f32x4(ve, we, 0xDD));
            _mm512_storeu_ps(dst + (size_t)(4 + m) * GEMM_MR, _mm512_shuffle_f32x4(vo, wo, 0x88));
            _mm512_storeu_ps(dst + (size_t)(12 + m) * GEMM_MR, _mm512_shuffle_f32x4(vo, wo, 0xDD));
        }
    }
    if (kk < kc) pack_panel(panel + (size_t)kk * GEMM_MR, w, type, w_row, 1, GEMM_MR, k0 + kk, kc - kk);
}

/* one copy per storage type, so the loads inline without a switch */
__attribute__((target("avx512f"))) static void pack_panel16_avx512(float *panel, const void *w, GemmType type,
                                                                   size_t w_row, int k0, int kc) {
    switch (type) {
    case GEMM_BF16: pack16_avx512_t(panel, w, GEMM_BF16, w_row, k0, kc); break;
    case GEMM_F16: pack16_avx512_t(panel, w, GEMM_F16, w_row, k0, kc); break;
    default: pack16_avx512_t(panel, w, GEMM_F32, w_row, k0, kc); break;
    }
}
#endif

#ifdef GEMM_NEON
/* 4 consecutive elements of W from i, widened to float (the same values as elem) */
static inline __attribute__((always_inline)) float32x4_t load4_neon(const void *w, GemmType type, size_t i) {
    switch (type) {
    case GEMM_BF16: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + i), 16));
    case GEMM_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)w + i)));
    default: return vld1q_f32((const float *)w + i);
    }
}

/* pack_panel's result for 16 rows of a row-major W, a 4 x 4 transpose at a
 * time in registers; the tail of kc past a multiple of 4 element by element. */
static inline __attribute__((always_inline)) void pack16_neon_t(float *panel, const void *w, const GemmType type,
                                                                size_t w_row, int k0, int kc) {
    int kk = 0;
    for (; kk + 4 <= kc; kk += 4) {
        float *dst = panel + (size_t)kk * GEMM_MR;
        for (int g = 0; g < 4; g++) {
            const size_t at = (size_t)4 * g * w_row + (size_t)(k0 + kk);
            const float32x4_t r0 = load4_neon(w, type, at), r1 = load4_neon(w, type, at + w_row);
            const float32x4_t r2 = load4_neon(w, type, at + 2 * w_row), r3 = load4_neon(w, type, at + 3 * w_row);
            const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1));
            const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
            const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3));
            const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
            /* column m of the 4 x 4 block: rows 4g..4g+3 of input kk + m */
            vst1q_f32(dst + 4 * g, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
            vst1q_f32(dst + GEMM_MR + 4 * g, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
            vst1q_f32(dst + 2 * GEMM_MR + 4 * g, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
            vst1q_f32(dst + 3 * GEMM_MR + 4 * g, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
        }
    }
    for (; kk < kc; kk++)
        for (int i = 0; i < GEMM_MR; i++)
            panel[(size_t)kk * GEMM_MR + i] = elem(w, type, (size_t)i * w_row + (size_t)(k0 + kk));
}

static void pack_panel16_neon(float *panel, const void *w, GemmType type, size_t w_row, int k0, int kc) {
    switch (type) {
    case GEMM_BF16: pack16_neon_t(panel, w, GEMM_BF16, w_row, k0, kc); break;
    case GEMM_F16: pack16_neon_t(panel, w, GEMM_F16, w_row, k0, kc); break;
    default: pack16_neon_t(panel, w, GEMM_F32, w_row, k0, kc); break;
    }
}
#endif

/* ---------------------------------------------------------------- kernels */

/* One panel against every token: y (mr, n) row stride n, adding each block's
 * chain to the totals held in y (to 0 when first). */
typedef void PanelFn(const float *panel, const float *x, int n, int kc, float *y, int mr, int first);

static void panel_scalar(const float *panel, const float *x, int n, int kc, float *y, int mr, int first) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < n; j++) {
            float total = first ? 0.0f : y[(size_t)i * n + j];
            for (int b = 0; b < kc; b += GEMM_KB) {
                float acc = 0.0f;
                for (int kk = b; kk < kc && kk < b + GEMM_KB; kk++)
                    acc = fmaf(panel[kk * GEMM_MR + i], x[(size_t)kk * n + j], acc);
                total = total + acc;
            }
            y[(size_t)i * n + j] = total;
        }
}

#ifdef GEMM_X86
/* MR rows x NV vectors of 16 tokens, rows [0, mr) and tokens [0, nr) real. */
#define AVX512_MICRO(MR, NV, FULL, NAME)                                                                             \
    __attribute__((target("avx512f"))) static void NAME(const float *panel, const float *x, int ldx,                  \
                                                                           int kc, float *y, int ldy, int mr, int nr, \
                                                                           int first) {                              \
        __mmask16 mk[NV];                                                                                            \
        for (int v = 0; v < NV; v++) {                                                                               \
            int left = nr - 16 * v;                                                                                  \
            mk[v] = left >= 16 ? (__mmask16)0xFFFF : left > 0 ? (__mmask16)((1u << left) - 1) : (__mmask16)0;         \
        }                                                                                                            \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                       \
            const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                        \
            __m512 acc[MR][NV];                                                                                          \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                        \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();                    \
            for (int kk = kb; kk < ke; kk++) {                                                                           \
                __m512 xv[NV];                                                                                           \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) xv[v] =                                             \
                    FULL ? _mm512_loadu_ps(x + (size_t)kk * ldx + 16 * v)                                                \
                         : _mm512_maskz_loadu_ps(mk[v], x + (size_t)kk * ldx + 16 * v);                                  \
                const float *wk = panel + kk * GEMM_MR;                                                                  \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                  \
                    __m512 b = _mm512_set1_ps(wk[i]);                                                                    \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(b, xv[v], acc[i][v]);\
                }                                                                                                        \
            }                                                                                                            \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) if (i < mr)                                            \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                   \
                    float *yp = y + (size_t)i * ldy + 16 * v;                                                            \
                    const __m512 t = first && kb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk[v], yp);          \
                    _mm512_mask_storeu_ps(yp, mk[v], _mm512_add_ps(t, acc[i][v]));                                       \
                }                                                                                                        \
        }                                                                                                                \
    }
/* Full tiles take unmasked loads: masks in the k loop cost registers the
 * compiler then reloads every step. */
AVX512_MICRO(8, 2, 1, micro512_8x2_full)
AVX512_MICRO(8, 2, 0, micro512_8x2)

/* (few tokens go to rowvec_avx512 instead) */
__attribute__((target("avx512f"))) static void panel_avx512(const float *panel, const float *x, int n, int kc, float *y,
                                                            int mr, int first) {
    for (int h = 0; h < 2 && 8 * h < mr; h++) {
        const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
        for (int j = 0; j < n; j += 32)
            (hr == 8 && n - j >= 32 ? micro512_8x2_full : micro512_8x2)(panel + 8 * h, x + j, n, kc, y + (size_t)8 * h * n + j,
                                                                         n, hr, n - j < 32 ? n - j : 32, first);
    }
}

/* Few tokens: vectors along the panel's 16 rows instead, one register per
 * token, so that no lane idles; the same chains. acc (nr, 16) holds them
 * between blocks of k. */
#define AVX512_ROWVEC(NR)                                                                                            \
    case NR: {                                                                                                       \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                       \
            const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                        \
            __m512 a[NR];                                                                                                \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) a[j] = _mm512_setzero_ps();                            \
            for (int kk = kb; kk < ke; kk++) {                                                                           \
                const __m512 p = _mm512_load_ps(panel + kk * GEMM_MR);                                                   \
                const float *xk = x + (size_t)kk * ldx;                                                                  \
                _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) a[j] = _mm512_fmadd_ps(p, _mm512_set1_ps(xk[j]), a[j]);\
            }                                                                                                            \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++)                                                        \
                _mm512_store_ps(acc + 16 * j, _mm512_add_ps(_mm512_load_ps(acc + 16 * j), a[j]));                        \
        }                                                                                                                \
        break;                                                                                                       \
    }

__attribute__((target("avx512f"))) static void rowvec_avx512(const float *panel, const float *x, int ldx, int kc,
                                                             float *acc, int nr) {
    switch (nr) {
        AVX512_ROWVEC(1) AVX512_ROWVEC(2) AVX512_ROWVEC(3) AVX512_ROWVEC(4) AVX512_ROWVEC(5) AVX512_ROWVEC(6)
        AVX512_ROWVEC(7) AVX512_ROWVEC(8) AVX512_ROWVEC(9) AVX512_ROWVEC(10) AVX512_ROWVEC(11) AVX512_ROWVEC(12)
        AVX512_ROWVEC(13) AVX512_ROWVEC(14) AVX512_ROWVEC(15) AVX512_ROWVEC(16)
    default: break;
    }
}

/* AVX2: MR rows x NV vectors of 8 tokens. */
#define AVX2_MICRO(MR, NV)                                                                                           \
    __attribute__((target("avx2,fma"))) static void micro256_##MR##x##NV(const float *panel, const float *x, int ldx, \
                                                                          int kc, float *y, int ldy, int mr, int nr,  \
                                                                          int first) {                               \
        __m256i mk[NV];                                                                                              \
        for (int v = 0; v < NV; v++) {                                                                               \
            int left = nr - 8 * v;                                                                                   \
            mk[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));          \
        }                                                                                                            \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                       \
            const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                        \
            __m256 acc[MR][NV];                                                                                          \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                        \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();                    \
            for (int kk = kb; kk < ke; kk++) {                                                                           \
                __m256 xv[NV];                                                                                           \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) xv[v] =                                             \
                    _mm256_maskload_ps(x + (size_t)kk * ldx + 8 * v, mk[v]);                                             \
                const float *wk = panel + kk * GEMM_MR;                                                                  \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                  \
                    __m256 b = _mm256_broadcast_ss(wk + i);                                                              \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(b, xv[v], acc[i][v]);\
                }                                                                                                        \
            }                                                                                                            \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) if (i < mr)                                            \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                   \
                    float *yp = y + (size_t)i * ldy + 8 * v;                                                             \
                    const __m256 t = first && kb == 0 ? _mm256_setzero_ps() : _mm256_maskload_ps(yp, mk[v]);             \
                    _mm256_maskstore_ps(yp, mk[v], _mm256_add_ps(t, acc[i][v]));                                         \
                }                                                                                                        \
        }                                                                                                                \
    }
AVX2_MICRO(4, 2)

__attribute__((target("avx2,fma"))) static void panel_avx2(const float *panel, const float *x, int n, int kc, float *y,
                                                           int mr, int first) {
    for (int q = 0; q < 4 && 4 * q < mr; q++) {
        const int qr = mr - 4 * q < 4 ? mr - 4 * q : 4;
        for (int j = 0; j < n; j += 16)
            micro256_4x2(panel + 4 * q, x + j, n, kc, y + (size_t)4 * q * n + j, n, qr, n - j < 16 ? n - j : 16, first);
    }
}
#endif

#ifdef GEMM_NEON
/* NEON: 8 rows x 12 tokens (3 vectors of 4 along the tokens), 24 of the 32
 * registers; FMLA by element is fused, one rounding, as fmaf. Rows [0, mr)
 * real (the panel's others are zero and never stored); all 12 tokens real. */
#define NEON_ROW(i, p, l)                                                                                            \
    acc[i][0] = vfmaq_laneq_f32(acc[i][0], x0, p, l), acc[i][1] = vfmaq_laneq_f32(acc[i][1], x1, p, l),           \
    acc[i][2] = vfmaq_laneq_f32(acc[i][2], x2, p, l)

static void micro_neon_8x12(const float *restrict panel, const float *restrict x, size_t ldx, int kc,
                            float *restrict y, size_t ldy, int mr, int first) {
    for (int kb = 0; kb < kc; kb += GEMM_KB) {
        const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;
        float32x4_t acc[8][3];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)
            acc[i][v] = vdupq_n_f32(0.0f);
        for (int kk = kb; kk < ke; kk++) {
            const float *xk = x + (size_t)kk * ldx, *wk = panel + (size_t)kk * GEMM_MR;
            const float32x4_t x0 = vld1q_f32(xk), x1 = vld1q_f32(xk + 4), x2 = vld1q_f32(xk + 8);
            const float32x4_t p0 = vld1q_f32(wk), p1 = vld1q_f32(wk + 4);
            NEON_ROW(0, p0, 0);
            NEON_ROW(1, p0, 1);
            NEON_ROW(2, p0, 2);
            NEON_ROW(3, p0, 3);
            NEON_ROW(4, p1, 0);
            NEON_ROW(5, p1, 1);
            NEON_ROW(6, p1, 2);
            NEON_ROW(7, p1, 3);
        }
        const int fresh = first && kb == 0;
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) if (i < mr) _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++) {
            float *yp = y + (size_t)i * ldy + 4 * v;
            vst1q_f32(yp, vaddq_f32(fresh ? vdupq_n_f32(0.0f) : vld1q_f32(yp), acc[i][v]));
        }
    }
}
#undef NEON_ROW

/* The last n % 12 tokens go through the same micro-kernel on zero-padded
 * copies of their x and y columns: the same chains, padding lanes dropped. */
static void panel_neon(const float *panel, const float *x, int n, int kc, float *y, int mr, int first) {
    const int full = n - n % 12;
    for (int h = 0; h < 2 && 8 * h < mr; h++) {
        const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
        for (int j = 0; j < full; j += 12)
            micro_neon_8x12(panel + 8 * h, x + j, (size_t)n, kc, y + (size_t)8 * h * n + j, (size_t)n, hr, first);
    }
    if (full == n) return;
    const int nr = n - full;
    _Alignas(16) float xb[GEMM_KC * 12], yb[8 * 12];
    for (int kk = 0; kk < kc; kk++) {
        memcpy(xb + kk * 12, x + (size_t)kk * n + full, sizeof(float) * (size_t)nr);
        memset(xb + kk * 12 + nr, 0, sizeof(float) * (size_t)(12 - nr));
    }
    for (int h = 0; h < 2 && 8 * h < mr; h++) {
        const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
        float *yh = y + (size_t)8 * h * n + full;
        if (!first)
            for (int i = 0; i < hr; i++) {
                memcpy(yb + i * 12, yh + (size_t)i * n, sizeof(float) * (size_t)nr);
                memset(yb + i * 12 + nr, 0, sizeof(float) * (size_t)(12 - nr));
            }
        micro_neon_8x12(panel + 8 * h, xb, 12, kc, yb, 12, hr, first);
        for (int i = 0; i < hr; i++) memcpy(yh + (size_t)i * n, yb + i * 12, sizeof(float) * (size_t)nr);
    }
}

/* Few tokens: vectors along the panel's 16 rows (4 registers a token), NR <= 4
 * tokens at a time, each token's x broadcast; acc (nr, 16) holds the totals
 * the blocks' chains are added to. */
#define NEON_ROWVEC(NR)                                                                                              \
    case NR: {                                                                                                       \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                   \
        const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                        \
        float32x4_t a[NR][4];                                                                                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < NR; t++) _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)     \
            a[t][q] = vdupq_n_f32(0.0f);                                                                             \
        for (int kk = kb; kk < ke; kk++) {                                                                           \
            const float *wk = panel + (size_t)kk * GEMM_MR, *xk = x + (size_t)kk * ldx;                              \
            const float32x4_t p0 = vld1q_f32(wk), p1 = vld1q_f32(wk + 4), p2 = vld1q_f32(wk + 8),                   \
                              p3 = vld1q_f32(wk + 12);                                                               \
            _Pragma("GCC unroll 4") for (int t = 0; t < NR; t++) {                                                   \
                const float32x4_t b = vdupq_n_f32(xk[t]);                                                            \
                a[t][0] = vfmaq_f32(a[t][0], p0, b), a[t][1] = vfmaq_f32(a[t][1], p1, b);                            \
                a[t][2] = vfmaq_f32(a[t][2], p2, b), a[t][3] = vfmaq_f32(a[t][3], p3, b);                            \
            }                                                                                                        \
        }                                                                                                            \
        _Pragma("GCC unroll 4") for (int t = 0; t < NR; t++) _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++)     \
            vst1q_f32(acc + GEMM_MR * t + 4 * q, vaddq_f32(vld1q_f32(acc + GEMM_MR * t + 4 * q), a[t][q]));          \
        }                                                                                                            \
        break;                                                                                                       \
    }

static void rowvec_neon(const float *panel, const float *x, int ldx, int kc, float *acc, int nr) {
    for (int j = 0; j < nr; j += 4, x += 4, acc += 4 * GEMM_MR)
        switch (nr - j < 4 ? nr - j : 4) {
            NEON_ROWVEC(1) NEON_ROWVEC(2) NEON_ROWVEC(3) NEON_ROWVEC(4)
        default: break;
        }
}
#undef NEON_ROWVEC
#endif

/* ---------------------------------------------------------------- dispatch */

typedef void RowvecFn(const float *panel, const float *x, int ldx, int kc, float *acc, int nr);
typedef void Pack16Fn(float *panel, const void *w, GemmType type, size_t w_row, int k0, int kc);

typedef struct {
    const char *name;
    PanelFn *fn;
    RowvecFn *rowvec; /* or NULL: few tokens go through fn too */
    Pack16Fn *pack16; /* or NULL: pack_panel */
    int (*has)(void);
} Kernel;

#ifdef GEMM_X86
static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif
static int has_any(void) { return 1; }

static const Kernel KERNELS[] = {
#ifdef GEMM_NEON /* every aarch64 CPU has NEON; named fields: whatever else Kernel holds is NULL */
    {.name = "neon", .fn = panel_neon, .rowvec = rowvec_neon, .pack16 = pack_panel16_neon, .has = has_any},
#endif
#ifdef GEMM_X86
    {"avx512", panel_avx512, rowvec_avx512, pack_panel16_avx512, has_avx512},
    {"avx2", panel_avx2, NULL, NULL, has_avx2},
#endif
    {"scalar", panel_scalar, NULL, NULL, has_any},
};
#define N_KERNELS (int)(sizeof KERNELS / sizeof KERNELS[0])

static _Atomic(const Kernel *) chosen;

static const Kernel *find_kernel(const char *name) {
    for (int i = 0; i < N_KERNELS; i++)
        if (!strcmp(KERNELS[i].name, name)) return &KERNELS[i];
    return NULL;
}

/* The best kernel the CPU has, or the one ATTNVIZ_KERNEL names when the CPU
 * has it (gemm_kernel_from_env reports a name that is not usable; here, where
 * nobody can be told, such a name is ignored). */
static const Kernel *best_kernel(void) {
    const Kernel *k = chosen;
    if (k) return k;
    const char *env = getenv(GEMM_KERNEL_ENV);
    if (env && *env && (k = find_kernel(env)) && k->has()) {
        chosen = k;
        return k;
    }
    for (int i = 0; i < N_KERNELS; i++)
        if (KERNELS[i].has()) {
            chosen = &KERNELS[i];
            return &KERNELS[i];
        }
    return &KERNELS[N_KERNELS - 1];
}

const char *gemm_kernel(void) { return best_kernel()->name; }

int gemm_force_kernel(const char *name) {
    if (!name) {
        chosen = NULL;
        return 0;
    }
    const Kernel *k = find_kernel(name);
    if (!k || !k->has()) return -1;
    chosen = k;
    return 0;
}

const char *gemm_kernel_list(int usable) {
    static char list[2][64];
    char *s = list[usable != 0];
    s[0] = 0;
    for (int i = 0; i < N_KERNELS; i++)
        if (!usable || KERNELS[i].has()) {
            if (s[0]) strcat(s, "|");
            strcat(s, KERNELS[i].name);
        }
    return s;
}

int gemm_kernel_from_env(AvErr *e) {
    const char *env = getenv(GEMM_KERNEL_ENV);
    if (!env || !*env) return 0;
    const Kernel *k = find_kernel(env);
    if (!k)
        return av_err(e, "%s=%s: no such kernel (this build has %s)", GEMM_KERNEL_ENV, env, gemm_kernel_list(0));
    if (!k->has())
        return av_err(e, "%s=%s: this CPU lacks it (it has %s)", GEMM_KERNEL_ENV, env, gemm_kernel_list(1));
    chosen = k;
    return 0;
}

/* Tokens up to which a kernel with rowvec takes that path. */
#define GEMM_FEW 48

static void pack(const Kernel *k, float *panel, const void *w, GemmType type, size_t w_row, size_t w_col, int mr,
                 int k0, int kc) {
    if (k->pack16 && w_col == 1 && mr == GEMM_MR) k->pack16(panel, w, type, w_row, k0, kc);
    else pack_panel(panel, w, type, w_row, w_col, mr, k0, kc);
}

void gemm_rows(float *yT, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT, int n, int rows,
               int in, float *scratch) {
    const Kernel *k = best_kernel();
    if (k->rowvec && n <= GEMM_FEW) {
        /* x^T is small: each panel runs through all of k with its sums in acc */
        _Alignas(64) float acc[GEMM_FEW * GEMM_MR];
        for (int r = 0; r < rows; r += GEMM_MR) {
            const int mr = rows - r < GEMM_MR ? rows - r : GEMM_MR;
            const void *wr = elem_ptr(w, type, (size_t)r * w_row);
            memset(acc, 0, sizeof(float) * (size_t)n * GEMM_MR);
            for (int k0 = 0; k0 < in; k0 += GEMM_KC) {
                const int kc = in - k0 < GEMM_KC ? in - k0 : GEMM_KC;
                pack(k, scratch, wr, type, w_row, w_col, mr, k0, kc);
                for (int j0 = 0; j0 < n; j0 += 16)
                    k->rowvec(scratch, xT + (size_t)k0 * n + j0, n, kc, acc + j0 * GEMM_MR, n - j0 < 16 ? n - j0 : 16);
            }
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < n; j++) yT[(size_t)(r + i) * n + j] = acc[j * GEMM_MR + i];
        }
        return;
    }
    for (int k0 = 0; k0 < in; k0 += GEMM_KC) {
        const int kc = in - k0 < GEMM_KC ? in - k0 : GEMM_KC;
        for (int r = 0; r < rows; r += GEMM_MR) {
            const int mr = rows - r < GEMM_MR ? rows - r : GEMM_MR;
            pack(k, scratch, elem_ptr(w, type, (size_t)r * w_row), type, w_row, w_col, mr, k0, kc);
            k->fn(scratch, xT + (size_t)k0 * n, n, kc, yT + (size_t)r * n, mr, k0 == 0);
        }
    }
}
