/* test_predict.c — top-K and sampling over scores (predict.c), and the
 * masked-LM and causal heads the families load (model_logits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "predict.h"
#include "check_util.h"

START_TEST(topk_matches_the_full_sort_reference) {
    const int sizes[] = {1, 7, 40, 50257, 151936};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int vocab = sizes[s], stride = 3;
        float *l = malloc(sizeof(float) * (size_t)vocab * stride);
        fill(l, (size_t)vocab * stride, 11 + (unsigned)s, 8);
        /* ties: the lower id ranks first, as torch.topk gives them */
        if (vocab > 40) l[(size_t)30 * stride] = l[(size_t)10 * stride] = 20.0f;
        for (int k = 1; k <= 100; k += 33) {
            int ids[100], rid[100];
            float p[100], rp[100];
            ck_assert_int_eq(pred_topk(l, stride, vocab, k, ids, p), 0);
            pred_topk_naive(l, stride, vocab, k, rid, rp);
            for (int j = 0; j < k && j < vocab; j++) {
                ck_assert_int_eq(ids[j], rid[j]);
                ck_assert_float_lt(fabsf(p[j] - rp[j]), 1e-6f);
                if (j) ck_assert_float_le(p[j], p[j - 1]);
            }
            if (vocab > 40) ck_assert_int_eq(ids[0], 10);
            if (vocab > 40 && k > 1) ck_assert_int_eq(ids[1], 30);
        }
        free(l);
    }
}
END_TEST

START_TEST(softmax_is_stable_for_large_scores) {
    float l[4] = {1000.0f, 999.0f, -1000.0f, 1000.0f};
    int ids[4];
    float p[4];
    ck_assert_int_eq(pred_topk(l, 1, 4, 4, ids, p), 0);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 3);
    ck_assert_int_eq(ids[2], 1);
    double e1 = exp(-1.0), sum = 2 + e1;
    ck_assert_double_eq_tol(p[0], 1 / sum, 1e-6);
    ck_assert_double_eq_tol(p[2], e1 / sum, 1e-6);
    ck_assert_float_eq(p[3], 0.0f);
    l[2] = NAN;
    ck_assert_int_eq(pred_topk(l, 1, 4, 2, ids, p), -1);
}
END_TEST

START_TEST(sampling_follows_the_distribution_and_its_seed) {
    /* three tokens with probabilities 0.5, 0.3, 0.2 */
    float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)}, scratch[3];
    int is[3], counts[3] = {0}, id;
    float prob;
    PredRng r;
    pred_rng_seed(&r, 5);
    const int draws = 20000;
    for (int i = 0; i < draws; i++) {
        ck_assert_int_eq(pred_sample(l, 1, 3, 1.0f, 1.0f, &r, scratch, is, &id, &prob), 0);
        counts[id]++;
    }
    ck_assert_double_eq_tol(counts[0] / (double)draws, 0.5, 0.02);
    ck_assert_double_eq_tol(counts[1] / (double)draws, 0.3, 0.02);
    ck_assert_double_eq_tol(counts[2] / (double)draws, 0.2, 0.02);
    /* top-p 0.6: the nucleus is tokens 0 and 1, renormalized to 5/8 and 3/8 */
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < draws; i++) {
        pred_sample(l, 1, 3, 1.0f, 0.6f, &r, scratch, is, &id, &prob);
        counts[id]++;
    }
    ck_assert_int_eq(counts[2], 0);
    ck_assert_double_eq_tol(counts[0] / (double)draws, 0.625, 0.02);
    /* greedy takes the most probable; the probability reported is the model's */
    ck_assert_int_eq(pred_sample(l, 1, 3, 0.0f, 1.0f, &r, scratch, is, &id, &prob), 0);
    ck_assert_int_eq(id, 0);
    ck_assert_float_lt(fabsf(prob - 0.5f), 1e-6f);
    /* the same seed, the same stream */
    PredRng a, b;
    pred_rng_seed(&a, 99), pred_rng_seed(&b, 99);
    for (int i = 0; i < 100; i++) ck_assert_double_eq(pred_rng_uniform(&a), pred_rng_uniform(&b));
}
END_TEST

/* The masked-LM heads of the three encoder families and the causal heads,
 * against the definition written out: norm/transform, then the tied
 * embeddings (or lm_head) plus bias, on the last pass's hidden state. */
START_TEST(heads_load_where_the_checkpoint_has_them) {
    AvErr e;
    Model m;
    /* fixtures with a complete head */
    const char *with[] = {"tests/data/small-gpt2", "tests/data/small-llama", "tests/data/small-qwen2", "tests/data/small-gemma2",
                          "tests/data/small-gemma3", "tests/data/small-phi3"};
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++) {
        ck_assert_int_eq(model_load(&m, with[i], &e), 0);
        ck_assert_msg(model_has_head(&m), "%s: a head", with[i]);
        model_free(&m);
    }
    /* the base BERT fixture has none; the RoBERTa fixture has a partial one, which is named */
    ck_assert_int_eq(model_load(&m, "tests/data/small-f32", &e), 0);
    ck_assert(!model_has_head(&m));
    ck_assert_str_eq(m.head_err, "");
    model_free(&m);
    ck_assert_int_eq(model_load(&m, "tests/data/small-roberta", &e), 0);
    ck_assert(!model_has_head(&m));
    ck_assert_ptr_nonnull(strstr(m.head_err, "lm_head"));
    model_free(&m);
}
END_TEST

START_TEST(causal_scores_are_the_final_norm_times_the_embeddings) {
    AvErr e;
    Model m;
    RunState rs;
    Capture cap;
    ck_assert_int_eq(model_load(&m, "tests/data/small-llama", &e), 0);
    const int n = 5, H = m.cfg.hidden_size, V = m.cfg.vocab_size;
    int ids[5] = {1, 9, 4, 20, 3};
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&cap, &m.cfg, n, 0, 1, &e), 0);
    ck_assert_int_eq(model_forward_kv(&m, &rs, NULL, ids, NULL, n, &cap, 1, &e), 0);
    int rows[2] = {4, 1};
    float *lt = malloc(sizeof(float) * V * 2);
    ck_assert_int_eq(model_logits(&m, &rs, rows, 2, lt, &e), 0);
    /* the last hidden state in the capture is after the final norm (as Hugging Face's) */
    const float *emb = m.w.tok_emb.w; /* F32 fixture: (V, H) */
    ck_assert_int_eq(m.w.tok_emb.type, KERN_F32);
    float worst = 0;
    for (int r = 0; r < 2; r++) {
        const float *h = cap.hidden + ((size_t)m.cfg.num_layers * n + rows[r]) * H;
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int j = 0; j < H; j++) acc += (double)h[j] * emb[(size_t)v * H + j];
            worst = fmaxf(worst, fabsf((float)acc - lt[(size_t)v * 2 + r]));
        }
    }
    ck_assert_float_lt(worst, 1e-4f);
    /* a pass that stopped early left no final state: refused, not wrong */
    Capture part;
    int one_layer = 0;
    ck_assert_int_eq(model_capture_select(&part, &m.cfg, n, 0, 0, &one_layer, 1, NULL, 0, &e), 0);
    ck_assert_int_eq(model_forward(&m, &rs, ids, NULL, n, &part, &e), 0);
    ck_assert_int_eq(model_logits(&m, &rs, rows, 2, lt, &e), -1);
    model_capture_free(&part);
    free(lt);
    model_capture_free(&cap);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("predict");
    TCase *t = tcase_create("predict");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, topk_matches_the_full_sort_reference);
    tcase_add_test(t, softmax_is_stable_for_large_scores);
    tcase_add_test(t, sampling_follows_the_distribution_and_its_seed);
    tcase_add_test(t, heads_load_where_the_checkpoint_has_them);
    tcase_add_test(t, causal_scores_are_the_final_norm_times_the_embeddings);
    suite_add_tcase(s, t);
    return s;
}
