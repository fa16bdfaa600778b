/* model.h — the engine over a loaded Model (weights.h's plain structs, which
 * model/loader.c fills): the run state, the capture buffers and the forward
 * pass. What a family is (config keys, tensor names, block layout) lives in
 * its arch_*.c file; the engine only reads the structs. */
#ifndef ATTNVIZ_MODEL_H
#define ATTNVIZ_MODEL_H

#include "capture.h"
#include "config.h"
#include "err.h"
#include "kernels.h"
#include "pool.h"
#include "weights.h"

/* Tokens the MLP takes at a time: its intermediate products (intermediate x
 * block floats each) stay this size however long the input. Enough tokens
 * that repacking every weight panel per block costs next to nothing, few
 * enough that a product's packed inputs and partial sums stay in cache. */
#ifndef MODEL_MLP_BLOCK /* a build may set another, to run every input over several blocks */
#define MODEL_MLP_BLOCK 512
#endif

/* Scratch buffers for one forward pass of up to max_tokens tokens. Products'
 * inputs and outputs are kept transposed, one row per feature (kernels.h).
 * Buffers of n columns hold every token of the pass; those of mlp_block
 * columns one block of tokens of the MLP. */
typedef struct {
    int max_tokens;
    int mlp_block; /* tokens of one MLP block: MODEL_MLP_BLOCK, at most max_tokens */
    const int *blk_end; /* during model_forward_embeds_blocks only: its blocks (AttnRule.blk_end), else NULL */
    float *x;      /* (n, hidden) residual stream */
    float *xT;     /* (hidden, n) the next product's input */
    float *qT;     /* (num_heads * head_dim, n) */
    float *kT;     /* (num_kv_heads * head_dim, n) */
    float *vT;     /* (num_kv_heads * head_dim, n) */
    float *ctxT;   /* (num_heads * head_dim, n) attention context */
    float *yT;     /* (hidden, n) attention or MLP output */
    float *mlp_xT; /* (hidden, mlp_block) one block's MLP input, when a pass has more tokens than a block */
    float *mlp_yT; /* (hidden, mlp_block) its MLP output */
    float *ffT;    /* (intermediate, mlp_block) up, then act(gate) * up; also a masked-LM head's
                      transform (its width, n) */
    float *gateT;  /* (intermediate, mlp_block) gated MLPs only (MoE: the wider of intermediate and moe_intermediate) */
    float *routerT;  /* (num_experts, mlp_block) router logits, MoE models only */
    float *moe_xT;   /* (hidden, mlp_block) the tokens of a block routed to one expert, gathered */
    float *moe_yT;   /* (hidden, mlp_block) that expert's outputs for them */
    int *moe_ids;    /* (n, experts_per_tok) each token's chosen experts, most weight first */
    float *moe_w;    /* (n, experts_per_tok) their routing weights */
    int *moe_tok;    /* (mlp_block) the tokens of a block routed to one expert */
    float *moe_tw;   /* (mlp_block) their weights for it */
    float *emb, *embT; /* (n, embedding_size), (embedding_size, n) when it is not hidden_size, else NULL */
    float *scores; /* (n_threads, kern_attention_rows(), n): a block of a head's rows when its matrix is not kept */
    float *rope_cos, *rope_sin; /* (rotary_dim / 2, n) rotary families only */
    float *rope_cos_local, *rope_sin_local; /* (rotary_dim / 2, n) for layer_rope_local's layers, else NULL */
    float *widen;  /* (n_threads, widen_len) weights widened per tile */
    size_t widen_len; /* kern_widen_floats(max_in): widened rows of the widest product input */
    int n_threads; /* the forward pass's threads: the pool's, the caller included (1: no pool) */
    int *pos;      /* (max_tokens) each token's position in the current pass */
    float *seg;    /* (n_threads, 4 * head_dim * max_tokens) packed inputs' per-head copies */
    int n_last;    /* tokens of the last pass: x holds their residual stream */
    int full_last; /* the last pass ran every layer, so x is the final hidden state */
    int step;      /* the pass is one token after cached ones (generation): matrix-vector products */
    Pool *pool;    /* worker threads, or NULL */
    int abl_on;    /* head ablation (model_forward_from): layer abl_layer's head abl_head's context replaced */
    int abl_layer, abl_head;
    const float *abl_ctx; /* (head_dim) the replacement for every token (mean ablation), NULL: zeros */
    double attn_ms; /* wall time of the attention steps (scores, softmax, context), summed over passes */
} RunState;

/* Scratch for passes of up to max_tokens tokens, run on `threads` threads (a
 * pool of threads - 1 workers and the caller; at most POOL_MAX_THREADS; 0:
 * pool_threads' default). The count is the caller's setting (RunSpec.threads):
 * nothing here asks a library for it. */
int model_runstate_alloc(RunState *s, const Model *m, int max_tokens, int threads, AvErr *e);
/* Bytes model_runstate_alloc takes for max_tokens tokens on `threads` threads (its buffers), to say what a run
 * will hold before it starts. */
size_t model_runstate_bytes(const Model *m, int max_tokens, int threads);
/* The same with MLP blocks of mlp_block tokens (at most max_tokens): tests
 * compare a pass over several blocks with one over a single block. */
int model_runstate_alloc_mlp(RunState *s, const Model *m, int max_tokens, int mlp_block, int threads, AvErr *e);
void model_runstate_free(RunState *s);

/* Allocates capture buffers for n tokens; want_qk / want_hidden choose extras. */
int model_capture_alloc(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, AvErr *e);
/* The same for the given layers and heads only (NULL: all): the forward pass
 * keeps nothing else, and stops after the last kept layer when hidden states
 * are not wanted. */
int model_capture_select(Capture *cap, const ModelConfig *c, int n, int want_qk, int want_hidden, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e);
/* Queries and keys of every layer and head, and each head's attention pooled
 * to thumb_size (<= n; 0: none), but no attention: what a server keeps of a
 * long input, recomputing a head's attention when it is asked for
 * (model_head_attention). prec (CapQkPrecision): keep q/k as float32 or
 * rounded to 16 bits; the pass computes in float32 either way. */
int model_capture_qk(Capture *cap, const ModelConfig *c, int n, int thumb_size, int prec, AvErr *e);
/* No attention, queries or keys: for the given layers and heads (NULL: all),
 * each query row's statistics and its top_k (0..CAP_TEL_MAX_TOP) heaviest keys
 * (capture.h's telemetry). ids (n): the input's token ids, for the duplicate
 * share (kept by the caller through the pass; NULL: none). */
int model_capture_telemetry(Capture *cap, const ModelConfig *c, int n, int top_k, const int *ids, const int *layers,
                            int n_layers, const int *heads, int n_heads, AvErr *e);
/* The same telemetry added to a capture made otherwise (attnviz serve's q/k
 * capture: its head statistics and top keys without the n x n matrices);
 * bytes: model_capture_telemetry_bytes(cap_blocks, n, top_k). */
int model_capture_add_telemetry(Capture *cap, int top_k, const int *ids, AvErr *e);
size_t model_capture_telemetry_bytes(size_t blocks, int n, int top_k);
/* Rows [row0, row0 + nrows) of head (l, h)'s attention, probs (nrows, ldp)
 * over keys [0, ncols), into the capture's telemetry (it must have it).
 * rule (NULL: any): the rule that made them, so that only the keys a row sees
 * are read (the others are exactly 0). st or NULL: what the softmax learnt
 * of the rows as it made them (kernels.h's KernRowStats), which spares
 * sweeps of each row. */
void model_telemetry_rows(Capture *cap, int l, int h, int row0, const float *probs, int ldp, int nrows, int ncols,
                          const AttnRule *rule, const KernRowStats *st);
/* Before a pass over n tokens from position 0: each token's previous copy
 * (from cap->tel_ids) linked, for the rows' duplicate shares. */
void model_telemetry_begin(Capture *cap, int n);
/* The same statistics of one row, by the definitions, in double precision:
 * the reference model_telemetry_rows is tested against. stats (CAP_TEL_N). */
void model_telemetry_row_naive(const float *p, int ncols, int i, const int *ids, double *stats);
/* No attention, queries or keys: for the given layers and heads (NULL: all),
 * per head the sums over its query rows that --stats and heads score
 * (capture.h's sc_sum, as sc says), taken as the rows are made: memory O(n)
 * per head. The caller sets cap->tel_ids and fills cap->sc_role before each pass. */
int model_capture_scores(Capture *cap, const ModelConfig *c, int n, const CapScoring *sc, const int *layers,
                         int n_layers, const int *heads, int n_heads, AvErr *e);
/* The same sums added to any capture (one that keeps the matrices too: they
 * are then summed from the same rows). */
int model_capture_add_scores(Capture *cap, const CapScoring *sc, AvErr *e);
/* Bytes model_capture_scores takes beyond the value norms. */
size_t model_capture_scores_bytes(int n, int n_layers, int n_heads);
/* Rows [row0, row0 + nrows) of head (l, h)'s attention (as model_telemetry_rows)
 * added to the capture's score sums (it must have them; the pass prepared
 * them: model_scores_begin). */
void model_score_rows(Capture *cap, int l, int h, int row0, const float *probs, int ldp, int nrows, int ncols,
                      const AttnRule *rule, const KernRowStats *st);
/* Before a pass over n tokens from position 0: the sums zeroed, each token's
 * previous copy (from cap->tel_ids) and the special positions (cap->sc_role) found. */
void model_scores_begin(Capture *cap, int n);
size_t model_capture_qk_bytes(const ModelConfig *c, int n, int thumb_size, int prec);
/* Head h of layer l's (n, n) attention from the capture's queries and keys,
 * by the rule and kernel the forward pass applies: what it would have
 * captured (16-bit q/k: widened into scratch first, so the attention of the
 * rounded q/k). scratch: 2 * n * head_dim floats. */
int model_head_attention(const Model *m, const Capture *cap, int l, int h, float *probs, float *scratch, AvErr *e);
/* Rows [r0, r1) of head (l, h)'s attention recomputed from the capture's q/k
 * like model_head_attention, a block of rows at a time and bit for bit the rows
 * it makes: fn(ctx, i0, i1, probs, n) sees rows [r0 + i0, r0 + i1) as probs
 * (i1 - i0, n), every column set (masked keys 0). rows: kern_attention_rows() *
 * n floats; scratch: (n + r1 - r0) * head_dim floats. For a long input's tiles
 * and exact query rows (tiles.h): a causal row band costs its keys only. */
int model_head_rows(const Model *m, const Capture *cap, int l, int h, int r0, int r1, float *rows, float *scratch,
                    KernRowsFn fn, void *ctx, AvErr *e);
/* Adds each head's attention max-pooled to size x size (capture.h's mpool,
 * size <= n) to a capture: the forward pass fills it as it makes the rows.
 * Bytes: blocks * size^2 floats. */
int model_capture_maxpool(Capture *cap, int size, AvErr *e);
/* Adds rows_n rows per kept head (capture.h's rows, rows_from 0) to a
 * capture: each pass copies the rows of that window it makes. Bytes:
 * blocks * rows_n * n_tokens floats. */
int model_capture_add_rows(Capture *cap, int rows_n, AvErr *e);
/* Adds per-token value norms (capture.h's vnorm) to a capture made by one of
 * the functions above: the forward pass then computes them for the kept
 * layers and heads (and the values of the last kept layer, which it skips
 * otherwise). Bytes: model_capture_value_norms_bytes. */
int model_capture_value_norms(Capture *cap, AvErr *e);
size_t model_capture_value_norms_bytes(int n, int n_layers, int n_heads);
/* Bytes the Model keeps for value norms once a pass has made them (Model.vgram):
 * per layer and head a head_dim x head_dim matrix, whatever the input. */
size_t model_value_gram_bytes(const ModelConfig *c);
/* Adds the residual stream, each head's context and each MLP's output of
 * every layer to a capture (capture.h's resid, z, mlp_out) for the logit lens,
 * attribution and ablation; a pass filling them runs every layer. */
int model_capture_internals(Capture *cap, const ModelConfig *c, AvErr *e);
size_t model_capture_internals_bytes(const ModelConfig *c, int n);
/* Adds the stream's per-block median and largest entries (capture.h's act_*,
 * massive activations) to a capture: O(n hidden) per layer of the pass. */
int model_capture_activations(Capture *cap, const ModelConfig *c, AvErr *e);
/* Block b of the stream x (n, dim) into cap's act_* (the pass calls it). */
void model_activation_block(Capture *cap, int b, const float *x, int n, int dim);
/* Adds every layer's value vectors (capture.h's vals) to a capture, for ALTI;
 * like the internals, one input per pass (no packing). */
int model_capture_values(Capture *cap, const ModelConfig *c, AvErr *e);
size_t model_capture_values_bytes(const ModelConfig *c, int n);
/* Bytes such a capture takes, to refuse before allocating. */
size_t model_capture_bytes(const ModelConfig *c, int n, int want_qk, int want_hidden, int n_layers, int n_heads);
void model_capture_free(Capture *cap);
/* A capture written with row stride cap->n_tokens (model_forward_kv) packed to n tokens. */
void model_capture_trim(Capture *cap, int n);

/* Runs the model on ids/type_ids (n tokens; type_ids may be NULL for families
 * without token types); fills cap (n_tokens set to n). */
int model_forward(const Model *m, RunState *s, const int *ids, const int *type_ids, int n, Capture *cap, AvErr *e);
/* The same from the first layer's input x (n, hidden) instead of ids: a vision
 * encoder's embedded patches (vision.h's vis_embed). The embeddings' norm (CLIP's
 * pre_layrnorm) is applied to it; full: run every layer whatever the capture keeps. */
int model_forward_embeds(const Model *m, RunState *s, const float *x, int n, Capture *cap, int full, AvErr *e);
/* x (n, hidden) the embeddings of ids as a pass makes them (the token's row, times emb_scale), for a
 * family without learned positions or token types: a vision-language model's text tokens, before its
 * image tokens take their places. */
int model_embed_ids(const Model *m, const int *ids, int n, float *x, AvErr *e);
/* model_forward_embeds with blocks of positions that attend both ways inside a causal sequence (Gemma 3's
 * images: transformers' token_type_ids mask): blk_end (n) the end of the block a position is in, else 0. */
int model_forward_embeds_blocks(const Model *m, RunState *s, const float *x, int n, const int *blk_end, Capture *cap,
                                int full, AvErr *e);
/* yT (lin->out, n) = act(W xT + b) for xT (lin->in, n), split over the pass's
 * threads (act -1: none): the pass's own products, for the steps around it
 * (vision.c's patch embedding and pooling head). */
int model_product(const Model *m, RunState *s, const float *xT, int n, const Linear *lin, float *yT, int act, AvErr *e);

/* Keys and values of every layer for the positions run so far (causal models),
 * so that generation runs each new token alone. */
typedef struct {
    int cap_tokens;  /* positions it holds */
    int n;           /* positions filled */
    float *kT;       /* (num_layers, num_kv_heads * head_dim, cap_tokens) keys after q/k norm and rotary,
                        a column per position: the scores' input, read along the keys */
    float *v;        /* (num_layers, num_kv_heads, cap_tokens, head_dim) values, a row per position appended
                        as it comes: the context's input (kern_attention_kv_v), read in place */
} KvCache;
int model_kv_alloc(KvCache *kv, const ModelConfig *c, int n, AvErr *e);
size_t model_kv_bytes(const ModelConfig *c, int n);
void model_kv_free(KvCache *kv);

/* How far a long pass has gone, for whoever watches it (the run shows a
 * progress line; the engine never prints): after each layer of a pass, done
 * of total layers; while generating, done of total new tokens. */
typedef enum { MODEL_PROGRESS_LAYERS, MODEL_PROGRESS_TOKENS } ModelProgressUnit;
typedef struct {
    void (*fn)(void *ctx, ModelProgressUnit unit, int done, int total); /* NULL: nobody watches */
    void *ctx;
} ModelProgress;

/* model_forward for n tokens that follow kv's kv->n (kv NULL: a fresh
 * sequence): they take positions [kv->n, kv->n + n), attend to the cached
 * ones and are appended to kv. With kv, cap->n_tokens is the row stride the
 * caller chose (model_capture_trim ends it) and rows [kv->n, kv->n + n) of
 * each captured block are written. full: run every layer even when the
 * capture needs fewer (model_logits follows). */
int model_forward_kv(const Model *m, RunState *s, KvCache *kv, const int *ids, const int *type_ids, int n, Capture *cap,
                     int full, AvErr *e);
/* The same, telling progress (NULL: nobody) after each layer. */
int model_forward_watched(const Model *m, RunState *s, KvCache *kv, const int *ids, const int *type_ids, int n,
                          Capture *cap, int full, const ModelProgress *progress, AvErr *e);

/* Several inputs in one pass (batches of short inputs): input g is lens[g]
 * tokens of ids/type_ids, after the ones before it; its positions start
 * again at 0, it attends only within itself (a block-diagonal mask), and its
 * attention goes to caps[g] (all keeping the same layers) exactly as
 * model_forward would leave it. The weights are read once for all of them. */
int model_forward_packed(const Model *m, RunState *s, const int *ids, const int *type_ids, const int *lens, int n_inputs,
                         Capture *const *caps, AvErr *e);

/* Scores over the vocabulary logitsT (vocab, n_rows) for tokens rows[] of the
 * last pass (which must have run every layer): the final norm or masked-LM
 * transform, then the head (tied or not), soft-capped where the family does. */
int model_logits(const Model *m, RunState *s, const int *rows, int n_rows, float *logitsT, AvErr *e);
/* The same for given residual rows x (n_rows, hidden), token-major (the logit
 * lens: the stream after any layer through the final norm and head). */
int model_logits_rows(const Model *m, RunState *s, const float *x, int n_rows, float *logitsT, AvErr *e);
/* Reruns layers [from, num_layers) of a pre-norm model on tokens ids (n, from
 * position 0, no packing) whose residual stream entering layer `from` is x_in
 * (n, hidden), with s's ablation (abl_*) applied and nothing captured; then
 * model_logits reads its rows. Causal models only need the tokens up to the
 * row they read. */
int model_forward_from(const Model *m, RunState *s, const int *ids, int n, int from, const float *x_in, AvErr *e);
/* Layer l's mixture-of-experts MLP on xT (hidden, n), its output in yT
 * (hidden, n): the router's softmax, each token's top-k experts (weights
 * renormalized where the family does) into ids/w (n, experts_per_tok), then
 * only the chosen experts, each on the tokens routed to it, added in expert
 * order. model_moe_naive is its reference: every expert on every token,
 * through kern_linear_naive, combined in the same order; they agree bit for
 * bit. s: a run state whose MLP blocks hold n tokens (s->mlp_block). */
int model_moe(const Model *m, RunState *s, int l, const float *xT, int n, float *yT, int *ids, float *w, AvErr *e);
int model_moe_naive(const Model *m, int l, const float *xT, int n, float *yT, int *ids, float *w, AvErr *e);
/* Row r of a linear layer's weight W (out, in), widened to float (in). */
int model_linear_row(const Linear *lin, int r, float *dst, AvErr *e);
#endif
