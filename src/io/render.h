/* render.h — attention computed elsewhere (by transformers, TransformerLens,
 * anything that can write NumPy's .npz or a .safetensors file), checked and
 * turned into what the writers read: a Capture, its tokens and a config that
 * describes it. `attnviz render` (cli.c) hands the result to the same writers
 * a model run uses.
 *
 * INPUT holds float arrays (F32, F64, F16, BF16):
 *   attention [L, H, n, n], or one per layer: attention.0, attention.1, ... [H, n, n]
 *   queries, keys [L, H, n, d] (or per layer), optional: the neuron view's vectors
 *   encoder_attention [L, H, ne, ne], decoder_attention [L, H, nd, nd],
 *   cross_attention [L, H, nd, ne] (or per layer): an encoder-decoder model
 * (leading dimensions of size 1, a batch of one, are dropped). A JSON object
 * says what they are: {"tokens", "display_tokens", "sentence_b_start",
 * "model", "causal", "text", "layers", "encoder_tokens", "decoder_tokens"},
 * from --meta, else INPUT's stem + ".json", else a safetensors file's
 * __metadata__["attnviz"]. */
#ifndef ATTNVIZ_RENDER_H
#define ATTNVIZ_RENDER_H

#include "capture.h"
#include "config.h"
#include "err.h"
#include "tokenizer.h"

/* One attention stack: self-attention (or an encoder's, a decoder's), or an
 * encoder-decoder model's cross attention (rows: decoder tokens; columns:
 * encoder tokens). */
typedef struct {
    Capture cap;          /* kept grid: the given layers (original indices) x every head */
    int n_rows, n_cols;   /* n_rows == n_cols == cap.n_tokens except for cross attention */
    float *cross;         /* cross attention only: (n_layers_given, H, n_rows, n_cols) */
    int present;
} RenderStack;

typedef struct {
    ModelConfig cfg;       /* layers, heads, causal, head_dim; model_type "external" */
    char *model_name;
    char *text;            /* the meta's "text", else the tokens read as text (A's, with B apart) */
    char *text_b;          /* sentence B's tokens read as text, or NULL */
    TokEncoding tokens;    /* self-attention models, and the encoder's tokens for encoder-decoder ones */
    TokEncoding dec_tokens;/* encoder-decoder: the decoder's */
    char **token_store;    /* strings the encodings point to */
    int n_store;
    int *layers;           /* the given layers' original indices (n_layers) */
    int n_layers;
    int enc_dec;           /* 1: encoder_attention / decoder_attention / cross_attention */
    RenderStack self, enc, dec, cross;
} Rendered;

/* max_bytes: what the arrays may take once read (their inflated entries and the floats they
 * become; --max-capture), checked against each array's shape before it is inflated; 0: half
 * of physical memory. */
int render_load(Rendered *r, const char *input, const char *meta_path, double max_bytes, AvErr *e);
void render_free(Rendered *r);

#endif
