/* run_internal.h — what the pieces of one run share (session.c, run.c,
 * batch.c, route.c and the render/diff commands): the run's state and the
 * steps they call on it. Not a public contract: pipeline.h is. */
#ifndef ATTNVIZ_RUN_INTERNAL_H
#define ATTNVIZ_RUN_INTERNAL_H

#include <stdio.h>

#include "chat.h"
#include "config.h"
#include "err.h"
#include "generate.h"
#include "heads.h"
#include "seq2seq.h"
#include "flow.h"
#include "lens.h"
#include "explain.h"
#include "flags.h"
#include "mixing.h"
#include "model.h"
#include "output.h"
#include "pipeline.h"
#include "session.h"
#include "predict.h"
#include "settings.h"
#include "stats.h"
#include "tokenizer.h"

/* A run: one RunSpec's inputs through a Session's model. It holds its own copy
 * of the settings (never swapped: another run is another Run), the scratch its
 * inputs reuse (run state, capture, the current input's predictions,
 * generation, lens and flow), and what accumulates over its inputs
 * (statistics, head scores, times). One thread at a time. */
struct Run {
    const Session *s;    /* the model, tokenizer and labels: shared, read only */
    RunSpec spec;        /* this run's settings */
    ChatMessage *chat_msgs; /* --chat-file: its messages */
    int n_chat_msgs;
    RunState rs;
    InputResult in;      /* the current input's (its capture reused from input to input) */
    int cap_n;           /* tokens the capture and run state hold */
    float *nattn;        /* --measure norm: value-weighted attention, reused input after input */
    size_t nattn_len;    /* its floats */
    KvCache kv;          /* with --generate, cap_n tokens */
    HeadStats stats;     /* with --stats (an encoder-decoder's: the encoder's) */
    HeadStats s2s_stats[2]; /* an encoder-decoder's --stats: its decoder and cross attention */
    HeadScores heads;    /* attnviz heads */
    HeadScores s2s_heads[2]; /* an encoder-decoder's heads: its decoder and cross attention (heads: the encoder's) */
    StatsCover cover;    /* what --batch covered (run_batch), for the --stats / heads file */
    int have_cover;      /* 0: not a batch (one input: its text is what is covered) */
    int *s2s_layers[2], s2s_n_layers[2]; /* unequal depths: the encoder's and the decoder's (and cross) kept layers */
    double t_tok, t_fwd, t_write;
};

/* Short batch inputs wait to share one forward pass (model_forward_packed), at
 * most this many: the weights are read once for all of them. */
#define PACK_MAX_INPUTS 64

/* run.c: the steps of one input */
/* The input's tokens for the model: none is an error (an empty text, or every character dropped). */
int run_tokenize(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e);
/* --chat / --chat-file: the run's input as the model's chat template renders it (*out, free):
 * --chat-file's messages, or a as one user message; *out NULL when the run is no chat. */
int run_chat_prompt(Run *r, const char *a, const char *b, char **out, AvErr *e);
/* Whether the RunSpec asks for a chat. */
int run_is_chat(const RunSpec *o);
/* The same, none allowed (an encoder-decoder's target: the decoder's start token comes first anyway). */
int run_tokenize_any(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e);
/* GenOptions' stop for --stop (ctx: the Run): the text generated so far holds the string. */
int run_stop_at_string(void *ctx, const int *ids, int n_prompt, int n);
/* Whether a capture of n tokens of what the run selects stays within its --max-capture (else the error). */
int run_capture_fits(const Run *r, int n, AvErr *e);
/* Records in s what this run covered (r->cover, or the one input's text) and its setup digest. */
int run_record_cover(const Run *r, HeadStats *s, AvErr *e);

/* fit.c: what a run of n tokens will hold, in bytes, before anything is allocated: the weights (their
 * files' bytes: mapped, so the page cache must keep them; or a resident copy, already held), the pass's
 * buffers (model_runstate_bytes), --generate's key/value cache, the capture; against the memory
 * available (util.h's av_memory_available; $ATTNVIZ_MEMORY sets it). */
typedef struct {
    double weights_file, weights_anon; /* mapped (counted in need), resident (held already) */
    double runstate, kv, capture;
    double held;                       /* buffers the run holds already, freed before new ones are made */
    double need;                       /* weights_file + runstate + kv + capture */
    double avail;                      /* 0: unknown */
    const char *source;                /* where avail came from ("MemAvailable", "ATTNVIZ_MEMORY", ...) */
} RunMemory;
int run_memory(const Run *r, int n, RunMemory *m, AvErr *e);
/* 0 when a run of n tokens fits the memory available; else -1 and one line: what it needs and what
 * would fit (a shorter input, fewer heads, --telemetry), ATTNVIZ_MEMORY to override. */
int run_memory_fits(const Run *r, int n, AvErr *e);
/* A session's weights (and the least a pass takes beside them) against the memory available, at the
 * load: larger ones are refused in one line naming a smaller quantization and the override. */
int session_weights_fit(const Session *s, AvErr *e);
/* The same for a pass of its own (generation, a long input's page): n tokens, a key/value cache of them
 * (kv 1) and capture bytes; fewer ("" or "..., ") names what would fit first. */
int run_buffers_fit(const Run *r, int n, int kv, double capture, const char *fewer, AvErr *e);
/* Grows the run state and capture to hold n tokens (refused past --max-capture). */
int run_ensure_buffers(Run *r, int n, AvErr *e);
/* The document the writers read for the run's current input (input_doc of its settings). */
void run_fill_doc(const Run *r, OutDoc *d, const TokEncoding *enc, const Capture *cap, const char *a, const char *b);
/* The truncation warning (lineno > 0: a batch line). */
void run_warn_truncated(const Run *r, const TokEncoding *enc, long lineno);
/* A capture for n tokens as the run's spec asks: the selected matrices, or telemetry. */
int run_capture_make(const Run *r, Capture *cap, int n, AvErr *e);
/* Whether --stats and heads score sums the engine takes as it makes the rows
 * (model_capture_scores) rather than kept matrices. */
int run_scores_streamed(const RunSpec *o);
/* Before a pass: the input's ids and token roles into its capture. */
void run_score_input(Capture *cap, const TokEncoding *enc);
/* Derives the view of a filled capture and writes it (jsonl: the batch's stream, or NULL). */
int run_finish_input(Run *r, const char *a, const char *b, long lineno, const TokEncoding *enc, const Capture *cap,
                     FILE *jsonl, AvErr *e);
/* Every input of the run's settings (one, or --batch's lines), then --stats' and heads' results. */
int run_inputs(Run *r, AvErr *e);
/* Tokenize, run, derive, write: one input. */
int run_handle_input(Run *r, const char *a, const char *b, long lineno, FILE *jsonl, AvErr *e);
/* The same for a text already rendered (run_handle_input renders --chat's first). */
int run_handle_text(Run *r, const char *a, const char *b, long lineno, FILE *jsonl, AvErr *e);
/* --stats and heads once every input is in. */
int run_finish_stats(Run *r, AvErr *e);
int run_finish_heads(Run *r, AvErr *e);

/* run_lens.c: --logit-lens, --attribution, --ablate on the input just run (its capture has
 * model_capture_internals' buffers when run_lens_wanted). */
int run_lens_wanted(const RunSpec *o);
int run_lens(Run *r, const TokEncoding *enc, AvErr *e);

/* run_seq2seq.c: an encoder-decoder model on the run's source text, with
 * --decoder-text or --generate: the encoder, decoder and cross attention to
 * the writers. */
int run_seq2seq(Run *r, AvErr *e);
/* One source text and the decoder's (target; NULL: --generate makes them): the three stacks to the
 * writers, to --stats' accumulators, or as a line of jsonl (a batch's stream, or NULL). */
int run_seq2seq_input(Run *r, const char *source, const char *target, long lineno, FILE *jsonl, AvErr *e);
/* attnviz diff's side: source and target teacher-forced into cap (alloc'd here; s2s_capture_free), the
 * source's tokens into src, the decoder's ids (malloc'd, the start token first) into *dec and *nd. */
int run_seq2seq_capture(Run *r, const char *source, const char *target, TokEncoding *src, int **dec, int *nd,
                        S2sCapture *cap, AvErr *e);
/* An encoder-decoder whose decoder's depth differs from its encoder's: each side's
 * kept layers (--layers' that side has, else all) into layers[0] (encoder) and
 * layers[1] (decoder and cross), malloc'd; equal depths: none (NULL, 0). A usage
 * error when --layers leaves a side none. */
int run_s2s_stack_layers(Run *r, int *layers[2], int n_layers[2], AvErr *e);
/* The stack names, in the order of the documents' stacks and s2s_stats (after the encoder's stats). */
extern const char *const RUN_S2S_STACKS[3];

/* run_image.c: a vision encoder on --image (and a whole CLIP/SigLIP model's text tower on the text):
 * the picture decoded and preprocessed, its patches run, the outputs written. */
int run_image(Run *r, AvErr *e);
/* The document of an image run's other tower (a whole CLIP/SigLIP model's text tower, a vision-language
 * model's vision tower) for its own page: every layer and head of cap over enc; name (name_len bytes) is
 * filled with the model's name and what it is. */
void run_tower_doc(const Run *r, OutDoc *d, char *name, size_t name_len, const char *what, const Model *tower,
                   const TokEncoding *enc, const Capture *cap, const char *text);
/* run_vlm.c: a vision-language model on --image and its text (the <image> placeholder where the picture
 * goes): the vision tower, the projector, the image tokens in the decoder's sequence, the outputs written. */
int run_vlm(Run *r, AvErr *e);
/* One picture and text on a vision-language model, for a server (run_image.c's PipeImage holds it): the
 * picture decoded within max_pixels (IMG_TOO_LARGE above), prepared, the text's placeholder expanded and
 * tokenized with the tokenizer's special tokens (the text is required); reads the pipeline only. Its pass
 * into the caller's capture of vlm_tokens' n tokens (not the tower's attention: freed after the pass); its
 * OutImage after the first pass (NULL before). */
typedef struct VlmRun VlmRun;
int vlm_open(const Run *p, const unsigned char *bytes, size_t len, const char *name, uint64_t max_pixels,
             const char *text, VlmRun **out, AvErr *e);
const TokEncoding *vlm_tokens(const VlmRun *v);
const unsigned char *vlm_picture(const VlmRun *v, size_t *len);
int vlm_forward(Run *p, VlmRun *v, Capture *cap, AvErr *e);
const OutImage *vlm_image(const VlmRun *v);
const char *vlm_text(const VlmRun *v);
void vlm_free(VlmRun *v);

/* plan.c: what one input's run will hold, known before it starts (docs/long-inputs.md). */
typedef struct {
    int n;               /* tokens */
    double capture;      /* what the options keep (the whole matrices, or the sums, statistics, ... they ask for) */
    double runstate, kv; /* the pass's buffers; the key/value cache of --generate */
    double page;         /* the page of the whole matrices (output.h's html_page_estimate) */
    double long_capture; /* what the long input's page keeps instead */
    double budget;       /* --max-capture, or half the memory */
} RunCost;
void run_cost(const Run *r, const RunSpec *o, int n, RunCost *c);
/* --max-capture in bytes, or half of physical memory. */
double run_memory_budget(const RunSpec *o);
/* Bytes the capture of n tokens takes as o asks (what --max-capture bounds). */
double run_capture_need(const Run *r, const RunSpec *o, int n);
/* Bytes the long input's page of n tokens keeps; *levels (or NULL): the zoom levels it embeds. */
double run_long_need(const Run *r, int n, int *levels);
/* The refusal of n tokens whose capture passes the budget: one line naming
 * everything that would fit (the long page, serve, fewer heads, --telemetry,
 * --max-tokens M, a larger --max-capture). Always -1. */
int run_refuse(const Run *r, const RunSpec *o, int n, AvErr *e);
/* One input's page: RUN_PAGE_WHOLE (its matrices) or RUN_PAGE_LONG (past
 * --long-from, or, by default, where the whole matrices would pass the budget
 * or make a page past HTML_PAGE_BOUND: said in one line), or -1 refused. */
enum { RUN_PAGE_WHOLE, RUN_PAGE_LONG };
int run_plan_page(const Run *r, const TokEncoding *enc, AvErr *e);
/* A vision-language model's tower, planned before its pass: its capture of nv tokens (want_hidden: the
 * hidden states the projector reads) for the given last layers, and the page of them. */
double run_tower_need(const ModelConfig *vc, int nv, int want_hidden, int layers);
double run_tower_page(const ModelConfig *vc, int nv, int layers);
typedef struct {
    int layers; /* the tower's last layers kept (all: vc->num_layers; 0: none, nothing writes them) */
    int page;   /* FILE.vision.html is written (the kept layers fit a page a browser opens) */
} TowerPlan;
/* What fits the memory budget beside `beside` bytes (the decoder's capture and run state): every layer, or the
 * last ones, said in one line; a page past HTML_PAGE_BOUND keeps fewer layers, or none is written (said);
 * -1 naming every remedy when not one layer fits. */
int run_plan_tower(const Run *r, const ModelConfig *vc, int nv, int want_hidden, double beside, TowerPlan *p, AvErr *e);
const char *run_human_size(double bytes, char *buf, size_t len);

/* progress.c: a progress line for work that takes a while (only on a terminal, after a
 * couple of seconds, never with --quiet). */
typedef struct {
    int on, shown;
    ModelProgressUnit unit;
    const char *what, *unit_name;
    long done, total;
    double t0, last_ms, after_ms;
} RunProgress;
void run_progress_begin(RunProgress *p, const RunSpec *o, const char *what);
/* done of total units (total < 0: not known, shown without the time left; 0: nothing to show). */
void run_progress_step(RunProgress *p, const char *unit, long done, long total);
/* The last line, if one is on screen (before anything else is printed). */
void run_progress_end(RunProgress *p);
/* ModelProgress's fn (ctx: a RunProgress): layers of a pass, then generated tokens. */
void run_progress_model(void *ctx, ModelProgressUnit unit, int done, int total);
/* HtmlLong's progress (ctx: a RunProgress): heads whose tiles are made. */
void run_progress_heads(void *ctx, int done, int total);

/* batch.c: every line of --batch. */
int run_batch(Run *r, AvErr *e);
/* A page about to be written under its default name (no --html, -o) over a file
 * already there: a warning saying so (warnings survive --quiet). */
void run_warn_default_page(const char *path);

/* route.c: the writers, one row each in a table, and where each input's outputs go. */
enum { W_JSON, W_HTML, W_NPY_ATT, W_NPY_Q, W_NPY_K, W_STATS_JSON, W_TOKENS, W_NPY_PRED_IDS, W_NPY_PRED_PROBS,
       W_NPY_PRED_POS, W_NPY_IDS, W_HEADS_JSON, W_NPY_IMAGE_TOKENS, W_NPY_IMAGE_GRID, W_NPY_POOL_ATT, W_NPY_TEXT_ATT,
       W_NPY_VISION_ATT, W_NPY_IMAGE_EMBEDS, W_NPY_PIXELS,
       W_NPY_NORM, W_NPY_VNORM, W_NPY_FLOW, W_NPY_SINKS, W_NPY_MIX, W_NPY_MIX_LAYER, W_NPY_MIX2, W_NPY_MIX2_LAYER, W_NPY_STACK0, W_NPY_STACK1,
       W_NPY_STACK2 /* an encoder-decoder
       document's stacks */, W_NPY_LENS /* + LENS_NPY_*: lens_out.h's arrays */ };
/* Writes one output of d, the writer W_* what, atomically (temporary file renamed into place);
 * then names it (av_info) unless o is quiet or writes a file per batch line, or path is stdout. */
int run_write_file(const char *path, const OutDoc *d, int what, const RunSpec *o, AvErr *e);
/* The outputs o asks for one input's document (everything but the batch's JSON Lines stream;
 * lineno names an --out-dir file). */
int run_write_outputs(const RunSpec *o, const OutDoc *d, long lineno, AvErr *e);
/* One input's document into the run: added to --stats or heads, else written (run_write_outputs). */
int run_emit(Run *r, const OutDoc *d, long lineno, AvErr *e);
/* What the model said (output.h's say_write) on stdout when it is a terminal
 * and no output goes there: one input's --generate text, --predict's top K. */
int run_say(const RunSpec *o, const OutDoc *d, AvErr *e);

#endif
