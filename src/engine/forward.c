/* forward.c — one forward pass with attention capture, for every family:
 * named steps over model.h's plain structs, in the spirit of llama2.c's
 * forward. Which steps a block takes comes from the config (pre- or
 * post-norm, gated MLP, rotary, q/k norms, sandwich norms), never from the
 * family's name. */
#include "model.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "quant.h"
#include "tiles.h"
#include "util.h"

/* Below these many tokens a step takes microseconds: waking threads costs more. */
#define PARALLEL_HEADS_MIN_TOKENS 48
#define PARALLEL_ROWS_MIN_TOKENS 32

/* ---------------------------------------------------------------- tasks */

/* Up to three products y^T = act(W x^T + b) sharing x^T, each split by output
 * rows (features) over the threads; glu: then y0 = act(y0) * y1 (gate, up). */
typedef struct {
    const float *xT;      // (in, n)
    int n;
    const Linear *lin[3];
    float *yT[3];         // (lin[k]->out, n)
    int count;
    int act;              // -1: none, else an ActKind applied to every product
    int glu;              // 1: yT[0] = glu_act(yT[0]) * yT[1]
    int step;             // 1: one token of a generation step (kern_linear_step)
    ActKind glu_act;
    float *widen;         // (threads, widen_len) per-thread scratch
    size_t widen_len;
    atomic_int failed;
} MatTask;

static void mat_part(void *arg, int t, int T) {
    MatTask *m = arg;
    for (int k = 0; k < m->count; k++) {
        const int out = m->lin[k]->out;
        int chunk = (out + T - 1) / T;
        chunk = (chunk + 15) & ~15; /* whole tiles and cache lines per thread */
        int r0 = t * chunk, r1 = r0 + chunk < out ? r0 + chunk : out;
        if (r0 >= r1) continue;
        float *scratch = m->widen + (size_t)t * m->widen_len;
        if (m->step ? kern_linear_step(m->yT[k], m->xT, m->lin[k], r0, r1, m->act, scratch)
                    : kern_linear_rows(m->yT[k], m->xT, m->lin[k], m->n, r0, r1, m->act, scratch))
            atomic_store(&m->failed, 1);
        if (m->glu && k == 1)
            kern_glu(m->yT[0] + (size_t)r0 * m->n, m->yT[1] + (size_t)r0 * m->n, (size_t)(r1 - r0) * m->n,
                     m->glu_act);
    }
}

static int products(RunState *s, const float *xT, int n, int count, const Linear *const *lin, float *const *yT,
                    int act, int glu, ActKind glu_act, const Model *m, AvErr *e) {
    MatTask task = {.xT = xT, .n = n, .count = count, .act = act, .glu = glu, .glu_act = glu_act, .widen = s->widen,
                    .widen_len = s->widen_len, .step = s->step};
    for (int k = 0; k < count; k++) task.lin[k] = lin[k], task.yT[k] = yT[k];
    atomic_init(&task.failed, 0);
    /* a step's products are OpenBLAS's matrix-vector products (kern_linear_step), each
     * of the pass's threads taking its own rows: one OpenBLAS thread each (pool.h) */
    if (task.step) kern_blas_threads(1);
    pool_run(s->pool, mat_part, &task);
    if (atomic_load(&task.failed)) return av_err(e, "%s: a weight tensor could not be widened (corrupt data?)", m->path);
    return 0;
}

/* The residual step, split by tokens over the threads (kern_residual). */
typedef struct {
    float *x;             // (n, dim) residual stream
    const float *yT;      // (dim, n) or NULL
    float *dst;           // (n, dim) or NULL; may be x
    float *dstT;          // (dim, n) or NULL
    const Norm *nm;       // or NULL
    int n, dim;
} RowTask;

static void row_part(void *arg, int t, int T) {
    const RowTask *r = arg;
    int chunk = (r->n + T - 1) / T;
    chunk = (chunk + 15) / 16 * 16; /* whole cache lines of the transposed rows */
    const int i0 = t * chunk, i1 = i0 + chunk < r->n ? i0 + chunk : r->n;
    if (i0 < i1) kern_residual(r->x, r->yT, r->dst, r->dstT, r->nm, r->n, r->dim, i0, i1);
}

/* x += y (y^T given, or NULL); then norm(x) or x itself to dst and dstT. */
static void residual_norm(RunState *s, float *x, const float *yT, float *dst, float *dstT, const Norm *nm, int n,
                          int dim) {
    RowTask r = {x, yT, dst, dstT, nm && nm->g ? nm : NULL, n, dim};
    pool_run(n >= PARALLEL_ROWS_MIN_TOKENS ? s->pool : NULL, row_part, &r);
}

/* q/k norms and rotary positions on each head's rows of q^T and k^T. Units
 * [0, NH) are query heads, [NH, NH + NKV) key heads. */
typedef struct {
    float *qT, *kT;       // (NH * dh, n), (NKV * dh, n)
    const Norm *q_norm, *k_norm;
    const float *cos_t, *sin_t; // (rot / 2, n) or NULL: no rotary
    int n, dh, n_heads, n_kv;
    int rot;                    // the first rot dims of each head turn (partial rotary)
} QkTask;

static void qk_part(void *arg, int t, int T) {
    const QkTask *w = arg;
    for (int u = t; u < w->n_heads + w->n_kv; u += T) {
        const int is_q = u < w->n_heads;
        float *hT = is_q ? w->qT + (size_t)u * w->dh * w->n : w->kT + (size_t)(u - w->n_heads) * w->dh * w->n;
        const Norm *nm = is_q ? w->q_norm : w->k_norm;
        if (nm->g) kern_rmsnorm_cols(hT, nm->g, w->dh, w->n, nm->eps);
        if (w->cos_t) kern_rope(hT, w->cos_t, w->sin_t, w->rot, w->n);
    }
}

/* Per-head attention of one layer for n new tokens at positions [pos0, pos0 + n),
 * against keys and values of positions [0, pos0 + n); thread t takes heads
 * t, t + T, ... Query head h reads key/value head h / group. */
typedef struct {
    const float *qT;           // (NH * dh, n)
    const float *newkT;        // (NKV * dh, n) this pass's keys, for the captured copies
    const float *kT, *vT;      // (NKV * dh, ldk) every position's; vT NULL with ctxT NULL: probabilities only
    const float *v;            // (NKV, ldk, dh) or NULL: a cache's values, a row per position (vT then NULL)
    float *ctxT;               // (NH * dh, n)
    Capture *cap;              // per-head probabilities and q/k copies, or NULL
    float *scores;             // (threads, kern_attention_rows(), pos0 + n): rows of a head not kept
    float *attn;               // (threads, attn_len): kern_attention's scratch, NULL with ctxT NULL
    size_t attn_len;
    int layer, n, pos0, ldk, n_heads, group, dh;
    AttnRule rule;
    const float *sinks;        // (n_heads) the layer's sink logits, or NULL
    atomic_int nonfinite;      // set by a head whose kept probabilities hold NaN/Inf
} HeadTask;

/* Head h's rule: the layer's, with its sink logit (if the layer has sinks)
 * whose share of rows [row0, ...) goes to cap's sinks (cap NULL or without
 * them: nowhere). */
static AttnRule head_rule(const AttnRule *layer, const float *sinks, int h, Capture *cap, int l, int row0) {
    AttnRule r = *layer;
    if (sinks) {
        r.has_sink = 1, r.sink = sinks[h];
        r.sink_out = cap && cap->sinks ? cap_sinks(cap, l, h) + row0 : NULL;
    }
    return r;
}

/* Whether p[0, n) holds no NaN or Inf: by the exponent bits, or-ed without an
 * early exit so that the loop vectorizes (it reads every captured probability). */
static int all_finite(const float *p, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* Where a head's rows go as they are made when its matrix is not kept: its
 * thumbnail and its telemetry, if the capture has them (rows row0 + i of an
 * n_tokens matrix). */
typedef struct {
    Capture *cap; // NULL: nowhere
    int layer, head, row0, ncols;
    const AttnRule *rule; // what made the rows: the keys each sees
} RowsTo;

static void rows_to_capture(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    const RowsTo *r = ctx;
    if (r->cap->thumb)
        kern_pool_attention(cap_thumb(r->cap, r->layer, r->head), r->cap->thumb_size, probs, ldp, r->row0 + i0, i1 - i0,
                            r->ncols, r->cap->n_tokens);
    if (r->cap->mpool)
        tile_pool_rows(cap_mpool(r->cap, r->layer, r->head), r->cap->mpool_size, r->cap->n_tokens, r->cap->mpool_size, 0,
                       0, probs, ldp, r->row0 + i0, i1 - i0, r->ncols);
    if (r->cap->tel)
        model_telemetry_rows(r->cap, r->layer, r->head, r->row0 + i0, probs, ldp, i1 - i0, r->ncols, r->rule, st);
    if (r->cap->sc_sum)
        model_score_rows(r->cap, r->layer, r->head, r->row0 + i0, probs, ldp, i1 - i0, r->ncols, r->rule, st);
    if (r->cap->rows) {
        /* the rows of the kept window among these */
        const Capture *c = r->cap;
        const int a = r->row0 + i0 > c->rows_from ? r->row0 + i0 : c->rows_from,
                  b = r->row0 + i1 < c->rows_from + c->rows_n ? r->row0 + i1 : c->rows_from + c->rows_n;
        const size_t n = (size_t)c->n_tokens, w = (size_t)r->ncols < n ? (size_t)r->ncols : n;
        for (int i = a; i < b; i++) {
            float *dst = c->rows + (cap_block(c, r->layer, r->head) * (size_t)c->rows_n + (size_t)(i - c->rows_from)) * n;
            memcpy(dst, probs + (size_t)(i - r->row0 - i0) * ldp, w * sizeof *dst);
            memset(dst + w, 0, (n - w) * sizeof *dst);
        }
    }
}

/* One head's attention, kern_attention_kv's arguments (or, with v set,
 * kern_attention_kv_v's: a cache's values v (nk, dh), vT unused), into cap
 * (NULL: the head is not kept): straight into its kept matrix (rows row0 ..
 * row0 + nq of it), else a block of rows at a time through rows
 * (kern_attention_rows() x nk floats), feeding the thumbnail and telemetry as
 * they are made. */
static int head_attention(Capture *cap, int l, int h, int row0, float *ctxT, const float *qT, int nq, const float *kT,
                          const float *vT, const float *v, int ldk, int nk, int dh, const AttnRule *rule,
                          float *scratch, float *rows) {
    if (cap && cap->attn) {
        const int ldp = cap->n_tokens;
        float *probs = cap_attn(cap, l, h) + (size_t)row0 * ldp; // (nq, ldp)
        if (v) kern_attention_kv_v(probs, ldp, ctxT, qT, nq, kT, ldk, v, dh, nk, dh, rule, scratch);
        else kern_attention_kv(probs, ldp, ctxT, qT, nq, kT, vT, ldk, nk, dh, rule, scratch);
        RowsTo to = {cap, l, h, row0, nk, rule};
        rows_to_capture(&to, 0, nq, probs, ldp, NULL);
        /* NaN/Inf would reach the writers as invalid JSON: checked here, while
         * the rows are in this core's cache, rather than in a sweep after the pass */
        for (int i = 0; i < nq; i++)
            if (!all_finite(probs + (size_t)i * ldp, (size_t)nk)) return -1;
        return 0;
    }
    RowsTo to = {cap && (cap->thumb || cap->tel || cap->mpool || cap->sc_sum || cap->rows) ? cap : NULL, l, h, row0, nk, rule};
    /* the softmax's moments spare telemetry and the score sums a sweep of each
     * row (not the sums of value-weighted shares or of a template's weights) */
    const int moments = to.cap && (to.cap->tel || (to.cap->sc_sum && !to.cap->sc.norm && !to.cap->sc.pattern));
    if (v)
        kern_attention_kv_rows_v(rows, nk, ctxT, qT, nq, kT, ldk, v, dh, nk, dh, rule, scratch,
                                 to.cap ? rows_to_capture : NULL, &to, moments);
    else
        kern_attention_kv_rows(rows, nk, ctxT, qT, nq, kT, vT, ldk, nk, dh, rule, scratch,
                               to.cap ? rows_to_capture : NULL, &to, moments);
    return 0;
}

/* Head h's q and k of this pass, qT and kT (dh, n), into the capture's rows
 * [pos0, pos0 + n) (n, dh), if it keeps them: as they are, or rounded to 16
 * bits (the pass goes on with the float32 ones). */
static void keep_qk(Capture *cap, int l, int h, int pos0, const float *qT, const float *kT, int dh, int n) {
    const size_t at = (size_t)pos0 * dh;
    if (cap->q) {
        kern_transpose(cap_q(cap, l, h) + at, qT, dh, n);
        kern_transpose(cap_k(cap, l, h) + at, kT, dh, n);
    } else if (cap->qh) {
        kern_transpose_to_half(cap_qh(cap, l, h) + at, qT, dh, n, cap->qk_prec);
        kern_transpose_to_half(cap_kh(cap, l, h) + at, kT, dh, n, cap->qk_prec);
    }
}

static void head_part(void *arg, int t, int T) {
    HeadTask *w = arg;
    const int n = w->n, dh = w->dh, nk = w->pos0 + n;
    for (int h = t; h < w->n_heads; h += T) {
        const size_t qoff = (size_t)h * dh * n, kvoff = (size_t)(h / w->group) * dh * w->ldk;
        Capture *cap = w->cap && cap_has(w->cap, w->layer, h) ? w->cap : NULL;
        if (cap) keep_qk(cap, w->layer, h, w->pos0, w->qT + qoff, w->newkT + (size_t)(h / w->group) * dh * n, dh, n);
        const AttnRule rule = head_rule(&w->rule, w->sinks, h, cap, w->layer, w->pos0);
        if (head_attention(cap, w->layer, h, w->pos0, w->ctxT ? w->ctxT + qoff : NULL, w->qT + qoff, n, w->kT + kvoff,
                           w->vT ? w->vT + kvoff : NULL, w->v ? w->v + kvoff : NULL, w->ldk, nk, dh, &rule,
                           w->attn ? w->attn + (size_t)t * w->attn_len : NULL,
                           w->scores + (size_t)t * kern_attention_rows() * nk))
            atomic_store(&w->nonfinite, 1);
        if (w->cap && w->cap->z && w->ctxT) /* every head's context, whatever the selection keeps */
            kern_transpose(cap_z(w->cap, w->layer, h) + (size_t)w->pos0 * dh, w->ctxT + qoff, dh, n);
    }
}

/* Several inputs packed into one pass: segment g is tokens [start, start +
 * len) with its own capture; a token attends within its segment only. Thread
 * t takes heads t, t + T, ... and, for each, copies one segment's q, k and v
 * columns together (scratch: 4 * dh * the longest segment floats). */
typedef struct {
    int start, len;
    Capture *cap;
} Seg;

typedef struct {
    const float *qT, *kT, *vT; // (NH * dh, n), (NKV * dh, n) x 2; vT NULL with ctxT NULL: probabilities only
    float *ctxT;               // (NH * dh, n)
    const Seg *segs;
    int n_segs;
    float *scratch;            // (threads, 4 * dh * max_len)
    size_t scratch_len;
    float *scores;             // (threads, scores_len): rows of a head not kept
    size_t scores_len;         // kern_attention_rows() * the run state's max_tokens: each thread's own, whatever
                               // segment it is on (a stride by the segment's length would overlap another thread's)
    float *attn;               // (threads, attn_len): kern_attention's scratch, NULL with ctxT NULL
    size_t attn_len;
    int layer, n, n_heads, group, dh;
    AttnRule rule;
    const float *sinks;        // (n_heads) the layer's sink logits, or NULL
    atomic_int nonfinite;      // as HeadTask's
} PackTask;

/* cols [a, a + len) of src (rows, n) -> dst (rows, len), and back */
static void take_cols(float *dst, const float *src, int rows, int n, int a, int len) {
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * len, src + (size_t)r * n + a, (size_t)len * sizeof *dst);
}
static void put_cols(float *dst, const float *src, int rows, int n, int a, int len) {
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * n + a, src + (size_t)r * len, (size_t)len * sizeof *dst);
}

static void pack_part(void *arg, int t, int T) {
    PackTask *w = arg;
    const int n = w->n, dh = w->dh;
    float *sc = w->scratch + (size_t)t * w->scratch_len;
    for (int h = t; h < w->n_heads; h += T) {
        const size_t qoff = (size_t)h * dh * n, kvoff = (size_t)(h / w->group) * dh * n;
        for (int g = 0; g < w->n_segs; g++) {
            const Seg *sg = &w->segs[g];
            const int a = sg->start, len = sg->len;
            float *q = sc, *k = sc + (size_t)dh * len, *v = k + (size_t)dh * len, *ctx = v + (size_t)dh * len;
            take_cols(q, w->qT + qoff, dh, n, a, len);
            take_cols(k, w->kT + kvoff, dh, n, a, len);
            if (w->vT) take_cols(v, w->vT + kvoff, dh, n, a, len);
            Capture *cap = sg->cap && cap_has(sg->cap, w->layer, h) ? sg->cap : NULL;
            if (cap) keep_qk(cap, w->layer, h, 0, q, k, dh, len);
            const AttnRule rule = head_rule(&w->rule, w->sinks, h, cap, w->layer, 0);
            if (head_attention(cap, w->layer, h, 0, w->ctxT ? ctx : NULL, q, len, k, w->vT ? v : NULL, NULL, len, len, dh,
                               &rule, w->attn ? w->attn + (size_t)t * w->attn_len : NULL,
                               w->scores + (size_t)t * w->scores_len))
                atomic_store(&w->nonfinite, 1);
            if (w->ctxT) put_cols(w->ctxT + qoff, ctx, dh, n, a, len);
        }
    }
}

/* ---------------------------------------------------------------- steps */

/* How layer l turns scores into probabilities: scale, causal mask, sliding window (one way, or
 * both ways for an encoder's local attention), soft-cap. */
static AttnRule layer_rule(const ModelConfig *c, int l) {
    AttnRule rule = {.scale = c->attn_scale != 0.0f ? c->attn_scale : 1.0f / sqrtf((float)c->head_dim),
                     .causal = c->causal, .window = c->layer_sliding[l] ? c->sliding_window : 0,
                     .softcap = c->attn_softcap, .bidir = c->window_bidir};
    if (c->inverse_layer_scale) rule.scale /= (float)(l + 1);
    return rule;
}

/* x (n, H) = token embedding (+ learned position) (+ token type), scaled;
 * rows of embedding_size into s->emb when they are projected (ELECTRA). */
static int embed(const Model *m, RunState *s, const int *ids, const int *type_ids, int n, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const Weights *w = &m->w;
    const int H = m->w.emb_proj.w ? c->embedding_size : c->hidden_size;
    float *dst = m->w.emb_proj.w ? s->emb : s->x;
    for (int i = 0; i < n; i++) {
        float *r = dst + (size_t)i * H; // (H)
        const Linear *te = &w->tok_emb;
        if (te->type == KERN_F32) {
            memcpy(r, (const float *)te->w + (size_t)ids[i] * te->ld, (size_t)H * sizeof *r);
        } else if (quant_rows(te->type, te->w, (size_t)te->out * te->row_bytes, (size_t)te->out, (size_t)H,
                              (size_t)ids[i], (size_t)ids[i] + 1, r, te->name, e) != 0) {
            return -1;
        }
        if (w->pos_emb) {
            const float *pe = w->pos_emb + (size_t)s->pos[i] * H;
            for (int j = 0; j < H; j++) r[j] += pe[j];
        }
        if (w->type_emb) {
            const float *ty = w->type_emb + (size_t)type_ids[i] * H;
            for (int j = 0; j < H; j++) r[j] += ty[j];
        }
        if (c->emb_scale != 0.0f)
            for (int j = 0; j < H; j++) r[j] *= c->emb_scale;
    }
    return 0;
}

/* The position of every token of the pass: from pos0 (the cached tokens
 * before them) and, packed, from 0 again in each segment. RoBERTa counts
 * positions over non-pad tokens and puts a pad at padding_idx (Hugging Face's
 * create_position_ids_from_input_ids). */
static void positions(const Model *m, RunState *s, const int *ids, const Seg *segs, int n_segs, int pos0) {
    const ModelConfig *c = &m->cfg;
    for (int g = 0; g < n_segs; g++) {
        int p = c->pos_offset + pos0;
        for (int i = segs[g].start; i < segs[g].start + segs[g].len; i++)
            s->pos[i] = c->pos_offset > 0 && ids[i] == c->pad_token_id ? c->pad_token_id : p++;
    }
}

/* cos/sin (rotary_dim/2, n) of each token's position times each rotary
 * frequency, in float32 as transformers computes them. (The dynamic kind
 * changes the frequencies only past max_position_embeddings, which inputs
 * never reach: see check_inputs.) LongRoPE takes its long factors for a pass
 * longer than original_max_position_embeddings (transformers: max position + 1
 * of the forward call, so each packed segment by its own end, and a generation
 * step by the cached tokens plus itself), and scales cos and sin by its
 * attention factor in float32. */
static void fill_table(float *cos_t, float *sin_t, const float *inv_freq, const int *pos, int half, int j0, int j1,
                       int n, float scale) {
    for (int i = 0; i < half; i++)
        for (int j = j0; j < j1; j++) {
            float ang = (float)pos[j] * inv_freq[i];
            cos_t[(size_t)i * n + j] = (float)cos((double)ang) * scale;
            sin_t[(size_t)i * n + j] = (float)sin((double)ang) * scale;
        }
}

static void rope_tables(const Model *m, RunState *s, int n, const Seg *segs, int n_segs, int pos0) {
    const ModelConfig *c = &m->cfg;
    const int half = c->rotary_dim / 2;
    const float scale = c->rope_attn_factor > 0 ? c->rope_attn_factor : 1.0f;
    for (int g = 0; g < n_segs; g++) {
        const int j0 = segs[g].start, j1 = j0 + segs[g].len;
        const int use_long = m->inv_freq_long && pos0 + segs[g].len > c->rope_orig_max_pos;
        fill_table(s->rope_cos, s->rope_sin, use_long ? m->inv_freq_long : m->inv_freq, s->pos, half, j0, j1, n, scale);
        if (m->inv_freq_local) fill_table(s->rope_cos_local, s->rope_sin_local, m->inv_freq_local, s->pos, half, j0, j1, n, 1.0f);
    }
}

/* llama.cpp stores a llama model's q and k rows permuted so that rotary pairs
 * sit side by side: head row 2i + s holds transformers' row s * dh/2 + i. Put
 * each head's rows back in transformers' order (scratch: (dh, n) floats), so
 * rotary, the captured q/k and everything after are as transformers has them. */
static void unpermute_heads(float *xT, int n_heads, int dh, int n, float *scratch) {
    const int half = dh / 2;
    for (int h = 0; h < n_heads; h++) {
        float *head = xT + (size_t)h * dh * n; // (dh, n)
        memcpy(scratch, head, (size_t)dh * n * sizeof *head);
        for (int i = 0; i < half; i++)
            for (int sgn = 0; sgn < 2; sgn++)
                memcpy(head + (size_t)(sgn * half + i) * n, scratch + (size_t)(2 * i + sgn) * n, (size_t)n * sizeof *head);
    }
}

/* ---- value norms (capture.h's vnorm): ||W_O^h v_j|| as sqrt(v_j^T G_h v_j) (kernels.h) */

/* Each layer's G_h of every head is made on the first pass that asks for that
 * layer's value norms and kept in the Model (vgram, freed by model_free): a
 * derived copy of W_O that depends on nothing but the weights, so the pass,
 * which otherwise only reads the Model (const), fills it in place. Passes on
 * one Model are serialized today (a pipeline's run state is one per Model:
 * serve's per-model lock, the library's per-handle lock), but the Model is
 * shared read-only with threads that run no pass (serve's tile rows), and
 * nothing in the API forbids two run states on one Model; so the filling is
 * under a lock, held once per layer and pass, which costs nothing beside the
 * pass. One lock for every Model: it is contended only while a layer's G is
 * made, once per model. */
static pthread_mutex_t vgram_lock = PTHREAD_MUTEX_INITIALIZER;

size_t model_value_gram_bytes(const ModelConfig *c) {
    return (size_t)c->num_layers * (size_t)c->num_heads * (size_t)c->head_dim * (size_t)c->head_dim * sizeof(float);
}

/* W_O widened whole, by row shares (any split: widening is element by
 * element), then G_h for the heads t, t + T, ... */
typedef struct {
    const Linear *o;
    float *wide; // (out, in)
    float *G;    // (num_heads, dh, dh)
    int n_heads, dh;
    atomic_int failed;
} GramTask;

static void widen_part(void *arg, int t, int T) {
    GramTask *w = arg;
    const int per = (w->o->out + T - 1) / T, r0 = t * per, r1 = r0 + per < w->o->out ? r0 + per : w->o->out;
    if (r0 < r1 && kern_widen_rows(w->wide + (size_t)r0 * w->o->in, w->o, r0, r1) != 0) atomic_store(&w->failed, 1);
}

static void gram_part(void *arg, int t, int T) {
    GramTask *w = arg;
    _Alignas(64) float panel[GEMM_SCRATCH];
    for (int h = t; h < w->n_heads; h += T)
        kern_value_gram(w->G + (size_t)h * w->dh * w->dh, w->wide, w->o->out, w->o->in, h, w->dh, panel);
}

/* Layer l's G_h of every head, made now if no pass has made them. */
static const float *value_gram(const Model *m, RunState *s, int l, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const size_t per_layer = (size_t)c->num_heads * c->head_dim * c->head_dim;
    Model *mm = (Model *)m; /* vgram only: the cache above; no Model is defined const */
    const float *G = NULL;
    pthread_mutex_lock(&vgram_lock);
    if (!mm->vgram) {
        mm->vgram = malloc(model_value_gram_bytes(c));
        mm->vgram_done = calloc((size_t)c->num_layers, sizeof *mm->vgram_done);
        if (!mm->vgram || !mm->vgram_done) {
            free(mm->vgram), free(mm->vgram_done);
            mm->vgram = NULL, mm->vgram_done = NULL;
            av_err(e, "out of memory for the value norms' %zu MB of per-head matrices (%d layers x %d heads)",
                   model_value_gram_bytes(c) >> 20, c->num_layers, c->num_heads);
            goto done;
        }
    }
    if (!mm->vgram_done[l]) {
        const Linear *o = &m->w.layers[l].o;
        GramTask w = {.o = o, .G = mm->vgram + (size_t)l * per_layer, .n_heads = c->num_heads, .dh = c->head_dim};
        atomic_init(&w.failed, 0);
        if (!(w.wide = malloc((size_t)o->out * o->in * sizeof *w.wide))) {
            av_err(e, "out of memory widening layer %d's output projection (%d x %d) for value norms", l, o->out, o->in);
            goto done;
        }
        pool_run(s->pool, widen_part, &w);
        if (atomic_load(&w.failed)) {
            free(w.wide);
            av_err(e, "%s: a weight tensor could not be widened (corrupt data?)", m->path);
            goto done;
        }
        pool_run(s->pool, gram_part, &w);
        free(w.wide);
        mm->vgram_done[l] = 1;
    }
    G = mm->vgram + (size_t)l * per_layer;
done:
    pthread_mutex_unlock(&vgram_lock);
    return G;
}

/* Tokens of one unit of a pass's value norms: units (head, block of tokens)
 * are shared among the threads; each norm is the same bits whatever the
 * blocks (kernels.h), so whatever the threads. */
#define VNORM_BLOCK 256

typedef struct {
    const float *G;  // (num_heads, dh, dh) this layer's
    const float *vT; // (NKV * dh, n)
    const int *heads;
    int n_heads, n, group, dh, blocks;
    float *norms;    // (n_heads, n)
    float *u;        // (threads, dh * VNORM_BLOCK)
} NormTask;

static void norm_part(void *arg, int t, int T) {
    NormTask *w = arg;
    _Alignas(64) float panel[GEMM_SCRATCH];
    const int units = w->n_heads * w->blocks, per = (units + T - 1) / T;
    const int u0 = t * per, u1 = u0 + per < units ? u0 + per : units;
    for (int q = u0; q < u1; q++) {
        const int hi = q / w->blocks, j0 = q % w->blocks * VNORM_BLOCK;
        const int jn = w->n - j0 < VNORM_BLOCK ? w->n - j0 : VNORM_BLOCK, h = w->heads[hi];
        kern_value_norms_gram(w->norms + (size_t)hi * w->n + j0, w->G + (size_t)h * w->dh * w->dh,
                              w->vT + (size_t)(h / w->group) * w->dh * w->n + j0, (size_t)w->n, jn, w->dh,
                              w->u + (size_t)t * w->dh * VNORM_BLOCK, panel);
    }
}

/* ||f_h(x_j)|| for the kept heads of layer l into each segment's capture
 * (rows [pos0, pos0 + len) of its vnorm), when the captures ask for them. */
static int value_norms(const Model *m, RunState *s, int l, int n, int pos0, const Seg *segs, int n_segs, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const Capture *cap = segs[0].cap; /* every segment keeps the same layers and heads */
    if (!cap || !cap->vnorm) return 0;
    int heads[CAP_MAX_HEADS], nh = 0;
    for (int h = 0; h < c->num_heads; h++)
        if (cap_has(cap, l, h)) heads[nh++] = h;
    if (nh == 0) return 0;
    const float *G = value_gram(m, s, l, e);
    if (!G) return -1;
    const int threads = s->n_threads > 0 ? s->n_threads : 1;
    NormTask w = {.G = G, .vT = s->vT, .heads = heads, .n_heads = nh, .n = n, .group = c->num_heads / c->num_kv_heads,
                  .dh = c->head_dim, .blocks = (n + VNORM_BLOCK - 1) / VNORM_BLOCK};
    w.norms = malloc((size_t)nh * n * sizeof *w.norms);
    w.u = malloc((size_t)threads * c->head_dim * VNORM_BLOCK * sizeof *w.u);
    if (!w.norms || !w.u) {
        free(w.norms), free(w.u);
        return av_err(e, "out of memory for value norms in layer %d (%d tokens)", l, n);
    }
    pool_run(n >= PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, norm_part, &w);
    for (int hi = 0; hi < nh; hi++)
        for (int g = 0; g < n_segs; g++) {
            Capture *sc = segs[g].cap;
            if (!sc || !sc->vnorm || !cap_has(sc, l, heads[hi])) continue;
            memcpy(cap_vnorm(sc, l, heads[hi]) + pos0, w.norms + (size_t)hi * n + segs[g].start,
                   (size_t)segs[g].len * sizeof *w.norms);
        }
    free(w.norms), free(w.u);
    return 0;
}

/* Appends n columns of src (rows, n) at column at of dst (rows, ld). */
static void append_cols(float *dst, int ld, int at, const float *src, int rows, int n) {
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * ld + at, src + (size_t)r * n, (size_t)n * sizeof *src);
}

/* Attention of layer l on xT (its normalized input) for n tokens after pos0
 * cached ones (kv NULL: none): fills the capture and, unless attn_only,
 * leaves the output projection in yT. */
static int attention_block(const Model *m, RunState *s, KvCache *kv, int l, int n, int pos0, const Seg *segs,
                           int n_segs, int attn_only, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const LayerWeights *L = &m->w.layers[l];
    const Linear *qkv[3] = {&L->q, &L->k, &L->v};
    float *out[3] = {s->qT, s->kT, s->vT};
    const int want_vnorm = segs[0].cap && segs[0].cap->vnorm;
    if (products(s, s->xT, n, attn_only && !want_vnorm ? 2 : 3, qkv, out, -1, 0, ACT_GELU, m, e)) return -1;
    if (n_segs == 1 && segs[0].cap && segs[0].cap->vals) /* ALTI's values (one input: forward checks) */
        for (int g = 0; g < c->num_kv_heads; g++)
            kern_transpose(cap_vals(segs[0].cap, l, g) + (size_t)pos0 * c->head_dim,
                           s->vT + (size_t)g * c->head_dim * n, c->head_dim, n);
    if (c->qk_rows_interleaved) {
        unpermute_heads(s->qT, c->num_heads, c->head_dim, n, s->ctxT);
        unpermute_heads(s->kT, c->num_kv_heads, c->head_dim, n, s->ctxT);
    }
    if (want_vnorm && value_norms(m, s, l, n, pos0, segs, n_segs, e)) return -1;
    static const Norm no_norm = {0};
    if (c->qk_norm_full) {
        /* OLMoE: one RMSNorm over all heads of each token's q, and of its k */
        kern_rmsnorm_cols(s->qT, L->q_norm.g, c->num_heads * c->head_dim, n, L->q_norm.eps);
        kern_rmsnorm_cols(s->kT, L->k_norm.g, c->num_kv_heads * c->head_dim, n, L->k_norm.eps);
    }
    if (c->qk_norm || c->pos == POS_ROPE) {
        const int local = c->layer_rope_local[l] && s->rope_cos_local;
        QkTask qk = {s->qT, s->kT, c->qk_norm_full ? &no_norm : &L->q_norm, c->qk_norm_full ? &no_norm : &L->k_norm,
                     c->pos != POS_ROPE ? NULL : local ? s->rope_cos_local : s->rope_cos,
                     local ? s->rope_sin_local : s->rope_sin, n, c->head_dim, c->num_heads, c->num_kv_heads,
                     c->rotary_dim};
        pool_run(n >= PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, qk_part, &qk);
    }
    const float *kT = s->kT, *vT = s->vT; // (NKV * dh, ldk)
    const float *v = NULL;                 // (NKV, ldk, dh): the cache's values, in place of vT
    int ldk = n;
    if (kv) {
        const int dh = c->head_dim, rows = c->num_kv_heads * dh;
        float *kc = kv->kT + (size_t)l * rows * kv->cap_tokens, *vc = kv->v + (size_t)l * rows * kv->cap_tokens;
        append_cols(kc, kv->cap_tokens, pos0, s->kT, rows, n);
        /* each head's values of this pass as rows [pos0, pos0 + n) of its (cap_tokens, dh) */
        for (int g = 0; g < c->num_kv_heads && !attn_only; g++)
            kern_transpose_ld(vc + ((size_t)g * kv->cap_tokens + (size_t)pos0) * dh, (size_t)dh,
                              s->vT + (size_t)g * dh * n, (size_t)n, dh, n);
        kT = kc, vT = NULL, v = vc, ldk = kv->cap_tokens;
    }
    AttnRule rule = layer_rule(c, l);
    rule.blk_end = s->blk_end; /* a vision-language model's images attend both ways (model_forward_embeds_blocks) */
    /* the context product's scratch, per thread: for the longest segment, or the cache's keys */
    int max_len = 0;
    for (int g = 0; g < n_segs; g++) max_len = segs[g].len > max_len ? segs[g].len : max_len;
    const size_t attn_len = n_segs > 1 ? kern_attention_scratch(max_len, max_len, c->head_dim)
                            : kv       ? kern_attention_scratch_v(n, c->head_dim)
                                       : kern_attention_scratch(n, pos0 + n, c->head_dim);
    float *attn = NULL;
    const double t0 = av_now_ms();
    int nonfinite = 0;
    if (!attn_only && !(attn = malloc((size_t)s->n_threads * attn_len * sizeof *attn)))
        return av_err(e, "out of memory for attention in layer %d (%d tokens)", l, pos0 + n);
    if (n_segs > 1) {
        PackTask pack = {s->qT, s->kT, attn_only ? NULL : s->vT, attn_only ? NULL : s->ctxT, segs, n_segs, s->seg,
                         (size_t)4 * c->head_dim * s->max_tokens, s->scores,
                         (size_t)kern_attention_rows() * (size_t)s->max_tokens, attn, attn_len, l, n, c->num_heads,
                         c->num_heads / c->num_kv_heads, c->head_dim, rule, L->sinks, 0};
        pool_run(n >= PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, pack_part, &pack);
        nonfinite = atomic_load(&pack.nonfinite);
    } else {
        HeadTask heads = {s->qT, s->kT, kT, attn_only ? NULL : vT, attn_only ? NULL : v, attn_only ? NULL : s->ctxT, segs[0].cap, s->scores,
                          attn, attn_len, l, n, pos0, ldk, c->num_heads, c->num_heads / c->num_kv_heads, c->head_dim,
                          rule, L->sinks, 0};
        pool_run(n >= PARALLEL_HEADS_MIN_TOKENS || pos0 + n >= 4 * PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, head_part,
                 &heads);
        nonfinite = atomic_load(&heads.nonfinite);
    }
    free(attn);
    s->attn_ms += av_now_ms() - t0;
    if (nonfinite) return av_err(e, "%s: attention in layer %d is not finite (NaN/Inf in the weights?)", m->path, l);
    if (attn_only) return 0;
    if (s->abl_on && s->abl_layer == l) /* head ablation: this head's context, zeroed or its mean, before W_O */
        for (int d = 0; d < c->head_dim; d++) {
            float *row = s->ctxT + ((size_t)s->abl_head * c->head_dim + d) * n;
            for (int i = 0; i < n; i++) row[i] = s->abl_ctx ? s->abl_ctx[d] : 0.0f;
        }
    const Linear *o[1] = {&L->o};
    if (products(s, s->ctxT, n, 1, o, &s->yT, -1, 0, ACT_GELU, m, e)) return -1;
    if (L->attn_post_norm.g) kern_rmsnorm_cols(s->yT, L->attn_post_norm.g, c->hidden_size, n, L->attn_post_norm.eps);
    return 0;
}

/* The k largest of v (E) into ids (K), largest first (ties: the lower id, as torch.topk). */
static void top_k(const float *v, int E, int K, int *ids) {
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int x = 0; x < E; x++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= ids[j] == x;
            if (!taken && (best < 0 || v[x] > v[best])) best = x;
        }
        ids[k] = best;
    }
}

/* One token's routing from its router logits (E): softmax, the k most
 * probable experts (ties: the lower id first, as torch.topk), their
 * probabilities renormalized to sum 1 where the family does. renorm < 0
 * (gpt-oss): the k largest logits, then a softmax over those k only. */
static void route_token(const float *logits, int E, int K, int renorm, int *ids, float *w) {
    // logits (E); ids, w (K)
    if (renorm < 0) {
        top_k(logits, E, K, ids);
        double sum = 0, p[CFG_MAX_TOP_K];
        for (int k = 0; k < K; k++) sum += p[k] = exp((double)logits[ids[k]] - logits[ids[0]]);
        for (int k = 0; k < K; k++) w[k] = (float)(p[k] / sum);
        return;
    }
    double mx = logits[0], sum = 0, p[CFG_MAX_EXPERTS]; // p (E) exp(logit - max)
    for (int x = 1; x < E; x++) mx = logits[x] > mx ? logits[x] : mx;
    for (int x = 0; x < E; x++) sum += p[x] = exp((double)logits[x] - mx);
    float prob[CFG_MAX_EXPERTS]; // (E) the softmax, rounded to float as transformers' is
    for (int x = 0; x < E; x++) prob[x] = (float)(p[x] / sum);
    top_k(prob, E, K, ids);
    for (int k = 0; k < K; k++) w[k] = prob[ids[k]];
    if (renorm) {
        float total = 0;
        for (int k = 0; k < K; k++) total += w[k];
        for (int k = 0; k < K; k++) w[k] /= total;
    }
}

/* Which of token i's k choices expert x is, or -1. */
static int expert_slot(const int *ids, int K, int i, int x) {
    for (int k = 0; k < K; k++)
        if (ids[(size_t)i * K + k] == x) return k;
    return -1;
}

int model_moe(const Model *m, RunState *s, int l, const float *xT, int n, float *yT, int *ids, float *w, AvErr *e) {
    // xT, yT (H, n); ids, w (n, K); s->routerT (E, n); per expert: s->moe_xT, s->moe_yT (H, ne) its ne tokens,
    // s->gateT, s->ffT (moe_intermediate, ne); n at most s->mlp_block
    const ModelConfig *c = &m->cfg;
    const LayerWeights *L = &m->w.layers[l];
    const int E = c->num_experts, K = c->experts_per_tok, H = c->hidden_size;
    if (n < 1 || n > s->mlp_block) return av_err(e, "%d tokens do not fit an MLP block (%d)", n, s->mlp_block);
    const Linear *router[1] = {&L->router};
    if (products(s, xT, n, 1, router, &s->routerT, -1, 0, ACT_GELU, m, e)) return -1;
    float logits[CFG_MAX_EXPERTS]; // (E) token i's
    for (int i = 0; i < n; i++) {
        for (int x = 0; x < E; x++) logits[x] = s->routerT[(size_t)x * n + i];
        route_token(logits, E, K, c->moe_topk_logits ? -1 : c->moe_renorm, ids + (size_t)i * K, w + (size_t)i * K);
    }
    memset(yT, 0, (size_t)H * n * sizeof *yT);
    /* experts in id order, each on its tokens only: a token's sum follows the
     * order of transformers' loop (index_add_ per expert) */
    for (int x = 0; x < E; x++) {
        int ne = 0;
        for (int i = 0; i < n; i++) {
            const int k = expert_slot(ids, K, i, x);
            if (k >= 0) s->moe_tok[ne] = i, s->moe_tw[ne++] = w[(size_t)i * K + k];
        }
        if (!ne) continue;
        for (int h = 0; h < H; h++)
            for (int j = 0; j < ne; j++) s->moe_xT[(size_t)h * ne + j] = xT[(size_t)h * n + s->moe_tok[j]];
        const Expert *X = &L->experts[x];
        const Linear *gu[2] = {&X->gate, &X->up}, *down[1] = {&X->down};
        float *out[2] = {s->gateT, s->ffT};
        /* gpt-oss: its clamped SwiGLU after both products (their biases added), not an activation's glu */
        const int clamped = c->swiglu_limit > 0;
        if (products(s, s->moe_xT, ne, 2, gu, out, -1, !clamped, c->hidden_act, m, e)) return -1;
        if (clamped) kern_swiglu_clamped(s->gateT, s->ffT, (size_t)X->gate.out * ne, c->swiglu_alpha, c->swiglu_limit);
        if (products(s, s->gateT, ne, 1, down, &s->moe_yT, -1, 0, ACT_GELU, m, e)) return -1;
        for (int h = 0; h < H; h++)
            for (int j = 0; j < ne; j++) {
                const float add = s->moe_yT[(size_t)h * ne + j] * s->moe_tw[j];
                yT[(size_t)h * n + s->moe_tok[j]] += add;
            }
    }
    return 0;
}

static float act_naive(float v, ActKind a) {
    switch (a) {
    case ACT_SILU: return v / (1.0f + expf(-v));
    case ACT_QUICK_GELU: return v / (1.0f + expf(-1.702f * v));
    case ACT_RELU: return v > 0 ? v : 0;
    case ACT_GELU_TANH: return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    default: return 0.5f * v * (1.0f + erff(v / sqrtf(2.0f)));
    }
}

int model_moe_naive(const Model *m, int l, const float *xT, int n, float *yT, int *ids, float *w, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const LayerWeights *L = &m->w.layers[l];
    const int E = c->num_experts, K = c->experts_per_tok, H = c->hidden_size, F = c->moe_intermediate;
    float *x = malloc((size_t)n * H * sizeof *x), *logits = malloc((size_t)n * E * sizeof *logits); // (n, H), (n, E)
    float *g = malloc((size_t)n * F * sizeof *g), *u = malloc((size_t)n * F * sizeof *u);           // (n, F) each
    float *y = malloc((size_t)n * H * sizeof *y);                                                   // (n, H)
    if (!x || !logits || !g || !u || !y) {
        free(x), free(logits), free(g), free(u), free(y);
        return av_err(e, "out of memory for the experts' reference (%d tokens)", n);
    }
    kern_transpose(x, xT, H, n);
    kern_linear_naive(logits, x, &L->router, n);
    for (int i = 0; i < n; i++)
        route_token(logits + (size_t)i * E, E, K, c->moe_topk_logits ? -1 : c->moe_renorm, ids + (size_t)i * K,
                    w + (size_t)i * K);
    memset(yT, 0, (size_t)H * n * sizeof *yT);
    /* every expert on every token; a token takes the outputs of its chosen ones */
    for (int ex = 0; ex < E; ex++) {
        const Expert *X = &L->experts[ex];
        kern_linear_naive(g, x, &X->gate, n);
        kern_linear_naive(u, x, &X->up, n);
        if (c->swiglu_limit > 0) kern_swiglu_clamped_naive(g, u, (size_t)n * F, c->swiglu_alpha, c->swiglu_limit);
        else
            for (size_t i = 0; i < (size_t)n * F; i++) g[i] = act_naive(g[i], c->hidden_act) * u[i];
        kern_linear_naive(y, g, &X->down, n);
        for (int i = 0; i < n; i++) {
            const int k = expert_slot(ids, K, i, ex);
            for (int h = 0; h < H && k >= 0; h++) yT[(size_t)h * n + i] += y[(size_t)i * H + h] * w[(size_t)i * K + k];
        }
    }
    free(x), free(logits), free(g), free(u), free(y);
    return 0;
}

/* A dense MLP of layer l on one block of nb tokens: xT (hidden, nb) ->
 * yT (hidden, nb), through s->gateT / s->ffT (intermediate, nb). */
static int dense_mlp(const Model *m, RunState *s, int l, const float *xT, int nb, float *yT, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const LayerWeights *L = &m->w.layers[l];
    if (c->gated_mlp) { /* gateT = act(gate x) * up x */
        const Linear *gu[2] = {&L->gate, &L->up};
        float *out[2] = {s->gateT, s->ffT};
        if (products(s, xT, nb, 2, gu, out, -1, 1, c->hidden_act, m, e)) return -1;
    } else { /* ffT = act(up x) */
        const Linear *up[1] = {&L->up};
        if (products(s, xT, nb, 1, up, &s->ffT, (int)c->hidden_act, 0, ACT_GELU, m, e)) return -1;
    }
    const Linear *down[1] = {&L->down};
    return products(s, c->gated_mlp ? s->gateT : s->ffT, nb, 1, down, &yT, -1, 0, ACT_GELU, m, e);
}

/* The MLP of layer l on xT (hidden, n), its output in yT (hidden, n): dense,
 * or a mixture of experts whose routing is left in s->moe_ids / moe_w. Each
 * token's MLP needs only its own column, so the tokens go through in blocks of
 * s->mlp_block, and the intermediate products never hold more than one block:
 * a token's outputs are the same bits in any block (gemm.h), and a MoE token
 * adds its experts in id order in any block. */
static int mlp_block(const Model *m, RunState *s, int l, int n, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const LayerWeights *L = &m->w.layers[l];
    const int H = c->hidden_size, K = c->experts_per_tok;
    for (int b0 = 0; b0 < n; b0 += s->mlp_block) {
        const int nb = n - b0 < s->mlp_block ? n - b0 : s->mlp_block;
        const int whole = nb == n;                  /* one block: the pass's own buffers, no copies */
        float *xb = whole ? s->xT : s->mlp_xT;      // (H, nb) the block's input
        float *yb = whole ? s->yT : s->mlp_yT;      // (H, nb) its output
        if (!whole) take_cols(xb, s->xT, H, n, b0, nb);
        if (L->experts ? model_moe(m, s, l, xb, nb, yb, s->moe_ids + (size_t)b0 * K, s->moe_w + (size_t)b0 * K, e)
                       : dense_mlp(m, s, l, xb, nb, yb, e))
            return -1;
        if (!whole) put_cols(s->yT, yb, H, n, b0, nb);
    }
    if (L->mlp_post_norm.g) kern_rmsnorm_cols(s->yT, L->mlp_post_norm.g, H, n, L->mlp_post_norm.eps);
    return 0;
}

/* Layer l's routing (s->moe_ids / moe_w of the pass) into each segment's capture. */
static void keep_routing(const RunState *s, const Seg *segs, int n_segs, int pos0, int l, int K) {
    for (int g = 0; g < n_segs; g++) {
        Capture *cap = segs[g].cap;
        if (!cap || !cap->moe_ids) continue;
        const size_t at = ((size_t)l * cap->n_tokens + (size_t)pos0) * K, from = (size_t)segs[g].start * K;
        memcpy(cap->moe_ids + at, s->moe_ids + from, (size_t)segs[g].len * K * sizeof *s->moe_ids);
        memcpy(cap->moe_w + at, s->moe_w + from, (size_t)segs[g].len * K * sizeof *s->moe_w);
    }
}

static int check_inputs(const Model *m, const RunState *s, const KvCache *kv, const int *ids, const int *type_ids,
                        int n, int pos0, const Seg *segs, int n_segs, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    if (n < 1 || n > s->max_tokens) return av_err(e, "%d tokens do not fit the buffers (%d)", pos0 + n, s->max_tokens);
    if (kv && pos0 + n > kv->cap_tokens)
        return av_err(e, "%d tokens do not fit the key/value cache (%d)", pos0 + n, kv->cap_tokens);
    if (kv && !c->causal) return av_err(e, "%s: a key/value cache needs a causal model", m->path);
    for (int g = 0; g < n_segs; g++) {
        const Capture *cap = segs[g].cap;
        const int end = pos0 + segs[g].len;
        if (segs[g].len < 1 || (cap && ((size_t)end > cap->cap_tokens || (kv && end > cap->n_tokens))))
            return av_err(e, "%d tokens do not fit the buffers (%d)", end, s->max_tokens);
        if (end > cfg_max_tokens(c)) return av_err(e, "%d tokens exceed the model's %d positions", end, cfg_max_tokens(c));
    }
    for (int i = 0; ids && i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return av_err(e, "token id %d at position %d is outside the vocabulary (%d)", ids[i], pos0 + i, c->vocab_size);
        if (m->w.type_emb && (!type_ids || type_ids[i] < 0 || type_ids[i] >= c->type_vocab_size))
            return av_err(e, "token type %d at position %d is outside type_vocab_size %d", type_ids ? type_ids[i] : -1,
                          i, c->type_vocab_size);
    }
    return 0;
}

static int half_finite(const uint16_t *x, size_t n, int prec) {
    for (size_t i = 0; i < n; i++)
        if (!kern_half_finite(x[i], prec)) return 0;
    return 1;
}

/* NaN/Inf weights would otherwise reach the writers as invalid JSON: the rows
 * [pos0, pos0 + n) this pass wrote, in every captured block but the kept
 * probabilities (head_attention checks those as it makes them). */
static int check_finite(const Model *m, const Capture *cap, int pos0, int n, AvErr *e) {
    for (int l = 0; l < cap->n_layers; l++)
        for (int h = 0; h < cap->n_heads; h++) {
            if (!cap_has(cap, l, h)) continue;
            if (cap->vnorm && !all_finite(cap_vnorm(cap, l, h) + pos0, (size_t)n))
                return av_err(e, "%s: value norms in layer %d are not finite (NaN/Inf in the weights?)", m->path, l);
            if (!cap->attn) { /* a lean capture: NaN/Inf in a row would reach its q/k, thumbnail or telemetry */
                const size_t dh = (size_t)cap->head_dim, tt = (size_t)cap->thumb_size * (size_t)cap->thumb_size;
                int bad = 0;
                if (cap->q)
                    bad |= !all_finite(cap_q(cap, l, h) + (size_t)pos0 * dh, (size_t)n * dh) ||
                           !all_finite(cap_k(cap, l, h) + (size_t)pos0 * dh, (size_t)n * dh);
                if (cap->qh && !bad && (!half_finite(cap_qh(cap, l, h) + (size_t)pos0 * dh, (size_t)n * dh, cap->qk_prec) ||
                                        !half_finite(cap_kh(cap, l, h) + (size_t)pos0 * dh, (size_t)n * dh, cap->qk_prec)))
                    /* the pass's own were finite (its rows are): the rounding overflowed */
                    return av_err(e, "%s: queries or keys in layer %d exceed %s's range (65504): keep them in bf16 "
                                     "or f32", m->path, l, cap->qk_prec == CAP_QK_F16 ? "f16" : "bf16");
                if (cap->thumb) bad |= !all_finite(cap_thumb(cap, l, h), tt);
                if (cap->tel) bad |= !all_finite(cap_tel(cap, l, h) + (size_t)pos0 * CAP_TEL_N, (size_t)n * CAP_TEL_N);
                for (int k = 0; cap->sc_sum && k < CAP_SC_N; k++) bad |= !isfinite(cap_sc(cap, l, h)[k]);
                if (bad) return av_err(e, "%s: attention in layer %d is not finite (NaN/Inf in the weights?)", m->path, l);
            }
        }
    return 0;
}

/* Hidden state rows of each segment into its capture's block for layer slot
 * `block` (0: the embeddings); norm: through this norm first (the last layer's
 * as Hugging Face returns it). */
static void keep_hidden(RunState *s, const Seg *segs, int n_segs, int pos0, int block, const Norm *norm, int H) {
    for (int g = 0; g < n_segs; g++) {
        Capture *cap = segs[g].cap;
        if (!cap || !cap->hidden) continue;
        float *x = s->x + (size_t)segs[g].start * H; // (len, H)
        float *hs = cap->hidden + (size_t)block * cap->n_tokens * H + (size_t)pos0 * H;
        if (norm) residual_norm(s, x, NULL, hs, NULL, norm, segs[g].len, H);
        else memcpy(hs, x, (size_t)segs[g].len * H * sizeof *x);
    }
}

/* yT (dim, n) row r multiplied by scale[r]: DINOv2's layer scale on a block's output. */
static void scale_rows(float *yT, const float *scale, int dim, int n) {
    for (int r = 0; r < dim; r++)
        for (int i = 0; i < n; i++) yT[(size_t)r * n + i] *= scale[r];
}

/* Block b of the stream x (n, H) into each segment's capture that keeps its largest entries. */
static void keep_activations(const Seg *segs, int n_segs, int b, const float *x, int H) {
    for (int g = 0; g < n_segs; g++)
        if (segs[g].cap && segs[g].cap->act_median)
            model_activation_block(segs[g].cap, b, x + (size_t)segs[g].start * H, segs[g].len, H);
}

/* ---------------------------------------------------------------- forward */

/* emb_in (n, H): the first layer's input as given (a vision encoder's patches), instead of ids' embeddings */
static int forward(const Model *m, RunState *s, KvCache *kv, const int *ids, const int *type_ids, const float *emb_in,
                   int n, const Seg *segs, int n_segs, int full, const ModelProgress *pr, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const Weights *w = &m->w;
    const int H = c->hidden_size, pos0 = kv ? kv->n : 0;
    if (check_inputs(m, s, kv, ids, type_ids, n, pos0, segs, n_segs, e)) return -1;
    for (int g = 0; g < n_segs; g++)
        if (segs[g].cap && !kv) segs[g].cap->n_tokens = segs[g].len;
    for (int g = 0; g < n_segs; g++)
        if (segs[g].cap && pos0 == 0) segs[g].cap->act_blocks = 0;
    for (int g = 0; g < n_segs; g++) /* the score sums start with the sequence */
        if (segs[g].cap && segs[g].cap->sc_sum && pos0 == 0) model_scores_begin(segs[g].cap, segs[g].len);
    for (int g = 0; g < n_segs; g++) /* a later pass's rows sum their duplicates by a sweep */
        if (segs[g].cap && segs[g].cap->tel) {
            if (pos0 == 0) model_telemetry_begin(segs[g].cap, segs[g].len);
            else segs[g].cap->tel_prev_n = 0;
        }
    /* the capture that decides how far the pass goes: every segment keeps the same layers */
    const Capture *cap = segs[0].cap;
    const int keep_hidden_states = cap && cap->hidden;
    /* a MoE model's routing is kept for every layer, so such a pass runs them all */
    const int keep_experts = cap && cap->moe_ids;
    /* the residual stream, contexts and MLP outputs of every layer (one input only) */
    const int internals = cap && cap->resid && n_segs == 1;
    if (cap && (cap->resid || cap->vals) && n_segs > 1)
        return av_err(e, "packed inputs cannot keep the residual stream or the values");
    if (internals || (cap && cap->vals)) full = 1;

    float *x = s->x; // (n, H) residual stream
    s->step = kv && pos0 > 0 && n == 1;
    if (emb_in) {
        if (kv || n_segs != 1) return av_err(e, "embedded inputs run alone, from the first position");
        memcpy(x, emb_in, (size_t)n * H * sizeof *x);
        /* a decoder's (a vision-language model's sequence): positions 0.. and their rotary tables */
        if (c->pos == POS_ROPE) {
            if (c->pos_offset) return av_err(e, "embedded inputs take positions from 0");
            positions(m, s, NULL, segs, n_segs, pos0);
            rope_tables(m, s, n, segs, n_segs, pos0);
        }
    } else {
        positions(m, s, ids, segs, n_segs, pos0);
        if (embed(m, s, ids, type_ids, n, e)) return -1;
        if (c->pos == POS_ROPE) rope_tables(m, s, n, segs, n_segs, pos0);
    }
    /* post-norm: the embeddings' norm, and xT = the first attention's input */
    if (w->emb_proj.w) {
        /* ELECTRA: x = emb_proj(norm(embeddings)) */
        const int E = c->embedding_size;
        residual_norm(s, s->emb, NULL, NULL, s->embT, &w->emb_norm, n, E);
        const Linear *p[1] = {&w->emb_proj};
        if (products(s, s->embT, n, 1, p, &s->yT, -1, 0, ACT_GELU, m, e)) return -1;
        kern_transpose(x, s->yT, H, n);
        if (!c->pre_ln) residual_norm(s, x, NULL, NULL, s->xT, NULL, n, H);
    } else if (w->emb_norm.g || !c->pre_ln) {
        residual_norm(s, x, NULL, w->emb_norm.g ? x : NULL, c->pre_ln ? NULL : s->xT, &w->emb_norm, n, H);
    }
    if (keep_hidden_states) keep_hidden(s, segs, n_segs, pos0, 0, NULL, H);
    if (pos0 == 0) keep_activations(segs, n_segs, 0, x, H); /* a generation step's stream is the prompt's, kept */

    int rc = 0, last_kept = c->num_layers - 1, ran_all = 1;
    while (!full && !kv && cap && !keep_experts && last_kept > 0 && cap->n_kept_layers && cap->layer_slot[last_kept] < 0) last_kept--;
    /* the layers this pass runs: up to the last kept one's attention when nothing after it is needed */
    const int run_layers = !full && !kv && cap && !keep_hidden_states && !keep_experts ? last_kept + 1 : c->num_layers;
    for (int l = 0; l < c->num_layers && rc == 0; l++) {
        const LayerWeights *L = &w->layers[l];
        /* post-norm (BERT): x = norm1(x + attn(x));  x = norm2(x + mlp(x))
         * pre-norm (GPT-2, Llama): x = x + attn(norm1(x)); x = x + mlp(norm2(x)) */
        if (internals) memcpy(cap_resid(cap, l) + (size_t)pos0 * H, x, (size_t)n * H * sizeof *x);
        if (c->pre_ln) residual_norm(s, x, NULL, NULL, s->xT, &L->attn_norm, n, H);
        /* After the last captured layer's attention nothing more is needed
         * unless the hidden states or the logits are: its q and k are all the
         * capture takes. */
        const int attn_only = !full && !kv && cap && !keep_hidden_states && !keep_experts && l == last_kept;
        if ((rc = attention_block(m, s, kv, l, n, pos0, segs, n_segs, attn_only, e))) break;
        if (attn_only) {
            ran_all = 0;
            if (pr && pr->fn) pr->fn(pr->ctx, MODEL_PROGRESS_LAYERS, l + 1, run_layers);
            break;
        }
        if (L->ls_attn) scale_rows(s->yT, L->ls_attn, H, n);
        if (c->pre_ln) residual_norm(s, x, s->yT, NULL, s->xT, &L->mlp_norm, n, H);
        else residual_norm(s, x, s->yT, x, s->xT, &L->attn_norm, n, H);
        if ((rc = mlp_block(m, s, l, n, e))) break;
        if (L->ls_mlp) scale_rows(s->yT, L->ls_mlp, H, n);
        if (keep_experts && L->experts) keep_routing(s, segs, n_segs, pos0, l, c->experts_per_tok);
        if (internals) kern_transpose(cap_mlp(cap, l) + (size_t)pos0 * H, s->yT, H, n);
        if (c->pre_ln) residual_norm(s, x, s->yT, NULL, NULL, NULL, n, H);
        else residual_norm(s, x, s->yT, x, s->xT, &L->mlp_norm, n, H);
        if (keep_hidden_states)
            keep_hidden(s, segs, n_segs, pos0, l + 1, l == c->num_layers - 1 && w->final_norm.g ? &w->final_norm : NULL, H);
        if (pos0 == 0) keep_activations(segs, n_segs, l + 1, x, H);
        if (pr && pr->fn) pr->fn(pr->ctx, MODEL_PROGRESS_LAYERS, l + 1, run_layers);
    }
    if (rc) return -1;
    if (internals) memcpy(cap_resid(cap, c->num_layers) + (size_t)pos0 * H, x, (size_t)n * H * sizeof *x);
    s->n_last = n;
    s->full_last = ran_all;
    if (kv) kv->n += n;
    for (int g = 0; g < n_segs; g++)
        if (segs[g].cap && check_finite(m, segs[g].cap, pos0, segs[g].len, e)) return -1;
    return 0;
}

int model_forward(const Model *m, RunState *s, const int *ids, const int *type_ids, int n, Capture *cap, AvErr *e) {
    return model_forward_kv(m, s, NULL, ids, type_ids, n, cap, 0, e);
}

int model_forward_kv(const Model *m, RunState *s, KvCache *kv, const int *ids, const int *type_ids, int n, Capture *cap,
                     int full, AvErr *e) {
    return model_forward_watched(m, s, kv, ids, type_ids, n, cap, full, NULL, e);
}

int model_forward_watched(const Model *m, RunState *s, KvCache *kv, const int *ids, const int *type_ids, int n,
                          Capture *cap, int full, const ModelProgress *progress, AvErr *e) {
    Seg one = {0, n, cap};
    return forward(m, s, kv, ids, type_ids, NULL, n, &one, 1, full, progress, e);
}

int model_forward_embeds(const Model *m, RunState *s, const float *x, int n, Capture *cap, int full, AvErr *e) {
    Seg one = {0, n, cap};
    return forward(m, s, NULL, NULL, NULL, x, n, &one, 1, full, NULL, e);
}

int model_forward_embeds_blocks(const Model *m, RunState *s, const float *x, int n, const int *blk_end, Capture *cap,
                                int full, AvErr *e) {
    if (blk_end && !m->cfg.causal) return av_err(e, "blocks that attend both ways are for a causal model's sequence");
    if (cap && blk_end) { /* the capture keeps them: its rows recomputed from q/k see the same keys */
        free(cap->blk_end);
        if (!(cap->blk_end = malloc((size_t)n * sizeof *cap->blk_end))) return av_err(e, "out of memory");
        memcpy(cap->blk_end, blk_end, (size_t)n * sizeof *cap->blk_end);
    }
    s->blk_end = blk_end;
    const int rc = model_forward_embeds(m, s, x, n, cap, full, e);
    s->blk_end = NULL;
    return rc;
}

int model_embed_ids(const Model *m, const int *ids, int n, float *x, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    if (m->w.pos_emb || m->w.type_emb || m->w.emb_proj.w)
        return av_err(e, "%s: its embeddings add positions or types: not embedded apart from a pass", m->path);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size) return av_err(e, "token id %d is outside the vocabulary", ids[i]);
        float *r = x + (size_t)i * H; // (H)
        if (model_linear_row(&m->w.tok_emb, ids[i], r, e)) return -1;
        if (c->emb_scale != 0.0f)
            for (int j = 0; j < H; j++) r[j] *= c->emb_scale;
    }
    return 0;
}

int model_product(const Model *m, RunState *s, const float *xT, int n, const Linear *lin, float *yT, int act, AvErr *e) {
    const Linear *l[1] = {lin};
    if (n < 1 || lin->in > m->max_in) return av_err(e, "%s: a product of %d inputs does not fit the run state", lin->name, lin->in);
    return products(s, xT, n, 1, l, &yT, act, 0, ACT_GELU, m, e);
}

int model_forward_packed(const Model *m, RunState *s, const int *ids, const int *type_ids, const int *lens, int n_inputs,
                         Capture *const *caps, AvErr *e) {
    if (n_inputs < 1 || n_inputs > s->max_tokens) return av_err(e, "%d inputs do not fit one pass", n_inputs);
    Seg *segs = malloc((size_t)n_inputs * sizeof *segs);
    if (!segs) return av_err(e, "out of memory");
    int n = 0, rc;
    for (int g = 0; g < n_inputs; g++) {
        segs[g] = (Seg){n, lens[g], caps[g]};
        if (lens[g] < 1 || lens[g] > s->max_tokens - n) {
            free(segs);
            return av_err(e, "the packed inputs do not fit the buffers (%d tokens)", s->max_tokens);
        }
        n += lens[g];
    }
    /* every capture keeps the same layers and heads: the pass stops where the first says */
    for (int g = 1; g < n_inputs; g++)
        if (caps[g] && caps[0] && (caps[g]->n_kept_layers != caps[0]->n_kept_layers || !caps[g]->hidden != !caps[0]->hidden ||
                                   memcmp(caps[g]->layer_slot, caps[0]->layer_slot, sizeof caps[0]->layer_slot))) {
            free(segs);
            return av_err(e, "packed inputs must keep the same layers");
        }
    rc = forward(m, s, NULL, ids, type_ids, NULL, n, segs, n_inputs, 0, NULL, e);
    free(segs);
    return rc;
}

/* ---------------------------------------------------------------- the head */

static int head_logits(const Model *m, RunState *s, int n_rows, float *logitsT, AvErr *e);

int model_logits(const Model *m, RunState *s, const int *rows, int n_rows, float *logitsT, AvErr *e) {
    const int H = m->cfg.hidden_size;
    if (!m->w.head.out.w) return av_err(e, "%s: the checkpoint has no language-model head", m->path);
    if (!s->full_last) return av_err(e, "the last pass stopped early; it left no final hidden state");
    if (n_rows < 1 || n_rows > s->max_tokens) return av_err(e, "%d rows do not fit the buffers (%d)", n_rows, s->max_tokens);
    float *x = s->yT; // (n_rows, H) the chosen tokens' residual stream, token-major
    for (int i = 0; i < n_rows; i++) {
        if (rows[i] < 0 || rows[i] >= s->n_last) return av_err(e, "row %d is not a token of the last pass", rows[i]);
        memcpy(x + (size_t)i * H, s->x + (size_t)rows[i] * H, (size_t)H * sizeof *x);
    }
    return head_logits(m, s, n_rows, logitsT, e);
}

int model_logits_rows(const Model *m, RunState *s, const float *x, int n_rows, float *logitsT, AvErr *e) {
    if (!m->w.head.out.w) return av_err(e, "%s: the checkpoint has no language-model head", m->path);
    if (n_rows < 1 || n_rows > s->max_tokens) return av_err(e, "%d rows do not fit the buffers (%d)", n_rows, s->max_tokens);
    memcpy(s->yT, x, (size_t)n_rows * m->cfg.hidden_size * sizeof *x);
    return head_logits(m, s, n_rows, logitsT, e);
}

/* The head on s->yT's first n_rows token-major rows: final norm (or the MLM
 * transform), the output embedding, the soft-cap. */
static int head_logits(const Model *m, RunState *s, int n_rows, float *logitsT, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const LmHead *hd = &m->w.head;
    const int H = c->hidden_size;
    float *x = s->yT;
    /* decoders: the final norm; encoders' stream is already normalized */
    residual_norm(s, x, NULL, NULL, s->xT, m->w.final_norm.g ? &m->w.final_norm : NULL, n_rows, H);
    int rc = 0;
    const float *headT = s->xT; // (D, n_rows) the output layer's input
    if (hd->dense.w) {
        /* masked LM: norm(act(dense(x))), of width D: hidden, or ELECTRA's embedding_size */
        const int D = (int)hd->dense.out;
        float *t = D == H ? x : s->emb, *tT = D == H ? s->xT : s->embT;
        const Linear *d[1] = {&hd->dense};
        rc = products(s, s->xT, n_rows, 1, d, &s->ffT, (int)hd->act, 0, ACT_GELU, m, e);
        if (rc == 0) {
            kern_transpose(t, s->ffT, D, n_rows);
            residual_norm(s, t, NULL, NULL, tT, &hd->norm, n_rows, D);
            headT = tT;
        }
    }
    const Linear *o[1] = {&hd->out};
    if (rc == 0) rc = products(s, headT, n_rows, 1, o, &logitsT, -1, 0, ACT_GELU, m, e);
    if (rc) return -1;
    if (hd->softcap > 0) {
        const size_t total = (size_t)hd->out.out * n_rows;
        for (size_t i = 0; i < total; i++) logitsT[i] = hd->softcap * tanhf(logitsT[i] / hd->softcap);
    }
    return 0;
}

/* dst (dh, rows) = rows [r0, r0 + rows) of head (l, h)'s kept q (or k) (n,
 * dh), transposed and, when kept in 16 bits, widened. */
static void qk_cols(float *dst, const Capture *cap, int l, int h, int keys, int r0, int rows) {
    const size_t at = (size_t)r0 * cap->head_dim;
    if (cap->qh)
        kern_transpose_from_half(dst, (keys ? cap_kh(cap, l, h) : cap_qh(cap, l, h)) + at, rows, cap->head_dim, cap->qk_prec);
    else
        kern_transpose(dst, (keys ? cap_k(cap, l, h) : cap_q(cap, l, h)) + at, rows, cap->head_dim);
}

int model_head_attention(const Model *m, const Capture *cap, int l, int h, float *probs, float *scratch, AvErr *e) {
    const int n = cap->n_tokens, dh = cap->head_dim;
    if (!cap_has_qk(cap) || l < 0 || l >= cap->n_layers || h < 0 || h >= cap->n_heads || !cap_has(cap, l, h))
        return av_err(e, "layer %d head %d: no queries and keys captured", l, h);
    if (dh != m->cfg.head_dim || cap->n_layers != m->cfg.num_layers) return av_err(e, "capture is not of this model");
    float *qT = scratch, *kT = scratch + (size_t)n * dh; // (dh, n) each
    qk_cols(qT, cap, l, h, 0, 0, n);
    qk_cols(kT, cap, l, h, 1, 0, n);
    const AttnRule layer = layer_rule(&m->cfg, l);
    AttnRule rule = head_rule(&layer, m->w.layers[l].sinks, h, NULL, l, 0);
    if (rule.causal && cap->blk_end) rule.blk_end = cap->blk_end; /* the pass's blocks that attend both ways */
    kern_attention_kv(probs, n, NULL, qT, n, kT, NULL, n, n, dh, &rule, NULL);
    return 0;
}

int model_head_rows(const Model *m, const Capture *cap, int l, int h, int r0, int r1, float *rows, float *scratch,
                    KernRowsFn fn, void *ctx, AvErr *e) {
    const int n = cap->n_tokens, dh = cap->head_dim;
    if (!cap_has_qk(cap) || l < 0 || l >= cap->n_layers || h < 0 || h >= cap->n_heads || !cap_has(cap, l, h))
        return av_err(e, "layer %d head %d: no queries and keys captured", l, h);
    if (dh != m->cfg.head_dim || cap->n_layers != m->cfg.num_layers) return av_err(e, "capture is not of this model");
    if (r0 < 0 || r1 > n || r0 >= r1) return av_err(e, "rows %d-%d are outside the %d tokens", r0, r1 - 1, n);
    const int nq = r1 - r0;
    float *kT = scratch, *qT = scratch + (size_t)n * dh; // (dh, n), (dh, nq)
    qk_cols(kT, cap, l, h, 1, 0, n);
    const AttnRule layer = layer_rule(&m->cfg, l);
    AttnRule rule = head_rule(&layer, m->w.layers[l].sinks, h, NULL, l, 0);
    if (rule.causal && cap->blk_end) rule.blk_end = cap->blk_end;
    if ((!rule.causal && rule.window > 0) || rule.blk_end) {
        /* an encoder's local window, or a causal sequence's blocks that attend
         * both ways: a query's keys depend on its own position, which
         * kern_attention_kv places at the end of the keys; so one row at a
         * time over exactly the keys it sees, unmasked (the same products and
         * softmax over the same keys as the whole matrix's) */
        AttnRule all = rule;
        all.causal = 0, all.window = 0, all.bidir = 0, all.blk_end = NULL;
        for (int i = r0; i < r1; i++) {
            int lo, hi;
            kern_attention_keys(&rule, n, i, &lo, &hi);
            memset(rows, 0, (size_t)n * sizeof *rows);
            qk_cols(qT, cap, l, h, 0, i, 1); /* (dh, 1): the query's own vector */
            kern_attention_kv(rows + lo, hi - lo, NULL, qT, 1, kT + lo, NULL, n, hi - lo, dh, &all, NULL);
            fn(ctx, i - r0, i - r0 + 1, rows, n, NULL);
        }
        return 0;
    }
    /* causal: the band's queries are the last of the keys up to its end, at
     * their own positions; otherwise every query sees every key */
    qk_cols(qT, cap, l, h, 0, r0, nq);
    kern_attention_kv_rows(rows, n, NULL, qT, nq, kT, NULL, n, rule.causal ? r1 : n, dh, &rule, NULL, fn, ctx, 0);
    return 0;
}

int model_forward_from(const Model *m, RunState *s, const int *ids, int n, int from, const float *x_in, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    if (!c->pre_ln) return av_err(e, "%s: rerunning from a layer needs a pre-norm model", m->path);
    if (from < 0 || from >= c->num_layers) return av_err(e, "layer %d is not in the model (%d layers)", from, c->num_layers);
    Seg one = {0, n, NULL};
    if (check_inputs(m, s, NULL, ids, NULL, n, 0, &one, 1, e)) return -1;
    s->step = 0;
    positions(m, s, ids, &one, 1, 0);
    if (c->pos == POS_ROPE) rope_tables(m, s, n, &one, 1, 0);
    float *x = s->x;
    memcpy(x, x_in, (size_t)n * H * sizeof *x);
    int rc = 0;
    for (int l = from; l < c->num_layers && rc == 0; l++) {
        const LayerWeights *L = &m->w.layers[l];
        residual_norm(s, x, NULL, NULL, s->xT, &L->attn_norm, n, H);
        if ((rc = attention_block(m, s, NULL, l, n, 0, &one, 1, 0, e))) break;
        if (L->ls_attn) scale_rows(s->yT, L->ls_attn, H, n);
        residual_norm(s, x, s->yT, NULL, s->xT, &L->mlp_norm, n, H);
        if ((rc = mlp_block(m, s, l, n, e))) break;
        if (L->ls_mlp) scale_rows(s->yT, L->ls_mlp, H, n);
        residual_norm(s, x, s->yT, NULL, NULL, NULL, n, H);
    }
    if (rc) return -1;
    s->n_last = n;
    s->full_last = 1;
    return 0;
}

int model_linear_row(const Linear *lin, int r, float *dst, AvErr *e) {
    if (r < 0 || r >= lin->out) return av_err(e, "%s: row %d is outside its %d rows", lin->name, r, lin->out);
    if (lin->type == KERN_F32) {
        const float *w = lin->w;
        if (lin->conv1d)
            for (int k = 0; k < lin->in; k++) dst[k] = w[(size_t)k * lin->ld + r];
        else
            memcpy(dst, w + (size_t)r * lin->ld, (size_t)lin->in * sizeof *dst);
        return 0;
    }
    return quant_rows(lin->type, lin->w, (size_t)lin->out * lin->row_bytes, (size_t)lin->out, (size_t)lin->in, (size_t)r,
                      (size_t)r + 1, dst, lin->name, e);
}
