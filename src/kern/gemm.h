/* gemm.h — the matrix product behind every linear layer and attention's q·kᵀ and
 * weights·v (gemm_rows_ld), with one fixed rounding per output:
 *
 *     total = 0
 *     for each block of GEMM_KB inputs (k = b .. b + GEMM_KB - 1, b = 0, GEMM_KB, ...):
 *         acc = 0;  for k in the block:  acc = fmaf(W[r][k], xT[k][j], acc)
 *         total = total + acc
 *     yT[r][j] = total
 *
 * whatever the number of tokens, the tile an output falls in, the kernel or
 * the thread that computes it. That is what makes an input's numbers the same
 * alone or packed with others into one pass (batches), and the same on every
 * CPU, where BLAS kernels round a column differently depending on where it
 * sits. Short chains summed, not one chain over all inputs: a single chain's
 * rounding error grows with the input width (768 to 3072 here), and through
 * the layers of a long input it came to twice a float32 BLAS's. */
#ifndef ATTNVIZ_GEMM_H
#define ATTNVIZ_GEMM_H

#include <stddef.h>

#include "err.h"

/* Rows a panel of W holds, inputs a block of k spans, and the scratch
 * gemm_rows needs (floats): the AVX2 kernel packs panels of 24 rows and
 * blocks of x of 128 tokens. */
#define GEMM_MR 16
#define GEMM_KC 256
#define GEMM_SCRATCH ((24 + 128) * GEMM_KC)
/* Inputs per chain (above); GEMM_KC is a multiple of it, so a chain never
 * straddles two panels. */
#define GEMM_KB 32

/* The storage of W's elements: products widen half-precision weights as they
 * copy them into a panel, so a pass reads them at their own size. */
typedef enum { GEMM_F32, GEMM_BF16, GEMM_F16 } GemmType;

/* yT (rows, n), row stride n, = W (rows, in) xT (in, n), where W[r][k] is
 * element r * w_row + k * w_col of w (either layout of a weight); scratch:
 * GEMM_SCRATCH floats, 64-byte aligned. */
void gemm_rows(float *yT, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT, int n, int rows,
               int in, float *scratch);
/* The same with row strides of their own: xT (in, n) row stride ldx, yT (rows,
 * n) row stride ldy; for products over parts of larger matrices (attention's
 * q k^T and probs v, the causal triangle a block of rows at a time). */
void gemm_rows_ld(float *yT, size_t ldy, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT,
                  size_t ldx, int n, int rows, int in, float *scratch);
/* The definition above as plain loops of fmaf, the reference the fast paths must equal bit for bit. */
void gemm_rows_naive(float *yT, const void *w, GemmType type, size_t w_row, size_t w_col, const float *xT, int n,
                     int rows, int in);
void gemm_rows_ld_naive(float *yT, size_t ldy, const void *w, GemmType type, size_t w_row, size_t w_col,
                        const float *xT, size_t ldx, int n, int rows, int in);

/* Which kernel gemm_rows runs on this CPU ("avx512", "avx2", "neon" or "scalar"); force:
 * tests pin one that the CPU has (returns -1 if it lacks it), NULL: back to the best. */
const char *gemm_kernel(void);
int gemm_force_kernel(const char *name);
/* The build of the element-wise loops (vecfn.h) that goes with that kernel:
 * 2 for AVX-512 (the avx512 kernel, on a CPU with all of x86-64-v4), 1 for
 * AVX2 (the avx2 kernel, or avx512 without the rest of x86-64-v4), 0 for
 * baseline code (scalar, neon). */
int gemm_vec_level(void);

/* The environment variable that pins a kernel for a whole run, so one machine
 * can run and time every path its CPU has. gemm_kernel_from_env applies it:
 * -1 and a message when it names a kernel this build lacks or this CPU can't
 * run (the CLI's usage error); unset or empty leaves the best kernel. */
#define GEMM_KERNEL_ENV "ATTNVIZ_KERNEL"
int gemm_kernel_from_env(AvErr *e);
/* The build's kernels ("avx512|avx2|scalar"), or only those this CPU can run. */
const char *gemm_kernel_list(int usable);

#endif
