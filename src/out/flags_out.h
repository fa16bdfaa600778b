/* flags_out.h — flags.h's results as the JSON members "sinks_summary" and
 * "massive_activations" (the JSON document and the page's meta share them),
 * from the OutDoc alone. */
#ifndef ATTNVIZ_FLAGS_OUT_H
#define ATTNVIZ_FLAGS_OUT_H

#include <stdio.h>

#include "output.h"

/* The members, each after a comma, when d->flags is set; -1 on a write error. */
int flags_json_members(FILE *f, const OutDoc *d);

#endif
