/* lens.h — what the residual stream says, beyond attention (issue 32): the
 * logit lens (each layer's stream read through the final norm and the
 * unembedding), direct logit attribution (each head's and each MLP's share of
 * a token's logit through the final norm's scale frozen, as TransformerLens's
 * cache.stack_head_results(apply_ln=True) computes it) and head ablation (the
 * change in a token's log-probability when one head's output is zeroed or
 * mean-ablated, the pass rerun from that layer on). They read a capture with
 * model_capture_internals' buffers, for causal pre-norm models with a head.
 *
 * Attribution, precisely: with x the final residual at a position and s the
 * final norm's scale on it (1/rms(x) for RMSNorm, 1/std(x) for LayerNorm), a
 * component c (a head's W_O,h z_h without the output bias, an MLP's output)
 * contributes sum_j c'_j s g_j W_U[t, j], where c' = c for RMSNorm and c minus
 * its own mean for LayerNorm (the centering is linear, so it is applied to each
 * component, as TransformerLens does); the norm's bias, b_U and the embeddings
 * and output biases make up the rest ("other"), so the parts sum to the logit
 * before any soft-cap. A sandwich norm after attention (Gemma 2/3) is frozen
 * the same way: each head's output is scaled by that norm's scale computed on
 * the whole attention output. */
#ifndef ATTNVIZ_LENS_H
#define ATTNVIZ_LENS_H

#include <stddef.h>

#include "capture.h"
#include "err.h"
#include "model.h"

typedef struct LensResult {
    int n_layers, n_heads, n;   /* the model's layers and heads; positions of the input */
    int *final_id;              /* (n) the model's prediction (argmax) after each position */
    /* logit lens (lens_k > 0): the stream after layer lens_layer[i] */
    int lens_k, lens_n;
    int *lens_layer;            /* (lens_n) */
    int *lens_ids;              /* (lens_n, n, lens_k) most probable first */
    float *lens_probs;          /* (lens_n, n, lens_k) */
    int *lens_rank;             /* (lens_n, n) rank of final_id there (0: the top) */
    float *lens_final_prob;     /* (lens_n, n) final_id's probability there */
    /* direct logit attribution (attr_n > 0) */
    int attr_n, attr_target;    /* positions; the fixed target id, or -1: each position's prediction */
    int *attr_pos, *attr_tid;   /* (attr_n) */
    float *attr_heads;          /* (attr_n, n_layers, n_heads) */
    float *attr_mlp;            /* (attr_n, n_layers) */
    float *attr_logit;          /* (attr_n) the target's logit, before any soft-cap */
    float *attr_other;          /* (attr_n) what no head or MLP gave: embeddings, biases */
    /* head ablation (abl_on) */
    int abl_on, abl_target, abl_pos, abl_mean;
    float abl_base;             /* the clean log-probability of abl_target after abl_pos */
    float *abl_effects;         /* (n_layers, n_heads) ablated minus clean log-probability; NaN: not ablated */
} LensResult;

void lens_free(LensResult *r);

/* final_id for every position, and with k > 0 the logit lens at the given
 * layers (NULL: all), through the model's head in a run state of its own on
 * `threads` threads (model_runstate_alloc's). */
int lens_logit_lens(const Model *m, const Capture *cap, const int *layers, int n_layers, int k, int threads,
                    LensResult *r, AvErr *e);
/* Attribution at positions pos (n_pos) for target (-1: final_id, which
 * lens_logit_lens filled). */
int lens_attribution(const Model *m, const Capture *cap, const int *pos, int n_pos, int target, LensResult *r,
                     AvErr *e);
/* Ablation of the heads pairs (n_pairs (layer, head) pairs; NULL: every head)
 * for the log-probability of target (-1: final_id[pos]) after position pos;
 * mean: each head's context replaced by its mean over the input's positions,
 * else zeros. ids: the input's tokens. */
int lens_ablation(const Model *m, RunState *s, const Capture *cap, const int *ids, int pos, int target,
                  const int *pairs, int n_pairs, int mean, LensResult *r, AvErr *e);

/* W (out, in) of a linear layer widened to float (lens.c's and flow.c's
 * products), or NULL with e filled; the caller frees it. */
float *lens_widen(const Linear *lin, AvErr *e);

/* Pure helpers (tested on their own). The rank of id among vocab scores
 * logits[j * stride]: how many score higher (ties: a lower id first). */
int lens_rank(const float *logits, size_t stride, int vocab, int id);
/* log softmax of the scores at id, in double. */
double lens_log_prob(const float *logits, size_t stride, int vocab, int id);
/* The frozen final norm as one direction u (dim): a component c adds c . u to
 * the target's logit; x is the final residual, w the unembedding row. */
void lens_direction(const Norm *nm, const float *x, const float *w, int dim, double *u);

#endif
