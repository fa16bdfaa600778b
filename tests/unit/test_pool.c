/* test_pool.c — engine/pool.c: the forward pass's worker threads, which poll
 * for a moment after a job and then sleep. Every job runs each thread's share
 * once and is complete when pool_run returns, whether the workers were
 * polling or asleep when it came. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "pool.h"
#include "check_util.h"

typedef struct {
    int counts[POOL_MAX_THREADS]; /* times each share ran in this job */
    int seen_T;                   /* the T every share was given (-1: they differed) */
    long long data[POOL_MAX_THREADS * 64];
    atomic_int calls;
} Job;

static void share(void *arg, int t, int T) {
    Job *j = arg;
    j->counts[t]++;
    if (j->seen_T == 0) j->seen_T = T;
    else if (j->seen_T != T) j->seen_T = -1;
    /* plain writes the caller reads after pool_run: the pool must order them */
    for (int i = 0; i < 64; i++) j->data[t * 64 + i] += i + t;
    atomic_fetch_add(&j->calls, 1);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* n jobs on a pool of T threads, pausing gap_us between them; every share
 * ran once per job and its writes are there when pool_run returns. */
static void run_jobs(int T, int n, long gap_us) {
    Pool *p = pool_create(T);
    ck_assert_ptr_nonnull(p);
    static Job j;
    for (int k = 0; k < n; k++) {
        memset(&j, 0, sizeof j);
        atomic_init(&j.calls, 0);
        pool_run(p, share, &j);
        const int calls = atomic_load(&j.calls);
        ck_assert_int_eq(calls, T);
        ck_assert_int_eq(j.seen_T, T);
        for (int t = 0; t < T; t++) {
            ck_assert_int_eq(j.counts[t], 1);
            ck_assert_int_eq(j.data[t * 64 + 63], 63 + t);
        }
        if (gap_us) sleep_us(gap_us);
    }
    pool_destroy(p);
}

START_TEST(back_to_back_jobs_each_run_every_share_once) {
    run_jobs(2, 20000, 0); /* the workers still polling when the next job comes */
    run_jobs(4, 5000, 0);
}
END_TEST

START_TEST(jobs_after_the_workers_fell_asleep_still_run) {
    run_jobs(2, 20, 2000); /* gaps well past the polling time: every job wakes a sleeper */
    run_jobs(3, 20, 300);
}
END_TEST

START_TEST(no_pool_means_the_caller_alone) {
    ck_assert_ptr_null(pool_create(1));
    ck_assert_ptr_null(pool_create(0));
    static Job j;
    memset(&j, 0, sizeof j);
    atomic_init(&j.calls, 0);
    pool_run(NULL, share, &j);
    ck_assert_int_eq(j.counts[0], 1);
    ck_assert_int_eq(j.seen_T, 1);
    pool_destroy(NULL); /* nothing to free: safe */
}
END_TEST

START_TEST(a_pool_stops_whether_its_workers_poll_or_sleep) {
    for (int k = 0; k < 50; k++) { /* destroyed straight after a job: workers polling */
        Pool *p = pool_create(2);
        ck_assert_ptr_nonnull(p);
        static Job j;
        memset(&j, 0, sizeof j);
        atomic_init(&j.calls, 0);
        pool_run(p, share, &j);
        pool_destroy(p);
    }
    Pool *p = pool_create(2); /* and asleep, never having had a job */
    ck_assert_ptr_nonnull(p);
    sleep_us(2000);
    pool_destroy(p);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("pool");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, back_to_back_jobs_each_run_every_share_once);
    tcase_add_test(t, jobs_after_the_workers_fell_asleep_still_run);
    tcase_add_test(t, no_pool_means_the_caller_alone);
    tcase_add_test(t, a_pool_stops_whether_its_workers_poll_or_sleep);
    suite_add_tcase(s, t);
    return s;
}
