/* capture.h — what one forward pass leaves for the writers: attention
 * probabilities, queries and keys of every layer and head. Writers read this
 * plain struct; they never call the model. */
#ifndef ATTNVIZ_CAPTURE_H
#define ATTNVIZ_CAPTURE_H

#include <stddef.h>

typedef struct {
    int n_layers;
    int n_heads;       /* query heads */
    int n_kv_heads;    /* key/value heads: query head h reads kv head h / (n_heads / n_kv_heads) */
    int n_tokens;
    int head_dim;
    int hidden_size;
    float *attn;   /* (n_layers, n_heads, n_tokens, n_tokens) rows sum to 1 */
    float *q;      /* (n_layers, n_heads, n_tokens, head_dim) the vectors whose dot product is the score: after bias,
                      q/k norm and rotary, before the scale; NULL if not captured */
    float *k;      /* (n_layers, n_heads, n_tokens, head_dim) likewise; a query head's copy of its kv head's keys */
    float *hidden; /* (n_layers + 1, n_tokens, hidden_size) embeddings then each layer; NULL if not captured */
    size_t cap_tokens; /* capacity the buffers were allocated for */
} Capture;

static inline float *cap_attn(const Capture *c, int l, int h) {
    return c->attn + ((size_t)l * c->n_heads + h) * c->n_tokens * c->n_tokens;
}
static inline float *cap_q(const Capture *c, int l, int h) {
    return c->q + ((size_t)l * c->n_heads + h) * c->n_tokens * c->head_dim;
}
static inline float *cap_k(const Capture *c, int l, int h) {
    return c->k + ((size_t)l * c->n_heads + h) * c->n_tokens * c->head_dim;
}

#endif
