/* run_seq2seq.c — an encoder-decoder model (seq2seq.h) on one source text:
 * the decoder's tokens are decoder_start_token_id followed by --decoder-text's
 * (transformers' shift_tokens_right of the labels, keeping the last token so
 * that every target token is a row), or what greedy decoding (--generate N)
 * made; the engine fills the three stacks and the writers read them as
 * attnviz render hands them: encoder, decoder (causal) and cross attention. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "predict.h"
#include "report.h"
#include "run_internal.h"
#include "seq2seq.h"
#include "util.h"

/* The decoder's ids: the start token, then the target text's tokens (its
 * template's specials included, as tokenizer(text_target=...) gives them). */
static int teacher_ids(Run *r, const char *target, int **ids, int *n, AvErr *e) {
    TokEncoding t = {0};
    if (run_tokenize_any(r, target, NULL, &t, e) != 0) return -1;
    if (t.n_truncated > 0) av_warn("--decoder-text is longer than the model's positions; dropped %d tokens", t.n_truncated);
    int room = cfg_max_tokens(&r->s->cfg);
    int take = t.n + 1 <= room ? t.n : room - 1; /* the start token takes a position too */
    if (take < t.n)
        av_warn("--decoder-text: the start token and %d tokens exceed the model's %d positions; dropped the last %d",
                t.n, room, t.n - take);
    *ids = malloc((size_t)(take + 1) * sizeof **ids);
    if (!*ids) {
        tok_encoding_free(&t);
        return av_err(e, "out of memory");
    }
    (*ids)[0] = r->s->cfg.dec_start_id;
    memcpy(*ids + 1, t.ids, (size_t)take * sizeof **ids);
    *n = take + 1;
    tok_encoding_free(&t);
    return 0;
}

static const char *size_str(double bytes, char *buf, size_t len);
static double capture_limit(const Run *r);

/* The decoder's ids from decoding up to --generate N tokens, greedy or sampled as
 * --temperature, --top-p and --seed say (the decoder-only path's options), --stop
 * included; --predict K: the top-K after every decoder token into r->in.pred. What the
 * capture would need at the longest is checked before decoding: decoding may stop
 * sooner (end of sequence), but a run that cannot be kept is not run. */
static int generated_ids(Run *r, const TokEncoding *src, int asked, int **ids, int *n, AvErr *e) {
    const RunSpec *o = &r->spec;
    int max_new = asked, room = cfg_max_tokens(&r->s->cfg) - 1;
    if (max_new > room) max_new = room;
    const double need = s2s_capture_bytes(&r->s->model, src->n, max_new + 1), limit = capture_limit(r);
    if (need > limit) {
        char a[32], b[32];
        return av_err(e, "--generate %d: capturing %d source and up to %d decoder tokens needs %s, above the %s allowed "
                      "(--max-capture): ask for fewer tokens or allow more", asked, src->n, max_new + 1,
                      size_str(need, a, sizeof a), size_str(limit, b, sizeof b));
    }
    /* said once the run goes ahead: a refused run's one line is its refusal */
    if (asked > room) av_warn("--generate %d: the model's %d positions leave room for %d", asked, room + 1, room);
    if (!(*ids = malloc((size_t)(max_new + 1) * sizeof **ids))) return av_err(e, "out of memory");
    GenOptions go = {.max_new = max_new, .k = o->predict.k ? o->predict.k : 10, .temperature = (float)o->predict.temperature,
                     .top_p = (float)o->predict.top_p, .seed = o->predict.seed, .eos = r->s->cfg.eos_ids,
                     .n_eos = r->s->cfg.n_eos, .stop = o->predict.stop ? run_stop_at_string : NULL, .stop_ctx = r};
    if (o->predict.k && pred_alloc(&r->in.pred, max_new + 1, o->predict.k, e)) return -1;
    go.all = o->predict.k ? &r->in.pred : NULL;
    return s2s_generate(&r->s->model, src->ids, src->n, &go, *ids, n, &r->in.gen, e);
}

/* The blocks of the selected layers of a stack (L, H, rows, cols), in order, into a new array (*out). */
static int keep_layers(const float *all, const int *layers, int n_layers, size_t per_layer, float **out, AvErr *e) {
    if (!(*out = malloc((size_t)n_layers * per_layer * sizeof **out))) return av_err(e, "out of memory");
    for (int i = 0; i < n_layers; i++)
        memcpy(*out + (size_t)i * per_layer, all + (size_t)layers[i] * per_layer, per_layer * sizeof **out);
    return 0;
}

static const char *size_str(double bytes, char *buf, size_t len) {
    if (bytes >= 1e9) snprintf(buf, len, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, len, "%.1f MB", bytes / 1e6);
    else snprintf(buf, len, "%.1f kB", bytes / 1e3);
    return buf;
}

/* --max-capture, or half the memory. */
static double capture_limit(const Run *r) {
    const double limit = r->spec.capture.max_capture;
    return limit > 0 ? limit : 0.5 * (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* A capture of n_src and nd tokens, refused past --max-capture (default: half the memory). */
static int capture_alloc(Run *r, S2sCapture *cap, int n_src, int nd, AvErr *e) {
    const double limit = capture_limit(r), need = s2s_capture_bytes(&r->s->model, n_src, nd);
    if (need > limit) {
        char a[32], b[32];
        return av_err(e, "capturing %d source and %d decoder tokens needs %s, above the %s allowed (--max-capture)",
                      n_src, nd, size_str(need, a, sizeof a), size_str(limit, b, sizeof b));
    }
    return s2s_capture_alloc(cap, &r->s->model, n_src, nd, e);
}

int run_seq2seq_capture(Run *r, const char *source, const char *target, TokEncoding *src, int **dec, int *nd,
                        S2sCapture *cap, AvErr *e) {
    *dec = NULL, *nd = 0;
    double t0 = av_now_ms();
    if (run_tokenize(r, source, NULL, src, e) != 0) return -1;
    run_warn_truncated(r, src, 0);
    if (teacher_ids(r, target, dec, nd, e) || capture_alloc(r, cap, src->n, *nd, e) ||
        s2s_forward(&r->s->model, src->ids, src->n, *dec, *nd, cap, NULL, e))
        return -1;
    r->t_fwd += av_now_ms() - t0;
    return 0;
}

const char *const RUN_S2S_STACKS[3] = {"encoder", "decoder", "cross"};

/* --stats: each stack's scores; the encoder's and cross attention's columns are the source's tokens */
static int add_stats(Run *r, const OutDoc *d, const TokEncoding *src, const TokEncoding *dec, AvErr *e) {
    return stats_add_stack(&r->stats, d, &d->stacks[0], src, e) || stats_add_stack(&r->s2s_stats[0], d, &d->stacks[1], dec, e) ||
                   stats_add_stack(&r->s2s_stats[1], d, &d->stacks[2], src, e)
               ? -1
               : 0;
}

/* The decoder's tokens as an encoding (spellings, specials) for the writers. */
static int decoder_encoding(Run *r, const TokEncoding *src, const int *ids, int nd, TokEncoding *dec, AvErr *e) {
    if (tok_encoding_append(r->s->tok, dec, ids, nd, e) != 0) return -1;
    dec->byte_level = src->byte_level; /* one tokenizer: the page reads the decoder's display spellings as the source's */
    /* the decoder's specials take the role their id has in the source (<s> [CLS]-like, </s> [SEP]-like): the
     * decoder's ids are not the tokenizer's template, and --stats' [CLS]/[SEP] shares read the roles */
    for (int i = 0; i < dec->n; i++)
        for (int j = 0; j < src->n && dec->special[i]; j++)
            if (src->ids[j] == dec->ids[i] && src->role[j] != TOK_ROLE_NONE) {
                dec->role[i] = src->role[j];
                break;
            }
    return 0;
}

int run_s2s_stack_layers(Run *r, int *layers[2], int n_layers[2], AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const Selection *sel = &r->spec.sel;
    const int depth[2] = {c->num_layers, c->dec_layers};
    static const char *const side[2] = {"encoder", "decoder"};
    for (int k = 0; k < 2; k++) free(layers[k]), layers[k] = NULL, n_layers[k] = 0;
    if (c->num_layers == c->dec_layers) return 0; /* the document's layers serve all three stacks */
    for (int k = 0; k < 2; k++) {
        /* --layers keeps, in each stack, the selected layers it has (cli.c checked them
         * against the deeper stack); every stack needs one at least */
        const int n = sel->layers ? sel->n_layers : depth[k];
        if (!(layers[k] = malloc((size_t)n * sizeof *layers[k]))) return av_err(e, "out of memory");
        for (int i = 0; i < n; i++) {
            const int l = sel->layers ? sel->layers[i] : i;
            if (l < depth[k]) layers[k][n_layers[k]++] = l;
        }
        if (!n_layers[k])
            return av_err_usage(e, "--layers: none of the %s's %d layers (0-%d) is selected", side[k], depth[k],
                                depth[k] - 1);
    }
    return 0;
}

int run_seq2seq_input(Run *r, const char *source, const char *target, long lineno, FILE *jsonl, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    TokEncoding src = {0}, dec = {0};
    S2sCapture cap = {0};
    float *kept[3] = {NULL, NULL, NULL}; /* --layers' copies of the stacks */
    int *ids = NULL, nd = 0, rc = -1;
    char *gen_text = NULL;
    double t0 = av_now_ms();
    if (run_tokenize(r, source, NULL, &src, e) != 0) goto done;
    run_warn_truncated(r, &src, lineno);
    if (target ? teacher_ids(r, target, &ids, &nd, e) : generated_ids(r, &src, o->predict.generate_n, &ids, &nd, e)) goto done;
    if (decoder_encoding(r, &src, ids, nd, &dec, e) != 0) goto done;
    if (!target && tok_decode(r->s->tok, ids + 1, nd - 1, &gen_text, e) != 0) goto done;
    if (capture_alloc(r, &cap, src.n, nd, e) != 0) goto done;
    /* --predict with --decoder-text: the top-K after every decoder token (generation kept them as it went) */
    if (target && o->predict.k && pred_alloc(&r->in.pred, nd, o->predict.k, e)) goto done;
    if (s2s_forward(&r->s->model, src.ids, src.n, ids, nd, &cap, target && o->predict.k ? &r->in.pred : NULL, e))
        goto done;
    if (o->predict.k && session_spell(r->s, r->in.pred.ids, r->in.pred.n * r->in.pred.k, &r->in.pred_words, e)) goto done;
    if (!target && session_spell(r->s, r->in.gen.steps.ids, r->in.gen.steps.n * r->in.gen.steps.k, &r->in.gen_words, e))
        goto done;
    r->t_fwd += av_now_ms() - t0;
    /* --layers: the stacks hold the selected layers only, in order (the writers read d.layers' indices) */
    const float *arrays[3] = {cap.enc_attn, cap.dec_attn, cap.cross_attn};
    const size_t per_layer[3] = {(size_t)c->num_heads * src.n * src.n, (size_t)c->num_heads * nd * nd,
                                 (size_t)c->num_heads * nd * src.n};
    /* unequal depths: each stack its own layers (run_s2s_stack_layers); equal: --layers' for all three */
    const int own = c->num_layers != c->dec_layers;
    for (int k = 0; k < 3 && (o->sel.layers || own); k++) {
        const int *ls = own ? r->s2s_layers[k ? 1 : 0] : o->sel.layers;
        const int nls = own ? r->s2s_n_layers[k ? 1 : 0] : o->sel.n_layers;
        if (keep_layers(arrays[k], ls, nls, per_layer[k], &kept[k], e)) goto done;
        arrays[k] = kept[k];
    }
    CapStack stacks[3] = {
        {"encoder", arrays[0], src.n, src.n, 0, 0, 0, NULL, 0},
        {"decoder", arrays[1], nd, nd, 1, 1, 1, NULL, 0},
        {"cross", arrays[2], nd, src.n, 1, 0, 0, NULL, 0},
    };
    for (int k = 0; k < 3 && own; k++) stacks[k].layers = r->s2s_layers[k ? 1 : 0], stacks[k].n_layers = r->s2s_n_layers[k ? 1 : 0];
    OutDoc d;
    run_fill_doc(r, &d, &src, NULL, source, target ? target : gen_text);
    d.dtype = r->s->model.dtype_name;
    d.dec_enc = &dec;
    d.stacks = stacks, d.n_stacks = 3;
    d.display_tokens = src.byte_level ? src.display : NULL;
    d.layers = o->sel.layers, d.n_sel_layers = o->sel.n_layers;
    if (own && o->sel.layers) d.layers = r->s2s_layers[0], d.n_sel_layers = r->s2s_n_layers[0]; /* "layers": the encoder's */
    d.heads = NULL; /* every head: the stacks hold them all */
    d.init_layer = o->sel.layer >= 0 ? o->sel.layer : out_layer(&d, 0);
    d.init_head = o->sel.head >= 0 ? o->sel.head : -1; /* every head, as bertviz's head view opens */
    /* run_fill_doc's predictions and generation: positions are the decoder's (d.dec_enc's) */
    d.pred = o->predict.k ? &r->in.pred : NULL, d.pred_words = d.pred ? &r->in.pred_words : NULL;
    d.gen = target ? NULL : &r->in.gen, d.gen_words = d.gen ? &r->in.gen_words : NULL;
    d.gen_text = gen_text;
    t0 = av_now_ms();
    if (o->stats) {
        rc = add_stats(r, &d, &src, &dec, e);
    } else if (o->heads.on) {
        rc = heads_add_stack(&r->heads, &d, &stacks[0], &src, &src, e) ||
                     heads_add_stack(&r->s2s_heads[0], &d, &stacks[1], &dec, &dec, e) ||
                     heads_add_stack(&r->s2s_heads[1], &d, &stacks[2], &dec, &src, e)
                 ? -1
                 : 0;
    } else {
        rc = run_emit(r, &d, lineno, e);
        if (rc == 0 && jsonl && !o->output.out_dir) { /* --batch's stream: a document a line */
            rc = json_write_doc(jsonl, &d, e);
            if (rc == 0 && fputc('\n', jsonl) == EOF) rc = av_err_errno(e, "write error");
            if (rc != 0) av_err_prefix(e, "%s", o->output.json_path ? o->output.json_path : "stdout");
        }
    }
    r->t_write += av_now_ms() - t0;
done:
    for (int k = 0; k < 3; k++) free(kept[k]);
    s2s_capture_free(&cap);
    tok_encoding_free(&src);
    tok_encoding_free(&dec);
    free(ids);
    free(gen_text);
    pred_free(&r->in.pred);
    gen_free(&r->in.gen);
    session_spelling_free(&r->in.pred_words);
    session_spelling_free(&r->in.gen_words);
    return rc;
}

int run_seq2seq(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    /* unequal depths: each stack's layers, checked before a batch's first line */
    if (run_s2s_stack_layers(r, r->s2s_layers, r->s2s_n_layers, e) != 0) return -1;
    if (o->batch.path) return run_batch(r, e);
    /* heads: SOURCE TARGET, the decoder's text the second */
    if (run_seq2seq_input(r, o->text_a, o->heads.on ? o->text_b : o->decoder_text, 0, NULL, e) != 0) return -1;
    return o->stats ? run_finish_stats(r, e) : o->heads.on ? run_finish_heads(r, e) : 0;
}

int run_seq2seq_layers(Run *r, AvErr *e) { return run_s2s_stack_layers(r, r->s2s_layers, r->s2s_n_layers, e); }

/* ---------------------------------------------------------------- one input at a time (pipeline.h) */

int run_seq2seq_tokens(Run *r, const char *source, const char *target, TokEncoding *src, TokEncoding *dec, AvErr *e) {
    int *ids = NULL, nd = 0;
    if (run_tokens(r, source, NULL, src, e) != 0) return -1;
    int rc = teacher_ids(r, target, &ids, &nd, e) == 0 && decoder_encoding(r, src, ids, nd, dec, e) == 0 ? 0 : -1;
    free(ids);
    return rc;
}

int run_seq2seq_forward(Run *r, const TokEncoding *src, const TokEncoding *dec, S2sCapture *cap, AvErr *e) {
    if (s2s_capture_alloc(cap, &r->s->model, src->n, dec->n, e) != 0) return -1;
    return s2s_forward(&r->s->model, src->ids, src->n, dec->ids, dec->n, cap, NULL, e);
}

int run_seq2seq_generate(Run *r, const char *source, int n_new, TokEncoding *src, TokEncoding *dec, CapGeneration *g,
                         OutSpelling *words, char **text, AvErr *e) {
    int *ids = NULL, nd = 0, rc = -1;
    *text = NULL;
    if (run_tokens(r, source, NULL, src, e) != 0) return -1;
    if (generated_ids(r, src, n_new, &ids, &nd, e) == 0 && decoder_encoding(r, src, ids, nd, dec, e) == 0 &&
        tok_decode(r->s->tok, ids + 1, nd - 1, text, e) == 0 &&
        session_spell(r->s, r->in.gen.steps.ids, r->in.gen.steps.n * r->in.gen.steps.k, words, e) == 0)
        rc = 0;
    /* the steps become the caller's; the run keeps none of this input */
    *g = r->in.gen;
    memset(&r->in.gen, 0, sizeof r->in.gen);
    pred_free(&r->in.pred);
    free(ids);
    return rc;
}

void run_seq2seq_doc(const Run *r, OutDoc *d, CapStack stacks[3], const TokEncoding *src, const TokEncoding *dec,
                     const S2sCapture *cap, const float *const arrays[3], const char *source, const char *target) {
    const float *a[3] = {cap->enc_attn, cap->dec_attn, cap->cross_attn};
    for (int k = 0; arrays && k < 3; k++) a[k] = arrays[k];
    stacks[0] = (CapStack){"encoder", a[0], src->n, src->n, 0, 0, 0, NULL, 0};
    stacks[1] = (CapStack){"decoder", a[1], dec->n, dec->n, 1, 1, 1, NULL, 0};
    stacks[2] = (CapStack){"cross", a[2], dec->n, src->n, 1, 0, 0, NULL, 0};
    /* unequal depths: each stack's layers (run_seq2seq_layers); arrays given hold them */
    for (int k = 0; k < 3 && r->s2s_n_layers[0]; k++)
        stacks[k].layers = r->s2s_layers[k ? 1 : 0], stacks[k].n_layers = r->s2s_n_layers[k ? 1 : 0];
    /* as run_seq2seq_input fills it for --decoder-text (no predictions, no generation) */
    run_fill_doc(r, d, src, NULL, source, target);
    d->dtype = r->s->model.dtype_name;
    d->dec_enc = dec;
    d->stacks = stacks, d->n_stacks = 3;
    d->display_tokens = src->byte_level ? src->display : NULL;
    d->heads = NULL;
    d->init_layer = out_layer(d, 0);
    d->init_head = -1;
    d->pred = NULL, d->pred_words = NULL, d->gen = NULL, d->gen_words = NULL, d->gen_text = NULL;
}
