/* diff.c — attnviz diff's comparison: token alignment (LCS over ids), per-head
 * Jensen–Shannon divergence over the merged key axis, and its JSON and table
 * (definitions in diff.h). */
#include "diff.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

/* The LCS table of the differing middle is (n+1) x (m+1) 16-bit lengths:
 * refuse above this many cells rather than allocate gigabytes. */
#define DIFF_MAX_CELLS ((size_t)1 << 27)

/* ---------------------------------------------------------------- alignment */

void diff_align_free(DiffAlign *al) {
    free(al->a_to_b);
    free(al->b_to_a);
    memset(al, 0, sizeof *al);
}

int diff_align(const int *a, int n_a, const int *b, int n_b, DiffAlign *out, AvErr *e) {
    memset(out, 0, sizeof *out);
    if (n_a < 0 || n_b < 0) return av_err(e, "diff: negative token count");
    out->n_a = n_a, out->n_b = n_b;
    out->a_to_b = malloc(sizeof(int) * (size_t)(n_a ? n_a : 1));
    out->b_to_a = malloc(sizeof(int) * (size_t)(n_b ? n_b : 1));
    if (!out->a_to_b || !out->b_to_a) {
        diff_align_free(out);
        return av_err(e, "diff: out of memory");
    }
    for (int i = 0; i < n_a; i++) out->a_to_b[i] = -1;
    for (int j = 0; j < n_b; j++) out->b_to_a[j] = -1;
    /* a common prefix and suffix align as they are (and are in every LCS's
     * reach without loss); only the middle needs the table */
    int pre = 0;
    while (pre < n_a && pre < n_b && a[pre] == b[pre]) pre++;
    int suf = 0;
    while (suf < n_a - pre && suf < n_b - pre && a[n_a - 1 - suf] == b[n_b - 1 - suf]) suf++;
    for (int i = 0; i < pre; i++) out->a_to_b[i] = out->b_to_a[i] = i;
    for (int k = 1; k <= suf; k++) out->a_to_b[n_a - k] = n_b - k, out->b_to_a[n_b - k] = n_a - k;
    out->n_pairs = pre + suf;
    const int *x = a + pre, *y = b + pre;
    const int n = n_a - pre - suf, m = n_b - pre - suf;
    if (n == 0 || m == 0) return 0;
    const size_t W = (size_t)m + 1, cells = ((size_t)n + 1) * W;
    if (cells > DIFF_MAX_CELLS || n > 65535 || m > 65535) {
        diff_align_free(out);
        return av_err(e, "diff: the inputs differ over %d x %d tokens, too many to align (at most %zu pairs)", n, m,
                      DIFF_MAX_CELLS);
    }
    /* L[i][j]: LCS length of x[i..] and y[j..] */
    uint16_t *L = calloc(cells, sizeof *L);
    if (!L) {
        diff_align_free(out);
        return av_err(e, "diff: out of memory aligning %d x %d tokens", n, m);
    }
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--) {
            uint16_t *c = L + (size_t)i * W + j;
            if (x[i] == y[j]) *c = (uint16_t)(c[W + 1] + 1);
            else *c = c[W] >= c[1] ? c[W] : c[1];
        }
    int i = 0, j = 0;
    while (i < n && j < m) {
        if (x[i] == y[j]) {
            out->a_to_b[pre + i] = pre + j, out->b_to_a[pre + j] = pre + i;
            out->n_pairs++;
            i++, j++;
        } else if (L[(size_t)(i + 1) * W + j] >= L[(size_t)i * W + j + 1]) {
            i++;
        } else {
            j++;
        }
    }
    free(L);
    return 0;
}

/* ---------------------------------------------------------------- divergence */

/* ½ p log2(2p / (p + q)) + ½ q log2(2q / (p + q)), with 0 log 0 = 0 */
static double jsd_term(double p, double q) {
    double m = p + q, t = 0;
    if (p > 0) t += p * log2(2 * p / m);
    if (q > 0) t += q * log2(2 * q / m);
    return 0.5 * t;
}

double diff_jsd_row(const float *pa, const float *pb, const DiffAlign *al) {
    double sa = 0, sb = 0;
    for (int j = 0; j < al->n_a; j++) sa += pa[j];
    for (int j = 0; j < al->n_b; j++) sb += pb[j];
    const double ia = sa > 0 ? 1 / sa : 0, ib = sb > 0 ? 1 / sb : 0;
    double jsd = 0, lone = 0;
    for (int j = 0; j < al->n_a; j++) {
        int k = al->a_to_b[j];
        if (k >= 0) jsd += jsd_term(pa[j] * ia, pb[k] * ib);
        else lone += pa[j] * ia;
    }
    for (int k = 0; k < al->n_b; k++)
        if (al->b_to_a[k] < 0) lone += pb[k] * ib;
    /* a key only one side has: m = p/2 there, so its term is p/2 exactly */
    return jsd + 0.5 * lone;
}

double diff_head_jsd(const float *A, const float *B, const DiffAlign *al) {
    double sum = 0;
    int rows = 0;
    for (int i = 0; i < al->n_a; i++) {
        int k = al->a_to_b[i];
        if (k < 0) continue;
        sum += diff_jsd_row(A + (size_t)i * al->n_a, B + (size_t)k * al->n_b, al);
        rows++;
    }
    return rows ? sum / rows : 0;
}

int diff_divergence(const OutDoc *a, const OutDoc *b, const DiffAlign *al, double *out, AvErr *e) {
    const Capture *ca = a->cap, *cb = b->cap;
    if (!ca || !cb || ca->n_tokens != al->n_a || cb->n_tokens != al->n_b)
        return av_err(e, "diff: the captures do not match the alignment");
    const int nl = out_n_layers(a), nh = out_n_heads(a);
    if (nl != out_n_layers(b) || nh != out_n_heads(b)) return av_err(e, "diff: the two selections differ");
    for (int li = 0; li < nl; li++)
        for (int hi = 0; hi < nh; hi++) {
            int l = out_layer(a, li), h = out_head(a, hi);
            if (l != out_layer(b, li) || h != out_head(b, hi) || !cap_has(ca, l, h) || !cap_has(cb, l, h))
                return av_err(e, "diff: layer %d head %d is not in both captures", l, h);
            out[(size_t)li * nh + hi] = diff_head_jsd(cap_attn(ca, l, h), cap_attn(cb, l, h), al);
        }
    return 0;
}

double diff_sink_mass(const float *A, int n) {
    if (n <= 0) return 0;
    if (n == 1) return A[0];
    double s = 0;
    for (int i = 1; i < n; i++) s += A[(size_t)i * n];
    return s / (n - 1);
}

int diff_sinks(const OutDoc *d, double *out, AvErr *e) {
    const Capture *c = d->cap;
    if (!c) return av_err(e, "diff: no capture");
    const int nl = out_n_layers(d), nh = out_n_heads(d);
    for (int li = 0; li < nl; li++)
        for (int hi = 0; hi < nh; hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            if (!cap_has(c, l, h)) return av_err(e, "diff: layer %d head %d is not in the capture", l, h);
            out[(size_t)li * nh + hi] = diff_sink_mass(cap_attn(c, l, h), c->n_tokens);
        }
    return 0;
}

/* ---------------------------------------------------------------- output */

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

double diff_cross_jsd(const float *A, const float *B, const DiffAlign *rows, const DiffAlign *cols) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < rows->n_a; i++) {
        const int k = rows->a_to_b[i];
        if (k < 0) continue;
        sum += diff_jsd_row(A + (size_t)i * cols->n_a, B + (size_t)k * cols->n_b, cols);
        n++;
    }
    return n ? sum / n : 0;
}

double diff_cross_sink(const float *A, int n_rows, int n_cols) {
    double s = 0;
    for (int i = 0; i < n_rows; i++) s += A[(size_t)i * n_cols];
    return n_rows ? s / n_rows : 0;
}

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
