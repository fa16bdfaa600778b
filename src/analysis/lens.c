/* lens.c — the logit lens, direct logit attribution and head ablation over a
 * capture's residual stream, contexts and MLP outputs (lens.h says what each
 * computes and how the final norm is frozen). */
#include "lens.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"

void lens_free(LensResult *r) {
    free(r->final_id);
    free(r->lens_layer);
    free(r->lens_ids);
    free(r->lens_probs);
    free(r->lens_rank);
    free(r->lens_final_prob);
    free(r->attr_pos);
    free(r->attr_tid);
    free(r->attr_heads);
    free(r->attr_mlp);
    free(r->attr_logit);
    free(r->attr_other);
    free(r->abl_effects);
    memset(r, 0, sizeof *r);
}

int lens_rank(const float *logits, size_t stride, int vocab, int id) {
    const float v = logits[(size_t)id * stride];
    int rank = 0;
    for (int j = 0; j < vocab; j++) {
        const float u = logits[(size_t)j * stride];
        rank += u > v || (u == v && j < id);
    }
    return rank;
}

double lens_log_prob(const float *logits, size_t stride, int vocab, int id) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < vocab; j++)
        if (logits[(size_t)j * stride] > mx) mx = logits[(size_t)j * stride];
    for (int j = 0; j < vocab; j++) sum += exp((double)logits[(size_t)j * stride] - mx);
    return (double)logits[(size_t)id * stride] - mx - log(sum);
}

void lens_direction(const Norm *nm, const float *x, const float *w, int dim, double *u) {
    if (!nm->g) {
        for (int j = 0; j < dim; j++) u[j] = w[j];
        return;
    }
    double mu = 0, var = 0;
    if (!nm->rms) {
        for (int j = 0; j < dim; j++) mu += x[j];
        mu /= dim;
    }
    for (int j = 0; j < dim; j++) var += ((double)x[j] - mu) * ((double)x[j] - mu);
    const double inv = 1.0 / sqrt(var / dim + nm->eps);
    double mean_u = 0;
    for (int j = 0; j < dim; j++) mean_u += u[j] = inv * nm->g[j] * w[j];
    mean_u /= dim;
    /* LayerNorm's centering, moved from each component onto the direction:
     * sum_j (c_j - mean c) u_j = sum_j c_j (u_j - mean u) */
    if (!nm->rms)
        for (int j = 0; j < dim; j++) u[j] -= mean_u;
}

static int check_capture(const Model *m, const Capture *cap, AvErr *e) {
    if (!cap->resid || !cap->z || !cap->mlp_out) return av_err(e, "the residual stream was not captured");
    if (!m->cfg.causal || !m->cfg.pre_ln) return av_err(e, "%s: the logit lens needs a causal pre-norm model", m->path);
    if (!model_has_head(m)) return av_err(e, "%s: the checkpoint has no language-model head", m->path);
    return 0;
}

/* Rows of scores over the vocabulary computed at once: the head's weights are
 * widened once per call, so a call takes as many rows (layers x positions) as
 * LENS_FLOATS allows, its scores then turned row-major for the scans. */
#define LENS_FLOATS ((size_t)16 << 20)
#define LENS_MAX_ROWS 512

/* One chunk's rows of scores read by the pool's threads, in two calls: the
 * first turns thread t's share of the rows row-major (from the (vocab, chunk)
 * scores, in 32-column tiles, where a plain loop misses the cache at every
 * read) and scans the final stream's rows (row block -1); the second scans the
 * layers' rows, each ranked against the final prediction at its position. */
typedef struct {
    const float *logitsT; // (vocab, nc)
    float *rowsv;         // (nc, vocab)
    LensResult *r;
    size_t r0;
    int nc, n, vocab, k, final_phase;
    int *bad;             // (nc) per row: 1 when not finite
} LensScan;

static void lens_scan_part(void *arg, int t, int T) {
    LensScan *w = arg;
    const int per = (w->nc + T - 1) / T, c0 = t * per, c1 = c0 + per < w->nc ? c0 + per : w->nc;
    enum { TILE = 32 };
    for (int j0 = 0; w->final_phase && j0 < w->vocab; j0 += TILE) {
        const int j1 = j0 + TILE < w->vocab ? j0 + TILE : w->vocab;
        for (int c = c0; c < c1; c++)
            for (int j = j0; j < j1; j++) w->rowsv[(size_t)c * w->vocab + j] = w->logitsT[(size_t)j * w->nc + c];
    }
    LensResult *r = w->r;
    const int n = w->n, k = w->k, vocab = w->vocab;
    for (int c = c0; c < c1; c++) {
        const size_t row = w->r0 + c;
        const int i = (int)(row / n) - 1, p = (int)(row % n);
        if ((i < 0) != w->final_phase) continue;
        const float *lg = w->rowsv + (size_t)c * vocab;
        if (i < 0) {
            int top;
            float tp;
            if (pred_topk(lg, 1, vocab, 1, &top, &tp)) w->bad[c] = 1;
            else r->final_id[p] = top;
            continue;
        }
        const size_t at = (size_t)i * n + p;
        if (pred_topk(lg, 1, vocab, k, r->lens_ids + at * k, r->lens_probs + at * k)) {
            w->bad[c] = 1;
            continue;
        }
        /* softmax's sum from the top's probability (pred_topk: p_top = 1 / sum exp(s - s_top)):
         * the final prediction's probability without another pass of exp */
        const int f = r->final_id[p], top = r->lens_ids[at * k];
        r->lens_rank[at] = lens_rank(lg, 1, vocab, f);
        r->lens_final_prob[at] = (float)(exp((double)lg[f] - lg[top]) * r->lens_probs[at * k]);
    }
}

int lens_logit_lens(const Model *m, const Capture *cap, const int *layers, int n_layers, int k, int threads,
                    LensResult *r, AvErr *e) {
    if (check_capture(m, cap, e)) return -1;
    const int n = cap->n_tokens, L = m->cfg.num_layers, vocab = m->cfg.vocab_size, H = m->cfg.hidden_size;
    if (k > PRED_MAX_K) k = PRED_MAX_K;
    if (k > vocab) k = vocab;
    r->n_layers = L, r->n_heads = m->cfg.num_heads, r->n = n;
    const int nl = k > 0 ? (layers ? n_layers : L) : 0;
    for (int i = 0; i < nl; i++)
        if ((layers ? layers[i] : i) < 0 || (layers ? layers[i] : i) >= L)
            return av_err(e, "layer %d is not in the model (%d layers)", layers[i], L);
    /* the final stream first (row block -1), for the prediction each layer is ranked against */
    const size_t total = (size_t)(nl + 1) * n;
    size_t chunk = LENS_FLOATS / (size_t)vocab;
    if (chunk < 1) chunk = 1;
    if (chunk > LENS_MAX_ROWS) chunk = LENS_MAX_ROWS;
    if (chunk > total) chunk = total;
    RunState s;
    if (model_runstate_alloc(&s, m, (int)chunk, threads, e)) return -1;
    float *logitsT = malloc((size_t)vocab * chunk * sizeof *logitsT); // (vocab, chunk)
    float *rowsv = malloc((size_t)vocab * chunk * sizeof *rowsv);   // (chunk, vocab)
    float *x = malloc(chunk * (size_t)H * sizeof *x);                  // (chunk, H)
    int *bad = malloc(chunk * sizeof *bad);                            // (chunk)
    free(r->final_id);
    r->final_id = malloc((size_t)n * sizeof *r->final_id);
    if (nl) {
        r->lens_layer = malloc((size_t)nl * sizeof *r->lens_layer);
        r->lens_ids = malloc((size_t)nl * n * k * sizeof *r->lens_ids);
        r->lens_probs = malloc((size_t)nl * n * k * sizeof *r->lens_probs);
        r->lens_rank = malloc((size_t)nl * n * sizeof *r->lens_rank);
        r->lens_final_prob = malloc((size_t)nl * n * sizeof *r->lens_final_prob);
    }
    int rc = 0;
    if (!logitsT || !rowsv || !x || !bad || !r->final_id ||
        (nl && (!r->lens_layer || !r->lens_ids || !r->lens_probs || !r->lens_rank || !r->lens_final_prob))) {
        rc = av_err(e, "out of memory for the logit lens (%d tokens, %d words)", n, vocab);
        goto done;
    }
    r->lens_k = k, r->lens_n = nl;
    for (int i = 0; i < nl; i++) r->lens_layer[i] = layers ? layers[i] : i;
    for (size_t r0 = 0; r0 < total && rc == 0; r0 += chunk) {
        const int nc = (int)(total - r0 < chunk ? total - r0 : chunk);
        for (int c = 0; c < nc; c++) {
            const size_t row = r0 + c;
            const int i = (int)(row / n) - 1, p = (int)(row % n);
            const int l = i < 0 ? L - 1 : r->lens_layer[i];
            memcpy(x + (size_t)c * H, cap_resid(cap, l + 1) + (size_t)p * H, (size_t)H * sizeof *x);
        }
        if ((rc = model_logits_rows(m, &s, x, nc, logitsT, e))) break;
        memset(bad, 0, (size_t)nc * sizeof *bad);
        LensScan w = {.logitsT = logitsT, .rowsv = rowsv, .r = r, .r0 = r0, .nc = nc, .n = n, .vocab = vocab, .k = k,
                      .bad = bad};
        /* the final stream's rows first: a layer's row reads final_id at its position */
        for (w.final_phase = 1; w.final_phase >= 0 && rc == 0; w.final_phase--) {
            pool_run(s.pool, lens_scan_part, &w);
            for (int c = 0; c < nc; c++)
                if (bad[c]) {
                    const size_t row = r0 + c;
                    const int i = (int)(row / n) - 1, p = (int)(row % n);
                    if (i < 0) rc = av_err(e, "%s: the scores at position %d are not finite", m->path, p);
                    else
                        rc = av_err(e, "%s: the scores after layer %d at position %d are not finite", m->path,
                                    r->lens_layer[i], p);
                    break;
                }
        }
    }
done:
    free(logitsT), free(rowsv), free(x), free(bad);
    model_runstate_free(&s);
    return rc;
}

float *lens_widen(const Linear *lin, AvErr *e) {
    float *w = malloc((size_t)lin->out * lin->in * sizeof *w);
    if (!w) {
        av_err(e, "out of memory for %s", lin->name);
        return NULL;
    }
    for (int r = 0; r < lin->out; r++)
        if (model_linear_row(lin, r, w + (size_t)r * lin->in, e)) {
            free(w);
            return NULL;
        }
    return w;
}

int lens_attribution(const Model *m, const Capture *cap, const int *pos, int n_pos, int target, LensResult *r,
                     AvErr *e) {
    if (check_capture(m, cap, e)) return -1;
    const ModelConfig *c = &m->cfg;
    const int L = c->num_layers, NH = c->num_heads, dh = cap->head_dim, H = c->hidden_size, QW = NH * dh;
    const int n = cap->n_tokens, P = n_pos;
    if (target < 0 && !r->final_id) return av_err(e, "attribution: no prediction to attribute");
    if (target >= c->vocab_size) return av_err(e, "token id %d is outside the vocabulary (%d)", target, c->vocab_size);
    r->n_layers = L, r->n_heads = NH, r->n = n;
    r->attr_n = P, r->attr_target = target;
    r->attr_pos = malloc((size_t)P * sizeof *r->attr_pos);
    r->attr_tid = malloc((size_t)P * sizeof *r->attr_tid);
    r->attr_heads = calloc((size_t)P * L * NH, sizeof *r->attr_heads);
    r->attr_mlp = calloc((size_t)P * L, sizeof *r->attr_mlp);
    r->attr_logit = malloc((size_t)P * sizeof *r->attr_logit);
    r->attr_other = malloc((size_t)P * sizeof *r->attr_other);
    double *u = malloc((size_t)H * sizeof *u);
    float *uf = malloc((size_t)P * H * sizeof *uf);      // (P, H) each position's direction
    float *u2 = malloc((size_t)P * H * sizeof *u2);      // (P, H) through a sandwich norm
    float *zz = malloc((size_t)P * QW * sizeof *zz);     // (P, QW) the heads' contexts
    float *vv = malloc((size_t)P * QW * sizeof *vv);     // (P, QW) W_O^T u
    float *aa = malloc((size_t)P * H * sizeof *aa);      // (P, H) attention output (sandwich norms)
    float *wu = malloc((size_t)H * sizeof *wu), *xn = malloc((size_t)H * sizeof *xn);
    float *wo = NULL;
    int rc = -1;
    if (!r->attr_pos || !r->attr_tid || !r->attr_heads || !r->attr_mlp || !r->attr_logit || !r->attr_other || !u || !uf ||
        !u2 || !zz || !vv || !aa || !wu || !xn) {
        av_err(e, "out of memory for attribution (%d positions)", P);
        goto done;
    }
    const Norm *fn = &m->w.final_norm;
    const Linear *U = &m->w.head.out;
    for (int i = 0; i < P; i++) {
        const int p = pos[i];
        if (p < 0 || p >= n) {
            av_err(e, "position %d is not in the input (%d tokens)", p, n);
            goto done;
        }
        const int t = target >= 0 ? target : r->final_id[p];
        r->attr_pos[i] = p, r->attr_tid[i] = t;
        if (model_linear_row(U, t, wu, e)) goto done;
        const float *x = cap_resid(cap, L) + (size_t)p * H;
        lens_direction(fn, x, wu, H, u);
        for (int j = 0; j < H; j++) uf[(size_t)i * H + j] = (float)u[j];
        /* the logit itself, through the norm as the head applies it */
        memcpy(xn, x, (size_t)H * sizeof *xn);
        if (fn->g) kern_norm_naive(xn, fn, 1, H);
        double logit = U->b ? U->b[t] : 0;
        for (int j = 0; j < H; j++) logit += (double)xn[j] * wu[j];
        r->attr_logit[i] = (float)logit;
        double rest = logit;
        for (int l = 0; l < L; l++) {
            const float *mo = cap_mlp(cap, l) + (size_t)p * H;
            double a = 0;
            for (int j = 0; j < H; j++) a += (double)mo[j] * u[j];
            r->attr_mlp[(size_t)i * L + l] = (float)a;
            rest -= a;
        }
        r->attr_other[i] = (float)rest;
    }
    for (int l = 0; l < L; l++) {
        const LayerWeights *lw = &m->w.layers[l];
        free(wo);
        if (!(wo = lens_widen(&lw->o, e))) goto done; // (H, QW)
        for (int i = 0; i < P; i++)
            for (int h = 0; h < NH; h++)
                memcpy(zz + (size_t)i * QW + (size_t)h * dh, cap_z(cap, l, h) + (size_t)pos[i] * dh, (size_t)dh * sizeof *zz);
        const float *dir = uf;
        if (lw->attn_post_norm.g) {
            /* a sandwich norm after attention: its scale on the whole output, frozen */
            const Norm *pn = &lw->attn_post_norm;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, P, H, QW, 1.0f, zz, QW, wo, QW, 0.0f, aa, H);
            for (int i = 0; i < P; i++) {
                const float *ai = aa + (size_t)i * H;
                double ss = 0;
                for (int j = 0; j < H; j++) {
                    const double v = (double)ai[j] + (lw->o.b ? lw->o.b[j] : 0);
                    ss += v * v;
                }
                const double inv = 1.0 / sqrt(ss / H + pn->eps);
                for (int j = 0; j < H; j++) u2[(size_t)i * H + j] = (float)(uf[(size_t)i * H + j] * inv * pn->g[j]);
            }
            dir = u2;
        }
        /* v = W_O^T u per position; head h's share: its slice of v against its context */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, P, QW, H, 1.0f, dir, H, wo, QW, 0.0f, vv, QW);
        for (int i = 0; i < P; i++)
            for (int h = 0; h < NH; h++) {
                double a = 0;
                const float *vh = vv + (size_t)i * QW + (size_t)h * dh, *zh = zz + (size_t)i * QW + (size_t)h * dh;
                for (int d = 0; d < dh; d++) a += (double)vh[d] * zh[d];
                r->attr_heads[((size_t)i * L + l) * NH + h] = (float)a;
                r->attr_other[i] -= (float)a;
            }
    }
    rc = 0;
done:
    free(u), free(uf), free(u2), free(zz), free(vv), free(aa), free(wu), free(xn), free(wo);
    return rc;
}

/* log p(target) after position pos of a pass rerun from layer `from` (s's ablation applied) */
static int rerun_log_prob(const Model *m, RunState *s, const Capture *cap, const int *ids, int pos, int from,
                          int target, float *logits, double *lp, AvErr *e) {
    /* the tokens up to pos are all a causal model's position sees; but LongRoPE (Phi-3) turns by
     * other factors past its original context, chosen by the pass's length: then the whole input */
    const int n = m->inv_freq_long && cap->n_tokens > m->cfg.rope_orig_max_pos ? cap->n_tokens : pos + 1;
    if (model_forward_from(m, s, ids, n, from, cap_resid(cap, from), e)) return -1;
    if (model_logits(m, s, &pos, 1, logits, e)) return -1;
    *lp = lens_log_prob(logits, 1, m->cfg.vocab_size, target);
    if (!isfinite(*lp)) return av_err(e, "%s: the scores at position %d are not finite", m->path, pos);
    return 0;
}

int lens_ablation(const Model *m, RunState *s, const Capture *cap, const int *ids, int pos, int target,
                  const int *pairs, int n_pairs, int mean, LensResult *r, AvErr *e) {
    if (check_capture(m, cap, e)) return -1;
    const ModelConfig *c = &m->cfg;
    const int L = c->num_layers, NH = c->num_heads, dh = cap->head_dim, n = cap->n_tokens;
    if (pos < 0 || pos >= n) return av_err(e, "position %d is not in the input (%d tokens)", pos, n);
    if (target < 0) {
        if (!r->final_id) return av_err(e, "ablation: no prediction to follow");
        target = r->final_id[pos];
    }
    if (target >= c->vocab_size) return av_err(e, "token id %d is outside the vocabulary (%d)", target, c->vocab_size);
    const int count = pairs ? n_pairs : L * NH;
    for (int i = 0; pairs && i < n_pairs; i++)
        if (pairs[2 * i] < 0 || pairs[2 * i] >= L || pairs[2 * i + 1] < 0 || pairs[2 * i + 1] >= NH)
            return av_err(e, "head %d.%d is not in the model (%d layers x %d heads)", pairs[2 * i], pairs[2 * i + 1], L, NH);
    r->n_layers = L, r->n_heads = NH, r->n = n;
    r->abl_on = 1, r->abl_target = target, r->abl_pos = pos, r->abl_mean = mean;
    r->abl_effects = malloc((size_t)L * NH * sizeof *r->abl_effects);
    float *logits = malloc((size_t)c->vocab_size * sizeof *logits), *avg = malloc((size_t)dh * sizeof *avg);
    int rc = -1;
    if (!r->abl_effects || !logits || !avg) {
        av_err(e, "out of memory for ablation");
        goto done;
    }
    for (int i = 0; i < L * NH; i++) r->abl_effects[i] = NAN;
    s->abl_on = 0;
    double base;
    if (rerun_log_prob(m, s, cap, ids, pos, 0, target, logits, &base, e)) goto done;
    r->abl_base = (float)base;
    for (int i = 0; i < count; i++) {
        const int l = pairs ? pairs[2 * i] : i / NH, h = pairs ? pairs[2 * i + 1] : i % NH;
        if (mean) {
            const float *z = cap_z(cap, l, h); // (n, dh): the mean over the whole input
            for (int d = 0; d < dh; d++) {
                double acc = 0;
                for (int t = 0; t < n; t++) acc += z[(size_t)t * dh + d];
                avg[d] = (float)(acc / n);
            }
        }
        s->abl_on = 1, s->abl_layer = l, s->abl_head = h, s->abl_ctx = mean ? avg : NULL;
        double lp;
        int bad = rerun_log_prob(m, s, cap, ids, pos, l, target, logits, &lp, e);
        s->abl_on = 0, s->abl_ctx = NULL;
        if (bad) goto done;
        r->abl_effects[(size_t)l * NH + h] = (float)(lp - base);
    }
    rc = 0;
done:
    s->abl_on = 0, s->abl_ctx = NULL;
    free(logits), free(avg);
    return rc;
}
