/* explain_out.h — --explain's results (explain.h) as the JSON member
 * "explain" (the JSON document and the page's meta share it) and as a table
 * for the terminal, from the OutDoc alone. */
#ifndef ATTNVIZ_EXPLAIN_OUT_H
#define ATTNVIZ_EXPLAIN_OUT_H

#include <stdio.h>

#include "err.h"
#include "output.h"

/* The member, after a comma, when d->explain is set; -1 on a write error. */
int explain_json_member(FILE *f, const OutDoc *d);
/* Per pair: the score, the largest products of a query part and a key part,
 * and each side's parts summed over the other side. */
int explain_write_table(FILE *f, const OutDoc *d, AvErr *e);

#endif
