/* generate.c — the generation loop: the prompt in one pass, then one pass of
 * one token per step against the key/value cache. */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"

void gen_free(CapGeneration *g) {
    free(g->chosen_prob);
    pred_free(&g->steps);
    memset(g, 0, sizeof *g);
}

static int is_eos(const GenOptions *o, int id) {
    for (int i = 0; i < o->n_eos; i++)
        if (o->eos[i] == id) return 1;
    return 0;
}

/* log of the softmax's denominator over scores logits (vocab): the largest
 * score plus the log of the shifted exponentials' sum, summed in double. */
static double log_normalizer(const float *logits, int vocab) {
    float mx = logits[0];
    for (int j = 1; j < vocab; j++) mx = logits[j] > mx ? logits[j] : mx;
    double sum = 0;
    for (int j = 0; j < vocab; j++) sum += exp((double)logits[j] - (double)mx);
    return (double)mx + log(sum);
}

int gen_run(const Model *m, RunState *s, KvCache *kv, Capture *cap, int *ids, int n_prompt, const GenOptions *o,
            CapGeneration *g, int *n_out, AvErr *e) {
    const int vocab = m->cfg.vocab_size;
    int total = n_prompt + o->max_new;
    memset(g, 0, sizeof *g);
    g->n_prompt = n_prompt, g->temperature = o->temperature, g->top_p = o->top_p, g->seed = o->seed;
    if (!model_has_head(m)) return av_err(e, "%s: the checkpoint has no language-model head to generate with", m->path);
    if (total > kv->cap_tokens || (cap && (size_t)total > cap->cap_tokens) || total > s->max_tokens)
        return av_err(e, "%d tokens do not fit the buffers", total);
    float *logits = malloc((size_t)vocab * sizeof *logits), *scratch = malloc((size_t)vocab * sizeof *scratch);
    int *iscratch = malloc((size_t)vocab * sizeof *iscratch);
    int rc = -1, n = n_prompt;
    int top_ids[GEN_MAX_LOGPROBS];
    float top_pr[GEN_MAX_LOGPROBS];
    double top_lp[GEN_MAX_LOGPROBS];
    const int n_top = !o->logprobs ? 0 : o->top_logprobs < GEN_MAX_LOGPROBS ? o->top_logprobs : GEN_MAX_LOGPROBS;
    PredRng rng;
    pred_rng_seed(&rng, o->seed);
    if (!logits || !scratch || !iscratch || !(g->chosen_prob = malloc((size_t)(o->max_new > 0 ? o->max_new : 1) * sizeof(float))) ||
        pred_alloc(&g->steps, o->max_new, o->k, e) != 0) {
        av_err(e, "out of memory for generation");
        goto done;
    }
    g->steps.n = 0;
    kv->n = 0;
    if (cap) cap->n_tokens = total;
    /* the prompt: its attention, and the scores after its last token */
    if (cap && cap->rows) cap->rows_from = n_prompt > cap->rows_n ? n_prompt - cap->rows_n : 0;
    if (model_forward_watched(m, s, kv, ids, NULL, n_prompt, cap, 1, &o->progress, e)) goto done;
    if (o->all) {
        int *rows = malloc((size_t)n_prompt * sizeof *rows);
        if (!rows) {
            av_err(e, "out of memory");
            goto done;
        }
        for (int i = 0; i < n_prompt; i++) rows[i] = i;
        int prc = pred_rows(m, s, rows, n_prompt, 0, o->all, 0, e);
        free(rows);
        if (prc) goto done;
        o->all->n = n_prompt;
    }
    int last = n_prompt - 1;
    if (model_logits(m, s, &last, 1, logits, e)) goto done;
    g->stop = CAP_STOP_LENGTH;
    if (o->on_prompt && o->on_prompt(o->cb_ctx, n_prompt)) {
        g->stop = CAP_STOP_STRING;
        total = n;
    }
    while (n < total) {
        /* choose from the scores after token n - 1 */
        const int g_i = n - n_prompt;
        int id;
        float prob;
        double lse = 0;
        if (o->logprobs) {
            lse = log_normalizer(logits, vocab);
            if (n_top && pred_topk(logits, 1, vocab, n_top, top_ids, top_pr) == 0)
                for (int t = 0; t < n_top; t++) top_lp[t] = (double)logits[top_ids[t]] - lse;
        }
        if (pred_sample(logits, 1, vocab, o->temperature, o->top_p, &rng, scratch, iscratch, &id, &prob) ||
            pred_topk(logits, 1, vocab, o->k, g->steps.ids + (size_t)g_i * o->k, g->steps.probs + (size_t)g_i * o->k)) {
            av_err(e, "%s: the scores after position %d are not finite (NaN in the weights?)", m->path, n - 1);
            goto done;
        }
        g->steps.position[g_i] = n - 1;
        g->chosen_prob[g_i] = prob;
        g->steps.n = g->n_generated = g_i + 1;
        ids[n++] = id;
        GenToken tk = {g_i, n - 1, id, prob, o->logprobs ? (double)logits[id] - lse : 0, n_top, top_ids, top_lp, ids};
        int stop = is_eos(o, id) ? CAP_STOP_EOS : o->stop && o->stop(o->stop_ctx, ids, n_prompt, n) ? CAP_STOP_STRING : -1;
        if (!cap && o->on_token && o->on_token(o->cb_ctx, &tk) && stop < 0) stop = CAP_STOP_STRING;
        /* nothing captured: a token that ends the generation needs no pass */
        if (!cap && !o->all && (stop >= 0 || n >= total)) {
            if (stop >= 0) g->stop = (CapStop)stop;
            break;
        }
        /* its own pass: its attention row, and the scores after it. Unless the
         * sequence has just grown past rope_recompute_at: then, as transformers'
         * Phi-3 generate() does, the cache (rotated with LongRoPE's short
         * factors) is dropped and the whole sequence runs again (with the long
         * ones), every row of the capture and of --predict's rewritten */
        const int redo = m->cfg.rope_recompute_at > 0 && n > m->cfg.rope_recompute_at && kv->n <= m->cfg.rope_recompute_at;
        if (redo) kv->n = 0;
        if (cap && cap->rows) cap->rows_from = n - 1;
        if (model_forward_kv(m, s, kv, redo ? ids : &id, NULL, redo ? n : 1, cap, 1, e)) goto done;
        if (cap && o->on_token && o->on_token(o->cb_ctx, &tk) && stop < 0) stop = CAP_STOP_STRING;
        if (stop >= 0) g->stop = (CapStop)stop;
        if (o->progress.fn) o->progress.fn(o->progress.ctx, MODEL_PROGRESS_TOKENS, n - n_prompt, o->max_new);
        const int need = stop < 0 && n < total;
        if (!need && !o->all) break;
        int row = redo ? n - 1 : 0;
        if (model_logits(m, s, &row, 1, logits, e)) goto done;
        if (o->all && redo) {
            int *rows = malloc((size_t)n * sizeof *rows);
            if (!rows) {
                av_err(e, "out of memory");
                goto done;
            }
            for (int i = 0; i < n - 1; i++) rows[i] = i;
            int prc = pred_rows(m, s, rows, n - 1, 0, o->all, 0, e);
            free(rows);
            if (prc) goto done;
            o->all->n = n - 1;
        }
        if (o->all) {
            const int at = o->all->n++;
            o->all->position[at] = n - 1;
            if (pred_topk(logits, 1, vocab, o->all->k, o->all->ids + (size_t)at * o->all->k,
                          o->all->probs + (size_t)at * o->all->k)) {
                av_err(e, "%s: the scores after position %d are not finite", m->path, n - 1);
                goto done;
            }
        }
        if (!need) break;
    }
    if (cap) model_capture_trim(cap, n);
    *n_out = n;
    rc = 0;
done:
    free(logits);
    free(scratch);
    free(iscratch);
    if (rc) gen_free(g);
    return rc;
}
