/* generate.h — continuing a text token by token with a key/value cache,
 * capturing each new token's attention row as it is chosen, so that the
 * capture ends as a single pass over the final sequence would leave it. */
#ifndef ATTNVIZ_GENERATE_H
#define ATTNVIZ_GENERATE_H

#include <stdint.h>

#include "capture.h"
#include "err.h"
#include "model.h"

typedef struct {
    int max_new;           /* tokens to add at most */
    int k;                 /* top-K kept for each step */
    float temperature;     /* 0: greedy */
    float top_p;           /* 1: no nucleus */
    uint64_t seed;
    const int *eos;        /* stop after any of these (n_eos of them) */
    int n_eos;
    /* Called after each new token: nonzero stops there (a stop string was
     * written). NULL: never. */
    int (*stop)(void *ctx, const int *ids, int n_prompt, int n);
    void *stop_ctx;
    CapPredictions *all;   /* when not NULL: top-K of every position of the final
                              sequence, entries allocated for n_prompt + max_new */
} GenOptions;

/* ids holds the prompt's n_prompt tokens and room for max_new more; s and
 * kv hold n_prompt + max_new tokens, cap as many (its n_tokens is used as the
 * row stride while generating, then trimmed). Fills g (its steps allocated
 * here; gen_free) and *n_out, the final length. */
int gen_run(const Model *m, RunState *s, KvCache *kv, Capture *cap, int *ids, int n_prompt, const GenOptions *o,
            CapGeneration *g, int *n_out, AvErr *e);
void gen_free(CapGeneration *g);

#endif
