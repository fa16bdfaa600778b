/* x86-64 down to the #else at the end, where aarch64 has a NEON loop and other CPUs print isa=none */
#if defined(__x86_64__)
/* peak.c — this machine's peak single-precision multiply-add rate, for the
 * "share of peak" column of make bench: every core runs a loop of independent
 * fused multiply-adds (16 chains with AVX-512, 12 with AVX2: enough to cover
 * the unit's latency on every x86 core), best of 3. Prints peak_gflops=G isa=NAME.
 * usage: peak [avx512|avx2 [THREADS]]: the best ISA the CPU has on every core
 * by default; avx2 times the 8-wide loop even on an AVX-512 CPU (the AVX2
 * kernel's share of peak), THREADS=1 a single core (gemm_bench's share):
 * then the best of many short runs. */
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define ITERS 20000000L

/* Iterations a loop runs, and how many runs the best is taken of: a few long
 * runs for make bench; many short ones when a thread count is given, so that
 * on a shared machine some run finds its core free (as gemm_bench's best-of). */
static long iters = ITERS;
static int reps = 3;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile float sink;

__attribute__((target("avx512f"))) static double loop512(void) {
    __m512 a[16], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    __m512 s = a[0];
    for (int i = 1; i < 16; i++) s = _mm512_add_ps(s, a[i]);
    sink = _mm512_reduce_add_ps(s);
    return (double)iters * 16 * 16 * 2;
}

/* 12 chains, not 16: with the two operands that makes 14 of AVX2's 16
 * registers, where 16 chains spill and the spilled ones wait on memory (the
 * loop then under-reports the peak); 12 still cover 2 units x 5 cycles. */
__attribute__((target("avx2,fma"))) static double loop256(void) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    float v[8];
    _mm256_storeu_ps(v, s);
    sink = v[0];
    return (double)iters * 12 * 8 * 2;
}

static int use512;
static double flops[256];

static void *worker(void *arg) {
    long t = (long)arg;
    flops[t] = use512 ? loop512() : loop256();
    return NULL;
}

int main(int argc, char **argv) {
    const int has512 = __builtin_cpu_supports("avx512f");
    const int has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    use512 = has512 && !(argc > 1 && !strcmp(argv[1], "avx2"));
    if (argc > 1 && strcmp(argv[1], "avx2") && strcmp(argv[1], "avx512")) {
        fprintf(stderr, "usage: peak [avx512|avx2 [THREADS]]\n");
        return 2;
    }
    if ((argc > 1 && !strcmp(argv[1], "avx512") && !has512) || (!use512 && !has256)) {
        printf("peak_gflops=0 isa=none\n");
        return 0;
    }
    long cores = argc > 2 ? atol(argv[2]) : sysconf(_SC_NPROCESSORS_ONLN);
    if (argc > 2) iters = ITERS / 100, reps = 300;
    if (cores < 1) cores = 1;
    if (cores > 256) cores = 256;
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        pthread_t th[256];
        double t0 = now();
        for (long t = 0; t < cores; t++)
            if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) return 1;
        double total = 0;
        for (long t = 0; t < cores; t++) pthread_join(th[t], NULL), total += flops[t];
        double g = total / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("peak_gflops=%.1f isa=%s cores=%ld\n", best, use512 ? "avx512" : "avx2", cores);
    return 0;
}

#else
/* aarch64: 16 chains of 4-wide NEON FMAs on every core, best of 3, as above */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <arm_neon.h>

static volatile float sink;
static double flops[256];

static void *worker(void *arg) {
    const long iters = 20000000L;
    float32x4_t a[16], m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
    for (int i = 0; i < 16; i++) a[i] = vdupq_n_f32((float)i);
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) a[i] = vfmaq_f32(c, a[i], m);
    float32x4_t s = a[0];
    for (int i = 1; i < 16; i++) s = vaddq_f32(s, a[i]);
    sink = vaddvq_f32(s);
    flops[(long)arg] = (double)iters * 16 * 4 * 2;
    return NULL;
}

int main(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (cores > 256) cores = 256;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[256];
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long t = 0; t < cores; t++)
            if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) return 1;
        double total = 0;
        for (long t = 0; t < cores; t++) pthread_join(th[t], NULL), total += flops[t];
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double g = total / ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9) / 1e9;
        if (g > best) best = g;
    }
    printf("peak_gflops=%.1f isa=neon cores=%ld\n", best, cores);
    return 0;
}
#else
int main(void) {
    printf("peak_gflops=0 isa=none\n");
    return 0;
}
#endif
#endif
