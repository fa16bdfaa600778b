/* heads.h — `attnviz heads`: per layer and head, scores that name what a head
 * does (previous-token, duplicate-token, induction, a user's pattern, ...),
 * averaged over a corpus, ranked, and merged exactly across shards
 * (`attnviz stats --merge`). Share scores follow TransformerLens's detect_head
 * ("mul"): the attention on the pattern divided by all the attention, per input. */
#ifndef ATTNVIZ_HEADS_H
#define ATTNVIZ_HEADS_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "output.h"
#include "stats.h"
#include "tokenizer.h"

enum { HS_PREVIOUS, HS_NEXT, HS_SELF, HS_FIRST, HS_SEP, HS_DUPLICATE, HS_INDUCTION, HS_DISTANCE, HS_ENTROPY,
       HS_PATTERN, HS_N };

const char *heads_score_name(int k);
int heads_score_by_name(const char *name); /* -1 when unknown */

/* --pattern: an n x n template (weights of key j for query i) or a rule "offset K" (key i + K). */
typedef struct {
    int n;        /* template size, 0 for a rule */
    float *w;     /* (n, n) */
    int offset;   /* the rule's K */
    char *spec;   /* as given, for the JSON */
} HeadsPattern;

/* Reads a template from a .npy (2-D, square, f4/f8/i4/i8/u1/b1) or JSON ([[...], ...]) image;
 * name says which (".npy" suffix) and is named in errors. */
int heads_pattern_parse(HeadsPattern *p, const char *name, const char *buf, size_t len, AvErr *e);
/* arg: "offset K", or a file read with heads_pattern_parse. */
int heads_pattern_load(HeadsPattern *p, const char *arg, AvErr *e);
void heads_pattern_free(HeadsPattern *p);

/* One run of random repeated sequences: `sequences` of `length` random token ids, each
 * repeated twice, within the tokenizer's own special tokens. */
typedef struct {
    uint64_t seed;
    int sequences, length;
    int n_ids;   /* tokens per sequence */
    int *ids;    /* (sequences, n_ids) */
} HeadsInduction;

typedef struct HeadScores {
    int want[HS_N];     /* chosen scores */
    int col[HS_N];      /* each chosen score's column in acc, else -1 */
    const char *names[HS_N];
    int exclude_bos, exclude_current, top_k;
    HeadsPattern pattern;      /* when HS_PATTERN is chosen */
    char *pattern_spec;        /* what the JSON says of it (also for merged files) */
    HeadsInduction *ind;       /* the runs that went into the induction column */
    int n_ind;
    char *kind;                /* "heads", or "stats" for a merge of --stats files */
    char *model;
    HeadStats acc;
} HeadScores;

typedef struct {
    const int *scores; int n_scores; /* NULL: every score (pattern only with a pattern) */
    const char *pattern;             /* --pattern FILE|RULE, or NULL */
    int exclude_bos, exclude_current, top_k;
} HeadsOptions;

int heads_init(HeadScores *hs, int n_layers, int n_heads, const HeadsOptions *o, AvErr *e);
void heads_free(HeadScores *hs);

/* Adds one corpus input (its selected heads): every chosen score but induction. */
int heads_add(HeadScores *hs, const OutDoc *d, AvErr *e);
/* Adds one input's encoder-decoder stack st (the document's layers in order, every head; rows and cols: the
 * tokens of its rows and columns). The encoder's and decoder's self-attention take heads_add's scores;
 * cross attention (rows decoder tokens, columns source tokens) takes entropy, first, sep and duplicate (the
 * attention on source tokens with the decoder token's id), the others having no cross definition (null).
 * Induction is not scored (its random sequences would need a decoder text of their own). */
int heads_add_stack(HeadScores *hs, const OutDoc *d, const CapStack *st, const TokEncoding *rows,
                    const TokEncoding *cols, AvErr *e);
/* The random repeated sequences for the induction score (vocab: ids below it are usable). */
int heads_make_induction(HeadScores *hs, const Tokenizer *t, int vocab, uint64_t seed, int sequences, int length,
                         AvErr *e);
/* Adds one of those sequences' attention: the induction column only. */
int heads_add_induction(HeadScores *hs, const OutDoc *d, AvErr *e);

/* The score of an attention matrix (n, n) as heads_add computes it; ids and sep (n) may be NULL
 * when the score does not need them. NaN when no attention is left after the exclusions. */
double heads_score_matrix(const HeadScores *hs, int k, const float *A, int n, const int *ids,
                          const unsigned char *sep);

/* The same score from the engine's sums over the n rows of one head (capture.h's
 * sc_sum, summed as heads_scoring says): NaN when no attention is left. */
double heads_score_sums(int k, const double *sums, int n);
/* How the engine must sum the rows for these scores (exclusions, pattern). */
void heads_scoring(const HeadScores *hs, CapScoring *sc);

int heads_write_table(FILE *f, const HeadScores *hs, AvErr *e);
int heads_write_json(FILE *f, const HeadScores *hs, AvErr *e);
/* An encoder-decoder's: hs[0]'s members at the top level with "stack": names[0], and "stacks": {names[k]: the
 * members of hs[k]} for the others. */
int heads_write_json_stacks(FILE *f, const HeadScores *const *hs, const char *const *names, int n, AvErr *e);

/* attnviz stats --merge: the files' sums added (they must come from the same model,
 * shape, scores and options); table on stdout, or JSON to json_path. */
int heads_merge_files(const char *const *paths, int n, const char *json_path, AvErr *e);
/* One file's image into hs (kind, model, shape, sums); name is named in errors. */
int heads_parse_json(HeadScores *hs, const char *name, const char *buf, AvErr *e);

#endif
