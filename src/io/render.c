/* render.c — attention arrays from a .npz or .safetensors file and a JSON
 * of tokens, every shape and value checked, into a Capture. */
#include "render.h"
#include "jsonread.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "util.h"
#include "zip.h"

/* Limits that keep a hostile file from making us allocate without bound. */
#define R_MAX_ARRAYS 4096
#define R_MAX_TOKENS 65536
#define R_MAX_BYTES ((size_t)16 << 30)
/* a row of probabilities sums to 1 within this (half precision rounds) */
#define R_ROW_TOL 2e-2

typedef enum { R_F32, R_F64, R_F16, R_BF16 } RType;

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[8];
    RType type;
    const uint8_t *data;  /* NULL until materialize (a .npz entry is inflated only once its shape is known good) */
    size_t count;         /* elements */
    uint8_t *owned;       /* inflated data to free */
    ZEntry ze;            /* a .npz entry: where its bytes are */
    size_t hdr;           /* the .npy header's bytes before the data */
} RArray;

typedef struct {
    RArray *a;
    int n;
    StFile st;
    int have_st;
    uint8_t *file;        /* the .npz's bytes */
    size_t file_len;
    char *st_meta;        /* safetensors __metadata__["attnviz"] */
    double budget, used;  /* bytes the arrays may take once read (inflated entries, floats): --max-capture */
} RFile;

static void rfile_free(RFile *f) {
    for (int i = 0; i < f->n; i++) free(f->a[i].owned);
    free(f->a);
    if (f->have_st) st_close(&f->st);
    free(f->file);
    free(f->st_meta);
    memset(f, 0, sizeof *f);
}

static size_t type_size(RType t) { return t == R_F64 ? 8 : t == R_F32 ? 4 : 2; }

static float elem(const RArray *a, size_t i) {
    const uint8_t *p = a->data + i * type_size(a->type);
    switch (a->type) {
    case R_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case R_F64: {
        double v;
        memcpy(&v, p, 8);
        return (float)v;
    }
    case R_F16: return st_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    case R_BF16: return st_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
    }
    return NAN;
}

static RArray *push_array(RFile *f, const char *path, AvErr *e) {
    if (f->n == R_MAX_ARRAYS) {
        av_err(e, "%s: more than %d arrays", path, R_MAX_ARRAYS);
        return NULL;
    }
    RArray *a = realloc(f->a, (size_t)(f->n + 1) * sizeof *a);
    if (!a) {
        av_err(e, "%s: out of memory", path);
        return NULL;
    }
    f->a = a;
    memset(&a[f->n], 0, sizeof a[f->n]);
    return &a[f->n++];
}

/* ---------------------------------------------------------------- .npy */

/* The value of key in a .npy header's Python dict literal, or NULL. */
static const char *npy_key(const char *h, size_t n, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < n; i++)
        if ((h[i] == '\'' || h[i] == '"') && !memcmp(h + i + 1, key, kl) && h[i + 1 + kl] == h[i]) {
            const char *p = h + i + kl + 2;
            while (p < h + n && (*p == ' ' || *p == ':')) p++;
            return p < h + n ? p : NULL;
        }
    return NULL;
}

/* The .npy header at b (len bytes of an entry of entry_len): dtype, shape, and where the data
 * starts (a->hdr). The entry must hold exactly the bytes its shape needs: its data is then read
 * (inflated) to that size and no further. */
static int parse_npy(RArray *a, const uint8_t *b, size_t len, size_t entry_len, const char *path, AvErr *e) {
    if (len < 10 || memcmp(b, "\x93NUMPY", 6)) return av_err(e, "%s: '%s' is not a .npy array", path, a->name);
    size_t hl, off;
    if (b[6] == 1) hl = (size_t)(b[8] | b[9] << 8), off = 10;
    else if ((b[6] == 2 || b[6] == 3) && len >= 12)
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24, off = 12;
    else return av_err(e, "%s: '%s': .npy version %u is not supported", path, a->name, b[6]);
    if (hl > len - off || hl > 65536) return av_err(e, "%s: '%s': .npy header runs past the array", path, a->name);
    const char *h = (const char *)b + off, *end = h + hl;
    const char *d = npy_key(h, hl, "descr"), *fo = npy_key(h, hl, "fortran_order"), *sh = npy_key(h, hl, "shape");
    if (!d || !fo || !sh) return av_err(e, "%s: '%s': .npy header lacks descr, fortran_order or shape", path, a->name);
    static const struct {
        const char *descr;
        RType t;
    } types[] = {{"'<f4'", R_F32}, {"'<f8'", R_F64}, {"'<f2'", R_F16}, {"'|f4'", R_F32}};
    int found = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if ((size_t)(end - d) >= strlen(types[i].descr) && !memcmp(d, types[i].descr, strlen(types[i].descr)))
            a->type = types[i].t, found = 1;
    if (!found) {
        int k = 0;
        while (d + k < end && k < 12 && d[k] != ',') k++;
        return av_err(e, "%s: '%s' has dtype %.*s; attention must be float16, float32 or float64 (little-endian)", path,
                      a->name, k, d);
    }
    if ((size_t)(end - fo) < 5 || memcmp(fo, "False", 5))
        return av_err(e, "%s: '%s' is in Fortran order; save it C-contiguous (np.ascontiguousarray)", path, a->name);
    if (*sh != '(') return av_err(e, "%s: '%s': .npy shape is not a tuple", path, a->name);
    const char *p = sh + 1;
    size_t count = 1;
    a->ndim = 0;
    while (p < end && *p != ')') {
        while (p < end && (*p == ' ' || *p == ',')) p++;
        if (p < end && *p == ')') break;
        char *q;
        long long v = strtoll(p, &q, 10);
        if (q == p || v < 0 || v > (1LL << 40) || a->ndim == 8)
            return av_err(e, "%s: '%s': .npy shape is malformed", path, a->name);
        a->shape[a->ndim++] = v;
        if (v && count > SIZE_MAX / (size_t)v) return av_err(e, "%s: '%s': element count overflows", path, a->name);
        count *= (size_t)v;
        p = q;
    }
    if (p >= end) return av_err(e, "%s: '%s': .npy shape is not closed", path, a->name);
    const size_t held = entry_len - off - hl;
    if (count > held / type_size(a->type))
        return av_err(e, "%s: '%s' holds %zu bytes, short of its shape's %zu elements", path, a->name, held, count);
    if (held != count * type_size(a->type))
        return av_err(e, "%s: '%s' holds %zu bytes, more than its shape's %zu elements need", path, a->name, held, count);
    a->hdr = off + hl;
    a->count = count;
    return 0;
}

/* A .npz's arrays: each entry's .npy header only (the data is inflated by materialize, once
 * the array's shape has been checked against the tokens and the budget). */
static int load_npz(RFile *f, const char *path, AvErr *e) {
    if (av_read_file(path, R_MAX_BYTES, (char **)&f->file, &f->file_len, e) != 0) return -1;
    Zip z;
    if (zip_read(&z, f->file, f->file_len, ZIP_DEFLATE, path, e) != 0) return -1;
    enum { HEAD = 12 + 65536 }; /* a .npy header's most */
    uint8_t *head = malloc(HEAD);
    int rc = head ? 0 : av_err(e, "%s: out of memory", path);
    for (size_t i = 0; i < z.n && rc == 0; i++) {
        const ZEntry *ze = &z.ent[i];
        if (ze->name_len < 5 || memcmp(ze->name + ze->name_len - 4, ".npy", 4)) continue;
        RArray *a = push_array(f, path, e);
        if (!a) {
            rc = -1;
            break;
        }
        snprintf(a->name, sizeof a->name, "%.*s", (int)(ze->name_len - 4 < 127 ? ze->name_len - 4 : 127), (const char *)ze->name);
        if (ze->size_out > R_MAX_BYTES) {
            rc = av_err(e, "%s: '%s' holds %llu bytes (limit %zu)", path, a->name, (unsigned long long)ze->size_out,
                        R_MAX_BYTES);
            break;
        }
        size_t got;
        if ((rc = zip_head(ze, head, HEAD, &got, path, e)) != 0) break;
        a->ze = *ze;
        rc = parse_npy(a, head, got, (size_t)ze->size_out, path, e);
    }
    free(head);
    zip_free(&z);
    return rc;
}

/* An array's data: a .npz entry inflated now, to exactly the bytes its header's shape needs
 * (zip_extract stops there: a stream claiming more is refused); a safetensors tensor is
 * mapped already. */
static int materialize(RFile *f, RArray *a, const char *path, AvErr *e) {
    if (a->data) return 0;
    const size_t need = a->hdr + a->count * type_size(a->type);
    uint8_t *bytes;
    int owned;
    if (zip_extract(&a->ze, need, &bytes, &owned, path, e) != 0) return -1;
    if (owned) a->owned = bytes, f->used += (double)need;
    a->data = bytes + a->hdr;
    return 0;
}

static double inflated_bytes(const RArray *a) {
    return a->data || !a->ze.method ? 0 : (double)(a->hdr + a->count * type_size(a->type));
}

static int load_safetensors(RFile *f, const char *path, AvErr *e) {
    if (st_open(&f->st, path, e) != 0) return -1;
    f->have_st = 1;
    for (int i = 0; i < f->st.n_tensors; i++) {
        const StTensor *t = &f->st.tensors[i];
        RArray *a = push_array(f, path, e);
        if (!a) return -1;
        snprintf(a->name, sizeof a->name, "%s", t->name);
        if (t->dtype == ST_OTHER && strcmp(t->dtype_name, "F64") != 0)
            return av_err(e, "%s: tensor '%s' has dtype %s; attention must be F16, BF16, F32 or F64", path, t->name,
                          t->dtype_name);
        a->type = t->dtype == ST_F32 ? R_F32 : t->dtype == ST_F16 ? R_F16 : t->dtype == ST_BF16 ? R_BF16 : R_F64;
        a->ndim = t->ndim;
        size_t count = 1;
        for (int d = 0; d < t->ndim; d++) a->shape[d] = t->shape[d], count *= (size_t)t->shape[d];
        if (count * type_size(a->type) > t->nbytes) return av_err(e, "%s: tensor '%s' is shorter than its shape", path, t->name);
        a->data = t->data, a->count = count;
    }
    /* the metadata's "attnviz" entry may carry the tokens */
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f->st.map[i] << (8 * i);
    cJSON *h; /* st_open parsed it whole (and checked its keys): only its metadata is read here */
    if (av_json_parse(&h, (const char *)f->st.map + 8, (size_t)hl, path, e) < 0) return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h, "__metadata__"), "attnviz");
    if (cJSON_IsString(m) && !(f->st_meta = strdup(m->valuestring))) {
        cJSON_Delete(h);
        return av_err(e, "%s: out of memory", path);
    }
    cJSON_Delete(h);
    return 0;
}

static const RArray *find(const RFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->a[i].name, name)) return &f->a[i];
    return NULL;
}

/* ---------------------------------------------------------------- stacks */

/* An array's shape with leading 1s (a batch of one) dropped down to want dims. */
static int squeeze(const RArray *a, int want, int64_t *shape) {
    int lead = a->ndim - want;
    if (lead < 0) return -1;
    for (int i = 0; i < lead; i++)
        if (a->shape[i] != 1) return -1;
    for (int i = 0; i < want; i++) shape[i] = a->shape[lead + i];
    return 0;
}

static void shape_str(char *buf, size_t len, const RArray *a) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < a->ndim && k < len; i++) k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* The layers of stack name: one array [L, H, r, c] or name.0 ... [H, r, c].
 * Fills out (L, H, r, c) floats (malloc'd), *L, *H and checks r, c (0: any). */
static int gather(RFile *f, const char *name, const char *path, int *L, int *H, int *r, int *c, float **out,
                  AvErr *e) {
    *out = NULL;
    const RArray *whole = find(f, name);
    int64_t s[4];
    char sh[96];
    int nl = 0;
    const RArray *per[CAP_MAX_LAYERS];
    if (whole) {
        if (squeeze(whole, 4, s) != 0) {
            shape_str(sh, sizeof sh, whole);
            return av_err(e, "%s: '%s' has shape %s; expected [layers, heads, rows, columns]", path, name, sh);
        }
        nl = (int)s[0];
    } else {
        char key[160];
        for (;;) {
            snprintf(key, sizeof key, "%s.%d", name, nl);
            const RArray *a = find(f, key);
            if (!a) break;
            if (nl == CAP_MAX_LAYERS) return av_err(e, "%s: '%s' has more than %d layers", path, name, CAP_MAX_LAYERS);
            per[nl++] = a;
        }
        if (!nl) return 1; /* absent */
        int64_t s0[3];
        if (squeeze(per[0], 3, s0) != 0) {
            shape_str(sh, sizeof sh, per[0]);
            return av_err(e, "%s: '%s.0' has shape %s; expected [heads, rows, columns]", path, name, sh);
        }
        s[0] = nl, s[1] = s0[0], s[2] = s0[1], s[3] = s0[2];
    }
    if (s[0] < 1 || s[0] > CAP_MAX_LAYERS || s[1] < 1 || s[1] > CAP_MAX_HEADS || s[2] < 1 || s[3] < 1 ||
        s[2] > R_MAX_TOKENS || s[3] > R_MAX_TOKENS)
        return av_err(e, "%s: '%s' has %lld layers, %lld heads, %lld x %lld: out of range (1-%d layers, 1-%d heads, "
                      "up to %d tokens)", path, name, (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
                      CAP_MAX_LAYERS, CAP_MAX_HEADS, R_MAX_TOKENS);
    if ((*r && s[2] != *r) || (*c && s[3] != *c))
        return av_err(e, "%s: '%s' is %lld x %lld per head; the tokens say %d x %d", path, name, (long long)s[2],
                      (long long)s[3], *r, *c);
    if ((*L && s[0] != *L) || (*H && s[1] != *H))
        return av_err(e, "%s: '%s' has %lld layers x %lld heads; another array has %d x %d", path, name, (long long)s[0],
                      (long long)s[1], *L, *H);
    *L = (int)s[0], *H = (int)s[1], *r = (int)s[2], *c = (int)s[3];
    const size_t per_layer = (size_t)*H * *r * *c;
    if (per_layer > R_MAX_BYTES / 4 / (size_t)*L) return av_err(e, "%s: '%s' is too large", path, name);
    for (int l = 1; !whole && l < *L; l++) { /* every layer's shape, before any is read */
        int64_t sl[3];
        if (squeeze(per[l], 3, sl) != 0 || sl[0] != *H || sl[1] != *r || sl[2] != *c) {
            shape_str(sh, sizeof sh, per[l]);
            return av_err(e, "%s: '%s' has shape %s; layer 0 has [%d, %d, %d]", path, per[l]->name, sh, *H, *r, *c);
        }
    }
    /* what reading it costs, before anything is inflated: its entries and the floats they become */
    double unpacked = 0;
    for (int l = 0; l < (whole ? 1 : *L); l++) unpacked += inflated_bytes(whole ? whole : per[l]);
    const double floats = (double)per_layer * *L * sizeof(float);
    if (f->used + unpacked + floats > f->budget)
        return av_err(e, "%s: '%s' needs %.0f MB (%.0f MB inflated, %.0f MB as floats) on top of %.0f MB read so far, "
                      "above the %.0f MB allowed (--max-capture)", path, name, (unpacked + floats) / 1e6, unpacked / 1e6,
                      floats / 1e6, f->used / 1e6, f->budget / 1e6);
    for (int l = 0; l < (whole ? 1 : *L); l++)
        if (materialize(f, (RArray *)(whole ? whole : per[l]), path, e) != 0) return -1;
    float *o = malloc(per_layer * (size_t)*L * sizeof *o);
    if (!o) return av_err(e, "%s: out of memory for '%s'", path, name);
    f->used += floats;
    for (int l = 0; l < *L; l++) {
        const RArray *a = whole ? whole : per[l];
        const size_t base = whole ? (size_t)l * per_layer : 0;
        for (size_t i = 0; i < per_layer; i++) o[(size_t)l * per_layer + i] = elem(a, base + i);
    }
    *out = o;
    return 0;
}

/* Every value finite, in [0, 1], rows summing to 1; causal: nothing after the diagonal. */
static int check_probs(const float *p, int L, int H, int r, int c, int causal, const char *name, const int *layers,
                       const char *path, AvErr *e) {
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < r; i++) {
                const float *row = p + (((size_t)l * H + h) * r + i) * c;
                double s = 0;
                for (int j = 0; j < c; j++) {
                    if (!isfinite(row[j]) || row[j] < -1e-6f || row[j] > 1.0f + 1e-6f)
                        return av_err(e, "%s: %s, layer %d, head %d, row %d, column %d is %g: not a probability", path,
                                      name, layers[l], h, i, j, (double)row[j]);
                    if (causal && j > i && row[j] > 1e-6f)
                        return av_err(e, "%s: %s, layer %d, head %d: row %d attends to later token %d (%g), but "
                                      "\"causal\" is true", path, name, layers[l], h, i, j, (double)row[j]);
                    s += row[j];
                }
                if (fabs(s - 1.0) > R_ROW_TOL)
                    return av_err(e, "%s: %s, layer %d, head %d, row %d sums to %.4f, not 1 (pass probabilities, "
                                  "after softmax)", path, name, layers[l], h, i, s);
            }
    return 0;
}

/* ---------------------------------------------------------------- meta */

static int meta_strings(Rendered *r, const cJSON *list, const char *key, int *n, const char ***out, const char *mpath,
                        AvErr *e) {
    *out = NULL;
    *n = 0;
    if (!list) return 0;
    if (!cJSON_IsArray(list)) return av_err(e, "%s: \"%s\" must be a list of strings", mpath, key);
    int cnt = cJSON_GetArraySize(list);
    if (cnt < 1 || cnt > R_MAX_TOKENS) return av_err(e, "%s: \"%s\" holds %d tokens (1-%d)", mpath, key, cnt, R_MAX_TOKENS);
    const char **v = calloc((size_t)cnt, sizeof *v);
    char **store = realloc(r->token_store, (size_t)(r->n_store + cnt) * sizeof *store);
    if (!v || !store) {
        free(v);
        if (store) r->token_store = store;
        return av_err(e, "%s: out of memory", mpath);
    }
    r->token_store = store;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        if (!cJSON_IsString(it)) {
            free(v);
            return av_err(e, "%s: \"%s\"[%d] is not a string", mpath, key, i);
        }
        char *s = strdup(it->valuestring);
        if (!s) {
            free(v);
            return av_err(e, "%s: out of memory", mpath);
        }
        store[r->n_store++] = s;
        v[i++] = s;
    }
    *n = cnt;
    *out = v;
    return 0;
}

static int is_special(const char *t) {
    static const char *const names[] = {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>",
                                        "<unk>", "<mask>", "<bos>", "<eos>"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(t, names[i])) return 1;
    size_t n = strlen(t);
    return n > 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>");
}

/* An encoding of given tokens: ids 0..n-1 (or the meta's), specials and
 * roles recognised by spelling, words where a piece does not continue one. */
/* A piece as read: byte-level BPE's "Ġ" and "Ċ", SentencePiece's "▁" as the
 * space and newline they stand for (the rest as spelled); kept in r. */
static const char *readable(Rendered *r, const char *t) {
    size_t tl = strlen(t);
    const int eow = tl > 4 && !strcmp(t + tl - 4, "</w>"); /* CLIP's end-of-word mark */
    if (!eow && !strstr(t, "\xc4\xa0") && !strstr(t, "\xc4\x8a") && !strstr(t, "\xe2\x96\x81")) return t;
    char **store = realloc(r->token_store, (size_t)(r->n_store + 1) * sizeof *store);
    char *o = malloc(strlen(t) + 1);
    if (!store || !o) {
        if (store) r->token_store = store;
        free(o);
        return NULL;
    }
    r->token_store = store;
    size_t k = 0;
    for (const char *p = t; *p && !(eow && p == t + tl - 4);) {
        if (!strncmp(p, "\xc4\xa0", 2)) o[k++] = ' ', p += 2;
        else if (!strncmp(p, "\xc4\x8a", 2)) o[k++] = '\n', p += 2;
        else if (!strncmp(p, "\xe2\x96\x81", 3)) o[k++] = ' ', p += 3;
        else o[k++] = *p++;
    }
    o[k] = '\0';
    store[r->n_store++] = o;
    return o;
}

static int ends_word(const char *t) {
    size_t n = strlen(t);
    return n >= 4 && !strcmp(t + n - 4, "</w>");
}

static int make_encoding(Rendered *r, TokEncoding *enc, const char **tokens, const char **display, int n, int b_start,
                         AvErr *e) {
    memset(enc, 0, sizeof *enc);
    enc->ids = calloc((size_t)n, sizeof *enc->ids);
    enc->type_ids = calloc((size_t)n, sizeof *enc->type_ids);
    enc->tokens = calloc((size_t)n, sizeof *enc->tokens);
    enc->display = calloc((size_t)n, sizeof *enc->display);
    enc->word_start = calloc((size_t)n, 1), enc->special = calloc((size_t)n, 1), enc->role = calloc((size_t)n, 1);
    if (!enc->ids || !enc->type_ids || !enc->tokens || !enc->display || !enc->word_start || !enc->special || !enc->role) {
        tok_encoding_free(enc);
        return av_err(e, "out of memory");
    }
    int byte_level = display != NULL;
    for (int i = 0; i < n; i++) {
        const char *t = tokens[i];
        enc->ids[i] = i;
        enc->type_ids[i] = b_start >= 0 && i >= b_start;
        enc->tokens[i] = t;
        enc->display[i] = display ? display[i] : readable(r, t);
        if (!enc->display[i]) {
            tok_encoding_free(enc);
            return av_err(e, "out of memory");
        }
        enc->special[i] = (unsigned char)is_special(t);
        enc->role[i] = !strcmp(t, "[CLS]") || !strcmp(t, "<s>") ? TOK_ROLE_CLS
                       : !strcmp(t, "[SEP]") || !strcmp(t, "</s>") ? TOK_ROLE_SEP : TOK_ROLE_NONE;
        byte_level |= !strncmp(t, "\xc4\xa0", 2) || !strncmp(t, "\xe2\x96\x81", 3); /* Ġ or ▁ pieces */
    }
    /* where words start, by the vocabulary's convention: a piece after one
     * ending "</w>" (CLIP, XLM); one starting with "Ġ" or "▁" (byte-level BPE,
     * SentencePiece); else not a "##" piece (WordPiece). Specials and the first
     * token start one. */
    int end_marks = 0;
    for (int i = 0; i < n; i++) end_marks |= ends_word(tokens[i]);
    for (int i = 0; i < n; i++) {
        const char *t = tokens[i];
        int start = end_marks ? i == 0 || ends_word(tokens[i - 1])
                  : byte_level ? !strncmp(t, "\xc4\xa0", 2) || !strncmp(t, "\xe2\x96\x81", 3) || !strncmp(t, "\xc4\x8a", 2)
                               : strncmp(t, "##", 2) != 0;
        enc->word_start[i] = (unsigned char)(start || i == 0 || enc->special[i] || (i && enc->special[i - 1]));
    }
    enc->n = n;
    enc->byte_level = byte_level || end_marks; /* display differs from the spelling */
    enc->b_start = b_start;
    return 0;
}

/* A readable text for the page's Input row when the meta gives none: the
 * tokens [a, b) without specials, pieces joined as their vocabulary joins them. */
static char *text_of(const TokEncoding *enc, int a, int b) {
    size_t len = 1;
    for (int i = a; i < b; i++) len += strlen(enc->display[i]) + 1;
    char *t = malloc(len), *p = t;
    if (!t) return NULL;
    for (int i = a; i < b; i++) {
        if (enc->special[i]) continue;
        const char *d = enc->display[i];
        if (!enc->byte_level) {
            if (!strncmp(d, "##", 2)) d += 2; /* WordPiece: glued to the piece before */
            else if (p > t) *p++ = ' ';
        }
        size_t n = strlen(d);
        memcpy(p, d, n);
        p += n;
    }
    *p = '\0';
    char *q = t; /* a SentencePiece or byte-level text starts with its word's space */
    while (*q == ' ') q++;
    memmove(t, q, strlen(q) + 1);
    return t;
}

/* ---------------------------------------------------------------- load */

static int read_meta(const char *input, const char *meta_path, const RFile *f, char **json, char *used, size_t ulen,
                     AvErr *e) {
    *json = NULL;
    size_t len;
    if (meta_path) {
        snprintf(used, ulen, "%s", meta_path);
        return av_read_file(meta_path, 64 << 20, json, &len, e);
    }
    const char *dot = strrchr(input, '.'), *slash = strrchr(input, '/');
    size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - input) : strlen(input);
    snprintf(used, ulen, "%.*s.json", (int)(stem < ulen - 6 ? stem : ulen - 6), input);
    if (av_file_exists(used)) return av_read_file(used, 64 << 20, json, &len, e);
    if (f->st_meta) {
        snprintf(used, ulen, "%s (__metadata__.attnviz)", input);
        return (*json = strdup(f->st_meta)) ? 0 : av_err(e, "out of memory");
    }
    return av_err(e, "%s: no tokens: give --meta FILE.json, or put %s beside it (see attnviz render --help)", input, used);
}

static int stack_capture(RenderStack *st, float *probs, int L, int H, int n, const int *layers, int n_all) {
    Capture *c = &st->cap;
    memset(c, 0, sizeof *c);
    c->n_layers = n_all, c->n_heads = H, c->n_kv_heads = H, c->n_tokens = n, c->cap_tokens = (size_t)n;
    c->n_kept_layers = L, c->n_kept_heads = H;
    for (int l = 0; l < CAP_MAX_LAYERS; l++) c->layer_slot[l] = -1;
    for (int h = 0; h < CAP_MAX_HEADS; h++) c->head_slot[h] = h < H ? (short)h : -1;
    for (int l = 0; l < L; l++) c->layer_slot[layers[l]] = (short)l;
    c->attn = probs;
    st->n_rows = st->n_cols = n;
    st->present = 1;
    return 0;
}

int render_load(Rendered *r, const char *input, const char *meta_path, double max_bytes, AvErr *e) {
    memset(r, 0, sizeof *r);
    r->tokens.b_start = r->dec_tokens.b_start = -1;
    RFile f = {0};
    f.budget = max_bytes > 0 ? max_bytes : 0.5 * (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    size_t il = strlen(input);
    int rc = -1;
    char *json = NULL, mused[600];
    cJSON *m = NULL;
    const char **toks = NULL, **disp = NULL, **etoks = NULL, **dtoks = NULL;
    float *attn = NULL, *q = NULL, *k = NULL, *ea = NULL, *da = NULL, *xa = NULL;
    if (il > 12 && !strcmp(input + il - 12, ".safetensors")) rc = load_safetensors(&f, input, e);
    else if (il > 4 && !strcmp(input + il - 4, ".npz")) rc = load_npz(&f, input, e);
    else rc = av_err(e, "%s: give a .npz or .safetensors file of attention arrays", input);
    if (rc) goto done;
    rc = -1;
    if (read_meta(input, meta_path, &f, &json, mused, sizeof mused, e)) goto done;
    const int pr = av_json_parse(&m, json, strlen(json), mused, e);
    if (pr < 0) goto done;
    if (!m || !cJSON_IsObject(m)) {
        av_err(e, "%s: not a JSON object", mused);
        goto done;
    }
    int nt = 0, nd = 0, ne = 0, ndec = 0;
    if (meta_strings(r, cJSON_GetObjectItemCaseSensitive(m, "tokens"), "tokens", &nt, &toks, mused, e) ||
        meta_strings(r, cJSON_GetObjectItemCaseSensitive(m, "display_tokens"), "display_tokens", &nd, &disp, mused, e) ||
        meta_strings(r, cJSON_GetObjectItemCaseSensitive(m, "encoder_tokens"), "encoder_tokens", &ne, &etoks, mused, e) ||
        meta_strings(r, cJSON_GetObjectItemCaseSensitive(m, "decoder_tokens"), "decoder_tokens", &ndec, &dtoks, mused, e))
        goto done;
    if (disp && nd != nt) {
        av_err(e, "%s: %d display_tokens for %d tokens", mused, nd, nt);
        goto done;
    }
    const cJSON *jm = cJSON_GetObjectItemCaseSensitive(m, "model"), *jt = cJSON_GetObjectItemCaseSensitive(m, "text");
    const cJSON *jc = cJSON_GetObjectItemCaseSensitive(m, "causal"), *jb = cJSON_GetObjectItemCaseSensitive(m, "sentence_b_start");
    const cJSON *jl = cJSON_GetObjectItemCaseSensitive(m, "layers");
    if ((jm && !cJSON_IsString(jm) && !cJSON_IsNull(jm)) || (jt && !cJSON_IsString(jt) && !cJSON_IsNull(jt)) ||
        (jc && !cJSON_IsBool(jc)) || (jb && !cJSON_IsNumber(jb) && !cJSON_IsNull(jb))) {
        av_err(e, "%s: \"model\" and \"text\" must be strings, \"causal\" true or false, \"sentence_b_start\" a token index",
               mused);
        goto done;
    }
    r->model_name = strdup(cJSON_IsString(jm) ? jm->valuestring : "attention");
    r->text = strdup(cJSON_IsString(jt) ? jt->valuestring : "");
    if (!r->model_name || !r->text) {
        av_err(e, "out of memory");
        goto done;
    }
    const int causal = cJSON_IsTrue(jc);
    int b_start = -1;
    if (cJSON_IsNumber(jb)) {
        double v = jb->valuedouble;
        if (!(v >= 0 && v < nt) || v != floor(v)) {
            av_err(e, "%s: \"sentence_b_start\" %g is not a token index (0-%d)", mused, v, nt - 1);
            goto done;
        }
        b_start = (int)v;
    }

    int L = 0, H = 0, n = nt, n2 = nt;
    int have_self = gather(&f, "attention", input, &L, &H, &n, &n2, &attn, e);
    if (have_self < 0) goto done;
    int en = ne, en2 = ne, dn = ndec, dn2 = ndec, xr = ndec, xc = ne;
    int have_enc = gather(&f, "encoder_attention", input, &L, &H, &en, &en2, &ea, e);
    if (have_enc < 0) goto done;
    int have_dec = gather(&f, "decoder_attention", input, &L, &H, &dn, &dn2, &da, e);
    if (have_dec < 0) goto done;
    int have_x = gather(&f, "cross_attention", input, &L, &H, &xr, &xc, &xa, e);
    if (have_x < 0) goto done;
    r->enc_dec = have_enc == 0 || have_dec == 0 || have_x == 0;
    if (have_self != 0 && !r->enc_dec) {
        av_err(e, "%s: no 'attention' array (nor encoder_attention / decoder_attention / cross_attention)", input);
        goto done;
    }
    if (have_self == 0 && r->enc_dec) {
        av_err(e, "%s: both 'attention' and encoder-decoder arrays: give one or the other", input);
        goto done;
    }
    if (have_self == 0 && !toks) {
        av_err(e, "%s: \"tokens\" is missing", mused);
        goto done;
    }
    if ((have_enc == 0 || have_x == 0) && !etoks) {
        av_err(e, "%s: \"encoder_tokens\" is missing", mused);
        goto done;
    }
    if ((have_dec == 0 || have_x == 0) && !dtoks) {
        av_err(e, "%s: \"decoder_tokens\" is missing", mused);
        goto done;
    }
    /* the layers' original indices */
    if (!(r->layers = malloc((size_t)L * sizeof *r->layers))) {
        av_err(e, "out of memory");
        goto done;
    }
    r->n_layers = L;
    if (jl && !cJSON_IsNull(jl)) {
        if (!cJSON_IsArray(jl) || cJSON_GetArraySize(jl) != L) {
            av_err(e, "%s: \"layers\" must list the %d given layers' indices", mused, L);
            goto done;
        }
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, jl) {
            double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
            if (!(v >= 0 && v < CAP_MAX_LAYERS) || v != floor(v) || (i && v <= r->layers[i - 1])) {
                av_err(e, "%s: \"layers\" must be increasing layer indices below %d", mused, CAP_MAX_LAYERS);
                goto done;
            }
            r->layers[i++] = (int)v;
        }
    } else {
        for (int i = 0; i < L; i++) r->layers[i] = i;
    }
    const int n_all = r->layers[L - 1] + 1;
    if (have_self == 0 && check_probs(attn, L, H, n, n, causal, "attention", r->layers, input, e)) goto done;
    if (have_enc == 0 && check_probs(ea, L, H, en, en, 0, "encoder_attention", r->layers, input, e)) goto done;
    if (have_dec == 0 && check_probs(da, L, H, dn, dn, 1, "decoder_attention", r->layers, input, e)) goto done;
    if (have_x == 0 && check_probs(xa, L, H, xr, xc, 0, "cross_attention", r->layers, input, e)) goto done;

    /* queries and keys, when given, for the neuron view */
    int qL = L, qH = H, qn = n, qd = 0, kL = L, kH = H, kn = n, kd = 0;
    int have_q = have_self == 0 ? gather(&f, "queries", input, &qL, &qH, &qn, &qd, &q, e) : 1;
    if (have_q < 0) goto done;
    int have_k = have_self == 0 ? gather(&f, "keys", input, &kL, &kH, &kn, &kd, &k, e) : 1;
    if (have_k < 0) goto done;
    if ((have_q == 0) != (have_k == 0) || (have_q == 0 && qd != kd)) {
        av_err(e, "%s: 'queries' and 'keys' go together, with the same head size", input);
        goto done;
    }

    ModelConfig *c = &r->cfg;
    snprintf(c->model_type, sizeof c->model_type, "%s", r->enc_dec ? "encoder-decoder" : "external");
    c->num_layers = n_all, c->num_heads = H, c->num_kv_heads = H, c->causal = causal;
    c->head_dim = have_q == 0 ? qd : 0;
    c->hidden_size = c->head_dim * H;
    c->max_position_embeddings = R_MAX_TOKENS;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "unknown");
    if (have_self == 0) {
        if (make_encoding(r, &r->tokens, toks, disp, nt, b_start, e)) goto done;
        if (!cJSON_IsString(jt)) {
            free(r->text);
            r->text = text_of(&r->tokens, 0, b_start >= 0 ? b_start : nt);
            if (b_start >= 0 && !(r->text_b = text_of(&r->tokens, b_start, nt))) {
                av_err(e, "out of memory");
                goto done;
            }
            if (!r->text) {
                av_err(e, "out of memory");
                goto done;
            }
        }
        stack_capture(&r->self, attn, L, H, n, r->layers, n_all);
        attn = NULL;
        if (have_q == 0) {
            r->self.cap.q = q, r->self.cap.k = k, r->self.cap.head_dim = qd;
            q = k = NULL;
        }
    } else {
        if (etoks && make_encoding(r, &r->tokens, etoks, NULL, ne, -1, e)) goto done;
        if (dtoks && make_encoding(r, &r->dec_tokens, dtoks, NULL, ndec, -1, e)) goto done;
        if (have_enc == 0) stack_capture(&r->enc, ea, L, H, en, r->layers, n_all), ea = NULL;
        if (have_dec == 0) stack_capture(&r->dec, da, L, H, dn, r->layers, n_all), da = NULL;
        if (have_x == 0) {
            r->cross.cross = xa, r->cross.n_rows = xr, r->cross.n_cols = xc, r->cross.present = 1;
            xa = NULL;
        }
    }
    rc = 0;
done:
    free(toks), free(disp), free(etoks), free(dtoks);
    free(attn), free(q), free(k), free(ea), free(da), free(xa);
    cJSON_Delete(m);
    free(json);
    rfile_free(&f);
    if (rc) render_free(r);
    return rc;
}

void render_free(Rendered *r) {
    free(r->self.cap.attn), free(r->self.cap.q), free(r->self.cap.k);
    free(r->enc.cap.attn), free(r->dec.cap.attn), free(r->cross.cross);
    tok_encoding_free(&r->tokens);
    tok_encoding_free(&r->dec_tokens);
    for (int i = 0; i < r->n_store; i++) free(r->token_store[i]);
    free(r->token_store);
    free(r->layers);
    free(r->model_name);
    free(r->text);
    free(r->text_b);
    memset(r, 0, sizeof *r);
}
