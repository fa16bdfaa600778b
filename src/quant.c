/* quant.c — naive block dequantizers written from the ggml block layouts:
 * each block stores its scale(s) as f16 then packed integer codes. */
#include "quant.h"
#include "gguf.h"

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

static void block(uint32_t t, const uint8_t *b, float *y) {
    switch (t) {
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
    case GGUF_T_Q5_0: case GGUF_T_Q5_1: case GGUF_T_Q4_K: case GGUF_T_Q5_K: case GGUF_T_Q6_K: return 1;
    default: return 0;
    }
}

int quant_rows(uint32_t t, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
               float *out, const char *name, AvErr *e) {
    if (!quant_supported(t)) return av_err(e, "tensor '%s': ggml type %s (%u) is not supported", name, gguf_type_name(t), t);
    size_t blk = gguf_type_block(t), bs = gguf_type_bytes(t);
    if (cols % blk || r0 > r1 || r1 > rows) return av_err(e, "tensor '%s': bad row range or row length", name);
    size_t row_bytes = cols / blk * bs;
    if (rows && row_bytes > nbytes / rows) return av_err(e, "tensor '%s': data shorter than its shape", name);
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
