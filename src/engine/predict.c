/* predict.c — top-K, softmax and sampling over a vocabulary's scores. */
#include "predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Positions whose scores are computed at once: (vocab, PRED_CHUNK) floats. */
#define PRED_CHUNK 16

int pred_alloc(CapPredictions *p, int n, int k, AvErr *e) {
    memset(p, 0, sizeof *p);
    size_t cells = (size_t)(n > 0 ? n : 1) * (size_t)k;
    p->position = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->position);
    p->ids = malloc(cells * sizeof *p->ids);
    p->probs = malloc(cells * sizeof *p->probs);
    if (!p->position || !p->ids || !p->probs) {
        pred_free(p);
        return av_err(e, "out of memory for predictions (%d positions)", n);
    }
    p->n = n, p->k = k;
    return 0;
}

void pred_free(CapPredictions *p) {
    free(p->position);
    free(p->ids);
    free(p->probs);
    memset(p, 0, sizeof *p);
}

/* a ranks before b: higher score, or the same score and a lower id */
static int better(float sa, int a, float sb, int b) { return sa > sb || (sa == sb && a < b); }

int pred_topk(const float *logits, size_t stride, int vocab, int k, int *ids, float *probs) {
    if (k > PRED_MAX_K) k = PRED_MAX_K;
    if (k > vocab) k = vocab;
    float mx = -INFINITY;
    for (int j = 0; j < vocab; j++) {
        float v = logits[(size_t)j * stride];
        if (isnan(v)) return -1;
        if (v > mx) mx = v;
    }
    /* ids[0..k) is a min-heap by rank: its root is the worst kept */
    float sc[PRED_MAX_K];
    int m = 0;
    double sum = 0;
    for (int j = 0; j < vocab; j++) {
        float v = logits[(size_t)j * stride];
        sum += exp((double)v - mx);
        if (m < k) {
            int i = m++;
            while (i > 0 && better(sc[(i - 1) / 2], ids[(i - 1) / 2], v, j)) {
                sc[i] = sc[(i - 1) / 2], ids[i] = ids[(i - 1) / 2];
                i = (i - 1) / 2;
            }
            sc[i] = v, ids[i] = j;
        } else if (better(v, j, sc[0], ids[0])) {
            int i = 0;
            for (;;) {
                int c = 2 * i + 1;
                if (c >= m) break;
                if (c + 1 < m && better(sc[c], ids[c], sc[c + 1], ids[c + 1])) c++;
                if (!better(v, j, sc[c], ids[c])) break;
                sc[i] = sc[c], ids[i] = ids[c];
                i = c;
            }
            sc[i] = v, ids[i] = j;
        }
    }
    /* heap to best-first order: repeatedly move the worst to the end */
    for (int end = m - 1; end > 0; end--) {
        float tv = sc[0];
        int ti = ids[0];
        sc[0] = sc[end], ids[0] = ids[end];
        int i = 0;
        for (;;) {
            int c = 2 * i + 1;
            if (c >= end) break;
            if (c + 1 < end && better(sc[c], ids[c], sc[c + 1], ids[c + 1])) c++;
            if (!better(sc[i], ids[i], sc[c], ids[c])) break;
            float t = sc[i];
            int u = ids[i];
            sc[i] = sc[c], ids[i] = ids[c], sc[c] = t, ids[c] = u;
            i = c;
        }
        sc[end] = tv, ids[end] = ti;
    }
    for (int i = 0; i < m; i++) probs[i] = (float)(exp((double)sc[i] - mx) / sum);
    return 0;
}

void pred_topk_naive(const float *logits, size_t stride, int vocab, int k, int *ids, float *probs) {
    double *p = malloc((size_t)vocab * sizeof *p);
    unsigned char *taken = calloc((size_t)vocab, 1);
    if (!p || !taken) abort(); /* test reference only */
    double mx = -INFINITY, sum = 0;
    /* not fmax: GCC 12 for aarch64 crashes vectorizing that reduction; NaNs are
     * skipped alike (mx starts at -inf and never becomes NaN) */
    for (int j = 0; j < vocab; j++) {
        const double v = logits[(size_t)j * stride];
        if (v > mx) mx = v;
    }
    for (int j = 0; j < vocab; j++) sum += p[j] = exp(logits[(size_t)j * stride] - mx);
    for (int i = 0; i < k && i < vocab; i++) {
        int best = -1;
        for (int j = 0; j < vocab; j++)
            if (!taken[j] && (best < 0 || logits[(size_t)j * stride] > logits[(size_t)best * stride])) best = j;
        taken[best] = 1;
        ids[i] = best;
        probs[i] = (float)(p[best] / sum);
    }
    free(p);
    free(taken);
}

/* splitmix64: small, and the same stream on every machine for a seed */
void pred_rng_seed(PredRng *r, uint64_t seed) { r->state = seed; }

double pred_rng_uniform(PredRng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static const float *sort_keys;
static int by_prob_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    float px = sort_keys[x], py = sort_keys[y];
    return px > py ? -1 : px < py ? 1 : (x > y) - (x < y);
}

int pred_sample(const float *logits, size_t stride, int vocab, float temperature, float top_p, PredRng *r,
                float *scratch, int *iscratch, int *id, float *prob) {
    double mx = -INFINITY, sum = 0;
    int best = 0;
    for (int j = 0; j < vocab; j++) {
        float v = logits[(size_t)j * stride];
        if (isnan(v)) return -1;
        if (v > mx) mx = v, best = j;
    }
    for (int j = 0; j < vocab; j++) sum += exp((double)logits[(size_t)j * stride] - mx);
    int pick = best;
    if (temperature > 0) {
        double tsum = 0;
        for (int j = 0; j < vocab; j++) {
            scratch[j] = (float)exp(((double)logits[(size_t)j * stride] - mx) / temperature);
            tsum += scratch[j];
            iscratch[j] = j;
        }
        int n = vocab;
        if (top_p < 1.0f) {
            sort_keys = scratch;
            qsort(iscratch, (size_t)vocab, sizeof *iscratch, by_prob_desc);
            double acc = 0;
            for (n = 0; n < vocab;) {
                acc += scratch[iscratch[n++]] / tsum;
                if (acc >= top_p) break;
            }
            tsum = 0;
            for (int i = 0; i < n; i++) tsum += scratch[iscratch[i]];
        }
        double u = pred_rng_uniform(r) * tsum, acc = 0;
        pick = iscratch[n - 1];
        for (int i = 0; i < n; i++) {
            acc += scratch[iscratch[i]];
            if (u < acc) {
                pick = iscratch[i];
                break;
            }
        }
    }
    *id = pick;
    *prob = (float)(exp((double)logits[(size_t)pick * stride] - mx) / sum);
    return 0;
}

int pred_rows(const Model *m, RunState *s, const int *rows, int n_rows, int offset, CapPredictions *p, int first,
              AvErr *e) {
    const int vocab = m->cfg.vocab_size;
    int chunk = PRED_CHUNK < s->max_tokens ? PRED_CHUNK : s->max_tokens;
    float *logitsT = malloc((size_t)vocab * (size_t)chunk * sizeof *logitsT); // (vocab, chunk)
    if (!logitsT) return av_err(e, "out of memory for scores over %d tokens", vocab);
    int rc = 0;
    for (int i0 = 0; i0 < n_rows && rc == 0; i0 += chunk) {
        int nc = n_rows - i0 < chunk ? n_rows - i0 : chunk;
        if ((rc = model_logits(m, s, rows + i0, nc, logitsT, e))) break;
        for (int i = 0; i < nc && rc == 0; i++) {
            const int at = first + i0 + i;
            p->position[at] = rows[i0 + i] + offset;
            if (pred_topk(logitsT + i, (size_t)nc, vocab, p->k, p->ids + (size_t)at * p->k, p->probs + (size_t)at * p->k))
                rc = av_err(e, "%s: the scores at position %d are not finite (NaN in the weights?)", m->path, p->position[at]);
        }
    }
    free(logitsT);
    return rc;
}
