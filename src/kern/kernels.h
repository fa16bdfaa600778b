/* kernels.h — the engine's numeric kernels. Each optimized kernel has its
 * naive reference (a loop nest written from the definition) beside it, and
 * tests/unit/test_kernels.c holds one against the other.
 *
 * Layout. The forward pass keeps a product's input and output transposed, one
 * row per feature and one column per token: y^T (out, n) = W (out, in) x^T
 * (in, n). The residual stream alone is token-major, x (n, dim). */
#ifndef ATTNVIZ_KERNELS_H
#define ATTNVIZ_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The activations (config.json's hidden_act and friends, read by config.c). */
typedef enum { ACT_GELU = 0, ACT_GELU_TANH, ACT_RELU, ACT_SILU, ACT_QUICK_GELU /* x * sigmoid(1.702 x): CLIP */ } ActKind;

/* Weight storage types, numbered as ggml's (gguf.h's GgufType): F32 = 0,
 * F16 = 1, BF16 = 30, and the block-quantized ones quant.h widens. */
#define KERN_F32 0u
#define KERN_F16 1u
#define KERN_BF16 30u

/* A linear layer y = x W^T + b. W is (out, in) as PyTorch's Linear stores it,
 * kept in its checkpoint's type and widened to float per tile; GPT-2's Conv1D
 * stores it transposed, (in, out), and packs q, k and v side by side. */
typedef struct {
    uint32_t type;        /* storage type of w: KERN_F32, or a type quant.h widens */
    const void *w;        /* F32: (out, ld) Linear, or (in, ld) Conv1D; else (out, in) rows of row_bytes */
    const float *b;       /* (out) or NULL */
    int out, in;
    int conv1d;           /* F32 only: w holds W^T (in, ld); column c of W^T at w[c] */
    int ld;               /* F32: row stride of w in floats */
    size_t row_bytes;     /* other types: bytes per row of W */
    const char *name;     /* the tensor's name, for messages */
} Linear;

/* Normalization of each token's vector: LayerNorm (g, b) or RMSNorm (g only). */
typedef struct {
    const float *g;       /* (dim) or NULL: no normalization */
    const float *b;       /* (dim) LayerNorm's bias, NULL for RMSNorm */
    int rms;              /* 1: x / rms(x) * g; 0: (x - mean) / std * g + b */
    float eps;
} Norm;

/* Rows of W a thread widens at a time when weights are not F32
 * (kern_widen_step(in)), and the scratch a thread passes to kern_linear_rows
 * for products of at most max_in inputs (kern_widen_floats(max_in), which
 * holds kern_widen_step(in) * in floats for every in <= max_in). Each widened
 * block is one product call, and each call packs all of x again: as many rows
 * per call as KERN_WIDEN_BUDGET floats hold, from 256 (wide models) up to
 * 1,024 (every row of a thread's part of a small model's product). */
#define KERN_WIDEN_BUDGET ((size_t)2 << 20)
static inline int kern_widen_step(int in) {
    const size_t r = in > 0 ? KERN_WIDEN_BUDGET / (size_t)in / 16 * 16 : 1024;
    return r < 256 ? 256 : r > 1024 ? 1024 : (int)r;
}
static inline size_t kern_widen_floats(int max_in) {
    const size_t in = max_in > 0 ? (size_t)max_in : 1;
    const size_t most = 1024 * in < KERN_WIDEN_BUDGET ? 1024 * in : KERN_WIDEN_BUDGET;
    return most > 256 * in ? most : 256 * in;
}

/* Queries and keys kept in 16 bits (capture.h's CapQkPrecision: 1 IEEE
 * binary16, 2 bfloat16), rounded to nearest even; binary16 overflows to inf
 * past 65504 and keeps subnormals. Portable scalar code: the conversions cost
 * O(n * head_dim) per head against the attention's O(n^2 * head_dim). */
uint16_t kern_to_half(float x, int prec);
float kern_from_half(uint16_t h, int prec);
/* dst (cols, rows) = src (rows, cols)^T, rounded; and back, widened. */
void kern_transpose_to_half(uint16_t *dst, const float *src, int rows, int cols, int prec);
void kern_transpose_from_half(float *dst, const uint16_t *src, int rows, int cols, int prec);
/* Whether a 16-bit value is inf or NaN. */
int kern_half_finite(uint16_t h, int prec);

/* y^T rows [r0, r1) (out, n) = act(W x^T + b) for x^T (in, n); act < 0: none.
 * The products are gemm.h's: a token's outputs are the same bits whatever n.
 * scratch: kern_widen_floats(in) floats for block-quantized weights, else unused.
 * Returns -1 only when a quantized row cannot be widened (corrupt weights). */
int kern_linear_rows(float *yT, const float *xT, const Linear *lin, int n, int r0, int r1, int act, float *scratch);
/* The same for one token of a generation step: matrix-vector products, which
 * read a weight once without gemm.h's panels but round differently (OpenBLAS's
 * sgemv, on as many threads as kern_blas_threads last gave it). */
int kern_linear_step(float *y, const float *x, const Linear *lin, int r0, int r1, int act, float *scratch);
/* The threads OpenBLAS runs the calls that follow on (kern_linear_step's sgemv,
 * lens.c's and flow.c's sgemm): handed to it where they are made, from the
 * run's settings. OpenBLAS keeps one count for the whole process. */
void kern_blas_threads(int n);
/* dst (cols, rows) = src (rows, cols)^T */
void kern_transpose(float *dst, const float *src, int rows, int cols);
/* The same with row strides of their own: dst (cols, ldd), src (rows, lds). */
void kern_transpose_ld(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols);
/* y (n, out) = x (n, in) @ W^T + b, reading W element by element from any layout and type. */
void kern_linear_naive(float *y, const float *x, const Linear *lin, int n);
/* y (n, out) = x (n, in) @ w (out, in)^T + b (out) */
void kern_matmul_naive(float *y, const float *x, const float *w, const float *b, int n, int in, int out);

/* x (n, dim) normalized in place, token by token. */
void kern_norm_naive(float *x, const Norm *nm, int n, int dim);
/* The residual step on tokens [i0, i1): x (n, dim) += y^T^T (y^T (dim, n) or
 * NULL); then norm(x) (nm and nm->g set) or x itself goes to dst (n, dim; may
 * be x) and to dstT (dim, n), either NULL. kern_norm_naive is the reference. */
void kern_residual(float *x, const float *yT, float *dst, float *dstT, const Norm *nm, int n, int dim, int i0, int i1);
/* RMSNorm down the columns of x^T (dim, n): each token's dim-vector, for
 * per-head q/k norms and norms of a sublayer's output (Gemma 2's sandwich). */
void kern_rmsnorm_cols(float *xT, const float *g, int dim, int n, float eps);

void kern_softmax_rows(float *x, int rows, int cols);
/* out[j] = x[j] ln(x[j] + 1e-30) (the float sum: x[j] itself from 2e-23 up),
 * for entropies: 0 for x[j] = 0, under 7e-28 below 1e-30 (subnormals
 * included); within a few ulp of the double-precision naive. */
void kern_xlogx(float *out, const float *x, int n);
void kern_xlogx_naive(float *out, const float *x, int n);
/* One attention row's telemetry sums over keys [lo, hi) for query position i:
 * out[0] = -sum x ln x, out[1] = sum x |i - j|, out[2] = the x of keys j < i
 * with ids[j] == ids[i] (0 when ids is NULL); keys with x <= 0 add nothing.
 * Fixed lanes and a fixed combining order: the same bits on every kernel.
 * kern_row_sums_naive: the double-precision reference. */
void kern_row_sums(const float *p, int lo, int hi, int i, const int *ids, double *out);
void kern_row_sums_naive(const float *p, int lo, int hi, int i, const int *ids, double *out);
/* The first j with x[j] > thr, or n when none. */
int kern_first_above(const float *x, int n, float thr);
/* The k-th largest of the maxima of x's blocks of KERN_KTH_BLOCK keys (0 when there are
 * fewer than k blocks, or k is outside 1..KERN_KTH_MAX): k distinct keys weigh
 * at least that much, so no lighter key is among the k heaviest. */
#define KERN_KTH_MAX 64
#define KERN_KTH_BLOCK 64
float kern_kth_block_max(const float *x, int n, int k);
/* The k-th largest of x's n values (0 with fewer than k, or k outside 1..KERN_KTH_MAX). */
float kern_kth_largest(const float *x, int n, int k);
void kern_softmax_rows_naive(float *x, int rows, int cols);
/* softmax of (scale x) per row, scale > 0: the bits of multiplying by scale
 * and then kern_softmax_rows, one pass over the row fewer. */
void kern_softmax_scaled_rows(float *x, int rows, int cols, float scale);
void kern_activate(float *x, size_t n, ActKind act);
void kern_activate_naive(float *x, size_t n, ActKind act);
/* g = act(g) * u, element-wise: the gated MLP's (SwiGLU, GeGLU) combination. */
void kern_glu(float *g, const float *u, size_t n, ActKind act);
/* gpt-oss's clamped SwiGLU, element-wise: g = min(g, limit), u clamped to
 * [-limit, limit], g = (u + 1) * g * sigmoid(alpha * g). */
void kern_swiglu_clamped(float *g, const float *u, size_t n, float alpha, float limit);
void kern_swiglu_clamped_naive(float *g, const float *u, size_t n, float alpha, float limit);

/* Which keys a query sees: all, or earlier ones only (causal), and of those
 * only the last window (window > 0: keys j with i - window < j <= i), or with
 * bidir (an encoder's local attention) the window both ways: keys j with
 * |i - j| < window. Masked keys get probability exactly 0. softcap > 0 caps
 * scores as cap * tanh(s / cap). */
typedef struct {
    float scale;          /* multiplies q k^T */
    int causal;
    int window;           /* 0: no sliding window */
    float softcap;        /* 0: none */
    int bidir;            /* 1: the window reaches window - 1 keys after the query too (not causal) */
    int has_sink;         /* 1: the logit sink joins each row's softmax (gpt-oss's sinks, unscaled) with no key:
                             the row's probabilities sum to 1 minus the sink's share */
    float sink;
    float *sink_out;      /* with has_sink: query row i's sink share to sink_out[i] (the call's rows), or NULL */
    const int *blk_end;   /* causal: (nk) for a position inside a block that attends both ways (a vision-language
                             model's image, Gemma 3's), the block's end: its query sees keys up to there, the
                             window's start still bounding them; 0 elsewhere; NULL: no block */
} AttnRule;

/* One head: probs (n, n) = softmax(mask(cap(scale q k^T))); ctxT (dh, n) =
 * (probs v)^T unless ctxT is NULL; qT, kT, vT (dh, n). */
void kern_attention(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT, int n, int dh,
                    const AttnRule *rule, float *scratch);
void kern_attention_naive(float *probs, float *ctxT, const float *qT, const float *kT, const float *vT, int n,
                          int dh, const AttnRule *rule);

/* The same over a key/value cache: nq queries, the last of nk positions (query
 * i sits at position nk - nq + i), against keys and values in the first nk
 * columns of kT, vT (dh, ldk). probs (nq, ldp): each row's columns [nk, ldp)
 * are zeroed, so rows can be written straight into a wider matrix. ctxT, qT
 * (dh, nq). kern_attention is this with nq = nk = ldk = ldp = n. */
void kern_attention_kv(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, const float *vT,
                       int ldk, int nk, int dh, const AttnRule *rule, float *scratch);
/* Both products go through gemm.h's chains, so a head's numbers are the same
 * bits on every kernel and CPU, alone or packed, in one pass or a token at a
 * time against a cache; causal and windowed rules compute only the keys rows
 * see (ATTN_ROWS rows at a time). scratch: kern_attention_scratch(nq, nk, dh)
 * floats when ctxT is set (V turned to (nk, dh) and the context before its
 * transpose), else may be NULL. */
size_t kern_attention_scratch(int nq, int nk, int dh);
void kern_attention_kv_naive(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT,
                             const float *vT, int ldk, int nk, int dh, const AttnRule *rule);
/* The same, a block of rows at a time, for heads whose matrix is not kept
 * (memory: one block, not nq x ldp): after each block's softmax fn (unless
 * NULL) sees rows [i0, i1) in probs (i1 - i0, ldp), a scratch of
 * kern_attention_rows() * ldp floats that the next block overwrites. Every
 * row and ctxT are kern_attention_kv's, bit for bit. With moments, fn sees
 * one row per call, as soon as it is made, and also gets st (else NULL), what
 * the softmax learnt of the row as it made it, so that an observer need not
 * sweep the row again:
 * - mom (i1 - i0, KERN_MOM_N): each row's entropy and mean distance to its
 *   query (query i at position nk - nq + i), from the softmax's own exponents
 *   (kern_row_sums_naive's definitions, to within float rounding of the
 *   weights: no logarithm per key), the sum of its weights as rounded (in
 *   double), and the same sum without key 0 and the query's own key (REST:
 *   what --stats and heads leave out; a total less a 0.99 sink would cancel);
 * - bmax (i1 - i0, bmax_ld), or NULL: for row i's blocks of KERN_KTH_BLOCK keys
 *   from its first seen key (kern_attention_keys), the weight of the block's
 *   highest-scoring key, bit for bit. A key's weight is at most
 *   KERN_BMAX_BOUND(its block's), since exp is only near-monotone in float. */
enum { KERN_MOM_ENTROPY, KERN_MOM_DISTANCE, KERN_MOM_TOTAL, KERN_MOM_REST, KERN_MOM_N };
typedef struct {
    const double *mom;
    const float *bmax;
    int bmax_ld;
} KernRowStats;
#define KERN_BMAX_BOUND(w) ((w) * (1.0f + 2e-6f) + 1e-44f)
typedef void (*KernRowsFn)(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st);
/* The keys [lo, hi) the query at position pos sees under rule, of nk: every
 * other key's probability is exactly 0. */
void kern_attention_keys(const AttnRule *rule, int nk, int pos, int *lo, int *hi);
int kern_attention_rows(void);
void kern_attention_kv_rows(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT,
                            const float *vT, int ldk, int nk, int dh, const AttnRule *rule, float *scratch,
                            KernRowsFn fn, void *fn_ctx, int moments);

/* kern_attention_kv and kern_attention_kv_rows with the values a row per
 * key: v (nk, ldv), row j key j's value vector, as a cache appends them a
 * token at a time; kT as theirs. The same bits as theirs (which turn vT into
 * this and call these), without turning the values around on every call: a
 * decoding step costs what it reads. A call with few query rows (one new
 * token) reads kT and v in place, a row at a time, by gemm.h's chains.
 * scratch: kern_attention_scratch_v(nq, dh) floats when ctxT is set (the
 * context before its transpose), else may be NULL. */
size_t kern_attention_scratch_v(int nq, int dh);
void kern_attention_kv_v(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                         const float *v, int ldv, int nk, int dh, const AttnRule *rule, float *scratch);
void kern_attention_kv_rows_v(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                              const float *v, int ldv, int nk, int dh, const AttnRule *rule, float *scratch,
                              KernRowsFn fn, void *fn_ctx, int moments);
void kern_attention_kv_v_naive(float *probs, int ldp, float *ctxT, const float *qT, int nq, const float *kT, int ldk,
                               const float *v, int ldv, int nk, int dh, const AttnRule *rule);

/* Adds rows [row0, row0 + nrows) of an (n, n) attention matrix, given as
 * probs (nrows, ldp) with its first ncols columns set, into thumb (s, s): cell
 * (i, j) gets the row's weight on the keys of bin j divided by the rows of bin
 * i, token t being in bin t * s / n. Zero thumb first; after every row it is
 * the pooled matrix whose rows sum to 1 (s == n: the matrix itself). */
void kern_pool_attention(float *thumb, int s, const float *probs, int ldp, int row0, int nrows, int ncols, int n);
void kern_pool_attention_naive(float *thumb, int s, const float *probs, int ldp, int row0, int nrows, int ncols, int n);

/* Rotary positions on one head's x^T (dh, n), rotate-half layout as Hugging
 * Face's: dims i and i + dh/2 turn by angle pos_j * inv_freq[i]. cos/sin are
 * (dh/2, n) tables of those angles. */
void kern_rope(float *xT, const float *cos_t, const float *sin_t, int dh, int n);
void kern_rope_naive(float *xT, const float *inv_freq, const int *pos, int dh, int n);

/* Value-weighted attention (--measure norm; Kobayashi et al. 2020): head h's
 * value vector of token j through its slice of the output projection,
 * f_h(x_j) = W_O[:, h*dh:(h+1)*dh] v_j (v_j with the value bias; W_O's own
 * bias is added once to the sum of the heads, belongs to no token, and is left
 * out as the paper does). Its squared norm is v_j^T G_h v_j with G_h =
 * (W_O^h)^T W_O^h (dh, dh), W_O^h = W_O's columns [h dh, (h+1) dh): made once
 * per model (forward.c), then dh^2 + dh multiply-adds per token and head
 * instead of a second output projection. A query head reads kv head h / group's
 * values but has its own G_h (GQA).
 *
 * kern_widen_rows: rows [r0, r1) of W, any storage type, as (r1 - r0, in)
 * floats; -1 only when a quantized row cannot be widened.
 * kern_value_gram: G (dh, dh) = G_h of W_O widened whole (out, in) floats;
 * panel: GEMM_SCRATCH floats, 64-byte aligned.
 * kern_value_norms_gram: norms (n) = sqrt(v_j^T G v_j), for v (dh, n) with
 * row stride ldv (a head's rows of the pass's vT); u: dh * n floats. Each
 * norm is the same bits whatever n and whatever kernel gemm.h runs. */
int kern_widen_rows(float *dst, const Linear *o, int r0, int r1);
void kern_value_gram(float *G, const float *wide, int out, int in, int h, int dh, float *panel);
void kern_value_norms_gram(float *norms, const float *G, const float *v, size_t ldv, int n, int dh, float *u,
                           float *panel);
/* norms (n_heads, n) = ||f_h(x_j)|| in double, W_O read element by element. */
void kern_value_norms_naive(float *norms, const Linear *o, const float *vT, int n, const int *heads, int n_heads,
                            int group, int dh);

#endif
