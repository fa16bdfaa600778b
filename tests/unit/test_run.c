/* test_run.c — the run module (pipeline.h over run/): a model found and
 * loaded from typed settings, one input and a batch written, the one-input
 * API a server uses, and what it reports going to the installed reporter
 * (a collector here, as serve could install), never to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline.h"
#include "run_internal.h"
#include "session.h"
#include "predict.h"
#include "report.h"
#include "util.h"
#include "check_util.h"

#define F32 "tests/data/small-f32"
#define GPT2 "tests/data/small-gpt2"

/* A collector reporter: every note kept, with its kind. */
static struct {
    int n;
    AvNoteKind kind[16];
    char msg[16][512];
} notes;

static void collect(void *ctx, AvNoteKind kind, const char *msg) {
    (void)ctx;
    if (notes.n < 16) {
        notes.kind[notes.n] = kind;
        snprintf(notes.msg[notes.n++], sizeof notes.msg[0], "%s", msg);
    }
}

static void install_collector(void) {
    memset(&notes, 0, sizeof notes);
    const AvReporter r = {collect, NULL, 0};
    av_set_reporter(&r);
}

static RunSpec run_spec(const char *json_path) {
    RunSpec o;
    memset(&o, 0, sizeof o);
    o.sel.layer = o.sel.head = -1;
    o.output.precision = 6;
    o.output.json_path = json_path;
    o.predict.top_p = 1;
    o.batch.pack_tokens = CLI_PACK_TOKENS;
    return o;
}

static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    AvErr e;
    ck_assert_msg(av_read_file(path, 1 << 24, &buf, &len, &e) == 0, "%s", e.msg);
    return buf;
}

/* A model opened for a run of o as the command line opens it: a session and a run over it. */
typedef struct {
    Session *s;
    Run *r;
} Opened;

static int open_run(Opened *x, const ModelSpec *m, const RunSpec *o, const char **dir, const char **why, AvErr *e) {
    x->s = NULL, x->r = NULL;
    if (session_open_for(&x->s, m, o, dir, why, e) != 0) return -1;
    return run_open(&x->r, x->s, o, e);
}

/* ... and closed as it closes them (--profile's note first). */
static void close_run(Opened *x, const RunSpec *o) {
    if (o->profile) run_profile(x->s, x->r);
    run_close(x->r);
    session_close(x->s);
}

/* Gemma 3's vision tower at its published shape (SigLIP so400m at 896 px: 27 layers x 16 heads over 4,096
 * patches, 1152 wide): its whole attention is counted before the pass (27 x 16 x 4096^2 floats, 29.0 GB),
 * under a 12 GB budget only its last layers are kept, one layer's page is past what a browser opens, and a
 * budget below one layer is refused naming the remedies. No weights: the plan reads the config only. */
START_TEST(a_vision_towers_capture_is_planned_at_its_real_shape) {
    ModelConfig vc;
    memset(&vc, 0, sizeof vc);
    vc.num_layers = 27, vc.num_heads = 16, vc.num_kv_heads = 16, vc.hidden_size = 1152, vc.head_dim = 72;
    const int nv = 4096;
    const double attn = 27.0 * 16 * nv * (double)nv * sizeof(float), layer = attn / 27, hidden = 28.0 * nv * 1152 * sizeof(float);
    ck_assert_double_eq_tol(run_tower_need(&vc, nv, 0, 27), attn, 1e-6 * attn);
    ck_assert_double_eq_tol(run_tower_need(&vc, nv, 1, 27), attn + hidden, 1e-6 * attn);
    ck_assert_double_eq_tol(run_tower_need(&vc, nv, 0, 3), 3 * layer, 1e-6 * attn);
    ck_assert(run_tower_page(&vc, nv, 1) > (double)HTML_PAGE_BOUND);

    Run r;
    memset(&r, 0, sizeof r);
    r.spec = run_spec(NULL);
    r.spec.output.html_path = "page.html";
    r.spec.output.long_from = OUT_LONG_AUTO; /* the page is all the run writes */
    r.spec.capture.max_capture = 12e9;
    const double beside = 0.5e9; /* the decoder's capture */
    TowerPlan tp;
    AvErr e;
    install_collector();
    ck_assert_int_eq(run_plan_tower(&r, &vc, nv, 0, beside, &tp, &e), 0);
    ck_assert_int_eq(tp.layers, 0); /* the page is all the run writes, and not one layer's page opens: none kept */
    ck_assert_int_eq(tp.page, 0);
    ck_assert_int_eq(notes.n, 1);
    ck_assert_msg(strstr(notes.msg[0], "(27 layers x 16 heads over 4096 tokens) needs 29.0 GB") &&
                      strstr(notes.msg[0], "not kept, no FILE.vision.html (--npy FILE keeps its last 10 layers)"),
                  "%s", notes.msg[0]);
    /* --npy keeps the matrices whole: the page is written all the same, its size said */
    r.spec.output.whole_for = "--npy", r.spec.output.npy_path = "a.npy";
    ck_assert_int_eq(run_plan_tower(&r, &vc, nv, 0, beside, &tp, &e), 0);
    ck_assert_int_eq(tp.layers, (int)((12e9 - beside) / layer)); /* 10 of 27 */
    ck_assert_int_eq(tp.page, 1);
    ck_assert_int_eq(notes.n, 2);
    ck_assert_msg(strstr(notes.msg[1], "keeping its last 10 of 27 layers (10.7 GB); their page FILE.vision.html will be up to") &&
                      strstr(notes.msg[1], "--npy keeps them"),
                  "%s", notes.msg[1]);
    r.spec.capture.max_capture = 1e9;
    ck_assert_int_eq(run_plan_tower(&r, &vc, nv, 0, beside, &tp, &e), -1);
    ck_assert_msg(strstr(e.msg, "not even its last layer fits the 1.0 GB allowed (--max-capture) beside the decoder's 500.0 MB") &&
                      strstr(e.msg, "attnviz serve"),
                  "%s", e.msg);
    av_set_reporter(NULL);
}
END_TEST

START_TEST(one_input_is_run_and_written) {
    install_collector();
    char path[] = "/tmp/attnviz-test-run-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    RunSpec o = run_spec(path);
    o.text_a = "time flies like an arrow";
    o.capture.max_tokens = 4;
    const ModelSpec m = {F32, -1, 0, 0, NULL};
    Opened p;
    const char *dir, *why;
    AvErr e = {0};
    ck_assert_msg(open_run(&p, &m, &o, &dir, &why, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(dir, F32);
    ck_assert_str_eq(why, "--model");
    ck_assert_int_eq(session_config(p.s)->num_layers, 2);
    ck_assert_msg(run_inputs(p.r, &e) == 0, "%s", e.msg);
    close_run(&p, &o);
    char *json = slurp(path);
    ck_assert_ptr_nonnull(strstr(json, "\"tokens\":[\"[CLS]\",\"time\",\"flies\",\"[SEP]\"]"));
    free(json);
    unlink(path);
    /* the truncation reaches the reporter as a warning, then the file written is named; nothing else was said */
    ck_assert_int_eq(notes.n, 2);
    ck_assert_int_eq(notes.kind[0], AV_NOTE_WARNING);
    ck_assert_str_eq(notes.msg[0], "input is longer than --max-tokens 4; dropped 3 tokens (longest first)");
    ck_assert_int_eq(notes.kind[1], AV_NOTE_INFO);
    char wrote[128];
    snprintf(wrote, sizeof wrote, "wrote %s", path);
    ck_assert_str_eq(notes.msg[1], wrote);
}
END_TEST

START_TEST(quiet_runs_report_warnings_and_profile_only) {
    install_collector();
    RunSpec o = run_spec("/dev/null");
    o.text_a = "time flies like an arrow";
    o.capture.max_tokens = 4;
    o.quiet = o.profile = 1;
    const ModelSpec m = {F32, -1, 0, 0, NULL};
    Opened p;
    const char *dir, *why;
    AvErr e = {0};
    ck_assert_msg(open_run(&p, &m, &o, &dir, &why, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(run_inputs(p.r, &e), 0);
    close_run(&p, &o);
    /* --quiet drops the informational lines (no "wrote"), never a warning: the truncation still shows */
    ck_assert_int_eq(notes.n, 2);
    ck_assert_int_eq(notes.kind[0], AV_NOTE_WARNING);
    ck_assert_str_eq(notes.msg[0], "input is longer than --max-tokens 4; dropped 3 tokens (longest first)");
    ck_assert_int_eq(notes.kind[1], AV_NOTE_PROFILE);
    ck_assert_ptr_nonnull(strstr(notes.msg[1], "load_ms="));
}
END_TEST

START_TEST(a_missing_model_is_a_runtime_error_value) {
    install_collector();
    RunSpec o = run_spec(NULL);
    const ModelSpec m = {"tests/data/no-such-model", -1, 0, 0, NULL};
    Opened p;
    const char *dir, *why;
    AvErr e = {0};
    ck_assert_int_eq(open_run(&p, &m, &o, &dir, &why, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_RUNTIME);
    ck_assert_str_eq(e.msg, "tests/data/no-such-model: no such file or directory");
    close_run(&p, &o);
    ck_assert_int_eq(notes.n, 0);
}
END_TEST

START_TEST(a_batch_reports_failed_lines_and_fails_at_the_end) {
    install_collector();
    char in[] = "/tmp/attnviz-test-batch-XXXXXX", out[] = "/tmp/attnviz-test-jsonl-XXXXXX";
    int fd = mkstemp(in), fo = mkstemp(out);
    ck_assert(fd >= 0 && fo >= 0);
    ck_assert_int_eq(write(fd, "the cat\n\nit sat\tdown\n", 21), 21);
    close(fd);
    close(fo);
    RunSpec o = run_spec(out);
    o.batch.path = in;
    const ModelSpec m = {F32, -1, 0, 0, NULL};
    Opened p;
    const char *dir, *why;
    AvErr e = {0};
    ck_assert_msg(open_run(&p, &m, &o, &dir, &why, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(run_inputs(p.r, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_RUNTIME);
    ck_assert_str_eq(e.msg, "1 of 3 lines failed");
    close_run(&p, &o);
    ck_assert_int_eq(notes.n, 2); /* the failed line, then the file written */
    ck_assert_int_eq(notes.kind[0], AV_NOTE_ERROR);
    char want[256];
    snprintf(want, sizeof want, "%s:2: empty line; skipped", in);
    ck_assert_str_eq(notes.msg[0], want);
    snprintf(want, sizeof want, "wrote %s", out);
    ck_assert_str_eq(notes.msg[1], want);
    char *jsonl = slurp(out);
    int lines = 0;
    for (char *c = jsonl; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, 2); /* the good lines, in order */
    free(jsonl);
    unlink(in);
    unlink(out);
}
END_TEST

/* --shard I/N: the lines numbered (from 0) I modulo N, every line counted: blank
 * ones too, so a blank line is the failure of the one shard it falls in. */
START_TEST(a_shard_takes_every_nth_line_counting_every_line) {
    char in[] = "/tmp/attnviz-test-shard-XXXXXX", out[] = "/tmp/attnviz-test-shardout-XXXXXX";
    int fd = mkstemp(in), fo = mkstemp(out);
    ck_assert(fd >= 0 && fo >= 0);
    const char text[] = "the cat\n\nit sat\tdown\nfour\nfive\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    close(fo);
    const ModelSpec m = {F32, -1, 0, 0, NULL};
    for (int shard = 0; shard < 2; shard++) {
        install_collector();
        RunSpec o = run_spec(out);
        o.batch.path = in;
        o.batch.shard_index = shard, o.batch.shard_count = 2;
        Opened p;
        const char *dir, *why;
        AvErr e = {0};
        ck_assert_msg(open_run(&p, &m, &o, &dir, &why, &e) == 0, "%s", e.msg);
        int rc = run_inputs(p.r, &e);
        close_run(&p, &o);
        char *jsonl = slurp(out);
        int lines = 0;
        for (char *c = jsonl; *c; c++) lines += *c == '\n';
        if (shard == 0) { /* lines 1, 3, 5 */
            ck_assert_msg(rc == 0, "%s", e.msg);
            ck_assert_int_eq(lines, 3);
            ck_assert_ptr_nonnull(strstr(jsonl, "\"text_b\":\"down\""));
            ck_assert_ptr_nonnull(strstr(jsonl, "five"));
            ck_assert_ptr_null(strstr(jsonl, "four"));
            ck_assert_int_eq(notes.n, 2); /* the file written, then "3 inputs processed" */
            char wrote[256];
            snprintf(wrote, sizeof wrote, "wrote %s", out);
            ck_assert_str_eq(notes.msg[0], wrote);
            ck_assert_str_eq(notes.msg[1], "3 inputs processed");
        } else { /* lines 2 (blank: fails here, and only here) and 4 */
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(e.msg, "1 of 2 lines of shard 1/2 failed");
            ck_assert_int_eq(lines, 1);
            ck_assert_ptr_nonnull(strstr(jsonl, "four"));
            ck_assert_int_eq(notes.n, 2); /* the failed line, then the file written */
            char want[256];
            snprintf(want, sizeof want, "%s:2: empty line; skipped", in);
            ck_assert_str_eq(notes.msg[0], want);
            snprintf(want, sizeof want, "wrote %s", out);
            ck_assert_str_eq(notes.msg[1], want);
        }
        free(jsonl);
    }
    unlink(in);
    unlink(out);
}
END_TEST

START_TEST(the_server_api_spells_predictions_for_the_writers) {
    av_set_reporter(NULL);
    RunSpec o = run_spec(NULL);
    const ModelSpec m = {GPT2, -1, 0, 0, NULL};
    Session *s = NULL;
    Run *r = NULL;
    const char *dir, *why;
    AvErr e = {0};
    ck_assert_msg(session_open(&s, &m, &dir, &why, &e) == 0, "%s", e.msg);
    ck_assert_msg(run_open(&r, s, &o, &e) == 0, "%s", e.msg);
    TokEncoding enc = {0};
    ck_assert_int_eq(run_tokens(r, "the cat sat", NULL, &enc, &e), 0);
    InputResult res = {0};
    ck_assert_int_eq(model_capture_select(&res.cap, &s->cfg, enc.n, 1, 0, NULL, 0, NULL, 0, &e), 0);
    ck_assert_msg(run_forward(r, &enc, &res.cap, 2, &res.pred, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(res.pred.n, enc.n); /* causal: every position */
    ck_assert_int_eq(session_spell(s, res.pred.ids, res.pred.n * res.pred.k, &res.pred_words, &e), 0);
    ck_assert_int_eq(res.pred_words.n, res.pred.n * res.pred.k);
    for (int i = 0; i < res.pred_words.n; i++) ck_assert_ptr_nonnull(res.pred_words.token[i]);
    OutDoc d;
    o.predict.k = 2; /* the document shows what the settings ask for */
    input_doc(s, &o, &res, &d, &enc, &res.cap, "the cat sat", NULL);
    ck_assert_ptr_eq(d.pred, &res.pred);
    ck_assert_ptr_eq(d.pred_words, &res.pred_words);
    ck_assert_ptr_null(d.gen_words);
    o.predict.k = 0;
    input_doc(s, &o, &res, &d, &enc, &res.cap, "the cat sat", NULL);
    ck_assert_ptr_null(d.pred);
    input_result_free(&res);
    tok_encoding_free(&enc);
    run_close(r);
    session_close(s);
}
END_TEST

START_TEST(diff_and_render_check_the_selection_as_usage_errors) {
    av_set_reporter(NULL);
    RunSpec o = run_spec(NULL);
    o.text_a = "the cat";
    o.text_b = "the dog";
    o.sel.layer = 5;
    const ModelSpec m = {F32, -1, 0, 0, NULL};
    const DiffSpec ds = {NULL, 0};
    AvErr e = {0};
    ck_assert_int_eq(pipeline_diff(&m, &ds, &o, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "--layer 5 is out of range: the model has 2 layers (0-1)");
    const RenderSpec rs = {"tests/data/no-such.npz", NULL};
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(pipeline_render(&rs, &o, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_RUNTIME);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("run");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, one_input_is_run_and_written);
    tcase_add_test(t, quiet_runs_report_warnings_and_profile_only);
    tcase_add_test(t, a_missing_model_is_a_runtime_error_value);
    tcase_add_test(t, a_batch_reports_failed_lines_and_fails_at_the_end);
    tcase_add_test(t, a_shard_takes_every_nth_line_counting_every_line);
    tcase_add_test(t, the_server_api_spells_predictions_for_the_writers);
    tcase_add_test(t, diff_and_render_check_the_selection_as_usage_errors);
    tcase_add_test(t, a_vision_towers_capture_is_planned_at_its_real_shape);
    suite_add_tcase(s, t);
    return s;
}
