/* test_lens.c — lens.c: its pure helpers against definitions, and on every
 * decoder fixture family (GPT-2, Llama, Qwen2, Qwen3, Mistral, Gemma 2, Gemma
 * 3, Phi-3) that the attribution is complete (heads + MLPs + what the
 * embeddings and biases give = the logit, each part computed its own way),
 * that the logit lens's last layer is the model's own prediction, and that an
 * ablation rerun from its layer equals the whole pass rerun with it.
 * TransformerLens itself is the reference in tests/ref/lens_check.sh. */
#include <math.h>
#include <stdlib.h>

#include "loader.h"
#include "check_util.h"
#include "lens.h"
#include "model.h"
#include "predict.h"

START_TEST(rank_counts_higher_scores_and_ties_by_id) {
    const float s[6] = {0.5f, 2.0f, 0.5f, -1.0f, 3.0f, 0.5f};
    ck_assert_int_eq(lens_rank(s, 1, 6, 4), 0);
    ck_assert_int_eq(lens_rank(s, 1, 6, 1), 1);
    ck_assert_int_eq(lens_rank(s, 1, 6, 0), 2);
    ck_assert_int_eq(lens_rank(s, 1, 6, 2), 3); /* a tie with id 0: the lower id first */
    ck_assert_int_eq(lens_rank(s, 1, 6, 5), 4);
    ck_assert_int_eq(lens_rank(s, 1, 6, 3), 5);
    /* strided, as the head writes scores (vocab, chunk) */
    const float t[6] = {1, 9, 3, 9, 2, 9};
    ck_assert_int_eq(lens_rank(t, 2, 3, 1), 0);
    ck_assert_int_eq(lens_rank(t, 2, 3, 0), 2);
}
END_TEST

START_TEST(log_prob_is_the_log_softmax) {
    float s[50];
    unsigned seed = 7;
    for (int j = 0; j < 50; j++) s[j] = 30.0f * frand(&seed);
    double sum = 0;
    for (int j = 0; j < 50; j++) sum += exp((double)s[j]);
    for (int j = 0; j < 50; j += 7) ck_assert_double_eq_tol(lens_log_prob(s, 1, 50, j), s[j] - log(sum), 1e-9);
}
END_TEST

/* c . u == the change of the logit through the frozen norm, for RMSNorm and LayerNorm */
START_TEST(direction_freezes_the_scale_and_centers_layernorm) {
    enum { D = 16 };
    float x[D], w[D], g[D], b[D], c[D];
    unsigned seed = 3;
    for (int j = 0; j < D; j++) x[j] = frand(&seed) * 2, w[j] = frand(&seed), g[j] = 1 + frand(&seed) * 0.5f,
                                b[j] = frand(&seed), c[j] = frand(&seed);
    for (int rms = 0; rms < 2; rms++) {
        Norm nm = {g, rms ? NULL : b, rms, 1e-5f};
        double u[D];
        lens_direction(&nm, x, w, D, u);
        double mu = 0, var = 0, mc = 0;
        for (int j = 0; j < D; j++) mu += rms ? 0 : x[j], mc += rms ? 0 : c[j];
        mu /= D, mc /= D;
        for (int j = 0; j < D; j++) var += (x[j] - mu) * (x[j] - mu);
        const double inv = 1 / sqrt(var / D + 1e-5);
        double want = 0, got = 0;
        for (int j = 0; j < D; j++) want += (c[j] - mc) * inv * g[j] * w[j], got += c[j] * u[j];
        ck_assert_double_eq_tol(got, want, 1e-9);
        if (!rms) { /* the centering moved onto u: constant components contribute nothing */
            double su = 0;
            for (int j = 0; j < D; j++) su += u[j];
            ck_assert_double_eq_tol(su, 0, 1e-9);
        }
    }
}
END_TEST

static const char *FIXTURES[] = {"tests/data/small-gpt2",    "tests/data/small-gpt2-f16", "tests/data/small-llama",
                                 "tests/data/small-qwen2",   "tests/data/small-qwen3",    "tests/data/small-mistral",
                                 "tests/data/small-gemma2",  "tests/data/small-gemma3",   "tests/data/small-phi3",
                                 "tests/data/small-qwen3moe", "tests/data/small-gptoss"};

typedef struct {
    Model m;
    RunState rs;
    Capture cap;
    int ids[12], n;
} Fix;

static void fix_open(Fix *f, const char *dir) {
    AvErr e;
    if (model_load(&f->m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    ck_assert_msg(model_has_head(&f->m), "%s: no language-model head", dir);
    f->n = 12;
    for (int i = 0; i < f->n; i++) f->ids[i] = (i * 7 + 3) % f->m.cfg.vocab_size;
    ck_assert_int_eq(model_runstate_alloc(&f->rs, &f->m, f->n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&f->cap, &f->m.cfg, f->n, 0, 0, &e), 0);
    ck_assert_int_eq(model_capture_internals(&f->cap, &f->m.cfg, &e), 0);
    if (model_forward_kv(&f->m, &f->rs, NULL, f->ids, NULL, f->n, &f->cap, 1, &e)) ck_abort_msg("forward: %s", e.msg);
}

static void fix_close(Fix *f) {
    model_capture_free(&f->cap);
    model_runstate_free(&f->rs);
    model_free(&f->m);
}

START_TEST(attribution_is_complete_in_every_family) {
    Fix f;
    AvErr e;
    fix_open(&f, FIXTURES[_i]);
    const ModelConfig *c = &f.m.cfg;
    const int H = c->hidden_size, L = c->num_layers;
    LensResult r = {0};
    ck_assert_int_eq(lens_logit_lens(&f.m, &f.cap, NULL, 0, 0, 0, &r, &e), 0);
    int pos[12];
    for (int i = 0; i < f.n; i++) pos[i] = i;
    if (lens_attribution(&f.m, &f.cap, pos, f.n, -1, &r, &e)) ck_abort_msg("%s: %s", FIXTURES[_i], e.msg);
    float *wu = malloc((size_t)H * sizeof *wu);
    double *u = malloc((size_t)H * sizeof *u);
    double worst = 0, scale = 0;
    for (int i = 0; i < f.n; i++) {
        const int t = r.attr_tid[i];
        ck_assert_int_eq(t, r.final_id[i]);
        ck_assert_int_eq(model_linear_row(&f.m.w.head.out, t, wu, &e), 0);
        lens_direction(&f.m.w.final_norm, cap_resid(&f.cap, L) + (size_t)i * H, wu, H, u);
        /* what no head or MLP writes: the embeddings, each attention's output bias (no family
         * with one has a sandwich norm), the final norm's bias and b_U */
        double other = f.m.w.head.out.b ? f.m.w.head.out.b[t] : 0;
        const float *x0 = cap_resid(&f.cap, 0) + (size_t)i * H;
        for (int j = 0; j < H; j++) other += x0[j] * u[j] + (f.m.w.final_norm.b ? f.m.w.final_norm.b[j] * wu[j] : 0);
        for (int l = 0; l < L; l++)
            for (int j = 0; f.m.w.layers[l].o.b && j < H; j++) other += f.m.w.layers[l].o.b[j] * u[j];
        double sum = r.attr_other[i];
        for (int l = 0; l < L; l++) {
            sum += r.attr_mlp[(size_t)i * L + l];
            for (int h = 0; h < c->num_heads; h++) sum += r.attr_heads[((size_t)i * L + l) * c->num_heads + h];
        }
        ck_assert_double_eq_tol(sum, r.attr_logit[i], 1e-3);
        worst = fmax(worst, fabs(other - r.attr_other[i]));
        scale = fmax(scale, fabs(r.attr_logit[i]));
    }
    ck_assert_msg(worst <= 1e-4 * fmax(1, scale), "%s: the embeddings and biases give %g off the rest (logits up to %g)",
                  FIXTURES[_i], worst, scale);
    free(wu), free(u);
    lens_free(&r);
    fix_close(&f);
}
END_TEST

START_TEST(last_lens_layer_is_the_prediction) {
    Fix f;
    AvErr e;
    fix_open(&f, FIXTURES[_i]);
    const int L = f.m.cfg.num_layers, k = 3;
    int layer = L - 1;
    LensResult r = {0};
    CapPredictions p;
    ck_assert_int_eq(lens_logit_lens(&f.m, &f.cap, &layer, 1, k, 0, &r, &e), 0);
    int rows[12];
    for (int i = 0; i < f.n; i++) rows[i] = i;
    ck_assert_int_eq(pred_alloc(&p, f.n, k, &e), 0);
    ck_assert_int_eq(pred_rows(&f.m, &f.rs, rows, f.n, 0, &p, 0, &e), 0);
    for (int i = 0; i < f.n * k; i++) {
        ck_assert_int_eq(r.lens_ids[i], p.ids[i]);
        ck_assert_float_eq_tol(r.lens_probs[i], p.probs[i], 1e-6);
    }
    for (int i = 0; i < f.n; i++) ck_assert_int_eq(r.lens_rank[i], 0);
    pred_free(&p);
    lens_free(&r);
    fix_close(&f);
}
END_TEST

/* Rerunning from the ablated layer, over the tokens up to the position only, equals rerunning the
 * whole pass over every token with the ablation (position 4 of 12: past Phi-3's fixture's original
 * context of 8, LongRoPE's factors follow the whole input's length, not the position's). */
START_TEST(ablation_from_its_layer_equals_the_whole_rerun) {
    Fix f;
    AvErr e;
    fix_open(&f, FIXTURES[_i]);
    const int L = f.m.cfg.num_layers, NH = f.m.cfg.num_heads, last = 4;
    LensResult r = {0};
    ck_assert_int_eq(lens_logit_lens(&f.m, &f.cap, NULL, 0, 0, 0, &r, &e), 0);
    int pairs[2] = {L - 1, NH - 1};
    ck_assert_int_eq(lens_ablation(&f.m, &f.rs, &f.cap, f.ids, last, -1, pairs, 1, 0, &r, &e), 0);
    float *logits = malloc((size_t)f.m.cfg.vocab_size * sizeof *logits);
    f.rs.abl_on = 1, f.rs.abl_layer = L - 1, f.rs.abl_head = NH - 1, f.rs.abl_ctx = NULL;
    ck_assert_int_eq(model_forward_from(&f.m, &f.rs, f.ids, f.n, 0, cap_resid(&f.cap, 0), &e), 0);
    f.rs.abl_on = 0;
    ck_assert_int_eq(model_logits(&f.m, &f.rs, &last, 1, logits, &e), 0);
    const double whole = lens_log_prob(logits, 1, f.m.cfg.vocab_size, r.abl_target) - r.abl_base;
    ck_assert_double_eq_tol(r.abl_effects[(size_t)(L - 1) * NH + NH - 1], whole, 1e-5);
    ck_assert(isnan(r.abl_effects[0]));
    /* ablating nothing changes nothing: the clean rerun is the captured pass */
    ck_assert_int_eq(model_forward_kv(&f.m, &f.rs, NULL, f.ids, NULL, f.n, &f.cap, 1, &e), 0);
    ck_assert_int_eq(model_logits(&f.m, &f.rs, &last, 1, logits, &e), 0);
    ck_assert_double_eq_tol(lens_log_prob(logits, 1, f.m.cfg.vocab_size, r.abl_target), r.abl_base, 1e-5);
    free(logits);
    lens_free(&r);
    fix_close(&f);
}
END_TEST

START_TEST(bad_requests_are_refused) {
    Fix f;
    AvErr e;
    fix_open(&f, "tests/data/small-llama");
    LensResult r = {0};
    ck_assert_int_eq(lens_logit_lens(&f.m, &f.cap, NULL, 0, 0, 0, &r, &e), 0);
    int bad[2] = {f.m.cfg.num_layers, 0};
    ck_assert_int_eq(lens_ablation(&f.m, &f.rs, &f.cap, f.ids, 0, -1, bad, 1, 0, &r, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "is not in the model"));
    ck_assert_int_eq(lens_ablation(&f.m, &f.rs, &f.cap, f.ids, f.n, -1, NULL, 0, 0, &r, &e), -1);
    int pos = 0;
    ck_assert_int_eq(lens_attribution(&f.m, &f.cap, &pos, 1, f.m.cfg.vocab_size, &r, &e), -1);
    lens_free(&r);
    Capture plain;
    ck_assert_int_eq(model_capture_alloc(&plain, &f.m.cfg, f.n, 0, 0, &e), 0);
    ck_assert_int_eq(lens_logit_lens(&f.m, &plain, NULL, 0, 2, 0, &r, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not captured"));
    model_capture_free(&plain);
    lens_free(&r);
    fix_close(&f);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("lens");
    TCase *tc = tcase_create("lens");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rank_counts_higher_scores_and_ties_by_id);
    tcase_add_test(tc, log_prob_is_the_log_softmax);
    tcase_add_test(tc, direction_freezes_the_scale_and_centers_layernorm);
    const int nf = (int)(sizeof FIXTURES / sizeof FIXTURES[0]);
    tcase_add_loop_test(tc, attribution_is_complete_in_every_family, 0, nf);
    tcase_add_loop_test(tc, last_lens_layer_is_the_prediction, 0, nf);
    tcase_add_loop_test(tc, ablation_from_its_layer_equals_the_whole_rerun, 0, nf);
    tcase_add_test(tc, bad_requests_are_refused);
    suite_add_tcase(s, tc);
    return s;
}


