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
    s->xT = alloc_floats(n * H);
    s->qkv = alloc_floats(3 * n * H);
    s->ctx = alloc_floats(n * H);
    s->tmp = alloc_floats(n * H);
    s->ff = alloc_floats(n * (size_t)c->intermediate_size);
    /* as many threads as BLAS was allowed (--threads / OPENBLAS_NUM_THREADS) */
    int T = openblas_get_num_threads();
    s->n_threads = T < 1 ? 1 : T > MAX_THREADS ? MAX_THREADS : T;
    s->scores = alloc_floats((size_t)s->n_threads * n * n);
    if (!s->x || !s->xT || !s->qkv || !s->ctx || !s->tmp || !s->ff || !s->scores) {
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
    free(s->xT);
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

/* Layout. The forward pass keeps every product's input and output transposed,
 * one row per feature and one column per token: y^T (out, n) = W (out, in) x^T
 * (in, n). With W row-major as Linear stores it, that is BLAS's plain NN case,
 * whose kernels broadcast W and stream x^T; x W^T instead reduces along
 * rows, which is slower (figures in bench/README.md).
 *
 * Tiling. OpenBLAS's AVX-512 kernels (SkylakeX and later, OpenBLAS >= 0.3.17)
 * run a product of at most 1e6 multiply-adds on "small" kernels that read both
 * operands in place. Issued whole, a product first copies (packs) its weights,
 * each used once per product: at 128 tokens that copy was 14% of the pass, at
 * 7 tokens a third. So where those kernels exist, products go out as tiles of
 * 8 rows x 128 tokens x 768 inputs (786,432 multiply-adds); elsewhere tiles
 * would each pack, so whole. */
#define TILE_ROWS 8
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

/* &W[r][k] in the view's storage: W row-major (out, ld), or W^T (in, ld) for Conv1D. */
static const float *weight_at(const BertLinear *lin, int r, int k) {
    return lin->conv1d ? lin->w + (size_t)k * lin->ld + r : lin->w + (size_t)r * lin->ld + k;
}

/* dst (cols, rows) = src (rows, cols)^T */
static void transpose(float *dst, const float *src, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = src[(size_t)i * cols + j];
}

/* Rows [r0, r1) of y^T get the bias and the activation (act < 0: none). */
static void bias_act_rows(float *yT, const float *b, int act, int n, int ld, int r0, int r1) {
    // yT (out, ld), of which columns [0, n)
    if (b)
        for (int r = r0; r < r1; r++) {
            float *row = yT + (size_t)r * ld; // (n)
            for (int j = 0; j < n; j++) row[j] += b[r];
        }
    if (act < 0) return;
    if (n == ld) /* contiguous rows: one call, whole vectors, not one per row */
        bert_activate(yT + (size_t)r0 * ld, (size_t)(r1 - r0) * n, (ActKind)act);
    else
        for (int r = r0; r < r1; r++) bert_activate(yT + (size_t)r * ld, (size_t)n, (ActKind)act);
}

/* Under 12 tokens the NN kernels' vectors, which run along the tokens, are
 * mostly empty (bench/README.md has the timings); there the
 * tiles run token-major, y = x W^T with vectors along the inputs, on a
 * transposed copy of x. Returns -1, having done nothing, when that copy cannot
 * be had. */
#define FEW_TOKENS 12

static int few_tokens_rows(float *yT, const float *xT, const BertLinear *lin, int n, int in, int r0, int r1,
                           int act) {
    float *x = malloc((size_t)n * in * sizeof *x); // (n, in)
    if (!x) return -1;
    transpose(x, xT, in, n);
    float yt[FEW_TOKENS * TILE_ROWS]; // (n, tr) tile
    for (int r = r0; r < r1; r += TILE_ROWS) {
        int tr = r1 - r < TILE_ROWS ? r1 - r : TILE_ROWS;
        /* the bias first and beta = 1 throughout: at this shape the beta = 0
         * kernel was the slower */
        for (int j = 0; j < n; j++)
            for (int rr = 0; rr < tr; rr++) yt[j * tr + rr] = lin->b ? lin->b[r + rr] : 0.0f;
        for (int k0 = 0; k0 < in; k0 += TILE_K) {
            int tk = in - k0 < TILE_K ? in - k0 : TILE_K;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, lin->conv1d ? CblasNoTrans : CblasTrans, n, tr, tk, 1.0f,
                        x + k0, in, weight_at(lin, r, k0), lin->ld, 1.0f, yt, tr);
        }
        for (int rr = 0; rr < tr; rr++)
            for (int j = 0; j < n; j++) yT[(size_t)(r + rr) * n + j] = yt[j * tr + rr];
        bias_act_rows(yT, NULL, act, n, n, r, r + tr);
    }
    free(x);
    return 0;
}

void bert_linear_rows(float *yT, const float *xT, const BertLinear *lin, int n, int in, int r0, int r1, int act) {
    // yT[r0:r1] (out, n) = act(W[r0:r1] (out, in) @ xT (in, n) + b[r0:r1]); W is lin->w (out, ld), or
    // lin->w holds W^T (in, ld) for Conv1D
    const CBLAS_TRANSPOSE tw = lin->conv1d ? CblasTrans : CblasNoTrans;
    if (r0 >= r1) return;
    if (!bert_gemm_tiled()) {
        cblas_sgemm(CblasRowMajor, tw, CblasNoTrans, r1 - r0, n, in, 1.0f, weight_at(lin, r0, 0), lin->ld, xT, n,
                    0.0f, yT + (size_t)r0 * n, n);
        bias_act_rows(yT, lin->b, act, n, n, r0, r1);
        return;
    }
    if (n < FEW_TOKENS && few_tokens_rows(yT, xT, lin, n, in, r0, r1, act) == 0) return;
    for (int r = r0; r < r1; r += TILE_ROWS) {
        int tr = r1 - r < TILE_ROWS ? r1 - r : TILE_ROWS;
        for (int j0 = 0; j0 < n; j0 += TILE_TOKENS) {
            int tn = n - j0 < TILE_TOKENS ? n - j0 : TILE_TOKENS;
            float *yt = yT + (size_t)r * n + j0; // (tr, tn) tile, row stride n
            for (int k0 = 0; k0 < in; k0 += TILE_K) {
                int tk = in - k0 < TILE_K ? in - k0 : TILE_K;
                cblas_sgemm(CblasRowMajor, tw, CblasNoTrans, tr, tn, tk, 1.0f, weight_at(lin, r, k0), lin->ld,
                            xT + (size_t)k0 * n + j0, n, k0 ? 1.0f : 0.0f, yt, n);
            }
            /* while the tile is in L1 */
            bias_act_rows(yT + j0, lin->b, act, tn, n, r, r + tr);
        }
    }
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

void bert_attention_naive(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT,
                          int n, int dh, float scale, int causal) {
    // probs (n, n); ctxT, qT, kT, vT (dh, n): one row per head dimension, one column per token
    for (int i = 0; i < n; i++) {
        int len = causal ? i + 1 : n;
        for (int j = 0; j < len; j++) {
            double acc = 0;
            for (int d = 0; d < dh; d++) acc += (double)qT[(size_t)d * n + i] * kT[(size_t)d * n + j];
            probs[(size_t)i * n + j] = (float)(acc * scale);
        }
        bert_softmax_rows_naive(probs + (size_t)i * n, 1, len);
        for (int j = len; j < n; j++) probs[(size_t)i * n + j] = 0.0f;
    }
    for (int d = 0; d < dh; d++)
        for (int i = 0; i < n; i++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += (double)probs[(size_t)i * n + j] * vT[(size_t)d * n + j];
            ctxT[(size_t)d * n + i] = (float)acc;
        }
}

void bert_attention(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT,
                    int n, int dh, float scale, int causal) {
    // probs (n, n) = softmax(scale q k^T); ctxT (dh, n) = (probs v)^T unless ctxT is NULL; qT, kT, vT (dh, n)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, n, dh, scale, qT, n, kT, n, 0.0f, probs, n);
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
    if (ctxT) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, dh, n, n, 1.0f, vT, n, probs, n, 0.0f, ctxT, n);
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

/* Tokens the residual step takes at a time, and the threads' split of them:
 * 16 floats, so its transposed reads and writes are whole cache lines. */
#define ROW_BLOCK 16

VEC_CLONES void bert_residual(float *x, const float *yT, float *dst, float *dstT, const float *g, const float *b, int n,
                   int dim, float eps, int i0, int i1) {
    // tokens [i0, i1) of x (n, dim) += yT (dim, n)^T; then LayerNorm(x) (g set) or x to dst (n, dim), dstT (dim, n)
    for (int b0 = i0; b0 < i1; b0 += ROW_BLOCK) {
        const int bn = i1 - b0 < ROW_BLOCK ? i1 - b0 : ROW_BLOCK;
        float *xb = x + (size_t)b0 * dim; // (bn, dim)
        if (yT)
            for (int j = 0; j < dim; j++) {
                const float *yc = yT + (size_t)j * n + b0; // (bn)
                for (int ii = 0; ii < bn; ii++) xb[(size_t)ii * dim + j] += yc[ii];
            }
        /* mean, then biased variance about it (two passes), accumulated in
         * double as bert_layernorm does, over eight lanes that vectorize */
        float mean[ROW_BLOCK] = {0}, inv[ROW_BLOCK] = {0};
        for (int ii = 0; g && ii < bn; ii++) {
            const float *row = xb + (size_t)ii * dim;
            double part[8] = {0}, mu = 0, var = 0;
            int j = 0;
            for (; j + 8 <= dim; j += 8)
                for (int k = 0; k < 8; k++) part[k] += row[j + k];
            for (; j < dim; j++) mu += row[j];
            for (int k = 0; k < 8; k++) mu += part[k], part[k] = 0;
            mu /= dim;
            for (j = 0; j + 8 <= dim; j += 8)
                for (int k = 0; k < 8; k++) part[k] += (row[j + k] - mu) * (row[j + k] - mu);
            for (; j < dim; j++) var += (row[j] - mu) * (row[j] - mu);
            for (int k = 0; k < 8; k++) var += part[k];
            var /= dim;
            const float m = (float)mu;
            mean[ii] = m, inv[ii] = (float)(1.0 / sqrt(var + eps));
        }
        if (dstT) /* before dst, which may overwrite x */
            for (int j = 0; j < dim; j++) {
                float *tc = dstT + (size_t)j * n + b0; // (bn)
                for (int ii = 0; ii < bn; ii++) {
                    float v = xb[(size_t)ii * dim + j];
                    tc[ii] = g ? (v - mean[ii]) * inv[ii] * g[j] + b[j] : v;
                }
            }
        if (dst)
            for (int ii = 0; ii < bn; ii++) {
                const float *row = xb + (size_t)ii * dim;
                float *out = dst + (size_t)(b0 + ii) * dim;
                for (int j = 0; j < dim; j++) out[j] = g ? (row[j] - mean[ii]) * inv[ii] * g[j] + b[j] : row[j];
            }
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

/* Up to three products y^T = act(W x^T + b) sharing x^T, each split by output
 * rows (features) over the threads. */
typedef struct {
    const float *xT;  // (in, n)
    int n, in, out;
    const BertLinear *lin[3];
    float *yT[3];     // (out, n)
    int count;
    int act;          // -1: none, else an ActKind
} MatTask;

static void mat_part(void *arg, int t, int T) {
    const MatTask *m = arg;
    int chunk = (m->out + T - 1) / T;
    chunk = (chunk + 15) & ~15; /* whole tiles and cache lines per thread */
    int r0 = t * chunk, r1 = r0 + chunk < m->out ? r0 + chunk : m->out;
    for (int k = 0; k < m->count; k++) bert_linear_rows(m->yT[k], m->xT, m->lin[k], m->n, m->in, r0, r1, m->act);
}

/* Per-head attention of one layer; thread t takes heads t, t + T, ...
 * Head h's rows of q^T, k^T, v^T and ctx^T are rows [h dh, (h + 1) dh). */
typedef struct {
    const float *qT, *kT, *vT; // (H, n) each; vT NULL with ctxT NULL: probabilities only
    float *ctxT;               // (H, n)
    Capture *cap;              // per-head probabilities and q/k copies, or NULL
    float *scores;             // (threads, n, n) scratch when cap is NULL
    int layer, n, n_heads, dh;
    float scale;
    int causal;
} HeadTask;

static void head_part(void *arg, int t, int T) {
    const HeadTask *w = arg;
    const int n = w->n, dh = w->dh;
    for (int h = t; h < w->n_heads; h += T) {
        const size_t off = (size_t)h * dh * n;
        Capture *cap = w->cap;
        if (cap && cap->q) {
            float *cq = cap_q(cap, w->layer, h), *ck = cap_k(cap, w->layer, h); // (n, dh)
            transpose(cq, w->qT + off, dh, n);
            transpose(ck, w->kT + off, dh, n);
        }
        float *probs = cap ? cap_attn(cap, w->layer, h) : w->scores + (size_t)t * n * n; // (n, n)
        bert_attention(probs, w->ctxT ? w->ctxT + off : NULL, w->qT + off, w->kT + off, w->vT ? w->vT + off : NULL,
                       n, dh, w->scale, w->causal);
    }
}

/* Below this many tokens a layer's attention takes microseconds: waking threads costs more. */
#define PARALLEL_HEADS_MIN_TOKENS 48

/* The residual step, split by tokens over the threads (see bert_residual). */
typedef struct {
    float *x;          // (n, dim) residual stream
    const float *yT;   // (dim, n) or NULL
    float *dst;        // (n, dim) or NULL; may be x
    float *dstT;       // (dim, n) or NULL
    const float *g, *b;
    int n, dim;
    float eps;
} RowTask;

static void row_part(void *arg, int t, int T) {
    const RowTask *r = arg;
    int chunk = (r->n + T - 1) / T;
    chunk = (chunk + ROW_BLOCK - 1) / ROW_BLOCK * ROW_BLOCK; /* whole cache lines of the transposed rows */
    const int i0 = t * chunk, i1 = i0 + chunk < r->n ? i0 + chunk : r->n;
    if (i0 < i1) bert_residual(r->x, r->yT, r->dst, r->dstT, r->g, r->b, r->n, r->dim, r->eps, i0, i1);
}

/* Below this many tokens a residual step takes a few microseconds: run it inline. */
#define PARALLEL_ROWS_MIN_TOKENS 32

static void residual(struct BertPool *pool, float *x, const float *yT, float *dst, float *dstT, const float *g,
                     const float *b, int n, int dim, float eps) {
    RowTask r = {x, yT, dst, dstT, g, b, n, dim, eps};
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
    float *xT = s->xT;                 // (H, n) the next product's input
    float *qT = s->qkv;                // (H, n)
    float *kT = s->qkv + nH;           // (H, n)
    float *vT = s->qkv + 2 * nH;       // (H, n)
    float *ctxT = s->ctx;              // (H, n)
    float *yT = s->tmp;                // (H, n) attention or MLP output
    float *ffT = s->ff;                // (FF, n)
    const float eps = c->layer_norm_eps;
    if (w->emb_ln_g || !c->pre_ln)
        residual(s->pool, x, NULL, w->emb_ln_g ? x : NULL, c->pre_ln ? NULL : xT, w->emb_ln_g, w->emb_ln_b, n, H, eps);
    if (cap && cap->hidden) memcpy(cap->hidden, x, nH * sizeof *x);

    /* BLAS single-threaded while our pool splits the work (see pool_run). */
    const int blas_threads = openblas_get_num_threads();
    if (s->pool) openblas_set_num_threads(1);
    for (int l = 0; l < c->num_layers; l++) {
        const BertLayer *L = &w->layers[l];
        /* post-LN (BERT): x = LN(x + attn(x)); x = LN(x + mlp(x))
         * pre-LN (GPT-2):  x = x + attn(LN(x));  x = x + mlp(LN(x))
         * On entry xT holds the attention's input, transposed (post-LN). */
        if (c->pre_ln) residual(s->pool, x, NULL, NULL, xT, L->ln1_g, L->ln1_b, n, H, eps);
        /* The last layer's output feeds nothing that is captured unless the
         * hidden states are: its attention (q and k) is all the capture needs. */
        const int attn_only = l == c->num_layers - 1 && cap && !cap->hidden;
        MatTask qkv = {xT, n, H, H, {&L->q, &L->k, &L->v}, {qT, kT, vT}, attn_only ? 2 : 3, -1};
        pool_run(s->pool, mat_part, &qkv);
        float scale = 1.0f / sqrtf((float)(H / NH));
        if (c->inverse_layer_scale) scale /= (float)(l + 1);
        HeadTask heads = {qT, kT, attn_only ? NULL : vT, attn_only ? NULL : ctxT, cap, s->scores, l, n, NH, H / NH,
                          scale, c->causal};
        pool_run(n >= PARALLEL_HEADS_MIN_TOKENS ? s->pool : NULL, head_part, &heads);
        if (attn_only) break;
        MatTask out = {ctxT, n, H, H, {&L->o}, {yT}, 1, -1};
        pool_run(s->pool, mat_part, &out);
        if (c->pre_ln)
            residual(s->pool, x, yT, NULL, xT, L->ln2_g, L->ln2_b, n, H, eps);
        else
            residual(s->pool, x, yT, x, xT, L->ln1_g, L->ln1_b, n, H, eps);
        MatTask ff1 = {xT, n, H, FF, {&L->ff1}, {ffT}, 1, (int)c->hidden_act};
        pool_run(s->pool, mat_part, &ff1);
        MatTask ff2 = {ffT, n, FF, H, {&L->ff2}, {yT}, 1, -1};
        pool_run(s->pool, mat_part, &ff2);
        if (c->pre_ln)
            residual(s->pool, x, yT, NULL, NULL, NULL, NULL, n, H, eps);
        else
            residual(s->pool, x, yT, x, xT, L->ln2_g, L->ln2_b, n, H, eps);
        if (cap && cap->hidden) {
            float *hs = cap->hidden + (size_t)(l + 1) * nH; // (n, H)
            /* as Hugging Face's hidden_states: GPT-2's last one is after ln_f */
            if (l == c->num_layers - 1 && w->final_ln_g)
                residual(s->pool, x, NULL, hs, NULL, w->final_ln_g, w->final_ln_b, n, H, eps);
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
