/* run.c — one input: tokenized, run (with predictions or generation when
 * asked), its view derived and handed to the writers; and the one-input API a
 * server uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "normattn.h"
#include "report.h"
#include "run_internal.h"
#include "gguf.h"
#include "tiles.h"
#include "transform.h"
#include "util.h"


int run_scores_streamed(const RunSpec *o) {
    if (!o->stats && !o->heads.on) return 0;
    /* ALTI and rollout score their own matrices, made from every layer's whole attention */
    if (measure_any_per_layer(&o->capture)) return 0;
    /* --no-special and --words score a view derived from the whole matrices */
    if (o->capture.no_special || o->capture.words) return 0;
    /* ATTNVIZ_SCORE_MATRIX=1 scores the kept matrices instead: what the sums are checked against */
    const char *m = getenv("ATTNVIZ_SCORE_MATRIX");
    return !(m && *m && strcmp(m, "0"));
}

void run_score_input(Capture *cap, const TokEncoding *enc) {
    cap->tel_ids = enc->ids;
    if (!cap->sc_role) return;
    for (int j = 0; j < enc->n; j++) {
        const int k = xf_special_role(enc, j);
        cap->sc_role[j] = k == XF_CLS ? CAP_ROLE_CLS : k == XF_SEP ? CAP_ROLE_SEP : 0;
    }
}

/* Refused before allocating: a capture grows with the square of the input;
 * then the whole run against the memory available (fit.c). */
int run_capture_fits(const Run *r, int n, AvErr *e) {
    const RunSpec *o = &r->spec;
    if (run_capture_need(r, o, n) > run_memory_budget(o)) return run_refuse(r, o, n, e);
    return run_memory_fits(r, n, e);
}

int run_ensure_buffers(Run *r, int n, AvErr *e) {
    if (n <= r->cap_n) return 0;
    const RunSpec *o = &r->spec;
    if (run_capture_fits(r, n, e) != 0) return -1;
    model_capture_free(&r->in.cap);
    model_runstate_free(&r->rs);
    model_kv_free(&r->kv);
    r->cap_n = 0;
    if (model_runstate_alloc(&r->rs, &r->s->model, n, r->spec.threads, e) != 0) return -1;
    if (o->predict.generate_n && model_kv_alloc(&r->kv, &r->s->cfg, n, e) != 0) return -1;
    if (run_capture_make(r, &r->in.cap, n, e) != 0) return -1;
    const int alti = measure_wanted(&o->capture, MEASURE_ALTI);
    if ((run_lens_wanted(o) || alti) && model_capture_internals(&r->in.cap, &r->s->cfg, e) != 0) return -1;
    if (alti && model_capture_values(&r->in.cap, &r->s->cfg, e) != 0) return -1;
    r->cap_n = n;
    return 0;
}

int run_capture_make(const Run *r, Capture *cap, int n, AvErr *e) {
    const RunSpec *o = &r->spec;
    if (o->capture.telemetry) /* the ids are the input's, set before each pass (run_capture_input) */
        return model_capture_telemetry(cap, &r->s->cfg, n, o->capture.telemetry_top, NULL, o->sel.layers, o->sel.n_layers,
                                       o->sel.heads, o->sel.n_heads, e);
    if (run_scores_streamed(o)) { /* --stats and heads: each head's scores summed as its rows are made */
        CapScoring sc;
        heads_scoring(&r->heads, &sc);
        sc.norm = measure_wanted(&o->capture, MEASURE_NORM);
        if (model_capture_scores(cap, &r->s->cfg, n, &sc, o->sel.layers, o->sel.n_layers, o->sel.heads, o->sel.n_heads,
                                 e) != 0)
            return -1;
        return sc.norm ? model_capture_value_norms(cap, e) : 0;
    }
    const int whole = measure_any_per_layer(&o->capture); /* ALTI, rollout: every layer and head */
    if (model_capture_select(cap, &r->s->cfg, n, 1, o->capture.hidden, whole ? NULL : o->sel.layers,
                             whole ? 0 : o->sel.n_layers, whole ? NULL : o->sel.heads, whole ? 0 : o->sel.n_heads, e) != 0)
        return -1;
    /* the stream's largest entries, for the document's massive activations (flags.h) */
    if (!o->stats && !o->heads.on && run_flags_prepare(cap, &r->s->cfg, e) != 0) return -1;
    return measure_wanted(&o->capture, MEASURE_NORM) ? model_capture_value_norms(cap, e) : 0;
}

int run_flags_prepare(Capture *cap, const ModelConfig *c, AvErr *e) {
    return model_capture_activations(cap, c, e);
}

int run_flags_compute(const Capture *cap, const int *layers, int nl, const int *heads, int nh, FlagsResult *f, AvErr *e) {
    flags_free(f);
    return flags_compute(cap, layers, nl, heads, nh, f, e);
}

void input_doc(const Session *s, const RunSpec *o, const InputResult *in, OutDoc *d, const TokEncoding *enc,
               const Capture *cap, const char *a, const char *b) {
    session_doc(s, o, d, enc, cap, a, b);
    d->pred = o->predict.k && !o->capture.tokens_only ? &in->pred : NULL;
    d->gen = o->predict.generate_n && !o->capture.tokens_only ? &in->gen : NULL;
    d->gen_text = in->gen_text;
    d->pred_words = d->pred ? &in->pred_words : NULL;
    d->gen_words = d->gen ? &in->gen_words : NULL;
    if (run_lens_wanted(o) && !o->capture.tokens_only && cap && in->lens.n) {
        d->lens = &in->lens;
        d->lens_words = &in->lens_words;
    }
    if (o->lens.flow && !o->capture.tokens_only && cap && in->flow.on) d->flow = &in->flow;
    d->image = in->image;
    if (d->image && !d->init_view) d->init_view = "image"; /* an image run's page opens on the picture */
    if (o->explain.on && !o->capture.tokens_only && cap && in->explain.n_pairs) d->explain = &in->explain;
    if (!o->capture.tokens_only && cap && in->flags.first && in->flags.nl == out_n_layers(d) &&
        in->flags.nh == out_n_heads(d))
        d->flags = &in->flags;
    /* the measures computed, in --measure's order */
    const CaptureSpec *cs = &o->capture;
    const Measure one[1] = {cs->measure};
    const Measure *ms = cs->n_measures ? cs->measures : one;
    for (int k = 0; k < (cs->n_measures ? cs->n_measures : 1) && !cs->tokens_only && cap; k++) {
        const Measure m = ms[k];
        if (m == MEASURE_NORM && cap->nattn) d->measures[d->n_measures++] = "norm";
        if (measure_per_layer(m) && in->mix[m == MEASURE_ROLLOUT].agg) {
            d->measures[d->n_measures++] = measure_name(m);
            d->mix[d->n_mix] = &in->mix[m == MEASURE_ROLLOUT];
            d->mix_name[d->n_mix++] = measure_name(m);
        }
    }
}

void input_result_free(InputResult *in) {
    model_capture_free(&in->cap);
    pred_free(&in->pred);
    session_spelling_free(&in->pred_words);
    gen_free(&in->gen);
    session_spelling_free(&in->gen_words);
    free(in->gen_text);
    lens_free(&in->lens);
    session_spelling_free(&in->lens_words);
    flow_free(&in->flow);
    mix_free(&in->mix[0]);
    mix_free(&in->mix[1]);
    flags_free(&in->flags);
    explain_free(&in->explain);
    memset(in, 0, sizeof *in);
}

void run_fill_doc(const Run *r, OutDoc *d, const TokEncoding *enc, const Capture *cap, const char *a,
                  const char *b) {
    input_doc(r->s, &r->spec, &r->in, d, enc, cap, a, b);
}

/* The positions of a masked model's mask tokens. */
static int mask_rows(const Run *r, const TokEncoding *enc, int **rows) {
    const char *names[] = {"[MASK]", "<mask>"};
    int n = 0;
    *rows = malloc((size_t)enc->n * sizeof **rows);
    if (!*rows) return -1;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        int id = tok_token_to_id(r->s->tok, names[k]);
        for (int i = 0; id >= 0 && i < enc->n; i++)
            if (enc->ids[i] == id) (*rows)[n++] = i;
    }
    return n;
}

/* --predict without --generate: every position of a causal model, the
 * masks of a masked one. */
static int predict(Run *r, const TokEncoding *enc, int k, CapPredictions *pred, AvErr *e) {
    int *rows = NULL, n;
    if (r->s->cfg.causal) {
        if (!(rows = malloc((size_t)enc->n * sizeof *rows))) return av_err(e, "out of memory");
        for (n = 0; n < enc->n; n++) rows[n] = n;
    } else if ((n = mask_rows(r, enc, &rows)) < 0) {
        return av_err(e, "out of memory");
    }
    if (n == 0) av_warn("no [MASK] or <mask> in the input: no fill-ins to predict");
    int rc = pred_alloc(pred, n, k, e);
    if (rc == 0 && n > 0) rc = pred_rows(&r->s->model, &r->rs, rows, n, 0, pred, 0, e);
    free(rows);
    return rc;
}

/* A stop string: the generated text so far contains it. */
int run_stop_at_string(void *ctx, const int *ids, int n_prompt, int n) {
    const Run *r = ctx;
    char *text = NULL;
    AvErr e;
    if (tok_decode(r->s->tok, ids + n_prompt, n - n_prompt, &text, &e) != 0) return 0;
    int hit = strstr(text, r->spec.predict.stop) != NULL;
    free(text);
    return hit;
}

/* --generate: the prompt's tokens continued; enc grows by what was generated. */
static int generate(Run *r, TokEncoding *enc, AvErr *e) {
    const RunSpec *o = &r->spec;
    int room = cfg_max_tokens(&r->s->cfg) - enc->n, max_new = o->predict.generate_n;
    if (room < 1) return av_err(e, "the prompt's %d tokens fill the model's %d positions: nothing can follow", enc->n,
                                cfg_max_tokens(&r->s->cfg));
    const int asked = max_new;
    if (max_new > room) max_new = room;
    const int total = enc->n + max_new;
    if (run_ensure_buffers(r, total, e) != 0) return -1;
    /* said once the run goes ahead: a refused run's one line is its refusal */
    if (asked > room) av_warn("--generate %d: the model's %d positions leave room for %d", asked, cfg_max_tokens(&r->s->cfg), room);
    int *ids = malloc((size_t)total * sizeof *ids), n = 0;
    if (!ids) return av_err(e, "out of memory");
    memcpy(ids, enc->ids, (size_t)enc->n * sizeof *ids);
    GenOptions go = {.max_new = max_new, .k = o->predict.k ? o->predict.k : 10, .temperature = (float)o->predict.temperature,
                     .top_p = (float)o->predict.top_p, .seed = o->predict.seed, .eos = r->s->cfg.eos_ids, .n_eos = r->s->cfg.n_eos,
                     .stop = o->predict.stop ? run_stop_at_string : NULL, .stop_ctx = r};
    int rc = 0;
    if (o->predict.k) rc = pred_alloc(&r->in.pred, total, o->predict.k, e);
    go.all = o->predict.k ? &r->in.pred : NULL;
    RunProgress pr;
    run_progress_begin(&pr, o, "prompt");
    go.progress = (ModelProgress){run_progress_model, &pr};
    if (rc == 0) rc = gen_run(&r->s->model, &r->rs, &r->kv, &r->in.cap, ids, enc->n, &go, &r->in.gen, &n, e);
    run_progress_end(&pr);
    if (rc == 0) rc = tok_encoding_append(r->s->tok, enc, ids + enc->n, n - enc->n, e);
    if (rc == 0) rc = tok_decode(r->s->tok, ids + r->in.gen.n_prompt, n - r->in.gen.n_prompt, &r->in.gen_text, e);
    /* an instruct model given bare text often ends its turn at once */
    if (rc == 0 && r->in.gen.stop == CAP_STOP_EOS && r->in.gen.n_generated <= 1 && !o->quiet && !o->batch.path && !run_is_chat(o))
        av_info("the model ended at once with its end token %s: an instruct model answers a chat; wrap the text as one "
                "with --chat", tok_id_to_token(r->s->tok, ids[n - 1]) ? tok_id_to_token(r->s->tok, ids[n - 1]) : "");
    free(ids);
    return rc;
}

int run_is_chat(const RunSpec *o) { return o->chat || o->chat_file; }

int run_chat_prompt(Run *r, const char *a, const char *b, char **out, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ChatTemplate *t;
    *out = NULL;
    if (!run_is_chat(o)) return 0;
    if (b) return av_err_usage(e, "--chat takes one text (a message), not a sentence pair");
    if (session_chat_template(r->s, &t, e) != 0) return -1;
    if (!t) return av_err(e, "--chat: %s ships no chat template", r->s->dir);
    ChatMessage one = {"user", a ? a : "", NULL, 0, NULL};
    const ChatMessage *m = o->chat_file ? r->chat_msgs : &one;
    int n = o->chat_file ? r->n_chat_msgs : 1;
    if (chat_render(t, m, n, 1, out, e) != 0) return -1;
    return 0;
}

/* The tokens a run may hold: the model's positions, or --max-tokens (0: no limit). */
static int token_limit(const Run *r) {
    int max_len = r->s->cfg.max_position_embeddings ? cfg_max_tokens(&r->s->cfg) : 0; /* 0: no config, no limit */
    if (r->spec.capture.max_tokens > 0 && (max_len == 0 || r->spec.capture.max_tokens < max_len))
        max_len = r->spec.capture.max_tokens;
    return max_len;
}

/* A rendered chat, tokenized as apply_chat_template does: the template wrote the special tokens,
 * none is added; never cut short (its end is the generation prompt). */
static int encode_chat(Run *r, const char *text, TokEncoding *enc, AvErr *e) {
    const int max_len = token_limit(r);
    if (tok_encode_plain(r->s->tok, text, strlen(text), 0, enc, e) != 0) return -1;
    if (max_len > 0 && enc->n > max_len) {
        int n = enc->n;
        tok_encoding_free(enc);
        return r->spec.capture.max_tokens > 0 && max_len == r->spec.capture.max_tokens
                   ? av_err(e, "the chat is %d tokens, more than --max-tokens %d: shorten the messages", n, max_len)
                   : av_err(e, "the chat is %d tokens, more than the model's %d positions: shorten the messages", n,
                            max_len);
    }
    return 0;
}

/* The input's tokens, none allowed. */
int run_tokenize_any(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    if (!r->s->tok)
        return av_err_usage(e, "%s is a %s model: it reads an image (--image FILE), not text", r->s->name, r->s->cfg.model_type);
    double t0 = av_now_ms();
    int rc = run_is_chat(&r->spec) && !b ? encode_chat(r, a, enc, e)
                                     : tok_encode(r->s->tok, a, strlen(a), b, b ? strlen(b) : 0, token_limit(r), enc, e);
    r->t_tok += av_now_ms() - t0;
    return rc;
}

int run_tokens_chat(Run *r, const char *text, TokEncoding *enc, AvErr *e) {
    double t0 = av_now_ms();
    int rc = encode_chat(r, text, enc, e);
    r->t_tok += av_now_ms() - t0;
    return rc;
}

/* A model's input: its tokens, and at least one. A tokenizer that adds no special tokens (GPT-2's,
 * most decoders') makes none of an empty text, and one without an unknown token drops characters
 * its vocabulary lacks (a GGUF's byte-level vocabulary missing bytes): there is nothing to run.
 * Encoders' [CLS] [SEP] (as transformers makes them of "") and a decoder's start token are a run. */
int run_tokenize(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    if (run_tokenize_any(r, a, b, enc, e) != 0) return -1;
    if (enc->n > 0 || r->spec.capture.tokens_only) return 0;
    tok_encoding_free(enc);
    if (!a[0] && (!b || !b[0]))
        return av_err(e, "empty input: this model's tokenizer makes no tokens of an empty text (it adds no start "
                         "token), so there is nothing to run");
    return av_err(e, "the input has no tokens this model knows: its tokenizer dropped every character (its vocabulary "
                     "lacks them and has no unknown token)");
}

static int process(Run *r, const char *a, const char *b, TokEncoding *enc, int tokenized, AvErr *e) {
    const RunSpec *o = &r->spec;
    if (!tokenized && run_tokenize(r, a, b, enc, e) != 0) return -1;
    if (o->capture.tokens_only) return 0;
    double t0;
    pred_free(&r->in.pred);
    gen_free(&r->in.gen);
    free(r->in.gen_text);
    r->in.gen_text = NULL;
    t0 = av_now_ms();
    int rc;
    if (o->predict.generate_n) {
        rc = generate(r, enc, e);
    } else {
        if (run_ensure_buffers(r, enc->n, e) != 0) return -1;
        run_score_input(&r->in.cap, enc);
        RunProgress pr;
        run_progress_begin(&pr, o, "forward pass");
        const ModelProgress watch = {o->batch.path ? NULL : run_progress_model, &pr}; /* a batch counts its lines */
        rc = model_forward_watched(&r->s->model, &r->rs, NULL, enc->ids, enc->type_ids, enc->n, &r->in.cap, o->predict.k > 0,
                                   &watch, e);
        run_progress_end(&pr);
        if (rc == 0 && o->predict.k) rc = predict(r, enc, o->predict.k, &r->in.pred, e);
    }
    /* after the predictions: ablation reruns the pass in the run state */
    if (rc == 0 && run_lens_wanted(o)) rc = run_lens(r, enc, e);
    r->t_fwd += av_now_ms() - t0;
    /* spelled now, so the writers read words, not the tokenizer */
    if (rc == 0 && o->predict.k) rc = session_spell(r->s, r->in.pred.ids, r->in.pred.n * r->in.pred.k, &r->in.pred_words, e);
    if (rc == 0 && o->predict.generate_n)
        rc = session_spell(r->s, r->in.gen.steps.ids, r->in.gen.steps.n * r->in.gen.steps.k, &r->in.gen_words, e);
    return rc;
}

void run_warn_truncated(const Run *r, const TokEncoding *enc, long lineno) {
    const RunSpec *o = &r->spec;
    if (enc->n_truncated <= 0) return;
    char limit[64];
    if (o->capture.max_tokens > 0 && o->capture.max_tokens < cfg_max_tokens(&r->s->cfg))
        snprintf(limit, sizeof limit, "--max-tokens %d", o->capture.max_tokens);
    else
        snprintf(limit, sizeof limit, "the model's %d positions", cfg_max_tokens(&r->s->cfg));
    if (o->batch.path)
        av_warn("%s:%ld: longer than %s; dropped %d tokens", o->batch.path, lineno, limit,
                enc->n_truncated);
    else
        av_warn("input is longer than %s; dropped %d tokens (longest first)", limit,
                enc->n_truncated);
}

static int finish_view(Run *r, const char *a, const char *b, long lineno, const TokEncoding *enc, const Capture *cap,
                       Capture *scored, FILE *jsonl, AvErr *e);

/* --measure norm: the capture with its value-weighted attention (a copy of
 * cap's struct whose nattn is the run's buffer, kept from input to input, so
 * a batch does not allocate and fault in blocks x n^2 floats per input), and
 * for --stats and heads the shares they score (scored: its attn is the shares). */
static int norm_view(Run *r, const Capture *cap, Capture *with, AvErr *e) {
    *with = *cap;
    with->nattn = NULL;
    /* score sums (run_scores_streamed) hold the value-weighted shares already */
    if (!measure_wanted(&r->spec.capture, MEASURE_NORM) || r->spec.capture.tokens_only || cap->sc_sum) return 0;
    const size_t need = na_bytes(cap->n_tokens, cap_blocks(cap)) / sizeof(float);
    if (r->nattn_len < need) {
        free(r->nattn);
        r->nattn_len = 0;
        if (!(r->nattn = malloc(need * sizeof *r->nattn)))
            return av_err(e, "out of memory for value-weighted attention (%d tokens)", cap->n_tokens);
        r->nattn_len = need;
    }
    with->nattn = r->nattn;
    return na_fill_pool(with, r->rs.pool, e);
}

/* --measure alti and rollout: the input's token-mixing matrices into r->in.mix[0] and [1]. */
static int mix_view(Run *r, const Capture *cap, AvErr *e) {
    mix_free(&r->in.mix[0]);
    mix_free(&r->in.mix[1]);
    const CaptureSpec *c = &r->spec.capture;
    if (c->tokens_only) return 0;
    if (measure_wanted(c, MEASURE_ALTI) && mix_alti(&r->s->model, cap, r->rs.pool, &r->in.mix[0], e) != 0) return -1;
    return measure_wanted(c, MEASURE_ROLLOUT) ? mix_rollout(cap, &r->in.mix[1], e) : 0;
}

/* --stats and heads of a per-layer measure: a capture of one "head" per layer whose attention is the
 * measure through that layer, and the document's heads that one. */
static void mix_scored(const Run *r, const Capture *cap, Capture *out, OutDoc *d) {
    static const int ONE[1] = {0};
    memset(out, 0, sizeof *out);
    const MixResult *m = &r->in.mix[r->spec.capture.measure == MEASURE_ROLLOUT];
    out->n_layers = m->n_layers, out->n_heads = out->n_kv_heads = 1;
    out->n_tokens = m->n, out->head_dim = cap->head_dim, out->hidden_size = cap->hidden_size;
    out->attn = m->agg;
    out->cap_tokens = (size_t)m->n;
    d->cap = out;
    d->heads = ONE, d->n_sel_heads = 1;
}

/* Derive the view and write: one input whose capture is filled. */
int run_finish_input(Run *r, const char *a, const char *b, long lineno, const TokEncoding *enc, const Capture *cap_in,
                        FILE *jsonl, AvErr *e) {
    Capture cap_norm, scored = {0};
    flags_free(&r->in.flags);
    /* sinks and massive activations of the raw tokens, for the documents written (not scores, not a merged view) */
    const RunSpec *o = &r->spec;
    if (!o->capture.tokens_only && !o->stats && !o->heads.on && !o->capture.no_special && !o->capture.words && cap_in->attn &&
        run_flags_compute(cap_in, o->sel.layers, o->sel.n_layers, o->sel.heads, o->sel.n_heads, &r->in.flags, e) != 0)
        return -1;
    if (mix_view(r, cap_in, e) != 0) return -1;
    if (norm_view(r, cap_in, &cap_norm, e) != 0) return -1;
    const Capture *cap = &cap_norm;
    int rc = finish_view(r, a, b, lineno, enc, cap, &scored, jsonl, e);
    na_shares_free(&scored);
    return rc;
}

static int finish_view(Run *r, const char *a, const char *b, long lineno, const TokEncoding *enc, const Capture *cap,
                       Capture *scored, FILE *jsonl, AvErr *e) {
    const RunSpec *o = &r->spec;
    XfView view;
    int derived = !o->capture.tokens_only && (o->capture.no_special || o->capture.words);
    if (derived && xf_apply(enc, cap, o->capture.no_special, o->capture.words, &view, e) != 0) return -1;
    OutDoc d;
    run_fill_doc(r, &d, derived ? &view.enc : enc, o->capture.tokens_only ? NULL : derived ? &view.cap : cap, a, b);
    /* --stats and heads score the value-weighted shares in place of the attention */
    Capture mixed;
    if (d.cap && d.cap->nattn && (o->stats || o->heads.on)) {
        if (na_shares_capture(d.cap, scored, e) != 0) {
            if (derived) xf_free(&view);
            return -1;
        }
        d.cap = scored;
    } else if (d.n_mix && (o->stats || o->heads.on)) {
        mix_scored(r, d.cap, &mixed, &d);
    }
    double t0 = av_now_ms();
    int rc = run_emit(r, &d, lineno, e);
    if (rc == 0 && jsonl && !o->stats && !o->heads.on && !o->output.out_dir) {
        rc = o->capture.tokens_only ? json_write_tokens(jsonl, &d, e) : json_write_doc(jsonl, &d, e);
        if (rc == 0 && fputc('\n', jsonl) == EOF) rc = av_err_errno(e, "write error");
        if (rc != 0) av_err_prefix(e, "%s", o->output.json_path ? o->output.json_path : "stdout");
    }
    r->t_write += av_now_ms() - t0;
    if (derived) xf_free(&view);
    return rc;
}

/* ---------------------------------------------------------------- a long input's page */

/* The writer's grids (output.h's HtmlGridFn), recomputed from the capture's q/k. */
typedef struct {
    const Model *m;
    const Capture *cap;
} LongGrids;

static int long_grid(void *ctx, int l, int h, int G, float *grid, AvErr *e) {
    const LongGrids *g = ctx;
    return model_head_grid(g->m, g->cap, l, h, G, grid, e);
}

/* One input past --long-from, written as output.h's long page: the pass keeps
 * queries and keys, each head's overview (tiles' level 0) and its rows'
 * statistics and heaviest keys, none of it n x n; the deeper level is
 * recomputed from q/k a head at a time. What attnviz serve keeps of a long
 * input (live.c), and the page its /api/page gives for it. */
static int long_page(Run *r, const char *a, const char *b, const TokEncoding *enc, const char *path, AvErr *e) {
    const RunSpec *o = &r->spec;
    const int n = enc->n, side = TILE_SIDE, over = n < side ? n : side;
    if (n > HTML_LONG_MAX_TOKENS)
        return av_err(e, "a long input's page of %d tokens: its keys need more than 16 bits (%d at most)", n,
                      HTML_LONG_MAX_TOKENS);
    int levels;
    const double need = run_long_need(r, n, &levels), limit = run_memory_budget(o);
    if (need > limit) {
        char x[32], y[32];
        return av_err(e, "a long input's page of %d tokens needs %s of row statistics, heaviest keys and overviews, "
                         "above the %s allowed (--max-capture): shorten the input (--max-tokens), or raise --max-capture",
                      n, run_human_size(need, x, sizeof x), run_human_size(limit, y, sizeof y));
    }
    if (run_buffers_fit(r, n, 0, need, "a shorter input (--max-tokens), ", e) != 0) return -1;
    if (r->rs.max_tokens < n) {
        model_runstate_free(&r->rs);
        if (model_runstate_alloc(&r->rs, &r->s->model, n, r->spec.threads, e) != 0) return -1;
    }
    Capture cap = {0};
    char *meta = NULL;
    size_t meta_len = 0;
    FILE *mf = NULL;
    int rc = -1;
    double t0 = av_now_ms();
    /* queries and keys only for the deeper levels made from them; level 0 is the pass's own overview */
    if ((levels > 1 ? model_capture_qk(&cap, &r->s->cfg, n, 0, CAP_QK_F32, e) != 0 ||
                          model_capture_add_telemetry(&cap, HTML_LONG_TOP_K, enc->ids, e) != 0
                    : model_capture_telemetry(&cap, &r->s->cfg, n, HTML_LONG_TOP_K, enc->ids, NULL, 0, NULL, 0, e) != 0) ||
        model_capture_maxpool(&cap, over, e) != 0)
        goto done;
    pred_free(&r->in.pred);
    RunProgress pr;
    run_progress_begin(&pr, o, "forward pass");
    const ModelProgress watch = {run_progress_model, &pr};
    rc = model_forward_watched(&r->s->model, &r->rs, NULL, enc->ids, enc->type_ids, n, &cap, o->predict.k > 0, &watch, e);
    run_progress_end(&pr);
    if (rc != 0 || (rc = -1, 0)) goto done;
    if (o->predict.k && predict(r, enc, o->predict.k, &r->in.pred, e) != 0) goto done;
    r->t_fwd += av_now_ms() - t0;
    if (o->predict.k && session_spell(r->s, r->in.pred.ids, r->in.pred.n * r->in.pred.k, &r->in.pred_words, e) != 0) goto done;
    t0 = av_now_ms();
    /* the document's meta (as attnviz serve describes a run), then the page's own tiles member */
    OutDoc d;
    run_fill_doc(r, &d, enc, &cap, a, b);
    if (!(mf = open_memstream(&meta, &meta_len))) {
        av_err(e, "out of memory");
        goto done;
    }
    int mrc = html_write_meta(mf, &d, e);
    if (fclose(mf) != 0 && mrc == 0) mrc = av_err(e, "out of memory");
    if (mrc != 0) goto done;
    LongGrids grids = {&r->s->model, &cap};
    RunProgress tiles;
    run_progress_begin(&tiles, o, "tiles");
    HtmlLong lp = {&cap, side, 0, 0, long_grid, &grids, HTML_PAGE_BOUND, run_progress_heads, &tiles};
    html_long_plan(&cap, side, 0, &lp.levels, &lp.top_k);
    if (lp.levels > levels) lp.levels = levels;
    AvOut out;
    if (av_out_open(&out, path, e) != 0) goto done;
    /* titled by the first text, as the server's page is */
    if (html_write_long(out.fp, a, meta, &lp, o->output.templates_dir, e) != 0) {
        run_progress_end(&tiles);
        av_err_prefix(e, "%s", strcmp(path, "-") ? path : "stdout");
        av_out_abort(&out);
        goto done;
    }
    run_progress_end(&tiles);
    long size = strcmp(path, "-") && fflush(out.fp) == 0 ? ftell(out.fp) : -1;
    if (av_out_commit(&out, e) != 0) goto done;
    r->t_write += av_now_ms() - t0;
    if (!o->quiet) {
        char z[48], sz[32];
        if (size >= 0) snprintf(z, sizeof z, " (%s)", run_human_size((double)size, sz, sizeof sz));
        else z[0] = '\0';
        char past[48] = "";
        if (o->output.long_from > 0) snprintf(past, sizeof past, ", past --long-from %d", o->output.long_from);
        av_info("wrote %s%s: %d tokens%s: a long input's page (zoom levels 0-%d and each query's %d heaviest keys, no "
                "whole matrix)", path, z, n, past, lp.levels - 1, lp.top_k);
    }
    rc = run_say(&r->spec, &d, e);
done:
    model_capture_free(&cap);
    free(meta);
    return rc;
}

/* Tokenize, run, derive the view, write: one input, single or batch (with --chat, the input as
 * the chat template renders it: that text is the input the writers show). */
int run_handle_input(Run *r, const char *a, const char *b, long lineno, FILE *jsonl, AvErr *e) {
    char *chat;
    if (run_chat_prompt(r, a, b, &chat, e) != 0) return -1;
    int rc = run_handle_text(r, chat ? chat : a, b, lineno, jsonl, e);
    free(chat);
    return rc;
}

int run_handle_text(Run *r, const char *a, const char *b, long lineno, FILE *jsonl, AvErr *e) {
    TokEncoding enc = {0};
    const RunSpec *o = &r->spec;
    /* one input's page: the whole matrices, or the long input's page (plan.c) */
    if (!o->batch.path && !o->capture.tokens_only) {
        int rc = run_tokenize(r, a, b, &enc, e), plan = -1;
        if (rc == 0) run_warn_truncated(r, &enc, lineno);
        if (rc == 0 && (plan = run_plan_page(r, &enc, e)) < 0) rc = -1;
        if (rc == 0 && plan == RUN_PAGE_LONG) {
            if (!o->output.html_path) run_warn_default_page("attnviz.html");
            rc = long_page(r, a, b, &enc, o->output.html_path ? o->output.html_path : "attnviz.html", e);
            tok_encoding_free(&enc);
            return rc;
        }
        if (rc == 0) rc = process(r, a, b, &enc, 1, e);
        if (rc == 0) rc = run_finish_input(r, a, b, lineno, &enc, &r->in.cap, jsonl, e);
        tok_encoding_free(&enc);
        return rc;
    }
    int rc = process(r, a, b, &enc, 0, e);
    if (rc == 0) run_warn_truncated(r, &enc, lineno);
    if (rc == 0) rc = run_finish_input(r, a, b, lineno, &enc, &r->in.cap, jsonl, e);
    tok_encoding_free(&enc);
    return rc;
}

/* Statistics once all inputs are in: a table, or JSON with --json. */
/* The model (its config's sizes, its tensors' names, types and shapes, its vocabulary) and the
 * options that change the scores: two files to be merged must share it. Not the weights' values
 * (reading every byte of a checkpoint to merge statistics would cost a load's worth again). */
static uint64_t setup_digest(const Run *r) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    uint64_t h = av_fnv1a64(c->model_type, strlen(c->model_type), AV_FNV64_SEED);
    const int64_t sizes[] = {c->num_layers, c->num_heads, c->hidden_size, c->intermediate_size, c->vocab_size,
                             c->max_position_embeddings, tok_vocab_size(r->s->tok), tok_lowercase(r->s->tok),
                             o->capture.measure, o->capture.max_tokens, o->capture.no_special, o->capture.words};
    h = av_fnv1a64(sizes, sizeof sizes, h);
    if (r->s->model.gguf) {
        for (int i = 0; i < r->s->model.gguf->n_tensors; i++) {
            const GgufTensor *t = &r->s->model.gguf->tensors[i];
            h = av_fnv1a64(t->name, strlen(t->name) + 1, h);
            h = av_fnv1a64(&t->type, sizeof t->type, h);
            h = av_fnv1a64(t->dims, sizeof t->dims, h);
        }
    }
    for (int f = 0; f < r->s->model.n_files; f++)
        for (int i = 0; i < r->s->model.files[f].n_tensors; i++) {
            const StTensor *t = &r->s->model.files[f].tensors[i];
            h = av_fnv1a64(t->name, strlen(t->name) + 1, h);
            h = av_fnv1a64(t->dtype_name, strlen(t->dtype_name) + 1, h);
            h = av_fnv1a64(t->shape, (size_t)t->ndim * sizeof *t->shape, h);
        }
    return h;
}

int run_record_cover(const Run *r, HeadStats *s, AvErr *e) {
    StatsCover c = r->cover;
    if (!r->have_cover) { /* one input on the command line: the line a --batch file would hold for it */
        const RunSpec *o = &r->spec;
        const size_t la = o->text_a ? strlen(o->text_a) : 0, lb = o->text_b ? strlen(o->text_b) : 0;
        char *line = malloc(la + lb + 2);
        if (!line) return av_err(e, "out of memory");
        memcpy(line, o->text_a ? o->text_a : "", la);
        if (o->text_b) line[la] = '\t', memcpy(line + la + 1, o->text_b, lb);
        c = (StatsCover){1, stats_line_digest(line, la + (o->text_b ? lb + 1 : 0)), 0, 0, 0, 0};
        free(line);
    }
    stats_set_cover(s, setup_digest(r), &c);
    return 0;
}

int run_finish_stats(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    if (run_record_cover(r, &r->stats, e) != 0) return -1;
    OutDoc d;
    TokEncoding none = {0};
    run_fill_doc(r, &d, &none, NULL, NULL, NULL);
    static const int ONE[1] = {0};
    if (measure_per_layer(o->capture.measure)) d.heads = ONE, d.n_sel_heads = 1; /* a row per layer */
    /* an encoder-decoder's three stacks, the others' one */
    const HeadStats *s[3] = {&r->stats, &r->s2s_stats[0], &r->s2s_stats[1]};
    d.stats = s, d.stack_names = RUN_S2S_STACKS, d.n_scored = r->s->cfg.enc_dec ? 3 : 1;
    if (o->output.json_path) return run_write_file(o->output.json_path, &d, W_STATS_JSON, o, e);
    if (!r->s->cfg.enc_dec) return stats_write_table(stdout, &r->stats, &d, e);
    /* a table each */
    for (int k = 0; k < 3; k++) {
        printf("%s# %s attention\n", k ? "\n" : "", RUN_S2S_STACKS[k]);
        /* unequal depths: the rows are the stack's own layers */
        if (r->s2s_n_layers[k ? 1 : 0]) d.layers = r->s2s_layers[k ? 1 : 0], d.n_sel_layers = r->s2s_n_layers[k ? 1 : 0];
        if (stats_write_table(stdout, s[k], &d, e) != 0) return -1;
    }
    return 0;
}

/* attnviz heads once the inputs are in: the induction score's random repeated
 * sequences (ids, not text: they are drawn from the vocabulary), then the table or JSON. */
int run_finish_heads(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    HeadScores *hs = &r->heads;
    if (run_record_cover(r, &hs->acc, e) != 0) return -1;
    if (hs->want[HS_INDUCTION] && !r->s->cfg.enc_dec) { /* heads_add_stack: not for encoder-decoders */
        int vocab = r->s->cfg.vocab_size;
        if (heads_make_induction(hs, r->s->tok, vocab, o->predict.seed, o->heads.induction_seqs, o->heads.induction_len, e) != 0) return -1;
        const HeadsInduction *in = &hs->ind[hs->n_ind - 1];
        if (in->n_ids > cfg_max_tokens(&r->s->cfg))
            return av_err(e, "--induction-len %d: %d tokens do not fit the model's %d positions", o->heads.induction_len,
                          in->n_ids, cfg_max_tokens(&r->s->cfg));
        RunProgress pr;
        run_progress_begin(&pr, o, "induction score");
        for (int s = 0; s < in->sequences; s++) {
            run_progress_step(&pr, "sequences", s, in->sequences);
            TokEncoding enc = {0};
            OutDoc d;
            double t0 = av_now_ms();
            int rc = tok_encoding_append(r->s->tok, &enc, in->ids + (size_t)s * in->n_ids, in->n_ids, e);
            if (rc == 0) rc = run_ensure_buffers(r, enc.n, e);
            if (rc == 0) run_score_input(&r->in.cap, &enc);
            if (rc == 0) rc = model_forward_kv(&r->s->model, &r->rs, NULL, enc.ids, enc.type_ids, enc.n, &r->in.cap, 0, e);
            r->t_fwd += av_now_ms() - t0;
            Capture cap_norm, scored = {0}, mixed;
            if (rc == 0) rc = mix_view(r, &r->in.cap, e);
            if (rc == 0) rc = norm_view(r, &r->in.cap, &cap_norm, e);
            if (rc == 0) {
                run_fill_doc(r, &d, &enc, &r->in.cap, NULL, NULL);
                if (cap_norm.nattn) rc = na_shares_capture(&cap_norm, &scored, e), d.cap = &scored;
                else if (d.n_mix) mix_scored(r, &r->in.cap, &mixed, &d);
                if (rc == 0) rc = heads_add_induction(hs, &d, e);
                na_shares_free(&scored);
            }
            tok_encoding_free(&enc);
            if (rc != 0) return -1;
        }
        run_progress_step(&pr, "sequences", in->sequences, in->sequences);
    }
    if (o->output.json_path) {
        OutDoc d;
        TokEncoding none = {0};
        run_fill_doc(r, &d, &none, NULL, NULL, NULL);
        const HeadScores *scores[3] = {hs, &r->s2s_heads[0], &r->s2s_heads[1]};
        d.scores = scores, d.stack_names = RUN_S2S_STACKS, d.n_scored = r->s->cfg.enc_dec ? 3 : 1;
        return run_write_file(o->output.json_path, &d, W_HEADS_JSON, o, e);
    }
    if (!r->s->cfg.enc_dec) return heads_write_table(stdout, hs, e);
    const HeadScores *all[3] = {hs, &r->s2s_heads[0], &r->s2s_heads[1]};
    for (int k = 0; k < 3; k++) {
        printf("%s# %s attention\n", k ? "\n" : "", RUN_S2S_STACKS[k]);
        if (heads_write_table(stdout, all[k], e) != 0) return -1;
    }
    return 0;
}

static int run_single(Run *r, AvErr *e) {
    if (run_handle_input(r, r->spec.text_a, r->spec.text_b, 0, NULL, e) != 0) return -1;
    if (r->spec.stats && run_finish_stats(r, e) != 0) return -1;
    if (r->spec.heads.on && run_finish_heads(r, e) != 0) return -1;
    return 0;
}

int run_inputs(Run *r, AvErr *e) { return r->spec.batch.path ? run_batch(r, e) : run_single(r, e); }

/* ---------------------------------------------------------------- runs */

void run_init(Run *r, const Session *s, const RunSpec *o) {
    memset(r, 0, sizeof *r);
    r->s = s;
    r->spec = *o;
}

/* --stats' and heads' accumulators, as the run's settings ask. */
static int init_scores(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    /* ALTI and rollout are one matrix per layer: scored as one "head" per layer */
    const int per_layer = measure_per_layer(o->capture.measure), score_heads = per_layer ? 1 : c->num_heads;
    const char *measure = o->capture.measure == MEASURE_NORM ? "norm" : o->capture.measure == MEASURE_ALTI ? "alti"
                          : per_layer ? "rollout" : NULL;
    if (o->stats && stats_init(&r->stats, c->num_layers, score_heads, e) != 0) return -1;
    for (int k = 0; k < 2 && o->stats && c->enc_dec; k++)
        if (stats_init(&r->s2s_stats[k], c->dec_layers, c->num_heads, e) != 0) return -1;
    if (o->heads.on) {
        HeadsOptions ho = {o->heads.n_scores ? o->heads.scores : NULL, o->heads.n_scores, o->heads.pattern, o->heads.exclude_bos,
                           o->heads.exclude_current, o->heads.top_k};
        if (heads_init(&r->heads, c->num_layers, score_heads, &ho, e) != 0) return -1;
        for (int k = 0; k < 2 && c->enc_dec; k++)
            if (heads_init(&r->s2s_heads[k], c->dec_layers, c->num_heads, &ho, e) != 0) return -1;
        r->heads.acc.measure = measure;
    }
    if (o->stats) r->stats.measure = measure;
    return 0;
}

void run_free(Run *r) {
    input_result_free(&r->in);
    free(r->nattn);
    model_runstate_free(&r->rs);
    model_kv_free(&r->kv);
    stats_free(&r->stats);
    stats_free(&r->s2s_stats[0]);
    stats_free(&r->s2s_stats[1]);
    heads_free(&r->heads);
    heads_free(&r->s2s_heads[0]);
    heads_free(&r->s2s_heads[1]);
    free(r->s2s_layers[0]);
    free(r->s2s_layers[1]);
    chat_messages_free(r->chat_msgs, r->n_chat_msgs);
    memset(r, 0, sizeof *r);
}

/* --chat and --chat-file: a decoder that ships a template; the messages read. */
static int load_chat(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const Session *s = r->s;
    const ChatTemplate *t;
    if (s->have_cfg && (!s->cfg.causal || s->cfg.enc_dec))
        return av_err_usage(e, "--chat%s: %s is %s: chat templates are for decoders", o->chat_file ? "-file" : "",
                            s->dir, s->cfg.enc_dec ? "an encoder-decoder" : "a masked (encoder) model");
    if (session_chat_template(s, &t, e) != 0) return -1;
    if (!t)
        return av_err(e, "--chat%s: %s ships no chat template (%s): give the prompt in the model's own format "
                      "without --chat", o->chat_file ? "-file" : "", s->dir,
                      s->have_model && s->model.gguf ? "no tokenizer.chat_template in its metadata"
                                                     : "no chat_template in tokenizer_config.json, no chat_template.jinja");
    if (!o->chat_file) return 0;
    char *buf;
    size_t len;
    if (av_read_file(o->chat_file, 64u << 20, &buf, &len, e) != 0) return -1;
    size_t at = 0;
    while (at < len && (buf[at] == ' ' || buf[at] == '\t' || buf[at] == '\n' || buf[at] == '\r')) at++;
    if (at == len) {
        free(buf);
        return av_err(e, "%s: empty: --chat-file takes JSON messages ([{\"role\": \"user\", \"content\": \"...\"}, ...])",
                      o->chat_file);
    }
    if (buf[at] != '[' && buf[at] != '{') { /* a text file: the question itself, not messages */
        free(buf);
        return av_err(e, "%s: not JSON messages ([{\"role\": \"user\", \"content\": \"...\"}, ...]); a text file's "
                         "contents as one user message: --chat \"$(cat %s)\"", o->chat_file, o->chat_file);
    }
    int rc = chat_messages_parse_json(buf, len, &r->chat_msgs, &r->n_chat_msgs, e);
    free(buf);
    return rc != 0 ? av_err_prefix(e, "%s", o->chat_file) : 0;
}

int run_open(Run **out, const Session *s, const RunSpec *o, AvErr *e) {
    Run *r = malloc(sizeof *r);
    *out = r;
    if (!r) return av_err(e, "out of memory");
    run_init(r, s, o);
    if (run_is_chat(o) && load_chat(r, e) != 0) return -1;
    return init_scores(r, e);
}

void run_close(Run *r) {
    if (!r) return;
    run_free(r);
    free(r);
}

/* ---------------------------------------------------------------- one input at a time (pipeline.h) */

int run_tokens(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    if (run_tokenize(r, a, b, enc, e) != 0) return -1;
    run_warn_truncated(r, enc, 0);
    return 0;
}

/* The run state grown to n tokens (it only grows: one-input runs share it). */
static int ensure_runstate(Run *r, int n, AvErr *e) {
    if (r->rs.max_tokens >= n) return 0;
    model_runstate_free(&r->rs);
    return model_runstate_alloc(&r->rs, &r->s->model, n, r->spec.threads, e);
}

int run_forward(Run *r, const TokEncoding *enc, Capture *cap, int k, CapPredictions *pred, AvErr *e) {
    if (!r->s->have_model) return av_err(e, "no model loaded");
    if (ensure_runstate(r, enc->n, e) != 0) return -1;
    double t0 = av_now_ms();
    int rc = model_forward_kv(&r->s->model, &r->rs, NULL, enc->ids, enc->type_ids, enc->n, cap, k > 0, e);
    if (rc == 0 && k > 0) rc = predict(r, enc, k, pred, e);
    r->t_fwd += av_now_ms() - t0;
    return rc;
}

int run_forward_packed(Run *r, const TokEncoding *encs, int n, Capture *const *caps, AvErr *e) {
    if (!r->s->have_model) return av_err(e, "no model loaded");
    if (n < 1 || n > PACK_MAX_INPUTS) return av_err(e, "%d inputs in one pass: 1 to %d", n, PACK_MAX_INPUTS);
    int total = 0, lens[PACK_MAX_INPUTS];
    for (int g = 0; g < n; g++) total += lens[g] = encs[g].n;
    if (ensure_runstate(r, total, e) != 0) return -1;
    int *ids = malloc((size_t)total * sizeof *ids), *types = malloc((size_t)total * sizeof *types);
    int rc = ids && types ? 0 : av_err(e, "out of memory");
    for (int g = 0, at = 0; rc == 0 && g < n; at += lens[g], g++) {
        memcpy(ids + at, encs[g].ids, (size_t)lens[g] * sizeof *ids);
        memcpy(types + at, encs[g].type_ids, (size_t)lens[g] * sizeof *types);
    }
    double t0 = av_now_ms();
    if (rc == 0) rc = model_forward_packed(&r->s->model, &r->rs, ids, types, lens, n, caps, e);
    r->t_fwd += av_now_ms() - t0;
    free(ids);
    free(types);
    return rc;
}
