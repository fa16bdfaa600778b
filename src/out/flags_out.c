/* flags_out.c — attention sinks and massive activations (flags.h) as JSON. */
#include "flags_out.h"

#include <math.h>
#include <stdlib.h>

#include "flags.h"

static void put_float(FILE *f, double v, int sig) {
    char buf[40];
    json_format_float(buf, (float)v, sig);
    fputs(buf, f);
}

/* token i as the vocabulary spells it, and as the page shows it */
static void put_token(FILE *f, const OutDoc *d, int i) {
    fputs("\"token\":", f);
    json_write_string(f, i >= 0 && i < d->enc->n ? d->enc->tokens[i] : "");
    if (d->display_tokens && i >= 0 && i < d->enc->n) {
        fputs(",\"display\":", f);
        json_write_string(f, d->display_tokens[i]);
    }
}

static void sinks_member(FILE *f, const OutDoc *d, const FlagsResult *r) {
    const int sig = d->precision;
    fprintf(f, ",\"sinks_summary\":{\"definition\":\"a head's mean weight on the first token over query rows 1..n-1 "
               "(first), plus the mean share of its learned sink logit where the model has one (learned); a sink head "
               "puts at least %g of its weight there (Xiao et al. 2024)\",\"threshold\":%g,\"first_token\":{",
            FLAGS_SINK_SHARE, FLAGS_SINK_SHARE);
    put_token(f, d, 0);
    fprintf(f, ",\"special\":%s},\"learned\":%s,\"first\":[", d->enc->n && d->enc->special[0] ? "true" : "false",
            r->learned ? "true" : "false");
    for (int li = 0; li < r->nl; li++) {
        fputs(li ? ",[" : "[", f);
        for (int k = 0; k < r->nh; k++) {
            if (k) fputc(',', f);
            put_float(f, r->first[(size_t)li * r->nh + k], sig);
        }
        fputc(']', f);
    }
    fputs("],\"learned_share\":", f);
    if (!r->learned) fputs("null", f);
    for (int li = 0; r->learned && li < r->nl; li++) {
        fputs(li ? ",[" : "[[", f);
        for (int k = 0; k < r->nh; k++) {
            if (k) fputc(',', f);
            put_float(f, r->learned[(size_t)li * r->nh + k], sig);
        }
        fputs(li == r->nl - 1 ? "]]" : "]", f);
    }
    fputs(",\"sink_heads\":[", f);
    int count = 0, past = 0, past_sink = 0;
    for (int li = 0; li < r->nl; li++)
        for (int k = 0; k < r->nh; k++) {
            const int sink = flags_sink_head(r, li, k), late = r->layers[li] >= FLAGS_SINK_PAST;
            past += late, past_sink += late && sink;
            if (!sink) continue;
            fprintf(f, "%s[%d,%d]", count ? "," : "", r->layers[li], r->heads[k]);
            count++;
        }
    fprintf(f, "],\"count\":%d,\"heads\":%d,\"past_layer\":%d,\"past_heads\":%d,\"past_sink_heads\":%d,\"past_share\":",
            count, r->nl * r->nh, FLAGS_SINK_PAST, past, past_sink);
    if (past) put_float(f, (double)past_sink / past, sig);
    else fputs("null", f);
    fputc('}', f);
}

static void massive_member(FILE *f, const OutDoc *d, const FlagsResult *r) {
    const int sig = d->precision;
    fprintf(f, ",\"massive_activations\":{\"definition\":\"entries of the residual stream with |x| > %g and |x| > %g "
               "times the median |x| of their block (Sun et al. 2024); blocks: the embeddings (layer -1), then the stream "
               "after each layer, before any final norm; the %d largest |x| of each block are examined\",\"blocks\":[",
            FLAGS_MASSIVE_ABS, FLAGS_MASSIVE_RATIO, CAP_ACT_TOP);
    for (int b = 0; b < r->blocks; b++) {
        fprintf(f, "%s{\"layer\":%d,\"median\":", b ? "," : "", b - 1);
        put_float(f, r->median[b], sig);
        fputs(",\"max\":", f);
        put_float(f, r->max_abs[b], sig);
        fputc('}', f);
    }
    fputs("],\"entries\":[", f);
    for (int i = 0; i < r->n_found; i++) {
        const FlagsEntry *x = &r->found[i];
        fprintf(f, "%s{\"layer\":%d,\"position\":%d,", i ? "," : "", x->block - 1, x->token);
        put_token(f, d, x->token);
        fprintf(f, ",\"dim\":%d,\"value\":", x->dim);
        put_float(f, x->value, sig);
        fputs(",\"ratio\":", f);
        if (isfinite(x->ratio)) put_float(f, x->ratio, sig);
        else fputs("null", f);
        fputc('}', f);
    }
    /* the dimensions and positions that hold them, each once, in order */
    fputs("],\"dims\":[", f);
    for (int i = 0, first = 1; i < r->n_found; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= r->found[j].dim == r->found[i].dim;
        if (!seen) fprintf(f, "%s%d", first ? "" : ",", r->found[i].dim), first = 0;
    }
    fputs("],\"positions\":[", f);
    for (int i = 0, first = 1; i < r->n_found; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= r->found[j].token == r->found[i].token;
        if (!seen) fprintf(f, "%s%d", first ? "" : ",", r->found[i].token), first = 0;
    }
    fputs("]}", f);
}

int flags_json_members(FILE *f, const OutDoc *d) {
    const FlagsResult *r = d->flags;
    if (!r) return 0;
    sinks_member(f, d, r);
    if (r->blocks) massive_member(f, d, r);
    return ferror(f) ? -1 : 0;
}
