/* options.h — what a run was asked to do: filled by cli.c from argv, read by
 * pipeline.c. */
#ifndef ATTNVIZ_OPTIONS_H
#define ATTNVIZ_OPTIONS_H

/* Batch lines share forward passes up to this many tokens unless --pack-tokens
 * says otherwise: past it the pass is long enough that sharing gains little. */
#define CLI_PACK_TOKENS 256

typedef struct {
    const char *model_dir;     /* --model */
    const char *json_path;     /* --json ("-" = stdout) */
    const char *html_path;     /* --html */
    const char *batch_path;    /* --batch ("-" = stdin) */
    const char *templates_dir; /* --templates */
    const char *text_a, *text_b;
    int layer, head;           /* -1 = unset */
    int tokens_only;
    int qk, hidden;
    int precision;
    int profile;
    int lowercase;             /* -1 = infer, 0 = --cased, 1 = --uncased */
    int threads;               /* 0 = library default */
    int quiet;
    /* selections and derived views (JSON, npy, HTML and stats alike) */
    int *sel_layers, n_sel_layers; /* NULL = all */
    int *sel_heads, n_sel_heads;
    int no_special, words;
    const char *npy_path;      /* --npy FILE */
    const char *out_dir;       /* --out-dir: one file per input line */
    int out_html, out_npy;     /* with --out-dir: --html / --npy as flags */
    int stats;
    int strict;
    int max_tokens;            /* --max-tokens: 0 = the model's limit */
    double max_capture;        /* --max-capture in bytes: 0 = half of physical RAM */
    int pack_tokens;           /* --pack-tokens: batch inputs share a pass up to this many tokens; 0 = one by one */
    /* predictions and generation */
    int predict_k;             /* --predict K: top-K at every position (causal) or mask (masked); 0 = off */
    int generate_n;            /* --generate N: continue by up to N tokens; 0 = off */
    double temperature;        /* --temperature: 0 = greedy */
    double top_p;              /* --top-p: 1 = off */
    unsigned long long seed;   /* --seed */
    int sampling_opts;         /* --top-p or --seed given */
    const char *stop;          /* --stop STRING, or NULL */
    /* the page's first state */
    const char *view;          /* --view head|model|neuron|matrix */
    const char *theme;         /* --theme light|dark */
    int *show_heads, n_show_heads; /* --show-heads LIST */
    /* attnviz render INPUT: attention computed elsewhere */
    int render;
    const char *render_input;
    const char *render_meta;   /* --meta FILE */
    /* attnviz serve [TEXT [TEXT_B]]: the page's first input */
    int serve;
    const char **serve_models; /* --model, repeated (NULL: the default model) */
    int n_serve_models;
    int port;                  /* --port: 0 = any free port */
    const char *host;          /* --host ADDR (default 127.0.0.1) */
    int open_browser;          /* --open */
    double cache_mb;           /* --cache-mb: captures kept, in MB */
    double timeout_s;          /* --timeout: longest wait for the model, seconds */
    int idle_s;                /* --idle-timeout: a connection silent this long is closed */
    int max_queue;             /* --queue: forward passes waiting or running (then 503) */
    /* attnviz diff: two texts on one model (text_a, text_b), or one text on two (model_dir, model_b) */
    int diff;
    const char *model_b;       /* the second --model */
    int diff_top;              /* --top N: heads in the table (0: 10) */
    /* attnviz heads: scores per head over the inputs (heads.h) */
    int heads;
    int scores[16], n_scores;  /* --score NAME..., HS_* (none: all) */
    int top_k;                 /* --top K */
    const char *pattern;       /* --pattern FILE|RULE */
    int exclude_bos, exclude_current;
    int induction_seqs, induction_len; /* the random repeated sequences */
    /* attnviz stats --merge FILES...: sums of --json files added */
    int merge;
    const char *const *merge_files;
    int n_merge_files;
} CliOptions;

#endif
