/* test_generate.c — generation with a key/value cache (generate.c) on the
 * committed decoder fixtures: what it captures is what one pass over the final
 * sequence captures; each choice is what that pass's scores say; sampling is
 * reproducible from its seed; it stops at an end token or when asked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "generate.h"
#include "predict.h"
#include "check_util.h"

static const char *DECODERS[] = {"tests/data/small-gpt2", "tests/data/small-llama", "tests/data/small-qwen2",
                                 "tests/data/small-qwen3", "tests/data/small-mistral", "tests/data/small-gemma2",
                                 "tests/data/small-gemma3",
                                 /* LongRoPE with an original context of 8: the generation crosses it, drops the
                                  * cache and runs the sequence again (transformers' Phi-3 generate()) */
                                 "tests/data/small-phi3",
                                 /* mixtures of experts: a generation step routes its one token */
                                 "tests/data/small-mixtral", "tests/data/small-olmoe",
                                 /* gpt-oss: each step's rows with their sinks, past the 4-token window */
                                 "tests/data/small-gptoss"};

#define PROMPT 6
#define NEW 18

typedef struct {
    Model m;
    RunState rs;
    KvCache kv;
    Capture cap;
    int ids[PROMPT + NEW];
    int n;
    CapGeneration g;
} Gen;

static void gen_setup(Gen *t, const char *dir) {
    AvErr e;
    memset(t, 0, sizeof *t);
    if (model_load(&t->m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    ck_assert_msg(model_has_head(&t->m), "%s has a head", dir);
    ck_assert_int_eq(model_runstate_alloc(&t->rs, &t->m, PROMPT + NEW, 0, &e), 0);
    ck_assert_int_eq(model_kv_alloc(&t->kv, &t->m.cfg, PROMPT + NEW, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&t->cap, &t->m.cfg, PROMPT + NEW, 1, 1, &e), 0);
    for (int i = 0; i < PROMPT; i++) t->ids[i] = (7 * i + 3) % t->m.cfg.vocab_size;
}

static int gen(Gen *t, GenOptions *o) {
    AvErr e;
    int rc = gen_run(&t->m, &t->rs, &t->kv, &t->cap, t->ids, PROMPT, o, &t->g, &t->n, &e);
    if (rc) ck_abort_msg("generate: %s", e.msg);
    return rc;
}

static void gen_teardown(Gen *t) {
    gen_free(&t->g);
    model_capture_free(&t->cap);
    model_kv_free(&t->kv);
    model_runstate_free(&t->rs);
    model_free(&t->m);
}

START_TEST(generated_capture_equals_one_pass_over_the_final_sequence) {
    Gen t;
    gen_setup(&t, DECODERS[_i]);
    GenOptions o = {.max_new = NEW, .k = 5, .top_p = 1};
    gen(&t, &o);
    ck_assert_int_eq(t.n, PROMPT + NEW);
    ck_assert_int_eq(t.g.n_generated, NEW);
    ck_assert_int_eq(t.cap.n_tokens, t.n);
    /* one pass over the final ids, in a fresh run state and capture */
    AvErr e;
    RunState rs;
    Capture one;
    ck_assert_int_eq(model_runstate_alloc(&rs, &t.m, t.n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&one, &t.m.cfg, t.n, 1, 1, &e), 0);
    if (model_forward_kv(&t.m, &rs, NULL, t.ids, NULL, t.n, &one, 1, &e)) ck_abort_msg("forward: %s", e.msg);
    const size_t blocks = cap_blocks(&one), nn = (size_t)t.n * t.n, dh = (size_t)one.head_dim;
    float da = max_abs_diff(t.cap.attn, one.attn, blocks * nn);
    float dq = max_abs_diff(t.cap.q, one.q, blocks * t.n * dh), dk = max_abs_diff(t.cap.k, one.k, blocks * t.n * dh);
    float dh_ = max_abs_diff(t.cap.hidden, one.hidden, (size_t)(t.m.cfg.num_layers + 1) * t.n * t.m.cfg.hidden_size);
    fprintf(stderr, "INFO %s: generated vs one pass: attention %.2e, q %.2e, k %.2e, hidden %.2e\n", DECODERS[_i], da, dq,
            dk, dh_);
    ck_assert_float_lt(da, 1e-5f);
    ck_assert_float_lt(dq, 1e-4f);
    ck_assert_float_lt(dk, 1e-4f);
    ck_assert_float_lt(dh_, 1e-4f);
    /* greedy: each chosen token is the first of that pass's top-K at the position before it */
    int rows[NEW];
    for (int g = 0; g < NEW; g++) rows[g] = PROMPT - 1 + g;
    CapPredictions p;
    ck_assert_int_eq(pred_alloc(&p, NEW, 5, &e), 0);
    if (pred_rows(&t.m, &rs, rows, NEW, 0, &p, 0, &e)) ck_abort_msg("predict: %s", e.msg);
    for (int g = 0; g < NEW; g++) {
        ck_assert_int_eq(t.g.steps.position[g], PROMPT - 1 + g);
        /* scores computed before a LongRoPE recompute took the short factors (so did transformers'):
         * not the one pass's, which takes the long ones */
        if (PROMPT - 1 + g < t.m.cfg.rope_recompute_at) continue;
        ck_assert_int_eq(t.ids[PROMPT + g], p.ids[g * 5]);
        ck_assert_float_lt(fabsf(t.g.chosen_prob[g] - p.probs[g * 5]), 1e-5f);
        for (int j = 0; j < 5; j++) ck_assert_float_lt(fabsf(t.g.steps.probs[g * 5 + j] - p.probs[g * 5 + j]), 1e-5f);
    }
    pred_free(&p);
    model_capture_free(&one);
    model_runstate_free(&rs);
    gen_teardown(&t);
}
END_TEST

START_TEST(predictions_of_every_position_come_with_generation) {
    Gen t;
    gen_setup(&t, "tests/data/small-llama");
    AvErr e;
    CapPredictions all;
    ck_assert_int_eq(pred_alloc(&all, PROMPT + NEW, 3, &e), 0);
    GenOptions o = {.max_new = NEW, .k = 3, .top_p = 1, .all = &all};
    gen(&t, &o);
    ck_assert_int_eq(all.n, t.n);
    for (int i = 0; i < all.n; i++) ck_assert_int_eq(all.position[i], i);
    /* the step's top-K is the prediction at the position before the token */
    for (int g = 0; g < t.g.n_generated; g++)
        for (int j = 0; j < 3; j++) {
            ck_assert_int_eq(t.g.steps.ids[g * 3 + j], all.ids[(PROMPT - 1 + g) * 3 + j]);
            ck_assert_float_lt(fabsf(t.g.steps.probs[g * 3 + j] - all.probs[(PROMPT - 1 + g) * 3 + j]), 1e-6f);
        }
    pred_free(&all);
    gen_teardown(&t);
}
END_TEST

START_TEST(sampling_is_reproducible_from_its_seed) {
    int seqs[6][PROMPT + NEW];
    for (int s = 0; s < 6; s++) {
        Gen t;
        gen_setup(&t, "tests/data/small-llama");
        GenOptions o = {.max_new = NEW, .k = 2, .temperature = 2.0f, .top_p = 0.95f, .seed = s < 2 ? 42 : (uint64_t)s};
        gen(&t, &o);
        ck_assert_int_eq(t.n, PROMPT + NEW);
        memcpy(seqs[s], t.ids, sizeof seqs[s]);
        gen_teardown(&t);
    }
    ck_assert_mem_eq(seqs[0], seqs[1], sizeof seqs[0]);
    int differ = 0;
    for (int s = 2; s < 6; s++) differ += memcmp(seqs[s], seqs[0], sizeof seqs[0]) != 0;
    ck_assert_int_gt(differ, 0);
}
END_TEST

static int stop_after_three(void *ctx, const int *ids, int n_prompt, int n) {
    (void)ctx, (void)ids;
    return n - n_prompt >= 3;
}

START_TEST(generation_stops_at_an_end_token_or_when_asked) {
    Gen t;
    gen_setup(&t, "tests/data/small-gpt2");
    GenOptions o = {.max_new = NEW, .k = 2, .top_p = 1};
    gen(&t, &o);
    const int first = t.ids[PROMPT], third = t.ids[PROMPT + 2];
    gen_teardown(&t);
    /* the greedy third token declared an end token: it is kept and ends the text */
    gen_setup(&t, "tests/data/small-gpt2");
    int eos[2] = {t.m.cfg.vocab_size - 1, third};
    o.eos = eos, o.n_eos = 2;
    gen(&t, &o);
    ck_assert_int_eq(t.ids[PROMPT], first);
    ck_assert_int_le(t.g.n_generated, 3);
    ck_assert_int_eq(t.ids[t.n - 1], third);
    ck_assert_int_eq(t.g.stop, CAP_STOP_EOS);
    ck_assert_int_eq(t.cap.n_tokens, t.n);
    gen_teardown(&t);
    gen_setup(&t, "tests/data/small-gpt2");
    GenOptions s = {.max_new = NEW, .k = 2, .top_p = 1, .stop = stop_after_three};
    gen(&t, &s);
    ck_assert_int_eq(t.g.n_generated, 3);
    ck_assert_int_eq(t.g.stop, CAP_STOP_STRING);
    gen_teardown(&t);
}
END_TEST

START_TEST(an_encoder_cannot_generate) {
    Model m;
    AvErr e;
    RunState rs;
    KvCache kv;
    ck_assert_int_eq(model_load(&m, "tests/data/small-f32", &e), 0);
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, 8, 0, &e), 0);
    ck_assert_int_eq(model_kv_alloc(&kv, &m.cfg, 8, &e), 0);
    int ids[3] = {1, 2, 3};
    ck_assert_int_eq(model_forward_kv(&m, &rs, &kv, ids, ids, 3, NULL, 1, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "causal"));
    model_kv_free(&kv);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("generate");
    TCase *t = tcase_create("generate");
    tcase_set_timeout(t, 60);
    tcase_add_loop_test(t, generated_capture_equals_one_pass_over_the_final_sequence, 0,
                        (int)(sizeof DECODERS / sizeof DECODERS[0]));
    tcase_add_test(t, predictions_of_every_position_come_with_generation);
    tcase_add_test(t, sampling_is_reproducible_from_its_seed);
    tcase_add_test(t, generation_stops_at_an_end_token_or_when_asked);
    tcase_add_test(t, an_encoder_cannot_generate);
    suite_add_tcase(s, t);
    return s;
}
