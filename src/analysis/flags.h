/* flags.h — what a reader of raw attention should be warned of (massive.c):
 *
 * Attention sinks (Xiao et al. 2024, "Efficient Streaming Language Models with
 * Attention Sinks"): a head that parks most of its weight on the first token
 * (a decoder's BOS, an encoder's [CLS]) whatever the query, or, in models with
 * learned sinks (gpt-oss), on its sink logit, which no key has. Per selected
 * head: first = the mean over query rows 1..n-1 of the weight on key 0 (row 0
 * of a causal model can see nothing else), learned = the mean over every row
 * of the learned sink's share (capture.h's sinks); the head is a sink head
 * when first + learned >= FLAGS_SINK_SHARE.
 *
 * Massive activations (Sun et al. 2024, "Massive Activations in Large Language
 * Models"): a few entries of the residual stream about 1,000x to 100,000x its
 * median magnitude, in fixed dimensions and on a few tokens (the first, a
 * delimiter). Per block of the stream the pass made (capture.h's act_*: the
 * embeddings, then after each layer), an entry is massive when |x| > 100 and
 * |x| > 1000 x the block's median |x|, the paper's criterion; the capture
 * keeps each block's CAP_ACT_TOP largest, so at most that many are found per
 * block. */
#ifndef ATTNVIZ_FLAGS_H
#define ATTNVIZ_FLAGS_H

#include "capture.h"
#include "err.h"

#define FLAGS_SINK_SHARE 0.5   /* a sink head: at least this share of its weight on the sink */
#define FLAGS_SINK_PAST 2      /* Xiao et al.'s "past the first layers": layers from this one on */
#define FLAGS_MASSIVE_ABS 100.0
#define FLAGS_MASSIVE_RATIO 1000.0

typedef struct {
    int block;         /* 0: the embeddings; l + 1: after layer l */
    int token, dim;
    float value;       /* signed */
    float ratio;       /* |value| / the block's median |x| */
} FlagsEntry;

typedef struct FlagsResult {
    /* sinks of the heads in the lists given (layers[i], heads[k]) */
    int nl, nh;
    int *layers, *heads;
    float *first;      /* (nl, nh) */
    float *learned;    /* (nl, nh), or NULL: the model has no learned sinks */
    /* massive activations */
    int blocks;        /* blocks the pass made */
    float *median;     /* (blocks) */
    float *max_abs;    /* (blocks) the largest |x| */
    FlagsEntry *found; /* (n_found) the massive entries, block by block, largest first */
    int n_found;
} FlagsResult;

void flags_free(FlagsResult *f);
/* Sinks of the layers and heads listed (NULL: all) from cap's attention (which
 * must hold them) and learned sink shares; the massive activations from cap's
 * act_* when it has them (else blocks 0). */
int flags_compute(const Capture *cap, const int *layers, int nl, const int *heads, int nh, FlagsResult *f, AvErr *e);
/* Whether (selected) head (li, hk) is a sink head. */
static inline int flags_sink_head(const FlagsResult *f, int li, int hk) {
    const size_t at = (size_t)li * f->nh + hk;
    return f->first[at] + (f->learned ? f->learned[at] : 0.0f) >= FLAGS_SINK_SHARE;
}

#endif
