/* live.c — the models, runs and capture cache behind attnviz serve (live.h).
 *
 * Locks: `mu` guards the run table, every run's capture pointer, users count
 * and LRU stamp, the cache total and the queue count; each model's `fwd` is
 * held for a whole forward pass (tokenizing included: the model's Run is one
 * caller at a time; its Session is read only). A thread never waits for `fwd` while holding `mu`. A
 * run's tokens, meta and warnings are written once, before its capture is
 * published under `mu`, and only read after that. */
#include "live.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image.h"
#include "kernels.h"
#include "model.h"
#include "normattn.h"
#include "output.h"
#include "pipeline.h"
#include "session.h"
#include "predict.h"
#include "report.h"
#include "generate.h"
#include "seq2seq.h"
#include "tiles.h"
#include "util.h"

typedef struct {
    Session *s;  /* the model, tokenizer and labels: read only */
    Run *run;    /* the server's settings (Live.page) over it, and the passes' scratch: under fwd */
    pthread_mutex_t fwd;
    int fwd_ok;
} LiveModel;

struct LiveRun {
    unsigned id;
    int model, k;
    char *a, *b;            /* b may be NULL */
    int chat;               /* a is a chat the model's template rendered: tokenized with nothing added */
    TokEncoding enc;        /* set by the first forward pass */
    int have_enc;
    char *meta, *warnings;  /* JSON, set with the first capture */
    char *noted;            /* the warnings so far, JSON strings joined by commas (NULL: none) */
    int noted_bad;          /* a warning was lost (out of memory) */
    /* what its pass left: res.cap lean (no q/k: cap_has_qk) when not (or no
     * longer) computed; res.gen, gen_words and gen_text when it generated */
    InputResult res;
    /* an encoder-decoder model's run: b is the decoder's text, enc the source's
     * tokens, dec the decoder's; s2s its three stacks in full (enc_attn NULL
     * when not computed). Full matrices rather than q/k: the seq2seq engine's
     * scores (T5's relative bias, cross attention over the encoder's output)
     * have no recompute path, and a model of at most cfg_max_tokens positions
     * a side keeps them within --cache-mb or is refused (413). */
    TokEncoding dec;
    S2sCapture s2s;
    /* generate > 0: the decoder's tokens were decoded from its start token (b
     * NULL), up to that many; the steps, their spellings and the text, for the
     * page's generation strip (a recompute runs teacher-forced over dec, as
     * the CLI's --generate writes its stacks) */
    int generate;
    /* an uploaded picture's run (a vision encoder; a the whole model's text or ""): its tokens are enc's
     * (a view of the picture's own), its pixels made again from its kept picture when evicted */
    PipeImage *img;
    size_t bytes;
    int users;              /* holders: never evicted or forgotten while > 0 */
    unsigned long long used;
};

struct Live {
    LiveLimits lim;
    RunSpec page;           /* the settings each model's Run was opened with */
    LiveModel *m;
    int n_models;
    pthread_mutex_t mu;
    LiveRun **runs;
    int n_runs, cap_runs;
    size_t cached;
    unsigned next_id;
    unsigned long long clock;
    int queued;
};

#define LIVE_LONG_FROM 4096

static int tile_side(const Live *lv) { return lv->lim.tile_side > 0 ? lv->lim.tile_side : TILE_SIDE; }
static int is_long(const Live *lv, int n) { return n > (lv->lim.long_from > 0 ? lv->lim.long_from : LIVE_LONG_FROM); }

/* ---------------------------------------------------------------- models */

int live_open(Live **out, const ModelSpec *models, int n_models, const RunSpec *page, const LiveLimits *lim, AvErr *e) {
    Live *lv = calloc(1, sizeof *lv);
    *out = lv;
    if (!lv || !(lv->m = calloc((size_t)n_models, sizeof *lv->m))) return av_err(e, "out of memory");
    lv->lim = *lim;
    lv->page = *page;
    lv->page.text_a = lv->page.text_b = NULL;
    lv->page.quiet = 0; /* the run's warnings are collected (collect_notes) and travel in responses */
    lv->page.profile = 0;
    if (pthread_mutex_init(&lv->mu, NULL) != 0) return av_err(e, "cannot create a lock");
    for (int i = 0; i < n_models; i++) {
        LiveModel *lm = &lv->m[i];
        if (pthread_mutex_init(&lm->fwd, NULL) != 0) return av_err(e, "cannot create a lock");
        lm->fwd_ok = 1;
        lv->n_models = i + 1;
        const char *dir, *why;
        /* the message names the model when the run's does not (the run's own line is the command line's) */
        if (session_open_for(&lm->s, &models[i], &lv->page, &dir, &why, e) != 0 || run_open(&lm->run, lm->s, &lv->page, e) != 0)
            return dir && strstr(e->msg, dir) ? -1 : av_err_prefix(e, "%s", dir ? dir : "model");
        if (!lm->s->model.cfg.num_layers) return av_err(e, "%s: no model weights", dir);
        /* an encoder and decoder of different depths: each stack's layers for the pages (run_seq2seq.c) */
        if (lm->s->model.cfg.enc_dec && run_seq2seq_layers(lm->run, e) != 0) return av_err_prefix(e, "%s", dir);
    }
    return 0;
}

static void liverun_free(LiveRun *r) {
    if (!r) return;
    free(r->a);
    free(r->b);
    if (r->img) memset(&r->enc, 0, sizeof r->enc); /* the picture's own */
    run_image_free(r->img);
    tok_encoding_free(&r->enc);
    tok_encoding_free(&r->dec);
    s2s_capture_free(&r->s2s);
    input_result_free(&r->res);
    free(r->meta);
    free(r->warnings);
    free(r->noted);
    free(r);
}

void live_close(Live *lv) {
    if (!lv) return;
    for (int i = 0; i < lv->n_runs; i++) liverun_free(lv->runs[i]);
    free(lv->runs);
    for (int i = 0; lv->m && i < lv->n_models; i++) {
        run_close(lv->m[i].run);
        session_close(lv->m[i].s);
        if (lv->m[i].fwd_ok) pthread_mutex_destroy(&lv->m[i].fwd);
    }
    free(lv->m);
    pthread_mutex_destroy(&lv->mu);
    free(lv);
}

int live_n_models(const Live *lv) { return lv->n_models; }

const char *live_qk_precision_name(int prec) { return prec == CAP_QK_F16 ? "f16" : prec == CAP_QK_BF16 ? "bf16" : "f32"; }

static const ModelConfig *model_cfg(const Live *lv, int m) { return &lv->m[m].s->model.cfg; }

int live_model_seq2seq(const Live *lv, int m) { return m >= 0 && m < lv->n_models && model_cfg(lv, m)->enc_dec; }

/* the run's capture is there (either kind) */
static int cached(const LiveRun *r) { return cap_has_qk(&r->res.cap) || r->s2s.enc_attn != NULL; }

char *live_models_json(const Live *lv) {
    AvBuf b;
    if (av_buf_open(&b)) return NULL;
    fputs("{\"models\":[", b.f);
    for (int i = 0; i < lv->n_models; i++) {
        const ModelConfig *c = model_cfg(lv, i);
        fprintf(b.f, "%s{\"id\":%d,\"name\":", i ? "," : "", i);
        json_write_string(b.f, lv->m[i].s->name);
        fputs(",\"family\":", b.f);
        json_write_string(b.f, c->model_type);
        /* encoder-decoder models take decoder_text and show three stacks; no predictions in serve (yet) */
        /* chat: a decoder whose chat template was read (the page offers its chat box) */
        /* a vision-language model runs a picture inside its text as written (/api/image: no chat, no predictions) */
        int chat = !session_chat_missing(lv->m[i].s) && !c->vlm;
        fprintf(b.f, ",\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"max_tokens\":%d,\"causal\":%s,"
                     "\"predict\":%s,\"enc_dec\":%s,\"chat\":%s,\"image\":%s,\"image_text\":%s",
                c->num_layers, c->num_heads, c->num_kv_heads ? c->num_kv_heads : c->num_heads, c->head_dim,
                cfg_max_tokens(c), c->causal ? "true" : "false",
                session_head_missing(lv->m[i].s) || c->enc_dec || c->vlm ? "false" : "true", c->enc_dec ? "true" : "false",
                chat ? "true" : "false", c->vision || c->vlm ? "true" : "false",
                lv->m[i].s->model.text || c->vlm ? "true" : "false");
        if (c->vlm) { /* the text's placeholder for the picture, which the page's text box asks for */
            const char *ph = run_image_placeholder(lv->m[i].s);
            fputs(",\"vlm\":true,\"image_placeholder\":", b.f);
            json_write_string(b.f, ph ? ph : "");
            fputs(",\"image_example\":", b.f);
            json_write_string(b.f, run_image_example(lv->m[i].s));
        }
        fputc('}', b.f);
    }
    fputs("]}", b.f);
    return av_buf_close(&b, !ferror(b.f));
}

/* ---------------------------------------------------------------- the run table (under mu) */

static LiveRun *find_id(const Live *lv, unsigned id) {
    for (int i = 0; i < lv->n_runs; i++)
        if (lv->runs[i]->id == id) return lv->runs[i];
    return NULL;
}

static int same_text(const char *x, const char *y) { return (!x && !y) || (x && y && strcmp(x, y) == 0); }

static LiveRun *find_input(const Live *lv, int m, const char *a, const char *b, int k, int generate, int chat) {
    for (int i = 0; i < lv->n_runs; i++) {
        LiveRun *r = lv->runs[i];
        if (!r->img && r->model == m && r->k == k && r->generate == generate && r->chat == chat && same_text(r->a, a) &&
            same_text(r->b, b))
            return r;
    }
    return NULL;
}

static void drop_capture(Live *lv, LiveRun *r) {
    if (!cached(r)) return;
    model_capture_free(&r->res.cap);
    s2s_capture_free(&r->s2s);
    lv->cached -= r->bytes;
    r->bytes = 0;
}

/* Frees captures, least recently used first, until `need` more bytes fit. */
static void make_room(Live *lv, size_t need) {
    while (lv->cached + need > lv->lim.cache_bytes) {
        LiveRun *old = NULL;
        for (int i = 0; i < lv->n_runs; i++) {
            LiveRun *r = lv->runs[i];
            if (cached(r) && r->users == 0 && (!old || r->used < old->used)) old = r;
        }
        if (!old) return; /* everything cached is in use: over budget until released */
        drop_capture(lv, old);
    }
}

/* A new run, forgetting the least recently used idle one when the table is full. */
static LiveRun *add_run(Live *lv, int m, const char *a, const char *b, int k, int generate, int chat) {
    if (lv->n_runs >= lv->lim.max_runs) {
        int old = -1;
        for (int i = 0; i < lv->n_runs; i++)
            if (lv->runs[i]->users == 0 && (old < 0 || lv->runs[i]->used < lv->runs[old]->used)) old = i;
        if (old >= 0) {
            drop_capture(lv, lv->runs[old]);
            liverun_free(lv->runs[old]);
            lv->runs[old] = lv->runs[--lv->n_runs];
        }
    }
    if (lv->n_runs == lv->cap_runs) {
        int nc = lv->cap_runs ? 2 * lv->cap_runs : 16;
        LiveRun **nr = realloc(lv->runs, (size_t)nc * sizeof *nr);
        if (!nr) return NULL;
        lv->runs = nr, lv->cap_runs = nc;
    }
    LiveRun *r = calloc(1, sizeof *r);
    if (!r || !(r->a = strdup(a)) || (b && !(r->b = strdup(b)))) {
        liverun_free(r);
        return NULL;
    }
    r->id = ++lv->next_id;
    r->model = m, r->k = k, r->generate = generate, r->chat = chat;
    r->used = ++lv->clock;
    lv->runs[lv->n_runs++] = r;
    return r;
}

/* ---------------------------------------------------------------- forward passes */

typedef struct {
    double queue, tokenize, forward;
} Times;

/* Waits for model m's turn within the time limit; -1 with *st set when it can't. */
static int take_turn(Live *lv, int m, LiveStatus *st, double *waited, AvErr *e) {
    double t0 = av_now_ms();
    pthread_mutex_lock(&lv->mu);
    if (lv->queued >= lv->lim.max_queue) {
        pthread_mutex_unlock(&lv->mu);
        *st = LIVE_BUSY;
        return av_err(e, "%d requests are already waiting for the model: try again", lv->lim.max_queue);
    }
    lv->queued++;
    pthread_mutex_unlock(&lv->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double s = lv->lim.timeout_ms / 1000.0;
    until.tv_sec += (time_t)s;
    until.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    int rc = pthread_mutex_timedlock(&lv->m[m].fwd, &until);
    *waited = av_now_ms() - t0;
    if (rc != 0) {
        pthread_mutex_lock(&lv->mu);
        lv->queued--;
        pthread_mutex_unlock(&lv->mu);
        *st = LIVE_TIMEOUT;
        return av_err(e, "the model stayed busy for %.0f s (the time limit)", lv->lim.timeout_ms / 1000.0);
    }
    return 0;
}

static void end_turn(Live *lv, int m) {
    pthread_mutex_unlock(&lv->m[m].fwd);
    pthread_mutex_lock(&lv->mu);
    lv->queued--;
    pthread_mutex_unlock(&lv->mu);
}

/* The reporter a worker installs for its thread while the pipeline works on
 * run r: the pipeline's warnings, in the command line's words, become the
 * run's JSON warnings; its other notes are not the client's business. */
static void collect_note(void *ctx, AvNoteKind kind, const char *msg) {
    LiveRun *r = ctx;
    if (kind != AV_NOTE_WARNING) return;
    char *item = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&item, &len);
    if (!f) {
        r->noted_bad = 1;
        return;
    }
    json_write_string(f, msg);
    if (fclose(f) != 0) {
        free(item);
        r->noted_bad = 1;
        return;
    }
    size_t had = r->noted ? strlen(r->noted) : 0;
    char *joined = realloc(r->noted, had + 1 + len + 1);
    if (!joined) {
        free(item);
        r->noted_bad = 1;
        return;
    }
    if (had) joined[had++] = ',';
    memcpy(joined + had, item, len + 1);
    r->noted = joined;
    free(item);
}

static void collect_notes(LiveRun *r) { av_set_thread_reporter(&(AvReporter){collect_note, r, 0}); }

static void drop_note(void *ctx, AvNoteKind kind, const char *msg) { (void)ctx, (void)kind, (void)msg; }

/* A pass whose warnings were already given with the run's first. */
static void drop_notes(void) { av_set_thread_reporter(&(AvReporter){drop_note, NULL, 0}); }

static void end_notes(void) { av_set_thread_reporter(NULL); }

/* The document of run r with what its pass left in res: the server's settings, with
 * predictions as the run asked (r->k), never generation (as the CLI: none unless asked);
 * an uploaded picture's run, its image (after its first pass). */
static void run_document(const Live *lv, const LiveRun *r, InputResult *res, OutDoc *d) {
    RunSpec o = lv->page;
    o.predict.k = r->k, o.predict.generate_n = 0;
    res->image = r->img ? run_image_out(r->img) : NULL;
    input_doc(lv->m[r->model].s, &o, res, d, &r->enc, &res->cap, r->a, r->b);
}

/* meta and warnings of a run's first pass (res: what it left, its predictions spelled here). */
static int describe(Live *lv, LiveRun *r, InputResult *res, AvErr *e) {
    const LiveModel *lm = &lv->m[r->model];
    const Capture *cap = &res->cap;
    if (r->noted_bad) return av_err(e, "out of memory for the run's warnings");
    OutDoc d;
    if (r->k > 0 && session_spell(lm->s, res->pred.ids, res->pred.n * res->pred.k, &res->pred_words, e) != 0) return -1;
    run_document(lv, r, res, &d);
    AvBuf b;
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    int rc = html_write_meta(b.f, &d, e);
    if (rc == 0 && fflush(b.f) == 0 && b.len > 0 && b.s[b.len - 1] == '}') {
        /* the tile store's geometry, for the page (tiles.h): a member of meta */
        const int n = r->enc.n, side = tile_side(lv), from = lv->lim.long_from > 0 ? lv->lim.long_from : LIVE_LONG_FROM;
        fseek(b.f, -1, SEEK_CUR);
        fprintf(b.f, ",\"tiles\":{\"side\":%d,\"levels\":%d,\"long\":%s,\"from\":%d,\"top_k\":%d,\"stats\":%s}}", side,
                tile_levels(n, side), is_long(lv, n) ? "true" : "false", from, cap->tel ? cap->tel_top_k : 0,
                cap->tel ? "true" : "false");
    }
    if (!(r->meta = av_buf_close(&b, rc == 0))) return rc ? -1 : av_err(e, "out of memory");
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    fprintf(b.f, "[%s]", r->noted ? r->noted : "");
    if (!(r->warnings = av_buf_close(&b, !ferror(b.f)))) return av_err(e, "out of memory");
    return 0;
}

/* meta and warnings of an encoder-decoder run's first pass: the CLI's document for
 * its source and decoder text (no tile geometry: its stacks are kept whole). */
static int describe_s2s(Live *lv, LiveRun *r, const S2sCapture *cap, AvErr *e) {
    if (r->noted_bad) return av_err(e, "out of memory for the run's warnings");
    OutDoc d;
    CapStack stacks[3];
    run_seq2seq_doc(lv->m[r->model].run, &d, stacks, &r->enc, &r->dec, cap, NULL, r->a, r->generate ? r->res.gen_text : r->b);
    if (r->generate) d.gen = &r->res.gen, d.gen_words = &r->res.gen_words, d.gen_text = r->res.gen_text;
    AvBuf b;
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    int rc = html_write_meta(b.f, &d, e);
    if (!(r->meta = av_buf_close(&b, rc == 0))) return rc ? -1 : av_err(e, "out of memory");
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    fprintf(b.f, "[%s]", r->noted ? r->noted : "");
    if (!(r->warnings = av_buf_close(&b, !ferror(b.f)))) return av_err(e, "out of memory");
    return 0;
}

/* An encoder-decoder run's pass (in the model's turn, notes collected): its
 * tokens once, then the three stacks, within the cache's budget. */
static LiveStatus s2s_pass(Live *lv, LiveRun *r, Times *t, AvErr *e) {
    LiveModel *lm = &lv->m[r->model];
    if (!r->have_enc) {
        double t0 = av_now_ms();
        const int rc = r->generate ? run_seq2seq_generate(lm->run, r->a, r->generate, &r->enc, &r->dec, &r->res.gen,
                                                          &r->res.gen_words, &r->res.gen_text, e)
                                   : run_seq2seq_tokens(lm->run, r->a, r->b ? r->b : "", &r->enc, &r->dec, e);
        if (rc != 0 || r->enc.n < 1) {
            if (rc == 0) av_err(e, "the source has no tokens");
            tok_encoding_free(&r->enc);
            tok_encoding_free(&r->dec);
            input_result_free(&r->res);
            return LIVE_BAD_INPUT;
        }
        t->tokenize = av_now_ms() - t0;
        r->have_enc = 1;
    }
    const double need = s2s_capture_bytes(&lm->s->model, r->enc.n, r->dec.n);
    if (need > (double)lv->lim.cache_bytes) {
        av_err(e, "%d source and %d decoder tokens need %.0f MB of attention (three stacks, every layer and head), "
                  "above the server's --cache-mb %.0f", r->enc.n, r->dec.n, need / 1e6, (double)lv->lim.cache_bytes / 1e6);
        return LIVE_TOO_BIG;
    }
    const size_t bytes = (size_t)need;
    pthread_mutex_lock(&lv->mu);
    make_room(lv, bytes);
    pthread_mutex_unlock(&lv->mu);
    const int first = r->meta == NULL;
    if (!first) drop_notes();
    S2sCapture cap = {0};
    double t0 = av_now_ms();
    if (run_seq2seq_forward(lm->run, &r->enc, &r->dec, &cap, e) != 0) {
        s2s_capture_free(&cap);
        return LIVE_FAILED;
    }
    t->forward = av_now_ms() - t0;
    if (first && describe_s2s(lv, r, &cap, e) != 0) {
        s2s_capture_free(&cap);
        return LIVE_FAILED;
    }
    pthread_mutex_lock(&lv->mu);
    r->s2s = cap;
    r->bytes = bytes;
    lv->cached += bytes;
    r->used = ++lv->clock;
    pthread_mutex_unlock(&lv->mu);
    return LIVE_OK;
}

/* Makes sure r (held by the caller) has its capture, computing it in the model's turn. */
static LiveStatus ensure(Live *lv, LiveRun *r, Times *t, AvErr *e) {
    LiveStatus st = LIVE_FAILED;
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&lv->mu);
    int have = cached(r);
    if (have) r->used = ++lv->clock;
    pthread_mutex_unlock(&lv->mu);
    if (have) return LIVE_OK;
    if (take_turn(lv, r->model, &st, &t->queue, e)) return st;
    LiveModel *lm = &lv->m[r->model];
    const ModelConfig *c = model_cfg(lv, r->model);
    InputResult res = {0}; /* this pass's; its capture is published into the run */
    st = LIVE_FAILED;
    pthread_mutex_lock(&lv->mu);
    have = cached(r); /* computed while we waited */
    pthread_mutex_unlock(&lv->mu);
    if (have) {
        st = LIVE_OK;
        goto done;
    }
    collect_notes(r);
    if (c->enc_dec) {
        st = s2s_pass(lv, r, t, e);
        goto done;
    }
    if (!r->have_enc) {
        double t0 = av_now_ms();
        if ((r->chat ? run_tokens_chat(lm->run, r->a, &r->enc, e) : run_tokens(lm->run, r->a, r->b, &r->enc, e)) != 0) {
            tok_encoding_free(&r->enc);
            st = LIVE_BAD_INPUT;
            goto done;
        }
        t->tokenize = av_now_ms() - t0;
        if (r->enc.n < 1) {
            st = LIVE_BAD_INPUT;
            av_err(e, "the input has no tokens");
            goto done;
        }
        r->have_enc = 1;
    }
    const int norm = measure_wanted(&lv->page.capture, MEASURE_NORM); /* serve --measure norm: the value norms too */
    const size_t blocks = (size_t)c->num_layers * (size_t)c->num_heads;
    const int side = tile_side(lv), over = r->enc.n < side ? r->enc.n : side, lng = is_long(lv, r->enc.n);
    size_t bytes = model_capture_qk_bytes(c, r->enc.n, lv->lim.thumb_size, lv->lim.qk_prec) +
                   (norm ? model_capture_value_norms_bytes(r->enc.n, c->num_layers, c->num_heads) : 0) +
                   (lng ? blocks * (size_t)over * (size_t)over * sizeof(float) +
                              model_capture_telemetry_bytes(blocks, r->enc.n, lv->lim.top_k)
                        : 0);
    if (bytes > lv->lim.cache_bytes) {
        st = LIVE_TOO_BIG;
        av_err(e, "%d tokens need %.0f MB of queries and keys (and, past --long-from, overviews and row statistics), "
                  "above the server's --cache-mb %.0f", r->enc.n,
               (double)bytes / 1e6, (double)lv->lim.cache_bytes / 1e6);
        goto done;
    }
    pthread_mutex_lock(&lv->mu);
    make_room(lv, bytes);
    pthread_mutex_unlock(&lv->mu);
    double t0 = av_now_ms();
    int first = r->meta == NULL;
    if (!first) drop_notes();
    /* q/k (heads recomputed on demand); for a long input also each head's
     * max-pooled overview (the tiles' level 0) and its rows' telemetry (head
     * ranking, top keys): what it is browsed by, none of it n x n */
    Capture *cap = &res.cap;
    if (model_capture_qk(cap, c, r->enc.n, lv->lim.thumb_size, lv->lim.qk_prec, e) != 0 ||
        (lng && (model_capture_maxpool(cap, side, e) != 0 || model_capture_add_telemetry(cap, lv->lim.top_k, r->enc.ids, e) != 0)) ||
        (norm && model_capture_value_norms(cap, e) != 0) ||
        (r->img ? run_image_forward(lm->run, r->img, cap, e) : run_forward(lm->run, &r->enc, cap, first ? r->k : 0, &res.pred, e)) != 0)
        goto done;
    if (r->img) run_image_shrink(r->img); /* its pixels are made again from the picture if evicted */
    t->forward = av_now_ms() - t0;
    if (first && describe(lv, r, &res, e) != 0) goto done;
    pthread_mutex_lock(&lv->mu);
    r->res.cap = *cap;
    memset(cap, 0, sizeof *cap);
    r->bytes = bytes;
    lv->cached += bytes;
    r->used = ++lv->clock;
    pthread_mutex_unlock(&lv->mu);
    st = LIVE_OK;
done:
    end_notes();
    end_turn(lv, r->model);
    input_result_free(&res);
    return st;
}

/* ---------------------------------------------------------------- generation */

LiveStatus live_queue_enter(Live *lv, AvErr *e) {
    pthread_mutex_lock(&lv->mu);
    const int full = lv->queued >= lv->lim.max_queue;
    if (!full) lv->queued++;
    pthread_mutex_unlock(&lv->mu);
    if (full) return av_err(e, "%d requests are already waiting for the model: try again", lv->lim.max_queue), LIVE_BUSY;
    return LIVE_OK;
}

void live_queue_leave(Live *lv) {
    pthread_mutex_lock(&lv->mu);
    lv->queued--;
    pthread_mutex_unlock(&lv->mu);
}

const Session *live_session(const Live *lv, int m) { return m >= 0 && m < lv->n_models ? lv->m[m].s : NULL; }

const char *live_cannot_generate(const Live *lv, int m) {
    if (m < 0 || m >= lv->n_models) return "no such model";
    const ModelConfig *c = model_cfg(lv, m);
    if (!c->causal || c->enc_dec) return "it is not a decoder-only (causal) model";
    return session_head_missing(lv->m[m].s);
}

/* Model m's turn within the time limit, given up as soon as cancelled says so (asked every 50 ms). */
static LiveStatus wait_turn(Live *lv, int m, int (*cancelled)(void *), void *ctx, AvErr *e) {
    const double until = av_now_ms() + lv->lim.timeout_ms;
    for (;;) {
        if (cancelled && cancelled(ctx)) return av_err(e, "cancelled"), LIVE_FAILED;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        const double left = until - av_now_ms(), step = left < 50 ? (left > 0 ? left : 0) : 50;
        ts.tv_nsec += (long)(step * 1e6);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        const int rc = pthread_mutex_timedlock(&lv->m[m].fwd, &ts);
        if (rc == 0 && cancelled && cancelled(ctx)) { /* it left while this thread waited: no prompt's pass for it */
            pthread_mutex_unlock(&lv->m[m].fwd);
            return av_err(e, "cancelled"), LIVE_FAILED;
        }
        if (rc == 0) return LIVE_OK;
        if (rc != ETIMEDOUT) return av_err(e, "cannot take the model's lock"), LIVE_FAILED;
        if (av_now_ms() >= until)
            return av_err(e, "the model stayed busy for %.0f s (the time limit)", lv->lim.timeout_ms / 1000.0), LIVE_TIMEOUT;
    }
}

LiveStatus live_generate(Live *lv, int m, const int *ids, int n, const PipeGenSpec *spec, const PipeGenSink *sink,
                         int (*cancelled)(void *ctx), void *ctx, PipeGenResult *result, AvErr *e) {
    const char *why = live_cannot_generate(lv, m);
    if (why) return av_err(e, "this model cannot generate: %.1000s", why), LIVE_BAD_INPUT;
    LiveStatus st = wait_turn(lv, m, cancelled, ctx, e);
    if (st != LIVE_OK) return st;
    drop_notes();
    AvErr ge = {0};
    const int rc = run_generate(lv->m[m].run, ids, n, spec, sink, result, &ge);
    end_notes();
    pthread_mutex_unlock(&lv->m[m].fwd);
    if (rc != 0) {
        *e = ge;
        return ge.kind == AV_ERR_USAGE ? LIVE_BAD_INPUT : LIVE_FAILED;
    }
    return LIVE_OK;
}

/* ---------------------------------------------------------------- runs */

static LiveStatus finish_run(Live *lv, LiveRun *r, unsigned *id, char **json, AvErr *e);

static LiveStatus run_input(Live *lv, int m, const char *a, const char *b, int k, int generate, int chat,
                            unsigned *id, char **json, AvErr *e) {
    *json = NULL;
    if (m < 0 || m >= lv->n_models) return av_err(e, "no model %d (%d served)", m, lv->n_models), LIVE_BAD_INPUT;
    if (k < 0 || k > 100) return av_err(e, "predict: %d is outside 0..100", k), LIVE_BAD_INPUT;
    const char *why = session_head_missing(lv->m[m].s);
    if (k > 0 && why) return av_err(e, "this model cannot predict: %.1000s", why), LIVE_BAD_INPUT;
    if (k > 0 && model_cfg(lv, m)->enc_dec)
        return av_err(e, "predict: serve does not predict for encoder-decoder models (the command line's --predict does)"),
               LIVE_BAD_INPUT;
    pthread_mutex_lock(&lv->mu);
    LiveRun *r = find_input(lv, m, a, b, k, generate, chat);
    if (!r) r = add_run(lv, m, a, b, k, generate, chat);
    if (r) r->users++;
    pthread_mutex_unlock(&lv->mu);
    if (!r) return av_err(e, "out of memory"), LIVE_FAILED;
    return finish_run(lv, r, id, json, e);
}

/* A held run's pass (if not cached) and its response; releases it. */
static LiveStatus finish_run(Live *lv, LiveRun *r, unsigned *id, char **json, AvErr *e) {
    Times t;
    LiveStatus st = ensure(lv, r, &t, e);
    if (st == LIVE_OK) {
        AvBuf out;
        if (av_buf_open(&out) == 0) {
            fprintf(out.f, "{\"run\":\"r%u\",\"n\":%d,", r->id, r->enc.n);
            if (r->s2s.enc_attn) fprintf(out.f, "\"n_decoder\":%d,", r->dec.n); /* n: the source's */
            fprintf(out.f, "\"meta\":%s,\"warnings\":%s,\"ms\":{\"queue\":%.1f,\"tokenize\":%.1f,\"forward\":%.1f},"
                           "\"kept\":{\"bytes\":%zu,\"qk\":\"%s\"}}",
                    r->meta, r->warnings, t.queue, t.tokenize, t.forward, r->bytes, live_qk_precision_name(lv->lim.qk_prec));
            *json = av_buf_close(&out, !ferror(out.f));
        }
        if (!*json) st = LIVE_FAILED, av_err(e, "out of memory");
        *id = r->id;
    }
    live_release(lv, r);
    return st;
}

LiveStatus live_run(Live *lv, int m, const char *a, const char *b, int k, unsigned *id, char **json, AvErr *e) {
    return run_input(lv, m, a, b, k, 0, 0, id, json, e);
}

LiveStatus live_run_chat(Live *lv, int m, const char *text, int k, unsigned *id, char **json, AvErr *e) {
    *json = NULL;
    if (m < 0 || m >= lv->n_models) return av_err(e, "no model %d (%d served)", m, lv->n_models), LIVE_BAD_INPUT;
    /* the template was read with the model: rendering only reads it, beside other threads */
    char *chat;
    PipeChatMsg one = {"user", text, NULL, 0, NULL};
    if (session_chat_prompt(lv->m[m].s, &one, 1, 0, &chat, e) != 0) return LIVE_BAD_INPUT;
    LiveStatus st = run_input(lv, m, chat, NULL, k, 0, 1, id, json, e);
    free(chat);
    return st;
}

LiveStatus live_run_generate(Live *lv, int m, const char *source, int n_new, unsigned *id, char **json, AvErr *e) {
    *json = NULL;
    if (m < 0 || m >= lv->n_models) return av_err(e, "no model %d (%d served)", m, lv->n_models), LIVE_BAD_INPUT;
    if (!model_cfg(lv, m)->enc_dec)
        return av_err(e, "generate: serve decodes for encoder-decoder models only"), LIVE_BAD_INPUT;
    if (n_new < 1 || n_new > LIVE_MAX_GENERATE)
        return av_err(e, "generate: %d is outside 1..%d", n_new, LIVE_MAX_GENERATE), LIVE_BAD_INPUT;
    return run_input(lv, m, source, NULL, 0, n_new, 0, id, json, e);
}

/* An image run's place in the table: the same model, text and preprocessed picture
 * (what the pass reads, so two files that make the same pixels are one run). */
static LiveRun *find_image(const Live *lv, int m, const char *text, const PipeImage *im) {
    size_t len, l2;
    const unsigned char *png = run_image_picture(im, &len);
    for (int i = 0; i < lv->n_runs; i++) {
        LiveRun *r = lv->runs[i];
        if (!r->img || r->model != m || !same_text(r->a, text)) continue;
        const unsigned char *q = run_image_picture(r->img, &l2);
        if (l2 == len && memcmp(q, png, len) == 0) return r;
    }
    return NULL;
}

LiveStatus live_run_image(Live *lv, int m, const unsigned char *bytes, size_t len, const char *name, const char *text,
                          unsigned *id, char **json, AvErr *e) {
    *json = NULL;
    if (m < 0 || m >= lv->n_models) return av_err(e, "no model %d (%d served)", m, lv->n_models), LIVE_BAD_INPUT;
    const ModelConfig *c = model_cfg(lv, m);
    if (!c->vision && !c->vlm)
        return av_err(e, "model %d (%s) reads text, not an image: send its text to /api/run", m, c->model_type),
               LIVE_BAD_INPUT;
    if (c->vlm && (!text || !*text)) {
        const char *ph = run_image_placeholder(lv->m[m].s);
        return av_err(e, "model %d (%s) is a vision-language model: send its text too (text=...), with %s where the "
                         "picture goes", m, c->model_type, ph ? ph : "its picture's token"),
               LIVE_BAD_INPUT;
    }
    if (text && !c->vlm && !lv->m[m].s->model.text)
        return av_err(e, "model %d (%s) reads the image only, not a text (a whole CLIP or SigLIP model reads both)", m,
                      c->model_type),
               LIVE_BAD_INPUT;
    /* decoding and preprocessing read the run only: outside the model's turn; their
     * warnings are kept for the run they make */
    LiveRun notes = {0};
    PipeImage *im = NULL;
    collect_notes(&notes);
    int rc = run_image_open(lv->m[m].run, bytes, len, name, LIVE_MAX_IMAGE_PIXELS, text, &im, e);
    end_notes();
    if (rc != 0) {
        free(notes.noted);
        return rc == IMG_TOO_LARGE ? LIVE_TOO_BIG : LIVE_BAD_INPUT; /* the picture or the text is what is wrong */
    }
    pthread_mutex_lock(&lv->mu);
    LiveRun *r = find_image(lv, m, text ? text : "", im);
    if (!r && (r = add_run(lv, m, text ? text : "", NULL, 0, 0, 0))) {
        r->img = im, im = NULL;
        r->enc = *run_image_tokens(r->img);
        r->have_enc = 1;
        r->noted = notes.noted, notes.noted = NULL;
        r->noted_bad = notes.noted_bad;
    }
    if (r) r->users++;
    pthread_mutex_unlock(&lv->mu);
    run_image_free(im); /* the same picture's run was there */
    free(notes.noted);
    if (!r) return av_err(e, "out of memory"), LIVE_FAILED;
    return finish_run(lv, r, id, json, e);
}

LiveStatus live_acquire(Live *lv, unsigned id, LiveRun **run, AvErr *e) {
    *run = NULL;
    pthread_mutex_lock(&lv->mu);
    LiveRun *r = find_id(lv, id);
    if (r) r->users++;
    pthread_mutex_unlock(&lv->mu);
    if (!r) return av_err(e, "no run r%u (unknown, or forgotten: run the input again)", id), LIVE_NOT_FOUND;
    Times t;
    LiveStatus st = ensure(lv, r, &t, e);
    if (st != LIVE_OK) {
        live_release(lv, r);
        return st;
    }
    *run = r;
    return LIVE_OK;
}

void live_release(Live *lv, LiveRun *r) {
    if (!r) return;
    pthread_mutex_lock(&lv->mu);
    r->users--;
    pthread_mutex_unlock(&lv->mu);
}

int live_run_tokens(const LiveRun *r) { return r->enc.n; }
int live_has_norms(const LiveRun *r) { return r->res.cap.vnorm != NULL; }
int live_has_stats(const LiveRun *r) { return r->res.cap.tel != NULL; }
int live_is_seq2seq(const LiveRun *r) { return r->s2s.enc_attn != NULL; }

static const char *const STACK_NAMES[3] = {"encoder", "decoder", "cross"};

int live_stack(const LiveRun *r, const char *name, int *rows, int *cols) {
    const S2sCapture *c = &r->s2s;
    for (int k = 0; c->enc_attn && name && k < 3; k++)
        if (!strcmp(name, STACK_NAMES[k])) {
            *rows = k ? c->n_dec : c->n_enc;
            *cols = k == 1 ? c->n_dec : c->n_enc;
            return k;
        }
    return -1;
}

int live_stack_layers(const LiveRun *r, int k) { return k ? r->s2s.dec_layers : r->s2s.enc_layers; }

/* block b of a stack's layer: its heads' matrices, as kept */
typedef struct {
    const float *layer;
    const int *heads;
    size_t len;
} StackBlocks;

static const float *stack_block(void *ctx, int b, AvErr *e) {
    (void)e;
    const StackBlocks *s = ctx;
    return s->layer + (size_t)s->heads[b] * s->len;
}

int live_stack_attention(Live *lv, LiveRun *r, int stack, int layer, const int *heads, int n_heads, unsigned char **z,
                         size_t *len, AvErr *e) {
    (void)lv;
    const S2sCapture *c = &r->s2s;
    int rows, cols;
    if (stack < 0 || stack > 2 || live_stack(r, STACK_NAMES[stack], &rows, &cols) != stack)
        return av_err(e, "no stack %d in this run", stack);
    const float *all = stack == 0 ? c->enc_attn : stack == 1 ? c->dec_attn : c->cross_attn;
    const size_t per = (size_t)rows * (size_t)cols;
    StackBlocks s = {all + (size_t)layer * (size_t)c->heads * per, heads, per};
    return html_encode_attention(stack_block, &s, n_heads, (size_t)rows, (size_t)cols, z, len, e);
}

int live_run_shape(const Live *lv, const LiveRun *r, int *layers, int *heads, int *head_dim) {
    const ModelConfig *c = model_cfg(lv, r->model);
    *layers = c->num_layers, *heads = c->num_heads, *head_dim = r->res.cap.head_dim;
    return 0;
}

/* ---------------------------------------------------------------- reads */

typedef struct {
    const Model *m;
    const Capture *cap;
    int layer;
    const int *heads;
    float *probs, *scratch;
    int norm; /* value-weighted shares (normattn.h) instead of the attention */
} HeadCtx;

/* Head h of layer l recomputed from q/k; norm: as the shares of ||a_ij f_h(x_j)||, as the offline page has them. */
static int head_matrix(const HeadCtx *h, int l, int head, AvErr *e) {
    if (model_head_attention(h->m, h->cap, l, head, h->probs, h->scratch, e) != 0) return -1;
    if (!h->norm) return 0;
    const int n = h->cap->n_tokens;
    const float *v = cap_vnorm(h->cap, l, head);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) h->probs[(size_t)i * n + j] *= v[j];
    na_shares(h->probs, h->probs, n);
    return 0;
}

static const float *head_block(void *ctx, int b, AvErr *e) {
    HeadCtx *h = ctx;
    return head_matrix(h, h->layer, h->heads[b], e) ? NULL : h->probs;
}

/* measure=norm asked of a server that has no value norms */
static int need_norms(const LiveRun *r, int norm, AvErr *e) {
    if (norm && !r->res.cap.vnorm) return av_err(e, "measure=norm: this server computes no value norms (start it with --measure norm)");
    return 0;
}

int live_attention(Live *lv, LiveRun *r, int layer, const int *heads, int n_heads, int norm, unsigned char **z,
                   size_t *len, AvErr *e) {
    if (need_norms(r, norm, e)) return -1;
    const size_t n = (size_t)r->enc.n;
    HeadCtx h = {&lv->m[r->model].s->model, &r->res.cap, layer, heads, malloc(n * n * sizeof(float)),
                 malloc(2 * n * (size_t)r->res.cap.head_dim * sizeof(float)), norm};
    int rc = h.probs && h.scratch ? html_encode_attention(head_block, &h, n_heads, n, n, z, len, e)
                                  : av_err(e, "out of memory for %zu tokens", n);
    free(h.probs);
    free(h.scratch);
    return rc;
}

static const float *thumb_block(void *ctx, int b, AvErr *e) {
    (void)e;
    const Capture *c = ctx;
    return cap_thumb(c, b / c->n_heads, b % c->n_heads);
}

/* Value-weighted thumbnails: every head's shares recomputed from q/k and the
 * norms, pooled as the forward pass pools attention (not cached: the
 * attention's thumbnails are the capture's own). */
typedef struct {
    HeadCtx h;
    float *thumb; /* (s, s) */
} NormThumbCtx;

static const float *norm_thumb_block(void *ctx, int b, AvErr *e) {
    NormThumbCtx *t = ctx;
    const Capture *c = t->h.cap;
    const int s = c->thumb_size, n = c->n_tokens;
    if (head_matrix(&t->h, b / c->n_heads, b % c->n_heads, e)) return NULL;
    memset(t->thumb, 0, (size_t)s * s * sizeof(float));
    kern_pool_attention(t->thumb, s, t->h.probs, n, 0, n, n, n);
    return t->thumb;
}

int live_thumbs(Live *lv, LiveRun *r, int norm, int *s, unsigned char **z, size_t *len, AvErr *e) {
    const Capture *c = &r->res.cap;
    *s = c->thumb_size;
    if (need_norms(r, norm, e)) return -1;
    if (!norm)
        return html_encode_attention(thumb_block, (void *)c, c->n_layers * c->n_heads, (size_t)c->thumb_size,
                                     (size_t)c->thumb_size, z, len, e);
    const size_t n = (size_t)r->enc.n;
    NormThumbCtx t = {{&lv->m[r->model].s->model, c, 0, NULL, malloc(n * n * sizeof(float)),
                       malloc(2 * n * (size_t)c->head_dim * sizeof(float)), 1},
                      malloc((size_t)c->thumb_size * (size_t)c->thumb_size * sizeof(float))};
    int rc = t.h.probs && t.h.scratch && t.thumb
                 ? html_encode_attention(norm_thumb_block, &t, c->n_layers * c->n_heads, (size_t)c->thumb_size,
                                         (size_t)c->thumb_size, z, len, e)
                 : av_err(e, "out of memory for %zu tokens", n);
    free(t.h.probs), free(t.h.scratch), free(t.thumb);
    return rc;
}

int live_qk(Live *lv, LiveRun *r, int layer, int head, float **qk, size_t *len, AvErr *e) {
    (void)lv;
    const Capture *c = &r->res.cap;
    const size_t blk = (size_t)c->n_tokens * (size_t)c->head_dim;
    if (!(*qk = malloc(2 * blk * sizeof(float)))) return av_err(e, "out of memory");
    if (c->qh) {
        /* the kept 16-bit values widened (exactly): one float32 format on the wire whatever the server keeps */
        for (size_t i = 0; i < blk; i++) {
            (*qk)[i] = kern_from_half(cap_qh(c, layer, head)[i], c->qk_prec);
            (*qk)[blk + i] = kern_from_half(cap_kh(c, layer, head)[i], c->qk_prec);
        }
    } else {
        memcpy(*qk, cap_q(c, layer, head), blk * sizeof(float));
        memcpy(*qk + blk, cap_k(c, layer, head), blk * sizeof(float));
    }
    *len = 2 * blk * sizeof(float);
    return 0;
}

/* ---------------------------------------------------------------- a long input */

void live_tile_geom(const Live *lv, const LiveRun *r, int *side, int *levels) {
    *side = tile_side(lv);
    *levels = tile_levels(r->enc.n, *side);
}

static const float *one_block(void *ctx, int b, AvErr *e) {
    (void)b, (void)e;
    return ctx;
}

int live_tile(Live *lv, LiveRun *r, int layer, int head, int level, int tr, int tc, unsigned char **z, size_t *len,
              int *rows, int *cols, AvErr *e) {
    const int side = tile_side(lv);
    float *tile = malloc((size_t)side * side * sizeof *tile);
    if (!tile) return av_err(e, "out of memory");
    int rc = model_head_tile(&lv->m[r->model].s->model, &r->res.cap, layer, head, side, level, tr, tc, tile, rows,
                             cols, e);
    if (rc == 0) {
        /* the set rows x cols, packed */
        for (int i = 1; i < *rows; i++) memmove(tile + (size_t)i * *cols, tile + (size_t)i * side, (size_t)*cols * sizeof *tile);
        rc = html_encode_attention(one_block, tile, 1, (size_t)*rows, (size_t)*cols, z, len, e);
    }
    free(tile);
    return rc;
}

int live_row(Live *lv, LiveRun *r, int layer, int head, int query, float **row, AvErr *e) {
    if (!(*row = malloc((size_t)r->enc.n * sizeof **row))) return av_err(e, "out of memory");
    if (model_head_row(&lv->m[r->model].s->model, &r->res.cap, layer, head, query, *row, e) == 0) return 0;
    free(*row);
    *row = NULL;
    return -1;
}

char *live_headstats(const LiveRun *r) {
    if (!r->res.cap.tel) return NULL;
    AvBuf b;
    AvErr e;
    if (av_buf_open(&b)) return NULL;
    return av_buf_close(&b, json_write_headstats(b.f, &r->res.cap, &e) == 0);
}

/* ---------------------------------------------------------------- the offline page */

/* The writer's grids (output.h's HtmlGridFn), recomputed from the run's q/k. */
typedef struct {
    const Model *m;
    const Capture *cap;
} PageGrids;

static int grid_of(void *ctx, int l, int h, int G, float *grid, AvErr *e) {
    const PageGrids *g = ctx;
    return model_head_grid(g->m, g->cap, l, h, G, grid, e);
}

/* A long input's offline page (output.h's html_write_long, as the command
 * line's --html writes it), with the run's meta less the member describe
 * adds for the live page (written last: replaced by the page's own). */
static LiveStatus long_page(Live *lv, LiveRun *r, int asked, char **html, size_t *len, AvErr *e) {
    const int n = r->enc.n;
    if (n > HTML_LONG_MAX_TOKENS)
        return av_err(e, "a page of %d tokens: its keys need more than 16 bits (%d at most)", n, HTML_LONG_MAX_TOKENS),
               LIVE_TOO_BIG;
    const char *at = NULL; /* the last member: strings hold no bare quote, so only describe's can match */
    for (const char *p = r->meta; (p = strstr(p, ",\"tiles\":{")); p++) at = p;
    if (!at) return av_err(e, "the run's meta has no tile geometry"), LIVE_FAILED;
    const size_t keep = (size_t)(at - r->meta);
    char *meta = malloc(keep + 2);
    if (!meta) return av_err(e, "out of memory"), LIVE_FAILED;
    memcpy(meta, r->meta, keep);
    memcpy(meta + keep, "}", 2);
    PageGrids grids = {&lv->m[r->model].s->model, &r->res.cap};
    HtmlLong lp = {&r->res.cap, tile_side(lv), 0, 0, grid_of, &grids, HTML_PAGE_BOUND, NULL, NULL};
    html_long_plan(&r->res.cap, lp.side, asked, &lp.levels, &lp.top_k);
    LiveStatus st = LIVE_FAILED;
    AvBuf b;
    if (av_buf_open(&b) == 0) {
        int rc = html_write_long(b.f, r->a, meta, &lp, lv->page.output.templates_dir, e);
        if ((*html = av_buf_close(&b, rc == 0))) *len = b.len, st = LIVE_OK;
        else if (rc == 0) av_err(e, "out of memory");
    } else {
        av_err(e, "out of memory");
    }
    free(meta);
    return st;
}

/* An encoder-decoder run's page, from its kept stacks (no pass): layers'
 * blocks copied out in order, as the command line's --layers keeps them. */
static LiveStatus s2s_page(Live *lv, LiveRun *r, const int *layers, int n_layers, char **html, size_t *len, AvErr *e) {
    const S2sCapture *c = &r->s2s;
    /* the deeper stack's layers are the range; each stack keeps those it has (as the command line's --layers) */
    const int nl = c->enc_layers > c->dec_layers ? c->enc_layers : c->dec_layers, unequal = c->enc_layers != c->dec_layers;
    for (int i = 0; layers && i < n_layers; i++)
        if (layers[i] < 0 || layers[i] >= nl)
            return av_err(e, "layers: layer %d is out of range: the model has %d layers (0-%d)", layers[i], nl, nl - 1),
                   LIVE_BAD_INPUT;
    const float *all[3] = {c->enc_attn, c->dec_attn, c->cross_attn};
    const size_t per[3] = {(size_t)c->heads * c->n_enc * c->n_enc, (size_t)c->heads * c->n_dec * c->n_dec,
                           (size_t)c->heads * c->n_dec * c->n_enc};
    float *kept[3] = {NULL, NULL, NULL};
    int *own[2] = {NULL, NULL}, n_own[2] = {0, 0}; /* unequal depths: each side's kept layers */
    LiveStatus st = LIVE_FAILED;
    for (int k = 0; layers && unequal && k < 2; k++) {
        const int depth = k ? c->dec_layers : c->enc_layers;
        if (!(own[k] = malloc((size_t)n_layers * sizeof *own[k]))) {
            av_err(e, "out of memory");
            goto done;
        }
        for (int i = 0; i < n_layers; i++)
            if (layers[i] < depth) own[k][n_own[k]++] = layers[i];
        if (!n_own[k]) {
            av_err(e, "layers: none of the %s's %d layers (0-%d) is selected", k ? "decoder" : "encoder", depth, depth - 1);
            st = LIVE_BAD_INPUT;
            goto done;
        }
    }
    for (int k = 0; layers && k < 3; k++) {
        const int *ls = unequal ? own[k ? 1 : 0] : layers, nls = unequal ? n_own[k ? 1 : 0] : n_layers;
        if (!(kept[k] = malloc((size_t)nls * per[k] * sizeof(float)))) {
            av_err(e, "out of memory");
            goto done;
        }
        for (int i = 0; i < nls; i++)
            memcpy(kept[k] + (size_t)i * per[k], all[k] + (size_t)ls[i] * per[k], per[k] * sizeof(float));
        all[k] = kept[k];
    }
    OutDoc d;
    CapStack stacks[3];
    run_seq2seq_doc(lv->m[r->model].run, &d, stacks, &r->enc, &r->dec, c, all, r->a, r->generate ? r->res.gen_text : r->b);
    if (r->generate) d.gen = &r->res.gen, d.gen_words = &r->res.gen_words, d.gen_text = r->res.gen_text;
    for (int k = 0; layers && unequal && k < 3; k++)
        stacks[k].layers = own[k ? 1 : 0], stacks[k].n_layers = n_own[k ? 1 : 0];
    /* the document's layers are the encoder's (its JSON "layers") */
    if (unequal && layers) d.layers = own[0], d.n_sel_layers = n_own[0];
    else d.layers = layers, d.n_sel_layers = n_layers;
    d.init_layer = layers ? layers[0] : 0;
    AvBuf b;
    if (av_buf_open(&b) != 0) {
        av_err(e, "out of memory");
        goto done;
    }
    drop_notes(); /* the run's warnings went with its first pass */
    int rc = html_write_doc(b.f, &d, lv->page.output.templates_dir, e);
    end_notes();
    if ((*html = av_buf_close(&b, rc == 0))) *len = b.len, st = LIVE_OK;
    else if (rc == 0) av_err(e, "out of memory");
done:
    for (int k = 0; k < 3; k++) free(kept[k]);
    free(own[0]);
    free(own[1]);
    return st;
}

LiveStatus live_page(Live *lv, unsigned id, const int *layers, int n_layers, int levels, char **html, size_t *len, AvErr *e) {
    *html = NULL, *len = 0;
    LiveRun *r;
    LiveStatus st = live_acquire(lv, id, &r, e); /* tokens, meta and a held run */
    if (st != LIVE_OK) return st;
    if (r->res.cap.mpool && r->res.cap.tel) { /* a long input: its tiles, never n x n (layers: all of them) */
        st = long_page(lv, r, levels, html, len, e);
        live_release(lv, r);
        return st;
    }
    if (live_is_seq2seq(r)) {
        st = s2s_page(lv, r, layers, n_layers, html, len, e);
        live_release(lv, r);
        return st;
    }
    const ModelConfig *c = model_cfg(lv, r->model);
    const int n = r->enc.n, nl = layers ? n_layers : c->num_layers;
    for (int i = 0; layers && i < n_layers; i++)
        if (layers[i] < 0 || layers[i] >= c->num_layers) {
            live_release(lv, r);
            av_err(e, "layers: layer %d is out of range: the model has %d layers (0-%d)", layers[i], c->num_layers,
                   c->num_layers - 1);
            return LIVE_BAD_INPUT;
        }
    size_t bytes = model_capture_bytes(c, n, 1, 0, nl, c->num_heads);
    if (measure_wanted(&lv->page.capture, MEASURE_NORM)) bytes += na_bytes(n, (size_t)nl * (size_t)c->num_heads);
    if (bytes > lv->lim.cache_bytes) {
        live_release(lv, r);
        av_err(e, "the page of %d tokens x %d layers needs %.0f MB, above the server's --cache-mb %.0f: ask for fewer "
                  "layers (layers=...)", n, nl, (double)bytes / 1e6, (double)lv->lim.cache_bytes / 1e6);
        return LIVE_TOO_BIG;
    }
    double waited;
    if (take_turn(lv, r->model, &st, &waited, e)) {
        live_release(lv, r);
        return st;
    }
    LiveModel *lm = &lv->m[r->model];
    InputResult res = {0}; /* this page's pass */
    Capture *cap = &res.cap;
    st = LIVE_FAILED;
    drop_notes();
    const int norm = measure_wanted(&lv->page.capture, MEASURE_NORM); /* the page carries value-weighted attention too */
    /* the page the command line writes: its sinks and massive activations too (pipeline.h's run_flags_*) */
    if (model_capture_select(cap, c, n, 1, 0, layers, n_layers, NULL, 0, e) == 0 && run_flags_prepare(cap, c, e) == 0) {
        if ((!norm || model_capture_value_norms(cap, e) == 0) &&
            (r->img ? run_image_forward(lm->run, r->img, cap, e) : run_forward(lm->run, &r->enc, cap, r->k, &res.pred, e)) == 0 &&
            run_flags_compute(cap, layers, n_layers, NULL, 0, &res.flags, e) == 0 && (!norm || na_fill(cap, e) == 0) &&
            (!r->k || session_spell(lm->s, res.pred.ids, res.pred.n * res.pred.k, &res.pred_words, e) == 0)) {
            OutDoc d;
            run_document(lv, r, &res, &d);
            if (r->img) run_image_shrink(r->img);
            d.layers = layers, d.n_sel_layers = n_layers;
            d.heads = NULL, d.n_sel_heads = 0;
            d.init_layer = layers ? layers[0] : 0;
            AvBuf b;
            if (av_buf_open(&b) == 0) {
                int rc = html_write_doc(b.f, &d, lv->page.output.templates_dir, e);
                if ((*html = av_buf_close(&b, rc == 0))) {
                    *len = b.len;
                    st = LIVE_OK;
                } else if (rc == 0) {
                    av_err(e, "out of memory");
                }
            } else {
                av_err(e, "out of memory");
            }
        }
    }
    end_notes();
    end_turn(lv, r->model);
    input_result_free(&res);
    live_release(lv, r);
    return st;
}
