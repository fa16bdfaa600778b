/* test_bert.c — the encoder against committed PyTorch goldens (all dtypes and
 * naming variants), optimized kernels against the naive reference ones, and
 * checkpoint shape errors. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"
#include "util.h"
#include "check_util.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *x, size_t n, unsigned seed, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand(&seed) * scale;
}

static float max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

/* m (rows, cols) -> t (cols, rows) */
static void transpose(float *t, const float *m, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) t[(size_t)j * rows + i] = m[(size_t)i * cols + j];
}

/* y (n, out) through bert_linear_rows, whose input and output are transposed;
 * rows split at `split`, as the forward pass's threads split them. */
static void linear_via_rows(float *y, const float *x, const BertLinear *lin, int n, int in, int out, int split) {
    float *xT = malloc(sizeof(float) * n * in), *yT = malloc(sizeof(float) * n * out);
    ck_assert_ptr_nonnull(xT);
    ck_assert_ptr_nonnull(yT);
    transpose(xT, x, n, in);
    bert_linear_rows(yT, xT, lin, n, in, 0, split, -1);
    bert_linear_rows(yT, xT, lin, n, in, split, out, -1);
    transpose(y, yT, out, n);
    free(xT), free(yT);
}

START_TEST(linear_rows_match_naive_reference) {
    int n = 13, in = 37, out = 29;
    float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    fill(x, (size_t)n * in, 1, 1), fill(w, (size_t)out * in, 2, 0.5f), fill(b, (size_t)out, 3, 1);
    BertLinear lin = {w, b, 0, in}, nobias = {w, NULL, 0, in};
    bert_matmul_naive(y1, x, w, b, n, in, out);
    linear_via_rows(y2, x, &lin, n, in, out, out);
    ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
    bert_matmul_naive(y1, x, w, NULL, n, in, out);
    linear_via_rows(y2, x, &nobias, n, in, out, 16);
    ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
    /* the activation goes on after the bias */
    float *xT = malloc(sizeof(float) * n * in), *yT = malloc(sizeof(float) * n * out);
    transpose(xT, x, n, in);
    bert_linear_rows(yT, xT, &lin, n, in, 0, out, ACT_RELU);
    bert_matmul_naive(y1, x, w, b, n, in, out);
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
    bert_attention_naive(p1, c1 + off, q + off, k + off, v + off, n, dh, scale, 0);
    bert_attention(p2, c2 + off, q + off, k + off, v + off, n, dh, scale, 0);
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
    bert_attention_naive(probs, ctxT, qT, kT, vT, n, dh, 0.5f, 0);
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
    bert_attention_naive(p1, c1, q, k, v, n, dh, scale, 1);
    bert_attention(p2, c2, q, k, v, n, dh, scale, 1);
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
    bert_attention_naive(p1, c1, q, k, v, n, dh, scale, 0);
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
        BertLinear lin = {w + p * out, b + p * out, 1, ld};
        /* the same block transposed into a Linear (out, in) weight */
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) wt[(size_t)o * in + i] = w[(size_t)i * ld + p * out + o];
        bert_matmul_naive(y1, x, wt, b + p * out, n, in, out);
        bert_linear_naive(y2, x, &lin, n, in, out);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-5f);
        linear_via_rows(y2, x, &lin, n, in, out, 16);
        ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)n * out), 1e-4f);
    }
    free(x), free(w), free(b), free(wt), free(y1), free(y2);
}
END_TEST

/* Both ways of issuing a product to BLAS (whole, or as small tiles; see
 * bert_gemm_tiled) on shapes with remainders in every tiled dimension:
 * 130 tokens (tiles of 128), 800 inputs (768) and 37 rows (8), in both
 * weight layouts and split in two, as the threads split it. */
START_TEST(tiled_and_whole_products_match_naive_reference) {
    int n = 130, in = 800, out = 37, ld = 3 * out;
    float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * in * ld), *b = malloc(sizeof(float) * ld);
    float *wt = malloc(sizeof(float) * out * in);
    float *y1 = malloc(sizeof(float) * n * out), *y2 = malloc(sizeof(float) * n * out);
    fill(x, (size_t)n * in, 31, 1), fill(w, (size_t)in * ld, 32, 0.1f), fill(b, (size_t)ld, 33, 1);
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) wt[(size_t)o * in + i] = w[(size_t)i * ld + out + o];
    BertLinear conv = {w + out, b + out, 1, ld}, plain = {wt, b + out, 0, in};
    const int was = bert_gemm_tiled();
    for (int tiled = 0; tiled < 2; tiled++) {
        bert_set_gemm_tiled(tiled);
        ck_assert_int_eq(bert_gemm_tiled(), tiled);
        /* and 7 tokens, which run token-major (few_tokens_rows) */
        for (int layout = 0; layout < 4; layout++) {
            const BertLinear *lin = layout & 1 ? &conv : &plain;
            const int tokens = layout & 2 ? 7 : n;
            bert_linear_naive(y1, x, lin, tokens, in, out);
            linear_via_rows(y2, x, lin, tokens, in, out, 11);
            ck_assert_float_lt(max_abs_diff(y1, y2, (size_t)tokens * out), 1e-4f);
        }
    }
    bert_set_gemm_tiled(was);
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
        bert_attention(p1, c, q, k, v, n, dh, 0.35f, causal);
        bert_attention(p2, NULL, q, k, NULL, n, dh, 0.35f, causal);
        ck_assert_int_eq(memcmp(p1, p2, sizeof(float) * n * n), 0);
    }
    free(q), free(k), free(v), free(p1), free(p2), free(c);
}
END_TEST

/* x += y, then LayerNorm, by the reference kernels on token-major arrays */
static void residual_reference(float *x, const float *y, const float *g, const float *b, int n, int dim) {
    for (size_t i = 0; i < (size_t)n * dim; i++) x[i] += y ? y[i] : 0.0f;
    if (g) bert_layernorm(x, g, b, n, dim, 1e-12f);
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
    bert_residual(x, yT, x, dT, g, b, n, dim, 1e-12f, 0, 20);
    bert_residual(x, yT, x, dT, g, b, n, dim, 1e-12f, 20, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 2e-5f);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    /* pre-LN: x += y kept, LN(x) only into dst */
    memcpy(ref, x0, sizeof(float) * sz), memcpy(x, x0, sizeof(float) * sz);
    residual_reference(ref, y, NULL, NULL, n, dim);
    bert_residual(x, yT, NULL, NULL, NULL, NULL, n, dim, 1e-12f, 0, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 1e-6f);
    bert_residual(x, NULL, dst, dT, g, b, n, dim, 1e-12f, 0, n);
    ck_assert_float_lt(max_abs_diff(ref, x, sz), 1e-6f); /* the residual itself untouched */
    residual_reference(ref, NULL, g, b, n, dim);
    ck_assert_float_lt(max_abs_diff(ref, dst, sz), 2e-5f);
    transpose(d, dT, dim, n);
    ck_assert_float_lt(max_abs_diff(ref, d, sz), 2e-5f);
    /* no LayerNorm: x itself, transposed */
    bert_residual(x, NULL, NULL, dT, NULL, NULL, n, dim, 1e-12f, 0, n);
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
    bert_softmax_rows(a, rows, cols);
    bert_softmax_rows_naive(b, rows, cols);
    ck_assert_float_lt(max_abs_diff(a, b, (size_t)rows * cols), 1e-6f);
    free(a), free(b);
}
END_TEST

START_TEST(activations_match_naive_reference) {
    size_t n = 4001;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    for (ActKind k = ACT_GELU; k <= ACT_RELU; k++) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] = -20.0f + 40.0f * (float)i / (float)(n - 1);
        bert_activate(a, n, k);
        bert_activate_naive(b, n, k);
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
    bert_layernorm(x, g, b, 3, 16, 1e-12f);
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

static void flatten(const cJSON *a, float *out, size_t *k) {
    if (cJSON_IsNumber(a)) {
        out[(*k)++] = (float)a->valuedouble;
        return;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, a) flatten(it, out, k);
}

static const char *FIXTURES[] = {"tests/data/small-f32",       "tests/data/small-f32-google",
                                 "tests/data/small-f16",       "tests/data/small-bf16",
                                 "tests/data/small-gpt2",      "tests/data/small-gpt2-f16",
                                 "tests/data/small-roberta",   "tests/data/small-distilbert",
                                 "tests/data/small-distilbert-prefixed"};

START_TEST(forward_matches_pytorch_goldens) {
    const char *dir = FIXTURES[_i];
    BertModel m;
    AvErr e;
    if (bert_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    char *gp = av_path_join(dir, "golden.json"), *buf;
    size_t len;
    ck_assert_int_eq(av_read_file(gp, 64 << 20, &buf, &len, &e), 0);
    cJSON *cases = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(cases);
    float worst_attn = 0, worst_qk = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *ids_j = cJSON_GetObjectItem(c, "input_ids"), *types_j = cJSON_GetObjectItem(c, "token_type_ids");
        int n = cJSON_GetArraySize(ids_j);
        int *ids = malloc(sizeof(int) * n), *types = malloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) {
            ids[i] = cJSON_GetArrayItem(ids_j, i)->valueint;
            types[i] = cJSON_GetArrayItem(types_j, i)->valueint;
        }
        BertRunState rs;
        Capture cap;
        ck_assert_int_eq(bert_runstate_alloc(&rs, &m.cfg, n, &e), 0);
        ck_assert_int_eq(bert_capture_alloc(&cap, &m.cfg, n, 1, 1, &e), 0);
        if (bert_forward(&m, &rs, ids, types, n, &cap, &e) != 0) ck_abort_msg("forward: %s", e.msg);
        size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * n;
        size_t nq = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * cap.head_dim;
        float *ref = malloc(sizeof(float) * (na > nq ? na : nq));
        size_t k = 0;
        flatten(cJSON_GetObjectItem(c, "attention"), ref, &k);
        ck_assert_uint_eq(k, na);
        worst_attn = fmaxf(worst_attn, max_abs_diff(cap.attn, ref, na));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "queries"), ref, &k);
        ck_assert_uint_eq(k, nq);
        worst_qk = fmaxf(worst_qk, max_abs_diff(cap.q, ref, nq));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "keys"), ref, &k);
        worst_qk = fmaxf(worst_qk, max_abs_diff(cap.k, ref, nq));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "last_hidden"), ref, &k);
        ck_assert_uint_eq(k, (size_t)n * m.cfg.hidden_size);
        float hid = max_abs_diff(cap.hidden + (size_t)m.cfg.num_layers * n * m.cfg.hidden_size, ref, k);
        ck_assert_msg(hid < 1e-3f, "%s: last hidden state differs by %g", dir, hid);
        free(ref), free(ids), free(types);
        bert_capture_free(&cap);
        bert_runstate_free(&rs);
    }
    fprintf(stderr, "INFO %s (%s %s): max abs error vs PyTorch: attention %.3g, q/k %.3g\n", dir, m.cfg.model_type, m.dtype_name,
            worst_attn, worst_qk);
    ck_assert_msg(worst_attn <= 1e-4f, "%s: attention differs from PyTorch by %g", dir, worst_attn);
    ck_assert_msg(worst_qk <= 1e-3f, "%s: q/k differ from PyTorch by %g", dir, worst_qk);
    cJSON_Delete(cases);
    free(buf), free(gp);
    bert_free(&m);
}
END_TEST

/* Writes a copy of the small fixture with one tensor replaced or dropped. */
static void write_variant(const char *dir, const char *drop, const char *reshape) {
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_open(&f, "tests/data/small-f32/model.safetensors", &e), 0);
    StWriteTensor *ts = calloc((size_t)f.n_tensors, sizeof *ts);
    float **bufs = calloc((size_t)f.n_tensors, sizeof *bufs);
    int n = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const StTensor *t = &f.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        size_t numel = t->nbytes / 4;
        bufs[n] = malloc(t->nbytes);
        st_to_f32(t, bufs[n]);
        ts[n].name = t->name;
        ts[n].ndim = t->ndim;
        memcpy(ts[n].shape, t->shape, sizeof t->shape);
        if (reshape && !strcmp(t->name, reshape)) { /* same numel, wrong shape */
            ts[n].ndim = 2;
            ts[n].shape[0] = 1;
            ts[n].shape[1] = (int64_t)numel;
        }
        ts[n].data = bufs[n];
        n++;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/data/small-f32/config.json tests/data/small-f32/vocab.txt %s/", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    char *p = av_path_join(dir, "model.safetensors");
    ck_assert_int_eq(st_write(p, ts, n, ST_F32, &e), 0);
    free(p);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs), free(ts);
    st_close(&f);
}

START_TEST(load_names_the_tensor_with_a_wrong_shape) {
    char dir[] = "/tmp/attnviz-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_variant(dir, NULL, "encoder.layer.1.attention.self.key.weight");
    BertModel m;
    AvErr e;
    ck_assert_int_eq(bert_load(&m, dir, &e), -1);
    ck_assert_msg(strstr(e.msg, "encoder.layer.1.attention.self.key.weight") && strstr(e.msg, "[1, 1024]") &&
                      strstr(e.msg, "[32, 32]"),
                  "message: %s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(load_names_a_missing_tensor) {
    char dir[] = "/tmp/attnviz-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_variant(dir, "encoder.layer.0.output.LayerNorm.bias", NULL);
    BertModel m;
    AvErr e;
    ck_assert_int_eq(bert_load(&m, dir, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing tensor 'encoder.layer.0.output.LayerNorm.bias'"), "message: %s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(threaded_forward_gives_the_single_thread_result) {
    BertModel m;
    AvErr e;
    ck_assert_int_eq(bert_load(&m, "tests/data/small-f32", &e), 0);
    int n = 64, ids[64], types[64];
    for (int i = 0; i < n; i++) ids[i] = 5 + (i * 7) % 100, types[i] = i >= 32;
    Capture c1, c2;
    BertRunState rs1, rs2;
    /* the run state takes its thread count from BLAS's at allocation */
    openblas_set_num_threads(1);
    ck_assert_int_eq(bert_runstate_alloc(&rs1, &m.cfg, n, &e), 0);
    ck_assert_int_eq(rs1.n_threads, 1);
    openblas_set_num_threads(3);
    ck_assert_int_eq(bert_runstate_alloc(&rs2, &m.cfg, n, &e), 0);
    ck_assert_int_eq(rs2.n_threads, 3);
    ck_assert_int_eq(bert_capture_alloc(&c1, &m.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(bert_capture_alloc(&c2, &m.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(bert_forward(&m, &rs1, ids, types, n, &c1, &e), 0);
    ck_assert_int_eq(bert_forward(&m, &rs2, ids, types, n, &c2, &e), 0);
    ck_assert_int_eq(openblas_get_num_threads(), 3); /* restored after the pass */
    /* column-split products sum in another order: equal to float rounding, not bitwise */
    size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * n;
    ck_assert_float_lt(max_abs_diff(c1.attn, c2.attn, na), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1.q, c2.q, (size_t)m.cfg.num_layers * m.cfg.num_heads * n * c1.head_dim), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1.hidden, c2.hidden, (size_t)(m.cfg.num_layers + 1) * n * m.cfg.hidden_size), 1e-5f);
    /* without hidden states the last layer stops after its attention: same attention */
    Capture c3;
    ck_assert_int_eq(bert_capture_alloc(&c3, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(bert_forward(&m, &rs1, ids, types, n, &c3, &e), 0);
    ck_assert_float_eq(max_abs_diff(c1.attn, c3.attn, na), 0.0f);
    bert_capture_free(&c3);
    /* without capture the forward pass still runs (per-thread scratch scores) */
    ck_assert_int_eq(bert_forward(&m, &rs2, ids, types, n, NULL, &e), 0);
    bert_capture_free(&c1), bert_capture_free(&c2), bert_runstate_free(&rs1), bert_runstate_free(&rs2), bert_free(&m);
}
END_TEST

START_TEST(forward_rejects_out_of_vocabulary_ids) {
    BertModel m;
    AvErr e;
    ck_assert_int_eq(bert_load(&m, "tests/data/small-f32", &e), 0);
    BertRunState rs;
    Capture cap;
    ck_assert_int_eq(bert_runstate_alloc(&rs, &m.cfg, 4, &e), 0);
    ck_assert_int_eq(bert_capture_alloc(&cap, &m.cfg, 4, 0, 0, &e), 0);
    int ids[] = {2, 5, 100000, 3}, types[] = {0, 0, 0, 0};
    ck_assert_int_eq(bert_forward(&m, &rs, ids, types, 4, &cap, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "position 2"));
    bert_capture_free(&cap);
    bert_runstate_free(&rs);
    bert_free(&m);
}
END_TEST

/* torch.save's pytorch_model.bin of the same F16 tensors: read through the
 * safe zip + pickle reader, the forward pass must not change by a bit. */
START_TEST(pytorch_bin_checkpoint_gives_the_safetensors_result) {
    BertModel a, b;
    AvErr e;
    if (bert_load(&a, "tests/data/small-gpt2-f16", &e) != 0) ck_abort_msg("%s", e.msg);
    if (bert_load(&b, "tests/data/small-gpt2-bin", &e) != 0) ck_abort_msg("%s", e.msg);
    ck_assert_ptr_nonnull(strstr(b.st.path, "pytorch_model.bin"));
    ck_assert_str_eq(b.dtype_name, "F16");
    int ids[] = {5, 77, 300, 12, 9, 150, 41, 41, 2}, n = 9, types[9] = {0};
    BertRunState rs;
    Capture ca, cb;
    ck_assert_int_eq(bert_runstate_alloc(&rs, &a.cfg, n, &e), 0);
    ck_assert_int_eq(bert_capture_alloc(&ca, &a.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(bert_capture_alloc(&cb, &b.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(bert_forward(&a, &rs, ids, types, n, &ca, &e), 0);
    ck_assert_int_eq(bert_forward(&b, &rs, ids, types, n, &cb, &e), 0);
    size_t na = (size_t)a.cfg.num_layers * a.cfg.num_heads * n * n;
    size_t nh = (size_t)(a.cfg.num_layers + 1) * n * a.cfg.hidden_size;
    ck_assert_int_eq(memcmp(ca.attn, cb.attn, na * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(ca.hidden, cb.hidden, nh * sizeof(float)), 0);
    bert_capture_free(&ca), bert_capture_free(&cb);
    bert_runstate_free(&rs);
    bert_free(&a), bert_free(&b);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("bert");
    TCase *k = tcase_create("kernels");
    tcase_add_test(k, linear_rows_match_naive_reference);
    tcase_add_test(k, attention_matches_naive_reference_inside_a_wider_block);
    tcase_add_test(k, attention_naive_reference_is_softmax_of_scaled_dot_products);
    tcase_add_test(k, residual_step_matches_add_and_layernorm_reference);
    tcase_add_test(k, causal_attention_gives_future_keys_exactly_zero);
    tcase_add_test(k, conv1d_views_of_a_fused_weight_match_naive_reference);
    tcase_add_test(k, tiled_and_whole_products_match_naive_reference);
    tcase_add_test(k, attention_without_context_gives_the_same_probabilities);
    tcase_add_test(k, layernorm_gives_zero_mean_unit_variance);
    tcase_add_test(k, softmax_matches_naive_reference_over_a_wide_range);
    tcase_add_test(k, activations_match_naive_reference);
    suite_add_tcase(s, k);
    TCase *m = tcase_create("model");
    tcase_set_timeout(m, 60);
    tcase_add_loop_test(m, forward_matches_pytorch_goldens, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(m, load_names_the_tensor_with_a_wrong_shape);
    tcase_add_test(m, load_names_a_missing_tensor);
    tcase_add_test(m, forward_rejects_out_of_vocabulary_ids);
    tcase_add_test(m, threaded_forward_gives_the_single_thread_result);
    tcase_add_test(m, pytorch_bin_checkpoint_gives_the_safetensors_result);
    suite_add_tcase(s, m);
    return s;
}
