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
#include <cpuid.h>
#include <immintrin.h>
#define GEMM_X86 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define GEMM_NEON 1
#endif

/* Tokens of x a block of k runs against before the next block of tokens: its
 * packed copy (GEMM_KC x GEMM_NC floats) stays in a core's L2 while every panel
 * of W passes over it; with all of a long input's tokens at once each panel
 * streamed x from memory. Repacking W per block costs 1/GEMM_NC of the work. */
#define GEMM_NC 512

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
    gemm_rows_ld_naive(yT, (size_t)n, w, type, w_row, w_col, xT, (size_t)n, n, rows, in);
}

void gemm_rows_ld_naive(float *yT, size_t ldy, const void *w, GemmType type, size_t w_row, size_t w_col,
                        const float *xT, size_t ldx, int n, int rows, int in) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            float total = 0.0f;
            for (int b = 0; b < in; b += GEMM_KB) {
                float acc = 0.0f;
                for (int k = b; k < in && k < b + GEMM_KB; k++)
                    acc = fmaf(elem(w, type, (size_t)r * w_row + (size_t)k * w_col), xT[(size_t)k * ldx + j], acc);
                total = total + acc;
            }
            yT[(size_t)r * ldy + j] = total;
        }
}

/* panel (kc, h) = W rows [0, mr) x inputs [k0, k0 + kc), rows past mr zero */
static void pack_panel(float *panel, int h, const void *w, GemmType type, size_t w_row, size_t w_col, int mr, int k0,
                       int kc) {
    if (type == GEMM_F32 && w_row == 1) { /* a panel row is mr consecutive floats: attention's q, GPT-2's Conv1D */
        for (int kk = 0; kk < kc; kk++) {
            const float *src = (const float *)w + (size_t)(k0 + kk) * w_col;
            for (int i = 0; i < mr; i++) panel[kk * h + i] = src[i];
            for (int i = mr; i < h; i++) panel[kk * h + i] = 0.0f;
        }
        return;
    }
    for (int kk = 0; kk < kc; kk++)
        for (int i = 0; i < h; i++)
            panel[kk * h + i] = i < mr ? elem(w, type, (size_t)i * w_row + (size_t)(k0 + kk) * w_col) : 0.0f;
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
    if (kk < kc) pack_panel(panel + (size_t)kk * GEMM_MR, GEMM_MR, w, type, w_row, 1, GEMM_MR, k0 + kk, kc - kk);
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

/* Rows of W to fetch into cache while a kernel runs: the rows of the panel
 * that will be copied next (rows row_bytes apart from base), one line of
 * each every 64 / es steps of k, es the size of an element. Each row is a
 * stream of kc elements, too short for the hardware prefetcher to get going,
 * so the copy would otherwise wait on memory. Into L2, not L1, where they
 * would push out the panel and x that the kernel is reading. */
typedef struct {
    const char *base;
    size_t row_bytes;
    int rows, es;
} Ahead;

/* A walk over the rows' lines, a line at a time, for kernels that fetch from
 * inside their k loops. */
typedef struct {
    const char *row; /* the current row's start */
    size_t row_bytes;
    int line, row_lines, rows_left;
} FetchCursor;

static inline void fetch_start(FetchCursor *c, const Ahead *a, int kc) {
    c->row = a->base, c->row_bytes = a->row_bytes;
    c->line = 0, c->row_lines = (kc * a->es + 63) / 64, c->rows_left = a->rows;
}

static inline __attribute__((always_inline)) void fetch_one(FetchCursor *c) {
    if (c->rows_left <= 0) return;
    __builtin_prefetch(c->row + (size_t)c->line * 64, 0, 2);
    if (++c->line == c->row_lines) c->line = 0, c->row += c->row_bytes, c->rows_left--;
}

/* ---------------------------------------------------------------- kernels */

/* One panel against every token: x (kc, n) row stride ldx, y (mr, n) row
 * stride ldy, adding each block's chain to the totals held in y (to 0 when
 * first). */
typedef void PanelFn(const float *panel, const float *x, size_t ldx, int n, int kc, float *y, size_t ldy, int mr,
                     int first, const Ahead *ahead);

/* The portable kernel: CPUs without a SIMD kernel run it, and every other
 * kernel is tested against its bits. A row's outputs go side by side, a strip
 * of tokens at a time: each output keeps its chain (fmaf in k order within a
 * block of GEMM_KB, the block's sum added to its total), but neighbouring
 * outputs' chains are independent, so they overlap rather than each waiting on
 * its last fmaf, and x is read along its rows. Whatever the compiler makes of
 * the strip loop, each fmaf is one correctly rounded operation and nothing is
 * reassociated, so the bits cannot change. */
#define SCALAR_STRIP 64
static inline __attribute__((always_inline)) void panel_scalar_body(const float *panel, const float *x, size_t ldx,
                                                                    int n, int kc, float *y, size_t ldy, int mr,
                                                                    int first) {
    for (int i = 0; i < mr; i++)
        for (int j0 = 0; j0 < n; j0 += SCALAR_STRIP) {
            const int nj = n - j0 < SCALAR_STRIP ? n - j0 : SCALAR_STRIP;
            float total[SCALAR_STRIP], acc[SCALAR_STRIP]; /* (nj) each */
            float *yr = y + (size_t)i * ldy + j0;         /* (nj) */
            for (int j = 0; j < nj; j++) total[j] = first ? 0.0f : yr[j];
            for (int b = 0; b < kc; b += GEMM_KB) {
                for (int j = 0; j < nj; j++) acc[j] = 0.0f;
                for (int kk = b; kk < kc && kk < b + GEMM_KB; kk++) {
                    const float p = panel[kk * GEMM_MR + i];
                    const float *xr = x + (size_t)kk * ldx + j0; /* (nj) */
                    for (int j = 0; j < nj; j++) acc[j] = fmaf(p, xr[j], acc[j]);
                }
                for (int j = 0; j < nj; j++) total[j] = total[j] + acc[j];
            }
            for (int j = 0; j < nj; j++) yr[j] = total[j];
        }
}

#ifdef GEMM_X86
/* The same C built where fmaf is the CPU's instruction, not a call into libm
 * (x86-64's baseline has no FMA): for the x86 CPUs that have one, such as the
 * test runs that force this kernel on an AVX2 or AVX-512 machine. */
__attribute__((target("fma"))) static void panel_scalar_fma(const float *panel, const float *x, size_t ldx, int n,
                                                            int kc, float *y, size_t ldy, int mr, int first) {
    panel_scalar_body(panel, x, ldx, n, kc, y, ldy, mr, first);
}
#endif

static void panel_scalar(const float *panel, const float *x, size_t ldx, int n, int kc, float *y, size_t ldy, int mr,
                         int first, const Ahead *ahead) {
    (void)ahead; /* the reference: nothing to hide */
#ifdef GEMM_X86
    if (__builtin_cpu_supports("fma")) {
        panel_scalar_fma(panel, x, ldx, n, kc, y, ldy, mr, first);
        return;
    }
#endif
    panel_scalar_body(panel, x, ldx, n, kc, y, ldy, mr, first);
}

#ifdef GEMM_X86
/* MR rows x NV vectors of 16 tokens, rows [0, mr) and tokens [0, nr) real;
 * x (kc, 16 NV) contiguous. */
#define AVX512_MICRO(MR, NV, FULL, NAME)                                                                             \
    __attribute__((target("avx512f"))) static void NAME(const float *panel, const float *x, int kc, float *y,         \
                                                                           size_t ldy, int mr, int nr, int first,     \
                                                                           FetchCursor *pf) {                         \
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
            /* a line of the next panel per 8 steps, fetched as the block starts: */                                     \
            /* a test inside the steps costs more than the fetches */                                                    \
            for (int f = kb; pf && f < ke; f += 8) fetch_one(pf);                                                        \
            for (int kk = kb; kk < ke; kk++) {                                                                           \
                __m512 xv[NV];                                                                                           \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) xv[v] =                                             \
                    FULL ? _mm512_loadu_ps(x + (size_t)kk * (16 * NV) + 16 * v)                                          \
                         : _mm512_maskz_loadu_ps(mk[v], x + (size_t)kk * (16 * NV) + 16 * v);                            \
                const float *wk = panel + kk * GEMM_MR;                                                                  \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                  \
                    __m512 b = _mm512_set1_ps(wk[i]);                                                                    \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(b, xv[v], acc[i][v]);\
                }                                                                                                        \
            }                                                                                                            \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) if (FULL || i < mr)                                    \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                   \
                    float *yp = y + (size_t)i * ldy + 16 * v;                                                            \
                    if (FULL) {                                                                                          \
                        const __m512 t = first && kb == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(yp);                   \
                        _mm512_storeu_ps(yp, _mm512_add_ps(t, acc[i][v]));                                               \
                    } else {                                                                                             \
                        const __m512 t = first && kb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk[v], yp);      \
                        _mm512_mask_storeu_ps(yp, mk[v], _mm512_add_ps(t, acc[i][v]));                                   \
                    }                                                                                                    \
                }                                                                                                        \
        }                                                                                                                \
    }
/* Full tiles (all MR rows, all 16 NV tokens) take unmasked loads and
 * stores: masks in the k loop cost registers the compiler then reloads every
 * step. */
AVX512_MICRO(8, 2, 1, micro512_8x2_full)
AVX512_MICRO(8, 2, 0, micro512_8x2)

/* (few tokens go to rowvec_avx512 instead) */
/* x packed by gemm_rows_ld into blocks of 32 tokens, each (kc, 32)
 * contiguous (Kernel.xblock; ldx unused): a tile's k loop walks one short
 * stride instead of rows n floats apart, which at hundreds of tokens miss the
 * TLB and L1. */
__attribute__((target("avx512f"))) static void panel_avx512(const float *panel, const float *x, size_t ldx, int n, int kc,
                                                            float *y, size_t ldy, int mr, int first,
                                                            const Ahead *ahead) {
    (void)ldx;
    /* the next panel's lines, one per 8 steps of k, fetched by the tiles as
     * each block of GEMM_KB steps starts (a burst between tiles waits for
     * fill buffers) */
    FetchCursor pf;
    if (ahead) fetch_start(&pf, ahead, kc);
    /* both halves of the panel against a block of tokens before the next
     * block: the second finds the block's x in L1 */
    for (int j = 0; j < n; j += 32)
        for (int h = 0; h < 2 && 8 * h < mr; h++) {
            const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
            (hr == 8 && n - j >= 32 ? micro512_8x2_full : micro512_8x2)(panel + 8 * h, x + (size_t)j * kc, kc,
                                                                         y + (size_t)8 * h * ldy + j, ldy, hr,
                                                                         n - j < 32 ? n - j : 32, first,
                                                                         ahead ? &pf : NULL);
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
                if (pf) fetch_one(pf);                                                                                   \
                const __m512 p = _mm512_load_ps(panel + kk * GEMM_MR);                                                   \
                const float *xk = x + (size_t)kk * ldx;                                                                  \
                _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) a[j] = _mm512_fmadd_ps(p, _mm512_set1_ps(xk[j]), a[j]);\
            }                                                                                                            \
            _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++)                                                        \
                _mm512_store_ps(acc + 16 * j, _mm512_add_ps(_mm512_load_ps(acc + 16 * j), a[j]));                        \
        }                                                                                                                \
        break;                                                                                                       \
    }

__attribute__((target("avx512f"))) static void rowvec_avx512(const float *panel, const float *x, size_t ldx, int kc,
                                                             float *acc, int nr, FetchCursor *pf) {
    switch (nr) {
        AVX512_ROWVEC(1) AVX512_ROWVEC(2) AVX512_ROWVEC(3) AVX512_ROWVEC(4) AVX512_ROWVEC(5) AVX512_ROWVEC(6)
        AVX512_ROWVEC(7) AVX512_ROWVEC(8) AVX512_ROWVEC(9) AVX512_ROWVEC(10) AVX512_ROWVEC(11) AVX512_ROWVEC(12)
        AVX512_ROWVEC(13) AVX512_ROWVEC(14) AVX512_ROWVEC(15) AVX512_ROWVEC(16)
    default: break;
    }
}

/* AVX2 + FMA (16 registers of 8 floats), with its own blocking (gemm_avx2):
 * x is packed per block of k into contiguous blocks of 16 tokens, and W into
 * panels of A2_MR = 24 rows, run as four 6 x 16 register tiles (12
 * accumulators, 2 token vectors, 1 broadcast) over whole blocks of 16 tokens
 * and as three row vectors against up to 4 tokens at a time over the rest. Up
 * to A2_DIRECT_MAX tokens, F32 weights skip the panel (direct_avx2). No load
 * or store inside a k loop is masked, and x is never read past n. */
#define A2_MR 24
#define A2_KC GEMM_KC

/* 8 consecutive elements of W from i, widened to float */
__attribute__((target("avx2,fma,f16c"))) static inline __attribute__((always_inline)) __m256
load8(const void *w, GemmType type, size_t i) {
    switch (type) {
    case GEMM_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)elem_ptr(w, type, i))), 16));
    case GEMM_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)elem_ptr(w, type, i)));
    default: return _mm256_loadu_ps((const float *)w + i);
    }
}

/* panel rows [kk, kk + 8) x columns [8g, 8g + 8), from rows 8g.. of a
 * row-major W: an 8 x 8 transpose in registers */
__attribute__((target("avx2,fma,f16c"))) static inline __attribute__((always_inline)) void
pack8x8_avx2(float *panel, const void *w, const GemmType type, size_t w_row, int k0, int kk, int g) {
    __m256 r[8], t[8], s[8];
    for (int i = 0; i < 8; i++) r[i] = load8(w, type, (size_t)(8 * g + i) * w_row + (size_t)(k0 + kk));
    for (int i = 0; i < 8; i += 2)
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    /* s[4h + m]: rows 4h..4h+3 of columns m and 4 + m, one per 128-bit lane */
    for (int h = 0; h < 2; h++) {
        s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    float *dst = panel + (size_t)kk * A2_MR + 8 * g;
    for (int m = 0; m < 4; m++) {
        _mm256_storeu_ps(dst + (size_t)m * A2_MR, _mm256_permute2f128_ps(s[m], s[4 + m], 0x20));
        _mm256_storeu_ps(dst + (size_t)(4 + m) * A2_MR, _mm256_permute2f128_ps(s[m], s[4 + m], 0x31));
    }
}

/* panel (kc, A2_MR) from 24 rows of a row-major W, 8 x 8 transposes; the
 * tail of kc past a multiple of 8 by pack_panel. Both halves of a row's
 * 64-byte line (16 F32) one after the other: when rows are a multiple of
 * 4 KB apart, all 24 share one set of an 8-way L1, and a line left for the
 * next 8 inputs is gone by then, read again from L2. */
__attribute__((target("avx2,fma,f16c"))) static inline __attribute__((always_inline)) void
pack24_avx2_t(float *panel, const void *w, const GemmType type, size_t w_row, int k0, int kc) {
    int kk = 0;
    for (; kk + 16 <= kc; kk += 16)
        for (int g = 0; g < A2_MR / 8; g++) {
            pack8x8_avx2(panel, w, type, w_row, k0, kk, g);
            pack8x8_avx2(panel, w, type, w_row, k0, kk + 8, g);
        }
    for (; kk + 8 <= kc; kk += 8)
        for (int g = 0; g < A2_MR / 8; g++) pack8x8_avx2(panel, w, type, w_row, k0, kk, g);
    if (kk < kc) pack_panel(panel + (size_t)kk * A2_MR, A2_MR, w, type, w_row, 1, A2_MR, k0 + kk, kc - kk);
}

/* panel (kc, A2_MR) from rows [0, mr) of W, rows past mr zero: row-major W
 * through the transposes, anything else by pack_panel (F32 stored transposed,
 * GPT-2's Conv1D, a panel row at a time). */
__attribute__((target("avx2,fma,f16c"))) static void pack_avx2(float *panel, const void *w, GemmType type, size_t w_row,
                                                          size_t w_col, int mr, int k0, int kc) {
    if (mr == A2_MR && w_col == 1) {
        switch (type) {
        case GEMM_BF16: pack24_avx2_t(panel, w, GEMM_BF16, w_row, k0, kc); break;
        case GEMM_F16: pack24_avx2_t(panel, w, GEMM_F16, w_row, k0, kc); break;
        default: pack24_avx2_t(panel, w, GEMM_F32, w_row, k0, kc); break;
        }
    } else pack_panel(panel, A2_MR, w, type, w_row, w_col, mr, k0, kc);
}

/* 6 rows x 16 tokens, every one real: y (6, 16) row stride ldy holds the
 * totals each block's chains are added to (0 when first). */
__attribute__((target("avx2,fma"))) static void micro256_6x16(const float *panel, const float *x, size_t ldx, int kc,
                                                              float *y, size_t ldy, int first, FetchCursor *pf) {
    for (int kb = 0; kb < kc; kb += GEMM_KB) {
        const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;
        if (pf) /* 4 lines of the next panel per chain block: one per 8 steps */
            for (int q = 0; q < 4; q++) fetch_one(pf);
        __m256 acc[6][2];
        _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) for (int v = 0; v < 2; v++) acc[i][v] = _mm256_setzero_ps();
        _Pragma("GCC unroll 2") for (int kk = kb; kk < ke; kk++) {
            const __m256 x0 = _mm256_loadu_ps(x + (size_t)kk * ldx), x1 = _mm256_loadu_ps(x + (size_t)kk * ldx + 8);
            const float *wk = panel + (size_t)kk * A2_MR;
            _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) {
                const __m256 b = _mm256_broadcast_ss(wk + i);
                acc[i][0] = _mm256_fmadd_ps(b, x0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(b, x1, acc[i][1]);
            }
        }
        const int fresh = first && kb == 0;
        _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) for (int v = 0; v < 2; v++) {
            float *yp = y + (size_t)i * ldy + 8 * v;
            _mm256_storeu_ps(yp, _mm256_add_ps(fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(yp), acc[i][v]));
        }
    }
}


/* One k of the row-vector tile. */
#define ROWVEC_STEP(NR)                                                                                              \
    do {                                                                                                             \
        const float *pk = panel + (size_t)kk * A2_MR, *xk = x + (size_t)kk * ldx;                                    \
        const __m256 p0 = _mm256_load_ps(pk), p1 = _mm256_load_ps(pk + 8), p2 = _mm256_load_ps(pk + 16);             \
        _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) {                                                       \
            const __m256 b = _mm256_broadcast_ss(xk + j);                                                            \
            a[j][0] = _mm256_fmadd_ps(p0, b, a[j][0]);                                                               \
            a[j][1] = _mm256_fmadd_ps(p1, b, a[j][1]);                                                               \
            a[j][2] = _mm256_fmadd_ps(p2, b, a[j][2]);                                                               \
        }                                                                                                            \
    } while (0)

/* The panel's 24 rows as three vectors against NR tokens, one accumulator
 * per row vector and token: acc (NR, A2_MR) holds the totals each block's
 * chains are added to; ahead, or NULL: the next panel's rows (a line of each
 * every 64 bytes of k, which divides a block of GEMM_KB). */
#define AVX2_ROWVEC(NR)                                                                                              \
    case NR: {                                                                                                       \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                   \
            const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                    \
            __m256 a[NR][3];                                                                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) for (int v = 0; v < 3; v++) a[j][v] =               \
                _mm256_setzero_ps();                                                                                 \
            if (ahead) {                                                                                             \
                const int step = 64 / ahead->es;                                                                     \
                for (int k0 = kb; k0 < ke; k0 += step) {                                                             \
                    for (int i = 0; i < ahead->rows; i++)                                                            \
                        _mm_prefetch(ahead->base + (size_t)i * ahead->row_bytes + (size_t)k0 * ahead->es,            \
                                     _MM_HINT_T1);                                                                   \
                    const int k_end = ke - k0 < step ? ke : k0 + step;                                               \
                    for (int kk = k0; kk < k_end; kk++) ROWVEC_STEP(NR);                                             \
                }                                                                                                    \
            } else                                                                                                   \
                for (int kk = kb; kk < ke; kk++) ROWVEC_STEP(NR);                                                    \
            _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++) for (int v = 0; v < 3; v++)                         \
                _mm256_store_ps(acc + j * A2_MR + 8 * v, _mm256_add_ps(_mm256_load_ps(acc + j * A2_MR + 8 * v), a[j][v]));\
        }                                                                                                            \
        break;                                                                                                       \
    }

__attribute__((target("avx2,fma"))) static void rowvec256(const float *panel, const float *x, size_t ldx, int kc,
                                                          float *acc, int nr, const Ahead *ahead) {
    switch (nr) {
        AVX2_ROWVEC(1) AVX2_ROWVEC(2) AVX2_ROWVEC(3) AVX2_ROWVEC(4)
    default: break;
    }
}

/* Tokens whose x a block of k packs at a time. */
#define A2_NC 128
/* Tokens up to which F32 weights are read in place (direct_avx2). */
#define A2_DIRECT_MAX 64

/* xp: tokens [0, nc) of x (kc, ldx) as blocks of 16 tokens, each (kc, 16)
 * contiguous, so that a tile's k loop walks one short stride through few pages;
 * a last partial block is zero past its nc % 16 tokens (lanes that direct256
 * computes and drops: zeros, not whatever was there, keep them cheap). */
__attribute__((target("avx2,fma"))) static void pack_x_avx2(float *xp, const float *x, size_t ldx, int kc, int nc) {
    for (int j = 0; j < nc; j += 16) {
        float *dst = xp + (size_t)j * kc;
        if (nc - j >= 16)
            for (int kk = 0; kk < kc; kk++) {
                _mm256_store_ps(dst + 16 * kk, _mm256_loadu_ps(x + (size_t)kk * ldx + j));
                _mm256_store_ps(dst + 16 * kk + 8, _mm256_loadu_ps(x + (size_t)kk * ldx + j + 8));
            }
        else
            for (int kk = 0; kk < kc; kk++) {
                memcpy(dst + 16 * kk, x + (size_t)kk * ldx + j, sizeof(float) * (size_t)(nc - j));
                memset(dst + 16 * kk + (nc - j), 0, sizeof(float) * (size_t)(16 - (nc - j)));
            }
    }
}

/* One packed panel (rows [0, mr) real) against the nc tokens packed in xp:
 * y (mr, nc) row stride ldy. Whole 16-token blocks in 6-row tiles, a tile
 * with rows past mr through a copy of its sums; the last nc % 16 tokens by
 * rowvec256, their sums gathered from y and scattered back around it.
 * ahead, or NULL: the next panel's rows, fetched into L2 meanwhile (its copy
 * reads W from memory, a stream per row too short for the hardware
 * prefetcher): spread over the tiles, or by the first rowvec256 when there is
 * no whole block. */
__attribute__((target("avx2,fma"))) static void panel_avx2(const float *panel, const float *xp, int nc, int kc,
                                                           float *y, size_t ldy, int mr, int first,
                                                           const Ahead *ahead) {
    const int nb = nc & ~15;
    FetchCursor pf, *pfp = NULL; /* the next panel's lines, from inside the tiles */
    if (ahead && nb) fetch_start(&pf, ahead, kc), pfp = &pf;
    for (int t = 0; 6 * t < mr; t++) {
        const int tr = mr - 6 * t < 6 ? mr - 6 * t : 6;
        float *yt = y + (size_t)6 * t * ldy;
        if (tr == 6)
            for (int j = 0; j < nb; j += 16) micro256_6x16(panel + 6 * t, xp + (size_t)j * kc, 16, kc, yt + j, ldy, first, pfp);
        else
            for (int j = 0; j < nb; j += 16) {
                _Alignas(32) float tile[6 * 16];
                for (int i = 0; i < tr; i++) memcpy(tile + 16 * i, yt + (size_t)i * ldy + j, sizeof(float) * 16);
                micro256_6x16(panel + 6 * t, xp + (size_t)j * kc, 16, kc, tile, 16, first, pfp);
                for (int i = 0; i < tr; i++) memcpy(yt + (size_t)i * ldy + j, tile + 16 * i, sizeof(float) * 16);
            }
    }
    for (int j = nb; j < nc; j += 4) {
        const int nr = nc - j < 4 ? nc - j : 4;
        _Alignas(32) float acc[4 * A2_MR];
        for (int jj = 0; jj < nr; jj++)
            for (int i = 0; i < A2_MR; i++)
                acc[jj * A2_MR + i] = first || i >= mr ? 0.0f : y[(size_t)i * ldy + j + jj];
        rowvec256(panel, xp + (size_t)nb * kc + (j - nb), 16, kc, acc, nr, j == nb && !nb ? ahead : NULL);
        for (int jj = 0; jj < nr; jj++)
            for (int i = 0; i < mr; i++) y[(size_t)i * ldy + j + jj] = acc[jj * A2_MR + i];
    }
}

/* Row i of a tile of row-major W, rows rb bytes apart: from four bases and
 * the scales of one stride register (x86 addresses base + index x 1, 2, 4 or
 * 8), since twelve row pointers do not fit in the registers beside the rest. */
static inline __attribute__((always_inline)) const float *tile_row(const char *const b[4], size_t rb, int i) {
    switch (i) {
    case 0: return (const float *)b[0];
    case 1: return (const float *)(b[0] + rb);
    case 2: return (const float *)(b[0] + 2 * rb);
    case 3: return (const float *)b[1];
    case 4: return (const float *)(b[0] + 4 * rb);
    case 5: return (const float *)(b[1] + 2 * rb);
    case 6: return (const float *)b[2];
    case 7: return (const float *)(b[1] + 4 * rb);
    case 8: return (const float *)(b[0] + 8 * rb);
    case 9: return (const float *)b[3];
    case 10: return (const float *)(b[2] + 4 * rb);
    default: return (const float *)(b[1] + 8 * rb);
    }
}

/* Few tokens, F32 weights: W read in place, no panel. A panel is copied
 * once per block of k and used against every token, so its copy (a transpose
 * for row-major W) costs about as much as the products at 7 tokens and little
 * at hundreds, where its locality pays. MR rows from w, W[i][kk] at
 * w[i * rs + kk * ks], against NV vectors of 8 tokens of xp (kc, 16); y (MR,
 * 8 NV) row stride ldy: a tile with fewer real tokens goes through a copy
 * (direct_avx2), its lanes past them computed on xp's zeros and dropped.
 * MR x NV = 12 accumulators. pf, or NULL: rows of a row-major W to fetch
 * into cache meanwhile (the next tile's, rows rs apart), a line per row every
 * 16 k; each row is a stream of kc floats, too short for the hardware
 * prefetcher to get going, so W would otherwise come from memory at latency.
 * stage: rows that share an L1 set (rows_spread), 12 of them more than its 8
 * ways, are read a whole line (16 k) of each at a time into a copy on the
 * stack that the steps broadcast from; read in place, each step's 12 loads
 * would evict the lines the next step needs. */
/* One k of a tile: its x vectors from XK, then each row i's broadcast from
 * ROW (an expression in i). */
#define TILE_STEP(MR, NV, XK, ROW)                                                                                   \
    do {                                                                                                             \
        __m256 xv[NV];                                                                                               \
        for (int v = 0; v < NV; v++) xv[v] = _mm256_load_ps((XK) + 8 * v);                                          \
        _Pragma("GCC unroll 12") for (int i = 0; i < MR; i++) {                                                      \
            const __m256 bc = _mm256_broadcast_ss(ROW);                                                              \
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(bc, xv[v], acc[i][v]);                          \
        }                                                                                                            \
    } while (0)
/* One k of a row-major tile read in place: the rows' pointers move on a float. */
#define DIRECT_STEP(MR, NV)                                                                                          \
    do {                                                                                                             \
        TILE_STEP(MR, NV, xp + 16 * kk, tile_row(b, rb, i));                                                         \
        for (int q = 0; q < 4; q++) b[q] += sizeof(float);                                                           \
    } while (0)
#define AVX2_DIRECT(MR, NV)                                                                                          \
    __attribute__((target("avx2,fma"), noinline)) static void direct256_##MR##x##NV(                            \
        const float *w, size_t rs, size_t ks, const float *xp, int kc, float *tile, int first, const float *pf,       \
        int stage) {                                                                                                 \
        const size_t rb = rs * sizeof(float);                                                                        \
        const char *b[4] = {(const char *)w, (const char *)w + 3 * rb, (const char *)w + 6 * rb,                     \
                            (const char *)w + 9 * rb};                                                               \
        for (int kb = 0; kb < kc; kb += GEMM_KB) {                                                                   \
            const int ke = kc - kb < GEMM_KB ? kc : kb + GEMM_KB;                                                    \
            __m256 acc[MR][NV];                                                                                      \
            _Pragma("GCC unroll 12") for (int i = 0; i < MR; i++) for (int v = 0; v < NV; v++) acc[i][v] =           \
                _mm256_setzero_ps();                                                                                 \
            if (ks == 1) {                                                                                           \
                if (stage)                                                                                           \
                    for (int k16 = kb; k16 < ke; k16 += 16) {                                                        \
                        if (ke - k16 < 16) {                                                                         \
                            for (int kk = k16; kk < ke; kk++) DIRECT_STEP(MR, NV);                                   \
                            continue;                                                                                \
                        }                                                                                            \
                        _Alignas(32) float line[MR * 16];                                                            \
                        _Pragma("GCC unroll 12") for (int i = 0; i < MR; i++) {                                      \
                            const float *src = tile_row(b, rb, i);                                                   \
                            _mm256_store_ps(line + 16 * i, _mm256_loadu_ps(src));                                    \
                            _mm256_store_ps(line + 16 * i + 8, _mm256_loadu_ps(src + 8));                            \
                        }                                                                                            \
                        for (int c = 0; c < 16; c++) TILE_STEP(MR, NV, xp + 16 * (k16 + c), line + 16 * i + c);      \
                        for (int q = 0; q < 4; q++) b[q] += 16 * sizeof(float);                                      \
                    }                                                                                                \
                else if (pf)                                                                                         \
                    for (int k16 = kb; k16 < ke; k16 += 16) {                                                        \
                        _Pragma("GCC unroll 12") for (int i = 0; i < MR; i++)                                        \
                            _mm_prefetch((const char *)(pf + (size_t)i * rs + k16), _MM_HINT_T0);                    \
                        const int k_end = ke - k16 < 16 ? ke : k16 + 16;                                             \
                        for (int kk = k16; kk < k_end; kk++) DIRECT_STEP(MR, NV);                                    \
                    }                                                                                                \
                else                                                                                                 \
                    for (int kk = kb; kk < ke; kk++) DIRECT_STEP(MR, NV);                                            \
            } else                                                                                                   \
                for (int kk = kb; kk < ke; kk++) TILE_STEP(MR, NV, xp + 16 * kk, w + (size_t)i * rs + (size_t)kk * ks);  \
            const int fresh = first && kb == 0;                                                                      \
            _Pragma("GCC unroll 12") for (int i = 0; i < MR; i++) for (int v = 0; v < NV; v++) {                     \
                float *tp = tile + 8 * (NV * i + v);                                                                 \
                _mm256_store_ps(tp, _mm256_add_ps(fresh ? _mm256_setzero_ps() : _mm256_load_ps(tp), acc[i][v]));     \
            }                                                                                                        \
        }                                                                                                            \
    }
AVX2_DIRECT(12, 1)
AVX2_DIRECT(6, 2)

/* A2_MR rows of an F32 W in place against the nc tokens of xp: blocks of 16
 * in 6-row tiles, a last block of at most 8 in 12-row tiles (no idle vector);
 * the two layouts apart, so that one of the strides is the constant 1. The
 * sums go in and out through a contiguous copy of the tile (masked for a
 * partial block), so that the k loop holds no pointer into y: twelve of them
 * cost it registers it needs. */
#define DIRECT_TILE(FN, MR, WT)                                                                                      \
    do {                                                                                                             \
        if (w_col == 1)                                                                                              \
            FN(w + (size_t)(WT) * w_row, w_row, 1, xb, kc, tile, first,                                              \
               j == 0 && spread && (WT) + 2 * (MR) <= rows_left ? w + (size_t)((WT) + (MR)) * w_row : NULL,            \
               (MR) == 12 && !spread);                                                                                \
        else FN(w + (WT), 1, w_col, xb, kc, tile, first, NULL, 0);                                                   \
    } while (0)
#define DIRECT_BLOCK(FN, MR, NT)                                                                                     \
    for (int t = 0; t < A2_MR; t += MR) {                                                                            \
        float *yt = y + (size_t)t * ldy + j;                                                                         \
        _Alignas(32) float tile[12 * 16];                                                                            \
        for (int i = 0; i < MR && !first; i++)                                                                       \
            for (int v = 0; v < NT / 8; v++) {                                                                       \
                const float *src = yt + (size_t)i * ldy + 8 * v;                                                     \
                const __m256 sum = nr == NT ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, mk[v]);                  \
                _mm256_store_ps(tile + NT * i + 8 * v, sum);                                                         \
            }                                                                                                        \
        DIRECT_TILE(FN, MR, t);                                                                                      \
        for (int i = 0; i < MR; i++)                                                                                 \
            for (int v = 0; v < NT / 8; v++)                                                                         \
                if (nr == NT) _mm256_storeu_ps(yt + (size_t)i * ldy + 8 * v, _mm256_load_ps(tile + NT * i + 8 * v));  \
                else                                                                                                 \
                    _mm256_maskstore_ps(yt + (size_t)i * ldy + 8 * v, mk[v], _mm256_load_ps(tile + NT * i + 8 * v)); \
    }

/* Whether 24 F32 rows w_row apart (a tile and the next, which it fetches)
 * fall in at least 4 of an L1's 64 sets at the same column: rows a multiple
 * of 4 KB apart (inputs of 1024, 2048, 3072, ...) all share one set, and
 * 12 rows read together plus 12 fetched already overflow an 8-way cache
 * (AMD's); the tile then reads without fetching ahead. */
static int rows_spread(size_t w_row) {
    unsigned long long sets = 0;
    for (size_t i = 0; i < 24; i++) sets |= 1ull << (i * w_row * sizeof(float) / 64 % 64);
    return __builtin_popcountll(sets) >= 4;
}

__attribute__((target("avx2,fma"))) static void direct_avx2(const float *w, size_t w_row, size_t w_col, const float *xp,
                                                            int nc, int kc, float *y, size_t ldy, int first,
                                                            int rows_left) {
    const int spread = w_col == 1 && rows_spread(w_row);
    for (int j = 0; j < nc; j += 16) {
        const int nr = nc - j < 16 ? nc - j : 16;
        const float *xb = xp + (size_t)j * kc;
        __m256i mk[2];
        for (int v = 0; v < 2; v++)
            mk[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8 * v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        if (nr > 8) DIRECT_BLOCK(direct256_6x2, 6, 16)
        else DIRECT_BLOCK(direct256_12x1, 12, 8)
    }
}

/* gemm_rows on the AVX2 kernel: for each block of k and of at most GEMM_NC
 * tokens, x packed once, then every panel of W packed and run against it.
 * scratch: the panel, then x when it has at most A2_NC tokens; more take a
 * buffer of their own (blocks of A2_NC if it can't be had). */
__attribute__((target("avx2,fma,f16c"))) static void gemm_avx2(float *yT, size_t ldy, const void *w, GemmType type,
                                                              size_t w_row, size_t w_col, const float *xT, size_t ldx,
                                                              int n, int rows, int in, float *scratch) {
    float *panel = scratch, *xp = scratch + A2_MR * A2_KC, *heap = NULL;
    int nc_max = A2_NC;
    const int direct = type == GEMM_F32 && n <= A2_DIRECT_MAX;
    if (n > A2_NC) {
        const int nc = n < GEMM_NC ? n : GEMM_NC;
        if ((heap = aligned_alloc(64, sizeof(float) * A2_KC * (size_t)((nc + 15) & ~15)))) xp = heap, nc_max = nc;
    }
    for (int k0 = 0; k0 < in; k0 += A2_KC) {
        const int kc = in - k0 < A2_KC ? in - k0 : A2_KC;
        for (int j0 = 0; j0 < n; j0 += nc_max) {
            const int nc = n - j0 < nc_max ? n - j0 : nc_max;
            pack_x_avx2(xp, xT + (size_t)k0 * ldx + j0, ldx, kc, nc);
            for (int r = 0; r < rows; r += A2_MR) {
                const int mr = rows - r < A2_MR ? rows - r : A2_MR;
                if (direct && mr == A2_MR) {
                    direct_avx2((const float *)w + (size_t)r * w_row + (size_t)k0 * w_col, w_row, w_col, xp, nc, kc,
                                yT + (size_t)r * ldy + j0, ldy, k0 == 0, rows - r);
                    continue;
                }
                pack_avx2(panel, elem_ptr(w, type, (size_t)r * w_row), type, w_row, w_col, mr, k0, kc);
                Ahead next = {NULL, 0, 0, 0};
                if (w_col == 1 && r + A2_MR < rows) {
                    next.es = type == GEMM_F32 ? (int)sizeof(float) : (int)sizeof(uint16_t);
                    next.base = (const char *)elem_ptr(w, type, (size_t)(r + A2_MR) * w_row + (size_t)k0);
                    next.row_bytes = w_row * (size_t)next.es;
                    next.rows = rows - r - A2_MR < A2_MR ? rows - r - A2_MR : A2_MR;
                }
                panel_avx2(panel, xp, nc, kc, yT + (size_t)r * ldy + j0, ldy, mr, k0 == 0, next.base ? &next : NULL);
            }
        }
    }
    free(heap);
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
static void panel_neon(const float *panel, const float *x, size_t ldx, int n, int kc, float *y, size_t ldy, int mr,
                       int first, const Ahead *ahead) {
    (void)ahead; /* untimed on Arm: no fetching ahead until it can be measured */
    const int full = n - n % 12;
    for (int h = 0; h < 2 && 8 * h < mr; h++) {
        const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
        for (int j = 0; j < full; j += 12)
            micro_neon_8x12(panel + 8 * h, x + j, ldx, kc, y + (size_t)8 * h * ldy + j, ldy, hr, first);
    }
    if (full == n) return;
    const int nr = n - full;
    _Alignas(16) float xb[GEMM_KC * 12], yb[8 * 12];
    for (int kk = 0; kk < kc; kk++) {
        memcpy(xb + kk * 12, x + (size_t)kk * ldx + full, sizeof(float) * (size_t)nr);
        memset(xb + kk * 12 + nr, 0, sizeof(float) * (size_t)(12 - nr));
    }
    for (int h = 0; h < 2 && 8 * h < mr; h++) {
        const int hr = mr - 8 * h < 8 ? mr - 8 * h : 8;
        float *yh = y + (size_t)8 * h * ldy + full;
        if (!first)
            for (int i = 0; i < hr; i++) {
                memcpy(yb + i * 12, yh + (size_t)i * ldy, sizeof(float) * (size_t)nr);
                memset(yb + i * 12 + nr, 0, sizeof(float) * (size_t)(12 - nr));
            }
        micro_neon_8x12(panel + 8 * h, xb, 12, kc, yb, 12, hr, first);
        for (int i = 0; i < hr; i++) memcpy(yh + (size_t)i * ldy, yb + i * 12, sizeof(float) * (size_t)nr);
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

static void rowvec_neon(const float *panel, const float *x, size_t ldx, int kc, float *acc, int nr, FetchCursor *pf) {
    (void)pf; /* untimed on Arm: no fetching ahead */
    for (int j = 0; j < nr; j += 4, x += 4, acc += 4 * GEMM_MR)
        switch (nr - j < 4 ? nr - j : 4) {
            NEON_ROWVEC(1) NEON_ROWVEC(2) NEON_ROWVEC(3) NEON_ROWVEC(4)
        default: break;
        }
}
#undef NEON_ROWVEC
#endif

/* ---------------------------------------------------------------- dispatch */

typedef void RowvecFn(const float *panel, const float *x, size_t ldx, int kc, float *acc, int nr, FetchCursor *pf);
typedef void Pack16Fn(float *panel, const void *w, GemmType type, size_t w_row, int k0, int kc);
typedef void GemmFn(float *yT, size_t ldy, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT,
                    size_t ldx, int n, int rows, int in, float *scratch);

typedef struct {
    const char *name;
    PanelFn *fn;      /* or NULL when gemm is set */
    RowvecFn *rowvec; /* or NULL: few tokens go through fn too */
    Pack16Fn *pack16; /* or NULL: pack_panel */
    GemmFn *gemm;     /* or NULL: gemm_rows' own loops over fn, rowvec and pack16 */
    int xblock;       /* > 0: fn takes x packed in blocks of this many tokens (pack_x), else x in place */
    int (*has)(void);
    int vec;          /* gemm_vec_level's build for it */
} Kernel;

#ifdef GEMM_X86
static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
/* F16C (the AVX2 kernel widens F16 weights with it) by CPUID: clang's
 * __builtin_cpu_supports does not know the name. */
static int has_avx2(void) {
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C);
}
#endif
static int has_any(void) { return 1; }

static const Kernel KERNELS[] = {
#ifdef GEMM_NEON /* every aarch64 CPU has NEON; named fields: whatever else Kernel holds is NULL */
    {.name = "neon", .fn = panel_neon, .rowvec = rowvec_neon, .pack16 = pack_panel16_neon, .has = has_any},
#endif
#ifdef GEMM_X86
    {"avx512", panel_avx512, rowvec_avx512, pack_panel16_avx512, NULL, 32, has_avx512, 2},
    {"avx2", NULL, NULL, NULL, gemm_avx2, 0, has_avx2, 1},
#endif
    {"scalar", panel_scalar, NULL, NULL, NULL, 0, has_any, 0},
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

#ifdef GEMM_X86
/* x86-64-v4's AVX-512 subsets, which the loops' AVX-512 build may use */
static int has_v4(void) {
    static _Atomic int v4 = -1;
    int h = v4;
    if (h < 0)
        v4 = h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
    return h;
}
#endif

int gemm_vec_level(void) {
    const int v = best_kernel()->vec;
#ifdef GEMM_X86
    if (v == 2 && !has_v4()) return 1;
#endif
    return v;
}

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

/* Tokens up to which a kernel with rowvec takes that path; tokens of packed x
 * the scratch holds after the panel (gemm.h's GEMM_SCRATCH). */
#define GEMM_FEW 48
#define GEMM_XP 128

#ifdef GEMM_X86
/* dst (kc, 32) = 32 tokens of x (kc, ldx); only the avx512 kernel packs x
 * in blocks of 32 (Kernel.xblock), so the CPU has the instructions */
__attribute__((target("avx512f"))) static void pack_x32_avx512(float *dst, const float *x, size_t ldx, int kc) {
    for (int kk = 0; kk < kc; kk++) {
        _mm512_store_ps(dst + (size_t)kk * 32, _mm512_loadu_ps(x + (size_t)kk * ldx));
        _mm512_store_ps(dst + (size_t)kk * 32 + 16, _mm512_loadu_ps(x + (size_t)kk * ldx + 16));
    }
}
#endif

/* xp: tokens [0, nc) of x (kc, ldx) as blocks of xb tokens, each (kc, xb)
 * contiguous, a last partial block zero past its tokens. */
static void pack_x(float *xp, int xb, const float *x, size_t ldx, int kc, int nc) {
    for (int j = 0; j < nc; j += xb) {
        const int nr = nc - j < xb ? nc - j : xb;
        float *dst = xp + (size_t)j * kc;
#ifdef GEMM_X86
        if (xb == 32 && nr == 32) { /* the AVX-512 kernel's blocks: a call of memcpy per 128 bytes cost more */
            pack_x32_avx512(dst, x + j, ldx, kc);
            continue;
        }
#endif
        for (int kk = 0; kk < kc; kk++) {
            memcpy(dst + (size_t)kk * xb, x + (size_t)kk * ldx + j, sizeof(float) * (size_t)nr);
            if (nr < xb) memset(dst + (size_t)kk * xb + nr, 0, sizeof(float) * (size_t)(xb - nr));
        }
    }
}

static void pack(const Kernel *k, float *panel, const void *w, GemmType type, size_t w_row, size_t w_col, int mr,
                 int k0, int kc) {
    if (k->pack16 && w_col == 1 && mr == GEMM_MR) k->pack16(panel, w, type, w_row, k0, kc);
    else pack_panel(panel, GEMM_MR, w, type, w_row, w_col, mr, k0, kc);
}

void gemm_rows(float *yT, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT, int n, int rows,
               int in, float *scratch) {
    gemm_rows_ld(yT, (size_t)n, w, type, w_row, w_col, xT, (size_t)n, n, rows, in, scratch);
}

void gemm_rows_ld(float *yT, size_t ldy, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT,
                  size_t ldx, int n, int rows, int in, float *scratch) {
    if (n <= 0 || rows <= 0) return;
    if (in <= 0) { /* an empty sum */
        for (int r = 0; r < rows; r++) memset(yT + (size_t)r * ldy, 0, sizeof(float) * (size_t)n);
        return;
    }
    const Kernel *k = best_kernel();
    if (k->gemm) {
        k->gemm(yT, ldy, w, type, w_row, w_col, xT, ldx, n, rows, in, scratch);
        return;
    }
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
                /* the block of W packed next (these rows' next inputs, or the next rows' first),
                 * fetched a line per step of k meanwhile: a few tokens' products wait on W otherwise */
                FetchCursor pf, *pfp = NULL;
                if (w_col == 1) {
                    const int es = type == GEMM_F32 ? (int)sizeof(float) : (int)sizeof(uint16_t);
                    Ahead next = {NULL, w_row * (size_t)es, 0, es};
                    int next_kc = 0;
                    if (k0 + GEMM_KC < in) {
                        next.base = (const char *)elem_ptr(w, type, (size_t)r * w_row + (size_t)(k0 + GEMM_KC));
                        next.rows = mr, next_kc = in - k0 - GEMM_KC < GEMM_KC ? in - k0 - GEMM_KC : GEMM_KC;
                    } else if (r + GEMM_MR < rows) {
                        next.base = (const char *)elem_ptr(w, type, (size_t)(r + GEMM_MR) * w_row);
                        next.rows = rows - r - GEMM_MR < GEMM_MR ? rows - r - GEMM_MR : GEMM_MR;
                        next_kc = in < GEMM_KC ? in : GEMM_KC;
                    }
                    if (next.base) fetch_start(&pf, &next, next_kc), pfp = &pf;
                }
                for (int j0 = 0; j0 < n; j0 += 16)
                    k->rowvec(scratch, xT + (size_t)k0 * ldx + j0, ldx, kc, acc + j0 * GEMM_MR, n - j0 < 16 ? n - j0 : 16,
                              pfp);
            }
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < n; j++) yT[(size_t)(r + i) * ldy + j] = acc[j * GEMM_MR + i];
        }
        return;
    }
    /* x packed per block of k (Kernel.xblock): in the scratch after the panel
     * up to GEMM_XP tokens, else in a buffer of its own, a block of at most
     * GEMM_NC tokens at a time (of GEMM_XP if it can't be had); W's panels
     * are packed again per block of tokens */
    const int xb = k->xblock;
    float *xp = scratch + GEMM_MR * GEMM_KC, *heap = NULL;
    int nc_max = xb ? GEMM_XP : (n < GEMM_NC ? n : GEMM_NC);
    if (xb && n > GEMM_XP) {
        const int nc = n < GEMM_NC ? n : GEMM_NC;
        if ((heap = aligned_alloc(64, sizeof(float) * GEMM_KC * (size_t)((nc + xb - 1) / xb * xb)))) xp = heap, nc_max = nc;
    }
    for (int k0 = 0; k0 < in; k0 += GEMM_KC)
        for (int j0 = 0; j0 < n; j0 += nc_max) {
        const int kc = in - k0 < GEMM_KC ? in - k0 : GEMM_KC, nc = n - j0 < nc_max ? n - j0 : nc_max;
        const float *x = xT + (size_t)k0 * ldx + j0;
        if (xb) pack_x(xp, xb, x, ldx, kc, nc), x = xp;
        for (int r = 0; r < rows; r += GEMM_MR) {
            const int mr = rows - r < GEMM_MR ? rows - r : GEMM_MR;
            pack(k, scratch, elem_ptr(w, type, (size_t)r * w_row), type, w_row, w_col, mr, k0, kc);
            Ahead next = {NULL, 0, 0, 0}; /* the next panel's rows, when row-major */
            if (w_col == 1 && r + GEMM_MR < rows) {
                next.es = type == GEMM_F32 ? (int)sizeof(float) : (int)sizeof(uint16_t);
                next.base = (const char *)elem_ptr(w, type, (size_t)(r + GEMM_MR) * w_row + (size_t)k0);
                next.row_bytes = w_row * (size_t)next.es;
                next.rows = rows - r - GEMM_MR < GEMM_MR ? rows - r - GEMM_MR : GEMM_MR;
            }
            k->fn(scratch, x, ldx, nc, kc, yT + (size_t)r * ldy + j0, ldy, mr, k0 == 0, next.base ? &next : NULL);
        }
    }
    free(heap);
}
