/* test_live.c — serve/live.c, the runs behind attnviz serve, without HTTP:
 * a run's response and warnings (the pipeline's own words, collected for the
 * run and kept off the server's reporter), the cache of runs, and the errors
 * a client can cause. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "live.h"
#include "report.h"
#include "check_util.h"

#define F32 "tests/data/small-f32"

static struct {
    int n;
    char msg[8][256];
} server_notes; /* what reached the process's reporter (the server's stderr) */

static void server_note(void *ctx, AvNoteKind kind, const char *msg) {
    (void)ctx;
    if (kind == AV_NOTE_WARNING && server_notes.n < 8) snprintf(server_notes.msg[server_notes.n++], 256, "%s", msg);
}

static Live *open_model(const char *dir, int max_tokens, size_t cache) {
    memset(&server_notes, 0, sizeof server_notes);
    av_set_reporter(&(AvReporter){server_note, NULL, 0});
    RunSpec page;
    memset(&page, 0, sizeof page);
    page.sel.layer = page.sel.head = -1;
    page.output.precision = 6;
    page.predict.top_p = 1;
    page.capture.max_tokens = max_tokens;
    const ModelSpec m = {dir, -1, 0, 0, NULL};
    const LiveLimits lim = {cache, 4, 10000.0, 8, 16, 0, 0, 0, CAP_QK_F32};
    Live *lv = NULL;
    AvErr e = {0};
    ck_assert_msg(live_open(&lv, &m, 1, &page, &lim, &e) == 0, "%s", e.msg);
    return lv;
}

static Live *open_live(int max_tokens) { return open_model(F32, max_tokens, 64u << 20); }

/* The response's "warnings" array, as its JSON text. */
static void warnings_of(const char *json, char *out, size_t cap) {
    const char *w = strstr(json, "\"warnings\":[");
    ck_assert_ptr_nonnull(w);
    w += strlen("\"warnings\":");
    const char *end = strchr(w, ']');
    ck_assert_ptr_nonnull(end);
    snprintf(out, cap, "%.*s", (int)(end - w + 1), w);
}

START_TEST(a_truncated_run_carries_the_command_lines_warning) {
    Live *lv = open_live(4);
    unsigned id = 0;
    char *json = NULL, w[512];
    AvErr e = {0};
    ck_assert_msg(live_run(lv, 0, "time flies like an arrow", NULL, 0, &id, &json, &e) == LIVE_OK, "%s", e.msg);
    ck_assert_ptr_nonnull(strstr(json, "\"n\":4,"));
    warnings_of(json, w, sizeof w);
    ck_assert_str_eq(w, "[\"input is longer than --max-tokens 4; dropped 3 tokens (longest first)\"]");
    ck_assert_int_eq(server_notes.n, 0); /* the client's business, not the server's log */
    free(json);
    /* the same input is the same run, with the same warnings (not said twice) */
    unsigned id2 = 0;
    ck_assert_int_eq(live_run(lv, 0, "time flies like an arrow", NULL, 0, &id2, &json, &e), LIVE_OK);
    ck_assert_uint_eq(id2, id);
    warnings_of(json, w, sizeof w);
    ck_assert_str_eq(w, "[\"input is longer than --max-tokens 4; dropped 3 tokens (longest first)\"]");
    free(json);
    ck_assert_int_eq(live_run(lv, 0, "time flies", NULL, 0, &id2, &json, &e), LIVE_OK);
    ck_assert_uint_ne(id2, id);
    warnings_of(json, w, sizeof w);
    ck_assert_str_eq(w, "[]");
    free(json);
    live_close(lv);
    av_set_reporter(NULL);
}
END_TEST

typedef struct {
    Live *lv;
    const char *text;
    char warnings[512];
    LiveStatus st;
} Job;

static void *run_job(void *arg) {
    Job *j = arg;
    unsigned id;
    char *json = NULL;
    AvErr e = {0};
    j->st = live_run(j->lv, 0, j->text, NULL, 0, &id, &json, &e);
    if (j->st == LIVE_OK) warnings_of(json, j->warnings, sizeof j->warnings);
    free(json);
    return NULL;
}

START_TEST(concurrent_runs_keep_their_own_warnings) {
    Live *lv = open_live(3);
    Job a = {lv, "time flies like an arrow", "", LIVE_FAILED}, b = {lv, "time", "", LIVE_FAILED};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, run_job, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, run_job, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a.st, LIVE_OK);
    ck_assert_int_eq(b.st, LIVE_OK);
    ck_assert_ptr_nonnull(strstr(a.warnings, "input is longer than --max-tokens 3; dropped"));
    ck_assert_str_eq(b.warnings, "[]");
    ck_assert_int_eq(server_notes.n, 0);
    live_close(lv);
    av_set_reporter(NULL);
}
END_TEST

START_TEST(bad_requests_are_refused_with_a_reason) {
    Live *lv = open_live(0);
    unsigned id;
    char *json = NULL;
    AvErr e = {0};
    ck_assert_int_eq(live_run(lv, 1, "x", NULL, 0, &id, &json, &e), LIVE_BAD_INPUT);
    ck_assert_str_eq(e.msg, "no model 1 (1 served)");
    ck_assert_int_eq(live_run(lv, 0, "x", NULL, 101, &id, &json, &e), LIVE_BAD_INPUT);
    ck_assert_str_eq(e.msg, "predict: 101 is outside 0..100");
    ck_assert_int_eq(live_run(lv, 0, "x", NULL, 3, &id, &json, &e), LIVE_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "this model cannot predict"));
    LiveRun *r = NULL;
    ck_assert_int_eq(live_acquire(lv, 12345, &r, &e), LIVE_NOT_FOUND);
    ck_assert_ptr_null(json);
    live_close(lv);
    av_set_reporter(NULL);
}
END_TEST

/* An encoder-decoder run (tests/data/small-t5): its response names both lengths,
 * its stacks' shapes follow the source and the decoder's tokens, and once evicted
 * (a budget that holds one run of two) it is recomputed to the same codes. */
#define T5 "tests/data/small-t5"
static void s2s_lengths(const char *json, int *ne, int *nd) {
    const char *a = strstr(json, "\"n\":"), *b = strstr(json, "\"n_decoder\":");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    *ne = atoi(a + 4), *nd = atoi(b + 12);
}

START_TEST(an_encoder_decoder_run_is_recomputed_the_same_after_eviction) {
    /* long enough that a pass takes well over the response's 0.1 ms resolution */
    const char *src_a = "the cat sat on the mat and the dog sat on the log while the bird sang in the tree and the "
                        "fish swam in the pond and the cow ate the grass in the field by the old red barn",
               *src_b = "a dog ran to the red house";
    char *json = NULL;
    AvErr e = {0};
    unsigned a, b;
    int ne[2], nd[2];
    /* the two runs' sizes, on a roomy server */
    Live *lv = open_model(T5, 0, 64u << 20);
    ck_assert_int_eq(live_model_seq2seq(lv, 0), 1);
    ck_assert_msg(live_run(lv, 0, src_a, "a cat sat", 0, &a, &json, &e) == LIVE_OK, "%s", e.msg);
    s2s_lengths(json, &ne[0], &nd[0]);
    free(json);
    ck_assert_msg(live_run(lv, 0, src_b, "the dog", 0, &b, &json, &e) == LIVE_OK, "%s", e.msg);
    s2s_lengths(json, &ne[1], &nd[1]);
    free(json);
    ck_assert_int_eq(live_run(lv, 0, src_a, "a cat sat", 3, &a, &json, &e), LIVE_BAD_INPUT); /* no predictions */
    live_close(lv);
    av_set_reporter(NULL);
    size_t bytes[2];
    for (int k = 0; k < 2; k++) bytes[k] = (size_t)(4.0 * 2 * 2 * ((double)ne[k] * ne[k] + (double)nd[k] * nd[k] + (double)nd[k] * ne[k]));
    /* room for one of them at a time */
    lv = open_model(T5, 0, bytes[0] + bytes[1] - 1);
    ck_assert_msg(live_run(lv, 0, src_a, "a cat sat", 0, &a, &json, &e) == LIVE_OK, "%s", e.msg);
    free(json);
    LiveRun *r = NULL;
    ck_assert_int_eq(live_acquire(lv, a, &r, &e), LIVE_OK);
    int rows, cols;
    ck_assert_int_eq(live_stack(r, "cross", &rows, &cols), 2);
    ck_assert_int_eq(rows, nd[0]);
    ck_assert_int_eq(cols, ne[0]);
    ck_assert_int_eq(live_stack(r, "decoder", &rows, &cols), 1);
    ck_assert_int_eq(rows, nd[0]);
    ck_assert_int_eq(cols, nd[0]);
    ck_assert_int_eq(live_stack(r, "self", &rows, &cols), -1);
    const int heads[2] = {1, 0};
    unsigned char *z1 = NULL, *z2 = NULL;
    size_t l1 = 0, l2 = 0;
    ck_assert_msg(live_stack_attention(lv, r, 2, 1, heads, 2, &z1, &l1, &e) == 0, "%s", e.msg);
    live_release(lv, r);
    ck_assert_msg(live_run(lv, 0, src_b, "the dog", 0, &b, &json, &e) == LIVE_OK, "%s", e.msg); /* evicts a's stacks */
    free(json);
    ck_assert_msg(live_run(lv, 0, src_a, "a cat sat", 0, &a, &json, &e) == LIVE_OK, "%s", e.msg);
    ck_assert_ptr_null(strstr(json, "\"forward\":0.0}")); /* computed again, not from the cache */
    free(json);
    ck_assert_int_eq(live_acquire(lv, a, &r, &e), LIVE_OK);
    ck_assert_msg(live_stack_attention(lv, r, 2, 1, heads, 2, &z2, &l2, &e) == 0, "%s", e.msg);
    live_release(lv, r);
    ck_assert_uint_eq(l1, l2);
    ck_assert_int_eq(memcmp(z1, z2, l1), 0);
    free(z1);
    free(z2);
    live_close(lv);
    av_set_reporter(NULL);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("live");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, a_truncated_run_carries_the_command_lines_warning);
    tcase_add_test(t, concurrent_runs_keep_their_own_warnings);
    tcase_add_test(t, bad_requests_are_refused_with_a_reason);
    tcase_add_test(t, an_encoder_decoder_run_is_recomputed_the_same_after_eviction);
    suite_add_tcase(s, t);
    return s;
}
