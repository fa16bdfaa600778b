/* loader.c — a checkpoint's weights as the views the engine reads (loader.h):
 * the files found and mapped, the config read, the family's load called
 * (arch.h), which takes its tensors through model_linear and friends: lookup
 * under the names real checkpoints use, shape and dtype checks, widening where
 * a float copy is needed. Imports nothing from the engine: it fills
 * weights.h's structs. */
#include "loader.h"
#include "jsonread.h"

#include <dirent.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "quant.h"
#include "torchbin.h"
#include "util.h"

/* ggml's numbers for the safetensors dtypes the engine widens per tile. */
#define TYPE_F16 1u
#define TYPE_BF16 30u

/* ---------------------------------------------------------------- lookup */

static int keep_owned(Model *m, float *p) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 64;
        float **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) return -1;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

/* A tensor of either container, shape in PyTorch's order (rows first). */
typedef struct {
    const char *name;
    uint32_t type;        /* ggml numbering (kernels.h); KERN_UNSUPPORTED when not a float/quantized type */
    const char *type_name;
    int ndim;
    int64_t shape[4];
    const uint8_t *data;
    size_t nbytes;
} TensorRef;

#define KERN_UNSUPPORTED 0xffffffffu

static int ref_st(const StTensor *t, TensorRef *r) {
    r->name = t->name, r->type_name = t->dtype_name, r->ndim = t->ndim > 4 ? 4 : t->ndim;
    r->type = t->dtype == ST_F32 ? KERN_F32 : t->dtype == ST_F16 ? TYPE_F16 : t->dtype == ST_BF16 ? TYPE_BF16
                                                                                               : KERN_UNSUPPORTED;
    for (int i = 0; i < r->ndim; i++) r->shape[i] = t->shape[i];
    r->data = t->data, r->nbytes = t->nbytes;
    return 1;
}

static int ref_gguf(const GgufTensor *t, TensorRef *r) {
    r->name = t->name, r->type_name = gguf_type_name(t->type), r->ndim = t->n_dims;
    r->type = quant_supported(t->type) ? (uint32_t)t->type : KERN_UNSUPPORTED;
    for (int i = 0; i < t->n_dims; i++) r->shape[i] = (int64_t)t->dims[t->n_dims - 1 - i]; /* dims[0] is the row */
    r->data = t->data, r->nbytes = t->nbytes;
    return 1;
}

/* name as stored: Hugging Face's, or the family's GGUF name for it. */
static int find_exact(const Model *m, const char *name, TensorRef *r) {
    if (m->gguf) {
        const ArchSpec *spec = arch_spec(m->cfg.arch);
        char gname[256];
        if (!spec->gguf_name || spec->gguf_name(name, gname, sizeof gname) != 0) return 0;
        const GgufTensor *t = gguf_find_tensor(m->gguf, gname);
        return t ? ref_gguf(t, r) : 0;
    }
    for (int i = 0; i < m->n_files; i++) {
        const StTensor *t = st_find(&m->files[i], name);
        if (t) return ref_st(t, r);
    }
    return 0;
}

/* Looks a tensor up under the names real checkpoints use: with or without the
 * family's prefix, LayerNorm weight/bias or gamma/beta (Google's BERT). */
static int find_variant(const Model *m, const char *name, TensorRef *r) {
    const ArchSpec *spec = arch_spec(m->cfg.arch);
    const char *prefixes[] = {"", m->tensor_prefix ? m->tensor_prefix : spec && !m->gguf ? spec->tensor_prefix : ""};
    char alt[256] = "", used[300];
    size_t nl = strlen(name);
    if (nl > 7 && !strcmp(name + nl - 7, ".weight") && strstr(name, "LayerNorm"))
        snprintf(alt, sizeof alt, "%.*s.gamma", (int)(nl - 7), name);
    else if (nl > 5 && !strcmp(name + nl - 5, ".bias") && strstr(name, "LayerNorm"))
        snprintf(alt, sizeof alt, "%.*s.beta", (int)(nl - 5), name);
    for (int p = 0; p < 2; p++) {
        for (int v = 0; v < 2; v++) {
            const char *base = v ? alt : name;
            if (!*base) continue;
            snprintf(used, sizeof used, "%s%s", prefixes[p], base);
            if (find_exact(m, used, r)) return 1;
        }
    }
    return 0;
}

int model_has_tensor(const Model *m, const char *name) {
    TensorRef r;
    return find_variant(m, name, &r);
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* The tensor, checked to have the expected shape and a type the engine reads,
 * its data long enough for that shape. */
static int checked(Model *m, const char *name, int ndim, int64_t d0, int64_t d1, TensorRef *t, AvErr *e) {
    int64_t want[2] = {d0, d1};
    char ws[64], gs[64];
    shape_str(ws, sizeof ws, ndim, want);
    if (!find_variant(m, name, t)) {
        char gname[256] = "";
        const ArchSpec *spec = arch_spec(m->cfg.arch);
        if (m->gguf && spec->gguf_name && spec->gguf_name(name, gname, sizeof gname) == 0)
            return av_err(e, "%s: missing tensor '%s' (transformers' %s; expected shape %s)", m->path, gname, name, ws);
        return av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->path, name, ws);
    }
    if (t->type == KERN_UNSUPPORTED && !m->gguf)
        return av_err(e, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", m->path, t->name, t->type_name);
    if (t->type == KERN_UNSUPPORTED)
        return av_err(e, "%s: tensor '%s' has type %s, which attnviz does not widen (F32, F16, BF16, Q4_0, Q4_1, "
                      "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4)", m->path, t->name, t->type_name);
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        shape_str(gs, sizeof gs, t->ndim, t->shape);
        return av_err(e, "%s: tensor '%s' has shape %s; %s implies %s", m->path, t->name, gs,
                      m->gguf ? "its metadata" : "config.json", ws);
    }
    size_t cols = (size_t)(ndim == 2 ? d1 : d0), rows = ndim == 2 ? (size_t)d0 : 1;
    size_t blk = gguf_type_block(t->type), bs = gguf_type_bytes(t->type);
    if (!blk || cols % blk || rows * (cols / blk) > t->nbytes / bs)
        return av_err(e, "%s: tensor '%s' is shorter than its shape %s", m->path, t->name, ws);
    if (!m->dtype_name[0] || (ndim == 2 && !strcmp(m->dtype_name, "F32") && t->type != KERN_F32))
        snprintf(m->dtype_name, sizeof m->dtype_name, "%s", t->type_name); /* the products' type, not the norms' */
    return 0;
}

/* A float32 copy of t's rows x cols elements, or the mapping itself for aligned F32. */
static const float *as_f32(Model *m, const TensorRef *t, size_t rows, size_t cols, float offset, AvErr *e) {
    if (t->type == KERN_F32 && ((uintptr_t)t->data % sizeof(float)) == 0 && offset == 0.0f)
        return (const float *)t->data;
    float *copy = malloc(rows * cols * sizeof *copy);
    if (!copy || keep_owned(m, copy) != 0) {
        free(copy);
        av_err(e, "%s: out of memory converting tensor '%s'", m->path, t->name);
        return NULL;
    }
    if (quant_rows(t->type, t->data, t->nbytes, rows, cols, 0, rows, copy, t->name, e) != 0) return NULL;
    for (size_t i = 0; offset != 0.0f && i < rows * cols; i++) copy[i] += offset;
    return copy;
}

const float *model_tensor(Model *m, const char *name, int ndim, int64_t d0, int64_t d1, AvErr *e) {
    TensorRef t;
    if (checked(m, name, ndim, d0, d1, &t, e)) return NULL;
    return ndim == 2 ? as_f32(m, &t, (size_t)d0, (size_t)d1, 0.0f, e) : as_f32(m, &t, 1, (size_t)d0, 0.0f, e);
}

static void note_width(Model *m, int64_t in) {
    if (in > m->max_in) m->max_in = (int)in;
}

int model_linear(Model *m, Linear *lin, const char *prefix, int64_t in, int64_t out, int bias, AvErr *e) {
    char nm[300];
    TensorRef t;
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    if (checked(m, nm, 2, out, in, &t, e)) return -1;
    memset(lin, 0, sizeof *lin);
    lin->out = (int)out, lin->in = (int)in, lin->ld = (int)in, lin->name = t.name;
    if (t.type != KERN_F32) {
        /* kept in its stored type (half precision or blocks), widened per tile (kernels.h) */
        lin->type = t.type;
        lin->w = t.data;
        lin->row_bytes = (size_t)in / gguf_type_block(t.type) * gguf_type_bytes(t.type);
    } else {
        lin->type = KERN_F32;
        if (!(lin->w = as_f32(m, &t, (size_t)out, (size_t)in, 0.0f, e))) return -1;
    }
    note_width(m, in);
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    if (bias == 0 || (bias < 0 && !model_has_tensor(m, nm))) return 0;
    return (lin->b = model_tensor(m, nm, 1, out, 0, e)) ? 0 : -1;
}

/* A tensor of any shape holding want elements, of a type the engine reads;
 * shape_desc says what was expected, for the message. */
static int checked_elems(Model *m, const char *name, int64_t want, const char *shape_desc, TensorRef *t, AvErr *e) {
    if (!find_variant(m, name, t)) return av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->path, name, shape_desc);
    if (t->type == KERN_UNSUPPORTED)
        return av_err(e, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", m->path, t->name, t->type_name);
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++) count *= t->shape[i];
    char gs[64];
    shape_str(gs, sizeof gs, t->ndim, t->shape);
    if (count != want)
        return av_err(e, "%s: tensor '%s' has shape %s; %s implies %s", m->path, t->name, gs,
                      m->gguf ? "its metadata" : "config.json", shape_desc);
    size_t blk = gguf_type_block(t->type), bs = gguf_type_bytes(t->type);
    if (!blk || (size_t)want % blk || (size_t)want / blk > t->nbytes / bs)
        return av_err(e, "%s: tensor '%s' is shorter than its shape %s", m->path, t->name, gs);
    return 0;
}

const float *model_tensor_flat(Model *m, const char *name, int64_t n, AvErr *e) {
    TensorRef t;
    char desc[48];
    snprintf(desc, sizeof desc, "%lld elements", (long long)n);
    if (checked_elems(m, name, n, desc, &t, e)) return NULL;
    return as_f32(m, &t, 1, (size_t)n, 0.0f, e);
}

int model_scalar(Model *m, const char *name, float *out, AvErr *e) {
    const float *v = model_tensor_flat(m, name, 1, e);
    if (!v) return -1;
    *out = v[0];
    return 0;
}

int model_linear_conv(Model *m, Linear *lin, const char *prefix, int64_t channels, int64_t k, int64_t out, int bias,
                      AvErr *e) {
    char nm[300], desc[64];
    TensorRef t;
    const int64_t in = channels * k * k;
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    snprintf(desc, sizeof desc, "[%lld, %lld, %lld, %lld]", (long long)out, (long long)channels, (long long)k,
             (long long)k);
    if (checked_elems(m, nm, out * in, desc, &t, e)) return -1;
    if (t.ndim != 4 || t.shape[0] != out || t.shape[1] != channels || t.shape[2] != k || t.shape[3] != k) {
        char gs[64];
        shape_str(gs, sizeof gs, t.ndim, t.shape);
        return av_err(e, "%s: tensor '%s' has shape %s; config.json implies %s", m->path, t.name, gs, desc);
    }
    memset(lin, 0, sizeof *lin);
    lin->out = (int)out, lin->in = (int)in, lin->ld = (int)in, lin->name = t.name;
    if (t.type != KERN_F32) {
        lin->type = t.type;
        lin->w = t.data;
        lin->row_bytes = (size_t)in / gguf_type_block(t.type) * gguf_type_bytes(t.type);
    } else {
        lin->type = KERN_F32;
        if (!(lin->w = as_f32(m, &t, (size_t)out, (size_t)in, 0.0f, e))) return -1;
    }
    note_width(m, in);
    if (!m->dtype_name[0]) snprintf(m->dtype_name, sizeof m->dtype_name, "%s", t.type_name);
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    if (bias == 0 || (bias < 0 && !model_has_tensor(m, nm))) return 0;
    return (lin->b = model_tensor(m, nm, 1, out, 0, e)) ? 0 : -1;
}

int model_linear_part(Model *m, Linear *lin, const char *prefix, int64_t in, int64_t total, int64_t row0,
                      int64_t rows, AvErr *e) {
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    return model_linear_rows(m, lin, nm, in, total, row0, rows, e);
}

int model_linear_rows(Model *m, Linear *lin, const char *nm, int64_t in, int64_t total, int64_t row0, int64_t rows,
                      AvErr *e) {
    TensorRef t;
    if (row0 < 0 || rows < 1 || row0 + rows > total) return av_err(e, "%s: rows out of range", nm);
    if (checked(m, nm, 2, total, in, &t, e)) return -1;
    memset(lin, 0, sizeof *lin);
    lin->out = (int)rows, lin->in = (int)in, lin->ld = (int)in, lin->name = t.name;
    if (t.type != KERN_F32) {
        /* whole rows of blocks: the part starts on a row boundary of the stored type */
        lin->type = t.type;
        lin->row_bytes = (size_t)in / gguf_type_block(t.type) * gguf_type_bytes(t.type);
        lin->w = (const unsigned char *)t.data + (size_t)row0 * lin->row_bytes;
    } else {
        const float *w = as_f32(m, &t, (size_t)total, (size_t)in, 0.0f, e);
        if (!w) return -1;
        lin->type = KERN_F32;
        lin->w = w + (size_t)row0 * (size_t)in;
    }
    note_width(m, in);
    return 0;
}

int model_linear_expert(Model *m, Linear *lin, const char *prefix, int64_t n, int64_t idx, int64_t in, int64_t out,
                        AvErr *e) {
    char nm[300], ws[80], gs[80];
    TensorRef t;
    const int64_t want[3] = {n, out, in};
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    shape_str(ws, sizeof ws, 3, want);
    if (!find_variant(m, nm, &t)) {
        char gname[256] = "";
        const ArchSpec *spec = arch_spec(m->cfg.arch);
        if (m->gguf && spec->gguf_name && spec->gguf_name(nm, gname, sizeof gname) == 0)
            return av_err(e, "%s: missing tensor '%s' (transformers' %s; expected shape %s)", m->path, gname, nm, ws);
        return av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->path, nm, ws);
    }
    if (t.type == KERN_UNSUPPORTED)
        return av_err(e, "%s: tensor '%s' has type %s, which attnviz does not widen", m->path, t.name, t.type_name);
    if (t.ndim != 3 || t.shape[0] != n || t.shape[1] != out || t.shape[2] != in) {
        shape_str(gs, sizeof gs, t.ndim, t.shape);
        return av_err(e, "%s: tensor '%s' has shape %s; %s implies %s", m->path, t.name, gs,
                      m->gguf ? "its metadata" : "config.json", ws);
    }
    const size_t blk = gguf_type_block(t.type), bs = gguf_type_bytes(t.type);
    if (idx < 0 || idx >= n || !blk || in % (int64_t)blk || (size_t)(n * out) * ((size_t)in / blk) > t.nbytes / bs)
        return av_err(e, "%s: tensor '%s' is shorter than its shape %s", m->path, t.name, ws);
    memset(lin, 0, sizeof *lin);
    lin->out = (int)out, lin->in = (int)in, lin->ld = (int)in, lin->name = t.name;
    lin->type = t.type;
    /* expert idx's rows: a whole (out, in) matrix of the stack, kept in its stored type */
    lin->row_bytes = (size_t)in / blk * bs;
    lin->w = (const unsigned char *)t.data + (size_t)idx * (size_t)out * lin->row_bytes;
    if (t.type == KERN_F32 && ((uintptr_t)lin->w % sizeof(float)) != 0)
        return av_err(e, "%s: tensor '%s' is not aligned to 4 bytes", m->path, t.name);
    if (!m->dtype_name[0] || (!strcmp(m->dtype_name, "F32") && t.type != KERN_F32))
        snprintf(m->dtype_name, sizeof m->dtype_name, "%s", t.type_name);
    note_width(m, in);
    return 0;
}

/* model_linear_expert_cols' weights from transformers' MXFP4 layout: block
 * g of row R is scales[idx][R][g] (E8M0) and 16 bytes whose byte j holds
 * elements 2j (low nibble) and 2j + 1; ggml's block is the same exponent,
 * then byte j holding elements j (low) and j + 16. The codes index the same
 * E2M1 values (ggml's doubled, its scale halved). */
static int expert_mxfp4(Model *m, Linear *lin, const char *name, int64_t n, int64_t idx, int64_t in, int64_t total,
                        int64_t col0, int64_t step, int64_t out, AvErr *e) {
    char bn[300], sn[300], ws[96], gs[96];
    TensorRef tq, ts;
    snprintf(bn, sizeof bn, "%.250s_blocks", name);
    snprintf(sn, sizeof sn, "%.250s_scales", name);
    const int64_t G = in / 32, want_q[4] = {n, total, G, 16}, want_s[3] = {n, total, G};
    shape_str(ws, sizeof ws, 3, want_s);
    if (!find_variant(m, bn, &tq)) return -1;
    if (in % 32)
        return av_err(e, "%s: '%s' is MXFP4, whose blocks need rows of a multiple of 32 values (config.json implies %lld)",
                      m->path, tq.name, (long long)in);
    if (!find_variant(m, sn, &ts)) return av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->path, sn, ws);
    if (in % 32 || strcmp(tq.type_name, "U8") || strcmp(ts.type_name, "U8"))
        return av_err(e, "%s: MXFP4 tensors '%s' / '%s' must be U8 over rows of a multiple of 32 (%lld)", m->path, tq.name,
                      ts.name, (long long)in);
    const TensorRef *tt[2] = {&tq, &ts};
    const int64_t *want[2] = {want_q, want_s};
    for (int k = 0; k < 2; k++) {
        const int nd = k ? 3 : 4;
        int ok = tt[k]->ndim == nd;
        for (int d = 0; ok && d < nd; d++) ok = tt[k]->shape[d] == want[k][d];
        if (!ok) {
            shape_str(gs, sizeof gs, tt[k]->ndim, tt[k]->shape);
            shape_str(ws, sizeof ws, nd, want[k]);
            return av_err(e, "%s: tensor '%s' has shape %s; config.json implies %s", m->path, tt[k]->name, gs, ws);
        }
    }
    if (idx < 0 || idx >= n || col0 < 0 || step < 1 || col0 + (out - 1) * step >= total ||
        tq.nbytes < (size_t)(n * total * G * 16) || ts.nbytes < (size_t)(n * total * G))
        return av_err(e, "%s: tensor '%s' is shorter than its shape", m->path, tq.name);
    const size_t row_bytes = (size_t)G * 17;
    float *copy = malloc(((size_t)out * row_bytes + 3) / 4 * sizeof *copy);
    if (!copy || keep_owned(m, copy) != 0) {
        free(copy);
        return av_err(e, "%s: out of memory for an expert of '%s'", m->path, tq.name);
    }
    uint8_t *dst = (uint8_t *)copy;
    for (int64_t r = 0; r < out; r++) {
        const size_t R = (size_t)idx * (size_t)total + (size_t)(col0 + r * step);
        for (int64_t g = 0; g < G; g++) {
            const uint8_t *q = tq.data + (R * (size_t)G + (size_t)g) * 16;
            uint8_t *b = dst + (size_t)r * row_bytes + (size_t)g * 17, c[32];
            for (int j = 0; j < 16; j++) c[2 * j] = q[j] & 0xF, c[2 * j + 1] = q[j] >> 4;
            b[0] = ts.data[R * (size_t)G + (size_t)g];
            for (int j = 0; j < 16; j++) b[1 + j] = (uint8_t)(c[j] | c[j + 16] << 4);
        }
    }
    memset(lin, 0, sizeof *lin);
    lin->out = (int)out, lin->in = (int)in, lin->ld = (int)in, lin->name = tq.name, lin->type = GGUF_T_MXFP4, lin->w = copy;
    lin->row_bytes = row_bytes;
    snprintf(m->dtype_name, sizeof m->dtype_name, "MXFP4");
    note_width(m, in);
    return 0;
}

int model_linear_expert_cols(Model *m, Linear *lin, const char *name, const char *bias_name, int64_t n, int64_t idx,
                             int64_t in, int64_t total, int64_t col0, int64_t step, int64_t out, AvErr *e) {
    TensorRef t, tb;
    char ws[80], gs[80];
    const int64_t want[3] = {n, in, total}, want_b[2] = {n, total};
    shape_str(ws, sizeof ws, 3, want);
    if (!find_variant(m, name, &t)) {
        /* the published gpt-oss checkpoints: name_blocks / name_scales, (total, in) rows in MXFP4 */
        AvErr qe = {0};
        if (expert_mxfp4(m, lin, name, n, idx, in, total, col0, step, out, &qe) == 0) goto bias;
        if (qe.msg[0]) return *e = qe, -1;
        return av_err(e, "%s: missing tensor '%s' (expected shape %s, or its MXFP4 %s_blocks and _scales)", m->path, name,
                      ws, name);
    }
    if (t.type != KERN_F32 && t.type != TYPE_F16 && t.type != TYPE_BF16)
        return av_err(e, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", m->path, t.name, t.type_name);
    if (t.ndim != 3 || t.shape[0] != n || t.shape[1] != in || t.shape[2] != total) {
        shape_str(gs, sizeof gs, t.ndim, t.shape);
        return av_err(e, "%s: tensor '%s' has shape %s; config.json implies %s", m->path, t.name, gs, ws);
    }
    const size_t es = t.type == KERN_F32 ? 4 : 2;
    if (idx < 0 || idx >= n || col0 < 0 || step < 1 || col0 + (out - 1) * step >= total ||
        (size_t)n * (size_t)in * (size_t)total > t.nbytes / es)
        return av_err(e, "%s: tensor '%s' is shorter than its shape %s", m->path, t.name, ws);
    /* the transpose: (out, in) rows in the stored type, as the products read them */
    float *copy = malloc(((size_t)out * (size_t)in * es + 3) / 4 * sizeof *copy);
    if (!copy || keep_owned(m, copy) != 0) {
        free(copy);
        return av_err(e, "%s: out of memory for an expert of '%s'", m->path, t.name);
    }
    const uint8_t *src = t.data + (size_t)idx * (size_t)in * (size_t)total * es;
    uint8_t *dst = (uint8_t *)copy;
    for (int64_t r = 0; r < out; r++)
        for (int64_t k = 0; k < in; k++)
            memcpy(dst + ((size_t)r * (size_t)in + (size_t)k) * es, src + ((size_t)k * (size_t)total + (size_t)(col0 + r * step)) * es, es);
    memset(lin, 0, sizeof *lin);
    lin->out = (int)out, lin->in = (int)in, lin->ld = (int)in, lin->name = t.name, lin->type = t.type, lin->w = copy;
    lin->row_bytes = (size_t)in * es;
    if (!m->dtype_name[0] || (!strcmp(m->dtype_name, "F32") && t.type != KERN_F32))
        snprintf(m->dtype_name, sizeof m->dtype_name, "%s", t.type_name);
    note_width(m, in);
bias:
    /* the bias: row idx of (n, total), widened, the same columns */
    shape_str(ws, sizeof ws, 2, want_b);
    if (!find_variant(m, bias_name, &tb))
        return av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->path, bias_name, ws);
    if (tb.type != KERN_F32 && tb.type != TYPE_F16 && tb.type != TYPE_BF16)
        return av_err(e, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", m->path, tb.name, tb.type_name);
    if (tb.ndim != 2 || tb.shape[0] != n || tb.shape[1] != total) {
        shape_str(gs, sizeof gs, tb.ndim, tb.shape);
        return av_err(e, "%s: tensor '%s' has shape %s; config.json implies %s", m->path, tb.name, gs, ws);
    }
    float *row = malloc((size_t)total * sizeof *row), *b = malloc((size_t)out * sizeof *b);
    if (!row || !b || keep_owned(m, b) != 0) {
        free(row), free(b);
        return av_err(e, "%s: out of memory for an expert of '%s'", m->path, tb.name);
    }
    if (quant_rows(tb.type, tb.data, tb.nbytes, (size_t)n, (size_t)total, (size_t)idx, (size_t)idx + 1, row, tb.name, e)) {
        free(row);
        return -1;
    }
    for (int64_t r = 0; r < out; r++) b[r] = row[col0 + r * step];
    free(row);
    lin->b = b;
    return 0;
}

int model_conv1d(Model *m, Linear *parts, int n_parts, const char *prefix, int64_t in, int64_t out, AvErr *e) {
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    const float *w = model_tensor(m, nm, 2, in, n_parts * out, e);
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    const float *b = w ? model_tensor(m, nm, 1, n_parts * out, 0, e) : NULL;
    if (!b) return -1;
    for (int p = 0; p < n_parts; p++)
        parts[p] = (Linear){.type = KERN_F32, .w = w + (size_t)p * out, .b = b + (size_t)p * out, .out = (int)out,
                            .in = (int)in, .conv1d = 1, .ld = (int)(n_parts * out), .name = prefix};
    note_width(m, in);
    return 0;
}

int model_norm(Model *m, Norm *nm, const char *prefix, int64_t dim, AvErr *e) {
    char name[300];
    TensorRef t;
    snprintf(name, sizeof name, "%.250s.weight", prefix);
    if (checked(m, name, 1, dim, 0, &t, e) || !(nm->g = as_f32(m, &t, 1, (size_t)dim, m->cfg.norm_offset, e)))
        return -1;
    nm->rms = m->cfg.norm == NORM_RMS;
    nm->eps = m->cfg.layer_norm_eps;
    nm->b = NULL;
    if (nm->rms || m->cfg.norm_no_bias) return 0;
    snprintf(name, sizeof name, "%.250s.bias", prefix);
    return (nm->b = model_tensor(m, name, 1, dim, 0, e)) ? 0 : -1;
}

/* ---------------------------------------------------------------- loading */

/* Hugging Face's rotary frequencies (transformers' ROPE_INIT_FUNCTIONS) in
 * float32 as torch computes them, over the rotary dims only (partial rotary);
 * the dynamic kind's length-dependent base is applied per forward pass.
 * LongRoPE has two sets (short factors, long factors), chosen per pass by its
 * length; a llama.cpp file's rope_freqs divide each frequency (ROPE_FACTORS);
 * layers marked in layer_rope_local have their own unscaled base. */
static float *rope_freqs(const ModelConfig *c, float theta, RopeKind kind, const float *ext) {
    const int half = c->rotary_dim / 2;
    float *inv = malloc((size_t)half * sizeof *inv);
    if (!inv) return NULL;
    for (int i = 0; i < half; i++) {
        float f = 1.0f / powf(theta, (float)(2 * i) / (float)c->rotary_dim);
        if (kind == ROPE_LINEAR) f /= c->rope_factor;
        if (kind == ROPE_LONGROPE) f = 1.0f / (ext[i] * powf(theta, (float)(2 * i) / (float)c->rotary_dim));
        if (kind == ROPE_FACTORS) f /= ext[i]; /* llama.cpp's rope_freqs: theta / freq_factor */
        if (kind == ROPE_YARN) {
            /* transformers' _compute_yarn_parameters: a ramp over the dims between the
             * ones turning beta_fast and beta_slow times over the original context blends
             * the interpolated frequency (divided by factor) into the original one */
            const double pi = 3.14159265358979323846, dim = c->rotary_dim, lb = 2 * log((double)theta);
            double lo = dim * log(c->rope_orig_max_pos / (c->rope_beta_fast * 2 * pi)) / lb;
            double hi = dim * log(c->rope_orig_max_pos / (c->rope_beta_slow * 2 * pi)) / lb;
            if (c->rope_truncate) lo = floor(lo), hi = ceil(hi);
            lo = lo > 0 ? lo : 0, hi = hi < dim - 1 ? hi : dim - 1;
            if (lo == hi) hi += 0.001; /* as transformers: no division by zero */
            const float pos_freq = powf(theta, (float)(2 * i) / (float)c->rotary_dim);
            float ramp = ((float)i - (float)lo) / (float)(hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const float extra = 1.0f - ramp;
            f = 1.0f / (c->rope_factor * pos_freq) * (1.0f - extra) + 1.0f / pos_freq * extra;
        }
        if (kind == ROPE_LLAMA3) {
            const double pi = 3.14159265358979323846;
            double old = c->rope_orig_max_pos, lo = c->rope_low_freq, hi = c->rope_high_freq;
            double wavelen = 2 * pi / f, low_wl = old / lo, high_wl = old / hi;
            if (wavelen > low_wl) f = f / c->rope_factor;
            else if (!(wavelen < high_wl)) {
                float smooth = (float)((old / wavelen - lo) / (hi - lo));
                f = (1.0f - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        inv[i] = f;
    }
    return inv;
}

static int rope_init(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    int bad = !(m->inv_freq = rope_freqs(c, c->rope_theta, c->rope_kind, c->rope_short));
    if (c->rope_kind == ROPE_LONGROPE) bad |= !(m->inv_freq_long = rope_freqs(c, c->rope_theta, c->rope_kind, c->rope_long));
    if (c->rope_local_theta > 0) bad |= !(m->inv_freq_local = rope_freqs(c, c->rope_local_theta, ROPE_DEFAULT, NULL));
    return bad ? av_err(e, "out of memory") : 0;
}

/* The folder part of path ("." when there is none). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) memcpy(d, path, n), d[n] = '\0';
    return d;
}

/* The weight files, mapped and now checked (config, every tensor's name,
 * shape and type): how to hold them (util.h's av_hold_plan for their total),
 * decided here and done by model_hold, so that a model or a run refused costs
 * no read of its weights: only the pages the checks read were touched. mode AV_MAP_RESIDENT: the process makes many passes. The products
 * read F32/F16/BF16 weights in place, quantized ones through a per-panel
 * widening: only the former gain from a resident copy. */
static int plan_weights(Model *m, AvMapMode mode, AvErr *e) {
    double total = m->gguf ? (double)m->gguf->map_len : 0, avail;
    for (int i = 0; i < m->n_files; i++) total += (double)m->files[i].map_len;
    if (av_memory_available(&avail, NULL, e) != 0) return -1;
    const uint32_t t = m->w.layers && m->cfg.num_layers > 0 ? m->w.layers[0].q.type : KERN_F32;
    const int in_place = t == KERN_F32 || t == KERN_F16 || t == KERN_BF16;
    m->file_bytes = total;
    m->hold = av_hold_plan(total, mode == AV_MAP_RESIDENT, in_place, avail, av_memory_physical());
    m->held = 0;
    return 0;
}

int model_hold(Model *m, AvErr *e) {
    if (m->held || m->files_borrowed) return 0;
    const int n = m->gguf ? 1 : m->n_files;
    for (int i = 0; i < n; i++) {
        void *map = m->gguf ? m->gguf->map : m->files[i].map;
        const size_t len = m->gguf ? m->gguf->map_len : m->files[i].map_len;
        const char *path = m->gguf ? m->path : m->files[i].path;
        if (m->hold == AV_HOLD_RESIDENT && av_map_make_resident(map, len, path, e) != 0) return -1;
    }
    m->held = 1;
    return 0;
}

static int cmp_shard(const void *a, const void *b, void *ctx) {
    const char *const *names = ctx;
    const int x = *(const int *)a, y = *(const int *)b, c = strcmp(names[x], names[y]);
    return c ? c : (x > y) - (x < y);
}

/* The shard files a model.safetensors.index.json names, each once, in order of first mention. */
static int open_shards(Model *m, const char *index_path, AvErr *e) {
    char *buf;
    size_t len;
    if (av_read_file(index_path, 64 << 20, &buf, &len, e) != 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, index_path, e);
    free(buf);
    if (pr < 0) return -1;
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    int rc = -1, n = cJSON_IsObject(map) ? cJSON_GetArraySize(map) : 0;
    char *dir = dir_of(index_path);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (!cJSON_IsObject(map) || !n) {
        av_err(e, "%s: expected {\"weight_map\": {tensor: shard file}}", index_path);
        goto done;
    }
    if (!dir || !names || !(m->files = calloc((size_t)n, sizeof *m->files))) {
        av_err(e, "out of memory");
        goto done;
    }
    int k = 0, total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, map) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/') || !strcmp(it->valuestring, "..")) {
            av_err(e, "%s: weight_map[\"%.80s\"] must be a file name in the same folder", index_path, it->string);
            goto done;
        }
        names[total++] = it->valuestring;
    }
    /* each name's first mention kept, found by sorting (a map of many tensors: n log n, not n x shards) */
    int *ord = malloc((size_t)total * sizeof *ord);
    unsigned char *first = calloc((size_t)total, 1);
    if (!ord || !first) {
        free(ord), free(first);
        av_err(e, "out of memory");
        goto done;
    }
    for (int i = 0; i < total; i++) ord[i] = i;
    qsort_r(ord, (size_t)total, sizeof *ord, cmp_shard, names);
    for (int i = 0; i < total; i++) first[ord[i]] = i == 0 || strcmp(names[ord[i - 1]], names[ord[i]]) != 0;
    for (int i = 0; i < total; i++)
        if (first[i]) names[k++] = names[i];
    free(ord), free(first);
    for (int i = 0; i < k; i++) {
        char *p = av_path_join(dir, names[i]);
        if (!p) {
            av_err(e, "out of memory");
            goto done;
        }
        int r = st_open_mode(&m->files[m->n_files], p, AV_MAP_FILE, e);
        free(p);
        if (r != 0) goto done;
        m->n_files++;
    }
    rc = 0;
done:
    free(names);
    free(dir);
    cJSON_Delete(root);
    return rc;
}

static int load_files(Model *m, const char *config_path, const char *weights_path, AvMapMode mode, AvErr *e) {
    memset(m, 0, sizeof *m);
    if (cfg_load(&m->cfg, config_path, e) != 0) return -1;
    size_t wl = strlen(weights_path);
    int torch_zip = wl >= 4 && !strcmp(weights_path + wl - 4, ".bin"); /* torch.save's zip, read without unpickling */
    int index = wl >= 11 && !strcmp(weights_path + wl - 11, ".index.json");
    int rc = -1;
    if (index) {
        rc = open_shards(m, weights_path, e);
    } else if ((m->files = calloc(1, sizeof *m->files))) {
        rc = torch_zip ? tb_open_mode(&m->files[0], weights_path, AV_MAP_FILE, e)
                      : st_open_mode(&m->files[0], weights_path, AV_MAP_FILE, e);
        if (rc == 0) m->n_files = 1;
    } else {
        av_err(e, "out of memory");
    }
    if (rc != 0) {
        model_free(m);
        return -1;
    }
    m->path = m->files[0].path;
    const ArchSpec *spec = arch_spec(m->cfg.arch);
    m->w.layers = calloc((size_t)m->cfg.num_layers, sizeof *m->w.layers);
    if (!m->w.layers) rc = av_err(e, "out of memory");
    else rc = spec->load(m, e);
    if (rc == 0 && m->cfg.pos == POS_ROPE) rc = rope_init(m, e);
    if (rc == 0) rc = plan_weights(m, mode, e);
    if (rc != 0) model_free(m);
    return rc;
}

/* A load, then its weights held as planned (or the model freed). */
static int held(Model *m, int rc, AvErr *e) {
    if (rc == 0 && model_hold(m, e) != 0) {
        model_free(m);
        return -1;
    }
    return rc;
}

int model_load_files(Model *m, const char *config_path, const char *weights_path, AvErr *e) {
    return held(m, load_files(m, config_path, weights_path, AV_MAP_FILE, e), e);
}

/* A llama.cpp file: hyper-parameters from its metadata (the family's
 * gguf_config), tensors by the family's GGUF names, weights kept quantized. */
static int load_gguf(Model *m, const char *path, AvMapMode mode, AvErr *e) {
    memset(m, 0, sizeof *m);
    const char *arch;
    size_t alen;
    char name[32];
    if (!(m->gguf = calloc(1, sizeof *m->gguf))) return av_err(e, "out of memory");
    if (gguf_open_mode(m->gguf, path, AV_MAP_FILE, e) != 0) {
        free(m->gguf);
        m->gguf = NULL;
        return -1;
    }
    m->path = path;
    int rc = -1;
    if (gguf_get_str(m->gguf, "general.architecture", &arch, &alen, e) != 0) {
        av_err_prefix(e, "%s", path);
        goto done;
    }
    snprintf(name, sizeof name, "%.*s", (int)(alen < 31 ? alen : 31), arch);
    const ArchSpec *spec = arch_detect_gguf(name);
    if (!spec) {
        av_err(e, "%s: GGUF architecture \"%s\" is not supported (attnviz reads %.1000s)", path, name, arch_gguf_list());
        goto done;
    }
    m->cfg.arch = spec->kind;
    snprintf(m->cfg.model_type, sizeof m->cfg.model_type, "%s", spec->model_type);
    if (spec->gguf_config(&m->cfg, m->gguf, path, e) != 0) goto done;
    if (!(m->w.layers = calloc((size_t)m->cfg.num_layers, sizeof *m->w.layers))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (spec->load(m, e) != 0 || rope_init(m, e) != 0) goto done;
    /* the file's weight type: its layers' products, not the embeddings' or norms' */
    snprintf(m->dtype_name, sizeof m->dtype_name, "%s", gguf_type_name(m->w.layers[0].q.type));
    rc = plan_weights(m, mode, e);
done:
    if (rc != 0) model_free(m);
    return rc;
}

int model_load_gguf(Model *m, const char *path, AvErr *e) { return held(m, load_gguf(m, path, AV_MAP_FILE, e), e); }

/* The .gguf file a folder holds (the first by name), or NULL. */
static char *gguf_in_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *best = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".gguf") && (!best || strcmp(de->d_name, best) < 0)) {
            free(best);
            best = strdup(de->d_name);
        }
    }
    closedir(d);
    char *p = best ? av_path_join(dir, best) : NULL;
    free(best);
    return p;
}

int model_is_gguf(const char *path) {
    size_t l = strlen(path);
    if (l > 5 && !strcmp(path + l - 5, ".gguf")) return 1;
    char *cfg = av_path_join(path, "config.json"), *g = NULL;
    int yes = cfg && !av_file_exists(cfg) && (g = gguf_in_dir(path)) != NULL;
    free(cfg);
    free(g);
    return yes;
}

int model_load(Model *m, const char *dir, AvErr *e) { return model_load_mode(m, dir, AV_MAP_FILE, e); }

int model_load_mode(Model *m, const char *dir, AvMapMode mode, AvErr *e) {
    return held(m, model_load_deferred(m, dir, mode, e), e);
}

int model_load_deferred(Model *m, const char *dir, AvMapMode mode, AvErr *e) {
    size_t dl = strlen(dir);
    if (dl > 5 && !strcmp(dir + dl - 5, ".gguf")) return load_gguf(m, dir, mode, e);
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"};
    char *cp = av_path_join(dir, "config.json"), *paths[3] = {NULL, NULL, NULL};
    int rc = 0, pick = 0;
    for (int i = 0; i < 3; i++) rc |= !(paths[i] = av_path_join(dir, names[i]));
    char *gg = NULL;
    if (rc || !cp) {
        rc = av_err(e, "out of memory");
    } else if (!av_file_exists(cp) && (gg = gguf_in_dir(dir))) {
        /* a folder holding a llama.cpp file and no Hugging Face config */
        rc = load_gguf(m, gg, mode, e);
        if (rc == 0) m->path_owned = gg, gg = NULL;
    } else {
        /* safetensors first: no pickle at all; a missing file is named as model.safetensors */
        for (pick = 0; pick < 3 && !av_file_exists(paths[pick]); pick++) {}
        rc = load_files(m, cp, paths[pick < 3 ? pick : 0], mode, e);
    }
    free(cp);
    free(gg);
    for (int i = 0; i < 3; i++) free(paths[i]);
    return rc;
}

void model_free(Model *m) {
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    for (int l = 0; m->w.layers && l < m->cfg.num_layers; l++) free(m->w.layers[l].experts);
    free(m->w.layers);
    free(m->inv_freq);
    free(m->inv_freq_long);
    free(m->inv_freq_local);
    if (m->text) {
        model_free(m->text);
        free(m->text);
    }
    if (m->vision) {
        model_free(m->vision);
        free(m->vision);
    }
    free(m->vlm);
    free(m->w.vis);
    free(m->w.text_head);
    if (!m->files_borrowed) {
        for (int i = 0; i < m->n_files; i++) st_close(&m->files[i]);
        free(m->files);
    }
    if (m->gguf) gguf_close(m->gguf);
    free(m->gguf);
    free(m->path_owned);
    s2s_weights_free(m->s2s);
    free(m->vgram);
    free(m->vgram_done);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- encoder-decoder stacks */

int s2s_weights_alloc(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    S2sWeights *w = calloc(1, sizeof *w);
    if (!w) return av_err(e, "out of memory");
    m->s2s = w;
    w->enc.n_layers = c->num_layers, w->dec.n_layers = c->dec_layers;
    w->enc.layers = calloc((size_t)c->num_layers, sizeof *w->enc.layers);
    w->dec.layers = calloc((size_t)c->dec_layers, sizeof *w->dec.layers);
    return w->enc.layers && w->dec.layers ? 0 : av_err(e, "out of memory");
}

void s2s_weights_free(S2sWeights *w) {
    if (!w) return;
    free(w->enc.layers);
    free(w->dec.layers);
    free(w->sinusoid);
    free(w);
}
