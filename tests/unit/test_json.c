/* test_json.c — the streaming JSON writer: float formatting, escaping, and a
 * whole document that parses back with cJSON to the captured numbers. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "check_util.h"

START_TEST(formats_floats_with_requested_significant_digits) {
    char b[40];
    struct { float v; int sig; const char *want; } cases[] = {
        {0.0f, 6, "0"},          {1.0f, 6, "1"},           {0.5f, 6, "0.5"},
        {0.123456789f, 6, "0.123457"}, {-2.5f, 6, "-2.5"}, {1234567.0f, 6, "1.23457e6"},
        {0.000012345f, 6, "0.000012345"}, {1.5e-7f, 6, "1.5e-7"}, {999999.5f, 6, "1e6"},
        {0.99999999f, 6, "1"},   {100.0f, 6, "100"},       {3.14159265f, 9, "3.14159274"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_format_float(b, cases[i].v, cases[i].sig);
        ck_assert_msg(!strcmp(b, cases[i].want), "%.9g -> %s, want %s", (double)cases[i].v, b, cases[i].want);
    }
    json_format_float(b, NAN, 6);
    ck_assert_str_eq(b, "null");
}
END_TEST

START_TEST(formatted_floats_parse_back_within_precision) {
    unsigned s = 12345;
    char b[40];
    for (int i = 0; i < 200000; i++) {
        s = s * 1664525u + 1013904223u;
        float v = ldexpf((float)(s >> 8) / (1 << 24), (int)(s % 270) - 149) * ((s & 1) ? -1 : 1); /* subnormals to FLT_MAX */
        json_format_float(b, v, 6);
        double back = strtod(b, NULL);
        if (isinf(v)) continue;
        ck_assert_msg(fabs(back - v) <= fabs(v) * 5.1e-6 + 1e-45, "%.9g -> %s", (double)v, b);
    }
}
END_TEST

START_TEST(attention_range_fast_path_agrees_with_printf) {
    unsigned s = 777;
    char b[40], ref[40];
    int differ = 0;
    for (int i = 0; i < 300000; i++) {
        s = s * 1664525u + 1013904223u;
        float v = ldexpf((float)(s >> 8) / (1 << 24), -(int)(s % 20)); /* [2^-20, 1) */
        for (int sig = 3; sig <= 9; sig += 3) {
            json_format_float(b, v, sig);
            snprintf(ref, sizeof ref, "%.*g", sig, (double)v);
            double x = strtod(b, NULL), y = strtod(ref, NULL);
            /* equal, or a tie rounded the other way in the last digit */
            ck_assert_msg(fabs(x - y) <= fabs(y) * pow(10, 1 - sig) * 1.01, "%.9g: %s vs %s", (double)v, b, ref);
            differ += x != y;
        }
    }
    ck_assert_int_lt(differ, 300); /* ties only: under 0.1% */
}
END_TEST

static char *capture_output(void (*fn)(FILE *, void *), void *arg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, arg);
    fclose(f);
    return buf;
}

static void write_str(FILE *f, void *arg) { json_write_string(f, arg); }

START_TEST(strings_are_escaped_for_json_and_script_elements) {
    char *out = capture_output(write_str, "</script><b>\"q\"\\\n\t\x01 é");
    ck_assert_str_eq(out, "\"\\u003c/script\\u003e\\u003cb\\u003e\\\"q\\\"\\\\\\n\\t\\u0001 é\"");
    cJSON *j = cJSON_Parse(out);
    ck_assert_str_eq(j->valuestring, "</script><b>\"q\"\\\n\t\x01 é");
    cJSON_Delete(j);
    free(out);
}
END_TEST

typedef struct { OutDoc *d; int tokens_only; } DocArg;
static void write_doc(FILE *f, void *arg) {
    DocArg *a = arg;
    AvErr e;
    ck_assert_int_eq(a->tokens_only ? json_write_tokens(f, a->d, &e) : json_write_doc(f, a->d, &e), 0);
}

START_TEST(document_round_trips_through_a_json_parser) {
    ModelConfig cfg = {.model_type = "bert", .vocab_size = 10, .hidden_size = 4, .num_layers = 2, .num_heads = 2,
                      .intermediate_size = 8, .max_position_embeddings = 8, .type_vocab_size = 2,
                      .layer_norm_eps = 1e-12f, .hidden_act_name = "gelu"};
    const char *toks[] = {"[CLS]", "a<b", "[SEP]"};
    int ids[] = {2, 7, 3}, types[] = {0, 0, 0};
    TokEncoding enc = {.n = 3, .ids = ids, .type_ids = types, .tokens = toks, .b_start = -1};
    float attn[2 * 2 * 9], q[2 * 2 * 3 * 2], k[2 * 2 * 3 * 2];
    for (int i = 0; i < 36; i++) attn[i] = (float)(i % 9) / 36.0f + 0.001f * i;
    for (int i = 0; i < 24; i++) q[i] = -1.5f + i * 0.25f, k[i] = i * 1e-3f;
    Capture cap = {.n_layers = 2, .n_heads = 2, .n_tokens = 3, .head_dim = 2, .hidden_size = 4,
                   .attn = attn, .q = q, .k = k, .cap_tokens = 3};
    int sel_layers[] = {1}, sel_heads[] = {0, 1};
    OutDoc d = {.model_name = "m", .cfg = &cfg, .text_a = "a<b", .enc = &enc, .cap = &cap, .precision = 6,
                .with_qk = 1, .layers = sel_layers, .n_sel_layers = 1, .heads = sel_heads, .n_sel_heads = 2};
    DocArg a = {&d, 0};
    char *out = capture_output(write_doc, &a);
    ck_assert_ptr_null(strstr(out, "<")); /* safe to embed in a page */
    cJSON *j = cJSON_Parse(out);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tokens"), 1)->valuestring, "a<b");
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "sentence_b_start")));
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "config"), "heads")->valueint, 2);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "layers"), 0)->valueint, 1);
    cJSON *att = cJSON_GetObjectItem(j, "attention");
    ck_assert_int_eq(cJSON_GetArraySize(att), 1); /* only the selected layer */
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                double got = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(att, 0), h), r)->child
                                 ? cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(att, 0), h), r), c)->valuedouble
                                 : -1;
                ck_assert_double_eq_tol(got, attn[((1 * 2 + h) * 3 + r) * 3 + c], 1e-6);
            }
    cJSON *qs = cJSON_GetObjectItem(j, "queries");
    ck_assert_double_eq_tol(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(qs, 0), 1), 2), 1)->valuedouble,
                            q[((1 * 2 + 1) * 3 + 2) * 2 + 1], 1e-6);
    cJSON_Delete(j);
    free(out);
    a.tokens_only = 1;
    out = capture_output(write_doc, &a);
    j = cJSON_Parse(out);
    ck_assert_int_eq(cJSON_GetArraySize(j), 4);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "input_ids"), 1)->valueint, 7);
    cJSON_Delete(j);
    free(out);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("json");
    TCase *t = tcase_create("core");
    tcase_add_test(t, formats_floats_with_requested_significant_digits);
    tcase_add_test(t, formatted_floats_parse_back_within_precision);
    tcase_add_test(t, attention_range_fast_path_agrees_with_printf);
    tcase_add_test(t, strings_are_escaped_for_json_and_script_elements);
    tcase_add_test(t, document_round_trips_through_a_json_parser);
    suite_add_tcase(s, t);
    return s;
}
