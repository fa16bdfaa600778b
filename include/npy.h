/* npy.h — NumPy .npy writer (format version 1.0, little-endian float32). */
#ifndef ATTNVIZ_NPY_H
#define ATTNVIZ_NPY_H

#include <stdio.h>
#include "err.h"
#include "output.h"

/* Attention of the selected layers and heads: float32 [layers, heads, n, n]. */
int npy_write_attention(FILE *f, const OutDoc *d, AvErr *e);
/* Queries (which = 'q') or keys ('k'): float32 [layers, heads, n, head_dim]. */
int npy_write_qk(FILE *f, const OutDoc *d, char which, AvErr *e);
/* Writes a .npy header for a float32 array of the given shape. */
int npy_write_header(FILE *f, const long *shape, int ndim);

#endif
