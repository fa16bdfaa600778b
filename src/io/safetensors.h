/* safetensors.h — memory-mapped reader (and a small writer) for .safetensors files.
 * Format: u64 little-endian header length N, N bytes of JSON header
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
 * then the data section; offsets are relative to its start. */
#ifndef ATTNVIZ_SAFETENSORS_H
#define ATTNVIZ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"
#include "util.h"

#define ST_MAX_DIMS 8

typedef enum { ST_F32 = 0, ST_F16, ST_BF16, ST_OTHER } StDtype;

typedef struct {
    char *name;
    StDtype dtype;
    char dtype_name[16];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const uint8_t *data; /* into the mapping */
    size_t nbytes;
} StTensor;

typedef struct {
    char *path;
    uint8_t *map;        /* whole file, read-only */
    size_t map_len;
    StTensor *tensors;   /* (n_tensors) */
    int n_tensors;
    int32_t *order;      /* (n_tensors) tensor indices sorted by name: st_find bisects; NULL: scans */
} StFile;

int st_open(StFile *f, const char *path, AvErr *e);
/* st_open holding the file as mode says (util.h's AvMapMode). */
int st_open_mode(StFile *f, const char *path, AvMapMode mode, AvErr *e);
/* Parses a header from memory (fuzzing, tests): buf is the whole file image. */
int st_parse(StFile *f, const uint8_t *buf, size_t len, const char *path, AvErr *e);

/* Holds path as mode says (files shorter than min_len fail with the too_short text) and
 * fills f with parse, a reader of a whole file image such as st_parse: how the
 * other checkpoint formats (torchbin.h) share st_open's mapping and cleanup. */
typedef int (*StParseFn)(StFile *f, const uint8_t *buf, size_t len, const char *path, AvErr *e);
int st_open_with(StFile *f, const char *path, size_t min_len, const char *too_short, StParseFn parse, AvMapMode mode,
                 AvErr *e);
void st_close(StFile *f);
/* Sorts f's tensor names for st_find (a reader's last step); a name twice is refused. */
int st_index(StFile *f, const char *path, AvErr *e);

const StTensor *st_find(const StFile *f, const char *name);
size_t st_dtype_size(StDtype d);
const char *st_dtype_name(StDtype d);

/* Converts a tensor to float32 into dst (numel floats). */
void st_to_f32(const StTensor *t, float *dst);
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);
uint16_t st_f32_to_bf16(float f);

/* Writer: tensors given as float32 and stored in dtype. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const float *data;
} StWriteTensor;

int st_write(const char *path, const StWriteTensor *ts, int n, StDtype dtype, AvErr *e);

#endif
