/* test_scores.c — the score sums --stats and heads take from the rows as the
 * forward pass makes them (capture.h's sc_sum, engine/telemetry.c), against
 * the same scores computed from the full pass's matrices: heads_score_matrix
 * (what heads computes when it keeps the matrices) and --stats' definitions
 * below, on every committed fixture family (causal, windowed, soft-capped,
 * bidirectional, grouped queries), with each of heads' exclusions, a pattern
 * rule and a template, for attention and for value-weighted attention
 * (--measure norm); packed inputs sum what each sums alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "heads.h"
#include "model.h"
#include "normattn.h"
#include "check_util.h"

static const char *FIXTURES[] = {"tests/data/small-f32",   "tests/data/small-llama",   "tests/data/small-gpt2",
                                 "tests/data/small-gemma2", "tests/data/small-gemma3", "tests/data/small-phi3",
                                 "tests/data/small-distilbert", "tests/data/small-qwen3", "tests/data/small-modernbert",
                                 "tests/data/small-electra", "tests/data/small-gptoss"};

/* n token ids with repeats (duplicate and induction need them), a run repeated
 * as the induction score's sequences are. */
static int *some_ids(const Model *m, int n, unsigned seed) {
    int *ids = malloc(sizeof(int) * (size_t)n);
    ck_assert_ptr_nonnull(ids);
    const unsigned v = (unsigned)(m->cfg.vocab_size < 12 ? m->cfg.vocab_size : 12);
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = i >= n / 2 && i < n / 2 + 10 ? ids[i - n / 2 + 3] : (int)((seed >> 8) % v);
    }
    return ids;
}

/* --stats' seven values of one head by their definitions (stats.h), over the rows of A. */
static void stats_reference(const float *A, int n, const unsigned char *role, double *v) {
    double ent = 0, dist = 0, cls = 0, sep = 0, self = 0, prev = 0, next = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const double p = A[(size_t)i * n + j];
            if (p > 0) ent -= p * log(p);
            dist += p * abs(i - j);
            if (role[j] == CAP_ROLE_CLS) cls += p;
            if (role[j] == CAP_ROLE_SEP) sep += p;
            if (j == i) self += p;
            if (j == i - 1) prev += p;
            if (j == i + 1) next += p;
        }
    const double s[7] = {ent / n, dist / n, cls / n, sep / n, self / n, prev / (n - 1), next / (n - 1)};
    memcpy(v, s, sizeof s);
}

/* One fixture, one way of scoring: a pass keeping only the sums against a pass
 * keeping the matrices. Returns the largest difference over every head and score. */
static double compare(const Model *m, const int *ids, int n, const unsigned char *role, int bos, int cur,
                      const HeadsPattern *pat, int norm, int *hits) {
    AvErr e;
    RunState rs;
    Capture full, lean;
    int *types = calloc((size_t)n, sizeof(int));
    ck_assert_ptr_nonnull(types);
    ck_assert_int_eq(model_runstate_alloc(&rs, m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m->cfg, n, 0, 0, &e), 0);
    if (norm) ck_assert_int_eq(model_capture_value_norms(&full, &e), 0);
    ck_assert_msg(model_forward(m, &rs, ids, types, n, &full, &e) == 0, "%s", e.msg);
    HeadScores hs = {0};
    hs.exclude_bos = bos, hs.exclude_current = cur, hs.pattern = *pat;
    CapScoring sc;
    heads_scoring(&hs, &sc);
    sc.norm = norm;
    ck_assert_int_eq(model_capture_scores(&lean, &m->cfg, n, &sc, NULL, 0, NULL, 0, &e), 0);
    ck_assert_ptr_null(lean.attn);
    if (norm) ck_assert_int_eq(model_capture_value_norms(&lean, &e), 0);
    lean.tel_ids = ids;
    memcpy(lean.sc_role, role, (size_t)n);
    ck_assert_msg(model_forward(m, &rs, ids, types, n, &lean, &e) == 0, "%s", e.msg);
    /* what is scored: the attention, or its value-weighted shares (normattn.h) */
    Capture shares;
    if (norm) {
        ck_assert_int_eq(na_fill(&full, &e), 0);
        ck_assert_int_eq(na_shares_capture(&full, &shares, &e), 0);
    }
    const Capture *ref = norm ? &shares : &full;
    unsigned char sep[n];
    for (int j = 0; j < n; j++) sep[j] = role[j] == CAP_ROLE_SEP;
    static const int STATS_FROM[7] = {CAP_SC_ENTROPY, CAP_SC_DISTANCE, CAP_SC_CLS, CAP_SC_SEP,
                                      CAP_SC_SELF,    CAP_SC_PREV,     CAP_SC_NEXT};
    double worst = 0;
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int h = 0; h < m->cfg.num_heads; h++) {
            const float *A = cap_attn(ref, l, h);
            const double *t = cap_sc(&lean, l, h);
            for (int k = 0; k < HS_N; k++) {
                const double want = heads_score_matrix(&hs, k, A, n, ids, sep), got = heads_score_sums(k, t, n);
                ck_assert_msg(isnan(want) == isnan(got), "L%d H%d %s: %g vs %g", l, h, heads_score_name(k), got, want);
                if (!isnan(want)) worst = fmax(worst, fabs(got - want) / (k == HS_DISTANCE ? n : 1));
                if (k != HS_DISTANCE && k != HS_ENTROPY && want > 1e-3) hits[k]++;
            }
            double v[7];
            stats_reference(A, n, role, v);
            for (int k = 0; k < 7; k++) worst = fmax(worst, fabs(t[STATS_FROM[k]] / (k >= 5 ? n - 1 : n) - v[k]) / (k == 1 ? n : 1));
        }
    if (norm) na_shares_free(&shares);
    model_capture_free(&full);
    model_capture_free(&lean);
    model_runstate_free(&rs);
    free(types);
    return worst;
}

START_TEST(score_sums_equal_the_full_matrices_scores) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int n = m.cfg.max_position_embeddings && m.cfg.max_position_embeddings < 61 ? m.cfg.max_position_embeddings : 61;
    int *ids = some_ids(&m, n, 11u + (unsigned)_i);
    unsigned char role[n];
    memset(role, 0, sizeof role);
    role[0] = CAP_ROLE_CLS, role[n / 3] = CAP_ROLE_SEP, role[n - 1] = CAP_ROLE_SEP;
    /* a template: the previous-but-one key, and half of the first */
    HeadsPattern rule = {0}, tmpl = {0};
    rule.offset = -2;
    tmpl.n = n;
    tmpl.w = calloc((size_t)n * n, sizeof(float));
    ck_assert_ptr_nonnull(tmpl.w);
    for (int i = 0; i < n; i++) {
        if (i >= 2) tmpl.w[(size_t)i * n + i - 2] = 1;
        tmpl.w[(size_t)i * n] += 0.5f;
        tmpl.w[(size_t)i * n + i] = 0.25f;
    }
    double worst = 0;
    int hits[HS_N] = {0};
    for (int norm = 0; norm < 2; norm++)
        for (int x = 0; x < 4; x++) {
            const int bos = x & 1, cur = x >> 1;
            worst = fmax(worst, compare(&m, ids, n, role, bos, cur, x == 3 ? &tmpl : &rule, norm, hits));
        }
    /* each share score met weight on its pattern somewhere (else its sums went untested); a causal
     * row has none on the next key */
    for (int k = 0; k < HS_N; k++)
        if (k != HS_DISTANCE && k != HS_ENTROPY && !(k == HS_NEXT && m.cfg.causal))
            ck_assert_msg(hits[k] > 0, "%s: no head puts weight on the %s pattern", dir, heads_score_name(k));
    /* float rows: entropy's x ln x is float (kern_xlogx), the rest double sums of the same floats */
    ck_assert_msg(worst < 1e-6, "%s: score sums differ from the matrices' scores by %g", dir, worst);
    fprintf(stderr, "INFO %s: %s, %d tokens: score sums within %.1e of the full matrices' scores\n", __func__, dir, n,
            worst);
    free(tmpl.w);
    free(ids);
    model_free(&m);
}
END_TEST

START_TEST(packed_and_selected_score_sums_are_what_each_input_gives_alone) {
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-llama", &e), 0);
    const int lens[2] = {40, 23}, n = 63, layers[1] = {1}, heads[2] = {3, 0};
    int *ids = some_ids(&m, n, 5);
    RunState rs;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    const CapScoring sc = {.exclude_bos = 1, .pattern_offset = -1, .norm = 1};
    Capture packed[2], alone;
    for (int g = 0; g < 2; g++) {
        ck_assert_int_eq(model_capture_scores(&packed[g], &m.cfg, lens[g], &sc, layers, 1, heads, 2, &e), 0);
        ck_assert_int_eq(model_capture_value_norms(&packed[g], &e), 0);
        packed[g].tel_ids = ids + (g ? lens[0] : 0);
        packed[g].sc_role[0] = CAP_ROLE_CLS;
    }
    Capture *const caps[2] = {&packed[0], &packed[1]};
    ck_assert_msg(model_forward_packed(&m, &rs, ids, NULL, lens, 2, caps, &e) == 0, "%s", e.msg);
    for (int g = 0; g < 2; g++) {
        const int *gi = ids + (g ? lens[0] : 0);
        ck_assert_int_eq(model_capture_scores(&alone, &m.cfg, lens[g], &sc, layers, 1, heads, 2, &e), 0);
        ck_assert_int_eq(model_capture_value_norms(&alone, &e), 0);
        alone.tel_ids = gi;
        alone.sc_role[0] = CAP_ROLE_CLS;
        ck_assert_int_eq(model_forward(&m, &rs, gi, NULL, lens[g], &alone, &e), 0);
        ck_assert_uint_eq(cap_blocks(&alone), 2);
        ck_assert(!memcmp(alone.sc_sum, packed[g].sc_sum, 2 * CAP_SC_N * sizeof(double)));
        ck_assert(cap_sc(&alone, 1, 3)[CAP_SC_TOTAL] > 0);
        model_capture_free(&alone);
    }
    model_capture_free(&packed[0]);
    model_capture_free(&packed[1]);
    model_runstate_free(&rs);
    model_free(&m);
    free(ids);
}
END_TEST

START_TEST(score_sums_of_a_row_by_their_definitions) {
    /* one causal row (query 3 over keys 0..3) fed by hand: ids 1 7 7 7, key 1 a [SEP] */
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-llama", &e), 0);
    const int ids[4] = {1, 7, 7, 7};
    const float row[4] = {0.5f, 0.25f, 0.125f, 0.125f};
    const CapScoring sc = {.exclude_current = 1, .pattern_offset = -3};
    Capture cap;
    ck_assert_int_eq(model_capture_scores(&cap, &m.cfg, 4, &sc, NULL, 0, NULL, 0, &e), 0);
    cap.tel_ids = ids;
    cap.sc_role[1] = CAP_ROLE_SEP;
    model_scores_begin(&cap, 4);
    model_score_rows(&cap, 0, 0, 3, row, 4, 1, 4, NULL, NULL);
    const double *t = cap_sc(&cap, 0, 0);
    ck_assert_double_eq_tol(t[CAP_SC_ENTROPY], 0.5 * log(2) + 0.25 * log(4) + 0.25 * log(8), 1e-6);
    ck_assert_double_eq(t[CAP_SC_DISTANCE], 0.5 * 3 + 0.25 * 2 + 0.125 * 1);
    ck_assert_double_eq(t[CAP_SC_SEP], 0.25);
    ck_assert_double_eq(t[CAP_SC_SELF], 0.125);
    ck_assert_double_eq(t[CAP_SC_PREV], 0.125);
    ck_assert_double_eq(t[CAP_SC_NEXT], 0);
    ck_assert_double_eq(t[CAP_SC_TOTAL], 0.875);     /* key 3 (current) left out */
    ck_assert_double_eq(t[CAP_SC_HIT_DUP], 0.375);   /* keys 1, 2 */
    ck_assert_double_eq(t[CAP_SC_HIT_IND], 0.125);   /* key 2 after the copy at 1; key 3 (after 2) is left out */
    ck_assert_double_eq(t[CAP_SC_HIT_PATTERN], 0.5); /* key 0 */
    ck_assert_double_eq(t[CAP_SC_HIT_FIRST], 0.5);
    ck_assert_double_eq(heads_score_sums(HS_DUPLICATE, t, 4), 0.375 / 0.875);
    model_capture_free(&cap);
    model_free(&m);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("scores");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, score_sums_of_a_row_by_their_definitions);
    tcase_add_loop_test(t, score_sums_equal_the_full_matrices_scores, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(t, packed_and_selected_score_sums_are_what_each_input_gives_alone);
    suite_add_tcase(s, t);
    return s;
}
