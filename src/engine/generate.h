/* generate.h — continuing a text token by token with a key/value cache,
 * capturing each new token's attention row as it is chosen, so that the
 * capture ends as a single pass over the final sequence would leave it. */
#ifndef ATTNVIZ_GENERATE_H
#define ATTNVIZ_GENERATE_H

#include <stdint.h>

#include "capture.h"
#include "err.h"
#include "model.h"

/* The most log-probabilities a step hands to on_token besides the chosen token's. */
#define GEN_MAX_LOGPROBS 20

/* One generated token as on_token sees it. */
typedef struct {
    int index;                   /* 0 for the first generated token */
    int position;                /* its position in the sequence: n_prompt + index */
    int id;
    float prob;                  /* the model's probability of it (softmax of the raw scores) */
    double logprob;              /* its log-probability, the same distribution (with GenOptions.logprobs) */
    int n_top;                   /* GenOptions.top_logprobs */
    const int *top_ids;          /* (n_top) the most probable tokens at that step, most probable first */
    const double *top_logprobs;  /* (n_top) their log-probabilities */
    const int *ids;              /* (position + 1) the sequence so far */
} GenToken;

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
    /* Called once the prompt has run (cap, if any, holds its rows): nonzero
     * stops before any token is chosen. NULL: none. */
    int (*on_prompt)(void *ctx, int n_prompt);
    /* Called with each new token, after its own pass when cap is given (its
     * attention row is then in cap, and cap's rows window starts at its
     * position), else as soon as it is chosen: nonzero ends the generation
     * after it (g->stop CAP_STOP_STRING). NULL: none. */
    int (*on_token)(void *ctx, const GenToken *t);
    void *cb_ctx;          /* on_prompt's and on_token's */
    int logprobs;          /* 1: log-probabilities for on_token (a log-softmax over the vocabulary a step): the
                              chosen token's and those of the top_logprobs (0..GEN_MAX_LOGPROBS) most probable */
    int top_logprobs;
    ModelProgress progress; /* told the prompt pass's layers, then each new token (fn NULL: nobody) */
} GenOptions;

/* ids holds the prompt's n_prompt tokens and room for max_new more; s and
 * kv hold n_prompt + max_new tokens, cap as many (its n_tokens is used as the
 * row stride while generating, then trimmed). Fills g (its steps allocated
 * here; gen_free) and *n_out, the final length. cap NULL: nothing captured,
 * and a token that ends the generation is not run (nothing reads its pass). */
int gen_run(const Model *m, RunState *s, KvCache *kv, Capture *cap, int *ids, int n_prompt, const GenOptions *o,
            CapGeneration *g, int *n_out, AvErr *e);
void gen_free(CapGeneration *g);

#endif
