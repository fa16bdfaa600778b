/* rollout.c — attention rollout over a capture's attention (mixing.h says
 * which variant), and what ALTI shares with it: the result and the product
 * that aggregates layers. */
#include "mixing.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

void mix_free(MixResult *r) {
    free(r->layer);
    free(r->agg);
    memset(r, 0, sizeof *r);
}

size_t mix_bytes(const ModelConfig *c, int n) { return 2 * (size_t)c->num_layers * (size_t)n * (size_t)n * sizeof(float); }

void mix_product(float *R, const float *A, const float *B, int n) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, R, n);
}

/* r's two stacks for the capture's layers and tokens. */
static int mix_alloc(const Capture *cap, MixResult *r, AvErr *e) {
    const size_t n = (size_t)cap->n_tokens, L = (size_t)cap->n_layers;
    memset(r, 0, sizeof *r);
    r->layer = malloc(L * n * n * sizeof *r->layer);
    r->agg = malloc(L * n * n * sizeof *r->agg);
    if (!r->layer || !r->agg) {
        mix_free(r);
        return av_err(e, "out of memory for %zu layers x %zu x %zu token mixing matrices", L, n, n);
    }
    r->n_layers = (int)L, r->n = (int)n;
    return 0;
}

/* Whether cap keeps what a measure over the whole model reads: every layer's and head's attention. */
static int whole_attention(const Capture *cap, const char *what, AvErr *e) {
    if (!cap->attn || cap->n_kept_layers) return av_err(e, "%s needs every layer's and head's attention", what);
    return 0;
}

int mix_rollout(const Capture *cap, MixResult *r, AvErr *e) {
    if (whole_attention(cap, "attention rollout", e) || mix_alloc(cap, r, e)) return -1;
    const int n = cap->n_tokens, H = cap->n_heads;
    const size_t nn = (size_t)n * n;
    double *acc = malloc((size_t)n * sizeof *acc);
    if (!acc) {
        mix_free(r);
        return av_err(e, "out of memory");
    }
    for (int l = 0; l < cap->n_layers; l++) {
        float *A = r->layer + (size_t)l * nn;
        for (int i = 0; i < n; i++) {
            /* the heads' mean in double, then 0.5 A + 0.5 I renormalised */
            for (int j = 0; j < n; j++) acc[j] = 0;
            for (int h = 0; h < H; h++) {
                const float *row = cap_attn(cap, l, h) + (size_t)i * n;
                for (int j = 0; j < n; j++) acc[j] += row[j];
            }
            double sum = 0;
            for (int j = 0; j < n; j++) {
                acc[j] = 0.5 * acc[j] / H + (j == i ? 0.5 : 0.0);
                sum += acc[j];
            }
            for (int j = 0; j < n; j++) A[(size_t)i * n + j] = (float)(acc[j] / sum);
        }
        if (l == 0) memcpy(r->agg, A, nn * sizeof *A);
        else mix_product(r->agg + (size_t)l * nn, A, r->agg + (size_t)(l - 1) * nn, n);
    }
    free(acc);
    return 0;
}
