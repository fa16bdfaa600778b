/* npy.h — NumPy .npy writer (format version 1.0, little-endian float32). */
#ifndef ATTNVIZ_NPY_H
#define ATTNVIZ_NPY_H

#include <stdio.h>
#include "err.h"
#include "output.h"

/* Attention of the selected layers and heads: float32 [layers, heads, n, n]. */
int npy_write_attention(FILE *f, const OutDoc *d, AvErr *e);
/* Queries (which = 'q') or keys ('k'): float32 [layers, heads, n, head_dim]. */
/* --measure norm: what 'n' value-weighted attention [layers, heads, n, n] or
 * 'v' value norms [layers, heads, n] (normattn.h). */
int npy_write_norm(FILE *f, const OutDoc *d, char what, AvErr *e);
int npy_write_qk(FILE *f, const OutDoc *d, char which, AvErr *e);
/* A model with attention sinks (gpt-oss): each row's sink share, float32 [layers, heads, n]. */
int npy_write_sinks(FILE *f, const OutDoc *d, AvErr *e);
/* With --predict: what = 'i' the top-K ids int32 [positions, K], 'p' their
 * probabilities float32 [positions, K], 'n' the positions int32 [positions]. */
int npy_write_predictions(FILE *f, const OutDoc *d, char what, AvErr *e);
/* The sequence's token ids, int32 [n] (with --generate: prompt and continuation). */
int npy_write_ids(FILE *f, const OutDoc *d, AvErr *e);
/* An encoder-decoder document's stack k (d->stacks[k]): float32 [layers, heads, rows, cols]. */
int npy_write_stack(FILE *f, const OutDoc *d, int k, AvErr *e);
/* Writes a .npy header for a float32 array of the given shape; _typed for
 * another NumPy descr ("<i4"). */
int npy_write_header(FILE *f, const long *shape, int ndim);
int npy_write_header_typed(FILE *f, const char *descr, const long *shape, int ndim);

#endif
