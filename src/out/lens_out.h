/* lens_out.h — writers of lens.h's results: JSON members ("logit_lens",
 * "logit_lens_layers", "logit_lens_final", "attribution", "ablation") and
 * .npy arrays, from the OutDoc alone. */
#ifndef ATTNVIZ_LENS_OUT_H
#define ATTNVIZ_LENS_OUT_H

#include <stdio.h>

#include "err.h"
#include "output.h"

/* The members, each after a comma, when d->lens is set; -1 on a write error. */
int lens_json_members(FILE *f, const OutDoc *d);

/* The arrays: ids (layers, n, K) int32, probs (layers, n, K), rank (layers, n)
 * int32, attribution heads (positions, L, H), MLPs (positions, L), ablation
 * effects (L, H) with NaN where a head was not ablated. */
enum { LENS_NPY_IDS, LENS_NPY_PROBS, LENS_NPY_RANK, LENS_NPY_ATTR_HEADS, LENS_NPY_ATTR_MLP, LENS_NPY_ABLATION };
int lens_npy_has(const OutDoc *d, int what);
int lens_npy_write(FILE *f, const OutDoc *d, int what, AvErr *e);

#endif
