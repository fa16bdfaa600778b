/* test_strtab.c — base/strtab.c: the spelling -> id table every tokenizer
 * looks its vocabulary up in. */
#include <string.h>

#include "strtab.h"
#include "check_util.h"

START_TEST(spellings_find_their_ids_with_or_without_a_prefix) {
    AvStrTab t;
    ck_assert_int_eq(av_strtab_init(&t, 4), 0);
    ck_assert_int_eq(av_strtab_set(&t, 2, "##ing", 5), 2);
    ck_assert_int_eq(av_strtab_set(&t, 0, "ing", 3), 0);
    ck_assert_int_eq(av_strtab_set(&t, 3, "", 0), 3); /* the empty spelling is a spelling */
    ck_assert_int_eq(av_strtab_find(&t, "ing", 3), 0);
    ck_assert_int_eq(av_strtab_find2(&t, "##", 2, "ing", 3), 2);
    ck_assert_int_eq(av_strtab_find2(&t, "#", 1, "#ing", 4), 2); /* the split does not matter */
    ck_assert_int_eq(av_strtab_find(&t, "", 0), 3);
    ck_assert_int_eq(av_strtab_find(&t, "in", 2), -1);
    ck_assert_int_eq(av_strtab_find(&t, "ingx", 4), -1);
    ck_assert_ptr_null(t.tok[1]); /* never set */
    av_strtab_free(&t);
}
END_TEST

START_TEST(a_repeated_spelling_keeps_its_first_id) {
    AvStrTab t;
    ck_assert_int_eq(av_strtab_init(&t, 3), 0);
    ck_assert_int_eq(av_strtab_set(&t, 1, "a", 1), 1);
    ck_assert_int_eq(av_strtab_set(&t, 0, "a", 1), 1); /* says who had it */
    ck_assert_int_eq(av_strtab_find(&t, "a", 1), 1);
    ck_assert_str_eq(t.tok[0], "a"); /* id 0 is still spelled */
    av_strtab_free(&t);
}
END_TEST

START_TEST(many_ids_and_absurd_sizes) {
    AvStrTab t;
    enum { N = 5000 };
    static char words[N][16];
    ck_assert_int_eq(av_strtab_init(&t, N), 0);
    for (int i = 0; i < N; i++) {
        snprintf(words[i], sizeof words[i], "w%d", i);
        ck_assert_int_eq(av_strtab_set(&t, i, words[i], strlen(words[i])), i);
    }
    for (int i = 0; i < N; i++) ck_assert_int_eq(av_strtab_find(&t, words[i], strlen(words[i])), i);
    ck_assert_int_eq(av_strtab_find(&t, "w5000", 5), -1);
    av_strtab_free(&t);
    ck_assert_int_eq(av_strtab_init(&t, -1), -1);
    ck_assert_int_eq(av_strtab_init(&t, INT32_MAX), -1);
    av_strtab_free(&t); /* a failed init leaves nothing to free: safe */
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("strtab");
    TCase *t = tcase_create("core");
    tcase_add_test(t, spellings_find_their_ids_with_or_without_a_prefix);
    tcase_add_test(t, a_repeated_spelling_keeps_its_first_id);
    tcase_add_test(t, many_ids_and_absurd_sizes);
    suite_add_tcase(s, t);
    return s;
}
