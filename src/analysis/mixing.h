/* mixing.h — how much each input token contributes to each token's
 * representation after a layer, over the whole model: attention rollout
 * (rollout.c) and ALTI (alti.c), --measure rollout and --measure alti. Both
 * are per layer (every head of a layer together), derived downstream of the
 * engine from a capture that holds every layer and head.
 *
 * Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
 * Transformers"), the variant of their equations: with A^l the mean over the
 * layer's query heads of their attention (GQA changes nothing: each query head
 * has its own weights), the residual connection is modelled as
 *     Â^l = 0.5 A^l + 0.5 I, each row then divided by its sum,
 * and the layers are multiplied from the input up:
 *     R^0 = Â^0,   R^l = Â^l R^(l-1).
 * Rows of A sum to 1, so the renormalisation changes nothing, except with
 * learned attention sinks (gpt-oss), whose share of a row goes to no key: it is
 * dropped by the renormalisation. A causal model's R is lower triangular:
 * token i's row mixes tokens 0..i only.
 *
 * ALTI (Ferrando, Gállego & Costa-jussà 2022, "Measuring the Mixing of
 * Contextual Information in the Transformer"), per layer l, for query token i
 * and input token j, with x the stream entering the layer and f_h(x_j) =
 * W_O^h v^h_j token j's value (with its bias) through head h's slice of the
 * output projection (a GQA head reads its key/value head's values):
 *     T_i(x_j) = sum_h alpha^h_ij f_h(x_j)  +  [j = i] x_i       (the residual)
 * post-norm (BERT): y_i = LN(sum_j T_i(x_j) + b_O), LN frozen at its measured
 *     scale s_i = sqrt(Var(z_i) + eps) of its whole input z_i: each T is
 *     centred, divided by s_i and scaled by gamma (T~_i(x_j)); b_O and beta
 *     belong to no token but are part of y_i;
 * pre-norm (GPT-2, Llama): the values are of the normed input LN(x_j) (as the
 *     pass made them), y_i = x_i + sum_j sum_h alpha^h_ij f_h(x_j) + b_O, the
 *     stream after attention, and T~ = T; a sandwich norm after attention
 *     (Gemma) is frozen likewise (scale g / rms of the attention output, on the
 *     heads' part only);
 * then  c_ij = max(0, ||y_i||_1 - ||y_i - T~_i(x_j)||_1),  each row divided
 * by its sum (the layer's C^l; a row with no positive c_ij, every T~ as far
 * from y_i as 0 is, stays 0: the paper leaves it undefined), and aggregated as
 * rollout aggregates: M^0 =
 * C^0, M^l = C^l M^(l-1). The MLP mixes no tokens and is left out (as in the
 * paper). A key a query does not see (causal mask, window) gets 0. */
#ifndef ATTNVIZ_MIXING_H
#define ATTNVIZ_MIXING_H

#include "capture.h"
#include "err.h"
#include "model.h"
#include "pool.h"

typedef struct MixResult {
    int n_layers, n;   /* every layer of the model; tokens */
    float *layer;      /* (n_layers, n, n) one layer's matrix: Â^l (rollout) or C^l (ALTI); rows sum to 1 */
    float *agg;        /* (n_layers, n, n) through layers 0..l: R^l or M^l; rows sum to 1 */
} MixResult;

void mix_free(MixResult *r);
/* Bytes a result for n tokens takes. */
size_t mix_bytes(const ModelConfig *c, int n);

/* Rollout from cap's attention (every layer and head kept). */
int mix_rollout(const Capture *cap, MixResult *r, AvErr *e);
/* ALTI from cap's attention (every layer and head), residual stream, contexts
 * and values (model_capture_internals, model_capture_values); the query rows
 * shared among pool's threads (NULL: the caller's alone). */
int mix_alti(const Model *m, const Capture *cap, Pool *pool, MixResult *r, AvErr *e);

/* R = A B for (n, n) matrices (BLAS): the aggregation step of both measures. */
void mix_product(float *R, const float *A, const float *B, int n);

#endif
