/* live.h — what attnviz serve keeps between requests: the loaded models, the
 * inputs asked for ("runs"), and their captures within a memory budget. A
 * run's capture is lean (queries, keys and pooled thumbnails; a head's
 * attention is recomputed from its q/k on demand), so long inputs fit; an
 * evicted capture is recomputed when next asked for. Forward passes go
 * through a bounded queue, one at a time per model; reads of a cached
 * capture never wait behind them. Knows nothing of HTTP (serve.c). */
#ifndef ATTNVIZ_LIVE_H
#define ATTNVIZ_LIVE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "settings.h"

/* What a failed call means for the caller (serve.c maps it to a status). */
typedef enum { LIVE_OK = 0, LIVE_BAD_INPUT, LIVE_NOT_FOUND, LIVE_TOO_BIG, LIVE_BUSY, LIVE_TIMEOUT, LIVE_FAILED } LiveStatus;

typedef struct {
    size_t cache_bytes;   /* captures kept at most (--cache-mb) */
    int max_queue;        /* forward passes waiting or running, all models (then LIVE_BUSY) */
    double timeout_ms;    /* longest wait for a model's turn (then LIVE_TIMEOUT) */
    int max_runs;         /* runs remembered; the least recently used beyond are forgotten */
    int thumb_size;       /* thumbnails' side (tokens beyond are pooled) */
    int tile_side;        /* cells a side of a tile (tiles.h; 0: TILE_SIDE); level 0 is kept from the pass */
    int long_from;        /* inputs of more tokens than this are browsed by tiles and rows (0: 4096) */
    int top_k;            /* telemetry's heaviest keys kept per query row (0..CAP_TEL_MAX_TOP) */
    int qk_prec;          /* how runs keep q/k (capture.h's CapQkPrecision; --qk-precision): 16 bits halve them */
} LiveLimits;

typedef struct Live Live;
typedef struct LiveRun LiveRun;

/* Loads each of the models, for pages as page says (copied: its texts and
 * profile are not used). A run's warnings travel in its response: each worker
 * collects them for its own thread (av_set_thread_reporter), in the words the
 * command line prints; none reach the process's reporter. */
int live_open(Live **out, const ModelSpec *models, int n_models, const RunSpec *page, const LiveLimits *lim, AvErr *e);
void live_close(Live *lv);

/* {"models":[...]}: each model's id, name, family, shape and whether it predicts. */
char *live_models_json(const Live *lv);
int live_n_models(const Live *lv);
/* "f32", "f16" or "bf16": a CapQkPrecision's name, as --qk-precision spells it. */
const char *live_qk_precision_name(int prec);

/* Runs text a (and b; an encoder-decoder model: source a, decoder text b) on model m, with the top-k predictions when k > 0 (or
 * finds the same input run before). On success *id is the run's id and *json
 * (malloc'd) the response body: {"run","n","meta","warnings","ms","kept"}, kept
 * being {"bytes": what its capture counts against --cache-mb, "qk": "f32",
 * "f16" or "bf16"}. */
LiveStatus live_run(Live *lv, int m, const char *a, const char *b, int k, unsigned *id, char **json, AvErr *e);
/* The same for text as one user message in model m's chat template, with the generation prompt
 * (the CLI's --chat: the rendered chat is the run's text, tokenized with nothing added);
 * LIVE_BAD_INPUT for a model that is no decoder or ships no template. */
LiveStatus live_run_chat(Live *lv, int m, const char *text, int k, unsigned *id, char **json, AvErr *e);

/* An encoder-decoder model m on a source whose decoder tokens are decoded
 * from the start token, up to n_new (1..LIVE_MAX_GENERATE; the CLI's
 * --generate, greedy unless the server's RunSpec says otherwise); the same
 * response, its meta with the generation. */
#define LIVE_MAX_GENERATE 512
LiveStatus live_run_generate(Live *lv, int m, const char *source, int n_new, unsigned *id, char **json, AvErr *e);

/* A picture (len bytes of PNG or JPEG, decoded within LIVE_MAX_IMAGE_PIXELS;
 * name: what messages and the page call it) on vision model m, and a whole CLIP/SigLIP model's text (NULL: none), or
 * the run of the same model, text and preprocessed picture before: the same
 * response, its meta with the "image" member the Image view reads.
 * LIVE_TOO_BIG for a picture above the bound, LIVE_BAD_INPUT for one that
 * does not decode or a model that reads no image (or no text). */
#define LIVE_MAX_IMAGE_PIXELS ((uint64_t)16 << 20)
LiveStatus live_run_image(Live *lv, int m, const unsigned char *bytes, size_t len, const char *name, const char *text,
                          unsigned *id, char **json, AvErr *e);

/* ---- generation (the OpenAI-compatible routes, serve/openai.c) ----------
 * A request takes a place in the forward queue before its answer starts
 * (LIVE_BUSY past --queue), so a stream that has begun has its place; the
 * generation then waits for the model's turn within --timeout, and
 * cancelled(ctx) (the client went away: asked every 50 ms while it waits) ends
 * the wait; the sink's return ends the generation at the next token. */
struct Session;
struct PipeGenSpec;
LiveStatus live_queue_enter(Live *lv, AvErr *e);
void live_queue_leave(Live *lv);
/* Model m's session, for what only reads it (tokenizing, a chat's prompt, spellings): any thread. */
const struct Session *live_session(const Live *lv, int m);
/* Whether model m generates (a decoder with a language-model head): NULL, else why not. */
const char *live_cannot_generate(const Live *lv, int m);
/* run_generate on model m's run in its turn (pipeline.h's spec, sink and
 * result; its warnings are not kept): LIVE_BAD_INPUT for what the spec asks
 * that cannot be, LIVE_TIMEOUT, LIVE_FAILED; LIVE_OK when cancelled too (the
 * result's finish says so). */
struct PipeGenSink;
struct PipeGenResult;
LiveStatus live_generate(Live *lv, int m, const int *ids, int n, const struct PipeGenSpec *spec,
                         const struct PipeGenSink *sink, int (*cancelled)(void *ctx), void *ctx,
                         struct PipeGenResult *result, AvErr *e);

/* A run's capture, held until live_release (recomputed first if evicted). */
LiveStatus live_acquire(Live *lv, unsigned id, LiveRun **run, AvErr *e);
void live_release(Live *lv, LiveRun *run);

/* Reads of an acquired run: its tokens and model shape; one layer's heads'
 * attention as a payload chunk; every thumbnail as one chunk (side *s); one
 * head's q then k as float32 (n x head_dim each; kept in 16 bits: widened,
 * exactly). Buffers are malloc'd.
 * norm: value-weighted attention's row shares instead (normattn.h; a server
 * started with --measure norm; else -1 saying so). */
int live_run_tokens(const LiveRun *r);
int live_has_norms(const LiveRun *r); /* its capture has value norms (serve --measure norm) */
int live_has_stats(const LiveRun *r); /* its capture has telemetry (a long input) */
/* An encoder-decoder run (its model's cfg.enc_dec): its three stacks are kept
 * whole; live_stack names one ("encoder", "decoder", "cross": 0, 1, 2, or -1
 * for another name or a run that has none) with its rows and columns, and
 * live_stack_attention answers a layer's heads of it in live_attention's
 * encoding (rows x cols blocks). live_model_seq2seq: model m takes a source
 * and a decoder text (b) rather than one or two texts, and does not predict. */
int live_model_seq2seq(const Live *lv, int m);
int live_is_seq2seq(const LiveRun *r);
int live_stack(const LiveRun *r, const char *name, int *rows, int *cols);
/* The layers of stack k (0 encoder, 1 decoder, 2 cross) of an encoder-decoder run: the encoder's
 * or the decoder's depth, which may differ (distilbart-12-6). */
int live_stack_layers(const LiveRun *r, int k);
int live_stack_attention(Live *lv, LiveRun *r, int stack, int layer, const int *heads, int n_heads, unsigned char **z,
                         size_t *len, AvErr *e);
int live_run_shape(const Live *lv, const LiveRun *r, int *layers, int *heads, int *head_dim);
int live_attention(Live *lv, LiveRun *r, int layer, const int *heads, int n_heads, int norm, unsigned char **z,
                   size_t *len, AvErr *e);
int live_thumbs(Live *lv, LiveRun *r, int norm, int *s, unsigned char **z, size_t *len, AvErr *e);
int live_qk(Live *lv, LiveRun *r, int layer, int head, float **qk, size_t *len, AvErr *e);

/* A long input, browsed without n x n matrices (tiles.h): the tile geometry
 * (cells a side, levels); tile (tr, tc) of a level of head (layer, head) as
 * one payload chunk of rows x cols max-pooled weights; query i's exact row
 * (n float32); every head's telemetry means as JSON {"fields", "layers",
 * "heads", "mean": [layer][head][field]} (the head ranking of a run whose
 * matrices are not kept). The caller checks the ranges (live_tile_geom). */
void live_tile_geom(const Live *lv, const LiveRun *r, int *side, int *levels);
int live_tile(Live *lv, LiveRun *r, int layer, int head, int level, int tr, int tc, unsigned char **z, size_t *len,
              int *rows, int *cols, AvErr *e);
int live_row(Live *lv, LiveRun *r, int layer, int head, int query, float **row, AvErr *e);
char *live_headstats(const LiveRun *r);

/* The offline page the CLI would write for run id (layers: NULL = all), into
 * a malloc'd buffer; LIVE_TOO_BIG when its capture passes the budget. A long
 * input's page instead holds its first `levels` zoom levels (0: levels 0-1
 * while the page stays within 64 M codes before compression, else level 0)
 * and each query's heaviest keys, every layer: bounded by those, not by n^2. */
LiveStatus live_page(Live *lv, unsigned id, const int *layers, int n_layers, int levels, char **html, size_t *len, AvErr *e);

#endif
