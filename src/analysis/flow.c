/* flow.c — information-flow routes (flow.h): each part's proximity share of
 * a layer's stream, and the graph traced from one output token down. The
 * values are recomputed from the captured residual stream (the layer's input
 * norm and W_V), one head's projected values at a time, so memory grows with
 * the keys the traced queries see, not with heads x tokens x hidden. */
#include "flow.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "lens.h"

void flow_free(FlowResult *r) {
    free(r->edges);
    memset(r, 0, sizeof *r);
}

int flow_supported(const Model *m, AvErr *e) {
    if (!m->cfg.causal || !m->cfg.pre_ln)
        return av_err_usage(e, "--flow reads a causal pre-norm model's residual stream; %s is a masked (%s) model",
                            m->path, m->cfg.model_type);
    for (int l = 0; l < m->cfg.num_layers; l++)
        if (m->w.layers[l].attn_post_norm.g)
            return av_err_usage(e, "--flow: %s normalizes attention's output before the residual (a sandwich norm), "
                                   "so a layer's stream is not a sum of the parts the shares are taken of",
                                m->path);
    return 0;
}

double flow_proximity(const double *y, double y_l1, const float *p, double s, int dim) {
    /* four running sums: the loop is the analysis's inner one (queries x keys x heads x hidden) */
    double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    int k = 0;
    for (; k + 4 <= dim; k += 4) {
        d0 += fabs(y[k] - s * p[k]);
        d1 += fabs(y[k + 1] - s * p[k + 1]);
        d2 += fabs(y[k + 2] - s * p[k + 2]);
        d3 += fabs(y[k + 3] - s * p[k + 3]);
    }
    for (; k < dim; k++) d0 += fabs(y[k] - s * p[k]);
    const double d = (d0 + d1) + (d2 + d3);
    return y_l1 - d > 0 ? y_l1 - d : 0;
}

static double l1(const double *y, int dim) {
    double s = 0;
    for (int k = 0; k < dim; k++) s += fabs(y[k]);
    return s;
}

int flow_layer_shares(const Model *m, const Capture *cap, int l, const int *qs, int nq, float *attn, float *resid,
                      float *mlp, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int n = cap->n_tokens, H = c->hidden_size, NH = c->num_heads, KV = c->num_kv_heads, dh = c->head_dim;
    const int KVD = KV * dh, QW = NH * dh, group = NH / KV;
    if (!cap->resid || !cap->mlp_out) return av_err(e, "the residual stream was not captured");
    if (!cap->attn) return av_err(e, "the attention matrices were not kept");
    if (l < 0 || l >= c->num_layers) return av_err(e, "layer %d is not in the model (%d layers)", l, c->num_layers);
    for (int h = 0; h < NH; h++)
        if (!cap_has(cap, l, h)) return av_err(e, "layer %d head %d's attention was not captured", l, h);
    if (nq < 1) return 0;
    for (int a = 0; a < nq; a++)
        if (qs[a] < 0 || qs[a] >= n || (a && qs[a] <= qs[a - 1]))
            return av_err(e, "flow: query tokens must ascend within the input (%d tokens)", n);
    const LayerWeights *lw = &m->w.layers[l];
    const int nk = c->causal ? qs[nq - 1] + 1 : n; /* the keys any traced query sees */
    const float *x = cap_resid(cap, l), *post = cap_resid(cap, l + 1), *mo = cap_mlp(cap, l);
    float *xn = malloc((size_t)nk * H * sizeof *xn), *v = malloc((size_t)nk * KVD * sizeof *v);
    float *f = malloc((size_t)nk * H * sizeof *f);
    double *mid = malloc((size_t)nq * H * sizeof *mid), *mid_l1 = malloc((size_t)nq * sizeof *mid_l1);
    double *prox = calloc((size_t)nq * n * NH, sizeof *prox), *pres = malloc((size_t)nq * sizeof *pres);
    float *wv = NULL, *wo = NULL;
    int rc = -1;
    if (!xn || !v || !f || !mid || !mid_l1 || !prox || !pres) {
        av_err(e, "out of memory for the flow of layer %d (%d tokens)", l, nk);
        goto done;
    }
    if (!(wv = lens_widen(&lw->v, e)) || !(wo = lens_widen(&lw->o, e))) goto done;
    /* the values every traced query reads: norm(x_j) W_V^T + b_V */
    memcpy(xn, x, (size_t)nk * H * sizeof *xn);
    if (lw->attn_norm.g) kern_norm_naive(xn, &lw->attn_norm, nk, H);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nk, KVD, H, 1.0f, xn, H, wv, H, 0.0f, v, KVD);
    if (lw->v.b)
        for (int j = 0; j < nk; j++)
            for (int d = 0; d < KVD; d++) v[(size_t)j * KVD + d] += lw->v.b[d];
    /* the wholes: mid = post - mlp (the stream as the pass left it, b_O included) */
    for (int a = 0; a < nq; a++) {
        const size_t r = (size_t)qs[a] * H;
        double *y = mid + (size_t)a * H;
        for (int k = 0; k < H; k++) y[k] = (double)post[r + k] - mo[r + k];
        mid_l1[a] = l1(y, H);
        pres[a] = flow_proximity(y, mid_l1[a], x + r, 1.0, H);
    }
    for (int h = 0; h < NH; h++) {
        /* f_j = v_j^h W_O^h: head h's slice of the output projection */
        const int kh = h / group;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nk, H, dh, 1.0f, v + (size_t)kh * dh, KVD,
                    wo + (size_t)h * dh, QW, 0.0f, f, H);
        const float *att = cap_attn(cap, l, h);
        for (int a = 0; a < nq; a++) {
            const int i = qs[a];
            const int jmax = c->causal ? i + 1 : n;
            for (int j = 0; j < jmax; j++) {
                const float al = att[(size_t)i * n + j];
                if (al == 0) continue; /* a zero part is as far from the whole as nothing: no share */
                prox[((size_t)a * n + j) * NH + h] =
                    flow_proximity(mid + (size_t)a * H, mid_l1[a], f + (size_t)j * H, al, H);
            }
        }
    }
    for (int a = 0; a < nq; a++) {
        const size_t r = (size_t)qs[a] * H;
        double sum = pres[a];
        const double *pa = prox + (size_t)a * n * NH;
        for (size_t t = 0; t < (size_t)n * NH; t++) sum += pa[t];
        const double inv = sum > 0 ? 1.0 / sum : 0;
        for (size_t t = 0; t < (size_t)n * NH; t++) attn[(size_t)a * n * NH + t] = (float)(pa[t] * inv);
        resid[a] = (float)(pres[a] * inv);
        /* the MLP block: post = mid + mlp, two parts */
        double *y = mid + (size_t)a * H; /* reused for post */
        for (int k = 0; k < H; k++) y[k] = post[r + k];
        const double y1 = l1(y, H);
        double pm = flow_proximity(y, y1, mo + r, 1.0, H), pr = 0;
        for (int k = 0; k < H; k++) pr += fabs((double)mo[r + k]); /* ||post - mid||_1 = ||mlp||_1 */
        pr = y1 - pr > 0 ? y1 - pr : 0;
        mlp[a] = pm + pr > 0 ? (float)(pm / (pm + pr)) : 0;
    }
    rc = 0;
done:
    free(xn), free(v), free(f), free(mid), free(mid_l1), free(prox), free(pres), free(wv), free(wo);
    return rc;
}

static int add_edge(FlowResult *r, FlowEdge ed, AvErr *e) {
    if (r->n_edges == r->cap_edges) {
        const int cap = r->cap_edges ? 2 * r->cap_edges : 64;
        FlowEdge *p = realloc(r->edges, (size_t)cap * sizeof *p);
        if (!p) return av_err(e, "out of memory for the flow graph");
        r->edges = p, r->cap_edges = cap;
    }
    r->edges[r->n_edges++] = ed;
    return 0;
}

int flow_routes(const Model *m, const Capture *cap, int lo, int hi, int pos, double threshold, FlowResult *r,
                AvErr *e) {
    if (flow_supported(m, e)) return -1;
    const int n = cap->n_tokens, NH = m->cfg.num_heads;
    if (!(threshold > 0 && threshold < 1)) return av_err_usage(e, "--flow needs a threshold in (0, 1), got %g", threshold);
    if (lo < 0 || hi >= m->cfg.num_layers || lo > hi)
        return av_err(e, "flow: layers %d to %d are not in the model (%d layers)", lo, hi, m->cfg.num_layers);
    if (pos < 0 || pos >= n) return av_err(e, "position %d is not in the input (%d tokens)", pos, n);
    flow_free(r);
    r->on = 1, r->threshold = threshold, r->position = pos, r->lo = lo, r->hi = hi;
    unsigned char *act = calloc((size_t)n, 1), *next = calloc((size_t)n, 1);
    int *qs = malloc((size_t)n * sizeof *qs);
    float *sa = NULL, *sr = malloc((size_t)n * sizeof *sr), *sm = malloc((size_t)n * sizeof *sm);
    int rc = -1;
    if (!act || !next || !qs || !sr || !sm) {
        av_err(e, "out of memory for the flow graph");
        goto done;
    }
    act[pos] = 1;
    for (int l = hi; l >= lo; l--) {
        int nq = 0;
        for (int i = 0; i < n; i++)
            if (act[i]) qs[nq++] = i;
        if (!nq) break;
        free(sa);
        if (!(sa = malloc((size_t)nq * n * NH * sizeof *sa))) {
            av_err(e, "out of memory for the flow of layer %d (%d tokens)", l, nq);
            goto done;
        }
        if (flow_layer_shares(m, cap, l, qs, nq, sa, sr, sm, e)) goto done;
        memset(next, 0, (size_t)n);
        for (int a = 0; a < nq; a++) {
            const int i = qs[a];
            const float cm = sm[a], cres = 1 - sm[a];
            if (cm > threshold && add_edge(r, (FlowEdge){l, i, i, -1, FLOW_MLP, cm}, e)) goto done;
            if (!(cm > threshold || cres > threshold)) continue; /* mid_i is not reached */
            const int jmax = m->cfg.causal ? i + 1 : n;
            for (int j = 0; j < jmax; j++) {
                const float *s = sa + ((size_t)a * n + j) * NH;
                double w = j == i ? sr[a] : 0;
                for (int h = 0; h < NH; h++) w += s[h];
                if (!(w > threshold)) continue;
                next[j] = 1;
                for (int h = 0; h < NH; h++)
                    if (s[h] > 0 && add_edge(r, (FlowEdge){l, j, i, h, FLOW_ATTN, s[h]}, e)) goto done;
                if (j == i && sr[a] > 0 && add_edge(r, (FlowEdge){l, i, i, -1, FLOW_RESIDUAL, sr[a]}, e)) goto done;
            }
        }
        unsigned char *t = act;
        act = next, next = t;
    }
    rc = 0;
done:
    free(act), free(next), free(qs), free(sa), free(sr), free(sm);
    return rc;
}
