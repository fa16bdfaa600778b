/* options.h — the command line as parsed (cli.c): the typed settings each
 * command hands to the library (settings.h), plus what only parsing needs
 * (the lists it owns, which subcommand). Nothing below cli.c reads it. */
#ifndef ATTNVIZ_OPTIONS_H
#define ATTNVIZ_OPTIONS_H

#include "settings.h"

typedef struct {
    ModelSpec model;         /* --model (the first), --cased/--uncased, --tokens-only */
    RunSpec run;             /* a run, heads, and the page of render, diff and serve */
    RenderSpec render_spec;  /* attnviz render */
    DiffSpec diff_spec;      /* attnviz diff */
    ServeSpec serve_spec;    /* attnviz serve */
    int threads;             /* --threads: 0 = library default */
    /* the lists run.sel points into (owned) */
    int *sel_layers, n_sel_layers;
    int *sel_heads, n_sel_heads;
    int *show_heads, n_show_heads;
    int *ablate_pairs, n_ablate_pairs; /* --ablate L.H,... as (layer, head) pairs (owned) */
    int sampling_opts;       /* --top-p or --seed given */
    /* the subcommand (none set: a run; heads is run.heads.on), and its name for --help */
    int render, serve, diff, merge;
    const char *command;
    const char **serve_models; /* --model, repeated (serve) */
    int n_serve_models;
    const char *const *merge_files; /* attnviz stats --merge FILES... */
    int n_merge_files;
} CliOptions;

#endif
