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

#endif
