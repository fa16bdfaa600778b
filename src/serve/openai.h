/* openai.h — attnviz serve's OpenAI-compatible routes (src/serve/openai.c):
 * GET /v1/models, POST /v1/completions and /v1/chat/completions, streamed as
 * server-sent events or not, with attnviz's attention as an extension of the
 * same requests (docs/serve-api.md). serve.c checks Host and token and reads
 * the body; everything after is here, over live.h's generation. */
#ifndef ATTNVIZ_OPENAI_H
#define ATTNVIZ_OPENAI_H

#include <stddef.h>

#include "live.h"
#include "pipeline.h"

/* Bounds of a request (a 400 naming the field past them). */
#define OA_MAX_TOKENS 4096        /* max_tokens / max_completion_tokens */
#define OA_MAX_MESSAGES 1024      /* a chat's messages */
#define OA_MAX_NUMBERS (1 << 24)  /* attention numbers one response may carry (keys, weights, statistics, rows) */

/* An OpenAI-style error: {"error": {"message", "type", "param", "code"}}. */
typedef struct {
    unsigned status;      /* the HTTP status */
    const char *type;     /* "invalid_request_error", ... */
    const char *param;    /* the request's field, or NULL */
    const char *code;     /* or NULL */
    char message[512];
} OaError;

/* A request's body, checked. */
typedef struct {
    int chat;                 /* /v1/chat/completions, else /v1/completions */
    char *model;              /* the model's id as listed by /v1/models */
    char *prompt;             /* completions: the prompt's text, or NULL for ids */
    int *prompt_ids;          /* completions: a prompt given as token ids (n_prompt_ids), else NULL */
    int n_prompt_ids;
    PipeChatMsg *msgs;        /* chat: the messages (strings owned) */
    int n_msgs;
    int max_tokens;           /* 0: as many as the model's positions leave, at most OA_MAX_TOKENS */
    double temperature, top_p;
    int has_seed;
    unsigned long long seed;
    char *stop[PIPE_GEN_MAX_STOP];
    int n_stop;
    int stream, include_usage;
    int logprobs, top_logprobs; /* chat: logprobs + top_logprobs; completions: logprobs N gives both (N tops) */
    /* the attention extension ("attention": {...}); attn 0: none */
    int attn;
    int *layers, n_layers;    /* NULL: every layer */
    int *heads, n_heads;      /* NULL: every head */
    int top_k, stats, rows, prompt_rows;
} OaRequest;

/* Parses and checks a body (UTF-8 JSON, no duplicate keys anywhere): 0, or
 * -1 with err filled (400). Exposed for the fuzz target and tests. */
int oa_parse_request(const char *body, size_t len, int chat, OaRequest *q, OaError *err);
void oa_request_free(OaRequest *q);

/* Whether url is one of ours ("/v1/..."), and the method it takes (NULL: no such route). */
int oa_is_path(const char *url);
const char *oa_route_method(const char *url);

/* The routes' state for one server (its streams' threads). oa_server_stop: no
 * generation starts after it, the running ones are cancelled at their next
 * token, and it returns once every stream's thread has ended (each resumed its
 * connection: libmicrohttpd may then be stopped). */
typedef struct OaServer OaServer;
OaServer *oa_server_new(Live *lv);
void oa_server_stop(OaServer *s);
void oa_server_free(OaServer *s);

struct MHD_Connection;
/* Answers a request that passed serve.c's checks (body: NULL or len bytes).
 * /v1/models answers at once; the others may wait for the model: serve.c calls
 * them in a thread of the request's own with its connection suspended
 * (serve_send and serve_queue keep the response for libmicrohttpd's thread).
 * A stream's reader never waits (the file's comment says how). */
int oa_is_models(const char *url);
int oa_handle(OaServer *s, struct MHD_Connection *c, const char *url, const char *body, size_t len);
/* Queues an OpenAI-style error response (serve.c's refusals on our paths). */
int oa_send_error(struct MHD_Connection *c, const OaError *err);
/* The same from a status and message, the type and code following the status. */
int oa_send_status(struct MHD_Connection *c, unsigned status, const char *msg);

#endif
