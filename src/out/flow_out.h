/* flow_out.h — flow.h's graph as the "flow" JSON member (the JSON document
 * and the page's meta share it) and as a .npy table, from the OutDoc alone. */
#ifndef ATTNVIZ_FLOW_OUT_H
#define ATTNVIZ_FLOW_OUT_H

#include <stdio.h>

#include "err.h"
#include "output.h"

/* ,"flow":{"threshold","position","layers":[lo,hi],"edges":[{"layer","from","to","head","kind","weight"}]}
 * when d->flow is set; -1 on a write error. */
int flow_json_member(FILE *f, const OutDoc *d);
/* (edges, 6) float32: layer, from, to, head (-1: residual or MLP), kind (0 attention, 1 residual, 2 MLP), weight */
int flow_npy_write(FILE *f, const OutDoc *d, AvErr *e);

#endif
