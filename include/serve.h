/* serve.h — attnviz serve: a local HTTP server (libmicrohttpd) that keeps the
 * models loaded and answers the live page's requests (live.h does the work).
 * The API is documented in docs/serve-api.md. */
#ifndef ATTNVIZ_SERVE_H
#define ATTNVIZ_SERVE_H

#include "err.h"
#include "options.h"

/* Serves until SIGINT or SIGTERM; returns an exit code (EXIT_USAGE for a bad
 * --host, EXIT_RUNTIME with e set when a model or the socket fails). */
int serve_run(const CliOptions *o, AvErr *e);

#endif
