/* jinja.h — the subset of Jinja2 that chat templates are written in, parsed and
 * rendered as transformers renders them (an ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks, the loopcontrols extension, its tojson,
 * raise_exception, strftime_now, namespace and dict). Chat templates come from
 * model files, so they are untrusted: parsing and rendering are bounded (source
 * size, nesting, steps, memory, output, macro depth), variables' text is data
 * and never parsed, and a construct outside the subset is refused in one line
 * naming it, the template's origin and the line and column. docs/chat.md lists
 * what is supported. */
#ifndef ATTNVIZ_JINJA_H
#define ATTNVIZ_JINJA_H

#include <stddef.h>
#include <time.h>

#include "err.h"

struct cJSON;
typedef struct JinjaTemplate JinjaTemplate;

/* A template source longer than this is refused before parsing (the largest
 * published chat templates are tens of kilobytes). */
#define JINJA_MAX_SOURCE (1u << 20)

/* What one render may use; jinja_opts_default fills generous bounds that real
 * chat templates stay far below. */
typedef struct {
    long long max_steps; /* evaluation steps: each node evaluated, each item a loop, filter or
                            comparison walks */
    size_t max_output;   /* bytes of rendered text */
    size_t max_memory;   /* bytes the render's values may take */
    int max_calls;       /* macro calls nested */
    time_t now;          /* strftime_now's clock (local time); 0: the current time */
} JinjaOpts;
void jinja_opts_default(JinjaOpts *o);

/* Parses src (len bytes of UTF-8). origin names the template in every message
 * ("model.gguf: tokenizer.chat_template"); it is copied. */
int jinja_parse(JinjaTemplate **out, const char *src, size_t len, const char *origin, AvErr *e);
void jinja_free(JinjaTemplate *t);
const char *jinja_origin(const JinjaTemplate *t);

/* Renders with the variables of vars (a JSON object: strings, numbers, booleans,
 * null, arrays and objects become the template's values; a number without a
 * fraction is an integer). *out is NUL-terminated text (free), *len its length.
 * A template that calls raise_exception fails with its message. */
int jinja_render(const JinjaTemplate *t, const struct cJSON *vars, const JinjaOpts *o, char **out, size_t *len,
                 AvErr *e);

#endif
