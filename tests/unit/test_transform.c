/* test_transform.c — --no-special and --words views. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform.h"
#include "check_util.h"

/* [CLS] play ##ing ball [SEP], 1 layer x 1 head, uniform-ish rows */
static const char *TOK[] = {"[CLS]", "play", "##ing", "ball", "[SEP]"};
static int IDS[] = {2, 10, 11, 12, 3}, TYPES[] = {0, 0, 0, 0, 0};
/* the WordPiece tokenizer's flags for these tokens */
static unsigned char SPECIAL[] = {1, 0, 0, 0, 1}, START[] = {1, 1, 0, 1, 1},
                     ROLE[] = {TOK_ROLE_CLS, TOK_ROLE_NONE, TOK_ROLE_NONE, TOK_ROLE_NONE, TOK_ROLE_SEP};

static void make(TokEncoding *enc, Capture *cap, float *attn) {
    *enc = (TokEncoding){.n = 5, .ids = IDS, .type_ids = TYPES, .tokens = TOK, .special = SPECIAL,
                         .word_start = START, .role = ROLE, .b_start = -1};
    for (int i = 0; i < 5; i++) {
        float s = 0;
        for (int j = 0; j < 5; j++) s += attn[i * 5 + j] = (float)(1 + i + 2 * j);
        for (int j = 0; j < 5; j++) attn[i * 5 + j] /= s;
    }
    *cap = (Capture){.n_layers = 1, .n_heads = 1, .n_tokens = 5, .head_dim = 2, .hidden_size = 2, .attn = attn,
                     .cap_tokens = 5};
}

START_TEST(words_merge_continuations_into_their_word) {
    float attn[25];
    TokEncoding enc;
    Capture cap;
    make(&enc, &cap, attn);
    XfView v;
    AvErr e;
    ck_assert_int_eq(xf_apply(&enc, &cap, 0, 1, &v, &e), 0);
    ck_assert_int_eq(v.enc.n, 4);
    ck_assert_str_eq(v.enc.tokens[1], "playing");
    ck_assert_int_eq(v.enc.ids[1], 10);
    /* row "playing" = mean of rows play, ##ing; column "playing" = sum of their columns */
    float want = ((attn[1 * 5 + 1] + attn[1 * 5 + 2]) + (attn[2 * 5 + 1] + attn[2 * 5 + 2])) / 2;
    ck_assert_float_eq_tol(v.cap.attn[1 * 4 + 1], want, 1e-6f);
    for (int i = 0; i < 4; i++) {
        float s = 0;
        for (int j = 0; j < 4; j++) s += v.cap.attn[i * 4 + j];
        ck_assert_float_eq_tol(s, 1.0f, 1e-5f);
    }
    xf_free(&v);
}
END_TEST

START_TEST(no_special_drops_cls_and_sep_and_renormalizes) {
    float attn[25];
    TokEncoding enc;
    Capture cap;
    make(&enc, &cap, attn);
    XfView v;
    AvErr e;
    ck_assert_int_eq(xf_apply(&enc, &cap, 1, 0, &v, &e), 0);
    ck_assert_int_eq(v.enc.n, 3);
    ck_assert_str_eq(v.enc.tokens[0], "play");
    float tot = attn[5 + 1] + attn[5 + 2] + attn[5 + 3];
    ck_assert_float_eq_tol(v.cap.attn[0], attn[5 + 1] / tot, 1e-6f);
    xf_free(&v);
}
END_TEST

START_TEST(no_special_on_only_specials_is_an_error) {
    static const char *t[] = {"[CLS]", "[SEP]"};
    int ids[] = {2, 3}, types[] = {0, 0};
    float attn[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    unsigned char special[] = {1, 1}, start[] = {1, 1}, role[] = {TOK_ROLE_CLS, TOK_ROLE_SEP};
    TokEncoding enc = {.n = 2, .ids = ids, .type_ids = types, .tokens = t, .special = special, .word_start = start,
                       .role = role, .b_start = -1};
    Capture cap = {.n_layers = 1, .n_heads = 1, .n_tokens = 2, .head_dim = 1, .attn = attn, .cap_tokens = 2};
    XfView v;
    AvErr e;
    ck_assert_int_eq(xf_apply(&enc, &cap, 1, 0, &v, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no tokens left"));
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("transform");
    TCase *t = tcase_create("core");
    tcase_add_test(t, words_merge_continuations_into_their_word);
    tcase_add_test(t, no_special_drops_cls_and_sep_and_renormalizes);
    tcase_add_test(t, no_special_on_only_specials_is_an_error);
    suite_add_tcase(s, t);
    return s;
}
