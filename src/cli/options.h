/* options.h — the command line as parsed (src/cli/): the typed settings each
 * command hands to the library (settings.h), plus what only parsing needs
 * (the lists it owns, which command, which options were given). Nothing
 * below src/cli/ reads it. */
#ifndef ATTNVIZ_OPTIONS_H
#define ATTNVIZ_OPTIONS_H

#include "settings.h"

/* Room for the option table's rows (src/cli/cli_options.c checks its size against it). */
#define CLI_MAX_OPTIONS 96

/* A list of indices as --layers 0,5-11 gives them: sorted, no duplicates (owned). */
typedef struct {
    int *v;
    int n;
} CliList;

struct CliCommand;

typedef struct {
    const struct CliCommand *cmd; /* the command: a run, serve, render, diff, heads or stats */
    const char *command;          /* its name as typed, NULL for a run (for --help) */
    ModelSpec model;              /* --model (the first), --cased/--uncased, --tokens-only */
    RunSpec run;                  /* a run, heads, and the page of render, diff and serve */
    RenderSpec render_spec;       /* attnviz render */
    DiffSpec diff_spec;           /* attnviz diff */
    ServeSpec serve_spec;         /* attnviz serve */
    CliList sel_layers, sel_heads, show_heads; /* what run.sel points into */
    int *ablate_pairs, n_ablate_pairs;         /* --ablate L.H,... as (layer, head) pairs (owned) */
    const char *output;           /* -o FILE: the writer its extension names (cli.c's resolve_output) */
    int merge;                    /* stats --merge */
    const char **serve_models;    /* --model, repeated (serve) */
    int n_serve_models;
    const char *const *merge_files; /* attnviz stats --merge FILES... */
    int n_merge_files;
    /* which options argv gave (index into the option table) and the last value of each */
    unsigned char given[CLI_MAX_OPTIONS];
    unsigned char via_output[CLI_MAX_OPTIONS]; /* given as -o FILE (messages show "-o") */
    const char *value[CLI_MAX_OPTIONS];
    char **words;                 /* the words that are no option (texts, files; owned array) */
    int out_dir_mode;             /* --out-dir anywhere: --html and --npy are flags, not file names */
    const char *generate_what;    /* --completions SHELL or --man TEMPLATE: what main prints */
    const char *generate_arg;
    char whole_for[64];           /* the option that keeps a run's whole matrices (run.output.whole_for points here) */
} CliOptions;

#endif
