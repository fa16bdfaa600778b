/* selection.h — which layers and heads a run keeps and which the page opens
 * on, and the one check of them against a model's (or a given attention's)
 * shape. */
#ifndef ATTNVIZ_SELECTION_H
#define ATTNVIZ_SELECTION_H

#include "err.h"

typedef struct {
    int layer, head;                 /* --layer/--head: the page's first; -1 = unset */
    const int *layers;               /* --layers, sorted; NULL = all */
    int n_layers;
    const int *heads;                /* --heads, sorted; NULL = all */
    int n_heads;
    const int *show_heads;           /* --show-heads: the page's first heads; NULL = all */
    int n_show_heads;
} Selection;

/* Every index below its limit (n_layers layers, n_heads heads of what owner
 * names: "model" or "attention"), and --layer/--head among --layers/--heads.
 * A usage error (av_err_usage) naming the option when not. */
int sel_check(const Selection *s, int n_layers, int n_heads, const char *owner, AvErr *e);

#endif
