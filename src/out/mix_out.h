/* mix_out.h — writers of mixing.h's results (--measure alti|rollout): JSON
 * members and .npy arrays of the selected layers, from the OutDoc alone. */
#ifndef ATTNVIZ_MIX_OUT_H
#define ATTNVIZ_MIX_OUT_H

#include <stdio.h>

#include "err.h"
#include "output.h"

/* Per measure k of d->mix: ,NAME:[layer][query][key] (through that layer) and
 * ,NAME_layer:[layer][query][key] (that layer alone); -1 on a write error.
 * ("measure" and "measures" are json_out.c's.) */
int mix_json_members(FILE *f, const OutDoc *d);
/* float32 [selected layers, n, n] of d->mix[k]: layer_only 0 the measure through each layer, 1 each layer's own. */
int mix_npy_write(FILE *f, const OutDoc *d, int k, int layer_only, AvErr *e);
/* Selected layer li's matrix (n, n) of d->mix[k] (through it, or its own). */
const float *mix_doc_layer(const OutDoc *d, int k, int li, int layer_only);

#endif
