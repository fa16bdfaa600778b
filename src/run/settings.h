/* settings.h — what a command was asked to do, as typed settings: cli.c
 * fills them from argv; the library (pipeline, serve, live) reads only these,
 * never the command line's own struct. */
#ifndef ATTNVIZ_SETTINGS_H
#define ATTNVIZ_SETTINGS_H

#include "selection.h"

/* Batch lines share forward passes up to this many tokens unless --pack-tokens
 * says otherwise: past it the pass is long enough that sharing gains little. */
#define CLI_PACK_TOKENS 256

/* Which model, and how to read it. */
typedef struct {
    const char *path;   /* --model DIR|FILE; NULL: $ATTNVIZ_MODEL, bundled weights, the demo */
    int lowercase;      /* -1 = infer, 0 = --cased, 1 = --uncased */
    int tokenizer_only; /* --tokens-only: no weights needed */
    int resident;       /* 1: weights read into memory (util.h's AV_MAP_RESIDENT) for a process that
                           makes many passes (serve, the library); 0: as the run suits (resident for a
                           long batch, generation or ablation, mapped for one pass or a short batch) */
    const char *mmproj; /* --mmproj FILE: llama.cpp's vision tower and projector beside a text GGUF (LLaVA) */
} ModelSpec;

/* --measure: what the views, scores and statistics read. MEASURE_NORM adds
 * value-weighted attention (Kobayashi et al. 2020: ||a_ij f_h(x_j)||, capture.h's
 * vnorm and nattn) beside the attention itself; MEASURE_ALTI and
 * MEASURE_ROLLOUT add a per-layer token-mixing measure (mixing.h: ALTI,
 * attention rollout), for which the pass keeps every layer and head. */
typedef enum { MEASURE_ATTENTION = 0, MEASURE_NORM, MEASURE_ALTI, MEASURE_ROLLOUT } Measure;
/* Whether the measure is one per layer (mixing.h) rather than per head. */
static inline int measure_per_layer(Measure m) { return m == MEASURE_ALTI || m == MEASURE_ROLLOUT; }
/* The measures' names, indexed by Measure. */
static inline const char *measure_name(Measure m) {
    return m == MEASURE_NORM ? "norm" : m == MEASURE_ALTI ? "alti" : m == MEASURE_ROLLOUT ? "rollout" : "attention";
}

/* What a forward pass keeps, and the view derived from it. */
typedef struct {
    Measure measure;    /* --measure's first name: what --stats and heads score */
    int n_measures;     /* --measure's names in the order given (each once); 0: measure alone */
    Measure measures[4];
    int qk, hidden;     /* --qk, --hidden */
    int no_special, words;
    int tokens_only;    /* tokenize only, no pass */
    int max_tokens;     /* --max-tokens: 0 = the model's limit */
    double max_capture; /* --max-capture in bytes: 0 = half of physical RAM */
    int telemetry;      /* --telemetry K: each row's statistics and top-K keys (capture.h) instead of matrices */
    int telemetry_top;  /* that K */
} CaptureSpec;

/* Whether the capture computes measure m (--measure lists it). */
static inline int measure_wanted(const CaptureSpec *c, Measure m) {
    if (c->measure == m) return 1;
    for (int i = 0; i < c->n_measures; i++)
        if (c->measures[i] == m) return 1;
    return 0;
}
/* Whether any measure it computes is one per layer (ALTI, rollout: the pass keeps every layer and head). */
static inline int measure_any_per_layer(const CaptureSpec *c) {
    return measure_wanted(c, MEASURE_ALTI) || measure_wanted(c, MEASURE_ROLLOUT);
}

/* --predict and --generate. */
typedef struct {
    int k;                  /* --predict K: top-K at every position (causal) or mask (masked); 0 = off */
    int generate_n;         /* --generate N: continue by up to N tokens; 0 = off */
    double temperature;     /* 0 = greedy */
    double top_p;           /* 1 = off */
    unsigned long long seed;
    const char *stop;       /* --stop STRING, or NULL */
} PredictSpec;

/* What the residual stream says (lens.h, flow.h): --logit-lens, --attribution, --ablate, --flow. */
typedef struct {
    int lens_k;              /* --logit-lens K: the top K after every captured layer; 0 = off */
    int attribution;         /* --attribution (or --target): each head's and MLP's share of a logit */
    const char *target;      /* --target TOKEN, or NULL: each position's predicted token */
    int position;            /* --position N: attribution there only and ablation there; -1: every
                                position (attribution), the last (ablation) */
    int ablate;              /* --ablate given */
    const int *ablate_pairs; /* (layer, head) pairs (n_ablate), or NULL: every head (--ablate all) */
    int n_ablate;
    int ablate_mean;         /* --ablate-mode mean (default zero) */
    int flow;                /* --flow [THRESHOLD]: information-flow routes (flow.h) from position's output */
    double flow_threshold;   /* in (0, 1); 0.04 by default, as in the paper */
} LensSpec;

/* --explain L.H [--query Q --key K]: head (layer, head)'s score q.k split over
 * the residual stream's parts on the query and the key side (explain.h). */
typedef struct {
    int on;
    int layer, head;
    int query, key;  /* -1: the head's strongest pairs */
} ExplainSpec;

/* Where the outputs go and how the page opens. */
typedef struct {
    const char *json_path;     /* --json ("-" = stdout) */
    const char *html_path;     /* --html */
    const char *npy_path;      /* --npy FILE */
    const char *out_dir;       /* --out-dir: one file per input line */
    int out_html, out_npy;     /* with --out-dir: --html / --npy as flags */
    int precision;             /* significant digits of JSON floats */
    const char *templates_dir; /* --templates */
    const char *view, *theme;  /* the page's first view and theme */
    int show_all_heads;        /* --show-heads all: the head view opens with every head drawn */
    int long_from;             /* one input's page: past this many tokens, a long input's page (output.h's
                                  html_write_long, no n x n matrix); 0: always the whole matrices;
                                  OUT_LONG_AUTO: the long page where the whole matrices would pass the
                                  memory budget or the page bound (docs/long-inputs.md) */
    const char *whole_for;     /* the option that keeps the whole matrices (the long page cannot honour
                                  it, e.g. "--json"), or NULL: for messages naming what would fit */
} OutputSpec;
#define OUT_LONG_AUTO (-1)

/* --batch. */
typedef struct {
    const char *path; /* "-" = stdin; NULL: one input */
    int strict;
    int pack_tokens;  /* batch inputs share a pass up to this many tokens; 0 = one by one */
    /* --shard I/N: only the lines whose number, counted from 0 over every line read
     * (blank and bad lines too), is I modulo N; N = 1 takes all. No coordinator: the
     * shards of one file are fixed by the file alone. */
    int shard_index, shard_count;
} BatchSpec;

/* attnviz heads: scores per head over the inputs (heads.h). */
typedef struct {
    int on;
    int scores[16], n_scores; /* HS_* (none: all) */
    int top_k;
    const char *pattern;      /* --pattern FILE|RULE */
    int exclude_bos, exclude_current;
    int induction_seqs, induction_len;
} HeadsSpec;

/* One run over one input or a batch: everything the pipeline reads. */
typedef struct {
    const char *text_a, *text_b;
    const char *decoder_text; /* --decoder-text: an encoder-decoder model's decoder input (text_a the source), or NULL */
    const char *image;        /* --image FILE: a vision encoder's input (PNG or JPEG; text_a, if any, a whole CLIP
                                 or SigLIP model's text), or NULL */
    int chat;                 /* --chat: the text (each --batch line) is one user message in the model's chat
                                 template, with the generation prompt (chat.h) */
    const char *chat_file;    /* --chat-file FILE: OpenAI-style messages (JSON) are the input, rendered so */
    Selection sel;
    CaptureSpec capture;
    PredictSpec predict;
    OutputSpec output;
    BatchSpec batch;
    HeadsSpec heads;
    LensSpec lens;
    ExplainSpec explain;
    int stats;   /* --stats: statistics instead of maps */
    int quiet;   /* no notes or warnings */
    int profile; /* report per-phase times (AV_NOTE_PROFILE) */
    int threads; /* --threads: the passes' threads (pool.h's pool_threads; 0: the CPUs, or $OPENBLAS_NUM_THREADS) */
} RunSpec;

/* attnviz render INPUT: attention computed elsewhere. */
typedef struct {
    const char *input;
    const char *meta; /* --meta FILE */
} RenderSpec;

/* attnviz diff: two texts on one model, or one text on two. */
typedef struct {
    const char *model_b; /* the second --model, or NULL */
    int top;             /* --top N: heads in the table (0: 10) */
} DiffSpec;

/* attnviz serve. */
typedef struct {
    const char *const *models; /* --model, repeated (NULL: the default model) */
    int n_models;
    int lowercase;             /* as ModelSpec's, for every model */
    RunSpec page;              /* the page's settings and first input (text_a, text_b) */
    int port;                  /* 0 = any free port */
    const char *host;          /* numeric address (default 127.0.0.1) */
    int open_browser;
    double cache_mb;           /* captures kept, in MB */
    double timeout_s;          /* longest wait for the model, seconds */
    int idle_s;                /* a connection silent this long is closed */
    int max_queue;             /* forward passes waiting or running (then 503) */
    int long_from;             /* inputs longer than this many tokens are browsed by tiles and rows */
    int qk_prec;               /* --qk-precision: how runs keep q/k (capture.h's CapQkPrecision) */
} ServeSpec;

#endif
