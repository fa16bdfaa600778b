/* diff.h — comparing attention between two inputs (attnviz diff): two texts
 * on one model, or one text on two models of the same tokenizer.
 *
 * Alignment: a longest common subsequence of the two token-id sequences
 * (special tokens included), matches taken as early as possible; a token
 * outside it is unaligned. With one text on two models every token aligns.
 *
 * Divergence of one head: the mean, over aligned query rows (i_a, i_b), of the
 * Jensen–Shannon divergence in bits (log base 2: 0 = the same distribution,
 * 1 = disjoint supports) between A's row i_a and B's row i_b, both read over
 * the merged key axis: aligned key pairs, then A's unaligned keys (where B's
 * weight is 0) and B's unaligned keys (where A's is 0). Each row is divided
 * by its sum first (float rounding), as scipy's jensenshannon does. Mass on a
 * key the other input lacks thus counts as fully divergent:
 *   JSD = sum over aligned keys of  ½ p log2(2p/(p+q)) + ½ q log2(2q/(p+q))
 *       + ½ (A's mass on its unaligned keys + B's mass on its unaligned keys).
 * Unaligned query rows have no counterpart and are left out.
 *
 * Sink mass of one head: the mean, over query rows 1..n-1 of one input, of
 * the weight on key 0 (the first token, where many heads park attention they
 * do not use; row 0 has nothing else to look at in a causal model, so it is
 * left out; with one token, row 0's). Compared as B - A: how much a second
 * model (a quantization of the first, say) moves a head's parked mass. */
#ifndef ATTNVIZ_DIFF_H
#define ATTNVIZ_DIFF_H

#include <stdio.h>

#include "err.h"
#include "output.h"

typedef struct {
    int n_a, n_b;
    int *a_to_b;  /* (n_a): the B token aligned with A's token i, or -1 */
    int *b_to_a;  /* (n_b) */
    int n_pairs;
} DiffAlign;

/* Aligns id sequences a (n_a) and b (n_b); -1 when the differing middle is too
 * long to align in memory. */
int diff_align(const int *a, int n_a, const int *b, int n_b, DiffAlign *out, AvErr *e);
void diff_align_free(DiffAlign *al);

/* JSD in bits of A's attention row pa (n_a weights) and B's row pb (n_b). */
double diff_jsd_row(const float *pa, const float *pb, const DiffAlign *al);
/* One head: A's matrix (n_a x n_a) and B's (n_b x n_b); the mean row JSD over
 * aligned query rows (0 when none aligns). */
double diff_head_jsd(const float *A, const float *B, const DiffAlign *al);

/* Every selected (layer, head) of a's capture against b's: out (selected
 * layers x heads). Both captures hold the same selection. */
int diff_divergence(const OutDoc *a, const OutDoc *b, const DiffAlign *al, double *out, AvErr *e);

/* Sink mass of one head's matrix A (n x n). */
double diff_sink_mass(const float *A, int n);
/* Every selected (layer, head) of d's capture: out (selected layers x heads). */
int diff_sinks(const OutDoc *d, double *out, AvErr *e);

/* Encoder-decoder models: the three stacks of two (source, decoder text) inputs compared.
 * Cross attention's divergence of one head: the mean over decoder rows aligned by
 * rows (A's i, B's rows->a_to_b[i]) of the JSD of the rows over the source keys
 * aligned by cols; its sink mass: the mean over every decoder row of the weight on
 * source token 0 (each row sees the whole source). */
double diff_cross_jsd(const float *A, const float *B, const DiffAlign *rows, const DiffAlign *cols);
double diff_cross_sink(const float *A, int n_rows, int n_cols);

#endif
