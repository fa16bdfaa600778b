/* serve.h — attnviz serve: a local HTTP server (libmicrohttpd) that keeps the
 * models loaded and answers the live page's requests (live.h does the work).
 * The API is documented in docs/serve-api.md. */
#ifndef ATTNVIZ_SERVE_H
#define ATTNVIZ_SERVE_H

#include <stddef.h>

#include "err.h"
#include "settings.h"

/* Serves until SIGINT or SIGTERM: 0, or -1 with e set (a usage error for a
 * bad --host; a runtime one when a model or the socket fails). */
int serve_run(const ServeSpec *o, AvErr *e);

/* The request parsers (exposed for the fuzz target and tests). */
typedef struct {
    int model, predict;
    char *text, *text_b; /* text_b NULL when absent or empty */
    char *decoder_text;  /* an encoder-decoder model's decoder text: NULL when absent or null ("" is a text) */
    int generate;        /* an encoder-decoder model's tokens to decode instead (0: none) */
    int chat;            /* "chat": true: text is one user message in the model's chat template */
} ServeRunReq;
/* POST /api/run's body: UTF-8 JSON {"text", "text_b", "decoder_text", "generate", "model", "predict", "chat"};
 * -1 with *why (a static one-line reason) when it is not acceptable. */
int serve_parse_run(const char *body, size_t len, ServeRunReq *q, const char **why);
void serve_run_req_free(ServeRunReq *q);
/* A list such as "0,3,5" or "2-4": at most max entries, each in [0, limit). */
int serve_parse_list(const char *s, int limit, int max, int *out, int *n);

#endif
