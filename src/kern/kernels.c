/* kernels.c — linear layers (gemm.h's products, weights widened a block of
 * rows at a time), norms, softmax, attention, activations and rotary
 * positions, each beside its naive reference. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "quant.h"
#include "vecfn.h"

void kern_matmul_naive(float *y, const float *x, const float *w, const float *b, int n, int in, int out) {
    // y (n, out) = x (n, in) @ w (out, in)^T + b (out)
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int k = 0; k < in; k++) acc += (double)x[(size_t)i * in + k] * w[(size_t)o * in + k];
            y[(size_t)i * out + o] = (float)acc;
        }
}

/* Why y^T = W x^T: activations are kept feature-major (one row per
 * feature, one column per token), so a product's vectors run along the
 * tokens, which gemm.h's kernels need for their fixed rounding.
 *
 * Weights not stored as F32 are widened a few rows at a time into the
 * calling thread's scratch, just before the products that read them, so
 * the model stays in its checkpoint's (half or block-quantized) size in memory. */

/* A float view of rows [r0, r1) of W: the storage itself for F32, else those
 * rows widened into scratch ((r1 - r0) rows of in floats). W[r][k] is
 * w[r * row + k * col]. */
typedef struct {
    const float *w; /* &W[r0][0] (or W^T's column r0 for Conv1D) */
    size_t row, col;
} RowsView;

static int view_rows(const Linear *lin, int r0, int r1, float *scratch, RowsView *v) {
    if (lin->type == KERN_F32) {
        v->w = lin->conv1d ? (const float *)lin->w + r0 : (const float *)lin->w + (size_t)r0 * lin->ld;
        v->row = lin->conv1d ? 1 : (size_t)lin->ld;
        v->col = lin->conv1d ? (size_t)lin->ld : 1;
        return 0;
    }
    if (quant_rows(lin->type, lin->w, (size_t)lin->out * lin->row_bytes, (size_t)lin->out, (size_t)lin->in,
                   (size_t)r0, (size_t)r1, scratch, lin->name, NULL) != 0)
        return -1;
    v->w = scratch, v->row = (size_t)lin->in, v->col = 1;
    return 0;
}

void kern_transpose_ld(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols) {
    /* in tiles of 32 x 32, each read from 32 rows' lines that stay in L1 while
     * it writes 32 rows of dst contiguously: row by row, every element written
     * went to another line (and at hundreds of rows another page) */
    enum { TB = 32 };
    for (int i0 = 0; i0 < rows; i0 += TB)
        for (int j0 = 0; j0 < cols; j0 += TB) {
            const int i1 = rows - i0 < TB ? rows : i0 + TB, j1 = cols - j0 < TB ? cols : j0 + TB;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) dst[(size_t)j * ldd + i] = src[(size_t)i * lds + j];
        }
}

void kern_transpose(float *dst, const float *src, int rows, int cols) {
    kern_transpose_ld(dst, (size_t)rows, src, (size_t)cols, rows, cols);
}

/* float32 -> binary16, round to nearest even (the same rule as F16C's
 * vcvtps2ph with rounding mode 0). */
static uint16_t f32_to_f16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    const uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    const uint32_t a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN stays NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* from 65520 up (65504 plus half its ulp, a tie to even): inf */
    if (a < 0x38800000u) {                       /* below 2^-14: a subnormal or zero */
        if (a <= 0x33000000u) return sign;       /* up to 2^-25, half the least subnormal (a tie to even 0) */
        const uint32_t man = (a & 0x7fffffu) | 0x800000u;
        const int shift = 126 - (int)(a >> 23); /* 14 .. 24 */
        uint32_t h = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1))) h++;
        return sign | (uint16_t)h;
    }
    uint32_t h = ((a >> 23) - 112) << 10 | (a & 0x7fffffu) >> 13;
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry into the exponent is still right */
    return sign | (uint16_t)h;
}

static float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (ex == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (ex) {
        bits = sign | (ex + 112) << 23 | man << 13;
    } else {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float f = (float)man * 5.9604644775390625e-08f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(b >> 16 | 0x40u); /* NaN stays NaN */
    b += 0x7fffu + ((b >> 16) & 1);                                         /* round to nearest even */
    return (uint16_t)(b >> 16);
}

static float bf16_to_f32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t kern_to_half(float x, int prec) { return prec == 2 ? f32_to_bf16(x) : f32_to_f16(x); }
float kern_from_half(uint16_t h, int prec) { return prec == 2 ? bf16_to_f32(h) : f16_to_f32(h); }
int kern_half_finite(uint16_t h, int prec) { return prec == 2 ? (h & 0x7f80u) != 0x7f80u : (h & 0x7c00u) != 0x7c00u; }

void kern_transpose_to_half(uint16_t *dst, const float *src, int rows, int cols, int prec) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = kern_to_half(src[(size_t)i * cols + j], prec);
}

void kern_transpose_from_half(float *dst, const uint16_t *src, int rows, int cols, int prec) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = kern_from_half(src[(size_t)i * cols + j], prec);
}

/* Rows [r0, r1) of y^T get the bias and the activation (act < 0: none). */
static void bias_act_rows(float *yT, const float *b, int act, int n, int r0, int r1) {
    // yT (out, n)
    if (b)
        for (int r = r0; r < r1; r++) {
            float *row = yT + (size_t)r * n; // (n)
            for (int j = 0; j < n; j++) row[j] += b[r];
        }
    if (act >= 0) kern_activate(yT + (size_t)r0 * n, (size_t)(r1 - r0) * n, (ActKind)act);
}

void kern_blas_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

int kern_linear_step(float *y, const float *x, const Linear *lin, int r0, int r1, int act, float *scratch) {
    if (r0 >= r1) return 0;
    /* straight from the blocks, nothing widened, where the SIMD builds run; the
     * portable build (scalar, neon) is slower than widening for OpenBLAS's sgemv */
    if (gemm_vec_level() > 0 && quant_matvec_covers(lin->type)) {
        if (quant_matvec(lin->type, lin->w, (size_t)lin->out * lin->row_bytes, (size_t)lin->out, (size_t)lin->in,
                         (size_t)r0, (size_t)r1, x, y + r0, scratch, lin->name, NULL) != 0)
            return -1;
        bias_act_rows(y, lin->b, act, 1, r0, r1);
        return 0;
    }
    const int step = lin->type == KERN_F32 ? r1 - r0 : kern_widen_step(lin->in);
    for (int r = r0; r < r1; r += step) {
        int tr = r1 - r < step ? r1 - r : step;
        RowsView v;
        if (view_rows(lin, r, r + tr, scratch, &v) != 0) return -1;
        if (v.col == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, tr, lin->in, 1.0f, v.w, (int)v.row, x, 1, 0.0f, y + r, 1);
        else cblas_sgemv(CblasRowMajor, CblasTrans, lin->in, tr, 1.0f, v.w, (int)v.col, x, 1, 0.0f, y + r, 1);
    }
    bias_act_rows(y, lin->b, act, 1, r0, r1);
    return 0;
}

int kern_linear_rows(float *yT, const float *xT, const Linear *lin, int n, int r0, int r1, int act, float *scratch) {
    // yT[r0:r1] (out, n) = act(W[r0:r1] (out, in) @ xT (in, n) + b[r0:r1])
    if (r0 >= r1) return 0;
    _Alignas(64) float panel[GEMM_SCRATCH];
    if (lin->type == KERN_BF16 || lin->type == KERN_F16) {
        /* widened as the product copies them: half the bytes read */
        const size_t ld = lin->row_bytes / 2;
        gemm_rows(yT + (size_t)r0 * n, (const uint16_t *)lin->w + (size_t)r0 * ld,
                  lin->type == KERN_BF16 ? GEMM_BF16 : GEMM_F16, ld, 1, xT, n, r1 - r0, lin->in, panel);
    } else {
        const int step = lin->type == KERN_F32 ? r1 - r0 : kern_widen_step(lin->in);
        for (int r = r0; r < r1; r += step) {
            int tr = r1 - r < step ? r1 - r : step;
            RowsView v;
            if (view_rows(lin, r, r + tr, scratch, &v) != 0) return -1;
            gemm_rows(yT + (size_t)r * n, v.w, GEMM_F32, v.row, v.col, xT, n, tr, lin->in, panel);
        }
    }
    bias_act_rows(yT, lin->b, act, n, r0, r1);
    return 0;
}

/* W[o][k] of an F32 weight in either layout. */
static float weight_f32(const Linear *lin, int o, int k) {
    return lin->conv1d ? ((const float *)lin->w)[(size_t)k * lin->ld + o]
                       : ((const float *)lin->w)[(size_t)o * lin->ld + k];
}

void kern_linear_naive(float *y, const float *x, const Linear *lin, int n) {
    // y (n, out) = x (n, in) @ W^T + b; other storage types widened by quant.h's naive reference, a row at a time
    const int in = lin->in, out = lin->out;
    float *wrow = lin->type == KERN_F32 ? NULL : malloc((size_t)in * sizeof *wrow);
    for (int o = 0; o < out; o++) {
        if (wrow)
            quant_rows_naive(lin->type, lin->w, (size_t)out * lin->row_bytes, (size_t)out, (size_t)in, (size_t)o,
                             (size_t)o + 1, wrow, lin->name, NULL);
        for (int i = 0; i < n; i++) {
            double acc = lin->b ? lin->b[o] : 0.0;
            for (int k = 0; k < in; k++) acc += (double)x[(size_t)i * in + k] * (wrow ? wrow[k] : weight_f32(lin, o, k));
            y[(size_t)i * out + o] = (float)acc;
        }
    }
    free(wrow);
}

void kern_norm_naive(float *x, const Norm *nm, int n, int dim) {
    // x (n, dim) normalized in place over dim; biased variance as torch.nn.LayerNorm; RMSNorm as Llama's
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * dim;
        double mean = 0, var = 0;
        if (!nm->rms) {
            for (int j = 0; j < dim; j++) mean += r[j];
            mean /= dim;
        }
        for (int j = 0; j < dim; j++) {
            double d = r[j] - mean;
            var += d * d;
        }
        var /= dim;
        float inv = (float)(1.0 / sqrt(var + nm->eps)), m = (float)mean;
        for (int j = 0; j < dim; j++) r[j] = (r[j] - m) * inv * nm->g[j] + (nm->b ? nm->b[j] : 0.0f);
    }
}

/* exp(x) by range reduction and a degree-6 polynomial (Cephes' coefficients):
 * relative error ~2e-7, and branch-free so loops over it vectorize, where libm's
 * expf is a call per element. Arguments are clamped to the float range. */
static inline float vexpf(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* round(x / ln 2) with the 1.5 * 2^23 trick, exact without -ffast-math */
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - fn * 0.693359375f - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)fn + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* s += b in MOM_LANES lanes, each a compensated (Kahan) sum: c keeps what
 * each addition rounded off, so a lane's error stays about one rounding of
 * its total however many blocks it adds, in float lanes the vectorizer
 * handles (-std=c11 contracts nothing, so the compensation is kept). */
#define MOM_BLOCK 64
#define MOM_LANES 16
__attribute__((always_inline)) static inline void kahan_lanes(float *s, float *c, const float *b) {
    for (int k = 0; k < MOM_LANES; k++) {
        const float y = b[k] - c[k], t = s[k] + y;
        c[k] = (t - s[k]) - y;
        s[k] = t;
    }
}

/* r[j] = exp(scale r[j] - smx) for the row's cols keys, as softmax_scaled_row
 * computes them; with acc (2 doubles) also the sums the row's entropy and
 * mean distance are made of (row_moments): sum e a (a the exponent's
 * argument, clamped as vexpf clamps it) and sum e |rel - j|. Each block of 64
 * keys is summed in 16 lanes, the blocks into compensated lanes, the lanes
 * into doubles at the end: a fixed order whatever the vector width (the same
 * bits in every build, vecfn.h); the tail goes straight to the doubles. The distances
 * are floats counted down from rel - j0 (exact below 2^24). */
__attribute__((always_inline)) static inline void exp_row(float *r, int cols, float scale, float smx, int rel,
                                                          double *acc) {
    if (!acc) {
        for (int j = 0; j < cols; j++) {
            const float t = r[j] * scale;
            r[j] = vexpf(t - smx);
        }
        return;
    }
    float sa[MOM_LANES] = {0}, sd[MOM_LANES] = {0}, ca[MOM_LANES] = {0}, cd[MOM_LANES] = {0}, lane[MOM_LANES];
    for (int k = 0; k < MOM_LANES; k++) lane[k] = (float)k;
    int j0 = 0;
    for (; j0 + MOM_BLOCK <= cols; j0 += MOM_BLOCK) {
        float ba[MOM_LANES] = {0}, bd[MOM_LANES] = {0};
        for (int q = 0; q < MOM_BLOCK; q += MOM_LANES) {
            const float d0 = (float)(rel - j0 - q);
            for (int k = 0; k < MOM_LANES; k++) {
                const int j = j0 + q + k;
                const float t = r[j] * scale, a = t - smx, e = vexpf(a);
                r[j] = e;
                ba[k] += e * (a < -87.0f ? -87.0f : a);
                bd[k] += e * fabsf(d0 - lane[k]);
            }
        }
        kahan_lanes(sa, ca, ba);
        kahan_lanes(sd, cd, bd);
    }
    acc[0] = acc[1] = 0;
    for (int k = 0; k < MOM_LANES; k++) {
        acc[0] += (double)sa[k] - ca[k];
        acc[1] += (double)sd[k] - cd[k];
    }
    for (int j = j0; j < cols; j++) {
        const float t = r[j] * scale, a = t - smx, e = vexpf(a);
        r[j] = e;
        acc[0] += (double)(e * (a < -87.0f ? -87.0f : a));
        acc[1] += (double)(e * fabsf((float)(rel - j)));
    }
}

/* A row's moments from exp_row's sums, the factor inv its weights were
 * scaled by (p_j = e_j inv, rounded) and their total (mom's, set first):
 * entropy -sum p ln p = -sum p (ln e + ln inv) = -(inv sum e a + ln inv sum p),
 * ln e_j being the exponent's argument; mean distance inv sum e |i - j|. */
static void row_moments(const double *acc, float inv, double *mom) {
    mom[KERN_MOM_ENTROPY] = -((double)inv * acc[0] + log((double)inv) * mom[KERN_MOM_TOTAL]);
    mom[KERN_MOM_DISTANCE] = (double)inv * acc[1];
}

/* r[k] *= inv, and the sum of the weights so rounded, less keys e0 and e1
 * (-1: none; the first key and the query's own, which --stats and heads may
 * leave out: a total less a 0.99 sink would cancel), in 8 double lanes added
 * 0 to 7 at the end (the same bits in every build); *total adds them back. */
__attribute__((always_inline)) static inline double scale_total(float *r, int cols, float inv, int e0, int e1,
                                                                double *total) {
    double lane[8] = {0}, rest = 0;
    int k = 0;
    for (; k + 8 <= cols; k += 8)
        for (int q = 0; q < 8; q++) {
            r[k + q] *= inv;
            lane[q] += k + q == e0 || k + q == e1 ? 0.0 : (double)r[k + q];
        }
    for (; k < cols; k++) {
        r[k] *= inv;
        lane[0] += k == e0 || k == e1 ? 0.0 : (double)r[k];
    }
    for (int q = 0; q < 8; q++) rest += lane[q];
    *total = rest + (e0 >= 0 && e0 < cols ? (double)r[e0] : 0.0) + (e1 >= 0 && e1 < cols && e1 != e0 ? (double)r[e1] : 0.0);
    return rest;
}

/* The largest of r[0, n), n >= 1: each float's bits turned into an integer of
 * the same order (negative ones' magnitude bits flipped, so -0 < +0) and the
 * integers' maximum taken, which every build vectorizes (a float maximum's
 * lanes it would not reorder, for NaNs and signed zeros); one of the values,
 * exactly. */
__attribute__((always_inline)) static inline float row_max(const float *r, int n) {
    int32_t m = INT32_MIN;
    for (int j = 0; j < n; j++) {
        int32_t b;
        memcpy(&b, r + j, sizeof b);
        b ^= (b >> 31) & 0x7fffffff;
        m = b > m ? b : m;
    }
    m ^= (m >> 31) & 0x7fffffff;
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

/* The largest of x[j0 .. min(j0 + KERN_KTH_BLOCK, n)). */
__attribute__((always_inline)) static inline float block_max(const float *x, int j0, int n) {
    return row_max(x + j0, n - j0 < KERN_KTH_BLOCK ? n - j0 : KERN_KTH_BLOCK);
}

/* The k largest values seen so far in best (have of them), largest first:
 * m goes in if it beats the k-th. */
static inline void kth_insert(float *best, int *have, int k, float m) {
    if (*have == k && !(m > best[k - 1])) return;
    int at = *have < k ? (*have)++ : k - 1;
    while (at > 0 && m > best[at - 1]) best[at] = best[at - 1], at--;
    best[at] = m;
}

/* The maxima of r's blocks of KERN_KTH_BLOCK keys into bm; returns the row's. */
__attribute__((always_inline)) static inline float block_maxima(const float *r, int cols, float *bm) {
    float mx = r[0];
    for (int j0 = 0, b = 0; j0 < cols; j0 += KERN_KTH_BLOCK, b++) {
        bm[b] = block_max(r, j0, cols);
        mx = bm[b] > mx ? bm[b] : mx;
    }
    return mx;
}

/* Each block's largest weight from its largest score, by the very steps
 * that made the weight (so the same bits as that key's). */
__attribute__((always_inline)) static inline void block_weights(float *bm, int cols, float scale, float smx, float inv) {
    for (int b = 0; b * KERN_KTH_BLOCK < cols; b++) {
        const float t = bm[b] * scale;
        bm[b] = vexpf(t - smx) * inv;
    }
}

/* softmax(scale r), one pass fewer than scaling first: the scaled
 * maximum is the maximum of the scaled scores (scale > 0, rounding is
 * monotone), and each exponent's argument is the same rounded product minus
 * it, so the bits are those of multiplying by scale first. Scale 1 is the plain
 * softmax (x * 1 is x exactly). mom (KERN_MOM_N) or NULL: the row's moments,
 * rel being the query's position less the first key's; bm (the row's blocks)
 * or NULL: each block's largest weight (kern_attention_kv_rows). */
VEC_VOID(static, softmax_scaled_row, (float *r, int cols, float scale, int rel, int first, double *mom, float *bm),
         (r, cols, scale, rel, first, mom, bm)) {
    const float mx = bm ? block_maxima(r, cols, bm) : row_max(r, cols);
    int j;
    const float smx = mx * scale;
    double acc[2] = {0, 0};
    exp_row(r, cols, scale, smx, rel, mom ? acc : NULL);
    /* eight partial sums: a fixed order the compiler may vectorize */
    float part[8] = {0};
    for (j = 0; j + 8 <= cols; j += 8)
        for (int k = 0; k < 8; k++) part[k] += r[j + k];
    float sum = 0;
    for (; j < cols; j++) sum += r[j];
    for (int k = 0; k < 8; k++) sum += part[k];
    float inv = 1.0f / sum;
    if (mom) mom[KERN_MOM_REST] = scale_total(r, cols, inv, first, rel, &mom[KERN_MOM_TOTAL]);
    else
        for (int k = 0; k < cols; k++) r[k] *= inv;
    if (mom) row_moments(acc, inv, mom);
    if (bm) block_weights(bm, cols, scale, smx, inv);
}

/* ln x for a normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * Cephes' polynomial for ln(1 + f), f = m - 1; within 2 ulp, and branch-free
 * so that loops over it vectorize. */
static inline float vlogf(float x) {
    /* x = m 2^k with m in [sqrt(1/2), sqrt(2)), by integer steps only (no
     * float comparison, so loops over it vectorize): subtracting sqrt(1/2)'s
     * bits carries into the exponent exactly when m would fall below it */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t t = u - 0x3f3504f3u;
    const int32_t k = (int32_t)t >> 23;
    u -= (uint32_t)k << 23;
    float m;
    memcpy(&m, &u, sizeof m);
    const float f = m - 1.0f, z = f * f, e = (float)k;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    y += -2.12194440e-4f * e;
    y += -0.5f * z;
    return f + y + 0.693359375f * e;
}

/* Below this a term x ln x is under 7e-28: dropped, so that subnormal x
 * (whose exponent field vlogf cannot read) never reach vlogf. */
#define XLOGX_TINY 1e-30f

VEC_VOID(, kern_xlogx, (float *out, const float *x, int n), (out, x, n)) {
    /* ln of x + 1e-30, which is x itself from 2e-23 up: 0 ln 1e-30 = 0, and no
     * subnormal reaches vlogf; an addition, not a comparison, so the loop vectorizes */
    for (int j = 0; j < n; j++) out[j] = x[j] * vlogf(x[j] + XLOGX_TINY);
}

void kern_xlogx_naive(float *out, const float *x, int n) {
    for (int j = 0; j < n; j++) out[j] = (float)((double)x[j] * log((double)(x[j] + XLOGX_TINY)));
}

/* kern_row_sums' lanes: key j's terms go to lane (j - lo) % ROW_LANES, in key
 * order, the lanes added 0 to 7 at the end; every build (vecfn.h) does
 * exactly these additions, so the sums have the same bits whatever
 * the kernel. Keys with x <= 0 (or NaN) add nothing, as the naive sweep skips
 * them. The duplicate share is a compare of ids over the keys before i (no
 * branch per key), so that ids is read where the naive reads it. */
#define ROW_LANES 8

/* Keys taken ROW_CHUNK at a time: element-wise passes the vectorizer
 * handles (x ln x, x |i - j|, the duplicate mask) into small arrays, then the
 * lane sums over them. */
#define ROW_CHUNK 256

VEC_VOID(, kern_row_sums, (const float *p, int lo, int hi, int i, const int *ids, double *out),
         (p, lo, hi, i, ids, out)) {
    double ent[ROW_LANES] = {0}, dist[ROW_LANES] = {0}, dup[ROW_LANES] = {0};
    float xs[ROW_CHUNK], xl[ROW_CHUNK], xd[ROW_CHUNK];
    double dd[ROW_CHUNK];
    const int id = ids ? ids[i] : 0;
    for (int j0 = lo; j0 < hi; j0 += ROW_CHUNK) {
        const int len = hi - j0 < ROW_CHUNK ? hi - j0 : ROW_CHUNK;
        /* keys before i, the only ones that can be duplicates (and the only ids read) */
        const int nd = !ids ? 0 : i - j0 < 0 ? 0 : i - j0 < len ? i - j0 : len;
        /* x <= 0 (or NaN) as 0: it adds 0, and 0 ln(1e-30) is -0, which leaves a sum as it is */
        for (int q = 0; q < len; q++) xs[q] = p[j0 + q] > 0 ? p[j0 + q] : 0.0f;
        for (int q = 0; q < len; q++) xl[q] = xs[q] * vlogf(xs[q] + XLOGX_TINY);
        for (int q = 0; q < len; q++) dd[q] = (double)xs[q] * fabs((double)(i - (j0 + q)));
        for (int q = 0; q < nd; q++) xd[q] = ids[j0 + q] == id ? xs[q] : 0.0f;
        for (int q = nd; q < len; q++) xd[q] = 0.0f;
        int q = 0;
        for (; q + ROW_LANES <= len; q += ROW_LANES)
            for (int k = 0; k < ROW_LANES; k++) {
                ent[k] -= (double)xl[q + k];
                dist[k] += dd[q + k];
                dup[k] += (double)xd[q + k];
            }
        for (int k = 0; q + k < len; k++) {
            ent[k] -= (double)xl[q + k];
            dist[k] += dd[q + k];
            dup[k] += (double)xd[q + k];
        }
    }
    double e = 0, d = 0, u = 0;
    for (int k = 0; k < ROW_LANES; k++) e += ent[k], d += dist[k], u += dup[k];
    out[0] = e, out[1] = d, out[2] = u;
}

void kern_row_sums_naive(const float *p, int lo, int hi, int i, const int *ids, double *out) {
    out[0] = out[1] = out[2] = 0;
    for (int j = lo; j < hi; j++) {
        const double x = p[j];
        if (!(x > 0)) continue;
        out[0] -= x * log(x);
        out[1] += x * (i > j ? i - j : j - i);
        if (ids && j < i && ids[j] == ids[i]) out[2] += x;
    }
}

/* Blocks of 64 compared whole, in 16 lanes of flags (a loop the vectorizer
 * handles): a row's keys are mostly below a top-k threshold, so a block
 * rarely needs its keys looked at one by one. */
VEC_FN(, int, kern_first_above, (const float *x, int n, float thr), (x, n, thr)) {
    int j = 0;
    for (; j + 64 <= n; j += 64) {
        int c[16] = {0}, any = 0;
        for (int q = 0; q < 64; q += 16)
            for (int k = 0; k < 16; k++) c[k] |= x[j + q + k] > thr;
        for (int k = 0; k < 16; k++) any |= c[k];
        if (any) break;
    }
    for (; j < n; j++)
        if (x[j] > thr) return j;
    return n;
}

/* Block maxima (block_max), then the k largest kept in a short sorted list. */
VEC_FN(, float, kern_kth_block_max, (const float *x, int n, int k), (x, n, k)) {
    float best[KERN_KTH_MAX];
    int have = 0;
    if (k <= 0 || k > KERN_KTH_MAX) return 0;
    for (int j = 0; j < n; j += KERN_KTH_BLOCK) kth_insert(best, &have, k, block_max(x, j, n));
    return have == k ? best[k - 1] : 0;
}

float kern_kth_largest(const float *x, int n, int k) {
    float best[KERN_KTH_MAX];
    int have = 0;
    if (k <= 0 || k > KERN_KTH_MAX) return 0;
    for (int b = 0; b < n; b++) kth_insert(best, &have, k, x[b]);
    return have == k ? best[k - 1] : 0;
}

VEC_VOID(, kern_softmax_rows, (float *x, int rows, int cols), (x, rows, cols)) {
    for (int i = 0; i < rows; i++) softmax_scaled_row(x + (size_t)i * cols, cols, 1.0f, 0, -1, NULL, NULL);
}

void kern_softmax_rows_naive(float *x, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float *r = x + (size_t)i * cols;
        double mx = r[0], sum = 0;
        for (int j = 1; j < cols; j++) mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < cols; j++) sum += exp((double)r[j] - mx);
        for (int j = 0; j < cols; j++) r[j] = (float)(exp((double)r[j] - mx) / sum);
    }
}

/* erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), branch-free. */
static inline float verff(float x) {
    float a = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float y = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float r = 1.0f - y * vexpf(-a * a);
    return x < 0 ? -r : r;
}


void kern_attention_kv_naive(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT,
                             const float *vT, int ldk, int nk, int dh, const AttnRule *rule) {
    // probs (nq, ldp); ctxT, qT (dh, nq); kT, vT (dh, ldk): one row per head dimension, one column per token
    for (int i = 0; i < nq; i++) {
        const int pos = nk - nq + i;
        int hi = rule->causal ? pos + 1 : nk, lo = rule->window > 0 && pos - rule->window + 1 > 0 ? pos - rule->window + 1 : 0;
        if (rule->bidir && rule->window > 0 && !rule->causal && pos + rule->window < nk) hi = pos + rule->window;
        if (rule->causal && rule->blk_end && rule->blk_end[pos] > hi) hi = rule->blk_end[pos];
        float *r = probs + (size_t)i * ldp;
        for (int j = 0; j < ldp; j++) r[j] = 0.0f;
        for (int j = lo; j < hi; j++) {
            double acc = 0;
            for (int d = 0; d < dh; d++) acc += (double)qT[(size_t)d * nq + i] * kT[(size_t)d * ldk + j];
            acc *= rule->scale;
            if (rule->softcap > 0) acc = rule->softcap * tanh(acc / rule->softcap);
            r[j] = (float)acc;
        }
        if (rule->has_sink) {
            /* the sink as one more logit whose probability goes to no key */
            double mx = rule->sink, sum = 0;
            for (int j = lo; j < hi; j++) mx = r[j] > mx ? r[j] : mx;
            for (int j = lo; j < hi; j++) sum += exp((double)r[j] - mx);
            sum += exp((double)rule->sink - mx);
            for (int j = lo; j < hi; j++) r[j] = (float)(exp((double)r[j] - mx) / sum);
            if (rule->sink_out) rule->sink_out[i] = (float)(exp((double)rule->sink - mx) / sum);
        } else {
            kern_softmax_rows_naive(r + lo, 1, hi - lo);
        }
    }
    if (!ctxT) return;
    for (int d = 0; d < dh; d++)
        for (int i = 0; i < nq; i++) {
            double acc = 0;
            for (int j = 0; j < nk; j++) acc += (double)probs[(size_t)i * ldp + j] * vT[(size_t)d * ldk + j];
            ctxT[(size_t)d * nq + i] = (float)acc;
        }
}

void kern_attention_kv_v_naive(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                               const float *v, int ldv, int nk, int dh, const AttnRule *rule) {
    // v (nk, ldv): row j key j's value vector
    kern_attention_kv_naive(probs, ldp, NULL, qT, nq, kT, NULL, ldk, nk, dh, rule);
    if (!ctxT) return;
    for (int d = 0; d < dh; d++)
        for (int i = 0; i < nq; i++) {
            double acc = 0;
            for (int j = 0; j < nk; j++) acc += (double)probs[(size_t)i * ldp + j] * v[(size_t)j * ldv + d];
            ctxT[(size_t)d * nq + i] = (float)acc;
        }
}

void kern_attention_naive(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT, int n, int dh,
                          const AttnRule *rule) {
    kern_attention_kv_naive(probs, n, ctxT, qT, n, kT, vT, n, n, dh, rule);
}

VEC_VOID(static, softcap_row, (float *r, int n, float cap), (r, n, cap)) {
    const float inv = 1.0f / cap;
    for (int j = 0; j < n; j++) {
        float y = r[j] * inv;
        r[j] = cap * (1.0f - 2.0f / (vexpf(2.0f * y) + 1.0f)); /* cap * tanh(y) */
    }
}

/* Queries per product on the causal triangle (or a sliding window): a block
 * of rows computes the keys its last row sees (and from its first row's window
 * start), so the skipped part is the triangle less half a block per row. */
#define ATTN_ROWS 48

size_t kern_attention_scratch(int nq, int nk, int dh) {
    return (size_t)(nq + nk) * (size_t)dh;
}

/* Keys query row i sees: [*lo, *hi). Both ends grow with i, so a block of
 * rows sees [lo of its first, hi of its last) (a both-ways block's end is past
 * every position in it, and each position after it sees more). */
static void attn_keys(const AttnRule *rule, int nq, int nk, int i, int *lo, int *hi) {
    const int pos = nk - nq + i;
    *hi = rule->causal ? pos + 1 : nk;
    *lo = rule->window > 0 && pos - rule->window + 1 > 0 ? pos - rule->window + 1 : 0;
    if (rule->bidir && rule->window > 0 && !rule->causal && pos + rule->window < nk) *hi = pos + rule->window;
    if (rule->causal && rule->blk_end && rule->blk_end[pos] > *hi) *hi = rule->blk_end[pos];
}

void kern_attention_keys(const AttnRule *rule, int nk, int pos, int *lo, int *hi) { attn_keys(rule, nk, nk, pos, lo, hi); }

VEC_VOID(static, scale_row, (float *r, int n, float scale), (r, n, scale)) {
    for (int j = 0; j < n; j++) r[j] *= scale;
}

/* softmax over the row's n (already scaled) scores and the sink logit, which
 * has no key: the row gets its share of the probabilities, the sink's share
 * is returned (transformers' eager gpt-oss: concatenate, softmax, drop it). */
VEC_FN(static, float, softmax_sink_row, (float *r, int n, float sink, int rel, int first, double *mom, float *bm),
       (r, n, sink, rel, first, mom, bm)) {
    float mx = sink;
    if (n > 0) {
        const float rm = bm ? block_maxima(r, n, bm) : row_max(r, n);
        mx = rm > mx ? rm : mx;
    }
    double acc[2] = {0, 0};
    exp_row(r, n, 1.0f, mx, rel, mom ? acc : NULL); /* r[j] * 1 - mx is r[j] - mx exactly */
    float part[8] = {0}, sum = 0;
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) part[k] += r[j + k];
    for (; j < n; j++) sum += r[j];
    for (int k = 0; k < 8; k++) sum += part[k];
    const float es = vexpf(sink - mx);
    const float inv = 1.0f / (sum + es);
    if (mom) mom[KERN_MOM_REST] = scale_total(r, n, inv, first, rel, &mom[KERN_MOM_TOTAL]);
    else
        for (int k = 0; k < n; k++) r[k] *= inv;
    if (mom) row_moments(acc, inv, mom);
    if (bm) block_weights(bm, n, 1.0f, mx, inv);
    return es * inv;
}

void kern_softmax_scaled_rows(float *x, int rows, int cols, float scale) {
    for (int i = 0; i < rows; i++) softmax_scaled_row(x + (size_t)i * cols, cols, scale, 0, -1, NULL, NULL);
}

/* Query i's scores r (ldp) -> its probabilities; masked keys get exactly 0,
 * as softmax gives them after HF's finfo.min fill. mom (KERN_MOM_N) and bm
 * (the row's blocks of seen keys), each NULL or where the row's moments and
 * block weights go (kern_attention_kv_rows). */
static void probs_row(const AttnRule *rule, int nq, int nk, int i, float *r, int ldp, double *mom, float *bm) {
    int lo, hi;
    attn_keys(rule, nq, nk, i, &lo, &hi);
    const int rel = nk - nq + i - lo, first = lo == 0 ? 0 : -1; /* the query's own key and key 0, from lo */
    if (hi <= lo) { /* no key: nothing weighs anything */
        if (mom) mom[KERN_MOM_ENTROPY] = mom[KERN_MOM_DISTANCE] = mom[KERN_MOM_TOTAL] = mom[KERN_MOM_REST] = 0;
        mom = NULL, bm = NULL;
    }
    if (rule->has_sink) {
        scale_row(r + lo, hi - lo, rule->scale);
        if (rule->softcap > 0) softcap_row(r + lo, hi - lo, rule->softcap);
        const float share = softmax_sink_row(r + lo, hi - lo, rule->sink, rel, first, mom, bm);
        if (rule->sink_out) rule->sink_out[i] = share;
    } else if (rule->softcap > 0 || !(rule->scale > 0)) {
        scale_row(r + lo, hi - lo, rule->scale);
        if (rule->softcap > 0) softcap_row(r + lo, hi - lo, rule->softcap);
        if (hi > lo) softmax_scaled_row(r + lo, hi - lo, 1.0f, rel, first, mom, bm);
    } else if (hi > lo) softmax_scaled_row(r + lo, hi - lo, rule->scale, rel, first, mom, bm);
    memset(r, 0, (size_t)lo * sizeof *r);
    memset(r + hi, 0, (size_t)(ldp - hi) * sizeof *r);
}

/* Query rows a call takes straight from kT and v, a row at a time, rather
 * than through gemm_rows' packed panels: decoding's one new token against a
 * cache. Packing every key into panels for one row cost more than its
 * products; a row's own loops read each key once, where it lies. */
#define ATTN_DIRECT_ROWS 4

/* The direct loops, built once per kernel as vecfn.h's loops are, each with
 * FMA in its target so that fmaf is the instruction, not a call into libm
 * (the scalar kernel's build too when the CPU has FMA, as gemm.c's
 * panel_scalar_fma). Every fmaf is one correctly rounded operation and
 * nothing is reassociated, so every build gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(VEC_ONE_BUILD)
#define ATTN_FMA_FN(NAME, PARAMS, ARGS)                                                                           \
    static inline __attribute__((always_inline)) void NAME##_body PARAMS;                                        \
    __attribute__((target("avx512f,fma"))) static void NAME##_512 PARAMS { NAME##_body ARGS; }                   \
    __attribute__((target("avx2,fma"))) static void NAME##_2 PARAMS { NAME##_body ARGS; }                        \
    __attribute__((target("fma"))) static void NAME##_fma PARAMS { NAME##_body ARGS; }                           \
    static void NAME##_0 PARAMS { NAME##_body ARGS; }                                                            \
    static void NAME PARAMS {                                                                                    \
        switch (gemm_vec_level()) {                                                                              \
        case 2: NAME##_512 ARGS; return;                                                                         \
        case 1: NAME##_2 ARGS; return;                                                                           \
        default:                                                                                                 \
            if (__builtin_cpu_supports("fma")) NAME##_fma ARGS;                                                  \
            else NAME##_0 ARGS;                                                                                  \
        }                                                                                                        \
    }                                                                                                            \
    static inline __attribute__((always_inline)) void NAME##_body PARAMS
#else
#define ATTN_FMA_FN(NAME, PARAMS, ARGS) static void NAME PARAMS
#endif

/* Keys a direct score loop holds at a time, and head dimensions a direct
 * context loop holds: each tile's sums stay in L1 while its inputs stream past. */
#define ATTN_KEY_TILE 256
#define ATTN_DIM_TILE 256

/* r[j], j in [lo, hi): q . k_j, q (dh) with stride qs, k_j column j of kT
 * (dh, ldk), by gemm.h's chain: per block of GEMM_KB dimensions in order,
 * acc = fmaf(q[d], kT[d][j], acc) from 0, the block's acc added to a total
 * from 0. The key axis is kT's contiguous one, so a tile of keys takes one
 * row of kT per dimension. */
ATTN_FMA_FN(scores_direct, (float *r, const float *q, size_t qs, const float *kT, size_t ldk, int lo, int hi, int dh),
            (r, q, qs, kT, ldk, lo, hi, dh)) {
    for (int j0 = lo; j0 < hi; j0 += ATTN_KEY_TILE) {
        const int m = hi - j0 < ATTN_KEY_TILE ? hi - j0 : ATTN_KEY_TILE;
        float total[ATTN_KEY_TILE], acc[ATTN_KEY_TILE]; // (m) each
        for (int j = 0; j < m; j++) total[j] = 0.0f;
        for (int b = 0; b < dh; b += GEMM_KB) {
            for (int j = 0; j < m; j++) acc[j] = 0.0f;
            for (int d = b; d < dh && d < b + GEMM_KB; d++) {
                const float qd = q[(size_t)d * qs];
                const float *kr = kT + (size_t)d * ldk + j0; // (m)
                for (int j = 0; j < m; j++) acc[j] = fmaf(qd, kr[j], acc[j]);
            }
            for (int j = 0; j < m; j++) total[j] = total[j] + acc[j];
        }
        for (int j = 0; j < m; j++) r[j0 + j] = total[j];
    }
}

/* c[d * cs], d < dh: the sum over keys [a, hi) of p[j] v[j][d], v (keys, ldv)
 * a row per key, by gemm.h's chain: per block of GEMM_KB keys from a, acc =
 * fmaf(p[j], v[j][d], acc) from 0, added to a total from 0. Each key's row is
 * read once, contiguous, into the dimensions' sums. */
ATTN_FMA_FN(ctx_direct, (float *c, size_t cs, const float *p, const float *v, size_t ldv, int a, int hi, int dh),
            (c, cs, p, v, ldv, a, hi, dh)) {
    for (int d0 = 0; d0 < dh; d0 += ATTN_DIM_TILE) {
        const int m = dh - d0 < ATTN_DIM_TILE ? dh - d0 : ATTN_DIM_TILE;
        float total[ATTN_DIM_TILE], acc[ATTN_DIM_TILE]; // (m) each
        for (int d = 0; d < m; d++) total[d] = 0.0f;
        for (int b = a; b < hi; b += GEMM_KB) {
            for (int d = 0; d < m; d++) acc[d] = 0.0f;
            for (int j = b; j < hi && j < b + GEMM_KB; j++) {
                const float pj = p[j];
                const float *vr = v + (size_t)j * ldv + d0; // (m)
                for (int d = 0; d < m; d++) acc[d] = fmaf(pj, vr[d], acc[d]);
            }
            for (int d = 0; d < m; d++) total[d] = total[d] + acc[d];
        }
        for (int d = 0; d < m; d++) c[(size_t)(d0 + d) * cs] = total[d];
    }
}

/* Scores of query rows [i0, i1) (one block) into probs (i1 - i0, ldp), each
 * row over at least the keys it sees (probs_row zeroes the rest): the
 * block's keys through gemm_rows, or each row's own directly when the call
 * has few rows. The same chains either way, so the same bits. */
static void block_scores(float *probs, int ldp, const float *qT, int nq, const float *kT, int ldk, int nk, int dh,
                         const AttnRule *rule, int i0, int i1, float *panel) {
    int lo, hi, lo1, hi1;
    if (nq <= ATTN_DIRECT_ROWS) {
        for (int i = i0; i < i1; i++) {
            attn_keys(rule, nq, nk, i, &lo, &hi);
            scores_direct(probs + (size_t)(i - i0) * ldp, qT + i, (size_t)nq, kT, (size_t)ldk, lo, hi, dh);
        }
        return;
    }
    attn_keys(rule, nq, nk, i0, &lo, &hi);
    attn_keys(rule, nq, nk, i1 - 1, &lo1, &hi1);
    gemm_rows_ld(probs + lo, (size_t)ldp, qT + i0, GEMM_F32, 1, (size_t)nq, kT + lo, (size_t)ldk, hi1 - lo, i1 - i0, dh,
                 panel);
}

/* Context of query rows [i0, i1) from their probabilities (i1 - i0, ldp):
 * each row over the keys its block sees from a multiple of the chain length
 * (gemm.h), so that the keys skipped before it, whose probabilities are 0,
 * change no bit of the chains. Few rows go straight into ctxT (dh, nq), more
 * through gemm_rows into ctx (nq, dh), which the caller transposes. */
static void block_ctx(float *ctxT, float *ctx, const float *probs, int ldp, const float *v, int ldv, int nq, int nk,
                      int dh, const AttnRule *rule, int i0, int i1, float *panel) {
    int lo, hi, lo1, hi1;
    attn_keys(rule, nq, nk, i0, &lo, &hi);
    attn_keys(rule, nq, nk, i1 - 1, &lo1, &hi1);
    lo -= lo % GEMM_KB;
    if (nq <= ATTN_DIRECT_ROWS) {
        for (int i = i0; i < i1; i++)
            ctx_direct(ctxT + i, (size_t)nq, probs + (size_t)(i - i0) * ldp, v, (size_t)ldv, lo, hi1, dh);
        return;
    }
    gemm_rows_ld(ctx + (size_t)i0 * dh, (size_t)dh, probs + lo, GEMM_F32, (size_t)ldp, 1, v + (size_t)lo * ldv,
                 (size_t)ldv, dh, i1 - i0, hi1 - lo, panel);
}

size_t kern_attention_scratch_v(int nq, int dh) {
    return (size_t)nq * (size_t)dh;
}

void kern_attention_kv_v(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                         const float *v, int ldv, int nk, int dh, const AttnRule *rule, float *scratch) {
    // probs (nq, ldp) = softmax(mask(cap(scale q k^T))); ctxT (dh, nq) = (probs v)^T unless ctxT is NULL
    _Alignas(64) float panel[GEMM_SCRATCH];
    const int block = rule->causal || rule->window > 0 ? ATTN_ROWS : nq;
    /* scores: a block of query rows against the keys it sees; W[i][d] = qT[d][i] */
    for (int i0 = 0; i0 < nq; i0 += block) {
        const int i1 = nq - i0 < block ? nq : i0 + block;
        block_scores(probs + (size_t)i0 * ldp, ldp, qT, nq, kT, ldk, nk, dh, rule, i0, i1, panel);
    }
    for (int i = 0; i < nq; i++) probs_row(rule, nq, nk, i, probs + (size_t)i * ldp, ldp, NULL, NULL);
    if (!ctxT) return;
    float *ctx = scratch; // (nq, dh)
    for (int i0 = 0; i0 < nq; i0 += block) {
        const int i1 = nq - i0 < block ? nq : i0 + block;
        block_ctx(ctxT, ctx, probs + (size_t)i0 * ldp, ldp, v, ldv, nq, nk, dh, rule, i0, i1, panel);
    }
    if (nq > ATTN_DIRECT_ROWS) kern_transpose(ctxT, ctx, nq, dh);
}

void kern_attention_kv(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, const float *vT,
                       int ldk, int nk, int dh, const AttnRule *rule, float *scratch) {
    float *v = NULL; // (nk, dh)
    if (ctxT) {
        v = scratch;
        kern_transpose_ld(v, (size_t)dh, vT, (size_t)ldk, dh, nk);
    }
    kern_attention_kv_v(probs, ldp, ctxT, qT, nq, kT, ldk, v, dh, nk, dh, rule, ctxT ? scratch + (size_t)nk * dh : NULL);
}

int kern_attention_rows(void) { return ATTN_ROWS; }

void kern_attention_kv_rows_v(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                              const float *v, int ldv, int nk, int dh, const AttnRule *rule, float *scratch,
                              KernRowsFn fn, void *fn_ctx, int moments) {
    // probs (ATTN_ROWS, ldp): one block of rows at a time, reused; ctxT (dh, nq) as kern_attention_kv's
    _Alignas(64) float panel[GEMM_SCRATCH];
    double mom[KERN_MOM_N]; // the row's moments
    KernRowStats st = {mom, NULL, (nk + KERN_KTH_BLOCK - 1) / KERN_KTH_BLOCK};
    /* (bmax_ld) the row's block weights; without memory for them the observer
     * sweeps the row instead */
    float *bmax = moments && fn ? malloc((size_t)st.bmax_ld * sizeof *bmax) : NULL;
    st.bmax = bmax;
    float *ctx = scratch; // (nq, dh)
    for (int i0 = 0; i0 < nq; i0 += ATTN_ROWS) {
        const int i1 = nq - i0 < ATTN_ROWS ? nq : i0 + ATTN_ROWS;
        /* the same steps as kern_attention_kv's, on this block's rows only:
         * each output's chain is the same, so are its bits */
        block_scores(probs, ldp, qT, nq, kT, ldk, nk, dh, rule, i0, i1, panel);
        if (moments && fn) {
            /* each row to the observer as soon as it is made, while it is in
             * the nearest cache (a long row read back after its block's
             * softmax comes from further out) */
            for (int i = i0; i < i1; i++) {
                float *row = probs + (size_t)(i - i0) * ldp;
                probs_row(rule, nq, nk, i, row, ldp, mom, bmax);
                fn(fn_ctx, i, i + 1, row, ldp, &st);
            }
        } else {
            for (int i = i0; i < i1; i++) probs_row(rule, nq, nk, i, probs + (size_t)(i - i0) * ldp, ldp, NULL, NULL);
            if (fn) fn(fn_ctx, i0, i1, probs, ldp, NULL);
        }
        if (ctxT) block_ctx(ctxT, ctx, probs, ldp, v, ldv, nq, nk, dh, rule, i0, i1, panel);
    }
    free(bmax);
    if (ctxT && nq > ATTN_DIRECT_ROWS) kern_transpose(ctxT, ctx, nq, dh);
}

void kern_attention_kv_rows(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT,
                            const float *vT, int ldk, int nk, int dh, const AttnRule *rule, float *scratch,
                            KernRowsFn fn, void *fn_ctx, int moments) {
    float *v = NULL; // (nk, dh)
    if (ctxT) {
        v = scratch;
        kern_transpose_ld(v, (size_t)dh, vT, (size_t)ldk, dh, nk);
    }
    kern_attention_kv_rows_v(probs, ldp, ctxT, qT, nq, kT, ldk, v, dh, nk, dh, rule,
                             ctxT ? scratch + (size_t)nk * dh : NULL, fn, fn_ctx, moments);
}

void kern_attention(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT, int n, int dh,
                    const AttnRule *rule, float *scratch) {
    kern_attention_kv(probs, n, ctxT, qT, n, kT, vT, n, n, dh, rule, scratch);
}

void kern_activate_naive(float *x, size_t n, ActKind act) {
    for (size_t i = 0; i < n; i++) {
        double u = x[i];
        switch (act) {
        case ACT_GELU: x[i] = (float)(0.5 * u * (1.0 + erf(u * M_SQRT1_2))); break;
        case ACT_GELU_TANH: x[i] = (float)(0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))); break;
        case ACT_RELU: x[i] = u > 0 ? (float)u : 0.0f; break;
        case ACT_SILU: x[i] = (float)(u / (1.0 + exp(-u))); break;
        case ACT_QUICK_GELU: x[i] = (float)(u / (1.0 + exp(-1.702 * u))); break;
        }
    }
}

/* Elements an activation takes at a time: exp first, then the division, in
 * loops of their own. In one loop, GCC (free to compute both sides of vexpf's
 * clamps, -fno-trapping-math) divides twice per element, once per side. */
#define ACT_CHUNK 256

VEC_VOID(, kern_activate, (float *x, size_t n, ActKind act), (x, n, act)) {
    switch (act) {
    case ACT_GELU:
        for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + verff(x[i] * 0.70710678118654752f));
        break;
    case ACT_GELU_TANH:
        for (size_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
            const size_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
            float e[ACT_CHUNK];
            for (size_t i = 0; i < m; i++) {
                const float u = x[i0 + i];
                const float y = 0.7978845608028654f * (u + 0.044715f * u * u * u); /* sqrt(2/pi) */
                e[i] = vexpf(2.0f * y);
            }
            for (size_t i = 0; i < m; i++) {
                const float th = 1.0f - 2.0f / (e[i] + 1.0f); /* tanh(y) */
                x[i0 + i] = 0.5f * x[i0 + i] * (1.0f + th);
            }
        }
        break;
    case ACT_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    case ACT_SILU:
        for (size_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
            const size_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
            float e[ACT_CHUNK];
            for (size_t i = 0; i < m; i++) e[i] = vexpf(-x[i0 + i]);
            for (size_t i = 0; i < m; i++) x[i0 + i] = x[i0 + i] / (1.0f + e[i]);
        }
        break;
    case ACT_QUICK_GELU: /* x * sigmoid(1.702 x) */
        for (size_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
            const size_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
            float e[ACT_CHUNK];
            for (size_t i = 0; i < m; i++) e[i] = vexpf(-1.702f * x[i0 + i]);
            for (size_t i = 0; i < m; i++) x[i0 + i] = x[i0 + i] / (1.0f + e[i]);
        }
        break;
    }
}

VEC_VOID(, kern_swiglu_clamped, (float *g, const float *u, size_t n, float alpha, float limit),
         (g, u, n, alpha, limit)) {
    for (size_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
        const size_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
        float e[ACT_CHUNK];
        for (size_t i = 0; i < m; i++) {
            const float x = g[i0 + i] < limit ? g[i0 + i] : limit;
            e[i] = vexpf(-alpha * x);
        }
        for (size_t i = 0; i < m; i++) {
            const float x = g[i0 + i] < limit ? g[i0 + i] : limit;
            const float y = u[i0 + i] < -limit ? -limit : u[i0 + i] > limit ? limit : u[i0 + i];
            g[i0 + i] = (y + 1.0f) * (x / (1.0f + e[i]));
        }
    }
}

void kern_swiglu_clamped_naive(float *g, const float *u, size_t n, float alpha, float limit) {
    for (size_t i = 0; i < n; i++) {
        const double x = g[i] < limit ? g[i] : limit, y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        g[i] = (float)((y + 1.0) * x / (1.0 + exp(-(double)alpha * x)));
    }
}

VEC_VOID(, kern_glu, (float *g, const float *u, size_t n, ActKind act), (g, u, n, act)) {
    kern_activate(g, n, act);
    for (size_t i = 0; i < n; i++) g[i] *= u[i];
}

/* Tokens the residual step takes at a time, and the threads' split of them:
 * 16 floats, so its transposed reads and writes are whole cache lines. */
#define ROW_BLOCK 16

/* Mean (0 for RMSNorm) and 1/std of each of bn rows of dim floats, accumulated
 * in double as kern_norm_naive does, over eight lanes that vectorize. */
static void row_stats(const float *xb, int bn, int dim, const Norm *nm, float *mean, float *inv) {
    for (int ii = 0; ii < bn; ii++) {
        const float *row = xb + (size_t)ii * dim;
        double part[8] = {0}, mu = 0, var = 0;
        int j = 0;
        if (!nm->rms) {
            for (; j + 8 <= dim; j += 8)
                for (int k = 0; k < 8; k++) part[k] += row[j + k];
            for (; j < dim; j++) mu += row[j];
            for (int k = 0; k < 8; k++) mu += part[k], part[k] = 0;
            mu /= dim;
        }
        for (j = 0; j + 8 <= dim; j += 8)
            for (int k = 0; k < 8; k++) part[k] += (row[j + k] - mu) * (row[j + k] - mu);
        for (; j < dim; j++) var += (row[j] - mu) * (row[j] - mu);
        for (int k = 0; k < 8; k++) var += part[k];
        var /= dim;
        mean[ii] = (float)mu, inv[ii] = (float)(1.0 / sqrt(var + nm->eps));
    }
}

VEC_VOID(, kern_residual, (float *x, const float *yT, float *dst, float *dstT, const Norm *nm, int n, int dim, int i0,
          int i1), (x, yT, dst, dstT, nm, n, dim, i0, i1)) {
    // tokens [i0, i1) of x (n, dim) += yT (dim, n)^T; then norm(x) or x to dst (n, dim), dstT (dim, n)
    const float *g = nm && nm->g ? nm->g : NULL, *b = g ? nm->b : NULL;
    for (int b0 = i0; b0 < i1; b0 += ROW_BLOCK) {
        const int bn = i1 - b0 < ROW_BLOCK ? i1 - b0 : ROW_BLOCK;
        float *xb = x + (size_t)b0 * dim; // (bn, dim)
        float mean[ROW_BLOCK] = {0}, inv[ROW_BLOCK] = {0};
        if (yT) {
            for (int j = 0; j < dim; j++) {
                const float *yc = yT + (size_t)j * n + b0; // (bn)
                for (int ii = 0; ii < bn; ii++) xb[(size_t)ii * dim + j] += yc[ii];
            }
        }
        if (g) row_stats(xb, bn, dim, nm, mean, inv);
        if (dstT) /* before dst, which may overwrite x */
            for (int j = 0; j < dim; j++) {
                float *tc = dstT + (size_t)j * n + b0; // (bn)
                for (int ii = 0; ii < bn; ii++) {
                    float v = xb[(size_t)ii * dim + j];
                    tc[ii] = g ? (v - mean[ii]) * inv[ii] * g[j] + (b ? b[j] : 0.0f) : v;
                }
            }
        if (dst)
            for (int ii = 0; ii < bn; ii++) {
                const float *row = xb + (size_t)ii * dim;
                float *out = dst + (size_t)(b0 + ii) * dim;
                for (int j = 0; j < dim; j++)
                    out[j] = g ? (row[j] - mean[ii]) * inv[ii] * g[j] + (b ? b[j] : 0.0f) : row[j];
            }
    }
}

void kern_rmsnorm_cols(float *xT, const float *g, int dim, int n, float eps) {
    // xT (dim, n): column j is token j's vector
    for (int j = 0; j < n; j++) {
        double ss = 0;
        for (int d = 0; d < dim; d++) ss += (double)xT[(size_t)d * n + j] * xT[(size_t)d * n + j];
        float inv = (float)(1.0 / sqrt(ss / dim + eps));
        for (int d = 0; d < dim; d++) xT[(size_t)d * n + j] = xT[(size_t)d * n + j] * inv * g[d];
    }
}

VEC_VOID(, kern_rope, (float *xT, const float *cos_t, const float *sin_t, int dh, int n), (xT, cos_t, sin_t, dh, n)) {
    // xT (dh, n); cos_t, sin_t (dh/2, n)
    const int half = dh / 2;
    for (int i = 0; i < half; i++) {
        float *a = xT + (size_t)i * n, *b = xT + (size_t)(i + half) * n; // (n) each
        const float *c = cos_t + (size_t)i * n, *s = sin_t + (size_t)i * n;
        for (int j = 0; j < n; j++) {
            float x0 = a[j], x1 = b[j];
            a[j] = x0 * c[j] - x1 * s[j];
            b[j] = x1 * c[j] + x0 * s[j];
        }
    }
}

void kern_rope_naive(float *xT, const float *inv_freq, const int *pos, int dh, int n) {
    const int half = dh / 2;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < half; i++) {
            /* float angle, as torch computes position * inv_freq in float32 */
            float ang = (float)pos[j] * inv_freq[i];
            double c = cos((double)ang), s = sin((double)ang);
            double x0 = xT[(size_t)i * n + j], x1 = xT[(size_t)(i + half) * n + j];
            xT[(size_t)i * n + j] = (float)(x0 * c - x1 * s);
            xT[(size_t)(i + half) * n + j] = (float)(x1 * c + x0 * s);
        }
}

/* First token of bin b when n tokens fall into s bins (t in bin t * s / n). */
static inline long bin_start(long b, long s, long n) { return (b * n + s - 1) / s; }

void kern_pool_attention(float *thumb, int s, const float *probs, int ldp, int row0, int nrows, int ncols, int n) {
    for (int i = 0; i < nrows; i++) {
        const long r = row0 + i, bi = r * s / n;
        const float w = 1.0f / (float)(bin_start(bi + 1, s, n) - bin_start(bi, s, n));
        const float *p = probs + (size_t)i * ldp; // (ncols)
        float *out = thumb + (size_t)bi * s;       // (s)
        for (long bj = 0, c = 0; bj < s && c < ncols; bj++) {
            const long end = bin_start(bj + 1, s, n) < ncols ? bin_start(bj + 1, s, n) : ncols;
            double sum = 0;
            for (; c < end; c++) sum += p[c];
            out[bj] += (float)sum * w;
        }
    }
}

void kern_pool_attention_naive(float *thumb, int s, const float *probs, int ldp, int row0, int nrows, int ncols, int n) {
    for (int i = 0; i < nrows; i++) {
        const int r = row0 + i, bi = (int)((long)r * s / n);
        int rows_in_bin = 0;
        for (int t = 0; t < n; t++) rows_in_bin += (int)((long)t * s / n) == bi;
        for (int c = 0; c < ncols; c++)
            thumb[(size_t)bi * s + (size_t)((long)c * s / n)] += probs[(size_t)i * ldp + c] / (float)rows_in_bin;
    }
}

/* ------------------------------------------------ value norms (--measure norm) */

int kern_widen_rows(float *dst, const Linear *o, int r0, int r1) {
    const size_t in = (size_t)o->in;
    if (o->type == KERN_F32) {
        for (int r = r0; r < r1; r++)
            for (size_t k = 0; k < in; k++) dst[(size_t)(r - r0) * in + k] = weight_f32(o, r, (int)k);
        return 0;
    }
    if (o->type == KERN_BF16 || o->type == KERN_F16) {
        const size_t ld = o->row_bytes / 2;
        for (int r = r0; r < r1; r++) {
            const uint16_t *row = (const uint16_t *)o->w + (size_t)r * ld;
            for (size_t k = 0; k < in; k++)
                dst[(size_t)(r - r0) * in + k] = o->type == KERN_BF16 ? bf16_to_f32(row[k]) : f16_to_f32(row[k]);
        }
        return 0;
    }
    return quant_rows(o->type, o->w, (size_t)o->out * o->row_bytes, (size_t)o->out, in, (size_t)r0, (size_t)r1, dst,
                      o->name, NULL);
}

/* G_h[a][b] = sum_r W[r][h dh + a] W[r][h dh + b]: a product whose "weights"
 * are the head's columns read down (W_O^h transposed: row stride 1, column
 * stride in) and whose inputs are the same columns, dh of them as tokens; so
 * every entry is gemm.h's fixed chains over the rows of W_O, the same bits on
 * every kernel, and G is exactly symmetric (entry (a, b) and (b, a) are the
 * same products in the same order). */
void kern_value_gram(float *G, const float *wide, int out, int in, int h, int dh, float *panel) {
    const float *cols = wide + (size_t)h * dh;
    gemm_rows_ld(G, (size_t)dh, cols, GEMM_F32, 1, (size_t)in, cols, (size_t)in, dh, dh, out, panel);
}

/* Why the Gram form: ||W_O^h v||^2 = v^T G_h v costs dh^2 + dh multiply-adds
 * per token and head, against hidden * dh for the product itself. u = G_h v
 * is gemm.h's product (its bits do not depend on how tokens are split into
 * calls or threads); v . u is summed over a = 0 .. dh - 1 in that order with a
 * multiply and an add, not fmaf: without FMA in the build's target fmaf is a
 * call per element, this loop vectorizes along the tokens, and each sum is
 * still one chain in a's order (-std=c11 contracts nothing), the same bits on
 * every CPU. G_h is positive semidefinite, but the rounded quadratic form of
 * a value G_h nearly annihilates can come out a little below 0: clamped
 * there, so the norm is 0 rather than NaN. */
void kern_value_norms_gram(float *norms, const float *G, const float *v, size_t ldv, int n, int dh, float *u,
                           float *panel) {
    gemm_rows_ld(u, (size_t)n, G, GEMM_F32, (size_t)dh, 1, v, ldv, n, dh, dh, panel);
    for (int j = 0; j < n; j++) norms[j] = 0.0f;
    for (int a = 0; a < dh; a++) {
        const float *va = v + (size_t)a * ldv, *ua = u + (size_t)a * n;
        for (int j = 0; j < n; j++) norms[j] += va[j] * ua[j];
    }
    for (int j = 0; j < n; j++) norms[j] = norms[j] < 0.0f ? 0.0f : sqrtf(norms[j]); /* NaN stays NaN */
}

void kern_value_norms_naive(float *norms, const Linear *o, const float *vT, int n, const int *heads, int n_heads,
                            int group, int dh) {
    // norms (n_heads, n): || W_O[:, h*dh:(h+1)*dh] v_j ||, in double, W_O read element by element
    const int in = o->in, out = o->out;
    float *wrow = o->type == KERN_F32 ? NULL : malloc((size_t)in * sizeof *wrow);
    double *acc = calloc((size_t)n_heads * n, sizeof *acc);
    if ((o->type != KERN_F32 && !wrow) || !acc) {
        for (size_t i = 0; i < (size_t)n_heads * n; i++) norms[i] = NAN;
        free(wrow), free(acc);
        return;
    }
    for (int r = 0; r < out; r++) {
        if (wrow)
            quant_rows_naive(o->type, o->w, (size_t)out * o->row_bytes, (size_t)out, (size_t)in, (size_t)r,
                             (size_t)r + 1, wrow, o->name, NULL);
        for (int hi = 0; hi < n_heads; hi++) {
            const int h = heads[hi];
            for (int j = 0; j < n; j++) {
                double f = 0;
                for (int d = 0; d < dh; d++)
                    f += (double)(wrow ? wrow[h * dh + d] : weight_f32(o, r, h * dh + d)) *
                         vT[((size_t)(h / group) * dh + d) * n + j];
                acc[(size_t)hi * n + j] += f * f;
            }
        }
    }
    for (size_t i = 0; i < (size_t)n_heads * n; i++) norms[i] = (float)sqrt(acc[i]);
    free(wrow), free(acc);
}
