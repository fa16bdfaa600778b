/* stats.h — per-head attention statistics, averaged over a batch: entropy,
 * mean attention distance, and the share of attention on [CLS], [SEP], the
 * token itself, the previous and the next token. The accumulator is shared by
 * `attnviz heads` (heads.h), whose scores are other names over the same sums. */
#ifndef ATTNVIZ_STATS_H
#define ATTNVIZ_STATS_H

#include <stdint.h>
#include <stdio.h>
#include "err.h"
#include "output.h"

enum { ST_ENTROPY, ST_DISTANCE, ST_CLS, ST_SEP, ST_SELF, ST_PREV, ST_NEXT, ST_N };

/* Each input's value is rounded to a multiple of 2^-STATS_FRAC_BITS and summed
 * as an integer: integer sums do not depend on the order of addition, so a
 * corpus summed whole and the sum of its shards' sums (attnviz stats --merge)
 * are the same number, bit for bit. The rounding (2.3e-10) is far below the
 * float32 attention's own precision. */
#define STATS_FRAC_BITS 32
#define STATS_MAX_SCORES 16

/* What a --stats / heads file covered, so that attnviz stats --merge can tell shards of one
 * corpus from duplicates, gaps and other corpora. A line's digest is a 64-bit hash of its
 * text, and a set of lines' digest the sum of theirs (mod 2^64): the digest of any split of a
 * corpus adds up to the whole's, whatever the order, so a complete merge records exactly what
 * a run over the whole corpus records. A --shard I/N run also records its corpus (every line
 * of the --batch file: each shard reads them all); a merge of all N shards is then the corpus. */
typedef struct {
    long lines;          /* lines covered */
    uint64_t digest;     /* the sum of their digests */
    int index, count;    /* --shard I/N; count 0: not one shard of a corpus */
    long corpus_lines;   /* a shard's corpus: its lines and their digest */
    uint64_t corpus;
} StatsCover;

/* A line's digest (its text without the line end). */
uint64_t stats_line_digest(const char *s, size_t n);

typedef struct HeadStats {
    int n_layers, n_heads;  /* of the model; selections apply when printing */
    int n_scores;
    const char *names[STATS_MAX_SCORES]; /* (n_scores) static strings: the struct may be copied */
    int64_t *sum;           /* (n_layers, n_heads, n_scores) sums of per-input values, fixed point */
    long *count;            /* (n_layers, n_heads, n_scores) inputs contributing */
    unsigned char *present; /* (n_layers, n_heads) heads that were added (or merged) */
    long inputs;
    const char *measure;    /* what was scored: "norm" value-weighted attention's shares (--measure norm), "alti" or
                               "rollout" (mixing.h: one matrix per layer, n_heads 1); NULL: attention */
    uint64_t setup;         /* digest of the model (its config and tensors' names, types, shapes) and the options
                             * that change the scores */
    StatsCover cover;       /* what it covered */
    int have_cover;         /* setup and cover recorded */
} HeadStats;

/* The measure's words for tables and messages ("attention" for NULL). */
const char *stats_measure_words(const char *measure);
/* A static copy of a measure's name read from a file ("norm", "alti", "rollout"), or NULL when unknown. */
const char *stats_measure_known(const char *name);
/* Whether the scores are one per layer (ALTI, rollout): tables say "all" for the head. */
static inline int stats_per_layer(const HeadStats *s) {
    return s->measure && (s->measure[0] == 'a' || s->measure[0] == 'r');
}

/* The --stats statistics (ST_N of them). */
int stats_init(HeadStats *s, int n_layers, int n_heads, AvErr *e);
/* Any list of named scores (at most STATS_MAX_SCORES; the names must be static). */
int stats_init_named(HeadStats *s, int n_layers, int n_heads, int n_scores, const char *const *names, AvErr *e);
void stats_free(HeadStats *s);
const char *const *stats_names(void);
/* Adds one input's value of score k for (layer, head); -1 when the sum would overflow. */
int stats_put(HeadStats *s, int layer, int head, int k, double v, AvErr *e);
/* Adds another accumulator's sums and counts (same shape and names), and its inputs. */
int stats_merge(HeadStats *into, const HeadStats *from, AvErr *e);
/* Records what an accumulator covered. */
void stats_set_cover(HeadStats *s, uint64_t setup, const StatsCover *c);
/* Adds one input (its selected layers and heads). */
int stats_add(HeadStats *s, const OutDoc *d, AvErr *e);
/* Adds one input's encoder-decoder stack st (the document's layers in order, every head); cols: the tokens
 * of its columns (their [CLS]/[SEP] roles). Cross attention (rows the decoder's tokens, columns the source's)
 * has no diagonal: its distance, self, previous and next have no rows (null); entropy and the shares of the
 * source's specials are scored. */
int stats_add_stack(HeadStats *s, const OutDoc *d, const CapStack *st, const TokEncoding *cols, AvErr *e);
/* Mean over inputs of score k for (layer, head); NaN when no input had an applicable row. */
double stats_mean(const HeadStats *s, int layer, int head, int k);
int stats_write_table(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);
/* {"kind":"stats", ...}: means, and the sums and counts that merging needs. */
int stats_write_json(FILE *f, const HeadStats *s, const OutDoc *d, AvErr *e);
/* An encoder-decoder model's: s[0]'s members at the top level (as stats_write_json's) with "stack": names[0],
 * and "stacks": {names[k]: the members of s[k]} for the others. */
int stats_write_json_stacks(FILE *f, const HeadStats *const *s, const char *const *names, int n, const OutDoc *d,
                            AvErr *e);
/* The shared members (no braces): "kind", "model", "inputs", shape, "scores", and
 * "heads": one object per present head with each score's mean, "sum" and "count". */
void stats_write_members(FILE *f, const HeadStats *s, const char *kind, const char *model);

#endif
