/* normattn.c — value-weighted attention from a capture's attention and value
 * norms (normattn.h). */
#include "normattn.h"

#include <stdlib.h>
#include <string.h>

size_t na_bytes(int n, size_t blocks) { return blocks * (size_t)n * (size_t)n * sizeof(float); }

int na_fill(Capture *cap, AvErr *e) {
    if (!cap->attn || !cap->vnorm) return av_err(e, "value-weighted attention needs the attention and the value norms");
    const size_t n = (size_t)cap->n_tokens, blocks = cap_blocks(cap);
    if (!cap->nattn && !(cap->nattn = malloc(blocks * n * n * sizeof(float))))
        return av_err(e, "out of memory for value-weighted attention (%zu tokens)", n);
    for (size_t b = 0; b < blocks; b++) {
        const float *a = cap->attn + b * n * n, *v = cap->vnorm + b * n;
        float *o = cap->nattn + b * n * n;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) o[i * n + j] = a[i * n + j] * v[j];
    }
    return 0;
}

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
