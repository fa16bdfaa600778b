/* gemm_bench.c — single-threaded GFLOP/s of gemm_rows (gemm.h) at bert-base's
 * linear-layer shapes, for the kernel ATTNVIZ_KERNEL names (else the best the
 * CPU has). Each product is timed REPEAT times after one warm-up call (more
 * for products shorter than a few milliseconds); prints the best and the
 * median, by the clock and by the thread's CPU time (which, on a machine
 * shared with other work, leaves out the time spent waiting for a core).
 * Not part of make test.
 * usage: gemm_bench [REPEAT [f32|bf16|f16 [N...]]] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "safetensors.h"

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* this thread's CPU time: on a shared machine, the time it was not waiting for a core */
static double cpu_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill(float *x, size_t n, unsigned s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = ((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

int main(int argc, char **argv) {
    AvErr e;
    if (gemm_kernel_from_env(&e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    const int repeat = argc > 1 ? atoi(argv[1]) : 7;
    GemmType type = GEMM_F32;
    if (argc > 2) type = !strcmp(argv[2], "bf16") ? GEMM_BF16 : !strcmp(argv[2], "f16") ? GEMM_F16 : GEMM_F32;
    int ns[16] = {7, 128, 512}, n_ns = 3;
    if (argc > 3) {
        n_ns = 0;
        for (int a = 3; a < argc && n_ns < 16; a++) ns[n_ns++] = atoi(argv[a]);
    }
    const int shapes[][2] = {{768, 768}, {3072, 768}, {768, 3072}}; /* rows (out), in */
    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
    if (!scratch) return 1;
    for (int si = 0; si < 3; si++) {
        const int rows = shapes[si][0], in = shapes[si][1];
        float *wf = malloc(sizeof(float) * (size_t)rows * in);
        uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)rows * in);
        if (!wf || !wh) return 1;
        fill(wf, (size_t)rows * in, 11u + (unsigned)si);
        for (size_t i = 0; i < (size_t)rows * in; i++)
            wh[i] = type == GEMM_BF16 ? st_f32_to_bf16(wf[i]) : st_f32_to_f16(wf[i]);
        const void *w = type == GEMM_F32 ? (const void *)wf : (const void *)wh;
        for (int ni = 0; ni < n_ns; ni++) {
            const int n = ns[ni];
            float *x = malloc(sizeof(float) * (size_t)in * n), *y = malloc(sizeof(float) * (size_t)rows * n);
            if (!x || !y) return 1;
            fill(x, (size_t)in * n, 3u + (unsigned)n);
            double t0 = now();
            gemm_rows(y, w, type, (size_t)in, 1, x, n, rows, in, scratch);
            double once = now() - t0;
            int reps = repeat;
            if (once * reps < 0.25) reps = (int)(0.25 / (once > 1e-6 ? once : 1e-6)) + 1;
            if (reps > 2000) reps = 2000;
            double *ts = malloc(sizeof(double) * (size_t)reps), *cs = malloc(sizeof(double) * (size_t)reps);
            if (!ts || !cs) return 1;
            for (int r = 0; r < reps; r++) {
                t0 = now();
                const double c0 = cpu_now();
                gemm_rows(y, w, type, (size_t)in, 1, x, n, rows, in, scratch);
                cs[r] = cpu_now() - c0;
                ts[r] = now() - t0;
            }
            qsort(ts, (size_t)reps, sizeof *ts, cmp_double);
            qsort(cs, (size_t)reps, sizeof *cs, cmp_double);
            const double fl = 2.0 * rows * in * n;
            printf("kernel=%s type=%s rows=%d in=%d n=%d best_gflops=%.1f median_gflops=%.1f best_ms=%.3f reps=%d "
                   "cpu_best_gflops=%.1f cpu_median_gflops=%.1f\n",
                   gemm_kernel(), type == GEMM_F32 ? "f32" : type == GEMM_BF16 ? "bf16" : "f16", rows, in, n,
                   fl / ts[0] / 1e9, fl / ts[reps / 2] / 1e9, ts[0] * 1e3, reps, fl / cs[0] / 1e9,
                   fl / cs[reps / 2] / 1e9);
            fflush(stdout);
            free(ts), free(cs), free(x), free(y);
        }
        free(wf), free(wh);
    }
    free(scratch);
    return 0;
}
