/* pool.h — a small pool of worker threads that poll for a moment (a tenth
 * of a millisecond) after a job, then block until the next.
 * Why not OpenBLAS's own: its threads spin in sched_yield between calls,
 * taking cores from everything else; so BLAS runs single-threaded and the
 * forward pass splits its work itself: products by output rows, attention
 * by heads, residual steps by tokens. */
#ifndef ATTNVIZ_POOL_H
#define ATTNVIZ_POOL_H

#define POOL_MAX_THREADS 8

typedef struct Pool Pool;

/* One thread's share of a job: t of T threads. */
typedef void (*PoolFn)(void *arg, int t, int T);

/* The threads a run asked for (asked > 0, e.g. --threads), else the default:
 * the CPUs this process may run on, or fewer when $OPENBLAS_NUM_THREADS (else
 * $GOTO_NUM_THREADS, else $OMP_NUM_THREADS) asks for fewer -- the count
 * OpenBLAS itself would take. Read from the settings and the environment,
 * never from a library; a pool takes at most POOL_MAX_THREADS of them. */
int pool_threads(int asked);
/* A pool of n threads (n - 1 workers and the caller); NULL when n < 2 or
 * threads cannot be had, which pool_run takes as "the caller alone". */
Pool *pool_create(int n);
void pool_destroy(Pool *pool);
/* Runs fn(arg, t, T) for t in [0, T) and waits; the caller takes t = 0. */
void pool_run(Pool *pool, PoolFn fn, void *arg);

#endif
