/* test_kernels.c — the engine's optimized kernels against their naive
 * references (kernels.h): products in every layout and storage type,
 * attention with every mask, norms, softmax, activations, rotary. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "config.h"
#include "kernels.h"
#include "safetensors.h"
#include "check_util.h"

/* kern_attention's scratch for every size below: (nq + nk) * dh floats */
static float ATTN_SCRATCH[1 << 16];

/* y (n, out) through kern_linear_rows, whose input and output are transposed;
 * rows split at `split`, as the forward pass's threads split them. */
static void linear_via_rows(float *y, const float *x, const Linear *lin, int n, int in, int out, int split) {
    float *xT = malloc(sizeof(float) * n * in), *yT = malloc(sizeof(float) * n * out);
    ck_assert_ptr_nonnull(xT);
    ck_assert_ptr_nonnull(yT);
    transpose(xT, x, n, in);
    kern_linear_rows(yT, xT, lin, n, 0, split, -1, NULL);
    kern_linear_rows(yT, xT, lin, n, split, out, -1, NULL);
    transpose(y, yT, out, n);
    free(xT), free(yT);
}

START_TEST(linear_rows_match_naive_reference) {
    int n = 13, in = 37, out = 29;
    float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    fill(x, (size_t)n * in, 1, 1), fill(w, (size_t)out * in, 2, 0.5f), fill(b, (size_t)out, 3, 1);
    Linear lin = {.w = w, .b = b, .out = out, .in = in, .ld = in}, nobias = {.w = w, .out = out, .in = in, .ld = in};
    kern_matmul_naive(y1, x, w, b, n, in, out);
    linear_via_rows(y2, x, &lin, n, in, out, out);
    ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
    kern_matmul_naive(y1, x, w, NULL, n, in, out);
    linear_via_rows(y2, x, &nobias, n, in, out, 16);
    ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
    /* the activation goes on after the bias */
    float *xT = malloc(sizeof(float) * n * in), *yT = malloc(sizeof(float) * n * out);
    transpose(xT, x, n, in);
    kern_linear_rows(yT, xT, &lin, n, 0, out, ACT_RELU, NULL);
    kern_matmul_naive(y1, x, w, b, n, in, out);
    transpose(y2, yT, out, n);
    int negatives = 0;
    for (int i = 0; i < n * out; i++) {
        negatives += y1[i] < 0;
        ck_assert_float_eq_tol(y2[i], y1[i] > 0 ? y1[i] : 0.0f, 1e-4f);
    }
    ck_assert_int_gt(negatives, 0);
    free(x), free(w), free(b), free(y1), free(y2), free(xT), free(yT);
}
END_TEST

/* q, k, v (n, ld) rows holding a head at column off -> the head's (dh, n) rows */
static void head_rows(float *dst, const float *src, int n, int ld, int off, int dh) {
    for (int d = 0; d < dh; d++)
        for (int i = 0; i < n; i++) dst[(size_t)d * n + i] = src[(size_t)i * ld + off + d];
}

START_TEST(attention_matches_naive_reference_inside_a_wider_block) {
    int n = 19, dh = 8, H = 24; /* head 1 of three: rows [8, 16) of a (H, n) block, as in the model */
    size_t sz = (size_t)n * H;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * n), *p2 = malloc(sizeof(float) * n * n);
    float *c1 = calloc(sz, sizeof(float)), *c2 = calloc(sz, sizeof(float));
    fill(q, sz, 4, 3), fill(k, sz, 5, 3), fill(v, sz, 6, 1);
    float scale = 1.0f / sqrtf((float)dh);
    const size_t off = (size_t)dh * n;
    kern_attention_naive(p1, c1 + off, q + off, k + off, v + off, n, dh, &(AttnRule){scale, 0, 0, 0, 0, 0, 0, NULL, NULL});
    kern_attention(p2, c2 + off, q + off, k + off, v + off, n, dh, &(AttnRule){scale, 0, 0, 0, 0, 0, 0, NULL, NULL}, ATTN_SCRATCH);
    ck_assert_float_lt(max_abs_diff(p1, p2, (size_t)n * n), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1, c2, sz), 1e-5f);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += p2[i * n + j];
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    /* rows outside the head's are untouched */
    for (size_t i = 0; i < off; i++) ck_assert_float_eq(c2[i], 0.0f);
    for (size_t i = 2 * off; i < sz; i++) ck_assert_float_eq(c2[i], 0.0f);
    free(q), free(k), free(v), free(p1), free(p2), free(c1), free(c2);
}
END_TEST

START_TEST(attention_naive_reference_is_softmax_of_scaled_dot_products) {
    /* the reference itself, against the definition on token-major q, k, v */
    int n = 5, dh = 4;
    float q[20], k[20], v[20], qT[20], kT[20], vT[20], probs[25], ctxT[20];
    fill(q, 20, 40, 1), fill(k, 20, 41, 1), fill(v, 20, 42, 1);
    head_rows(qT, q, n, dh, 0, dh), head_rows(kT, k, n, dh, 0, dh), head_rows(vT, v, n, dh, 0, dh);
    kern_attention_naive(probs, ctxT, qT, kT, vT, n, dh, &(AttnRule){0.5f, 0, 0, 0, 0, 0, 0, NULL, NULL});
    for (int i = 0; i < n; i++) {
        double e[5], sum = 0;
        for (int j = 0; j < n; j++) {
            double dot = 0;
            for (int d = 0; d < dh; d++) dot += (double)q[i * dh + d] * k[j * dh + d];
            sum += e[j] = exp(0.5 * dot);
        }
        for (int j = 0; j < n; j++) ck_assert_double_eq_tol(probs[i * n + j], e[j] / sum, 1e-6);
        for (int d = 0; d < dh; d++) {
            double c = 0;
            for (int j = 0; j < n; j++) c += e[j] / sum * v[j * dh + d];
            ck_assert_double_eq_tol(ctxT[d * n + i], c, 1e-6);
        }
    }
}
END_TEST

START_TEST(causal_attention_gives_future_keys_exactly_zero) {
    int n = 23, dh = 8;
    size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * n), *p2 = malloc(sizeof(float) * n * n);
    float *c1 = calloc(sz, sizeof(float)), *c2 = calloc(sz, sizeof(float));
    fill(q, sz, 7, 3), fill(k, sz, 8, 3), fill(v, sz, 9, 1);
    float scale = 0.5f / sqrtf((float)dh); /* GPT-2's inverse layer scaling, layer 1 */
    kern_attention_naive(p1, c1, q, k, v, n, dh, &(AttnRule){scale, 1, 0, 0, 0, 0, 0, NULL, NULL});
    kern_attention(p2, c2, q, k, v, n, dh, &(AttnRule){scale, 1, 0, 0, 0, 0, 0, NULL, NULL}, ATTN_SCRATCH);
    ck_assert_float_lt(max_abs_diff(p1, p2, (size_t)n * n), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1, c2, sz), 1e-5f);
    ck_assert_float_eq(p2[0], 1.0f); /* the first token sees only itself */
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) {
            if (j > i) ck_assert_float_eq(p2[i * n + j], 0.0f);
            else ck_assert_float_gt(p2[i * n + j], 0.0f);
            s += p2[i * n + j];
        }
        ck_assert_double_eq_tol(s, 1.0, 1e-5);
    }
    /* the last row sees every key: it equals unmasked attention's last row */
    kern_attention_naive(p1, c1, q, k, v, n, dh, &(AttnRule){scale, 0, 0, 0, 0, 0, 0, NULL, NULL});
    ck_assert_float_lt(max_abs_diff(p1 + (size_t)(n - 1) * n, p2 + (size_t)(n - 1) * n, (size_t)n), 1e-6f);
    free(q), free(k), free(v), free(p1), free(p2), free(c1), free(c2);
}
END_TEST

START_TEST(conv1d_views_of_a_fused_weight_match_naive_reference) {
    /* GPT-2's c_attn: weight (in, 3 * out) holding q | k | v; each view is a column block */
    int n = 11, in = 24, out = 40, parts = 3, ld = parts * out;
    float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * in * ld), *b = malloc(sizeof(float) * ld);
    float *wt = malloc(sizeof(float) * out * in);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    fill(x, (size_t)n * in, 11, 1), fill(w, (size_t)in * ld, 12, 0.5f), fill(b, (size_t)ld, 13, 1);
    for (int p = 0; p < parts; p++) {
        Linear lin = {.w = w + p * out, .b = b + p * out, .out = out, .in = in, .conv1d = 1, .ld = ld};
        /* the same block transposed into a Linear (out, in) weight */
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) wt[(size_t)o * in + i] = w[(size_t)i * ld + p * out + o];
        kern_matmul_naive(y1, x, wt, b + p * out, n, in, out);
        kern_linear_naive(y2, x, &lin, n);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-5f);
        linear_via_rows(y2, x, &lin, n, in, out, 16);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
        /* one token, and one token of a generation step (matrix-vector products) */
        linear_via_rows(y2, x, &lin, 1, in, out, 16);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)out), 1e-4f);
        float *ys = malloc(sizeof(float) * out);
        ck_assert_int_eq(kern_linear_step(ys, x, &lin, 0, 16, -1, NULL), 0);
        ck_assert_int_eq(kern_linear_step(ys, x, &lin, 16, out, -1, NULL), 0);
        ck_assert_float_lt(max_abs_diff(y1, ys, (size_t)out), 1e-4f);
        free(ys);
    }
    free(x), free(w), free(b), free(wt), free(y1), free(y2);
}
END_TEST

/* Products on shapes with remainders in every blocked dimension: 130 tokens,
 * 800 inputs (blocks of 256) and 37 rows (panels of 16), in both weight
 * layouts, split in two as the threads split it, and at 7 tokens, which take
 * the few-token kernel. */
START_TEST(products_with_remainders_match_naive_reference) {
    int n = 130, in = 800, out = 37, ld = 3 * out;
    float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * in * ld), *b = malloc(sizeof(float) * ld);
    float *wt = malloc(sizeof(float) * out * in);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    fill(x, (size_t)n * in, 31, 1), fill(w, (size_t)in * ld, 32, 0.1f), fill(b, (size_t)ld, 33, 1);
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) wt[(size_t)o * in + i] = w[(size_t)i * ld + out + o];
    Linear conv = {.w = w + out, .b = b + out, .out = out, .in = in, .conv1d = 1, .ld = ld},
           plain = {.w = wt, .b = b + out, .out = out, .in = in, .ld = in};
    for (int layout = 0; layout < 4; layout++) {
        const Linear *lin = layout & 1 ? &conv : &plain;
        const int tokens = layout & 2 ? 7 : n;
        kern_linear_naive(y1, x, lin, tokens);
        linear_via_rows(y2, x, lin, tokens, in, out, 11);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)tokens * out), 1e-4f);
    }
    free(x), free(w), free(b), free(wt), free(y1), free(y2);
}
END_TEST

START_TEST(attention_without_context_gives_the_same_probabilities) {
    /* the last layer needs only the probabilities: ctxT NULL skips the product with v */
    int n = 17, dh = 8;
    size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * n), *p2 = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * sz);
    fill(q, sz, 34, 2), fill(k, sz, 35, 2), fill(v, sz, 36, 1);
    for (int causal = 0; causal < 2; causal++) {
        kern_attention(p1, c, q, k, v, n, dh, &(AttnRule){0.35f, causal, 0, 0, 0, 0, 0, NULL, NULL}, ATTN_SCRATCH);
        kern_attention(p2, NULL, q, k, NULL, n, dh, &(AttnRule){0.35f, causal, 0, 0, 0, 0, 0, NULL, NULL}, ATTN_SCRATCH);
        ck_assert_int_eq(memcmp(p1, p2, sizeof(float) * n * n), 0);
    }
    free(q), free(k), free(v), free(p1), free(p2), free(c);
}
END_TEST

/* x += y, then LayerNorm, by the reference kernels on token-major arrays */
static void residual_reference(float *x, const float *y, const float *g, const float *b, int n, int dim) {
    for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += y ? y[i] : 0.0f;
    if (g) kern_norm_naive(x, &(Norm){g, b, 0, 1e-12f}, n, dim);
}

START_TEST(residual_step_matches_add_and_layernorm_reference) {
    /* 37 tokens: two whole blocks of 16 and a remainder; 50 features: not a multiple of 16 */
    int n = 37, dim = 50;
    size_t sz = (size_t)n * dim;
    float *x0 = malloc(sizeof(float) * sz), *y = malloc(sizeof(float) * sz), *yT = malloc(sizeof(float) * sz);
    float *ref = malloc(sizeof(float) * sz), *x = malloc(sizeof(float) * sz), *dst = malloc(sizeof(float) * sz);
    float *dT = malloc(sizeof(float) * sz), *d = malloc(sizeof(float) * sz), g[50], b[50];
    fill(x0, sz, 51, 3), fill(y, sz, 52, 1), fill(g, 50, 53, 1), fill(b, 50, 54, 1);
    for (size_t i = 0; i < sz; i++) x0[i] += 20.0f; /* a large mean, as residual streams have */
    transpose(yT, y, n, dim);
    /* post-LN: x = LN(x + y) in place, and transposed; split at token 20 */
    memcpy(ref, x0, sizeof(float) * sz), memcpy(x, x0, sizeof(float) * sz);
    residual_reference(ref, y, g, b, n, dim);
    kern_residual(x, yT, x, dT, &(Norm){g, b, 0, 1e-12f}, n, dim, 0, 20);
    kern_residual(x, yT, x, dT, &(Norm){g, b, 0, 1e-12f}, n, dim, 20, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 2e-5f);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    /* pre-LN: x += y kept, LN(x) only into dst */
    memcpy(ref, x0, sizeof(float) * sz), memcpy(x, x0, sizeof(float) * sz);
    residual_reference(ref, y, NULL, NULL, n, dim);
    kern_residual(x, yT, NULL, NULL, &(Norm){NULL, NULL, 0, 1e-12f}, n, dim, 0, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 1e-6f);
    kern_residual(x, NULL, dst, dT, &(Norm){g, b, 0, 1e-12f}, n, dim, 0, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 1e-6f); /* the residual itself untouched */
    residual_reference(ref, NULL, g, b, n, dim);
    ck_assert_float_lt(max_abs_diff(ref, dst, sz), 2e-5f);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    /* no LayerNorm: x itself, transposed */
    kern_residual(x, NULL, NULL, dT, &(Norm){NULL, NULL, 0, 1e-12f}, n, dim, 0, n);
    transpose(d, dT, dim, n);
    ck_assert_int_eq(memcmp(d, x, sizeof(float) * sz), 0);
    free(x0), free(y), free(yT), free(ref), free(x), free(dst), free(dT), free(d);
}
END_TEST

START_TEST(softmax_matches_naive_reference_over_a_wide_range) {
    int rows = 7, cols = 203;
    float *a = malloc(sizeof(float) * rows * cols), *b = malloc(sizeof(float) * rows * cols);
    fill(a, (size_t)rows * cols, 21, 40); /* logits up to +-40: exp's whole useful range */
    a[5] = -1e30f, a[cols + 3] = 1e4f;    /* clamped extremes */
    memcpy(b, a, sizeof(float) * rows * cols);
    kern_softmax_rows(a, rows, cols);
    kern_softmax_rows_naive(b, rows, cols);
    ck_assert_float_lt(max_abs_diff(a, b, (size_t)rows * cols), 1e-6f);
    free(a), free(b);
}
END_TEST

/* Attention's scale folded into the softmax: the same bits as scaling first. */
START_TEST(scaled_softmax_gives_the_bits_of_scaling_then_softmax) {
    const int rows = 9, cols = 203;
    const float scales[] = {0.125f, 0.35355339f, 1.0f, 0.0883883476f, 3.0f};
    float *a = malloc(sizeof(float) * rows * cols), *b = malloc(sizeof(float) * rows * cols);
    ck_assert(a && b);
    for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++)
        for (int cols_used = 1; cols_used <= cols; cols_used += 101) {
            fill(a, (size_t)rows * cols_used, 61 + (unsigned)sc, 60);
            a[2] = -1e30f, a[cols_used > 4 ? 4 : 0] = 3e3f;
            for (size_t i = 0; i < (size_t)rows * cols_used; i++) b[i] = a[i] * scales[sc];
            kern_softmax_scaled_rows(a, rows, cols_used, scales[sc]);
            kern_softmax_rows(b, rows, cols_used);
            ck_assert_msg(!memcmp(a, b, sizeof(float) * rows * cols_used), "scale %g, %d columns: differs by %g",
                          scales[sc], cols_used, max_abs_diff(a, b, (size_t)rows * cols_used));
        }
    free(a), free(b);
}
END_TEST

START_TEST(activations_match_naive_reference) {
    size_t n = 4001;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    for (ActKind k = ACT_GELU; k <= ACT_RELU; k++) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] = -20.0f + 40.0f * (float)i / (float)(n - 1);
        kern_activate(a, n, k);
        kern_activate_naive(b, n, k);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(fabsf(a[i] - b[i]) <= 2e-6f * (1 + fabsf(b[i])), "%s(%g): %g vs %g", cfg_act_name(k),
                          -20.0 + 40.0 * i / (n - 1), a[i], b[i]);
    }
    free(a), free(b);
}
END_TEST

START_TEST(layernorm_gives_zero_mean_unit_variance) {
    float x[3 * 16], g[16], b[16];
    fill(x, 48, 9, 5);
    for (int i = 0; i < 16; i++) g[i] = 1, b[i] = 0;
    kern_norm_naive(x, &(Norm){g, b, 0, 1e-12f}, 3, 16);
    for (int r = 0; r < 3; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < 16; j++) m += x[r * 16 + j];
        m /= 16;
        for (int j = 0; j < 16; j++) v += (x[r * 16 + j] - m) * (x[r * 16 + j] - m);
        ck_assert_double_eq_tol(m, 0, 1e-5);
        ck_assert_double_eq_tol(v / 16, 1, 1e-4);
    }
}
END_TEST

/* F16, BF16 and Q8_0 weights, widened as products read them, against the
 * naive product on the same weights widened by quant.h's reference: one, few
 * and many tokens, row splits that cut the widening blocks. */
START_TEST(half_and_quantized_weights_match_naive_reference) {
    int n = 70, in = 320, out = 45; /* in: a multiple of Q8_0's 32-element blocks */
    float *x = malloc(sizeof(float) * n * in), *wf = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    float *scratch = malloc(sizeof(float) * kern_widen_floats(in));
    uint8_t *w16 = malloc((size_t)out * in * 2), *wq = malloc((size_t)out * in / 32 * 34);
    fill(x, (size_t)n * in, 61, 1), fill(wf, (size_t)out * in, 62, 0.2f), fill(b, (size_t)out, 63, 1);
    for (size_t i = 0; i < (size_t)out * in; i++) {
        uint16_t h = st_f32_to_f16(wf[i]);
        w16[2 * i] = (uint8_t)h, w16[2 * i + 1] = (uint8_t)(h >> 8);
    }
    /* Q8_0 blocks: f16 scale then 32 int8 codes */
    for (size_t blk = 0; blk < (size_t)out * in / 32; blk++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(wf[blk * 32 + j]));
        float d = amax / 127.0f;
        uint16_t dh = st_f32_to_f16(d);
        uint8_t *q = wq + blk * 34;
        q[0] = (uint8_t)dh, q[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) q[2 + j] = (uint8_t)(int8_t)lrintf(d ? wf[blk * 32 + j] / d : 0);
    }
    const struct { uint32_t type; const uint8_t *w; size_t row_bytes; } kinds[] = {
        {1, w16, (size_t)in * 2}, {30, NULL, (size_t)in * 2}, {8, wq, (size_t)in / 32 * 34}};
    uint8_t *wb = malloc((size_t)out * in * 2);
    for (size_t i = 0; i < (size_t)out * in; i++) {
        uint16_t h = st_f32_to_bf16(wf[i]);
        wb[2 * i] = (uint8_t)h, wb[2 * i + 1] = (uint8_t)(h >> 8);
    }
    for (int k = 0; k < 3; k++)
        for (int ti = 0; ti < 5; ti++) { /* 1: a generation step; 5, 7, 11: the few-token kernel */
            const int tokens = (int[]){1, 5, 7, 11, 70}[ti];
            Linear lin = {.type = kinds[k].type, .w = k == 1 ? wb : kinds[k].w, .b = b, .out = out, .in = in,
                          .row_bytes = kinds[k].row_bytes, .name = "w"};
            kern_linear_naive(y1, x, &lin, tokens);
            float *xT = malloc(sizeof(float) * tokens * in), *yT = malloc(sizeof(float) * tokens * out);
            transpose(xT, x, tokens, in);
            ck_assert_int_eq(kern_linear_rows(yT, xT, &lin, tokens, 0, 13, -1, scratch), 0);
            ck_assert_int_eq(kern_linear_rows(yT, xT, &lin, tokens, 13, out, -1, scratch), 0);
            transpose(y2, yT, out, tokens);
            ck_assert_msg(max_abs_diff(y1, y2, (size_t)tokens * out) < 1e-4f, "type %u tokens %d: %g", kinds[k].type,
                          tokens, max_abs_diff(y1, y2, (size_t)tokens * out));
            if (tokens == 1) { /* and as a generation step */
                ck_assert_int_eq(kern_linear_step(yT, x, &lin, 0, out, -1, scratch), 0);
                ck_assert_float_lt(max_abs_diff(y1, yT, (size_t)out), 1e-4f);
            }
            free(xT), free(yT);
        }
    /* and the widened product is the F32 one within the rounding of the storage */
    Linear f32 = {.w = wf, .b = b, .out = out, .in = in, .ld = in}, half = {.type = 1, .w = w16, .b = b, .out = out,
                                                                            .in = in, .row_bytes = (size_t)in * 2};
    kern_linear_naive(y1, x, &f32, n);
    kern_linear_naive(y2, x, &half, n);
    float d = max_abs_diff(y1, y2, (size_t)n * out);
    ck_assert_float_gt(d, 0.0f);
    ck_assert_float_lt(d, 2e-2f);
    free(x), free(wf), free(b), free(y1), free(y2), free(scratch), free(w16), free(wq), free(wb);
}
END_TEST

START_TEST(sliding_window_and_softcap_attention_match_naive_reference) {
    int n = 61, dh = 16;
    size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * n), *p2 = malloc(sizeof(float) * n * n);
    float *c1 = malloc(sizeof(float) * sz), *c2 = malloc(sizeof(float) * sz);
    fill(q, sz, 71, 3), fill(k, sz, 72, 3), fill(v, sz, 73, 1);
    /* the last two: an encoder's local attention, |i - j| < window both ways (ModernBERT) */
    const AttnRule rules[] = {{0.25f, 1, 7, 0, 0, 0, 0, NULL, NULL},    {0.25f, 1, 0, 5.0f, 0, 0, 0, NULL, NULL}, {0.25f, 1, 4, 2.0f, 0, 0, 0, NULL, NULL},
                              {0.25f, 0, 0, 3.0f, 0, 0, 0, NULL, NULL}, {0.25f, 0, 7, 0, 1, 0, 0, NULL, NULL},    {0.25f, 0, 3, 2.0f, 1, 0, 0, NULL, NULL}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        kern_attention_naive(p1, c1, q, k, v, n, dh, &rules[r]);
        kern_attention(p2, c2, q, k, v, n, dh, &rules[r], ATTN_SCRATCH);
        ck_assert_float_lt(max_abs_diff(p1, p2, (size_t)n * n), 1e-5f);
        ck_assert_float_lt(max_abs_diff(c1, c2, sz), 1e-5f);
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) {
                int seen = (!rules[r].causal || j <= i) && (rules[r].window <= 0 || j > i - rules[r].window) &&
                           (!rules[r].bidir || rules[r].window <= 0 || j < i + rules[r].window);
                if (!seen) ck_assert_float_eq(p2[i * n + j], 0.0f);
                else ck_assert_float_gt(p2[i * n + j], 0.0f); /* nothing else is masked */
                s += p2[i * n + j];
            }
            ck_assert_double_eq_tol(s, 1.0, 1e-5);
        }
    }
    /* capping changes the scores: without it the probabilities differ */
    AttnRule plain = {.scale = 0.25f, .causal = 1};
    kern_attention(p1, NULL, q, k, NULL, n, dh, &plain, ATTN_SCRATCH);
    kern_attention(p2, NULL, q, k, NULL, n, dh, &rules[1], ATTN_SCRATCH);
    ck_assert_float_gt(max_abs_diff(p1, p2, (size_t)n * n), 1e-3f);
    free(q), free(k), free(v), free(p1), free(p2), free(c1), free(c2);
}
END_TEST

/* Blocks that attend both ways inside a causal sequence (a vision-language model's images): a query in a
 * block sees its block's later keys too, the window still bounding the earlier ones; every kernel path the
 * same bits, and the naive reference. */
START_TEST(both_ways_blocks_in_a_causal_sequence_match_naive_reference) {
    static const char *const kernels[] = {"avx512", "avx2", "neon", "scalar"};
    const int n = 61, dh = 16;
    size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * n), *p2 = malloc(sizeof(float) * n * n), *p3 = malloc(sizeof(float) * n * n);
    float *c1 = malloc(sizeof(float) * sz), *c2 = malloc(sizeof(float) * sz), *c3 = malloc(sizeof(float) * sz);
    int blk_end[61] = {0};
    for (int i = 10; i < 30; i++) blk_end[i] = 30;
    for (int i = 40; i < 45; i++) blk_end[i] = 45;
    fill(q, sz, 91, 3), fill(k, sz, 92, 3), fill(v, sz, 93, 1);
    const AttnRule rules[] = {{.scale = 0.25f, .causal = 1, .blk_end = blk_end},
                              {.scale = 0.25f, .causal = 1, .window = 7, .blk_end = blk_end}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        kern_attention_naive(p1, c1, q, k, v, n, dh, &rules[r]);
        ck_assert_int_eq(gemm_force_kernel("scalar"), 0);
        kern_attention(p2, c2, q, k, v, n, dh, &rules[r], ATTN_SCRATCH);
        ck_assert_float_lt(max_abs_diff(p1, p2, (size_t)n * n), 1e-5f);
        ck_assert_float_lt(max_abs_diff(c1, c2, sz), 1e-5f);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const int seen = (j <= i || j < blk_end[i]) && (rules[r].window <= 0 || j > i - rules[r].window);
                if (!seen) ck_assert_float_eq(p2[i * n + j], 0.0f);
                else ck_assert_float_gt(p2[i * n + j], 0.0f);
            }
        for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
            if (gemm_force_kernel(kernels[kn]) != 0) continue;
            kern_attention(p3, c3, q, k, v, n, dh, &rules[r], ATTN_SCRATCH);
            ck_assert_msg(!memcmp(p3, p2, sizeof(float) * n * n) && !memcmp(c3, c2, sizeof(float) * sz), "%s, rule %zu",
                          kernels[kn], r);
        }
    }
    gemm_force_kernel(NULL);
    free(q), free(k), free(v), free(p1), free(p2), free(p3), free(c1), free(c2), free(c3);
}
END_TEST

/* The last queries against cached keys: the rows a full pass gives them, and
 * the naive reference, written into a wider matrix whose extra columns are 0. */
START_TEST(cached_attention_gives_the_full_pass_rows) {
    const int n = 41, dh = 16, ld = 53; /* ld: a cache and capture wider than n */
    size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *kc = malloc(sizeof(float) * dh * ld), *vc = malloc(sizeof(float) * dh * ld);
    float *full = malloc(sizeof(float) * n * n), *cfull = malloc(sizeof(float) * sz);
    float *p1 = malloc(sizeof(float) * n * ld), *p2 = malloc(sizeof(float) * n * ld);
    float *c1 = malloc(sizeof(float) * sz), *c2 = malloc(sizeof(float) * sz), *qt = malloc(sizeof(float) * sz);
    fill(q, sz, 91, 3), fill(k, sz, 92, 3), fill(v, sz, 93, 1);
    fill(kc, (size_t)dh * ld, 94, 9), fill(vc, (size_t)dh * ld, 95, 9); /* columns past n: never read */
    for (int d = 0; d < dh; d++)
        for (int j = 0; j < n; j++) kc[d * ld + j] = k[d * n + j], vc[d * ld + j] = v[d * n + j];
    const AttnRule rules[] = {{0.25f, 1, 0, 0, 0, 0, 0, NULL, NULL}, {0.25f, 1, 6, 0, 0, 0, 0, NULL, NULL}, {0.25f, 1, 0, 4.0f, 0, 0, 0, NULL, NULL}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        for (int nq = 1; nq <= 5; nq += 4) {
            /* the last nq queries, (dh, nq) */
            for (int d = 0; d < dh; d++)
                for (int i = 0; i < nq; i++) qt[d * nq + i] = q[d * n + n - nq + i];
            kern_attention(full, cfull, q, k, v, n, dh, &rules[r], ATTN_SCRATCH);
            fill(p1, (size_t)nq * ld, 96, 5), fill(p2, (size_t)nq * ld, 97, 5);
            kern_attention_kv(p1, ld, c1, qt, nq, kc, vc, ld, n, dh, &rules[r], ATTN_SCRATCH);
            kern_attention_kv_naive(p2, ld, c2, qt, nq, kc, vc, ld, n, dh, &rules[r]);
            ck_assert_float_lt(max_abs_diff(p1, p2, (size_t)nq * ld), 1e-5f);
            ck_assert_float_lt(max_abs_diff(c1, c2, (size_t)nq * dh), 1e-5f);
            for (int i = 0; i < nq; i++) {
                /* the same bits: both products are gemm.h's chains, and keys skipped are zeros there */
                ck_assert_msg(!memcmp(p1 + (size_t)i * ld, full + (size_t)(n - nq + i) * n, sizeof(float) * n),
                              "rule %zu, %d queries: row %d differs from the full pass's by %g", r, nq, i,
                              max_abs_diff(p1 + (size_t)i * ld, full + (size_t)(n - nq + i) * n, (size_t)n));
                for (int j = n; j < ld; j++) ck_assert_float_eq(p1[(size_t)i * ld + j], 0.0f);
                for (int d = 0; d < dh; d++)
                    ck_assert_msg(!memcmp(&c1[d * nq + i], &cfull[d * n + n - nq + i], sizeof(float)),
                                  "rule %zu, %d queries: context %d of row %d differs", r, nq, d, i);
            }
        }
    free(q), free(k), free(v), free(kc), free(vc), free(full), free(cfull), free(p1), free(p2), free(c1), free(c2), free(qt);
}
END_TEST


/* Long inputs: the causal triangle and a sliding window computed a block of
 * query rows at a time (windows starting mid-chain included) give the same
 * bits as a query at a time against a cache, and every kernel gives the
 * scalar chain's bits; the probabilities and context stay within 1e-5 of the
 * double-precision reference. */
START_TEST(long_causal_attention_gives_the_same_bits_on_every_kernel_and_a_query_at_a_time) {
    static const char *const kernels[] = {"avx512", "avx2", "neon", "scalar"};
    const int n = 203, dh = 24;
    const size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *ref = malloc(sizeof(float) * n * n), *cref = malloc(sizeof(float) * sz);
    float *p = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * sz), *qt = malloc(sizeof(float) * dh);
    float *row = malloc(sizeof(float) * n), *crow = malloc(sizeof(float) * dh);
    float *pn = malloc(sizeof(float) * n * n), *cn = malloc(sizeof(float) * sz);
    float *scratch = malloc(sizeof(float) * kern_attention_scratch(n, n, dh));
    ck_assert(q && k && v && ref && cref && p && c && qt && row && crow && pn && cn && scratch);
    fill(q, sz, 81, 3), fill(k, sz, 82, 3), fill(v, sz, 83, 1);
    /* the last: a bidirectional window (an encoder's local attention), blocks of rows whose keys
     * start and end mid-chain */
    const AttnRule rules[] = {{0.2f, 1, 0, 0, 0, 0, 0, NULL, NULL}, {0.2f, 1, 45, 0, 0, 0, 0, NULL, NULL}, {0.2f, 1, 70, 6.0f, 0, 0, 0, NULL, NULL}, {0.2f, 0, 0, 0, 0, 0, 0, NULL, NULL},
                              {0.2f, 0, 33, 0, 1, 0, 0, NULL, NULL}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        ck_assert_int_eq(gemm_force_kernel("scalar"), 0);
        kern_attention(ref, cref, q, k, v, n, dh, &rules[r], scratch);
        kern_attention_naive(pn, cn, q, k, v, n, dh, &rules[r]);
        ck_assert_float_lt(max_abs_diff(ref, pn, (size_t)n * n), 1e-5f);
        ck_assert_float_lt(max_abs_diff(cref, cn, sz), 1e-5f);
        int ran = 0;
        for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
            if (gemm_force_kernel(kernels[kn]) != 0) continue;
            ran++;
            memset(p, 0xff, sizeof(float) * n * n), memset(c, 0xff, sizeof(float) * sz);
            kern_attention(p, c, q, k, v, n, dh, &rules[r], scratch);
            ck_assert_msg(!memcmp(p, ref, sizeof(float) * n * n) && !memcmp(c, cref, sizeof(float) * sz),
                          "%s, rule %zu: differs from the scalar chain by %g / %g", kernels[kn], r,
                          max_abs_diff(p, ref, (size_t)n * n), max_abs_diff(c, cref, sz));
            if (!rules[r].causal) continue;
            /* a query at a time, its keys the first i + 1 columns of k and v */
            for (int i = 0; i < n; i += 17) {
                for (int d = 0; d < dh; d++) qt[d] = q[(size_t)d * n + i];
                kern_attention_kv(row, n, crow, qt, 1, k, v, n, i + 1, dh, &rules[r], scratch);
                ck_assert_msg(!memcmp(row, ref + (size_t)i * n, sizeof(float) * n), "%s, rule %zu: query %d alone",
                              kernels[kn], r, i);
                for (int d = 0; d < dh; d++)
                    ck_assert_msg(!memcmp(&crow[d], &cref[(size_t)d * n + i], sizeof(float)),
                                  "%s, rule %zu: query %d's context alone", kernels[kn], r, i);
            }
        }
        ck_assert_int_ge(ran, 2);
    }
    gemm_force_kernel(NULL);
    free(q), free(k), free(v), free(ref), free(cref), free(p), free(c), free(qt), free(row), free(crow), free(pn),
        free(cn), free(scratch);
}
END_TEST

/* Attention sinks (gpt-oss): a logit per head that joins each row's softmax
 * with no key. The kernels' rows, context and each row's sink share against
 * the double-precision reference (causal, a sliding window, a sink above and
 * below the scores); rows and sink sum to 1; streamed rows (heads not kept)
 * give the same bits and shares. */
typedef struct {
    float *into;
    int n;
} SinkRows;

static void keep_sink_rows(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    SinkRows *c = ctx;
    ck_assert_ptr_null(st); /* not asked for */
    for (int i = i0; i < i1; i++) memcpy(c->into + (size_t)i * c->n, probs + (size_t)(i - i0) * ldp, sizeof(float) * c->n);
}

START_TEST(attention_sinks_match_naive_reference) {
    const int n = 130, dh = 16;
    const size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *p = malloc(sizeof(float) * n * n), *pn = malloc(sizeof(float) * n * n), *ps = malloc(sizeof(float) * n * n);
    float *c = malloc(sizeof(float) * sz), *cn = malloc(sizeof(float) * sz), *cs = malloc(sizeof(float) * sz);
    float *s1 = malloc(sizeof(float) * n), *s2 = malloc(sizeof(float) * n), *s3 = malloc(sizeof(float) * n);
    float *block = malloc(sizeof(float) * kern_attention_rows() * n);
    float *scratch = malloc(sizeof(float) * kern_attention_scratch(n, n, dh));
    ck_assert(q && k && v && p && pn && ps && c && cn && cs && s1 && s2 && s3 && block && scratch);
    fill(q, sz, 91, 2), fill(k, sz, 92, 2), fill(v, sz, 93, 1);
    const float sinks[] = {-4.0f, 0.7f, 12.0f};
    for (size_t si = 0; si < sizeof sinks / sizeof sinks[0]; si++)
        for (int win = 0; win <= 20; win += 20) {
            AttnRule r = {.scale = 0.3f, .causal = 1, .window = win, .has_sink = 1, .sink = sinks[si], .sink_out = s1};
            kern_attention(p, c, q, k, v, n, dh, &r, scratch);
            r.sink_out = s2;
            kern_attention_naive(pn, cn, q, k, v, n, dh, &r);
            ck_assert_float_lt(max_abs_diff(p, pn, (size_t)n * n), 1e-5f);
            ck_assert_float_lt(max_abs_diff(c, cn, sz), 1e-5f);
            ck_assert_float_lt(max_abs_diff(s1, s2, (size_t)n), 1e-6f);
            double lo = 1, hi = 0;
            for (int i = 0; i < n; i++) {
                double sum = s1[i];
                for (int j = 0; j < n; j++) sum += p[(size_t)i * n + j];
                ck_assert_msg(fabs(sum - 1) < 1e-5, "sink %g window %d row %d: rows and sink sum to %g", sinks[si], win, i, sum);
                lo = fmin(lo, s1[i]), hi = fmax(hi, s1[i]);
            }
            /* the sinks chosen take little, some and most of the rows */
            ck_assert_msg(si != 0 || hi < 0.2, "sink -4: share up to %g", hi);
            ck_assert_msg(si != 2 || lo > 0.5, "sink 12: share down to %g", lo);
            SinkRows keep = {ps, n};
            r.sink_out = s3;
            kern_attention_kv_rows(block, n, cs, q, n, k, v, n, n, dh, &r, scratch, keep_sink_rows, &keep, 0);
            ck_assert(!memcmp(ps, p, sizeof(float) * n * n) && !memcmp(cs, c, sizeof(float) * sz) &&
                      !memcmp(s3, s1, sizeof(float) * n));
        }
    free(q), free(k), free(v), free(p), free(pn), free(ps), free(c), free(cn), free(cs), free(s1), free(s2), free(s3),
        free(block), free(scratch);
}
END_TEST

/* gpt-oss's clamped SwiGLU against the double reference, across the clamps. */
START_TEST(clamped_swiglu_matches_naive_reference) {
    enum { N = 1001 };
    static float g[N], u[N], g2[N];
    for (int i = 0; i < N; i++) g[i] = g2[i] = -20.0f + 40.0f * i / (N - 1), u[i] = 15.0f - 30.0f * ((i * 37) % N) / (N - 1);
    kern_swiglu_clamped(g, u, N, 1.702f, 7.0f);
    kern_swiglu_clamped_naive(g2, u, N, 1.702f, 7.0f);
    for (int i = 0; i < N; i++) ck_assert_msg(fabsf(g[i] - g2[i]) <= 1e-5f * fmaxf(1.0f, fabsf(g2[i])), "%d: %g vs %g", i, g[i], g2[i]);
    /* the clamps: gate 20 and up 15 act as 7 and 7: (7 + 1) * 7 * sigmoid(1.702 * 7) */
    const double top = 8.0 * 7.0 / (1.0 + exp(-1.702 * 7.0));
    float a = 20.0f, b = 15.0f;
    kern_swiglu_clamped_naive(&a, &b, 1, 1.702f, 7.0f);
    ck_assert_double_eq_tol(a, top, 1e-5);
}
END_TEST

/* x ln x for entropies: within a few ulp of the double-precision reference
 * from 1e-30 (below: 0) to 1, subnormals and zeros included. */
START_TEST(xlogx_matches_naive_reference) {
    enum { N = 4099 };
    static float x[N], got[N], want[N];
    for (int j = 0; j < N; j++) x[j] = (float)pow(10.0, -31.0 + 31.0 * j / (N - 5));
    x[N - 4] = 0, x[N - 3] = 1e-40f, x[N - 2] = 1.0f, x[N - 1] = 0.5f;
    kern_xlogx(got, x, N);
    kern_xlogx_naive(want, x, N);
    double worst = 0;
    for (int j = 0; j < N; j++) {
        ck_assert_msg(isfinite(got[j]), "x = %g gives %g", x[j], got[j]);
        double rel = fabs((double)got[j] - want[j]) / fmax(fabs(want[j]), 1e-37);
        worst = fmax(worst, rel);
    }
    ck_assert_msg(worst < 5e-7, "x ln x is %g off (relative)", worst);
    ck_assert(got[N - 4] == 0 && got[N - 2] == 0);          /* 0 ln 0 and 1 ln 1 */
    ck_assert(fabsf(got[N - 3]) < 7e-28f && got[N - 3] <= 0); /* a subnormal's term: negligible, finite */
}
END_TEST

/* kern_row_sums written out key by key: key j's terms into lane (j - lo) % 8,
 * the lanes added 0 to 7; the vectorized clones must give these bits. */
static void row_sums_chain(const float *p, int lo, int hi, int i, const int *ids, double *out) {
    double ent[8] = {0}, dist[8] = {0}, dup[8] = {0};
    for (int j = lo; j < hi; j++) {
        const int k = (j - lo) % 8;
        const float x = p[j] > 0 ? p[j] : 0.0f;
        float xl;
        kern_xlogx(&xl, &x, 1);
        ent[k] -= (double)xl;
        dist[k] += (double)x * (double)(i > j ? i - j : j - i);
        dup[k] += ids && j < i && ids[j] == ids[i] ? (double)x : 0.0;
    }
    out[0] = out[1] = out[2] = 0;
    for (int k = 0; k < 8; k++) out[0] += ent[k], out[1] += dist[k], out[2] += dup[k];
}

/* A row's telemetry sums: the fixed-lane chain's bits exactly, and within 1e-6
 * of the double-precision reference; bidirectional, causal and windowed key
 * ranges, zeros, repeated ids, ranges not a multiple of the lanes or chunks. */
START_TEST(row_sums_match_the_chain_bit_for_bit_and_the_naive_reference) {
    enum { N = 1100 };
    static float p[N];
    static int ids[N];
    unsigned s = 12345;
    for (int trial = 0; trial < 60; trial++) {
        const int n = 1 + (int)((unsigned)trial * 97u % N);
        for (int j = 0; j < n; j++) {
            s = s * 1103515245u + 12345u;
            ids[j] = (int)(s >> 16) % (trial % 3 ? 7 : 500);
            p[j] = (s >> 8) % 5 == 0 ? 0.0f : (float)((s >> 9) % 10000) / 10000.0f;
        }
        double tot = 0;
        for (int j = 0; j < n; j++) tot += p[j];
        for (int j = 0; j < n; j++) p[j] = tot > 0 ? (float)(p[j] / tot) : 0.0f;
        for (int v = 0; v < 4; v++) {
            const int i = (int)((unsigned)(trial * 31 + v * 17) % (unsigned)n);
            int lo = 0, hi = n; /* bidirectional */
            if (v == 1) hi = i + 1;                                       /* causal */
            if (v == 2) lo = i - 40 > 0 ? i - 40 : 0, hi = i + 1;         /* sliding window */
            if (v == 3) lo = i - 300 > 0 ? i - 300 : 0, hi = i + 301 < n ? i + 301 : n;
            const int *id = trial % 4 == 3 ? NULL : ids;
            double got[3], chain[3], want[3];
            kern_row_sums(p, lo, hi, i, id, got);
            row_sums_chain(p, lo, hi, i, id, chain);
            kern_row_sums_naive(p, lo, hi, i, id, want);
            for (int q = 0; q < 3; q++) {
                ck_assert_msg(memcmp(&got[q], &chain[q], sizeof got[q]) == 0, "trial %d v %d sum %d: %.17g vs chain %.17g",
                              trial, v, q, got[q], chain[q]);
                ck_assert_msg(fabs(got[q] - want[q]) <= 1e-6 * fmax(1.0, fabs(want[q])), "trial %d v %d sum %d: %.17g vs %.17g",
                              trial, v, q, got[q], want[q]);
            }
        }
    }
}
END_TEST

/* The first key above a threshold, or n: every position of the blocks. */
START_TEST(first_above_finds_the_first_key_over_the_threshold) {
    enum { N = 300 };
    static float x[N];
    for (int n = 0; n <= N; n += 37)
        for (int at = 0; at <= n; at++) {
            for (int j = 0; j < n; j++) x[j] = 0.25f;
            if (at < n) x[at] = 0.5f;
            if (at + 1 < n) x[at + 1] = 0.75f;
            ck_assert_int_eq(kern_first_above(x, n, 0.25f), at);
            ck_assert_int_eq(kern_first_above(x, n, 0.5f), at + 1 < n ? at + 1 : n);
            ck_assert_int_eq(kern_first_above(x, n, 1.0f), n);
        }
}
END_TEST

/* The k-th largest block maximum: by sorting the maxima of the blocks. */
static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

START_TEST(kth_block_max_is_the_kth_largest_of_the_block_maxima) {
    enum { N = 3000 };
    static float x[N], mx[N / KERN_KTH_BLOCK + 1];
    unsigned s = 99;
    for (int j = 0; j < N; j++) s = s * 1103515245u + 12345u, x[j] = (s >> 8) % 7 == 0 ? 0.0f : (float)((s >> 9) % 1000);
    static const int ks[] = {0, 1, 2, 8, 64, 65};
    for (int n = 1; n <= N; n += 211)
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            const int k = ks[t], B = KERN_KTH_BLOCK, nb = (n + B - 1) / B;
            for (int b = 0; b < nb; b++) {
                mx[b] = x[b * B];
                for (int j = b * B; j < n && j < b * B + B; j++) mx[b] = fmaxf(mx[b], x[j]);
            }
            qsort(mx, (size_t)nb, sizeof *mx, cmp_desc);
            const float want = k >= 1 && k <= KERN_KTH_MAX && k <= nb ? mx[k - 1] : 0;
            ck_assert_msg(kern_kth_block_max(x, n, k) == want, "n %d k %d", n, k);
        }
}
END_TEST

/* Rows streamed a block at a time (heads whose matrix is not kept) are the
 * whole matrix's rows and give its context, bit for bit, on every kernel;
 * asked for, each row's moments (entropy, mean distance) are its definitions'
 * within float rounding of the weights, and the same bits on every kernel. */
typedef struct {
    float *into;  /* (n, n) */
    double *mom;  /* (n, KERN_MOM_N) or NULL: no KernRowStats expected */
    int n, calls, last_i1;
    const AttnRule *rule;
    int nq;                         /* the call's queries (the last nq of the ldp keys) */
    long bmax_blocks, bmax_exact;   /* blocks seen, and those whose weight was the heaviest key's */
} Collect;

static void collect_rows(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    Collect *c = ctx;
    ck_assert_int_eq(i0, c->last_i1); /* in order, none skipped */
    ck_assert_int_le(i1 - i0, kern_attention_rows());
    ck_assert(!st == !c->mom);
    for (int i = i0; i < i1; i++) memcpy(c->into + (size_t)i * c->n, probs + (size_t)(i - i0) * ldp, sizeof(float) * c->n);
    if (!st) {
        c->calls++, c->last_i1 = i1;
        return;
    }
    memcpy(c->mom + (size_t)i0 * KERN_MOM_N, st->mom, sizeof(double) * KERN_MOM_N * (size_t)(i1 - i0));
    /* each block's weight is its heaviest key's, and no key beats the bound */
    ck_assert_ptr_nonnull(st->bmax);
    for (int i = i0; i < i1; i++) {
        int lo, hi;
        kern_attention_keys(c->rule, ldp, ldp - c->nq + i, &lo, &hi);
        const float *p = probs + (size_t)(i - i0) * ldp, *bw = st->bmax + (size_t)(i - i0) * st->bmax_ld;
        for (int b = 0; lo + b * KERN_KTH_BLOCK < hi; b++) {
            float m = 0;
            for (int j = lo + b * KERN_KTH_BLOCK; j < hi && j < lo + (b + 1) * KERN_KTH_BLOCK; j++) {
                ck_assert_msg(p[j] <= KERN_BMAX_BOUND(bw[b]), "row %d key %d: %g over its block's %g", i, j, p[j], bw[b]);
                m = fmaxf(m, p[j]);
            }
            c->bmax_exact += m == bw[b], c->bmax_blocks++;
        }
    }
    c->calls++, c->last_i1 = i1;
}

/* The largest difference of rows' moments from kern_row_sums_naive over the
 * keys each row sees (distance relative to the row's length). */
static double moments_error(const double *mom, const float *rows, int n, const AttnRule *rule) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        int lo, hi;
        kern_attention_keys(rule, n, i, &lo, &hi);
        double want[3];
        kern_row_sums_naive(rows + (size_t)i * n, lo, hi, i, NULL, want);
        worst = fmax(worst, fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_ENTROPY] - want[0]));
        worst = fmax(worst, fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_DISTANCE] - want[1]) / n);
        double total = 0, rest = 0; /* the weights as rounded, in double; without key 0 and key i */
        for (int j = lo; j < hi; j++) total += rows[(size_t)i * n + j], rest += j == 0 || j == i ? 0 : rows[(size_t)i * n + j];
        ck_assert_msg(fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_REST] - rest) <= 1e-12 * rest + 1e-300, "row %d: rest %.17g, not %.17g",
                      i, mom[(size_t)i * KERN_MOM_N + KERN_MOM_REST], rest);
        ck_assert_msg(fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_TOTAL] - total) < 1e-12, "row %d: total %.17g, not %.17g", i,
                      mom[(size_t)i * KERN_MOM_N + KERN_MOM_TOTAL], total);
    }
    return worst;
}

/* Under a heavy sink the rows' weight beside key 0 and the query's own key
 * is a remainder of 1e-12 or less: the moments carry it as a sum of its own,
 * not as the total less the two (which a double cannot hold to 1e-16 of 1). */
typedef struct {
    double mom[KERN_MOM_N];
    float row[64];
} OneRow;

static void keep_one_row(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    OneRow *o = ctx;
    ck_assert_int_eq(i1 - i0, 1);
    ck_assert_int_le(ldp, 64);
    memcpy(o->mom, st->mom, sizeof o->mom);
    memcpy(o->row, probs, sizeof(float) * (size_t)ldp);
}

START_TEST(row_remainder_beside_a_heavy_sink_is_kept) {
    enum { NK = 50 };
    float q[1] = {1.0f}, k[NK], block[64 * 48];
    for (int j = 0; j < NK; j++) k[j] = j == 0 ? 30.0f : 0.0f;
    const AttnRule rule = {.scale = 1.0f, .causal = 1};
    OneRow o;
    kern_attention_kv_rows(block, NK, NULL, q, 1, k, NULL, NK, NK, 1, &rule, NULL, keep_one_row, &o, 1);
    double rest = 0;
    for (int j = 1; j < NK - 1; j++) rest += o.row[j];
    ck_assert_msg(rest > 0 && rest < 1e-10, "the remainder is %g", rest);
    ck_assert_msg(fabs(o.mom[KERN_MOM_REST] - rest) <= 1e-12 * rest, "rest %.17g, not %.17g", o.mom[KERN_MOM_REST], rest);
    const double cancelled = o.mom[KERN_MOM_TOTAL] - o.row[0] - o.row[NK - 1];
    fprintf(stderr, "INFO %s: remainder %.3g kept within %.1e (the total less the two keys: %.1e off)\n", __func__,
            rest, fabs(o.mom[KERN_MOM_REST] - rest) / rest, fabs(cancelled - rest) / rest);
}
END_TEST

START_TEST(streamed_rows_are_the_whole_matrix_bit_for_bit) {
    static const char *const kernels[] = {"avx512", "avx2", "neon", "scalar"};
    const int n = 203, dh = 24;
    const size_t sz = (size_t)n * dh;
    float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
    float *ref = malloc(sizeof(float) * n * n), *cref = malloc(sizeof(float) * sz), *got = malloc(sizeof(float) * n * n);
    float *c = malloc(sizeof(float) * sz), *block = malloc(sizeof(float) * kern_attention_rows() * n);
    float *scratch = malloc(sizeof(float) * kern_attention_scratch(n, n, dh));
    double *mom = malloc(sizeof(double) * KERN_MOM_N * n), *mom0 = malloc(sizeof(double) * KERN_MOM_N * n);
    ck_assert(q && k && v && ref && cref && got && c && block && scratch && mom && mom0);
    fill(q, sz, 91, 3), fill(k, sz, 92, 3), fill(v, sz, 93, 1);
    const AttnRule rules[] = {{0.2f, 1, 0, 0, 0, 0, 0, NULL, NULL},  {0.2f, 1, 45, 0, 0, 0, 0, NULL, NULL}, {0.2f, 1, 70, 6.0f, 0, 0, 0, NULL, NULL},
                              {0.2f, 0, 0, 0, 0, 0, 0, NULL, NULL},  {0.2f, 0, 0, 9.0f, 0, 0, 0, NULL, NULL}, {0.2f, 0, 45, 0, 1, 0, 0, NULL, NULL},
                              {0.2f, 1, 0, 0, 0, 1, 1.5f, NULL, NULL}};
    double worst = 0;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        int ran = 0;
        for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
            if (gemm_force_kernel(kernels[kn]) != 0) continue;
            ran++;
            kern_attention(ref, cref, q, k, v, n, dh, &rules[r], scratch);
            for (int moments = 0; moments < 2; moments++) {
                Collect col = {got, moments ? mom : NULL, n, 0, 0, &rules[r], n, 0, 0};
                memset(got, 0xff, sizeof(float) * n * n), memset(c, 0xff, sizeof(float) * sz);
                kern_attention_kv_rows(block, n, c, q, n, k, v, n, n, dh, &rules[r], scratch, collect_rows, &col, moments);
                ck_assert_int_eq(col.last_i1, n);
                /* with moments a row at a time, as each is made */
                ck_assert_int_eq(col.calls, moments ? n : (n + kern_attention_rows() - 1) / kern_attention_rows());
                ck_assert_int_eq(col.bmax_exact, col.bmax_blocks);
                ck_assert_msg(!memcmp(got, ref, sizeof(float) * n * n), "%s, rule %zu, moments %d: streamed rows differ by %g",
                              kernels[kn], r, moments, max_abs_diff(got, ref, (size_t)n * n));
                ck_assert_msg(!memcmp(c, cref, sizeof(float) * sz), "%s, rule %zu: streamed context differs by %g",
                              kernels[kn], r, max_abs_diff(c, cref, sz));
            }
            const double err = moments_error(mom, ref, n, &rules[r]);
            ck_assert_msg(err < 5e-7, "%s, rule %zu: moments differ from the definitions by %g", kernels[kn], r, err);
            worst = fmax(worst, err);
            if (ran == 1) memcpy(mom0, mom, sizeof(double) * KERN_MOM_N * n);
            else ck_assert_msg(!memcmp(mom, mom0, sizeof(double) * KERN_MOM_N * n), "%s, rule %zu: moments differ from %s's",
                               kernels[kn], r, kernels[0]);
            /* without an observer or a context: nothing to check but that it runs */
            kern_attention_kv_rows(block, n, NULL, q, n, k, NULL, n, n, dh, &rules[r], NULL, NULL, NULL, 1);
        }
        ck_assert_int_ge(ran, 2);
    }
    fprintf(stderr, "INFO %s: row moments within %.1e of their definitions\n", __func__, worst);
    gemm_force_kernel(NULL);
    free(q), free(k), free(v), free(ref), free(cref), free(got), free(c), free(block), free(scratch), free(mom), free(mom0);
}
END_TEST

/* Decoding against a cache as the engine holds it (keys a column per
 * position, values a row per position, both wider than what is filled): one
 * new query, or a few, read them in place (kern_attention_kv_v and
 * kern_attention_kv_rows_v) and give the full pass's rows, context, sink
 * shares and row moments bit for bit on every kernel, and the naive
 * reference's within 1e-5. Key counts not a multiple of the chain (32), the
 * row block (48) or the key tile (256); a window, a soft cap and a sink. */
START_TEST(decoding_reads_the_cache_in_place_with_the_full_pass_bits) {
    static const char *const kernels[] = {"avx512", "avx2", "neon", "scalar"};
    const int shapes[][2] = {{203, 64}, {301, 24}}; /* (n, dh) */
    const AttnRule rules[] = {{.scale = 0.2f, .causal = 1},
                              {.scale = 0.2f, .causal = 1, .window = 45},
                              {.scale = 0.2f, .causal = 1, .window = 300, .softcap = 6.0f},
                              {.scale = 0.2f, .causal = 1, .has_sink = 1, .sink = 1.5f}};
    double worst = 0;
    long rows_checked = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const int n = shapes[sh][0], dh = shapes[sh][1], ld = n + 9, NQ = 3;
        const size_t sz = (size_t)n * dh;
        float *q = malloc(sizeof(float) * sz), *k = malloc(sizeof(float) * sz), *v = malloc(sizeof(float) * sz);
        float *kc = malloc(sizeof(float) * dh * ld), *vr = malloc(sizeof(float) * ld * dh); /* (dh, ld), (ld, dh) */
        float *ref = malloc(sizeof(float) * n * n), *cref = malloc(sizeof(float) * sz), *sref = malloc(sizeof(float) * n);
        float *sfull = malloc(sizeof(float) * n), *full = malloc(sizeof(float) * n * n);
        double *mref = malloc(sizeof(double) * KERN_MOM_N * n), *mom = malloc(sizeof(double) * KERN_MOM_N * NQ);
        float *qt = malloc(sizeof(float) * dh * NQ), *p = malloc(sizeof(float) * NQ * ld), *c = malloc(sizeof(float) * dh * NQ);
        float *got = malloc(sizeof(float) * NQ * ld), *c2 = malloc(sizeof(float) * dh * NQ), *s1 = malloc(sizeof(float) * NQ);
        float *pn = malloc(sizeof(float) * NQ * ld), *cn = malloc(sizeof(float) * dh * NQ);
        float *block = malloc(sizeof(float) * kern_attention_rows() * n);
        float *scratch = malloc(sizeof(float) * kern_attention_scratch(n, n, dh));
        ck_assert(q && k && v && kc && vr && ref && cref && sref && sfull && full && mref && mom && qt && p && c && got &&
                  c2 && s1 && pn && cn && block && scratch);
        fill(q, sz, 61 + (int)sh, 3), fill(k, sz, 62 + (int)sh, 3), fill(v, sz, 63 + (int)sh, 1);
        fill(kc, (size_t)dh * ld, 64, 9), fill(vr, (size_t)ld * dh, 65, 9); /* past n: never read */
        for (int d = 0; d < dh; d++)
            for (int j = 0; j < n; j++) kc[(size_t)d * ld + j] = k[(size_t)d * n + j], vr[(size_t)j * dh + d] = v[(size_t)d * n + j];
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
            int ran = 0;
            for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
                if (gemm_force_kernel(kernels[kn]) != 0) continue;
                ran++;
                /* the reference: one pass over all n positions through gemm_rows (and its rows' moments, streamed) */
                AttnRule rule = rules[r];
                rule.sink_out = sref;
                kern_attention(ref, cref, q, k, v, n, dh, &rule, scratch);
                rule.sink_out = sfull;
                Collect cf = {full, mref, n, 0, 0, &rule, n, 0, 0};
                kern_attention_kv_rows(block, n, NULL, q, n, k, NULL, n, n, dh, &rule, NULL, collect_rows, &cf, 1);
                ck_assert(!memcmp(full, ref, sizeof(float) * n * n));
                const int at[] = {0, 2, 32, 33, 48, 100, 255, 256, 257, n - 1};
                for (size_t a = 0; a < sizeof at / sizeof at[0]; a++)
                    for (int nq = 1; nq <= NQ; nq += 2) {
                        const int last = at[a], nk = last + 1, first = nk - nq;
                        if (last >= n || first < 0) continue;
                        for (int d = 0; d < dh; d++)
                            for (int i = 0; i < nq; i++) qt[(size_t)d * nq + i] = q[(size_t)d * n + first + i];
                        memset(p, 0xff, sizeof(float) * nq * ld), memset(c, 0xff, sizeof(float) * dh * nq);
                        rule.sink_out = s1;
                        kern_attention_kv_v(p, ld, c, qt, nq, kc, ld, vr, dh, nk, dh, &rule, scratch);
                        for (int moments = 0; moments < 2; moments++) {
                            Collect col = {got, moments ? mom : NULL, ld, 0, 0, &rule, nq, 0, 0};
                            memset(got, 0xff, sizeof(float) * nq * ld), memset(c2, 0xff, sizeof(float) * dh * nq);
                            kern_attention_kv_rows_v(block, nk, c2, qt, nq, kc, ld, vr, dh, nk, dh, &rule, scratch,
                                                     collect_rows, &col, moments);
                            ck_assert_int_eq(col.last_i1, nq);
                            ck_assert_int_eq(col.bmax_exact, col.bmax_blocks);
                            for (int i = 0; i < nq; i++)
                                ck_assert_msg(!memcmp(got + (size_t)i * ld, ref + (size_t)(first + i) * n, sizeof(float) * nk),
                                              "%s, n %d, rule %zu, %d queries at %d: streamed row %d differs by %g", kernels[kn],
                                              n, r, nq, last, i, max_abs_diff(got + (size_t)i * ld, ref + (size_t)(first + i) * n, (size_t)nk));
                            ck_assert_msg(!memcmp(c2, c, sizeof(float) * dh * nq), "%s, n %d, rule %zu, %d queries at %d: streamed context",
                                          kernels[kn], n, r, nq, last);
                            if (moments)
                                ck_assert_msg(!memcmp(mom, mref + (size_t)first * KERN_MOM_N, sizeof(double) * KERN_MOM_N * nq),
                                              "%s, n %d, rule %zu, %d queries at %d: row moments differ from the full pass's",
                                              kernels[kn], n, r, nq, last);
                        }
                        for (int i = 0; i < nq; i++) {
                            const float *pr = p + (size_t)i * ld, *fr = ref + (size_t)(first + i) * n;
                            ck_assert_msg(!memcmp(pr, fr, sizeof(float) * nk), "%s, n %d, rule %zu, %d queries at %d: row %d differs by %g",
                                          kernels[kn], n, r, nq, last, i, max_abs_diff(pr, fr, (size_t)nk));
                            for (int j = nk; j < ld; j++) ck_assert_float_eq(pr[j], 0.0f);
                            for (int d = 0; d < dh; d++)
                                ck_assert_msg(!memcmp(&c[(size_t)d * nq + i], &cref[(size_t)d * n + first + i], sizeof(float)),
                                              "%s, n %d, rule %zu, %d queries at %d: context %d of row %d is %.9g, not %.9g", kernels[kn],
                                              n, r, nq, last, d, i, c[(size_t)d * nq + i], cref[(size_t)d * n + first + i]);
                            if (rule.has_sink)
                                ck_assert_msg(!memcmp(&s1[i], &sref[first + i], sizeof(float)), "%s, rule %zu: sink share of row %d",
                                              kernels[kn], r, first + i);
                            rows_checked++;
                        }
                        if (ran == 1) {
                            rule.sink_out = NULL;
                            kern_attention_kv_v_naive(pn, ld, cn, qt, nq, kc, ld, vr, dh, nk, dh, &rule);
                            const double e = fmax(max_abs_diff(pn, p, (size_t)nq * ld), max_abs_diff(cn, c, (size_t)dh * nq));
                            ck_assert_msg(e < 1e-5, "n %d, rule %zu, %d queries at %d: %g from the naive reference", n, r, nq, last, e);
                            worst = fmax(worst, e);
                        }
                    }
            }
            ck_assert_int_ge(ran, 2);
        }
        free(q), free(k), free(v), free(kc), free(vr), free(ref), free(cref), free(sref), free(sfull), free(full), free(mref),
            free(mom), free(qt), free(p), free(c), free(got), free(c2), free(s1), free(pn), free(cn), free(block), free(scratch);
    }
    gemm_force_kernel(NULL);
    fprintf(stderr, "INFO %s: %ld rows the full pass's bits, within %.1e of the naive reference\n", __func__, rows_checked, worst);
}
END_TEST

/* Long rows (a few query rows against thousands of keys, as at the end of a
 * long causal input): the moments stay within float rounding of the weights. */
START_TEST(row_moments_of_long_rows_match_their_definitions) {
    const int nq = 3, nk = 9001, dh = 16;
    float *q = malloc(sizeof(float) * nq * dh), *k = malloc(sizeof(float) * (size_t)nk * dh);
    float *rows = malloc(sizeof(float) * (size_t)nq * nk), *block = malloc(sizeof(float) * kern_attention_rows() * nk);
    double *mom = malloc(sizeof(double) * KERN_MOM_N * nq);
    ck_assert(q && k && rows && block && mom);
    double worst = 0;
    for (int spread = 0; spread < 3; spread++) { /* flat, peaked, very peaked rows */
        fill(q, (size_t)nq * dh, 51 + spread, 1 + 3 * spread), fill(k, (size_t)nk * dh, 52 + spread, 1 + 2 * spread);
        const AttnRule rule = {.scale = 0.25f, .causal = 1};
        Collect col = {rows, mom, nk, 0, 0, &rule, nq, 0, 0};
        kern_attention_kv_rows(block, nk, NULL, q, nq, k, NULL, nk, nk, dh, &rule, NULL, collect_rows, &col, 1);
        ck_assert(col.bmax_blocks > 0 && col.bmax_exact == col.bmax_blocks);
        for (int i = 0; i < nq; i++) {
            const int pos = nk - nq + i;
            double want[3];
            kern_row_sums_naive(rows + (size_t)i * nk, 0, pos + 1, pos, NULL, want);
            worst = fmax(worst, fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_ENTROPY] - want[0]));
            worst = fmax(worst, fabs(mom[(size_t)i * KERN_MOM_N + KERN_MOM_DISTANCE] - want[1]) / nk);
        }
    }
    ck_assert_msg(worst < 5e-7, "long rows' moments differ from the definitions by %g", worst);
    fprintf(stderr, "INFO %s: %d keys, within %.1e\n", __func__, nk, worst);
    free(q), free(k), free(rows), free(block), free(mom);
}
END_TEST

/* Thumbnails: rows added one pass at a time equal the naive pooling, rows sum
 * to 1, and a thumbnail as large as the matrix is the matrix. */
START_TEST(pooled_attention_matches_naive_and_keeps_rows_summing_to_one) {
    const int sizes[][2] = {{37, 8}, {64, 64}, {5, 3}, {100, 7}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const int n = sizes[c][0], s = sizes[c][1], dh = 8;
        float *q = malloc(sizeof(float) * n * dh), *k = malloc(sizeof(float) * n * dh);
        float *p = malloc(sizeof(float) * n * n), *t1 = calloc((size_t)s * s, sizeof(float)),
              *t2 = calloc((size_t)s * s, sizeof(float));
        fill(q, (size_t)n * dh, 41, 2), fill(k, (size_t)n * dh, 42, 2);
        const AttnRule rule = {.scale = 0.35f, .causal = (int)(c & 1)};
        kern_attention(p, NULL, q, k, NULL, n, dh, &rule, ATTN_SCRATCH);
        /* two passes of rows, as a key/value-cached run adds them */
        kern_pool_attention(t1, s, p, n, 0, n / 3, n, n);
        kern_pool_attention(t1, s, p + (size_t)(n / 3) * n, n, n / 3, n - n / 3, n, n);
        kern_pool_attention_naive(t2, s, p, n, 0, n, n, n);
        ck_assert_float_lt(max_abs_diff(t1, t2, (size_t)s * s), 1e-6f);
        for (int i = 0; i < s; i++) {
            double sum = 0;
            for (int j = 0; j < s; j++) sum += t1[(size_t)i * s + j];
            ck_assert_msg(fabs(sum - 1.0) < 1e-5, "n %d s %d: row %d sums to %g", n, s, i, sum);
        }
        if (s == n) ck_assert_float_lt(max_abs_diff(t1, p, (size_t)n * n), 1e-7f);
        free(q), free(k), free(p), free(t1), free(t2);
    }
}
END_TEST

/* The rows a thread widens at a time fit the scratch for every product
 * narrower than the widest, and run from 256 (wide models) to 1,024. */
START_TEST(widened_blocks_fit_the_scratch) {
    const int widest[] = {1, 32, 576, 1536, 2048, 2049, 4096, 8191, 11008, 20000};
    for (size_t w = 0; w < sizeof widest / sizeof widest[0]; w++)
        for (int in = 1; in <= widest[w]; in++) {
            const int step = kern_widen_step(in);
            ck_assert_msg(step >= 256 && step <= 1024 && step % 16 == 0, "in %d: step %d", in, step);
            ck_assert_msg((size_t)step * (size_t)in <= kern_widen_floats(widest[w]), "in %d of %d: %d rows", in,
                          widest[w], step);
        }
    ck_assert_int_eq(kern_widen_step(576), 1024); /* a small model's whole part in one call */
    ck_assert_int_eq(kern_widen_step(11008), 256);
}
END_TEST

/* A quantized product wider than one widened block (its rows widened and
 * multiplied a block at a time) gives the bits of the same weights widened
 * whole and multiplied as F32 in one call. */
START_TEST(quantized_rows_past_one_widened_block_give_the_one_call_bits) {
    const int in = 8192, out = 300, n = 9; /* kern_widen_step(8192) = 256: blocks of 256 and 44 rows */
    ck_assert_int_lt(kern_widen_step(in), out);
    float *x = malloc(sizeof(float) * n * in), *xT = malloc(sizeof(float) * n * in);
    float *wide = malloc(sizeof(float) * out * in), *y1 = malloc(sizeof(float) * n * out);
    float *y2 = malloc(sizeof(float) * n * out), *scratch = malloc(sizeof(float) * kern_widen_floats(in));
    uint8_t *wq = malloc((size_t)out * in / 32 * 34);
    ck_assert(x && xT && wide && y1 && y2 && scratch && wq);
    fill(x, (size_t)n * in, 71, 1);
    unsigned seed = 72;
    for (size_t blk = 0; blk < (size_t)out * in / 32; blk++) { /* Q8_0: f16 scale, 32 int8 codes */
        uint16_t dh = st_f32_to_f16(0.01f + 0.001f * (float)(blk % 7));
        wq[blk * 34] = (uint8_t)dh, wq[blk * 34 + 1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) wq[blk * 34 + 2 + j] = (uint8_t)(int8_t)(frand(&seed) * 127);
    }
    Linear q = {.type = 8, .w = wq, .out = out, .in = in, .row_bytes = (size_t)in / 32 * 34, .name = "w"};
    ck_assert_int_eq(kern_widen_rows(wide, &q, 0, out), 0);
    Linear f32 = {.type = KERN_F32, .w = wide, .out = out, .in = in, .ld = in, .name = "w"};
    transpose(xT, x, n, in);
    ck_assert_int_eq(kern_linear_rows(y1, xT, &q, n, 0, out, -1, scratch), 0);
    ck_assert_int_eq(kern_linear_rows(y2, xT, &f32, n, 0, out, -1, scratch), 0);
    ck_assert_msg(!memcmp(y1, y2, sizeof(float) * n * out), "differs by %g", max_abs_diff(y1, y2, (size_t)n * out));
    free(x), free(xT), free(wide), free(y1), free(y2), free(scratch), free(wq);
}
END_TEST

/* BF16 rows whose length is not a multiple of 16 (the few-token kernel's tail). */
START_TEST(bf16_few_token_products_cover_a_row_tail) {
    const int in = 40, out = 9;
    float x[11 * 40], w[9 * 40], b[9], y1[11 * 9], y2[11 * 9], xT[11 * 40], yT[11 * 9];
    uint16_t wb[9 * 40];
    static float scratch[1024 * 40];
    ck_assert_uint_le(kern_widen_floats(40), sizeof scratch / sizeof scratch[0]);
    fill(x, sizeof x / sizeof x[0], 101, 1), fill(w, sizeof w / sizeof w[0], 102, 0.5f), fill(b, 9, 103, 1);
    for (int i = 0; i < in * out; i++) wb[i] = st_f32_to_bf16(w[i]);
    Linear lin = {.type = KERN_BF16, .w = wb, .b = b, .out = out, .in = in, .row_bytes = (size_t)in * 2, .name = "w"};
    for (int n = 1; n <= 11; n++) {
        kern_linear_naive(y1, x, &lin, n);
        transpose(xT, x, n, in);
        ck_assert_int_eq(kern_linear_rows(yT, xT, &lin, n, 0, out, -1, scratch), 0);
        transpose(y2, yT, out, n);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-5f);
    }
}
END_TEST

START_TEST(rms_residual_step_matches_naive_rmsnorm) {
    int n = 37, dim = 48;
    size_t sz = (size_t)n * dim;
    float *x = malloc(sizeof(float) * sz), *ref = malloc(sizeof(float) * sz), *dT = malloc(sizeof(float) * sz);
    float *d = malloc(sizeof(float) * sz), g[48];
    fill(x, sz, 81, 3), fill(g, 48, 82, 1);
    memcpy(ref, x, sizeof(float) * sz);
    Norm nm = {g, NULL, 1, 1e-6f};
    kern_norm_naive(ref, &nm, n, dim);
    kern_residual(x, NULL, NULL, dT, &nm, n, dim, 0, n);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    /* RMSNorm keeps the mean: a row of constants c maps to g * sign(c) */
    for (int j = 0; j < dim; j++) x[j] = 2.5f;
    kern_residual(x, NULL, NULL, dT, &nm, n, dim, 0, 1);
    for (int j = 0; j < dim; j++) ck_assert_float_eq_tol(dT[(size_t)j * n], g[j], 1e-5f);
    /* and the column version, for per-head q/k norms */
    fill(x, sz, 83, 2);
    transpose(dT, x, n, dim);
    memcpy(ref, x, sizeof(float) * sz);
    kern_norm_naive(ref, &nm, n, dim);
    kern_rmsnorm_cols(dT, g, dim, n, 1e-6f);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    free(x), free(ref), free(dT), free(d);
}
END_TEST

START_TEST(rotary_positions_match_naive_reference_and_keep_norms) {
    int n = 40, dh = 16, half = 8;
    float *x = malloc(sizeof(float) * n * dh), *a = malloc(sizeof(float) * n * dh), *b = malloc(sizeof(float) * n * dh);
    float inv[8], *cs = malloc(sizeof(float) * half * n), *sn = malloc(sizeof(float) * half * n);
    int pos[40];
    fill(x, (size_t)n * dh, 91, 2);
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(10000.0f, (float)(2 * i) / dh);
    for (int j = 0; j < n; j++) pos[j] = j;
    for (int i = 0; i < half; i++)
        for (int j = 0; j < n; j++) cs[i * n + j] = cosf(j * inv[i]), sn[i * n + j] = sinf(j * inv[i]);
    memcpy(a, x, sizeof(float) * n * dh), memcpy(b, x, sizeof(float) * n * dh);
    kern_rope_naive(a, inv, pos, dh, n);
    kern_rope(b, cs, sn, dh, n);
    ck_assert_float_lt(max_abs_diff(a, b, (size_t)n * dh), 1e-5f);
    /* position 0 is the identity; later positions rotate but keep each pair's length */
    for (int d = 0; d < dh; d++) ck_assert_float_eq(b[d * n], x[d * n]);
    for (int i = 0; i < half; i++)
        for (int j = 1; j < n; j++) {
            float r0 = hypotf(x[i * n + j], x[(i + half) * n + j]), r1 = hypotf(b[i * n + j], b[(i + half) * n + j]);
            ck_assert_float_eq_tol(r0, r1, 1e-5f);
        }
    ck_assert_float_gt(max_abs_diff(x, b, (size_t)n * dh), 1e-2f);
    free(x), free(a), free(b), free(cs), free(sn);
}
END_TEST

START_TEST(gated_mlp_combination_is_silu_of_gate_times_up) {
    float g[64], u[64], ref[64];
    fill(g, 64, 95, 6), fill(u, 64, 96, 2);
    for (int i = 0; i < 64; i++) ref[i] = (float)(g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
    kern_glu(g, u, 64, ACT_SILU);
    ck_assert_float_lt(max_abs_diff(ref, g, 64), 1e-5f);
}
END_TEST

/* Value norms (--measure norm) the way the forward pass makes them: W_O
 * widened whole, each kept head's Gram matrix, then the norms of blocks of
 * `block` tokens. */
static void value_norms_by_gram(float *norms, const Linear *o, const float *vT, int n, const int *heads, int nh,
                                int group, int dh, int block) {
    _Alignas(64) static float panel[GEMM_SCRATCH];
    float *wide = malloc(sizeof(float) * (size_t)o->out * o->in), *G = malloc(sizeof(float) * (size_t)dh * dh);
    float *u = malloc(sizeof(float) * (size_t)dh * block);
    ck_assert(wide && G && u);
    ck_assert_int_eq(kern_widen_rows(wide, o, 0, o->out), 0);
    for (int hi = 0; hi < nh; hi++) {
        kern_value_gram(G, wide, o->out, o->in, heads[hi], dh, panel);
        for (int a = 0; a < dh; a++) /* symmetric bit for bit: (a, b) and (b, a) are the same products */
            for (int c = 0; c < a; c++) ck_assert(!memcmp(&G[a * dh + c], &G[c * dh + a], sizeof *G));
        for (int j0 = 0; j0 < n; j0 += block)
            kern_value_norms_gram(norms + (size_t)hi * n + j0, G, vT + (size_t)(heads[hi] / group) * dh * n + j0,
                                  (size_t)n, n - j0 < block ? n - j0 : block, dh, u, panel);
    }
    free(wide), free(G), free(u);
}

/* Each head's value vectors through its own columns of W_O, a query head
 * reading its kv group's values (GQA), in every storage type the output
 * projection comes in (F32, GPT-2's transposed Conv1D, F16, BF16, Q8_0), and
 * an F32 W_O whose columns are nearly parallel (a Gram matrix far from
 * diagonal, where v^T G v cancels most): within tol (relative) of the
 * double-precision naive norms (the largest errors measured are printed), and
 * the same bits on every kernel the CPU has and however the tokens are split
 * into blocks (the forward pass splits them by threads). The naive norms are
 * also checked against a direct reading of the definition for F32 (no shared
 * helper). */
START_TEST(value_norms_match_naive_reference_on_every_kernel_and_weight_type) {
    static const char *const kernels[] = {"avx512", "avx2", "neon", "scalar"};
    const int NH = 4, NKV = 2, group = NH / NKV, dh = 32, in = NH * dh, out = 300, n = 37;
    const int heads[] = {0, 1, 3}, nh = 3;
    float *wf = malloc(sizeof(float) * out * in), *wt = malloc(sizeof(float) * out * in), *wc = malloc(sizeof(float) * out * in);
    float *vT = malloc(sizeof(float) * NKV * dh * n), *ref = malloc(sizeof(float) * nh * n),
          *got = malloc(sizeof(float) * nh * n), *first = malloc(sizeof(float) * 2 * nh * n);
    uint8_t *w16 = malloc((size_t)out * in * 2), *wb = malloc((size_t)out * in * 2), *wq = malloc((size_t)out * in / 32 * 34);
    ck_assert(wf && wt && wc && vT && ref && got && first && w16 && wb && wq);
    fill(wf, (size_t)out * in, 201, 0.3f), fill(vT, (size_t)NKV * dh * n, 202, 2);
    transpose(wt, wf, out, in); /* Conv1D: W^T (in, out) */
    fill(wc, (size_t)out * in, 203, 0.03f);
    for (int r = 0; r < out; r++) { /* every column ~ the same random column, plus a tenth of it in noise */
        float common;
        fill(&common, 1, 300 + (unsigned)r, 0.3f);
        for (int c = 0; c < in; c++) wc[(size_t)r * in + c] += common;
    }
    for (size_t i = 0; i < (size_t)out * in; i++) {
        uint16_t h = st_f32_to_f16(wf[i]), b = st_f32_to_bf16(wf[i]);
        w16[2 * i] = (uint8_t)h, w16[2 * i + 1] = (uint8_t)(h >> 8);
        wb[2 * i] = (uint8_t)b, wb[2 * i + 1] = (uint8_t)(b >> 8);
    }
    for (size_t blk = 0; blk < (size_t)out * in / 32; blk++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(wf[blk * 32 + j]));
        float d = amax / 127.0f;
        uint16_t dq = st_f32_to_f16(d);
        uint8_t *q = wq + blk * 34;
        q[0] = (uint8_t)dq, q[1] = (uint8_t)(dq >> 8);
        for (int j = 0; j < 32; j++) q[2 + j] = (uint8_t)(int8_t)lrintf(d ? wf[blk * 32 + j] / d : 0);
    }
    const Linear lins[] = {
        {.type = KERN_F32, .w = wf, .out = out, .in = in, .ld = in, .name = "f32"},
        {.type = KERN_F32, .w = wt, .out = out, .in = in, .ld = out, .conv1d = 1, .name = "conv1d"},
        {.type = KERN_F16, .w = w16, .out = out, .in = in, .row_bytes = (size_t)in * 2, .name = "f16"},
        {.type = KERN_BF16, .w = wb, .out = out, .in = in, .row_bytes = (size_t)in * 2, .name = "bf16"},
        {.type = 8, .w = wq, .out = out, .in = in, .row_bytes = (size_t)in / 32 * 34, .name = "q8_0"},
        {.type = KERN_F32, .w = wc, .out = out, .in = in, .ld = in, .name = "f32 near-parallel columns"}};
    /* relative bounds, a few times the largest errors measured (printed below): v^T G v sums terms far
     * larger than itself when the columns are nearly parallel, and its rounding grows with their ratio */
    const double tol[] = {1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 2e-5};
    /* the definition, for F32: || sum_d W[:, h dh + d] v[kv(h) dh + d][j] || */
    kern_value_norms_naive(ref, &lins[0], vT, n, heads, nh, group, dh);
    for (int hi = 0; hi < nh; hi++)
        for (int j = 0; j < n; j += 5) {
            double sq = 0;
            for (int r = 0; r < out; r++) {
                double f = 0;
                for (int d = 0; d < dh; d++)
                    f += (double)wf[(size_t)r * in + heads[hi] * dh + d] * vT[((size_t)(heads[hi] / group) * dh + d) * n + j];
                sq += f * f;
            }
            ck_assert_double_eq_tol(ref[hi * n + j], sqrt(sq), 1e-5 * sqrt(sq));
            ck_assert_double_gt(sqrt(sq), 0.1);
        }
    for (size_t t = 0; t < sizeof lins / sizeof lins[0]; t++) {
        double worst = 0;
        kern_value_norms_naive(ref, &lins[t], vT, n, heads, nh, group, dh);
        int ran = 0;
        for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
            if (gemm_force_kernel(kernels[kn]) != 0) continue;
            value_norms_by_gram(got, &lins[t], vT, n, heads, nh, group, dh, n);
            value_norms_by_gram(first + nh * n, &lins[t], vT, n, heads, nh, group, dh, 5);
            ck_assert_msg(!memcmp(got, first + nh * n, sizeof(float) * nh * n), "%s, %s: blocks of 5 tokens differ",
                          lins[t].name, kernels[kn]);
            for (int i = 0; i < nh * n; i++) {
                const double rel = fabs((double)got[i] - ref[i]) / ref[i];
                worst = rel > worst ? rel : worst;
                ck_assert_msg(rel <= tol[t], "%s, %s: norm %d is %.9g, naive %.9g", lins[t].name, kernels[kn], i,
                              got[i], ref[i]);
            }
            if (ran++ == 0) memcpy(first, got, sizeof(float) * nh * n);
            else ck_assert_msg(!memcmp(first, got, sizeof(float) * nh * n), "%s, %s: not the bits of the first kernel",
                               lins[t].name, kernels[kn]);
        }
        ck_assert_int_ge(ran, 2);
        fprintf(stderr, "INFO %s: %s: largest error vs the naive norms %.2e (relative)\n", __func__, lins[t].name, worst);
    }
    /* GQA: heads 0 and 1 share kv head 0's values but not their columns of W_O */
    value_norms_by_gram(got, &lins[0], vT, n, heads, nh, group, dh, n);
    ck_assert_float_gt(fabsf(got[0] - got[n]), 1e-3f);
    gemm_force_kernel(NULL);
    free(wf), free(wt), free(wc), free(vT), free(ref), free(got), free(first), free(w16), free(wb), free(wq);
}
END_TEST

/* A value in the null space of a head's columns (two equal columns, v = e_a -
 * e_b) has norm 0, and the rounded quadratic form is never taken below 0 to a
 * NaN: each norm is 0 or a positive number. */
START_TEST(value_norms_of_a_null_value_are_zero_not_nan) {
    const int dh = 32, in = dh, out = 70, n = 3;
    float *w = malloc(sizeof(float) * out * in), *v = calloc((size_t)dh * n, sizeof(float)), norms[3];
    float *G = malloc(sizeof(float) * dh * dh), *u = malloc(sizeof(float) * dh * n);
    _Alignas(64) static float panel[GEMM_SCRATCH];
    ck_assert(w && v && G && u);
    fill(w, (size_t)out * in, 210, 1);
    for (int r = 0; r < out; r++) w[(size_t)r * in + 7] = w[(size_t)r * in + 3];
    v[3 * n + 0] = 1.5f, v[7 * n + 0] = -1.5f;                         /* token 0: in the null space */
    v[3 * n + 1] = 1e-3f, v[7 * n + 1] = -1e-3f, v[0 * n + 1] = 1e-20f; /* token 1: nearly */
    for (int a = 0; a < dh; a++) v[a * n + 2] = (float)(a % 5) - 2;     /* token 2: not */
    kern_value_gram(G, w, out, in, 0, dh, panel);
    kern_value_norms_gram(norms, G, v, (size_t)n, n, dh, u, panel);
    ck_assert_float_eq(norms[0], 0.0f);
    ck_assert(norms[1] >= 0.0f && norms[1] < 1e-4f);
    ck_assert_float_gt(norms[2], 1.0f);
    free(w), free(v), free(G), free(u);
}
END_TEST

/* The 16-bit q/k conversions against a definition in double: round to the
 * nearest multiple of the format's unit at x's exponent (nearbyint: ties to
 * even), subnormals at the least exponent, past the largest finite value inf.
 * Every 16-bit pattern widens and narrows back to itself. */
static double half_reference(double x, int mant_bits, int min_exp, double max_finite) {
    if (x == 0) return x;
    int ex;
    frexp(fabs(x), &ex);
    ex -= 1; /* |x| in [2^ex, 2^(ex+1)) */
    if (ex < min_exp) ex = min_exp;
    const double r = ldexp(nearbyint(ldexp(x, mant_bits - ex)), ex - mant_bits);
    return fabs(r) > max_finite ? copysign(INFINITY, x) : r;
}

START_TEST(half_conversions_round_to_nearest_even_and_round_trip) {
    /* counted, then asserted once: an assertion per value would be millions of Check marks */
    for (int prec = 1; prec <= 2; prec++) {
        long roundtrip_bad = 0, finite = 0, flag_bad = 0, nan_bad = 0, wrong = 0;
        float first_x = 0, first_got = 0;
        double first_want = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            const float f = kern_from_half((uint16_t)h, prec);
            if (isnan(f)) {
                flag_bad += kern_half_finite((uint16_t)h, prec);
                nan_bad += !isnan(kern_from_half(kern_to_half(f, prec), prec));
                continue;
            }
            finite += kern_half_finite((uint16_t)h, prec);
            flag_bad += kern_half_finite((uint16_t)h, prec) != (isfinite(f) != 0);
            roundtrip_bad += kern_to_half(f, prec) != h;
        }
        ck_assert_int_eq(roundtrip_bad, 0);
        ck_assert_int_eq(flag_bad, 0);
        ck_assert_int_eq(nan_bad, 0);
        ck_assert_int_eq(finite, prec == 1 ? 65536 - 2048 : 65536 - 256); /* 2^16 less the all-ones exponents */
        uint64_t st = 0x9e3779b97f4a7c15ull;
        for (int i = 0; i < 2000000; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            uint32_t bits = (uint32_t)st;
            /* exponents around the format's range; every 5th value a tie (low bits 1 then 0s) */
            const int lo = prec == 1 ? 97 : 1, span = prec == 1 ? 50 : 254;
            bits = (bits & 0x807fffffu) | (uint32_t)(lo + (int)((st >> 40) % span)) << 23;
            if (i % 5 == 0) bits = (bits & ~((1u << (prec == 1 ? 13 : 16)) - 1)) | 1u << (prec == 1 ? 12 : 15);
            float x;
            memcpy(&x, &bits, 4);
            const double want = prec == 1 ? half_reference(x, 10, -14, 65504.0) : half_reference(x, 7, -126, 3.3895313892515355e38);
            const float got = kern_from_half(kern_to_half(x, prec), prec);
            if (!((double)got == want || (isinf(got) && isinf(want) && signbit(got) == signbit(want))) && !wrong++)
                first_x = x, first_got = got, first_want = want;
        }
        ck_assert_msg(wrong == 0, "prec %d: %ld wrong, first %.9g -> %.9g, want %.9g", prec, wrong, first_x, first_got, first_want);
    }
    /* known values */
    ck_assert_uint_eq(kern_to_half(1.0f, 1), 0x3c00);
    ck_assert_uint_eq(kern_to_half(65504.0f, 1), 0x7bff);
    ck_assert_uint_eq(kern_to_half(65520.0f, 1), 0x7c00);
    ck_assert_uint_eq(kern_to_half(-2.0f, 1), 0xc000);
    ck_assert_uint_eq(kern_to_half(5.9604644775390625e-08f, 1), 0x0001);
    ck_assert_uint_eq(kern_to_half(1.0f, 2), 0x3f80);
    ck_assert_uint_eq(kern_to_half(1.00390625f, 2), 0x3f80); /* halfway to 0x3f81: to even */
    ck_assert_uint_eq(kern_to_half(1.01171875f, 2), 0x3f82); /* halfway to 0x3f82 from 0x3f81: to even */
    /* the transposes */
    float src[6] = {1, 2, 3, 4.5f, -5, 1.0f / 3}, back[6];
    uint16_t t[6];
    kern_transpose_to_half(t, src, 2, 3, 1);
    kern_transpose_from_half(back, t, 3, 2, 1);
    for (int i = 0; i < 5; i++) ck_assert(back[i] == src[i]);
    ck_assert(back[5] != src[5] && fabsf(back[5] - src[5]) <= src[5] / 2048);
    ck_assert(kern_from_half(t[1 * 2 + 0], 1) == 2.0f); /* (3, 2): element (1, 0) is src (0, 1) */
}
END_TEST

/* The tiled transposes put every element where the plain double loop does,
 * for shapes that are and are not multiples of the tile, with strides wider
 * than the rows (attention's values in a cache of more tokens), and leave the
 * columns past them alone. */
START_TEST(transposes_move_every_element_where_the_plain_loop_does) {
    static const int shapes[][2] = {{1, 1}, {1, 77}, {77, 1}, {31, 33}, {32, 32}, {64, 513}, {768, 7}, {130, 96}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int rows = shapes[c][0], cols = shapes[c][1];
        const size_t lds = (size_t)cols + 5, ldd = (size_t)rows + 3;
        float *src = malloc(sizeof(float) * (size_t)rows * lds), *dst = malloc(sizeof(float) * (size_t)cols * ldd),
              *plain = malloc(sizeof(float) * (size_t)rows * cols);
        ck_assert(src && dst && plain);
        for (size_t i = 0; i < (size_t)rows * lds; i++) src[i] = (float)i * 0.5f - 3.0f;
        for (size_t i = 0; i < (size_t)cols * ldd; i++) dst[i] = -1e30f;
        kern_transpose_ld(dst, ldd, src, lds, rows, cols);
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                ck_assert_msg(dst[(size_t)j * ldd + i] == src[(size_t)i * lds + j], "%dx%d: (%d, %d)", rows, cols, i, j);
                plain[(size_t)i * cols + j] = src[(size_t)i * lds + j];
            }
        for (int j = 0; j < cols; j++)
            for (size_t i = (size_t)rows; i < ldd; i++) ck_assert(dst[(size_t)j * ldd + i] == -1e30f);
        kern_transpose(dst, plain, rows, cols); /* contiguous */
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) ck_assert(dst[(size_t)j * rows + i] == plain[(size_t)i * cols + j]);
        free(src), free(dst), free(plain);
    }
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("kernels");
    TCase *k = tcase_create("kernels");
    /* each test runs every kernel this CPU has over whole attention blocks: seconds under ASan on a shared
     * machine, where Check's default 4 s (meant to catch a hang) expired once (streamed rows) */
    tcase_set_timeout(k, 120);
    tcase_add_test(k, widened_blocks_fit_the_scratch);
    tcase_add_test(k, quantized_rows_past_one_widened_block_give_the_one_call_bits);
    tcase_add_test(k, cached_attention_gives_the_full_pass_rows);
    tcase_add_test(k, half_conversions_round_to_nearest_even_and_round_trip);
    tcase_add_test(k, long_causal_attention_gives_the_same_bits_on_every_kernel_and_a_query_at_a_time);
    tcase_add_test(k, streamed_rows_are_the_whole_matrix_bit_for_bit);
    tcase_add_test(k, decoding_reads_the_cache_in_place_with_the_full_pass_bits);
    tcase_add_test(k, row_moments_of_long_rows_match_their_definitions);
    tcase_add_test(k, row_remainder_beside_a_heavy_sink_is_kept);
    tcase_add_test(k, xlogx_matches_naive_reference);
    tcase_add_test(k, attention_sinks_match_naive_reference);
    tcase_add_test(k, clamped_swiglu_matches_naive_reference);
    tcase_add_test(k, bf16_few_token_products_cover_a_row_tail);
    tcase_add_test(k, linear_rows_match_naive_reference);
    tcase_add_test(k, attention_matches_naive_reference_inside_a_wider_block);
    tcase_add_test(k, attention_naive_reference_is_softmax_of_scaled_dot_products);
    tcase_add_test(k, residual_step_matches_add_and_layernorm_reference);
    tcase_add_test(k, causal_attention_gives_future_keys_exactly_zero);
    tcase_add_test(k, conv1d_views_of_a_fused_weight_match_naive_reference);
    tcase_add_test(k, products_with_remainders_match_naive_reference);
    tcase_add_test(k, attention_without_context_gives_the_same_probabilities);
    tcase_add_test(k, layernorm_gives_zero_mean_unit_variance);
    tcase_add_test(k, softmax_matches_naive_reference_over_a_wide_range);
    tcase_add_test(k, scaled_softmax_gives_the_bits_of_scaling_then_softmax);
    tcase_add_test(k, activations_match_naive_reference);
    tcase_add_test(k, half_and_quantized_weights_match_naive_reference);
    tcase_add_test(k, sliding_window_and_softcap_attention_match_naive_reference);
    tcase_add_test(k, both_ways_blocks_in_a_causal_sequence_match_naive_reference);
    tcase_add_test(k, rms_residual_step_matches_naive_rmsnorm);
    tcase_add_test(k, rotary_positions_match_naive_reference_and_keep_norms);
    tcase_add_test(k, gated_mlp_combination_is_silu_of_gate_times_up);
    tcase_add_test(k, pooled_attention_matches_naive_and_keeps_rows_summing_to_one);
    tcase_add_test(k, row_sums_match_the_chain_bit_for_bit_and_the_naive_reference);
    tcase_add_test(k, first_above_finds_the_first_key_over_the_threshold);
    tcase_add_test(k, kth_block_max_is_the_kth_largest_of_the_block_maxima);
    tcase_add_test(k, value_norms_match_naive_reference_on_every_kernel_and_weight_type);
    tcase_add_test(k, value_norms_of_a_null_value_are_zero_not_nan);
    tcase_add_test(k, transposes_move_every_element_where_the_plain_loop_does);
    suite_add_tcase(s, k);
    return s;
}
