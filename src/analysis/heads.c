/* heads.c — head scores over a corpus (what TransformerLens's head detector and
 * bertviz users compute by hand), their ranking, and exact merging of shards. */
#include "heads.h"
#include "jsonread.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform.h"
#include "util.h"

static const char *const NAMES[HS_N] = {"previous", "next",     "self",    "first", "sep",
                                        "duplicate", "induction", "distance", "entropy", "pattern"};

/* a pattern file is read whole; 8192 x 8192 float64 is 512 MB */
#define PATTERN_MAX_N 8192
#define MERGE_MAX_BYTES ((size_t)1 << 30)

const char *heads_score_name(int k) { return k >= 0 && k < HS_N ? NAMES[k] : NULL; }

int heads_score_by_name(const char *name) {
    for (int k = 0; k < HS_N; k++)
        if (!strcmp(name, NAMES[k])) return k;
    return -1;
}

/* ---- --pattern ---- */

void heads_pattern_free(HeadsPattern *p) {
    free(p->w);
    free(p->spec);
    memset(p, 0, sizeof *p);
}

static int pattern_alloc(HeadsPattern *p, long n, const char *name, AvErr *e) {
    if (n < 1 || n > PATTERN_MAX_N) return av_err(e, "%s: a %ld x %ld pattern (1 to %d rows)", name, n, n, PATTERN_MAX_N);
    p->n = (int)n;
    p->w = malloc((size_t)n * (size_t)n * sizeof *p->w);
    return p->w ? 0 : av_err(e, "out of memory");
}

/* The value of a header key in a .npy header dict ("'descr': '<f4'"), or NULL. */
static const char *npy_value(const char *h, size_t n, const char *key) {
    size_t k = strlen(key);
    for (size_t i = 0; i + k + 2 < n; i++)
        if (h[i] == '\'' && !strncmp(h + i + 1, key, k) && h[i + 1 + k] == '\'') {
            const char *p = h + i + k + 2;
            while (p < h + n && (*p == ' ' || *p == ':')) p++;
            return p < h + n ? p : NULL;
        }
    return NULL;
}

static int parse_npy(HeadsPattern *p, const char *name, const unsigned char *b, size_t len, AvErr *e) {
    if (len < 10 || memcmp(b, "\x93NUMPY", 6)) return av_err(e, "%s: not a .npy file", name);
    size_t hl, off;
    if (b[6] == 1) hl = b[8] | (size_t)b[9] << 8, off = 10;
    else if ((b[6] == 2 || b[6] == 3) && len >= 12)
        hl = b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24, off = 12;
    else return av_err(e, "%s: unsupported .npy version %d", name, b[6]);
    if (hl > len - off) return av_err(e, "%s: .npy header runs past the end", name);
    /* the header alone, terminated: strncmp and strtol may then read to its end and no further */
    char *h = malloc(hl + 1);
    if (!h) return av_err(e, "out of memory");
    memcpy(h, b + off, hl);
    h[hl] = '\0';
    static const struct { const char *descr; int size; char kind; } TYPES[] = {
        {"'<f4'", 4, 'f'}, {"'<f8'", 8, 'f'}, {"'<i4'", 4, 'i'}, {"'<i8'", 8, 'i'}, {"'|u1'", 1, 'u'}, {"'|b1'", 1, 'u'}};
    const char *d = npy_value(h, hl, "descr"), *fo = npy_value(h, hl, "fortran_order"), *sh = npy_value(h, hl, "shape");
    const char *why = NULL;
    int t = -1;
    long dims[2];
    int nd = 0;
    if (!d || !fo || !sh) why = ".npy header lacks descr, fortran_order or shape";
    else if (strncmp(fo, "False", 5)) why = "Fortran-order .npy is not supported";
    for (int i = 0; !why && i < 6; i++)
        if (!strncmp(d, TYPES[i].descr, 5)) t = i;
    if (!why && t < 0) why = ".npy dtype must be float32/64, int32/64, uint8 or bool";
    const char *q = sh, *end = h + hl;
    if (!why && *q != '(') why = "the pattern must be a square 2-D array (n, n)";
    for (q = why ? end : q + 1; q < end && *q != ')';) {
        while (q < end && (*q == ' ' || *q == ',')) q++;
        if (q >= end || *q == ')') break;
        char *stop;
        errno = 0;
        long v = strtol(q, &stop, 10);
        if (stop == q || errno || v < 0 || nd == 2) {
            why = "the pattern must be a square 2-D array (n, n)";
            break;
        }
        dims[nd++] = v, q = stop;
    }
    if (!why && (nd != 2 || dims[0] != dims[1])) why = "the pattern must be a square 2-D array (n, n)";
    free(h);
    if (why) return av_err(e, "%s: %.1000s", name, why);
    if (pattern_alloc(p, dims[0], name, e) != 0) return -1;
    size_t count = (size_t)p->n * (size_t)p->n, sz = (size_t)TYPES[t].size;
    if (len - off - hl < count * sz) return av_err(e, "%s: .npy data is shorter than its shape", name);
    const unsigned char *x = b + off + hl;
    for (size_t i = 0; i < count; i++, x += sz) {
        double v;
        if (TYPES[t].kind == 'u') v = x[0];
        else if (sz == 4 && TYPES[t].kind == 'f') { float f; memcpy(&f, x, 4); v = f; }
        else if (sz == 8 && TYPES[t].kind == 'f') memcpy(&v, x, 8);
        else if (sz == 4) { int32_t k; memcpy(&k, x, 4); v = k; }
        else { int64_t k; memcpy(&k, x, 8); v = (double)k; }
        if (!isfinite(v)) return av_err(e, "%s: element %zu is not a finite number", name, i);
        p->w[i] = (float)v;
    }
    return 0;
}

static int parse_json_pattern(HeadsPattern *p, const char *name, const char *buf, size_t len, AvErr *e) {
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, name, e);
    int rc = -1;
    if (pr) return pr < 0 ? -1 : av_err(e, "%s: not valid JSON (a pattern is [[...], ...] or a .npy file)", name);
    if (!cJSON_IsArray(root)) {
        av_err(e, "%s: a pattern is an array of rows [[...], ...]", name);
        goto done;
    }
    long n = cJSON_GetArraySize(root);
    if (pattern_alloc(p, n, name, e) != 0) goto done;
    int i = 0;
    for (const cJSON *row = root->child; row; row = row->next, i++) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n) {
            av_err(e, "%s: row %d is not an array of %ld numbers (the pattern must be square)", name, i, n);
            goto done;
        }
        int j = 0;
        for (const cJSON *x = row->child; x; x = x->next, j++) {
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
                av_err(e, "%s: row %d, column %d is not a number", name, i, j);
                goto done;
            }
            p->w[(size_t)i * n + j] = (float)x->valuedouble;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int heads_pattern_parse(HeadsPattern *p, const char *name, const char *buf, size_t len, AvErr *e) {
    memset(p, 0, sizeof *p);
    size_t nl = strlen(name);
    int rc = nl > 4 && !strcmp(name + nl - 4, ".npy") ? parse_npy(p, name, (const unsigned char *)buf, len, e)
                                                    : parse_json_pattern(p, name, buf, len, e);
    if (rc == 0 && !(p->spec = strdup(name))) rc = av_err(e, "out of memory");
    if (rc != 0) heads_pattern_free(p);
    return rc;
}

int heads_pattern_load(HeadsPattern *p, const char *arg, AvErr *e) {
    memset(p, 0, sizeof *p);
    if (!strncmp(arg, "offset", 6) && (arg[6] == ' ' || arg[6] == '=' || arg[6] == ':')) {
        char *end;
        errno = 0;
        long k = strtol(arg + 7, &end, 10);
        while (*end == ' ') end++;
        if (end == arg + 7 || *end || errno || k < -100000 || k > 100000)
            return av_err(e, "--pattern '%s': a rule is 'offset K' with a whole number K (e.g. offset -1)", arg);
        p->offset = (int)k;
        if (!(p->spec = strdup(arg))) return av_err(e, "out of memory");
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    if (av_read_file(arg, (size_t)PATTERN_MAX_N * PATTERN_MAX_N * 8 + 4096, &buf, &len, e) != 0) return -1;
    int rc = heads_pattern_parse(p, arg, buf, len, e);
    free(buf);
    return rc;
}

/* ---- scores ---- */

static int build_columns(HeadScores *hs) {
    int c = 0;
    for (int k = 0; k < HS_N; k++) {
        hs->col[k] = hs->want[k] ? c : -1;
        if (hs->want[k]) hs->names[c++] = NAMES[k];
    }
    return c;
}

int heads_init(HeadScores *hs, int n_layers, int n_heads, const HeadsOptions *o, AvErr *e) {
    memset(hs, 0, sizeof *hs);
    for (int k = 0; k < HS_N; k++) hs->want[k] = !o->scores && k != HS_PATTERN;
    for (int i = 0; o->scores && i < o->n_scores; i++) hs->want[o->scores[i]] = 1;
    if (o->pattern) hs->want[HS_PATTERN] = 1;
    if (hs->want[HS_PATTERN] && !o->pattern) return av_err(e, "the pattern score needs --pattern FILE|RULE");
    hs->exclude_bos = o->exclude_bos, hs->exclude_current = o->exclude_current, hs->top_k = o->top_k;
    if (o->pattern) {
        if (heads_pattern_load(&hs->pattern, o->pattern, e) != 0) return -1;
        if (!(hs->pattern_spec = strdup(hs->pattern.spec))) return av_err(e, "out of memory");
    }
    if (!(hs->kind = strdup("heads"))) return av_err(e, "out of memory");
    int n = build_columns(hs);
    return stats_init_named(&hs->acc, n_layers, n_heads, n, hs->names, e);
}

void heads_free(HeadScores *hs) {
    heads_pattern_free(&hs->pattern);
    for (int i = 0; i < hs->n_ind; i++) free(hs->ind[i].ids);
    free(hs->ind);
    free(hs->pattern_spec);
    free(hs->kind);
    free(hs->model);
    stats_free(&hs->acc);
    memset(hs, 0, sizeof *hs);
}

/* Whether key j is on score k's pattern for query i, and with what weight. */
static double on_pattern(const HeadScores *hs, int k, int i, int j, const int *ids, const unsigned char *sep) {
    switch (k) {
    case HS_PREVIOUS: return j == i - 1;
    case HS_NEXT: return j == i + 1;
    case HS_SELF: return j == i;
    case HS_FIRST: return j == 0;
    case HS_SEP: return sep && sep[j];
    case HS_DUPLICATE: return j < i && ids[j] == ids[i];
    /* the key after an earlier copy of the query's token: TransformerLens's
     * duplicate pattern shifted one key to the right, kept on or below the diagonal */
    case HS_INDUCTION: return j >= 1 && j <= i && ids[j - 1] == ids[i];
    case HS_PATTERN:
        if (hs->pattern.w) return hs->pattern.w[(size_t)i * hs->pattern.n + j];
        return j == i + hs->pattern.offset;
    default: return 0;
    }
}

double heads_score_matrix(const HeadScores *hs, int k, const float *A, int n, const int *ids, const unsigned char *sep) {
    if (n < 1) return NAN;
    if (k == HS_DISTANCE || k == HS_ENTROPY) { /* the mean over rows, as --stats */
        double acc = 0;
        for (int i = 0; i < n; i++) {
            const float *r = A + (size_t)i * n;
            for (int j = 0; j < n; j++) {
                double p = r[j];
                if (k == HS_DISTANCE) acc += p * abs(i - j);
                else if (p > 0) acc -= p * log(p);
            }
        }
        return acc / n;
    }
    /* detect_head's "mul": sum(A * P) / sum(A), over the whole matrix after the exclusions */
    double total = 0, hit = 0;
    for (int i = 0; i < n; i++) {
        const float *r = A + (size_t)i * n;
        for (int j = 0; j < n; j++) {
            if ((hs->exclude_bos && j == 0) || (hs->exclude_current && i == j)) continue;
            total += r[j];
            double w = on_pattern(hs, k, i, j, ids, sep);
            if (w != 0) hit += w * r[j];
        }
    }
    return total > 0 ? hit / total : NAN;
}

double heads_score_sums(int k, const double *t, int n) {
    if (n < 1) return NAN;
    if (k == HS_DISTANCE) return t[CAP_SC_DISTANCE] / n;
    if (k == HS_ENTROPY) return t[CAP_SC_ENTROPY] / n;
    static const int HIT[HS_N] = {[HS_PREVIOUS] = CAP_SC_HIT_PREV, [HS_NEXT] = CAP_SC_HIT_NEXT,
                                  [HS_SELF] = CAP_SC_HIT_SELF,     [HS_FIRST] = CAP_SC_HIT_FIRST,
                                  [HS_SEP] = CAP_SC_HIT_SEP,       [HS_DUPLICATE] = CAP_SC_HIT_DUP,
                                  [HS_INDUCTION] = CAP_SC_HIT_IND, [HS_PATTERN] = CAP_SC_HIT_PATTERN};
    return t[CAP_SC_TOTAL] > 0 ? t[HIT[k]] / t[CAP_SC_TOTAL] : NAN;
}

void heads_scoring(const HeadScores *hs, CapScoring *sc) {
    memset(sc, 0, sizeof *sc);
    sc->exclude_bos = hs->exclude_bos, sc->exclude_current = hs->exclude_current;
    sc->pattern = hs->pattern.w, sc->pattern_n = hs->pattern.n, sc->pattern_offset = hs->pattern.offset;
}

static int add_scores(HeadScores *hs, const OutDoc *d, int induction, AvErr *e) {
    const int n = d->enc->n;
    if (!hs->model && d->model_name && !(hs->model = strdup(d->model_name))) return av_err(e, "out of memory");
    if (hs->want[HS_PATTERN] && !induction && hs->pattern.w && n > hs->pattern.n)
        return av_err(e, "an input of %d tokens is longer than the %d x %d pattern %s", n, hs->pattern.n,
                      hs->pattern.n, hs->pattern.spec);
    unsigned char *sep = malloc(n > 0 ? (size_t)n : 1);
    if (!sep) return av_err(e, "out of memory");
    for (int j = 0; j < n; j++) sep[j] = xf_special_role(d->enc, j) == XF_SEP;
    int rc = 0;
    for (int li = 0; li < out_n_layers(d) && rc == 0; li++)
        for (int hi = 0; hi < out_n_heads(d) && rc == 0; hi++) {
            int l = out_layer(d, li), h = out_head(d, hi);
            /* the engine's sums over the rows as it made them (capture.h), else the matrix */
            const double *t = d->cap->sc_sum ? cap_sc(d->cap, l, h) : NULL;
            const float *A = t ? NULL : cap_attn(d->cap, l, h);
            for (int k = 0; k < HS_N && rc == 0; k++) {
                if (!hs->want[k] || (k == HS_INDUCTION) != induction) continue;
                double v = t ? heads_score_sums(k, t, n) : heads_score_matrix(hs, k, A, n, d->enc->ids, sep);
                if (!isnan(v)) rc = stats_put(&hs->acc, l, h, hs->col[k], v, e);
            }
        }
    free(sep);
    return rc;
}

int heads_add(HeadScores *hs, const OutDoc *d, AvErr *e) {
    if (add_scores(hs, d, 0, e) != 0) return -1;
    hs->acc.inputs++;
    return 0;
}

int heads_add_induction(HeadScores *hs, const OutDoc *d, AvErr *e) { return add_scores(hs, d, 1, e); }

/* Cross attention's score k of A (nr decoder rows, nc source columns), or NaN where the score has no cross
 * definition: entropy as the mean over rows; first, sep and duplicate as detect_head's "mul" share, where
 * duplicate is the attention on source tokens with the decoder token's own id (copying) and --exclude-bos
 * leaves out the first source token. */
static double cross_score(const HeadScores *hs, int k, const float *A, int nr, int nc, const int *row_ids,
                          const int *col_ids, const unsigned char *sep) {
    if (nr < 1 || nc < 1) return NAN;
    if (k == HS_ENTROPY) {
        double acc = 0;
        for (size_t i = 0; i < (size_t)nr * nc; i++)
            if (A[i] > 0) acc -= (double)A[i] * log((double)A[i]);
        return acc / nr;
    }
    if (k != HS_FIRST && k != HS_SEP && k != HS_DUPLICATE) return NAN;
    double total = 0, hit = 0;
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nc; j++) {
            if (hs->exclude_bos && j == 0) continue;
            const double p = A[(size_t)i * nc + j];
            total += p;
            if (k == HS_FIRST ? j == 0 : k == HS_SEP ? sep[j] : col_ids[j] == row_ids[i]) hit += p;
        }
    return total > 0 ? hit / total : NAN;
}

int heads_add_stack(HeadScores *hs, const OutDoc *d, const CapStack *st, const TokEncoding *rows,
                    const TokEncoding *cols, AvErr *e) {
    if (rows->n != st->n_rows || cols->n != st->n_cols)
        return av_err(e, "heads: %d x %d tokens for a stack of %d x %d", rows->n, cols->n, st->n_rows, st->n_cols);
    if (!hs->model && d->model_name && !(hs->model = strdup(d->model_name))) return av_err(e, "out of memory");
    const int square = st->rows_decoder == st->cols_decoder, n = st->n_cols, H = d->cfg->num_heads;
    if (square && hs->want[HS_PATTERN] && hs->pattern.w && n > hs->pattern.n)
        return av_err(e, "an input of %d tokens is longer than the %d x %d pattern %s", n, hs->pattern.n, hs->pattern.n,
                      hs->pattern.spec);
    unsigned char *sep = malloc(n > 0 ? (size_t)n : 1);
    if (!sep) return av_err(e, "out of memory");
    for (int j = 0; j < n; j++) sep[j] = xf_special_role(cols, j) == XF_SEP;
    int rc = 0;
    for (int li = 0; li < out_stack_n_layers(d, st) && rc == 0; li++)
        for (int h = 0; h < H && rc == 0; h++) {
            const float *A = st->attn + ((size_t)li * H + h) * st->n_rows * st->n_cols;
            for (int k = 0; k < HS_N && rc == 0; k++) {
                if (!hs->want[k] || k == HS_INDUCTION) continue; /* random sequences need a stack of their own */
                double v = square ? heads_score_matrix(hs, k, A, n, cols->ids, sep)
                                  : cross_score(hs, k, A, st->n_rows, n, rows->ids, cols->ids, sep);
                if (!isnan(v)) rc = stats_put(&hs->acc, out_stack_layer(d, st, li), h, hs->col[k], v, e);
            }
        }
    free(sep);
    if (rc == 0) hs->acc.inputs++;
    return rc;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int heads_make_induction(HeadScores *hs, const Tokenizer *t, int vocab, uint64_t seed, int sequences, int length,
                         AvErr *e) {
    TokEncoding specials = {0};
    int *cand = NULL, nc = 0, rc = -1;
    HeadsInduction in = {seed, sequences, length, 0, NULL};
    /* the tokenizer's own frame: [CLS] ... [SEP], <s> ..., or nothing (GPT-2) */
    if (tok_encode(t, "", 0, NULL, 0, 0, &specials, e) != 0) return -1;
    int pre = 0;
    while (pre < specials.n && specials.role[pre] != TOK_ROLE_SEP) pre++;
    if (vocab > tok_vocab_size(t)) vocab = tok_vocab_size(t);
    if (!(cand = malloc((size_t)(vocab > 0 ? vocab : 1) * sizeof *cand))) goto oom;
    for (int id = 0; id < vocab; id++)
        if (!tok_is_special(t, id) && tok_id_to_token(t, id)) cand[nc++] = id;
    if (nc < 2) {
        av_err(e, "the tokenizer has fewer than 2 ordinary tokens to draw random sequences from");
        goto done;
    }
    in.n_ids = specials.n + 2 * length;
    if (!(in.ids = malloc((size_t)sequences * in.n_ids * sizeof *in.ids))) goto oom;
    uint64_t st = seed;
    for (int s = 0; s < sequences; s++) {
        int *x = in.ids + (size_t)s * in.n_ids, at = 0;
        for (int i = 0; i < pre; i++) x[at++] = specials.ids[i];
        for (int i = 0; i < length; i++) x[at + i] = x[at + length + i] = cand[splitmix64(&st) % (uint64_t)nc];
        at += 2 * length;
        for (int i = pre; i < specials.n; i++) x[at++] = specials.ids[i];
    }
    HeadsInduction *grown = realloc(hs->ind, (size_t)(hs->n_ind + 1) * sizeof *grown);
    if (!grown) goto oom;
    hs->ind = grown;
    hs->ind[hs->n_ind++] = in;
    in.ids = NULL;
    rc = 0;
    goto done;
oom:
    av_err(e, "out of memory");
done:
    free(in.ids);
    free(cand);
    tok_encoding_free(&specials);
    return rc;
}

/* ---- output ---- */

typedef struct { int l, h; double v; } Ranked;

static int cmp_ranked(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (isnan(x->v) != isnan(y->v)) return isnan(x->v) ? 1 : -1;
    if (!isnan(x->v) && x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->l != y->l ? x->l - y->l : x->h - y->h;
}

/* The present heads ordered by score column c, highest first; *n of them. */
static Ranked *rank(const HeadScores *hs, int c, int *n) {
    const HeadStats *s = &hs->acc;
    Ranked *r = malloc((size_t)s->n_layers * s->n_heads * sizeof *r);
    *n = 0;
    if (!r) return NULL;
    for (int l = 0; l < s->n_layers; l++)
        for (int h = 0; h < s->n_heads; h++)
            if (s->present[(size_t)l * s->n_heads + h]) r[(*n)++] = (Ranked){l, h, stats_mean(s, l, h, c)};
    qsort(r, (size_t)*n, sizeof *r, cmp_ranked);
    return r;
}

static int is_heads(const HeadScores *hs) { return !strcmp(hs->kind, "heads"); }

static long induction_sequences(const HeadScores *hs) {
    long n = 0;
    for (int i = 0; i < hs->n_ind; i++) n += hs->ind[i].sequences;
    return n;
}

/* The top K heads per score, as "layer.head score" pairs; a head without a value for the score
 * (count 0: induction on an encoder-decoder, previous on cross attention) is left out, and a score
 * no head has a value for says so. */
static int write_top(FILE *f, const HeadScores *hs, AvErr *e) {
    const HeadStats *s = &hs->acc;
    fprintf(f, "# top %d heads per score (layer.head score)\n", hs->top_k);
    for (int c = 0; c < s->n_scores; c++) {
        int n;
        Ranked *r = rank(hs, c, &n);
        if (!r) return av_err(e, "out of memory");
        fprintf(f, "%-10s", s->names[c]);
        int shown = 0;
        for (int i = 0; i < n && shown < hs->top_k; i++)
            if (isnan(r[i].v)) continue;
            else if (stats_per_layer(s)) fprintf(f, " %d.all %.4f", r[i].l, r[i].v), shown++;
            else fprintf(f, " %d.%d %.4f", r[i].l, r[i].h, r[i].v), shown++;
        if (!shown) fputs(" - (no input gives it a value here)", f);
        fputc('\n', f);
        free(r);
    }
    return 0;
}

/* The summary first (what a reader came for), then every head: the top K per score (heads), a
 * blank line and the table, a value's cell "-" where no input gives it one. */
int heads_write_table(FILE *f, const HeadScores *hs, AvErr *e) {
    const HeadStats *s = &hs->acc;
    fprintf(f, "# %s%s%s, mean over %ld input%s", is_heads(hs) ? "head scores" : "attention statistics",
            s->measure ? " of " : "", s->measure ? stats_measure_words(s->measure) : "", s->inputs, s->inputs == 1 ? "" : "s");
    if (is_heads(hs) && hs->n_ind) fprintf(f, " (induction: %ld random repeated sequences)", induction_sequences(hs));
    if (is_heads(hs)) fputs("; shares are attention on the pattern / all attention", f);
    fputc('\n', f);
    if (is_heads(hs) && hs->top_k > 0) {
        if (write_top(f, hs, e) != 0) return -1;
        fputs("\n# every head\n", f);
    }
    fprintf(f, "%5s %4s", "layer", "head");
    for (int k = 0; k < s->n_scores; k++) fprintf(f, " %9.9s", s->names[k]);
    fputc('\n', f);
    for (int l = 0; l < s->n_layers; l++)
        for (int h = 0; h < s->n_heads; h++) {
            if (!s->present[(size_t)l * s->n_heads + h]) continue;
            if (stats_per_layer(s)) fprintf(f, "%5d %4s", l, "all");
            else fprintf(f, "%5d %4d", l, h);
            for (int k = 0; k < s->n_scores; k++) {
                const double v = stats_mean(s, l, h, k);
                if (isnan(v)) fprintf(f, " %9s", "-");
                else fprintf(f, " %9.4f", v);
            }
            fputc('\n', f);
        }
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

static int write_members(FILE *f, const HeadScores *hs, AvErr *e);

int heads_write_json(FILE *f, const HeadScores *hs, AvErr *e) {
    fputc('{', f);
    if (write_members(f, hs, e) != 0) return -1;
    fputs("}\n", f);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

int heads_write_json_stacks(FILE *f, const HeadScores *const *hs, const char *const *names, int n, AvErr *e) {
    fputc('{', f);
    if (write_members(f, hs[0], e) != 0) return -1;
    fputs(",\"stack\":", f);
    json_write_string(f, names[0]);
    fputs(",\"stacks\":{", f);
    for (int k = 1; k < n; k++) {
        if (k > 1) fputc(',', f);
        json_write_string(f, names[k]);
        fputs(":{", f);
        if (write_members(f, hs[k], e) != 0) return -1;
        fputc('}', f);
    }
    fputs("}}\n", f);
    return ferror(f) ? av_err_errno(e, "write error") : 0;
}

/* The members of heads_write_json's object (no braces). */
static int write_members(FILE *f, const HeadScores *hs, AvErr *e) {
    const HeadStats *s = &hs->acc;
    stats_write_members(f, s, hs->kind, hs->model);
    if (is_heads(hs)) {
        fprintf(f, ",\"options\":{\"exclude_bos\":%s,\"exclude_current\":%s,\"top\":%d,\"pattern\":",
                hs->exclude_bos ? "true" : "false", hs->exclude_current ? "true" : "false", hs->top_k);
        if (hs->pattern_spec) json_write_string(f, hs->pattern_spec);
        else fputs("null", f);
        fputs("},\"induction\":[", f);
        for (int i = 0; i < hs->n_ind; i++) {
            const HeadsInduction *in = &hs->ind[i];
            fprintf(f, "%s{\"seed\":\"%" PRIu64 "\",\"sequences\":%d,\"length\":%d,\"ids\":[", i ? "," : "", in->seed,
                    in->sequences, in->length);
            for (int q = 0; q < in->sequences; q++) {
                fputs(q ? ",[" : "[", f);
                for (int j = 0; j < in->n_ids; j++) fprintf(f, "%s%d", j ? "," : "", in->ids[(size_t)q * in->n_ids + j]);
                fputc(']', f);
            }
            fputs("]}", f);
        }
        fputs("],\"top\":{", f);
        for (int c = 0; c < s->n_scores; c++) {
            int n;
            Ranked *r = rank(hs, c, &n);
            if (!r) return av_err(e, "out of memory");
            fprintf(f, "%s\"%s\":[", c ? "," : "", s->names[c]);
            /* heads without a value for the score are not ranked (NaN sorts last) */
            for (int i = 0; i < n && i < hs->top_k && !isnan(r[i].v); i++)
                fprintf(f, "%s{\"layer\":%d,\"head\":%d,\"score\":%.17g}", i ? "," : "", r[i].l, r[i].h, r[i].v);
            fputc(']', f);
            free(r);
        }
        fputc('}', f);
    }
    return 0;
}

/* ---- reading and merging --json files ---- */

static int get_int(const cJSON *o, const char *key, double lo, double hi, long *out, const char *name, AvErr *e) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x) return av_err(e, "%s: missing \"%s\"", name, key);
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < lo || x->valuedouble > hi)
        return av_err(e, "%s: \"%s\" must be a whole number from %.0f to %.0f", name, key, lo, hi);
    *out = (long)x->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, int *out, const char *name, AvErr *e) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsBool(x)) return av_err(e, "%s: \"%s\" must be true or false", name, key);
    *out = cJSON_IsTrue(x);
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_induction(HeadScores *hs, const cJSON *arr, const char *name, AvErr *e) {
    if (!cJSON_IsArray(arr)) return av_err(e, "%s: missing \"induction\" (an array)", name);
    int n = cJSON_GetArraySize(arr);
    if (n > 4096) return av_err(e, "%s: too many \"induction\" runs", name);
    if (n && !(hs->ind = calloc((size_t)n, sizeof *hs->ind))) return av_err(e, "out of memory");
    for (const cJSON *b = arr->child; b; b = b->next) {
        HeadsInduction *in = &hs->ind[hs->n_ind++];
        long seqs = 0, len = 0;
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(b, "seed");
        if (!cJSON_IsObject(b) || !cJSON_IsString(seed) || parse_u64(seed->valuestring, &in->seed) != 0)
            return av_err(e, "%s: an \"induction\" run needs \"seed\" (a whole number as a string)", name);
        if (get_int(b, "sequences", 1, 1e6, &seqs, name, e) || get_int(b, "length", 1, 1e6, &len, name, e)) return -1;
        in->sequences = (int)seqs, in->length = (int)len;
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(b, "ids");
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != seqs)
            return av_err(e, "%s: an \"induction\" run's \"ids\" must hold %ld sequences", name, seqs);
        int q = 0;
        for (const cJSON *s = ids->child; s; s = s->next, q++) {
            int m = cJSON_GetArraySize(s);
            if (!cJSON_IsArray(s) || m < 2 * len || m > 2 * len + 16 || (q && m != in->n_ids))
                return av_err(e, "%s: \"induction\" sequence %d is not %ld repeated ids in a frame", name, q, len);
            if (!q) {
                in->n_ids = m;
                if (!(in->ids = malloc((size_t)seqs * m * sizeof *in->ids))) return av_err(e, "out of memory");
            }
            int j = 0;
            for (const cJSON *x = s->child; x; x = x->next, j++) {
                if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
                    x->valuedouble > 1e9)
                    return av_err(e, "%s: \"induction\" sequence %d holds a non-id", name, q);
                in->ids[(size_t)q * m + j] = (int)x->valuedouble;
            }
        }
    }
    return 0;
}

static int parse_hex64(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsString(x) || strlen(x->valuestring) != 16) return -1;
    uint64_t v = 0;
    for (const char *p = x->valuestring; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* "setup", "covered" and a shard's "shard": what the file covered (stats.h's StatsCover). */
static int parse_cover(HeadStats *s, const cJSON *root, const char *name, AvErr *e) {
    const cJSON *setup = cJSON_GetObjectItemCaseSensitive(root, "setup"), *cov = cJSON_GetObjectItemCaseSensitive(root, "covered"),
                *sh = cJSON_GetObjectItemCaseSensitive(root, "shard");
    if (!setup && !cov)
        return av_err(e, "%s: no \"covered\": written by an attnviz that did not record which lines it covered "
                         "(run it again to merge it)", name);
    StatsCover *c = &s->cover;
    long lines;
    if (parse_hex64(setup, &s->setup) || !cJSON_IsObject(cov) ||
        parse_hex64(cJSON_GetObjectItemCaseSensitive(cov, "digest"), &c->digest))
        return av_err(e, "%s: \"setup\" and \"covered\".\"digest\" must be 16 hex digits", name);
    if (get_int(cov, "lines", 0, 1e15, &lines, name, e)) return -1;
    c->lines = lines;
    if (sh) {
        long index, count, corpus_lines;
        if (!cJSON_IsObject(sh) || get_int(sh, "count", 2, 1e9, &count, name, e) ||
            get_int(sh, "index", 0, (double)count - 1, &index, name, e) ||
            get_int(sh, "corpus_lines", (double)lines, 1e15, &corpus_lines, name, e))
            return -1;
        if (parse_hex64(cJSON_GetObjectItemCaseSensitive(sh, "corpus"), &c->corpus))
            return av_err(e, "%s: \"shard\".\"corpus\" must be 16 hex digits", name);
        c->index = (int)index, c->count = (int)count, c->corpus_lines = corpus_lines;
    }
    s->have_cover = 1;
    return 0;
}

int heads_parse_json(HeadScores *hs, const char *name, const char *buf, AvErr *e) {
    memset(hs, 0, sizeof *hs);
    cJSON *root;
    const int pr = av_json_parse(&root, buf, strlen(buf), name, e);
    int rc = -1;
    if (pr) return pr < 0 ? -1 : av_err(e, "%s: not valid JSON (expected the --json output of --stats or heads)", name);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind"),
                *model = cJSON_GetObjectItemCaseSensitive(root, "model"),
                *scores = cJSON_GetObjectItemCaseSensitive(root, "scores"),
                *heads = cJSON_GetObjectItemCaseSensitive(root, "heads");
    long inputs = 0, L = 0, H = 0, bits = 0;
    if (!cJSON_IsObject(root) || !cJSON_IsString(kind) ||
        (strcmp(kind->valuestring, "stats") && strcmp(kind->valuestring, "heads"))) {
        av_err(e, "%s: no \"kind\": \"stats\" or \"heads\" (write it with --stats --json or attnviz heads --json)", name);
        goto done;
    }
    /* an encoder-decoder's file holds three stacks; merging the top level alone would drop two */
    if (cJSON_GetObjectItemCaseSensitive(root, "stacks")) {
        av_err(e, "%s: an encoder-decoder model's statistics (\"stacks\"): merging them is not supported", name);
        goto done;
    }
    const int stats_kind = !strcmp(kind->valuestring, "stats");
    if (!cJSON_IsString(model)) {
        av_err(e, "%s: missing \"model\"", name);
        goto done;
    }
    if (get_int(root, "inputs", 0, 1e15, &inputs, name, e) || get_int(root, "layers", 1, 100000, &L, name, e) ||
        get_int(root, "heads_per_layer", 1, 100000, &H, name, e) ||
        get_int(root, "fixed_point_bits", STATS_FRAC_BITS, STATS_FRAC_BITS, &bits, name, e))
        goto done;
    if (L * H > 1000000) {
        av_err(e, "%s: %ld layers x %ld heads is too many", name, L, H);
        goto done;
    }
    const char *const *known = stats_kind ? stats_names() : NAMES;
    const int n_known = stats_kind ? ST_N : HS_N;
    int ns = cJSON_GetArraySize(scores);
    if (!cJSON_IsArray(scores) || ns < 1 || ns > n_known) {
        av_err(e, "%s: \"scores\" must list 1 to %d score names", name, n_known);
        goto done;
    }
    int i = 0;
    for (const cJSON *x = scores->child; x; x = x->next, i++) {
        int k = -1;
        for (int j = 0; cJSON_IsString(x) && j < n_known; j++)
            if (!strcmp(x->valuestring, known[j])) k = j;
        for (int j = 0; j < i && k >= 0; j++)
            if (hs->names[j] == known[k]) k = -1;
        if (k < 0) {
            av_err(e, "%s: \"scores\" entry %d is not a %s score name (or repeats one)", name, i, kind->valuestring);
            goto done;
        }
        hs->names[i] = known[k];
        if (!stats_kind) hs->want[k] = 1;
    }
    if (!(hs->kind = strdup(kind->valuestring)) || !(hs->model = strdup(model->valuestring))) {
        av_err(e, "out of memory");
        goto done;
    }
    const char *given[HS_N];
    memcpy(given, hs->names, sizeof given);
    if (!stats_kind && (build_columns(hs) != ns || memcmp(given, hs->names, (size_t)ns * sizeof *given))) {
        av_err(e, "%s: \"scores\" are not in attnviz's order", name);
        goto done;
    }
    if (stats_init_named(&hs->acc, (int)L, (int)H, ns, hs->names, e) != 0) goto done;
    hs->acc.inputs = inputs;
    const cJSON *measure = cJSON_GetObjectItemCaseSensitive(root, "measure");
    const char *measure_name = measure && cJSON_IsString(measure) ? stats_measure_known(measure->valuestring) : NULL;
    if (measure && (!measure_name || (measure_name[0] != 'n' && H != 1))) {
        av_err(e, "%s: \"measure\" is \"norm\", \"alti\" or \"rollout\" (with one head per layer), or absent (attention)",
               name);
        goto done;
    }
    hs->acc.measure = measure_name;
    if (parse_cover(&hs->acc, root, name, e) != 0) goto done;
    if (!cJSON_IsArray(heads)) {
        av_err(e, "%s: missing \"heads\" (an array)", name);
        goto done;
    }
    i = 0;
    for (const cJSON *o = heads->child; o; o = o->next, i++) {
        long l, h;
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(o, "sum"), *cnt = cJSON_GetObjectItemCaseSensitive(o, "count");
        if (!cJSON_IsObject(o)) {
            av_err(e, "%s: \"heads\" entry %d is not an object", name, i);
            goto done;
        }
        if (get_int(o, "layer", 0, (double)L - 1, &l, name, e) || get_int(o, "head", 0, (double)H - 1, &h, name, e))
            goto done;
        size_t p = (size_t)l * H + (size_t)h;
        if (hs->acc.present[p]) {
            av_err(e, "%s: layer %ld head %ld appears twice", name, l, h);
            goto done;
        }
        hs->acc.present[p] = 1;
        if (!cJSON_IsArray(sum) || !cJSON_IsArray(cnt) || cJSON_GetArraySize(sum) != ns || cJSON_GetArraySize(cnt) != ns) {
            av_err(e, "%s: layer %ld head %ld lacks \"sum\" and \"count\" of %d entries (written by an older attnviz?)",
                   name, l, h, ns);
            goto done;
        }
        const cJSON *s = sum->child, *c = cnt->child;
        for (int k = 0; k < ns; k++, s = s->next, c = c->next) {
            char *end;
            errno = 0;
            long long v = cJSON_IsString(s) ? strtoll(s->valuestring, &end, 10) : 0;
            if (!cJSON_IsString(s) || !s->valuestring[0] || *end || errno || !cJSON_IsNumber(c) ||
                c->valuedouble != floor(c->valuedouble) || c->valuedouble < 0 || c->valuedouble > 1e15) {
                av_err(e, "%s: layer %ld head %ld: \"sum\" entries are whole numbers as strings, \"count\" whole numbers",
                       name, l, h);
                goto done;
            }
            hs->acc.sum[p * ns + k] = v;
            hs->acc.count[p * ns + k] = (long)c->valuedouble;
        }
    }
    if (!stats_kind) {
        const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "options"), *pat;
        long top;
        if (!cJSON_IsObject(opt)) {
            av_err(e, "%s: missing \"options\"", name);
            goto done;
        }
        if (get_bool(opt, "exclude_bos", &hs->exclude_bos, name, e) ||
            get_bool(opt, "exclude_current", &hs->exclude_current, name, e) ||
            get_int(opt, "top", 0, 1e6, &top, name, e))
            goto done;
        hs->top_k = (int)top;
        pat = cJSON_GetObjectItemCaseSensitive(opt, "pattern");
        if (cJSON_IsString(pat)) {
            if (!(hs->pattern_spec = strdup(pat->valuestring))) {
                av_err(e, "out of memory");
                goto done;
            }
        } else if (!cJSON_IsNull(pat)) {
            av_err(e, "%s: \"options\".\"pattern\" must be a string or null", name);
            goto done;
        }
        if (parse_induction(hs, cJSON_GetObjectItemCaseSensitive(root, "induction"), name, e) != 0) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc != 0) heads_free(hs);
    return rc;
}

static int same_run(const HeadsInduction *a, const HeadsInduction *b) {
    return a->seed == b->seed && a->sequences == b->sequences && a->length == b->length && a->n_ids == b->n_ids &&
           !memcmp(a->ids, b->ids, (size_t)a->sequences * a->n_ids * sizeof *a->ids);
}

static int find_run(const HeadScores *hs, const HeadsInduction *r) {
    for (int i = 0; i < hs->n_ind; i++)
        if (same_run(&hs->ind[i], r)) return i;
    return -1;
}

static int any_present(const unsigned char *present, size_t m) {
    for (size_t i = 0; i < m; i++)
        if (present[i]) return 1;
    return 0;
}

/* The files' covers, checked together once all are read: no lines twice, every shard of a
 * --shard corpus present, and shards of one corpus only. What is left is what they cover
 * together: a run over all of it would record the same. */
static int covers_merge(const StatsCover *c, const char *const *paths, int n, StatsCover *out, AvErr *e) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            const int same_shard = c[i].count && c[j].count && c[i].corpus == c[j].corpus &&
                                   c[i].corpus_lines == c[j].corpus_lines && c[i].index == c[j].index;
            /* two runs over the same lines (shards are told apart by their index; nothing is counted twice in none) */
            const int same_lines = !c[i].count && !c[j].count && c[i].lines > 0 && c[i].lines == c[j].lines &&
                                   c[i].digest == c[j].digest;
            if (same_shard || same_lines)
                return same_shard ? av_err(e, "%s: shard %d/%d is already in %s: each shard once", paths[i], c[i].index,
                                           c[i].count, paths[j])
                                  : av_err(e, "%s covers the same %ld lines as %s: each once", paths[i], c[i].lines, paths[j]);
            /* a whole corpus and one of its shards */
            const StatsCover *w = !c[i].count ? &c[i] : &c[j], *p = !c[i].count ? &c[j] : &c[i];
            if (!w->count && p->count && w->digest == p->corpus && w->lines == p->corpus_lines)
                return av_err(e, "%s covers the whole corpus of %s's shard %d/%d: each line once", paths[w == &c[i] ? i : j],
                              paths[p == &c[i] ? i : j], p->index, p->count);
        }
    *out = (StatsCover){0};
    int incomplete = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].count) {
            /* the shards of c[i]'s corpus (the first of them gathers them) */
            int first = 1, have = 0;
            uint64_t sum = 0;
            long lines = 0;
            for (int j = 0; j < n && first; j++) first = j >= i || !(c[j].count == c[i].count && c[j].corpus == c[i].corpus &&
                                                                    c[j].corpus_lines == c[i].corpus_lines);
            if (!first) continue;
            for (int j = i; j < n; j++)
                if (c[j].count == c[i].count && c[j].corpus == c[i].corpus && c[j].corpus_lines == c[i].corpus_lines)
                    have++, sum += c[j].digest, lines += c[j].lines;
            if (have < c[i].count) {
                if (incomplete >= 0)
                    return av_err(e, "%s's shard %d/%d and %s's shard %d/%d are shards of different corpora (other --batch "
                                     "files, or a file changed between runs): merge the shards of one corpus",
                                  paths[incomplete], c[incomplete].index, c[incomplete].count, paths[i], c[i].index,
                                  c[i].count);
                incomplete = i;
                continue;
            }
            if (sum != c[i].corpus || lines != c[i].corpus_lines)
                return av_err(e, "the %d shards of %s's corpus cover %ld lines, not its %ld (or other lines): a file changed "
                                 "between runs?", c[i].count, paths[i], lines, c[i].corpus_lines);
            out->digest += sum, out->lines += lines;
        } else {
            out->digest += c[i].digest, out->lines += c[i].lines;
        }
    }
    if (incomplete >= 0) {
        const StatsCover *r = &c[incomplete];
        char list[160] = "";
        size_t k = 0;
        int missing = 0;
        for (int idx = 0; idx < r->count; idx++) {
            int found = 0;
            for (int j = 0; j < n && !found; j++)
                found = c[j].count == r->count && c[j].corpus == r->corpus && c[j].corpus_lines == r->corpus_lines &&
                        c[j].index == idx;
            if (found) continue;
            if (missing++ < 8 && k < sizeof list) {
                int w = snprintf(list + k, sizeof list - k, "%s%d", k ? ", " : "", idx);
                if (w > 0) k += (size_t)w;
            }
        }
        return av_err(e, "missing shard%s %.1000s%s of %d of %s's corpus (%d missing): a merge adds every shard once",
                      missing > 1 ? "s" : "", list, missing > 8 ? ", ..." : "", r->count, paths[incomplete], missing);
    }
    return 0;
}

/* Whether `from` (another shard) may be added to `into`, and how: its induction runs are
 * either all new (added) or the very runs an earlier shard made with the same seed (counted
 * once: every shard draws the same sequences). */
static int check_compatible(const HeadScores *into, const char *first, int first_runs, const HeadScores *from,
                            const char *name, int *dup_induction, AvErr *e) {
    const HeadStats *a = &into->acc, *b = &from->acc;
    if (strcmp(into->kind, from->kind))
        return av_err(e, "%s: a \"%s\" file, but %s is \"%s\"", name, from->kind, first, into->kind);
    if (strcmp(into->model, from->model))
        return av_err(e, "%s: model '%s', but %s has '%s'", name, from->model, first, into->model);
    if (into->acc.setup != from->acc.setup)
        return av_err(e, "%s: another model or other options than %s (their setups differ: %016" PRIx64 " vs %016" PRIx64
                         "; same model files, --measure, --max-tokens, --no-special, --words and casing)",
                      name, first, from->acc.setup, into->acc.setup);
    if (a->n_layers != b->n_layers || a->n_heads != b->n_heads)
        return av_err(e, "%s: %d layers x %d heads, but %s has %d x %d", name, b->n_layers, b->n_heads, first,
                      a->n_layers, a->n_heads);
    if (a->n_scores != b->n_scores) return av_err(e, "%s: other scores than %s", name, first);
    for (int k = 0; k < a->n_scores; k++)
        if (strcmp(a->names[k], b->names[k])) return av_err(e, "%s: other scores than %s", name, first);
    /* a shard without inputs (--shard I/N past a short corpus's end) lists no heads and
     * adds nothing: it agrees with any selection */
    const size_t m = (size_t)a->n_layers * a->n_heads;
    if (any_present(a->present, m) && any_present(b->present, m) && memcmp(a->present, b->present, m))
        return av_err(e, "%s: other layers or heads than %s (--layers/--heads)", name, first);
    if (into->exclude_bos != from->exclude_bos || into->exclude_current != from->exclude_current ||
        into->top_k != from->top_k || !into->pattern_spec != !from->pattern_spec ||
        (into->pattern_spec && strcmp(into->pattern_spec, from->pattern_spec)))
        return av_err(e, "%s: other options (--exclude-bos/--exclude-current/--top/--pattern) than %s", name, first);
    int seen = 0, firsts = 0;
    for (int i = 0; i < from->n_ind; i++) {
        int at = find_run(into, &from->ind[i]);
        seen += at >= 0, firsts += at >= 0 && at < first_runs;
    }
    if (seen && (seen != from->n_ind || firsts != first_runs || from->n_ind != first_runs))
        return av_err(e, "%s: some of its induction sequences are in earlier files and some are not: "
                         "give every shard the same --seed, or each its own", name);
    *dup_induction = from->n_ind > 0 && seen == from->n_ind;
    return 0;
}

int heads_merge_files(const char *const *paths, int n, const char *json_path, AvErr *e) {
    HeadScores total, one;
    StatsCover *covers = malloc((size_t)(n > 0 ? n : 1) * sizeof *covers);
    int rc = -1, have = 0, first_runs = 0;
    if (!covers) return av_err(e, "out of memory");
    /* the first file's induction column: later shards with the same runs must agree */
    int64_t *ind_sum = NULL;
    long *ind_cnt = NULL;
    for (int f = 0; f < n; f++) {
        char *buf = NULL;
        size_t len;
        if (av_read_file(paths[f], MERGE_MAX_BYTES, &buf, &len, e) != 0) goto done;
        int prc = heads_parse_json(&one, paths[f], buf, e);
        free(buf);
        if (prc != 0) goto done;
        covers[f] = one.acc.cover;
        if (!have) {
            total = one, have = 1;
            first_runs = total.n_ind;
            int c = total.col[HS_INDUCTION];
            if (is_heads(&total) && c >= 0) {
                size_t m = (size_t)total.acc.n_layers * total.acc.n_heads;
                ind_sum = malloc(m * sizeof *ind_sum), ind_cnt = malloc(m * sizeof *ind_cnt);
                if (!ind_sum || !ind_cnt) {
                    av_err(e, "out of memory");
                    goto done;
                }
                for (size_t i = 0; i < m; i++)
                    ind_sum[i] = total.acc.sum[i * total.acc.n_scores + c], ind_cnt[i] = total.acc.count[i * total.acc.n_scores + c];
            }
            continue;
        }
        int dup = 0;
        if (!total.acc.measure != !one.acc.measure || (total.acc.measure && strcmp(total.acc.measure, one.acc.measure))) {
            av_err(e, "%s scores %s, %s %s: they do not add up", paths[0], stats_measure_words(total.acc.measure),
                   paths[f], stats_measure_words(one.acc.measure));
            heads_free(&one);
            goto done;
        }
        if (check_compatible(&total, paths[0], first_runs, &one, paths[f], &dup, e) != 0) {
            heads_free(&one);
            goto done;
        }
        int c = is_heads(&one) ? one.col[HS_INDUCTION] : -1;
        if (c >= 0 && dup) {
            size_t m = (size_t)one.acc.n_layers * one.acc.n_heads;
            for (size_t i = 0; i < m; i++) {
                size_t at = i * one.acc.n_scores + c;
                /* same runs, same model: the same sums; otherwise the shards disagree */
                if (!ind_sum || one.acc.sum[at] != ind_sum[i] || one.acc.count[at] != ind_cnt[i]) {
                    heads_free(&one);
                    av_err(e, "%s: its induction sums differ from %s's for the same random sequences "
                              "(a different model or attnviz?)", paths[f], paths[0]);
                    goto done;
                }
                one.acc.sum[at] = 0, one.acc.count[at] = 0;
            }
        }
        if (stats_merge(&total.acc, &one.acc, e) != 0) {
            av_err_prefix(e, "%s", paths[f]);
            heads_free(&one);
            goto done;
        }
        if (!dup && one.n_ind) {
            HeadsInduction *g = realloc(total.ind, (size_t)(total.n_ind + one.n_ind) * sizeof *g);
            if (!g) {
                heads_free(&one);
                av_err(e, "out of memory");
                goto done;
            }
            total.ind = g;
            for (int i = 0; i < one.n_ind; i++) total.ind[total.n_ind++] = one.ind[i];
            one.n_ind = 0;
        }
        heads_free(&one);
    }
    if (!have) {
        av_err(e, "stats --merge needs at least one file");
        goto done;
    }
    if (covers_merge(covers, paths, n, &total.acc.cover, e) != 0) goto done;
    if (json_path) {
        AvOut out;
        if (av_out_open(&out, json_path, e) != 0) goto done;
        if (heads_write_json(out.fp, &total, e) != 0) {
            av_err_prefix(e, "%s", json_path);
            av_out_abort(&out);
            goto done;
        }
        if (av_out_commit(&out, e) != 0) goto done;
    } else if (heads_write_table(stdout, &total, e) != 0) {
        goto done;
    }
    rc = 0;
done:
    free(covers);
    free(ind_sum);
    free(ind_cnt);
    if (have) heads_free(&total);
    return rc;
}
