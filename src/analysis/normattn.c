/* normattn.c — value-weighted attention from a capture's attention and value
 * norms (normattn.h). */
#include "normattn.h"

#include <stdlib.h>
#include <string.h>

size_t na_bytes(int n, size_t blocks) { return blocks * (size_t)n * (size_t)n * sizeof(float); }

/* Blocks of a capture shared among a pool's threads: each block is a row of
 * its own, so the products are the same whatever the split. */
typedef struct {
    Capture *cap;
    size_t n, blocks;
} FillTask;

static void fill_part(void *arg, int t, int T) {
    const FillTask *w = arg;
    const size_t n = w->n, per = (w->blocks + (size_t)T - 1) / (size_t)T, b0 = (size_t)t * per;
    const size_t b1 = b0 + per < w->blocks ? b0 + per : w->blocks;
    for (size_t b = b0; b < b1; b++) {
        const float *a = w->cap->attn + b * n * n, *v = w->cap->vnorm + b * n;
        float *o = w->cap->nattn + b * n * n;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) o[i * n + j] = a[i * n + j] * v[j];
    }
}

int na_fill_pool(Capture *cap, Pool *pool, AvErr *e) {
    if (!cap->attn || !cap->vnorm) return av_err(e, "value-weighted attention needs the attention and the value norms");
    const size_t n = (size_t)cap->n_tokens, blocks = cap_blocks(cap);
    if (!cap->nattn && !(cap->nattn = malloc(blocks * n * n * sizeof(float))))
        return av_err(e, "out of memory for value-weighted attention (%zu tokens)", n);
    FillTask w = {cap, n, blocks};
    pool_run(pool, fill_part, &w);
    return 0;
}

int na_fill(Capture *cap, AvErr *e) { return na_fill_pool(cap, NULL, e); }

void na_free_nattn(Capture *cap) {
    free(cap->nattn);
    cap->nattn = NULL;
}

void na_shares(float *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) {
        const float *r = src + (size_t)i * n;
        float *d = dst + (size_t)i * n;
        double sum = 0;
        for (int j = 0; j < n; j++) sum += r[j];
        for (int j = 0; j < n; j++) d[j] = sum > 0 ? (float)(r[j] / sum) : 0.0f;
    }
}

int na_shares_capture(const Capture *cap, Capture *out, AvErr *e) {
    if (!cap->nattn) return av_err(e, "no value-weighted attention to score");
    const size_t n = (size_t)cap->n_tokens, blocks = cap_blocks(cap);
    *out = *cap;
    out->q = out->k = out->hidden = out->thumb = out->vnorm = out->nattn = NULL;
    if (!(out->attn = malloc(blocks * n * n * sizeof(float)))) {
        memset(out, 0, sizeof *out);
        return av_err(e, "out of memory for value-weighted attention (%zu tokens)", n);
    }
    for (size_t b = 0; b < blocks; b++) na_shares(out->attn + b * n * n, cap->nattn + b * n * n, (int)n);
    return 0;
}

void na_shares_free(Capture *out) {
    free(out->attn);
    memset(out, 0, sizeof *out);
}
