/* bert.c — BERT encoder: weight loading (mmap'd safetensors, naming variants,
 * shape checks), forward pass with attention capture, and the naive reference
 * kernels the optimized ones are tested against. */
#include "bert.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "torchbin.h"
#include "util.h"

/* ---------------------------------------------------------------- loading */

static int keep_owned(BertModel *m, float *p) {
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

/* The prefix a family's task models (…ForMaskedLM, GPT2LMHeadModel) put
 * before the base model's tensor names. */
static const char *family_prefix(ArchKind a) {
    switch (a) {
    case ARCH_BERT: return "bert.";
    case ARCH_ROBERTA: return "roberta.";
    case ARCH_DISTILBERT: return "distilbert.";
    case ARCH_GPT2: return "transformer.";
    }
    return "";
}

/* Looks a tensor up under the names real checkpoints use: with or without the
 * family's prefix, LayerNorm weight/bias or gamma/beta (Google's BERT). */
static const StTensor *find_variant(const StFile *f, ArchKind arch, const char *name, char *used, size_t used_len) {
    const char *prefixes[] = {"", family_prefix(arch)};
    char alt[256] = "";
    size_t nl = strlen(name);
    if (nl > 7 && !strcmp(name + nl - 7, ".weight") && strstr(name, "LayerNorm"))
        snprintf(alt, sizeof alt, "%.*s.gamma", (int)(nl - 7), name);
    else if (nl > 5 && !strcmp(name + nl - 5, ".bias") && strstr(name, "LayerNorm"))
        snprintf(alt, sizeof alt, "%.*s.beta", (int)(nl - 5), name);
    for (int p = 0; p < 2; p++) {
        for (int v = 0; v < 2; v++) {
            const char *base = v ? alt : name;
            if (!*base) continue;
            snprintf(used, used_len, "%s%s", prefixes[p], base);
            const StTensor *t = st_find(f, used);
            if (t) return t;
        }
    }
    snprintf(used, used_len, "%s", name);
    return NULL;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* Returns a float32 view of the tensor with the expected shape: the mapping
 * itself for aligned F32, else a converted copy made once here. */
static const float *load_tensor(BertModel *m, const char *name, int ndim, int64_t d0, int64_t d1, AvErr *e) {
    char used[300];
    const StTensor *t = find_variant(&m->st, m->cfg.arch, name, used, sizeof used);
    int64_t want[2] = {d0, d1};
    char ws[64], gs[64];
    shape_str(ws, sizeof ws, ndim, want);
    if (!t) {
        av_err(e, "%s: missing tensor '%s' (expected shape %s)", m->st.path, name, ws);
        return NULL;
    }
    if (t->dtype == ST_OTHER) {
        av_err(e, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", m->st.path, used, t->dtype_name);
        return NULL;
    }
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        shape_str(gs, sizeof gs, t->ndim, t->shape);
        av_err(e, "%s: tensor '%s' has shape %s; config.json implies %s", m->st.path, used, gs, ws);
        return NULL;
    }
    if (!m->dtype_name[0]) snprintf(m->dtype_name, sizeof m->dtype_name, "%s", t->dtype_name);
    if (t->dtype == ST_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) return (const float *)t->data;
    size_t numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
    float *copy = malloc(numel * sizeof *copy);
    if (!copy || keep_owned(m, copy) != 0) {
        free(copy);
        av_err(e, "%s: out of memory converting tensor '%s'", m->st.path, used);
        return NULL;
    }
    st_to_f32(t, copy);
    return copy;
}

/* Linear(in -> out): weight (out, in), bias (out). */
static int load_linear(BertModel *m, BertLinear *lin, const char *prefix, int64_t in, int64_t out, AvErr *e) {
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    if (!(lin->w = load_tensor(m, nm, 2, out, in, e))) return -1;
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    if (!(lin->b = load_tensor(m, nm, 1, out, 0, e))) return -1;
    lin->conv1d = 0;
    lin->ld = (int)in;
    return 0;
}

/* GPT-2's Conv1D(in -> parts * out): weight (in, parts * out), bias (parts * out),
 * split into parts views of out columns each (c_attn holds q, k and v). */
static int load_conv1d(BertModel *m, BertLinear *parts, int n_parts, const char *prefix, int64_t in, int64_t out,
                       AvErr *e) {
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    const float *w = load_tensor(m, nm, 2, in, n_parts * out, e);
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    const float *b = w ? load_tensor(m, nm, 1, n_parts * out, 0, e) : NULL;
    if (!b) return -1;
    for (int p = 0; p < n_parts; p++)
        parts[p] = (BertLinear){w + (size_t)p * out, b + (size_t)p * out, 1, (int)(n_parts * out)};
    return 0;
}

static int load_layernorm(BertModel *m, const float **g, const float **b, const char *prefix, int64_t H, AvErr *e) {
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.weight", prefix);
    if (!(*g = load_tensor(m, nm, 1, H, 0, e))) return -1;
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    if (!(*b = load_tensor(m, nm, 1, H, 0, e))) return -1;
    return 0;
}

/* Tensor names follow each family's Hugging Face module names. */
static int load_bert_like(BertModel *m, AvErr *e) {
    const BertConfig *c = &m->cfg;
    BertWeights *w = &m->w;
    int64_t H = c->hidden_size, FF = c->intermediate_size;
    int distil = c->arch == ARCH_DISTILBERT;
    if (!(w->word_emb = load_tensor(m, "embeddings.word_embeddings.weight", 2, c->vocab_size, H, e)) ||
        !(w->pos_emb = load_tensor(m, "embeddings.position_embeddings.weight", 2, c->max_position_embeddings, H, e)))
        return -1;
    if (!distil && !(w->type_emb = load_tensor(m, "embeddings.token_type_embeddings.weight", 2, c->type_vocab_size, H, e)))
        return -1;
    if (load_layernorm(m, &w->emb_ln_g, &w->emb_ln_b, "embeddings.LayerNorm", H, e)) return -1;
    /* the block's modules: q, k, v, attention output, its LayerNorm, the two MLP
     * linears, the output LayerNorm; BERT/RoBERTa names, then DistilBERT's */
    static const char *const names[2][8] = {
        {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
         "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"},
        {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin", "sa_layer_norm", "ffn.lin1",
         "ffn.lin2", "output_layer_norm"}};
    const char *const *nm = names[distil];
    char p[8][240];
    for (int l = 0; l < c->num_layers; l++) {
        BertLayer *L = &w->layers[l];
        for (int k = 0; k < 8; k++)
            snprintf(p[k], sizeof p[k], "%s.%d.%s", distil ? "transformer.layer" : "encoder.layer", l, nm[k]);
        if (load_linear(m, &L->q, p[0], H, H, e) || load_linear(m, &L->k, p[1], H, H, e) ||
            load_linear(m, &L->v, p[2], H, H, e) || load_linear(m, &L->o, p[3], H, H, e) ||
            load_layernorm(m, &L->ln1_g, &L->ln1_b, p[4], H, e) || load_linear(m, &L->ff1, p[5], H, FF, e) ||
            load_linear(m, &L->ff2, p[6], FF, H, e) || load_layernorm(m, &L->ln2_g, &L->ln2_b, p[7], H, e))
            return -1;
    }
    return 0;
}

static int load_gpt2(BertModel *m, AvErr *e) {
    const BertConfig *c = &m->cfg;
    BertWeights *w = &m->w;
    int64_t H = c->hidden_size, FF = c->intermediate_size;
    if (!(w->word_emb = load_tensor(m, "wte.weight", 2, c->vocab_size, H, e)) ||
        !(w->pos_emb = load_tensor(m, "wpe.weight", 2, c->max_position_embeddings, H, e)) ||
        load_layernorm(m, &w->final_ln_g, &w->final_ln_b, "ln_f", H, e))
        return -1;
    char p[300];
    for (int l = 0; l < c->num_layers; l++) {
        BertLayer *L = &w->layers[l];
        BertLinear qkv[3];
#define GPT2_NAME(suffix) (snprintf(p, sizeof p, "h.%d.%s", l, suffix), p)
        if (load_layernorm(m, &L->ln1_g, &L->ln1_b, GPT2_NAME("ln_1"), H, e) ||
            load_conv1d(m, qkv, 3, GPT2_NAME("attn.c_attn"), H, H, e) ||
            load_conv1d(m, &L->o, 1, GPT2_NAME("attn.c_proj"), H, H, e) ||
            load_layernorm(m, &L->ln2_g, &L->ln2_b, GPT2_NAME("ln_2"), H, e) ||
            load_conv1d(m, &L->ff1, 1, GPT2_NAME("mlp.c_fc"), H, FF, e) ||
            load_conv1d(m, &L->ff2, 1, GPT2_NAME("mlp.c_proj"), FF, H, e))
            return -1;
#undef GPT2_NAME
        L->q = qkv[0], L->k = qkv[1], L->v = qkv[2];
    }
    return 0;
}

int bert_load_files(BertModel *m, const char *config_path, const char *weights_path, AvErr *e) {
    memset(m, 0, sizeof *m);
    if (cfg_load(&m->cfg, config_path, e) != 0) return -1;
    size_t wl = strlen(weights_path);
    int torch_zip = wl >= 4 && !strcmp(weights_path + wl - 4, ".bin"); /* torch.save's zip, read without unpickling */
    if ((torch_zip ? tb_open(&m->st, weights_path, e) : st_open(&m->st, weights_path, e)) != 0) return -1;
    m->w.layers = calloc((size_t)m->cfg.num_layers, sizeof *m->w.layers);
    if (!m->w.layers) {
        bert_free(m);
        return av_err(e, "out of memory");
    }
    int rc = m->cfg.arch == ARCH_GPT2 ? load_gpt2(m, e) : load_bert_like(m, e);
    if (rc != 0) bert_free(m);
    return rc;
}

int bert_load(BertModel *m, const char *dir, AvErr *e) {
    char *cp = av_path_join(dir, "config.json"), *wp = av_path_join(dir, "model.safetensors");
    char *bp = av_path_join(dir, "pytorch_model.bin");
    int rc;
    if (!cp || !wp || !bp) rc = av_err(e, "out of memory");
    else if (!av_file_exists(wp) && av_file_exists(bp)) rc = bert_load_files(m, cp, bp, e);
    else rc = bert_load_files(m, cp, wp, e); /* safetensors first: no pickle at all */
    free(cp);
    free(wp);
    free(bp);
    return rc;
}

void bert_free(BertModel *m) {
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->w.layers);
    st_close(&m->st);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- buffers */

#define MAX_THREADS 8
static struct BertPool *pool_create(int n);
static void pool_destroy(struct BertPool *pool);

static float *alloc_floats(size_t n) {
    return n ? malloc(n * sizeof(float)) : NULL;
}

int bert_runstate_alloc(BertRunState *s, const BertConfig *c, int max_tokens, AvErr *e) {
    memset(s, 0, sizeof *s);
    size_t n = (size_t)max_tokens, H = (size_t)c->hidden_size;
    s->max_tokens = max_tokens;
    s->x = alloc_floats(n * H);
    s->qkv = alloc_floats(3 * n * H);
    s->ctx = alloc_floats(n * H);
    s->tmp = alloc_floats(n * H);
    s->ff = alloc_floats(n * (size_t)c->intermediate_size);
    /* as many threads as BLAS was allowed (--threads / OPENBLAS_NUM_THREADS) */
    int T = openblas_get_num_threads();
    s->n_threads = T < 1 ? 1 : T > MAX_THREADS ? MAX_THREADS : T;
    s->scores = alloc_floats((size_t)s->n_threads * n * n);
    if (!s->x || !s->qkv || !s->ctx || !s->tmp || !s->ff || !s->scores) {
        bert_runstate_free(s);
        return av_err(e, "out of memory for run state (%d tokens)", max_tokens);
    }
    s->pool = pool_create(s->n_threads); /* NULL: run on the calling thread only */
    if (!s->pool) s->n_threads = 1;
    return 0;
}

void bert_runstate_free(BertRunState *s) {
    pool_destroy(s->pool);
    free(s->x);
    free(s->qkv);
    free(s->ctx);
    free(s->tmp);
    free(s->ff);
    free(s->scores);
    memset(s, 0, sizeof *s);
}

int bert_capture_alloc(Capture *cap, const BertConfig *c, int n, int want_qk, int want_hidden, AvErr *e) {
    memset(cap, 0, sizeof *cap);
    cap->n_layers = c->num_layers;
    cap->n_heads = c->num_heads;
    cap->head_dim = c->hidden_size / c->num_heads;
    cap->hidden_size = c->hidden_size;
    cap->n_tokens = n;
    cap->cap_tokens = (size_t)n;
    size_t LH = (size_t)c->num_layers * (size_t)c->num_heads;
    cap->attn = alloc_floats(LH * (size_t)n * (size_t)n);
    int bad = !cap->attn;
    if (want_qk) {
        cap->q = alloc_floats(LH * (size_t)n * (size_t)cap->head_dim);
        cap->k = alloc_floats(LH * (size_t)n * (size_t)cap->head_dim);
        bad |= !cap->q || !cap->k;
    }
    if (want_hidden) {
        cap->hidden = alloc_floats((size_t)(c->num_layers + 1) * (size_t)n * (size_t)c->hidden_size);
        bad |= !cap->hidden;
    }
    if (bad) {
        bert_capture_free(cap);
        return av_err(e, "out of memory for attention capture (%d tokens)", n);
    }
    return 0;
}

void bert_capture_free(Capture *cap) {
    free(cap->attn);
    free(cap->q);
    free(cap->k);
    free(cap->hidden);
    memset(cap, 0, sizeof *cap);
}

/* ---------------------------------------------------------------- kernels */

void bert_matmul_naive(float *y, const float *x, const float *w, const float *b, int n, int in, int out) {
    // y (n, out) = x (n, in) @ w (out, in)^T + b (out)
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int k = 0; k < in; k++) acc += (double)x[(size_t)i * in + k] * w[(size_t)o * in + k];
            y[(size_t)i * out + o] = (float)acc;
        }
}

/* Tiling. OpenBLAS's AVX-512 kernels (SkylakeX and later, OpenBLAS >= 0.3.17)
 * run a product of at most 1e6 multiply-adds whose result has at most 1200
 * elements on "small" kernels that read both operands in place. Issued whole,
 * a product first copies (packs) its weights, each used once per product: at
 * 128 tokens that copy was 14% of the pass, at 7 tokens a third. So where those
 * kernels exist, products go out as tiles of 8 columns x 128 tokens x 768
 * inputs (786,432 multiply-adds); elsewhere tiles would each pack, so whole. */
#define TILE_COLS 8
#define TILE_TOKENS 128
#define TILE_K 768

static int gemm_tiled;
static pthread_once_t gemm_tiled_once = PTHREAD_ONCE_INIT;

static void detect_small_kernels(void) {
    int major = 0, minor = 0, patch = 0;
    const char *config = openblas_get_config(), *core = openblas_get_corename();
    if (sscanf(config ? config : "", "OpenBLAS %d.%d.%d", &major, &minor, &patch) != 3) major = 0;
    int recent = major > 0 || (major == 0 && (minor > 3 || (minor == 3 && patch >= 17)));
    int avx512 = core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake") ||
                          !strcasecmp(core, "sapphirerapids"));
    gemm_tiled = recent && avx512;
}

int bert_gemm_tiled(void) {
    pthread_once(&gemm_tiled_once, detect_small_kernels);
    return gemm_tiled;
}

void bert_set_gemm_tiled(int on) {
    pthread_once(&gemm_tiled_once, detect_small_kernels);
    gemm_tiled = on;
}

static void gemm_cols(float *y, const float *x, const float *w, int ldw, int conv1d, const float *b, int n, int in,
                      int out, int c0, int c1) {
    // y[:, c0:c1] (n, out) = x (n, in) @ W^T + b; W is w (out, ldw) or, for conv1d, W^T is w (in, ldw)
    if (b)
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * out + c0, b + c0, (size_t)(c1 - c0) * sizeof *y);
    const CBLAS_TRANSPOSE tw = conv1d ? CblasNoTrans : CblasTrans;
    if (!bert_gemm_tiled()) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tw, n, c1 - c0, in, 1.0f, x, in,
                    conv1d ? w + c0 : w + (size_t)c0 * ldw, ldw, b ? 1.0f : 0.0f, y + c0, out);
        return;
    }
    for (int c = c0; c < c1; c += TILE_COLS) {
        int tc = c1 - c < TILE_COLS ? c1 - c : TILE_COLS;
        for (int i0 = 0; i0 < n; i0 += TILE_TOKENS) {
            int tn = n - i0 < TILE_TOKENS ? n - i0 : TILE_TOKENS;
            for (int k0 = 0; k0 < in; k0 += TILE_K) {
                int tk = in - k0 < TILE_K ? in - k0 : TILE_K;
                const float *wt = conv1d ? w + (size_t)k0 * ldw + c : w + (size_t)c * ldw + k0; // tile of W
                cblas_sgemm(CblasRowMajor, CblasNoTrans, tw, tn, tc, tk, 1.0f, x + (size_t)i0 * in + k0, in, wt,
                            ldw, b || k0 ? 1.0f : 0.0f, y + (size_t)i0 * out + c, out);
            }
        }
    }
}

void bert_matmul_cols(float *y, const float *x, const float *w, const float *b, int n, int in, int out, int c0,
                      int c1) {
    // y[:, c0:c1] (n, out) = x (n, in) @ w[c0:c1] (out, in)^T + b[c0:c1] (out)
    gemm_cols(y, x, w, in, 0, b, n, in, out, c0, c1);
}

void bert_matmul(float *y, const float *x, const float *w, const float *b, int n, int in, int out) {
    bert_matmul_cols(y, x, w, b, n, in, out, 0, out);
}

void bert_linear_cols(float *y, const float *x, const BertLinear *lin, int n, int in, int out, int c0, int c1) {
    // y[:, c0:c1] (n, out) = x (n, in) @ W^T[:, c0:c1] + b[c0:c1]; W^T is lin->w itself when stored (in, ld)
    gemm_cols(y, x, lin->w, lin->ld, lin->conv1d, lin->b, n, in, out, c0, c1);
}

void bert_linear_naive(float *y, const float *x, const BertLinear *lin, int n, int in, int out) {
    // y (n, out) = x (n, in) @ W^T + b, W^T read element by element from either layout
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            double acc = lin->b ? lin->b[o] : 0.0;
            for (int k = 0; k < in; k++) {
                float wv = lin->conv1d ? lin->w[(size_t)k * lin->ld + o] : lin->w[(size_t)o * lin->ld + k];
                acc += (double)x[(size_t)i * in + k] * wv;
            }
            y[(size_t)i * out + o] = (float)acc;
        }
}

void bert_layernorm(float *x, const float *g, const float *b, int n, int dim, float eps) {
    // x (n, dim) normalized in place over dim; biased variance as torch.nn.LayerNorm
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * dim;
        double mean = 0, var = 0;
        for (int j = 0; j < dim; j++) mean += r[j];
        mean /= dim;
        for (int j = 0; j < dim; j++) {
            double d = r[j] - mean;
            var += d * d;
        }
        var /= dim;
        float inv = (float)(1.0 / sqrt(var + eps)), m = (float)mean;
        for (int j = 0; j < dim; j++) r[j] = (r[j] - m) * inv * g[j] + b[j];
    }
}

/* exp(x) by range reduction and a degree-6 polynomial (Cephes' coefficients):
 * relative error ~2e-7, and branch-free so loops over it vectorize, where libm's
 * expf is a call per element. Arguments are clamped to the float range. */
static inline float vexpf(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* round(x / ln 2) with the 1.5 * 2^23 trick, exact without -ffast-math */
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - fn * 0.693359375f - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)fn + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* Element-wise kernels are compiled for AVX-512, AVX2 and baseline x86-64 and
 * picked at run time, so the default build stays portable. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

VEC_CLONES void bert_softmax_rows(float *x, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float *r = x + (size_t)i * cols;
        float pmax[8], mx = r[0];
        for (int k = 0; k < 8; k++) pmax[k] = r[0];
        int j = 0;
        for (; j + 8 <= cols; j += 8)
            for (int k = 0; k < 8; k++) pmax[k] = r[j + k] > pmax[k] ? r[j + k] : pmax[k];
        for (; j < cols; j++) mx = r[j] > mx ? r[j] : mx;
        for (int k = 0; k < 8; k++) mx = pmax[k] > mx ? pmax[k] : mx;
        for (j = 0; j < cols; j++) r[j] = vexpf(r[j] - mx);
        /* eight partial sums: a fixed order the compiler may vectorize */
        float part[8] = {0};
        for (j = 0; j + 8 <= cols; j += 8)
            for (int k = 0; k < 8; k++) part[k] += r[j + k];
        float sum = 0;
        for (; j < cols; j++) sum += r[j];
        for (int k = 0; k < 8; k++) sum += part[k];
        float inv = 1.0f / sum;
        for (int k = 0; k < cols; k++) r[k] *= inv;
    }
}

void bert_softmax_rows_naive(float *x, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float *r = x + (size_t)i * cols;
        double mx = r[0], sum = 0;
        for (int j = 1; j < cols; j++) mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < cols; j++) sum += exp((double)r[j] - mx);
        for (int j = 0; j < cols; j++) r[j] = (float)(exp((double)r[j] - mx) / sum);
    }
}

void bert_attention_naive(float *probs, float *ctx, const float *q, const float *k, const float *v,
                          int n, int dh, int ld, float scale, int causal) {
    // probs (n, n); ctx, q, k, v (n, dh) with row stride ld
    for (int i = 0; i < n; i++) {
        int len = causal ? i + 1 : n;
        for (int j = 0; j < len; j++) {
            double acc = 0;
            for (int d = 0; d < dh; d++) acc += (double)q[(size_t)i * ld + d] * k[(size_t)j * ld + d];
            probs[(size_t)i * n + j] = (float)(acc * scale);
        }
        bert_softmax_rows_naive(probs + (size_t)i * n, 1, len);
        for (int j = len; j < n; j++) probs[(size_t)i * n + j] = 0.0f;
    }
    for (int i = 0; i < n; i++)
        for (int d = 0; d < dh; d++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += (double)probs[(size_t)i * n + j] * v[(size_t)j * ld + d];
            ctx[(size_t)i * ld + d] = (float)acc;
        }
}

void bert_attention(float *probs, float *ctx, const float *q, const float *k, const float *v,
                    int n, int dh, int ld, float scale, int causal) {
    // probs (n, n) = softmax(scale q k^T); ctx (n, dh) = probs v unless ctx is NULL; q, k, v, ctx with row stride ld
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, scale, q, ld, k, ld, 0.0f, probs, n);
    if (causal) {
        /* masked keys get exactly 0, as softmax gives them after HF's finfo.min fill */
        for (int i = 0; i < n; i++) {
            float *r = probs + (size_t)i * n; // (n)
            bert_softmax_rows(r, 1, i + 1);
            memset(r + i + 1, 0, (size_t)(n - i - 1) * sizeof *r);
        }
    } else {
        bert_softmax_rows(probs, n, n);
    }
    if (ctx) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, 1.0f, probs, n, v, ld, 0.0f, ctx, ld);
}

void bert_activate_naive(float *x, size_t n, ActKind act) {
    for (size_t i = 0; i < n; i++) {
        double u = x[i];
        switch (act) {
        case ACT_GELU: x[i] = (float)(0.5 * u * (1.0 + erf(u * M_SQRT1_2))); break;
        case ACT_GELU_TANH: x[i] = (float)(0.5 * u * (1.0 + tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))); break;
        case ACT_RELU: x[i] = u > 0 ? (float)u : 0.0f; break;
        }
    }
}

/* erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), branch-free. */
static inline float verff(float x) {
    float a = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float y = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float r = 1.0f - y * vexpf(-a * a);
    return x < 0 ? -r : r;
}

VEC_CLONES void bert_activate(float *x, size_t n, ActKind act) {
    switch (act) {
    case ACT_GELU:
        for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + verff(x[i] * 0.70710678118654752f));
        break;
    case ACT_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            float u = x[i];
            float y = 0.7978845608028654f * (u + 0.044715f * u * u * u); /* sqrt(2/pi) */
            float th = 1.0f - 2.0f / (vexpf(2.0f * y) + 1.0f);            /* tanh(y) */
            x[i] = 0.5f * u * (1.0f + th);
        }
        break;
    case ACT_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    }
}

/* ---------------------------------------------------------------- forward */

/* Threads. OpenBLAS's own pool spins in sched_yield between calls, taking
 * cores from everything else; so BLAS runs single-threaded and the forward
 * pass splits its work itself over a small pool of workers that block on a
 * condition variable: matrix products by output columns, attention by heads. */
typedef void (*ParFn)(void *arg, int t, int T);

typedef struct {
    struct BertPool *pool;
    int t;
} PoolSlot;

struct BertPool {
    int n; /* threads, the caller included */
    pthread_t th[MAX_THREADS];
    PoolSlot slot[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    ParFn fn;
    void *arg;
    unsigned gen;
    int pending, quit;
};

static void *pool_worker(void *p) {
    PoolSlot *slot = p;
    struct BertPool *pool = slot->pool;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        while (pool->gen == seen && !pool->quit) pthread_cond_wait(&pool->go, &pool->mu);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->mu);
            return NULL;
        }
        seen = pool->gen;
        ParFn fn = pool->fn;
        void *arg = pool->arg;
        pthread_mutex_unlock(&pool->mu);
        fn(arg, slot->t, pool->n);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
        pthread_mutex_unlock(&pool->mu);
    }
}

static void pool_destroy(struct BertPool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    for (int t = 1; t < pool->n; t++) pthread_join(pool->th[t], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->go);
    pthread_cond_destroy(&pool->done);
    free(pool);
}

/* A pool of n threads (n - 1 workers); NULL when n < 2 or threads cannot be had. */
static struct BertPool *pool_create(int n) {
    if (n < 2) return NULL;
    struct BertPool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->go, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->n = 1;
    for (int t = 1; t < n; t++) {
        pool->slot[t] = (PoolSlot){pool, t};
        if (pthread_create(&pool->th[t], NULL, pool_worker, &pool->slot[t]) != 0) break;
        pool->n = t + 1;
    }
    if (pool->n < 2) {
        pool_destroy(pool);
        return NULL;
    }
    return pool;
}

/* Runs fn(arg, t, T) for t in [0, T) and waits; the caller takes t = 0. */
static void pool_run(struct BertPool *pool, ParFn fn, void *arg) {
    if (!pool) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn, pool->arg = arg;
    pool->pending = pool->n - 1;
    pool->gen++;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->n);
    pthread_mutex_lock(&pool->mu);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

/* Up to three products y = x W^T + b sharing x, each split by output columns;
 * the activation, when set, is applied to each thread's own columns. */
typedef struct {
    const float *x;   // (n, in)
    int n, in, out;
    const BertLinear *lin[3];
    float *y[3];      // (n, out)
    int count;
    int act;          // -1: none, else an ActKind
} MatTask;

static void mat_part(void *arg, int t, int T) {
    const MatTask *m = arg;
    int chunk = (m->out + T - 1) / T;
    chunk = (chunk + 15) & ~15; /* whole cache lines per thread */
    int c0 = t * chunk, c1 = c0 + chunk < m->out ? c0 + chunk : m->out;
    if (c0 >= c1) return;
    for (int k = 0; k < m->count; k++) {
        float *y = m->y[k];
        bert_linear_cols(y, m->x, m->lin[k], m->n, m->in, m->out, c0, c1);
        if (m->act >= 0)
            for (int i = 0; i < m->n; i++) bert_activate(y + (size_t)i * m->out + c0, (size_t)(c1 - c0), (ActKind)m->act);
    }
}

/* Per-head attention of one layer; thread t takes heads t, t + T, ... */
typedef struct {
    const float *q, *k, *v; // (n, H) each; v NULL with ctx NULL: probabilities only
    float *ctx;             // (n, H)
    Capture *cap;           // per-head probabilities and q/k copies, or NULL
    float *scores;          // (threads, n, n) scratch when cap is NULL
    int layer, n, n_heads, dh, H;
    float scale;
    int causal;
} HeadTask;

static void head_part(void *arg, int t, int T) {
    const HeadTask *w = arg;
    const int n = w->n, dh = w->dh, H = w->H;
    for (int h = t; h < w->n_heads; h += T) {
        Capture *cap = w->cap;
        if (cap && cap->q) {
            float *cq = cap_q(cap, w->layer, h), *ck = cap_k(cap, w->layer, h); // (n, dh)
            for (int i = 0; i < n; i++) {
                memcpy(cq + (size_t)i * dh, w->q + (size_t)i * H + h * dh, (size_t)dh * sizeof *cq);
                memcpy(ck + (size_t)i * dh, w->k + (size_t)i * H + h * dh, (size_t)dh * sizeof *ck);
            }
        }
        float *probs = cap ? cap_attn(cap, w->layer, h) : w->scores + (size_t)t * n * n; // (n, n)
        bert_attention(probs, w->ctx ? w->ctx + h * dh : NULL, w->q + h * dh, w->k + h * dh,
                       w->v ? w->v + h * dh : NULL, n, dh, H, w->scale, w->causal);
    }
}

/* Below this many tokens a layer's attention takes microseconds: waking threads costs more. */
#define PARALLEL_HEADS_MIN_TOKENS 48

/* The residual step, split by rows: x += y (when y), then dst = LayerNorm(x)
 * (when g). Post-LN blocks normalize x in place (dst == x); pre-LN blocks
 * normalize into a copy and keep the residual (dst may be y: row by row, y's
 * row is read before it is overwritten). */
typedef struct {
    float *x;        // (n, dim) residual stream
    const float *y;  // (n, dim) or NULL
    float *dst;      // (n, dim)
    const float *g, *b;
    int n, dim;
    float eps;
} RowTask;

static void row_part(void *arg, int t, int T) {
    const RowTask *r = arg;
    int chunk = (r->n + T - 1) / T, r0 = t * chunk, r1 = r0 + chunk < r->n ? r0 + chunk : r->n;
    for (int i = r0; i < r1; i++) {
        float *xr = r->x + (size_t)i * r->dim; // (dim)
        if (r->y) {
            const float *yr = r->y + (size_t)i * r->dim;
            for (int j = 0; j < r->dim; j++) xr[j] += yr[j];
        }
        if (!r->g) continue;
        float *dr = r->dst + (size_t)i * r->dim;
        if (dr != xr) memcpy(dr, xr, (size_t)r->dim * sizeof *dr);
        bert_layernorm(dr, r->g, r->b, 1, r->dim, r->eps);
    }
}

/* Below this many tokens a residual step takes a few microseconds: run it inline. */
#define PARALLEL_ROWS_MIN_TOKENS 32

static void residual(struct BertPool *pool, float *x, const float *y, float *dst, const float *g, const float *b,
                     int n, int dim, float eps) {
    RowTask r = {x, y, dst, g, b, n, dim, eps};
    pool_run(n >= PARALLEL_ROWS_MIN_TOKENS ? pool : NULL, row_part, &r);
}

int bert_forward(const BertModel *m, BertRunState *s, const int *ids, const int *type_ids, int n,
                 Capture *cap, AvErr *e) {
    const BertConfig *c = &m->cfg;
    const BertWeights *w = &m->w;
    const int H = c->hidden_size, FF = c->intermediate_size, NH = c->num_heads;
    const size_t nH = (size_t)n * H;
    if (n < 1 || n > s->max_tokens || (cap && (size_t)n > cap->cap_tokens))
        return av_err(e, "%d tokens do not fit the buffers (%d)", n, s->max_tokens);
    if (n > cfg_max_tokens(c))
        return av_err(e, "%d tokens exceed the model's %d positions", n, cfg_max_tokens(c));
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return av_err(e, "token id %d at position %d is outside the vocabulary (%d)", ids[i], i, c->vocab_size);
        if (w->type_emb && (type_ids[i] < 0 || type_ids[i] >= c->type_vocab_size))
            return av_err(e, "token type %d at position %d is outside type_vocab_size %d", type_ids[i], i,
                          c->type_vocab_size);
    }
    if (cap) cap->n_tokens = n;

    float *x = s->x;                 // (n, H) residual stream
    int pos = c->pos_offset;
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * H;
        const float *we = w->word_emb + (size_t)ids[i] * H;
        /* RoBERTa counts positions over non-pad tokens; a pad sits at padding_idx
         * (Hugging Face's create_position_ids_from_input_ids) */
        int p = c->arch == ARCH_ROBERTA && ids[i] == c->pad_token_id ? c->pad_token_id : pos++;
        const float *pe = w->pos_emb + (size_t)p * H;
        for (int j = 0; j < H; j++) r[j] = we[j] + pe[j];
        if (w->type_emb) {
            const float *te = w->type_emb + (size_t)type_ids[i] * H;
            for (int j = 0; j < H; j++) r[j] += te[j];
        }
    }
    if (w->emb_ln_g) bert_layernorm(x, w->emb_ln_g, w->emb_ln_b, n, H, c->layer_norm_eps);
    if (cap && cap->hidden) memcpy(cap->hidden, x, nH * sizeof *x);

    float *q = s->qkv;                       // (n, H)
    float *k = s->qkv + nH;                  // (n, H)
    float *v = s->qkv + 2 * nH;              // (n, H)
    float *tmp = s->tmp;                     // (n, H)
    /* BLAS single-threaded while our pool splits the work (see pool_run). */
    const int blas_threads = openblas_get_num_threads();
    if (s->pool) openblas_set_num_threads(1);
    const float eps = c->layer_norm_eps;
    for (int l = 0; l < c->num_layers; l++) {
        const BertLayer *L = &w->layers[l];
        /* post-LN (BERT): x = LN(x + attn(x)); x = LN(x + mlp(x))
         * pre-LN (GPT-2):  x = x + attn(LN(x));  x = x + mlp(LN(x)) */
        const float *in = x;
        if (c->pre_ln) {
            residual(s->pool, x, NULL, tmp, L->ln1_g, L->ln1_b, n, H, eps);
            in = tmp;
        }
        /* The last layer's output feeds nothing that is captured unless the
         * hidden states are: its attention (q and k) is all the capture needs. */
        const int attn_only = l == c->num_layers - 1 && cap && !cap->hidden;
        MatTask qkv = {in, n, H, H, {&L->q, &L->k, &L->v}, {q, k, v}, attn_only ? 2 : 3, -1};
        pool_run(s->pool, mat_part, &qkv);
        float scale = 1.0f / sqrtf((float)(H / NH));
        if (c->inverse_layer_scale) scale /= (float)(l + 1);
        HeadTask heads = {q, k, attn_only ? NULL : v, attn_only ? NULL : s->ctx, cap, s->scores, l, n, NH, H / NH, H,
                          scale, c->causal};
        pool_run(n >= PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, head_part, &heads);
        if (attn_only) break;
        MatTask out = {s->ctx, n, H, H, {&L->o}, {tmp}, 1, -1};
        pool_run(s->pool, mat_part, &out);
        if (c->pre_ln) {
            residual(s->pool, x, tmp, tmp, L->ln2_g, L->ln2_b, n, H, eps);
            in = tmp;
        } else {
            residual(s->pool, x, tmp, x, L->ln1_g, L->ln1_b, n, H, eps);
            in = x;
        }
        MatTask ff1 = {in, n, H, FF, {&L->ff1}, {s->ff}, 1, (int)c->hidden_act};
        pool_run(s->pool, mat_part, &ff1);
        MatTask ff2 = {s->ff, n, FF, H, {&L->ff2}, {tmp}, 1, -1};
        pool_run(s->pool, mat_part, &ff2);
        if (c->pre_ln)
            residual(s->pool, x, tmp, x, NULL, NULL, n, H, eps);
        else
            residual(s->pool, x, tmp, x, L->ln2_g, L->ln2_b, n, H, eps);
        if (cap && cap->hidden) {
            float *hs = cap->hidden + (size_t)(l + 1) * nH; // (n, H)
            /* as Hugging Face's hidden_states: GPT-2's last one is after ln_f */
            if (l == c->num_layers - 1 && w->final_ln_g)
                residual(s->pool, x, NULL, hs, w->final_ln_g, w->final_ln_b, n, H, eps);
            else
                memcpy(hs, x, nH * sizeof *x);
        }
    }
    if (s->pool) openblas_set_num_threads(blas_threads);
    if (cap) {
        /* NaN/Inf weights would otherwise reach the writers as invalid JSON. */
        size_t total = (size_t)c->num_layers * NH * n * n;
        for (size_t i = 0; i < total; i++)
            if (!isfinite(cap->attn[i]))
                return av_err(e, "%s: attention in layer %zu is not finite (NaN/Inf in the weights?)", m->st.path,
                              i / ((size_t)NH * n * n));
    }
    return 0;
}
