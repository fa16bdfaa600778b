/* test_normattn.c — value-weighted attention (--measure norm): the value norms
 * the forward pass computes (capture.h's vnorm) are the same alone, packed,
 * with a selection and a token at a time against a cache, in every fixture
 * family; normattn.h's matrices and shares; the --no-special / --words views
 * of them (transform.h). Against transformers: tests/ref/norm_check.sh; the
 * kernel against its naive reference on every path: test_kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "gemm.h"
#include "model.h"
#include "normattn.h"
#include "transform.h"
#include "check_util.h"

static const char *FIXTURES[] = {"tests/data/small-f32",   "tests/data/small-bf16",     "tests/data/small-gpt2",
                                 "tests/data/small-gpt2-f16", "tests/data/small-roberta", "tests/data/small-distilbert",
                                 "tests/data/small-llama", "tests/data/small-qwen2",    "tests/data/small-qwen3",
                                 "tests/data/small-mistral", "tests/data/small-gemma2",  "tests/data/small-gemma3",
                                 "tests/data/small-phi3", "tests/data/small-gptoss"};

static void make_ids(const Model *m, int *ids, int *types, int n, int salt) {
    for (int i = 0; i < n; i++) {
        ids[i] = (5 + 11 * i + salt) % m->cfg.vocab_size;
        if (m->cfg.pos_offset > 0 && ids[i] == m->cfg.pad_token_id) ids[i] = (ids[i] + 1) % m->cfg.vocab_size;
        types[i] = 0;
    }
}

static Capture capture_norms(const Model *m, int n, const int *layers, int nl, const int *heads, int nh) {
    Capture c;
    AvErr e;
    if (model_capture_select(&c, &m->cfg, n, 0, 0, layers, nl, heads, nh, &e) || model_capture_value_norms(&c, &e))
        ck_abort_msg("capture: %s", e.msg);
    return c;
}

/* One input's value norms: positive and finite; bit for bit the same when it
 * is packed between two others (the products round each output the same way
 * whatever shares the pass) and when only one layer and head are kept (the
 * last kept layer, whose values the pass computes only for the norms); and,
 * causal models, within 1e-5 relative when run a token at a time against the
 * key/value cache (matrix-vector products round differently). */
START_TEST(value_norms_are_the_same_alone_packed_selected_and_cached) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    enum { N = 13, A = 4, B = 6 }; /* the prompt below (N - 3) is past Phi-3's original 8 positions: long factors throughout */
    int ids[A + N + B], types[A + N + B];
    make_ids(&m, ids, types, A + N + B, 3);
    RunState rs;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, A + N + B, 0, &e), 0);
    Capture alone = capture_norms(&m, N, NULL, 0, NULL, 0);
    if (model_forward(&m, &rs, ids + A, types + A, N, &alone, &e)) ck_abort_msg("%s: %s", dir, e.msg);
    const int L = m.cfg.num_layers, H = m.cfg.num_heads;
    for (size_t i = 0; i < (size_t)L * H * N; i++)
        ck_assert_msg(isfinite(alone.vnorm[i]) && alone.vnorm[i] > 0, "%s: norm %zu is %g", dir, i, alone.vnorm[i]);
    /* packed: the input between two others */
    const int lens[3] = {A, N, B};
    Capture pc[3] = {capture_norms(&m, A, NULL, 0, NULL, 0), capture_norms(&m, N, NULL, 0, NULL, 0),
                     capture_norms(&m, B, NULL, 0, NULL, 0)};
    Capture *pp[3] = {&pc[0], &pc[1], &pc[2]};
    if (model_forward_packed(&m, &rs, ids, types, lens, 3, pp, &e)) ck_abort_msg("packed %s: %s", dir, e.msg);
    ck_assert_msg(!memcmp(pc[1].vnorm, alone.vnorm, sizeof(float) * L * H * N), "%s: packed norms differ by %g", dir,
                  max_abs_diff(pc[1].vnorm, alone.vnorm, (size_t)L * H * N));
    /* selected: the last layer and one head only (the pass stops there) */
    const int keep_l[1] = {L - 1}, keep_h[1] = {H - 1};
    Capture sel = capture_norms(&m, N, keep_l, 1, keep_h, 1);
    if (model_forward(&m, &rs, ids + A, types + A, N, &sel, &e)) ck_abort_msg("selected %s: %s", dir, e.msg);
    ck_assert(!memcmp(cap_vnorm(&sel, L - 1, H - 1), cap_vnorm(&alone, L - 1, H - 1), sizeof(float) * N));
    /* a token at a time after a prompt (causal models) */
    if (m.cfg.causal) {
        KvCache kv;
        Capture gen = capture_norms(&m, N, NULL, 0, NULL, 0);
        ck_assert_int_eq(model_kv_alloc(&kv, &m.cfg, N, &e), 0);
        if (model_forward_kv(&m, &rs, &kv, ids + A, types + A, N - 3, &gen, 0, &e)) ck_abort_msg("%s: %s", dir, e.msg);
        for (int t = N - 3; t < N; t++)
            if (model_forward_kv(&m, &rs, &kv, ids + A + t, types + A + t, 1, &gen, 0, &e)) ck_abort_msg("%s: %s", dir, e.msg);
        for (size_t i = 0; i < (size_t)L * H * N; i++)
            ck_assert_msg(fabsf(gen.vnorm[i] - alone.vnorm[i]) <= 1e-5f * alone.vnorm[i], "%s: cached norm %zu %g vs %g",
                          dir, i, gen.vnorm[i], alone.vnorm[i]);
        model_kv_free(&kv);
        model_capture_free(&gen);
    }
    for (int g = 0; g < 3; g++) model_capture_free(&pc[g]);
    model_capture_free(&sel);
    model_capture_free(&alone);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

/* One fresh Model's value norms of N tokens (its per-head matrices made by
 * this pass, on the kernel in force and that many threads). */
static void fresh_norms(const char *dir, int N, int threads, Capture *out) {
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    int *ids = malloc(sizeof(int) * N), *types = malloc(sizeof(int) * N);
    ck_assert(ids && types);
    make_ids(&m, ids, types, N, 9);
    RunState rs;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, N, threads, &e), 0);
    ck_assert_int_eq(rs.n_threads, threads);
    *out = capture_norms(&m, N, NULL, 0, NULL, 0);
    ck_assert_msg(model_forward(&m, &rs, ids, types, N, out, &e) == 0, "%s: %s", dir, e.msg);
    ck_assert_ptr_nonnull(m.vgram);
    free(ids), free(types), model_runstate_free(&rs), model_free(&m);
}

/* Every kernel this CPU runs gives the scalar chain's value norms bit for bit
 * (F32, Conv1D, BF16 and F16 output projections), each on a Model of its own
 * so that each kernel makes the per-head matrices too; and so do 1 and 3
 * threads (heads and blocks of tokens shared among them). */
START_TEST(value_norms_are_the_same_bits_on_every_kernel) {
    static const char *const dirs[] = {"tests/data/small-llama", "tests/data/small-gpt2", "tests/data/small-bf16",
                                       "tests/data/small-gpt2-f16"};
    static const char *const kernels[] = {"avx512", "avx2", "neon"};
    enum { N = 50 }; /* past the 48 tokens from which the pass shares its norms among its threads */
    for (size_t f = 0; f < sizeof dirs / sizeof dirs[0]; f++) {
        Capture ref, got;
        ck_assert_int_eq(gemm_force_kernel("scalar"), 0);
        fresh_norms(dirs[f], N, 1, &ref);
        const size_t cnt = cap_blocks(&ref) * N;
        int ran = 1;
        for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
            if (gemm_force_kernel(kernels[k]) != 0) continue;
            ran++;
            fresh_norms(dirs[f], N, 1, &got);
            ck_assert_msg(!memcmp(ref.vnorm, got.vnorm, sizeof(float) * cnt), "%s, %s: differs from scalar by %g", dirs[f],
                          kernels[k], max_abs_diff(ref.vnorm, got.vnorm, cnt));
            model_capture_free(&got);
        }
        ck_assert_int_ge(ran, 2);
        gemm_force_kernel(NULL);
        fresh_norms(dirs[f], N, 3, &got);
        ck_assert_msg(!memcmp(ref.vnorm, got.vnorm, sizeof(float) * cnt), "%s, 3 threads: differs from 1 by %g", dirs[f],
                      max_abs_diff(ref.vnorm, got.vnorm, cnt));
        model_capture_free(&got);
        model_capture_free(&ref);
    }
}
END_TEST

/* A capture without value norms computes none, and its attention is the
 * bits of one with them (the norms only read the pass's values). */
START_TEST(value_norms_leave_the_attention_alone) {
    Model m;
    AvErr e;
    if (model_load(&m, "tests/data/small-llama", &e) != 0) ck_abort_msg("load: %s", e.msg);
    enum { N = 9 };
    int ids[N], types[N];
    make_ids(&m, ids, types, N, 1);
    RunState rs;
    Capture a, b;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, N, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&a, &m.cfg, N, 1, 0, &e), 0);
    b = capture_norms(&m, N, NULL, 0, NULL, 0);
    ck_assert_ptr_null(a.vnorm);
    ck_assert_int_eq(model_forward(&m, &rs, ids, types, N, &a, &e), 0);
    ck_assert_int_eq(model_forward(&m, &rs, ids, types, N, &b, &e), 0);
    ck_assert(!memcmp(a.attn, b.attn, sizeof(float) * cap_blocks(&a) * N * N));
    ck_assert_ptr_null(a.vnorm);
    model_capture_free(&a), model_capture_free(&b), model_runstate_free(&rs), model_free(&m);
}
END_TEST

/* A small hand-made capture: 1 layer, 2 heads, 4 tokens. */
static Capture toy(void) {
    Capture c = {.n_layers = 1, .n_heads = 2, .n_kv_heads = 2, .n_tokens = 4, .head_dim = 2, .cap_tokens = 4};
    c.attn = malloc(sizeof(float) * 2 * 16);
    c.vnorm = malloc(sizeof(float) * 2 * 4);
    ck_assert(c.attn && c.vnorm);
    unsigned seed = 7;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++) {
            float sum = 0;
            for (int j = 0; j < 4; j++) sum += c.attn[b * 16 + i * 4 + j] = 0.1f + fabsf(frand(&seed));
            for (int j = 0; j < 4; j++) c.attn[b * 16 + i * 4 + j] /= sum;
        }
    const float v[8] = {2.0f, 0.5f, 1.0f, 4.0f, 0.25f, 3.0f, 1.5f, 1.0f};
    memcpy(c.vnorm, v, sizeof v);
    return c;
}

/* nattn is attention times the key's norm; the shares are its rows over their
 * sums, and a key whose value is small loses share though its weight is large. */
START_TEST(norm_attention_is_weight_times_value_norm_and_shares_sum_to_one) {
    Capture c = toy();
    AvErr e;
    ck_assert_int_eq(na_fill(&c, &e), 0);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                ck_assert_float_eq(c.nattn[b * 16 + i * 4 + j], c.attn[b * 16 + i * 4 + j] * c.vnorm[b * 4 + j]);
    Capture s;
    ck_assert_int_eq(na_shares_capture(&c, &s, &e), 0);
    ck_assert_ptr_null(s.vnorm);
    ck_assert_ptr_null(s.q);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++) {
            double sum = 0, nsum = 0;
            for (int j = 0; j < 4; j++) sum += s.attn[b * 16 + i * 4 + j], nsum += c.nattn[b * 16 + i * 4 + j];
            ck_assert_double_eq_tol(sum, 1.0, 1e-6);
            for (int j = 0; j < 4; j++)
                ck_assert_double_eq_tol(s.attn[b * 16 + i * 4 + j], c.nattn[b * 16 + i * 4 + j] / nsum, 1e-6);
        }
    /* head 0, key 1 (norm 0.5) vs key 3 (norm 4): same order of weights, shares move to key 3 */
    ck_assert_float_lt(s.attn[1] / s.attn[3], c.attn[1] / c.attn[3]);
    /* a row of zeros stays zeros */
    float z[1] = {0}, zs[2] = {1, 1};
    na_shares(zs, z, 1);
    ck_assert(zs[0] == 0 && zs[1] == 1);
    na_shares_free(&s);
    ck_assert_int_eq(na_fill(&(Capture){.attn = c.attn}, &e), -1);
    model_capture_free(&c);
}
END_TEST

/* --no-special drops the specials' rows and columns of the norm-weighted
 * matrix without renormalizing (rows are norms, not shares) and keeps the
 * other tokens' norms; --words sums a word's key pieces, averages its query
 * pieces and leaves the norms out. Tokens: [CLS] a ##b [SEP]. */
START_TEST(views_drop_and_merge_norm_attention_like_attention_without_renormalizing) {
    Capture c = toy();
    AvErr e;
    ck_assert_int_eq(na_fill(&c, &e), 0);
    int ids[4] = {1, 2, 3, 4}, types[4] = {0};
    const char *toks[4] = {"[CLS]", "a", "##b", "[SEP]"};
    unsigned char ws[4] = {1, 1, 0, 1}, sp[4] = {1, 0, 0, 1}, role[4] = {XF_CLS, XF_NONE, XF_NONE, XF_SEP};
    TokEncoding enc = {.n = 4, .ids = ids, .type_ids = types, .tokens = toks, .word_start = ws, .special = sp,
                       .role = role, .b_start = -1};
    XfView v;
    ck_assert_int_eq(xf_apply(&enc, &c, 1, 0, &v, &e), 0);
    ck_assert_int_eq(v.enc.n, 2);
    ck_assert_ptr_nonnull(v.cap.nattn);
    ck_assert_ptr_nonnull(v.cap.vnorm);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) {
            ck_assert_float_eq(v.cap.vnorm[b * 2 + i], c.vnorm[b * 4 + 1 + i]);
            for (int j = 0; j < 2; j++)
                ck_assert_float_eq(v.cap.nattn[b * 4 + i * 2 + j], c.nattn[b * 16 + (1 + i) * 4 + 1 + j]);
        }
    xf_free(&v);
    ck_assert_int_eq(xf_apply(&enc, &c, 1, 1, &v, &e), 0);
    ck_assert_int_eq(v.enc.n, 1);
    ck_assert_ptr_null(v.cap.vnorm);
    for (int b = 0; b < 2; b++) {
        const float *N = c.nattn + b * 16;
        float want = (N[1 * 4 + 1] + N[1 * 4 + 2] + N[2 * 4 + 1] + N[2 * 4 + 2]) / 2;
        ck_assert_float_eq_tol(v.cap.nattn[b], want, 1e-6f);
    }
    xf_free(&v);
    model_capture_free(&c);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("normattn");
    TCase *t = tcase_create("normattn");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, value_norms_are_the_same_alone_packed_selected_and_cached, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(t, value_norms_are_the_same_bits_on_every_kernel);
    tcase_add_test(t, value_norms_leave_the_attention_alone);
    tcase_add_test(t, norm_attention_is_weight_times_value_norm_and_shares_sum_to_one);
    tcase_add_test(t, views_drop_and_merge_norm_attention_like_attention_without_renormalizing);
    suite_add_tcase(s, t);
    return s;
}
