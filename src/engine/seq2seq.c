/* seq2seq.c — the encoder-decoder pass (seq2seq.h): the encoder over the
 * source, then the decoder over its tokens with cross attention to the
 * encoder's output, every attention matrix kept. Plain steps over token-major
 * buffers: the products go through kern_linear_rows (the forward pass's
 * kernel, any weight type), norms and attention are written from their
 * definitions in double accumulators — encoder-decoder inputs are short and
 * this path is about the matrices, not speed. One thread. */
#include "seq2seq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "predict.h"

/* What every step reads: the model and one scratch for widening weights. */
typedef struct {
    const Model *m;
    int H, NH, dh, A; /* hidden, heads, head_dim, heads * head_dim */
    float *widen;     /* kern_widen_floats(max_in) */
} Ctx;

/* y (n, out) = act(x (n, in) W^T + b) for a token-major x (act < 0: none). */
static int linear(Ctx *c, const Linear *lin, const float *x, int n, float *y, int act, AvErr *e) {
    float *xT = malloc((size_t)lin->in * n * sizeof *xT), *yT = malloc((size_t)lin->out * n * sizeof *yT);
    int rc = 0;
    if (!xT || !yT) {
        rc = av_err(e, "out of memory (%s, %d tokens)", lin->name, n);
    } else {
        kern_transpose(xT, x, n, lin->in);
        if (kern_linear_rows(yT, xT, lin, n, 0, lin->out, act, c->widen))
            rc = av_err(e, "%s: %s could not be widened (corrupt data?)", c->m->path, lin->name);
        else
            kern_transpose(y, yT, lin->out, n);
    }
    free(xT);
    free(yT);
    return rc;
}

/* T5's bucket of relative position rel = key - query (transformers'
 * _relative_position_bucket, its float32 logarithm included). */
static int rel_bucket(int rel, int bidir, int nb, int maxd) {
    int ret = 0, n;
    if (bidir) {
        nb /= 2;
        if (rel > 0) ret += nb;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    const int exact = nb / 2;
    if (n < exact) return ret + n;
    float v = logf((float)n / (float)exact) / (float)log((double)maxd / exact) * (float)(nb - exact);
    int large = exact + (int)v;
    return ret + (large < nb - 1 ? large : nb - 1);
}

/* Every head's attention of nq queries over nk keys: q (nq, A), k, v (nk, A)
 * token-major; probs (NH, nq, nk) when not NULL; ctx (nq, A). Query i sits at
 * position q0 + i (q0 > 0: one new token against cached keys); causal: it sees
 * keys j <= q0 + i. rel (T5): the stack's (buckets, NH) bias by bucket of
 * j - (q0 + i), bidirectional unless causal. */
static int attend(Ctx *c, const float *q, const float *k, const float *v, int nq, int nk, int q0, int causal,
                  const float *rel, float *probs, float *ctx, AvErr *e) {
    const ModelConfig *cfg = &c->m->cfg;
    const int NH = c->NH, dh = c->dh, A = c->A;
    const double scale = cfg->attn_scale != 0.0f ? cfg->attn_scale : 1.0 / sqrt((double)dh);
    float *p = malloc((size_t)nk * sizeof *p); /* one row's probabilities */
    double *acc = malloc((size_t)dh * sizeof *acc);
    if (!p || !acc) {
        free(p), free(acc);
        return av_err(e, "out of memory for attention (%d x %d tokens)", nq, nk);
    }
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < nq; i++) {
            const float *qi = q + (size_t)i * A + (size_t)h * dh;
            const int at = q0 + i, end = causal ? at + 1 : nk; /* keys this query sees */
            double mx = -INFINITY;
            for (int j = 0; j < end; j++) {
                const float *kj = k + (size_t)j * A + (size_t)h * dh;
                double s = 0;
                for (int d = 0; d < dh; d++) s += (double)qi[d] * kj[d];
                s *= scale;
                if (rel) s += rel[(size_t)rel_bucket(j - at, !causal, cfg->rel_buckets, cfg->rel_max_distance) * NH + h];
                p[j] = (float)s;
                mx = s > mx ? s : mx;
            }
            double sum = 0;
            for (int j = 0; j < end; j++) sum += exp((double)p[j] - mx);
            for (int j = 0; j < nk; j++) p[j] = j < end ? (float)(exp((double)p[j] - mx) / sum) : 0.0f;
            if (probs) memcpy(probs + ((size_t)h * nq + i) * nk, p, (size_t)nk * sizeof *p);
            for (int d = 0; d < dh; d++) acc[d] = 0;
            for (int j = 0; j < end; j++) {
                const float *vj = v + (size_t)j * A + (size_t)h * dh;
                for (int d = 0; d < dh; d++) acc[d] += (double)p[j] * vj[d];
            }
            float *ci = ctx + (size_t)i * A + (size_t)h * dh;
            for (int d = 0; d < dh; d++) ci[d] = (float)acc[d];
        }
    free(p), free(acc);
    return 0;
}

/* x (n, H) += y (n, H); then post-norm: x = norm(x). */
static void residual(float *x, const float *y, int n, int H, const Norm *post) {
    for (size_t i = 0; i < (size_t)n * H; i++) x[i] += y[i];
    if (post) kern_norm_naive(x, post, n, H);
}

/* Scratch for one stack's pass over n tokens (against nk encoder tokens). */
typedef struct {
    float *h, *q, *k, *v, *ctx, *y, *ff, *gate;
} Bufs;

static void bufs_free(Bufs *b) {
    free(b->h), free(b->q), free(b->k), free(b->v), free(b->ctx), free(b->y), free(b->ff), free(b->gate);
    memset(b, 0, sizeof *b);
}

static int bufs_alloc(Bufs *b, const Ctx *c, int n, int nk, int ff, AvErr *e) {
    const size_t rows = (size_t)(n > nk ? n : nk);
    memset(b, 0, sizeof *b);
    b->h = malloc((size_t)n * c->H * sizeof *b->h);
    b->q = malloc((size_t)n * c->A * sizeof *b->q);
    b->k = malloc(rows * c->A * sizeof *b->k);
    b->v = malloc(rows * c->A * sizeof *b->v);
    b->ctx = malloc((size_t)n * c->A * sizeof *b->ctx);
    b->y = malloc((size_t)n * c->H * sizeof *b->y);
    b->ff = malloc((size_t)n * ff * sizeof *b->ff);
    b->gate = malloc((size_t)n * ff * sizeof *b->gate);
    if (!b->h || !b->q || !b->k || !b->v || !b->ctx || !b->y || !b->ff || !b->gate) {
        bufs_free(b);
        return av_err(e, "out of memory for %d tokens", n);
    }
    return 0;
}

/* x (n, H) = the stack's embeddings of ids at positions p0, p0 + 1, ...: token (times emb_scale) plus
 * position, then emb_norm. */
static int embed(Ctx *c, const S2sStack *s, const int *ids, int n, int p0, float *x, AvErr *e) {
    const ModelConfig *cfg = &c->m->cfg;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= cfg->vocab_size)
            return av_err(e, "token id %d at position %d is outside the vocabulary (%d)", ids[i], i, cfg->vocab_size);
        float *r = x + (size_t)i * c->H;
        if (model_linear_row(&s->tok_emb, ids[i], r, e)) return -1;
        if (cfg->emb_scale != 0.0f)
            for (int j = 0; j < c->H; j++) r[j] *= cfg->emb_scale;
        if (s->pos_emb) {
            const int row = p0 + i + cfg->pos_offset;
            if (row >= s->pos_rows)
                return av_err(e, "%d tokens exceed the model's %d positions", p0 + n, cfg_max_tokens(cfg));
            const float *pe = s->pos_emb + (size_t)row * c->H;
            for (int j = 0; j < c->H; j++) r[j] += pe[j];
        }
    }
    if (s->emb_norm.g) kern_norm_naive(x, &s->emb_norm, n, c->H);
    return 0;
}

/* The MLP of layer L on b->h (n tokens) into b->y. */
static int mlp(Ctx *c, const S2sLayer *L, Bufs *b, int n, AvErr *e) {
    const ModelConfig *cfg = &c->m->cfg;
    if (L->gate.w) {
        if (linear(c, &L->gate, b->h, n, b->gate, -1, e) || linear(c, &L->up, b->h, n, b->ff, -1, e)) return -1;
        const size_t total = (size_t)n * L->up.out;
        kern_activate(b->gate, total, cfg->hidden_act);
        for (size_t i = 0; i < total; i++) b->ff[i] *= b->gate[i];
    } else if (linear(c, &L->up, b->h, n, b->ff, (int)cfg->hidden_act, e)) {
        return -1;
    }
    return linear(c, &L->down, b->ff, n, b->y, -1, e);
}

/* b->h = norm(x) before a pre-norm sublayer, x itself after a post-norm one's residual. */
static void sub_input(const ModelConfig *cfg, Bufs *b, const float *x, int n, int H, const Norm *nm) {
    memcpy(b->h, x, (size_t)n * H * sizeof *x);
    if (cfg->pre_ln) kern_norm_naive(b->h, nm, n, H);
}

/* One stack over x (n, H), in place. enc (nk, H): the encoder's output for a
 * decoder, NULL for the encoder. self (L, NH, n, n) and cross (L, NH, n, nk):
 * where the matrices go, or NULL. */
static int run_stack(Ctx *c, const S2sStack *s, float *x, int n, const float *enc, int nk, float *self, float *cross,
                     AvErr *e) {
    const ModelConfig *cfg = &c->m->cfg;
    const int H = c->H, decoder = enc != NULL;
    Bufs b;
    if (bufs_alloc(&b, c, n, nk, decoder ? cfg->dec_intermediate : cfg->intermediate_size, e)) return -1;
    int rc = 0;
    const size_t blk = (size_t)c->NH * n * n, cblk = (size_t)c->NH * n * nk;
    for (int l = 0; l < s->n_layers && rc == 0; l++) {
        const S2sLayer *L = &s->layers[l];
        const Norm *post = cfg->pre_ln ? NULL : &L->attn_norm;
        sub_input(cfg, &b, x, n, H, &L->attn_norm);
        rc = linear(c, &L->q, b.h, n, b.q, -1, e) || linear(c, &L->k, b.h, n, b.k, -1, e) ||
             linear(c, &L->v, b.h, n, b.v, -1, e) ||
             attend(c, b.q, b.k, b.v, n, n, 0, decoder, s->rel_bias, self ? self + l * blk : NULL, b.ctx, e) ||
             linear(c, &L->o, b.ctx, n, b.y, -1, e);
        if (rc) break;
        residual(x, b.y, n, H, post);
        if (decoder) {
            sub_input(cfg, &b, x, n, H, &L->cross_norm);
            rc = linear(c, &L->cq, b.h, n, b.q, -1, e) || linear(c, &L->ck, enc, nk, b.k, -1, e) ||
                 linear(c, &L->cv, enc, nk, b.v, -1, e) ||
                 attend(c, b.q, b.k, b.v, n, nk, 0, 0, NULL, cross ? cross + l * cblk : NULL, b.ctx, e) ||
                 linear(c, &L->co, b.ctx, n, b.y, -1, e);
            if (rc) break;
            residual(x, b.y, n, H, cfg->pre_ln ? NULL : &L->cross_norm);
        }
        sub_input(cfg, &b, x, n, H, &L->mlp_norm);
        if ((rc = mlp(c, L, &b, n, e))) break;
        residual(x, b.y, n, H, cfg->pre_ln ? NULL : &L->mlp_norm);
    }
    if (rc == 0 && s->final_norm.g) kern_norm_naive(x, &s->final_norm, n, H);
    bufs_free(&b);
    return rc ? -1 : 0;
}

static int ctx_init(Ctx *c, const Model *m, AvErr *e) {
    const ModelConfig *cfg = &m->cfg;
    if (!m->s2s || !cfg->enc_dec) return av_err(e, "%s: not an encoder-decoder model", m->path);
    c->m = m;
    c->H = cfg->hidden_size, c->NH = cfg->num_heads, c->dh = cfg->head_dim, c->A = cfg->num_heads * cfg->head_dim;
    c->widen = malloc(kern_widen_floats(m->max_in) * sizeof *c->widen);
    return c->widen ? 0 : av_err(e, "out of memory");
}

/* The encoder's output (n, H) for src, its attention into enc_attn (or NULL). */
static float *encode(Ctx *c, const int *src, int n, float *enc_attn, AvErr *e) {
    float *x = malloc((size_t)n * c->H * sizeof *x);
    if (!x) {
        av_err(e, "out of memory for %d tokens", n);
        return NULL;
    }
    if (embed(c, &c->m->s2s->enc, src, n, 0, x, e) || run_stack(c, &c->m->s2s->enc, x, n, NULL, 0, enc_attn, NULL, e)) {
        free(x);
        return NULL;
    }
    return x;
}

/* The scores over the vocabulary (lm_head.out of them) after the decoder's row x (H): the scale, the lm head,
 * final_logits_bias. */
static int row_logits(Ctx *c, const float *x, float *logits, AvErr *e) {
    const Model *m = c->m;
    const S2sWeights *w = m->s2s;
    float *h = malloc((size_t)c->H * sizeof *h);
    if (!h) return av_err(e, "out of memory");
    for (int j = 0; j < c->H; j++) h[j] = m->cfg.logits_scale != 0.0f ? x[j] * m->cfg.logits_scale : x[j];
    int rc = linear(c, &w->lm_head, h, 1, logits, -1, e);
    free(h);
    if (rc == 0 && w->logits_bias)
        for (int v = 0; v < w->lm_head.out; v++) logits[v] += w->logits_bias[v];
    return rc;
}

static int need_head(const Model *m, AvErr *e) {
    if (m->s2s->lm_head.w) return 0;
    return av_err(e, "%s: the checkpoint has no lm_head and does not tie it to the embeddings", m->path);
}

/* The decoder over dec (n tokens) against enc (nk, H); its matrices into self and cross, and the top-k after
 * every row into pred (when not NULL). */
static int decode(Ctx *c, const float *enc, int nk, const int *dec, int n, float *self, float *cross,
                  CapPredictions *pred, AvErr *e) {
    const S2sStack *s = &c->m->s2s->dec;
    float *x = malloc((size_t)n * c->H * sizeof *x);
    if (!x) return av_err(e, "out of memory for %d tokens", n);
    int rc = embed(c, s, dec, n, 0, x, e) || run_stack(c, s, x, n, enc, nk, self, cross, e) ? -1 : 0;
    if (rc == 0 && pred) {
        /* a row at a time: a 250k-word vocabulary times every decoder token would not fit */
        float *logits = malloc((size_t)c->m->s2s->lm_head.out * sizeof *logits);
        if (!logits) rc = av_err(e, "out of memory");
        for (int i = 0; i < n && rc == 0; i++) {
            if ((rc = row_logits(c, x + (size_t)i * c->H, logits, e))) break;
            pred->position[i] = i;
            if (pred_topk(logits, 1, c->m->s2s->lm_head.out, pred->k, pred->ids + (size_t)i * pred->k,
                          pred->probs + (size_t)i * pred->k))
                rc = av_err(e, "%s: the scores after decoder position %d are not finite (NaN/Inf in the weights?)",
                            c->m->path, i);
        }
        if (rc == 0) pred->n = n;
        free(logits);
    }
    free(x);
    return rc;
}

/* NaN/Inf weights would otherwise reach the writers as invalid JSON. */
static int all_finite(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return 0;
    return 1;
}

int s2s_forward(const Model *m, const int *src, int n_enc, const int *dec, int n_dec, S2sCapture *cap,
                CapPredictions *pred, AvErr *e) {
    Ctx c;
    if (n_enc < 1 || n_dec < 1) return av_err(e, "an encoder-decoder pass needs at least one source and one decoder token");
    if (ctx_init(&c, m, e)) return -1;
    if (pred && (need_head(m, e) || pred->k < 1 || pred->n < n_dec)) {
        free(c.widen);
        return pred->k < 1 || pred->n < n_dec ? av_err(e, "the predictions hold %d rows, not %d", pred->n, n_dec) : -1;
    }
    if (cap && (cap->n_enc != n_enc || cap->n_dec != n_dec)) {
        free(c.widen);
        return av_err(e, "the capture holds %d and %d tokens, not %d and %d", cap->n_enc, cap->n_dec, n_enc, n_dec);
    }
    float *enc = encode(&c, src, n_enc, cap ? cap->enc_attn : NULL, e);
    int rc = enc ? decode(&c, enc, n_enc, dec, n_dec, cap ? cap->dec_attn : NULL, cap ? cap->cross_attn : NULL, pred, e)
                 : -1;
    if (rc == 0 && cap) {
        const size_t H = (size_t)cap->heads;
        if (!all_finite(cap->enc_attn, (size_t)cap->enc_layers * H * n_enc * n_enc) ||
            !all_finite(cap->dec_attn, (size_t)cap->dec_layers * H * n_dec * n_dec) ||
            !all_finite(cap->cross_attn, (size_t)cap->dec_layers * H * n_dec * n_enc))
            rc = av_err(e, "%s: attention is not finite (NaN/Inf in the weights?)", m->path);
    }
    free(enc);
    free(c.widen);
    return rc;
}

/* The decoder's keys and values so far, per layer, and the cross attention's
 * keys and values of the encoder's output (computed once): one new token a
 * step attends to them. */
typedef struct {
    float *k, *v;   /* (layers, cap, A) self-attention, rows [0, n) filled */
    float *ck, *cv; /* (layers, nk, A) cross attention */
    int cap, n;
} Cache;

static void cache_free(Cache *kc) { free(kc->k), free(kc->v), free(kc->ck), free(kc->cv); }

static int cache_init(Ctx *c, Cache *kc, const float *enc, int nk, int cap, AvErr *e) {
    const S2sStack *s = &c->m->s2s->dec;
    const size_t L = (size_t)s->n_layers, A = (size_t)c->A;
    memset(kc, 0, sizeof *kc);
    kc->cap = cap;
    kc->k = malloc(L * cap * A * sizeof *kc->k), kc->v = malloc(L * cap * A * sizeof *kc->v);
    kc->ck = malloc(L * nk * A * sizeof *kc->ck), kc->cv = malloc(L * nk * A * sizeof *kc->cv);
    if (!kc->k || !kc->v || !kc->ck || !kc->cv) return av_err(e, "out of memory for the decoder's cache (%d tokens)", cap);
    for (size_t l = 0; l < L; l++)
        if (linear(c, &s->layers[l].ck, enc, nk, kc->ck + l * nk * A, -1, e) ||
            linear(c, &s->layers[l].cv, enc, nk, kc->cv + l * nk * A, -1, e))
            return -1;
    return 0;
}

/* The decoder on one token at position kc->n against the cache (which it joins),
 * the scores after it into logits: run_stack's steps for a row, the same
 * products (a token's outputs are the same bits whatever else shares them) and
 * the same per-row attention, so the same numbers as a pass over every token. */
static int decode_step(Ctx *c, Cache *kc, int nk, int token, float *logits, AvErr *e) {
    const ModelConfig *cfg = &c->m->cfg;
    const S2sStack *s = &c->m->s2s->dec;
    const int H = c->H, pos = kc->n;
    const size_t A = (size_t)c->A;
    if (pos >= kc->cap) return av_err(e, "%d tokens do not fit the decoder's cache (%d)", pos + 1, kc->cap);
    Bufs b;
    if (bufs_alloc(&b, c, 1, 1, cfg->dec_intermediate, e)) return -1;
    float *x = malloc((size_t)H * sizeof *x); /* the token's residual stream */
    int rc = x ? embed(c, s, &token, 1, pos, x, e) : av_err(e, "out of memory");
    for (int l = 0; l < s->n_layers && rc == 0; l++) {
        const S2sLayer *L = &s->layers[l];
        float *kl = kc->k + (size_t)l * kc->cap * A, *vl = kc->v + (size_t)l * kc->cap * A;
        sub_input(cfg, &b, x, 1, H, &L->attn_norm);
        rc = linear(c, &L->q, b.h, 1, b.q, -1, e) || linear(c, &L->k, b.h, 1, kl + pos * A, -1, e) ||
             linear(c, &L->v, b.h, 1, vl + pos * A, -1, e) ||
             attend(c, b.q, kl, vl, 1, pos + 1, pos, 1, s->rel_bias, NULL, b.ctx, e) ||
             linear(c, &L->o, b.ctx, 1, b.y, -1, e);
        if (rc) break;
        residual(x, b.y, 1, H, cfg->pre_ln ? NULL : &L->attn_norm);
        sub_input(cfg, &b, x, 1, H, &L->cross_norm);
        rc = linear(c, &L->cq, b.h, 1, b.q, -1, e) ||
             attend(c, b.q, kc->ck + (size_t)l * nk * A, kc->cv + (size_t)l * nk * A, 1, nk, 0, 0, NULL, NULL, b.ctx, e) ||
             linear(c, &L->co, b.ctx, 1, b.y, -1, e);
        if (rc) break;
        residual(x, b.y, 1, H, cfg->pre_ln ? NULL : &L->cross_norm);
        sub_input(cfg, &b, x, 1, H, &L->mlp_norm);
        if ((rc = mlp(c, L, &b, 1, e))) break;
        residual(x, b.y, 1, H, cfg->pre_ln ? NULL : &L->mlp_norm);
    }
    if (rc == 0 && s->final_norm.g) kern_norm_naive(x, &s->final_norm, 1, H);
    if (rc == 0) rc = row_logits(c, x, logits, e);
    if (rc == 0) kc->n++;
    free(x);
    bufs_free(&b);
    return rc ? -1 : 0;
}

static int is_eos(const GenOptions *o, int id) {
    for (int i = 0; i < o->n_eos; i++)
        if (o->eos[i] == id) return 1;
    return 0;
}

/* The top-k of logits into entry at of p, for decoder position pos. */
static int keep_top(const Model *m, const float *logits, CapPredictions *p, int at, int pos, AvErr *e) {
    p->position[at] = pos;
    if (pred_topk(logits, 1, m->s2s->lm_head.out, p->k, p->ids + (size_t)at * p->k, p->probs + (size_t)at * p->k))
        return av_err(e, "%s: the scores after decoder position %d are not finite (NaN/Inf in the weights?)", m->path, pos);
    return 0;
}

int s2s_generate(const Model *m, const int *src, int n_enc, const GenOptions *o, int *out, int *n_out,
                 CapGeneration *g, AvErr *e) {
    Ctx c;
    *n_out = 0;
    memset(g, 0, sizeof *g);
    if (n_enc < 1) return av_err(e, "an encoder-decoder pass needs at least one source token");
    if (o->max_new < 0) return av_err(e, "--generate needs a count >= 0, not %d", o->max_new);
    if (o->k < 1 || (o->all && (o->all->k < 1 || o->all->n < o->max_new + 1)))
        return av_err(e, "generation keeps a top-k of at least 1 for %d positions", o->max_new + 1);
    if (ctx_init(&c, m, e)) return -1;
    if (need_head(m, e)) {
        free(c.widen);
        return -1;
    }
    const int vocab = m->s2s->lm_head.out;
    g->n_prompt = 1, g->temperature = o->temperature, g->top_p = o->top_p, g->seed = o->seed;
    g->stop = CAP_STOP_LENGTH;
    Cache kc = {0};
    PredRng rng;
    pred_rng_seed(&rng, o->seed);
    float *logits = malloc((size_t)vocab * sizeof *logits), *scratch = malloc((size_t)vocab * sizeof *scratch);
    int *iscratch = malloc((size_t)vocab * sizeof *iscratch), rc = 0, n = 1;
    g->chosen_prob = malloc((size_t)(o->max_new > 0 ? o->max_new : 1) * sizeof *g->chosen_prob);
    if (!logits || !scratch || !iscratch || !g->chosen_prob) rc = av_err(e, "out of memory for generation");
    if (rc == 0) rc = pred_alloc(&g->steps, o->max_new, o->k, e);
    g->steps.n = 0;
    if (o->all) o->all->n = 0;
    float *enc = rc == 0 ? encode(&c, src, n_enc, NULL, e) : NULL;
    if (rc == 0) rc = enc ? cache_init(&c, &kc, enc, n_enc, o->max_new + 1, e) : -1;
    out[0] = m->cfg.dec_start_id;
    /* one token a step against the cache; the chosen token is the next step's input. The choice is
     * pred_sample's, as the decoder-only path's (temperature 0: the first largest score, torch.argmax's) */
    while (rc == 0 && n < o->max_new + 1) {
        const int gi = n - 1;
        float prob;
        if ((rc = decode_step(&c, &kc, n_enc, out[n - 1], logits, e))) break;
        if (o->all && (rc = keep_top(m, logits, o->all, o->all->n++, n - 1, e))) break;
        if ((rc = keep_top(m, logits, &g->steps, gi, n - 1, e))) break;
        if (pred_sample(logits, 1, vocab, o->temperature, o->top_p, &rng, scratch, iscratch, &out[n], &prob)) {
            rc = av_err(e, "%s: the scores after decoder position %d are not finite", m->path, n - 1);
            break;
        }
        g->chosen_prob[gi] = prob;
        g->steps.n = g->n_generated = gi + 1;
        n++;
        const int stop = is_eos(o, out[n - 1]) ? CAP_STOP_EOS : o->stop && o->stop(o->stop_ctx, out, 1, n) ? CAP_STOP_STRING : -1;
        if (stop >= 0) {
            g->stop = (CapStop)stop;
            break;
        }
    }
    /* --predict's row after the last token: one more step */
    if (rc == 0 && o->all)
        rc = decode_step(&c, &kc, n_enc, out[n - 1], logits, e) || keep_top(m, logits, o->all, o->all->n++, n - 1, e)
                 ? -1
                 : 0;
    *n_out = n;
    cache_free(&kc);
    free(enc);
    free(c.widen);
    free(logits), free(scratch), free(iscratch);
    if (rc) gen_free(g);
    return rc;
}

double s2s_capture_bytes(const Model *m, int n_enc, int n_dec) {
    const ModelConfig *c = &m->cfg;
    return 4.0 * c->num_heads *
           ((double)c->num_layers * n_enc * n_enc + (double)c->dec_layers * ((double)n_dec * n_dec + (double)n_dec * n_enc));
}

int s2s_capture_alloc(S2sCapture *cap, const Model *m, int n_enc, int n_dec, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    memset(cap, 0, sizeof *cap);
    cap->n_enc = n_enc, cap->n_dec = n_dec;
    cap->enc_layers = c->num_layers, cap->dec_layers = c->dec_layers, cap->heads = c->num_heads;
    const size_t H = (size_t)c->num_heads;
    cap->enc_attn = calloc((size_t)c->num_layers * H * n_enc * n_enc, sizeof *cap->enc_attn);
    cap->dec_attn = calloc((size_t)c->dec_layers * H * n_dec * n_dec, sizeof *cap->dec_attn);
    cap->cross_attn = calloc((size_t)c->dec_layers * H * n_dec * n_enc, sizeof *cap->cross_attn);
    if (!cap->enc_attn || !cap->dec_attn || !cap->cross_attn) {
        s2s_capture_free(cap);
        return av_err(e, "out of memory for the attention of %d and %d tokens", n_enc, n_dec);
    }
    return 0;
}

void s2s_capture_free(S2sCapture *cap) {
    free(cap->enc_attn);
    free(cap->dec_attn);
    free(cap->cross_attn);
    memset(cap, 0, sizeof *cap);
}
