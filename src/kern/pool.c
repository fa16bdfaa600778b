/* pool.c — the forward pass's worker threads. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* A positive count from the environment (leading digits, as OpenBLAS reads
 * them), else 0. */
static int env_count(const char *name) {
    const char *s = getenv(name);
    long v = s ? strtol(s, NULL, 10) : 0;
    return v > 0 && v <= 1 << 20 ? (int)v : 0;
}

int pool_threads(int asked) {
    if (asked > 0) return asked;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < cpus)
        cpus = CPU_COUNT(&set);
    if (cpus < 1) cpus = 1;
    int env = env_count("OPENBLAS_NUM_THREADS");
    if (!env) env = env_count("GOTO_NUM_THREADS");
    if (!env) env = env_count("OMP_NUM_THREADS");
    return env && env < cpus ? env : (int)cpus;
}

typedef struct {
    struct Pool *pool;
    int t;
} PoolSlot;

struct Pool {
    int n; /* threads, the caller included */
    pthread_t th[POOL_MAX_THREADS];
    PoolSlot slot[POOL_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    PoolFn fn;
    void *arg;
    atomic_uint gen;     /* a new job: published (release) after fn and arg */
    atomic_int pending;  /* workers still on the current job */
    atomic_int quit;
};

/* How long a thread polls before it sleeps on the condition variable: at a
 * few tokens a pass hands out short jobs in quick succession, and waking a
 * sleeping thread for each cost a good part of the pass; a poll sees the next
 * job at once, and costs an idle pool at most this much CPU (bench/README.md
 * has the measurements). */
#define POOL_SPIN_NS 100000

static inline void pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long long pool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Polls until gen differs from seen (gen given) or pending is 0, or until
 * the spin time is over; 1 if it saw the change. A few pauses first, then
 * sched_yield between looks: with more threads than free cores (shards of a
 * corpus side by side, --threads past the cores) the thread that has the
 * work gets the core instead of waiting out the poll. */
static int pool_poll(const atomic_uint *gen, unsigned seen, const atomic_int *pending) {
    long long deadline = 0;
    for (unsigned i = 0;; i++) {
        if (gen ? atomic_load_explicit(gen, memory_order_acquire) != seen
                : atomic_load_explicit(pending, memory_order_acquire) == 0)
            return 1;
        if (i < 64) {
            pool_relax();
            continue;
        }
        sched_yield();
        const long long now = pool_now_ns();
        if (!deadline) deadline = now + POOL_SPIN_NS;
        else if (now > deadline) return 0;
    }
}

static void *pool_worker(void *p) {
    PoolSlot *slot = p;
    struct Pool *pool = slot->pool;
    unsigned seen = 0;
    for (;;) {
        if (!pool_poll(&pool->gen, seen, NULL)) {
            /* gen changes under the mutex and with a broadcast: no wake is lost */
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->gen) == seen && !atomic_load(&pool->quit)) pthread_cond_wait(&pool->go, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->quit)) return NULL;
        seen = atomic_load_explicit(&pool->gen, memory_order_acquire);
        pool->fn(pool->arg, slot->t, pool->n);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

void pool_destroy(Pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->quit, 1);
    atomic_fetch_add(&pool->gen, 1); /* wakes a polling worker too */
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    for (int t = 1; t < pool->n; t++) pthread_join(pool->th[t], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->go);
    pthread_cond_destroy(&pool->done);
    free(pool);
}

Pool *pool_create(int n) {
    if (n < 2) return NULL;
    struct Pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->go, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->quit, 0);
    pool->n = 1;
    for (int t = 1; t < n; t++) {
        pool->slot[t] = (PoolSlot){pool, t};
        if (pthread_create(&pool->th[t], NULL, pool_worker, &pool->slot[t]) != 0) break;
        pool->n = t + 1;
    }
    if (pool->n < 2) {
        pool_destroy(pool);
        return NULL;
    }
    return pool;
}

void pool_run(Pool *pool, PoolFn fn, void *arg) {
    if (!pool) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn, pool->arg = arg;
    atomic_store_explicit(&pool->pending, pool->n - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n);
    if (pool_poll(NULL, 0, &pool->pending)) return;
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}
