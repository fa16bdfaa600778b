/* bert.h — Transformer blocks of the BERT family (BERT, RoBERTa, DistilBERT:
 * post-LayerNorm encoders) and GPT-2 (pre-LayerNorm, causal), forward pass with
 * attention capture.
 * Weights are float32 views: into the mmap'd file when stored as aligned F32,
 * converted once at load for F16/BF16. Matrices are (out, in) as in PyTorch Linear. */
#ifndef ATTNVIZ_BERT_H
#define ATTNVIZ_BERT_H

#include "capture.h"
#include "config.h"
#include "err.h"
#include "safetensors.h"

/* A linear layer y = x W^T + b as a view into the checkpoint. PyTorch's Linear
 * stores W as (out, in); GPT-2's Conv1D stores it transposed, (in, out), and
 * packs q, k and v side by side, so a view also carries its row stride. */
typedef struct {
    const float *w; /* (out, in) Linear, or (in, ld) Conv1D: column c of W^T at w[c] */
    const float *b; /* (out) or NULL */
    int conv1d;     /* weight stored (in, out) */
    int ld;         /* row stride of w, in floats */
} BertLinear;

typedef struct {
    BertLinear q, k, v;       /* (hidden -> hidden) */
    BertLinear o;             /* (hidden -> hidden) attention output */
    const float *ln1_g, *ln1_b; /* (hidden) post-LN: after attention; pre-LN: before it */
    BertLinear ff1;           /* (hidden -> intermediate) */
    BertLinear ff2;           /* (intermediate -> hidden) */
    const float *ln2_g, *ln2_b; /* (hidden) post-LN: after the MLP; pre-LN: before it */
} BertLayer;

typedef struct {
    const float *word_emb;  /* (vocab, hidden) */
    const float *pos_emb;   /* (max_pos, hidden) */
    const float *type_emb;  /* (type_vocab, hidden), NULL when the family has no token types */
    const float *emb_ln_g, *emb_ln_b; /* (hidden), NULL for pre-LN models */
    const float *final_ln_g, *final_ln_b; /* (hidden) GPT-2's ln_f, else NULL */
    BertLayer *layers;      /* (num_layers) */
} BertWeights;

typedef struct {
    BertConfig cfg;
    BertWeights w;
    StFile st;
    float **owned;          /* converted or realigned copies to free */
    int n_owned, cap_owned;
    char dtype_name[16];    /* dtype of the checkpoint's weights */
} BertModel;

/* Scratch buffers for one forward pass of up to max_tokens tokens. Products'
 * inputs and outputs are kept transposed, one row per feature (see bert.c). */
typedef struct {
    int max_tokens;
    float *x;    /* (n, hidden) residual stream */
    float *xT;   /* (hidden, n) the next product's input */
    float *qkv;  /* (3, hidden, n) projections q^T, k^T, v^T */
    float *ctx;  /* (hidden, n) attention context, transposed */
    float *tmp;  /* (hidden, n) attention or MLP output, transposed */
    float *ff;   /* (intermediate, n) */
    float *scores; /* (n_threads, n, n) used when attention is not captured */
    int n_threads; /* the forward pass's threads: BLAS's thread count when allocated */
    struct BertPool *pool; /* worker threads, or NULL */
} BertRunState;

/* Loads config.json and the weights from dir (model.safetensors, else
 * pytorch_model.bin); checks every tensor's shape and dtype against the config. */
int bert_load(BertModel *m, const char *dir, AvErr *e);
int bert_load_files(BertModel *m, const char *config_path, const char *weights_path, AvErr *e);
void bert_free(BertModel *m);

int bert_runstate_alloc(BertRunState *s, const BertConfig *c, int max_tokens, AvErr *e);
void bert_runstate_free(BertRunState *s);

/* Allocates capture buffers for n tokens; want_qk / want_hidden choose extras. */
int bert_capture_alloc(Capture *cap, const BertConfig *c, int n, int want_qk, int want_hidden, AvErr *e);
void bert_capture_free(Capture *cap);

/* Runs the encoder on ids/type_ids (n tokens); fills cap (n_tokens set to n). */
int bert_forward(const BertModel *m, BertRunState *s, const int *ids, const int *type_ids, int n,
                 Capture *cap, AvErr *e);

/* Whether products go to OpenBLAS as small tiles (see bert.c): decided once from
 * OpenBLAS's version and kernel; tests and benchmarks may force either path. */
int bert_gemm_tiled(void);
void bert_set_gemm_tiled(int on);

/* Reference (naive, loop-only) kernels, kept beside the optimized ones and
 * tested against them. */
void bert_matmul_naive(float *y, const float *x, const float *w, const float *b, int n, int in, int out);
/* y^T (out, n) rows [r0, r1) = act(W x^T + b) for x^T (in, n), act < 0: none;
 * the forward pass's threads each take a block of rows. */
void bert_linear_rows(float *yT, const float *xT, const BertLinear *lin, int n, int in, int r0, int r1, int act);
/* y (n, out) = x (n, in) @ W^T + b, read element by element from either layout. */
void bert_linear_naive(float *y, const float *x, const BertLinear *lin, int n, int in, int out);
void bert_layernorm(float *x, const float *g, const float *b, int n, int dim, float eps);
/* The residual step on tokens [i0, i1): x (n, dim) += yT^T (yT (dim, n) or NULL);
 * then LayerNorm(x) (g set) or x itself goes to dst (n, dim; may be x) and to
 * dstT (dim, n), either NULL. bert_layernorm is its reference. */
void bert_residual(float *x, const float *yT, float *dst, float *dstT, const float *g, const float *b, int n,
                   int dim, float eps, int i0, int i1);
void bert_softmax_rows(float *x, int rows, int cols);
void bert_softmax_rows_naive(float *x, int rows, int cols);
void bert_activate(float *x, size_t n, ActKind act);
void bert_activate_naive(float *x, size_t n, ActKind act);
/* scale multiplies q k^T (1/sqrt(dh), or less for GPT-2's inverse layer
 * scaling); causal masks keys after the query, whose probabilities are exactly 0. A NULL ctxT
 * (bert_attention only) skips the product with v. */
void bert_attention_naive(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT,
                          int n, int dh, float scale, int causal);
/* One head: qT, kT, vT and ctxT are (dh, n), one row per head dimension. */
void bert_attention(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT,
                    int n, int dh, float scale, int causal);

#endif
