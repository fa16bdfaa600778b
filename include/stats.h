/* stats.h — per-head attention statistics, averaged over a batch: entropy,
 * mean attention distance, and the share of attention on [CLS], [SEP], the
 * token itself, the previous and the next token. The accumulator is shared by
 * `attnviz heads` (heads.h), whose scores are other names over the same sums. */
#ifndef ATTNVIZ_STATS_H
#define ATTNVIZ_STATS_H

#include <stdint.h>
#include <stdio.h>
#include "err.h"
#include "output.h"

enum { ST_ENTROPY, ST_DISTANCE, ST_CLS, ST_SEP, ST_SELF, ST_PREV, ST_NEXT, ST_N };

/* Each input's value is rounded to a multiple of 2^-STATS_FRAC_BITS and summed
 * as an integer: integer sums do not depend on the order of addition, so a
 * corpus summed whole and the sum of its shards' sums (attnviz stats --merge)
 * are the same number, bit for bit. The rounding (2.3e-10) is far below the
 * float32 attention's own precision. */
#define STATS_FRAC_BITS 32
#define STATS_MAX_SCORES 16

typedef struct {
    int n_layers, n_heads;  /* of the model; selections apply when printing */
    int n_scores;
    const char *names[STATS_MAX_SCORES]; /* (n_scores) static strings: the struct may be copied */
    int64_t *sum;           /* (n_layers, n_heads, n_scores) sums of per-input values, fixed point */
    long *count;            /* (n_layers, n_heads, n_scores) inputs contributing */
    unsigned char *present; /* (n_layers, n_heads) heads that were added (or merged) */
    long inputs;
    const char *measure;    /* "norm": value-weighted attention's shares were scored (--measure norm); NULL: attention */
} HeadStats;

/* The --stats statistics (ST_N of them). */
int stats_init(HeadStats *s, int n_layers, int n_heads, AvErr *e);
/* Any list of named scores (at most STATS_MAX_SCORES; the names must be static). */
int stats_init_named(HeadStats *s, int n_layers, int n_heads, int n_scores, const char *const *names, AvErr *e);
void stats_free(HeadStats *s);
const char *const *stats_names(void);
/* Adds one input's value of score k for (layer, head); -1 when the sum would overflow. */
int stats_put(HeadStats *s, int layer, int head, int k, double v, AvErr *e);
/* Adds another accumulator's sums and counts (same shape and names), and its inputs. */
int stats_merge(HeadStats *into, const HeadStats *from, AvErr *e);
/* Adds one input (its selected layers and heads). */
int stats_add(HeadStats *s, const OutDoc *d, AvErr *e);
/* Adds one input's encoder-decoder stack st (the document's layers in order, every head); cols: the tokens
 * of its columns (their [CLS]/[SEP] roles). Cross attention (rows the decoder's tokens, columns the source's)
 * has no diagonal: its distance, self, previous and next have no rows (null); entropy and the shares of the
 * source's specials are scored. */
int stats_add_stack(HeadStats *s, const OutDoc *d, const CapStack *st, const TokEncoding *cols, AvErr *e);
/* Mean over inputs of score k for (layer, head); NaN when no input had an applicable row. */
double stats_mean(const HeadStats *s, int layer, int head, int k);
int stats_write_table(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);
/* {"kind":"stats", ...}: means, and the sums and counts that merging needs. */
int stats_write_json(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);
/* An encoder-decoder model's: s[0]'s members at the top level (as stats_write_json's) with "stack": names[0],
 * and "stacks": {names[k]: the members of s[k]} for the others. */
int stats_write_json_stacks(FILE *f, const HeadStats *const *s, const char *const *names, int n, const OutDoc *d,
                            AvErr *e);
/* The shared members (no braces): "kind", "model", "inputs", shape, "scores", and
 * "heads": one object per present head with each score's mean, "sum" and "count". */
void stats_write_members(FILE *f, const HeadStats *s, const char *kind, const char *model);

#endif
