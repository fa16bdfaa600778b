/* run_generate.c — one prompt continued token by token for a server or the
 * library (pipeline.h's run_generate): the engine's loop (generate.h)
 * with a per-token callback, each token's text made final as it comes (UTF-8
 * whole, stop strings held back until they are ruled out), and, only when
 * asked, the selected heads' rows as the engine makes them: their statistics
 * and heaviest keys (the capture's telemetry, O(n) a head) and whole rows
 * (a window of the rows, not the n x n matrices). Without attention nothing
 * is captured and the loop costs what generation costs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"
#include "util.h"

int session_prompt_ids(const Session *s, const char *text, int chat, int **ids, int *n, AvErr *e) {
    TokEncoding enc = {0};
    *ids = NULL, *n = 0;
    /* a rendered chat: its template wrote the special tokens, and the tokenizer adds none */
    if ((chat ? tok_encode_plain(s->tok, text, strlen(text), 0, &enc, e)
              : tok_encode(s->tok, text, strlen(text), NULL, 0, 0, &enc, e)) != 0)
        return -1;
    const int skip = 0, m = enc.n;
    if (!(*ids = malloc((size_t)(m > 0 ? m : 1) * sizeof **ids))) {
        tok_encoding_free(&enc);
        return av_err(e, "out of memory");
    }
    if (m > 0) memcpy(*ids, enc.ids + skip, (size_t)m * sizeof **ids);
    *n = m;
    tok_encoding_free(&enc);
    return 0;
}

const char *session_name(const Session *s) { return s->name; }
const char *session_token(const Session *s, int id) { return tok_id_to_token(s->tok, id); }
const char *session_token_text(const Session *s, int id) { return tok_id_display(s->tok, id); }
int session_token_bytes(const Session *s, int id, char **b, size_t *n, AvErr *e) {
    return tok_decode_bytes(s->tok, &id, 1, 0, b, n, e);
}

void pipeline_gen_result_free(PipeGenResult *res) {
    free(res->text);
    memset(res, 0, sizeof *res);
}

/* ---------------------------------------------------------------- text as it grows */

typedef struct {
    char *all;          /* the generated tokens' bytes */
    size_t len, cap;
    size_t sent;        /* bytes of all made final as text */
    char *joined;       /* the final text so far */
    size_t joined_len, joined_cap;
    const PipeGenSpec *gs;
} TextStream;

static int grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *q = realloc(*p, c);
    if (!q) return -1;
    *p = q, *cap = c;
    return 0;
}

/* Where a character that is not complete yet starts in s (n bytes), or n. */
static size_t complete_end(const char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
        const size_t need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

/* Adds a token's bytes; *out (to free) is the text now final: up to the
 * first stop string (*stopped), else up to what could still become one or
 * complete a character; at the end (flush) everything left. */
static int text_add(TextStream *ts, const char *b, size_t nb, int flush, int *stopped, char **out, size_t *out_len,
                    AvErr *e) {
    *stopped = 0;
    if (grow(&ts->all, &ts->cap, ts->len + nb + 1)) return av_err(e, "out of memory");
    if (nb) memcpy(ts->all + ts->len, b, nb);
    ts->len += nb;
    ts->all[ts->len] = '\0';
    size_t end = ts->len;
    /* the earliest stop string from what is not yet final (held back before, it cannot start earlier) */
    for (int i = 0; i < ts->gs->n_stop; i++) {
        const char *hit = memmem(ts->all + ts->sent, ts->len - ts->sent, ts->gs->stop[i], strlen(ts->gs->stop[i]));
        if (hit && (size_t)(hit - ts->all) < end) end = (size_t)(hit - ts->all), *stopped = 1;
    }
    if (!*stopped && !flush) {
        end = complete_end(ts->all, ts->len);
        if (end < ts->sent) end = ts->sent;
        /* the longest tail that a stop string begins with waits */
        size_t hold = 0;
        for (int i = 0; i < ts->gs->n_stop; i++) {
            const size_t ls = strlen(ts->gs->stop[i]);
            for (size_t k = ls - 1 < end - ts->sent ? ls - 1 : end - ts->sent; k > hold; k--)
                if (!memcmp(ts->all + end - k, ts->gs->stop[i], k)) {
                    hold = k;
                    break;
                }
        }
        end -= hold;
    }
    if (tok_utf8_lossy(ts->all + ts->sent, end - ts->sent, out, out_len, e) != 0) return -1;
    ts->sent = end;
    if (grow(&ts->joined, &ts->joined_cap, ts->joined_len + *out_len + 1)) {
        free(*out);
        *out = NULL;
        return av_err(e, "out of memory");
    }
    memcpy(ts->joined + ts->joined_len, *out, *out_len + 1);
    ts->joined_len += *out_len;
    return 0;
}

/* ---------------------------------------------------------------- the loop's callbacks */

typedef struct {
    Run *r;
    const PipeGenSpec *gs;
    const PipeGenSink *sink;
    Capture *cap;             /* NULL without attention */
    const int *ids;
    int n_prompt;
    int kl[CAP_MAX_LAYERS], kh[CAP_MAX_HEADS], nl, nh; /* kept layers and heads, in the order asked */
    /* one position's attention, gathered (blocks-major), and the prompt's */
    int *keys;
    float *weights, *stats, *rows;
    TextStream ts;
    int max_new;              /* the tokens that fit */
    int cancelled, stopped;
    AvErr *e;
    int failed;
} GenCtx;

/* Positions [pos0, pos0 + n_pos) of the kept heads into a (buffers sized for them). */
static void gather(GenCtx *g, int pos0, int n_pos, PipeGenAttn *a) {
    const Capture *c = g->cap;
    const int blocks = g->nl * g->nh, K = g->gs->top_k, nk = pos0 + n_pos;
    const size_t n = (size_t)c->n_tokens;
    memset(a, 0, sizeof *a);
    a->pos0 = pos0, a->n_pos = n_pos, a->n_layers = g->nl, a->n_heads = g->nh, a->layers = g->kl, a->heads = g->kh;
    a->top_k = K, a->n_keys = nk;
    for (int i = 0; i < n_pos; i++) {
        const size_t pos = (size_t)(pos0 + i);
        for (int b = 0; b < blocks; b++) {
            const size_t blk = cap_block(c, g->kl[b / g->nh], g->kh[b % g->nh]), at = (size_t)i * blocks + b;
            if (K) {
                memcpy(g->keys + at * K, c->tel_top + (blk * n + pos) * K, (size_t)K * sizeof *g->keys);
                memcpy(g->weights + at * K, c->tel_top_w + (blk * n + pos) * K, (size_t)K * sizeof *g->weights);
            }
            const float *t = c->tel + (blk * n + pos) * CAP_TEL_N;
            g->stats[(size_t)n_pos * blocks * 0 + at] = t[CAP_TEL_ENTROPY];
            g->stats[(size_t)n_pos * blocks * 1 + at] = t[CAP_TEL_SINK];
            g->stats[(size_t)n_pos * blocks * 2 + at] = t[CAP_TEL_DISTANCE];
            if (g->gs->rows) {
                const float *r = c->rows + (blk * (size_t)c->rows_n + (pos - (size_t)c->rows_from)) * n;
                memcpy(g->rows + at * nk, r, (size_t)nk * sizeof *g->rows);
            }
        }
    }
    if (K) a->keys = g->keys, a->weights = g->weights;
    if (g->gs->stats) {
        a->entropy = g->stats, a->sink = g->stats + (size_t)n_pos * blocks;
        a->distance = g->stats + 2 * (size_t)n_pos * blocks;
    }
    if (g->gs->rows) a->rows = g->rows;
}

static int on_prompt(void *ctx, int n_prompt) {
    GenCtx *g = ctx;
    PipeGenAttn a, *ap = NULL;
    if (g->cap && g->gs->prompt) gather(g, 0, n_prompt, ap = &a);
    if (g->sink->on_prompt && g->sink->on_prompt(g->sink->ctx, g->ids, n_prompt, ap)) return g->cancelled = 1;
    return 0;
}

static int on_token(void *ctx, const GenToken *t) {
    GenCtx *g = ctx;
    const Session *s = g->r->s;
    char *bytes = NULL, *text = NULL;
    size_t nb = 0, nt = 0;
    int stopped = 0;
    int is_eos = 0;
    for (int i = 0; i < s->cfg.n_eos; i++) is_eos |= s->cfg.eos_ids[i] == t->id;
    if (tok_decode_bytes(s->tok, &t->id, 1, 0, &bytes, &nb, g->e) != 0) return g->failed = 1;
    /* an end token ends the text without being part of it; so does the last token's flush */
    const int last = is_eos || t->index + 1 >= g->max_new;
    if (text_add(&g->ts, is_eos ? "" : bytes, is_eos ? 0 : nb, last, &stopped, &text, &nt, g->e) != 0) {
        free(bytes);
        return g->failed = 1;
    }
    PipeGenAttn a;
    PipeGenToken tk = {t->index, t->position, t->id, tok_id_to_token(s->tok, t->id), bytes, nb, text, nt, t->prob,
                       t->logprob, t->n_top, t->top_ids, t->top_logprobs, NULL};
    if (!tk.token) tk.token = TOK_NO_TOKEN;
    if (g->cap) gather(g, t->position, 1, &a), tk.attn = &a;
    int rc = g->sink->on_token && g->sink->on_token(g->sink->ctx, &tk);
    free(bytes);
    free(text);
    if (rc) return g->cancelled = 1;
    if (stopped) return g->stopped = 1;
    return 0;
}

/* ---------------------------------------------------------------- the run */

static int kept_list(const int *asked, int n_asked, int limit, int *out, const char *what, AvErr *e) {
    unsigned char seen[CAP_MAX_LAYERS > CAP_MAX_HEADS ? CAP_MAX_LAYERS : CAP_MAX_HEADS] = {0};
    int n = 0;
    for (int i = 0; i < (asked ? n_asked : limit); i++) {
        const int x = asked ? asked[i] : i;
        if (x < 0 || x >= limit) return av_err_usage(e, "%s %d is not in the model (0 to %d)", what, x, limit - 1);
        if (!seen[x]) seen[x] = 1, out[n++] = x;
    }
    if (!n) return av_err_usage(e, "no %ss selected", what);
    return n;
}

static int spec_check(const Session *s, const PipeGenSpec *gs, AvErr *e) {
    if (gs->max_new < 1) return av_err_usage(e, "at least one token must be generated (%d asked)", gs->max_new);
    if (!(gs->temperature >= 0) || !(gs->top_p > 0 && gs->top_p <= 1))
        return av_err_usage(e, "temperature %g or top_p %g is out of range", gs->temperature, gs->top_p);
    if (gs->n_stop < 0 || gs->n_stop > PIPE_GEN_MAX_STOP) return av_err_usage(e, "at most %d stop strings", PIPE_GEN_MAX_STOP);
    for (int i = 0; i < gs->n_stop; i++)
        if (!gs->stop[i] || !gs->stop[i][0]) return av_err_usage(e, "stop string %d is empty", i);
    if (gs->logprobs && (gs->top_logprobs < 0 || gs->top_logprobs > GEN_MAX_LOGPROBS))
        return av_err_usage(e, "top_logprobs %d is outside 0..%d", gs->top_logprobs, GEN_MAX_LOGPROBS);
    if (gs->attn && (gs->top_k < 0 || gs->top_k > CAP_TEL_MAX_TOP))
        return av_err_usage(e, "attention top_k %d is outside 0..%d", gs->top_k, CAP_TEL_MAX_TOP);
    if (!s->have_model || !s->cfg.causal || s->cfg.enc_dec)
        return av_err_usage(e, "%s: generation needs a decoder-only (causal) model", s->name);
    if (session_head_missing(s)) return av_err_usage(e, "%s: %s", s->name, session_head_missing(s));
    return 0;
}

static size_t n_kept(const int *asked, int n, int limit) { return asked ? (size_t)(n < limit ? n : limit) : (size_t)limit; }

double session_generate_bytes(const Session *s, const PipeGenSpec *gs, int n_prompt) {
    if (!gs->attn) return 0;
    const double blocks = (double)n_kept(gs->layers, gs->n_layers, s->cfg.num_layers) *
                          (double)n_kept(gs->heads, gs->n_heads, s->cfg.num_heads),
                 total = (double)n_prompt + gs->max_new, K = gs->top_k,
                 rows_n = gs->rows ? (gs->prompt ? n_prompt : 1) : 0, pos = gs->prompt ? n_prompt : 1;
    /* the telemetry and row window, and one gather of the prompt's (or a token's) */
    return blocks * total * (CAP_TEL_N + 2 * K) * 4 + total * 12 + blocks * rows_n * total * 4 +
           pos * blocks * (2 * K + 3) * 4 + (gs->rows ? blocks * (pos * pos > total ? pos * pos : total) * 4 : 0);
}

int run_generate(Run *r, const int *prompt, int n_prompt, const PipeGenSpec *gs, const PipeGenSink *sink,
                      PipeGenResult *res, AvErr *e) {
    memset(res, 0, sizeof *res);
    if (spec_check(r->s, gs, e) != 0) return -1;
    const int limit = cfg_max_tokens(&r->s->cfg);
    if (n_prompt < 1) return av_err_usage(e, "the prompt has no tokens");
    if (n_prompt >= limit)
        return av_err_usage(e, "the prompt's %d tokens fill the model's %d positions: nothing can follow", n_prompt, limit);
    const int max_new = gs->max_new < limit - n_prompt ? gs->max_new : limit - n_prompt, total = n_prompt + max_new;
    if (run_buffers_fit(r, total, 1, session_generate_bytes(r->s, gs, n_prompt),
                        "fewer tokens (a shorter prompt, fewer new ones), ", e) != 0)
        return -1;
    GenCtx g = {.r = r, .gs = gs, .sink = sink, .n_prompt = n_prompt, .e = e};
    g.ts.gs = gs;
    g.max_new = max_new;
    Capture cap = {0};
    CapGeneration gen = {0};
    int rc = -1, n_out = 0;
    int *ids = malloc((size_t)total * sizeof *ids);
    if (!ids) return av_err(e, "out of memory");
    memcpy(ids, prompt, (size_t)n_prompt * sizeof *ids);
    g.ids = ids;
    for (int i = 0; i < n_prompt; i++)
        if (ids[i] < 0 || ids[i] >= r->s->cfg.vocab_size) {
            av_err_usage(e, "token id %d at position %d is outside the vocabulary (%d)", ids[i], i, r->s->cfg.vocab_size);
            goto done;
        }
    if (gs->attn) {
        if ((g.nl = kept_list(gs->layers, gs->n_layers, r->s->cfg.num_layers, g.kl, "layer", e)) < 0 ||
            (g.nh = kept_list(gs->heads, gs->n_heads, r->s->cfg.num_heads, g.kh, "head", e)) < 0)
            goto done;
        if (model_capture_telemetry(&cap, &r->s->cfg, total, gs->top_k, ids, g.kl, g.nl, g.kh, g.nh, e) != 0) goto done;
        if (gs->rows && model_capture_add_rows(&cap, gs->prompt ? n_prompt : 1, e) != 0) goto done;
        const size_t blocks = (size_t)g.nl * g.nh, pos = gs->prompt ? (size_t)n_prompt : 1;
        g.keys = malloc(pos * blocks * (gs->top_k ? gs->top_k : 1) * sizeof *g.keys);
        g.weights = malloc(pos * blocks * (gs->top_k ? gs->top_k : 1) * sizeof *g.weights);
        g.stats = malloc(3 * pos * blocks * sizeof *g.stats);
        if (gs->rows) g.rows = malloc(blocks * (pos * pos > (size_t)total ? pos * pos : (size_t)total) * sizeof *g.rows);
        if (!g.keys || !g.weights || !g.stats || (gs->rows && !g.rows)) {
            av_err(e, "out of memory for the attention of %d tokens", total);
            goto done;
        }
        g.cap = &cap;
    }
    /* the run state and key/value cache only grow: a server's requests reuse them */
    if (r->rs.max_tokens < total) {
        model_runstate_free(&r->rs);
        if (model_runstate_alloc(&r->rs, &r->s->model, total, r->spec.threads, e) != 0) goto done;
    }
    if (r->kv.cap_tokens < total) {
        model_kv_free(&r->kv);
        if (model_kv_alloc(&r->kv, &r->s->cfg, total, e) != 0) goto done;
    }
    GenOptions go = {.max_new = max_new, .k = 1, .temperature = (float)gs->temperature, .top_p = (float)gs->top_p,
                     .seed = gs->seed, .eos = r->s->cfg.eos_ids, .n_eos = r->s->cfg.n_eos, .on_prompt = on_prompt,
                     .on_token = on_token, .cb_ctx = &g, .logprobs = gs->logprobs, .top_logprobs = gs->top_logprobs};
    double t0 = av_now_ms();
    rc = gen_run(&r->s->model, &r->rs, &r->kv, g.cap, ids, n_prompt, &go, &gen, &n_out, e);
    r->t_fwd += av_now_ms() - t0;
    if (rc == 0 && g.failed) rc = -1;
    if (rc != 0) goto done;
    res->n_prompt = n_prompt;
    res->n_generated = gen.n_generated;
    res->finish = g.cancelled ? PIPE_FINISH_CANCELLED
                  : g.stopped ? PIPE_FINISH_STOP
                  : gen.stop == CAP_STOP_EOS ? PIPE_FINISH_EOS
                                             : PIPE_FINISH_LENGTH;
    res->text = g.ts.joined ? g.ts.joined : strdup("");
    res->text_len = g.ts.joined_len;
    g.ts.joined = NULL;
    if (!res->text) rc = av_err(e, "out of memory");
done:
    gen_free(&gen);
    model_capture_free(&cap);
    free(ids);
    free(g.keys);
    free(g.weights);
    free(g.stats);
    free(g.rows);
    free(g.ts.all);
    free(g.ts.joined);
    return rc;
}
