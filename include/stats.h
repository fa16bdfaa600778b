/* stats.h — per-head attention statistics, averaged over a batch: entropy,
 * mean attention distance, and the share of attention on [CLS], [SEP], the
 * token itself, the previous and the next token. */
#ifndef ATTNVIZ_STATS_H
#define ATTNVIZ_STATS_H

#include <stdio.h>
#include "err.h"
#include "output.h"

enum { ST_ENTROPY, ST_DISTANCE, ST_CLS, ST_SEP, ST_SELF, ST_PREV, ST_NEXT, ST_N };

typedef struct {
    int n_layers, n_heads; /* of the model; selections apply when printing */
    double *sum;           /* (n_layers, n_heads, ST_N) sums of per-input means */
    long *count;           /* (n_layers, n_heads, ST_N) inputs contributing */
    long inputs;
} HeadStats;

int stats_init(HeadStats *s, int n_layers, int n_heads, AvErr *e);
void stats_free(HeadStats *s);
/* Adds one input (its selected layers and heads). */
void stats_add(HeadStats *s, const OutDoc *d);
/* Mean over inputs of statistic k for (layer, head); NaN when no input had an applicable row. */
double stats_mean(const HeadStats *s, int layer, int head, int k);
int stats_write_table(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);
int stats_write_json(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);

#endif
