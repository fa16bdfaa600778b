/* capture.h — what one forward pass leaves for the writers: attention
 * probabilities, queries and keys of every layer and head. Writers read this
 * plain struct; they never call the model. */
#ifndef ATTNVIZ_CAPTURE_H
#define ATTNVIZ_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#define CAP_MAX_LAYERS 256
#define CAP_MAX_HEADS 256
#define CAP_ACT_TOP 16 /* a block's largest stream entries kept (act_val) */

/* How a capture keeps its queries and keys (serve --qk-precision): as the
 * forward pass made them, or rounded to 16 bits (half the bytes). The pass
 * itself computes in float32 either way; only the kept copy is rounded, and
 * what is recomputed from it (model_head_attention, model_head_rows) widens a
 * head at a time. */
typedef enum { CAP_QK_F32 = 0, CAP_QK_F16, CAP_QK_BF16 } CapQkPrecision;

/* How --stats and heads score, row by row, when the engine sums their scores
 * as the rows are made (model_capture_scores). */
typedef struct {
    int exclude_bos;           /* heads' exclusions: key 0 ... */
    int exclude_current;       /* ... and key i leave row i's total and every share */
    const float *pattern;      /* heads' --pattern template (pattern_n, pattern_n), borrowed; NULL: the rule */
    int pattern_n;
    int pattern_offset;        /* the rule: key i + pattern_offset */
    int norm;                  /* score each row's value-weighted shares (--measure norm; the capture needs vnorm) */
} CapScoring;
enum { CAP_ROLE_CLS = 1, CAP_ROLE_SEP = 2 };

typedef struct {
    int n_layers;
    int n_heads;       /* query heads */
    int n_kv_heads;    /* key/value heads: query head h reads kv head h / (n_heads / n_kv_heads) */
    int n_tokens;
    int head_dim;
    int hidden_size;
    float *attn;   /* (n_layers, n_heads, n_tokens, n_tokens) rows sum to 1; NULL when only q/k (and thumbnails)
                      are kept: model_head_attention recomputes a head from them */
    float *q;      /* (n_layers, n_heads, n_tokens, head_dim) the vectors whose dot product is the score: after bias,
                      q/k norm and rotary, before the scale; NULL if not captured */
    float *k;      /* (n_layers, n_heads, n_tokens, head_dim) likewise; a query head's copy of its kv head's keys */
    int qk_prec;   /* CapQkPrecision: CAP_QK_F32 keeps q and k above; else qh and kh hold them (q, k NULL) */
    uint16_t *qh;  /* (as q) IEEE binary16 (CAP_QK_F16) or bfloat16 (CAP_QK_BF16), rounded to nearest even */
    uint16_t *kh;  /* (as k) likewise */
    float *hidden; /* (n_layers + 1, n_tokens, hidden_size) embeddings then each layer; NULL if not captured */
    float *thumb;  /* (n_layers, n_heads, thumb_size, thumb_size) each head's attention pooled, NULL if not kept:
                      cell (i, j) = mean over the query rows of bin i of the weight on the keys of bin j, token t
                      in bin t * thumb_size / n_tokens, so rows still sum to 1 (thumb_size == n_tokens: the
                      attention itself) */
    int thumb_size;
    float *mpool;  /* (n_layers, n_heads, mpool_size, mpool_size) each head's attention max-pooled, NULL if not
                      kept: cell (i, j) = the largest weight of the query rows of bin i on the keys of bin j,
                      token t in bin t * mpool_size / n_tokens (tiles.h's level 0: the overview of a long input) */
    int mpool_size;
    /* Attention telemetry (model_capture_telemetry), NULL if not kept: per block
     * and query row, the CAP_TEL_N statistics of that row (CapTelField) and its
     * tel_top_k heaviest keys, computed as the rows are made, so a head whose
     * matrix is not kept costs O(n) memory here */
    float *tel;        /* (blocks, n_tokens, CAP_TEL_N) */
    int tel_top_k;
    int *tel_top;      /* (blocks, n_tokens, tel_top_k) keys, heaviest first (ties: the earlier key); -1 past the row */
    float *tel_top_w;  /* (blocks, n_tokens, tel_top_k) their weights */
    const int *tel_ids; /* (n_tokens) token ids for the duplicate share (the caller's, kept during the pass); NULL: 0;
                           also the score sums' duplicate and induction shares */
    int *tel_prev;      /* (cap_tokens) the engine's, per pass from position 0: the previous position with the same
                           token id (-1: none), so that a row's duplicate share reads only those keys */
    int tel_prev_n;     /* the positions tel_prev covers (0: none; a row past them sums its duplicates by a sweep) */
    unsigned long long *tel_scratch; /* (cap_tokens) the engine's: (id, position) pairs sorted to link tel_prev */
    /* Score sums (model_capture_scores), NULL if not kept: per block, sums
     * over query rows of the CAP_SC_N values --stats and heads score, taken as
     * the rows are made, so scoring a head needs O(n) memory, not n x n */
    double *sc_sum;    /* (blocks, CAP_SC_N) */
    CapScoring sc;
    unsigned char *sc_role; /* (cap_tokens) CAP_ROLE_* bits of each token: the caller fills it before each pass */
    int *sc_prev;      /* (cap_tokens) the engine's, per pass: the previous position with the same token id, -1: none */
    int *sc_special;   /* (cap_tokens) the engine's, per pass: the positions whose role is not 0 */
    int sc_n_special;
    unsigned long long *sc_scratch; /* (cap_tokens) the engine's: (id, position) pairs sorted to link sc_prev */
    float *vnorm;  /* (n_layers, n_heads, n_tokens) ||f_h(x_j)||: key token j's value vector (with the value bias)
                      through head h's slice of the output projection (kernels.h, kern_value_norms_gram), for
                      value-weighted attention (--measure norm); NULL unless asked for (model_capture_value_norms) */
    float *nattn;  /* (n_layers, n_heads, n_tokens, n_tokens) attn[i][j] * vnorm[j]: filled downstream of the
                      engine (normattn.h), never by the forward pass; NULL unless asked for */
    /* What the logit lens, direct logit attribution and head ablation read
     * (model_capture_internals; NULL unless asked), for every layer and head
     * whatever the selection, rows strided by n_tokens like attn: */
    float *resid;   /* (n_layers + 1, n_tokens, hidden_size) the residual stream entering each layer, then after
                       the last one, before the final norm */
    float *z;       /* (n_layers, n_heads, n_tokens, head_dim) each head's context before the output projection
                       (TransformerLens's hook_z): head h's output is W_O[:, h * head_dim ...] z */
    float *mlp_out; /* (n_layers, n_tokens, hidden_size) what each MLP adds to the stream (after a sandwich norm) */
    float *vals;    /* (n_layers, n_kv_heads, n_tokens, head_dim) each key/value head's value vectors, after the value
                       bias, as the pass made them: what ALTI mixes (alti.h); NULL unless asked
                       (model_capture_values), kept for every layer whatever the selection, one input per pass */
    /* A mixture-of-experts model's routing (every layer, whatever the selection;
     * NULL for dense models): token i's experts in layer l, most weight first,
     * -1 and 0 in a layer whose MLP is dense. */
    int moe_k;         /* experts per token */
    int *moe_ids;      /* (n_layers, n_tokens, moe_k) */
    float *moe_w;      /* (n_layers, n_tokens, moe_k) their routing weights */
    /* The stream's largest entries (massive activations, Sun et al. 2024; flags.h), NULL unless asked
     * (model_capture_activations): for each block b of the residual stream the pass made -- 0 the
     * embeddings as the first layer reads them, l + 1 after layer l (before any final norm) -- the
     * median |x| over its n_tokens x hidden_size entries and its CAP_ACT_TOP largest |x|, largest first
     * (ties: the earlier token, then dimension). One input per pass or per packed segment. */
    float *act_median; /* (n_layers + 1) */
    float *act_val;    /* (n_layers + 1, CAP_ACT_TOP) the entries' signed values */
    int *act_tok;      /* (n_layers + 1, CAP_ACT_TOP) their tokens */
    int *act_dim;      /* (n_layers + 1, CAP_ACT_TOP) their dimensions */
    int act_blocks;    /* blocks the last pass filled (a pass that stops after its last kept layer fills fewer) */
    float *act_scratch; /* (cap_tokens, hidden_size) the engine's, for the median */
    /* A model with attention sinks (gpt-oss): each kept head's sink share of
     * every query row, 1 minus the row's weights over the keys; NULL otherwise. */
    float *sinks;      /* (blocks, n_tokens) as vnorm */
    /* Rows kept as a pass makes them (generation's streamed rows:
     * model_capture_add_rows), NULL if not kept: per block, the query rows
     * [rows_from, rows_from + rows_n) of the pass, each over keys [0, n_tokens)
     * (0 past the keys the pass has); rows of the window a pass does not make
     * are left as they were. The caller moves rows_from between passes. */
    float *rows;       /* (blocks, rows_n, n_tokens) */
    int rows_from, rows_n;
    /* A vision-language model's image tokens attending to each other both ways inside the causal
     * sequence (model_forward_embeds_blocks: AttnRule.blk_end), kept so that rows recomputed from q/k
     * (model_head_rows) see the keys the pass's rows saw; NULL: none. */
    int *blk_end;      /* (n_tokens) */
    size_t cap_tokens; /* capacity the buffers were allocated for */
    /* Which (layer, head) blocks attn, q and k hold. n_kept_layers == 0: all of
     * them, in order. Else the blocks of the kept layers and heads only, as an
     * (n_kept_layers, n_kept_heads) grid; a slot is -1 for what is not kept. */
    int n_kept_layers, n_kept_heads;
    short layer_slot[CAP_MAX_LAYERS];
    short head_slot[CAP_MAX_HEADS];
} Capture;

/* One attention row's statistics (query i, weights p_j over the keys it sees). */
enum {
    CAP_TEL_SINK,     /* p_0: the first token's weight */
    CAP_TEL_SINK4,    /* p_0 + ... + p_3: the first four tokens' (StreamingLLM's sink span) */
    CAP_TEL_ENTROPY,  /* -sum p_j ln p_j, nats */
    CAP_TEL_PREV,     /* p_(i-1) (0 for the first token) */
    CAP_TEL_SELF,     /* p_i */
    CAP_TEL_DUP,      /* sum of p_j over earlier keys j < i holding the query's token id */
    CAP_TEL_DISTANCE, /* sum p_j |i - j|, tokens */
    CAP_TEL_N
};
#define CAP_TEL_MAX_TOP 64

/* The score sums (sc_sum): over the rows i of a block, of the share x_j of key j
 * in row i (the attention, or with sc.norm its value-weighted share). */
enum {
    /* --stats's (no exclusions) */
    CAP_SC_ENTROPY,  /* -sum x_j ln x_j */
    CAP_SC_DISTANCE, /* sum x_j |i - j| */
    CAP_SC_CLS,      /* sum of x_j over the CAP_ROLE_CLS keys */
    CAP_SC_SEP,      /* likewise CAP_ROLE_SEP */
    CAP_SC_SELF,     /* x_i */
    CAP_SC_PREV,     /* x_(i-1), rows i > 0 */
    CAP_SC_NEXT,     /* x_(i+1), rows i < n - 1 */
    /* heads' (after sc's exclusions) */
    CAP_SC_TOTAL,     /* the row's weight */
    CAP_SC_HIT_PREV,  /* on key i - 1 */
    CAP_SC_HIT_NEXT,  /* key i + 1 */
    CAP_SC_HIT_SELF,  /* key i */
    CAP_SC_HIT_FIRST, /* key 0 */
    CAP_SC_HIT_SEP,   /* the CAP_ROLE_SEP keys */
    CAP_SC_HIT_DUP,   /* earlier keys j < i holding the query's token id */
    CAP_SC_HIT_IND,   /* keys j <= i after an earlier copy of the query's token (ids[j - 1] == ids[i]) */
    CAP_SC_HIT_PATTERN, /* sc's pattern: the template's weights, or the rule's key */
    CAP_SC_N
};

/* Whether the capture holds layer l, head h. */
static inline int cap_has(const Capture *c, int l, int h) {
    return !c->n_kept_layers || (c->layer_slot[l] >= 0 && c->head_slot[h] >= 0);
}
/* Block index of (l, h) in attn, q and k. */
static inline size_t cap_block(const Capture *c, int l, int h) {
    if (!c->n_kept_layers) return (size_t)l * c->n_heads + h;
    return (size_t)c->layer_slot[l] * c->n_kept_heads + c->head_slot[h];
}
/* Blocks held: n_layers * n_heads, or the kept grid. */
static inline size_t cap_blocks(const Capture *c) {
    return c->n_kept_layers ? (size_t)c->n_kept_layers * c->n_kept_heads : (size_t)c->n_layers * c->n_heads;
}

/* Whether the capture keeps queries and keys (in either precision). */
static inline int cap_has_qk(const Capture *c) { return (c->q && c->k) || (c->qh && c->kh); }

static inline float *cap_attn(const Capture *c, int l, int h) {
    return c->attn + cap_block(c, l, h) * c->n_tokens * c->n_tokens;
}
static inline float *cap_thumb(const Capture *c, int l, int h) {
    return c->thumb + cap_block(c, l, h) * c->thumb_size * c->thumb_size;
}
static inline float *cap_mpool(const Capture *c, int l, int h) {
    return c->mpool + cap_block(c, l, h) * c->mpool_size * c->mpool_size;
}
static inline float *cap_vnorm(const Capture *c, int l, int h) {
    return c->vnorm + cap_block(c, l, h) * c->n_tokens;
}
static inline float *cap_sinks(const Capture *c, int l, int h) {
    return c->sinks + cap_block(c, l, h) * c->n_tokens;
}
static inline float *cap_nattn(const Capture *c, int l, int h) {
    return c->nattn + cap_block(c, l, h) * c->n_tokens * c->n_tokens;
}
static inline float *cap_q(const Capture *c, int l, int h) {
    return c->q + cap_block(c, l, h) * c->n_tokens * c->head_dim;
}
static inline uint16_t *cap_qh(const Capture *c, int l, int h) {
    return c->qh + cap_block(c, l, h) * c->n_tokens * c->head_dim;
}
static inline uint16_t *cap_kh(const Capture *c, int l, int h) {
    return c->kh + cap_block(c, l, h) * c->n_tokens * c->head_dim;
}
static inline float *cap_resid(const Capture *c, int l) {
    return c->resid + (size_t)l * c->n_tokens * c->hidden_size;
}
static inline float *cap_z(const Capture *c, int l, int h) {
    return c->z + ((size_t)l * c->n_heads + h) * c->n_tokens * c->head_dim;
}
static inline float *cap_vals(const Capture *c, int l, int g) {
    return c->vals + ((size_t)l * c->n_kv_heads + g) * c->n_tokens * c->head_dim;
}
static inline float *cap_mlp(const Capture *c, int l) {
    return c->mlp_out + (size_t)l * c->n_tokens * c->hidden_size;
}
static inline float *cap_k(const Capture *c, int l, int h) {
    return c->k + cap_block(c, l, h) * c->n_tokens * c->head_dim;
}
static inline double *cap_sc(const Capture *c, int l, int h) {
    return c->sc_sum + cap_block(c, l, h) * CAP_SC_N;
}
static inline float *cap_tel(const Capture *c, int l, int h) {
    return c->tel + cap_block(c, l, h) * c->n_tokens * CAP_TEL_N;
}

/* What the model predicts at some positions: the top-K of its distribution
 * over the vocabulary. For a causal model position i's is the next token's;
 * for a masked model a mask position's fill-ins. */
typedef struct {
    int k;             /* entries per position */
    int n;             /* positions */
    int *position;     /* (n) the token whose output it is */
    int *ids;          /* (n, k) most probable first */
    float *probs;      /* (n, k) */
} CapPredictions;

/* One of an encoder-decoder model's attention stacks (attnviz render): the
 * encoder's self-attention, the decoder's (causal), or cross attention, whose
 * rows are decoder tokens and columns encoder tokens. */
typedef struct {
    const char *name;      /* "encoder", "decoder", "cross" */
    const float *attn;     /* (n_layers, n_heads, n_rows, n_cols): the document's layers, in order */
    int n_rows, n_cols;
    int rows_decoder;      /* 1: rows are the decoder's tokens, else the encoder's */
    int cols_decoder;      /* likewise for columns */
    int causal;
    /* the stack's own layers when its depth differs from the document's (a
     * decoder shallower than its encoder: distilbart-12-6): n_layers of them,
     * in order; 0/NULL: the document's (d->layers) */
    const int *layers;
    int n_layers;
} CapStack;

typedef enum { CAP_STOP_LENGTH = 0, CAP_STOP_EOS, CAP_STOP_STRING } CapStop;

/* A generated continuation: the sequence's tokens [n_prompt, n) were chosen
 * one at a time; step g chose token n_prompt + g from the distribution at
 * position n_prompt + g - 1, whose top-K steps holds. */
typedef struct {
    int n_prompt;
    int n_generated;
    CapStop stop;
    float *chosen_prob;    /* (n_generated) the chosen token's probability */
    CapPredictions steps;  /* (n_generated) positions n_prompt - 1 + g */
    float temperature;     /* 0: greedy */
    float top_p;
    unsigned long long seed;
} CapGeneration;

#endif
