/* templates.h — the page templates (templates/ *.html, *.css, *.js), compiled into
 * the binary at build time by tools/embed.c into build/gen/templates_gen.c. */
#ifndef ATTNVIZ_TEMPLATES_H
#define ATTNVIZ_TEMPLATES_H

#include <stddef.h>

typedef struct {
    const char *name;          /* file name without directory, e.g. "page.html" */
    const unsigned char *data; /* NUL-terminated for convenience; len excludes it */
    size_t len;
} AvTemplate;

extern const AvTemplate av_templates[];
extern const int av_n_templates;

#endif
