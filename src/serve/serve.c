/* serve.c — attnviz serve's HTTP side: libmicrohttpd, and in front of every
 * route the same three checks: the Host header names this server (no DNS
 * rebinding), the request carries the run's token, the method fits the path.
 * Bodies are read up to a limit; everything else is live.c's.
 *
 * Connections cost no thread while they wait: one epoll thread reads every
 * socket, and a request that passed the checks and needs the model (or any
 * read of a run) is handed to a thread of its own while its connection is
 * suspended, so a request waiting for the model blocks nothing else. A
 * connection that has not shown the token is bounded three ways (conns_*): its
 * headers must be complete within SERVE_HEADER_DEADLINE_MS of its start (or of
 * its previous request's end), within SERVE_BAD_TOKEN_MS when its request line
 * carries a wrong token, and a client (an address; an IPv6 /64) keeps at most
 * SERVE_CLIENT_PENDING of them: a newer one closes its oldest. Slow clients
 * therefore hold neither threads nor every slot, and one on the same address
 * as the user (loopback) cannot keep the user out. */
#include "serve.h"
#include "jsonread.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <utf8proc.h>

#include "live.h"
#include "openai.h"
#include "serve_http.h"
#include "model.h"
#include "output.h"
#include "report.h"
#include "tiles.h"
#include "util.h"

#define SERVE_MAX_BODY (1u << 20)
/* Connections at once: each costs a descriptor and its header pool (mapped, touched as it fills), no thread. */
#define SERVE_MAX_CONNECTIONS 16384
/* POST /api/image: a picture's file (PNG or JPEG), decoded within LIVE_MAX_IMAGE_PIXELS */
#define SERVE_MAX_IMAGE_BODY (20u << 20)
#define SERVE_HEADER_BYTES (64u << 10)
#define SERVE_HEADER_DEADLINE_MS 10000.0 /* a whole request's headers, from its connection's start or last request */
#define SERVE_BAD_TOKEN_MS 1000.0        /* headers of a request whose line carries a wrong token */
#define SERVE_CLIENT_PENDING 32          /* connections per client that have not shown the token */
#define SERVE_SWEEP_MS 100               /* how often deadlines are checked */
#define SERVE_STOP_FLUSH_MS 1000         /* on stop: longest wait for answers made but not yet sent */
#define SERVE_MAX_ACTIVE_EXTRA 64        /* requests in their own threads at once: --queue + this (then 503) */
/* A whole n x n matrix per request (/api/attention, value-weighted thumbnails)
 * only up to this many tokens: one head is then at most 256 MiB of floats.
 * Longer runs are read by tiles and rows (tiles.h), whose memory grows with n. */
#define SERVE_MAX_MATRIX_TOKENS 8192

/* The offline page's policy, plus fetches back to this server. */
#define SERVE_CSP                                                                                                  \
    "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "              \
    "img-src data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

typedef struct Client Client;

/* A connection, from libmicrohttpd's start notification to its close notification. While
 * it has not shown the token for its current request it is "pending": on its client's and
 * the server's lists, oldest first, and closed (shutdown of its socket, which the epoll
 * thread then sees) when it runs out of time or its client opens too many. */
typedef struct Conn {
    struct Conn *prev, *next;   /* the server's pending connections */
    struct Conn *cprev, *cnext; /* its client's pending connections */
    Client *client;
    int fd;
    double since;               /* ms: its current request began */
    int pending, bad_token, closing;
} Conn;

struct Client {
    uint8_t key[16];            /* IPv4 address, or an IPv6 /64 */
    int n_conns, n_pending;
    Conn *head, *tail;          /* pending, oldest first */
    Client *hnext;
};

#define SERVE_CLIENT_BUCKETS 4096

typedef struct {
    pthread_mutex_t mu;
    Client *bucket[SERVE_CLIENT_BUCKETS];
    Conn *head, *tail;          /* every pending connection, oldest first */
    int n_conns, n_pending;
    long evicted, expired;      /* connections closed for a client's cap / for time */
    int active, max_active;     /* requests running in their own threads */
    int in_flight;              /* requests begun and not completed (their answer not sent whole) */
    pthread_cond_t idle;        /* active fell to 0 */
    int stop;
    pthread_cond_t wake;        /* the sweeper's sleep */
    pthread_t sweeper;
    int have_sweeper;
} Conns;

typedef struct {
    Live *lv;
    OaServer *oa;       /* the OpenAI-compatible routes' state */
    Conns cn;
    char token[33];
    char hosts[4][300]; /* Host header values accepted */
    _Atomic int n_hosts; /* published (release) once hosts[] is written: the
                          * daemon's threads run before the bound port is known */
    char *page;         /* the live page, made once */
    size_t page_len;
    char *models_json;
} Server;

typedef enum { RQ_READING = 0, RQ_WORKING, RQ_READY } ReqState;

typedef struct {
    char *body;
    size_t len;
    int answered; /* a response is queued: ignore the rest of the body */
    int too_big;  /* the body passed the limit: 413 once it ends */
    size_t seen;  /* body bytes received */
    int openai;   /* an OpenAI-compatible path (/v1/...): openai.c answers, errors in its format */
    char *url;    /* that path (openai.c's routes run in a job, after the access handler returned) */
    ReqState state;               /* RQ_WORKING: its route runs in a thread of its own, the connection suspended */
    struct MHD_Response *resp;    /* RQ_READY: what that thread answered (NULL: it failed) */
    unsigned status;
    size_t limit; /* the body's bound: SERVE_MAX_BODY, or SERVE_MAX_IMAGE_BODY for a picture */
} Req;

/* The request a route runs for on this thread, when the route runs in a thread of its own:
 * its response is kept for the epoll thread to queue once the connection resumes (libmicrohttpd
 * queues responses only from its own callbacks). */
static _Thread_local Req *deferred_req;

/* ---------------------------------------------------------------- responses */

void serve_headers(struct MHD_Response *r, const char *type) {
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Content-Security-Policy", SERVE_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Cache-Control", "no-store");
}

enum MHD_Result serve_send(struct MHD_Connection *c, unsigned status, const char *type, void *buf, size_t len,
                           enum MHD_ResponseMemoryMode mode, const char *extra_name, const char *extra_value) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(buf);
        return MHD_NO;
    }
    serve_headers(r, type);
    if (extra_name) MHD_add_response_header(r, extra_name, extra_value);
    return serve_queue(c, status, r);
}

enum MHD_Result serve_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    if (deferred_req) {
        if (deferred_req->resp) MHD_destroy_response(deferred_req->resp);
        deferred_req->resp = r, deferred_req->status = status;
        return MHD_YES;
    }
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *type, void *buf, size_t len,
                                enum MHD_ResponseMemoryMode mode, const char *extra_name, const char *extra_value) {
    return serve_send(c, status, type, buf, len, mode, extra_name, extra_value);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, char *json) {
    if (!json) return MHD_NO;
    return send_buf(c, status, "application/json", json, strlen(json), MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

/* {"error": msg}, malloc'd, or NULL */
static char *error_body(const char *msg) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    fputs("{\"error\":", f);
    json_write_string(f, msg);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg) {
    return send_json(c, status, error_body(msg));
}


static unsigned status_of(LiveStatus st) {
    switch (st) {
    case LIVE_OK: return MHD_HTTP_OK;
    case LIVE_BAD_INPUT: return MHD_HTTP_BAD_REQUEST;
    case LIVE_NOT_FOUND: return MHD_HTTP_NOT_FOUND;
    case LIVE_TOO_BIG: return MHD_HTTP_CONTENT_TOO_LARGE;
    case LIVE_BUSY: return MHD_HTTP_SERVICE_UNAVAILABLE;
    case LIVE_TIMEOUT: return MHD_HTTP_GATEWAY_TIMEOUT;
    case LIVE_FAILED: break;
    }
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* ---------------------------------------------------------------- checks */

static int equal_ct(const char *a, const char *b) { /* constant time in the token's length */
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < nb; i++) d |= (unsigned char)(a[i < na ? i : 0] ^ b[i]);
    return d == 0;
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind, (void)value;
    if (key && !strcasecmp(key, MHD_HTTP_HEADER_HOST)) ++*(int *)cls;
    return MHD_YES;
}

/* 1: one Host header naming this server; 0: none or another name; -1: several
 * (a request smuggling shape, 400 as RFC 9112 says). */
static int host_ok(const Server *sv, struct MHD_Connection *c) {
    int n_host = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_host, &n_host);
    if (n_host > 1) return -1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!h) return 0;
    const int n = atomic_load_explicit(&sv->n_hosts, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (strcasecmp(h, sv->hosts[i]) == 0) return 1;
    return 0;
}

static int token_ok(const Server *sv, struct MHD_Connection *c) {
    const char *t = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Attnviz-Token");
    if (!t) t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    /* what OpenAI's clients send: Authorization: Bearer TOKEN */
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!t && a && !strncasecmp(a, "Bearer ", 7)) t = a + 7;
    return t && equal_ct(t, sv->token);
}

/* R_OPENAI (past R_N, not in ROUTES): openai.c's generation routes */
typedef enum { R_PAGE, R_MODELS, R_RUN, R_ATTENTION, R_THUMBS, R_QK, R_SAVE, R_TILE, R_ROW, R_HEADSTATS, R_IMAGE, R_N, R_OPENAI } Route;
static const struct {
    const char *path, *method;
} ROUTES[R_N] = {
    [R_PAGE] = {"/", "GET"},           [R_MODELS] = {"/api/models", "GET"}, [R_RUN] = {"/api/run", "POST"},
    [R_ATTENTION] = {"/api/attention", "GET"}, [R_THUMBS] = {"/api/thumbs", "GET"}, [R_QK] = {"/api/qk", "GET"},
    [R_SAVE] = {"/api/page", "GET"},           [R_TILE] = {"/api/tile", "GET"},     [R_ROW] = {"/api/row", "GET"},
    [R_HEADSTATS] = {"/api/headstats", "GET"}, [R_IMAGE] = {"/api/image", "POST"},
};

static int find_route(const char *url) {
    for (int i = 0; i < R_N; i++)
        if (strcmp(url, ROUTES[i].path) == 0) return i;
    return -1;
}

/* A whole decimal number in [lo, hi]; -1 when s is not one. */
static int parse_num(const char *s, long lo, long hi, long *v) {
    if (!s || !*s || strlen(s) > 12) return -1;
    long x = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        x = x * 10 + (*p - '0');
    }
    if (x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* "r<digits>" */
static int parse_run(struct MHD_Connection *c, unsigned *id) {
    const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run");
    long v;
    if (!s || s[0] != 'r' || parse_num(s + 1, 1, 0xffffffffL, &v)) return -1;
    *id = (unsigned)v;
    return 0;
}

/* "0,3,5" or "0-5": up to max entries, each in [0, limit). */
int serve_parse_list(const char *s, int limit, int max, int *out, int *n) {
    *n = 0;
    if (!s || !*s || strlen(s) > 4096) return -1;
    while (*s) {
        char *end;
        errno = 0;
        long a = strtol(s, &end, 10), b;
        if (end == s || errno || *s == '-' || *s == '+' || a < 0 || a >= limit) return -1;
        b = a;
        if (*end == '-') {
            s = end + 1;
            if (*s < '0' || *s > '9') return -1;
            b = strtol(s, &end, 10);
            if (errno || b < a || b >= limit) return -1;
        }
        for (long x = a; x <= b; x++) {
            if (*n >= max) return -1;
            out[(*n)++] = (int)x;
        }
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *n ? 0 : -1;
}

/* UTF-8 without NUL: a request's text is a C string from here on. */
static int utf8_valid(const char *s, size_t n) { return av_utf8_invalid_at(s, n) < 0 && !memchr(s, 0, n); }

/* ---------------------------------------------------------------- routes */

int serve_parse_run(const char *body, size_t len, ServeRunReq *q, const char **why) {
    memset(q, 0, sizeof *q);
    *why = NULL;
    if (!body || !utf8_valid(body, len)) return *why = "the body is not UTF-8 text", -1;
    cJSON *j;
    AvErr e = {0};
    const int pr = av_json_parse(&j, body, len, "the body", &e);
    if (pr > 0) return *why = "the body is not valid JSON", -1;
    if (pr < 0) { /* the message names the key: kept for the caller on this thread */
        static _Thread_local char msg[sizeof e.msg];
        memcpy(msg, e.msg, sizeof msg);
        return *why = msg, -1;
    }
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text"), *text_b = cJSON_GetObjectItemCaseSensitive(j, "text_b"),
                *model = cJSON_GetObjectItemCaseSensitive(j, "model"), *pred = cJSON_GetObjectItemCaseSensitive(j, "predict"),
                *dec = cJSON_GetObjectItemCaseSensitive(j, "decoder_text"), *gen = cJSON_GetObjectItemCaseSensitive(j, "generate"),
                *chat = cJSON_GetObjectItemCaseSensitive(j, "chat");
    if (!cJSON_IsObject(j)) *why = "the body must be a JSON object";
    else if (!cJSON_IsString(text)) *why = "\"text\" must be a string";
    else if (text_b && !cJSON_IsNull(text_b) && !cJSON_IsString(text_b)) *why = "\"text_b\" must be a string or null";
    else if (dec && !cJSON_IsNull(dec) && !cJSON_IsString(dec)) *why = "\"decoder_text\" must be a string or null";
    else if (model && !(cJSON_IsNumber(model) && model->valuedouble >= 0 && model->valuedouble <= 1e6 &&
                        model->valuedouble == (double)model->valueint))
        *why = "\"model\" must be a model's id";
    else if (pred && !cJSON_IsNull(pred) && !(cJSON_IsNumber(pred) && pred->valuedouble >= 0 && pred->valuedouble <= 100 &&
                                               pred->valuedouble == (double)pred->valueint))
        *why = "\"predict\" must be a count from 0 to 100";
    else if (gen && !cJSON_IsNull(gen) && !(cJSON_IsNumber(gen) && gen->valuedouble >= 0 && gen->valuedouble <= LIVE_MAX_GENERATE &&
                                             gen->valuedouble == (double)gen->valueint))
        *why = "\"generate\" must be a count from 0 to 512";
    else if (chat && !cJSON_IsBool(chat)) *why = "\"chat\" must be true or false";
    else if (!utf8_valid(text->valuestring, strlen(text->valuestring)) ||
             (cJSON_IsString(text_b) && !utf8_valid(text_b->valuestring, strlen(text_b->valuestring))) ||
             (cJSON_IsString(dec) && !utf8_valid(dec->valuestring, strlen(dec->valuestring))))
        *why = "the text is not valid UTF-8";
    else if (!text->valuestring[0]) *why = "the text is empty";
    if (!*why) {
        q->model = model ? model->valueint : 0;
        q->predict = cJSON_IsNumber(pred) ? pred->valueint : 0;
        q->generate = cJSON_IsNumber(gen) ? gen->valueint : 0;
        q->chat = cJSON_IsTrue(chat);
        q->text = strdup(text->valuestring);
        if (cJSON_IsString(text_b) && text_b->valuestring[0]) q->text_b = strdup(text_b->valuestring);
        if (cJSON_IsString(dec)) q->decoder_text = strdup(dec->valuestring);
        if (!q->text || (cJSON_IsString(text_b) && text_b->valuestring[0] && !q->text_b) ||
            (cJSON_IsString(dec) && !q->decoder_text))
            *why = "out of memory";
    }
    cJSON_Delete(j);
    if (*why) {
        serve_run_req_free(q);
        return -1;
    }
    return 0;
}

void serve_run_req_free(ServeRunReq *q) {
    free(q->text);
    free(q->text_b);
    free(q->decoder_text);
    q->text = q->text_b = q->decoder_text = NULL;
}

static enum MHD_Result do_run(Server *sv, struct MHD_Connection *c, Req *rq) {
    ServeRunReq q;
    const char *why;
    if (serve_parse_run(rq->body, rq->len, &q, &why) != 0) return send_error(c, 400, why);
    /* an encoder-decoder model: the source and the decoder's text (teacher-forced) */
    const int s2s = live_model_seq2seq(sv->lv, q.model), known = q.model < live_n_models(sv->lv);
    why = s2s && !q.decoder_text && !q.generate
              ? "this model is an encoder-decoder: \"decoder_text\" (the decoder's text, a string) or \"generate\" is required"
          : s2s && q.decoder_text && q.generate ? "\"decoder_text\" or \"generate\": the decoder's tokens come from one of them"
          : s2s && q.text_b ? "this model is an encoder-decoder: it reads \"text\" (the source) and \"decoder_text\", not \"text_b\""
          /* else live_run: no such model */
          : known && !s2s && q.decoder_text ? "\"decoder_text\" is for encoder-decoder models only"
          : known && !s2s && q.generate     ? "\"generate\" is for encoder-decoder models only"
          : q.chat && q.text_b              ? "\"chat\" makes the text one user message: no \"text_b\""
          : q.chat && s2s                   ? "\"chat\" is for decoders: this model is an encoder-decoder"
                                            : NULL;
    if (why) {
        serve_run_req_free(&q);
        return send_error(c, 400, why);
    }
    AvErr e = {0};
    unsigned id;
    char *json;
    LiveStatus st = s2s && q.generate && !q.predict
                        ? live_run_generate(sv->lv, q.model, q.text, q.generate, &id, &json, &e)
                        : q.chat ? live_run_chat(sv->lv, q.model, q.text, q.predict, &id, &json, &e)
                        : live_run(sv->lv, q.model, q.text, s2s ? q.decoder_text : q.text_b, q.predict, &id, &json, &e);
    serve_run_req_free(&q);
    if (st != LIVE_OK) return send_error(c, status_of(st), e.msg);
    return send_json(c, 200, json);
}

/* POST /api/image?model=N[&text=...][&name=...]: the body is the picture's file (Content-Type image/png or
 * image/jpeg, checked before the body is read); text: a whole CLIP/SigLIP model's. */
static enum MHD_Result do_image(Server *sv, struct MHD_Connection *c, Req *rq) {
    long m = 0;
    const char *ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
    const char *text = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "text");
    if (ms && parse_num(ms, 0, 1000000, &m)) return send_error(c, 400, "model must be a model's id");
    if (text && (!utf8_valid(text, strlen(text)) || strlen(text) > 65536))
        return send_error(c, 400, "text must be UTF-8 text of at most 64 KB");
    if (text && !text[0]) text = NULL;
    /* name: what the file was called (the page and messages say it; "upload" without one) */
    const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "name");
    if (name && (!utf8_valid(name, strlen(name)) || strlen(name) > 255))
        return send_error(c, 400, "name must be UTF-8 text of at most 255 bytes");
    if (!name || !name[0]) name = "upload";
    if (!rq->body || !rq->len) return send_error(c, 400, "the body is empty: send the picture's file (PNG or JPEG)");
    AvErr e = {0};
    unsigned id;
    char *json;
    LiveStatus st = live_run_image(sv->lv, (int)m, (const unsigned char *)rq->body, rq->len, name, text, &id, &json, &e);
    if (st != LIVE_OK) return send_error(c, status_of(st), e.msg);
    return send_json(c, 200, json);
}

static enum MHD_Result send_chunk(struct MHD_Connection *c, unsigned char *z, size_t len, const char *shape) {
    return send_buf(c, 200, "application/octet-stream", z, len, MHD_RESPMEM_MUST_FREE, "X-Attnviz-Shape", shape);
}

/* /api/tile: level=L&row=R&col=C, each within the run's tile geometry. */
static enum MHD_Result do_tile(Server *sv, struct MHD_Connection *c, LiveRun *r, int layer, int head) {
    int side, levels;
    live_tile_geom(sv->lv, r, &side, &levels);
    long level, tr, tc;
    char msg[96];
    if (parse_num(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "level"), 0, levels - 1, &level)) {
        snprintf(msg, sizeof msg, "level=L is required, 0 to %d", levels - 1);
        return send_error(c, 400, msg);
    }
    const int T = tile_count(live_run_tokens(r), side, (int)level);
    if (parse_num(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "row"), 0, T - 1, &tr) ||
        parse_num(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "col"), 0, T - 1, &tc)) {
        snprintf(msg, sizeof msg, "row=R and col=C are required, 0 to %d at level %ld", T - 1, level);
        return send_error(c, 400, msg);
    }
    AvErr e = {0};
    unsigned char *z;
    size_t len;
    int rows, cols;
    if (live_tile(sv->lv, r, layer, head, (int)level, (int)tr, (int)tc, &z, &len, &rows, &cols, &e) != 0)
        return send_error(c, 500, e.msg);
    snprintf(msg, sizeof msg, "%d,%d", rows, cols);
    return send_chunk(c, z, len, msg);
}

/* /api/attention, /api/thumbs, /api/qk, /api/tile, /api/row, /api/headstats: reads of a run's capture. */
static enum MHD_Result do_read(Server *sv, struct MHD_Connection *c, Route route) {
    unsigned id;
    if (parse_run(c, &id)) return send_error(c, 400, "run=rN is required");
    AvErr e = {0};
    LiveRun *r;
    LiveStatus st = live_acquire(sv->lv, id, &r, &e);
    if (st != LIVE_OK) return send_error(c, status_of(st), e.msg);
    int nl, nh, dh, n = live_run_tokens(r);
    live_run_shape(sv->lv, r, &nl, &nh, &dh);
    char shape[96];
    enum MHD_Result ok;
    long layer = 0, head = 0;
    const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "layer");
    const char *hs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "heads");
    /* measure=norm: value-weighted attention (serve --measure norm) */
    const char *ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "measure");
    const int norm = ms && !strcmp(ms, "norm");
    /* stack=encoder|decoder|cross: an encoder-decoder run's attention (its only read) */
    const char *ss = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "stack");
    const int s2s = live_is_seq2seq(r);
    int stack = -1, rows = n, cols = n;
    if (s2s) stack = live_stack(r, ss, &rows, &cols);
    if (stack >= 0) nl = live_stack_layers(r, stack); /* the decoder's depth may differ from the encoder's */
    if (ss && !s2s) {
        ok = send_error(c, 400, "stack applies to encoder-decoder runs only");
    } else if (s2s && route != R_ATTENTION) {
        ok = send_error(c, 400, "an encoder-decoder run is read by /api/attention with stack=encoder, decoder or cross "
                                "(its stacks are kept whole: no thumbnails, q/k, tiles, rows or head statistics)");
    } else if (s2s && stack < 0) {
        ok = send_error(c, 400, "stack=encoder, decoder or cross is required for an encoder-decoder run");
    } else if (s2s && ms) {
        ok = send_error(c, 400, "measure: an encoder-decoder run has attention only");
    } else if (ms && !norm && strcmp(ms, "attention")) {
        ok = send_error(c, 400, "measure is attention or norm");
    } else if (route != R_THUMBS && route != R_HEADSTATS && parse_num(ls, 0, nl - 1, &layer)) {
        snprintf(shape, sizeof shape, "layer=L is required, 0 to %d", nl - 1);
        ok = send_error(c, 400, shape);
    } else if (norm && route != R_ATTENTION && route != R_THUMBS) {
        ok = send_error(c, 400, "measure applies to /api/attention and /api/thumbs");
    } else if (norm && !live_has_norms(r)) {
        ok = send_error(c, 400, "measure=norm: this server computes no value norms (start it with --measure norm)");
    } else if ((route == R_ATTENTION || (route == R_THUMBS && norm)) && n > SERVE_MAX_MATRIX_TOKENS) {
        snprintf(shape, sizeof shape, "%d tokens: whole matrices stop at %d; read /api/tile and /api/row", n,
                 SERVE_MAX_MATRIX_TOKENS);
        ok = send_error(c, 413, shape);
    } else if (route == R_ATTENTION) {
        int heads[CAP_MAX_HEADS], n_heads = nh;
        for (int i = 0; i < nh; i++) heads[i] = i;
        unsigned char *z;
        size_t len;
        if (hs && serve_parse_list(hs, nh, nh, heads, &n_heads)) {
            snprintf(shape, sizeof shape, "heads must list heads 0 to %d (at most %d)", nh - 1, nh);
            ok = send_error(c, 400, shape);
        } else if (s2s) {
            if (live_stack_attention(sv->lv, r, stack, (int)layer, heads, n_heads, &z, &len, &e) != 0) {
                ok = send_error(c, 500, e.msg);
            } else {
                snprintf(shape, sizeof shape, "%d,%d,%d", n_heads, rows, cols);
                ok = send_chunk(c, z, len, shape);
            }
        } else if (live_attention(sv->lv, r, (int)layer, heads, n_heads, norm, &z, &len, &e) != 0) {
            ok = send_error(c, 500, e.msg);
        } else {
            snprintf(shape, sizeof shape, "%d,%d,%d", n_heads, n, n);
            ok = send_chunk(c, z, len, shape);
        }
    } else if (route == R_THUMBS) {
        unsigned char *z;
        size_t len;
        int s;
        if (live_thumbs(sv->lv, r, norm, &s, &z, &len, &e) != 0) {
            ok = send_error(c, 500, e.msg);
        } else {
            snprintf(shape, sizeof shape, "%d,%d,%d,%d", nl, nh, s, s);
            ok = send_chunk(c, z, len, shape);
        }
    } else if (route == R_HEADSTATS && !live_has_stats(r)) {
        ok = send_error(c, 404, "this run keeps no head statistics (inputs longer than --long-from tokens do)");
    } else if (route == R_HEADSTATS) {
        char *json = live_headstats(r);
        ok = json ? send_json(c, 200, json) : send_error(c, 500, "out of memory");
    } else if (parse_num(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "head"), 0, nh - 1, &head)) {
        snprintf(shape, sizeof shape, "head=H is required, 0 to %d", nh - 1);
        ok = send_error(c, 400, shape);
    } else if (route == R_TILE) {
        ok = do_tile(sv, c, r, (int)layer, (int)head);
    } else if (route == R_ROW) {
        long q;
        float *row;
        if (parse_num(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "query"), 0, n - 1, &q)) {
            snprintf(shape, sizeof shape, "query=I is required, 0 to %d", n - 1);
            ok = send_error(c, 400, shape);
        } else if (live_row(sv->lv, r, (int)layer, (int)head, (int)q, &row, &e) != 0) {
            ok = send_error(c, 500, e.msg);
        } else {
            snprintf(shape, sizeof shape, "%d", n);
            ok = send_chunk(c, (unsigned char *)row, (size_t)n * sizeof *row, shape);
        }
    } else {
        float *qk;
        size_t len;
        if (live_qk(sv->lv, r, (int)layer, (int)head, &qk, &len, &e) != 0) {
            ok = send_error(c, 500, e.msg);
        } else {
            snprintf(shape, sizeof shape, "%d,%d", n, dh);
            ok = send_chunk(c, (unsigned char *)qk, len, shape);
        }
    }
    live_release(sv->lv, r);
    return ok;
}

static enum MHD_Result do_save(Server *sv, struct MHD_Connection *c) {
    unsigned id;
    if (parse_run(c, &id)) return send_error(c, 400, "run=rN is required");
    const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "layers");
    int layers[CAP_MAX_LAYERS], n = 0;
    if (ls && serve_parse_list(ls, CAP_MAX_LAYERS, CAP_MAX_LAYERS, layers, &n))
        return send_error(c, 400, "layers must be a list such as 3 or 0-5");
    /* a long input's page: how many zoom levels it keeps (tiles.h) */
    const char *vs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "levels");
    long levels = 0;
    if (vs && parse_num(vs, 1, 3, &levels)) return send_error(c, 400, "levels must be 1 to 3");
    AvErr e = {0};
    char *html;
    size_t len;
    LiveStatus st = live_page(sv->lv, id, ls ? layers : NULL, n, (int)levels, &html, &len, &e);
    if (st != LIVE_OK) return send_error(c, status_of(st), e.msg);
    return send_buf(c, 200, "text/html; charset=utf-8", html, len, MHD_RESPMEM_MUST_FREE, "Content-Disposition",
                    "attachment; filename=\"attnviz.html\"");
}

static enum MHD_Result route_request(Server *sv, struct MHD_Connection *c, Route r, Req *rq) {
    switch (r) {
    case R_PAGE:
        return send_buf(c, 200, "text/html; charset=utf-8", sv->page, sv->page_len, MHD_RESPMEM_PERSISTENT, NULL, NULL);
    case R_MODELS:
        return send_buf(c, 200, "application/json", sv->models_json, strlen(sv->models_json), MHD_RESPMEM_PERSISTENT,
                        NULL, NULL);
    case R_RUN: return do_run(sv, c, rq);
    case R_IMAGE: return do_image(sv, c, rq);
    case R_ATTENTION:
    case R_THUMBS:
    case R_QK:
    case R_TILE:
    case R_ROW:
    case R_HEADSTATS: return do_read(sv, c, r);
    case R_SAVE: return do_save(sv, c);
    case R_OPENAI: return (enum MHD_Result)oa_handle(sv->oa, c, rq->url, rq->body, rq->len);
    case R_N: break;
    }
    return send_error(c, 404, "not found");
}

/* ---------------------------------------------------------------- connections */

static void client_key(const struct sockaddr *sa, uint8_t key[16]) {
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        key[15] = 4;
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) memcpy(key, a->s6_addr + 12, 4), key[15] = 4;
        else memcpy(key, a->s6_addr, 8); /* one client may hold a whole /64 */
    }
}

/* The client of key (created when create), or NULL; cn->mu held. */
static Client *client_get(Conns *cn, const uint8_t key[16], int create) {
    const uint32_t h = av_fnv1a(key, 16, AV_FNV_SEED) % SERVE_CLIENT_BUCKETS;
    for (Client *cl = cn->bucket[h]; cl; cl = cl->hnext)
        if (!memcmp(cl->key, key, 16)) return cl;
    if (!create) return NULL;
    Client *cl = calloc(1, sizeof *cl);
    if (!cl) return NULL;
    memcpy(cl->key, key, 16);
    cl->hnext = cn->bucket[h];
    cn->bucket[h] = cl;
    return cl;
}

static void client_drop(Conns *cn, Client *cl) {
    Client **p = &cn->bucket[av_fnv1a(cl->key, 16, AV_FNV_SEED) % SERVE_CLIENT_BUCKETS];
    while (*p != cl) p = &(*p)->hnext;
    *p = cl->hnext;
    free(cl);
}

/* The connection off both pending lists (cn->mu held). */
static void pending_unlink(Conns *cn, Conn *k) {
    if (!k->pending) return;
    Client *cl = k->client;
    if (k->prev) k->prev->next = k->next;
    else cn->head = k->next;
    if (k->next) k->next->prev = k->prev;
    else cn->tail = k->prev;
    if (k->cprev) k->cprev->cnext = k->cnext;
    else cl->head = k->cnext;
    if (k->cnext) k->cnext->cprev = k->cprev;
    else cl->tail = k->cprev;
    k->prev = k->next = k->cprev = k->cnext = NULL;
    k->pending = 0;
    cn->n_pending--, cl->n_pending--;
}

/* A request of the connection begins now: last on both pending lists (cn->mu held). */
static void pending_link(Conns *cn, Conn *k) {
    pending_unlink(cn, k);
    if (k->closing) return;
    Client *cl = k->client;
    k->since = av_now_ms();
    k->bad_token = 0;
    k->pending = 1;
    k->prev = cn->tail, k->next = NULL;
    if (cn->tail) cn->tail->next = k;
    else cn->head = k;
    cn->tail = k;
    k->cprev = cl->tail, k->cnext = NULL;
    if (cl->tail) cl->tail->cnext = k;
    else cl->head = k;
    cl->tail = k;
    cn->n_pending++, cl->n_pending++;
}

/* Closes a pending connection: its socket shut down, which the epoll thread sees as the end
 * of it (cn->mu held: the descriptor stays this connection's until its close notification,
 * which takes the lock, and libmicrohttpd closes it only after that). */
static void conn_close(Conns *cn, Conn *k) {
    pending_unlink(cn, k);
    if (k->closing) return;
    k->closing = 1;
    if (k->fd >= 0) shutdown(k->fd, SHUT_RDWR);
}

/* Whether a request's whole headers already wait in the socket: such a connection is answered
 * as soon as it is read, whatever it holds, so it is not pending. Without this look a user
 * sharing an address with a flood of new connections (loopback) could be closed as its
 * client's oldest before libmicrohttpd has read a byte of it (looked at on accept and again
 * before it would be closed, as its bytes may arrive just after the accept). */
static int headers_waiting(int fd) {
    char buf[4096];
    if (fd < 0) return 0;
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    return n >= 4 && memmem(buf, (size_t)n, "\r\n\r\n", 4) != NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    Conns *cn = &((Server *)cls)->cn;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const int fd = fi ? (int)fi->connect_fd : -1;
        uint8_t key[16];
        client_key(ai ? ai->client_addr : NULL, key);
        Conn *k = calloc(1, sizeof *k);
        pthread_mutex_lock(&cn->mu);
        Client *cl = k ? client_get(cn, key, 1) : NULL;
        if (!cl) { /* out of memory: a connection that cannot be bounded is not kept */
            pthread_mutex_unlock(&cn->mu);
            free(k);
            *socket_context = NULL;
            if (fd >= 0) shutdown(fd, SHUT_RDWR);
            return;
        }
        k->fd = fd, k->client = cl;
        cl->n_conns++, cn->n_conns++;
        if (!headers_waiting(fd)) pending_link(cn, k);
        while (cl->n_pending > SERVE_CLIENT_PENDING && cl->head) { /* the client's oldest still without its headers goes */
            Conn *old = cl->head;
            if (headers_waiting(old->fd)) { /* its request arrived after it was accepted: it is answered */
                pending_unlink(cn, old);
                continue;
            }
            conn_close(cn, old);
            cn->evicted++;
        }
        pthread_mutex_unlock(&cn->mu);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        Conn *k = *socket_context;
        pthread_mutex_lock(&cn->mu);
        pending_unlink(cn, k);
        cn->n_conns--;
        if (--k->client->n_conns == 0) client_drop(cn, k->client);
        pthread_mutex_unlock(&cn->mu);
        free(k);
        *socket_context = NULL;
    }
}

static Conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* pending 0: the connection's request has its headers (answered at once, whatever it
 * holds); 1: a new request may begin on it. */
static void conn_pending(Server *sv, struct MHD_Connection *c, int pending) {
    Conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&sv->cn.mu);
    if (pending) pending_link(&sv->cn, k);
    else pending_unlink(&sv->cn, k);
    pthread_mutex_unlock(&sv->cn.mu);
}

/* The "token" argument of a request line's URI: 1 this server's, 0 another, -1 none. */
static int uri_token(const Server *sv, const char *uri) {
    const char *q = strchr(uri, '?');
    for (const char *p = q; p && *p;) {
        p++;
        const char *end = strchr(p, '&');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= 6 && !memcmp(p, "token=", 6)) {
            char t[sizeof sv->token];
            if (n - 6 >= sizeof t) return 0;
            memcpy(t, p + 6, n - 6);
            t[n - 6] = '\0';
            return equal_ct(t, sv->token);
        }
        p = end;
    }
    return -1;
}

/* Called as soon as a request line is complete: a request whose URI carries the token is not
 * held to the header deadline, one whose URI carries a wrong token has a short one (it is
 * answered 403 if its headers arrive in time). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    Server *sv = cls;
    Conn *k = conn_of(c);
    const int t = uri_token(sv, uri);
    if (k && t >= 0) {
        pthread_mutex_lock(&sv->cn.mu);
        if (t == 1) pending_unlink(&sv->cn, k);
        else k->bad_token = 1;
        pthread_mutex_unlock(&sv->cn.mu);
    }
    return NULL;
}

/* Every SERVE_SWEEP_MS: pending connections past their deadline are closed, and past half
 * the connection limit the oldest pending ones too. */
static void *sweep(void *arg) {
    Conns *cn = arg;
    pthread_mutex_lock(&cn->mu);
    while (!cn->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)SERVE_SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&cn->wake, &cn->mu, &ts);
        const double now = av_now_ms();
        for (Conn *k = cn->head, *nx; k; k = nx) {
            nx = k->next;
            if (now - k->since > (k->bad_token ? SERVE_BAD_TOKEN_MS : SERVE_HEADER_DEADLINE_MS)) {
                conn_close(cn, k);
                cn->expired++;
            }
        }
        while (cn->n_pending > SERVE_MAX_CONNECTIONS / 2 && cn->head) {
            conn_close(cn, cn->head);
            cn->evicted++;
        }
    }
    pthread_mutex_unlock(&cn->mu);
    return NULL;
}

static int conns_init(Conns *cn, int max_active) {
    memset(cn, 0, sizeof *cn);
    cn->max_active = max_active;
    pthread_condattr_t ca;
    if (pthread_mutex_init(&cn->mu, NULL) || pthread_cond_init(&cn->idle, NULL) || pthread_condattr_init(&ca) ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) || pthread_cond_init(&cn->wake, &ca))
        return -1;
    pthread_condattr_destroy(&ca);
    if (pthread_create(&cn->sweeper, NULL, sweep, cn) != 0) return -1;
    cn->have_sweeper = 1;
    return 0;
}

/* Stops the sweeper and waits for the requests running in their own threads (each resumes
 * its connection when done), so that libmicrohttpd stops with none suspended. */
/* Until the answers the jobs and the streams made are sent (their requests completed), at most
 * SERVE_STOP_FLUSH_MS: libmicrohttpd's stop closes every connection at once, an answer the epoll
 * thread has not yet written with it ("the server is stopping" included). A client that does
 * not read holds the stop no longer than that. */
static void conns_flush(Conns *cn) {
    const double until = av_now_ms() + SERVE_STOP_FLUSH_MS;
    pthread_mutex_lock(&cn->mu);
    while (cn->in_flight > 0 && av_now_ms() < until) {
        pthread_mutex_unlock(&cn->mu);
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        pthread_mutex_lock(&cn->mu);
    }
    pthread_mutex_unlock(&cn->mu);
}

static void conns_quiesce(Conns *cn) {
    pthread_mutex_lock(&cn->mu);
    cn->stop = 1;
    pthread_cond_broadcast(&cn->wake);
    while (cn->active > 0) pthread_cond_wait(&cn->idle, &cn->mu);
    pthread_mutex_unlock(&cn->mu);
    if (cn->have_sweeper) pthread_join(cn->sweeper, NULL);
    cn->have_sweeper = 0;
}

typedef struct {
    Server *sv;
    struct MHD_Connection *c;
    Req *rq;
    Route route;
} Job;

/* A route in a thread of its own: its response is kept in the request, and the connection
 * resumed for the epoll thread to send it. Nothing of the request is touched after the
 * resume (the connection may end at once). */
static void *job_run(void *arg) {
    Job *j = arg;
    Conns *cn = &j->sv->cn;
    deferred_req = j->rq;
    if (route_request(j->sv, j->c, j->route, j->rq) == MHD_NO && j->rq->resp) {
        MHD_destroy_response(j->rq->resp);
        j->rq->resp = NULL;
    }
    deferred_req = NULL;
    j->rq->state = RQ_READY;
    MHD_resume_connection(j->c);
    pthread_mutex_lock(&cn->mu);
    if (--cn->active == 0) pthread_cond_broadcast(&cn->idle);
    pthread_mutex_unlock(&cn->mu);
    free(j);
    return NULL;
}

static enum MHD_Result refuse(struct MHD_Connection *c, Req *rq, unsigned status, const char *msg);

static enum MHD_Result start_job(Server *sv, struct MHD_Connection *c, Route r, Req *rq) {
    Conns *cn = &sv->cn;
    Job *j = malloc(sizeof *j);
    pthread_mutex_lock(&cn->mu);
    const int room = j && !cn->stop && cn->active < cn->max_active;
    if (room) cn->active++;
    pthread_mutex_unlock(&cn->mu);
    if (!room) {
        free(j);
        return refuse(c, rq, 503, "too many requests at once: try again");
    }
    *j = (Job){sv, c, rq, r};
    rq->state = RQ_WORKING;
    MHD_suspend_connection(c);
    pthread_attr_t at;
    pthread_t th;
    int ok = pthread_attr_init(&at) == 0;
    ok = ok && pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 && pthread_create(&th, &at, job_run, j) == 0;
    pthread_attr_destroy(&at);
    if (!ok) { /* answered as the thread would have, from here */
        deferred_req = rq;
        refuse(c, rq, 503, "no thread for the request: try again");
        deferred_req = NULL;
        rq->state = RQ_READY;
        free(j);
        MHD_resume_connection(c);
        pthread_mutex_lock(&cn->mu);
        if (--cn->active == 0) pthread_cond_broadcast(&cn->idle);
        pthread_mutex_unlock(&cn->mu);
    }
    return MHD_YES;
}

static enum MHD_Result find_nul(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value,
                                size_t value_size) {
    (void)kind;
    if ((key && strlen(key) != key_size) || (value && strlen(value) != value_size)) {
        *(int *)cls = 1;
        return MHD_NO;
    }
    return MHD_YES;
}

/* Whether a header or an argument of the query holds a NUL (%00): its C string would end
 * there and the rest be dropped unseen. */
static int has_nul(struct MHD_Connection *c) {
    int nul = 0;
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, find_nul, &nul);
    if (!nul) MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, find_nul, &nul);
    return nul;
}

/* Checks before reading a body: host, token, path, method, declared length. */
/* A refusal in the body style of the path: OpenAI's under /v1/, else {"error": msg}. */
static enum MHD_Result refuse(struct MHD_Connection *c, Req *rq, unsigned status, const char *msg) {
    rq->answered = 1;
    return rq->openai ? (enum MHD_Result)oa_send_status(c, status, msg) : send_error(c, status, msg);
}

static const char *body_over(const Req *rq) {
    return rq->limit == SERVE_MAX_IMAGE_BODY ? "the picture's file is over 20 MB" : "the body is over 1 MB";
}

static enum MHD_Result first_call(Server *sv, struct MHD_Connection *c, const char *url, const char *method, Req *rq) {
    rq->openai = oa_is_path(url);
    if (has_nul(c)) return refuse(c, rq, 400, "a NUL character (%00) in the query or a header");
    const int host = host_ok(sv, c);
    if (host < 0) return refuse(c, rq, 400, "more than one Host header");
    if (!host) return refuse(c, rq, 403, "the Host header does not name this server");
    if (!token_ok(sv, c))
        return rq->openai ? refuse(c, rq, 401, "missing or wrong API key: send the token attnviz serve printed as "
                                               "Authorization: Bearer TOKEN")
                          : refuse(c, rq, 403, "missing or wrong token (use the URL attnviz serve printed)");
    const int r = rq->openai ? -1 : find_route(url);
    const char *want = rq->openai ? oa_route_method(url) : r >= 0 ? ROUTES[r].method : NULL;
    if (!want) return refuse(c, rq, 404, "not found");
    int is_head = !strcmp(method, "HEAD") && !strcmp(want, "GET");
    if (strcmp(method, want) && !is_head) {
        char msg[80];
        snprintf(msg, sizeof msg, "%s takes %s", rq->openai ? url : ROUTES[r].path, want);
        return refuse(c, rq, 405, msg);
    }
    rq->limit = SERVE_MAX_BODY;
    if (r == R_IMAGE && !is_head) {
        /* a picture's file, told by its type before a byte of it is read */
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        const size_t tl = ct ? strcspn(ct, "; \t") : 0;
        if (!ct || !((tl == 9 && !strncasecmp(ct, "image/png", 9)) || (tl == 10 && !strncasecmp(ct, "image/jpeg", 10))))
            return refuse(c, rq, 415, "/api/image takes a PNG or JPEG file as the body (Content-Type image/png or image/jpeg)");
        rq->limit = SERVE_MAX_IMAGE_BODY;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    long v;
    if (cl && (parse_num(cl, 0, (long)rq->limit, &v) != 0)) return refuse(c, rq, 413, body_over(rq));
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    Server *sv = cls;
    Req *rq = *con_cls;
    if (!rq) {
        conn_pending(sv, c, 0); /* its headers are in: answered now, whatever they hold */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        pthread_mutex_lock(&sv->cn.mu);
        sv->cn.in_flight++;
        pthread_mutex_unlock(&sv->cn.mu);
        *con_cls = rq;
        return first_call(sv, c, url, method, rq);
    }
    if (rq->state == RQ_READY) { /* resumed: the route's thread is done */
        rq->state = RQ_READING;
        struct MHD_Response *r = rq->resp;
        rq->resp = NULL;
        if (!r) return MHD_NO;
        enum MHD_Result ok = MHD_queue_response(c, rq->status, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (rq->state == RQ_WORKING) return MHD_YES;
    if (*upload_size) {
        size_t k = *upload_size;
        *upload_size = 0;
        if (rq->answered) return MHD_YES;
        /* A body of unknown length (chunked) can only be answered once it has
         * been read: past the limit it is discarded, and past 16 times the
         * limit the connection is dropped. */
        rq->seen += k;
        if (rq->seen > 16 * (size_t)SERVE_MAX_BODY && rq->seen > rq->limit + (size_t)SERVE_MAX_BODY) return MHD_NO;
        if (rq->len + k > rq->limit || rq->too_big) {
            rq->too_big = 1;
            return MHD_YES;
        }
        char *nb = realloc(rq->body, rq->len + k + 1);
        if (!nb) return MHD_NO;
        memcpy(nb + rq->len, upload, k);
        rq->body = nb;
        rq->len += k;
        rq->body[rq->len] = '\0';
        return MHD_YES;
    }
    if (rq->answered) return MHD_YES;
    rq->answered = 1;
    if (rq->too_big) return refuse(c, rq, 413, body_over(rq));
    /* OpenAI's: the model list is made, answered here; a generation waits for the model (and a
     * stream's events are read without waiting: openai.c) */
    if (rq->openai && oa_is_models(url)) return (enum MHD_Result)oa_handle(sv->oa, c, url, rq->body, rq->len);
    if (rq->openai) {
        if (!(rq->url = strdup(url))) return MHD_NO;
        return start_job(sv, c, R_OPENAI, rq);
    }
    const Route r = (Route)find_route(url);
    /* the page and the model list are made: answered here; the rest may wait for the model */
    if (r == R_PAGE || r == R_MODELS) return route_request(sv, c, r, rq);
    return start_job(sv, c, r, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    Req *rq = *con_cls;
    if (rq) {
        Conns *cn = &((Server *)cls)->cn;
        pthread_mutex_lock(&cn->mu);
        cn->in_flight--;
        pthread_mutex_unlock(&cn->mu);
        if (rq->resp) MHD_destroy_response(rq->resp);
        free(rq->body);
        free(rq->url);
        free(rq);
    }
    *con_cls = NULL;
    conn_pending(cls, c, 1); /* the connection's next request, if any, begins */
}

/* ---------------------------------------------------------------- the server */

static int is_loopback(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a);
}

static char *live_json(const Server *sv, const ServeSpec *o) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    fprintf(f, "{\"version\":1,\"token\":\"%s\",\"models\":", sv->token);
    const char *models = strchr(sv->models_json, '[');
    fwrite(models, 1, strlen(models) - 1, f); /* the array inside {"models":[...]} */
    fputs(",\"text\":", f);
    if (o->page.text_a) json_write_string(f, o->page.text_a);
    else fputs("null", f);
    fputs(",\"text_b\":", f);
    if (o->page.text_b) json_write_string(f, o->page.text_b);
    else fputs("null", f);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

static void open_browser(const char *url) {
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1), dup2(null, 2);
        execlp("xdg-open", "xdg-open", url, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        av_warn("--open: could not start a browser (xdg-open); open the URL yourself");
}

static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig) {
    unsigned char b = (unsigned char)sig;
    ssize_t k = write(stop_pipe[1], &b, 1);
    (void)k;
}

int serve_run(const ServeSpec *o, AvErr *e) {
    Server sv;
    memset(&sv, 0, sizeof sv);
    int rc = -1;
    struct MHD_Daemon *d = NULL;
    char *lj = NULL;

    /* the address first: a bad --host is a usage error, before loading anything */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    const char *host = o->host ? o->host : "127.0.0.1";
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)o->port);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)o->port);
    } else {
        return av_err_usage(e, "--host needs a numeric IPv4 or IPv6 address, got '%s'", host);
    }
    if (!is_loopback(&ss))
        av_warn("--host %s: anyone who can reach this address and has the URL's token can run the model", host);

    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return av_err(e, "no random bytes for the token");
    for (int i = 0; i < 16; i++) snprintf(sv.token + 2 * i, 3, "%02x", rnd[i]);

    /* idle connections are file descriptors: allow what the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* A long-running process whose large buffers (captures, attention) come and
     * go: give them back to the system when freed, and keep one arena per core
     * rather than per connection thread, so memory stays flat under load. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 2);

    /* no --model: the one the CLI would find (path NULL) */
    ModelSpec models[16];
    const int nm = o->n_models ? o->n_models : 1;
    for (int i = 0; i < nm; i++) models[i] = (ModelSpec){o->n_models ? o->models[i] : NULL, o->lowercase, 0, 1, NULL};
    LiveLimits lim = {(size_t)(o->cache_mb * 1e6), o->max_queue, o->timeout_s * 1000.0, 512, 64, TILE_SIDE, o->long_from,
                      HTML_LONG_TOP_K, o->qk_prec};
    if (live_open(&sv.lv, models, nm, &o->page, &lim, e) != 0) goto out;
    if (!(sv.oa = oa_server_new(sv.lv)) || !(sv.models_json = live_models_json(sv.lv)) || !(lj = live_json(&sv, o))) {
        av_err(e, "out of memory");
        goto out;
    }
    FILE *f = open_memstream(&sv.page, &sv.page_len);
    if (!f) {
        av_err(e, "out of memory");
        goto out;
    }
    int prc = html_write_live(f, lj, o->page.output.templates_dir, e);
    if (fclose(f) != 0 || prc != 0) {
        if (!prc) av_err(e, "out of memory");
        goto out;
    }

    /* SIGINT/SIGTERM may land on any thread (BLAS starts its own before
     * main): the handler only writes to a pipe the main thread waits on. */
    if (pipe(stop_pipe) != 0) {
        av_err(e, "cannot create a pipe: %s", strerror(errno));
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (conns_init(&sv.cn, o->max_queue + SERVE_MAX_ACTIVE_EXTRA) != 0) {
        av_err(e, "cannot start the connection sweeper: %s", strerror(errno));
        goto out;
    }
    /* one epoll thread for every socket (libmicrohttpd's; no thread per connection); routes
     * that may wait run in threads of their own with the connection suspended */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* every connection is a descriptor: the limit stays below what this process may open */
    unsigned max_conns = SERVE_MAX_CONNECTIONS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_conns + 256)
        max_conns = rl.rlim_cur > 512 ? (unsigned)rl.rlim_cur - 256 : 256;
    d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, &sv, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_s,
                         MHD_OPTION_CONNECTION_LIMIT, max_conns,
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_HEADER_BYTES,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, &sv,
                         MHD_OPTION_NOTIFY_CONNECTION, on_connection, &sv,
                         MHD_OPTION_URI_LOG_CALLBACK, on_uri, &sv,
                         MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_END);
    if (!d) {
        av_err(e, "cannot listen on %s port %d: %s", host, o->port, errno ? strerror(errno) : "libmicrohttpd failed");
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    const int port = info ? info->port : o->port;
    const char *names[] = {"127.0.0.1", "localhost", "[::1]"};
    int nh = 0;
    for (int i = 0; i < 3; i++) snprintf(sv.hosts[nh++], sizeof sv.hosts[0], "%s:%d", names[i], port);
    char shown[300];
    if (ss.ss_family == AF_INET6) snprintf(shown, sizeof shown, "[%s]:%d", host, port);
    else snprintf(shown, sizeof shown, "%s:%d", host, port);
    snprintf(sv.hosts[nh++], sizeof sv.hosts[0], "%s", shown);
    /* requests already in (the port was open) see hosts[] whole or not at all */
    atomic_store_explicit(&sv.n_hosts, nh, memory_order_release);

    char url[400];
    snprintf(url, sizeof url, "http://%s/?token=%s", shown, sv.token);
    printf("%s\n", url);
    fflush(stdout);
    if (!o->page.quiet)
        av_info("serving %d model%s at the URL above; Ctrl-C stops", nm, nm > 1 ? "s" : "");
    if (o->open_browser) open_browser(url);

    unsigned char sig = 0;
    while (read(stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (!o->page.quiet) av_info("%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
out:
    /* the streams' threads end first (each resumes its connection), then the jobs, their answers are
     * sent, then libmicrohttpd stops */
    oa_server_stop(sv.oa);
    if (d) {
        conns_quiesce(&sv.cn);
        conns_flush(&sv.cn);
        MHD_stop_daemon(d);
    } else if (sv.cn.have_sweeper) {
        conns_quiesce(&sv.cn);
    }
    oa_server_free(sv.oa);
    for (int i = 0; i < 2; i++)
        if (stop_pipe[i] >= 0) close(stop_pipe[i]), stop_pipe[i] = -1;
    live_close(sv.lv);
    free(sv.page);
    free(sv.models_json);
    free(lj);
    return rc;
}
