/* diff_out.c — attnviz diff's writers (diff_out.h): the comparison's JSON
 * members (shared by --json and the page's meta), --json, and the table;
 * for encoder-decoders, each stack's. They read the documents (output.h's
 * OutDiff, DiffS2s) that cmd_diff.c fills from diff.h's comparison. */
#include "diff_out.h"

#include <math.h>
#include <stdlib.h>

#include "version.h"

static void put_ints(FILE *f, const int *v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
    fputc(']', f);
}

static void put_double(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

/* A (selected layers x heads) grid as nested lists; b: NULL, or the grid to subtract v from (b - v). */
static void put_grid(FILE *f, const double *v, const double *b, int nl, int nh) {
    fputc('[', f);
    for (int li = 0; li < nl; li++) {
        fputs(li ? ",[" : "[", f);
        for (int hi = 0; hi < nh; hi++) {
            size_t k = (size_t)li * nh + hi;
            if (hi) fputc(',', f);
            put_double(f, b ? b[k] - v[k] : v[k]);
        }
        fputc(']', f);
    }
    fputc(']', f);
}

/* Mean over a layer's selected heads. */
static double layer_mean(const OutDoc *a, int li) {
    const int nh = out_n_heads(a);
    double s = 0;
    for (int hi = 0; hi < nh; hi++) s += a->diff->jsd[(size_t)li * nh + hi];
    return nh ? s / nh : 0;
}

/* Selected (layer, head) indices ordered by divergence, largest first (ties: layer, head order). */
static int *ranking(const OutDoc *a, int *count) {
    const int nl = out_n_layers(a), nh = out_n_heads(a), n = nl * nh;
    int *ord = malloc(sizeof *ord * (size_t)(n ? n : 1));
    if (!ord) return NULL;
    for (int i = 0; i < n; i++) ord[i] = i;
    const double *v = a->diff->jsd;
    for (int i = 1; i < n; i++) /* insertion sort: stable, and n is layers x heads */
        for (int j = i; j > 0 && v[ord[j - 1]] < v[ord[j]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1], ord[j - 1] = t;
        }
    *count = n;
    return ord;
}

int diff_write_members(FILE *f, const OutDoc *a, AvErr *e) {
    const struct OutDiff *df = a->diff;
    if (!df || !df->b || !df->jsd) return av_err(e, "diff: incomplete comparison");
    const OutDoc *b = df->b;
    const int na = a->enc->n, nb = b->enc->n, nl = out_n_layers(a), nh = out_n_heads(a);
    fprintf(f, "\"mode\":\"%s\",\"models\":[", df->two_models ? "models" : "texts");
    json_write_string(f, a->model_name ? a->model_name : "");
    fputc(',', f);
    json_write_string(f, b->model_name ? b->model_name : "");
    fputs("],\"texts\":[", f);
    json_write_string(f, a->text_a ? a->text_a : "");
    fputc(',', f);
    json_write_string(f, b->text_a ? b->text_a : "");
    fputs("],\"alignment\":{\"method\":\"longest common subsequence of token ids\",\"pairs\":[", f);
    for (int i = 0, k = 0; i < na; i++)
        if (df->a_to_b[i] >= 0) fprintf(f, "%s[%d,%d]", k++ ? "," : "", i, df->a_to_b[i]);
    fputs("],\"a_to_b\":", f);
    put_ints(f, df->a_to_b, na);
    fputs(",\"b_to_a\":", f);
    put_ints(f, df->b_to_a, nb);
    fputs(",\"only_a\":[", f);
    for (int i = 0, k = 0; i < na; i++)
        if (df->a_to_b[i] < 0) fprintf(f, "%s%d", k++ ? "," : "", i);
    fputs("],\"only_b\":[", f);
    for (int i = 0, k = 0; i < nb; i++)
        if (df->b_to_a[i] < 0) fprintf(f, "%s%d", k++ ? "," : "", i);
    fputs("]},\"divergence\":{\"measure\":\"jensen-shannon\",\"log_base\":2,"
          "\"rows\":\"mean over aligned query rows\","
          "\"unaligned_keys\":\"kept: weight 0 on the side that lacks the key\",\"layers\":[",
          f);
    for (int li = 0; li < nl; li++) fprintf(f, "%s%d", li ? "," : "", out_layer(a, li));
    fputs("],\"heads\":[", f);
    for (int hi = 0; hi < nh; hi++) fprintf(f, "%s%d", hi ? "," : "", out_head(a, hi));
    fputs("],\"per_head\":", f);
    put_grid(f, df->jsd, NULL, nl, nh);
    fputs(",\"per_layer\":[", f);
    for (int li = 0; li < nl; li++) {
        if (li) fputc(',', f);
        put_double(f, layer_mean(a, li));
    }
    fputs("],\"ranking\":[", f);
    int n = 0, *ord = ranking(a, &n);
    if (!ord) return av_err(e, "diff: out of memory");
    for (int r = 0; r < n; r++) {
        fprintf(f, "%s{\"layer\":%d,\"head\":%d,\"jsd\":", r ? "," : "", out_layer(a, ord[r] / nh),
                out_head(a, ord[r] % nh));
        put_double(f, df->jsd[ord[r]]);
        fputc('}', f);
    }
    free(ord);
    fputs("]}", f);
    if (df->sink_a && df->sink_b) {
        fputs(",\"sink\":{\"key\":0,\"rows\":\"mean over query rows 1..n-1 of the weight on token 0\",\"a\":", f);
        put_grid(f, df->sink_a, NULL, nl, nh);
        fputs(",\"b\":", f);
        put_grid(f, df->sink_b, NULL, nl, nh);
        fputs(",\"change\":", f);
        put_grid(f, df->sink_a, df->sink_b, nl, nh);
        fputc('}', f);
    }
    if (ferror(f)) return av_err_errno(e, "write error");
    return 0;
}

int diff_write_json(FILE *f, const OutDoc *a, AvErr *e) {
    if (!a->diff) return av_err(e, "diff: incomplete comparison");
    fputs("{\"attnviz_version\":\"" ATTNVIZ_VERSION "\",\"format\":\"attnviz-diff\",", f);
    if (diff_write_members(f, a, e)) return -1;
    fputs(",\"a\":", f);
    if (json_write_doc(f, a, e)) return -1;
    fputs(",\"b\":", f);
    if (json_write_doc(f, a->diff->b, e)) return -1;
    fputc('}', f);
    if (ferror(f)) return av_err_errno(e, "write error");
    return 0;
}

int diff_write_table(FILE *f, const OutDoc *a, int top, AvErr *e) {
    const struct OutDiff *df = a->diff;
    if (!df || !df->b || !df->jsd) return av_err(e, "diff: incomplete comparison");
    const OutDoc *b = df->b;
    const int na = a->enc->n, nb = b->enc->n, nl = out_n_layers(a), nh = out_n_heads(a);
    if (df->two_models)
        fprintf(f, "attnviz diff: one text, %d tokens, on %s (A) and %s (B)\n", na, a->model_name, b->model_name);
    else
        fprintf(f, "attnviz diff: two texts on %s: A %d tokens, B %d tokens, %d aligned (%d only in A, %d only in B)\n",
                a->model_name, na, nb, df->n_pairs, na - df->n_pairs, nb - df->n_pairs);
    fprintf(f, "Jensen-Shannon divergence of attention rows, bits (0 = same, 1 = disjoint), mean over %d aligned "
               "query rows\n", df->n_pairs);
    int n = 0, *ord = ranking(a, &n);
    if (!ord) return av_err(e, "diff: out of memory");
    if (top > n || top <= 0) top = n;
    const int sinks = df->sink_a && df->sink_b;
    if (sinks)
        fprintf(f, "%4s %6s %5s %10s %8s %8s\n", "rank", "layer", "head", "jsd", "sink A", "sink B");
    else
        fprintf(f, "%4s %6s %5s %10s\n", "rank", "layer", "head", "jsd");
    for (int r = 0; r < top; r++) {
        fprintf(f, "%4d %6d %5d %10.6f", r + 1, out_layer(a, ord[r] / nh), out_head(a, ord[r] % nh), df->jsd[ord[r]]);
        if (sinks) fprintf(f, " %8.4f %8.4f", df->sink_a[ord[r]], df->sink_b[ord[r]]);
        fputc('\n', f);
    }
    free(ord);
    fputs("per layer (mean over heads):", f);
    for (int li = 0; li < nl; li++) fprintf(f, "  L%d %.6f", out_layer(a, li), layer_mean(a, li));
    fputc('\n', f);
    if (sinks) { /* the head whose parked mass moved most, and the mean move */
        int most = 0;
        double sum = 0;
        for (int k = 0; k < nl * nh; k++) {
            double d = fabs(df->sink_b[k] - df->sink_a[k]);
            sum += d;
            if (d > fabs(df->sink_b[most] - df->sink_a[most])) most = k;
        }
        fprintf(f, "sink mass on token 0 (B - A): mean |change| %.6f over %d heads; largest L%d H%d %.4f -> %.4f\n",
                sum / (nl * nh), nl * nh, out_layer(a, most / nh), out_head(a, most % nh), df->sink_a[most],
                df->sink_b[most]);
    }
    if (ferror(f)) return av_err_errno(e, "write error");
    return 0;
}

/* ---------------------------------------------------------------- encoder-decoder stacks */

static void put_alignment(FILE *f, const DiffAlign *al) {
    fputs("{\"a_to_b\":", f);
    put_ints(f, al->a_to_b, al->n_a);
    fputs(",\"b_to_a\":", f);
    put_ints(f, al->b_to_a, al->n_b);
    fprintf(f, ",\"pairs\":%d}", al->n_pairs);
}

static double grid_layer_mean(const double *v, int li, int nh) {
    double s = 0;
    for (int h = 0; h < nh; h++) s += v[(size_t)li * nh + h];
    return nh ? s / nh : 0;
}

int diff_write_s2s_json(FILE *f, const DiffS2s *d, AvErr *e) {
    const int nl = d->n_layers, nh = d->n_heads;
    fprintf(f, "{\"attnviz_version\":\"" ATTNVIZ_VERSION "\",\"format\":\"attnviz-diff\",\"mode\":\"%s\",\"models\":[",
            d->two_models ? "models" : "texts");
    json_write_string(f, d->model_a);
    fputc(',', f);
    json_write_string(f, d->model_b);
    fputs("],\"texts\":[", f);
    json_write_string(f, d->text_a);
    fputc(',', f);
    json_write_string(f, d->text_b);
    fputs("],\"decoder_text\":", f);
    json_write_string(f, d->decoder_text);
    fputs(",\"alignment\":{\"method\":\"longest common subsequence of token ids\",\"source\":", f);
    put_alignment(f, d->src);
    fputs(",\"decoder\":", f);
    put_alignment(f, d->dec);
    fputs("},\"divergence\":{\"measure\":\"jensen-shannon\",\"log_base\":2,\"rows\":\"mean over aligned query rows "
          "(cross: decoder rows, over the aligned source keys)\"},\"layers\":",
          f);
    put_ints(f, d->layers, nl);
    fputs(",\"stacks\":{", f);
    for (int k = 0; k < 3; k++) {
        const DiffStack *st = &d->stacks[k];
        fprintf(f, "%s\"%s\":{", k ? "," : "", st->name);
        const int snl = st->n_layers ? st->n_layers : d->n_layers;
        if (st->n_layers) { /* unequal depths: the stack's own layers (the top-level "layers" are the encoder's) */
            fputs("\"layers\":", f);
            put_ints(f, st->layers, st->n_layers);
            fputc(',', f);
        }
        fputs("\"per_head\":", f);
        put_grid(f, st->jsd, NULL, snl, nh);
        fputs(",\"per_layer\":[", f);
        for (int li = 0; li < snl; li++) {
            if (li) fputc(',', f);
            put_double(f, grid_layer_mean(st->jsd, li, nh));
        }
        fputs("],\"sink\":{\"a\":", f);
        put_grid(f, st->sink_a, NULL, snl, nh);
        fputs(",\"b\":", f);
        put_grid(f, st->sink_b, NULL, snl, nh);
        fputs(",\"change\":", f);
        put_grid(f, st->sink_a, st->sink_b, snl, nh);
        fputs("}}", f);
    }
    fputs("}}\n", f);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

int diff_write_s2s_table(FILE *f, const DiffS2s *d, int top, AvErr *e) {
    const int nh = d->n_heads;
    int most = 0; /* heads of the largest stack */
    for (int k = 0; k < 3; k++) {
        const int nk = (d->stacks[k].n_layers ? d->stacks[k].n_layers : d->n_layers) * nh;
        if (nk > most) most = nk;
    }
    if (d->two_models)
        fprintf(f, "attnviz diff: one source (%d tokens) and decoder text (%d tokens) on %s (A) and %s (B)\n",
                d->src->n_a, d->dec->n_a, d->model_a, d->model_b);
    else
        fprintf(f, "attnviz diff: two sources on %s: A %d tokens, B %d tokens, %d aligned; decoder text %d tokens\n",
                d->model_a, d->src->n_a, d->src->n_b, d->src->n_pairs, d->dec->n_a);
    fputs("Jensen-Shannon divergence of attention rows, bits (0 = same, 1 = disjoint), mean over aligned query rows\n", f);
    int *ord = malloc(sizeof *ord * (size_t)(most ? most : 1));
    if (!ord) return av_err(e, "diff: out of memory");
    for (int k = 0; k < 3; k++) {
        const DiffStack *st = &d->stacks[k];
        const int nl = st->n_layers ? st->n_layers : d->n_layers, n = nl * nh;
        const int *layers = st->n_layers ? st->layers : d->layers;
        const int rows = top > n || top <= 0 ? n : top;
        for (int i = 0; i < n; i++) ord[i] = i;
        for (int i = 1; i < n; i++) /* insertion sort: stable, largest first */
            for (int j = i; j > 0 && st->jsd[ord[j - 1]] < st->jsd[ord[j]]; j--) {
                int t = ord[j];
                ord[j] = ord[j - 1], ord[j - 1] = t;
            }
        fprintf(f, "\n# %s attention\n%4s %6s %5s %10s %8s %8s\n", st->name, "rank", "layer", "head", "jsd", "sink A",
                "sink B");
        for (int r = 0; r < rows; r++)
            fprintf(f, "%4d %6d %5d %10.6f %8.4f %8.4f\n", r + 1, layers[ord[r] / nh], ord[r] % nh, st->jsd[ord[r]],
                    st->sink_a[ord[r]], st->sink_b[ord[r]]);
        fputs("per layer (mean over heads):", f);
        for (int li = 0; li < nl; li++) fprintf(f, "  L%d %.6f", layers[li], grid_layer_mean(st->jsd, li, nh));
        fputc('\n', f);
    }
    free(ord);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}
