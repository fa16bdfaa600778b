/* telemetry.c — attention telemetry: each query row's statistics and heaviest
 * keys, taken from the rows as the forward pass makes them (capture.h), so the
 * statistics of a long input need no n x n matrix. */
#include <math.h>
#include <stdlib.h>

#include "kernels.h"
#include "model.h"

/* Keeps the k heaviest keys seen so far, heaviest first; a key only displaces
 * strictly lighter ones, so ties keep the earlier key. */
static void top_insert(int *key, float *w, int k, int *have, int j, float x) {
    int at = *have < k ? *have : k - 1;
    if (*have >= k && !(x > w[k - 1])) return;
    while (at > 0 && x > w[at - 1]) {
        key[at] = key[at - 1], w[at] = w[at - 1];
        at--;
    }
    key[at] = j, w[at] = x;
    if (*have < k) (*have)++;
}

/* Terms of one row handled at a time: x ln x over a chunk goes through the
 * vectorized kern_xlogx, the rest is one scalar sweep that skips zeros. */
#define TEL_CHUNK 256

void model_telemetry_rows(Capture *cap, int l, int h, int row0, const float *probs, int ldp, int nrows, int ncols,
                          const AttnRule *rule) {
    const size_t block = cap_block(cap, l, h), n = (size_t)cap->n_tokens;
    const int K = cap->tel_top_k;
    const int *ids = cap->tel_ids;
    float xlx[TEL_CHUNK];
    for (int r = 0; r < nrows; r++) {
        const int i = row0 + r;
        const float *p = probs + (size_t)r * ldp;                  // (ncols)
        float *t = cap->tel + (block * n + (size_t)i) * CAP_TEL_N; // (CAP_TEL_N)
        int *top = K ? cap->tel_top + (block * n + (size_t)i) * K : NULL;
        float *topw = K ? cap->tel_top_w + (block * n + (size_t)i) * K : NULL;
        int lo = 0, hi = ncols; /* the keys the row sees: a causal row's later keys are 0 */
        if (rule) kern_attention_keys(rule, ncols, i, &lo, &hi);
        double ent = 0, dist = 0, dup = 0, sink4 = 0;
        int have = 0;
        const int id = ids ? ids[i] : -1;
        for (int j0 = lo; j0 < hi; j0 += TEL_CHUNK) {
            const int len = hi - j0 < TEL_CHUNK ? hi - j0 : TEL_CHUNK;
            kern_xlogx(xlx, p + j0, len);
            for (int jj = 0; jj < len; jj++) {
                const float x = p[j0 + jj];
                if (!(x > 0)) continue; /* nothing to add, and no log of 0 */
                const int j = j0 + jj;
                ent -= xlx[jj];
                dist += (double)x * (i > j ? i - j : j - i);
                if (ids && j < i && ids[j] == id) dup += x;
                if (K && (have < K || x > topw[K - 1])) top_insert(top, topw, K, &have, j, x);
            }
        }
        for (int j = lo; j < 4 && j < hi; j++) sink4 += p[j];
        for (int k = have; k < K; k++) top[k] = -1, topw[k] = 0;
        t[CAP_TEL_SINK] = ncols > 0 ? p[0] : 0;
        t[CAP_TEL_SINK4] = (float)sink4;
        t[CAP_TEL_ENTROPY] = (float)ent;
        t[CAP_TEL_PREV] = i > 0 && i - 1 < ncols ? p[i - 1] : 0;
        t[CAP_TEL_SELF] = i < ncols ? p[i] : 0;
        t[CAP_TEL_DUP] = (float)dup;
        t[CAP_TEL_DISTANCE] = (float)dist;
    }
}

void model_telemetry_row_naive(const float *p, int ncols, int i, const int *ids, double *stats) {
    for (int k = 0; k < CAP_TEL_N; k++) stats[k] = 0;
    for (int j = 0; j < ncols; j++) {
        const double x = p[j];
        if (j == 0) stats[CAP_TEL_SINK] = x;
        if (j < 4) stats[CAP_TEL_SINK4] += x;
        if (x > 0) stats[CAP_TEL_ENTROPY] -= x * log(x);
        if (j == i - 1) stats[CAP_TEL_PREV] = x;
        if (j == i) stats[CAP_TEL_SELF] = x;
        if (ids && j < i && ids[j] == ids[i]) stats[CAP_TEL_DUP] += x;
        stats[CAP_TEL_DISTANCE] += x * (i > j ? i - j : j - i);
    }
}
