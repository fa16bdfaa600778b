/* gguf.h — memory-mapped GGUF v2/v3 reader: header, metadata key/values and
 * tensor infos, every count, length and offset checked against the image. */
#ifndef ATTNVIZ_GGUF_H
#define ATTNVIZ_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"
#include "util.h"

/* Metadata value types, numbered as in the file format. */
typedef enum {
    GGUF_V_U8 = 0, GGUF_V_I8 = 1, GGUF_V_U16 = 2, GGUF_V_I16 = 3, GGUF_V_U32 = 4,
    GGUF_V_I32 = 5, GGUF_V_F32 = 6, GGUF_V_BOOL = 7, GGUF_V_STRING = 8, GGUF_V_ARRAY = 9,
    GGUF_V_U64 = 10, GGUF_V_I64 = 11, GGUF_V_F64 = 12
} GgufVType;

/* ggml tensor types, numbered as in the file format (only those whose sizes we know). */
typedef enum {
    GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_Q4_0 = 2, GGUF_T_Q4_1 = 3, GGUF_T_Q5_0 = 6,
    GGUF_T_Q5_1 = 7, GGUF_T_Q8_0 = 8, GGUF_T_Q8_1 = 9, GGUF_T_Q2_K = 10, GGUF_T_Q3_K = 11,
    GGUF_T_Q4_K = 12, GGUF_T_Q5_K = 13, GGUF_T_Q6_K = 14, GGUF_T_Q8_K = 15, GGUF_T_I8 = 24,
    GGUF_T_I16 = 25, GGUF_T_I32 = 26, GGUF_T_I64 = 27, GGUF_T_F64 = 28, GGUF_T_BF16 = 30,
    GGUF_T_MXFP4 = 39
} GgufType;

#define GGUF_MAX_DIMS 4

typedef struct {
    char *key;                /* NUL-terminated copy */
    GgufVType type;
    GgufVType arr_type;       /* element type when type == GGUF_V_ARRAY */
    uint64_t arr_n;           /* element count when type == GGUF_V_ARRAY */
    const uint8_t *data;      /* value bytes inside the image (scalar, string length, or first element) */
    size_t nbytes;            /* bytes the value occupies */
    size_t *str_off;          /* string arrays: offset of each element from data */
} GgufKV;

typedef struct {
    char *name;               /* NUL-terminated copy */
    int n_dims;
    uint64_t dims[GGUF_MAX_DIMS]; /* dims[0] is the fastest-varying (row length) */
    GgufType type;
    uint64_t offset;          /* relative to the data section */
    const uint8_t *data;      /* inside the image */
    size_t nbytes;
} GgufTensor;

typedef struct GgufFile {
    void *map;                /* NULL when parsed from a caller's buffer */
    size_t map_len;
    uint32_t version;
    uint32_t alignment;
    int n_kv;
    GgufKV *kv;
    int n_tensors;
    GgufTensor *tensors;
    size_t data_offset;       /* start of the tensor data section */
    int32_t *kv_order;        /* (n_kv) kv indices sorted by key: gguf_find_kv bisects */
    int32_t *tensor_order;    /* (n_tensors) tensor indices sorted by name */
} GgufFile;

/* Block size (elements) and byte size per block of a tensor type; 0 when unknown. */
size_t gguf_type_block(uint32_t type);
size_t gguf_type_bytes(uint32_t type);
const char *gguf_type_name(uint32_t type);
const char *gguf_vtype_name(uint32_t vtype);

/* Parses an image in memory (kept referenced; not copied); name is used in messages. */
int gguf_parse(GgufFile *f, const void *buf, size_t len, const char *name, AvErr *e);
int gguf_open(GgufFile *f, const char *path, AvErr *e);
/* gguf_open holding the file as mode says (util.h's AvMapMode). */
int gguf_open_mode(GgufFile *f, const char *path, AvMapMode mode, AvErr *e);
void gguf_close(GgufFile *f);

const GgufKV *gguf_find_kv(const GgufFile *f, const char *key);
const GgufTensor *gguf_find_tensor(const GgufFile *f, const char *name);

/* Typed getters: -1 with a message naming the key when missing or of another type.
 * gguf_get_u32/i32 accept any integer type whose value fits. */
int gguf_get_u32(const GgufFile *f, const char *key, uint32_t *out, AvErr *e);
int gguf_get_i32(const GgufFile *f, const char *key, int32_t *out, AvErr *e);
int gguf_get_f32(const GgufFile *f, const char *key, float *out, AvErr *e);
int gguf_get_bool(const GgufFile *f, const char *key, int *out, AvErr *e);
/* String value: pointer into the image (not NUL-terminated) and its length. */
int gguf_get_str(const GgufFile *f, const char *key, const char **s, size_t *len, AvErr *e);
/* Array: element type and count; gguf_arr_str reads element i of a string array. */
int gguf_get_arr(const GgufFile *f, const char *key, GgufVType *type, uint64_t *n, AvErr *e);
int gguf_arr_str(const GgufKV *kv, uint64_t i, const char **s, size_t *len, AvErr *e);
/* Numeric element i of an array (or a scalar when i == 0) widened to double. */
int gguf_kv_num(const GgufKV *kv, uint64_t i, double *out, AvErr *e);

#endif
