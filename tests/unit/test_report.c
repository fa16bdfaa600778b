/* test_report.c — base/report.c: where notes go. The process has one reporter
 * (main's: stderr); a thread may put its own in front of it for a while, as
 * serve's workers do to collect one request's warnings. */
#include <pthread.h>
#include <string.h>

#include "report.h"
#include "check_util.h"

typedef struct {
    int n;
    AvNoteKind kind[8];
    char msg[8][256];
} Seen;

static void seen_note(void *ctx, AvNoteKind kind, const char *msg) {
    Seen *s = ctx;
    if (s->n < 8) {
        s->kind[s->n] = kind;
        snprintf(s->msg[s->n++], sizeof s->msg[0], "%s", msg);
    }
}

static void *warn_from_another_thread(void *arg) {
    (void)arg;
    av_warn("from the other thread");
    return NULL;
}

START_TEST(notes_are_formatted_and_sanitized) {
    Seen s = {0};
    av_set_reporter(&(AvReporter){seen_note, &s, 0});
    av_warn("dropped %d tokens from \x1b[31m%s", 3, "red");
    av_progress(0, "line %d", 1); /* progress not wanted: dropped */
    ck_assert(!av_progress_wanted());
    av_set_reporter(NULL);
    av_info("nobody hears this");
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.kind[0], AV_NOTE_WARNING);
    ck_assert_ptr_null(strchr(s.msg[0], '\x1b'));
    ck_assert_ptr_nonnull(strstr(s.msg[0], "dropped 3 tokens from"));
}
END_TEST

START_TEST(a_thread_reporter_takes_this_threads_notes_only) {
    Seen proc = {0}, mine = {0};
    av_set_reporter(&(AvReporter){seen_note, &proc, 1});
    av_set_thread_reporter(&(AvReporter){seen_note, &mine, 0});
    av_warn("mine");
    ck_assert(!av_progress_wanted()); /* the thread's reporter decides */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, warn_from_another_thread, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    av_set_thread_reporter(NULL);
    av_warn("the process's again");
    ck_assert(av_progress_wanted());
    av_set_reporter(NULL);
    ck_assert_int_eq(mine.n, 1);
    ck_assert_str_eq(mine.msg[0], "mine");
    ck_assert_int_eq(proc.n, 2);
    ck_assert_str_eq(proc.msg[0], "from the other thread");
    ck_assert_str_eq(proc.msg[1], "the process's again");
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("report");
    TCase *t = tcase_create("core");
    tcase_add_test(t, notes_are_formatted_and_sanitized);
    tcase_add_test(t, a_thread_reporter_takes_this_threads_notes_only);
    suite_add_tcase(s, t);
    return s;
}
