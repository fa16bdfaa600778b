/* quant.c — block dequantizers written from the ggml block layouts (each
 * block stores its scale(s) as f16 then packed integer codes): a naive
 * reference, one block at a time, and quant_rows, whole runs of blocks per
 * type in branch-free loops the compiler vectorizes, tested equal bit for bit. */
#include "quant.h"
#include "gguf.h"
#include "vecfn.h"

#include <stdlib.h>
#include <string.h>

float quant_f16(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 0x1f, m = h & 0x3ff, b;
    if (ex == 0x1f) b = s | 0x7f800000u | (m << 13);
    else if (ex) b = s | ((ex + 112) << 23) | (m << 13);
    else if (!m) b = s;
    else { /* subnormal: normalise the mantissa */
        ex = 113;
        while (!(m & 0x400)) { m <<= 1; ex--; }
        b = s | (ex << 23) | ((m & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static float f16at(const uint8_t *p) { return quant_f16((uint16_t)(p[0] | p[1] << 8)); }

/* 6-bit scale and min j of the 12-byte K-quant scale table. */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

/* MXFP4 (OCP microscaling, gpt-oss's experts): a block is one E8M0 exponent
 * byte, then 32 E2M1 codes as nibbles (element j low, j + 16 high). ggml keeps
 * the codes doubled and the scale halved: value = kv[code] * 2^(e - 128). */
static const int8_t MXFP4_KV[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float e8m0_half(uint8_t x) {
    const uint32_t bits = x < 2 ? 0x00200000u << x : (uint32_t)(x - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void block(uint32_t t, const uint8_t *b, float *y) {
    switch (t) {
    case GGUF_T_MXFP4: { float d = e8m0_half(b[0]); const uint8_t *q = b + 1;
        for (int j = 0; j < 16; j++) { y[j] = d * (float)MXFP4_KV[q[j] & 0xF]; y[j + 16] = d * (float)MXFP4_KV[q[j] >> 4]; } break; }
    case GGUF_T_Q8_0: { float d = f16at(b); for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d; break; }
    case GGUF_T_Q4_0: { float d = f16at(b); const uint8_t *q = b + 2;
        for (int j = 0; j < 16; j++) { y[j] = (float)((q[j] & 0xF) - 8) * d; y[j + 16] = (float)((q[j] >> 4) - 8) * d; } break; }
    case GGUF_T_Q4_1: { float d = f16at(b), m = f16at(b + 2); const uint8_t *q = b + 4;
        for (int j = 0; j < 16; j++) { y[j] = (float)(q[j] & 0xF) * d + m; y[j + 16] = (float)(q[j] >> 4) * d + m; } break; }
    case GGUF_T_Q5_0: case GGUF_T_Q5_1: {
        int one = t == GGUF_T_Q5_1; float d = f16at(b), m = one ? f16at(b + 2) : 0.0f;
        const uint8_t *h = b + (one ? 4 : 2), *q = h + 4;
        uint32_t qh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        for (int j = 0; j < 16; j++) {
            int x0 = (q[j] & 0xF) | (int)(((qh >> j) & 1) << 4), x1 = (q[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            if (one) { y[j] = (float)x0 * d + m; y[j + 16] = (float)x1 * d + m; }
            else { y[j] = (float)(x0 - 16) * d; y[j + 16] = (float)(x1 - 16) * d; }
        }
        break; }
    case GGUF_T_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128; const int8_t *sc = (const int8_t *)(b + 192); float d = f16at(b + 208);
        for (int n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32, q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32, q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[is] * (float)q1; y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3; y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        break; }
    case GGUF_T_Q4_K: case GGUF_T_Q5_K: {
        int five = t == GGUF_T_Q5_K; float d = f16at(b), dmin = f16at(b + 2); const uint8_t *sc = b + 4;
        const uint8_t *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            int s1, m1, s2, m2;
            scale_min_k4(is, sc, &s1, &m1); scale_min_k4(is + 1, sc, &s2, &m2);
            float d1 = d * (float)s1, n1 = dmin * (float)m1, d2 = d * (float)s2, n2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++) {
                int h1 = five && (qh[l] >> (j / 32)) & 1 ? 16 : 0, h2 = five && (qh[l] >> (j / 32 + 1)) & 1 ? 16 : 0;
                y[j + l] = d1 * (float)((q[l] & 0xF) + h1) - n1;
                y[j + 32 + l] = d2 * (float)((q[l] >> 4) + h2) - n2;
            }
        }
        break; }
    }
}

int quant_supported(uint32_t t) {
    switch (t) {
    case GGUF_T_F32: case GGUF_T_F16: case GGUF_T_BF16: case GGUF_T_Q8_0: case GGUF_T_Q4_0: case GGUF_T_Q4_1:
    case GGUF_T_Q5_0: case GGUF_T_Q5_1: case GGUF_T_Q4_K: case GGUF_T_Q5_K: case GGUF_T_Q6_K: case GGUF_T_MXFP4: return 1;
    default: return 0;
    }
}

/* Shared argument checks: -1 naming the tensor, or 0 with *row_bytes set. */
static int check(uint32_t t, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1, size_t *row_bytes,
                 const char *name, AvErr *e) {
    if (!quant_supported(t)) return av_err(e, "tensor '%s': ggml type %s (%u) is not supported", name, gguf_type_name(t), t);
    size_t blk = gguf_type_block(t), bs = gguf_type_bytes(t);
    if (cols % blk || r0 > r1 || r1 > rows) return av_err(e, "tensor '%s': bad row range or row length", name);
    *row_bytes = cols / blk * bs;
    if (rows && *row_bytes > nbytes / rows) return av_err(e, "tensor '%s': data shorter than its shape", name);
    return 0;
}

int quant_rows_naive(uint32_t t, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
                     float *out, const char *name, AvErr *e) {
    size_t row_bytes = 0, blk = gguf_type_block(t), bs = gguf_type_bytes(t);
    if (check(t, nbytes, rows, cols, r0, r1, &row_bytes, name, e) != 0) return -1;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *p = data + r * row_bytes;
        float *y = out + (r - r0) * cols;
        for (size_t c = 0; c < cols; c += blk, p += bs) {
            if (t == GGUF_T_F32) memcpy(&y[c], p, 4);
            else if (t == GGUF_T_F16) y[c] = f16at(p);
            else if (t == GGUF_T_BF16) { uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16; memcpy(&y[c], &u, 4); }
            else block(t, p, y + c);
        }
    }
    return 0;
}

/* ---- fast path: one loop per type over a contiguous run of blocks ---- */

/* Plain C for the compiler to vectorize, each loop built for x86-64-v4
 * (AVX-512) and AVX2 too, whose per-lane shifts and wider vectors the
 * baseline x86-64 target lacks, and chosen by the product kernel in use
 * (vecfn.h); elsewhere, or with -DVEC_ONE_BUILD, only the portable build
 * exists. Rounding is the same in every build: ISO C mode keeps a*b+c unfused. */

/* f16 -> f32 without branches or a subnormal loop: normals rebias the
 * exponent, subnormals are built as 2^-14 * (1 + m/1024) and 2^-14 taken
 * away (exact), inf/NaN keep their payload; the same bits as quant_f16. */
static inline uint32_t f16_bits(uint32_t h) {
    uint32_t o = (h & 0x7fffu) << 13, ex = o & 0x0f800000u, sb;
    float sub;
    uint32_t t = o + 0x38800000u;
    memcpy(&sub, &t, 4);
    sub -= 6.103515625e-05f;
    memcpy(&sb, &sub, 4);
    /* all-ones masks rather than branches, so the loop stays vectorized */
    uint32_t inf = 0u - (uint32_t)(ex == 0x0f800000u), zero = 0u - (uint32_t)(ex == 0);
    uint32_t r = (inf & (o + 0x70000000u)) | (zero & sb) | (~(inf | zero) & (o + 0x38000000u));
    return r | (h & 0x8000u) << 16;
}

static inline float f16f(const uint8_t *p) {
    uint32_t b = f16_bits((uint32_t)p[0] | (uint32_t)p[1] << 8);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

VEC_VOID_V4(static, rows_f16, (const uint8_t *restrict p, size_t n, float *restrict y), (p, n, y)) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b = f16_bits((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8);
        memcpy(&y[i], &b, 4);
    }
}

VEC_VOID_V4(static, rows_bf16, (const uint8_t *restrict p, size_t n, float *restrict y), (p, n, y)) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b = ((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8) << 16;
        memcpy(&y[i], &b, 4);
    }
}

VEC_VOID_V4(static, rows_q8_0, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 34, y += 32) {
        float d = f16f(b);
        const int8_t *q = (const int8_t *)(b + 2);
        for (int i = 0; i < 32; i++) y[i] = (float)q[i] * d;
    }
}

/* Q4_0 / Q4_1: "unroll 1" keeps GCC from unrolling the 16-element loop fully
 * and then vectorizing across blocks instead, with strided loads. */
VEC_VOID_V4(static, rows_q4_0, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 18, y += 32) {
        float d = f16f(b);
        const uint8_t *q = b + 2;
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((q[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((q[j] >> 4) - 8) * d;
        }
    }
}

VEC_VOID_V4(static, rows_q4_1, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 20, y += 32) {
        float d = f16f(b), m = f16f(b + 2);
        const uint8_t *q = b + 4;
#pragma GCC unroll 1
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(q[j] & 0xF) * d + m;
            y[j + 16] = (float)(q[j] >> 4) * d + m;
        }
    }
}

/* Q5_0 and Q5_1: the fifth bit of element j is bit j of a 32-bit word. */
VEC_VOID_V4(static, rows_q5_0, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 22, y += 32) {
        float d = f16f(b);
        const uint8_t *q = b + 6;
        uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((int)((q[j] & 0xFu) | ((qh >> j) & 1) << 4) - 16) * d;
            y[j + 16] = (float)((int)((q[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16) * d;
        }
    }
}

VEC_VOID_V4(static, rows_q5_1, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 24, y += 32) {
        float d = f16f(b), m = f16f(b + 2);
        const uint8_t *q = b + 8;
        uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((q[j] & 0xFu) | ((qh >> j) & 1) << 4) * d + m;
            y[j + 16] = (float)((q[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) * d + m;
        }
    }
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; five selects
 * the fifth bit plane. Each sub-block's scale and min are widened once, so
 * the element loops are uniform. */
VEC_VOID_V4(static, rows_qk, (const uint8_t *restrict b, size_t nb, float *restrict y, int five), (b, nb, y, five)) {
    size_t bs = five ? 176 : 144;
    for (size_t k = 0; k < nb; k++, b += bs, y += 256) {
        float d = f16f(b), dmin = f16f(b + 2);
        const uint8_t *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            int s1, m1, s2, m2;
            scale_min_k4(is, b + 4, &s1, &m1); scale_min_k4(is + 1, b + 4, &s2, &m2);
            float d1 = d * (float)s1, n1 = dmin * (float)m1, d2 = d * (float)s2, n2 = dmin * (float)m2;
            int sh = j / 32;
            if (five) {
                for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)((q[l] & 0xF) | ((qh[l] >> sh) & 1) << 4) - n1;
                for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)((q[l] >> 4) | ((qh[l] >> (sh + 1)) & 1) << 4) - n2;
            } else {
                for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)(q[l] & 0xF) - n1;
                for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - n2;
            }
        }
    }
}

VEC_VOID_V4(static, rows_q6_k, (const uint8_t *restrict b, size_t nb, float *restrict y), (b, nb, y)) {
    for (size_t k = 0; k < nb; k++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = f16f(b + 208);
        for (int n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
            /* d * sc first, as the reference multiplies left to right */
            for (int h = 0; h < 2; h++) {
                float s0 = d * (float)sc[h], s2 = d * (float)sc[h + 2], s4 = d * (float)sc[h + 4], s6 = d * (float)sc[h + 6];
                for (int l = 16 * h; l < 16 * h + 16; l++) {
                    y[l] = s0 * (float)(((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32);
                    y[l + 32] = s2 * (float)(((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32);
                    y[l + 64] = s4 * (float)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                    y[l + 96] = s6 * (float)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
                }
            }
        }
    }
}

int quant_rows(uint32_t t, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
               float *out, const char *name, AvErr *e) {
    size_t row_bytes = 0;
    if (check(t, nbytes, rows, cols, r0, r1, &row_bytes, name, e) != 0) return -1;
    /* rows are stored back to back, so rows [r0, r1) are one run of blocks */
    const uint8_t *p = data + r0 * row_bytes;
    size_t n = (r1 - r0) * cols, nb = n / gguf_type_block(t);
    switch (t) {
    case GGUF_T_F32: if (n) memcpy(out, p, n * 4); break;
    case GGUF_T_F16: rows_f16(p, n, out); break;
    case GGUF_T_BF16: rows_bf16(p, n, out); break;
    case GGUF_T_Q8_0: rows_q8_0(p, nb, out); break;
    case GGUF_T_Q4_0: rows_q4_0(p, nb, out); break;
    case GGUF_T_Q4_1: rows_q4_1(p, nb, out); break;
    case GGUF_T_Q5_0: rows_q5_0(p, nb, out); break;
    case GGUF_T_Q5_1: rows_q5_1(p, nb, out); break;
    case GGUF_T_Q4_K: rows_qk(p, nb, out, 0); break;
    case GGUF_T_Q5_K: rows_qk(p, nb, out, 1); break;
    case GGUF_T_Q6_K: rows_q6_k(p, nb, out); break;
    case GGUF_T_MXFP4: /* a table lookup per code: the block reference is already the loop */
        for (size_t i = 0; i < nb; i++) block(t, p + i * 17, out + i * 32);
        break;
    }
    return 0;
}

/* ---- one token's product straight from the blocks (quant_matvec) ----
 *
 * Every format is, per group of 16 elements, integer codes c times one scale
 * d plus, per group of 32, one offset m: W[k] = c[k] * d + m (Q4_1, Q5_1),
 * c[k] * d - m (Q4_K, Q5_K: d = d * scale, m = dmin * min), or c[k] * d with
 * the codes re-centred (Q4_0 c - 8, Q5_0 c - 16, Q6_K c - 32, MXFP4's table).
 * So a row's product is
 *
 *     y = sum over groups g of d_g * (sum_k c[k] x[k]) + sum over blocks b of m_b * sx_b
 *
 * with sx_b the sum of x over block b, taken once per call. Codes are small
 * integers, exact in float, so sum_k c[k] x[k] is a plain float dot product;
 * the only change from the widened product sum_k (c[k] d + m) x[k] is where
 * the roundings fall: each term here is bounded by |d| sum |c x| + |m| sum |x|,
 * which is at most a few times sum |W[k] x[k]|-sized (|m| and |15 d| are at
 * most twice max |W| of their block), so the result stays within the float
 * rounding of a length-`cols` dot product of the widened row, as OpenBLAS's
 * sgemv did before it (a different order of its own). Decode is compared with
 * the teacher-forced pass and transformers only to 1e-5 and 1e-4 (streamed
 * attention rows, logprobs), never bit for bit. */

/* Sums of x over each run of 32 elements (the offset groups). */
static void sums32(const float *x, size_t cols, float *sx) {
    for (size_t b = 0; b < cols / 32; b++) {
        float s = 0;
        for (int j = 0; j < 32; j++) s += x[b * 32 + j];
        sx[b] = s;
    }
}

/* A block's integer codes (c), per-16 scales (d) and per-32 offsets (m), in
 * element order: the portable path's decoder and the layouts above. */
static inline __attribute__((always_inline)) void block_codes(uint32_t t, const uint8_t *b, int8_t *c, float *d, float *m) {
    switch (t) {
    case GGUF_T_Q8_0: d[0] = d[1] = f16f(b), m[0] = 0;
        for (int i = 0; i < 32; i++) c[i] = (int8_t)b[2 + i];
        break;
    case GGUF_T_Q4_0: case GGUF_T_Q4_1: { const int one = t == GGUF_T_Q4_1; const uint8_t *q = b + (one ? 4 : 2);
        d[0] = d[1] = f16f(b), m[0] = one ? f16f(b + 2) : 0;
        for (int j = 0; j < 16; j++) c[j] = (int8_t)((q[j] & 0xF) - (one ? 0 : 8)), c[j + 16] = (int8_t)((q[j] >> 4) - (one ? 0 : 8));
        break; }
    case GGUF_T_Q5_0: case GGUF_T_Q5_1: {
        const int one = t == GGUF_T_Q5_1; const uint8_t *h = b + (one ? 4 : 2), *q = h + 4;
        d[0] = d[1] = f16f(b), m[0] = one ? f16f(b + 2) : 0;
        uint32_t qh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        for (int j = 0; j < 16; j++) {
            c[j] = (int8_t)((int)((q[j] & 0xFu) | ((qh >> j) & 1) << 4) - (one ? 0 : 16));
            c[j + 16] = (int8_t)((int)((q[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - (one ? 0 : 16));
        }
        break; }
    case GGUF_T_MXFP4: d[0] = d[1] = e8m0_half(b[0]), m[0] = 0;
        for (int j = 0; j < 16; j++) c[j] = MXFP4_KV[b[1 + j] & 0xF], c[j + 16] = MXFP4_KV[b[1 + j] >> 4];
        break;
    case GGUF_T_Q4_K: case GGUF_T_Q5_K: {
        const int five = t == GGUF_T_Q5_K; const float dd = f16f(b), dmin = f16f(b + 2);
        const uint8_t *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            int s1, m1, s2, m2;
            scale_min_k4(is, b + 4, &s1, &m1); scale_min_k4(is + 1, b + 4, &s2, &m2);
            d[j / 16] = d[j / 16 + 1] = dd * (float)s1, d[j / 16 + 2] = d[j / 16 + 3] = dd * (float)s2;
            m[j / 32] = -(dmin * (float)m1), m[j / 32 + 1] = -(dmin * (float)m2);
            for (int l = 0; l < 32; l++) {
                c[j + l] = (int8_t)((q[l] & 0xF) | (five ? ((qh[l] >> (j / 32)) & 1) << 4 : 0));
                c[j + 32 + l] = (int8_t)((q[l] >> 4) | (five ? ((qh[l] >> (j / 32 + 1)) & 1) << 4 : 0));
            }
        }
        break; }
    case GGUF_T_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128; const int8_t *sc = (const int8_t *)(b + 192); const float dd = f16f(b + 208);
        for (int g = 0; g < 8; g++) m[g] = 0;
        for (int n = 0; n < 2; n++, c += 128, d += 8, ql += 64, qh += 32, sc += 8) {
            for (int g = 0; g < 8; g++) d[g] = dd * (float)sc[(g & 1) + 2 * (g >> 1)];
            for (int l = 0; l < 32; l++) {
                c[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32);
                c[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32);
                c[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                c[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
            }
        }
        break; }
    }
}

/* The portable path: a block's codes decoded into 256 bytes on the stack (the
 * type a constant in each instance, so block_codes folds to its case), then
 * 16 float lanes of d * (c * x) the compiler vectorizes with whatever vectors
 * the baseline target has. */
static inline __attribute__((always_inline)) void matvec_c_body(uint32_t t, const uint8_t *w, size_t row_bytes,
                                                                size_t nb, size_t rows, const float *x,
                                                                const float *sx, float *y) {
    const size_t blk = t == GGUF_T_Q4_K || t == GGUF_T_Q5_K || t == GGUF_T_Q6_K ? 256 : 32;
    const size_t bs = t == GGUF_T_Q8_0 ? 34 : t == GGUF_T_Q4_0 ? 18 : t == GGUF_T_Q4_1 ? 20 : t == GGUF_T_Q5_0 ? 22
                    : t == GGUF_T_Q5_1 ? 24 : t == GGUF_T_Q4_K ? 144 : t == GGUF_T_Q5_K ? 176 : t == GGUF_T_Q6_K ? 210 : 17;
    int8_t c[256];
    float d[16], m[8];
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *p = w + r * row_bytes;
        float lane[16] = {0}, off = 0;
        for (size_t k = 0; k < nb; k++, p += bs) {
            block_codes(t, p, c, d, m);
            const float *xb = x + k * blk;
            for (size_t g = 0; g < blk / 16; g++)
                for (int j = 0; j < 16; j++) lane[j] += d[g] * ((float)c[g * 16 + j] * xb[g * 16 + j]);
            for (size_t g = 0; g < blk / 32; g++) off += m[g] * sx[k * blk / 32 + g];
        }
        float acc = 0;
        for (int j = 0; j < 16; j++) acc += lane[j];
        y[r] = acc + off;
    }
}

static void matvec_c(uint32_t t, const uint8_t *w, size_t row_bytes, size_t nb, size_t rows, const float *x,
                     const float *sx, float *y) {
    switch (t) {
    case GGUF_T_Q8_0: matvec_c_body(GGUF_T_Q8_0, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q4_0: matvec_c_body(GGUF_T_Q4_0, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q4_1: matvec_c_body(GGUF_T_Q4_1, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q5_0: matvec_c_body(GGUF_T_Q5_0, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q5_1: matvec_c_body(GGUF_T_Q5_1, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q4_K: matvec_c_body(GGUF_T_Q4_K, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q5_K: matvec_c_body(GGUF_T_Q5_K, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_Q6_K: matvec_c_body(GGUF_T_Q6_K, w, row_bytes, nb, rows, x, sx, y); break;
    case GGUF_T_MXFP4: matvec_c_body(GGUF_T_MXFP4, w, row_bytes, nb, rows, x, sx, y); break;
    }
}

/* The AVX2 path is built into a one-target build for an AVX2 CPU too (-march=haswell -DVEC_ONE_BUILD):
 * there ATTNVIZ_KERNEL=avx2 must run the very code the dispatching build's avx2 path runs, bit for bit
 * (tests/e2e/kernel_build_test.sh); the AVX-512 path only where the build dispatches. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                                        \
    (!defined(VEC_ONE_BUILD) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)))
#define QDOT_X86 1
#include <immintrin.h>

/* The SIMD paths decode a group of 32 codes into the 32 int8 lanes of one
 * 256-bit register (AVX2 byte operations; the AVX-512 path keeps these and
 * widens its products to 16 lanes), never into memory. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

/* f16 -> f32 by F16C: the same value as f16f for every non-NaN input (a NaN stays NaN). */
static inline float qd_f16(const uint8_t *p) { return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8)); }

static inline __m256i qd_nibbles(const uint8_t *q) { /* 16 bytes: elements 0..15 low nibbles, 16..31 high */
    const __m128i v = _mm_loadu_si128((const __m128i *)q), f = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), f), _mm_and_si128(v, f));
}

/* bit j of a 32-bit word to bit 4 of byte j */
static inline __m256i qd_bit5(const uint8_t *h) {
    uint32_t qh;
    memcpy(&qh, h, 4);
    const __m256i sh = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                        3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sh);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 codes of one group (g: which group of a block), re-centred as block_codes does. */
static inline __m256i qd_codes(uint32_t t, const uint8_t *b, int g) {
    switch (t) {
    case GGUF_T_Q8_0: return _mm256_loadu_si256((const __m256i *)(b + 2));
    case GGUF_T_Q4_0: return _mm256_sub_epi8(qd_nibbles(b + 2), _mm256_set1_epi8(8));
    case GGUF_T_Q4_1: return qd_nibbles(b + 4);
    case GGUF_T_Q5_0: return _mm256_sub_epi8(_mm256_or_si256(qd_nibbles(b + 6), qd_bit5(b + 2)), _mm256_set1_epi8(16));
    case GGUF_T_Q5_1: return _mm256_or_si256(qd_nibbles(b + 8), qd_bit5(b + 4));
    case GGUF_T_MXFP4: {
        const __m256i kv = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6, 8, 12,
                                            0, -1, -2, -3, -4, -6, -8, -12);
        return _mm256_shuffle_epi8(kv, qd_nibbles(b + 1));
    }
    case GGUF_T_Q4_K: case GGUF_T_Q5_K: { /* group g of 8: q[32] of pair g / 2, low or high nibbles */
        const int five = t == GGUF_T_Q5_K;
        const __m256i v = _mm256_loadu_si256((const __m256i *)(b + (five ? 48 : 16) + 32 * (g / 2))),
                      f = _mm256_set1_epi8(0xF);
        __m256i c = g & 1 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), f) : _mm256_and_si256(v, f);
        if (five) {
            const __m256i h = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(b + 16)), _mm_cvtsi32_si128(g));
            c = _mm256_or_si256(c, _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(1)), 4));
        }
        return c;
    }
    default: { /* Q6_K: group g of 8, 32 elements at 32 g: half g / 4, quarter g % 4 */
        const uint8_t *ql = b + 64 * (g / 4), *qh = b + 128 + 32 * (g / 4);
        const int q = g % 4;
        const __m256i l = _mm256_loadu_si256((const __m256i *)(ql + (q & 1 ? 32 : 0))), f = _mm256_set1_epi8(0xF);
        const __m256i lo = q < 2 ? _mm256_and_si256(l, f) : _mm256_and_si256(_mm256_srli_epi16(l, 4), f);
        __m256i h = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)qh), _mm_cvtsi32_si128(2 * q));
        h = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(3)), 4);
        return _mm256_sub_epi8(_mm256_or_si256(lo, h), _mm256_set1_epi8(32));
    }
    }
}

/* Sum of codes times x over 16 elements (half: 0 or 1 of the register), as 8 lanes. */
static inline __m256 qd_dot16_avx2(__m256i c, int half, const float *x) {
    const __m128i v = half ? _mm256_extracti128_si256(c, 1) : _mm256_castsi256_si128(c);
    __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_loadu_ps(x));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))), _mm256_loadu_ps(x + 8), s);
}

static inline float qd_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

#define QD_WIDE 0
#include "quant_dot.inc"
#undef QD_WIDE
#pragma GCC pop_options

#ifndef VEC_ONE_BUILD
#define QDOT_X86_512 1
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4,fma,f16c")
static inline __m512 qd_dot32_avx512(__m256i c, const float *x) {
    __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(c))), _mm512_loadu_ps(x));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(c, 1))),
                           _mm512_loadu_ps(x + 16), s);
}
#define QD_WIDE 1
#include "quant_dot.inc"
#undef QD_WIDE
#pragma GCC pop_options
#endif
#endif

/* Whether quant_matvec multiplies blocks of this type directly. */
int quant_matvec_covers(uint32_t t) {
    switch (t) {
    case GGUF_T_Q8_0: case GGUF_T_Q4_0: case GGUF_T_Q4_1: case GGUF_T_Q5_0: case GGUF_T_Q5_1: case GGUF_T_Q4_K:
    case GGUF_T_Q5_K: case GGUF_T_Q6_K: case GGUF_T_MXFP4: return 1;
    default: return 0;
    }
}

size_t quant_matvec_scratch(size_t cols) { return cols / 32 + 1; }

int quant_matvec(uint32_t t, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
                 const float *x, float *y, float *scratch, const char *name, AvErr *e) {
    size_t row_bytes = 0;
    if (check(t, nbytes, rows, cols, r0, r1, &row_bytes, name, e) != 0) return -1;
    if (!quant_matvec_covers(t)) return av_err(e, "tensor '%s': no direct product for ggml type %s", name, gguf_type_name(t));
    const uint8_t *w = data + r0 * row_bytes;
    const size_t nb = cols / gguf_type_block(t);
    sums32(x, cols, scratch);
#ifdef QDOT_X86
    const int level = gemm_vec_level();
#ifdef QDOT_X86_512
    if (level == 2) {
        matvec_512(t, w, row_bytes, nb, r1 - r0, x, scratch, y);
        return 0;
    }
#endif
    if (level >= 1) {
        matvec_256(t, w, row_bytes, nb, r1 - r0, x, scratch, y);
        return 0;
    }
#endif
    matvec_c(t, w, row_bytes, nb, r1 - r0, x, scratch, y);
    return 0;
}

int quant_matvec_naive(uint32_t t, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
                       const float *x, float *y, const char *name, AvErr *e) {
    size_t row_bytes = 0;
    if (check(t, nbytes, rows, cols, r0, r1, &row_bytes, name, e) != 0) return -1;
    float *wr = malloc(cols * sizeof *wr);
    if (!wr) return av_err(e, "out of memory");
    for (size_t r = r0; r < r1; r++) {
        quant_rows_naive(t, data, nbytes, rows, cols, r, r + 1, wr, name, e);
        double acc = 0;
        for (size_t k = 0; k < cols; k++) acc += (double)wr[k] * x[k];
        y[r - r0] = (float)acc;
    }
    free(wr);
    return 0;
}
