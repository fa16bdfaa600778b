/* test_npy.c — the .npy header layout NumPy expects. */
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "check_util.h"

START_TEST(header_is_padded_to_64_bytes_and_names_the_shape) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    long shape[4] = {12, 12, 512, 512};
    ck_assert_int_eq(npy_write_header(f, shape, 4), 0);
    fclose(f);
    ck_assert_uint_eq(len % 64, 0);
    ck_assert_int_eq(memcmp(buf, "\x93NUMPY\x01\x00", 8), 0);
    ck_assert_uint_eq((size_t)(unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8, len - 10);
    ck_assert_ptr_nonnull(strstr(buf + 10, "'descr': '<f4'"));
    ck_assert_ptr_nonnull(strstr(buf + 10, "'shape': (12, 12, 512, 512, )"));
    ck_assert_int_eq(buf[len - 1], '\n');
    free(buf);
}
END_TEST

START_TEST(attention_data_follows_the_header_in_selection_order) {
    ModelConfig cfg = {.num_layers = 2, .num_heads = 2, .hidden_size = 2};
    float attn[2 * 2 * 4];
    for (int i = 0; i < 16; i++) attn[i] = (float)i;
    Capture cap = {.n_layers = 2, .n_heads = 2, .n_tokens = 2, .head_dim = 1, .attn = attn, .cap_tokens = 2};
    int layers[] = {1}, heads[] = {1, 0};
    OutDoc d = {.cfg = &cfg, .cap = &cap, .layers = layers, .n_sel_layers = 1, .heads = heads, .n_sel_heads = 2};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    AvErr e;
    ck_assert_int_eq(npy_write_attention(f, &d, &e), 0);
    fclose(f);
    size_t hdr = 10 + ((size_t)(unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8);
    ck_assert_uint_eq(hdr % 64, 0);
    ck_assert_uint_eq(len, hdr + 8 * sizeof(float));
    float got[8];
    memcpy(got, buf + hdr, sizeof got);
    /* layer 1 head 1 = attn[12..15], then layer 1 head 0 = attn[8..11] */
    ck_assert_float_eq(got[0], 12.0f);
    ck_assert_float_eq(got[4], 8.0f);
    free(buf);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("npy");
    TCase *t = tcase_create("core");
    tcase_add_test(t, header_is_padded_to_64_bytes_and_names_the_shape);
    tcase_add_test(t, attention_data_follows_the_header_in_selection_order);
    suite_add_tcase(s, t);
    return s;
}
