/* explain_out.c — a head's score split over the stream's parts (explain.h),
 * as JSON and as a table. */
#include "explain_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"

/* Rows of the table: the largest products, and each side's largest sums. */
#define EXPLAIN_TOP 12

static void part_name(const ExplainResult *r, int p, char *buf, size_t len) {
    switch (r->kind[p]) {
    case EXPLAIN_EMBED: snprintf(buf, len, "embeddings"); break;
    case EXPLAIN_HEAD: snprintf(buf, len, "L%d.H%d", r->part_layer[p], r->part_head[p]); break;
    case EXPLAIN_MLP: snprintf(buf, len, "MLP %d", r->part_layer[p]); break;
    case EXPLAIN_BIAS: snprintf(buf, len, "biases"); break;
    default: snprintf(buf, len, "rounding"); break;
    }
}

static void put_float(FILE *f, double v, int sig) {
    char buf[40];
    json_format_float(buf, (float)v, sig);
    fputs(buf, f);
}

static const char *token_text(const OutDoc *d, int i) {
    if (i < 0 || i >= d->enc->n) return "";
    return d->display_tokens ? d->display_tokens[i] : d->enc->tokens[i];
}

int explain_json_member(FILE *f, const OutDoc *d) {
    const ExplainResult *r = d->explain;
    if (!r) return 0;
    const int NP = r->n_parts, sig = d->precision;
    char name[48];
    fprintf(f, ",\"explain\":{\"layer\":%d,\"head\":%d,\"kv_head\":%d,\"scale\":", r->layer, r->head, r->kv_head);
    put_float(f, r->scale, sig);
    fputs(",\"definition\":\"the pre-softmax score scale * q_i . k_j split over the parts of the residual stream "
          "entering the layer, the layer norm (and q/k norms) frozen at their measured scale, rotary applied per "
          "part: matrix[c][c'] = scale * q_c(i) . k_c'(j), query parts c (rows) by key parts c' (columns); the rounding part is what the "
          "float32 pass's stream holds beyond the other parts, recomputed in double (rest: its size relative to the stream)\",\"parts\":[",
          f);
    for (int p = 0; p < NP; p++) {
        part_name(r, p, name, sizeof name);
        fputs(p ? "," : "", f);
        json_write_string(f, name);
    }
    fputs("],\"part_layer\":[", f);
    for (int p = 0; p < NP; p++) fprintf(f, "%s%d", p ? "," : "", r->part_layer[p]);
    fputs("],\"part_head\":[", f);
    for (int p = 0; p < NP; p++) fprintf(f, "%s%d", p ? "," : "", r->part_head[p]);
    fputs("],\"rest\":", f);
    put_float(f, r->rest, 3);
    fputs(",\"qk_check\":", f);
    if (r->qk_check >= 0) put_float(f, r->qk_check, 3);
    else fputs("null", f);
    fputs(",\"pairs\":[", f);
    for (int k = 0; k < r->n_pairs; k++) {
        const ExplainPair *x = &r->pairs[k];
        fprintf(f, "%s{\"query\":%d,\"key\":%d,\"query_token\":", k ? "," : "", x->query, x->key);
        json_write_string(f, token_text(d, x->query));
        fputs(",\"key_token\":", f);
        json_write_string(f, token_text(d, x->key));
        fputs(",\"weight\":", f);
        put_float(f, x->weight, sig);
        fputs(",\"score\":", f);
        put_float(f, x->score, sig);
        fputs(",\"parts_sum\":", f);
        put_float(f, x->parts_sum, sig);
        fputs(",\"matrix\":[", f);
        for (int a = 0; a < NP; a++) {
            fputs(a ? ",[" : "[", f);
            for (int b = 0; b < NP; b++) {
                if (b) fputc(',', f);
                put_float(f, x->m[(size_t)a * NP + b], sig);
            }
            fputc(']', f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
    return ferror(f) ? -1 : 0;
}

typedef struct {
    double v;
    int a, b;
} Cell;

static int by_size(const void *x, const void *y) {
    const Cell *p = x, *q = y;
    const double u = fabs(p->v), w = fabs(q->v);
    return u > w ? -1 : u < w ? 1 : (p->a != q->a ? p->a - q->a : p->b - q->b);
}

/* A token's text for the terminal: control characters shown as '?', at most 24 bytes. */
static void term_token(const OutDoc *d, int i, char *buf, size_t len) {
    const char *s = token_text(d, i);
    size_t k = 0;
    for (; *s && k + 1 < len && k < 24; s++) buf[k++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    buf[k] = 0;
}

int explain_write_table(FILE *f, const OutDoc *d, AvErr *e) {
    const ExplainResult *r = d->explain;
    if (!r) return 0;
    const int NP = r->n_parts;
    Cell *cells = malloc((size_t)NP * NP * sizeof *cells), *side = malloc((size_t)NP * sizeof *side);
    if (!cells || !side) {
        free(cells), free(side);
        return av_err(e, "out of memory");
    }
    char qa[32], ka[32], n1[48], n2[48];
    fprintf(f, "# why head %d.%d attends where it does: the score scale * q.k (scale %.4g, before the softmax) split over "
               "the residual stream's parts entering layer %d (norms frozen at their measured scale; docs/measures.md)\n",
            r->layer, r->head, r->scale, r->layer);
    for (int k = 0; k < r->n_pairs; k++) {
        const ExplainPair *x = &r->pairs[k];
        term_token(d, x->query, qa, sizeof qa);
        term_token(d, x->key, ka, sizeof ka);
        fprintf(f, "\nquery %d '%s' -> key %d '%s': weight %.4f, score %.4f (parts sum to %.4f)\n", x->query, qa, x->key,
                ka, x->weight, x->score, x->parts_sum);
        for (int a = 0; a < NP; a++)
            for (int b = 0; b < NP; b++) cells[(size_t)a * NP + b] = (Cell){x->m[(size_t)a * NP + b], a, b};
        qsort(cells, (size_t)NP * NP, sizeof *cells, by_size);
        fprintf(f, "  %10s  %-14s %-14s\n", "score", "query part", "key part");
        for (int i = 0; i < EXPLAIN_TOP && i < NP * NP; i++) {
            part_name(r, cells[i].a, n1, sizeof n1);
            part_name(r, cells[i].b, n2, sizeof n2);
            fprintf(f, "  %+10.4f  %-14s %-14s\n", cells[i].v, n1, n2);
        }
        for (int s = 0; s < 2; s++) {
            for (int p = 0; p < NP; p++) {
                double t = 0;
                for (int q = 0; q < NP; q++) t += s ? x->m[(size_t)q * NP + p] : x->m[(size_t)p * NP + q];
                side[p] = (Cell){t, p, 0};
            }
            qsort(side, (size_t)NP, sizeof *side, by_size);
            fprintf(f, "  %s parts, each summed over the %s's:", s ? "key" : "query", s ? "query" : "key");
            for (int i = 0; i < 6 && i < NP; i++) {
                part_name(r, side[i].a, n1, sizeof n1);
                fprintf(f, "%s %s %+.3f", i ? "," : "", n1, side[i].v);
            }
            fputc('\n', f);
        }
    }
    free(cells), free(side);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}
