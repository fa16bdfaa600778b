/* test_selection.c — sel_check, the one range check of --layer/--head/
 * --layers/--heads/--show-heads every command uses: each mistake a usage
 * error in one wording. */
#include <string.h>

#include "selection.h"
#include "check_util.h"

static void expect_usage(const Selection *s, int nl, int nh, const char *owner, const char *msg) {
    AvErr e = {0};
    ck_assert_int_eq(sel_check(s, nl, nh, owner, &e), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, msg);
}

START_TEST(in_range_selections_pass) {
    const int layers[] = {0, 2}, heads[] = {1, 3};
    Selection s = {2, 3, layers, 2, heads, 2, heads, 2};
    AvErr e = {0};
    ck_assert_int_eq(sel_check(&s, 3, 4, "model", &e), 0);
    Selection none = {-1, -1, NULL, 0, NULL, 0, NULL, 0};
    ck_assert_int_eq(sel_check(&none, 1, 1, "model", &e), 0);
}
END_TEST

START_TEST(each_mistake_is_a_usage_error_naming_the_option) {
    const int big[] = {0, 12}, ok[] = {1};
    expect_usage(&(Selection){2, -1, NULL, 0, NULL, 0, NULL, 0}, 2, 12, "model",
                 "--layer 2 is out of range: the model has 2 layers (0-1)");
    expect_usage(&(Selection){-1, 12, NULL, 0, NULL, 0, NULL, 0}, 2, 12, "model",
                 "--head 12 is out of range: the model has 12 heads (0-11)");
    expect_usage(&(Selection){-1, -1, big, 2, NULL, 0, NULL, 0}, 2, 12, "model",
                 "--layers 12 is out of range: the model has 2 layers (0-1)");
    expect_usage(&(Selection){-1, -1, NULL, 0, big, 2, NULL, 0}, 2, 12, "model",
                 "--heads 12 is out of range: the model has 12 heads (0-11)");
    /* the model's check has always said "show-heads" here; the attention's "heads" */
    expect_usage(&(Selection){-1, -1, NULL, 0, NULL, 0, big, 2}, 2, 12, "model",
                 "--show-heads 12 is out of range: the model has 12 show-heads (0-11)");
    expect_usage(&(Selection){-1, -1, NULL, 0, NULL, 0, big, 2}, 2, 12, "attention",
                 "--show-heads 12 is out of range: the attention has 12 heads (0-11)");
    expect_usage(&(Selection){0, -1, ok, 1, NULL, 0, NULL, 0}, 2, 12, "model",
                 "--layer/--head must be among the selected --layers/--heads");
    expect_usage(&(Selection){-1, 0, NULL, 0, ok, 1, NULL, 0}, 2, 12, "model",
                 "--layer/--head must be among the selected --layers/--heads");
}
END_TEST

START_TEST(the_first_mistake_is_the_one_reported) {
    const int big[] = {40};
    expect_usage(&(Selection){9, 99, big, 1, big, 1, big, 1}, 2, 12, "model",
                 "--layer 9 is out of range: the model has 2 layers (0-1)");
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("selection");
    TCase *t = tcase_create("core");
    tcase_add_test(t, in_range_selections_pass);
    tcase_add_test(t, each_mistake_is_a_usage_error_naming_the_option);
    tcase_add_test(t, the_first_mistake_is_the_one_reported);
    suite_add_tcase(s, t);
    return s;
}
