/* test_stats.c — head statistics on attention with known answers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "check_util.h"

START_TEST(previous_token_head_has_zero_entropy_and_unit_distance) {
    /* 4 tokens, 1 layer x 2 heads: head 0 attends to i-1 (row 0 to itself), head 1 uniform */
    static const char *tok[] = {"[CLS]", "a", "b", "[SEP]"};
    int ids[4] = {0}, types[4] = {0};
    float attn[2 * 16] = {0};
    for (int i = 0; i < 4; i++) attn[i * 4 + (i ? i - 1 : 0)] = 1;
    for (int i = 0; i < 16; i++) attn[16 + i] = 0.25f;
    ModelConfig cfg = {.num_layers = 1, .num_heads = 2};
    unsigned char special[] = {1, 0, 0, 1}, start[] = {1, 1, 1, 1}, role[] = {TOK_ROLE_CLS, 0, 0, TOK_ROLE_SEP};
    TokEncoding enc = {.n = 4, .ids = ids, .type_ids = types, .tokens = tok, .special = special, .word_start = start,
                       .role = role, .b_start = -1};
    Capture cap = {.n_layers = 1, .n_heads = 2, .n_tokens = 4, .head_dim = 1, .attn = attn, .cap_tokens = 4};
    OutDoc d = {.cfg = &cfg, .enc = &enc, .cap = &cap};
    HeadStats s;
    AvErr e;
    ck_assert_int_eq(stats_init(&s, 1, 2, &e), 0);
    stats_add(&s, &d, &e);
    stats_add(&s, &d, &e); /* the mean of two equal inputs is the same */
    ck_assert_double_eq_tol(stats_mean(&s, 0, 0, ST_ENTROPY), 0, 1e-9);
    ck_assert_double_eq_tol(stats_mean(&s, 0, 0, ST_PREV), 1, 1e-9);
    ck_assert_double_eq_tol(stats_mean(&s, 0, 0, ST_DISTANCE), 0.75, 1e-9); /* rows 1..3 at distance 1 */
    ck_assert_double_eq_tol(stats_mean(&s, 0, 0, ST_CLS), 0.5, 1e-9);       /* rows 0 and 1 */
    ck_assert_double_eq_tol(stats_mean(&s, 0, 1, ST_ENTROPY), log(4), 1e-6);
    ck_assert_double_eq_tol(stats_mean(&s, 0, 1, ST_SEP), 0.25, 1e-6);
    ck_assert_double_eq_tol(stats_mean(&s, 0, 1, ST_NEXT), 0.25, 1e-6);
    ck_assert_int_eq(s.inputs, 2);
    stats_free(&s);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("stats");
    TCase *t = tcase_create("core");
    tcase_add_test(t, previous_token_head_has_zero_entropy_and_unit_distance);
    suite_add_tcase(s, t);
    return s;
}
