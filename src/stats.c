/* stats.c — head statistics: what researchers compute by hand from dumps. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform.h"


static const char *NAMES[ST_N] = {"entropy", "mean_distance", "cls", "sep", "self", "previous", "next"};

int stats_init(HeadStats *s, int n_layers, int n_heads, AvErr *e) {
    memset(s, 0, sizeof *s);
    s->n_layers = n_layers, s->n_heads = n_heads;
    size_t n = (size_t)n_layers * n_heads * ST_N;
    s->sum = calloc(n, sizeof *s->sum);
    s->count = calloc(n, sizeof *s->count);
    if (!s->sum || !s->count) {
        stats_free(s);
        return av_err(e, "out of memory");
    }
    return 0;
}

void stats_free(HeadStats *s) {
    free(s->sum);
    free(s->count);
    memset(s, 0, sizeof *s);
}

void stats_add(HeadStats *s, const OutDoc *d) {
    const int n = d->enc->n;
    /* [CLS]/<s> and [SEP]/</s> shares; GPT-2 adds neither */
    unsigned char kind[n > 0 ? n : 1];
    for (int j = 0; j < n; j++) kind[j] = (unsigned char)xf_special_role(d->enc, j);
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            const float *A = cap_attn(d->cap, l, h); // (n, n)
            double acc[ST_N] = {0};
            long rows[ST_N] = {0};
            for (int i = 0; i < n; i++) {
                const float *r = A + (size_t)i * n;
                double ent = 0, dist = 0, cls = 0, sep = 0;
                for (int j = 0; j < n; j++) {
                    double p = r[j];
                    if (p > 0) ent -= p * log(p);
                    dist += p * abs(i - j);
                    if (kind[j] == XF_CLS) cls += p;
                    else if (kind[j] == XF_SEP) sep += p;
                }
                acc[ST_ENTROPY] += ent, acc[ST_DISTANCE] += dist, acc[ST_CLS] += cls, acc[ST_SEP] += sep;
                acc[ST_SELF] += r[i];
                rows[ST_ENTROPY]++, rows[ST_DISTANCE]++, rows[ST_CLS]++, rows[ST_SEP]++, rows[ST_SELF]++;
                if (i > 0) acc[ST_PREV] += r[i - 1], rows[ST_PREV]++;
                if (i < n - 1) acc[ST_NEXT] += r[i + 1], rows[ST_NEXT]++;
            }
            double *sum = s->sum + ((size_t)l * s->n_heads + h) * ST_N;
            long *cnt = s->count + ((size_t)l * s->n_heads + h) * ST_N;
            for (int k = 0; k < ST_N; k++)
                if (rows[k]) sum[k] += acc[k] / rows[k], cnt[k]++;
        }
    s->inputs++;
}

double stats_mean(const HeadStats *s, int layer, int head, int k) {
    size_t at = ((size_t)layer * s->n_heads + head) * ST_N + (size_t)k;
    return s->count[at] ? s->sum[at] / s->count[at] : NAN;
}

int stats_write_table(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e) {
    fprintf(f, "# attention statistics, mean over %ld input%s; entropy in nats, distance in tokens, the rest are shares\n",
            s->inputs, s->inputs == 1 ? "" : "s");
    fprintf(f, "%5s %4s %8s %8s %7s %7s %7s %7s %7s\n", "layer", "head", "entropy", "distance", "[CLS]", "[SEP]", "self",
            "prev", "next");
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            fprintf(f, "%5d %4d %8.3f %8.2f %7.3f %7.3f %7.3f %7.3f %7.3f\n", l, h, stats_mean(s, l, h, ST_ENTROPY),
                    stats_mean(s, l, h, ST_DISTANCE), stats_mean(s, l, h, ST_CLS), stats_mean(s, l, h, ST_SEP),
                    stats_mean(s, l, h, ST_SELF), stats_mean(s, l, h, ST_PREV), stats_mean(s, l, h, ST_NEXT));
        }
    return ferror(f) ? av_err(e, "write error") : 0;
}

int stats_write_json(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e) {
    fprintf(f, "{\"inputs\":%ld,\"model\":", s->inputs);
    json_write_string(f, d->model_name ? d->model_name : "");
    fputs(",\"heads\":[", f);
    int first = 1;
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            fprintf(f, "%s{\"layer\":%d,\"head\":%d", first ? "" : ",", l, h);
            first = 0;
            for (int k = 0; k < ST_N; k++) {
                double v = stats_mean(s, l, h, k);
                if (isnan(v)) fprintf(f, ",\"%s\":null", NAMES[k]);
                else fprintf(f, ",\"%s\":%.6g", NAMES[k], v);
            }
            fputc('}', f);
        }
    fputs("]}\n", f);
    return ferror(f) ? av_err(e, "write error") : 0;
}
