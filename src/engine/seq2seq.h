/* seq2seq.h — encoder-decoder Transformers (BART, Marian, T5): over their
 * weights (weights.h's S2sWeights, filled by arch_bart.c / arch_t5.c), the pass that runs the encoder over
 * the source and the decoder, teacher-forced, over the decoder's tokens,
 * keeping every layer's and head's encoder self-attention, decoder (causal)
 * self-attention and cross attention. Which steps a block takes comes from
 * the config (pre- or post-norm, RMS or LayerNorm, gated MLP, how positions
 * enter), never from the family's name. */
#ifndef ATTNVIZ_SEQ2SEQ_H
#define ATTNVIZ_SEQ2SEQ_H

#include "err.h"
#include "generate.h"
#include "kernels.h"
#include "weights.h"

struct Model;

/* What one pass leaves for the writers: plain arrays, rows strided by their own
 * sizes. */
typedef struct S2sCapture {
    int n_enc, n_dec;
    int enc_layers, dec_layers, heads;
    float *enc_attn;    /* (enc_layers, heads, n_enc, n_enc) */
    float *dec_attn;    /* (dec_layers, heads, n_dec, n_dec), causal: row i is 0 past column i */
    float *cross_attn;  /* (dec_layers, heads, n_dec, n_enc) */
} S2sCapture;

int s2s_capture_alloc(S2sCapture *cap, const struct Model *m, int n_enc, int n_dec, AvErr *e);
void s2s_capture_free(S2sCapture *cap);
/* Bytes such a capture takes, to refuse before allocating. */
double s2s_capture_bytes(const struct Model *m, int n_enc, int n_dec);

/* The encoder over src (n_enc ids) and the decoder over dec (n_dec ids, the
 * first normally decoder_start_token_id), teacher-forced: fills cap (sized
 * for these lengths; NULL: nothing kept) and, when pred is not NULL (pred_alloc'd
 * for n_dec positions or more, its k set), the top-k of the next token after
 * every decoder row (entry i: after decoder token i; the model's lm head and
 * final_logits_bias; pred->n becomes n_dec). */
int s2s_forward(const struct Model *m, const int *src, int n_enc, const int *dec, int n_dec, S2sCapture *cap,
                CapPredictions *pred, AvErr *e);

/* Decoding from decoder_start_token_id, up to o->max_new tokens, each chosen
 * from the scores after the last as the decoder-only path's gen_run chooses
 * (pred_sample: temperature 0 greedy, else tempered softmax in the top_p
 * nucleus, drawn from o->seed's generator), stopping after one of o->eos or
 * when o->stop says so (its n_prompt is 1: the start token). out (max_new + 1)
 * gets the decoder's tokens, the start first; *n_out how many; g the steps
 * (n_prompt 1; step i chose decoder token i + 1 from position i's top-k,
 * o->k of them; gen_free). o->all (when not NULL, allocated for max_new + 1
 * positions): the top-K after every decoder token, the last included. The
 * encoder runs once; each step runs one token against the decoder's cached
 * keys and values, and scores what s2s_forward would after the same tokens. */
int s2s_generate(const struct Model *m, const int *src, int n_enc, const GenOptions *o, int *out, int *n_out,
                 CapGeneration *g, AvErr *e);

#endif
