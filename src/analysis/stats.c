/* stats.c — head statistics: what researchers compute by hand from dumps. */
#include "stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform.h"
#include "util.h"


static const char *const NAMES[ST_N] = {"entropy", "mean_distance", "cls", "sep", "self", "previous", "next"};

const char *const *stats_names(void) { return NAMES; }

const char *stats_measure_words(const char *measure) {
    if (!measure) return "attention";
    if (!strcmp(measure, "norm")) return "value-weighted attention (--measure norm)";
    if (!strcmp(measure, "alti")) return "ALTI token contributions (--measure alti)";
    if (!strcmp(measure, "rollout")) return "attention rollout (--measure rollout)";
    return measure;
}

const char *stats_measure_known(const char *name) {
    static const char *const KNOWN[] = {"norm", "alti", "rollout"};
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(name, KNOWN[i])) return KNOWN[i];
    return NULL;
}

int stats_init_named(HeadStats *s, int n_layers, int n_heads, int n_scores, const char *const *names, AvErr *e) {
    memset(s, 0, sizeof *s);
    if (n_layers < 1 || n_heads < 1 || n_scores < 1 || n_scores > STATS_MAX_SCORES) return av_err(e, "no heads to score");
    s->n_layers = n_layers, s->n_heads = n_heads, s->n_scores = n_scores;
    for (int k = 0; k < n_scores; k++) s->names[k] = names[k];
    size_t n = (size_t)n_layers * n_heads * n_scores;
    s->sum = calloc(n, sizeof *s->sum);
    s->count = calloc(n, sizeof *s->count);
    s->present = calloc((size_t)n_layers * n_heads, 1);
    if (!s->sum || !s->count || !s->present) {
        stats_free(s);
        return av_err(e, "out of memory");
    }
    return 0;
}

int stats_init(HeadStats *s, int n_layers, int n_heads, AvErr *e) {
    return stats_init_named(s, n_layers, n_heads, ST_N, NAMES, e);
}

void stats_free(HeadStats *s) {
    free(s->sum);
    free(s->count);
    free(s->present);
    memset(s, 0, sizeof *s);
}

static size_t at(const HeadStats *s, int layer, int head, int k) {
    return ((size_t)layer * s->n_heads + head) * s->n_scores + (size_t)k;
}

int stats_put(HeadStats *s, int layer, int head, int k, double v, AvErr *e) {
    /* one input's value is bounded by the input's length (distance) or log of it (entropy) */
    if (!isfinite(v) || fabs(v) >= 0x1p30) return av_err(e, "%s: value %g out of range", s->names[k], v);
    int64_t q = llround(ldexp(v, STATS_FRAC_BITS));
    size_t i = at(s, layer, head, k);
    if (__builtin_add_overflow(s->sum[i], q, &s->sum[i])) return av_err(e, "%s: the sum overflows", s->names[k]);
    s->count[i]++;
    s->present[(size_t)layer * s->n_heads + head] = 1;
    return 0;
}

int stats_merge(HeadStats *into, const HeadStats *from, AvErr *e) {
    if (into->n_layers != from->n_layers || into->n_heads != from->n_heads || into->n_scores != from->n_scores)
        return av_err(e, "different shapes");
    if (!into->measure != !from->measure || (into->measure && strcmp(into->measure, from->measure)))
        return av_err(e, "one file scores %s, the other %s", stats_measure_words(into->measure),
                      stats_measure_words(from->measure));
    size_t n = (size_t)into->n_layers * into->n_heads * into->n_scores;
    for (size_t i = 0; i < n; i++)
        if (__builtin_add_overflow(into->sum[i], from->sum[i], &into->sum[i]) ||
            __builtin_add_overflow(into->count[i], from->count[i], &into->count[i]))
            return av_err(e, "%s: the sum overflows", into->names[i % (size_t)into->n_scores]);
    for (size_t i = 0; i < (size_t)into->n_layers * into->n_heads; i++) into->present[i] |= from->present[i];
    if (__builtin_add_overflow(into->inputs, from->inputs, &into->inputs)) return av_err(e, "too many inputs");
    return 0;
}

uint64_t stats_line_digest(const char *s, size_t n) {
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    uint64_t h = av_fnv1a64(s, n, AV_FNV64_SEED);
    /* mixed (splitmix64's finalizer): sums of raw FNV values keep too much of their structure */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

void stats_set_cover(HeadStats *s, uint64_t setup, const StatsCover *c) {
    s->setup = setup, s->cover = *c, s->have_cover = 1;
}

/* Row sums of one (rows, cols) matrix into acc, the rows each score had into cnt. kind: each column's
 * [CLS]/[SEP] role. diag: rows and columns are one sequence's tokens (self-attention), so row i's self,
 * previous and next keys and its distances exist; cross attention's rows (decoder) and columns (source)
 * are different sequences: those four scores have no rows. */
static void score_matrix(const float *A, int rows, int cols, const unsigned char *kind, int diag, double *acc,
                         long *cnt) {
    for (int i = 0; i < rows; i++) {
        const float *r = A + (size_t)i * cols;
        double ent = 0, dist = 0, cls = 0, sep = 0;
        for (int j = 0; j < cols; j++) {
            double p = r[j];
            if (p > 0) ent -= p * log(p);
            dist += p * abs(i - j);
            if (kind[j] == XF_CLS) cls += p;
            else if (kind[j] == XF_SEP) sep += p;
        }
        acc[ST_ENTROPY] += ent, acc[ST_CLS] += cls, acc[ST_SEP] += sep;
        cnt[ST_ENTROPY]++, cnt[ST_CLS]++, cnt[ST_SEP]++;
        if (!diag) continue;
        acc[ST_DISTANCE] += dist, acc[ST_SELF] += r[i];
        cnt[ST_DISTANCE]++, cnt[ST_SELF]++;
        if (i > 0) acc[ST_PREV] += r[i - 1], cnt[ST_PREV]++;
        if (i < cols - 1) acc[ST_NEXT] += r[i + 1], cnt[ST_NEXT]++;
    }
}

static int put_means(HeadStats *s, int l, int h, const double *acc, const long *cnt, AvErr *e) {
    for (int k = 0; k < ST_N; k++)
        if (cnt[k] && stats_put(s, l, h, k, acc[k] / cnt[k], e) != 0) return -1;
    return 0;
}

int stats_add(HeadStats *s, const OutDoc *d, AvErr *e) {
    const int n = d->enc->n;
    /* [CLS]/<s> and [SEP]/</s> shares; GPT-2 adds neither */
    unsigned char kind[n > 0 ? n : 1];
    for (int j = 0; j < n; j++) kind[j] = (unsigned char)xf_special_role(d->enc, j);
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            double acc[ST_N] = {0};
            long rows[ST_N] = {0};
            if (d->cap->sc_sum) { /* the engine's sums over the rows as it made them (capture.h) */
                const double *t = cap_sc(d->cap, l, h);
                static const int FROM[ST_N] = {CAP_SC_ENTROPY, CAP_SC_DISTANCE, CAP_SC_CLS, CAP_SC_SEP,
                                               CAP_SC_SELF,    CAP_SC_PREV,     CAP_SC_NEXT};
                for (int k = 0; k < ST_N; k++) acc[k] = t[FROM[k]], rows[k] = k == ST_PREV || k == ST_NEXT ? n - 1 : n;
                if (put_means(s, l, h, acc, rows, e) != 0) return -1;
                continue;
            }
            score_matrix(cap_attn(d->cap, l, h), n, n, kind, 1, acc, rows);
            if (put_means(s, l, h, acc, rows, e) != 0) return -1;
        }
    s->inputs++;
    return 0;
}

int stats_add_stack(HeadStats *s, const OutDoc *d, const CapStack *st, const TokEncoding *cols, AvErr *e) {
    if (cols->n != st->n_cols) return av_err(e, "stats: %d column tokens for a stack of %d columns", cols->n, st->n_cols);
    unsigned char kind[cols->n > 0 ? cols->n : 1];
    for (int j = 0; j < cols->n; j++) kind[j] = (unsigned char)xf_special_role(cols, j);
    const int H = d->cfg->num_heads, diag = st->rows_decoder == st->cols_decoder;
    for (int li = 0; li < out_stack_n_layers(d, st); li++)
        for (int h = 0; h < H; h++) {
            double acc[ST_N] = {0};
            long rows[ST_N] = {0};
            score_matrix(st->attn + ((size_t)li * H + h) * st->n_rows * st->n_cols, st->n_rows, st->n_cols, kind, diag,
                         acc, rows);
            if (put_means(s, out_stack_layer(d, st, li), h, acc, rows, e) != 0) return -1;
        }
    s->inputs++;
    return 0;
}

double stats_mean(const HeadStats *s, int layer, int head, int k) {
    size_t i = at(s, layer, head, k);
    return s->count[i] ? ldexp((double)s->sum[i], -STATS_FRAC_BITS) / (double)s->count[i] : NAN;
}

int stats_write_table(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e) {
    fprintf(f, "# %s statistics, mean over %ld input%s; entropy in nats, distance in tokens, the rest are shares%s\n",
            stats_measure_words(s->measure), s->inputs, s->inputs == 1 ? "" : "s",
            stats_per_layer(s) ? "; one row per layer (the measure mixes every head, through the layers up to it)" : "");
    fprintf(f, "%5s %4s %8s %8s %7s %7s %7s %7s %7s\n", "layer", "head", "entropy", "distance", "[CLS]", "[SEP]", "self",
            "prev", "next");
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            char hn[16];
            snprintf(hn, sizeof hn, stats_per_layer(s) ? "all" : "%d", h);
            fprintf(f, "%5d %4s %8.3f %8.2f %7.3f %7.3f %7.3f %7.3f %7.3f\n", l, hn, stats_mean(s, l, h, ST_ENTROPY),
                    stats_mean(s, l, h, ST_DISTANCE), stats_mean(s, l, h, ST_CLS), stats_mean(s, l, h, ST_SEP),
                    stats_mean(s, l, h, ST_SELF), stats_mean(s, l, h, ST_PREV), stats_mean(s, l, h, ST_NEXT));
        }
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

void stats_write_members(FILE *f, const HeadStats *s, const char *kind, const char *model) {
    fprintf(f, "\"kind\":\"%s\",", kind);
    if (s->measure) fprintf(f, "\"measure\":\"%s\",", s->measure);
    fputs("\"model\":", f);
    json_write_string(f, model ? model : "");
    fprintf(f, ",\"inputs\":%ld,\"layers\":%d,\"heads_per_layer\":%d,\"fixed_point_bits\":%d,\"scores\":[", s->inputs,
            s->n_layers, s->n_heads, STATS_FRAC_BITS);
    for (int k = 0; k < s->n_scores; k++) {
        if (k) fputc(',', f);
        json_write_string(f, s->names[k]);
    }
    fputc(']', f);
    if (s->have_cover) { /* what it covered: attnviz stats --merge checks it */
        const StatsCover *c = &s->cover;
        fprintf(f, ",\"setup\":\"%016" PRIx64 "\",\"covered\":{\"lines\":%ld,\"digest\":\"%016" PRIx64 "\"}", s->setup,
                c->lines, c->digest);
        if (c->count)
            fprintf(f, ",\"shard\":{\"index\":%d,\"count\":%d,\"corpus_lines\":%ld,\"corpus\":\"%016" PRIx64 "\"}",
                    c->index, c->count, c->corpus_lines, c->corpus);
    }
    fputs(",\"heads\":[", f);
    int first = 1;
    for (int l = 0; l < s->n_layers; l++)
        for (int h = 0; h < s->n_heads; h++) {
            if (!s->present[(size_t)l * s->n_heads + h]) continue;
            fprintf(f, "%s{\"layer\":%d,\"head\":%d", first ? "" : ",", l, h);
            first = 0;
            for (int k = 0; k < s->n_scores; k++) {
                double v = stats_mean(s, l, h, k);
                fputc(',', f);
                json_write_string(f, s->names[k]);
                if (isnan(v)) fputs(":null", f);
                else fprintf(f, ":%.17g", v);
            }
            fputs(",\"sum\":[", f);
            for (int k = 0; k < s->n_scores; k++) fprintf(f, "%s\"%" PRId64 "\"", k ? "," : "", s->sum[at(s, l, h, k)]);
            fputs("],\"count\":[", f);
            for (int k = 0; k < s->n_scores; k++) fprintf(f, "%s%ld", k ? "," : "", s->count[at(s, l, h, k)]);
            fputs("]}", f);
        }
    fputc(']', f);
}

int stats_write_json(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e) {
    fputc('{', f);
    stats_write_members(f, s, "stats", d->model_name);
    fputs("}\n", f);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

int stats_write_json_stacks(FILE *f, const HeadStats *const *s, const char *const *names, int n, const OutDoc *d,
                            AvErr *e) {
    fputc('{', f);
    stats_write_members(f, s[0], "stats", d->model_name);
    fputs(",\"stack\":", f);
    json_write_string(f, names[0]);
    fputs(",\"stacks\":{", f);
    for (int k = 1; k < n; k++) {
        fprintf(f, "%s", k > 1 ? "," : "");
        json_write_string(f, names[k]);
        fputs(":{", f);
        stats_write_members(f, s[k], "stats", d->model_name);
        fputc('}', f);
    }
    fputs("}}\n", f);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}
