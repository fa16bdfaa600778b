/* attnviz.h — libattnviz's public C API: open a Transformer checkpoint (a
 * Hugging Face folder or a llama.cpp .gguf file), run it on a text, read what
 * it attends to (attention, queries, keys, hidden states, predictions) and
 * write attnviz's JSON or its self-contained HTML page.
 *
 * Link with `pkg-config --cflags --libs attnviz`. This header is the whole
 * contract: it includes no other attnviz header and names no internal type.
 *
 * Conventions
 *   - Every name is prefixed attnviz_ / ATTNVIZ_; handles are opaque.
 *   - Errors are values: a function that can fail returns an attnviz_status
 *     (0 = ATTNVIZ_OK) or NULL, and fills *err (when err is not NULL) with a
 *     one-line message. The library never prints and never exits.
 *   - Threads: a model handle may be used from several threads at once (its
 *     runs are serialized by a lock inside it); a result is immutable once
 *     returned and may be read from any thread. Different models run in
 *     parallel.
 *   - Lifetimes: a result keeps its model's weights and tokenizer alive, so
 *     attnviz_model_free and attnviz_result_free may be called in any order.
 *     Borrowed pointers (tensors, token strings) are valid until the handle
 *     they came from is freed.
 *   - ABI: the soname's major version (libattnviz.so.ATTNVIZ_ABI_VERSION)
 *     changes whenever a function or a struct below changes incompatibly;
 *     attnviz_run_options and attnviz_render_options grow only with it. */
#ifndef ATTNVIZ_H
#define ATTNVIZ_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(ATTNVIZ_BUILDING_LIBRARY)
#define ATTNVIZ_API __attribute__((visibility("default")))
#else
#define ATTNVIZ_API
#endif

#define ATTNVIZ_ABI_VERSION 0

typedef enum {
    ATTNVIZ_OK = 0,
    ATTNVIZ_ERR_RUNTIME = 1, /* the model, the input, a file or memory failed */
    ATTNVIZ_ERR_USAGE = 2    /* the call asked for something impossible: a NULL handle, a layer out of range, ... */
} attnviz_status;

typedef struct {
    attnviz_status code;
    char message[512]; /* one line, NUL-terminated, without a trailing newline */
} attnviz_error;

typedef struct attnviz_model attnviz_model;
typedef struct attnviz_result attnviz_result;

/* The library's version ("0.1.0", as `attnviz --version`). */
ATTNVIZ_API const char *attnviz_version(void);

/* ---- models ------------------------------------------------------------ */

/* attnviz_model_open's flags: how a WordPiece vocabulary treats case
 * (default: the model's tokenizer_config.json, else inferred as the CLI does). */
#define ATTNVIZ_OPEN_CASED 1u
#define ATTNVIZ_OPEN_UNCASED 2u

/* Loads the model at path: a folder (config.json, tokenizer files, weights)
 * or a .gguf file (or a folder holding one). NULL on failure (*err says why). */
ATTNVIZ_API attnviz_model *attnviz_model_open(const char *path, unsigned flags, attnviz_error *err);
/* Releases the handle (NULL is ignored); results still held keep the weights alive. */
ATTNVIZ_API void attnviz_model_free(attnviz_model *m);

/* Shape of the model (0 / NULL for a NULL handle). */
ATTNVIZ_API int attnviz_model_n_layers(const attnviz_model *m);
ATTNVIZ_API int attnviz_model_n_heads(const attnviz_model *m);    /* query heads */
ATTNVIZ_API int attnviz_model_n_kv_heads(const attnviz_model *m); /* key/value heads */
ATTNVIZ_API int attnviz_model_head_dim(const attnviz_model *m);
ATTNVIZ_API int attnviz_model_hidden_size(const attnviz_model *m);
ATTNVIZ_API int attnviz_model_vocab_size(const attnviz_model *m);
ATTNVIZ_API int attnviz_model_max_tokens(const attnviz_model *m);  /* positions an input may fill */
ATTNVIZ_API int attnviz_model_is_causal(const attnviz_model *m);   /* 1: a decoder */
ATTNVIZ_API int attnviz_model_can_predict(const attnviz_model *m); /* 1: it has a language-model head */
ATTNVIZ_API const char *attnviz_model_name(const attnviz_model *m); /* e.g. "bert-base-uncased" */
ATTNVIZ_API const char *attnviz_model_type(const attnviz_model *m); /* config's model_type, e.g. "llama" */

/* The vocabulary's spelling of id ("Ġworld"), and as a person reads it
 * (" world"); NULL when id is not in the vocabulary. */
ATTNVIZ_API const char *attnviz_model_token(const attnviz_model *m, int id);
ATTNVIZ_API const char *attnviz_model_token_text(const attnviz_model *m, int id);

/* Tokenizes text_a (and text_b, or NULL) as a run would, specials included.
 * Writes up to cap ids into ids (which may be NULL when cap is 0) and the
 * count into *n_tokens: call with cap 0 to learn the size. Truncated to the
 * model's positions. */
ATTNVIZ_API attnviz_status attnviz_tokenize(attnviz_model *m, const char *text_a, const char *text_b, int *ids,
                                            size_t cap, size_t *n_tokens, attnviz_error *err);

/* ---- runs -------------------------------------------------------------- */

#define ATTNVIZ_RUN_HIDDEN 1u /* also keep the hidden states (embeddings, then every layer) */

typedef struct {
    const int *layers; /* the layers to keep (any order, repeats ignored); NULL: all */
    int n_layers;
    const int *heads;  /* the heads to keep in each kept layer; NULL: all */
    int n_heads;
    int predict;       /* top-K (1-100) next tokens at every position (causal) or fill-ins at each mask; 0: none */
    int max_tokens;    /* truncate the input to this many tokens; 0: the model's limit */
    unsigned flags;    /* ATTNVIZ_RUN_* */
} attnviz_run_options;

/* Runs the model on text_a (and text_b, or NULL); opts NULL: every layer and
 * head, no predictions. NULL on failure. */
ATTNVIZ_API attnviz_result *attnviz_run(attnviz_model *m, const char *text_a, const char *text_b,
                                        const attnviz_run_options *opts, attnviz_error *err);
/* n inputs (texts_b NULL, or NULL entries: no pair) into results[0..n), with
 * the CLI's --batch packing: consecutive inputs of up to pack_tokens tokens in
 * all share one forward pass (-1: 256, its default; 0: one pass each), each
 * attending only within itself, so that every result holds the same bits as
 * attnviz_run gives it alone. With opts->predict every input runs alone. On
 * failure no result is kept and the message names the input ("input 3: ..."). */
ATTNVIZ_API attnviz_status attnviz_run_batch(attnviz_model *m, const char *const *texts_a, const char *const *texts_b,
                                             size_t n, const attnviz_run_options *opts, int pack_tokens,
                                             attnviz_result **results, attnviz_error *err);
ATTNVIZ_API void attnviz_result_free(attnviz_result *r);

ATTNVIZ_API int attnviz_result_n_tokens(const attnviz_result *r);
ATTNVIZ_API int attnviz_result_n_truncated(const attnviz_result *r); /* tokens dropped to fit */
/* Kept layers and heads: the i-th kept one's index in the model. */
ATTNVIZ_API int attnviz_result_n_layers(const attnviz_result *r);
ATTNVIZ_API int attnviz_result_n_heads(const attnviz_result *r);
ATTNVIZ_API int attnviz_result_layer(const attnviz_result *r, int i);
ATTNVIZ_API int attnviz_result_head(const attnviz_result *r, int i);

/* Token i: its id, its vocabulary spelling, its text as read; and whether it
 * is a special token ([CLS], <s>, ...) that the template added or the text held. */
ATTNVIZ_API const int *attnviz_result_ids(const attnviz_result *r); /* (n_tokens), borrowed */
ATTNVIZ_API const char *attnviz_result_token(const attnviz_result *r, int i);
ATTNVIZ_API const char *attnviz_result_token_text(const attnviz_result *r, int i);
ATTNVIZ_API int attnviz_result_token_is_special(const attnviz_result *r, int i);

typedef enum {
    ATTNVIZ_ATTENTION = 0, /* (layers, heads, n_tokens, n_tokens): row i is query token i's weights, summing to 1 */
    ATTNVIZ_QUERIES = 1,   /* (layers, heads, n_tokens, head_dim): after bias, q/k norm and rotary, before the scale */
    ATTNVIZ_KEYS = 2,      /* (layers, heads, n_tokens, head_dim): a query head's copy of the key head it reads */
    ATTNVIZ_HIDDEN = 3     /* (model layers + 1, n_tokens, hidden_size): with ATTNVIZ_RUN_HIDDEN only */
} attnviz_tensor;

/* The tensor's shape into shape[0..ndim) and ndim as the return value (0
 * when the result does not hold it). Row-major float32, C order. */
ATTNVIZ_API int attnviz_result_shape(const attnviz_result *r, attnviz_tensor t, size_t shape[4]);
/* A borrowed view of the tensor (NULL when absent). */
ATTNVIZ_API const float *attnviz_result_data(const attnviz_result *r, attnviz_tensor t);
/* Copies the tensor into dst, which holds n_floats floats (at least the
 * shape's product). */
ATTNVIZ_API attnviz_status attnviz_result_copy(const attnviz_result *r, attnviz_tensor t, float *dst, size_t n_floats,
                                               attnviz_error *err);

/* Predictions (opts->predict = K): n positions, K each, most probable first:
 * positions (n), ids (n, K), probs (n, K), borrowed; 0 / NULL without. */
ATTNVIZ_API int attnviz_result_n_predictions(const attnviz_result *r);
ATTNVIZ_API int attnviz_result_predict_k(const attnviz_result *r);
ATTNVIZ_API const int *attnviz_result_prediction_positions(const attnviz_result *r);
ATTNVIZ_API const int *attnviz_result_prediction_ids(const attnviz_result *r);
ATTNVIZ_API const float *attnviz_result_prediction_probs(const attnviz_result *r);

/* ---- generation -------------------------------------------------------- */

/* attnviz_generate_options' flags: what each token carries besides its text
 * and log-probabilities. Without ATTNVIZ_GEN_ATTENTION nothing is captured
 * and generation costs what it costs. */
#define ATTNVIZ_GEN_ATTENTION 1u /* each token's attention row of the kept heads: its top_k heaviest keys,
                                    entropy, sink share (key 0's weight) and mean distance */
#define ATTNVIZ_GEN_ROWS 2u      /* ... and the whole rows (with ATTNVIZ_GEN_ATTENTION) */
#define ATTNVIZ_GEN_PROMPT 4u    /* ... and the prompt's rows first, one callback per prompt token */

typedef struct {
    int max_tokens;          /* tokens to add at most (1 or more; the model's positions may leave fewer) */
    double temperature;      /* 0: greedy (the most probable token) */
    double top_p;            /* the nucleus (0 < top_p <= 1); 0 is taken as 1 (none) */
    unsigned long long seed; /* the sampling's seed: the same seed, the same tokens */
    const char *const *stop; /* stop strings (n_stop, at most 4, none empty): the text ends before the first */
    int n_stop;
    int top_logprobs;        /* the most probable tokens' log-probabilities at each step (0-20) */
    unsigned flags;          /* ATTNVIZ_GEN_* */
    const int *layers;       /* the layers whose attention is kept (any order, repeats ignored); NULL: all */
    int n_layers;
    const int *heads;        /* the heads kept in each kept layer; NULL: all */
    int n_heads;
    int top_k;               /* heaviest keys of each row (0-64) */
} attnviz_generate_options;

/* One token, as the callback sees it; its pointers are valid during the call. */
typedef struct {
    int index;                  /* 0, 1, ...: the index-th generated token; -1: a prompt token (ATTNVIZ_GEN_PROMPT) */
    int position;               /* its position in the sequence (the prompt's tokens first) */
    int id;
    const char *token;          /* the vocabulary's spelling ("Ġworld") */
    const char *text;           /* the text it completes, UTF-8 (maybe "": a character not complete yet, or what
                                   may start a stop string, waits for the next); "" for a prompt token */
    double logprob;             /* its log-probability under the model (the softmax of its scores, before
                                   temperature and top_p); 0 for a prompt token */
    int n_top;                  /* options' top_logprobs (0 for a prompt token) */
    const int *top_ids;         /* (n_top) the most probable tokens at this step, most probable first */
    const double *top_logprobs; /* (n_top) their log-probabilities */
    /* attention (ATTNVIZ_GEN_ATTENTION): the query row of this position in each kept layer and head;
     * blocks are n_layers x n_heads, layer-major, in the order asked */
    int n_layers, n_heads;
    const int *layers, *heads;  /* (n_layers), (n_heads) */
    int top_k;
    const int *top_keys;        /* (blocks, top_k) heaviest first (ties: the earlier key); -1 past the row */
    const float *top_weights;   /* (blocks, top_k) */
    const float *entropy;       /* (blocks) nats */
    const float *sink;          /* (blocks) the weight on key 0 */
    const float *distance;      /* (blocks) sum of weight * (position - key) */
    int n_keys;                 /* position + 1 */
    const float *rows;          /* (blocks, n_keys) with ATTNVIZ_GEN_ROWS, else NULL */
} attnviz_token;

/* Called for each token as it comes; a nonzero return stops after it. */
typedef int (*attnviz_token_callback)(void *ctx, const attnviz_token *t);

typedef enum {
    ATTNVIZ_FINISH_LENGTH = 0,  /* max_tokens, or the model's positions */
    ATTNVIZ_FINISH_EOS = 1,     /* the model's end token */
    ATTNVIZ_FINISH_STOP = 2,    /* a stop string */
    ATTNVIZ_FINISH_CALLBACK = 3 /* the callback asked to stop */
} attnviz_finish;

/* Continues prompt (tokenized as attnviz_tokenize does, specials included)
 * on a causal model with a language-model head, calling cb with each token;
 * opts NULL: 16 tokens, greedy, no attention. *finish (or NULL) says why it
 * ended. A prompt that fills the model's positions is an error. */
ATTNVIZ_API attnviz_status attnviz_generate(attnviz_model *m, const char *prompt, const attnviz_generate_options *opts,
                                            attnviz_token_callback cb, void *ctx, attnviz_finish *finish,
                                            attnviz_error *err);

/* ---- outputs ----------------------------------------------------------- */

#define ATTNVIZ_JSON_QK 1u /* include queries and keys */

/* attnviz's JSON of the result (the CLI's --json document; the hidden states
 * when the run kept them), floats to precision significant digits (1-9; 0:
 * 6). Written atomically: a temporary file renamed into place. */
ATTNVIZ_API attnviz_status attnviz_result_write_json(const attnviz_result *r, const char *path, int precision,
                                                     unsigned flags, attnviz_error *err);
/* The self-contained HTML page (the CLI's --html), opening on view: head,
 * model, neuron or matrix (NULL: head). */
ATTNVIZ_API attnviz_status attnviz_result_write_page(const attnviz_result *r, const char *path, const char *view,
                                                     attnviz_error *err);

/* Attention computed elsewhere, drawn as `attnviz render INPUT` does: INPUT
 * is an .npz or .safetensors file (README: "Drawing attention computed
 * elsewhere"). At least one of html_path and json_path. */
typedef struct {
    const char *meta;       /* the JSON sidecar (tokens, model name, ...), or NULL */
    const char *html_path;  /* the page, or NULL */
    const char *json_path;  /* attnviz's JSON of the same numbers, or NULL */
    int qk;                 /* 1: queries and keys in the JSON too */
    int layer, head;        /* the page's first layer (an index of the input's) and head; -1: the first */
    const char *view;       /* head, model, neuron or matrix; NULL: head */
    const char *theme;      /* light or dark; NULL: the reader's */
    const int *show_heads;  /* the heads shown at first, or NULL */
    int n_show_heads;
} attnviz_render_options;

ATTNVIZ_API attnviz_status attnviz_render(const char *input, const attnviz_render_options *opts, attnviz_error *err);

#ifdef __cplusplus
}
#endif

#endif
