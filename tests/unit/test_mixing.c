/* test_mixing.c — ALTI and rollout (mixing.h), the flags (flags.h: sink
 * shares, the engine's kept stream entries) and --explain (explain.h) on the
 * fixture families, each against a plain loop written here from the
 * definitions over what the capture holds, on every kernel path. Against
 * transformers and TransformerLens: tests/ref/mix_check.sh, explain_check.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "flags.h"
#include "gemm.h"
#include "lens.h"
#include "mixing.h"
#include "loader.h"
#include "model.h"
#include "check_util.h"

/* post-norm BERT, GPT-2 (biases), Llama (GQA), Gemma 3 (sandwich norms), gpt-oss (learned sinks, windows) */
static const char *FIXTURES[] = {"tests/data/small-f32", "tests/data/small-gpt2", "tests/data/small-llama",
                                 "tests/data/small-gemma3", "tests/data/small-gptoss", "tests/data/small-qwen3"};
static const char *KERNELS[] = {"avx512", "avx2", "scalar"};
enum { N = 11 };

typedef struct {
    Model m;
    RunState rs;
    Capture cap;
    int ids[N], types[N];
} Run;

static void run_fixture(Run *r, const char *dir, int internals) {
    AvErr e;
    if (model_load(&r->m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    for (int i = 0; i < N; i++) r->ids[i] = (7 + 13 * i) % r->m.cfg.vocab_size, r->types[i] = 0;
    if (r->m.cfg.pos_offset > 0)
        for (int i = 0; i < N; i++)
            if (r->ids[i] == r->m.cfg.pad_token_id) r->ids[i]++;
    if (model_runstate_alloc(&r->rs, &r->m, N, 0, &e) || model_capture_alloc(&r->cap, &r->m.cfg, N, 1, 0, &e) ||
        model_capture_activations(&r->cap, &r->m.cfg, &e) ||
        (internals && (model_capture_internals(&r->cap, &r->m.cfg, &e) || model_capture_values(&r->cap, &r->m.cfg, &e))) ||
        model_forward(&r->m, &r->rs, r->ids, r->types, N, &r->cap, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
}

static void run_free(Run *r) {
    model_capture_free(&r->cap);
    model_runstate_free(&r->rs);
    model_free(&r->m);
}

/* Rollout by the definition, in double: Â = (0.5 mean_h A + 0.5 I) renormalised, R = Â R_prev. */
static void rollout_naive(const Capture *c, double *R) {
    const int n = c->n_tokens;
    double *A = malloc((size_t)n * n * sizeof *A), *P = malloc((size_t)n * n * sizeof *P);
    for (int l = 0; l < c->n_layers; l++) {
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) {
                double a = 0;
                for (int h = 0; h < c->n_heads; h++) a += cap_attn(c, l, h)[i * n + j];
                A[i * n + j] = 0.5 * a / c->n_heads + (i == j ? 0.5 : 0.0);
                s += A[i * n + j];
            }
            for (int j = 0; j < n; j++) A[i * n + j] /= s;
        }
        memcpy(P, R + (size_t)(l ? l - 1 : 0) * n * n, (size_t)n * n * sizeof *P);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double v = 0;
                if (!l) v = A[i * n + j];
                else
                    for (int k = 0; k < n; k++) v += A[i * n + k] * P[k * n + j];
                R[((size_t)l * n + i) * n + j] = v;
            }
    }
    free(A), free(P);
}

/* ALTI's layer contributions C^l by the definition (mixing.h), in double, from the capture's values, residual
 * stream and attention, the output projection read row by row: each pair's whole transformed vector. */
static void alti_layer_naive(const Model *m, const Capture *c, int l, double *C) {
    const ModelConfig *cf = &m->cfg;
    const LayerWeights *lw = &m->w.layers[l];
    const int n = c->n_tokens, H = cf->hidden_size, NH = cf->num_heads, dh = cf->head_dim, QW = NH * dh;
    const int group = NH / cf->num_kv_heads;
    AvErr e;
    float *wo = lens_widen(&lw->o, &e);
    ck_assert_ptr_nonnull(wo);
    double *F = calloc((size_t)NH * n * H, sizeof *F), *T = malloc((size_t)n * H * sizeof *T);
    double *y = malloc((size_t)H * sizeof *y), *z = malloc((size_t)H * sizeof *z);
    for (int h = 0; h < NH; h++)
        for (int j = 0; j < n; j++)
            for (int d = 0; d < H; d++) {
                double s = 0;
                for (int q = 0; q < dh; q++) s += (double)wo[(size_t)d * QW + h * dh + q] * cap_vals(c, l, h / group)[j * dh + q];
                F[((size_t)h * n + j) * H + d] = s;
            }
    for (int i = 0; i < n; i++) {
        const float *x = cap_resid(c, l) + (size_t)i * H;
        for (int j = 0; j < n; j++)
            for (int d = 0; d < H; d++) {
                double s = 0;
                for (int h = 0; h < NH; h++) s += cap_attn(c, l, h)[i * n + j] * F[((size_t)h * n + j) * H + d];
                T[(size_t)j * H + d] = s;
            }
        /* the block's output and each T~ */
        double scale_inv = 1, mean = 0;
        for (int d = 0; d < H; d++) {
            z[d] = (lw->o.b ? lw->o.b[d] : 0);
            for (int j = 0; j < n; j++) z[d] += T[(size_t)j * H + d];
        }
        const Norm *nm = cf->pre_ln ? &lw->attn_post_norm : &lw->attn_norm;
        if (!cf->pre_ln) {
            for (int d = 0; d < H; d++) z[d] += x[d];
            for (int d = 0; d < H; d++) mean += z[d] / H;
            double v = 0;
            for (int d = 0; d < H; d++) v += (z[d] - mean) * (z[d] - mean) / H;
            scale_inv = 1 / sqrt(v + nm->eps);
            for (int d = 0; d < H; d++) y[d] = nm->g[d] * (z[d] - mean) * scale_inv + (nm->b ? nm->b[d] : 0);
        } else if (nm->g) {
            double v = 0;
            for (int d = 0; d < H; d++) v += z[d] * z[d] / H;
            scale_inv = 1 / sqrt(v + nm->eps);
            for (int d = 0; d < H; d++) y[d] = x[d] + nm->g[d] * z[d] * scale_inv;
        } else {
            for (int d = 0; d < H; d++) y[d] = x[d] + z[d];
        }
        double ny = 0, tot = 0;
        for (int d = 0; d < H; d++) ny += fabs(y[d]);
        for (int j = 0; j < n; j++) {
            double *t = T + (size_t)j * H, mt = 0, dist = 0;
            if (j == i && !cf->pre_ln)
                for (int d = 0; d < H; d++) t[d] += x[d];
            for (int d = 0; d < H; d++) mt += t[d] / H;
            for (int d = 0; d < H; d++) {
                double tt = !cf->pre_ln ? nm->g[d] * (t[d] - mt) * scale_inv : nm->g ? nm->g[d] * t[d] * scale_inv : t[d];
                if (j == i && cf->pre_ln) tt += x[d];
                dist += fabs(y[d] - tt);
            }
            const double v = ny - dist;
            C[(size_t)i * n + j] = v > 0 ? v : 0;
            tot += C[(size_t)i * n + j];
        }
        for (int j = 0; j < n; j++) C[(size_t)i * n + j] = tot > 0 ? C[(size_t)i * n + j] / tot : 0;
    }
    free(wo), free(F), free(T), free(y), free(z);
}

/* ALTI and rollout against the definitions, every layer, within 2e-5; rows sum to 1; a causal model's are
 * lower triangular; the same bits on every kernel path the CPU has. */
START_TEST(alti_and_rollout_follow_their_definitions) {
    const char *dir = FIXTURES[_i];
    MixResult first_alti = {0};
    for (size_t k = 0; k < sizeof KERNELS / sizeof KERNELS[0]; k++) {
        if (gemm_force_kernel(KERNELS[k]) != 0) continue;
        Run r;
        run_fixture(&r, dir, 1);
        MixResult alti, roll;
        AvErr e;
        ck_assert_msg(mix_alti(&r.m, &r.cap, r.rs.pool, &alti, &e) == 0, "%s: %s", dir, e.msg);
        ck_assert_msg(mix_rollout(&r.cap, &roll, &e) == 0, "%s: %s", dir, e.msg);
        const int L = r.cap.n_layers, n = N;
        double *R = malloc((size_t)L * n * n * sizeof *R), *C = malloc((size_t)n * n * sizeof *C);
        rollout_naive(&r.cap, R);
        double worst_r = 0, worst_c = 0;
        for (size_t q = 0; q < (size_t)L * n * n; q++) worst_r = fmax(worst_r, fabs(roll.agg[q] - R[q]));
        for (int l = 0; l < L; l++) {
            alti_layer_naive(&r.m, &r.cap, l, C);
            for (size_t q = 0; q < (size_t)n * n; q++) worst_c = fmax(worst_c, fabs(alti.layer[(size_t)l * n * n + q] - C[q]));
            for (int i = 0; i < n; i++) {
                double s = 0, sa = 0;
                for (int j = 0; j < n; j++) {
                    s += alti.agg[((size_t)l * n + i) * n + j], sa += roll.agg[((size_t)l * n + i) * n + j];
                    if (r.m.cfg.causal && j > i)
                        ck_assert(alti.agg[((size_t)l * n + i) * n + j] == 0 && roll.agg[((size_t)l * n + i) * n + j] == 0);
                }
                ck_assert_msg(fabs(s - 1) < 1e-5 || s == 0, "%s: ALTI row %d of layer %d sums to %g", dir, i, l, s);
                ck_assert_msg(fabs(sa - 1) < 1e-5, "%s: rollout row %d of layer %d sums to %g", dir, i, l, sa);
            }
        }
        ck_assert_msg(worst_r < 2e-5 && worst_c < 2e-5, "%s [%s]: rollout %g, ALTI layer %g from the definitions", dir,
                      KERNELS[k], worst_r, worst_c);
        if (!first_alti.agg) first_alti = alti, alti.agg = alti.layer = NULL;
        else
            ck_assert_msg(!memcmp(first_alti.agg, alti.agg, (size_t)L * n * n * sizeof *alti.agg),
                          "%s: ALTI differs on the %s kernel", dir, KERNELS[k]);
        mix_free(&alti), mix_free(&roll);
        free(R), free(C);
        run_free(&r);
    }
    mix_free(&first_alti);
    gemm_force_kernel(NULL);
}
END_TEST

/* The engine's kept stream entries: each block's median |x| and largest entries, as a sort of the hidden
 * states says; the sink shares as the attention says. */
START_TEST(flags_follow_the_stream_and_the_attention) {
    const char *dir = FIXTURES[_i];
    Run r;
    run_fixture(&r, dir, 1);
    const int H = r.m.cfg.hidden_size, B = r.m.cfg.num_layers + 1;
    ck_assert_int_eq(r.cap.act_blocks, B);
    float *v = malloc((size_t)N * H * sizeof *v);
    for (int b = 0; b < B; b++) {
        /* block b is the stream entering layer b (resid), after the last layer the final stream */
        const float *x = cap_resid(&r.cap, b);
        for (int q = 0; q < N * H; q++) v[q] = fabsf(x[q]);
        /* the median: at most half the entries below it and at most half above */
        const float med = r.cap.act_median[b];
        int below = 0, above = 0;
        for (int q = 0; q < N * H; q++) below += v[q] < med, above += v[q] > med;
        ck_assert_msg(below <= N * H / 2 && above <= N * H / 2, "%s block %d: median %g has %d below, %d above", dir, b, med,
                      below, above);
        /* the largest: no entry outside the kept ones is larger than the smallest kept */
        const float *kept = r.cap.act_val + (size_t)b * CAP_ACT_TOP;
        for (int k = 0; k < CAP_ACT_TOP; k++) {
            const int t = r.cap.act_tok[b * CAP_ACT_TOP + k], d = r.cap.act_dim[b * CAP_ACT_TOP + k];
            ck_assert(t >= 0 && t < N && d >= 0 && d < H && x[t * H + d] == kept[k]);
            if (k) ck_assert(fabsf(kept[k]) <= fabsf(kept[k - 1]));
        }
        int larger = 0;
        for (int q = 0; q < N * H; q++) larger += v[q] > fabsf(kept[CAP_ACT_TOP - 1]);
        ck_assert_int_le(larger, CAP_ACT_TOP);
    }
    free(v);
    FlagsResult f;
    AvErr e;
    ck_assert_int_eq(flags_compute(&r.cap, NULL, 0, NULL, 0, &f, &e), 0);
    for (int l = 0; l < r.cap.n_layers; l++)
        for (int h = 0; h < r.cap.n_heads; h++) {
            double s = 0;
            for (int i = 1; i < N; i++) s += cap_attn(&r.cap, l, h)[i * N];
            ck_assert(fabs(f.first[l * r.cap.n_heads + h] - s / (N - 1)) < 1e-6);
            ck_assert(!f.learned == !r.cap.sinks);
        }
    flags_free(&f);
    run_free(&r);
}
END_TEST

/* --explain on every family, pre- and post-norm (BERT: its LayerNorms frozen, every part taken through them): the
 * parts sum to the score within 1e-5 relative, the score is the capture's own q.k (scaled) within 1e-5, the
 * rounding part is below 1e-5 of the stream. */
START_TEST(explain_parts_sum_to_the_score) {
    const char *dir = FIXTURES[_i];
    Run r;
    run_fixture(&r, dir, 1);
    const int L = r.m.cfg.num_layers;
    for (int h = 0; h < r.m.cfg.num_heads; h++) {
        ExplainResult x;
        AvErr e;
        ck_assert_msg(explain_head(&r.m, &r.cap, L - 1, h, -1, -1, &x, &e) == 0, "%s: %s", dir, e.msg);
        ck_assert_int_eq(x.n_parts, 1 + (L - 1) * (r.m.cfg.num_heads + 1) + 2);
        ck_assert_msg(x.rest < 1e-5, "%s: the rounding part is %g of the stream", dir, x.rest);
        ck_assert_msg(x.qk_check >= 0 && x.qk_check < 1e-5, "%s head %d: q/k %g from the capture's", dir, h, x.qk_check);
        for (int p = 0; p < x.n_pairs; p++) {
            const ExplainPair *pr = &x.pairs[p];
            ck_assert_msg(fabs(pr->parts_sum - pr->score) <= 1e-5 * fmax(fabs(pr->score), 1e-3), "%s head %d pair %d: %g vs %g",
                          dir, h, p, pr->parts_sum, pr->score);
            double qk = 0;
            for (int d = 0; d < r.cap.head_dim; d++)
                qk += (double)cap_q(&r.cap, L - 1, h)[pr->query * r.cap.head_dim + d] * cap_k(&r.cap, L - 1, h)[pr->key * r.cap.head_dim + d];
            ck_assert_msg(fabs(qk * x.scale - pr->score) <= 1e-5 * fmax(fabs(pr->score), 1), "%s: score %g, capture %g", dir,
                          pr->score, qk * x.scale);
            ck_assert(pr->query >= 1 && pr->key >= 1);
        }
        explain_free(&x);
    }
    /* a pair given, and positions outside the input refused */
    ExplainResult x;
    AvErr e;
    ck_assert_int_eq(explain_head(&r.m, &r.cap, L - 1, 0, N - 1, 2, &x, &e), 0);
    ck_assert_int_eq(x.n_pairs, 1);
    ck_assert(x.pairs[0].query == N - 1 && x.pairs[0].key == 2);
    explain_free(&x);
    ck_assert_int_eq(explain_head(&r.m, &r.cap, L - 1, 0, N, -1, &x, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    run_free(&r);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("mixing");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 300);
    const int nf = (int)(sizeof FIXTURES / sizeof FIXTURES[0]);
    tcase_add_loop_test(t, alti_and_rollout_follow_their_definitions, 0, nf);
    tcase_add_loop_test(t, flags_follow_the_stream_and_the_attention, 0, nf);
    tcase_add_loop_test(t, explain_parts_sum_to_the_score, 0, nf);
    suite_add_tcase(s, t);
    return s;
}
