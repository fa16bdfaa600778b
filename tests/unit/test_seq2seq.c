/* test_seq2seq.c — the encoder-decoder pass (seq2seq.h) on the committed BART, Marian and T5
 * fixtures: the three stacks against each golden.json (transformers' eager attention in float32,
 * tests/ref/seq2seq_check.py --fixture), greedy decoding against its generate() ids, the same
 * numbers on a second pass, --predict's top-k against the steps', sampling reproducible from its
 * seed, and the refusals (no tokens, an id past the vocabulary, a capture of
 * other sizes, a model that is not encoder-decoder). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "check_util.h"
#include "generate.h"
#include "model.h"
#include "predict.h"
#include "seq2seq.h"
#include "util.h"

static const char *const FIXTURES[] = {"tests/data/small-bart", "tests/data/small-marian", "tests/data/small-t5"};

static void flatten(const cJSON *a, float *out, size_t *k) {
    if (cJSON_IsNumber(a)) {
        out[(*k)++] = (float)a->valuedouble;
        return;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, a) flatten(it, out, k);
}

static int *ints(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int *v = malloc((size_t)*n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

static cJSON *golden(const char *dir) {
    char *gp = av_path_join(dir, "golden.json"), *buf;
    size_t len;
    AvErr e = {0};
    ck_assert_msg(av_read_file(gp, 1 << 24, &buf, &len, &e) == 0, "%s", e.msg);
    cJSON *g = cJSON_ParseWithLength(buf, len);
    ck_assert_ptr_nonnull(g);
    free(buf);
    free(gp);
    return g;
}

/* max |attnviz - golden| over one stack */
static float stack_diff(const cJSON *g, const char *name, const float *got, size_t n) {
    float *ref = malloc(n * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    size_t k = 0;
    flatten(cJSON_GetObjectItem(g, name), ref, &k);
    ck_assert_uint_eq(k, n);
    float d = max_abs_diff(got, ref, n);
    free(ref);
    return d;
}

START_TEST(stacks_match_transformers_goldens) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e = {0};
    ck_assert_msg(model_load(&m, dir, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(m.cfg.enc_dec, 1);
    cJSON *g = golden(dir);
    int ne, nd;
    int *src = ints(cJSON_GetObjectItem(g, "encoder_ids"), &ne), *dec = ints(cJSON_GetObjectItem(g, "decoder_ids"), &nd);
    S2sCapture cap, again;
    ck_assert_msg(s2s_capture_alloc(&cap, &m, ne, nd, &e) == 0, "%s", e.msg);
    ck_assert_msg(s2s_capture_alloc(&again, &m, ne, nd, &e) == 0, "%s", e.msg);
    CapPredictions pred;
    ck_assert_int_eq(pred_alloc(&pred, nd, 3, &e), 0);
    ck_assert_msg(s2s_forward(&m, src, ne, dec, nd, &cap, &pred, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(pred.n, nd);
    for (int i = 0; i < nd; i++) {
        ck_assert_int_eq(pred.position[i], i);
        ck_assert_int_ge(pred.ids[i * 3], 0);
        ck_assert_int_lt(pred.ids[i * 3], m.cfg.vocab_size);
        ck_assert(pred.probs[i * 3] >= pred.probs[i * 3 + 1] && pred.probs[i * 3 + 1] >= pred.probs[i * 3 + 2]);
    }
    pred_free(&pred);
    const size_t L = (size_t)cap.enc_layers, Ld = (size_t)cap.dec_layers, H = (size_t)cap.heads;
    const float de = stack_diff(g, "encoder_attention", cap.enc_attn, L * H * ne * ne);
    const float dd = stack_diff(g, "decoder_attention", cap.dec_attn, Ld * H * nd * nd);
    const float dx = stack_diff(g, "cross_attention", cap.cross_attn, Ld * H * nd * ne);
    /* float32 against float32 transformers: measured 1.2e-6 at most over the three fixtures */
    ck_assert_msg(de <= 1e-5f && dd <= 1e-5f && dx <= 1e-5f, "%s: encoder %g decoder %g cross %g", dir, de, dd, dx);
    /* the decoder is causal: exactly 0 past the diagonal */
    for (size_t b = 0; b < Ld * H; b++)
        for (int i = 0; i < nd; i++)
            for (int j = i + 1; j < nd; j++) ck_assert_float_eq(cap.dec_attn[(b * nd + i) * nd + j], 0.0f);
    /* a second pass: the same bits */
    ck_assert_msg(s2s_forward(&m, src, ne, dec, nd, &again, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(cap.cross_attn, again.cross_attn, Ld * H * nd * ne * sizeof(float)), 0);
    /* greedy decoding (temperature 0): transformers' generate() ids (6 new tokens at most) */
    int got[8], n = 0;
    CapPredictions all;
    ck_assert_int_eq(pred_alloc(&all, 7, 4, &e), 0);
    GenOptions go = {.max_new = 6, .k = 4, .eos = m.cfg.eos_ids, .n_eos = m.cfg.n_eos, .all = &all};
    CapGeneration gen;
    ck_assert_msg(s2s_generate(&m, src, ne, &go, got, &n, &gen, &e) == 0, "%s", e.msg);
    int nw;
    int *want = ints(cJSON_GetObjectItem(g, "generated_ids"), &nw);
    ck_assert_int_eq(n, nw);
    for (int i = 0; i < n; i++) ck_assert_int_eq(got[i], want[i]);
    ck_assert_int_eq(got[0], m.cfg.dec_start_id);
    ck_assert_int_eq(gen.n_prompt, 1);
    ck_assert_int_eq(gen.n_generated, n - 1);
    ck_assert_int_eq(all.n, n); /* after every decoder token, the last included */
    /* a teacher-forced pass over what was generated: its top-k after each row is the step's (the cached
     * steps score as the full pass does), its first the token chosen next */
    ck_assert_int_eq(pred_alloc(&pred, n, 4, &e), 0);
    ck_assert_msg(s2s_forward(&m, src, ne, got, n, NULL, &pred, &e) == 0, "%s", e.msg);
    for (int i = 0; i < n; i++) {
        if (i + 1 < n) {
            ck_assert_int_eq(pred.ids[i * 4], got[i + 1]);
            ck_assert_int_eq(gen.steps.position[i], i);
            ck_assert_float_eq_tol(gen.chosen_prob[i], pred.probs[i * 4], 1e-6f);
        }
        for (int j = 0; j < 4; j++) {
            ck_assert_int_eq(all.ids[i * 4 + j], pred.ids[i * 4 + j]);
            ck_assert_float_eq_tol(all.probs[i * 4 + j], pred.probs[i * 4 + j], 1e-6f);
        }
    }
    pred_free(&pred);
    pred_free(&all);
    gen_free(&gen);
    /* generation stops after an end-of-sequence id: make the second chosen token one */
    m.cfg.eos_ids[0] = want[2], m.cfg.n_eos = 1;
    go.all = NULL, go.eos = m.cfg.eos_ids, go.n_eos = 1;
    ck_assert_msg(s2s_generate(&m, src, ne, &go, got, &n, &gen, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(n, want[1] == want[2] ? 2 : 3);
    ck_assert_int_eq(got[n - 1], want[2]);
    ck_assert_int_eq(gen.stop, CAP_STOP_EOS);
    gen_free(&gen);
    free(want);
    s2s_capture_free(&cap);
    s2s_capture_free(&again);
    free(src);
    free(dec);
    cJSON_Delete(g);
    model_free(&m);
}
END_TEST

/* sampled decoding: the same seed, the same tokens; each chosen token's probability is the model's own at
 * that step (a teacher-forced pass over the sampled tokens); other seeds make other text */
START_TEST(sampling_is_reproducible_from_its_seed) {
    Model m;
    AvErr e = {0};
    ck_assert_msg(model_load(&m, FIXTURES[_i], &e) == 0, "%s", e.msg);
    const int src[4] = {m.cfg.dec_start_id, 5, 6, 7}, N = 10;
    int a[11], b[11], na, nb, differs = 0;
    GenOptions go = {.max_new = N, .k = 2, .temperature = 2.0f, .top_p = 0.95f, .seed = 42};
    CapGeneration ga, gb;
    ck_assert_msg(s2s_generate(&m, src, 4, &go, a, &na, &ga, &e) == 0, "%s", e.msg);
    ck_assert_msg(s2s_generate(&m, src, 4, &go, b, &nb, &gb, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(na, N + 1); /* no eos given: the full length */
    ck_assert_int_eq(nb, na);
    ck_assert_int_eq(memcmp(a, b, (size_t)na * sizeof *a), 0);
    ck_assert_int_eq(memcmp(ga.chosen_prob, gb.chosen_prob, (size_t)N * sizeof(float)), 0);
    CapPredictions pred;
    ck_assert_int_eq(pred_alloc(&pred, na, 1, &e), 0);
    ck_assert_msg(s2s_forward(&m, src, 4, a, na, NULL, &pred, &e) == 0, "%s", e.msg);
    /* the most probable token's probability bounds every chosen one's, and greedy would not have made them all */
    int not_top = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(ga.chosen_prob[i] > 0.0f && ga.chosen_prob[i] <= pred.probs[i] + 1e-6f);
        not_top += a[i + 1] != pred.ids[i];
    }
    ck_assert_int_gt(not_top, 0);
    pred_free(&pred);
    gen_free(&gb);
    for (uint64_t s = 1; s < 4 && !differs; s++) {
        go.seed = s;
        ck_assert_msg(s2s_generate(&m, src, 4, &go, b, &nb, &gb, &e) == 0, "%s", e.msg);
        differs = nb != na || memcmp(a, b, (size_t)na * sizeof *a) != 0;
        gen_free(&gb);
    }
    ck_assert(differs);
    gen_free(&ga);
    model_free(&m);
}
END_TEST

START_TEST(refusals_name_what_is_wrong) {
    Model m;
    AvErr e = {0};
    ck_assert_msg(model_load(&m, FIXTURES[0], &e) == 0, "%s", e.msg);
    int src[3] = {0, 5, 2}, dec[2] = {2, 0}, bad[2] = {2, 1000000};
    S2sCapture cap;
    ck_assert_int_eq(s2s_capture_alloc(&cap, &m, 3, 2, &e), 0);
    ck_assert_int_ne(s2s_forward(&m, src, 0, dec, 2, NULL, NULL, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "at least one source and one decoder token"));
    ck_assert_int_ne(s2s_forward(&m, src, 3, bad, 2, &cap, NULL, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "token id 1000000 at position 1 is outside the vocabulary"));
    ck_assert_int_ne(s2s_forward(&m, src, 2, dec, 2, &cap, NULL, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "the capture holds 3 and 2 tokens, not 2 and 2"));
    /* positions: BART's table ends at max_position_embeddings */
    const int too_many = m.cfg.max_position_embeddings + 1;
    int *longer = calloc((size_t)too_many, sizeof *longer);
    ck_assert_ptr_nonnull(longer);
    ck_assert_int_ne(s2s_forward(&m, longer, too_many, dec, 2, NULL, NULL, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "exceed the model's"));
    free(longer);
    s2s_capture_free(&cap);
    model_free(&m);
    /* a self-attention model has no stacks to run */
    ck_assert_msg(model_load(&m, "tests/data/small-f32", &e) == 0, "%s", e.msg);
    ck_assert_int_ne(s2s_forward(&m, src, 3, dec, 2, NULL, NULL, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "not an encoder-decoder model"));
    model_free(&m);
}
END_TEST

/* the forward pass's run state refuses an encoder-decoder model in one line */
START_TEST(runstate_refuses_encoder_decoder) {
    Model m;
    RunState s;
    AvErr e = {0};
    ck_assert_msg(model_load(&m, FIXTURES[2], &e) == 0, "%s", e.msg);
    ck_assert_int_ne(model_runstate_alloc(&s, &m, 8, 0, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "encoder-decoder (t5) model runs as attnviz --model DIR SOURCE --decoder-text"));
    model_free(&m);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("seq2seq");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, stacks_match_transformers_goldens, 0, 3);
    tcase_add_loop_test(tc, sampling_is_reproducible_from_its_seed, 0, 3);
    tcase_add_test(tc, refusals_name_what_is_wrong);
    tcase_add_test(tc, runstate_refuses_encoder_decoder);
    suite_add_tcase(s, tc);
    return s;
}
