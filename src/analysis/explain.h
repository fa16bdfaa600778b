/* explain.h — why head (L, h) attends where it does (--explain L.H): the
 * pre-softmax score of a (query i, key j) pair,
 *     s_ij = scale * q_i . k_j      (before any soft-cap, sink or mask)
 * split over the parts of the residual stream x that enters layer L. In a
 * pre-norm model x_t = embeddings_t + sum over l < L of (each head's output
 * W_O^(l,h') z^(l,h')_t, each MLP's output) + the output biases, and
 *     q_i = rot_i(qnorm(W_Q^h LN(x_i) + b_Q^h)),  k_j likewise with W_K,
 * where the layer norm (and a per-head q/k norm) is frozen at the scale it
 * measured on the whole x_i (TransformerLens's apply_ln_to_stack: centred per
 * part for LayerNorm, divided by the token's own sqrt(var + eps)); frozen, every
 * step is linear, rotary positions too (token i's rotation applied to every
 * part of q_i), so q_i = sum_c q_c(i) and
 *     s_ij = sum over (c, c') of scale * q_c(i) . k_c'(j).
 * Parts c: the embeddings (token, position and type rows as the first layer
 * reads them), "L<l>.H<h'>" each earlier head, "MLP <l>" each earlier MLP, and
 * "biases": the output projections' biases, the norm's beta and b_Q / b_K,
 * and "rounding": x as the pass holds it minus the sum of the others, which
 * are recomputed in double from the capture: the float32 pass's rounding
 * (rest says how large; about 1e-7 of |x|). A sandwich norm after attention
 * (Gemma) is frozen the same way on each head's output. A post-norm model
 * (BERT: h = LN1(x + attention), x' = LN2(h + MLP(h))) freezes each of those
 * LayerNorms the same way, every part so far taken through it (beta to the
 * biases), and its queries and keys read x without a norm. The score itself is
 * computed from x whole, through the same steps as the pass, so the parts'
 * sum can be checked against it. Post-norm models (BERT) normalise the stream after every block and have
 * no such sum: refused. */
#ifndef ATTNVIZ_EXPLAIN_H
#define ATTNVIZ_EXPLAIN_H

#include "capture.h"
#include "err.h"
#include "model.h"

enum { EXPLAIN_EMBED, EXPLAIN_HEAD, EXPLAIN_MLP, EXPLAIN_BIAS, EXPLAIN_ROUNDING };
#define EXPLAIN_MAX_PAIRS 3

typedef struct {
    int query, key;
    float weight;      /* the head's attention weight on the pair (as captured) */
    double score;      /* scale * q_i . k_j from x whole */
    double parts_sum;  /* the sum of m */
    float *m;          /* (n_parts, n_parts) query part c (rows) x key part c' (columns) */
} ExplainPair;

typedef struct ExplainResult {
    int layer, head, kv_head;
    float scale;
    int n_parts;
    int *kind, *part_layer, *part_head; /* (n_parts): EXPLAIN_*, and the layer and head of a head's or MLP's part */
    int n_pairs;
    ExplainPair pairs[EXPLAIN_MAX_PAIRS];
    double rest;       /* the rounding part's largest |entry| over the tokens used, relative to the largest |x| */
    double qk_check;   /* the largest |q - the capture's q| (and k) relative, -1 when the capture kept no q/k */
} ExplainResult;

void explain_free(ExplainResult *r);
/* Head (layer, head) on cap (model_capture_internals' buffers and the head's
 * attention): the pair (query, key), or with query or key -1 the
 * EXPLAIN_MAX_PAIRS strongest pairs of that row (column), or with both -1 the
 * strongest pairs over query rows and keys from 1 on (position 0 is the sink,
 * flags.h), one per query row. Usage errors for positions outside the input. */
int explain_head(const Model *m, const Capture *cap, int layer, int head, int query, int key, ExplainResult *r,
                 AvErr *e);

#endif
