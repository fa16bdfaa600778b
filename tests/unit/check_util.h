/* check_util.h — shared main() for the per-module Check suites. Each test file
 * defines `Suite *make_suite(void)` and includes this header once. */
#ifndef ATTNVIZ_CHECK_UTIL_H
#define ATTNVIZ_CHECK_UTIL_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Suite *make_suite(void);

/* The path of a reference file (tools/refdata.sh: bert-base-uncased/vocab.txt, gpt2/encoder.json,
 * ...) in out: $ATTNVIZ_REFDATA is the folder (tests/run_all.sh sets it). The test fails, saying
 * why, when it is unset or the file is not there: the install step (tools/deps.sh test) fetches
 * these files, so their absence is a failure, not a skip. */
static inline void refdata(char out[4096], const char *rel) {
    const char *dir = getenv("ATTNVIZ_REFDATA");
    ck_assert_msg(dir && *dir, "ATTNVIZ_REFDATA is unset: run through tests/run_all.sh, or "
                               "export ATTNVIZ_REFDATA=\"$(tools/refdata.sh)\"");
    ck_assert_int_lt(snprintf(out, 4096, "%s/%s", dir, rel), 4096);
    ck_assert_msg(access(out, R_OK) == 0, "%s: %s (tools/refdata.sh; tools/deps.sh test fetches it)", out,
                  strerror(errno));
}

/* Visible skip: Check has no skip status, so the test passes but says why. */
#define SKIP_UNLESS(cond, why)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "SKIP %s: %s\n", __func__, why);                \
            return;                                                         \
        }                                                                   \
    } while (0)

/* Fills a struct with what a stack variable may hold before a reader fills it: a reader must leave
 * it safe to close (free, unmap) after a success or a failure whatever it held, so closing after
 * GARBAGE + a reader that left a field alone frees 0xa5a5... and fails every time, not by chance. */
#define GARBAGE(x) memset(&(x), 0xa5, sizeof(x))

/* Deterministic pseudo-random floats in [-scale, scale) for kernel tests. */
static inline float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static inline void fill(float *x, size_t n, unsigned seed, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand(&seed) * scale;
}

static inline float max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = a[i] - b[i];
        d = d < 0 ? -d : d;
        m = d > m || d != d ? d : m;
    }
    return m;
}

/* m (rows, cols) -> t (cols, rows) */
static inline void transpose(float *t, const float *m, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) t[(size_t)j * rows + i] = m[(size_t)i * cols + j];
}

/* Writes content to a new temporary file; its name goes to path. */
static inline void write_temp(char path[64], const char *content, size_t len) {
    strcpy(path, "/tmp/attnviz_test_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp: %s", strerror(errno));
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
}

int main(void) {
    Suite *s = make_suite();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
