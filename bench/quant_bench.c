/* quant_bench — MB/s of quant_rows_naive and quant_rows per ggml type,
 * widening a 4096 x 4096 tensor of random blocks (finite f16 scales) in
 * tiles of 64 rows, as the engine does before each product. MB/s counts the
 * f32 bytes written. Usage: quant_bench [REPEATS] */
#include "gguf.h"
#include "quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 4096, COLS = 4096, TILE = 64 };

static uint64_t st = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (uint32_t)(st >> 32); }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A small normal f16 (|x| in [2^-10, 2^-4)) so no scale is inf, NaN or subnormal. */
static void f16_small(uint8_t *p) {
    uint32_t h = (rnd() & 0x8000u) | ((5u + rnd() % 6) << 10) | (rnd() & 0x3ffu);
    p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8);
}

static void fill(uint32_t t, uint8_t *d, size_t nbytes) {
    for (size_t i = 0; i < nbytes; i++) d[i] = (uint8_t)rnd();
    size_t bs = gguf_type_bytes(t);
    for (size_t o = 0; o < nbytes; o += bs) {
        switch (t) {
        case GGUF_T_F32: { float f = (float)((int)(rnd() % 2001) - 1000) * 1e-4f; memcpy(d + o, &f, 4); break; }
        case GGUF_T_F16: f16_small(d + o); break;
        case GGUF_T_BF16: d[o + 1] = (uint8_t)(0x3c + rnd() % 2); break;
        case GGUF_T_Q4_1: case GGUF_T_Q5_1: case GGUF_T_Q4_K: case GGUF_T_Q5_K: f16_small(d + o); f16_small(d + o + 2); break;
        case GGUF_T_Q6_K: f16_small(d + o + 208); break;
        default: f16_small(d + o); break;
        }
    }
}

typedef int (*Deq)(uint32_t, const uint8_t *, size_t, size_t, size_t, size_t, size_t, float *, const char *, AvErr *);

static double mbps(Deq f, uint32_t t, const uint8_t *d, size_t nbytes, float *y, int reps) {
    AvErr e;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (size_t r0 = 0; r0 < ROWS; r0 += TILE)
            if (f(t, d, nbytes, ROWS, COLS, r0, r0 + TILE, y, "bench", &e) != 0) { fprintf(stderr, "quant_bench: %s\n", e.msg); exit(1); }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (double)ROWS * COLS * 4 / best / 1e6;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) { fprintf(stderr, "usage: quant_bench [REPEATS]\n"); return 2; }
    static const uint32_t types[] = {GGUF_T_F32, GGUF_T_F16, GGUF_T_BF16, GGUF_T_Q8_0, GGUF_T_Q4_0, GGUF_T_Q4_1,
                                     GGUF_T_Q5_0, GGUF_T_Q5_1, GGUF_T_Q4_K, GGUF_T_Q5_K, GGUF_T_Q6_K};
    float *y = malloc((size_t)TILE * COLS * sizeof *y);
    if (!y) { fprintf(stderr, "quant_bench: out of memory\n"); return 1; }
    printf("| type | naive MB/s | fast MB/s | speed-up |\n|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        uint32_t t = types[i];
        size_t nbytes = (size_t)ROWS * COLS / gguf_type_block(t) * gguf_type_bytes(t);
        uint8_t *d = malloc(nbytes);
        if (!d) { fprintf(stderr, "quant_bench: out of memory\n"); return 1; }
        fill(t, d, nbytes);
        double a = mbps(quant_rows_naive, t, d, nbytes, y, reps), b = mbps(quant_rows, t, d, nbytes, y, reps);
        printf("| %s | %.0f | %.0f | %.1fx |\n", gguf_type_name(t), a, b, b / a);
        fflush(stdout);
        free(d);
    }
    free(y);
    return 0;
}
