/* model.c — the engine's buffers for a loaded Model (loader.h loads it): the
 * run state of a pass and the capture buffers (capture.h), the KV cache. */
#include "model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---------------------------------------------------------------- buffers */

static float *alloc_floats(size_t n) {
    return n ? malloc(n * sizeof(float)) : NULL;
}

int model_runstate_alloc(RunState *s, const Model *m, int max_tokens, int threads, AvErr *e) {
    return model_runstate_alloc_mlp(s, m, max_tokens, MODEL_MLP_BLOCK, threads, e);
}

int model_runstate_alloc_mlp(RunState *s, const Model *m, int max_tokens, int mlp_block, int threads, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || mlp_block < 1) return av_err(e, "a run state needs tokens (%d, MLP blocks of %d)", max_tokens, mlp_block);
    /* its stacks are seq2seq.h's, which this pass does not run */
    if (c->enc_dec)
        return av_err(e, "%s: an encoder-decoder (%s) model runs as attnviz --model DIR SOURCE --decoder-text TEXT "
                      "(or --generate N) only", m->path, c->model_type);
    size_t n = (size_t)max_tokens, H = (size_t)c->hidden_size, dh = (size_t)c->head_dim;
    size_t QW = (size_t)c->num_heads * dh, KW = (size_t)c->num_kv_heads * dh, FF = (size_t)c->intermediate_size;
    s->max_tokens = max_tokens;
    s->mlp_block = mlp_block < max_tokens ? mlp_block : max_tokens;
    const size_t nb = (size_t)s->mlp_block;
    /* the threads the caller's settings ask for (--threads), or the default */
    const int T = pool_threads(threads);
    s->n_threads = T > POOL_MAX_THREADS ? POOL_MAX_THREADS : T;
    s->x = alloc_floats(n * H);
    s->xT = alloc_floats(n * (H > QW ? H : QW));
    s->qT = alloc_floats(n * QW);
    s->kT = alloc_floats(n * KW);
    s->vT = alloc_floats(n * KW);
    s->ctxT = alloc_floats(n * QW);
    s->yT = alloc_floats(n * H);
    const size_t E = (size_t)c->embedding_size;
    /* ffT: a block's MLP products, or a masked-LM head's transform of every token */
    const size_t head_w = m->w.head.dense.w ? (size_t)m->w.head.dense.out : 0;
    s->ffT = alloc_floats(nb * FF > n * head_w ? nb * FF : n * head_w);
    int bad = !s->x || !s->xT || !s->qT || !s->kT || !s->vT || !s->ctxT || !s->yT || !s->ffT;
    if (nb < n) { /* a pass longer than a block gathers each block's columns */
        s->mlp_xT = alloc_floats(H * nb);
        s->mlp_yT = alloc_floats(H * nb);
        bad |= !s->mlp_xT || !s->mlp_yT;
    }
    if (E && E != H) {
        s->emb = alloc_floats(n * E);
        s->embT = alloc_floats(n * E);
        bad |= !s->emb || !s->embT;
    }
    if (c->num_experts) {
        /* an expert's gate and up outputs go to gateT and ffT */
        const size_t FE = (size_t)c->moe_intermediate, K = (size_t)c->experts_per_tok, W = FF > FE ? FF : FE;
        free(s->ffT);
        s->ffT = alloc_floats(nb * W > n * head_w ? nb * W : n * head_w);
        s->routerT = alloc_floats(nb * (size_t)c->num_experts);
        s->moe_xT = alloc_floats(nb * H);
        s->moe_yT = alloc_floats(nb * H);
        s->moe_ids = malloc(n * K * sizeof *s->moe_ids);
        s->moe_w = alloc_floats(n * K);
        s->moe_tok = malloc(nb * sizeof *s->moe_tok);
        s->moe_tw = alloc_floats(nb);
        bad |= !s->ffT || !(s->gateT = alloc_floats(nb * W)) || !s->routerT || !s->moe_xT || !s->moe_yT || !s->moe_ids ||
               !s->moe_w || !s->moe_tok || !s->moe_tw;
    } else if (c->gated_mlp) {
        bad |= !(s->gateT = alloc_floats(nb * FF));
    }
    if (c->pos == POS_ROPE) {
        s->rope_cos = alloc_floats(n * dh / 2);
        s->rope_sin = alloc_floats(n * dh / 2);
        bad |= !s->rope_cos || !s->rope_sin;
        if (m->inv_freq_local) {
            s->rope_cos_local = alloc_floats(n * dh / 2);
            s->rope_sin_local = alloc_floats(n * dh / 2);
            bad |= !s->rope_cos_local || !s->rope_sin_local;
        }
    }
    s->scores = alloc_floats((size_t)s->n_threads * (size_t)kern_attention_rows() * n); /* rows of heads not kept */
    s->seg = alloc_floats((size_t)s->n_threads * 4 * dh * n);
    s->pos = malloc(n * sizeof *s->pos);
    bad |= !s->seg || !s->pos;
    s->widen_len = kern_widen_floats(m->max_in);
    s->widen = alloc_floats((size_t)s->n_threads * s->widen_len);
    if (bad || !s->scores || !s->widen) {
        model_runstate_free(s);
        return av_err(e, "out of memory for run state (%d tokens)", max_tokens);
    }
    s->pool = pool_create(s->n_threads); /* NULL: run on the calling thread only */
    if (!s->pool) s->n_threads = 1;
    return 0;
}

/* The same sizes as model_runstate_alloc_mlp with MODEL_MLP_BLOCK, summed. */
size_t model_runstate_bytes(const Model *m, int max_tokens, int threads_asked) {
    const ModelConfig *c = &m->cfg;
    if (max_tokens < 1) return 0;
    const size_t n = (size_t)max_tokens, H = (size_t)c->hidden_size, dh = (size_t)c->head_dim;
    const size_t QW = (size_t)c->num_heads * dh, KW = (size_t)c->num_kv_heads * dh, FF = (size_t)c->intermediate_size;
    const size_t nb = MODEL_MLP_BLOCK < max_tokens ? MODEL_MLP_BLOCK : n, E = (size_t)c->embedding_size;
    const size_t head_w = m->w.head.dense.w ? (size_t)m->w.head.dense.out : 0;
    const int T = pool_threads(threads_asked);
    const size_t threads = T > POOL_MAX_THREADS ? POOL_MAX_THREADS : (size_t)T;
    size_t W = FF;
    if (c->num_experts && (size_t)c->moe_intermediate > W) W = (size_t)c->moe_intermediate;
    size_t floats = n * H * 3 + n * (H > QW ? H : QW) + 2 * n * QW + 2 * n * KW; /* x, yT, ctx; xT; qT, ctxT; kT, vT */
    floats += nb * W > n * head_w ? nb * W : n * head_w;                          /* ffT */
    if (nb < n) floats += 2 * H * nb;                                             /* a block's MLP input and output */
    if (E && E != H) floats += 2 * n * E;
    if (c->num_experts)
        floats += nb * W + nb * (size_t)c->num_experts + 2 * nb * H + 2 * n * (size_t)c->experts_per_tok + 2 * nb;
    else if (c->gated_mlp)
        floats += nb * FF;
    if (c->pos == POS_ROPE) floats += (m->inv_freq_local ? 2 : 1) * n * dh;
    floats += threads * (size_t)kern_attention_rows() * n + threads * 4 * dh * n + n; /* scores, seg, pos */
    floats += threads * kern_widen_floats(m->max_in);
    return floats * sizeof(float);
}

void model_runstate_free(RunState *s) {
    pool_destroy(s->pool);
    float *bufs[] = {s->x, s->xT, s->qT, s->kT, s->vT, s->ctxT, s->yT, s->mlp_xT, s->mlp_yT, s->ffT, s->gateT, s->emb,
                     s->embT, s->scores,
                     s->rope_cos, s->rope_sin, s->rope_cos_local, s->rope_sin_local, s->widen,
                     s->routerT, s->moe_xT, s->moe_yT, s->moe_w, s->moe_tw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(s->seg);
    free(s->pos);
    free(s->moe_ids);
    free(s->moe_tok);
    memset(s, 0, sizeof *s);
}

size_t model_capture_bytes(const ModelConfig *c, int n, int want_qk, int want_hidden, int n_layers, int n_heads) {
    size_t blocks = (size_t)n_layers * (size_t)n_heads, nn = (size_t)n * (size_t)n;
    size_t floats = blocks * nn + (want_qk ? 2 * blocks * (size_t)n * (size_t)c->head_dim : 0) +
                    (want_hidden ? (size_t)(c->num_layers + 1) * (size_t)n * (size_t)c->hidden_size : 0) +
                    2 * (size_t)c->num_layers * (size_t)n * (size_t)c->experts_per_tok; /* routing (ids and weights) */
    return floats * sizeof(float);
}

static int capture_make(Capture *cap, const ModelConfig *c, int n, int want_attn, int want_qk, int qk_prec,
                        int want_hidden, int thumb, const int *layers, int n_layers, const int *heads, int n_heads, AvErr *e) {
    memset(cap, 0, sizeof *cap);
    cap->n_layers = c->num_layers;
    cap->n_heads = c->num_heads;
    cap->n_kv_heads = c->num_kv_heads ? c->num_kv_heads : c->num_heads;
    cap->head_dim = c->head_dim ? c->head_dim : c->hidden_size / c->num_heads;
    cap->hidden_size = c->hidden_size;
    cap->n_tokens = n;
    cap->cap_tokens = (size_t)n;
    if (c->num_layers > CAP_MAX_LAYERS || c->num_heads > CAP_MAX_HEADS)
        return av_err(e, "%d layers x %d heads exceed the capture's %d x %d", c->num_layers, c->num_heads,
                      CAP_MAX_LAYERS, CAP_MAX_HEADS);
    if (layers || heads) {
        for (int l = 0; l < CAP_MAX_LAYERS; l++) cap->layer_slot[l] = -1;
        for (int h = 0; h < CAP_MAX_HEADS; h++) cap->head_slot[h] = -1;
        for (int i = 0; i < (layers ? n_layers : c->num_layers); i++) {
            int l = layers ? layers[i] : i;
            if (l < 0 || l >= c->num_layers) return av_err(e, "layer %d is not in the model (%d layers)", l, c->num_layers);
            if (cap->layer_slot[l] < 0) cap->layer_slot[l] = (short)cap->n_kept_layers++;
        }
        for (int i = 0; i < (heads ? n_heads : c->num_heads); i++) {
            int h = heads ? heads[i] : i;
            if (h < 0 || h >= c->num_heads) return av_err(e, "head %d is not in the model (%d heads)", h, c->num_heads);
            if (cap->head_slot[h] < 0) cap->head_slot[h] = (short)cap->n_kept_heads++;
        }
    }
    size_t blocks = cap_blocks(cap);
    int bad = 0;
    if (want_attn) bad |= !(cap->attn = alloc_floats(blocks * (size_t)n * (size_t)n));
    if (thumb > 0) {
        cap->thumb_size = thumb < n ? thumb : n;
        bad |= !(cap->thumb = calloc(blocks * (size_t)cap->thumb_size * (size_t)cap->thumb_size, sizeof(float)));
    }
    if (want_qk && qk_prec != CAP_QK_F32) {
        const size_t len = blocks * (size_t)n * (size_t)cap->head_dim;
        cap->qk_prec = qk_prec;
        cap->qh = malloc(len * sizeof *cap->qh);
        cap->kh = malloc(len * sizeof *cap->kh);
        bad |= !cap->qh || !cap->kh;
    } else if (want_qk) {
        cap->q = alloc_floats(blocks * (size_t)n * (size_t)cap->head_dim);
        cap->k = alloc_floats(blocks * (size_t)n * (size_t)cap->head_dim);
        bad |= !cap->q || !cap->k;
    }
    if (want_hidden) {
        cap->hidden = alloc_floats((size_t)(c->num_layers + 1) * (size_t)n * (size_t)c->hidden_size);
        bad |= !cap->hidden;
    }
    if (c->attn_sinks) bad |= !(cap->sinks = calloc(blocks * (size_t)n, sizeof(float)));
    if (c->num_experts) {
        /* the routing of every layer: -1 and 0 until a pass routes (dense layers stay so) */
        const size_t len = (size_t)c->num_layers * (size_t)n * (size_t)c->experts_per_tok;
        cap->moe_k = c->experts_per_tok;
        cap->moe_ids = malloc(len * sizeof *cap->moe_ids);
        cap->moe_w = calloc(len, sizeof *cap->moe_w);
        bad |= !cap->moe_ids || !cap->moe_w;
        for (size_t i = 0; cap->moe_ids && i < len; i++) cap->moe_ids[i] = -1;
    }
    if (bad) {
        model_capture_free(cap);
        return av_err(e, "out of memory for attention capture (%d tokens)", n);
    }
    return 0;
}

int model_capture_select(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e) {
    return capture_make(cap, c, n, 1, want_qk, CAP_QK_F32, want_hidden, 0, layers, n_layers, heads, n_heads, e);
}

int model_capture_qk(Capture *cap, const ModelConfig *c, int n, int thumb_size, int prec, AvErr *e) {
    if (prec != CAP_QK_F32 && prec != CAP_QK_F16 && prec != CAP_QK_BF16) return av_err(e, "q/k precision %d is unknown", prec);
    return capture_make(cap, c, n, 0, 1, prec, 0, thumb_size, NULL, 0, NULL, 0, e);
}

int model_capture_telemetry(Capture *cap, const ModelConfig *c, int n, int top_k, const int *ids, const int *layers,
                            int n_layers, const int *heads, int n_heads, AvErr *e) {
    if (top_k < 0 || top_k > CAP_TEL_MAX_TOP) return av_err(e, "telemetry: top %d keys is outside 0..%d", top_k, CAP_TEL_MAX_TOP);
    if (capture_make(cap, c, n, 0, 0, CAP_QK_F32, 0, 0, layers, n_layers, heads, n_heads, e) != 0) return -1;
    if (model_capture_add_telemetry(cap, top_k, ids, e) != 0) {
        model_capture_free(cap);
        return -1;
    }
    return 0;
}

int model_capture_add_telemetry(Capture *cap, int top_k, const int *ids, AvErr *e) {
    if (top_k < 0 || top_k > CAP_TEL_MAX_TOP) return av_err(e, "telemetry: top %d keys is outside 0..%d", top_k, CAP_TEL_MAX_TOP);
    if (cap->tel) return av_err(e, "telemetry: the capture has it already");
    const size_t rows = cap_blocks(cap) * (size_t)cap->n_tokens;
    cap->tel = alloc_floats(rows * CAP_TEL_N);
    cap->tel_top_k = top_k;
    if (top_k) {
        cap->tel_top = malloc(rows * (size_t)top_k * sizeof *cap->tel_top);
        cap->tel_top_w = alloc_floats(rows * (size_t)top_k);
    }
    cap->tel_ids = ids;
    const size_t n = cap->cap_tokens ? cap->cap_tokens : 1;
    cap->tel_prev = malloc(n * sizeof *cap->tel_prev);
    cap->tel_scratch = malloc(n * sizeof *cap->tel_scratch);
    cap->tel_prev_n = 0;
    if (!cap->tel || (top_k && (!cap->tel_top || !cap->tel_top_w)) || !cap->tel_prev || !cap->tel_scratch) {
        free(cap->tel), free(cap->tel_top), free(cap->tel_top_w), free(cap->tel_prev), free(cap->tel_scratch);
        cap->tel = NULL, cap->tel_top = NULL, cap->tel_top_w = NULL, cap->tel_prev = NULL, cap->tel_scratch = NULL;
        return av_err(e, "out of memory for attention telemetry (%d tokens)", cap->n_tokens);
    }
    return 0;
}

int model_capture_add_rows(Capture *cap, int rows_n, AvErr *e) {
    if (cap->rows) return av_err(e, "rows: the capture has them already");
    if (rows_n < 1 || (size_t)rows_n > cap->cap_tokens)
        return av_err(e, "rows: %d rows a head is outside 1..%zu", rows_n, cap->cap_tokens);
    if (!(cap->rows = calloc(cap_blocks(cap) * (size_t)rows_n * cap->cap_tokens, sizeof(float))))
        return av_err(e, "out of memory for %d attention rows a head (%zu tokens)", rows_n, cap->cap_tokens);
    cap->rows_from = 0, cap->rows_n = rows_n;
    return 0;
}

size_t model_capture_telemetry_bytes(size_t blocks, int n, int top_k) {
    return blocks * (size_t)n * (CAP_TEL_N + 2 * (size_t)top_k) * sizeof(float) +
           (size_t)n * (sizeof(int) + sizeof(unsigned long long));
}

int model_capture_add_scores(Capture *cap, const CapScoring *sc, AvErr *e) {
    const size_t n = cap->cap_tokens ? cap->cap_tokens : 1;
    free(cap->sc_sum), free(cap->sc_prev), free(cap->sc_special), free(cap->sc_scratch), free(cap->sc_role);
    cap->sc_role = calloc(n, 1);
    cap->sc_sum = calloc(cap_blocks(cap) * CAP_SC_N, sizeof *cap->sc_sum);
    cap->sc_prev = malloc(n * sizeof *cap->sc_prev);
    cap->sc_special = malloc(n * sizeof *cap->sc_special);
    cap->sc_scratch = malloc(n * sizeof *cap->sc_scratch);
    cap->sc = *sc;
    cap->sc_n_special = 0;
    if (!cap->sc_sum || !cap->sc_prev || !cap->sc_special || !cap->sc_scratch || !cap->sc_role) {
        free(cap->sc_sum), free(cap->sc_prev), free(cap->sc_special), free(cap->sc_scratch), free(cap->sc_role);
        cap->sc_sum = NULL, cap->sc_prev = cap->sc_special = NULL, cap->sc_scratch = NULL, cap->sc_role = NULL;
        return av_err(e, "out of memory for head scores (%zu tokens)", n);
    }
    return 0;
}

int model_capture_scores(Capture *cap, const ModelConfig *c, int n, const CapScoring *sc, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e) {
    if (capture_make(cap, c, n, 0, 0, CAP_QK_F32, 0, 0, layers, n_layers, heads, n_heads, e) != 0) return -1;
    if (model_capture_add_scores(cap, sc, e) != 0) {
        model_capture_free(cap);
        return -1;
    }
    return 0;
}

size_t model_capture_scores_bytes(int n, int n_layers, int n_heads) {
    return (size_t)n_layers * (size_t)n_heads * CAP_SC_N * sizeof(double) +
           (size_t)n * (2 * sizeof(int) + sizeof(unsigned long long) + 1);
}

size_t model_capture_qk_bytes(const ModelConfig *c, int n, int thumb_size, int prec) {
    size_t blocks = (size_t)c->num_layers * (size_t)c->num_heads, t = (size_t)(thumb_size < n ? thumb_size : n);
    const size_t qk = 2 * blocks * (size_t)n * (size_t)c->head_dim;
    return qk * (prec == CAP_QK_F32 ? sizeof(float) : sizeof(uint16_t)) + blocks * t * t * sizeof(float);
}

int model_capture_alloc(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, AvErr *e) {
    return model_capture_select(cap, c, n, want_qk, want_hidden, NULL, 0, NULL, 0, e);
}

int model_capture_maxpool(Capture *cap, int size, AvErr *e) {
    if (cap->mpool) return 0;
    const int s = size < cap->n_tokens ? size : cap->n_tokens;
    if (s < 1) return av_err(e, "max-pooled overview of size %d", size);
    if (!(cap->mpool = calloc(cap_blocks(cap) * (size_t)s * (size_t)s, sizeof(float))))
        return av_err(e, "out of memory for the attention overview (%d x %d per head)", s, s);
    cap->mpool_size = s;
    return 0;
}

int model_capture_value_norms(Capture *cap, AvErr *e) {
    if (cap->vnorm) return 0;
    if (!(cap->vnorm = calloc(cap_blocks(cap) * cap->cap_tokens, sizeof(float))))
        return av_err(e, "out of memory for value norms (%zu tokens)", cap->cap_tokens);
    return 0;
}

size_t model_capture_value_norms_bytes(int n, int n_layers, int n_heads) {
    return (size_t)n_layers * (size_t)n_heads * (size_t)n * sizeof(float);
}

void model_capture_free(Capture *cap) {
    free(cap->blk_end);
    free(cap->vnorm);
    free(cap->sinks);
    free(cap->nattn);
    free(cap->attn);
    free(cap->q);
    free(cap->k);
    free(cap->qh);
    free(cap->kh);
    free(cap->hidden);
    free(cap->thumb);
    free(cap->mpool);
    free(cap->tel);
    free(cap->tel_top);
    free(cap->tel_top_w);
    free(cap->tel_prev);
    free(cap->tel_scratch);
    free(cap->sc_sum);
    free(cap->sc_prev);
    free(cap->sc_special);
    free(cap->sc_scratch);
    free(cap->sc_role);
    free(cap->resid);
    free(cap->z);
    free(cap->mlp_out);
    free(cap->vals);
    free(cap->act_median);
    free(cap->act_val);
    free(cap->act_tok);
    free(cap->act_dim);
    free(cap->act_scratch);
    free(cap->moe_ids);
    free(cap->moe_w);
    free(cap->rows);
    memset(cap, 0, sizeof *cap);
}

int model_capture_internals(Capture *cap, const ModelConfig *c, AvErr *e) {
    const size_t n = cap->cap_tokens, H = (size_t)c->hidden_size, L = (size_t)c->num_layers;
    free(cap->resid);
    free(cap->z);
    free(cap->mlp_out);
    cap->resid = alloc_floats((L + 1) * n * H);
    cap->z = alloc_floats(L * (size_t)c->num_heads * n * (size_t)cap->head_dim);
    cap->mlp_out = alloc_floats(L * n * H);
    if (!cap->resid || !cap->z || !cap->mlp_out) {
        free(cap->resid), free(cap->z), free(cap->mlp_out);
        cap->resid = cap->z = cap->mlp_out = NULL;
        return av_err(e, "out of memory for the residual stream of %zu tokens x %d layers", n, c->num_layers);
    }
    return 0;
}

size_t model_capture_internals_bytes(const ModelConfig *c, int n) {
    const size_t L = (size_t)c->num_layers, H = (size_t)c->hidden_size;
    return ((2 * L + 1) * (size_t)n * H + L * (size_t)c->num_heads * (size_t)n * (size_t)c->head_dim) * sizeof(float);
}

int model_capture_activations(Capture *cap, const ModelConfig *c, AvErr *e) {
    const size_t blocks = (size_t)c->num_layers + 1;
    free(cap->act_median), free(cap->act_val), free(cap->act_tok), free(cap->act_dim), free(cap->act_scratch);
    cap->act_median = calloc(blocks, sizeof *cap->act_median);
    cap->act_val = calloc(blocks * CAP_ACT_TOP, sizeof *cap->act_val);
    cap->act_tok = calloc(blocks * CAP_ACT_TOP, sizeof *cap->act_tok);
    cap->act_dim = calloc(blocks * CAP_ACT_TOP, sizeof *cap->act_dim);
    cap->act_scratch = alloc_floats((cap->cap_tokens ? cap->cap_tokens : 1) * (size_t)c->hidden_size);
    cap->act_blocks = 0;
    if (!cap->act_median || !cap->act_val || !cap->act_tok || !cap->act_dim || !cap->act_scratch) {
        free(cap->act_median), free(cap->act_val), free(cap->act_tok), free(cap->act_dim), free(cap->act_scratch);
        cap->act_median = cap->act_val = cap->act_scratch = NULL, cap->act_tok = cap->act_dim = NULL;
        return av_err(e, "out of memory for the stream's largest entries (%zu tokens)", cap->cap_tokens);
    }
    return 0;
}

int model_capture_values(Capture *cap, const ModelConfig *c, AvErr *e) {
    free(cap->vals);
    if (!(cap->vals = alloc_floats((size_t)c->num_layers * c->num_kv_heads * cap->cap_tokens * (size_t)cap->head_dim)))
        return av_err(e, "out of memory for the values of %zu tokens x %d layers", cap->cap_tokens, c->num_layers);
    return 0;
}

size_t model_capture_values_bytes(const ModelConfig *c, int n) {
    return (size_t)c->num_layers * c->num_kv_heads * (size_t)n * (size_t)c->head_dim * sizeof(float);
}

void model_capture_trim(Capture *cap, int n) {
    const size_t ld = (size_t)cap->n_tokens, nn = (size_t)n, blocks = cap_blocks(cap), dh = (size_t)cap->head_dim;
    if ((size_t)n >= ld) return;
    /* every destination lies at or before its source: one forward sweep */
    for (size_t b = 0; cap->attn && b < blocks; b++)
        for (size_t i = 0; i < nn; i++) memmove(cap->attn + (b * nn + i) * nn, cap->attn + (b * ld + i) * ld, nn * sizeof(float));
    for (size_t b = 0; cap->vnorm && b < blocks; b++) memmove(cap->vnorm + b * nn, cap->vnorm + b * ld, nn * sizeof(float));
    for (size_t b = 0; cap->sinks && b < blocks; b++) memmove(cap->sinks + b * nn, cap->sinks + b * ld, nn * sizeof(float));
    for (size_t r = 0; cap->rows && r < blocks * (size_t)cap->rows_n; r++)
        memmove(cap->rows + r * nn, cap->rows + r * ld, nn * sizeof(float));
    for (size_t b = 0; cap->q && b < blocks; b++) {
        memmove(cap->q + b * nn * dh, cap->q + b * ld * dh, nn * dh * sizeof(float));
        memmove(cap->k + b * nn * dh, cap->k + b * ld * dh, nn * dh * sizeof(float));
    }
    for (size_t b = 0; cap->qh && b < blocks; b++) {
        memmove(cap->qh + b * nn * dh, cap->qh + b * ld * dh, nn * dh * sizeof *cap->qh);
        memmove(cap->kh + b * nn * dh, cap->kh + b * ld * dh, nn * dh * sizeof *cap->kh);
    }
    const size_t H = (size_t)cap->hidden_size;
    for (size_t l = 0; cap->hidden && l <= (size_t)cap->n_layers; l++)
        memmove(cap->hidden + l * nn * H, cap->hidden + l * ld * H, nn * H * sizeof(float));
    for (size_t l = 0; cap->resid && l <= (size_t)cap->n_layers; l++)
        memmove(cap->resid + l * nn * H, cap->resid + l * ld * H, nn * H * sizeof(float));
    for (size_t l = 0; cap->mlp_out && l < (size_t)cap->n_layers; l++)
        memmove(cap->mlp_out + l * nn * H, cap->mlp_out + l * ld * H, nn * H * sizeof(float));
    const size_t K = (size_t)cap->moe_k;
    for (size_t l = 0; cap->moe_ids && l < (size_t)cap->n_layers; l++) {
        memmove(cap->moe_ids + l * nn * K, cap->moe_ids + l * ld * K, nn * K * sizeof *cap->moe_ids);
        memmove(cap->moe_w + l * nn * K, cap->moe_w + l * ld * K, nn * K * sizeof *cap->moe_w);
    }
    for (size_t b = 0; cap->z && b < (size_t)cap->n_layers * cap->n_heads; b++)
        memmove(cap->z + b * nn * dh, cap->z + b * ld * dh, nn * dh * sizeof(float));
    for (size_t b = 0; cap->vals && b < (size_t)cap->n_layers * cap->n_kv_heads; b++)
        memmove(cap->vals + b * nn * dh, cap->vals + b * ld * dh, nn * dh * sizeof(float));
    cap->n_tokens = n;
}

size_t model_kv_bytes(const ModelConfig *c, int n) {
    return 2 * (size_t)c->num_layers * c->num_kv_heads * c->head_dim * (size_t)(n > 0 ? n : 0) * sizeof(float);
}

int model_kv_alloc(KvCache *kv, const ModelConfig *c, int n, AvErr *e) {
    memset(kv, 0, sizeof *kv);
    const size_t floats = (size_t)c->num_layers * c->num_kv_heads * c->head_dim * (size_t)n;
    kv->kT = alloc_floats(floats);
    kv->v = alloc_floats(floats);
    if (!kv->kT || !kv->v) {
        model_kv_free(kv);
        return av_err(e, "out of memory for the key/value cache (%d tokens)", n);
    }
    kv->cap_tokens = n;
    return 0;
}

void model_kv_free(KvCache *kv) {
    free(kv->kT);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}
