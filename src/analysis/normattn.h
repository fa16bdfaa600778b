/* normattn.h — value-weighted attention (--measure norm; Kobayashi et al.
 * 2020, "Attention is not only a weight"), derived downstream of the engine
 * from what a capture holds: the attention a_ij and each key token's value
 * norm ||f_h(x_j)|| (capture.h's vnorm, computed in the forward pass). */
#ifndef ATTNVIZ_NORMATTN_H
#define ATTNVIZ_NORMATTN_H

#include "capture.h"
#include "err.h"
#include "pool.h"

/* cap->nattn (blocks, n, n) = a_ij * ||f_h(x_j)|| = ||a_ij f_h(x_j)||, into
 * cap->nattn when it is set (the caller's buffer of na_bytes(n, blocks), whose
 * owner frees it), else allocated here (model_capture_free or na_free_nattn
 * frees it). Needs attn and vnorm. */
int na_fill(Capture *cap, AvErr *e);
/* na_fill with the blocks shared among a pool's threads (NULL: the caller's alone). */
int na_fill_pool(Capture *cap, Pool *pool, AvErr *e);
void na_free_nattn(Capture *cap);
/* Bytes na_fill adds to a capture of n tokens and that many blocks. */
size_t na_bytes(int n, size_t blocks);

/* The share of each key in a query's value-weighted attention: row i of
 * nattn divided by its sum (a row of zeros stays zeros), so rows sum to 1 as
 * attention's do. What the page draws in its Norm-weighted mode and what
 * --stats and heads score with --measure norm. dst (n, n); src nattn's
 * block (n, n). dst may be src. */
void na_shares(float *dst, const float *src, int n);

/* A capture like cap whose attn is the shares of cap->nattn (every block),
 * nothing else (no q/k, hidden states, value norms): for --stats and heads.
 * out->attn is owned (na_shares_free). */
int na_shares_capture(const Capture *cap, Capture *out, AvErr *e);
void na_shares_free(Capture *out);

#endif
