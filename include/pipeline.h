/* pipeline.h — one run: find and load the model and its tokenizer, then
 * text -> tokens -> forward pass -> transforms -> writers for each input
 * (one, or a batch). */
#ifndef ATTNVIZ_PIPELINE_H
#define ATTNVIZ_PIPELINE_H

#include <stdio.h>

#include "config.h"
#include "err.h"
#include "model.h"
#include "settings.h"
#include "output.h"
#include "tokenizer.h"

typedef struct Pipeline Pipeline;

/* Finds the model (m->path, $ATTNVIZ_MODEL, bundled weights, the demo) and
 * loads it with its tokenizer, for runs as o says (kept: it must outlive the
 * pipeline). *dir and *why say which model and why (for the caller's message);
 * valid until pipeline_close. *out is set even on failure (close it). */
int pipeline_open(Pipeline **out, const ModelSpec *m, const RunSpec *o, const char **dir, const char **why, AvErr *e);
const ModelConfig *pipeline_config(const Pipeline *p);
/* NULL when the model has a language-model head; else why it has none. */
const char *pipeline_head_missing(const Pipeline *p);
/* Runs every input: 0, or -1 with e set (empty when the failed batch lines were reported one by one). */
int pipeline_run(Pipeline *p, AvErr *e);
/* What the RunSpec asks, checked against the open model (run_checks.c): the
 * selection in range, and no option the model's kind cannot honour (--generate
 * on a masked model, --decoder-text on one that is not an encoder-decoder, a
 * missing language-model head, the residual-stream options on a masked model,
 * ...). 0, or -1 with a usage error naming the option and the model. */
int run_check_model(const Pipeline *p, AvErr *e);
/* The command line's run and heads: opens the model (a note says which and
 * why), run_check_model, creates --out-dir, runs every input (an
 * encoder-decoder's through run_seq2seq_pipeline), closes. 0 or -1. */
int pipeline_main(const ModelSpec *m, const RunSpec *o, AvErr *e);
/* A vision encoder on the RunSpec's --image (and a whole CLIP/SigLIP model's
 * text tower on its text): the image's tokens and attention to the writers. */
int pipeline_image(Pipeline *p, AvErr *e);
/* An encoder-decoder model on the run's source text (--decoder-text or
 * --generate): encoder, decoder and cross attention to the writers. */
int run_seq2seq_pipeline(Pipeline *p, AvErr *e);
/* attnviz serve, an encoder-decoder model (cfg.enc_dec): the source's tokens
 * and the decoder's (decoder_start_token_id, then target's tokens, as
 * --decoder-text makes them; warnings as the command line words them); the
 * teacher-forced pass into cap (allocated here: s2s_capture_bytes, which the
 * caller checks first; s2s_capture_free); and the document the CLI writes for
 * that input, its three stacks in stacks (arrays: the stacks' data when not
 * cap's own, e.g. a --layers copy; the caller sets d->layers then). */
struct S2sCapture;
int pipeline_seq2seq_tokens(Pipeline *p, const char *source, const char *target, TokEncoding *src, TokEncoding *dec,
                            AvErr *e);
int pipeline_seq2seq_forward(Pipeline *p, const TokEncoding *src, const TokEncoding *dec, struct S2sCapture *cap, AvErr *e);
/* Or the decoder's tokens from decoding up to n_new tokens from the start
 * token (greedy, or as the RunSpec's --temperature/--top-p/--seed/--stop say:
 * the CLI's --generate): the steps into g (gen_free), their top-K spelled into
 * words (pipeline_spelling_free), the generated text into *text (free). */
int pipeline_seq2seq_generate(Pipeline *p, const char *source, int n_new, TokEncoding *src, TokEncoding *dec,
                              CapGeneration *g, OutSpelling *words, char **text, AvErr *e);
void pipeline_seq2seq_doc(const Pipeline *p, OutDoc *d, CapStack stacks[3], const TokEncoding *src,
                          const TokEncoding *dec, const struct S2sCapture *cap, const float *const arrays[3],
                          const char *source, const char *target);
/* An encoder and decoder of different depths: each side's layers (the RunSpec's
 * --layers those sides have, else all), kept for pipeline_seq2seq_doc, which then
 * gives the stacks their own (arrays given: they hold those layers, or the caller
 * sets the stacks' layers); equal depths: nothing. A usage error when a side has
 * none of --layers. */
int pipeline_seq2seq_layers(Pipeline *p, AvErr *e);
/* attnviz render: attention computed elsewhere (render.h) through the same
 * writers; 0 or -1 (a usage error for a selection out of range). */
int pipeline_render(const RenderSpec *rs, const RunSpec *o, AvErr *e);
/* One input at a time, for a server that keeps the model loaded (serve.c).
 * Not thread-safe: one caller at a time per pipeline (pipeline_doc excepted,
 * which only reads). */
const Model *pipeline_model(const Pipeline *p);
/* Tokens of a (and b), truncated to the model's positions or --max-tokens
 * (enc->n_truncated, warned as the command line words it). */
int pipeline_tokenize(Pipeline *p, const char *a, const char *b, TokEncoding *enc, AvErr *e);
/* Runs enc into cap (the caller's, for enc->n tokens: model_capture_*); with
 * k > 0 also the top-k predictions (every position, or the masks) into pred
 * (warning when a masked model's input has no mask). */
int pipeline_forward(Pipeline *p, const TokEncoding *enc, Capture *cap, int k, CapPredictions *pred, AvErr *e);
/* Several inputs in one pass (at most PACK_MAX_INPUTS; model_forward_packed):
 * input g's attention into caps[g] exactly as pipeline_forward leaves it alone. */
int pipeline_forward_packed(Pipeline *p, const TokEncoding *encs, int n, Capture *const *caps, AvErr *e);
/* The document the writers read for that input (valid while its parts live);
 * pred_words: pred's ids spelled (pipeline_spell). */
void pipeline_doc(const Pipeline *p, OutDoc *d, const TokEncoding *enc, const Capture *cap, const CapPredictions *pred,
                  const OutSpelling *pred_words, const char *a, const char *b);
/* n ids as the model's vocabulary spells them, into w (replacing what it held;
 * the strings are the tokenizer's: valid while p lives). */
int pipeline_spell(const Pipeline *p, const int *ids, int n, OutSpelling *w, AvErr *e);
void pipeline_spelling_free(OutSpelling *w);
/* attnviz diff: two texts on one model (m) or one text on two (m and ds->model_b), run
 * through the same loading and tokenizing, compared (diff.h) and written: the
 * table on stdout, --json, the page. 0 or -1 (a usage error for a selection
 * out of range). */
int pipeline_diff(const ModelSpec *m, const DiffSpec *ds, const RunSpec *o, AvErr *e);
/* Frees the run; with the RunSpec's profile set, reports the per-phase times first (AV_NOTE_PROFILE). */
void pipeline_close(Pipeline *p);

#endif
