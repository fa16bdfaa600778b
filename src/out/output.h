/* output.h — the document every writer (JSON, HTML, npy) renders: model
 * description, tokens and the captured attention. Built by the CLI after the
 * forward pass; writers only read it. */
#ifndef ATTNVIZ_OUTPUT_H
#define ATTNVIZ_OUTPUT_H

#include <stdint.h>
#include <stdio.h>
#include "capture.h"
#include "config.h"
#include "err.h"
#include "tokenizer.h"

struct OutDiff;
struct LensResult;
struct HeadStats;
struct HeadScores;

/* Ids spelled out before the writers run, so that no writer needs the
 * tokenizer: token[i] as the vocabulary spells id i of some list, display[i]
 * as the page shows it ("" when the vocabulary has no such id). */
typedef struct {
    const char **token, **display;
    int n;
} OutSpelling;

/* What a token of an image run stands for (OutImage.kind). */
enum { OUT_TOK_PATCH = 0, OUT_TOK_CLS, OUT_TOK_DIST, OUT_TOK_REGISTER, OUT_TOK_TEXT /* a vision-language model's text */ };

/* An image run (vision.h): where its tokens come from in the picture, for the
 * writers (image_out.c) and the page's Image view. */
typedef struct OutImage {
    const char *file;          /* --image as given */
    const char *mode;          /* what the file held, as PIL names it ("RGB", "RGBA", "L", "P", "CMYK", ...) */
    int src_w, src_h;          /* the decoded picture */
    int resized_w, resized_h;  /* after the processor's resize */
    int w, h;                  /* the preprocessed picture: pixel_values' size */
    int patch;                 /* the patch side, in preprocessed pixels */
    int rows, cols, tiles;     /* the patch grid of one tile, and the tiles (1) */
    int first_patch;           /* the first patch token's index; patches follow row by row */
    const int *kind;           /* (n) each token's OUT_TOK_* */
    const unsigned char *png;  /* the preprocessed picture as PNG (the page draws it), png_len bytes */
    size_t png_len;
    const float *pool_attn;    /* (pool_heads, n) SigLIP's pooling head: its query's attention over the tokens */
    int pool_heads;
    const float *embed;        /* (embed_dim) the image embedding (SigLIP's pooled output, CLIP's projection) */
    int embed_dim;
    /* a whole CLIP/SigLIP model given a text: the text tower's tokens, its attention (text_layers,
     * text_heads, t, t), its embedding and the image-text logit (sigmoid: SigLIP's probability) */
    const TokEncoding *text_enc;
    const float *text_attn;
    int text_layers, text_heads;
    const float *text_embed;
    double logit;
    int sigmoid;
    /* a vision-language model's picture (its image tokens inside the decoder's sequence, from first_patch
     * on, the others OUT_TOK_TEXT): the vision tower's attention (vis_layers, vis_heads, vis_n, vis_n)
     * over its own tokens (vis_prefix class tokens, then the patches), which of its hidden states the
     * decoder reads (feature_layer, as transformers counts them), the image tokens' embeddings as the
     * decoder reads them (n_image, embeds_dim), and the pixel values (3, h, w); vis_attn NULL otherwise */
    const float *vis_attn;
    int vis_layers, vis_heads, vis_n, vis_prefix, feature_layer;
    int vis_kept;              /* vis_attn holds the tower's last vis_kept layers only (its plan's budget); 0: all */
    const float *image_embeds;
    int n_image, embeds_dim;
    const float *pixels;
    int pixel_tiles;           /* > 1: pixels holds that many (3, h, w) pictures (Idefics3's tiles, then its global
                                  view; the .pixels array (pixel_tiles, 3, h, w)) */
    int split_rows, split_cols; /* Idefics3: the picture cut into split_rows x split_cols tiles (before its global view,
                                   which the grid, first_patch and the image tokens describe); 0, 0: none */
    const int *tile_first;     /* (split_rows x split_cols) where each tile's image tokens start in the sequence */
    int bidir;                 /* the image tokens attend to each other both ways inside a causal sequence (Gemma 3) */
    /* the other tower's own page, written beside this one (FILE's stem + tower_suffix, e.g. ".text.html"):
     * a whole CLIP/SigLIP model's text tower over the text's tokens, a vision-language model's vision
     * tower over its patches; NULL: none */
    const struct OutDoc *tower;
    const char *tower_suffix;
    const char *tower_label;   /* "text tower", "vision tower": the link's words */
} OutImage;

typedef struct OutDoc {
    const char *model_name;        /* e.g. "bert-base-uncased", "attnviz-demo" */
    const char *model_dir;
    const ModelConfig *cfg;
    const char *dtype;             /* checkpoint dtype: "F32", "F16", "BF16" */
    int is_demo;                   /* constructed demo model */
    const char *model_note;        /* shown on the page and in JSON, or NULL */
    const char *const *head_patterns;     /* (num_layers * num_heads) or NULL */
    const char *const *head_descriptions; /* (num_layers * num_heads) or NULL */
    const char *text_a;
    const char *text_b;            /* NULL when no sentence B */
    const TokEncoding *enc;
    const Capture *cap;            /* NULL for --tokens-only */
    int init_layer, init_head;     /* the page's initial selection (init_head -1: every head) */
    const int *layers;             /* selected layers (n_sel_layers), all when NULL */
    int n_sel_layers;
    const int *heads;              /* selected heads (n_sel_heads), all when NULL */
    int n_sel_heads;
    int precision;                 /* significant digits for JSON floats */
    int with_qk;                   /* include queries and keys in JSON */
    const char *const *display_tokens; /* (enc->n) tokens as read (Ġ -> space), or NULL: use enc->tokens */
    const CapPredictions *pred;    /* --predict, or NULL */
    const CapGeneration *gen;      /* --generate, or NULL: tokens [gen->n_prompt, enc->n) were generated */
    const char *gen_text;          /* the generated continuation, decoded */
    const OutSpelling *pred_words; /* (pred->n * pred->k) the predicted ids spelled, or NULL */
    const OutSpelling *gen_words;  /* (gen->steps.n * gen->steps.k) the generation's top ids spelled, or NULL */
    const char *init_view;         /* the page's first view ("head", "model", ...), or NULL */
    const char *theme;             /* "light", "dark", or NULL: the reader's preference */
    const int *init_heads;         /* heads shown at first (n_init_heads), or NULL: init_head's rule */
    int n_init_heads;
    /* encoder-decoder attention (attnviz render): then cap is NULL, enc holds
     * the encoder's tokens (the decoder's when only the decoder is given) and
     * dec_enc the decoder's (or NULL) */
    const CapStack *stacks;
    int n_stacks;
    const TokEncoding *dec_enc;
    /* --logit-lens, --attribution, --ablate (lens.h), or NULL; lens_words spells its ids in
     * the order lens_out.c reads them: the lens's top ids, each position's prediction, the
     * attribution targets, the ablation target */
    const struct LensResult *lens;
    const OutSpelling *lens_words;
    /* --flow (flow.h), or NULL */
    const struct FlowResult *flow;
    /* --measure alti and rollout (mixing.h), in the order --measure gave them: mix[k] every layer of the
     * model (the writers take the selected ones), named mix_name[k] ("alti", "rollout"); n_mix of them */
    const struct MixResult *mix[2];
    const char *mix_name[2];
    int n_mix;
    /* the measures the document carries besides the attention ("norm", "alti", "rollout"), in the order
     * --measure gave them: JSON "measure" (the first) and "measures", the page's switch */
    const char *measures[3];
    int n_measures;
    /* attention sinks of the selected heads and the stream's massive activations (flags.h), or NULL */
    const struct FlagsResult *flags;
    /* --explain (explain.h), or NULL; tokens from enc */
    const struct ExplainResult *explain;
    /* attnviz diff: this document (A) compared with a second one, or NULL */
    const struct OutDiff *diff;
    /* an image run: the picture its tokens are patches of (enc holds their names), or NULL */
    const OutImage *image;
    /* what the writers need beyond the input, put here first (writers read the document only) */
    const char *templates_dir;     /* --templates: the page's templates folder, or NULL: the built-in ones */
    /* --stats and attnviz heads once every input is in: per stack (n_scored: 1, or an encoder-decoder's
     * 3, named stack_names), the statistics (stats.h) or the head scores (heads.h), else NULL */
    const struct HeadStats *const *stats;
    const struct HeadScores *const *scores;
    const char *const *stack_names;
    int n_scored;
} OutDoc;

/* attnviz diff (diff.h): the other input's whole document (B: its model,
 * text, tokens and capture, of the same layers and heads), which tokens align
 * and each selected head's divergence. */
struct OutDiff {
    const OutDoc *b;
    int two_models;        /* 1: one text on two models; 0: two texts on one model */
    const int *a_to_b;     /* (A's tokens): the B token aligned with it, or -1 */
    const int *b_to_a;     /* (B's tokens) */
    int n_pairs;           /* aligned tokens */
    const double *jsd;     /* (selected layers x heads): mean Jensen-Shannon divergence in bits */
    const double *sink_a;  /* (selected layers x heads): A's sink mass (diff.h) */
    const double *sink_b;  /* B's */
};

/* Number of selected layers/heads and the i-th selected index. */
static inline int out_n_layers(const OutDoc *d) { return d->layers ? d->n_sel_layers : d->cfg->num_layers; }
static inline int out_n_heads(const OutDoc *d) { return d->heads ? d->n_sel_heads : d->cfg->num_heads; }
static inline int out_layer(const OutDoc *d, int i) { return d->layers ? d->layers[i] : i; }
static inline int out_head(const OutDoc *d, int i) { return d->heads ? d->heads[i] : i; }
/* A stack's layers: its own when it has them (CapStack.layers), else the document's. */
static inline int out_stack_n_layers(const OutDoc *d, const CapStack *st) {
    return st->n_layers ? st->n_layers : out_n_layers(d);
}
static inline int out_stack_layer(const OutDoc *d, const CapStack *st, int i) {
    return st->n_layers ? st->layers[i] : out_layer(d, i);
}

/* JSON: one object (no trailing newline); arrays are streamed, never built as a tree. */
int json_write_doc(FILE *f, const OutDoc *d, AvErr *e);
/* The members the JSON and the page's metadata share (model, config, input,
 * tokens, selection), without braces; page: 1 leaves out what belongs to this
 * machine only (model_dir). */
int json_write_common(FILE *f, const OutDoc *d, int page, AvErr *e);
/* {"tokens","input_ids","token_type_ids"} for --tokens-only. */
int json_write_tokens(FILE *f, const OutDoc *d, AvErr *e);
/* Writes a JSON string literal (escaped; '<' '>' '&' as \u escapes so it is safe inside <script>). */
void json_write_string(FILE *f, const char *s);
/* Formats v with sig significant digits into buf (>= 32 bytes); returns length. */
int json_format_float(char *buf, float v, int sig);

/* HTML page: a self-contained file with the templates compiled into the binary
 * (or read from templates_dir when non-NULL). */
int html_write_doc(FILE *f, const OutDoc *d, const char *templates_dir, AvErr *e);
/* Whether NAME is a view the page opens on (--view): one the built-in
 * templates register (templates/view_*.js; diff: a page of attnviz diff, which
 * has the diff-only views too). names (cap bytes) gets the valid ones in tab
 * order for a message: "head, model, neuron or matrix", plus " (or diff)". */
int html_view_known(const char *name, int diff, char *names, size_t cap);
/* attnviz serve's pieces of the same page: the page with no data, whose meta
 * is {"live": live_json} (the page then fetches what it shows); the meta
 * object an offline page of d carries, without q/k ("qk": null); and
 * attention blocks (each rows x cols) encoded as one payload chunk is before
 * base 85 (codes, byte planes, zlib), into a new buffer *z; get gives
 * block b (valid until the next call). */
int html_write_live(FILE *f, const char *live_json, const char *templates_dir, AvErr *e);
int html_write_meta(FILE *f, const OutDoc *d, AvErr *e);
typedef const float *(*HtmlBlockFn)(void *ctx, int block, AvErr *e); /* block b's rows x cols; NULL: failed */
int html_encode_attention(HtmlBlockFn get, void *ctx, int n_blocks, size_t rows, size_t cols, unsigned char **z,
                          size_t *zlen, AvErr *e);
/* The same encoding for codes given as they are (u16), e.g. key indices. */
int html_encode_codes(const uint16_t *codes, size_t count, unsigned char **z, size_t *zlen, AvErr *e);
/* An offline page from pieces made elsewhere (a long input's tiles page,
 * attnviz serve): its title text, its meta object (JSON) and its payload
 * chunks, each already encoded (above) and written base 85 under its id. */
typedef struct {
    char id[48];
    unsigned char *z;
    size_t len;
} HtmlChunk;
int html_write_pieces(FILE *f, const char *title, const char *meta_json, const HtmlChunk *chunks, int n_chunks,
                      const char *templates_dir, AvErr *e);

/* What the model said, for a person (say.c): --generate's text and why it
 * stopped, or --predict's top K after the last position (a masked model's at
 * each mask); control characters escaped. */
int say_write(FILE *f, const OutDoc *d, AvErr *e);

/* The page bound: a page file past this many bytes is one a browser
 * struggles with (docs/long-inputs.md has the measurements: past it the
 * decoding, the memory and the model view's drawing grow beyond what a
 * reader waits for), so a run whose page would pass it writes the long
 * input's page instead, and that page keeps itself within it. */
#define HTML_PAGE_BOUND ((size_t)50000000)
/* What the page of the whole matrices will take, in bytes, before anything
 * is run: blocks heads' rows x cols attention (causal: the triangle a head
 * sees) and qk_values floats of queries and keys. An upper envelope of the
 * pages measured (docs/long-inputs.md): per attention cell the encoded bytes
 * shrink as rows grow (more weights round to 0), per q/k value at most 2. */
double html_page_estimate(int rows, int cols, size_t blocks, int causal, size_t qk_values);

/* A long input's offline page (long_html.c; attnviz serve's /api/page and the
 * command line's --html past --long-from): no n x n matrix, but per head the
 * first `levels` zoom levels (tiles.h) as whole grids and each query's
 * `top_k` heaviest keys from the pass's telemetry (capture.h: tel, tel_top,
 * tel_top_w, every layer and head), with the head statistics. Its size is
 * bounded by what it keeps: L * H * (sum of G_e^2 + 2 * n * top_k) 16-bit
 * codes before compression, which its meta.tiles states. */
#define HTML_LONG_CODES ((size_t)64 << 20) /* what html_long_plan keeps the page within where it can */
#define HTML_LONG_MAX_TOKENS 65534         /* key indices are 16-bit codes, 65535 meaning none */
#define HTML_LONG_TOP_K 8                  /* heaviest keys per query a long input's pass keeps (serve, the CLI) */
/* Head (l, h)'s G-cell grid (G x G floats, row-major): model_head_grid, for
 * the writer, which reads no model. 0, or -1 with e set. */
typedef int (*HtmlGridFn)(void *ctx, int layer, int head, int G, float *grid, AvErr *e);
typedef struct {
    const Capture *cap;  /* the pass's telemetry (every layer and head) */
    int side;            /* the tiles' side (tiles.h) */
    int levels, top_k;   /* what the page keeps (html_long_plan) */
    HtmlGridFn grid;
    void *grid_ctx;
    size_t max_bytes;    /* the page's bound (0: none): past it each query keeps fewer keys, down to one
                            (top_k is then set to what the page kept) */
    /* told after each head's grids are made (NULL: nobody), done of total heads */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} HtmlLong;
/* What the page keeps: levels 0-1 (asked > 0: that many) and every key the
 * pass kept per query within HTML_LONG_CODES, else level 0 alone, then fewer
 * keys, down to one. */
void html_long_plan(const Capture *cap, int side, int asked, int *levels, int *keys);
/* The same for a pass not yet run: n tokens, heads (layers x heads) kept, Kc keys per query. */
void html_long_plan_n(int n, size_t heads, int Kc, int side, int asked, int *levels, int *keys);
/* The page, titled by title: meta_json is the document's meta object
 * (html_write_meta) to which the page adds its "tiles" member (geometry, what
 * it keeps, its size, the head statistics). */
int html_write_long(FILE *f, const char *title, const char *meta_json, HtmlLong *lp, const char *templates_dir,
                    AvErr *e);
/* Each head's row statistics (capture.h's telemetry) averaged over the
 * query rows: {"fields":[...],"layers","heads","n","mean":[layer][head][field]}. */
int json_write_headstats(FILE *f, const Capture *cap, AvErr *e);

#endif
