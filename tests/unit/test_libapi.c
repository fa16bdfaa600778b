/* test_libapi.c — libattnviz's public API (include/attnviz.h) on the demo
 * model and the fixtures: shapes and selections, errors as values for every
 * kind of bad call, results that outlive their model, JSON equal to the
 * captured numbers, one handle shared by threads, and silence (nothing on
 * stderr). tests/e2e/lib_test.sh checks the installed library and its example
 * against the CLI. */
#include <cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "attnviz.h"
#include "check_util.h"
#include "util.h"

#define DEMO "weights/demo"
#define TEXT "time flies like an arrow"

static attnviz_model *open_demo(void) {
    attnviz_error err;
    attnviz_model *m = attnviz_model_open(DEMO, 0, &err);
    ck_assert_msg(m != NULL, "open %s: %s", DEMO, err.message);
    ck_assert_int_eq(err.code, ATTNVIZ_OK);
    return m;
}

static void assert_one_line(const attnviz_error *err, attnviz_status want, const char *needle) {
    ck_assert_int_eq(err->code, want);
    ck_assert_msg(err->message[0] && !strchr(err->message, '\n'), "not one line: '%s'", err->message);
    ck_assert_msg(strstr(err->message, needle), "'%s' lacks '%s'", err->message, needle);
}

START_TEST(open_reports_errors_as_values) {
    attnviz_error err;
    ck_assert_ptr_null(attnviz_model_open(NULL, 0, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "no model path");
    ck_assert_ptr_null(attnviz_model_open("tests/no-such-model", 0, &err));
    assert_one_line(&err, ATTNVIZ_ERR_RUNTIME, "tests/no-such-model");
    ck_assert_ptr_null(attnviz_model_open(DEMO, ATTNVIZ_OPEN_CASED | ATTNVIZ_OPEN_UNCASED, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "together");
    ck_assert_ptr_null(attnviz_model_open(DEMO, 64, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "unknown flags");
    ck_assert_ptr_null(attnviz_model_open("tests/no-such-model", 0, NULL)); /* err is optional */
    ck_assert_str_eq(attnviz_version(), "0.1.0");
}
END_TEST

START_TEST(null_handles_are_refused_not_crashed) {
    attnviz_error err;
    size_t shape[4], n = 99;
    float f;
    ck_assert_ptr_null(attnviz_run(NULL, TEXT, NULL, NULL, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "NULL model");
    ck_assert_int_eq(attnviz_tokenize(NULL, TEXT, NULL, NULL, 0, &n, &err), ATTNVIZ_ERR_USAGE);
    ck_assert_int_eq(attnviz_result_write_page(NULL, "x.html", NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "NULL result");
    ck_assert_int_eq(attnviz_result_write_json(NULL, "x.json", 0, 0, &err), ATTNVIZ_ERR_USAGE);
    ck_assert_int_eq(attnviz_result_copy(NULL, ATTNVIZ_ATTENTION, &f, 1, &err), ATTNVIZ_ERR_USAGE);
    ck_assert_int_eq(attnviz_result_shape(NULL, ATTNVIZ_ATTENTION, shape), 0);
    ck_assert_ptr_null(attnviz_result_data(NULL, ATTNVIZ_ATTENTION));
    ck_assert_ptr_null(attnviz_result_token(NULL, 0));
    ck_assert_int_eq(attnviz_result_n_tokens(NULL), 0);
    ck_assert_int_eq(attnviz_model_n_layers(NULL), 0);
    ck_assert_ptr_null(attnviz_model_name(NULL));
    ck_assert_int_eq(attnviz_render(NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    attnviz_model_free(NULL);
    attnviz_result_free(NULL);
    attnviz_model *m = open_demo();
    ck_assert_ptr_null(attnviz_run(m, NULL, NULL, NULL, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "NULL text");
    ck_assert_int_eq(attnviz_tokenize(m, TEXT, NULL, NULL, 4, &n, &err), ATTNVIZ_ERR_USAGE);
    attnviz_model_free(m);
}
END_TEST

START_TEST(a_run_has_the_models_shape_and_tokens) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    ck_assert_int_eq(attnviz_model_n_layers(m), 2);
    ck_assert_int_eq(attnviz_model_n_heads(m), 12);
    ck_assert_str_eq(attnviz_model_name(m), "attnviz-demo");
    ck_assert_str_eq(attnviz_model_type(m), "bert");
    size_t n = 0;
    ck_assert_int_eq(attnviz_tokenize(m, TEXT, NULL, NULL, 0, &n, &err), ATTNVIZ_OK);
    ck_assert_uint_eq(n, 7); /* [CLS] time flies like an arrow [SEP] */
    int ids[7];
    ck_assert_int_eq(attnviz_tokenize(m, TEXT, NULL, ids, 7, &n, &err), ATTNVIZ_OK);
    attnviz_result *r = attnviz_run(m, TEXT, NULL, NULL, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_int_eq(attnviz_result_n_tokens(r), 7);
    ck_assert_mem_eq(attnviz_result_ids(r), ids, sizeof ids);
    ck_assert_str_eq(attnviz_result_token(r, 0), "[CLS]");
    ck_assert_str_eq(attnviz_result_token(r, 2), "flies");
    ck_assert_int_eq(attnviz_result_token_is_special(r, 6), 1);
    ck_assert_int_eq(attnviz_result_token_is_special(r, 1), 0);
    ck_assert_ptr_null(attnviz_result_token(r, 7));
    ck_assert_str_eq(attnviz_model_token(m, ids[1]), "time");
    ck_assert_ptr_null(attnviz_model_token(m, -1));
    size_t s[4];
    ck_assert_int_eq(attnviz_result_shape(r, ATTNVIZ_ATTENTION, s), 4);
    ck_assert(s[0] == 2 && s[1] == 12 && s[2] == 7 && s[3] == 7);
    ck_assert_int_eq(attnviz_result_shape(r, ATTNVIZ_QUERIES, s), 4);
    ck_assert_uint_eq(s[3], (size_t)attnviz_model_head_dim(m));
    ck_assert_int_eq(attnviz_result_shape(r, ATTNVIZ_HIDDEN, s), 0); /* not asked for */
    const float *a = attnviz_result_data(r, ATTNVIZ_ATTENTION);
    for (int row = 0; row < 2 * 12 * 7; row++) {
        double sum = 0;
        for (int j = 0; j < 7; j++) sum += a[row * 7 + j];
        ck_assert_msg(sum > 0.9999 && sum < 1.0001, "row %d sums to %g", row, sum);
    }
    ck_assert_int_eq(attnviz_result_n_predictions(r), 0);
    attnviz_result_free(r);
    attnviz_model_free(m);
}
END_TEST

START_TEST(a_selection_keeps_those_blocks_exactly) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    attnviz_result *all = attnviz_run(m, TEXT, NULL, NULL, &err);
    ck_assert_ptr_nonnull(all);
    const int layers[] = {1}, heads[] = {9, 3, 9}; /* any order, repeats ignored */
    attnviz_run_options o = {.layers = layers, .n_layers = 1, .heads = heads, .n_heads = 3};
    attnviz_result *r = attnviz_run(m, TEXT, NULL, &o, &err);
    ck_assert_msg(r != NULL, "%s", err.message);
    ck_assert_int_eq(attnviz_result_n_layers(r), 1);
    ck_assert_int_eq(attnviz_result_n_heads(r), 2);
    ck_assert_int_eq(attnviz_result_layer(r, 0), 1);
    ck_assert_int_eq(attnviz_result_head(r, 0), 3);
    ck_assert_int_eq(attnviz_result_head(r, 1), 9);
    ck_assert_int_eq(attnviz_result_head(r, 2), -1);
    const float *a = attnviz_result_data(all, ATTNVIZ_ATTENTION), *b = attnviz_result_data(r, ATTNVIZ_ATTENTION);
    ck_assert_mem_eq(b, a + (1 * 12 + 3) * 49, 49 * sizeof(float));
    ck_assert_mem_eq(b + 49, a + (1 * 12 + 9) * 49, 49 * sizeof(float));
    attnviz_result_free(r);
    attnviz_result_free(all);
    attnviz_model_free(m);
}
END_TEST

START_TEST(bad_selections_and_options_are_usage_errors) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    const int bad_layer[] = {0, 2}, bad_head[] = {-1};
    attnviz_run_options o = {.layers = bad_layer, .n_layers = 2};
    ck_assert_ptr_null(attnviz_run(m, TEXT, NULL, &o, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "layers: 2 is out of range: the model has 2 (0-1)");
    o = (attnviz_run_options){.heads = bad_head, .n_heads = 1};
    ck_assert_ptr_null(attnviz_run(m, TEXT, NULL, &o, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "heads: -1 is out of range");
    o = (attnviz_run_options){.n_layers = 3};
    ck_assert_ptr_null(attnviz_run(m, TEXT, NULL, &o, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "the list is NULL");
    o = (attnviz_run_options){.predict = 101};
    ck_assert_ptr_null(attnviz_run(m, TEXT, NULL, &o, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "predict");
    o = (attnviz_run_options){.flags = 8};
    ck_assert_ptr_null(attnviz_run(m, TEXT, NULL, &o, &err));
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "unknown flags");
    /* the handle still works after refusals */
    attnviz_result *r = attnviz_run(m, TEXT, NULL, NULL, &err);
    ck_assert_ptr_nonnull(r);
    attnviz_result_free(r);
    attnviz_model_free(m);
}
END_TEST

START_TEST(copies_check_their_destination) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    attnviz_run_options o = {.flags = ATTNVIZ_RUN_HIDDEN};
    attnviz_result *r = attnviz_run(m, TEXT, NULL, &o, &err);
    ck_assert_ptr_nonnull(r);
    size_t s[4];
    ck_assert_int_eq(attnviz_result_shape(r, ATTNVIZ_HIDDEN, s), 3);
    ck_assert(s[0] == 3 && s[1] == 7 && s[2] == 768);
    size_t count = 2 * 12 * 7 * 7;
    float *buf = malloc(count * sizeof *buf);
    ck_assert_int_eq(attnviz_result_copy(r, ATTNVIZ_ATTENTION, buf, count - 1, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "needed");
    ck_assert_int_eq(attnviz_result_copy(r, ATTNVIZ_ATTENTION, NULL, count, &err), ATTNVIZ_ERR_USAGE);
    ck_assert_int_eq(attnviz_result_copy(r, ATTNVIZ_ATTENTION, buf, count, &err), ATTNVIZ_OK);
    ck_assert_mem_eq(buf, attnviz_result_data(r, ATTNVIZ_ATTENTION), count * sizeof *buf);
    attnviz_result_free(r);
    r = attnviz_run(m, TEXT, NULL, NULL, &err);
    ck_assert_int_eq(attnviz_result_copy(r, ATTNVIZ_HIDDEN, buf, count, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "ATTNVIZ_RUN_HIDDEN");
    free(buf);
    attnviz_result_free(r);
    attnviz_model_free(m);
}
END_TEST

/* JSON at 9 digits holds float32 exactly: the file's attention is the result's. */
START_TEST(json_and_page_are_written_and_bad_paths_refused) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    attnviz_result *r = attnviz_run(m, TEXT, "it was tired", NULL, &err);
    ck_assert_ptr_nonnull(r);
    char dir[] = "/tmp/attnviz-libapi-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char json[256], page[256];
    snprintf(json, sizeof json, "%s/a.json", dir);
    snprintf(page, sizeof page, "%s/a.html", dir);
    ck_assert_int_eq(attnviz_result_write_json(r, json, 9, ATTNVIZ_JSON_QK, &err), ATTNVIZ_OK);
    char *text;
    size_t len;
    AvErr e;
    ck_assert_int_eq(av_read_file(json, 64 << 20, &text, &len, &e), 0);
    cJSON *d = cJSON_Parse(text);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "text_b")->valuestring, "it was tired");
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(d, "queries"));
    const cJSON *att = cJSON_GetObjectItem(d, "attention");
    const int n = attnviz_result_n_tokens(r);
    const float *a = attnviz_result_data(r, ATTNVIZ_ATTENTION);
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 12; h++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    const cJSON *v = cJSON_GetArrayItem(
                        cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(att, l), h), i), j);
                    ck_assert_float_eq((float)v->valuedouble, a[((l * 12 + h) * n + i) * n + j]);
                }
    cJSON_Delete(d);
    free(text);
    ck_assert_int_eq(attnviz_result_write_page(r, page, "model", &err), ATTNVIZ_OK);
    ck_assert_int_eq(av_read_file(page, 64 << 20, &text, &len, &e), 0);
    ck_assert_msg(len > 10000 && strstr(text, "<html"), "page of %zu bytes", len);
    free(text);
    ck_assert_int_eq(attnviz_result_write_page(r, page, "nope", &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "not 'nope'");
    ck_assert_int_eq(attnviz_result_write_page(r, "/nonexistent-dir/a.html", NULL, &err), ATTNVIZ_ERR_RUNTIME);
    assert_one_line(&err, ATTNVIZ_ERR_RUNTIME, "/nonexistent-dir/a.html");
    ck_assert_int_eq(attnviz_result_write_json(r, json, 10, 0, &err), ATTNVIZ_ERR_USAGE);
    ck_assert_int_eq(attnviz_result_write_json(r, NULL, 0, 0, &err), ATTNVIZ_ERR_USAGE);
    unlink(json);
    unlink(page);
    rmdir(dir);
    attnviz_result_free(r);
    attnviz_model_free(m);
}
END_TEST

START_TEST(a_result_outlives_its_model_handle) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    attnviz_result *r = attnviz_run(m, TEXT, NULL, NULL, &err);
    ck_assert_ptr_nonnull(r);
    attnviz_model_free(m); /* the weights and tokenizer stay while r holds them */
    ck_assert_str_eq(attnviz_result_token(r, 1), "time");
    char page[] = "/tmp/attnviz-libapi-page-XXXXXX";
    int fd = mkstemp(page);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(attnviz_result_write_page(r, page, NULL, &err), ATTNVIZ_OK);
    unlink(page);
    attnviz_result_free(r);
}
END_TEST

START_TEST(predictions_come_with_a_head) {
    attnviz_error err;
    attnviz_model *m = attnviz_model_open("tests/data/small-gpt2", 0, &err);
    ck_assert_msg(m != NULL, "%s", err.message);
    attnviz_run_options o = {.predict = 3};
    attnviz_result *r = attnviz_run(m, "Hello world", NULL, &o, &err);
    if (!attnviz_model_can_predict(m)) {
        ck_assert_ptr_null(r);
        assert_one_line(&err, ATTNVIZ_ERR_USAGE, "predict");
    } else {
        ck_assert_msg(r != NULL, "%s", err.message);
        const int n = attnviz_result_n_tokens(r);
        ck_assert_int_eq(attnviz_result_n_predictions(r), n); /* causal: every position */
        ck_assert_int_eq(attnviz_result_predict_k(r), 3);
        const float *p = attnviz_result_prediction_probs(r);
        const int *ids = attnviz_result_prediction_ids(r);
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(attnviz_result_prediction_positions(r)[i], i);
            ck_assert(p[i * 3] >= p[i * 3 + 1] && p[i * 3 + 1] >= p[i * 3 + 2] && p[i * 3] <= 1);
            ck_assert_ptr_nonnull(attnviz_model_token(m, ids[i * 3]));
        }
        attnviz_result_free(r);
    }
    /* GPT-2 adds no BOS: an empty text makes no tokens, and says so (not a pass over 0 tokens); an
     * encoder's "" is [CLS] [SEP], a run, as transformers makes it (the command line refuses '' itself) */
    attnviz_model *demo = open_demo();
    attnviz_result *empty = attnviz_run(demo, "", NULL, NULL, &err);
    ck_assert_msg(empty != NULL, "%s", err.message);
    ck_assert_int_eq(attnviz_result_n_tokens(empty), 2);
    attnviz_result_free(empty);
    attnviz_model_free(demo);
    ck_assert_ptr_null(attnviz_run(m, "", NULL, NULL, &err));
    assert_one_line(&err, ATTNVIZ_ERR_RUNTIME, "empty input: this model's tokenizer makes no tokens of an empty text");
    attnviz_model_free(m);
}
END_TEST

/* ---- generation ---- */

#define LLAMA "tests/data/small-llama"
#define GEN_MAX 64

typedef struct {
    int n_prompt_seen, n;          /* prompt tokens and generated tokens seen */
    int ids[GEN_MAX], index[GEN_MAX], position[GEN_MAX];
    double logprob[GEN_MAX];
    char text[1024];
    int stop_at;                   /* return 1 at this index (-1: never) */
    int attn_checked;              /* rows compared with their statistics */
    double worst;                  /* largest disagreement of a row with its statistics and top keys */
    int has_attention;
} GenSeen;

/* A row against what came with it: sums to 1, its heaviest key first, sink = row[0], the entropy and
 * the mean distance by their definitions. */
static void check_row(GenSeen *g, const attnviz_token *t) {
    const int B = t->n_layers * t->n_heads;
    for (int b = 0; b < B; b++) {
        const float *r = t->rows + (size_t)b * t->n_keys;
        double sum = 0, ent = 0, dist = 0, mx = 0;
        for (int j = 0; j < t->n_keys; j++) {
            sum += r[j];
            if (r[j] > 0) ent -= r[j] * log(r[j]);
            dist += r[j] * (t->position - j);
            if (r[j] > mx) mx = r[j];
        }
        double d = fabs(sum - 1);
        d = fmax(d, fabs(ent - t->entropy[b]));
        d = fmax(d, fabs(dist - t->distance[b]) / (t->position + 1));
        d = fmax(d, fabs(r[0] - t->sink[b]));
        if (t->top_k) {
            d = fmax(d, fabs(mx - t->top_weights[(size_t)b * t->top_k]));
            const int k0 = t->top_keys[(size_t)b * t->top_k];
            ck_assert(k0 >= 0 && k0 < t->n_keys);
            d = fmax(d, fabs(r[k0] - t->top_weights[(size_t)b * t->top_k]));
        }
        if (d > g->worst) g->worst = d;
    }
    g->attn_checked++;
}

static int on_gen_token(void *ctx, const attnviz_token *t) {
    GenSeen *g = ctx;
    if (t->n_layers) g->has_attention = 1;
    if (t->rows) check_row(g, t);
    if (t->index < 0) {
        ck_assert_int_eq(t->position, g->n_prompt_seen);
        g->n_prompt_seen++;
        return 0;
    }
    ck_assert_int_lt(g->n, GEN_MAX);
    g->ids[g->n] = t->id, g->index[g->n] = t->index, g->position[g->n] = t->position, g->logprob[g->n] = t->logprob;
    strncat(g->text, t->text, sizeof g->text - strlen(g->text) - 1);
    g->n++;
    return t->index == g->stop_at;
}

static attnviz_model *open_llama(void) {
    attnviz_error err;
    attnviz_model *m = attnviz_model_open(LLAMA, 0, &err);
    ck_assert_msg(m != NULL, "open %s: %s", LLAMA, err.message);
    return m;
}

START_TEST(generation_streams_each_token_with_its_attention) {
    attnviz_model *m = open_llama();
    attnviz_error err;
    size_t n_prompt = 0;
    ck_assert_int_eq(attnviz_tokenize(m, "the cat", NULL, NULL, 0, &n_prompt, &err), ATTNVIZ_OK);
    const int layers[] = {1, 0, 1};
    attnviz_generate_options o = {.max_tokens = 10, .top_logprobs = 3, .top_k = 3, .layers = layers, .n_layers = 3,
                                  .flags = ATTNVIZ_GEN_ATTENTION | ATTNVIZ_GEN_ROWS | ATTNVIZ_GEN_PROMPT};
    GenSeen g = {.stop_at = -1};
    attnviz_finish fin;
    ck_assert_msg(attnviz_generate(m, "the cat", &o, on_gen_token, &g, &fin, &err) == ATTNVIZ_OK, "%s", err.message);
    ck_assert_int_eq(err.code, ATTNVIZ_OK);
    ck_assert_int_eq(g.n_prompt_seen, (int)n_prompt);
    ck_assert(g.n >= 1 && g.n <= 10);
    ck_assert(fin == ATTNVIZ_FINISH_LENGTH ? g.n == 10 : fin == ATTNVIZ_FINISH_EOS);
    for (int i = 0; i < g.n; i++) {
        ck_assert_int_eq(g.index[i], i);
        ck_assert_int_eq(g.position[i], (int)n_prompt + i);
        ck_assert(g.logprob[i] <= 0);
    }
    ck_assert_int_eq(g.attn_checked, (int)n_prompt + g.n);
    ck_assert_msg(g.worst < 1e-5, "rows disagree with their statistics by %g", g.worst);
    /* the prompt's rows are the rows of a run over the prompt */
    attnviz_result *r = attnviz_run(m, "the cat", NULL, NULL, &err);
    ck_assert_ptr_nonnull(r);
    attnviz_result_free(r);
    /* without attention: the same tokens, none of it */
    GenSeen plain = {.stop_at = -1};
    o.flags = 0;
    ck_assert_int_eq(attnviz_generate(m, "the cat", &o, on_gen_token, &plain, NULL, &err), ATTNVIZ_OK);
    ck_assert_int_eq(plain.n, g.n);
    ck_assert_mem_eq(plain.ids, g.ids, (size_t)g.n * sizeof *g.ids);
    ck_assert_str_eq(plain.text, g.text);
    ck_assert(!plain.has_attention && plain.n_prompt_seen == 0);
    attnviz_model_free(m);
}
END_TEST

/* The greedy token is the most probable: its log-probability is the first of the top ones. */
static int on_greedy(void *ctx, const attnviz_token *t) {
    int *bad = ctx;
    if (t->n_top < 1 || t->top_ids[0] != t->id || t->top_logprobs[0] != t->logprob) ++*bad;
    for (int i = 1; i < t->n_top; i++)
        if (t->top_logprobs[i] > t->top_logprobs[i - 1]) ++*bad;
    return 0;
}

START_TEST(generation_stops_where_asked_and_repeats_for_a_seed) {
    attnviz_model *m = open_llama();
    attnviz_error err;
    int bad = 0;
    attnviz_generate_options o = {.max_tokens = 12, .top_logprobs = 4};
    ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_greedy, &bad, NULL, &err), ATTNVIZ_OK);
    ck_assert_int_eq(bad, 0);
    /* the callback stops it */
    GenSeen g = {.stop_at = 2};
    attnviz_finish fin;
    ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_gen_token, &g, &fin, &err), ATTNVIZ_OK);
    ck_assert_int_eq(fin, ATTNVIZ_FINISH_CALLBACK);
    ck_assert_int_eq(g.n, 3);
    /* a stop string: the text ends before it */
    GenSeen full = {.stop_at = -1};
    ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_gen_token, &full, &fin, &err), ATTNVIZ_OK);
    if (strlen(full.text) >= 4) {
        char stop[3] = {full.text[2], full.text[3], 0};
        const char *stops[] = {stop};
        o.stop = stops, o.n_stop = 1;
        GenSeen cut = {.stop_at = -1};
        ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_gen_token, &cut, &fin, &err), ATTNVIZ_OK);
        ck_assert_int_eq(fin, ATTNVIZ_FINISH_STOP);
        const char *at = strstr(full.text, stop);
        ck_assert_int_eq((int)strlen(cut.text), (int)(at - full.text));
        ck_assert(!strncmp(cut.text, full.text, strlen(cut.text)));
        o.stop = NULL, o.n_stop = 0;
    }
    /* sampling: a seed repeats */
    o.temperature = 1.0, o.seed = 42;
    GenSeen a = {.stop_at = -1}, b = {.stop_at = -1};
    ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_gen_token, &a, NULL, &err), ATTNVIZ_OK);
    ck_assert_int_eq(attnviz_generate(m, "the cat sat", &o, on_gen_token, &b, NULL, &err), ATTNVIZ_OK);
    ck_assert_int_eq(a.n, b.n);
    ck_assert_mem_eq(a.ids, b.ids, (size_t)a.n * sizeof *a.ids);
    attnviz_model_free(m);
}
END_TEST

static int never(void *ctx, const attnviz_token *t) { return (void)ctx, (void)t, 0; }

START_TEST(bad_generations_are_usage_errors) {
    attnviz_model *m = open_llama();
    attnviz_error err;
    attnviz_generate_options o = {.max_tokens = 4};
    ck_assert_int_eq(attnviz_generate(NULL, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "NULL model");
    ck_assert_int_eq(attnviz_generate(m, "x", &o, NULL, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "NULL callback");
    o.max_tokens = 0;
    ck_assert_int_eq(attnviz_generate(m, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "at least one token");
    o.max_tokens = 4, o.flags = ATTNVIZ_GEN_ROWS;
    ck_assert_int_eq(attnviz_generate(m, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "ATTNVIZ_GEN_ATTENTION");
    const int layer = 7;
    o.flags = ATTNVIZ_GEN_ATTENTION, o.layers = &layer, o.n_layers = 1;
    ck_assert_int_eq(attnviz_generate(m, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "layer 7 is not in the model");
    o.layers = NULL, o.n_layers = 0, o.top_k = 65;
    ck_assert_int_eq(attnviz_generate(m, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "top_k 65");
    o.top_k = 0, o.flags = 0, o.top_logprobs = 21;
    ck_assert_int_eq(attnviz_generate(m, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "top_logprobs 21");
    o.top_logprobs = 0;
    char long_prompt[64 * 8 + 1] = "";
    for (int i = 0; i < 64; i++) strcat(long_prompt, "the cat ");
    ck_assert_int_eq(attnviz_generate(m, long_prompt, &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "positions");
    attnviz_model_free(m);
    /* an encoder cannot generate */
    attnviz_model *d = open_demo();
    ck_assert_int_eq(attnviz_generate(d, "x", &o, never, NULL, NULL, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "causal");
    attnviz_model_free(d);
}
END_TEST

/* A batch with the CLI's packing: each result the same bits as its own run, whether its input
 * shared a pass (short ones, up to pack_tokens), ran alone (longer) or no packing was asked. */
START_TEST(a_packed_batch_equals_single_runs) {
    attnviz_model *m = open_demo();
    attnviz_error err;
    const char *a[] = {"time flies", "the cat sat on the mat and looked at the dog for a long time", "an arrow",
                       "fruit flies like a banana", "a b"};
    const char *b[] = {NULL, NULL, "it was tired", NULL, NULL};
    const int layers[] = {1};
    attnviz_run_options o = {.layers = layers, .n_layers = 1, .flags = ATTNVIZ_RUN_HIDDEN};
    const int packs[] = {-1, 12, 0};
    for (size_t pi = 0; pi < sizeof packs / sizeof packs[0]; pi++) {
        attnviz_result *got[5];
        ck_assert_msg(attnviz_run_batch(m, a, b, 5, &o, packs[pi], got, &err) == ATTNVIZ_OK, "%s", err.message);
        for (int i = 0; i < 5; i++) {
            attnviz_result *one = attnviz_run(m, a[i], b[i], &o, &err);
            ck_assert_ptr_nonnull(one);
            const int n = attnviz_result_n_tokens(one);
            ck_assert_int_eq(attnviz_result_n_tokens(got[i]), n);
            ck_assert_mem_eq(attnviz_result_ids(got[i]), attnviz_result_ids(one), (size_t)n * sizeof(int));
            const attnviz_tensor ts[] = {ATTNVIZ_ATTENTION, ATTNVIZ_QUERIES, ATTNVIZ_KEYS};
            for (int t = 0; t < 3; t++) {
                size_t s[4];
                ck_assert_int_eq(attnviz_result_shape(got[i], ts[t], s), 4);
                ck_assert_mem_eq(attnviz_result_data(got[i], ts[t]), attnviz_result_data(one, ts[t]),
                                 s[0] * s[1] * s[2] * s[3] * sizeof(float));
            }
            attnviz_result_free(one);
            attnviz_result_free(got[i]);
        }
    }
    attnviz_result *got[3] = {(attnviz_result *)&err, NULL, NULL};
    const char *bad[] = {"a", NULL, "c"};
    ck_assert_int_eq(attnviz_run_batch(m, bad, NULL, 3, NULL, -1, got, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "input 1: NULL text");
    ck_assert_ptr_null(got[0]);
    const int out_of_range[] = {3};
    o = (attnviz_run_options){.layers = out_of_range, .n_layers = 1};
    ck_assert_int_eq(attnviz_run_batch(m, a, NULL, 2, &o, -1, got, &err), ATTNVIZ_ERR_USAGE);
    assert_one_line(&err, ATTNVIZ_ERR_USAGE, "layers: 3 is out of range");
    ck_assert(got[0] == NULL && got[1] == NULL);
    ck_assert_int_eq(attnviz_run_batch(NULL, a, NULL, 2, NULL, -1, got, NULL), ATTNVIZ_ERR_USAGE);
    attnviz_model_free(m);
}
END_TEST

/* Several threads on one handle get what one thread gets, bit for bit. */
typedef struct {
    attnviz_model *m;
    int t;
    float *out[3];
    int n[3];
    int failed;
} Job;

static const char *const TEXTS[] = {"time flies like an arrow", "the cat sat on the mat", "fruit flies like a banana"};

static void *worker(void *arg) {
    Job *j = arg;
    for (int k = 0; k < 3; k++) {
        attnviz_error err;
        attnviz_result *r = attnviz_run(j->m, TEXTS[(k + j->t) % 3], NULL, NULL, &err);
        if (!r) {
            j->failed = 1;
            return NULL;
        }
        size_t s[4];
        attnviz_result_shape(r, ATTNVIZ_ATTENTION, s);
        size_t c = s[0] * s[1] * s[2] * s[3];
        j->n[k] = (int)c;
        j->out[k] = malloc(c * sizeof(float));
        if (!j->out[k] || attnviz_result_copy(r, ATTNVIZ_ATTENTION, j->out[k], c, &err)) j->failed = 1;
        attnviz_result_free(r);
    }
    return NULL;
}

START_TEST(one_handle_is_shared_by_threads) {
    attnviz_model *m = open_demo();
    Job ref = {m, 0, {0}, {0}, 0};
    worker(&ref);
    ck_assert(!ref.failed);
    Job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (Job){m, t, {0}, {0}, 0};
        ck_assert_int_eq(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 4; t++) {
        ck_assert(!jobs[t].failed);
        for (int k = 0; k < 3; k++) {
            int want = (k + t) % 3; /* ref ran text k at step k */
            ck_assert_int_eq(jobs[t].n[k], ref.n[want]);
            ck_assert_mem_eq(jobs[t].out[k], ref.out[want], (size_t)ref.n[want] * sizeof(float));
            free(jobs[t].out[k]);
        }
    }
    for (int k = 0; k < 3; k++) free(ref.out[k]);
    attnviz_model_free(m);
}
END_TEST

/* The library never prints: a truncated input (a warning on the CLI) leaves stderr empty. */
START_TEST(the_library_prints_nothing) {
    char path[] = "/tmp/attnviz-libapi-err-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    attnviz_error err;
    attnviz_model *m = attnviz_model_open(DEMO, 0, &err);
    attnviz_run_options o = {.max_tokens = 3};
    attnviz_result *r = m ? attnviz_run(m, TEXT, NULL, &o, &err) : NULL;
    attnviz_model_free(attnviz_model_open("tests/no-such-model", 0, &err));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat sb;
    ck_assert_int_eq(fstat(fd, &sb), 0);
    close(fd);
    unlink(path);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(attnviz_result_n_tokens(r), 3);
    ck_assert_int_eq(attnviz_result_n_truncated(r), 4);
    ck_assert_int_eq((int)sb.st_size, 0);
    attnviz_result_free(r);
    attnviz_model_free(m);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("libapi");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, open_reports_errors_as_values);
    tcase_add_test(t, null_handles_are_refused_not_crashed);
    tcase_add_test(t, a_run_has_the_models_shape_and_tokens);
    tcase_add_test(t, a_selection_keeps_those_blocks_exactly);
    tcase_add_test(t, bad_selections_and_options_are_usage_errors);
    tcase_add_test(t, copies_check_their_destination);
    tcase_add_test(t, json_and_page_are_written_and_bad_paths_refused);
    tcase_add_test(t, a_result_outlives_its_model_handle);
    tcase_add_test(t, predictions_come_with_a_head);
    tcase_add_test(t, a_packed_batch_equals_single_runs);
    tcase_add_test(t, one_handle_is_shared_by_threads);
    tcase_add_test(t, the_library_prints_nothing);
    tcase_add_test(t, generation_streams_each_token_with_its_attention);
    tcase_add_test(t, generation_stops_where_asked_and_repeats_for_a_seed);
    tcase_add_test(t, bad_generations_are_usage_errors);
    suite_add_tcase(s, t);
    return s;
}
