/* test_util.c — base/util.c's shared pieces: the one FNV-1a every string
 * table hashes with (a prefix and then the rest, as one string), the one
 * UTF-8 check (the offset of the first bad byte), paths and files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "check_util.h"

START_TEST(fnv1a_continues_over_a_prefix_as_over_the_whole) {
    /* FNV-1a's published value for "a", and the empty string is the seed */
    ck_assert_uint_eq(av_fnv1a("a", 1, AV_FNV_SEED), 0xe40c292cu);
    ck_assert_uint_eq(av_fnv1a("", 0, AV_FNV_SEED), AV_FNV_SEED);
    const char *whole = "##ing";
    ck_assert_uint_eq(av_fnv1a("ing", 3, av_fnv1a("##", 2, AV_FNV_SEED)), av_fnv1a(whole, strlen(whole), AV_FNV_SEED));
    ck_assert_uint_ne(av_fnv1a("ab", 2, AV_FNV_SEED), av_fnv1a("ba", 2, AV_FNV_SEED));
}
END_TEST

START_TEST(utf8_check_gives_the_first_bad_offset) {
    ck_assert_int_eq(av_utf8_invalid_at("plain ascii", 11), -1);
    ck_assert_int_eq(av_utf8_invalid_at("caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80", 15), -1);
    ck_assert_int_eq(av_utf8_invalid_at("abc\xc3(", 5), 3);           /* a lead byte without its continuation */
    ck_assert_int_eq(av_utf8_invalid_at("ok\x80", 3), 2);             /* a lone continuation byte */
    ck_assert_int_eq(av_utf8_invalid_at("\xed\xa0\x80", 3), 0);       /* a UTF-16 surrogate */
    ck_assert_int_eq(av_utf8_invalid_at("\xc0\xaf", 2), 0);           /* an overlong '/' */
    ck_assert_int_eq(av_utf8_invalid_at("x\xe2\x98", 3), 1);          /* cut off at the end */
    ck_assert_int_eq(av_utf8_invalid_at("a\0b", 3), -1);              /* NUL is valid UTF-8; callers decide */
    ck_assert_int_eq(av_utf8_invalid_at("", 0), -1);
}
END_TEST

START_TEST(paths_join_with_one_slash) {
    char *p = av_path_join("dir", "name.json");
    ck_assert_str_eq(p, "dir/name.json");
    free(p);
    p = av_path_join("dir/", "name.json");
    ck_assert_str_eq(p, "dir/name.json");
    free(p);
    ck_assert(av_file_exists("tests/test_util.c"));
    ck_assert(!av_file_exists("tests/no-such-file"));
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("util");
    TCase *t = tcase_create("core");
    tcase_add_test(t, fnv1a_continues_over_a_prefix_as_over_the_whole);
    tcase_add_test(t, utf8_check_gives_the_first_bad_offset);
    tcase_add_test(t, paths_join_with_one_slash);
    suite_add_tcase(s, t);
    return s;
}
