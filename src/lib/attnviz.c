/* attnviz.c — libattnviz's public API (include/attnviz.h) over the run's own
 * code (pipeline.h, session.h, run_internal.h): a model handle is a Session
 * opened as the CLI opens one, each call a Run of the result's own settings
 * over it (its tokenize + forward + predict into a capture the result owns),
 * and the outputs are the CLI's writers over the session's OutDoc. Nothing
 * here prints: errors go back as values.
 *
 * Only the functions marked ATTNVIZ_API are exported (the objects are built
 * with -fvisibility=hidden; abi/libattnviz.symbols lists them). */
#define ATTNVIZ_BUILDING_LIBRARY 1
#include "attnviz.h"

#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "predict.h"
#include "run_internal.h"
#include "util.h"
#include "version.h"

struct attnviz_model {
    Session *s;            /* the model, tokenizer and labels: read only once open */
    RunSpec spec;          /* the settings a result starts from (no outputs: the library writes on request) */
    RunState rs;           /* the passes' scratch, lent to one call's Run at a time (it only grows) */
    KvCache kv;            /* generation's keys and values, lent the same way */
    pthread_mutex_t lock;  /* one run at a time on rs and kv */
    pthread_mutex_t refs_lock;
    int refs;              /* the handle itself (until attnviz_model_free) + each live result */
};

struct attnviz_result {
    attnviz_model *m;      /* a reference: the tokens' strings and the OutDoc's model live there */
    RunSpec spec;          /* the settings it was run with: its Run's, and its documents' selection */
    int *layers, *heads;   /* spec.sel's lists, owned */
    char *text_a, *text_b;
    TokEncoding enc;
    InputResult res;       /* its capture, and its predictions when spec.predict.k asks */
};

/* ---- errors ---- */

static attnviz_status to_status(const AvErr *e, attnviz_error *err) {
    attnviz_status st = e->kind == AV_ERR_USAGE ? ATTNVIZ_ERR_USAGE : ATTNVIZ_ERR_RUNTIME;
    if (err) {
        err->code = st;
        snprintf(err->message, sizeof err->message, "%s", e->msg[0] ? e->msg : "unknown error");
    }
    return st;
}

static void ok(attnviz_error *err) {
    if (err) {
        err->code = ATTNVIZ_OK;
        err->message[0] = '\0';
    }
}

/* A usage error as a value, for NULL handles and arguments out of range. */
__attribute__((format(printf, 2, 3))) static attnviz_status usage(attnviz_error *err, const char *fmt, ...);
static attnviz_status usage(attnviz_error *err, const char *fmt, ...) {
    if (err) {
        char raw[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        err->code = ATTNVIZ_ERR_USAGE;
        av_sanitize(err->message, sizeof err->message, raw);
    }
    return ATTNVIZ_ERR_USAGE;
}

ATTNVIZ_API const char *attnviz_version(void) { return ATTNVIZ_VERSION; }

/* ---- models ---- */

static void model_release(attnviz_model *m) {
    pthread_mutex_lock(&m->refs_lock);
    int left = --m->refs;
    pthread_mutex_unlock(&m->refs_lock);
    if (left > 0) return;
    model_runstate_free(&m->rs);
    model_kv_free(&m->kv);
    session_close(m->s);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->refs_lock);
    free(m);
}

ATTNVIZ_API attnviz_model *attnviz_model_open(const char *path, unsigned flags, attnviz_error *err) {
    if (!path || !*path) {
        usage(err, "no model path: pass a model folder or a .gguf file");
        return NULL;
    }
    if ((flags & ATTNVIZ_OPEN_CASED) && (flags & ATTNVIZ_OPEN_UNCASED)) {
        usage(err, "ATTNVIZ_OPEN_CASED and ATTNVIZ_OPEN_UNCASED together");
        return NULL;
    }
    if (flags & ~(ATTNVIZ_OPEN_CASED | ATTNVIZ_OPEN_UNCASED)) {
        usage(err, "unknown flags 0x%x for attnviz_model_open", flags & ~(ATTNVIZ_OPEN_CASED | ATTNVIZ_OPEN_UNCASED));
        return NULL;
    }
    attnviz_model *m = calloc(1, sizeof *m);
    AvErr e = {0};
    if (!m) {
        av_err(&e, "out of memory");
        to_status(&e, err);
        return NULL;
    }
    m->spec.sel.layer = m->spec.sel.head = -1;
    m->spec.output.precision = 6;
    m->spec.predict.top_p = 1.0;
    m->spec.quiet = 1;
    ModelSpec ms = {path, flags & ATTNVIZ_OPEN_CASED ? 0 : flags & ATTNVIZ_OPEN_UNCASED ? 1 : -1, 0, 1, NULL};
    const char *dir = NULL, *why = NULL;
    if (session_open(&m->s, &ms, &dir, &why, &e) != 0) {
        to_status(&e, err);
        session_close(m->s);
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->refs_lock, NULL);
    m->refs = 1;
    ok(err);
    return m;
}

ATTNVIZ_API void attnviz_model_free(attnviz_model *m) {
    if (m) model_release(m);
}

ATTNVIZ_API int attnviz_model_n_layers(const attnviz_model *m) { return m ? m->s->cfg.num_layers : 0; }
ATTNVIZ_API int attnviz_model_n_heads(const attnviz_model *m) { return m ? m->s->cfg.num_heads : 0; }
ATTNVIZ_API int attnviz_model_n_kv_heads(const attnviz_model *m) { return m ? m->s->cfg.num_kv_heads : 0; }
ATTNVIZ_API int attnviz_model_head_dim(const attnviz_model *m) { return m ? m->s->cfg.head_dim : 0; }
ATTNVIZ_API int attnviz_model_hidden_size(const attnviz_model *m) { return m ? m->s->cfg.hidden_size : 0; }
ATTNVIZ_API int attnviz_model_vocab_size(const attnviz_model *m) { return m ? m->s->cfg.vocab_size : 0; }
ATTNVIZ_API int attnviz_model_max_tokens(const attnviz_model *m) { return m ? cfg_max_tokens(&m->s->cfg) : 0; }
ATTNVIZ_API int attnviz_model_is_causal(const attnviz_model *m) { return m ? m->s->cfg.causal : 0; }
ATTNVIZ_API int attnviz_model_can_predict(const attnviz_model *m) { return m ? !session_head_missing(m->s) : 0; }
ATTNVIZ_API const char *attnviz_model_name(const attnviz_model *m) { return m ? m->s->name : NULL; }
ATTNVIZ_API const char *attnviz_model_type(const attnviz_model *m) { return m ? m->s->cfg.model_type : NULL; }

ATTNVIZ_API const char *attnviz_model_token(const attnviz_model *m, int id) {
    return m && m->s->tok && id >= 0 && id < tok_vocab_size(m->s->tok) ? tok_id_to_token(m->s->tok, id) : NULL;
}

ATTNVIZ_API const char *attnviz_model_token_text(const attnviz_model *m, int id) {
    return m && m->s->tok && id >= 0 && id < tok_vocab_size(m->s->tok) ? tok_id_display(m->s->tok, id) : NULL;
}

ATTNVIZ_API attnviz_status attnviz_tokenize(attnviz_model *m, const char *text_a, const char *text_b, int *ids,
                                            size_t cap, size_t *n_tokens, attnviz_error *err) {
    if (!m) return usage(err, "attnviz_tokenize: NULL model handle");
    if (!text_a) return usage(err, "attnviz_tokenize: NULL text");
    if (cap && !ids) return usage(err, "attnviz_tokenize: NULL ids with cap %zu", cap);
    TokEncoding enc = {0};
    AvErr e = {0};
    Run run;
    pthread_mutex_lock(&m->lock);
    run_init(&run, m->s, &m->spec);
    /* the tokens of any text, none included (a run of none is refused: attnviz_run) */
    int rc = run_tokenize_any(&run, text_a, text_b, &enc, &e);
    if (rc == 0) run_warn_truncated(&run, &enc, 0);
    run_free(&run);
    pthread_mutex_unlock(&m->lock);
    if (rc != 0) {
        tok_encoding_free(&enc);
        return to_status(&e, err);
    }
    if (n_tokens) *n_tokens = (size_t)enc.n;
    if (ids) memcpy(ids, enc.ids, (size_t)(cap < (size_t)enc.n ? cap : (size_t)enc.n) * sizeof *ids);
    tok_encoding_free(&enc);
    ok(err);
    return ATTNVIZ_OK;
}

/* ---- runs ---- */

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A caller's list sorted without repeats (the capture's kept grid is in model order), each below limit. */
static attnviz_status take_list(const int *in, int n, int limit, const char *what, int **out, int *n_out,
                                attnviz_error *err) {
    *out = NULL;
    *n_out = 0;
    if (!in) return n > 0 ? usage(err, "%d %s given but the list is NULL", n, what) : ATTNVIZ_OK;
    if (n <= 0) return usage(err, "an empty list of %s (NULL keeps them all)", what);
    for (int i = 0; i < n; i++)
        if (in[i] < 0 || in[i] >= limit)
            return usage(err, "%s: %d is out of range: the model has %d (0-%d)", what, in[i], limit, limit - 1);
    int *l = malloc((size_t)n * sizeof *l);
    if (!l) {
        AvErr e = {0};
        av_err(&e, "out of memory");
        return to_status(&e, err);
    }
    memcpy(l, in, (size_t)n * sizeof *l);
    qsort(l, (size_t)n, sizeof *l, cmp_int);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!k || l[i] != l[k - 1]) l[k++] = l[i];
    *out = l;
    *n_out = k;
    return ATTNVIZ_OK;
}

ATTNVIZ_API void attnviz_result_free(attnviz_result *r) {
    if (!r) return;
    tok_encoding_free(&r->enc);
    input_result_free(&r->res);
    free(r->layers);
    free(r->heads);
    free(r->text_a);
    free(r->text_b);
    model_release(r->m);
    free(r);
}

/* A result for one input, its settings checked and copied (the run's lists
 * sorted); NULL with err set. Not yet run. */
static attnviz_result *result_new(attnviz_model *m, const char *text_a, const char *text_b,
                                  const attnviz_run_options *opts, attnviz_error *err) {
    const ModelConfig *c = &m->s->cfg;
    if (opts->predict < 0 || opts->predict > 100) {
        usage(err, "predict is 0 (none) or 1-100, not %d", opts->predict);
        return NULL;
    }
    if (opts->max_tokens < 0) {
        usage(err, "max_tokens is 0 (the model's limit) or more, not %d", opts->max_tokens);
        return NULL;
    }
    if (opts->flags & ~ATTNVIZ_RUN_HIDDEN) {
        usage(err, "unknown flags 0x%x for attnviz_run", opts->flags & ~ATTNVIZ_RUN_HIDDEN);
        return NULL;
    }
    if (opts->predict && session_head_missing(m->s)) {
        usage(err, "predict: %s", session_head_missing(m->s));
        return NULL;
    }
    attnviz_result *r = calloc(1, sizeof *r);
    AvErr e = {0};
    if (!r) {
        av_err(&e, "out of memory");
        to_status(&e, err);
        return NULL;
    }
    pthread_mutex_lock(&m->refs_lock);
    m->refs++;
    pthread_mutex_unlock(&m->refs_lock);
    r->m = m;
    r->spec = m->spec;
    if (take_list(opts->layers, opts->n_layers, c->num_layers, "layers", &r->layers, &r->spec.sel.n_layers, err) ||
        take_list(opts->heads, opts->n_heads, c->num_heads, "heads", &r->heads, &r->spec.sel.n_heads, err)) {
        attnviz_result_free(r);
        return NULL;
    }
    r->spec.sel.layers = r->layers;
    r->spec.sel.heads = r->heads;
    r->spec.capture.qk = 1;
    r->spec.capture.hidden = (opts->flags & ATTNVIZ_RUN_HIDDEN) != 0;
    r->spec.capture.max_tokens = opts->max_tokens;
    r->spec.predict.k = opts->predict;
    r->text_a = strdup(text_a);
    r->text_b = text_b ? strdup(text_b) : NULL;
    if (!r->text_a || (text_b && !r->text_b)) {
        av_err(&e, "out of memory");
        to_status(&e, err);
        attnviz_result_free(r);
        return NULL;
    }
    return r;
}

/* Under the model's lock: a Run of spec over the model's session, on the
 * model's run state and KV cache (lent: one pass at a time uses them, and they
 * only grow), given back by give_back. */
static void lend(attnviz_model *m, const RunSpec *spec, Run *run) {
    run_init(run, m->s, spec);
    run->rs = m->rs, run->kv = m->kv;
}

static void give_back(attnviz_model *m, Run *run) {
    m->rs = run->rs, m->kv = run->kv;
    memset(&run->rs, 0, sizeof run->rs);
    memset(&run->kv, 0, sizeof run->kv);
    run_free(run);
}

/* Under the model's lock: tokenized, and its capture allocated within the memory allowed. */
static int result_prepare(attnviz_result *r, AvErr *e) {
    Run run;
    lend(r->m, &r->spec, &run);
    int rc = run_tokens(&run, r->text_a, r->text_b, &r->enc, e);
    if (rc == 0) rc = run_capture_fits(&run, r->enc.n, e);
    if (rc == 0)
        rc = model_capture_select(&r->res.cap, &r->m->s->cfg, r->enc.n, 1, r->spec.capture.hidden, r->spec.sel.layers,
                                  r->spec.sel.n_layers, r->spec.sel.heads, r->spec.sel.n_heads, e);
    /* the stream's largest entries: the documents' massive activations, as the command line's (pipeline.h) */
    if (rc == 0) rc = run_flags_prepare(&r->res.cap, &r->m->s->cfg, e);
    give_back(r->m, &run);
    return rc;
}

/* Under the model's lock: one prepared input run alone, with its predictions spelled. */
static int result_forward(attnviz_result *r, AvErr *e) {
    const int k = r->spec.predict.k;
    Run run;
    lend(r->m, &r->spec, &run);
    int rc = run_forward(&run, &r->enc, &r->res.cap, k, &r->res.pred, e);
    /* sinks and massive activations, for the documents written (as the command line's: pipeline.h) */
    if (rc == 0)
        rc = run_flags_compute(&r->res.cap, r->spec.sel.layers, r->spec.sel.n_layers, r->spec.sel.heads,
                               r->spec.sel.n_heads, &r->res.flags, e);
    if (rc == 0 && k) rc = session_spell(r->m->s, r->res.pred.ids, r->res.pred.n * r->res.pred.k, &r->res.pred_words, e);
    give_back(r->m, &run);
    return rc;
}

ATTNVIZ_API attnviz_result *attnviz_run(attnviz_model *m, const char *text_a, const char *text_b,
                                        const attnviz_run_options *opts, attnviz_error *err) {
    if (!m) {
        usage(err, "attnviz_run: NULL model handle");
        return NULL;
    }
    if (!text_a) {
        usage(err, "attnviz_run: NULL text");
        return NULL;
    }
    const attnviz_run_options none = {0};
    attnviz_result *r = result_new(m, text_a, text_b, opts ? opts : &none, err);
    if (!r) return NULL;
    AvErr e = {0};
    pthread_mutex_lock(&m->lock);
    int rc = result_prepare(r, &e);
    if (rc == 0) rc = result_forward(r, &e);
    pthread_mutex_unlock(&m->lock);
    if (rc != 0) {
        to_status(&e, err);
        attnviz_result_free(r);
        return NULL;
    }
    ok(err);
    return r;
}

/* Runs the prepared inputs [0, n) packed as the CLI's --batch packs them: consecutive inputs share
 * a pass while they fit pack_tokens (and PACK_MAX_INPUTS); a longer one runs alone. */
static int run_packed(attnviz_result **rs, size_t n, int pack_tokens, size_t *failed, AvErr *e) {
    size_t i = 0;
    while (i < n) {
        if (rs[i]->enc.n > pack_tokens) {
            *failed = i;
            if (result_forward(rs[i], e) != 0) return -1;
            i++;
            continue;
        }
        TokEncoding encs[PACK_MAX_INPUTS];
        Capture *caps[PACK_MAX_INPUTS];
        int g = 0, tokens = 0;
        size_t first = i;
        while (i < n && g < PACK_MAX_INPUTS && rs[i]->enc.n <= pack_tokens && tokens + rs[i]->enc.n <= pack_tokens) {
            encs[g] = rs[i]->enc;
            caps[g++] = &rs[i]->res.cap;
            tokens += rs[i++]->enc.n;
        }
        *failed = first;
        Run run; /* the inputs' settings differ only in what their documents show */
        lend(rs[first]->m, &rs[first]->spec, &run);
        int rc = run_forward_packed(&run, encs, g, caps, e);
        give_back(rs[first]->m, &run);
        if (rc != 0) return -1;
    }
    return 0;
}

ATTNVIZ_API attnviz_status attnviz_run_batch(attnviz_model *m, const char *const *texts_a, const char *const *texts_b,
                                             size_t n, const attnviz_run_options *opts, int pack_tokens,
                                             attnviz_result **results, attnviz_error *err) {
    attnviz_error local;
    if (!err) err = &local; /* the status is err->code on every path */
    if (!m) return usage(err, "attnviz_run_batch: NULL model handle");
    if (!texts_a || !results) return usage(err, "attnviz_run_batch: NULL %s", texts_a ? "results" : "texts");
    for (size_t i = 0; i < n; i++) {
        results[i] = NULL;
        if (!texts_a[i]) return usage(err, "attnviz_run_batch: input %zu: NULL text", i);
    }
    const attnviz_run_options none = {0};
    if (!opts) opts = &none;
    if (pack_tokens < 0) pack_tokens = CLI_PACK_TOKENS;
    for (size_t i = 0; i < n; i++)
        if (!(results[i] = result_new(m, texts_a[i], texts_b ? texts_b[i] : NULL, opts, err))) goto fail;
    AvErr e = {0};
    size_t at = 0;
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    for (; rc == 0 && at < n; at++) rc = result_prepare(results[at], &e);
    if (rc == 0 && (pack_tokens == 0 || opts->predict)) { /* predictions need each input's own pass */
        for (at = 0; rc == 0 && at < n; at++) rc = result_forward(results[at], &e);
    } else if (rc == 0) {
        rc = run_packed(results, n, pack_tokens, &at, &e);
        at++;
    }
    pthread_mutex_unlock(&m->lock);
    if (rc != 0) {
        av_err_prefix(&e, "input %zu", at - 1);
        to_status(&e, err);
        goto fail;
    }
    ok(err);
    return ATTNVIZ_OK;
fail:
    for (size_t i = 0; i < n; i++) {
        attnviz_result_free(results[i]);
        results[i] = NULL;
    }
    return err->code;
}

ATTNVIZ_API int attnviz_result_n_tokens(const attnviz_result *r) { return r ? r->enc.n : 0; }
ATTNVIZ_API int attnviz_result_n_truncated(const attnviz_result *r) { return r ? r->enc.n_truncated : 0; }

ATTNVIZ_API int attnviz_result_n_layers(const attnviz_result *r) {
    return r ? (r->layers ? r->spec.sel.n_layers : r->res.cap.n_layers) : 0;
}

ATTNVIZ_API int attnviz_result_n_heads(const attnviz_result *r) {
    return r ? (r->heads ? r->spec.sel.n_heads : r->res.cap.n_heads) : 0;
}

ATTNVIZ_API int attnviz_result_layer(const attnviz_result *r, int i) {
    if (!r || i < 0 || i >= attnviz_result_n_layers(r)) return -1;
    return r->layers ? r->layers[i] : i;
}

ATTNVIZ_API int attnviz_result_head(const attnviz_result *r, int i) {
    if (!r || i < 0 || i >= attnviz_result_n_heads(r)) return -1;
    return r->heads ? r->heads[i] : i;
}

ATTNVIZ_API const int *attnviz_result_ids(const attnviz_result *r) { return r ? r->enc.ids : NULL; }

ATTNVIZ_API const char *attnviz_result_token(const attnviz_result *r, int i) {
    return r && i >= 0 && i < r->enc.n ? r->enc.tokens[i] : NULL;
}

ATTNVIZ_API const char *attnviz_result_token_text(const attnviz_result *r, int i) {
    return r && i >= 0 && i < r->enc.n ? r->enc.display[i] : NULL;
}

ATTNVIZ_API int attnviz_result_token_is_special(const attnviz_result *r, int i) {
    return r && i >= 0 && i < r->enc.n && r->enc.special ? r->enc.special[i] : 0;
}

ATTNVIZ_API int attnviz_result_shape(const attnviz_result *r, attnviz_tensor t, size_t shape[4]) {
    if (!r || !shape) return 0;
    const size_t L = (size_t)attnviz_result_n_layers(r), H = (size_t)attnviz_result_n_heads(r), n = (size_t)r->enc.n;
    switch (t) {
    case ATTNVIZ_ATTENTION:
        if (!r->res.cap.attn) return 0;
        shape[0] = L, shape[1] = H, shape[2] = n, shape[3] = n;
        return 4;
    case ATTNVIZ_QUERIES:
    case ATTNVIZ_KEYS:
        if (!r->res.cap.q) return 0;
        shape[0] = L, shape[1] = H, shape[2] = n, shape[3] = (size_t)r->res.cap.head_dim;
        return 4;
    case ATTNVIZ_HIDDEN:
        if (!r->res.cap.hidden) return 0;
        shape[0] = (size_t)r->res.cap.n_layers + 1, shape[1] = n, shape[2] = (size_t)r->res.cap.hidden_size;
        return 3;
    }
    return 0;
}

ATTNVIZ_API const float *attnviz_result_data(const attnviz_result *r, attnviz_tensor t) {
    if (!r) return NULL;
    switch (t) {
    case ATTNVIZ_ATTENTION: return r->res.cap.attn;
    case ATTNVIZ_QUERIES: return r->res.cap.q;
    case ATTNVIZ_KEYS: return r->res.cap.k;
    case ATTNVIZ_HIDDEN: return r->res.cap.hidden;
    }
    return NULL;
}

ATTNVIZ_API attnviz_status attnviz_result_copy(const attnviz_result *r, attnviz_tensor t, float *dst, size_t n_floats,
                                               attnviz_error *err) {
    if (!r) return usage(err, "attnviz_result_copy: NULL result handle");
    size_t shape[4];
    int nd = attnviz_result_shape(r, t, shape);
    if (nd == 0)
        return usage(err, "attnviz_result_copy: the result holds no %s",
                     t == ATTNVIZ_HIDDEN ? "hidden states (run with ATTNVIZ_RUN_HIDDEN)" : "such tensor");
    size_t count = 1;
    for (int i = 0; i < nd; i++) count *= shape[i];
    if (!dst) return usage(err, "attnviz_result_copy: NULL destination");
    if (n_floats < count) return usage(err, "attnviz_result_copy: the destination holds %zu floats, %zu needed", n_floats, count);
    memcpy(dst, attnviz_result_data(r, t), count * sizeof *dst);
    ok(err);
    return ATTNVIZ_OK;
}

/* a result with predictions was run with spec.predict.k set (results exist only once run) */
static const CapPredictions *result_pred(const attnviz_result *r) { return r && r->spec.predict.k ? &r->res.pred : NULL; }
ATTNVIZ_API int attnviz_result_n_predictions(const attnviz_result *r) { return result_pred(r) ? r->res.pred.n : 0; }
ATTNVIZ_API int attnviz_result_predict_k(const attnviz_result *r) { return result_pred(r) ? r->res.pred.k : 0; }
ATTNVIZ_API const int *attnviz_result_prediction_positions(const attnviz_result *r) {
    return result_pred(r) ? r->res.pred.position : NULL;
}
ATTNVIZ_API const int *attnviz_result_prediction_ids(const attnviz_result *r) { return result_pred(r) ? r->res.pred.ids : NULL; }
ATTNVIZ_API const float *attnviz_result_prediction_probs(const attnviz_result *r) {
    return result_pred(r) ? r->res.pred.probs : NULL;
}

/* ---- outputs ---- */

/* The document the CLI's writers read, for this result's settings. */
static void result_doc(const attnviz_result *r, const RunSpec *o, OutDoc *d) {
    input_doc(r->m->s, o, &r->res, d, &r->enc, &r->res.cap, r->text_a, r->text_b);
}

/* The CLI's writer of that kind (route.c's table) into path, atomically (a temporary file
 * renamed into place), over the document of the result's settings as this call changes them. */
static attnviz_status write_out(const attnviz_result *r, const char *path, const RunSpec *o, int what,
                                attnviz_error *err) {
    OutDoc d;
    AvErr e = {0};
    result_doc(r, o, &d);
    if (run_write_file(path, &d, what, o, &e) != 0) return to_status(&e, err);
    ok(err);
    return ATTNVIZ_OK;
}

ATTNVIZ_API attnviz_status attnviz_result_write_json(const attnviz_result *r, const char *path, int precision,
                                                     unsigned flags, attnviz_error *err) {
    if (!r) return usage(err, "attnviz_result_write_json: NULL result handle");
    if (!path || !*path) return usage(err, "attnviz_result_write_json: no path");
    if (precision < 0 || precision > 9) return usage(err, "precision is 1-9 (0: 6), not %d", precision);
    if (flags & ~ATTNVIZ_JSON_QK) return usage(err, "unknown flags 0x%x for attnviz_result_write_json", flags & ~ATTNVIZ_JSON_QK);
    RunSpec o = r->spec;
    o.output.precision = precision ? precision : 6;
    o.capture.qk = (flags & ATTNVIZ_JSON_QK) != 0;
    return write_out(r, path, &o, W_JSON, err);
}

/* A view the page opens on (templates/view_*.js register them), as the CLI's --view checks it. */
static attnviz_status check_view(const char *view, attnviz_error *err) {
    char views[128];
    if (view && !html_view_known(view, 0, views, sizeof views)) return usage(err, "view is %s, not '%s'", views, view);
    return ATTNVIZ_OK;
}

ATTNVIZ_API attnviz_status attnviz_result_write_page(const attnviz_result *r, const char *path, const char *view,
                                                     attnviz_error *err) {
    if (!r) return usage(err, "attnviz_result_write_page: NULL result handle");
    if (!path || !*path) return usage(err, "attnviz_result_write_page: no path");
    if (check_view(view, err)) return ATTNVIZ_ERR_USAGE;
    RunSpec o = r->spec;
    o.output.view = view;
    return write_out(r, path, &o, W_HTML, err);
}

ATTNVIZ_API attnviz_status attnviz_render(const char *input, const attnviz_render_options *opts, attnviz_error *err) {
    if (!input || !*input) return usage(err, "attnviz_render: no input (.npz or .safetensors)");
    if (!opts) return usage(err, "attnviz_render: NULL options (set html_path or json_path)");
    if (!opts->html_path && !opts->json_path) return usage(err, "attnviz_render: neither html_path nor json_path");
    if (check_view(opts->view, err)) return ATTNVIZ_ERR_USAGE;
    if (opts->theme && strcmp(opts->theme, "light") && strcmp(opts->theme, "dark"))
        return usage(err, "theme is light or dark, not '%s'", opts->theme);
    if (opts->n_show_heads < 0 || (opts->n_show_heads > 0 && !opts->show_heads))
        return usage(err, "show_heads: %d heads given but the list is NULL", opts->n_show_heads);
    RunSpec o = {0};
    o.sel.layer = opts->layer < 0 ? -1 : opts->layer;
    o.sel.head = opts->head < 0 ? -1 : opts->head;
    o.sel.show_heads = opts->n_show_heads ? opts->show_heads : NULL;
    o.sel.n_show_heads = opts->n_show_heads;
    o.output.precision = 6;
    o.output.html_path = opts->html_path;
    o.output.json_path = opts->json_path;
    o.output.view = opts->view;
    o.output.theme = opts->theme;
    o.capture.qk = opts->qk != 0;
    o.predict.top_p = 1.0;
    o.quiet = 1;
    RenderSpec rs = {input, opts->meta};
    AvErr e = {0};
    if (pipeline_render(&rs, &o, &e) != 0) return to_status(&e, err);
    ok(err);
    return ATTNVIZ_OK;
}

/* ---- generation ---- */

typedef struct {
    attnviz_token_callback cb;
    void *ctx;
    const Session *s;
    int stopped; /* the callback asked */
    float *rows; /* a prompt token's rows, repacked */
    int failed;
} GenSinkCtx;

/* The attention of position i of a (n_pos positions) into t. */
static void token_attention(attnviz_token *t, const PipeGenAttn *a, int i) {
    if (!a) return;
    const size_t B = (size_t)a->n_layers * (size_t)a->n_heads;
    t->n_layers = a->n_layers, t->n_heads = a->n_heads, t->layers = a->layers, t->heads = a->heads;
    t->top_k = a->top_k;
    if (a->keys) t->top_keys = a->keys + (size_t)i * B * a->top_k, t->top_weights = a->weights + (size_t)i * B * a->top_k;
    if (a->entropy)
        t->entropy = a->entropy + (size_t)i * B, t->sink = a->sink + (size_t)i * B, t->distance = a->distance + (size_t)i * B;
    t->n_keys = a->pos0 + i + 1;
    if (a->rows) t->rows = a->rows + (size_t)i * B * a->n_keys;
}

static int gen_on_prompt(void *ctx, const int *ids, int n, const PipeGenAttn *a) {
    GenSinkCtx *g = ctx;
    if (!a) return 0;
    /* a's rows are (n_pos, blocks, n) for the prompt: each position's row is read over its n_keys, the rest is 0 */
    for (int i = 0; i < n; i++) {
        attnviz_token t = {0};
        t.index = -1, t.position = i, t.id = ids[i], t.text = "";
        t.token = session_token(g->s, ids[i]);
        if (!t.token) t.token = "";
        token_attention(&t, a, i);
        if (a->rows) {
            /* a prompt row's keys end at its position: (blocks, i + 1) as a token's are */
            const size_t B = (size_t)a->n_layers * (size_t)a->n_heads, nk = (size_t)i + 1;
            if (!g->rows && !(g->rows = malloc(B * (size_t)n * sizeof *g->rows))) return g->failed = 1;
            for (size_t b = 0; b < B; b++) memcpy(g->rows + b * nk, t.rows + b * a->n_keys, nk * sizeof *g->rows);
            t.rows = g->rows;
        }
        if (g->cb(g->ctx, &t)) return g->stopped = 1;
    }
    return 0;
}

static int gen_on_token(void *ctx, const PipeGenToken *k) {
    GenSinkCtx *g = ctx;
    attnviz_token t = {0};
    t.index = k->index, t.position = k->position, t.id = k->id, t.token = k->token, t.text = k->text;
    t.logprob = k->logprob, t.n_top = k->n_top, t.top_ids = k->top_ids, t.top_logprobs = k->top_logprobs;
    token_attention(&t, k->attn, 0);
    if (g->cb(g->ctx, &t)) return g->stopped = 1;
    return 0;
}

ATTNVIZ_API attnviz_status attnviz_generate(attnviz_model *m, const char *prompt, const attnviz_generate_options *opts,
                                            attnviz_token_callback cb, void *ctx, attnviz_finish *finish,
                                            attnviz_error *err) {
    if (finish) *finish = ATTNVIZ_FINISH_LENGTH;
    if (!m) return usage(err, "attnviz_generate: NULL model handle");
    if (!prompt) return usage(err, "attnviz_generate: NULL prompt");
    if (!cb) return usage(err, "attnviz_generate: NULL callback");
    attnviz_generate_options o = {.max_tokens = 16, .top_p = 1.0};
    if (opts) o = *opts;
    if (o.flags & ~(unsigned)(ATTNVIZ_GEN_ATTENTION | ATTNVIZ_GEN_ROWS | ATTNVIZ_GEN_PROMPT))
        return usage(err, "attnviz_generate: unknown flags 0x%x", o.flags & ~(unsigned)(ATTNVIZ_GEN_ATTENTION | ATTNVIZ_GEN_ROWS | ATTNVIZ_GEN_PROMPT));
    if ((o.flags & (ATTNVIZ_GEN_ROWS | ATTNVIZ_GEN_PROMPT)) && !(o.flags & ATTNVIZ_GEN_ATTENTION))
        return usage(err, "attnviz_generate: ATTNVIZ_GEN_ROWS and ATTNVIZ_GEN_PROMPT go with ATTNVIZ_GEN_ATTENTION");
    if (o.n_stop < 0 || o.n_stop > PIPE_GEN_MAX_STOP || (o.n_stop && !o.stop))
        return usage(err, "attnviz_generate: %d stop strings (0 to %d, not NULL)", o.n_stop, PIPE_GEN_MAX_STOP);
    if ((o.layers && o.n_layers < 1) || (o.heads && o.n_heads < 1))
        return usage(err, "attnviz_generate: an empty layers or heads list (NULL for all)");
    PipeGenSpec gs = {.max_new = o.max_tokens, .temperature = o.temperature, .top_p = o.top_p == 0 ? 1.0 : o.top_p,
                      .seed = o.seed, .n_stop = o.n_stop, .logprobs = 1, .top_logprobs = o.top_logprobs,
                      .attn = (o.flags & ATTNVIZ_GEN_ATTENTION) != 0, .layers = o.layers, .n_layers = o.n_layers,
                      .heads = o.heads, .n_heads = o.n_heads, .top_k = o.top_k, .stats = 1,
                      .rows = (o.flags & ATTNVIZ_GEN_ROWS) != 0, .prompt = (o.flags & ATTNVIZ_GEN_PROMPT) != 0};
    for (int i = 0; i < o.n_stop; i++) gs.stop[i] = o.stop[i];
    GenSinkCtx g = {cb, ctx, m->s, 0, NULL, 0};
    PipeGenSink sink = {gen_on_prompt, gen_on_token, &g};
    PipeGenResult res = {0};
    AvErr e = {0};
    int *ids = NULL, n = 0;
    Run run;
    pthread_mutex_lock(&m->lock);
    lend(m, &m->spec, &run);
    int rc = session_prompt_ids(m->s, prompt, 0, &ids, &n, &e);
    if (rc == 0) rc = run_generate(&run, ids, n, &gs, &sink, &res, &e);
    give_back(m, &run);
    pthread_mutex_unlock(&m->lock);
    free(ids);
    free(g.rows);
    if (rc == 0 && g.failed) rc = av_err(&e, "out of memory for the prompt's rows");
    if (rc != 0) {
        pipeline_gen_result_free(&res);
        return to_status(&e, err);
    }
    if (finish)
        *finish = res.finish == PIPE_FINISH_CANCELLED ? ATTNVIZ_FINISH_CALLBACK
                  : res.finish == PIPE_FINISH_STOP    ? ATTNVIZ_FINISH_STOP
                  : res.finish == PIPE_FINISH_EOS     ? ATTNVIZ_FINISH_EOS
                                                      : ATTNVIZ_FINISH_LENGTH;
    pipeline_gen_result_free(&res);
    ok(err);
    return ATTNVIZ_OK;
}
