/* predict.h — from a model's scores over the vocabulary to what users see:
 * the top-K with probabilities (a stable softmax), and the next token of a
 * generation (greedy, or sampled with temperature and nucleus) from a seeded
 * generator. The functions on score arrays are pure; pred_rows runs the
 * model's head over rows of the last pass a chunk at a time, so a 150k-word
 * vocabulary never needs more than a chunk's scores in memory. */
#ifndef ATTNVIZ_PREDICT_H
#define ATTNVIZ_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "capture.h"
#include "err.h"
#include "model.h"

#define PRED_MAX_K 100

int pred_alloc(CapPredictions *p, int n, int k, AvErr *e);
void pred_free(CapPredictions *p);

/* The k most probable of vocab scores logits[j * stride]: ids (k) by
 * decreasing probability (ties: the lower id first, as torch.topk and argmax
 * give them) and their softmax probabilities (k). -1 when a score is NaN. */
int pred_topk(const float *logits, size_t stride, int vocab, int k, int *ids, float *probs);
/* Reference: every probability computed in double, then a full sort. */
void pred_topk_naive(const float *logits, size_t stride, int vocab, int k, int *ids, float *probs);

typedef struct {
    uint64_t state;
} PredRng;
void pred_rng_seed(PredRng *r, uint64_t seed);
double pred_rng_uniform(PredRng *r); /* [0, 1) */

/* The next token from scores logits[j * stride]: temperature 0 takes the most
 * probable; otherwise softmax(logits / temperature), kept to the smallest set
 * of most probable tokens whose probability reaches top_p (1: all), drawn with
 * r. scratch: vocab floats and vocab ints. *prob: the token's probability
 * under the model's own distribution (temperature 1, no nucleus). */
int pred_sample(const float *logits, size_t stride, int vocab, float temperature, float top_p, PredRng *r,
                float *scratch, int *iscratch, int *id, float *prob);

/* Top-k at tokens rows[] of the model's last pass into p's entries
 * [first, first + n_rows), position = rows[i] + offset. */
int pred_rows(const Model *m, RunState *s, const int *rows, int n_rows, int offset, CapPredictions *p, int first,
              AvErr *e);

#endif
