/* test_safetensors.c — reader/writer round trips, dtype conversions, and every
 * malformed header the parser must refuse with a message naming the problem. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "check_util.h"

/* Builds a file image: 8-byte length, header text, then data_len zero bytes. */
static uint8_t *image(const char *hdr, size_t data_len, size_t *len) {
    size_t hl = strlen(hdr);
    *len = 8 + hl + data_len;
    uint8_t *b = calloc(*len, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    return b;
}

static void expect_error(const char *hdr, size_t data_len, const char *needle) {
    size_t len;
    uint8_t *b = image(hdr, data_len, &len);
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_parse(&f, b, len, "m.safetensors", &e), -1);
    ck_assert_msg(strstr(e.msg, needle) != NULL, "expected '%s' in: %s", needle, e.msg);
    ck_assert_msg(strncmp(e.msg, "m.safetensors", 13) == 0, "message names the file: %s", e.msg);
    free(b);
}

START_TEST(parses_a_valid_header) {
    size_t len;
    uint8_t *b = image("{\"__metadata__\":{\"a\":\"b\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]}}",
                       32, &len);
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_parse(&f, b, len, "m", &e), 0);
    ck_assert_int_eq(f.n_tensors, 2);
    const StTensor *w = st_find(&f, "w");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->ndim, 2);
    ck_assert_int_eq(w->shape[1], 3);
    ck_assert_int_eq(st_find(&f, "h")->dtype, ST_F16);
    ck_assert_ptr_null(st_find(&f, "nope"));
    st_close(&f);
    free(b);
}
END_TEST

START_TEST(a_struct_filled_by_the_parser_is_safe_to_close_whatever_it_held) {
    /* st_parse used to set only the tensor list: st_close then freed and unmapped the
     * path and mapping a stack StFile happened to hold (an intermittent ASan failure). */
    size_t len;
    uint8_t *b = image("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &len);
    StFile f;
    AvErr e;
    GARBAGE(f);
    ck_assert_int_eq(st_parse(&f, b, len, "m", &e), 0);
    ck_assert_int_eq(f.n_tensors, 1);
    st_close(&f);
    GARBAGE(f);
    ck_assert_int_eq(st_parse(&f, b, len - 1, "m", &e), -1); /* data cut short: a failure */
    st_close(&f);
    GARBAGE(f);
    ck_assert_int_eq(st_open(&f, "/nonexistent/m.safetensors", &e), -1);
    st_close(&f);
    free(b);
}
END_TEST

START_TEST(rejects_a_file_shorter_than_eight_bytes) {
    uint8_t b[5] = {0};
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_parse(&f, b, 5, "m.safetensors", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "shorter than the 8-byte"));
}
END_TEST

START_TEST(rejects_header_length_past_end_of_file) {
    size_t len;
    uint8_t *b = image("{}", 0, &len);
    b[0] = 200;
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_parse(&f, b, len, "m.safetensors", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "past the end"));
    b[7] = 0x7f; /* absurd: refused before any allocation */
    ck_assert_int_eq(st_parse(&f, b, len, "m.safetensors", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "absurd"));
    free(b);
}
END_TEST

START_TEST(rejects_malformed_headers) {
    expect_error("not json at all", 0, "not valid JSON");
    expect_error("[1,2,3]", 0, "not a JSON object");
    expect_error("{\"w\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "unknown dtype 'Q7'");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "run past the data section");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "reversed");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                 "overflows");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, "overlap");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "two data_offsets");
    expect_error("{\"w\":5}", 0, "not an object");
}
END_TEST

START_TEST(float16_and_bfloat16_round_trip) {
    float vals[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.33325195f, 1e6f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        float v = vals[i];
        float h = st_f16_to_f32(st_f32_to_f16(v));
        if (fabsf(v) <= 65504.0f) ck_assert_float_eq_tol(h, v, fabsf(v) * 1e-3f + 1e-7f);
        else ck_assert(isinf(h));
        float bf = st_bf16_to_f32(st_f32_to_bf16(v));
        ck_assert_float_eq_tol(bf, v, fabsf(v) * 8e-3f + 1e-30f);
    }
    ck_assert_uint_eq(st_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(st_f32_to_bf16(1.0f), 0x3f80);
    ck_assert(isnan(st_f16_to_f32(st_f32_to_f16(NAN))));
}
END_TEST

START_TEST(writer_output_reads_back_in_every_dtype) {
    float a[6] = {1, -2, 3.5f, 0.25f, -0.125f, 7}, b[3] = {0.1f, 0.2f, 0.3f};
    StWriteTensor ts[2] = {{"a", 2, {2, 3}, a}, {"b", 1, {3}, b}};
    StDtype dts[] = {ST_F32, ST_F16, ST_BF16};
    for (int d = 0; d < 3; d++) {
        char path[] = "/tmp/attnviz-st-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        AvErr e;
        ck_assert_int_eq(st_write(path, ts, 2, dts[d], &e), 0);
        StFile f;
        ck_assert_int_eq(st_open(&f, path, &e), 0);
        const StTensor *t = st_find(&f, "a");
        ck_assert_int_eq(t->dtype, dts[d]);
        float out[6];
        st_to_f32(t, out);
        for (int i = 0; i < 6; i++) ck_assert_float_eq(out[i], a[i]); /* exactly representable */
        ck_assert_uint_eq(((uintptr_t)st_find(&f, "a")->data) % 8, 0); /* header padded to 8 */
        st_close(&f);
        unlink(path);
    }
}
END_TEST

START_TEST(open_reports_missing_file_and_truncation) {
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_open(&f, "/nonexistent/model.safetensors", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/model.safetensors: cannot open"));
    /* truncate a real fixture inside its data section */
    char path[] = "/tmp/attnviz-st-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "head -c 50000 tests/data/small-f32/model.safetensors > %s", path);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(st_open(&f, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "truncated"), "%s", e.msg);
    unlink(path);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *t = tcase_create("core");
    tcase_add_test(t, parses_a_valid_header);
    tcase_add_test(t, a_struct_filled_by_the_parser_is_safe_to_close_whatever_it_held);
    tcase_add_test(t, rejects_a_file_shorter_than_eight_bytes);
    tcase_add_test(t, rejects_header_length_past_end_of_file);
    tcase_add_test(t, rejects_malformed_headers);
    tcase_add_test(t, float16_and_bfloat16_round_trip);
    tcase_add_test(t, writer_output_reads_back_in_every_dtype);
    tcase_add_test(t, open_reports_missing_file_and_truncation);
    suite_add_tcase(s, t);
    return s;
}
