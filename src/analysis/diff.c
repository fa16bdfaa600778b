/* diff.c — attnviz diff's comparison: token alignment (LCS over ids), per-head
 * Jensen–Shannon divergence over the merged key axis, sink mass (definitions
 * in diff.h); out/diff_out.c writes them. */
#include "diff.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* The LCS table of the differing middle is (n+1) x (m+1) 16-bit lengths:
 * refuse above this many cells rather than allocate gigabytes. */
#define DIFF_MAX_CELLS ((size_t)1 << 27)

/* ---------------------------------------------------------------- alignment */

void diff_align_free(DiffAlign *al) {
    free(al->a_to_b);
    free(al->b_to_a);
    memset(al, 0, sizeof *al);
}

int diff_align(const int *a, int n_a, const int *b, int n_b, DiffAlign *out, AvErr *e) {
    memset(out, 0, sizeof *out);
    if (n_a < 0 || n_b < 0) return av_err(e, "diff: negative token count");
    out->n_a = n_a, out->n_b = n_b;
    out->a_to_b = malloc(sizeof(int) * (size_t)(n_a ? n_a : 1));
    out->b_to_a = malloc(sizeof(int) * (size_t)(n_b ? n_b : 1));
    if (!out->a_to_b || !out->b_to_a) {
        diff_align_free(out);
        return av_err(e, "diff: out of memory");
    }
    for (int i = 0; i < n_a; i++) out->a_to_b[i] = -1;
    for (int j = 0; j < n_b; j++) out->b_to_a[j] = -1;
    /* a common prefix and suffix align as they are (and are in every LCS's
     * reach without loss); only the middle needs the table */
    int pre = 0;
    while (pre < n_a && pre < n_b && a[pre] == b[pre]) pre++;
    int suf = 0;
    while (suf < n_a - pre && suf < n_b - pre && a[n_a - 1 - suf] == b[n_b - 1 - suf]) suf++;
    for (int i = 0; i < pre; i++) out->a_to_b[i] = out->b_to_a[i] = i;
    for (int k = 1; k <= suf; k++) out->a_to_b[n_a - k] = n_b - k, out->b_to_a[n_b - k] = n_a - k;
    out->n_pairs = pre + suf;
    const int *x = a + pre, *y = b + pre;
    const int n = n_a - pre - suf, m = n_b - pre - suf;
    if (n == 0 || m == 0) return 0;
    const size_t W = (size_t)m + 1, cells = ((size_t)n + 1) * W;
    if (cells > DIFF_MAX_CELLS || n > 65535 || m > 65535) {
        diff_align_free(out);
        return av_err(e, "diff: the inputs differ over %d x %d tokens, too many to align (at most %zu pairs)", n, m,
                      DIFF_MAX_CELLS);
    }
    /* L[i][j]: LCS length of x[i..] and y[j..] */
    uint16_t *L = calloc(cells, sizeof *L);
    if (!L) {
        diff_align_free(out);
        return av_err(e, "diff: out of memory aligning %d x %d tokens", n, m);
    }
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--) {
            uint16_t *c = L + (size_t)i * W + j;
            if (x[i] == y[j]) *c = (uint16_t)(c[W + 1] + 1);
            else *c = c[W] >= c[1] ? c[W] : c[1];
        }
    int i = 0, j = 0;
    while (i < n && j < m) {
        if (x[i] == y[j]) {
            out->a_to_b[pre + i] = pre + j, out->b_to_a[pre + j] = pre + i;
            out->n_pairs++;
            i++, j++;
        } else if (L[(size_t)(i + 1) * W + j] >= L[(size_t)i * W + j + 1]) {
            i++;
        } else {
            j++;
        }
    }
    free(L);
    return 0;
}

/* ---------------------------------------------------------------- divergence */

/* ½ p log2(2p / (p + q)) + ½ q log2(2q / (p + q)), with 0 log 0 = 0 */
static double jsd_term(double p, double q) {
    double m = p + q, t = 0;
    if (p > 0) t += p * log2(2 * p / m);
    if (q > 0) t += q * log2(2 * q / m);
    return 0.5 * t;
}

double diff_jsd_row(const float *pa, const float *pb, const DiffAlign *al) {
    double sa = 0, sb = 0;
    for (int j = 0; j < al->n_a; j++) sa += pa[j];
    for (int j = 0; j < al->n_b; j++) sb += pb[j];
    const double ia = sa > 0 ? 1 / sa : 0, ib = sb > 0 ? 1 / sb : 0;
    double jsd = 0, lone = 0;
    for (int j = 0; j < al->n_a; j++) {
        int k = al->a_to_b[j];
        if (k >= 0) jsd += jsd_term(pa[j] * ia, pb[k] * ib);
        else lone += pa[j] * ia;
    }
    for (int k = 0; k < al->n_b; k++)
        if (al->b_to_a[k] < 0) lone += pb[k] * ib;
    /* a key only one side has: m = p/2 there, so its term is p/2 exactly */
    return jsd + 0.5 * lone;
}

double diff_head_jsd(const float *A, const float *B, const DiffAlign *al) {
    double sum = 0;
    int rows = 0;
    for (int i = 0; i < al->n_a; i++) {
        int k = al->a_to_b[i];
        if (k < 0) continue;
        sum += diff_jsd_row(A + (size_t)i * al->n_a, B + (size_t)k * al->n_b, al);
        rows++;
    }
    return rows ? sum / rows : 0;
}

int diff_divergence(const OutDoc *a, const OutDoc *b, const DiffAlign *al, double *out, AvErr *e) {
    const Capture *ca = a->cap, *cb = b->cap;
    if (!ca || !cb || ca->n_tokens != al->n_a || cb->n_tokens != al->n_b)
        return av_err(e, "diff: the captures do not match the alignment");
    const int nl = out_n_layers(a), nh = out_n_heads(a);
    if (nl != out_n_layers(b) || nh != out_n_heads(b)) return av_err(e, "diff: the two selections differ");
    for (int li = 0; li < nl; li++)
        for (int hi = 0; hi < nh; hi++) {
            int l = out_layer(a, li), h = out_head(a, hi);
            if (l != out_layer(b, li) || h != out_head(b, hi) || !cap_has(ca, l, h) || !cap_has(cb, l, h))
                return av_err(e, "diff: layer %d head %d is not in both captures", l, h);
            out[(size_t)li * nh + hi] = diff_head_jsd(cap_attn(ca, l, h), cap_attn(cb, l, h), al);
        }
    return 0;
}

double diff_sink_mass(const float *A, int n) {
    if (n <= 0) return 0;
    if (n == 1) return A[0];
    double s = 0;
    for (int i = 1; i < n; i++) s += A[(size_t)i * n];
    return s / (n - 1);
}

int diff_sinks(const OutDoc *d, double *out, AvErr *e) {
    const Capture *c = d->cap;
    if (!c) return av_err(e, "diff: no capture");
    const int nl = out_n_layers(d), nh = out_n_heads(d);
    for (int li = 0; li < nl; li++)
        for (int hi = 0; hi < nh; hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            if (!cap_has(c, l, h)) return av_err(e, "diff: layer %d head %d is not in the capture", l, h);
            out[(size_t)li * nh + hi] = diff_sink_mass(cap_attn(c, l, h), c->n_tokens);
        }
    return 0;
}

/* ---------------------------------------------------------------- encoder-decoder stacks */

double diff_cross_jsd(const float *A, const float *B, const DiffAlign *rows, const DiffAlign *cols) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < rows->n_a; i++) {
        const int k = rows->a_to_b[i];
        if (k < 0) continue;
        sum += diff_jsd_row(A + (size_t)i * cols->n_a, B + (size_t)k * cols->n_b, cols);
        n++;
    }
    return n ? sum / n : 0;
}

double diff_cross_sink(const float *A, int n_rows, int n_cols) {
    double s = 0;
    for (int i = 0; i < n_rows; i++) s += A[(size_t)i * n_cols];
    return n_rows ? s / n_rows : 0;
}
