/* pool.c — the forward pass's worker threads. */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>

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
    unsigned gen;
    int pending, quit;
};

static void *pool_worker(void *p) {
    PoolSlot *slot = p;
    struct Pool *pool = slot->pool;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (pool->gen == seen && !pool->quit) pthread_cond_wait(&pool->go, &pool->mu);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        seen = pool->gen;
        PoolFn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);
        fn(arg, slot->t, pool->n);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
        pthread_mutex_unlock(&pool->mu);
    }
}

void pool_destroy(Pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
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
    pool->pending = pool->n - 1;
    pool->gen++;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n);
    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

