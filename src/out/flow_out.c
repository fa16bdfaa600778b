/* flow_out.c — the information-flow graph (flow.h) as JSON and .npy. */
#include "flow_out.h"

#include "flow.h"
#include "npy.h"

static const char *const KIND[] = {"attention", "residual", "mlp"};

int flow_json_member(FILE *f, const OutDoc *d) {
    const FlowResult *r = d->flow;
    if (!r || !r->on) return 0;
    char buf[40];
    /* the threshold as given (a decimal in (0, 1)), not rounded through float */
    fprintf(f, ",\"flow\":{\"threshold\":%.9g,\"position\":%d,\"layers\":[%d,%d],\"edges\":[", r->threshold, r->position,
            r->lo, r->hi);
    for (int i = 0; i < r->n_edges; i++) {
        const FlowEdge *ed = &r->edges[i];
        fprintf(f, "%s{\"layer\":%d,\"from\":%d,\"to\":%d,\"head\":", i ? "," : "", ed->layer, ed->from, ed->to);
        if (ed->head >= 0) fprintf(f, "%d", ed->head);
        else fputs("null", f);
        json_format_float(buf, ed->weight, d->precision);
        fprintf(f, ",\"kind\":\"%s\",\"weight\":%s}", KIND[ed->kind], buf);
    }
    fputs("]}", f);
    return ferror(f) ? -1 : 0;
}

int flow_npy_write(FILE *f, const OutDoc *d, AvErr *e) {
    const FlowResult *r = d->flow;
    if (!r || !r->on) return av_err(e, "not computed");
    long shape[2] = {r->n_edges, 6};
    if (npy_write_header_typed(f, "<f4", shape, 2) != 0) return av_err_errno(e, "write error");
    for (int i = 0; i < r->n_edges; i++) {
        const FlowEdge *ed = &r->edges[i];
        const float row[6] = {(float)ed->layer, (float)ed->from, (float)ed->to, (float)ed->head, (float)ed->kind, ed->weight};
        if (fwrite(row, sizeof row, 1, f) != 1) return av_err_errno(e, "write error");
    }
    return 0;
}
