/* pipeline.h — the run's API for the commands, the server and the library.
 * A Session (session.h) is a model found and loaded, read only once open; a
 * Run (run_internal.h) is one RunSpec's inputs through a session's model:
 * text -> tokens -> forward pass -> transforms -> writers, for each input
 * (one, or a batch). Settings go in per run, never stored in the session. */
#ifndef ATTNVIZ_PIPELINE_H
#define ATTNVIZ_PIPELINE_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "err.h"
#include "explain.h"
#include "flags.h"
#include "flow.h"
#include "lens.h"
#include "mixing.h"
#include "model.h"
#include "settings.h"
#include "output.h"
#include "tokenizer.h"

typedef struct Session Session;
typedef struct Run Run;

/* What one input's pass leaves, as the writers read it: the capture, what the
 * model predicted or generated (spelled for the writers: they never see the
 * tokenizer) and the residual-stream analyses. The run's current input, each
 * library result and each server run hold one; parts not asked for stay empty. */
typedef struct {
    Capture cap;            /* the pass's capture */
    CapPredictions pred;    /* --predict K: the top-K (every position, or the masks) */
    OutSpelling pred_words; /* pred's ids spelled */
    CapGeneration gen;      /* --generate N: the steps */
    OutSpelling gen_words;  /* their top-K spelled */
    char *gen_text;         /* the generated continuation, decoded */
    LensResult lens;        /* --logit-lens, --attribution, --ablate */
    OutSpelling lens_words; /* run_lens.c's ids spelled */
    FlowResult flow;        /* --flow */
    MixResult mix[2];       /* --measure alti ([0]) and rollout ([1]) */
    FlagsResult flags;      /* sinks and massive activations (a document's JSON and page) */
    ExplainResult explain;  /* --explain */
    const OutImage *image;  /* --image: the picture and its tokens' places (run_image.c, run_vlm.c), not owned */
} InputResult;

void input_result_free(InputResult *in);
/* The document the writers read for one input of s's model (valid while its
 * parts live): the session's description (session_doc), enc and cap (the
 * input's, or a view derived from them), the texts, and of in what o asks
 * for (its predictions, generation, lens and flow) and its image. */
void input_doc(const Session *s, const RunSpec *o, const InputResult *in, OutDoc *d, const TokEncoding *enc,
               const Capture *cap, const char *a, const char *b);

/* ---- the commands */

/* The command line's run and heads: opens the model (session_open_for; a note
 * says which and why), run_check_model, creates --out-dir, runs every input (an
 * image's, an encoder-decoder's or run_inputs), closes. 0 or -1. */
int pipeline_main(const ModelSpec *m, const RunSpec *o, AvErr *e);
/* What a run's settings ask, checked against its open model (run_checks.c):
 * the selection in range, and no option the model's kind cannot honour
 * (--generate on a masked model, --decoder-text on one that is not an
 * encoder-decoder, a missing language-model head, the residual-stream options
 * on a masked model, ...). 0, or -1 with a usage error naming the option and
 * the model. */
int run_check_model(const Run *r, AvErr *e);
/* attnviz render: attention computed elsewhere (render.h) through the same
 * writers; 0 or -1 (a usage error for a selection out of range). */
int pipeline_render(const RenderSpec *rs, const RunSpec *o, AvErr *e);
/* attnviz diff: two texts on one model (m) or one text on two (m and ds->model_b), run
 * through the same loading and tokenizing, compared (diff.h) and written: the
 * table on stdout, --json, the page. 0 or -1 (a usage error for a selection
 * out of range). */
int pipeline_diff(const ModelSpec *m, const DiffSpec *ds, const RunSpec *o, AvErr *e);

/* ---- runs over a session (session.h opens and closes sessions) */

/* A run of o (copied: its lists and texts must outlive the run) over s, with
 * the accumulators o asks for (--stats, heads); nothing allocated for passes
 * yet. *out is set even on failure (close it). */
int run_open(Run **out, const Session *s, const RunSpec *o, AvErr *e);
void run_close(Run *r);
/* Runs every input: 0, or -1 with e set (empty when the failed batch lines were reported one by one). */
int run_inputs(Run *r, AvErr *e);
/* --profile's note (AV_NOTE_PROFILE): s's load time and r's per-phase times (r NULL: none yet). */
void run_profile(const Session *s, const Run *r);
/* A run in place (on the caller's stack) for one input at a time: no --stats
 * or heads accumulators; run_free frees what its calls allocated. */
void run_init(Run *r, const Session *s, const RunSpec *o);
void run_free(Run *r);

/* ---- one input at a time, for a server or library that keeps the model
 * loaded: a run is used by one caller at a time */

/* Tokens of a (and b), truncated to the model's positions or --max-tokens
 * (enc->n_truncated, warned as the command line words it). */
int run_tokens(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e);
/* A rendered chat's tokens: none added around them, none cut (over the limit: -1). */
int run_tokens_chat(Run *r, const char *text, TokEncoding *enc, AvErr *e);
/* Runs enc into cap (the caller's, for enc->n tokens: model_capture_*); with
 * k > 0 also the top-k predictions (every position, or the masks) into pred
 * (warning when a masked model's input has no mask). */
int run_forward(Run *r, const TokEncoding *enc, Capture *cap, int k, CapPredictions *pred, AvErr *e);
/* The run's flags step (flags.h: sinks and massive activations), one for the
 * command line (run_capture_make, run_finish_input), the server's page and the
 * library's documents, so their pages are equal. Its two halves go around the
 * pass: run_flags_prepare asks cap (model_capture_select's) to keep the
 * residual stream's largest entries; run_flags_compute, after the pass, fills f
 * (freed first) from cap for the layers and heads listed (NULL: all). */
int run_flags_prepare(Capture *cap, const ModelConfig *c, AvErr *e);
int run_flags_compute(const Capture *cap, const int *layers, int nl, const int *heads, int nh, FlagsResult *f, AvErr *e);
/* Several inputs in one pass (at most PACK_MAX_INPUTS; model_forward_packed):
 * input g's attention into caps[g] exactly as run_forward leaves it alone. */
int run_forward_packed(Run *r, const TokEncoding *encs, int n, Capture *const *caps, AvErr *e);
/* One picture on a vision encoder, for a server (attnviz serve's uploads) and
 * the command line: decoded from len bytes (name: what messages call it;
 * max_pixels: img_decode_limit's bound, 0 the decoder's own), preprocessed,
 * its tokens named; a whole CLIP/SigLIP model's text tokenized (text NULL:
 * none). 0; IMG_TOO_LARGE for a picture above max_pixels; -1 (a usage error
 * for a model that reads no image, or no text). Reads the run only. */
typedef struct PipeImage PipeImage;
int run_image_open(const Run *r, const unsigned char *bytes, size_t len, const char *name, uint64_t max_pixels,
                   const char *text, PipeImage **out, AvErr *e);
const TokEncoding *run_image_tokens(const PipeImage *im);
/* The preprocessed picture as PNG bytes (what the pass reads, exactly). */
const unsigned char *run_image_picture(const PipeImage *im, size_t *len);
/* Its pass into cap (the caller's, for its tokens) on r's run state; the first
 * also computes what follows the last layer (pooling, the text tower, the
 * similarity) for the document. One caller at a time per run. */
int run_image_forward(Run *r, PipeImage *im, Capture *cap, AvErr *e);
/* Drops the pixel values (a later pass makes them again from the kept picture). */
void run_image_shrink(PipeImage *im);
/* What the writers read of it (an InputResult's image: input_doc opens its page on
 * the picture), NULL before its first pass. */
const OutImage *run_image_out(const PipeImage *im);
void run_image_free(PipeImage *im);
/* A vision-language model's placeholder for the picture in its text, as its tokenizer spells it (LLaVA's
 * <image>, Gemma 3's <start_of_image>); NULL for other models. */
const char *run_image_placeholder(const Session *s);
/* A text that places the picture as the model's prompts do ("USER: <image>\nWhat is in the picture?
 * ASSISTANT:", Gemma 3's turns around <start_of_image>). */
const char *run_image_example(const Session *s);
/* attnviz serve, an encoder-decoder model (cfg.enc_dec): the source's tokens
 * and the decoder's (decoder_start_token_id, then target's tokens, as
 * --decoder-text makes them; warnings as the command line words them); the
 * teacher-forced pass into cap (allocated here: s2s_capture_bytes, which the
 * caller checks first; s2s_capture_free); and the document the CLI writes for
 * that input, its three stacks in stacks (arrays: the stacks' data when not
 * cap's own, e.g. a --layers copy; the caller sets d->layers then). */
struct S2sCapture;
int run_seq2seq_tokens(Run *r, const char *source, const char *target, TokEncoding *src, TokEncoding *dec, AvErr *e);
int run_seq2seq_forward(Run *r, const TokEncoding *src, const TokEncoding *dec, struct S2sCapture *cap, AvErr *e);
/* Or the decoder's tokens from decoding up to n_new tokens from the start
 * token (greedy, or as the RunSpec's --temperature/--top-p/--seed/--stop say:
 * the CLI's --generate): the steps into g (gen_free), their top-K spelled into
 * words (session_spelling_free), the generated text into *text (free). */
int run_seq2seq_generate(Run *r, const char *source, int n_new, TokEncoding *src, TokEncoding *dec, CapGeneration *g,
                         OutSpelling *words, char **text, AvErr *e);
void run_seq2seq_doc(const Run *r, OutDoc *d, CapStack stacks[3], const TokEncoding *src, const TokEncoding *dec,
                     const struct S2sCapture *cap, const float *const arrays[3], const char *source, const char *target);
/* An encoder and decoder of different depths: each side's layers (the RunSpec's
 * --layers those sides have, else all), kept for run_seq2seq_doc, which then
 * gives the stacks their own (arrays given: they hold those layers, or the caller
 * sets the stacks' layers); equal depths: nothing. A usage error when a side has
 * none of --layers. */
int run_seq2seq_layers(Run *r, AvErr *e);

/* ---- generation for a server or the library (run_generate.c, run_chat.c; the
 * CLI's --generate is run.c's):
 * one prompt continued token by token, each token handed over as it comes
 * with its text, log-probabilities and, when asked, its attention. */

/* The prompt's ids for text as the model's tokenizer encodes it (its template's
 * specials included), not truncated: the caller checks the length. chat: the
 * text is a rendered chat template, tokenized with nothing added (as
 * apply_chat_template(tokenize=True) does). Reads only: any thread. */
int session_prompt_ids(const Session *s, const char *text, int chat, int **ids, int *n, AvErr *e);

/* The model's display name; id's spelling in the vocabulary, and as a person
 * reads it (NULL when id is not in it); id's bytes as the text holds them (*b
 * to free). Read only: any thread. */
const char *session_name(const Session *s);
const char *session_token(const Session *s, int id);
const char *session_token_text(const Session *s, int id);
int session_token_bytes(const Session *s, int id, char **b, size_t *n, AvErr *e);

/* A chat's messages, rendered by the model's chat template with the
 * assistant's turn opened (add_generation_prompt; chat.h's chat_render, as
 * transformers' apply_chat_template renders it; openai: chat_render_openai,
 * as /v1/chat/completions means OpenAI's messages): *text to free. Reads only. */
typedef struct {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* the text; NULL with parts NULL: no content (OpenAI's null) */
    const char *const *parts; /* non-NULL: the content is these text parts (n_parts) */
    int n_parts;
    const char *name;    /* NULL: none */
} PipeChatMsg;
int session_chat_prompt(const Session *s, const PipeChatMsg *m, int n, int openai, char **text, AvErr *e);
/* Whether the model has a chat template (NULL), else why not: a model that is no decoder,
 * ships none, or whose template could not be read or parsed (that message). */
const char *session_chat_missing(const Session *s);

/* What a generation is asked for. */
#define PIPE_GEN_MAX_STOP 4
typedef struct PipeGenSpec {
    int max_new;                  /* tokens at most (>= 1); the model's positions may leave fewer */
    double temperature, top_p;    /* 0: greedy; 1: no nucleus */
    unsigned long long seed;
    const char *stop[PIPE_GEN_MAX_STOP]; /* stop strings (n_stop, none empty): the text ends before the first */
    int n_stop;
    int logprobs, top_logprobs;   /* generate.h's GenOptions */
    /* attention (attn 0: nothing is captured, the plain generation's cost) */
    int attn;
    const int *layers;            /* NULL: every layer */
    int n_layers;
    const int *heads;             /* NULL: every head */
    int n_heads;
    int top_k;                    /* heaviest keys of each row (0..CAP_TEL_MAX_TOP) */
    int stats;                    /* each row's entropy, sink share (key 0's weight) and mean distance */
    int rows;                     /* whole rows */
    int prompt;                   /* the prompt's rows too, once */
} PipeGenSpec;

/* Attention of the kept heads at positions [pos0, pos0 + n_pos): blocks are
 * the kept layers x the kept heads, in the order asked (repeats dropped). */
typedef struct {
    int pos0, n_pos;
    int n_layers, n_heads;
    const int *layers, *heads;    /* (n_layers), (n_heads) */
    int top_k;
    const int *keys;              /* (n_pos, blocks, top_k) heaviest first (ties: the earlier key); -1 past the row */
    const float *weights;         /* (n_pos, blocks, top_k) their weights; 0 past the row */
    const float *entropy, *sink, *distance; /* (n_pos, blocks) with stats, else NULL: nats, key 0's weight, sum p_j |i - j| */
    int n_keys;                   /* pos0 + n_pos */
    const float *rows;            /* (n_pos, blocks, n_keys) with rows (0 past a row's keys), else NULL */
} PipeGenAttn;

typedef struct {
    int index, position, id;      /* the index-th generated token, at that position */
    const char *token;            /* the vocabulary's spelling */
    const char *bytes;            /* the token's own bytes (n_bytes; may end inside a character) */
    size_t n_bytes;
    const char *text;             /* the text it made final: UTF-8, NUL-terminated, maybe "" (a character not
                                     yet complete, or what may be a stop string's start, waits) */
    size_t text_len;
    float prob;                   /* generate.h's GenToken */
    double logprob;
    int n_top;
    const int *top_ids;
    const double *top_logprobs;
    const PipeGenAttn *attn;      /* NULL without attention */
} PipeGenToken;

typedef enum { PIPE_FINISH_LENGTH = 0, PIPE_FINISH_EOS, PIPE_FINISH_STOP, PIPE_FINISH_CANCELLED } PipeFinish;

/* Where the tokens go; a nonzero return ends the generation (PIPE_FINISH_CANCELLED). */
typedef struct PipeGenSink {
    /* once the prompt has run: its ids; attn its rows (spec's prompt) or NULL */
    int (*on_prompt)(void *ctx, const int *ids, int n, const PipeGenAttn *attn);
    int (*on_token)(void *ctx, const PipeGenToken *t);
    void *ctx;
} PipeGenSink;

typedef struct PipeGenResult {
    int n_prompt, n_generated;
    PipeFinish finish;
    char *text;                   /* every token's text joined (to free) */
    size_t text_len;
} PipeGenResult;

/* Bytes a generation of n_prompt + max_new tokens keeps beyond the model's own
 * buffers (the attention it captures; 0 without), to refuse before starting. */
double session_generate_bytes(const Session *s, const PipeGenSpec *gs, int n_prompt);
/* Generates after ids (n_prompt >= 1; the model must be causal with a head),
 * calling sink as it goes, on r's run state and KV cache (they only grow: a
 * server's requests reuse them). A usage error for a spec out of range. One
 * caller at a time per run. */
int run_generate(Run *r, const int *ids, int n_prompt, const PipeGenSpec *gs, const PipeGenSink *sink, PipeGenResult *res,
                 AvErr *e);
void pipeline_gen_result_free(PipeGenResult *res);

#endif
