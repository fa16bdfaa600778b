/* capture.h — what one forward pass leaves for the writers: attention
 * probabilities, queries and keys of every layer and head. Writers read this
 * plain struct; they never call the model. */
#ifndef ATTNVIZ_CAPTURE_H
#define ATTNVIZ_CAPTURE_H

#include <stddef.h>

#define CAP_MAX_LAYERS 256
#define CAP_MAX_HEADS 256

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
    float *hidden; /* (n_layers + 1, n_tokens, hidden_size) embeddings then each layer; NULL if not captured */
    float *thumb;  /* (n_layers, n_heads, thumb_size, thumb_size) each head's attention pooled, NULL if not kept:
                      cell (i, j) = mean over the query rows of bin i of the weight on the keys of bin j, token t
                      in bin t * thumb_size / n_tokens, so rows still sum to 1 (thumb_size == n_tokens: the
                      attention itself) */
    int thumb_size;
    /* What the logit lens, direct logit attribution and head ablation read
     * (model_capture_internals; NULL unless asked), for every layer and head
     * whatever the selection, rows strided by n_tokens like attn: */
    float *resid;   /* (n_layers + 1, n_tokens, hidden_size) the residual stream entering each layer, then after
                       the last one, before the final norm */
    float *z;       /* (n_layers, n_heads, n_tokens, head_dim) each head's context before the output projection
                       (TransformerLens's hook_z): head h's output is W_O[:, h * head_dim ...] z */
    float *mlp_out; /* (n_layers, n_tokens, hidden_size) what each MLP adds to the stream (after a sandwich norm) */
    size_t cap_tokens; /* capacity the buffers were allocated for */
    /* Which (layer, head) blocks attn, q and k hold. n_kept_layers == 0: all of
     * them, in order. Else the blocks of the kept layers and heads only, as an
     * (n_kept_layers, n_kept_heads) grid; a slot is -1 for what is not kept. */
    int n_kept_layers, n_kept_heads;
    short layer_slot[CAP_MAX_LAYERS];
    short head_slot[CAP_MAX_HEADS];
} Capture;

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

static inline float *cap_attn(const Capture *c, int l, int h) {
    return c->attn + cap_block(c, l, h) * c->n_tokens * c->n_tokens;
}
static inline float *cap_thumb(const Capture *c, int l, int h) {
    return c->thumb + cap_block(c, l, h) * c->thumb_size * c->thumb_size;
}
static inline float *cap_q(const Capture *c, int l, int h) {
    return c->q + cap_block(c, l, h) * c->n_tokens * c->head_dim;
}
static inline float *cap_resid(const Capture *c, int l) {
    return c->resid + (size_t)l * c->n_tokens * c->hidden_size;
}
static inline float *cap_z(const Capture *c, int l, int h) {
    return c->z + ((size_t)l * c->n_heads + h) * c->n_tokens * c->head_dim;
}
static inline float *cap_mlp(const Capture *c, int l) {
    return c->mlp_out + (size_t)l * c->n_tokens * c->hidden_size;
}
static inline float *cap_k(const Capture *c, int l, int h) {
    return c->k + cap_block(c, l, h) * c->n_tokens * c->head_dim;
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
