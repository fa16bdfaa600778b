/* test_render.c — io/render.c: attention computed elsewhere, read from a
 * .safetensors file (written here byte by byte) and checked before anything
 * draws it: shapes against the tokens, probabilities, causality, the meta. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "render.h"
#include "check_util.h"

static char path[64];

/* A .safetensors file: one F32 tensor NAME of shape dims, the values v, and
 * the meta JSON (or none) as __metadata__["attnviz"]. */
static void write_st(const char *name, const int *dims, int nd, const float *v, const char *meta) {
    size_t count = 1;
    char shape[64] = "", hdr[1024];
    for (int i = 0; i < nd; i++) {
        count *= (size_t)dims[i];
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%d", i ? "," : "", dims[i]);
    }
    char *esc = NULL;
    if (meta) { /* the metadata value is a JSON string holding JSON */
        esc = malloc(2 * strlen(meta) + 1);
        char *q = esc;
        for (const char *c = meta; *c; c++) {
            if (*c == '"' || *c == '\\') *q++ = '\\';
            *q++ = *c;
        }
        *q = '\0';
    }
    int hl = snprintf(hdr, sizeof hdr, "{%s%s%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[0,%zu]}}",
                      meta ? "\"__metadata__\":{\"attnviz\":\"" : "", meta ? esc : "", meta ? "\"}," : "", name,
                      shape, count * sizeof(float));
    free(esc);
    strcpy(path, "/tmp/attnviz-test-render-XXXXXX.safetensors");
    int fd = mkstemps(path, 12);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "wb");
    unsigned long long n = (unsigned long long)hl;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
    ck_assert(fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
              fwrite(v, sizeof(float), count, f) == count);
    ck_assert_int_eq(fclose(f), 0);
}

/* 2 layers x 1 head x 3 tokens, causal: row i spreads evenly over 0..i. */
static void causal_attention(float *v) {
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) v[(l * 3 + i) * 3 + j] = j <= i ? 1.0f / (float)(i + 1) : 0.0f;
}

static const int DIMS[4] = {2, 1, 3, 3};
static const char *META = "{\"tokens\":[\"time\",\"flies\",\"fast\"],\"causal\":true,\"model\":\"elsewhere\"}";

START_TEST(attention_and_tokens_become_a_capture) {
    float v[18];
    causal_attention(v);
    write_st("attention", DIMS, 4, v, META);
    Rendered r;
    AvErr e = {0};
    ck_assert_msg(render_load(&r, path, NULL, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.cfg.num_layers, 2);
    ck_assert_int_eq(r.cfg.num_heads, 1);
    ck_assert(r.cfg.causal);
    ck_assert_str_eq(r.model_name, "elsewhere");
    ck_assert_int_eq(r.tokens.n, 3);
    ck_assert_str_eq(r.tokens.tokens[1], "flies");
    ck_assert(!r.enc_dec && r.self.present);
    ck_assert_int_eq(r.self.cap.n_tokens, 3);
    ck_assert(memcmp(r.self.cap.attn, v, sizeof v) == 0); /* F32 in, the same bits out */
    render_free(&r);
    unlink(path);
}
END_TEST

START_TEST(a_struct_filled_by_the_reader_is_safe_to_free_whatever_it_held) {
    float v[18];
    causal_attention(v);
    write_st("attention", DIMS, 4, v, META);
    Rendered r;
    AvErr e = {0};
    GARBAGE(r);
    ck_assert_msg(render_load(&r, path, NULL, 0, &e) == 0, "%s", e.msg);
    render_free(&r);
    GARBAGE(r);
    ck_assert_int_eq(render_load(&r, "/nonexistent/a.npz", NULL, 0, &e), -1);
    render_free(&r);
    unlink(path);
}
END_TEST

START_TEST(rows_that_are_not_probabilities_are_refused_with_their_place) {
    float v[18];
    causal_attention(v);
    v[(1 * 3 + 2) * 3 + 0] = 0.9f; /* layer 1, row 2 sums to 1.57 */
    write_st("attention", DIMS, 4, v, META);
    Rendered r;
    AvErr e = {0};
    ck_assert_int_eq(render_load(&r, path, NULL, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, path));
    ck_assert_ptr_nonnull(strstr(e.msg, "layer 1, head 0, row 2 sums to 1.5"));
    unlink(path);
}
END_TEST

START_TEST(a_causal_model_may_not_look_ahead) {
    float v[18];
    causal_attention(v);
    v[0 * 9 + 0 * 3 + 0] = 0.5f, v[0 * 9 + 0 * 3 + 1] = 0.5f; /* layer 0, row 0 looks at token 1 */
    write_st("attention", DIMS, 4, v, META);
    Rendered r;
    AvErr e = {0};
    ck_assert_int_eq(render_load(&r, path, NULL, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "row 0 attends to later token 1"));
    unlink(path);
}
END_TEST

START_TEST(shapes_must_match_the_tokens) {
    float v[18];
    causal_attention(v);
    write_st("attention", DIMS, 4, v, "{\"tokens\":[\"time\",\"flies\"],\"causal\":true}");
    Rendered r;
    AvErr e = {0};
    ck_assert_int_eq(render_load(&r, path, NULL, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "is 3 x 3 per head; the tokens say 2 x 2"));
    unlink(path);
    write_st("attention", DIMS, 4, v, NULL);
    ck_assert_int_eq(render_load(&r, path, NULL, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no tokens: give --meta FILE.json"));
    unlink(path);
    write_st("weights", DIMS, 4, v, META);
    ck_assert_int_eq(render_load(&r, path, NULL, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no 'attention' array"));
    unlink(path);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("render");
    TCase *t = tcase_create("core");
    tcase_add_test(t, attention_and_tokens_become_a_capture);
    tcase_add_test(t, a_struct_filled_by_the_reader_is_safe_to_free_whatever_it_held);
    tcase_add_test(t, rows_that_are_not_probabilities_are_refused_with_their_place);
    tcase_add_test(t, a_causal_model_may_not_look_ahead);
    tcase_add_test(t, shapes_must_match_the_tokens);
    suite_add_tcase(s, t);
    return s;
}
