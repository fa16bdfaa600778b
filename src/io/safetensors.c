/* safetensors.c — memory-mapped .safetensors reader with strict header checks,
 * and a writer used by the demo-model generator and tests. */
#include "safetensors.h"
#include "jsonread.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A real header is a few hundred KB; refuse absurd lengths before allocating. */
#define ST_MAX_HEADER (100u * 1024u * 1024u)
#define ST_MAX_TENSORS 100000

size_t st_dtype_size(StDtype d) {
    switch (d) {
    case ST_F32: return 4;
    case ST_F16:
    case ST_BF16: return 2;
    default: return 0;
    }
}

const char *st_dtype_name(StDtype d) {
    switch (d) {
    case ST_F32: return "F32";
    case ST_F16: return "F16";
    case ST_BF16: return "BF16";
    default: return "?";
    }
}

static StDtype parse_dtype(const char *s) {
    if (!strcmp(s, "F32")) return ST_F32;
    if (!strcmp(s, "F16")) return ST_F16;
    if (!strcmp(s, "BF16")) return ST_BF16;
    return ST_OTHER;
}

/* Sizes of the dtypes we do not compute with, so offsets can still be checked. */
static size_t other_dtype_size(const char *s) {
    static const struct { const char *n; size_t sz; } t[] = {
        {"F64", 8}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4}, {"I16", 2},
        {"U16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].n)) return t[i].sz;
    return 0;
}

static void free_tensors(StFile *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->order);
    f->tensors = NULL;
    f->order = NULL;
    f->n_tensors = 0;
}

static int cmp_name(const void *a, const void *b, void *ctx) {
    const StTensor *t = ctx;
    return strcmp(t[*(const int32_t *)a].name, t[*(const int32_t *)b].name);
}

int st_index(StFile *f, const char *path, AvErr *e) {
    free(f->order);
    if (!(f->order = malloc((f->n_tensors ? (size_t)f->n_tensors : 1) * sizeof *f->order)))
        return av_err(e, "%s: out of memory", path);
    for (int32_t i = 0; i < f->n_tensors; i++) f->order[i] = i;
    qsort_r(f->order, (size_t)f->n_tensors, sizeof *f->order, cmp_name, f->tensors);
    /* a name twice (a hostile dict, or "a.b" next to {"a": {"b"}}) would let st_find return either */
    for (int i = 1; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[f->order[i - 1]].name, f->tensors[f->order[i]].name))
            return av_err(e, "%s: tensor name '%.200s' appears twice", path, f->tensors[f->order[i]].name);
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const StTensor *x = a, *y = b;
    return (x->data > y->data) - (x->data < y->data);
}

/* Members of the top-level JSON object in s (commas at depth 1, plus one),
 * counted without building anything; malformed text is the parser's to refuse. */
static long top_level_entries(const char *s, size_t n) {
    long commas = 0;
    int depth = 0, in_str = 0, any = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1, any |= depth == 1;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (c == ',' && depth == 1) commas++;
    }
    return any ? commas + 1 : 0;
}

int st_parse(StFile *f, const uint8_t *buf, size_t len, const char *path, AvErr *e) {
    /* Whatever f held is not ours (a stack struct holds garbage): the whole of it starts empty,
     * so st_close is safe on it after a success or a failure. */
    memset(f, 0, sizeof *f);
    if (len < 8) return av_err(e, "%s: not a safetensors file (%zu bytes, shorter than the 8-byte header length)", path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > ST_MAX_HEADER)
        return av_err(e, "%s: safetensors header length %llu is absurd (limit %u)", path,
                      (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > len - 8)
        return av_err(e, "%s: safetensors header length %llu runs past the end of the file (%zu bytes)",
                      path, (unsigned long long)hlen, len);
    if (hlen < 2) return av_err(e, "%s: safetensors header is empty", path);
    const uint8_t *data = buf + 8 + hlen;
    size_t data_len = len - 8 - hlen;

    /* The entry limit before the parse: a header of a million entries would
     * otherwise be built in full (hundreds of MB of cJSON nodes) first. */
    long entries = top_level_entries((const char *)buf + 8, (size_t)hlen);
    if (entries > ST_MAX_TENSORS + 1) /* + __metadata__ */
        return av_err(e, "%s: safetensors header lists more than %d entries (%ld)", path, ST_MAX_TENSORS, entries);
    cJSON *root;
    const int pr = av_json_parse(&root, (const char *)buf + 8, (size_t)hlen, path, e);
    if (pr) return pr < 0 ? -1 : av_err(e, "%s: safetensors header is not valid JSON", path);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return av_err(e, "%s: safetensors header is not a JSON object", path);
    }
    int count = cJSON_GetArraySize(root);
    if (count > ST_MAX_TENSORS) {
        cJSON_Delete(root);
        return av_err(e, "%s: safetensors header lists %d entries (limit %d)", path, count, ST_MAX_TENSORS);
    }
    f->tensors = calloc(count > 0 ? (size_t)count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        cJSON_Delete(root);
        return av_err(e, "%s: out of memory", path);
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *name = it->string ? it->string : "";
        if (!strcmp(name, "__metadata__")) continue;
        if (!cJSON_IsObject(it)) {
            av_err(e, "%s: tensor '%s': entry is not an object", path, name);
            goto fail;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            av_err(e, "%s: tensor '%s': needs string dtype, array shape and two data_offsets", path, name);
            goto fail;
        }
        StTensor *t = &f->tensors[f->n_tensors];
        t->name = strdup(name);
        if (!t->name) {
            av_err(e, "%s: out of memory", path);
            goto fail;
        }
        f->n_tensors++;
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dt->valuestring);
        t->dtype = parse_dtype(dt->valuestring);
        size_t esz = t->dtype == ST_OTHER ? other_dtype_size(dt->valuestring) : st_dtype_size(t->dtype);
        if (esz == 0) {
            av_err(e, "%s: tensor '%s': unknown dtype '%.20s'", path, name, dt->valuestring);
            goto fail;
        }
        int nd = cJSON_GetArraySize(sh);
        if (nd > ST_MAX_DIMS) {
            av_err(e, "%s: tensor '%s': %d dimensions (limit %d)", path, name, nd, ST_MAX_DIMS);
            goto fail;
        }
        t->ndim = nd;
        /* numel * esz must fit in the file, so any product above len overflows nothing we use. */
        uint64_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < nd; d++) {
            const cJSON *v = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15 ||
                v->valuedouble != (double)(int64_t)v->valuedouble) {
                av_err(e, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, d);
                goto fail;
            }
            t->shape[d] = (int64_t)v->valuedouble;
            if (t->shape[d] != 0 && numel > UINT64_MAX / (uint64_t)t->shape[d]) overflow = 1;
            else numel *= (uint64_t)t->shape[d];
        }
        if (overflow || numel > UINT64_MAX / esz) {
            av_err(e, "%s: tensor '%s': shape's element count overflows", path, name);
            goto fail;
        }
        double b0 = cJSON_GetArrayItem(off, 0)->valuedouble, b1 = cJSON_GetArrayItem(off, 1)->valuedouble;
        if (!cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)) ||
            b0 < 0 || b1 < 0 || b0 > 9.0e15 || b1 > 9.0e15 || b0 != (double)(uint64_t)b0 || b1 != (double)(uint64_t)b1) {
            av_err(e, "%s: tensor '%s': data_offsets are not non-negative integers", path, name);
            goto fail;
        }
        uint64_t begin = (uint64_t)b0, end = (uint64_t)b1;
        if (end < begin) {
            av_err(e, "%s: tensor '%s': data_offsets [%llu, %llu] are reversed", path, name,
                   (unsigned long long)begin, (unsigned long long)end);
            goto fail;
        }
        if (end > data_len) {
            av_err(e, "%s: tensor '%s': data_offsets [%llu, %llu] run past the data section (%zu bytes; file truncated?)",
                   path, name, (unsigned long long)begin, (unsigned long long)end, data_len);
            goto fail;
        }
        if (end - begin != numel * esz) {
            av_err(e, "%s: tensor '%s': data_offsets span %llu bytes but %s x shape needs %llu", path, name,
                   (unsigned long long)(end - begin), t->dtype_name, (unsigned long long)(numel * esz));
            goto fail;
        }
        t->data = data + begin;
        t->nbytes = (size_t)(end - begin);
    }
    cJSON_Delete(root);
    root = NULL;

    /* Overlapping tensors mean a corrupt or hostile file. */
    StTensor *sorted = malloc((f->n_tensors > 0 ? (size_t)f->n_tensors : 1) * sizeof *sorted);
    if (!sorted) {
        av_err(e, "%s: out of memory", path);
        goto fail;
    }
    memcpy(sorted, f->tensors, (size_t)f->n_tensors * sizeof *sorted);
    qsort(sorted, (size_t)f->n_tensors, sizeof *sorted, cmp_by_offset);
    for (int i = 1, far = 0; i < f->n_tensors; i++) { /* far: reaching furthest so far, not an empty neighbour */
        if (sorted[i].nbytes && sorted[far].data + sorted[far].nbytes > sorted[i].data) {
            av_err(e, "%s: tensors '%s' and '%s' overlap in the data section", path, sorted[far].name,
                   sorted[i].name);
            free(sorted);
            goto fail;
        }
        if (sorted[i].data + sorted[i].nbytes > sorted[far].data + sorted[far].nbytes) far = i;
    }
    free(sorted);
    if (st_index(f, path, e) == 0) return 0;
fail:
    cJSON_Delete(root);
    free_tensors(f);
    return -1;
}

int st_open_with(StFile *f, const char *path, size_t min_len, const char *too_short, StParseFn parse, AvMapMode mode,
                 AvErr *e) {
    memset(f, 0, sizeof *f);
    void *map;
    size_t len;
    if (av_map_file(path, min_len, too_short, mode, &map, &len, e) != 0) return -1;
    /* parse empties the struct it fills: the mapping and path are attached after it */
    StFile t;
    char *p = strdup(path);
    if (!p || parse(&t, map, len, path, e) != 0) {
        free(p);
        munmap(map, len);
        return p ? -1 : av_err(e, "%s: out of memory", path);
    }
    t.map = map;
    t.map_len = len;
    t.path = p;
    *f = t;
    return 0;
}

int st_open_mode(StFile *f, const char *path, AvMapMode mode, AvErr *e) {
    return st_open_with(f, path, 8, "not a safetensors file, shorter than the 8-byte header length", st_parse, mode, e);
}

int st_open(StFile *f, const char *path, AvErr *e) { return st_open_mode(f, path, AV_MAP_FILE, e); }

void st_close(StFile *f) {
    free_tensors(f);
    if (f->map) munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const StTensor *st_find(const StFile *f, const char *name) {
    if (!f->order) {
        for (int i = 0; i < f->n_tensors; i++)
            if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
        return NULL;
    }
    int lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2, c = strcmp(f->tensors[f->order[mid]].name, name);
        if (!c) return &f->tensors[f->order[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: renormalize */
            int shift = 0;
            while (!(man & 0x400)) { man <<= 1; shift++; }
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 + 1 - shift) << 23) | (man << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float st_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t st_f32_to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* NaN stays NaN */
    b += 0x7fffu + ((b >> 16) & 1); /* round to nearest even */
    return (uint16_t)(b >> 16);
}

uint16_t st_f32_to_f16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    uint32_t absb = b & 0x7fffffffu;
    if (absb > 0x7f800000u) return sign | 0x7e00;      /* NaN */
    if (absb >= 0x477ff000u) return sign | 0x7c00;     /* overflow -> inf */
    if (absb < 0x38800000u) {                          /* subnormal or zero */
        if (absb < 0x33000000u) return sign;
        uint32_t man = (absb & 0x7fffff) | 0x800000;
        int shift = 113 - (int)(absb >> 23) + 13;     /* 126-14 ... */
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return sign | (uint16_t)half;
    }
    uint32_t e = (absb >> 23) - 112, man = absb & 0x7fffff;
    uint32_t h = (e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

void st_to_f32(const StTensor *t, float *dst) {
    size_t n = t->nbytes / st_dtype_size(t->dtype);
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case ST_F32: memcpy(dst, p, n * 4); break;
    case ST_F16:
        for (size_t i = 0; i < n; i++) dst[i] = st_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = st_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    default: break;
    }
}

int st_write(const char *path, const StWriteTensor *ts, int n, StDtype dtype, AvErr *e) {
    size_t esz = st_dtype_size(dtype);
    if (!esz) return av_err(e, "%s: cannot write dtype %s", path, st_dtype_name(dtype));
    cJSON *root = cJSON_CreateObject();
    if (!root) return av_err(e, "%s: out of memory", path);
    uint64_t off = 0;
    for (int i = 0; i < n && root; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, ts[i].name);
        uint64_t numel = 1;
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        for (int d = 0; shape && d < ts[i].ndim; d++) {
            numel *= (uint64_t)ts[i].shape[d];
            if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ts[i].shape[d]))) shape = NULL;
        }
        cJSON *offs = t ? cJSON_AddArrayToObject(t, "data_offsets") : NULL;
        if (!t || !shape || !offs || !cJSON_AddStringToObject(t, "dtype", st_dtype_name(dtype)) ||
            !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off)) ||
            !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + numel * esz)))) {
            cJSON_Delete(root);
            return av_err(e, "%s: out of memory", path);
        }
        off += numel * esz;
    }
    char *hdr = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!hdr) return av_err(e, "%s: out of memory", path);
    size_t hl = strlen(hdr);
    size_t padded = (hl + 7) & ~(size_t)7; /* 8-byte aligned data, as the reference writer does */
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(hdr);
        return av_err(e, "%s: cannot create: %s", path, strerror(errno));
    }
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(lenb, 1, 8, fp) == 8 && fwrite(hdr, 1, hl, fp) == hl;
    for (size_t i = hl; ok && i < padded; i++) ok = fputc(' ', fp) != EOF;
    free(hdr);
    for (int i = 0; ok && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < ts[i].ndim; d++) numel *= (size_t)ts[i].shape[d];
        if (dtype == ST_F32) {
            ok = fwrite(ts[i].data, 4, numel, fp) == numel;
        } else {
            for (size_t j = 0; ok && j < numel; j++) {
                uint16_t h = dtype == ST_F16 ? st_f32_to_f16(ts[i].data[j]) : st_f32_to_bf16(ts[i].data[j]);
                uint8_t b[2] = {(uint8_t)(h & 0xff), (uint8_t)(h >> 8)};
                ok = fwrite(b, 1, 2, fp) == 2;
            }
        }
    }
    if (fclose(fp) != 0) ok = 0;
    if (!ok) {
        remove(path);
        return av_err(e, "%s: write failed: %s", path, strerror(errno));
    }
    return 0;
}
