/* telemetry.c — attention telemetry: each query row's statistics and heaviest
 * keys, taken from the rows as the forward pass makes them (capture.h), so the
 * statistics of a long input need no n x n matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int cmp_u64(const void *a, const void *b) {
    const unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* Each of the n tokens' previous position with the same id (-1: none): the
 * (id, position) pairs sorted, neighbours with the same id linked. */
static void link_prev(const int *ids, int n, int *prev, unsigned long long *scratch) {
    for (int i = 0; i < n; i++) prev[i] = -1;
    if (!ids) return;
    for (int i = 0; i < n; i++) scratch[i] = (unsigned long long)(unsigned)ids[i] << 32 | (unsigned)i;
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_u64);
    for (int k = 1; k < n; k++)
        if (scratch[k] >> 32 == scratch[k - 1] >> 32) prev[scratch[k] & 0xffffffffu] = (int)(scratch[k - 1] & 0xffffffffu);
}

void model_telemetry_begin(Capture *cap, int n) {
    cap->tel_prev_n = 0;
    if (!cap->tel_prev || !cap->tel_ids) return;
    link_prev(cap->tel_ids, n, cap->tel_prev, cap->tel_scratch);
    cap->tel_prev_n = n;
}

void model_telemetry_rows(Capture *cap, int l, int h, int row0, const float *probs, int ldp, int nrows, int ncols,
                          const AttnRule *rule, const KernRowStats *st) {
    const size_t block = cap_block(cap, l, h), n = (size_t)cap->n_tokens;
    const int K = cap->tel_top_k;
    const int *ids = cap->tel_ids;
    for (int r = 0; r < nrows; r++) {
        const int i = row0 + r;
        const float *p = probs + (size_t)r * ldp;                  // (ncols)
        float *t = cap->tel + (block * n + (size_t)i) * CAP_TEL_N; // (CAP_TEL_N)
        int *top = K ? cap->tel_top + (block * n + (size_t)i) * K : NULL;
        float *topw = K ? cap->tel_top_w + (block * n + (size_t)i) * K : NULL;
        int lo = 0, hi = ncols; /* the keys the row sees: a causal row's later keys are 0 */
        if (rule) kern_attention_keys(rule, ncols, i, &lo, &hi);
        double sums[3] = {0, 0, 0}, sink4 = 0;
        if (st && (!ids || i < cap->tel_prev_n)) {
            /* entropy and distance from the softmax; the duplicates are the
             * row's own token's earlier copies, walked from the nearest */
            sums[0] = st->mom[(size_t)r * KERN_MOM_N + KERN_MOM_ENTROPY];
            sums[1] = st->mom[(size_t)r * KERN_MOM_N + KERN_MOM_DISTANCE];
            for (int j = ids ? cap->tel_prev[i] : -1; j >= lo; j = cap->tel_prev[j])
                if (j < hi) sums[2] += p[j];
        } else if (lo < hi) {
            kern_row_sums(p, lo, hi, i, ids, sums);
        }
        /* A key enters the top k when it beats the k-th weight (any positive
         * weight while fewer than k are kept). Keys lighter than floor are in
         * no row's final k, so leaving them out keeps the result, and it spares
         * most of the insertions a row's first keys would make (x > below is
         * x >= floor). floor is the k-th largest of the blocks' largest weights
         * (k distinct keys weigh at least that much): the softmax's block
         * weights when it kept them, else a sweep. */
        int have = 0;
        const float *bw = st && st->bmax ? st->bmax + (size_t)r * st->bmax_ld : NULL; // (blocks of the row's keys)
        const int nb = (hi - lo + KERN_KTH_BLOCK - 1) / KERN_KTH_BLOCK;
        const float floor = !K ? 0 : bw ? kern_kth_largest(bw, nb, K) : kern_kth_block_max(p + lo, hi - lo, K);
        const float below = floor > 0 ? nextafterf(floor, 0.0f) : 0.0f;
        if (K && bw) {
            /* only the blocks whose bound beats the threshold, in key order */
            for (int b = 0; b < nb; b++) {
                const float thr = have < K || topw[K - 1] < below ? below : topw[K - 1];
                if (!(KERN_BMAX_BOUND(bw[b]) > thr)) continue;
                const int j1 = lo + (b + 1) * KERN_KTH_BLOCK < hi ? lo + (b + 1) * KERN_KTH_BLOCK : hi;
                for (int j = lo + b * KERN_KTH_BLOCK; j < j1; j++) {
                    const float th = have < K || topw[K - 1] < below ? below : topw[K - 1];
                    j += kern_first_above(p + j, j1 - j, th);
                    if (j < j1) top_insert(top, topw, K, &have, j, p[j]);
                }
            }
        } else {
            /* the rest found by kern_first_above, in key order */
            for (int j = lo; K && j < hi; j++) {
                const float thr = have < K || topw[K - 1] < below ? below : topw[K - 1];
                j += kern_first_above(p + j, hi - j, thr);
                if (j < hi) top_insert(top, topw, K, &have, j, p[j]);
            }
        }
        for (int j = lo; j < 4 && j < hi; j++) sink4 += p[j];
        for (int k = have; k < K; k++) top[k] = -1, topw[k] = 0;
        t[CAP_TEL_SINK] = ncols > 0 ? p[0] : 0;
        t[CAP_TEL_SINK4] = (float)sink4;
        t[CAP_TEL_ENTROPY] = (float)sums[0];
        t[CAP_TEL_PREV] = i > 0 && i - 1 < ncols ? p[i - 1] : 0;
        t[CAP_TEL_SELF] = i < ncols ? p[i] : 0;
        t[CAP_TEL_DUP] = (float)sums[2];
        t[CAP_TEL_DISTANCE] = (float)sums[1];
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

/* ---- score sums for --stats and heads (capture.h's sc_sum) ---- */

#define SC_LANES 8
/* Terms of one row handled at a time by the vectorized kern_xlogx. */
#define TEL_CHUNK 256

void model_scores_begin(Capture *cap, int n) {
    memset(cap->sc_sum, 0, cap_blocks(cap) * CAP_SC_N * sizeof *cap->sc_sum);
    /* each token's previous copy, so that a row walks only its own token's copies */
    link_prev(cap->tel_ids, n, cap->sc_prev, cap->sc_scratch);
    cap->sc_n_special = 0;
    for (int j = 0; j < n; j++)
        if (cap->sc_role[j]) cap->sc_special[cap->sc_n_special++] = j;
}

/* One row's shares: the attention p, or with value norms v its value-weighted
 * share, by na_shares' arithmetic (normattn.c: the float product a_ij v_j over
 * the row's double sum, rounded to float), so both paths score the same numbers. */
typedef struct {
    const float *p, *v;
    double sum;
    int lo, hi;
} Row;

static inline float row_x(const Row *r, int j) {
    if (j < r->lo || j >= r->hi) return 0;
    if (!r->v) return r->p[j];
    return r->sum > 0 ? (float)((double)(r->p[j] * r->v[j]) / r->sum) : 0.0f;
}

void model_score_rows(Capture *cap, int l, int h, int row0, const float *probs, int ldp, int nrows, int ncols,
                      const AttnRule *rule, const KernRowStats *st) {
    double *acc = cap_sc(cap, l, h);
    const CapScoring *sc = &cap->sc;
    const int *ids = cap->tel_ids, *prev = cap->sc_prev, n = cap->n_tokens;
    const unsigned char *role = cap->sc_role;
    const int bos = sc->exclude_bos, cur = sc->exclude_current;
    float xs[TEL_CHUNK], xlx[TEL_CHUNK];
    for (int r = 0; r < nrows; r++) {
        const int i = row0 + r;
        Row row = {probs + (size_t)r * ldp, sc->norm ? cap_vnorm(cap, l, h) : NULL, 0, 0, ncols};
        if (rule) kern_attention_keys(rule, ncols, i, &row.lo, &row.hi);
        if (row.v)
            for (int j = row.lo; j < row.hi; j++) row.sum += row.p[j] * row.v[j];
        const float *w = sc->pattern && n <= sc->pattern_n ? sc->pattern + (size_t)i * sc->pattern_n : NULL;
        double ent_l[SC_LANES] = {0}, dist_l[SC_LANES] = {0}, tot_l[SC_LANES] = {0}, tw = 0;
        const int ex0 = bos ? 0 : -1, ex1 = cur ? i : -1;
        /* the attention's own rows with the softmax's moments and no template:
         * no sweep. The total is the moments' sum without key 0 and key i, with
         * whichever of them is not excluded added back: never a subtraction, which
         * would cancel under a heavy sink (0.99 leaves 1e-2 to a double's 1e-16) */
        const int from_moments = st && !row.v && !w;
        if (from_moments) {
            const double *mo = st->mom + (size_t)r * KERN_MOM_N;
            ent_l[0] = mo[KERN_MOM_ENTROPY], dist_l[0] = mo[KERN_MOM_DISTANCE], tot_l[0] = mo[KERN_MOM_REST];
            if (row.lo == 0 && row.hi > 0 && ex0 != 0 && ex1 != 0) tot_l[0] += row.p[0];
            if (i != 0 && i >= row.lo && i < row.hi && ex0 != i && ex1 != i) tot_l[0] += row.p[i];
        }
        for (int j0 = row.lo; !from_moments && j0 < row.hi; j0 += TEL_CHUNK) {
            const int len = row.hi - j0 < TEL_CHUNK ? row.hi - j0 : TEL_CHUNK;
            const float *x = row.p + j0;
            if (row.v) {
                for (int jj = 0; jj < len; jj++) xs[jj] = row_x(&row, j0 + jj);
                x = xs;
            }
            kern_xlogx(xlx, x, len); /* 0 where x is 0 */
            /* SC_LANES independent sums of each, added up at the row's end: one chain of
             * dependent additions per quantity cost more than the row's attention at long
             * inputs. The total leaves the excluded keys out as it goes, as heads sums it:
             * a total taken whole and the excluded weight subtracted would cancel (a
             * first-token sink of 0.99 leaves a remainder of 1e-3 with a 1e-16 error). */
            int jj = 0;
            for (; jj + SC_LANES <= len; jj += SC_LANES)
                for (int k = 0; k < SC_LANES; k++) {
                    const int j = j0 + jj + k;
                    const double xd = x[jj + k];
                    ent_l[k] -= xlx[jj + k];
                    dist_l[k] += xd * (double)(i > j ? i - j : j - i);
                    tot_l[k] += j != ex0 && j != ex1 ? xd : 0.0;
                }
            for (; jj < len; jj++) {
                const int j = j0 + jj;
                const double xd = x[jj];
                ent_l[0] -= xlx[jj];
                dist_l[0] += xd * (double)(i > j ? i - j : j - i);
                tot_l[0] += j != ex0 && j != ex1 ? xd : 0.0;
            }
            if (w) /* likewise without the excluded keys */
                for (int q = 0; q < len; q++)
                    if (j0 + q != ex0 && j0 + q != ex1) tw += (double)w[j0 + q] * x[q];
        }
        double ent = 0, dist = 0, tot = 0;
        for (int k = 0; k < SC_LANES; k++) ent += ent_l[k], dist += dist_l[k], tot += tot_l[k];
        /* whether heads leaves key j out of row i */
#define EXCLUDED(j) ((bos && (j) == 0) || (cur && (j) == i))
        const double x0 = row_x(&row, 0), xi = row_x(&row, i);
        double cls = 0, sep = 0, hsep = 0, dup = 0, ind = 0, pat;
        for (int k = 0; k < cap->sc_n_special; k++) {
            const int j = cap->sc_special[k];
            const double x = row_x(&row, j);
            if (role[j] & CAP_ROLE_CLS) cls += x;
            if (role[j] & CAP_ROLE_SEP) sep += x, hsep += EXCLUDED(j) ? 0 : x;
        }
        for (int j = ids ? prev[i] : -1; j >= 0; j = prev[j]) {
            dup += EXCLUDED(j) ? 0 : row_x(&row, j);
            ind += EXCLUDED(j + 1) ? 0 : row_x(&row, j + 1);
        }
        if (sc->pattern) {
            pat = tw;
        } else {
            const int j = i + sc->pattern_offset;
            pat = j >= 0 && j < n && !EXCLUDED(j) ? row_x(&row, j) : 0;
        }
        acc[CAP_SC_ENTROPY] += ent;
        acc[CAP_SC_DISTANCE] += dist;
        acc[CAP_SC_CLS] += cls;
        acc[CAP_SC_SEP] += sep;
        acc[CAP_SC_SELF] += xi;
        acc[CAP_SC_PREV] += i > 0 ? row_x(&row, i - 1) : 0;
        acc[CAP_SC_NEXT] += i < n - 1 ? row_x(&row, i + 1) : 0;
        acc[CAP_SC_TOTAL] += tot;
        acc[CAP_SC_HIT_PREV] += i > 0 && !EXCLUDED(i - 1) ? row_x(&row, i - 1) : 0;
        acc[CAP_SC_HIT_NEXT] += !EXCLUDED(i + 1) ? row_x(&row, i + 1) : 0;
        acc[CAP_SC_HIT_SELF] += !EXCLUDED(i) ? xi : 0;
        acc[CAP_SC_HIT_FIRST] += !EXCLUDED(0) ? x0 : 0;
        acc[CAP_SC_HIT_SEP] += hsep;
        acc[CAP_SC_HIT_DUP] += dup;
        acc[CAP_SC_HIT_IND] += ind;
        acc[CAP_SC_HIT_PATTERN] += pat;
#undef EXCLUDED
    }
}

/* ---- the stream's largest entries (massive activations) */

/* The k-th smallest of x[0, n) (0-based), x left partitioned around it (everything before k is no
 * larger): Wirth's selection. */
static float select_kth(float *x, long n, long k) {
    long l = 0, m = n - 1;
    while (l < m) {
        const float p = x[k];
        long i = l, j = m;
        do {
            while (x[i] < p) i++;
            while (p < x[j]) j--;
            if (i <= j) {
                const float t = x[i];
                x[i] = x[j], x[j] = t;
                i++, j--;
            }
        } while (i <= j);
        if (j < k) l = i;
        if (k < i) m = j;
    }
    return x[k];
}

void model_activation_block(Capture *cap, int b, const float *x, int n, int dim) {
    if (!cap->act_median || b > cap->n_layers || n < 1) return;
    const size_t N = (size_t)n * dim;
    float *a = cap->act_scratch, *val = cap->act_val + (size_t)b * CAP_ACT_TOP;
    int *tok = cap->act_tok + (size_t)b * CAP_ACT_TOP, *dd = cap->act_dim + (size_t)b * CAP_ACT_TOP, have = 0;
    float mag[CAP_ACT_TOP];
    for (size_t q = 0; q < N; q++) {
        const float v = x[q], m = fabsf(v);
        a[q] = m;
        /* a strictly larger |x| displaces: ties keep the earlier token and dimension */
        if (have == CAP_ACT_TOP && !(m > mag[CAP_ACT_TOP - 1])) continue;
        int at = have < CAP_ACT_TOP ? have++ : CAP_ACT_TOP - 1;
        while (at > 0 && m > mag[at - 1]) {
            mag[at] = mag[at - 1], val[at] = val[at - 1], tok[at] = tok[at - 1], dd[at] = dd[at - 1];
            at--;
        }
        mag[at] = m, val[at] = v, tok[at] = (int)(q / (size_t)dim), dd[at] = (int)(q % (size_t)dim);
    }
    for (int k = have; k < CAP_ACT_TOP; k++) val[k] = 0, tok[k] = dd[k] = -1;
    /* the median: the middle one, or the mean of the two middle ones */
    const float hi = select_kth(a, (long)N, (long)(N / 2));
    float med = hi;
    if (N % 2 == 0) {
        float lo = a[0];
        for (size_t q = 1; q < N / 2; q++) lo = a[q] > lo ? a[q] : lo; /* the largest below the selected one */
        med = 0.5f * (lo + hi);
    }
    cap->act_median[b] = med;
    if (b + 1 > cap->act_blocks) cap->act_blocks = b + 1;
}
