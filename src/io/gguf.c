/* gguf.c — GGUF v2/v3 reader. The image is never trusted: every read goes
 * through a bounds-checked cursor, counts are capped by what the remaining
 * bytes could hold before anything is allocated, and tensor extents are
 * checked with overflow-safe arithmetic. */
#include "gguf.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_MAX_KEY 65536u
#define GGUF_MAX_ALIGN 65536u

static const struct { uint32_t t; const char *n; size_t blk, bytes; } TYPES[] = {
    {GGUF_T_F32, "F32", 1, 4},       {GGUF_T_F16, "F16", 1, 2},       {GGUF_T_Q4_0, "Q4_0", 32, 18},
    {GGUF_T_Q4_1, "Q4_1", 32, 20},   {GGUF_T_Q5_0, "Q5_0", 32, 22},   {GGUF_T_Q5_1, "Q5_1", 32, 24},
    {GGUF_T_Q8_0, "Q8_0", 32, 34},   {GGUF_T_Q8_1, "Q8_1", 32, 36},   {GGUF_T_Q2_K, "Q2_K", 256, 84},
    {GGUF_T_Q3_K, "Q3_K", 256, 110}, {GGUF_T_Q4_K, "Q4_K", 256, 144}, {GGUF_T_Q5_K, "Q5_K", 256, 176},
    {GGUF_T_Q6_K, "Q6_K", 256, 210}, {GGUF_T_Q8_K, "Q8_K", 256, 292}, {GGUF_T_I8, "I8", 1, 1},
    {GGUF_T_I16, "I16", 1, 2},       {GGUF_T_I32, "I32", 1, 4},       {GGUF_T_I64, "I64", 1, 8},
    {GGUF_T_F64, "F64", 1, 8},       {GGUF_T_BF16, "BF16", 1, 2},     {GGUF_T_MXFP4, "MXFP4", 32, 17},
};

size_t gguf_type_block(uint32_t type) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == type) return TYPES[i].blk;
    return 0;
}

size_t gguf_type_bytes(uint32_t type) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == type) return TYPES[i].bytes;
    return 0;
}

const char *gguf_type_name(uint32_t type) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == type) return TYPES[i].n;
    return "?";
}

static const char *VNAMES[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                               "bool", "string", "array", "u64", "i64", "f64"};

const char *gguf_vtype_name(uint32_t vtype) {
    return vtype < sizeof VNAMES / sizeof VNAMES[0] ? VNAMES[vtype] : "?";
}

/* Byte size of a fixed-size value type; 0 for string/array/unknown. */
static size_t vsize(uint32_t t) {
    switch (t) {
    case GGUF_V_U8: case GGUF_V_I8: case GGUF_V_BOOL: return 1;
    case GGUF_V_U16: case GGUF_V_I16: return 2;
    case GGUF_V_U32: case GGUF_V_I32: case GGUF_V_F32: return 4;
    case GGUF_V_U64: case GGUF_V_I64: case GGUF_V_F64: return 8;
    default: return 0;
    }
}

typedef struct {
    const uint8_t *p;
    size_t len, pos;
} Cur;

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int need(const Cur *c, size_t n) { return c->len - c->pos >= n; }

static int get_u32(Cur *c, uint32_t *v) {
    if (!need(c, 4)) return -1;
    *v = (uint32_t)rd_le(c->p + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int get_u64(Cur *c, uint64_t *v) {
    if (!need(c, 8)) return -1;
    *v = rd_le(c->p + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* A length-prefixed string: sets s/len pointing into the image. */
static int get_str(Cur *c, const uint8_t **s, uint64_t *n) {
    if (get_u64(c, n) != 0) return -1;
    if (*n > c->len - c->pos) return -1;
    *s = c->p + c->pos;
    c->pos += (size_t)*n;
    return 0;
}

static char *dup_str(const uint8_t *s, uint64_t n) {
    char *r = malloc((size_t)n + 1);
    if (!r) return NULL;
    memcpy(r, s, (size_t)n);
    r[n] = 0;
    return r;
}

void gguf_close(GgufFile *f) {
    if (!f) return;
    for (int i = 0; i < f->n_kv; i++) {
        free(f->kv[i].key);
        free(f->kv[i].str_off);
    }
    free(f->kv);
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->kv_order), free(f->tensor_order);
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

/* Reads one value of type t at the cursor into kv (arrays of arrays refused). */
static int parse_value(Cur *c, GgufKV *kv, uint32_t t, const char *name, AvErr *e) {
    kv->type = (GgufVType)t;
    kv->data = c->p + c->pos;
    size_t start = c->pos;
    if (t == GGUF_V_STRING) {
        const uint8_t *s;
        uint64_t n;
        if (get_str(c, &s, &n) != 0) return av_err(e, "%s: key '%s': string runs past end of file", name, kv->key);
    } else if (t == GGUF_V_ARRAY) {
        uint32_t at;
        uint64_t n;
        if (get_u32(c, &at) != 0 || get_u64(c, &n) != 0)
            return av_err(e, "%s: key '%s': truncated array header", name, kv->key);
        if (at == GGUF_V_ARRAY) return av_err(e, "%s: key '%s': nested arrays are not supported", name, kv->key);
        kv->arr_type = (GgufVType)at;
        kv->arr_n = n;
        kv->data = c->p + c->pos;
        start = c->pos;
        if (at == GGUF_V_STRING) {
            /* each element needs at least its 8-byte length, which bounds the index */
            if (n > (c->len - c->pos) / 8)
                return av_err(e, "%s: key '%s': array of %llu strings exceeds the file", name, kv->key,
                              (unsigned long long)n);
            kv->str_off = malloc((n ? (size_t)n : 1) * sizeof *kv->str_off);
            if (!kv->str_off) return av_err(e, "%s: key '%s': out of memory", name, kv->key);
            for (uint64_t i = 0; i < n; i++) {
                const uint8_t *s;
                uint64_t sl;
                kv->str_off[i] = c->pos - start;
                if (get_str(c, &s, &sl) != 0)
                    return av_err(e, "%s: key '%s': string %llu runs past end of file", name, kv->key,
                                  (unsigned long long)i);
            }
        } else {
            size_t es = vsize(at);
            if (es == 0) return av_err(e, "%s: key '%s': unknown array element type %u", name, kv->key, at);
            if (n > (c->len - c->pos) / es)
                return av_err(e, "%s: key '%s': array of %llu elements runs past end of file", name, kv->key,
                              (unsigned long long)n);
            c->pos += (size_t)n * es;
        }
    } else {
        size_t es = vsize(t);
        if (es == 0) return av_err(e, "%s: key '%s': unknown value type %u", name, kv->key, t);
        if (!need(c, es)) return av_err(e, "%s: key '%s': value runs past end of file", name, kv->key);
        c->pos += es;
    }
    kv->nbytes = c->pos - start;
    return 0;
}

static const char *name_at(const GgufFile *f, int tensors, int32_t i) {
    return tensors ? f->tensors[i].name : f->kv[i].key;
}

typedef struct {
    const GgufFile *f;
    int tensors;
} ByName;

static int cmp_index(const void *a, const void *b, void *ctx) {
    const ByName *c = ctx;
    return strcmp(name_at(c->f, c->tensors, *(const int32_t *)a), name_at(c->f, c->tensors, *(const int32_t *)b));
}

/* The keys (or tensor names) in sorted order, for lookups by bisection: a loader looking up
 * every tensor of a file of many costs n log n, not n^2. A name twice would make lookups
 * ambiguous: neighbours compared. */
static int index_names(GgufFile *f, int tensors, const char *what, const char *name, AvErr *e) {
    const int n = tensors ? f->n_tensors : f->n_kv;
    int32_t *ord = malloc((size_t)(n ? n : 1) * sizeof *ord);
    if (!ord) return av_err(e, "%s: out of memory", name);
    for (int32_t i = 0; i < n; i++) ord[i] = i;
    ByName c = {f, tensors};
    qsort_r(ord, (size_t)n, sizeof *ord, cmp_index, &c);
    if (tensors) f->tensor_order = ord;
    else f->kv_order = ord;
    for (int i = 1; i < n; i++)
        if (!strcmp(name_at(f, tensors, ord[i - 1]), name_at(f, tensors, ord[i])))
            return av_err(e, "%s: duplicate %s '%.200s'", name, what, name_at(f, tensors, ord[i]));
    return 0;
}

static int32_t find_name(const GgufFile *f, int tensors, const char *key) {
    const int n = tensors ? f->n_tensors : f->n_kv;
    const int32_t *ord = tensors ? f->tensor_order : f->kv_order;
    if (!ord) { /* not indexed (a struct filled by hand) */
        for (int32_t i = 0; i < n; i++)
            if (!strcmp(name_at(f, tensors, i), key)) return i;
        return -1;
    }
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2, c = strcmp(name_at(f, tensors, ord[mid]), key);
        if (!c) return ord[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const GgufTensor *x = *(const GgufTensor *const *)a, *y = *(const GgufTensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Tensors sharing bytes mean a corrupt or hostile file (as safetensors.c refuses). */
static int check_overlap(const GgufFile *f, const char *name, AvErr *e) {
    if (f->n_tensors < 2) return 0;
    const GgufTensor **by = malloc((size_t)f->n_tensors * sizeof *by);
    if (!by) return av_err(e, "%s: out of memory", name);
    for (int i = 0; i < f->n_tensors; i++) by[i] = &f->tensors[i];
    qsort(by, (size_t)f->n_tensors, sizeof *by, cmp_tensor_offset);
    int rc = 0, far = 0; /* far: the tensor reaching furthest so far (an empty one must not hide an overlap) */
    for (int i = 1; i < f->n_tensors && !rc; i++) {
        if (by[i]->nbytes && by[far]->offset + by[far]->nbytes > by[i]->offset)
            rc = av_err(e, "%s: tensors '%s' and '%s' overlap in the data section", name, by[far]->name, by[i]->name);
        if (by[i]->offset + by[i]->nbytes > by[far]->offset + by[far]->nbytes) far = i;
    }
    free(by);
    return rc;
}

static int parse(GgufFile *f, const uint8_t *p, size_t len, const char *name, AvErr *e) {
    Cur c = {p, len, 0};
    uint32_t magic, version;
    uint64_t n_t, n_kv;
    if (get_u32(&c, &magic) != 0 || magic != GGUF_MAGIC) return av_err(e, "%s: not a GGUF file (bad magic)", name);
    if (get_u32(&c, &version) != 0) return av_err(e, "%s: truncated header", name);
    if (version != 2 && version != 3) return av_err(e, "%s: unsupported GGUF version %u (need 2 or 3)", name, version);
    if (get_u64(&c, &n_t) != 0 || get_u64(&c, &n_kv) != 0) return av_err(e, "%s: truncated header", name);
    f->version = version;
    /* a key/value needs >= 8+4 bytes and a tensor info >= 8+4+4+8: caps before allocating */
    if (n_kv > (len - c.pos) / 12 || n_kv > INT32_MAX)
        return av_err(e, "%s: %llu metadata entries cannot fit in the file", name, (unsigned long long)n_kv);
    f->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kv);
    if (!f->kv) return av_err(e, "%s: out of memory", name);
    f->alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        GgufKV *kv = &f->kv[i];
        const uint8_t *k;
        uint64_t kl;
        uint32_t t;
        if (get_str(&c, &k, &kl) != 0) return av_err(e, "%s: metadata entry %llu: key runs past end of file", name, (unsigned long long)i);
        if (kl == 0 || kl > GGUF_MAX_KEY || memchr(k, 0, (size_t)kl))
            return av_err(e, "%s: metadata entry %llu: bad key (length %llu)", name, (unsigned long long)i, (unsigned long long)kl);
        if (!(kv->key = dup_str(k, kl))) return av_err(e, "%s: out of memory", name);
        f->n_kv = (int)i + 1;
        if (get_u32(&c, &t) != 0) return av_err(e, "%s: key '%s': truncated value type", name, kv->key);
        if (parse_value(&c, kv, t, name, e) != 0) return -1;
        if (!strcmp(kv->key, "general.alignment")) {
            if (t != GGUF_V_U32) return av_err(e, "%s: general.alignment must be u32, not %s", name, gguf_vtype_name(t));
            uint32_t a = (uint32_t)rd_le(kv->data, 4);
            if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGN)
                return av_err(e, "%s: general.alignment %u is not a power of two up to %u", name, a, GGUF_MAX_ALIGN);
            f->alignment = a;
        }
    }
    if (index_names(f, 0, "metadata key", name, e)) return -1;
    if (n_t > (len - c.pos) / 24 || n_t > INT32_MAX)
        return av_err(e, "%s: %llu tensors cannot fit in the file", name, (unsigned long long)n_t);
    f->tensors = calloc(n_t ? (size_t)n_t : 1, sizeof *f->tensors);
    if (!f->tensors) return av_err(e, "%s: out of memory", name);
    for (uint64_t i = 0; i < n_t; i++) {
        GgufTensor *t = &f->tensors[i];
        const uint8_t *s;
        uint64_t sl;
        uint32_t nd, ty;
        if (get_str(&c, &s, &sl) != 0) return av_err(e, "%s: tensor %llu: name runs past end of file", name, (unsigned long long)i);
        if (sl == 0 || sl > GGUF_MAX_KEY || memchr(s, 0, (size_t)sl))
            return av_err(e, "%s: tensor %llu: bad name (length %llu)", name, (unsigned long long)i, (unsigned long long)sl);
        if (!(t->name = dup_str(s, sl))) return av_err(e, "%s: out of memory", name);
        f->n_tensors = (int)i + 1;
        if (get_u32(&c, &nd) != 0) return av_err(e, "%s: tensor '%s': truncated info", name, t->name);
        if (nd < 1 || nd > GGUF_MAX_DIMS) return av_err(e, "%s: tensor '%s': %u dimensions (1..%d allowed)", name, t->name, nd, GGUF_MAX_DIMS);
        t->n_dims = (int)nd;
        uint64_t ne = 1;
        for (uint32_t d = 0; d < nd; d++) {
            if (get_u64(&c, &t->dims[d]) != 0) return av_err(e, "%s: tensor '%s': truncated info", name, t->name);
            if (t->dims[d] == 0 || t->dims[d] > (uint64_t)INT64_MAX / ne)
                return av_err(e, "%s: tensor '%s': bad dimension %llu", name, t->name, (unsigned long long)t->dims[d]);
            ne *= t->dims[d];
        }
        for (int d = (int)nd; d < GGUF_MAX_DIMS; d++) t->dims[d] = 1;
        if (get_u32(&c, &ty) != 0 || get_u64(&c, &t->offset) != 0)
            return av_err(e, "%s: tensor '%s': truncated info", name, t->name);
        size_t blk = gguf_type_block(ty), bs = gguf_type_bytes(ty);
        if (blk == 0) return av_err(e, "%s: tensor '%s': unknown ggml type %u", name, t->name, ty);
        t->type = (GgufType)ty;
        if (t->dims[0] % blk)
            return av_err(e, "%s: tensor '%s': row of %llu is not a multiple of %s's block of %zu", name, t->name,
                          (unsigned long long)t->dims[0], gguf_type_name(ty), blk);
        uint64_t nb = ne / blk;
        if (nb > (uint64_t)SIZE_MAX / bs) return av_err(e, "%s: tensor '%s': size overflows", name, t->name);
        t->nbytes = (size_t)(nb * bs);
        if (t->offset % f->alignment)
            return av_err(e, "%s: tensor '%s': offset %llu is not aligned to %u", name, t->name,
                          (unsigned long long)t->offset, f->alignment);
    }
    if (index_names(f, 1, "tensor name", name, e)) return -1;
    size_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    if (n_t > 0 && pad > len - c.pos) return av_err(e, "%s: data section starts past end of file", name);
    f->data_offset = c.pos + pad;
    for (int i = 0; i < f->n_tensors; i++) {
        GgufTensor *t = &f->tensors[i];
        size_t room = len - f->data_offset;
        if (t->offset > room || t->nbytes > room - t->offset)
            return av_err(e, "%s: tensor '%s': data [%llu, +%zu) runs past end of file", name, t->name,
                          (unsigned long long)t->offset, t->nbytes);
        t->data = p + f->data_offset + t->offset;
    }
    return check_overlap(f, name, e);
}

int gguf_parse(GgufFile *f, const void *buf, size_t len, const char *name, AvErr *e) {
    memset(f, 0, sizeof *f);
    if (parse(f, buf, len, name, e) != 0) {
        gguf_close(f);
        return -1;
    }
    return 0;
}

int gguf_open(GgufFile *f, const char *path, AvErr *e) { return gguf_open_mode(f, path, AV_MAP_FILE, e); }

int gguf_open_mode(GgufFile *f, const char *path, AvMapMode mode, AvErr *e) {
    void *map;
    size_t len;
    memset(f, 0, sizeof *f);
    if (av_map_file(path, 24, "too short for a GGUF header", mode, &map, &len, e) != 0) return -1;
    if (gguf_parse(f, map, len, path, e) != 0) {
        munmap(map, len);
        return -1;
    }
    f->map = map;
    f->map_len = len;
    return 0;
}

const GgufKV *gguf_find_kv(const GgufFile *f, const char *key) {
    const int32_t i = find_name(f, 0, key);
    return i >= 0 ? &f->kv[i] : NULL;
}

const GgufTensor *gguf_find_tensor(const GgufFile *f, const char *name) {
    const int32_t i = find_name(f, 1, name);
    return i >= 0 ? &f->tensors[i] : NULL;
}

static const GgufKV *need_kv(const GgufFile *f, const char *key, AvErr *e) {
    const GgufKV *kv = gguf_find_kv(f, key);
    if (!kv) av_err(e, "metadata key '%s' is missing", key);
    return kv;
}

/* Scalar or element i as a number; integers exactly, floats widened. */
static int num_at(GgufVType t, const uint8_t *p, double *out, int64_t *iv, int *is_int) {
    uint64_t u = rd_le(p, (int)vsize(t));
    *is_int = 1;
    switch (t) {
    case GGUF_V_U8: case GGUF_V_U16: case GGUF_V_U32: case GGUF_V_BOOL: *iv = (int64_t)u; break;
    case GGUF_V_I8: *iv = (int8_t)u; break;
    case GGUF_V_I16: *iv = (int16_t)u; break;
    case GGUF_V_I32: *iv = (int32_t)u; break;
    case GGUF_V_U64: if (u > INT64_MAX) return -1; *iv = (int64_t)u; break;
    case GGUF_V_I64: *iv = (int64_t)u; break;
    case GGUF_V_F32: { uint32_t b = (uint32_t)u; float x; memcpy(&x, &b, 4); *out = x; *is_int = 0; return 0; }
    case GGUF_V_F64: { double x; memcpy(&x, &u, 8); *out = x; *is_int = 0; return 0; }
    default: return -1;
    }
    *out = (double)*iv;
    return 0;
}

int gguf_kv_num(const GgufKV *kv, uint64_t i, double *out, AvErr *e) {
    int64_t iv;
    int isi;
    GgufVType t = kv->type == GGUF_V_ARRAY ? kv->arr_type : kv->type;
    uint64_t n = kv->type == GGUF_V_ARRAY ? kv->arr_n : 1;
    if (i >= n || vsize(t) == 0 || num_at(t, kv->data + i * vsize(t), out, &iv, &isi) != 0)
        return av_err(e, "metadata key '%s': no number at index %llu", kv->key, (unsigned long long)i);
    return 0;
}

static int get_int(const GgufFile *f, const char *key, int64_t lo, int64_t hi, int64_t *out, AvErr *e) {
    const GgufKV *kv = need_kv(f, key, e);
    if (!kv) return -1;
    double d;
    int isi;
    if (kv->type == GGUF_V_ARRAY || kv->type == GGUF_V_STRING || kv->type == GGUF_V_BOOL ||
        num_at(kv->type, kv->data, &d, out, &isi) != 0 || !isi)
        return av_err(e, "metadata key '%s' is %s, not an integer", key, gguf_vtype_name(kv->type));
    if (*out < lo || *out > hi) return av_err(e, "metadata key '%s': %lld is out of range", key, (long long)*out);
    return 0;
}

int gguf_get_u32(const GgufFile *f, const char *key, uint32_t *out, AvErr *e) {
    int64_t v;
    if (get_int(f, key, 0, UINT32_MAX, &v, e) != 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_i32(const GgufFile *f, const char *key, int32_t *out, AvErr *e) {
    int64_t v;
    if (get_int(f, key, INT32_MIN, INT32_MAX, &v, e) != 0) return -1;
    *out = (int32_t)v;
    return 0;
}

int gguf_get_f32(const GgufFile *f, const char *key, float *out, AvErr *e) {
    const GgufKV *kv = need_kv(f, key, e);
    if (!kv) return -1;
    if (kv->type != GGUF_V_F32 && kv->type != GGUF_V_F64)
        return av_err(e, "metadata key '%s' is %s, not a float", key, gguf_vtype_name(kv->type));
    double d;
    if (gguf_kv_num(kv, 0, &d, e) != 0) return -1;
    *out = (float)d;
    return 0;
}

int gguf_get_bool(const GgufFile *f, const char *key, int *out, AvErr *e) {
    const GgufKV *kv = need_kv(f, key, e);
    if (!kv) return -1;
    if (kv->type != GGUF_V_BOOL) return av_err(e, "metadata key '%s' is %s, not a bool", key, gguf_vtype_name(kv->type));
    *out = kv->data[0] != 0;
    return 0;
}

int gguf_get_str(const GgufFile *f, const char *key, const char **s, size_t *len, AvErr *e) {
    const GgufKV *kv = need_kv(f, key, e);
    if (!kv) return -1;
    if (kv->type != GGUF_V_STRING) return av_err(e, "metadata key '%s' is %s, not a string", key, gguf_vtype_name(kv->type));
    *len = (size_t)rd_le(kv->data, 8);
    *s = (const char *)kv->data + 8;
    return 0;
}

int gguf_get_arr(const GgufFile *f, const char *key, GgufVType *type, uint64_t *n, AvErr *e) {
    const GgufKV *kv = need_kv(f, key, e);
    if (!kv) return -1;
    if (kv->type != GGUF_V_ARRAY) return av_err(e, "metadata key '%s' is %s, not an array", key, gguf_vtype_name(kv->type));
    *type = kv->arr_type;
    *n = kv->arr_n;
    return 0;
}

int gguf_arr_str(const GgufKV *kv, uint64_t i, const char **s, size_t *len, AvErr *e) {
    if (kv->type != GGUF_V_ARRAY || kv->arr_type != GGUF_V_STRING || i >= kv->arr_n)
        return av_err(e, "metadata key '%s': no string at index %llu", kv->key, (unsigned long long)i);
    const uint8_t *p = kv->data + kv->str_off[i];
    *len = (size_t)rd_le(p, 8);
    *s = (const char *)p + 8;
    return 0;
}
