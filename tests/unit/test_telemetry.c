/* test_telemetry.c — engine/telemetry.c: each query row's statistics and
 * heaviest keys, taken as the rows are made (capture.h). On every committed
 * fixture family (causal, windowed, soft-capped, bidirectional, grouped
 * queries), a pass that keeps only telemetry gives the statistics of the
 * full pass's matrices by their definitions (model_telemetry_row_naive, in
 * double precision) and the same heaviest keys; packed inputs give what each
 * gives alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "kernels.h"
#include "model.h"
#include "check_util.h"

static const char *FIXTURES[] = {"tests/data/small-f32",   "tests/data/small-llama",   "tests/data/small-gpt2",
                                 "tests/data/small-gemma2", "tests/data/small-gemma3", "tests/data/small-phi3",
                                 "tests/data/small-distilbert", "tests/data/small-qwen3", "tests/data/small-modernbert",
                                 "tests/data/small-electra", "tests/data/small-gptoss"};
enum { TOP = 5 };

/* n token ids of m's vocabulary, with repeats (the duplicate share needs them). */
static int *some_ids(const Model *m, int n, unsigned seed) {
    int *ids = malloc(sizeof(int) * (size_t)n);
    ck_assert_ptr_nonnull(ids);
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = (int)((seed >> 8) % (unsigned)(m->cfg.vocab_size < 12 ? m->cfg.vocab_size : 12));
    }
    return ids;
}

/* Row i of a full matrix: its heaviest keys, ties to the earlier key. */
static void naive_top(const float *p, int ncols, int *key, float *w) {
    for (int k = 0; k < TOP; k++) key[k] = -1, w[k] = 0;
    for (int k = 0; k < TOP; k++)
        for (int j = 0; j < ncols; j++) {
            if (!(p[j] > 0)) continue;
            int taken = 0;
            for (int q = 0; q < k; q++) taken |= key[q] == j;
            if (!taken && (key[k] < 0 || p[j] > w[k])) key[k] = j, w[k] = p[j];
        }
}

START_TEST(telemetry_without_matrices_gives_the_full_matrices_statistics) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int n = m.cfg.max_position_embeddings && m.cfg.max_position_embeddings < 113 ? m.cfg.max_position_embeddings : 113;
    int *ids = some_ids(&m, n, 7u + (unsigned)_i), *types = calloc((size_t)n, sizeof(int));
    ck_assert_ptr_nonnull(types);
    RunState rs;
    Capture full, tel;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 0, 0, &e), 0);
    ck_assert_msg(model_forward(&m, &rs, ids, types, n, &full, &e) == 0, "%s: %s", dir, e.msg);
    ck_assert_int_eq(model_capture_telemetry(&tel, &m.cfg, n, TOP, ids, NULL, 0, NULL, 0, &e), 0);
    ck_assert_ptr_null(tel.attn);
    ck_assert_msg(model_forward(&m, &rs, ids, types, n, &tel, &e) == 0, "%s: %s", dir, e.msg);
    double worst = 0;
    int dups = 0;
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int h = 0; h < m.cfg.num_heads; h++)
            for (int i = 0; i < n; i++) {
                const float *row = cap_attn(&full, l, h) + (size_t)i * n;
                double want[CAP_TEL_N];
                model_telemetry_row_naive(row, n, i, ids, want);
                const float *got = cap_tel(&tel, l, h) + (size_t)i * CAP_TEL_N;
                for (int k = 0; k < CAP_TEL_N; k++) worst = fmax(worst, fabs(got[k] - want[k]) / (k == CAP_TEL_DISTANCE ? n : 1));
                dups += want[CAP_TEL_DUP] > 0;
                int key[TOP];
                float w[TOP];
                naive_top(row, n, key, w);
                const size_t at = (cap_block(&tel, l, h) * (size_t)n + (size_t)i) * TOP;
                ck_assert_msg(!memcmp(key, tel.tel_top + at, sizeof key) && !memcmp(w, tel.tel_top_w + at, sizeof w),
                              "%s L%d H%d row %d: top keys %d %d %d vs %d %d %d", dir, l, h, i, tel.tel_top[at],
                              tel.tel_top[at + 1], tel.tel_top[at + 2], key[0], key[1], key[2]);
            }
    /* float statistics of float weights: within 1e-6 (distance relative to n) */
    ck_assert_msg(worst < 1e-6, "%s: telemetry differs from the definitions by %g", dir, worst);
    ck_assert_msg(dups > 0, "%s: the input has no repeated token for the duplicate share", dir);
    fprintf(stderr, "INFO %s: %s, %d tokens: telemetry within %.1e of the full matrices' statistics\n", __func__, dir, n,
            worst);
    model_capture_free(&full);
    model_capture_free(&tel);
    model_runstate_free(&rs);
    model_free(&m);
    free(ids);
    free(types);
}
END_TEST

START_TEST(packed_and_selected_telemetry_is_what_each_input_gives_alone) {
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-llama", &e), 0);
    const int lens[2] = {50, 31}, n = 81, layers[1] = {1}, heads[2] = {3, 0};
    int *ids = some_ids(&m, n, 99);
    RunState rs;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    Capture packed[2], alone;
    ck_assert_int_eq(model_capture_telemetry(&packed[0], &m.cfg, lens[0], 3, ids, layers, 1, heads, 2, &e), 0);
    ck_assert_int_eq(model_capture_telemetry(&packed[1], &m.cfg, lens[1], 3, ids + lens[0], layers, 1, heads, 2, &e), 0);
    Capture *const caps[2] = {&packed[0], &packed[1]};
    ck_assert_msg(model_forward_packed(&m, &rs, ids, NULL, lens, 2, caps, &e) == 0, "%s", e.msg);
    for (int g = 0; g < 2; g++) {
        const int *gi = ids + (g ? lens[0] : 0);
        ck_assert_int_eq(model_capture_telemetry(&alone, &m.cfg, lens[g], 3, gi, layers, 1, heads, 2, &e), 0);
        ck_assert_int_eq(model_forward(&m, &rs, gi, NULL, lens[g], &alone, &e), 0);
        const size_t rows = cap_blocks(&alone) * (size_t)lens[g];
        ck_assert_uint_eq(cap_blocks(&alone), 2);
        ck_assert(!memcmp(alone.tel, packed[g].tel, rows * CAP_TEL_N * sizeof(float)));
        ck_assert(!memcmp(alone.tel_top, packed[g].tel_top, rows * 3 * sizeof(int)));
        ck_assert(!memcmp(alone.tel_top_w, packed[g].tel_top_w, rows * 3 * sizeof(float)));
        model_capture_free(&alone);
    }
    model_capture_free(&packed[0]);
    model_capture_free(&packed[1]);
    AvErr e2;
    ck_assert_int_eq(model_capture_telemetry(&alone, &m.cfg, 4, CAP_TEL_MAX_TOP + 1, ids, NULL, 0, NULL, 0, &e2), -1);
    ck_assert_ptr_nonnull(strstr(e2.msg, "outside 0..64"));
    model_runstate_free(&rs);
    model_free(&m);
    free(ids);
}
END_TEST

/* Long rows (thousands of keys, many blocks): the statistics and heaviest
 * keys taken from what the softmax learnt of each row (KernRowStats: moments
 * and block weights) are those of sweeping the rows, which are the
 * definitions', on causal, windowed, bidirectional and sink rules. */
typedef struct {
    Capture *cap;
    const AttnRule *rule;
    int use_stats;
} TelRows;

static void tel_rows(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    const TelRows *t = ctx;
    ck_assert_ptr_nonnull(st);
    model_telemetry_rows(t->cap, 0, 0, i0, probs, ldp, i1 - i0, ldp, t->rule, t->use_stats ? st : NULL);
}

START_TEST(long_rows_from_the_softmax_give_the_swept_statistics_and_keys) {
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-llama", &e), 0);
    const int n = 1500, dh = 16, layers[1] = {0}, heads[1] = {0};
    enum { K = 8 };
    int *ids = some_ids(&m, n, 5);
    float *q = malloc(sizeof(float) * n * dh), *k = malloc(sizeof(float) * n * dh);
    float *block = malloc(sizeof(float) * kern_attention_rows() * n), *full = malloc(sizeof(float) * n * n);
    ck_assert(q && k && block && full);
    const AttnRule rules[] = {{.scale = 0.3f, .causal = 1}, {.scale = 0.3f, .causal = 1, .window = 700},
                              {.scale = 0.3f, .window = 200, .bidir = 1}, {.scale = 0.3f, .causal = 1, .has_sink = 1, .sink = 2.0f},
                              {.scale = 0.3f, .causal = 1, .softcap = 5.0f}};
    double worst_c[2] = {0, 0}; /* swept, from the softmax */
    int worst_f[2] = {0, 0};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        unsigned seed = 17u + (unsigned)r;
        for (int i = 0; i < n * dh; i++) {
            seed = seed * 1103515245u + 12345u;
            q[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
            seed = seed * 1103515245u + 12345u;
            k[i] = ((float)((seed >> 9) % 2001) / 1000.0f - 1.0f) * (r % 2 ? 4.0f : 1.0f);
        }
        Capture cap[2];
        for (int c = 0; c < 2; c++) {
            ck_assert_int_eq(model_capture_telemetry(&cap[c], &m.cfg, n, K, ids, layers, 1, heads, 1, &e), 0);
            cap[c].n_tokens = n;
            model_telemetry_begin(&cap[c], n);
            TelRows t = {&cap[c], &rules[r], c};
            kern_attention_kv_rows(block, n, NULL, q, n, k, NULL, n, n, dh, &rules[r], NULL, tel_rows, &t, 1);
        }
        kern_attention_kv(full, n, NULL, q, n, k, NULL, n, n, dh, &rules[r], NULL);
        const size_t rows = (size_t)n;
        ck_assert_msg(!memcmp(cap[0].tel_top, cap[1].tel_top, rows * K * sizeof(int)), "rule %zu: heaviest keys differ", r);
        ck_assert_msg(!memcmp(cap[0].tel_top_w, cap[1].tel_top_w, rows * K * sizeof(float)), "rule %zu: their weights differ", r);
        for (int i = 0; i < n; i++) {
            double want[CAP_TEL_N];
            model_telemetry_row_naive(full + (size_t)i * n, n, i, ids, want);
            for (int c = 0; c < 2; c++)
                for (int f = 0; f < CAP_TEL_N; f++) {
                    /* relative to the value past 1 (a float entropy of 7 is already 2e-7 off) */
                    const double d = fabs(cap[c].tel[(size_t)i * CAP_TEL_N + f] - want[f]) / fmax(1.0, fabs(want[f]));
                    if (d > worst_c[c]) worst_c[c] = d, worst_f[c] = f;
                }
            int key[K];
            float w[K];
            for (int kk = 0; kk < K; kk++) key[kk] = -1, w[kk] = 0;
            for (int kk = 0; kk < K; kk++) /* the definition: the K heaviest, ties to the earlier key */
                for (int j = 0; j < n; j++) {
                    const float x = full[(size_t)i * n + j];
                    int taken = 0;
                    for (int qq = 0; qq < kk; qq++) taken |= key[qq] == j;
                    if (x > 0 && !taken && (key[kk] < 0 || x > w[kk])) key[kk] = j, w[kk] = x;
                }
            ck_assert_msg(!memcmp(key, cap[1].tel_top + (size_t)i * K, sizeof key), "rule %zu row %d: keys %d %d vs %d %d", r,
                          i, cap[1].tel_top[(size_t)i * K], cap[1].tel_top[(size_t)i * K + 1], key[0], key[1]);
        }
        model_capture_free(&cap[0]);
        model_capture_free(&cap[1]);
    }
    ck_assert_msg(worst_c[0] < 5e-7 && worst_c[1] < 5e-7, "long rows' telemetry differs from the definitions by %g (swept), %g",
                  worst_c[0], worst_c[1]);
    fprintf(stderr, "INFO %s: %d tokens, 5 rules: swept within %.1e (field %d), from the softmax %.1e (field %d) of the definitions, the same keys\n",
            __func__, n, worst_c[0], worst_f[0], worst_c[1], worst_f[1]);
    model_free(&m);
    free(ids), free(q), free(k), free(block), free(full);
}
END_TEST

START_TEST(row_statistics_by_their_definitions) {
    /* query 3 over keys 0..3 of a causal row; ids repeat token 7 at keys 1 and 3 */
    const float p[4] = {0.5f, 0.25f, 0.125f, 0.125f};
    const int ids[4] = {1, 7, 2, 7};
    double s[CAP_TEL_N];
    model_telemetry_row_naive(p, 4, 3, ids, s);
    ck_assert_double_eq(s[CAP_TEL_SINK], 0.5);
    ck_assert_double_eq(s[CAP_TEL_SINK4], 1.0);
    ck_assert_double_eq(s[CAP_TEL_PREV], 0.125);
    ck_assert_double_eq(s[CAP_TEL_SELF], 0.125);
    ck_assert_double_eq(s[CAP_TEL_DUP], 0.25);
    ck_assert_double_eq_tol(s[CAP_TEL_DISTANCE], 0.5 * 3 + 0.25 * 2 + 0.125 * 1, 1e-15);
    ck_assert_double_eq_tol(s[CAP_TEL_ENTROPY], 0.5 * log(2) + 0.25 * log(4) + 0.25 * log(8), 1e-15);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("telemetry");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, row_statistics_by_their_definitions);
    tcase_add_loop_test(t, telemetry_without_matrices_gives_the_full_matrices_statistics, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(t, packed_and_selected_telemetry_is_what_each_input_gives_alone);
    tcase_add_test(t, long_rows_from_the_softmax_give_the_swept_statistics_and_keys);
    suite_add_tcase(s, t);
    return s;
}
