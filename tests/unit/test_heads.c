/* test_heads.c — head scores on attention with known answers, the --pattern
 * readers, and exact merging of sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"
#include "check_util.h"

static HeadScores make(int exclude_bos, int exclude_current) {
    HeadScores hs;
    AvErr e;
    HeadsOptions o = {NULL, 0, "offset -2", exclude_bos, exclude_current, 3};
    ck_assert_msg(heads_init(&hs, 1, 2, &o, &e) == 0, "%s", e.msg);
    return hs;
}

START_TEST(previous_share_counts_every_row_as_transformerlens_does) {
    /* 4 tokens, causal: row 0 all on itself, rows 1..3 all on i-1 */
    float A[16] = {0};
    A[0] = 1;
    for (int i = 1; i < 4; i++) A[i * 4 + i - 1] = 1;
    int ids[4] = {7, 8, 7, 8};
    HeadScores hs = make(0, 0);
    /* sum(A * P) / sum(A) = 3 / 4, not the mean over rows 1..3 (1) */
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_PREVIOUS, A, 4, ids, NULL), 0.75, 1e-12);
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_FIRST, A, 4, ids, NULL), 0.5, 1e-12);
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_SELF, A, 4, ids, NULL), 0.25, 1e-12);
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_DISTANCE, A, 4, ids, NULL), 0.75, 1e-12);
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_ENTROPY, A, 4, ids, NULL), 0, 1e-12);
    /* duplicate: rows 2, 3 look at i-1, which is not their id: 0 */
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_DUPLICATE, A, 4, ids, NULL), 0, 1e-12);
    /* induction: row 2 (id 7) -> key 1 (after the earlier 7); row 3 (id 8) -> key 2: both hit by i-1 */
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_INDUCTION, A, 4, ids, NULL), 0.5, 1e-12);
    /* offset -2: nothing */
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_PATTERN, A, 4, ids, NULL), 0, 1e-12);
    heads_free(&hs);
    /* exclude_bos drops column 0 from numerator and denominator: rows 0 and 1 vanish */
    hs = make(1, 0);
    ck_assert_double_eq_tol(heads_score_matrix(&hs, HS_PREVIOUS, A, 4, ids, NULL), 1.0, 1e-12);
    heads_free(&hs);
    hs = make(1, 1);
    float U[4] = {1, 0, 1, 0}; /* 2 tokens, all on position 0: nothing left */
    ck_assert(isnan(heads_score_matrix(&hs, HS_PREVIOUS, U, 2, ids, NULL)));
    heads_free(&hs);
}
END_TEST

START_TEST(pattern_files_parse_and_fail_with_their_name) {
    HeadsPattern p;
    AvErr e;
    const char *js = "[[0, 0], [1, 0.5]]";
    ck_assert_int_eq(heads_pattern_parse(&p, "t.json", js, strlen(js), &e), 0);
    ck_assert_int_eq(p.n, 2);
    ck_assert(p.w[2] == 1.0f && p.w[3] == 0.5f);
    heads_pattern_free(&p);
    const char *bad = "[[0, 0], [1]]";
    ck_assert_int_eq(heads_pattern_parse(&p, "t.json", bad, strlen(bad), &e), -1);
    ck_assert_str_eq(e.msg, "t.json: row 1 is not an array of 2 numbers (the pattern must be square)");
    char npy[128] = "\x93NUMPY\x01\x00";
    const char *hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }";
    size_t hl = strlen(hdr);
    npy[8] = (char)hl, npy[9] = 0;
    memcpy(npy + 10, hdr, hl);
    double one = 1;
    memcpy(npy + 10 + hl, &one, 8);
    ck_assert_int_eq(heads_pattern_parse(&p, "t.npy", npy, 10 + hl + 8, &e), 0);
    ck_assert(p.n == 1 && p.w[0] == 1.0f);
    heads_pattern_free(&p);
    ck_assert_int_eq(heads_pattern_parse(&p, "t.npy", npy, 10 + hl + 4, &e), -1);
    ck_assert_str_eq(e.msg, "t.npy: .npy data is shorter than its shape");
    ck_assert_int_eq(heads_pattern_load(&p, "offset -3", &e), 0);
    ck_assert(p.n == 0 && p.offset == -3);
    heads_pattern_free(&p);
}
END_TEST

START_TEST(sums_do_not_depend_on_the_order_of_addition) {
    /* values whose float sums differ by order: (a + b) + c != a + (b + c) */
    const double v[3] = {0.1, 0.2, 0.3};
    HeadStats whole, s1, s2;
    AvErr e;
    const char *const names[] = {"x"};
    ck_assert_int_eq(stats_init_named(&whole, 1, 1, 1, names, &e), 0);
    ck_assert_int_eq(stats_init_named(&s1, 1, 1, 1, names, &e), 0);
    ck_assert_int_eq(stats_init_named(&s2, 1, 1, 1, names, &e), 0);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(stats_put(&whole, 0, 0, 0, v[i], &e), 0);
    ck_assert_int_eq(stats_put(&s1, 0, 0, 0, v[2], &e), 0);
    ck_assert_int_eq(stats_put(&s2, 0, 0, 0, v[1], &e), 0);
    ck_assert_int_eq(stats_put(&s2, 0, 0, 0, v[0], &e), 0);
    ck_assert_int_eq(stats_merge(&s1, &s2, &e), 0);
    ck_assert(whole.sum[0] == s1.sum[0] && whole.count[0] == s1.count[0]);
    ck_assert(stats_mean(&whole, 0, 0, 0) == stats_mean(&s1, 0, 0, 0));
    ck_assert_double_eq_tol(stats_mean(&whole, 0, 0, 0), 0.2, 1e-9);
    ck_assert_int_eq(stats_put(&whole, 0, 0, 0, NAN, &e), -1);
    stats_free(&whole);
    stats_free(&s1);
    stats_free(&s2);
}
END_TEST

START_TEST(json_written_reads_back_the_same) {
    HeadScores hs = make(0, 1), back;
    AvErr e;
    float A[4] = {1, 0, 0.25f, 0.75f};
    int ids[2] = {3, 3};
    TokEncoding enc = {.n = 2, .ids = ids};
    unsigned char role[2] = {0, 0};
    enc.role = role;
    ModelConfig cfg = {.num_layers = 1, .num_heads = 2};
    float attn[8];
    memcpy(attn, A, sizeof A);
    memcpy(attn + 4, A, sizeof A);
    Capture cap = {.n_layers = 1, .n_heads = 2, .n_tokens = 2, .attn = attn, .cap_tokens = 2};
    OutDoc d = {.cfg = &cfg, .enc = &enc, .cap = &cap, .model_name = "m"};
    ck_assert_int_eq(heads_add(&hs, &d, &e), 0);
    /* what the run covered: the shard 1/3 of a 7-line corpus (its two lines) */
    stats_set_cover(&hs.acc, 0x0123456789abcdefull, &(StatsCover){2, 0xfedcba9876543210ull, 1, 3, 7, 0x1111222233334444ull});
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(heads_write_json(f, &hs, &e), 0);
    fclose(f);
    GARBAGE(back);
    ck_assert_msg(heads_parse_json(&back, "mem", buf, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(back.acc.inputs, 1);
    ck_assert_int_eq(back.exclude_current, 1);
    ck_assert_str_eq(back.pattern_spec, "offset -2");
    ck_assert(back.acc.have_cover && back.acc.setup == 0x0123456789abcdefull);
    ck_assert(back.acc.cover.lines == 2 && back.acc.cover.digest == 0xfedcba9876543210ull);
    ck_assert(back.acc.cover.index == 1 && back.acc.cover.count == 3 && back.acc.cover.corpus_lines == 7 &&
              back.acc.cover.corpus == 0x1111222233334444ull);
    size_t n = (size_t)hs.acc.n_layers * hs.acc.n_heads * hs.acc.n_scores;
    ck_assert(!memcmp(back.acc.sum, hs.acc.sum, n * sizeof *hs.acc.sum));
    ck_assert(!memcmp(back.acc.count, hs.acc.count, n * sizeof *hs.acc.count));
    heads_free(&back);
    GARBAGE(back); /* a failed read leaves it safe to free too */
    ck_assert_int_eq(heads_parse_json(&back, "mem", "{\"kind\": \"stats\"}", &e), -1);
    heads_free(&back);
    heads_free(&hs);
    free(buf);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("heads");
    TCase *t = tcase_create("core");
    tcase_add_test(t, previous_share_counts_every_row_as_transformerlens_does);
    tcase_add_test(t, pattern_files_parse_and_fail_with_their_name);
    tcase_add_test(t, sums_do_not_depend_on_the_order_of_addition);
    tcase_add_test(t, json_written_reads_back_the_same);
    suite_add_tcase(s, t);
    return s;
}
