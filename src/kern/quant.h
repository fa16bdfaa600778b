/* quant.h — dequantizers for ggml weight types: rows [r0, r1) of a
 * (rows, cols) tensor widened to float, so the engine can keep weights
 * quantized and widen per tile. */
#ifndef ATTNVIZ_QUANT_H
#define ATTNVIZ_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

/* 1 when quant_rows can widen this ggml type (numbered as in GGUF). */
int quant_supported(uint32_t type);
float quant_f16(uint16_t h);
/* Widens rows [r0, r1) of a tensor of rows x cols elements stored at data
 * (nbytes long) into out[(r1 - r0) * cols]; name is used in messages.
 * Vectorizable whole-run loops; the one the engine calls per tile. */
int quant_rows(uint32_t type, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
               float *out, const char *name, AvErr *e);
/* The reference quant_rows is tested against: one block at a time, written
 * straight from the block layouts; same arguments, checks and results. */
int quant_rows_naive(uint32_t type, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0,
                     size_t r1, float *out, const char *name, AvErr *e);

/* One token's product straight from the blocks, for a generation step:
 * y[i] = sum_k W[r0 + i][k] x[k] for rows [r0, r1), W as quant_rows widens it,
 * without widening it (per block: scale times the codes' dot product with x,
 * plus offset times x's sum over the block; within float rounding of the
 * widened product). Covers Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and
 * MXFP4 (quant_matvec_covers); other types are an error. SIMD per
 * gemm_vec_level(). scratch: quant_matvec_scratch(cols) floats. */
int quant_matvec_covers(uint32_t type);
size_t quant_matvec_scratch(size_t cols);
int quant_matvec(uint32_t type, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0, size_t r1,
                 const float *x, float *y, float *scratch, const char *name, AvErr *e);
/* Its reference: each row widened by quant_rows_naive, summed in double. */
int quant_matvec_naive(uint32_t type, const uint8_t *data, size_t nbytes, size_t rows, size_t cols, size_t r0,
                       size_t r1, const float *x, float *y, const char *name, AvErr *e);

#endif
