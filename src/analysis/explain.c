/* explain.c — a head's score split over the residual stream's parts
 * (explain.h): the parts rebuilt from the capture's embeddings, contexts and
 * MLP outputs, each taken through the layer's frozen norm, the head's query or
 * key projection, its frozen q/k norm and its token's rotation. */
#include "explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lens.h"

void explain_free(ExplainResult *r) {
    free(r->kind);
    free(r->part_layer);
    free(r->part_head);
    for (int p = 0; p < r->n_pairs; p++) free(r->pairs[p].m);
    memset(r, 0, sizeof *r);
}

/* The pairs to explain (explain.h), into r->pairs. */
static int pick_pairs(const Capture *cap, int layer, int head, int query, int key, ExplainResult *r, AvErr *e) {
    const int n = cap->n_tokens;
    if (query >= n) return av_err_usage(e, "--query %d: the input has %d tokens (0 to %d)", query, n, n - 1);
    if (key >= n) return av_err_usage(e, "--key %d: the input has %d tokens (0 to %d)", key, n, n - 1);
    const float *A = cap_attn(cap, layer, head);
    if (query >= 0 && key >= 0) {
        r->pairs[r->n_pairs++] = (ExplainPair){query, key, A[(size_t)query * n + key], 0, 0, NULL};
        return 0;
    }
    /* candidates: a row (query given), a column (key given), or each row's heaviest key past 0 */
    for (int k = 0; k < EXPLAIN_MAX_PAIRS; k++) {
        int bi = -1, bj = -1;
        float bw = -1;
        for (int i = 0; i < n; i++) {
            if (query >= 0 && i != query) continue;
            for (int j = 0; j < n; j++) {
                if (key >= 0 ? j != key : (query < 0 && (i < 1 || j < 1) && n > 2)) continue;
                int taken = 0;
                for (int p = 0; p < r->n_pairs; p++)
                    taken |= query >= 0 || key >= 0 ? r->pairs[p].query == i && r->pairs[p].key == j : r->pairs[p].query == i;
                const float w = A[(size_t)i * n + j];
                if (!taken && w > bw) bw = w, bi = i, bj = j;
            }
        }
        if (bi < 0) break;
        r->pairs[r->n_pairs++] = (ExplainPair){bi, bj, bw, 0, 0, NULL};
    }
    return r->n_pairs ? 0 : av_err(e, "--explain %d.%d: no pair to explain", layer, head);
}

/* What the projections need of the model for this head. */
typedef struct {
    const Model *m;
    int layer, head, kv, dh, H, n;
    float *wq, *wk;     /* (dh, H) the head's rows of W_Q, its kv head's of W_K */
    float *wq_all;      /* (NH * dh, H) every head's, when one norm spans the whole projection, else NULL */
    float *wk_all;      /* (NKV * dh, H) likewise */
} Proj;

/* out (rows) = W (rows, H) v (H), in double. */
static void matvec(const float *W, const double *v, int rows, int H, double *out) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        const float *w = W + (size_t)r * H;
        for (int d = 0; d < H; d++) s += (double)w[d] * v[d];
        out[r] = s;
    }
}

/* llama.cpp's interleaved rotary rows (a GGUF's q/k) put back as the pass does: row 2i + s -> s * half + i. */
static void unpermute(double *v, int dh) {
    double t[1024];
    const int half = dh / 2;
    memcpy(t, v, (size_t)dh * sizeof *t);
    for (int i = 0; i < half; i++)
        for (int s = 0; s < 2; s++) v[s * half + i] = t[2 * i + s];
}

/* Token t's rotation of v's first rotary_dim dimensions, as forward.c's tables and kern_rope turn them. */
static void rotate(const Proj *p, int t, double *v) {
    const Model *m = p->m;
    const ModelConfig *c = &m->cfg;
    if (c->pos != POS_ROPE) return;
    const int half = c->rotary_dim / 2, local = c->layer_rope_local[p->layer] && m->inv_freq_local;
    const int use_long = m->inv_freq_long && p->n > c->rope_orig_max_pos;
    const float *inv = local ? m->inv_freq_local : use_long ? m->inv_freq_long : m->inv_freq;
    const float scale = local ? 1.0f : c->rope_attn_factor > 0 ? c->rope_attn_factor : 1.0f;
    const int pos = c->pos_offset + t;
    for (int i = 0; i < half; i++) {
        const float ang = (float)pos * inv[i];
        const double co = (float)cos((double)ang) * scale, si = (float)sin((double)ang) * scale;
        const double x0 = v[i], x1 = v[i + half];
        v[i] = x0 * co - x1 * si;
        v[i + half] = x1 * co + x0 * si;
    }
}

/* The norm of layer `layer` applied to x (H) whole: its mean and 1/scale, frozen for the parts. */
static void norm_stats(const Norm *nm, const float *x, int H, double *mu, double *inv) {
    *mu = 0, *inv = 1;
    if (!nm->g) return;
    double m = 0, v = 0;
    if (!nm->rms) {
        for (int d = 0; d < H; d++) m += x[d];
        m /= H;
    }
    for (int d = 0; d < H; d++) v += ((double)x[d] - m) * ((double)x[d] - m);
    *mu = m, *inv = 1.0 / sqrt(v / H + nm->eps);
}

/* A post-norm model's norm (LayerNorm) frozen at the scale it measured on its whole input `in` (H): each of
 * the np parts (each H, at parts) centred, divided by that scale and multiplied by gamma; beta added to the
 * part `bias`. */
static void post_norm_parts(double *parts, int np, int H, const Norm *nm, const double *in, int bias) {
    if (!nm->g) return;
    double mu = 0, var = 0;
    if (!nm->rms) {
        for (int d = 0; d < H; d++) mu += in[d];
        mu /= H;
    }
    for (int d = 0; d < H; d++) var += (in[d] - mu) * (in[d] - mu);
    const double inv = 1.0 / sqrt(var / H + nm->eps);
    for (int p = 0; p < np; p++) {
        double *pc = parts + (size_t)p * H, mc = 0;
        if (!nm->rms) {
            for (int d = 0; d < H; d++) mc += pc[d];
            mc /= H;
        }
        for (int d = 0; d < H; d++) pc[d] = (pc[d] - mc) * inv * nm->g[d];
    }
    if (nm->b)
        for (int d = 0; d < H; d++) parts[(size_t)bias * H + d] += nm->b[d];
}

int explain_head(const Model *m, const Capture *cap, int layer, int head, int query, int key, ExplainResult *r,
                 AvErr *e) {
    const ModelConfig *c = &m->cfg;
    memset(r, 0, sizeof *r);
    if (c->enc_dec) return av_err_usage(e, "%s: --explain of an encoder-decoder's stacks is not implemented", m->path);
    if (!cap->resid || !cap->z || !cap->mlp_out) return av_err(e, "--explain needs the residual stream's parts captured");
    if (layer < 0 || layer >= c->num_layers || head < 0 || head >= c->num_heads)
        return av_err_usage(e, "--explain %d.%d: the model has %d layers of %d heads", layer, head, c->num_layers,
                            c->num_heads);
    if (!cap->attn || !cap_has(cap, layer, head))
        return av_err_usage(e, "--explain %d.%d: that head is not among --layers/--heads", layer, head);
    const int n = cap->n_tokens, H = c->hidden_size, NH = c->num_heads, dh = c->head_dim, QW = NH * dh;
    const int group = NH / (c->num_kv_heads ? c->num_kv_heads : NH), kv = head / group, NKV = NH / group;
    const int NP = 1 + layer * (NH + 1) + 2; /* embeddings, each earlier head and MLP, biases, rounding */
    if (dh > 1024) return av_err(e, "head_dim %d is above --explain's 1024", dh);
    if (pick_pairs(cap, layer, head, query, key, r, e)) return -1;
    r->layer = layer, r->head = head, r->kv_head = kv, r->n_parts = NP, r->qk_check = -1;
    r->scale = c->attn_scale != 0.0f ? c->attn_scale : 1.0f / sqrtf((float)dh);
    if (c->inverse_layer_scale) r->scale /= (float)(layer + 1);
    r->kind = malloc((size_t)NP * sizeof *r->kind);
    r->part_layer = malloc((size_t)NP * sizeof *r->part_layer);
    r->part_head = malloc((size_t)NP * sizeof *r->part_head);
    /* the tokens the pairs read */
    int tok[2 * EXPLAIN_MAX_PAIRS], nt = 0;
    for (int p = 0; p < r->n_pairs; p++)
        for (int s = 0; s < 2; s++) {
            const int t = s ? r->pairs[p].key : r->pairs[p].query;
            int seen = 0;
            for (int k = 0; k < nt; k++) seen |= tok[k] == t;
            if (!seen) tok[nt++] = t;
        }
    const LayerWeights *LW = &m->w.layers[layer];
    const int full_norm = c->qk_norm && c->qk_norm_full;
    Proj pj = {m, layer, head, kv, dh, H, n, NULL, NULL, NULL, NULL};
    double *parts = malloc((size_t)nt * NP * H * sizeof *parts);         // (nt, NP, H) each token's parts
    double *qp = malloc((size_t)nt * NP * dh * sizeof *qp);              // (nt, NP, dh) query side
    double *kp = malloc((size_t)nt * NP * dh * sizeof *kp);              // (nt, NP, dh) key side
    double *v = malloc((size_t)H * sizeof *v), *qa = malloc((size_t)(QW > H ? QW : H) * sizeof *qa);
    double *ka = malloc((size_t)(QW > H ? QW : H) * sizeof *ka);
    double *qfull = malloc((size_t)nt * dh * sizeof *qfull), *kfull = malloc((size_t)nt * dh * sizeof *kfull);
    float *a = malloc((size_t)H * sizeof *a), *zz = malloc((size_t)QW * sizeof *zz), *wo = NULL;
    float *xn = malloc((size_t)H * sizeof *xn);
    int rc = -1;
    if (!r->kind || !r->part_layer || !r->part_head || !parts || !qp || !kp || !v || !qa || !ka || !qfull || !kfull || !a ||
        !zz || !xn) {
        av_err(e, "out of memory for --explain");
        goto done;
    }
    if (full_norm) {
        if (!(pj.wq_all = lens_widen(&LW->q, e)) || !(pj.wk_all = lens_widen(&LW->k, e))) goto done;
        pj.wq = pj.wq_all + (size_t)head * dh * H, pj.wk = pj.wk_all + (size_t)kv * dh * H;
    } else {
        pj.wq = malloc((size_t)dh * H * sizeof *pj.wq), pj.wk = malloc((size_t)dh * H * sizeof *pj.wk);
        if (!pj.wq || !pj.wk) {
            av_err(e, "out of memory for --explain");
            goto done;
        }
        for (int d = 0; d < dh; d++)
            if (model_linear_row(&LW->q, head * dh + d, pj.wq + (size_t)d * H, e) ||
                model_linear_row(&LW->k, kv * dh + d, pj.wk + (size_t)d * H, e))
                goto done;
    }
    /* the parts' names */
    r->kind[0] = EXPLAIN_EMBED, r->part_layer[0] = r->part_head[0] = -1;
    for (int l = 0; l < layer; l++) {
        for (int h = 0; h < NH; h++) {
            const int at = 1 + l * (NH + 1) + h;
            r->kind[at] = EXPLAIN_HEAD, r->part_layer[at] = l, r->part_head[at] = h;
        }
        const int at = 1 + l * (NH + 1) + NH;
        r->kind[at] = EXPLAIN_MLP, r->part_layer[at] = l, r->part_head[at] = -1;
    }
    r->kind[NP - 2] = EXPLAIN_BIAS, r->part_layer[NP - 2] = r->part_head[NP - 2] = -1;
    r->kind[NP - 1] = EXPLAIN_ROUNDING, r->part_layer[NP - 1] = r->part_head[NP - 1] = -1;
    /* each token's parts in the stream entering the layer */
    memset(parts, 0, (size_t)nt * NP * H * sizeof *parts);
    for (int k = 0; k < nt; k++)
        for (int d = 0; d < H; d++) parts[((size_t)k * NP) * H + d] = cap_resid(cap, 0)[(size_t)tok[k] * H + d];
    for (int l = 0; l < layer; l++) {
        const LayerWeights *lw = &m->w.layers[l];
        free(wo);
        if (!(wo = lens_widen(&lw->o, e))) goto done; // (H, QW)
        for (int k = 0; k < nt; k++) {
            double *pk = parts + (size_t)k * NP * H;
            for (int h = 0; h < NH; h++) memcpy(zz + (size_t)h * dh, cap_z(cap, l, h) + (size_t)tok[k] * dh, (size_t)dh * sizeof *zz);
            /* the attention's whole output, for a sandwich norm's frozen scale */
            double ss = 0;
            for (int d = 0; d < H; d++) {
                double s = lw->o.b ? lw->o.b[d] : 0;
                for (int q = 0; q < QW; q++) s += (double)wo[(size_t)d * QW + q] * zz[q];
                a[d] = (float)s, ss += s * s;
            }
            const Norm *pn = &lw->attn_post_norm;
            const double pinv = pn->g ? 1.0 / sqrt(ss / H + pn->eps) : 1.0;
            /* each dimension's frozen scale: a sandwich norm's, a layer scale's (DINOv2) */
#define PART_SCALE(d) ((pn->g ? pinv * pn->g[d] : 1.0) * (lw->ls_attn ? lw->ls_attn[d] : 1.0))
            for (int h = 0; h < NH; h++) {
                double *ph = pk + (size_t)(1 + l * (NH + 1) + h) * H;
                for (int d = 0; d < H; d++) {
                    double s = 0;
                    for (int q = 0; q < dh; q++) s += (double)wo[(size_t)d * QW + h * dh + q] * zz[h * dh + q];
                    ph[d] = s * PART_SCALE(d);
                }
            }
            double *pb = pk + (size_t)(NP - 2) * H, *pm = pk + (size_t)(1 + l * (NH + 1) + NH) * H;
            const float *ml = cap_mlp(cap, l) + (size_t)tok[k] * H;
            if (c->pre_ln) {
                for (int d = 0; d < H; d++) {
                    if (lw->o.b) pb[d] += lw->o.b[d] * PART_SCALE(d);
                    pm[d] = ml[d];
                }
            } else {
                /* post-norm (BERT): h = LN1(x + attention), x' = LN2(h + MLP(h)); each norm frozen at the scale it
                 * measured on its whole input, so every part so far is centred, scaled and multiplied by gamma,
                 * and beta joins the biases */
                const float *xl = cap_resid(cap, l) + (size_t)tok[k] * H;
                for (int d = 0; d < H; d++) {
                    if (lw->o.b) pb[d] += lw->o.b[d];
                    v[d] = (double)xl[d] + a[d]; /* LN1's input */
                }
                post_norm_parts(pk, NP - 1, H, &lw->attn_norm, v, NP - 2);
                for (int d = 0; d < H; d++) {
                    pm[d] = ml[d];
                    double h = 0;
                    for (int q = 0; q < NP - 1; q++) h += pk[(size_t)q * H + d];
                    v[d] = h; /* LN2's input: h (the parts so far) + the MLP's output */
                }
                post_norm_parts(pk, NP - 1, H, &lw->mlp_norm, v, NP - 2);
            }
#undef PART_SCALE
        }
    }
    /* what the parts leave of x as the pass holds it: its float32 rounding, a part of its own */
    for (int k = 0; k < nt; k++) {
        const float *x = cap_resid(cap, layer) + (size_t)tok[k] * H;
        double *rd = parts + ((size_t)k * NP + NP - 1) * H, worst = 0, size = 0;
        for (int d = 0; d < H; d++) {
            double s = 0;
            for (int p = 0; p < NP - 1; p++) s += parts[((size_t)k * NP + p) * H + d];
            rd[d] = x[d] - s;
            worst = fmax(worst, fabs(rd[d])), size = fmax(size, fabs((double)x[d]));
        }
        r->rest = fmax(r->rest, size > 0 ? worst / size : worst);
    }
    /* each part through the frozen norm (a pre-norm model's; a post-norm model's stream enters as it is) and
     * the projections, token by token */
    const Norm none = {0};
    const Norm *nm = c->pre_ln ? &LW->attn_norm : &none;
    for (int k = 0; k < nt; k++) {
        const int t = tok[k];
        const float *x = cap_resid(cap, layer) + (size_t)t * H;
        double mu, inv;
        norm_stats(nm, x, H, &mu, &inv);
        for (int side = 0; side < 2; side++) {
            double *out = (side ? kp : qp) + (size_t)k * NP * dh, *full = (side ? kfull : qfull) + (size_t)k * dh;
            const float *W = side ? pj.wk : pj.wq;
            const Linear *lin = side ? &LW->k : &LW->q;
            const int row0 = (side ? kv : head) * dh;
            for (int p = 0; p < NP; p++) {
                const double *pc = parts + ((size_t)k * NP + p) * H;
                double mc = 0;
                if (nm->g && !nm->rms) {
                    for (int d = 0; d < H; d++) mc += pc[d];
                    mc /= H;
                }
                for (int d = 0; d < H; d++) v[d] = nm->g ? (pc[d] - mc) * inv * nm->g[d] : pc[d];
                if (p == NP - 2 && nm->b)
                    for (int d = 0; d < H; d++) v[d] += nm->b[d];
                matvec(W, v, dh, H, out + (size_t)p * dh);
                if (p == NP - 2 && lin->b)
                    for (int d = 0; d < dh; d++) out[(size_t)p * dh + d] += lin->b[row0 + d];
                if (c->qk_rows_interleaved) unpermute(out + (size_t)p * dh, dh);
            }
            /* the same from x whole, as the pass takes it (its norm, projection, q/k norm, rotation) */
            memcpy(xn, x, (size_t)H * sizeof *xn);
            if (nm->g) kern_norm_naive(xn, nm, 1, H);
            for (int d = 0; d < H; d++) v[d] = xn[d];
            const int rows = full_norm ? (side ? NKV : NH) * dh : dh;
            double *all = side ? ka : qa;
            matvec(full_norm ? (side ? pj.wk_all : pj.wq_all) : W, v, rows, H, all);
            const int off = full_norm ? row0 : 0;
            for (int d = 0; d < rows; d++) all[d] += lin->b ? lin->b[(full_norm ? 0 : row0) + d] : 0;
            for (int d = 0; d < dh; d++) full[d] = all[off + d];
            if (c->qk_rows_interleaved) unpermute(full, dh);
            /* the q/k norm, frozen at the scale the whole vector has */
            const Norm *qn = side ? &LW->k_norm : &LW->q_norm;
            if (c->qk_norm && qn->g) {
                double ssq = 0;
                const int span = full_norm ? rows : dh;
                const double *src = full_norm ? all : full;
                for (int d = 0; d < span; d++) ssq += src[d] * src[d];
                const double qinv = 1.0 / sqrt(ssq / span + qn->eps);
                for (int d = 0; d < dh; d++) {
                    const double g = qn->g[full_norm ? off + d : d];
                    full[d] *= qinv * g;
                    for (int p = 0; p < NP; p++) out[(size_t)p * dh + d] *= qinv * g;
                }
            }
            rotate(&pj, t, full);
            for (int p = 0; p < NP; p++) rotate(&pj, t, out + (size_t)p * dh);
        }
    }
    /* against the capture's own q and k, when it kept them */
    if (cap->q && cap_has(cap, layer, head)) {
        double worst = 0, size = 0;
        for (int k = 0; k < nt; k++)
            for (int d = 0; d < dh; d++) {
                const double cq = cap_q(cap, layer, head)[(size_t)tok[k] * dh + d], ck = cap_k(cap, layer, head)[(size_t)tok[k] * dh + d];
                worst = fmax(worst, fmax(fabs(cq - qfull[(size_t)k * dh + d]), fabs(ck - kfull[(size_t)k * dh + d])));
                size = fmax(size, fmax(fabs(cq), fabs(ck)));
            }
        r->qk_check = size > 0 ? worst / size : worst;
    }
    /* each pair's matrix */
    for (int p = 0; p < r->n_pairs; p++) {
        ExplainPair *x = &r->pairs[p];
        int ki = 0, kj = 0;
        for (int k = 0; k < nt; k++) {
            if (tok[k] == x->query) ki = k;
            if (tok[k] == x->key) kj = k;
        }
        if (!(x->m = malloc((size_t)NP * NP * sizeof *x->m))) {
            av_err(e, "out of memory for --explain");
            goto done;
        }
        double s = 0, sum = 0;
        for (int d = 0; d < dh; d++) s += qfull[(size_t)ki * dh + d] * kfull[(size_t)kj * dh + d];
        x->score = s * r->scale;
        for (int a1 = 0; a1 < NP; a1++)
            for (int b1 = 0; b1 < NP; b1++) {
                const double *qv = qp + ((size_t)ki * NP + a1) * dh, *kv_ = kp + ((size_t)kj * NP + b1) * dh;
                double t = 0;
                for (int d = 0; d < dh; d++) t += qv[d] * kv_[d];
                t *= r->scale;
                x->m[(size_t)a1 * NP + b1] = (float)t;
                sum += t;
            }
        x->parts_sum = sum;
    }
    rc = 0;
done:
    if (rc) explain_free(r);
    free(parts), free(qp), free(kp), free(v), free(qa), free(ka), free(qfull), free(kfull), free(a), free(zz), free(wo);
    free(xn);
    if (pj.wq_all) free(pj.wq_all), free(pj.wk_all);
    else free(pj.wq), free(pj.wk);
    return rc;
}
