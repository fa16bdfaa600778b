/* diff_out.h — attnviz diff's writers: its JSON and its table (diff.h holds
 * the comparison they write, cmd_diff.c fills the documents). */
#ifndef ATTNVIZ_DIFF_OUT_H
#define ATTNVIZ_DIFF_OUT_H

#include <stdio.h>

#include "diff.h"
#include "err.h"
#include "output.h"

typedef struct {
    const char *name;                    /* "encoder", "decoder", "cross" */
    const double *jsd, *sink_a, *sink_b; /* (n_layers, n_heads) */
    const int *layers;                   /* the stack's own layers (a decoder of another depth), or NULL: */
    int n_layers;                        /* DiffS2s' (0) */
} DiffStack;
typedef struct {
    int two_models;
    const char *model_a, *model_b, *text_a, *text_b, *decoder_text;
    const DiffAlign *src, *dec;          /* the sources' and the decoders' token alignments */
    const int *layers;                   /* (n_layers) the layer of each grid row */
    int n_layers, n_heads;
    DiffStack stacks[3];
} DiffS2s;
/* {"attnviz_version", "format": "attnviz-diff", "mode", "models", "texts", "decoder_text", "alignment":
 * {"source", "decoder"}, "stacks": {name: {"per_head", "per_layer", "sink": {"a", "b", "change"}}}}. */
int diff_write_s2s_json(FILE *f, const DiffS2s *d, AvErr *e);
/* The table: per stack, the top heads by divergence with their sink mass, and each layer's mean. */
int diff_write_s2s_table(FILE *f, const DiffS2s *d, int top, AvErr *e);
/* The comparison's JSON members (no braces): "mode", "models", "texts",
 * "alignment", "divergence", "sink"; a->diff must be set. The --json output and the
 * page's meta share them. */
int diff_write_members(FILE *f, const OutDoc *a, AvErr *e);
/* --json: {"format", members, "a": A's attnviz JSON, "b": B's}. */
int diff_write_json(FILE *f, const OutDoc *a, AvErr *e);
/* The table on stdout: the alignment in one line, then the top heads by
 * divergence with their sink mass in A and B, each layer's mean divergence,
 * and the heads whose sink mass moved most. */
int diff_write_table(FILE *f, const OutDoc *a, int top, AvErr *e);

#endif
