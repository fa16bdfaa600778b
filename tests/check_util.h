/* check_util.h — shared main() for the per-module Check suites. Each test file
 * defines `Suite *make_suite(void)` and includes this header once. */
#ifndef ATTNVIZ_CHECK_UTIL_H
#define ATTNVIZ_CHECK_UTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

Suite *make_suite(void);

/* Directory of the real bert-base-uncased tokenizer files beside the repo. */
#define SHARED_BERT_DIR "../shared/models/bert-base-uncased"

/* Visible skip: Check has no skip status, so the test passes but says why. */
#define SKIP_UNLESS(cond, why)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "SKIP %s: %s\n", __func__, why);                \
            return;                                                         \
        }                                                                   \
    } while (0)

int main(void) {
    Suite *s = make_suite();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
