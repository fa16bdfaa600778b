/* alti.c — ALTI (mixing.h has the definition as implemented) over a
 * capture's attention, residual stream, contexts and values: per layer, each
 * key token's transformed vector against the block's output, a block of keys
 * at a time so that the per-head vectors f_h(x_j) never take more than
 * ALTI_KEYS tokens' worth of memory. */
#include "mixing.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lens.h"
#include "vecfn.h"

/* Keys whose f_h(x_j) are made at once (one product per head): heads x ALTI_KEYS x hidden floats; and the
 * keys every query row reads in turn, few enough that theirs stay in a core's L2 cache. */
#define ALTI_KEYS 128
#define ALTI_SUB 16

/* ||y - (c2 * (sum_h a[h] F_h - mu) + rho)||_1 over H dimensions, F_h at F + h * ldh: a block of 16
 * dimensions at a time in a vector of 16 floats (GCC's generic vectors: one AVX-512 register, two AVX2 ones,
 * four SSE ones; the same element-wise rounding in each), the heads' sum kept there and the distance taken
 * at once; the 16 lanes summed in double at the end, so that every build (vecfn.h) gives the same bits. */
#define ALTI_LANES 16
typedef float AltiVec __attribute__((vector_size(ALTI_LANES * sizeof(float))));
typedef int AltiMask __attribute__((vector_size(ALTI_LANES * sizeof(int))));

/* 16 floats from p (any alignment) into the vector v */
#define ALTI_LOAD(v, p) memcpy(&(v), (p), sizeof(AltiVec))

/* ||y_r - (c2_r * (sum_h a[r][h] F_h - mu_r) + rho_r)||_1 over H dimensions for ALTI_ROWS query rows against
 * one key at once, F_h at F + h * ldh and a (ALTI_ROWS, nh): each key vector read once for all the rows, a
 * block of 16 dimensions at a time in vectors of 16 floats (GCC's generic vectors: one AVX-512 register, two
 * AVX2 ones, four SSE ones; the same element-wise rounding in each), the heads' sum kept there and the
 * distance taken at once; each row's 16 lanes summed in double at the end, so that every build (vecfn.h)
 * gives the same bits. plain: no norm to freeze (pre-norm without a sandwich norm: c2 all 1, mu 0; c2 is not
 * read). */
#define ALTI_ROWS 4
VEC_VOID(static, alti_distances,
         (const float *const *y, const float *F, size_t ldh, const float *a, int nh, const float *mu,
          const float *const *c2, const float *const *rho, int plain, int H, double *out),
         (y, F, ldh, a, nh, mu, c2, rho, plain, H, out)) {
    AltiVec lane[ALTI_ROWS] = {{0}};
    int d = 0;
    for (; d + ALTI_LANES <= H; d += ALTI_LANES) {
        AltiVec t[ALTI_ROWS] = {{0}}, f, v, u;
        for (int h = 0; h < nh; h++) {
            ALTI_LOAD(f, F + (size_t)h * ldh + d);
            for (int r = 0; r < ALTI_ROWS; r++) t[r] += a[r * nh + h] * f;
        }
        for (int r = 0; r < ALTI_ROWS; r++) {
            if (!plain) {
                ALTI_LOAD(v, c2[r] + d);
                t[r] = v * (t[r] - mu[r]);
            }
            ALTI_LOAD(v, rho[r] + d);
            t[r] += v;
            ALTI_LOAD(v, y[r] + d);
            u = v - t[r];
            lane[r] += (AltiVec)((AltiMask)u & 0x7fffffff); /* |u| */
        }
    }
    for (int r = 0; r < ALTI_ROWS; r++) {
        double sum = 0;
        for (int e = d; e < H; e++) {
            float t = 0;
            for (int h = 0; h < nh; h++) t += a[r * nh + h] * F[(size_t)h * ldh + e];
            if (!plain) t = c2[r][e] * (t - mu[r]);
            sum += fabsf(y[r][e] - (t + rho[r][e]));
        }
        for (int k = 0; k < ALTI_LANES; k++) sum += lane[r][k];
        out[r] = sum;
    }
}

/* One layer's state, shared by the threads of a block of keys. */
typedef struct {
    const Capture *cap;
    int l, n, H, nh, causal;
    int plain;         // no norm to freeze: c2 all 1, mu 0 (alti_distance_plain)
    const float *P;    // (n, n, nh) the layer's attention, a pair's heads side by side
    const float *F;    // (nh, kb, H) f_h(x_j) of keys [j0, j0 + kb)
    const float *muF;  // (nh, kb) their means over dimensions (post-norm's centring), else NULL
    int j0, kb;
    const float *y;    // (n, H) the block's output
    const float *c2;   // (n, H) per query: the frozen norm's scale per dimension (1: none)
    const float *rho;  // (n, H) per query: its residual as the norm transforms it
    const double *ny;  // (n) ||y_i||_1
    const float *zero; // (H)
    float *C;          // (n, n) this layer's raw contributions
} AltiBlock;

static void alti_part(void *arg, int t, int T) {
    const AltiBlock *w = arg;
    const int n = w->n, H = w->H, nh = w->nh;
    float a[ALTI_ROWS * CAP_MAX_HEADS], mu[ALTI_ROWS];
    const float *y[ALTI_ROWS], *c2[ALTI_ROWS], *rho[ALTI_ROWS];
    double dist[ALTI_ROWS];
    int rows[ALTI_ROWS], need[ALTI_ROWS];
    /* keys a sub-block at a time, so that their f_h(x_j) stay in cache while every row reads them; rows
     * interleaved among threads (a causal row's cost grows with i), ALTI_ROWS of them against each key */
    for (int s0 = 0; s0 < w->kb; s0 += ALTI_SUB) {
        const int s1 = s0 + ALTI_SUB < w->kb ? s0 + ALTI_SUB : w->kb;
        for (int i0 = t; i0 < n; i0 += ALTI_ROWS * T) {
            for (int r = 0; r < ALTI_ROWS; r++) rows[r] = i0 + r * T < n ? i0 + r * T : -1;
            for (int jb = s0; jb < s1; jb++) {
                const int j = w->j0 + jb;
                int any = 0;
                for (int r = 0; r < ALTI_ROWS; r++) {
                    const int i = rows[r];
                    float *ar = a + r * nh;
                    need[r] = 0;
                    /* a later key (causal) or one outside the window: T = 0, ||y - 0|| = ||y||, no contribution */
                    if (i >= 0 && !(w->causal && j > i)) {
                        const float *aij = w->P + ((size_t)i * n + j) * nh;
                        int seen = j == i;
                        for (int h = 0; h < nh; h++) ar[h] = aij[h], seen |= ar[h] != 0.0f;
                        need[r] = seen;
                    }
                    if (i >= 0 && !need[r]) w->C[(size_t)i * n + j] = 0.0f;
                    /* a row with nothing to take is computed with zero weights on row 0's vectors, unread */
                    if (!need[r])
                        for (int h = 0; h < nh; h++) ar[h] = 0.0f;
                    const int ii = need[r] ? i : rows[0];
                    mu[r] = 0.0f;
                    if (need[r] && w->muF) {
                        double m = 0;
                        for (int h = 0; h < nh; h++) m += (double)ar[h] * w->muF[(size_t)h * w->kb + jb];
                        mu[r] = (float)m;
                    }
                    y[r] = w->y + (size_t)ii * H, c2[r] = w->c2 + (size_t)ii * H;
                    rho[r] = need[r] && j == i ? w->rho + (size_t)i * H : w->zero;
                    any |= need[r];
                }
                if (!any) continue;
                alti_distances(y, w->F + (size_t)jb * H, (size_t)w->kb * H, a, nh, mu, c2, rho, w->plain, H, dist);
                for (int r = 0; r < ALTI_ROWS; r++) {
                    if (!need[r]) continue;
                    const double v = w->ny[rows[r]] - dist[r];
                    w->C[(size_t)rows[r] * n + j] = v > 0 ? (float)v : 0.0f;
                }
            }
        }
    }
}

/* Layer l's block output y, the frozen norm's scales c2 and each query's transformed residual rho. */
static void block_output(const Model *m, const Capture *cap, int l, const float *aout, float *y, float *c2, float *rho,
                         double *ny) {
    const ModelConfig *c = &m->cfg;
    const LayerWeights *lw = &m->w.layers[l];
    const int n = cap->n_tokens, H = c->hidden_size;
    for (int i = 0; i < n; i++) {
        const float *x = cap_resid(cap, l) + (size_t)i * H, *a = aout + (size_t)i * H;
        float *yi = y + (size_t)i * H, *ci = c2 + (size_t)i * H, *ri = rho + (size_t)i * H;
        if (!c->pre_ln) {
            /* post-norm: y = LN(x + a), its scale on the whole sum frozen */
            const Norm *nm = &lw->attn_norm;
            double mz = 0, mx = 0, var = 0;
            for (int d = 0; d < H; d++) mz += (double)x[d] + a[d], mx += x[d];
            mz /= H, mx /= H;
            if (nm->rms) mz = mx = 0;
            for (int d = 0; d < H; d++) {
                const double v = (double)x[d] + a[d] - mz;
                var += v * v;
            }
            const double inv = 1.0 / sqrt(var / H + nm->eps);
            for (int d = 0; d < H; d++) {
                const double g = nm->g ? nm->g[d] : 1.0;
                ci[d] = (float)(g * inv);
                yi[d] = (float)(g * inv * ((double)x[d] + a[d] - mz) + (nm->b ? nm->b[d] : 0.0));
                ri[d] = (float)(g * inv * ((double)x[d] - mx));
            }
        } else if (lw->attn_post_norm.g || lw->ls_attn) {
            /* a sandwich norm on attention's output (RMSNorm), its scale frozen, and/or a layer scale (DINOv2): the
             * heads' part only */
            const Norm *pn = &lw->attn_post_norm;
            double ss = 0;
            for (int d = 0; d < H; d++) ss += (double)a[d] * a[d];
            const double inv = pn->g ? 1.0 / sqrt(ss / H + pn->eps) : 1.0;
            for (int d = 0; d < H; d++) {
                const double g = (pn->g ? pn->g[d] * inv : 1.0) * (lw->ls_attn ? lw->ls_attn[d] : 1.0);
                ci[d] = (float)g;
                yi[d] = (float)((double)x[d] + g * a[d]);
                ri[d] = x[d];
            }
        } else {
            for (int d = 0; d < H; d++) ci[d] = 1.0f, yi[d] = x[d] + a[d], ri[d] = x[d];
        }
        double s = 0;
        for (int d = 0; d < H; d++) s += fabs((double)yi[d]);
        ny[i] = s;
    }
}

int mix_alti(const Model *m, const Capture *cap, Pool *pool, MixResult *r, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    if (!cap->attn || cap->n_kept_layers) return av_err(e, "ALTI needs every layer's and head's attention");
    if (!cap->resid || !cap->z || !cap->vals) return av_err(e, "ALTI needs the residual stream, contexts and values");
    if (c->enc_dec) return av_err(e, "%s: ALTI of an encoder-decoder's stacks is not implemented", m->path);
    for (int l = 0; l < c->num_layers; l++)
        if (m->w.layers[l].attn_post_norm.g && !m->w.layers[l].attn_post_norm.rms && c->pre_ln)
            return av_err(e, "%s: ALTI through a LayerNorm after attention (layer %d) is not implemented", m->path, l);
    const int n = cap->n_tokens, H = c->hidden_size, NH = c->num_heads, dh = c->head_dim, QW = NH * dh;
    const int group = NH / (c->num_kv_heads ? c->num_kv_heads : NH);
    const size_t nn = (size_t)n * n, nH = (size_t)n * H;
    const int KB = n < ALTI_KEYS ? n : ALTI_KEYS;
    memset(r, 0, sizeof *r);
    r->layer = malloc((size_t)c->num_layers * nn * sizeof *r->layer);
    r->agg = malloc((size_t)c->num_layers * nn * sizeof *r->agg);
    float *F = malloc((size_t)NH * KB * H * sizeof *F), *muF = malloc((size_t)NH * KB * sizeof *muF);
    float *ctx = malloc((size_t)n * QW * sizeof *ctx), *aout = malloc(nH * sizeof *aout);
    float *y = malloc(nH * sizeof *y), *c2 = malloc(nH * sizeof *c2), *rho = malloc(nH * sizeof *rho);
    float *zero = calloc((size_t)H, sizeof *zero);
    double *ny = malloc((size_t)n * sizeof *ny);
    float *P = malloc(nn * NH * sizeof *P);
    float *wo = NULL;
    int rc = -1, blas_threads = 0;
    if (!r->layer || !r->agg || !F || !muF || !ctx || !aout || !y || !c2 || !rho || !zero || !ny || !P) {
        av_err(e, "out of memory for ALTI (%d tokens, %d layers)", n, c->num_layers);
        goto done;
    }
    r->n_layers = c->num_layers, r->n = n;
    /* BLAS single-threaded while the pool splits the rows (pool.h): its own threads would spin between the
     * many small products of a block of keys */
    blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    for (int l = 0; l < c->num_layers; l++) {
        const LayerWeights *lw = &m->w.layers[l];
        free(wo);
        if (!(wo = lens_widen(&lw->o, e))) goto done; // (H, QW)
        if (c->pre_ln && !lw->attn_post_norm.g && !lw->ls_attn) {
            /* the attention's output as the stream took it: after the layer, less its MLP's and its input */
            for (size_t q = 0; q < nH; q++) aout[q] = cap_resid(cap, l + 1)[q] - cap_mlp(cap, l)[q] - cap_resid(cap, l)[q];
        } else {
            /* a_i = W_O [z_i^0 ... z_i^(NH-1)] + b_O, from the pass's contexts: a norm follows it */
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < n; i++)
                    memcpy(ctx + (size_t)i * QW + (size_t)h * dh, cap_z(cap, l, h) + (size_t)i * dh, (size_t)dh * sizeof *ctx);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, H, QW, 1.0f, ctx, QW, wo, QW, 0.0f, aout, H);
            if (lw->o.b)
                for (int i = 0; i < n; i++)
                    for (int d = 0; d < H; d++) aout[(size_t)i * H + d] += lw->o.b[d];
        }
        block_output(m, cap, l, aout, y, c2, rho, ny);
        for (int h = 0; h < NH; h++) { /* (i, j, h): a pair's heads side by side */
            const float *A = cap_attn(cap, l, h);
            for (size_t q = 0; q < nn; q++) P[q * NH + h] = A[q];
        }
        float *C = r->layer + (size_t)l * nn;
        for (int j0 = 0; j0 < n; j0 += KB) {
            const int kb = n - j0 < KB ? n - j0 : KB;
            /* f_h(x_j) = W_O^h v_j for keys [j0, j0 + kb), head by head */
            for (int h = 0; h < NH; h++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kb, H, dh, 1.0f,
                            cap_vals(cap, l, h / group) + (size_t)j0 * dh, dh, wo + (size_t)h * dh, QW, 0.0f,
                            F + (size_t)h * kb * H, H);
            if (!c->pre_ln)
                for (int h = 0; h < NH; h++)
                    for (int jb = 0; jb < kb; jb++) {
                        const float *f = F + ((size_t)h * kb + jb) * H;
                        double s = 0;
                        for (int d = 0; d < H; d++) s += f[d];
                        muF[(size_t)h * kb + jb] = (float)(s / H);
                    }
            AltiBlock w = {cap, l, n, H, NH, c->causal, c->pre_ln && !lw->attn_post_norm.g && !lw->ls_attn, P, F, c->pre_ln ? NULL : muF,
                           j0, kb, y, c2, rho, ny, zero, C};
            pool_run(pool, alti_part, &w);
        }
        /* each row's shares */
        for (int i = 0; i < n; i++) {
            float *row = C + (size_t)i * n;
            double s = 0;
            for (int j = 0; j < n; j++) s += row[j];
            for (int j = 0; j < n; j++) row[j] = s > 0 ? (float)(row[j] / s) : 0.0f;
        }
        if (l == 0) memcpy(r->agg, C, nn * sizeof *C);
        else if (c->causal) { /* both lower triangular: half the product */
            float *R = r->agg + (size_t)l * nn;
            memcpy(R, r->agg + (size_t)(l - 1) * nn, nn * sizeof *R);
            cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, n, 1.0f, C, n, R, n);
        } else mix_product(r->agg + (size_t)l * nn, C, r->agg + (size_t)(l - 1) * nn, n);
    }
    rc = 0;
done:
    if (blas_threads > 0) openblas_set_num_threads(blas_threads);
    if (rc) mix_free(r);
    free(F), free(muF), free(ctx), free(aout), free(y), free(c2), free(rho), free(zero), free(ny), free(P), free(wo);
    return rc;
}
