/* pipeline.h — one run: find and load the model and its tokenizer, then
 * text -> tokens -> forward pass -> transforms -> writers for each input
 * (one, or a batch). */
#ifndef ATTNVIZ_PIPELINE_H
#define ATTNVIZ_PIPELINE_H

#include <stdio.h>

#include "config.h"
#include "err.h"
#include "options.h"

typedef struct Pipeline Pipeline;

/* Finds the model (--model, $ATTNVIZ_MODEL, bundled weights, the demo) and
 * loads it with its tokenizer. *dir and *why say which model and why (for the
 * caller's message); valid until pipeline_close. *out is set even on failure
 * (close it). */
int pipeline_open(Pipeline **out, const CliOptions *o, const char **dir, const char **why, AvErr *e);
const ModelConfig *pipeline_config(const Pipeline *p);
/* NULL when the model has a language-model head; else why it has none. */
const char *pipeline_head_missing(const Pipeline *p);
/* Runs every input; returns an exit code (EXIT_OK, EXIT_RUNTIME with e set). */
int pipeline_run(Pipeline *p, AvErr *e);
/* attnviz render: attention computed elsewhere (render.h) through the same
 * writers; an exit code (EXIT_USAGE for a selection out of range). */
int pipeline_render(const CliOptions *o, AvErr *e);
/* Frees the run; with profile set, prints the per-phase times there first. */
void pipeline_close(Pipeline *p, FILE *profile);

#endif
