/* serve_http.h — what serve.c's routes share with the OpenAI-compatible
 * ones (openai.c): responses with the server's headers. */
#ifndef ATTNVIZ_SERVE_HTTP_H
#define ATTNVIZ_SERVE_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

/* The headers every response carries (type, CSP, nosniff, no-store, ...). */
void serve_headers(struct MHD_Response *r, const char *type);
/* Queues buf (len bytes, freed or kept as mode says) with status and the
 * server's headers, plus one more when extra_name is not NULL. */
enum MHD_Result serve_send(struct MHD_Connection *c, unsigned status, const char *type, void *buf, size_t len,
                           enum MHD_ResponseMemoryMode mode, const char *extra_name, const char *extra_value);
/* Queues r (made with serve_headers) with status, and gives up the caller's reference. In a route
 * running in a thread of its own (serve.c's jobs), both keep the response for libmicrohttpd's
 * thread to queue once the connection resumes. */
enum MHD_Result serve_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r);

#endif
