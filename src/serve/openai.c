/* openai.c — attnviz serve's OpenAI-compatible routes (openai.h; the formats
 * are OpenAI's chat.completion, chat.completion.chunk and text_completion
 * objects, documented with attnviz's attention extension in
 * docs/serve-api.md).
 *
 * A request is parsed and checked whole, its prompt tokenized and its cost
 * bounded, and it takes its place in the forward queue before any answer
 * starts, so every refusal is a status with an OpenAI error body. serve.c
 * runs this in a thread of the request's own, its connection suspended, so
 * nothing here holds libmicrohttpd's one epoll thread. A non-streamed request
 * then generates on that thread. A streamed one generates on a thread of its
 * own that appends server-sent events to a buffer; the response's reader,
 * which libmicrohttpd calls on its epoll thread, never waits: it hands over
 * what the buffer holds, or suspends the connection and returns 0 bytes, and
 * the generating thread resumes it when it appends an event or ends
 * (libmicrohttpd 0.9.75: a reader that returns 0 without suspending is called
 * again at once, a busy loop). A client that goes away (its socket closed:
 * checked before every token and while waiting for the model) cancels the
 * generation at the next token, and the model's turn and the queue place are
 * given back at once. A job is freed by the last of its response and its
 * generating thread. */
#include "openai.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "generate.h"
#include "output.h"
#include "serve_http.h"
#include "session.h"
#include "util.h"
#include "version.h"

/* The stream's buffer waits for its reader past this many bytes. */
#define OA_STREAM_HIGH (8u << 20)

/* ---------------------------------------------------------------- errors */

static int set_err(OaError *err, unsigned status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int set_err(OaError *err, unsigned status, const char *type, const char *param, const char *code,
                   const char *fmt, ...) {
    err->status = status, err->type = type, err->param = param, err->code = code;
    va_list ap;
    va_start(ap, fmt);
    char raw[512];
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    av_sanitize(err->message, sizeof err->message, raw);
    return -1;
}

#define BAD(param, ...) set_err(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)
#define UNSUPPORTED(param, ...) set_err(err, 400, "invalid_request_error", param, "unsupported_parameter", __VA_ARGS__)

static void json_str_or_null(FILE *f, const char *s) {
    if (s) json_write_string(f, s);
    else fputs("null", f);
}

static char *error_json(const OaError *err) {
    AvBuf b;
    if (av_buf_open(&b)) return NULL;
    fputs("{\"error\":{\"message\":", b.f);
    json_write_string(b.f, err->message);
    fputs(",\"type\":", b.f);
    json_str_or_null(b.f, err->type);
    fputs(",\"param\":", b.f);
    json_str_or_null(b.f, err->param);
    fputs(",\"code\":", b.f);
    json_str_or_null(b.f, err->code);
    fputs("}}", b.f);
    return av_buf_close(&b, !ferror(b.f));
}

int oa_send_error(struct MHD_Connection *c, const OaError *err) {
    char *s = error_json(err);
    if (!s) return MHD_NO;
    return serve_send(c, err->status, "application/json", s, strlen(s), MHD_RESPMEM_MUST_FREE,
                      err->status == 429 ? "Retry-After" : NULL, "1");
}

int oa_send_status(struct MHD_Connection *c, unsigned status, const char *msg) {
    OaError err;
    const char *type = status == 401 ? "invalid_request_error"
                       : status == 403 ? "permission_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    const char *code = status == 401 ? "invalid_api_key"
                       : status == 429 ? "rate_limit_exceeded"
                       : status == 504 ? "timeout"
                       : status == 413 ? "request_too_large"
                                       : NULL;
    set_err(&err, status, type, NULL, code, "%s", msg);
    return oa_send_error(c, &err);
}

static unsigned live_status(LiveStatus st) {
    switch (st) {
    case LIVE_OK: return 200;
    case LIVE_BAD_INPUT: return 400;
    case LIVE_NOT_FOUND: return 404;
    case LIVE_TOO_BIG: return 413;
    case LIVE_BUSY: return 429;
    case LIVE_TIMEOUT: return 504;
    case LIVE_FAILED: break;
    }
    return 500;
}

/* ---------------------------------------------------------------- parsing */

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether any object in j holds a key twice (a second "model" or "stop" must not
 * silently win): each object's names sorted, neighbours compared. *where: the key. */
static int has_duplicate_key(const cJSON *j, const char **where) {
    if (cJSON_IsObject(j)) {
        int n = 0;
        for (const cJSON *c = j->child; c; c = c->next) n++;
        if (n > 1) {
            const char **names = malloc((size_t)n * sizeof *names);
            if (!names) return *where = "(out of memory)", 1;
            int k = 0;
            for (const cJSON *c = j->child; c; c = c->next) names[k++] = c->string ? c->string : "";
            qsort(names, (size_t)n, sizeof *names, name_cmp);
            for (int i = 1; i < n; i++)
                if (!strcmp(names[i - 1], names[i])) {
                    *where = names[i];
                    free(names);
                    return 1;
                }
            free(names);
        }
    }
    if (cJSON_IsObject(j) || cJSON_IsArray(j))
        for (const cJSON *c = j->child; c; c = c->next)
            if (has_duplicate_key(c, where)) return 1;
    return 0;
}

static int is_int(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi && v->valuedouble == floor(v->valuedouble);
}

static int utf8_ok(const char *s) { return av_utf8_invalid_at(s, strlen(s)) < 0; }

/* A list of indices (each 0..CAP_MAX_LAYERS - 1, at most CAP_MAX_LAYERS) or null. */
static int parse_index_list(const cJSON *v, const char *param, int **out, int *n, OaError *err) {
    *out = NULL, *n = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v)) return BAD(param, "%s must be a list of indices or null", param);
    const int k = cJSON_GetArraySize(v);
    if (k < 1 || k > CAP_MAX_LAYERS) return BAD(param, "%s must list 1 to %d indices", param, CAP_MAX_LAYERS);
    if (!(*out = malloc((size_t)k * sizeof **out))) return BAD(param, "out of memory");
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (!is_int(c, 0, CAP_MAX_LAYERS - 1))
            return BAD(param, "%s must hold whole numbers from 0 (a layer or head of the model)", param);
        (*out)[i++] = (int)c->valuedouble;
    }
    *n = k;
    return 0;
}

static int parse_attention(const cJSON *a, OaRequest *q, OaError *err) {
    if (!a || cJSON_IsNull(a) || cJSON_IsFalse(a)) return 0;
    if (cJSON_IsTrue(a)) a = NULL; /* every default */
    else if (!cJSON_IsObject(a)) return BAD("attention", "attention must be an object (or true)");
    static const char *const KEYS[] = {"layers", "heads", "top_k", "stats", "rows", "prompt"};
    for (const cJSON *c = a ? a->child : NULL; c; c = c->next) {
        size_t k = 0;
        while (k < sizeof KEYS / sizeof *KEYS && strcmp(c->string, KEYS[k])) k++;
        if (k == sizeof KEYS / sizeof *KEYS)
            return BAD("attention", "attention: unknown field \"%s\" (layers, heads, top_k, stats, rows, prompt)", c->string);
    }
    q->attn = 1, q->top_k = 8, q->stats = 1;
    if (!a) return 0;
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(a, "top_k"), *st = cJSON_GetObjectItemCaseSensitive(a, "stats"),
                *rw = cJSON_GetObjectItemCaseSensitive(a, "rows"), *pr = cJSON_GetObjectItemCaseSensitive(a, "prompt");
    if (parse_index_list(cJSON_GetObjectItemCaseSensitive(a, "layers"), "attention.layers", &q->layers, &q->n_layers, err) ||
        parse_index_list(cJSON_GetObjectItemCaseSensitive(a, "heads"), "attention.heads", &q->heads, &q->n_heads, err))
        return -1;
    if (tk && !is_int(tk, 0, CAP_TEL_MAX_TOP)) return BAD("attention.top_k", "attention.top_k must be 0 to %d", CAP_TEL_MAX_TOP);
    if (tk) q->top_k = (int)tk->valuedouble;
    if ((st && !cJSON_IsBool(st)) || (rw && !cJSON_IsBool(rw)) || (pr && !cJSON_IsBool(pr)))
        return BAD("attention", "attention.stats, .rows and .prompt must be true or false");
    if (st) q->stats = cJSON_IsTrue(st);
    q->rows = rw && cJSON_IsTrue(rw);
    q->prompt_rows = pr && cJSON_IsTrue(pr);
    return 0;
}

/* A message's content into msg: a string, a list of {"type": "text", "text": ...} parts (kept as
 * parts: chat_render_openai decides how the template sees them), or null / absent (no content). */
static int message_content(const cJSON *c, int i, PipeChatMsg *msg, OaError *err) {
    if (cJSON_IsString(c)) {
        if (!utf8_ok(c->valuestring)) return BAD("messages", "messages[%d].content is not valid UTF-8", i);
        return (msg->content = strdup(c->valuestring)) ? 0 : BAD("messages", "out of memory");
    }
    if (!c || cJSON_IsNull(c)) return 0;
    if (!cJSON_IsArray(c)) return BAD("messages", "messages[%d].content must be a string or a list of text parts", i);
    const int n = cJSON_GetArraySize(c);
    const char **parts = calloc((size_t)(n ? n : 1), sizeof *parts);
    if (!parts) return BAD("messages", "out of memory");
    msg->parts = parts;
    for (const cJSON *p = c->child; p; p = p->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type"), *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(t)) return BAD("messages", "messages[%d].content: each part needs a \"type\"", i);
        if (strcmp(t->valuestring, "text"))
            return UNSUPPORTED("messages", "messages[%d].content: \"%.40s\" parts are not supported (text only)", i, t->valuestring);
        if (!cJSON_IsString(x) || !utf8_ok(x->valuestring))
            return BAD("messages", "messages[%d].content: a text part needs \"text\", a UTF-8 string", i);
        for (const cJSON *k = p->child; k; k = k->next)
            if (strcmp(k->string, "type") && strcmp(k->string, "text"))
                return BAD("messages", "messages[%d].content: unknown field \"%.40s\" in a text part", i, k->string);
        if (!(parts[msg->n_parts] = strdup(x->valuestring))) return BAD("messages", "out of memory");
        msg->n_parts++;
    }
    return 0;
}

static int parse_messages(const cJSON *m, OaRequest *q, OaError *err) {
    if (!cJSON_IsArray(m)) return BAD("messages", "messages must be a list of {\"role\", \"content\"}");
    const int n = cJSON_GetArraySize(m);
    if (n < 1 || n > OA_MAX_MESSAGES) return BAD("messages", "messages must hold 1 to %d messages", OA_MAX_MESSAGES);
    if (!(q->msgs = calloc((size_t)n, sizeof *q->msgs))) return BAD("messages", "out of memory");
    int i = 0;
    for (const cJSON *x = m->child; x; x = x->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role");
        if (!cJSON_IsObject(x) || !cJSON_IsString(role)) return BAD("messages", "messages[%d] needs a \"role\"", i);
        const char *r = role->valuestring;
        if (!strcmp(r, "tool") || !strcmp(r, "function") || cJSON_GetObjectItemCaseSensitive(x, "tool_calls") ||
            cJSON_GetObjectItemCaseSensitive(x, "function_call"))
            return UNSUPPORTED("messages", "messages[%d]: tool and function calls are not supported", i);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "developer"))
            return BAD("messages", "messages[%d].role \"%.40s\" is not system, developer, user or assistant", i, r);
        for (const cJSON *c = x->child; c; c = c->next)
            if (strcmp(c->string, "role") && strcmp(c->string, "content") && strcmp(c->string, "name"))
                return BAD("messages", "messages[%d]: unknown field \"%.40s\"", i, c->string);
        /* the role as sent: chat_render_openai maps "developer" for templates that do not name it */
        PipeChatMsg *msg = &q->msgs[i];
        q->n_msgs = i + 1;
        if (!(msg->role = strdup(r))) return BAD("messages", "out of memory");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(x, "name");
        if (name && !cJSON_IsNull(name)) {
            if (!cJSON_IsString(name) || !utf8_ok(name->valuestring))
                return BAD("messages", "messages[%d].name must be a UTF-8 string", i);
            if (!(msg->name = strdup(name->valuestring))) return BAD("messages", "out of memory");
        }
        if (message_content(cJSON_GetObjectItemCaseSensitive(x, "content"), i, msg, err)) return -1;
    }
    return 0;
}

static int parse_prompt(const cJSON *p, OaRequest *q, OaError *err) {
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsString(p)) {
        if (!utf8_ok(p->valuestring)) return BAD("prompt", "the prompt is not valid UTF-8");
        if (!p->valuestring[0]) return BAD("prompt", "the prompt is empty");
        return (q->prompt = strdup(p->valuestring)) ? 0 : BAD("prompt", "out of memory");
    }
    if (cJSON_IsArray(p) && p->child && cJSON_IsNumber(p->child)) { /* token ids */
        const int n = cJSON_GetArraySize(p);
        if (!(q->prompt_ids = malloc((size_t)n * sizeof *q->prompt_ids))) return BAD("prompt", "out of memory");
        int i = 0;
        for (const cJSON *c = p->child; c; c = c->next) {
            if (!is_int(c, 0, 1 << 30)) return BAD("prompt", "a prompt of token ids must hold whole numbers from 0");
            q->prompt_ids[i++] = (int)c->valuedouble;
        }
        q->n_prompt_ids = n;
        return 0;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1)
        return UNSUPPORTED("prompt", "one prompt per request: a list of several prompts is not supported");
    return BAD("prompt", "prompt must be a string, or a list of token ids");
}

/* Fields a client may send that change nothing here (their defaults, or bookkeeping). */
static int is_neutral(const cJSON *c) {
    static const char *const IGNORED[] = {"user", "metadata", "store", "service_tier", "parallel_tool_calls", "prompt_cache_key",
                                          "safety_identifier"};
    for (size_t i = 0; i < sizeof IGNORED / sizeof *IGNORED; i++)
        if (!strcmp(c->string, IGNORED[i])) return 1;
    return 0;
}

/* Whether a JSON text writes a NUL as \u0000 inside a string: the parsed C string would end there. */
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return 1;
            i++; /* the escaped character */
        }
    return 0;
}

int oa_parse_request(const char *body, size_t len, int chat, OaRequest *q, OaError *err) {
    memset(q, 0, sizeof *q);
    q->chat = chat, q->temperature = 1.0, q->top_p = 1.0;
    if (!body || av_utf8_invalid_at(body, len) >= 0 || memchr(body, 0, len))
        return BAD(NULL, "the body is not UTF-8 text");
    if (has_nul_escape(body, len)) return BAD(NULL, "a string holds a NUL character (\\u0000)");
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) return BAD(NULL, "the body is not valid JSON");
    int rc = -1;
    const char *dup = NULL;
    if (!cJSON_IsObject(j)) {
        BAD(NULL, "the body must be a JSON object");
        goto done;
    }
    if (has_duplicate_key(j, &dup)) {
        BAD(NULL, "the key \"%.60s\" appears twice in one object", dup);
        goto done;
    }
    static const char *const KNOWN_CHAT[] = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature",
                                             "top_p", "seed", "stop", "stream", "stream_options", "logprobs",
                                             "top_logprobs", "n", "attention", "tools", "tool_choice", "functions",
                                             "function_call", "response_format", "presence_penalty", "frequency_penalty",
                                             "logit_bias", "modalities"};
    static const char *const KNOWN_TEXT[] = {"model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop",
                                             "stream", "stream_options", "logprobs", "n", "attention", "echo",
                                             "best_of", "suffix", "presence_penalty", "frequency_penalty", "logit_bias"};
    for (const cJSON *c = j->child; c; c = c->next) {
        const char *const *known = chat ? KNOWN_CHAT : KNOWN_TEXT;
        const size_t nk = chat ? sizeof KNOWN_CHAT / sizeof *KNOWN_CHAT : sizeof KNOWN_TEXT / sizeof *KNOWN_TEXT;
        size_t k = 0;
        while (k < nk && strcmp(c->string, known[k])) k++;
        if (k == nk && !is_neutral(c)) {
            BAD(NULL, "Unrecognized request argument supplied: %.60s", c->string);
            goto done;
        }
    }
#define GET(name) cJSON_GetObjectItemCaseSensitive(j, name)
#define SET(v) (v && !cJSON_IsNull(v))
    const cJSON *model = GET("model"), *mt = GET("max_tokens"), *mct = GET("max_completion_tokens"),
                *temp = GET("temperature"), *topp = GET("top_p"), *seed = GET("seed"), *stop = GET("stop"),
                *stream = GET("stream"), *so = GET("stream_options"), *lp = GET("logprobs"), *tlp = GET("top_logprobs"),
                *n = GET("n");
    if (!cJSON_IsString(model) || !model->valuestring[0] || !utf8_ok(model->valuestring)) {
        BAD("model", "you must provide a model parameter (an id of GET /v1/models)");
        goto done;
    }
    if (!(q->model = strdup(model->valuestring))) {
        BAD(NULL, "out of memory");
        goto done;
    }
    if (chat ? parse_messages(GET("messages"), q, err) : parse_prompt(GET("prompt"), q, err)) goto done;
    /* refused: what would change the meaning of the answer and is not done here */
    if (SET(n) && !is_int(n, 1, 1)) {
        UNSUPPORTED("n", "n must be 1: one choice per request");
        goto done;
    }
    const char *tools[] = {"tools", "functions", "tool_choice", "function_call"};
    for (int i = 0; i < 4; i++) {
        const cJSON *t = GET(tools[i]);
        if (SET(t) && !(cJSON_IsArray(t) && !t->child) && !(cJSON_IsString(t) && !strcmp(t->valuestring, "none"))) {
            UNSUPPORTED(tools[i], "tools and function calling are not supported");
            goto done;
        }
    }
    const cJSON *rf = GET("response_format");
    if (SET(rf)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text")) {
            UNSUPPORTED("response_format", "response_format: only {\"type\": \"text\"} is supported");
            goto done;
        }
    }
    const char *zeros[] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = GET(zeros[i]);
        if (SET(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
            UNSUPPORTED(zeros[i], "%s is not supported (0 only)", zeros[i]);
            goto done;
        }
    }
    const cJSON *lb = GET("logit_bias"), *echo = GET("echo"), *best = GET("best_of"), *suffix = GET("suffix"),
                *mods = GET("modalities");
    if (SET(lb) && !(cJSON_IsObject(lb) && !lb->child)) {
        UNSUPPORTED("logit_bias", "logit_bias is not supported");
        goto done;
    }
    if (SET(echo) && !cJSON_IsFalse(echo)) {
        UNSUPPORTED("echo", "echo is not supported");
        goto done;
    }
    if (SET(best) && !is_int(best, 1, 1)) {
        UNSUPPORTED("best_of", "best_of must be 1");
        goto done;
    }
    if (SET(suffix)) {
        UNSUPPORTED("suffix", "suffix is not supported");
        goto done;
    }
    if (SET(mods) && !(cJSON_IsArray(mods) && cJSON_GetArraySize(mods) == 1 && cJSON_IsString(mods->child) &&
                       !strcmp(mods->child->valuestring, "text"))) {
        UNSUPPORTED("modalities", "modalities: text only");
        goto done;
    }
    /* sampling and length */
    if (SET(mt) && SET(mct) && !(cJSON_IsNumber(mt) && cJSON_IsNumber(mct) && mt->valuedouble == mct->valuedouble)) {
        BAD("max_tokens", "max_tokens and max_completion_tokens differ: send one");
        goto done;
    }
    const cJSON *m = SET(mct) ? mct : mt;
    const char *mname = SET(mct) ? "max_completion_tokens" : "max_tokens";
    if (SET(m) && !is_int(m, 1, OA_MAX_TOKENS)) {
        BAD(mname, "%s must be a whole number from 1 to %d (this server's limit)", mname, OA_MAX_TOKENS);
        goto done;
    }
    if (SET(m)) q->max_tokens = (int)m->valuedouble;
    if (SET(temp) && !(cJSON_IsNumber(temp) && temp->valuedouble >= 0 && temp->valuedouble <= 2)) {
        BAD("temperature", "temperature must be a number from 0 to 2");
        goto done;
    }
    if (SET(temp)) q->temperature = temp->valuedouble;
    if (SET(topp) && !(cJSON_IsNumber(topp) && topp->valuedouble > 0 && topp->valuedouble <= 1)) {
        BAD("top_p", "top_p must be a number above 0, at most 1");
        goto done;
    }
    if (SET(topp)) q->top_p = topp->valuedouble;
    if (SET(seed) && !is_int(seed, -9007199254740991.0, 9007199254740991.0)) {
        BAD("seed", "seed must be a whole number (at most 2^53 in size)");
        goto done;
    }
    if (SET(seed)) q->has_seed = 1, q->seed = (unsigned long long)(long long)seed->valuedouble;
    if (SET(stop)) {
        const cJSON *one = cJSON_IsString(stop) ? stop : NULL;
        if (!one && !cJSON_IsArray(stop)) {
            BAD("stop", "stop must be a string or a list of up to %d strings", PIPE_GEN_MAX_STOP);
            goto done;
        }
        if (!one && cJSON_GetArraySize(stop) > PIPE_GEN_MAX_STOP) {
            BAD("stop", "stop holds at most %d strings", PIPE_GEN_MAX_STOP);
            goto done;
        }
        for (const cJSON *s = one ? one : stop->child; s; s = one ? NULL : s->next) {
            if (!cJSON_IsString(s) || !s->valuestring[0] || strlen(s->valuestring) > 256 || !utf8_ok(s->valuestring)) {
                BAD("stop", "each stop string must be non-empty UTF-8 text of at most 256 bytes");
                goto done;
            }
            if (!(q->stop[q->n_stop++] = strdup(s->valuestring))) {
                BAD(NULL, "out of memory");
                goto done;
            }
        }
    }
    if (SET(stream) && !cJSON_IsBool(stream)) {
        BAD("stream", "stream must be true or false");
        goto done;
    }
    q->stream = cJSON_IsTrue(stream);
    if (SET(so)) {
        const cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu))) {
            BAD("stream_options", "stream_options must be {\"include_usage\": true|false}");
            goto done;
        }
        for (const cJSON *c = so->child; c; c = c->next)
            if (strcmp(c->string, "include_usage") && strcmp(c->string, "include_obfuscation")) {
                BAD("stream_options", "stream_options: unknown field \"%.40s\"", c->string);
                goto done;
            }
        if (!q->stream) {
            BAD("stream_options", "stream_options is only allowed when stream is true");
            goto done;
        }
        q->include_usage = cJSON_IsTrue(iu);
    }
    if (chat) {
        if (SET(lp) && !cJSON_IsBool(lp)) {
            BAD("logprobs", "logprobs must be true or false");
            goto done;
        }
        q->logprobs = cJSON_IsTrue(lp);
        if (SET(tlp) && !is_int(tlp, 0, GEN_MAX_LOGPROBS)) {
            BAD("top_logprobs", "top_logprobs must be a whole number from 0 to %d", GEN_MAX_LOGPROBS);
            goto done;
        }
        if (SET(tlp) && !q->logprobs) {
            BAD("top_logprobs", "top_logprobs needs logprobs: true");
            goto done;
        }
        q->top_logprobs = SET(tlp) ? (int)tlp->valuedouble : 0;
    } else if (SET(lp)) {
        if (!is_int(lp, 0, GEN_MAX_LOGPROBS)) {
            BAD("logprobs", "logprobs must be a whole number from 0 to %d", GEN_MAX_LOGPROBS);
            goto done;
        }
        q->logprobs = 1, q->top_logprobs = (int)lp->valuedouble;
    }
    if (parse_attention(GET("attention"), q, err)) goto done;
#undef GET
#undef SET
    rc = 0;
done:
    cJSON_Delete(j);
    if (rc) oa_request_free(q);
    return rc;
}

void oa_request_free(OaRequest *q) {
    free(q->model);
    free(q->prompt);
    free(q->prompt_ids);
    for (int i = 0; i < q->n_msgs; i++) {
        free((char *)q->msgs[i].role);
        free((char *)q->msgs[i].content);
        free((char *)q->msgs[i].name);
        for (int k = 0; k < q->msgs[i].n_parts; k++) free((char *)q->msgs[i].parts[k]);
        free((void *)q->msgs[i].parts);
    }
    free(q->msgs);
    for (int i = 0; i < q->n_stop; i++) free(q->stop[i]);
    free(q->layers);
    free(q->heads);
    memset(q, 0, sizeof *q);
}

/* ---------------------------------------------------------------- routes */

int oa_is_path(const char *url) { return !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1"); }

int oa_is_models(const char *url) { return !strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11); }

const char *oa_route_method(const char *url) {
    if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11)) return "GET";
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions")) return "POST";
    return NULL;
}

/* The id /v1/models lists for model i: its name, or name-i when another model shares it. */
static void model_id(const Live *lv, int i, char *out, size_t len) {
    const char *name = session_name(live_session(lv, i));
    int shared = 0;
    for (int k = 0; k < live_n_models(lv); k++) shared |= k != i && !strcmp(session_name(live_session(lv, k)), name);
    if (shared) snprintf(out, len, "%s-%d", name, i);
    else snprintf(out, len, "%s", name);
}

static int find_model(const Live *lv, const char *id) {
    char buf[300];
    for (int i = 0; i < live_n_models(lv); i++) {
        model_id(lv, i, buf, sizeof buf);
        if (!strcmp(buf, id)) return i;
    }
    return -1;
}

/* The routes' state for one server: its models, its streams' threads. */
struct OaServer {
    Live *lv;
    long started;           /* the models' "created" */
    pthread_mutex_t mu;
    pthread_cond_t idle;    /* n_gens fell to 0 */
    int n_gens;             /* streams' generating threads running */
    atomic_int stopping;    /* oa_server_stop: no new generation, running ones cancelled */
};

OaServer *oa_server_new(Live *lv) {
    OaServer *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (pthread_mutex_init(&s->mu, NULL) != 0) return free(s), NULL;
    if (pthread_cond_init(&s->idle, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        return free(s), NULL;
    }
    s->lv = lv, s->started = (long)time(NULL);
    return s;
}

void oa_server_stop(OaServer *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    pthread_mutex_lock(&s->mu);
    while (s->n_gens > 0) pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void oa_server_free(OaServer *s) {
    if (!s) return;
    oa_server_stop(s);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void model_object(FILE *f, const OaServer *s, int i) {
    char id[300];
    model_id(s->lv, i, id, sizeof id);
    fputs("{\"id\":", f);
    json_write_string(f, id);
    fprintf(f, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"attnviz\"}", s->started);
}

static int do_models(const OaServer *srv, struct MHD_Connection *c, const char *url) {
    const Live *lv = srv->lv;
    AvBuf b;
    if (av_buf_open(&b)) return MHD_NO;
    if (url[10] == '/') { /* /v1/models/ID */
        const int m = find_model(lv, url + 11);
        if (m < 0 || live_cannot_generate(lv, m)) {
            free(av_buf_close(&b, 0));
            OaError err;
            set_err(&err, 404, "invalid_request_error", "model", "model_not_found", "The model `%.200s` does not exist",
                    url + 11);
            return oa_send_error(c, &err);
        }
        model_object(b.f, srv, m);
    } else {
        fputs("{\"object\":\"list\",\"data\":[", b.f);
        int first = 1;
        for (int i = 0; i < live_n_models(lv); i++) {
            if (live_cannot_generate(lv, i)) continue; /* listed are the models that generate */
            if (!first) fputc(',', b.f);
            first = 0;
            model_object(b.f, srv, i);
        }
        fputs("]}", b.f);
    }
    char *s = av_buf_close(&b, !ferror(b.f));
    if (!s) return MHD_NO;
    return serve_send(c, 200, "application/json", s, strlen(s), MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

/* ---------------------------------------------------------------- one generation */

typedef struct Job {
    OaServer *srv;
    Live *lv;
    OaRequest q;
    int model;
    char model_id[300];
    char id[48];
    long created;
    int *ids, n_ids;
    PipeGenSpec gs;
    pthread_mutex_t mu;      /* fd, and a stream's buffer and state */
    pthread_cond_t cv;
    int sync_ok;
    int fd;                  /* the client's socket, to notice it went away; -1 once the response is gone */
    atomic_int gone;         /* it did (or the response is gone, or the server stops) */
    /* a stream: events for the reader; the connection, suspended while the reader waits for them */
    struct MHD_Connection *conn; /* NULL once the response is gone */
    int suspended;
    atomic_int refs;         /* the response and the generating thread */
    char *buf;
    size_t len, cap, off;
    int done;
    /* what a response gathers: content text, logprobs entries, attention objects */
    AvBuf lp, attn, pattn, tok_b, tlp_b, top_b, off_b;
    int n_lp;
    size_t text_chars;       /* completions' text_offset: characters before the token */
    int *gen_ids;            /* generated ids (for the attention's sequence) */
    int n_gen, cap_gen;
    int failed;
    OaError err;
} Job;

/* Whether the client went away (its socket: closed or reset), the response is gone, or the server
 * stops. The socket is read under the job's lock: once the response is gone, libmicrohttpd closes
 * it and its number may be another connection's. Not with the lock held. */
static int client_gone(Job *j) {
    if (atomic_load(&j->gone) || atomic_load(&j->srv->stopping)) return 1;
    pthread_mutex_lock(&j->mu);
    int gone = 0;
    struct pollfd p = {j->fd, POLLIN | POLLRDHUP, 0};
    if (j->fd >= 0 && poll(&p, 1, 0) > 0) {
        gone = (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0;
        if (!gone && (p.revents & POLLIN)) {
            char b;
            gone = recv(j->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (gone) atomic_store(&j->gone, 1);
    return gone;
}

static int job_cancelled(void *ctx) { return client_gone(ctx); }

static void put_double(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs(v < 0 ? "-9999.0" : "0", f);
}

/* A streamed token's attention is thousands of numbers: formatted by the JSON writer's own
 * routine (7 significant digits), not printf, whose cost per number was most of what asking
 * for attention added to a generated token. */
static void put_float(FILE *f, float v) {
    char b[32];
    if (isfinite(v)) fwrite(b, 1, (size_t)json_format_float(b, v, 7), f);
    else fputs("0", f);
}

static void put_int(FILE *f, int v) {
    char b[16];
    int n = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do b[sizeof b - 1 - n++] = (char)('0' + u % 10); while ((u /= 10) && n < 15);
    if (v < 0) b[sizeof b - 1 - n++] = '-';
    fwrite(b + sizeof b - n, 1, (size_t)n, f);
}

/* A token's text for logprobs: its bytes as UTF-8 (a piece of a character as U+FFFD), and the bytes. */
static void token_entry(FILE *f, const char *bytes, size_t nb, double logprob, int with_bytes) {
    char *t = NULL;
    size_t tl;
    AvErr e;
    fputs("{\"token\":", f);
    if (tok_utf8_lossy(bytes, nb, &t, &tl, &e) == 0) json_write_string(f, t);
    else fputs("\"\"", f);
    free(t);
    fputs(",\"logprob\":", f);
    put_double(f, logprob);
    if (with_bytes) {
        fputs(",\"bytes\":[", f);
        for (size_t i = 0; i < nb; i++) fprintf(f, "%s%u", i ? "," : "", (unsigned char)bytes[i]);
        fputc(']', f);
    }
}

static int id_bytes(const Job *j, int id, char **b, size_t *n) {
    AvErr e;
    return session_token_bytes(live_session(j->lv, j->model), id, b, n, &e);
}

/* Chat's {"token","logprob","bytes","top_logprobs":[...]} of one token. */
static void chat_logprob(FILE *f, const Job *j, const PipeGenToken *t) {
    token_entry(f, t->bytes, t->n_bytes, t->logprob, 1);
    fputs(",\"top_logprobs\":[", f);
    for (int i = 0; i < t->n_top; i++) {
        char *b = NULL;
        size_t nb = 0;
        if (i) fputc(',', f);
        if (id_bytes(j, t->top_ids[i], &b, &nb) != 0) nb = 0;
        token_entry(f, b ? b : "", nb, t->top_logprobs[i], 1);
        fputc('}', f);
        free(b);
    }
    fputs("]}", f);
}

/* Completions' legacy top_logprobs entry: {"token": logprob, ...}, a text once (the more probable). */
static void text_top(FILE *f, const Job *j, const PipeGenToken *t) {
    char *seen[GEN_MAX_LOGPROBS];
    int n_seen = 0;
    fputc('{', f);
    for (int i = 0; i < t->n_top; i++) {
        char *b = NULL, *s = NULL;
        size_t nb = 0, ns;
        AvErr e;
        if (id_bytes(j, t->top_ids[i], &b, &nb) != 0 || tok_utf8_lossy(b, nb, &s, &ns, &e) != 0) {
            free(b);
            continue;
        }
        free(b);
        int dup = 0;
        for (int k = 0; k < n_seen; k++) dup |= !strcmp(seen[k], s);
        if (dup) {
            free(s);
            continue;
        }
        if (n_seen) fputc(',', f);
        json_write_string(f, s);
        fputc(':', f);
        put_double(f, t->top_logprobs[i]);
        seen[n_seen++] = s;
    }
    fputc('}', f);
    for (int k = 0; k < n_seen; k++) free(seen[k]);
}

static size_t utf8_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The attention of a's position i as an object: the token (id, spelling, text as read; a generated
 * one's logprob and top ones when asked), then [layer][head] arrays. */
static void attn_position(FILE *f, const Job *j, const PipeGenAttn *a, int i, int id, const PipeGenToken *t) {
    const int L = a->n_layers, H = a->n_heads, B = L * H, K = a->top_k, pos = a->pos0 + i, nk = pos + 1;
    const Session *p = live_session(j->lv, j->model);
    fprintf(f, "{\"position\":%d,\"id\":%d,\"token\":", pos, id);
    const char *sp = session_token(p, id), *tx = session_token_text(p, id);
    json_write_string(f, sp ? sp : "");
    fputs(",\"text\":", f);
    json_write_string(f, tx ? tx : "");
    if (t && j->q.logprobs) {
        fputs(",\"logprob\":", f);
        put_double(f, t->logprob);
        fputs(",\"top\":[", f);
        for (int k = 0; k < t->n_top; k++) {
            const char *ts = session_token(p, t->top_ids[k]), *tt = session_token_text(p, t->top_ids[k]);
            fprintf(f, "%s{\"id\":%d,\"token\":", k ? "," : "", t->top_ids[k]);
            json_write_string(f, ts ? ts : "");
            fputs(",\"text\":", f);
            json_write_string(f, tt ? tt : "");
            fputs(",\"logprob\":", f);
            put_double(f, t->top_logprobs[k]);
            fputc('}', f);
        }
        fputc(']', f);
    }
    if (K) {
        for (int w = 0; w < 2; w++) {
            fputs(w ? ",\"weights\":[" : ",\"keys\":[", f);
            for (int l = 0; l < L; l++) {
                fputs(l ? ",[" : "[", f);
                for (int h = 0; h < H; h++) {
                    fputs(h ? ",[" : "[", f);
                    const size_t at = ((size_t)i * B + (size_t)l * H + h) * K;
                    for (int k = 0; k < K; k++) {
                        if (k) fputc(',', f);
                        if (w) put_float(f, a->weights[at + k]);
                        else put_int(f, a->keys[at + k]);
                    }
                    fputc(']', f);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
    }
    if (a->entropy) {
        const char *names[3] = {"entropy", "sink", "distance"};
        const float *v[3] = {a->entropy, a->sink, a->distance};
        for (int s = 0; s < 3; s++) {
            fprintf(f, ",\"%s\":[", names[s]);
            for (int l = 0; l < L; l++) {
                fputs(l ? ",[" : "[", f);
                for (int h = 0; h < H; h++) {
                    if (h) fputc(',', f);
                    put_float(f, v[s][(size_t)i * B + (size_t)l * H + h]);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
    }
    if (a->rows) {
        fputs(",\"rows\":[", f);
        for (int l = 0; l < L; l++) {
            fputs(l ? ",[" : "[", f);
            for (int h = 0; h < H; h++) {
                fputs(h ? ",[" : "[", f);
                const float *r = a->rows + ((size_t)i * B + (size_t)l * H + h) * a->n_keys;
                for (int k = 0; k < nk; k++) {
                    if (k) fputc(',', f);
                    put_float(f, r[k]);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

/* "layers":[...],"heads":[...],"top_k":K,"stats":B,"rows":B (the kept selection) */
static void attn_header(FILE *f, const Job *j) {
    const Session *p = live_session(j->lv, j->model);
    const ModelConfig *c = session_config(p);
    int seen[CAP_MAX_LAYERS];
    for (int w = 0; w < 2; w++) {
        const int *v = w ? j->q.heads : j->q.layers, nv = w ? j->q.n_heads : j->q.n_layers,
                  lim = w ? c->num_heads : c->num_layers;
        memset(seen, 0, sizeof seen);
        fputs(w ? ",\"heads\":[" : "\"layers\":[", f);
        int first = 1;
        for (int i = 0; i < (v ? nv : lim); i++) {
            const int x = v ? v[i] : i;
            if (seen[x]) continue;
            seen[x] = 1;
            fprintf(f, "%s%d", first ? "" : ",", x);
            first = 0;
        }
        fputc(']', f);
    }
    fprintf(f, ",\"top_k\":%d,\"stats\":%s,\"rows\":%s", j->q.top_k, j->q.stats ? "true" : "false",
            j->q.rows ? "true" : "false");
}

/* "sequence":{"n_prompt","ids","tokens","text"}: every position's id, spelling and text as read. */
static void attn_sequence(FILE *f, const Job *j) {
    const Session *p = live_session(j->lv, j->model);
    const int n = j->n_ids + j->n_gen;
    fprintf(f, "\"sequence\":{\"n_prompt\":%d,\"ids\":[", j->n_ids);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", i < j->n_ids ? j->ids[i] : j->gen_ids[i - j->n_ids]);
    for (int w = 0; w < 2; w++) {
        fputs(w ? "],\"text\":[" : "],\"tokens\":[", f);
        for (int i = 0; i < n; i++) {
            const int id = i < j->n_ids ? j->ids[i] : j->gen_ids[i - j->n_ids];
            const char *s = w ? session_token_text(p, id) : session_token(p, id);
            if (i) fputc(',', f);
            json_write_string(f, s ? s : "");
        }
    }
    fputs("]}", f);
}

/* ---------------------------------------------------------------- server-sent events */

/* The reader suspended the connection waiting for events: it runs again (j->mu held). */
static void wake_reader(Job *j) {
    if (j->suspended && j->conn) {
        j->suspended = 0;
        MHD_resume_connection(j->conn);
    }
    pthread_cond_broadcast(&j->cv);
}

/* Appends one event "data: JSON\n\n" (or the closing [DONE]) for the reader;
 * past the high mark, waits for the reader to drain it (or the client to go). */
static int emit(Job *j, const char *json) {
    const size_t n = strlen(json);
    pthread_mutex_lock(&j->mu);
    while (j->len - j->off > OA_STREAM_HIGH && !atomic_load(&j->gone)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->len - j->off > OA_STREAM_HIGH) {
            pthread_mutex_unlock(&j->mu);
            client_gone(j);
            pthread_mutex_lock(&j->mu);
        }
    }
    if (j->off && j->off == j->len) j->off = j->len = 0;
    size_t need = j->len + n + 8;
    if (need > j->cap) {
        size_t c = j->cap ? j->cap : 4096;
        while (c < need) c *= 2;
        char *b = realloc(j->buf, c);
        if (!b) {
            pthread_mutex_unlock(&j->mu);
            return -1;
        }
        j->buf = b, j->cap = c;
    }
    memcpy(j->buf + j->len, "data: ", 6);
    memcpy(j->buf + j->len + 6, json, n);
    memcpy(j->buf + j->len + 6 + n, "\n\n", 2);
    j->len += n + 8;
    wake_reader(j);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void chunk_head(FILE *f, const Job *j) {
    fputs("{\"id\":", f);
    json_write_string(f, j->id);
    fprintf(f, ",\"object\":\"%s\",\"created\":%ld,\"model\":", j->q.chat ? "chat.completion.chunk" : "text_completion",
            j->created);
    json_write_string(f, j->model_id);
    fprintf(f, ",\"system_fingerprint\":\"attnviz-%s\"", ATTNVIZ_VERSION);
}

static int emit_buf(Job *j, AvBuf *b) {
    char *s = av_buf_close(b, !ferror(b->f));
    if (!s) return -1;
    int rc = emit(j, s);
    free(s);
    return rc;
}

/* ---------------------------------------------------------------- the sink */

static int on_prompt(void *ctx, const int *ids, int n, const PipeGenAttn *a) {
    (void)ids;
    Job *j = ctx;
    if (client_gone(j)) return 1;
    if (!j->q.stream) {
        for (int i = 0; a && i < n; i++) {
            if (i) fputc(',', j->pattn.f);
            attn_position(j->pattn.f, j, a, i, j->ids[i], NULL);
        }
        return 0;
    }
    /* the first chunk: the assistant's role (chat), and the attention's selection and prompt rows */
    AvBuf b;
    if (av_buf_open(&b)) return j->failed = 1;
    chunk_head(b.f, j);
    if (j->q.chat)
        fputs(",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
              "\"finish_reason\":null}]", b.f);
    else fputs(",\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}]", b.f);
    if (j->q.attn) {
        fputs(",\"attention\":{", b.f);
        attn_header(b.f, j);
        if (a) {
            fputs(",\"prompt\":[", b.f);
            for (int i = 0; i < n; i++) {
                if (i) fputc(',', b.f);
                attn_position(b.f, j, a, i, j->ids[i], NULL);
            }
            fputc(']', b.f);
        }
        fputc('}', b.f);
    }
    fputc('}', b.f);
    return emit_buf(j, &b) ? (j->failed = 1) : 0;
}

static int on_token(void *ctx, const PipeGenToken *t) {
    Job *j = ctx;
    if (j->n_gen == j->cap_gen) {
        const int nc = j->cap_gen ? 2 * j->cap_gen : 64;
        int *g = realloc(j->gen_ids, (size_t)nc * sizeof *g);
        if (!g) return j->failed = 1;
        j->gen_ids = g, j->cap_gen = nc;
    }
    j->gen_ids[j->n_gen++] = t->id;
    if (!j->q.stream) {
        /* gathered for the one response */
        if (j->q.logprobs && j->q.chat) {
            if (j->n_lp++) fputc(',', j->lp.f);
            chat_logprob(j->lp.f, j, t);
        } else if (j->q.logprobs) {
            const char *sep = j->n_lp++ ? "," : "";
            char *s = NULL;
            size_t ns;
            AvErr e;
            fputs(sep, j->tok_b.f);
            if (tok_utf8_lossy(t->bytes, t->n_bytes, &s, &ns, &e) == 0) json_write_string(j->tok_b.f, s);
            else fputs("\"\"", j->tok_b.f);
            free(s);
            fputs(sep, j->tlp_b.f);
            put_double(j->tlp_b.f, t->logprob);
            fputs(sep, j->top_b.f);
            text_top(j->top_b.f, j, t);
            fprintf(j->off_b.f, "%s%zu", sep, j->text_chars);
        }
        j->text_chars += utf8_chars(t->text, t->text_len);
        if (t->attn) {
            if (j->n_gen > 1) fputc(',', j->attn.f);
            attn_position(j->attn.f, j, t->attn, 0, t->id, t);
        }
        return client_gone(j);
    }
    AvBuf b;
    if (av_buf_open(&b)) return j->failed = 1;
    chunk_head(b.f, j);
    if (j->q.chat) {
        fputs(",\"choices\":[{\"index\":0,\"delta\":{\"content\":", b.f);
        json_write_string(b.f, t->text);
        fputs("},\"logprobs\":", b.f);
        if (j->q.logprobs) {
            fputs("{\"content\":[", b.f);
            chat_logprob(b.f, j, t);
            fputs("]}", b.f);
        } else fputs("null", b.f);
    } else {
        fputs(",\"choices\":[{\"text\":", b.f);
        json_write_string(b.f, t->text);
        fputs(",\"index\":0,\"logprobs\":", b.f);
        if (j->q.logprobs) {
            char *s = NULL;
            size_t ns;
            AvErr e;
            fputs("{\"tokens\":[", b.f);
            if (tok_utf8_lossy(t->bytes, t->n_bytes, &s, &ns, &e) == 0) json_write_string(b.f, s);
            else fputs("\"\"", b.f);
            free(s);
            fputs("],\"token_logprobs\":[", b.f);
            put_double(b.f, t->logprob);
            fputs("],\"top_logprobs\":[", b.f);
            text_top(b.f, j, t);
            fprintf(b.f, "],\"text_offset\":[%zu]}", j->text_chars);
        } else fputs("null", b.f);
    }
    j->text_chars += utf8_chars(t->text, t->text_len);
    fputs(",\"finish_reason\":null}]", b.f);
    if (t->attn) {
        fputs(",\"attention\":", b.f);
        attn_position(b.f, j, t->attn, 0, t->id, t);
    }
    fputc('}', b.f);
    if (emit_buf(j, &b)) return j->failed = 1;
    return client_gone(j);
}

static const char *finish_name(PipeFinish f) { return f == PIPE_FINISH_LENGTH ? "length" : "stop"; }

static void usage_json(FILE *f, const PipeGenResult *r) {
    fprintf(f, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", r->n_prompt,
            r->n_generated, r->n_prompt + r->n_generated);
}

/* The streamed end: the finish chunk (with the attention's sequence), usage when asked, [DONE]. */
static void stream_end(Job *j, const PipeGenResult *r) {
    AvBuf b;
    if (av_buf_open(&b)) return;
    chunk_head(b.f, j);
    if (j->q.chat) fprintf(b.f, ",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"%s\"}]", finish_name(r->finish));
    else fprintf(b.f, ",\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"%s\"}]", finish_name(r->finish));
    if (j->q.attn) {
        fputs(",\"attention\":{", b.f);
        attn_sequence(b.f, j);
        fputc('}', b.f);
    }
    fputc('}', b.f);
    if (emit_buf(j, &b)) return;
    if (j->q.include_usage) {
        if (av_buf_open(&b)) return;
        chunk_head(b.f, j);
        fputs(",\"choices\":[],", b.f);
        usage_json(b.f, r);
        fputc('}', b.f);
        if (emit_buf(j, &b)) return;
    }
    emit(j, "[DONE]");
}

/* ---------------------------------------------------------------- jobs */

/* av_buf_close for a job's buffers, which job_free closes when they are still open. */
static char *take(AvBuf *b, int ok) {
    if (!b->f) return NULL;
    char *s = av_buf_close(b, ok && !ferror(b->f));
    b->f = NULL;
    return s;
}

static void job_free(Job *j) {
    if (!j) return;
    oa_request_free(&j->q);
    free(j->ids);
    free(j->gen_ids);
    free(j->buf);
    AvBuf *bufs[] = {&j->lp, &j->attn, &j->pattn, &j->tok_b, &j->tlp_b, &j->top_b, &j->off_b};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(take(bufs[i], 0));
    if (j->sync_ok) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
    }
    free(j);
}

/* A stream's job is freed by the last of its response and its generating thread. */
static void job_unref(Job *j) {
    if (atomic_fetch_sub(&j->refs, 1) == 1) job_free(j);
}

static int job_generate(Job *j, PipeGenResult *r, AvErr *e) {
    PipeGenSink sink = {on_prompt, on_token, j};
    LiveStatus st = live_generate(j->lv, j->model, j->ids, j->n_ids, &j->gs, &sink, job_cancelled, j, r, e);
    if (st == LIVE_OK && j->failed) st = LIVE_FAILED, av_err(e, "out of memory while answering");
    return (int)st;
}

static void *stream_main(void *arg) {
    Job *j = arg;
    OaServer *srv = j->srv;
    PipeGenResult r = {0};
    AvErr e = {0};
    LiveStatus st = (LiveStatus)job_generate(j, &r, &e);
    if (st == LIVE_OK && r.finish != PIPE_FINISH_CANCELLED) {
        stream_end(j, &r);
    } else if (!atomic_load(&j->gone)) {
        /* the error as an event: OpenAI's clients raise it */
        OaError err;
        if (atomic_load(&srv->stopping)) set_err(&err, 503, "server_error", NULL, NULL, "the server is stopping");
        else
            set_err(&err, live_status(st), st == LIVE_TIMEOUT ? "server_error" : st == LIVE_BAD_INPUT ? "invalid_request_error" : "server_error",
                    NULL, st == LIVE_TIMEOUT ? "timeout" : NULL, "%s", e.msg[0] ? e.msg : "the generation failed");
        char *s = error_json(&err);
        if (s) emit(j, s);
        free(s);
    }
    pipeline_gen_result_free(&r);
    live_queue_leave(j->lv);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    wake_reader(j);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
    pthread_mutex_lock(&srv->mu);
    if (--srv->n_gens == 0) pthread_cond_broadcast(&srv->idle);
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

/* libmicrohttpd's reader, on its epoll thread: the events the buffer holds; none yet, the
 * connection suspended (the generating thread resumes it) and 0 bytes. It never waits. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    if (j->off == j->len) {
        const int done = j->done, gone = atomic_load(&j->gone);
        if (!done && !gone && j->conn) {
            j->suspended = 1;
            MHD_suspend_connection(j->conn);
        }
        pthread_mutex_unlock(&j->mu);
        return done ? MHD_CONTENT_READER_END_OF_STREAM : gone ? MHD_CONTENT_READER_END_WITH_ERROR : 0;
    }
    const size_t k = j->len - j->off < max ? j->len - j->off : max;
    memcpy(out, j->buf + j->off, k);
    j->off += k;
    pthread_cond_broadcast(&j->cv); /* an emit waiting for room */
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)k;
}

/* The response is gone (finished, or the client left): the generation ends at its next token,
 * and nothing touches the connection or its socket from now on. */
static void stream_free(void *cls) {
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    atomic_store(&j->gone, 1);
    j->conn = NULL, j->fd = -1, j->suspended = 0;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
}

/* The one response of a request that is not streamed. */
static char *whole_response(Job *j, const PipeGenResult *r) {
    AvBuf b;
    if (av_buf_open(&b)) return NULL;
    fputs("{\"id\":", b.f);
    json_write_string(b.f, j->id);
    fprintf(b.f, ",\"object\":\"%s\",\"created\":%ld,\"model\":", j->q.chat ? "chat.completion" : "text_completion", j->created);
    json_write_string(b.f, j->model_id);
    fprintf(b.f, ",\"system_fingerprint\":\"attnviz-%s\",\"choices\":[{\"index\":0,", ATTNVIZ_VERSION);
    if (j->q.chat) {
        fputs("\"message\":{\"role\":\"assistant\",\"content\":", b.f);
        json_write_string(b.f, r->text);
        fputs(",\"refusal\":null},\"logprobs\":", b.f);
        if (j->q.logprobs) {
            char *s = take(&j->lp, 1);
            fprintf(b.f, "{\"content\":[%s]}", s ? s : "");
            free(s);
        } else fputs("null", b.f);
    } else {
        fputs("\"text\":", b.f);
        json_write_string(b.f, r->text);
        fputs(",\"logprobs\":", b.f);
        if (j->q.logprobs) {
            char *s[4] = {take(&j->tok_b, 1), take(&j->tlp_b, 1), take(&j->top_b, 1), take(&j->off_b, 1)};
            fprintf(b.f, "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s],\"text_offset\":[%s]}",
                    s[0] ? s[0] : "", s[1] ? s[1] : "", s[2] ? s[2] : "", s[3] ? s[3] : "");
            for (int i = 0; i < 4; i++) free(s[i]);
        } else fputs("null", b.f);
    }
    fprintf(b.f, ",\"finish_reason\":\"%s\"}],", finish_name(r->finish));
    usage_json(b.f, r);
    if (j->q.attn) {
        char *s = take(&j->attn, 1), *ps = take(&j->pattn, 1);
        fputs(",\"attention\":{", b.f);
        attn_header(b.f, j);
        if (j->q.prompt_rows) fprintf(b.f, ",\"prompt\":[%s]", ps ? ps : "");
        fprintf(b.f, ",\"tokens\":[%s],", s ? s : "");
        free(s);
        free(ps);
        attn_sequence(b.f, j);
        fputc('}', b.f);
    }
    fputc('}', b.f);
    return av_buf_close(&b, !ferror(b.f));
}

/* The prompt's ids: the text (chat: the rendered messages) tokenized, or the ids given. */
static int prompt_ids(Job *j, OaError *err) {
    const Session *p = live_session(j->lv, j->model);
    AvErr e = {0};
    if (j->q.prompt_ids) {
        const int vocab = session_config(p)->vocab_size;
        for (int i = 0; i < j->q.n_prompt_ids; i++)
            if (j->q.prompt_ids[i] >= vocab)
                return BAD("prompt", "token id %d is outside the model's vocabulary (%d)", j->q.prompt_ids[i], vocab);
        j->ids = j->q.prompt_ids, j->n_ids = j->q.n_prompt_ids;
        j->q.prompt_ids = NULL;
        return 0;
    }
    char *text = NULL;
    if (j->q.chat && session_chat_prompt(p, j->q.msgs, j->q.n_msgs, 1, &text, &e) != 0)
        return BAD("messages", "%s", e.msg);
    int rc = session_prompt_ids(p, j->q.chat ? text : j->q.prompt, j->q.chat, &j->ids, &j->n_ids, &e);
    free(text);
    if (rc) return BAD(j->q.chat ? "messages" : "prompt", "%s", e.msg);
    return 0;
}

/* Everything checked before an answer starts: the model, the prompt's length, the cost. */
static int job_prepare(Job *j, OaError *err) {
    const OaRequest *q = &j->q;
    if ((j->model = find_model(j->lv, q->model)) < 0 || live_cannot_generate(j->lv, j->model)) {
        set_err(err, 404, "invalid_request_error", "model", "model_not_found",
                "The model `%.200s` does not exist (GET /v1/models lists them)", q->model);
        return -1;
    }
    model_id(j->lv, j->model, j->model_id, sizeof j->model_id);
    const Session *p = live_session(j->lv, j->model);
    const ModelConfig *c = session_config(p);
    if (q->chat && session_chat_missing(p))
        return BAD("messages", "%s: %s", j->model_id, session_chat_missing(p));
    for (int i = 0; i < q->n_layers; i++)
        if (q->layers[i] >= c->num_layers)
            return BAD("attention.layers", "attention.layers: layer %d is not in the model (0 to %d)", q->layers[i], c->num_layers - 1);
    for (int i = 0; i < q->n_heads; i++)
        if (q->heads[i] >= c->num_heads)
            return BAD("attention.heads", "attention.heads: head %d is not in the model (0 to %d)", q->heads[i], c->num_heads - 1);
    if (prompt_ids(j, err)) return -1;
    const int limit = cfg_max_tokens(c);
    if (j->n_ids < 1) return BAD(q->chat ? "messages" : "prompt", "the prompt has no tokens");
    if (j->n_ids >= limit)
        return BAD(q->chat ? "messages" : "prompt", "the prompt is %d tokens; this model's %d positions leave no room to generate",
                   j->n_ids, limit);
    const int room = limit - j->n_ids, max_new = q->max_tokens ? q->max_tokens : room < OA_MAX_TOKENS ? room : OA_MAX_TOKENS;
    PipeGenSpec *g = &j->gs;
    memset(g, 0, sizeof *g);
    g->max_new = max_new < room ? max_new : room;
    g->temperature = q->temperature, g->top_p = q->top_p;
    if (q->has_seed) g->seed = q->seed;
    else if (getrandom(&g->seed, sizeof g->seed, 0) != (ssize_t)sizeof g->seed) g->seed = (unsigned long long)time(NULL);
    for (int i = 0; i < q->n_stop; i++) g->stop[i] = q->stop[i];
    g->n_stop = q->n_stop;
    g->logprobs = q->logprobs, g->top_logprobs = q->top_logprobs;
    if (q->attn) {
        g->attn = 1, g->layers = q->layers, g->n_layers = q->n_layers, g->heads = q->heads, g->n_heads = q->n_heads;
        g->top_k = q->top_k, g->stats = q->stats, g->rows = q->rows, g->prompt = q->prompt_rows;
        /* what the answer would carry: keys and weights, statistics and rows per position */
        const double blocks = (double)(q->layers ? q->n_layers : c->num_layers) * (q->heads ? q->n_heads : c->num_heads),
                     P = j->n_ids, G = g->max_new, per = 2.0 * q->top_k + (q->stats ? 3 : 0),
                     numbers = blocks * ((q->prompt_rows ? P : 0) * per + G * per +
                                         (q->rows ? (q->prompt_rows ? P * P / 2 : 0) + G * (P + G / 2) : 0));
        if (numbers > OA_MAX_NUMBERS)
            return BAD("attention", "attention: the answer would carry %.0f numbers (%d layer-heads over %d prompt and up to %d "
                                    "new tokens), above this server's %d: select fewer layers or heads, drop rows or "
                                    "prompt, or lower max_tokens", numbers, (int)blocks, j->n_ids, g->max_new, OA_MAX_NUMBERS);
    }
    return 0;
}

int oa_handle(OaServer *srv, struct MHD_Connection *c, const char *url, const char *body, size_t len) {
    if (oa_is_models(url)) return do_models(srv, c, url);
    const int chat = !strcmp(url, "/v1/chat/completions");
    Job *j = calloc(1, sizeof *j);
    if (!j) return MHD_NO;
    j->srv = srv, j->lv = srv->lv, j->fd = -1, j->created = (long)time(NULL);
    if (pthread_mutex_init(&j->mu, NULL) != 0) return free(j), oa_send_status(c, 500, "cannot create a lock");
    if (pthread_cond_init(&j->cv, NULL) != 0) {
        pthread_mutex_destroy(&j->mu);
        return free(j), oa_send_status(c, 500, "cannot create a lock");
    }
    j->sync_ok = 1;
    OaError err = {0};
    if (oa_parse_request(body, len, chat, &j->q, &err) != 0 || job_prepare(j, &err) != 0) {
        job_free(j);
        return oa_send_error(c, &err);
    }
    unsigned char rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) memset(rnd, 0, sizeof rnd);
    int at = snprintf(j->id, sizeof j->id, "%s", chat ? "chatcmpl-" : "cmpl-");
    for (size_t i = 0; i < sizeof rnd; i++) at += snprintf(j->id + at, sizeof j->id - (size_t)at, "%02x", rnd[i]);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) j->fd = ci->connect_fd;
    AvBuf *bufs[] = {&j->lp, &j->attn, &j->pattn, &j->tok_b, &j->tlp_b, &j->top_b, &j->off_b};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (av_buf_open(bufs[i])) {
            job_free(j);
            return MHD_NO;
        }
    if (atomic_load(&srv->stopping)) {
        job_free(j);
        return oa_send_status(c, 503, "the server is stopping");
    }
    AvErr e = {0};
    LiveStatus st = live_queue_enter(srv->lv, &e);
    if (st != LIVE_OK) {
        job_free(j);
        return oa_send_status(c, live_status(st), e.msg);
    }
    if (!j->q.stream) { /* on this thread, the connection suspended (serve.c) */
        PipeGenResult r = {0};
        st = (LiveStatus)job_generate(j, &r, &e);
        live_queue_leave(srv->lv);
        int ok;
        if ((st != LIVE_OK || r.finish == PIPE_FINISH_CANCELLED) && atomic_load(&srv->stopping)) {
            ok = oa_send_status(c, 503, "the server is stopping");
        } else if (st != LIVE_OK) {
            ok = oa_send_status(c, live_status(st), e.msg);
        } else {
            char *s = whole_response(j, &r);
            ok = s ? serve_send(c, 200, "application/json", s, strlen(s), MHD_RESPMEM_MUST_FREE, NULL, NULL) : MHD_NO;
        }
        pipeline_gen_result_free(&r);
        job_free(j);
        return ok;
    }
    /* streamed: a thread of its own generates, the response's reader sends */
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, j, stream_free);
    if (!resp) {
        live_queue_leave(srv->lv);
        job_free(j);
        return MHD_NO;
    }
    atomic_store(&j->refs, 1); /* the response's */
    j->conn = c;
    pthread_mutex_lock(&srv->mu);
    const int stopping = atomic_load(&srv->stopping);
    if (!stopping) srv->n_gens++;
    pthread_mutex_unlock(&srv->mu);
    pthread_attr_t attr;
    pthread_t th;
    int started = 0;
    if (!stopping && pthread_attr_init(&attr) == 0) {
        atomic_store(&j->refs, 2);
        started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&th, &attr, stream_main, j) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        atomic_store(&j->refs, 1);
        live_queue_leave(srv->lv);
        if (!stopping) {
            pthread_mutex_lock(&srv->mu);
            if (--srv->n_gens == 0) pthread_cond_broadcast(&srv->idle);
            pthread_mutex_unlock(&srv->mu);
        }
        MHD_destroy_response(resp); /* frees j */
        return oa_send_status(c, stopping ? 503 : 500, stopping ? "the server is stopping" : "cannot start the generation's thread");
    }
    serve_headers(resp, "text/event-stream");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return serve_queue(c, 200, resp);
}
