/* test_flow.c — flow.c: the proximity against its definition; on every
 * decoder fixture the formula applies to (GPT-2, Llama, Qwen2, Qwen3,
 * Mistral, Phi-3), each layer's shares against a naive computation that
 * rebuilds every part from the weights (values row by row, the output
 * projection per head, the whole as x_i + the parts + b_O); the graph's
 * invariants; the refusals (Gemma's sandwich norm, thresholds outside (0, 1)).
 * The paper's formula over transformers' hooks is the reference in
 * tests/ref/flow_check.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "check_util.h"
#include "flow.h"
#include "kernels.h"
#include "model.h"

START_TEST(proximity_is_the_l1_closeness_clipped_at_zero) {
    const double y[3] = {1, -2, 3};
    const float p[3] = {1, 0, 1}, far[3] = {-4, 5, -6};
    /* ||y||_1 = 6; y - 0.5 p = (0.5, -2, 2.5): 5 -> 1 */
    ck_assert_double_eq_tol(flow_proximity(y, 6, p, 0.5, 3), 1.0, 1e-12);
    ck_assert_double_eq_tol(flow_proximity(y, 6, p, 0, 3), 0.0, 1e-12); /* a zero part */
    ck_assert_double_eq_tol(flow_proximity(y, 6, far, 1, 3), 0.0, 1e-12); /* farther than nothing: 0, not negative */
    const float same[3] = {1, -2, 3};
    ck_assert_double_eq_tol(flow_proximity(y, 6, same, 1, 3), 6.0, 1e-12); /* the whole itself */
}
END_TEST

static const char *FIXTURES[] = {"tests/data/small-gpt2", "tests/data/small-llama", "tests/data/small-qwen2",
                                 "tests/data/small-qwen3", "tests/data/small-mistral", "tests/data/small-phi3",
                                 "tests/data/small-gptoss"};

enum { N = 12 };

typedef struct {
    Model m;
    RunState rs;
    Capture cap;
    int ids[N];
} Fix;

static void fix_open(Fix *f, const char *dir) {
    AvErr e;
    if (model_load(&f->m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    for (int i = 0; i < N; i++) f->ids[i] = (i * 7 + 3) % f->m.cfg.vocab_size;
    ck_assert_int_eq(model_runstate_alloc(&f->rs, &f->m, N, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&f->cap, &f->m.cfg, N, 0, 0, &e), 0);
    ck_assert_int_eq(model_capture_internals(&f->cap, &f->m.cfg, &e), 0);
    if (model_forward_kv(&f->m, &f->rs, NULL, f->ids, NULL, N, &f->cap, 1, &e)) ck_abort_msg("forward: %s", e.msg);
}

static void fix_close(Fix *f) {
    model_capture_free(&f->cap);
    model_runstate_free(&f->rs);
    model_free(&f->m);
}

/* shares of layer l at query i the slow way: (n, NH) attention, residual; the MLP's */
static void naive_shares(const Fix *f, int l, int i, double *sa, double *sr, double *sm) {
    const ModelConfig *c = &f->m.cfg;
    const int H = c->hidden_size, NH = c->num_heads, dh = c->head_dim, KVD = c->num_kv_heads * dh, QW = NH * dh;
    const LayerWeights *lw = &f->m.w.layers[l];
    AvErr e;
    float *xn = malloc((size_t)N * H * sizeof *xn), *row = malloc((size_t)(H > QW ? H : QW) * sizeof *row);
    double *v = calloc((size_t)N * KVD, sizeof *v), *fv = calloc((size_t)N * NH * H, sizeof *fv);
    double *mid = malloc((size_t)H * sizeof *mid);
    const float *x = cap_resid(&f->cap, l);
    memcpy(xn, x, (size_t)N * H * sizeof *xn);
    if (lw->attn_norm.g) kern_norm_naive(xn, &lw->attn_norm, N, H);
    for (int d = 0; d < KVD; d++) {
        ck_assert_int_eq(model_linear_row(&lw->v, d, row, &e), 0);
        for (int j = 0; j < N; j++) {
            double a = lw->v.b ? lw->v.b[d] : 0;
            for (int k = 0; k < H; k++) a += (double)row[k] * xn[(size_t)j * H + k];
            v[(size_t)j * KVD + d] = a;
        }
    }
    for (int k = 0; k < H; k++) {
        ck_assert_int_eq(model_linear_row(&lw->o, k, row, &e), 0);
        mid[k] = x[(size_t)i * H + k] + (lw->o.b ? lw->o.b[k] : 0);
        for (int j = 0; j < N; j++)
            for (int h = 0; h < NH; h++) {
                const int kv = h / (NH / c->num_kv_heads);
                double a = 0;
                for (int d = 0; d < dh; d++) a += (double)row[h * dh + d] * v[(size_t)j * KVD + kv * dh + d];
                fv[((size_t)j * NH + h) * H + k] = a;
                mid[k] += cap_attn(&f->cap, l, h)[(size_t)i * N + j] * a;
            }
    }
    double y1 = 0, sum = 0;
    for (int k = 0; k < H; k++) y1 += fabs(mid[k]);
    for (int j = 0; j < N; j++)
        for (int h = 0; h < NH; h++) {
            const double al = cap_attn(&f->cap, l, h)[(size_t)i * N + j];
            double d = 0;
            for (int k = 0; k < H; k++) d += fabs(mid[k] - al * fv[((size_t)j * NH + h) * H + k]);
            sa[j * NH + h] = al == 0 || y1 - d < 0 ? 0 : y1 - d;
            sum += sa[j * NH + h];
        }
    double d = 0;
    for (int k = 0; k < H; k++) d += fabs(mid[k] - x[(size_t)i * H + k]);
    *sr = y1 - d > 0 ? y1 - d : 0;
    sum += *sr;
    for (int t = 0; t < N * NH; t++) sa[t] /= sum;
    *sr /= sum;
    /* the MLP block: post = mid + mlp */
    const float *mo = cap_mlp(&f->cap, l) + (size_t)i * H;
    double p1 = 0, dm = 0, dr = 0;
    for (int k = 0; k < H; k++) {
        const double post = mid[k] + mo[k];
        p1 += fabs(post), dm += fabs(post - mo[k]), dr += fabs(post - mid[k]);
    }
    const double pm = p1 - dm > 0 ? p1 - dm : 0, pr = p1 - dr > 0 ? p1 - dr : 0;
    *sm = pm / (pm + pr);
    free(xn), free(row), free(v), free(fv), free(mid);
}

START_TEST(layer_shares_match_the_naive_formula_in_every_family) {
    Fix f;
    AvErr e;
    fix_open(&f, FIXTURES[_i]);
    const int NH = f.m.cfg.num_heads, L = f.m.cfg.num_layers;
    ck_assert_int_eq(flow_supported(&f.m, &e), 0);
    int qs[N];
    for (int i = 0; i < N; i++) qs[i] = i;
    float *sa = malloc((size_t)N * N * NH * sizeof *sa), sr[N], sm[N];
    double *na = malloc((size_t)N * NH * sizeof *na), nr, nm, worst = 0;
    for (int l = 0; l < L; l++) {
        if (flow_layer_shares(&f.m, &f.cap, l, qs, N, sa, sr, sm, &e)) ck_abort_msg("%s: %s", FIXTURES[_i], e.msg);
        for (int i = 0; i < N; i++) {
            naive_shares(&f, l, i, na, &nr, &nm);
            double total = sr[i];
            for (int t = 0; t < N * NH; t++) {
                const float s = sa[(size_t)i * N * NH + t];
                ck_assert(s >= 0 && s <= 1);
                if (t / NH > i) ck_assert(s == 0); /* causal: no share from later tokens */
                worst = fmax(worst, fabs(s - na[t]));
                total += s;
            }
            ck_assert_double_eq_tol(total, 1, 1e-5);
            worst = fmax(worst, fmax(fabs(sr[i] - nr), fabs(sm[i] - nm)));
        }
        /* a subset of the queries gets the same rows */
        const int some[2] = {3, 9};
        float sa2[2 * N * 64], sr2[2], sm2[2];
        ck_assert_int_le(NH, 64);
        ck_assert_int_eq(flow_layer_shares(&f.m, &f.cap, l, some, 2, sa2, sr2, sm2, &e), 0);
        for (int a = 0; a < 2; a++) {
            ck_assert_float_eq_tol(sr2[a], sr[some[a]], 1e-6);
            ck_assert_float_eq_tol(sm2[a], sm[some[a]], 1e-6);
            for (int t = 0; t < N * NH; t++)
                ck_assert_float_eq_tol(sa2[(size_t)a * N * NH + t], sa[(size_t)some[a] * N * NH + t], 1e-6);
        }
    }
    ck_assert_msg(worst <= 1e-5, "%s: shares %g off the naive formula", FIXTURES[_i], worst);
    free(sa), free(na);
    fix_close(&f);
}
END_TEST

/* every edge above the threshold, every node reached from the output token, and a
 * higher threshold a subgraph */
START_TEST(routes_are_traced_from_the_output_token) {
    Fix f;
    AvErr e;
    fix_open(&f, FIXTURES[_i]);
    const int L = f.m.cfg.num_layers, NH = f.m.cfg.num_heads;
    FlowResult lo = {0}, hi = {0};
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, 0, L - 1, N - 2, 0.01, &lo, &e), 0);
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, 0, L - 1, N - 2, 0.1, &hi, &e), 0);
    ck_assert(lo.on && lo.position == N - 2 && lo.lo == 0 && lo.hi == L - 1);
    ck_assert_int_gt(lo.n_edges, hi.n_edges);
    ck_assert_int_gt(hi.n_edges, 0);
    unsigned char reached[64][N + 1];
    ck_assert_int_le(L, 63);
    memset(reached, 0, sizeof reached);
    reached[L][N - 2] = 1; /* the output node above the top layer */
    for (int k = 0; k < lo.n_edges; k++) {
        const FlowEdge *ed = &lo.edges[k];
        ck_assert(ed->weight > 0 && ed->weight <= 1);
        ck_assert(ed->from <= ed->to && ed->to < N);
        ck_assert_msg(reached[ed->layer + 1][ed->to], "edge into an unreached node: layer %d token %d", ed->layer, ed->to);
        if (ed->kind == FLOW_ATTN) {
            ck_assert(ed->head >= 0 && ed->head < NH);
            reached[ed->layer][ed->from] = 1;
        } else {
            ck_assert(ed->head == -1 && ed->from == ed->to);
            if (ed->kind == FLOW_MLP) ck_assert(ed->weight > 0.01);
            else reached[ed->layer][ed->from] = 1; /* the residual carries token i's own stream down */
        }
        if (k) ck_assert_int_le(ed->layer, lo.edges[k - 1].layer); /* traced from the top down */
    }
    /* the 0.1 graph's pairs are among the 0.01 graph's, with the same weights */
    for (int k = 0; k < hi.n_edges; k++) {
        int found = 0;
        for (int t = 0; t < lo.n_edges && !found; t++) {
            const FlowEdge *a = &hi.edges[k], *b = &lo.edges[t];
            found = a->layer == b->layer && a->from == b->from && a->to == b->to && a->head == b->head &&
                    a->kind == b->kind && a->weight == b->weight;
        }
        ck_assert_msg(found, "edge %d of the 0.1 graph is not in the 0.01 one", k);
    }
    /* one layer only: its edges end at the output token */
    FlowResult one = {0};
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, L - 1, L - 1, 4, 0.04, &one, &e), 0);
    for (int k = 0; k < one.n_edges; k++) ck_assert(one.edges[k].layer == L - 1 && one.edges[k].to == 4);
    flow_free(&one), flow_free(&lo), flow_free(&hi);
    fix_close(&f);
}
END_TEST

START_TEST(bad_requests_are_refused) {
    Fix f;
    AvErr e;
    FlowResult r = {0};
    fix_open(&f, "tests/data/small-llama");
    const double bad[] = {0, 1, -0.5, 2, NAN};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_int_eq(flow_routes(&f.m, &f.cap, 0, 1, 3, bad[k], &r, &e), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        ck_assert_ptr_nonnull(strstr(e.msg, "threshold in (0, 1)"));
    }
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, 0, 1, N, 0.04, &r, &e), -1);
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, 1, 0, 3, 0.04, &r, &e), -1);
    ck_assert_int_eq(flow_routes(&f.m, &f.cap, 0, f.m.cfg.num_layers, 3, 0.04, &r, &e), -1);
    /* a capture without the residual stream, or without every head's matrix */
    Capture plain;
    ck_assert_int_eq(model_capture_alloc(&plain, &f.m.cfg, N, 0, 0, &e), 0);
    ck_assert_int_eq(flow_routes(&f.m, &plain, 0, 1, 3, 0.04, &r, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not captured"));
    model_capture_free(&plain);
    flow_free(&r);
    fix_close(&f);
    /* Gemma 2's sandwich norm: no sum of parts */
    Model g;
    if (model_load(&g, "tests/data/small-gemma2", &e) != 0) ck_abort_msg("load: %s", e.msg);
    ck_assert_int_eq(flow_supported(&g, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(e.msg, "sandwich norm"));
    model_free(&g);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("flow");
    TCase *tc = tcase_create("flow");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, proximity_is_the_l1_closeness_clipped_at_zero);
    const int nf = (int)(sizeof FIXTURES / sizeof FIXTURES[0]);
    tcase_add_loop_test(tc, layer_shares_match_the_naive_formula_in_every_family, 0, nf);
    tcase_add_loop_test(tc, routes_are_traced_from_the_output_token, 0, nf);
    tcase_add_test(tc, bad_requests_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
