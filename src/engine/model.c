/* model.c — a checkpoint's weights as views the engine reads: lookup under
 * the names real checkpoints use, shape and dtype checks, sharded
 * safetensors; and the run state and capture buffers. */
#include "model.h"
#include "jsonread.h"
#include "seq2seq.h"

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
 * length; layers marked in layer_rope_local have their own unscaled base. */
static float *rope_freqs(const ModelConfig *c, float theta, RopeKind kind, const float *ext) {
    const int half = c->rotary_dim / 2;
    float *inv = malloc((size_t)half * sizeof *inv);
    if (!inv) return NULL;
    for (int i = 0; i < half; i++) {
        float f = 1.0f / powf(theta, (float)(2 * i) / (float)c->rotary_dim);
        if (kind == ROPE_LINEAR) f /= c->rope_factor;
        if (kind == ROPE_LONGROPE) f = 1.0f / (ext[i] * powf(theta, (float)(2 * i) / (float)c->rotary_dim));
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

static int cmp_shard(const void *a, const void *b, void *ctx) {
    const char *const *names = ctx;
    const int x = *(const int *)a, y = *(const int *)b, c = strcmp(names[x], names[y]);
    return c ? c : (x > y) - (x < y);
}

/* The shard files a model.safetensors.index.json names, each once, in order of first mention. */
static int open_shards(Model *m, const char *index_path, AvMapMode mode, AvErr *e) {
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
        int r = st_open_mode(&m->files[m->n_files], p, mode, e);
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
        rc = open_shards(m, weights_path, mode, e);
    } else if ((m->files = calloc(1, sizeof *m->files))) {
        rc = torch_zip ? tb_open_mode(&m->files[0], weights_path, mode, e) : st_open_mode(&m->files[0], weights_path, mode, e);
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
    if (rc != 0) model_free(m);
    return rc;
}

int model_load_files(Model *m, const char *config_path, const char *weights_path, AvErr *e) {
    return load_files(m, config_path, weights_path, AV_MAP_FILE, e);
}

/* A llama.cpp file: hyper-parameters from its metadata (the family's
 * gguf_config), tensors by the family's GGUF names, weights kept quantized. */
static int load_gguf(Model *m, const char *path, AvMapMode mode, AvErr *e) {
    memset(m, 0, sizeof *m);
    const char *arch;
    size_t alen;
    char name[32];
    if (!(m->gguf = calloc(1, sizeof *m->gguf))) return av_err(e, "out of memory");
    if (gguf_open_mode(m->gguf, path, mode, e) != 0) {
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
    rc = 0;
done:
    if (rc != 0) model_free(m);
    return rc;
}

int model_load_gguf(Model *m, const char *path, AvErr *e) { return load_gguf(m, path, AV_MAP_FILE, e); }

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

/* ---------------------------------------------------------------- buffers */

static float *alloc_floats(size_t n) {
    return n ? malloc(n * sizeof(float)) : NULL;
}

int model_runstate_alloc(RunState *s, const Model *m, int max_tokens, int threads, AvErr *e) {
    return model_runstate_alloc_mlp(s, m, max_tokens, MODEL_MLP_BLOCK, threads, e);
}

int model_runstate_alloc_mlp(RunState *s, const Model *m, int max_tokens, int mlp_block, int threads, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || mlp_block < 1) return av_err(e, "a run state needs tokens (%d, MLP blocks of %d)", max_tokens, mlp_block);
    /* its stacks are seq2seq.h's, which this pass does not run */
    if (c->enc_dec)
        return av_err(e, "%s: an encoder-decoder (%s) model runs as attnviz --model DIR SOURCE --decoder-text TEXT "
                      "(or --generate N) only", m->path, c->model_type);
    size_t n = (size_t)max_tokens, H = (size_t)c->hidden_size, dh = (size_t)c->head_dim;
    size_t QW = (size_t)c->num_heads * dh, KW = (size_t)c->num_kv_heads * dh, FF = (size_t)c->intermediate_size;
    s->max_tokens = max_tokens;
    s->mlp_block = mlp_block < max_tokens ? mlp_block : max_tokens;
    const size_t nb = (size_t)s->mlp_block;
    /* the threads the caller's settings ask for (--threads), or the default */
    const int T = pool_threads(threads);
    s->n_threads = T > POOL_MAX_THREADS ? POOL_MAX_THREADS : T;
    s->x = alloc_floats(n * H);
    s->xT = alloc_floats(n * (H > QW ? H : QW));
    s->qT = alloc_floats(n * QW);
    s->kT = alloc_floats(n * KW);
    s->vT = alloc_floats(n * KW);
    s->ctxT = alloc_floats(n * QW);
    s->yT = alloc_floats(n * H);
    const size_t E = (size_t)c->embedding_size;
    /* ffT: a block's MLP products, or a masked-LM head's transform of every token */
    const size_t head_w = m->w.head.dense.w ? (size_t)m->w.head.dense.out : 0;
    s->ffT = alloc_floats(nb * FF > n * head_w ? nb * FF : n * head_w);
    int bad = !s->x || !s->xT || !s->qT || !s->kT || !s->vT || !s->ctxT || !s->yT || !s->ffT;
    if (nb < n) { /* a pass longer than a block gathers each block's columns */
        s->mlp_xT = alloc_floats(H * nb);
        s->mlp_yT = alloc_floats(H * nb);
        bad |= !s->mlp_xT || !s->mlp_yT;
    }
    if (E && E != H) {
        s->emb = alloc_floats(n * E);
        s->embT = alloc_floats(n * E);
        bad |= !s->emb || !s->embT;
    }
    if (c->num_experts) {
        /* an expert's gate and up outputs go to gateT and ffT */
        const size_t FE = (size_t)c->moe_intermediate, K = (size_t)c->experts_per_tok, W = FF > FE ? FF : FE;
        free(s->ffT);
        s->ffT = alloc_floats(nb * W > n * head_w ? nb * W : n * head_w);
        s->routerT = alloc_floats(nb * (size_t)c->num_experts);
        s->moe_xT = alloc_floats(nb * H);
        s->moe_yT = alloc_floats(nb * H);
        s->moe_ids = malloc(n * K * sizeof *s->moe_ids);
        s->moe_w = alloc_floats(n * K);
        s->moe_tok = malloc(nb * sizeof *s->moe_tok);
        s->moe_tw = alloc_floats(nb);
        bad |= !s->ffT || !(s->gateT = alloc_floats(nb * W)) || !s->routerT || !s->moe_xT || !s->moe_yT || !s->moe_ids ||
               !s->moe_w || !s->moe_tok || !s->moe_tw;
    } else if (c->gated_mlp) {
        bad |= !(s->gateT = alloc_floats(nb * FF));
    }
    if (c->pos == POS_ROPE) {
        s->rope_cos = alloc_floats(n * dh / 2);
        s->rope_sin = alloc_floats(n * dh / 2);
        bad |= !s->rope_cos || !s->rope_sin;
        if (m->inv_freq_local) {
            s->rope_cos_local = alloc_floats(n * dh / 2);
            s->rope_sin_local = alloc_floats(n * dh / 2);
            bad |= !s->rope_cos_local || !s->rope_sin_local;
        }
    }
    s->scores = alloc_floats((size_t)s->n_threads * (size_t)kern_attention_rows() * n); /* rows of heads not kept */
    s->seg = alloc_floats((size_t)s->n_threads * 4 * dh * n);
    s->pos = malloc(n * sizeof *s->pos);
    bad |= !s->seg || !s->pos;
    s->widen_len = kern_widen_floats(m->max_in);
    s->widen = alloc_floats((size_t)s->n_threads * s->widen_len);
    if (bad || !s->scores || !s->widen) {
        model_runstate_free(s);
        return av_err(e, "out of memory for run state (%d tokens)", max_tokens);
    }
    s->pool = pool_create(s->n_threads); /* NULL: run on the calling thread only */
    if (!s->pool) s->n_threads = 1;
    return 0;
}

/* The same sizes as model_runstate_alloc_mlp with MODEL_MLP_BLOCK, summed. */
size_t model_runstate_bytes(const Model *m, int max_tokens, int threads_asked) {
    const ModelConfig *c = &m->cfg;
    if (max_tokens < 1) return 0;
    const size_t n = (size_t)max_tokens, H = (size_t)c->hidden_size, dh = (size_t)c->head_dim;
    const size_t QW = (size_t)c->num_heads * dh, KW = (size_t)c->num_kv_heads * dh, FF = (size_t)c->intermediate_size;
    const size_t nb = MODEL_MLP_BLOCK < max_tokens ? MODEL_MLP_BLOCK : n, E = (size_t)c->embedding_size;
    const size_t head_w = m->w.head.dense.w ? (size_t)m->w.head.dense.out : 0;
    const int T = pool_threads(threads_asked);
    const size_t threads = T > POOL_MAX_THREADS ? POOL_MAX_THREADS : (size_t)T;
    size_t W = FF;
    if (c->num_experts && (size_t)c->moe_intermediate > W) W = (size_t)c->moe_intermediate;
    size_t floats = n * H * 3 + n * (H > QW ? H : QW) + 2 * n * QW + 2 * n * KW; /* x, yT, ctx; xT; qT, ctxT; kT, vT */
    floats += nb * W > n * head_w ? nb * W : n * head_w;                          /* ffT */
    if (nb < n) floats += 2 * H * nb;                                             /* a block's MLP input and output */
    if (E && E != H) floats += 2 * n * E;
    if (c->num_experts)
        floats += nb * W + nb * (size_t)c->num_experts + 2 * nb * H + 2 * n * (size_t)c->experts_per_tok + 2 * nb;
    else if (c->gated_mlp)
        floats += nb * FF;
    if (c->pos == POS_ROPE) floats += (m->inv_freq_local ? 2 : 1) * n * dh;
    floats += threads * (size_t)kern_attention_rows() * n + threads * 4 * dh * n + n; /* scores, seg, pos */
    floats += threads * kern_widen_floats(m->max_in);
    return floats * sizeof(float);
}

void model_runstate_free(RunState *s) {
    pool_destroy(s->pool);
    float *bufs[] = {s->x, s->xT, s->qT, s->kT, s->vT, s->ctxT, s->yT, s->mlp_xT, s->mlp_yT, s->ffT, s->gateT, s->emb,
                     s->embT, s->scores,
                     s->rope_cos, s->rope_sin, s->rope_cos_local, s->rope_sin_local, s->widen,
                     s->routerT, s->moe_xT, s->moe_yT, s->moe_w, s->moe_tw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(s->seg);
    free(s->pos);
    free(s->moe_ids);
    free(s->moe_tok);
    memset(s, 0, sizeof *s);
}

size_t model_capture_bytes(const ModelConfig *c, int n, int want_qk, int want_hidden, int n_layers, int n_heads) {
    size_t blocks = (size_t)n_layers * (size_t)n_heads, nn = (size_t)n * (size_t)n;
    size_t floats = blocks * nn + (want_qk ? 2 * blocks * (size_t)n * (size_t)c->head_dim : 0) +
                    (want_hidden ? (size_t)(c->num_layers + 1) * (size_t)n * (size_t)c->hidden_size : 0) +
                    2 * (size_t)c->num_layers * (size_t)n * (size_t)c->experts_per_tok; /* routing (ids and weights) */
    return floats * sizeof(float);
}

static int capture_make(Capture *cap, const ModelConfig *c, int n, int want_attn, int want_qk, int qk_prec,
                        int want_hidden, int thumb, const int *layers, int n_layers, const int *heads, int n_heads, AvErr *e) {
    memset(cap, 0, sizeof *cap);
    cap->n_layers = c->num_layers;
    cap->n_heads = c->num_heads;
    cap->n_kv_heads = c->num_kv_heads ? c->num_kv_heads : c->num_heads;
    cap->head_dim = c->head_dim ? c->head_dim : c->hidden_size / c->num_heads;
    cap->hidden_size = c->hidden_size;
    cap->n_tokens = n;
    cap->cap_tokens = (size_t)n;
    if (c->num_layers > CAP_MAX_LAYERS || c->num_heads > CAP_MAX_HEADS)
        return av_err(e, "%d layers x %d heads exceed the capture's %d x %d", c->num_layers, c->num_heads,
                      CAP_MAX_LAYERS, CAP_MAX_HEADS);
    if (layers || heads) {
        for (int l = 0; l < CAP_MAX_LAYERS; l++) cap->layer_slot[l] = -1;
        for (int h = 0; h < CAP_MAX_HEADS; h++) cap->head_slot[h] = -1;
        for (int i = 0; i < (layers ? n_layers : c->num_layers); i++) {
            int l = layers ? layers[i] : i;
            if (l < 0 || l >= c->num_layers) return av_err(e, "layer %d is not in the model (%d layers)", l, c->num_layers);
            if (cap->layer_slot[l] < 0) cap->layer_slot[l] = (short)cap->n_kept_layers++;
        }
        for (int i = 0; i < (heads ? n_heads : c->num_heads); i++) {
            int h = heads ? heads[i] : i;
            if (h < 0 || h >= c->num_heads) return av_err(e, "head %d is not in the model (%d heads)", h, c->num_heads);
            if (cap->head_slot[h] < 0) cap->head_slot[h] = (short)cap->n_kept_heads++;
        }
    }
    size_t blocks = cap_blocks(cap);
    int bad = 0;
    if (want_attn) bad |= !(cap->attn = alloc_floats(blocks * (size_t)n * (size_t)n));
    if (thumb > 0) {
        cap->thumb_size = thumb < n ? thumb : n;
        bad |= !(cap->thumb = calloc(blocks * (size_t)cap->thumb_size * (size_t)cap->thumb_size, sizeof(float)));
    }
    if (want_qk && qk_prec != CAP_QK_F32) {
        const size_t len = blocks * (size_t)n * (size_t)cap->head_dim;
        cap->qk_prec = qk_prec;
        cap->qh = malloc(len * sizeof *cap->qh);
        cap->kh = malloc(len * sizeof *cap->kh);
        bad |= !cap->qh || !cap->kh;
    } else if (want_qk) {
        cap->q = alloc_floats(blocks * (size_t)n * (size_t)cap->head_dim);
        cap->k = alloc_floats(blocks * (size_t)n * (size_t)cap->head_dim);
        bad |= !cap->q || !cap->k;
    }
    if (want_hidden) {
        cap->hidden = alloc_floats((size_t)(c->num_layers + 1) * (size_t)n * (size_t)c->hidden_size);
        bad |= !cap->hidden;
    }
    if (c->attn_sinks) bad |= !(cap->sinks = calloc(blocks * (size_t)n, sizeof(float)));
    if (c->num_experts) {
        /* the routing of every layer: -1 and 0 until a pass routes (dense layers stay so) */
        const size_t len = (size_t)c->num_layers * (size_t)n * (size_t)c->experts_per_tok;
        cap->moe_k = c->experts_per_tok;
        cap->moe_ids = malloc(len * sizeof *cap->moe_ids);
        cap->moe_w = calloc(len, sizeof *cap->moe_w);
        bad |= !cap->moe_ids || !cap->moe_w;
        for (size_t i = 0; cap->moe_ids && i < len; i++) cap->moe_ids[i] = -1;
    }
    if (bad) {
        model_capture_free(cap);
        return av_err(e, "out of memory for attention capture (%d tokens)", n);
    }
    return 0;
}

int model_capture_select(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e) {
    return capture_make(cap, c, n, 1, want_qk, CAP_QK_F32, want_hidden, 0, layers, n_layers, heads, n_heads, e);
}

int model_capture_qk(Capture *cap, const ModelConfig *c, int n, int thumb_size, int prec, AvErr *e) {
    if (prec != CAP_QK_F32 && prec != CAP_QK_F16 && prec != CAP_QK_BF16) return av_err(e, "q/k precision %d is unknown", prec);
    return capture_make(cap, c, n, 0, 1, prec, 0, thumb_size, NULL, 0, NULL, 0, e);
}

int model_capture_telemetry(Capture *cap, const ModelConfig *c, int n, int top_k, const int *ids, const int *layers,
                            int n_layers, const int *heads, int n_heads, AvErr *e) {
    if (top_k < 0 || top_k > CAP_TEL_MAX_TOP) return av_err(e, "telemetry: top %d keys is outside 0..%d", top_k, CAP_TEL_MAX_TOP);
    if (capture_make(cap, c, n, 0, 0, CAP_QK_F32, 0, 0, layers, n_layers, heads, n_heads, e) != 0) return -1;
    if (model_capture_add_telemetry(cap, top_k, ids, e) != 0) {
        model_capture_free(cap);
        return -1;
    }
    return 0;
}

int model_capture_add_telemetry(Capture *cap, int top_k, const int *ids, AvErr *e) {
    if (top_k < 0 || top_k > CAP_TEL_MAX_TOP) return av_err(e, "telemetry: top %d keys is outside 0..%d", top_k, CAP_TEL_MAX_TOP);
    if (cap->tel) return av_err(e, "telemetry: the capture has it already");
    const size_t rows = cap_blocks(cap) * (size_t)cap->n_tokens;
    cap->tel = alloc_floats(rows * CAP_TEL_N);
    cap->tel_top_k = top_k;
    if (top_k) {
        cap->tel_top = malloc(rows * (size_t)top_k * sizeof *cap->tel_top);
        cap->tel_top_w = alloc_floats(rows * (size_t)top_k);
    }
    cap->tel_ids = ids;
    const size_t n = cap->cap_tokens ? cap->cap_tokens : 1;
    cap->tel_prev = malloc(n * sizeof *cap->tel_prev);
    cap->tel_scratch = malloc(n * sizeof *cap->tel_scratch);
    cap->tel_prev_n = 0;
    if (!cap->tel || (top_k && (!cap->tel_top || !cap->tel_top_w)) || !cap->tel_prev || !cap->tel_scratch) {
        free(cap->tel), free(cap->tel_top), free(cap->tel_top_w), free(cap->tel_prev), free(cap->tel_scratch);
        cap->tel = NULL, cap->tel_top = NULL, cap->tel_top_w = NULL, cap->tel_prev = NULL, cap->tel_scratch = NULL;
        return av_err(e, "out of memory for attention telemetry (%d tokens)", cap->n_tokens);
    }
    return 0;
}

int model_capture_add_rows(Capture *cap, int rows_n, AvErr *e) {
    if (cap->rows) return av_err(e, "rows: the capture has them already");
    if (rows_n < 1 || (size_t)rows_n > cap->cap_tokens)
        return av_err(e, "rows: %d rows a head is outside 1..%zu", rows_n, cap->cap_tokens);
    if (!(cap->rows = calloc(cap_blocks(cap) * (size_t)rows_n * cap->cap_tokens, sizeof(float))))
        return av_err(e, "out of memory for %d attention rows a head (%zu tokens)", rows_n, cap->cap_tokens);
    cap->rows_from = 0, cap->rows_n = rows_n;
    return 0;
}

size_t model_capture_telemetry_bytes(size_t blocks, int n, int top_k) {
    return blocks * (size_t)n * (CAP_TEL_N + 2 * (size_t)top_k) * sizeof(float) +
           (size_t)n * (sizeof(int) + sizeof(unsigned long long));
}

int model_capture_add_scores(Capture *cap, const CapScoring *sc, AvErr *e) {
    const size_t n = cap->cap_tokens ? cap->cap_tokens : 1;
    free(cap->sc_sum), free(cap->sc_prev), free(cap->sc_special), free(cap->sc_scratch), free(cap->sc_role);
    cap->sc_role = calloc(n, 1);
    cap->sc_sum = calloc(cap_blocks(cap) * CAP_SC_N, sizeof *cap->sc_sum);
    cap->sc_prev = malloc(n * sizeof *cap->sc_prev);
    cap->sc_special = malloc(n * sizeof *cap->sc_special);
    cap->sc_scratch = malloc(n * sizeof *cap->sc_scratch);
    cap->sc = *sc;
    cap->sc_n_special = 0;
    if (!cap->sc_sum || !cap->sc_prev || !cap->sc_special || !cap->sc_scratch || !cap->sc_role) {
        free(cap->sc_sum), free(cap->sc_prev), free(cap->sc_special), free(cap->sc_scratch), free(cap->sc_role);
        cap->sc_sum = NULL, cap->sc_prev = cap->sc_special = NULL, cap->sc_scratch = NULL, cap->sc_role = NULL;
        return av_err(e, "out of memory for head scores (%zu tokens)", n);
    }
    return 0;
}

int model_capture_scores(Capture *cap, const ModelConfig *c, int n, const CapScoring *sc, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e) {
    if (capture_make(cap, c, n, 0, 0, CAP_QK_F32, 0, 0, layers, n_layers, heads, n_heads, e) != 0) return -1;
    if (model_capture_add_scores(cap, sc, e) != 0) {
        model_capture_free(cap);
        return -1;
    }
    return 0;
}

size_t model_capture_scores_bytes(int n, int n_layers, int n_heads) {
    return (size_t)n_layers * (size_t)n_heads * CAP_SC_N * sizeof(double) +
           (size_t)n * (2 * sizeof(int) + sizeof(unsigned long long) + 1);
}

size_t model_capture_qk_bytes(const ModelConfig *c, int n, int thumb_size, int prec) {
    size_t blocks = (size_t)c->num_layers * (size_t)c->num_heads, t = (size_t)(thumb_size < n ? thumb_size : n);
    const size_t qk = 2 * blocks * (size_t)n * (size_t)c->head_dim;
    return qk * (prec == CAP_QK_F32 ? sizeof(float) : sizeof(uint16_t)) + blocks * t * t * sizeof(float);
}

int model_capture_alloc(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, AvErr *e) {
    return model_capture_select(cap, c, n, want_qk, want_hidden, NULL, 0, NULL, 0, e);
}

int model_capture_maxpool(Capture *cap, int size, AvErr *e) {
    if (cap->mpool) return 0;
    const int s = size < cap->n_tokens ? size : cap->n_tokens;
    if (s < 1) return av_err(e, "max-pooled overview of size %d", size);
    if (!(cap->mpool = calloc(cap_blocks(cap) * (size_t)s * (size_t)s, sizeof(float))))
        return av_err(e, "out of memory for the attention overview (%d x %d per head)", s, s);
    cap->mpool_size = s;
    return 0;
}

int model_capture_value_norms(Capture *cap, AvErr *e) {
    if (cap->vnorm) return 0;
    if (!(cap->vnorm = calloc(cap_blocks(cap) * cap->cap_tokens, sizeof(float))))
        return av_err(e, "out of memory for value norms (%zu tokens)", cap->cap_tokens);
    return 0;
}

size_t model_capture_value_norms_bytes(int n, int n_layers, int n_heads) {
    return (size_t)n_layers * (size_t)n_heads * (size_t)n * sizeof(float);
}

void model_capture_free(Capture *cap) {
    free(cap->vnorm);
    free(cap->sinks);
    free(cap->nattn);
    free(cap->attn);
    free(cap->q);
    free(cap->k);
    free(cap->qh);
    free(cap->kh);
    free(cap->hidden);
    free(cap->thumb);
    free(cap->mpool);
    free(cap->tel);
    free(cap->tel_top);
    free(cap->tel_top_w);
    free(cap->tel_prev);
    free(cap->tel_scratch);
    free(cap->sc_sum);
    free(cap->sc_prev);
    free(cap->sc_special);
    free(cap->sc_scratch);
    free(cap->sc_role);
    free(cap->resid);
    free(cap->z);
    free(cap->mlp_out);
    free(cap->moe_ids);
    free(cap->moe_w);
    free(cap->rows);
    memset(cap, 0, sizeof *cap);
}

int model_capture_internals(Capture *cap, const ModelConfig *c, AvErr *e) {
    const size_t n = cap->cap_tokens, H = (size_t)c->hidden_size, L = (size_t)c->num_layers;
    free(cap->resid);
    free(cap->z);
    free(cap->mlp_out);
    cap->resid = alloc_floats((L + 1) * n * H);
    cap->z = alloc_floats(L * (size_t)c->num_heads * n * (size_t)cap->head_dim);
    cap->mlp_out = alloc_floats(L * n * H);
    if (!cap->resid || !cap->z || !cap->mlp_out) {
        free(cap->resid), free(cap->z), free(cap->mlp_out);
        cap->resid = cap->z = cap->mlp_out = NULL;
        return av_err(e, "out of memory for the residual stream of %zu tokens x %d layers", n, c->num_layers);
    }
    return 0;
}

size_t model_capture_internals_bytes(const ModelConfig *c, int n) {
    const size_t L = (size_t)c->num_layers, H = (size_t)c->hidden_size;
    return ((2 * L + 1) * (size_t)n * H + L * (size_t)c->num_heads * (size_t)n * (size_t)c->head_dim) * sizeof(float);
}

void model_capture_trim(Capture *cap, int n) {
    const size_t ld = (size_t)cap->n_tokens, nn = (size_t)n, blocks = cap_blocks(cap), dh = (size_t)cap->head_dim;
    if ((size_t)n >= ld) return;
    /* every destination lies at or before its source: one forward sweep */
    for (size_t b = 0; cap->attn && b < blocks; b++)
        for (size_t i = 0; i < nn; i++) memmove(cap->attn + (b * nn + i) * nn, cap->attn + (b * ld + i) * ld, nn * sizeof(float));
    for (size_t b = 0; cap->vnorm && b < blocks; b++) memmove(cap->vnorm + b * nn, cap->vnorm + b * ld, nn * sizeof(float));
    for (size_t b = 0; cap->sinks && b < blocks; b++) memmove(cap->sinks + b * nn, cap->sinks + b * ld, nn * sizeof(float));
    for (size_t r = 0; cap->rows && r < blocks * (size_t)cap->rows_n; r++)
        memmove(cap->rows + r * nn, cap->rows + r * ld, nn * sizeof(float));
    for (size_t b = 0; cap->q && b < blocks; b++) {
        memmove(cap->q + b * nn * dh, cap->q + b * ld * dh, nn * dh * sizeof(float));
        memmove(cap->k + b * nn * dh, cap->k + b * ld * dh, nn * dh * sizeof(float));
    }
    for (size_t b = 0; cap->qh && b < blocks; b++) {
        memmove(cap->qh + b * nn * dh, cap->qh + b * ld * dh, nn * dh * sizeof *cap->qh);
        memmove(cap->kh + b * nn * dh, cap->kh + b * ld * dh, nn * dh * sizeof *cap->kh);
    }
    const size_t H = (size_t)cap->hidden_size;
    for (size_t l = 0; cap->hidden && l <= (size_t)cap->n_layers; l++)
        memmove(cap->hidden + l * nn * H, cap->hidden + l * ld * H, nn * H * sizeof(float));
    for (size_t l = 0; cap->resid && l <= (size_t)cap->n_layers; l++)
        memmove(cap->resid + l * nn * H, cap->resid + l * ld * H, nn * H * sizeof(float));
    for (size_t l = 0; cap->mlp_out && l < (size_t)cap->n_layers; l++)
        memmove(cap->mlp_out + l * nn * H, cap->mlp_out + l * ld * H, nn * H * sizeof(float));
    const size_t K = (size_t)cap->moe_k;
    for (size_t l = 0; cap->moe_ids && l < (size_t)cap->n_layers; l++) {
        memmove(cap->moe_ids + l * nn * K, cap->moe_ids + l * ld * K, nn * K * sizeof *cap->moe_ids);
        memmove(cap->moe_w + l * nn * K, cap->moe_w + l * ld * K, nn * K * sizeof *cap->moe_w);
    }
    for (size_t b = 0; cap->z && b < (size_t)cap->n_layers * cap->n_heads; b++)
        memmove(cap->z + b * nn * dh, cap->z + b * ld * dh, nn * dh * sizeof(float));
    cap->n_tokens = n;
}

size_t model_kv_bytes(const ModelConfig *c, int n) {
    return 2 * (size_t)c->num_layers * c->num_kv_heads * c->head_dim * (size_t)(n > 0 ? n : 0) * sizeof(float);
}

int model_kv_alloc(KvCache *kv, const ModelConfig *c, int n, AvErr *e) {
    memset(kv, 0, sizeof *kv);
    const size_t floats = (size_t)c->num_layers * c->num_kv_heads * c->head_dim * (size_t)n;
    kv->kT = alloc_floats(floats);
    kv->vT = alloc_floats(floats);
    if (!kv->kT || !kv->vT) {
        model_kv_free(kv);
        return av_err(e, "out of memory for the key/value cache (%d tokens)", n);
    }
    kv->cap_tokens = n;
    return 0;
}

void model_kv_free(KvCache *kv) {
    free(kv->kT);
    free(kv->vT);
    memset(kv, 0, sizeof *kv);
}
