/* cli_options.c — every option of the command line, defined once: a row of
 * CLI_OPTIONS (cli_table.h says what each field means). The parser, --help,
 * the man page and the completions read it; an option is accepted by the
 * commands its `cmds` names and refused by the others. The few values no
 * generic type reads have their parser here, beside their row. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cli_table.h"
#include "heads.h"
#include "output.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const CliSection CLI_SECTIONS[SEC_N] = {
    [SEC_MODEL] = {"Model", NULL},
    [SEC_OUTPUT] = {"Output", NULL},
    [SEC_LONG] = {"Long inputs", NULL},
    [SEC_SELECTION] = {"Selection (applies to JSON, npy, HTML and --stats)", NULL},
    [SEC_PREDICT] = {"Predictions and generation", NULL},
    [SEC_S2S] = {"Encoder-decoder models (bart, marian, t5; TEXT is the source)",
                 "--batch lines are SOURCE<TAB>TARGET (teacher-forced), or sources with --generate. --generate N "
                 "without --decoder-text decodes up to N tokens (greedy, or --temperature/--top-p/--seed/--stop as "
                 "for causal models), then captures the three stacks -- encoder, decoder and cross attention -- over "
                 "what was generated. --predict K: the K most probable next tokens after every decoder token. --stats "
                 "and heads score the three stacks apart. serve takes them too (a Source and a Decoder text, or "
                 "Generate; no Predict top-K there). They refuse --qk, --hidden, --telemetry, --measure norm, "
                 "--no-special, --words and --heads."},
    [SEC_IMAGE] = {"Images (vit, deit, dinov2, clip, siglip; llava, gemma3, idefics3; docs/images.md)",
                   "The image's patches are the tokens, after the class, distillation or register tokens the family "
                   "has; the page opens on the Image view. A whole CLIP or SigLIP model also takes a TEXT: both towers "
                   "run, and the image-text logit is printed. A vision-language model (llava, gemma3, idefics3) takes a "
                   "TEXT with its picture token (<image>, <start_of_image>) where the picture goes: its tokens take "
                   "that place in the decoder's sequence (idefics3: each tile's, then the global view's)."},
    [SEC_LENS] = {"Beyond attention (causal models with a head; one text)", NULL},
    [SEC_ANALYSIS] = {"Analysis", NULL},
    [SEC_HEADS] = {"Head scores (attnviz heads)", NULL},
    [SEC_STATS] = {"Merge (attnviz stats)", NULL},
    [SEC_RENDER] = {"Render", NULL},
    [SEC_BATCH] = {"Batch", NULL},
    [SEC_SERVE] = {"Serve", NULL},
    [SEC_GENERAL] = {"General", NULL},
};

/* ---------------------------------------------------------------- the values no generic type reads */

/* --model: the model; serve takes up to 16, diff two (--model A --model B). */
static int parse_model(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    (void)opt;
    const unsigned cmd = o->cmd ? o->cmd->bit : C_RUN;
    if (cmd == C_DIFF && o->model.path) {
        if (o->diff_spec.model_b) return cli_usage(e, "%s", "diff compares at most two models (--model A --model B)");
        o->diff_spec.model_b = arg;
        return 0;
    }
    if (cmd == C_SERVE) {
        if (o->n_serve_models == 16) return cli_usage(e, "%s", "serve: at most 16 models");
        const char **nm = realloc(o->serve_models, (size_t)(o->n_serve_models + 1) * sizeof *nm);
        if (!nm) return av_err(e, "out of memory");
        o->serve_models = nm;
        o->serve_models[o->n_serve_models++] = arg;
    } else if (o->model.path && strcmp(o->model.path, arg)) {
        return cli_usage(e, "--model given twice ('%s', then '%s'): a %s reads one model", o->model.path, arg,
                         cmd == C_HEADS ? "heads run" : "run");
    }
    if (!o->model.path) o->model.path = arg;
    return 0;
}

/* --cased, --uncased: the tokenizer's lower-casing, overridden. */
static int parse_cased(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    (void)arg, (void)e;
    o->model.lowercase = !strcmp(opt->name, "uncased");
    return 0;
}

/* --html / --npy: a file, or with --out-dir a flag adding a file per line. */
static int parse_out_file(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    (void)e;
    const int html = !strcmp(opt->name, "html");
    if (o->out_dir_mode) *(html ? &o->run.output.out_html : &o->run.output.out_npy) = 1;
    else *(html ? &o->run.output.html_path : &o->run.output.npy_path) = arg;
    return 0;
}

/* -o FILE: kept until every option is read (cli.c's resolve_output picks the writer). */
static int parse_output(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    (void)opt, (void)e;
    o->output = arg;
    return 0;
}

/* --view: one the built-in templates register (diff's pages have more). */
static int parse_view(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    (void)opt;
    char views[256];
    if (!html_view_known(arg, o->cmd && o->cmd->bit == C_DIFF, views, sizeof views))
        return cli_usage(e, "--view is %s, not '%s'", views, arg);
    o->run.output.view = arg;
    return 0;
}

/* --show-heads LIST|all: the heads the page shows at first. */
static int parse_show_heads(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    if (!strcmp(arg, "all")) {
        free(o->show_heads.v);
        o->show_heads.v = NULL, o->show_heads.n = 0;
        o->run.output.show_all_heads = 1;
        return 0;
    }
    o->run.output.show_all_heads = 0;
    const CliOption list = {.name = opt->name, .type = OPT_LIST, .what = opt->what, .at = CLI_AT(show_heads)};
    return cli_parse_value(o, &list, arg, e);
}

/* --top: heads' ranking (0: none) or diff's table (at least 1). */
static int parse_top(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    const int diff = o->cmd && o->cmd->bit == C_DIFF;
    const CliOption n = {.name = opt->name, .type = OPT_INT, .lo = diff ? 1 : 0, .hi = opt->hi,
                         .what = diff ? "a count >= 1" : opt->what,
                         .at = diff ? CLI_AT(diff_spec.top) : CLI_AT(run.heads.top_k)};
    return cli_parse_value(o, &n, arg, e);
}

/* --seed: any whole number a 64-bit seed holds. */
static int parse_seed(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || end == arg || *end || arg[0] == '-') return cli_usage(e, "--seed needs %s, got '%s'", opt->what, arg);
    o->run.predict.seed = v;
    return 0;
}

/* --ablate all | L.H,L.H,...: the pairs into o->ablate_pairs (NULL for all). */
static int parse_ablate(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    free(o->ablate_pairs);
    o->ablate_pairs = NULL, o->n_ablate_pairs = 0;
    if (!strcmp(arg, "all")) return 0;
    size_t cap = 1;
    for (const char *p = arg; *p; p++) cap += *p == ',';
    if (!(o->ablate_pairs = malloc(cap * 2 * sizeof *o->ablate_pairs))) return av_err(e, "out of memory");
    const char *p = arg;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') break;
        long l = strtol(p, &end, 10);
        if (*end != '.' || end[1] < '0' || end[1] > '9' || l > 100000) break;
        long h = strtol(end + 1, &end, 10);
        if (h > 100000) break;
        o->ablate_pairs[2 * o->n_ablate_pairs] = (int)l, o->ablate_pairs[2 * o->n_ablate_pairs + 1] = (int)h;
        o->n_ablate_pairs++;
        if (!*end) return 0;
        if (*end != ',') break;
        p = end + 1;
    }
    return cli_usage(e, "--ablate needs %s, got '%s'", opt->what, arg);
}

/* --explain L.H: one head, into run.explain. */
static int parse_explain(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    const char *p = arg;
    char *end;
    if (*p >= '0' && *p <= '9') {
        const long l = strtol(p, &end, 10);
        if (*end == '.' && end[1] >= '0' && end[1] <= '9' && l <= 100000) {
            const long h = strtol(end + 1, &end, 10);
            if (!*end && h <= 100000) {
                o->run.explain.on = 1, o->run.explain.layer = (int)l, o->run.explain.head = (int)h;
                return 0;
            }
        }
    }
    return cli_usage(e, "--explain needs %s, got '%s'", opt->what, arg);
}

/* --measure NAME[,NAME...] or all: the measures a run computes, in the order given (each once); the first is
 * what --stats and heads score and what the page opens on (attention aside). all: every one of them. */
static int parse_measure(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    static const char *const NAMES[] = {"attention", "norm", "alti", "rollout"};
    CaptureSpec *c = &o->run.capture;
    c->n_measures = 0;
    if (!strcmp(arg, "all")) {
        for (int m = 0; m < 4; m++) c->measures[c->n_measures++] = (Measure)m;
        c->measure = MEASURE_ATTENTION;
        return 0;
    }
    for (const char *p = arg;;) {
        const size_t len = strcspn(p, ",");
        int k = -1;
        for (int m = 0; m < 4; m++)
            if (strlen(NAMES[m]) == len && !strncmp(p, NAMES[m], len)) k = m;
        if (k < 0) return cli_usage(e, "--measure is %s, or all, comma-separated, not '%s'", opt->what, arg);
        for (int i = 0; i < c->n_measures; i++)
            if ((int)c->measures[i] == k) return cli_usage(e, "--measure names %s twice in '%s'", NAMES[k], arg);
        c->measures[c->n_measures++] = (Measure)k;
        if (!p[len]) break;
        p += len + 1;
    }
    c->measure = c->measures[0];
    if (c->n_measures == 1) c->n_measures = 0;
    return 0;
}

/* --score NAME (repeatable): the scores heads computes, in the order given, each once. */
static int parse_score(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    const int k = heads_score_by_name(arg);
    if (k < 0) {
        const CliOption c = {.name = opt->name, .type = OPT_CHOICE, .choices = opt->choices};
        return cli_parse_value(o, &c, arg, e); /* the choice's message */
    }
    HeadsSpec *h = &o->run.heads;
    for (int i = 0; i < h->n_scores; i++)
        if (h->scores[i] == k) return 0;
    if (h->n_scores < (int)(sizeof h->scores / sizeof h->scores[0])) h->scores[h->n_scores++] = k;
    return 0;
}

/* A whole number written as digits only (no sign, space or other junk), at
 * most INT_MAX; *end is where it stopped. -1: no digits; -2: too large. */
static int parse_digits(const char *s, const char **end, int *out) {
    long long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (*p - '0')) > INT_MAX) return -2;
    if (p == s) return -1;
    *end = p, *out = (int)v;
    return 0;
}

/* One SLURM_ARRAY_TASK_* variable as a whole number; dflt when unset (or -1: required). */
static int slurm_var(const char *name, int dflt, int *out, AvErr *e) {
    const char *v = getenv(name), *end = NULL;
    if (!v || !*v) {
        if (dflt >= 0) return *out = dflt, 0;
        return cli_usage(e, "--shard slurm: %s is not set (not a task of a Slurm job array: sbatch --array=0-N-1)", name);
    }
    if (parse_digits(v, &end, out) != 0 || *end) return cli_usage(e, "--shard slurm: %s is '%s', not a whole number", name, v);
    return 0;
}

/* --shard I/N, or --shard slurm: this array task's place in its array. A
 * Slurm array must be one range in steps of 1 (task I of N is its ID less the
 * first ID): a list or a step would leave some lines to no task. */
static int parse_shard(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    int *index = &o->run.batch.shard_index, *count = &o->run.batch.shard_count;
    if (!strcmp(arg, "slurm")) {
        int id = 0, n = 0, lo = 0, hi = 0, step = 1; /* set by slurm_var, or an error returned */
        if (slurm_var("SLURM_ARRAY_TASK_ID", -1, &id, e) || slurm_var("SLURM_ARRAY_TASK_COUNT", -1, &n, e) ||
            slurm_var("SLURM_ARRAY_TASK_MIN", 0, &lo, e) || slurm_var("SLURM_ARRAY_TASK_STEP", 1, &step, e))
            return -1;
        if (n < 1) return cli_usage(e, "--shard slurm: SLURM_ARRAY_TASK_COUNT is %d, not at least 1", n);
        long long last = (long long)lo + n - 1; /* the default when _MAX is unset */
        if (slurm_var("SLURM_ARRAY_TASK_MAX", last > INT_MAX ? INT_MAX : (int)last, &hi, e)) return -1;
        if (step != 1 || (long long)hi - lo + 1 != n || id < lo || id > hi)
            return cli_usage(e, "--shard slurm: the array is not one range in steps of 1 (tasks %d to %d, step %d, %d tasks): "
                                "submit with --array=0-%d", lo, hi, step, n, n - 1);
        *index = id - lo, *count = n;
        return 0;
    }
    const char *p = NULL, *q = NULL;
    int i, n, ri = parse_digits(arg, &p, &i), rn = ri == 0 && *p == '/' ? parse_digits(p + 1, &q, &n) : -1;
    if (ri == -2 || rn == -2) return cli_usage(e, "--shard %s is out of range: at most %d", arg, INT_MAX);
    if (ri != 0 || rn != 0 || *q) return cli_usage(e, "--shard needs %s, got '%s'", opt->what, arg);
    if (n < 1) return cli_usage(e, "--shard %s: the count N must be at least 1", arg);
    if (i >= n) return cli_usage(e, "--shard %s: the index I must be below the count N (0 to %d)", arg, n - 1);
    *index = i, *count = n;
    return 0;
}

/* The hidden modes: what main prints instead of running. */
static int parse_generate(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    if (!strcmp(opt->name, "completions") && strcmp(arg, "bash") && strcmp(arg, "zsh") && strcmp(arg, "fish"))
        return cli_usage(e, "--completions is bash, zsh or fish, not '%s'", arg);
    o->generate_what = opt->name, o->generate_arg = arg;
    return 0;
}

/* ---------------------------------------------------------------- the table */

#define MODEL_CMDS (C_RUN | C_SERVE | C_DIFF | C_HEADS)
#define PAGE_CMDS (C_RUN | C_RENDER | C_DIFF | C_SERVE)

const CliOption CLI_OPTIONS[] = {
    /* Model */
    {.name = "model", .arg = "DIR|FILE", .type = OPT_CUSTOM, .parse = parse_model, .cmds = MODEL_CMDS,
     .section = SEC_MODEL, .flags = OPT_REPEAT | OPT_FILE,
     .help = "a Hugging Face folder (config.json, tokenizer, safetensors or pytorch_model.bin) or a llama.cpp .gguf "
             "file; serve: repeat it to serve several models; diff: --model A --model B compares two. Default: "
             "$ATTNVIZ_MODEL, else weights/bert-base-uncased, else the demo model",
     .man = "A Hugging Face folder (config.json; vocab.txt for BERT and DistilBERT, vocab.json + merges.txt for "
            "RoBERTa and GPT-2, tokenizer.json for the decoders; model.safetensors or its shards, else "
            "pytorch_model.bin, read without unpickling), or a llama.cpp .gguf file (or a folder holding one; "
            "weights kept quantized). Default: $ATTNVIZ_MODEL, else weights/bert-base-uncased (in the working "
            "directory or beside the binary), else the built-in demo model (constructed, not trained). A path "
            "that does not exist is named with \"no such file or directory\". attnviz serve takes it up to 16 "
            "times (the page picks one); attnviz diff twice (--model A --model B: one text on two models)."},
    {.name = "cased", .type = OPT_CUSTOM, .parse = parse_cased, .cmds = MODEL_CMDS, .section = SEC_MODEL,
     .help = "keep the text's case: override the tokenizer's lower-casing",
     .man = "Keep the case (default: tokenizer_config.json's do_lower_case, else inferred)."},
    {.name = "uncased", .type = OPT_CUSTOM, .parse = parse_cased, .cmds = MODEL_CMDS, .section = SEC_MODEL,
     .help = "lower-case the text whatever the tokenizer says"},
    {.name = "threads", .arg = "N", .type = OPT_INT, .lo = 1, .hi = 1024, .what = "1 to 1024", .at = CLI_AT(run.threads),
     .cmds = MODEL_CMDS, .section = SEC_MODEL, .help = "cap the forward pass's threads (default: the cores)"},

    /* Output */
    {.name = "output", .short_name = 'o', .arg = "FILE", .type = OPT_CUSTOM, .parse = parse_output,
     .cmds = C_RUN | C_RENDER | C_DIFF | C_HEADS | C_STATS, .section = SEC_OUTPUT, .flags = OPT_FILE,
     .help = "write FILE, the writer named by its extension: .html the page, .json JSON, .npy the arrays, "
             ".jsonl --batch's JSON Lines (the same as --html, --json or --npy FILE)",
     .man = "Write FILE; its extension names the writer: .html (or .htm) the page, .json JSON, .npy the arrays, "
            ".jsonl the JSON Lines of --batch (--stats and heads write one .json document). The same as --html, "
            "--json or --npy FILE, which it must not contradict. Any other extension is refused; for standard "
            "output write --json - or --html -."},
    {.name = "json", .arg = "FILE", .type = OPT_STRING, .at = CLI_AT(run.output.json_path),
     .cmds = C_RUN | C_RENDER | C_DIFF | C_HEADS | C_STATS, .section = SEC_OUTPUT, .flags = OPT_FILE,
     .help = "write JSON (- for stdout); alone, no HTML is written",
     .man = "Write JSON (- for stdout). With only --json no page is written. With --batch: JSON Lines, one "
            "object a line (--stats: one document)."},
    {.name = "html", .arg = "FILE", .type = OPT_CUSTOM, .parse = parse_out_file, .cmds = C_RUN | C_RENDER | C_DIFF,
     .section = SEC_OUTPUT, .flags = OPT_OUT_DIR | OPT_FILE,
     .help = "write the page (default attnviz.html when no other output is named); with --out-dir a flag: a page "
             "per line",
     .man = "Write the page. With no other output named, the page goes to attnviz.html, and a run that replaces "
            "an attnviz.html it was not told to write says so. An input longer than --long-from tokens gets a long "
            "input's page instead, when the page is all the run writes. With --out-dir it takes no FILE and adds "
            "DIR/000001.html for each line."},
    {.name = "npy", .arg = "FILE", .type = OPT_CUSTOM, .parse = parse_out_file, .cmds = C_RUN | C_RENDER,
     .section = SEC_OUTPUT, .flags = OPT_OUT_DIR | OPT_FILE,
     .help = "write attention as float32 [layers, heads, n, n] .npy (with --qk also FILE's stem + .queries.npy / "
             ".keys.npy); with --out-dir a flag",
     .man = "Write attention as float32 [layers, heads, n, n]; with --qk also STEM.queries.npy and STEM.keys.npy, "
            "[layers, heads, n, head_dim]; --predict adds STEM.pred_ids.npy, STEM.pred_probs.npy and "
            "STEM.pred_positions.npy. A model with attention sinks (gpt-oss) adds STEM.sinks.npy, float32 [layers, "
            "heads, n]: each query row's share that went to its head's sink logit. With --out-dir it takes no FILE "
            "and adds DIR/000001.npy for each line."},
    {.name = "qk", .type = OPT_FLAG, .at = CLI_AT(run.capture.qk), .cmds = C_RUN | C_RENDER, .section = SEC_OUTPUT,
     .help = "include queries and keys in the JSON",
     .man = "Include queries and keys (after bias, before scaling) in the JSON (and --npy's siblings)."},
    {.name = "hidden", .type = OPT_FLAG, .at = CLI_AT(run.capture.hidden), .cmds = C_RUN, .section = SEC_OUTPUT,
     .help = "include every layer's hidden states in the JSON",
     .man = "Include the hidden states (embeddings, then every layer) in the JSON."},
    {.name = "precision", .arg = "N", .type = OPT_INT, .lo = 1, .hi = 9, .what = "1 to 9", .dflt = "6",
     .at = CLI_AT(run.output.precision), .cmds = PAGE_CMDS, .section = SEC_OUTPUT,
     .help = "significant digits of JSON floats (1-9)"},
    {.name = "layer", .arg = "N", .type = OPT_INT, .lo = 0, .hi = INT_MAX, .what = "a layer index >= 0",
     .at = CLI_AT(run.sel.layer), .cmds = PAGE_CMDS, .section = SEC_OUTPUT,
     .help = "the page's initial layer (0-based)"},
    {.name = "head", .arg = "N", .type = OPT_INT, .lo = 0, .hi = INT_MAX, .what = "a head index >= 0",
     .at = CLI_AT(run.sel.head), .cmds = PAGE_CMDS, .section = SEC_OUTPUT,
     .help = "the page's initial head (0-based): the head view opens on it alone"},
    {.name = "templates", .arg = "DIR", .type = OPT_STRING, .at = CLI_AT(run.output.templates_dir), .cmds = PAGE_CMDS,
     .section = SEC_OUTPUT, .flags = OPT_DIR,
     .help = "read page templates from DIR instead of the built-in ones"},
    {.name = "view", .arg = "NAME", .type = OPT_CUSTOM, .parse = parse_view, .cmds = PAGE_CMDS, .section = SEC_OUTPUT,
     .help = "the page opens on this view: head, model, neuron, matrix, lens, attribution or flow (diff: also diff)"},
    {.name = "theme", .arg = "NAME", .type = OPT_CHOICE, .choices = "light|dark", .at = CLI_AT(run.output.theme),
     .cmds = PAGE_CMDS, .section = SEC_OUTPUT, .flags = OPT_WORD,
     .help = "the page's theme: light or dark (default: the reader's)"},
    {.name = "show-heads", .arg = "LIST", .type = OPT_CUSTOM, .parse = parse_show_heads, .what = "a list like 0-3,8",
     .choices = "all", .cmds = PAGE_CMDS, .section = SEC_OUTPUT,
     .help = "the heads the page shows at first, e.g. 0-3,8, or all (others a click away)"},

    /* Long inputs */
    {.name = "long-from", .arg = "N", .type = OPT_INT, .lo = 0, .hi = 8192, .what = "1 to 8192 tokens (0: never)",
     .dflt = "4096", .at = CLI_AT(serve_spec.long_from), .cmds = C_RUN | C_SERVE, .section = SEC_LONG,
     .help = "one input's page past N tokens is a long input's: zoom levels and each query's heaviest keys, no n x "
             "n matrix (the server's Download page); 0: always the whole matrices. Not given, the long page where "
             "the whole matrices would pass --max-capture or make a page past 50 MB (said in one line; "
             "docs/long-inputs.md); only when the page is all the run writes (given, it refuses --json, --npy, "
             "--stats, --layers...); serve: inputs longer than N tokens are browsed by zoom tiles",
     .man = "One input's page past N tokens is a long input's page: every head's first zoom levels (256x256 and "
            "512x512 max-pooled cells) and each query's 8 heaviest keys, with the head statistics; fewer when that "
            "passes 64 M 16-bit codes or 50 MB, and the page states its bounds. No n x n matrix is made, so memory "
            "grows with n, not n squared. It is the page attnviz serve's Download page gives for the same input, "
            "byte for byte. A small N forces it on a short input; 0 never writes it (the whole matrices, within "
            "--max-capture). Not given, a run whose page is all it writes gets the long page where its whole "
            "matrices would pass --max-capture or make a page past 50 MB, which a browser struggles with; the run "
            "says so in one line, with how to force the whole matrices (docs/long-inputs.md). Given (but 0), it "
            "is a usage error with --json, --npy, --qk, --hidden, --stats, --generate, --measure norm, "
            "--no-special, --words, --layers, --heads, --telemetry, the residual-stream options, --decoder-text or "
            "--batch; a run asking for any of them writes the whole matrices. With attnviz serve (1 to 8192): the "
            "inputs the server browses by zoom tiles and exact query rows."},

    /* Selection */
    {.name = "layers", .arg = "LIST", .type = OPT_LIST, .what = "a list like 0,5-11", .at = CLI_AT(sel_layers),
     .cmds = C_RUN | C_DIFF | C_HEADS, .section = SEC_SELECTION,
     .help = "compute and keep only these layers, e.g. 0,5-11",
     .man = "Compute and keep only these layers, e.g. 0,5-11 (JSON, npy, page and statistics alike; the JSON lists "
            "them in \"layers\"). An encoder-decoder whose decoder has another depth than its encoder checks LIST "
            "against the deeper stack; each stack keeps the listed layers it has, and a list that leaves a stack "
            "none is refused."},
    {.name = "heads", .arg = "LIST", .type = OPT_LIST, .what = "a list like 0-3,8", .at = CLI_AT(sel_heads),
     .cmds = C_RUN | C_DIFF | C_HEADS, .section = SEC_SELECTION, .help = "keep only these heads, e.g. 8 or 0-3,8"},
    {.name = "max-tokens", .arg = "N", .type = OPT_INT, .lo = 1, .hi = INT_MAX, .what = "a count >= 1",
     .at = CLI_AT(run.capture.max_tokens), .cmds = MODEL_CMDS, .section = SEC_SELECTION,
     .help = "truncate inputs to N tokens (with a warning)"},
    {.name = "max-capture", .arg = "SIZE", .type = OPT_SIZE, .what = "a size like 8G or 500M",
     .at = CLI_AT(run.capture.max_capture), .cmds = MODEL_CMDS | C_RENDER, .section = SEC_SELECTION,
     .help = "the memory a run's captured attention may take, e.g. 8G or 500M (default: half of physical RAM); "
             "past it one input's page is the long input's page, and anything else is refused with what would fit "
             "(docs/long-inputs.md); render: the .npz's arrays, checked before they are inflated"},
    {.name = "telemetry", .arg = "K", .type = OPT_INT, .lo = 0, .hi = CAP_TEL_MAX_TOP,
     .what = "a count of top keys from 0 to " STR(CAP_TEL_MAX_TOP), .at = CLI_AT(run.capture.telemetry_top),
     .cmds = C_RUN, .section = SEC_SELECTION,
     .help = "no matrices: each query row's statistics (first-token and first-four sink mass, entropy, "
             "previous/self/duplicate shares, mean distance) and its K heaviest keys, per layer and head, into "
             "--json; memory grows with n, not n^2"},
    {.name = "no-special", .type = OPT_FLAG, .at = CLI_AT(run.capture.no_special), .cmds = C_RUN,
     .section = SEC_SELECTION, .help = "drop [CLS]/[SEP] rows and columns (rows renormalized)"},
    {.name = "words", .type = OPT_FLAG, .at = CLI_AT(run.capture.words), .cmds = C_RUN, .section = SEC_SELECTION,
     .help = "merge ## pieces into words: attention summed over a word's key pieces and averaged over its query "
             "pieces"},

    /* Predictions and generation */
    {.name = "predict", .arg = "K", .type = OPT_INT, .lo = 1, .hi = 100, .what = "a count from 1 to 100",
     .at = CLI_AT(run.predict.k), .cmds = C_RUN, .section = SEC_PREDICT,
     .help = "the K most probable next tokens at every position (causal models) or fill-ins at every "
             "[MASK]/<mask> (masked models)",
     .man = "The K most probable next tokens at every position of a causal model, or fill-ins at every [MASK] or "
            "<mask> of a masked model with an MLM head, with their probabilities: \"predictions\" in the JSON, "
            "STEM.pred_ids.npy, STEM.pred_probs.npy and STEM.pred_positions.npy beside --npy, and on the page. A "
            "checkpoint without a head is a usage error."},
    {.name = "generate", .arg = "N", .type = OPT_INT, .lo = 1, .hi = 1 << 20, .what = "a token count >= 1",
     .at = CLI_AT(run.predict.generate_n), .cmds = C_RUN, .section = SEC_PREDICT,
     .help = "continue TEXT by up to N tokens (causal models), capturing each new token's attention; stops at the "
             "model's end token",
     .man = "Continue the text by up to N tokens with a causal model, capturing each new token's attention; stops "
            "at the model's end token. The output covers the final sequence; \"generation\" in the JSON says which "
            "tokens were generated and the top-K each was chosen from."},
    {.name = "temperature", .arg = "T", .type = OPT_REAL, .lo = 0, .hi = 100, .what = "a number from 0 to 100",
     .dflt = "0", .at = CLI_AT(run.predict.temperature), .cmds = C_RUN, .section = SEC_PREDICT,
     .help = "sample with temperature T (0: greedy, the most probable)"},
    {.name = "top-p", .arg = "P", .type = OPT_REAL, .lo = 0, .hi = 1, .what = "a number in (0, 1]", .dflt = "1",
     .at = CLI_AT(run.predict.top_p), .cmds = C_RUN, .section = SEC_PREDICT, .flags = OPT_OPEN_LO,
     .help = "sample from the smallest set of tokens holding probability P (1: all)"},
    {.name = "seed", .arg = "S", .type = OPT_CUSTOM, .parse = parse_seed, .what = "a whole number >= 0", .dflt = "0",
     .cmds = C_RUN | C_HEADS, .section = SEC_PREDICT,
     .help = "the sampler's seed: the same seed, the same text; heads: the induction score's random sequences"},
    {.name = "stop", .arg = "STRING", .type = OPT_STRING, .what = "a non-empty string", .at = CLI_AT(run.predict.stop),
     .cmds = C_RUN, .section = SEC_PREDICT, .flags = OPT_NONEMPTY,
     .help = "stop once the generated text contains STRING"},
    {.name = "chat", .type = OPT_FLAG, .at = CLI_AT(run.chat), .cmds = C_RUN, .section = SEC_PREDICT,
     .help = "TEXT (each --batch line) is one user message in the model's own chat template, with the generation "
             "prompt (docs/chat.md)",
     .man = "TEXT (each line with --batch) is one user message in the model's own chat template (a folder's "
            "chat_template.jinja or tokenizer_config.json's chat_template, a GGUF's tokenizer.chat_template), "
            "rendered as transformers' apply_chat_template renders it with the generation prompt, and tokenized with "
            "nothing added: the page, the JSON's text and tokens show the template's text. A model without a template "
            "is refused. docs/chat.md lists the templates checked and the Jinja subset."},
    {.name = "chat-file", .arg = "FILE", .type = OPT_STRING, .at = CLI_AT(run.chat_file), .cmds = C_RUN,
     .section = SEC_PREDICT, .flags = OPT_FILE | OPT_NONEMPTY,
     .help = "the input is OpenAI-style messages (a JSON array of {\"role\", \"content\"}) in the chat template; "
             "no TEXT",
     .man = "The input is a conversation: a JSON array of OpenAI-style messages, {\"role\": \"system\"|\"developer\"|"
            "\"user\"|\"assistant\", \"content\": a string or [{\"type\": \"text\", \"text\": ...}]}, rendered in "
            "the model's chat template as --chat renders one message; no TEXT. Other keys and roles, duplicate keys and "
            "NUL characters are refused."},

    /* Encoder-decoder models */
    {.name = "decoder-text", .arg = "TEXT", .type = OPT_STRING, .at = CLI_AT(run.decoder_text), .cmds = C_RUN | C_DIFF,
     .section = SEC_S2S,
     .help = "run the decoder, teacher-forced, over TEXT (after the decoder's start token): encoder, decoder and "
             "cross attention per layer and head; diff: the decoder's text for both sources"},

    /* Vision encoders */
    {.name = "image", .arg = "FILE", .type = OPT_STRING, .at = CLI_AT(run.image), .cmds = C_RUN, .section = SEC_IMAGE,
     .flags = OPT_NONEMPTY,
     .help = "a PNG or JPEG, preprocessed as the model folder's preprocessor_config.json says"},
    {.name = "mmproj", .arg = "FILE", .type = OPT_STRING, .at = CLI_AT(model.mmproj), .cmds = C_RUN, .section = SEC_IMAGE,
     .flags = OPT_FILE | OPT_NONEMPTY,
     .help = "llama.cpp's vision tower and projector (an mmproj .gguf) beside --model's text .gguf: LLaVA or "
             "Gemma 3 from llama.cpp's files"},

    /* Beyond attention */
    {.name = "logit-lens", .arg = "K", .type = OPT_INT, .lo = 1, .hi = 100, .what = "a count from 1 to 100",
     .at = CLI_AT(run.lens.lens_k), .cmds = C_RUN, .section = SEC_LENS,
     .help = "the top K tokens read from the residual stream after every captured layer (final norm + "
             "unembedding), at every position"},
    {.name = "attribution", .type = OPT_FLAG, .at = CLI_AT(run.lens.attribution), .cmds = C_RUN, .section = SEC_LENS,
     .help = "with --predict/--generate: each head's and MLP's direct share of the predicted token's logit (the "
             "final norm's scale frozen)"},
    {.name = "target", .arg = "TOKEN", .type = OPT_STRING, .what = "a token", .at = CLI_AT(run.lens.target),
     .cmds = C_RUN, .section = SEC_LENS, .flags = OPT_NONEMPTY,
     .help = "attribute (and ablate) this token instead of the prediction"},
    {.name = "ablate", .arg = "all|L.H,..", .type = OPT_CUSTOM, .parse = parse_ablate,
     .what = "all or heads as LAYER.HEAD,... (e.g. 0.3,2.1)", .cmds = C_RUN, .section = SEC_LENS,
     .help = "the change in the target's log-probability when a head is ablated"},
    {.name = "ablate-mode", .arg = "M", .type = OPT_CHOICE, .choices = "zero|mean", .dflt = "zero",
     .at = CLI_AT(run.lens.ablate_mean), .cmds = C_RUN, .section = SEC_LENS,
     .help = "zero, or mean (its mean output over the input)"},
    {.name = "position", .arg = "N", .type = OPT_INT, .lo = 0, .hi = INT_MAX, .what = "a token index >= 0",
     .at = CLI_AT(run.lens.position), .cmds = C_RUN, .section = SEC_LENS,
     .help = "attribution, ablation and flow at token N (default: attribution at every position, ablation and "
             "flow at the last)"},
    {.name = "flow", .arg = "T", .type = OPT_REAL, .lo = 0, .hi = 1, .what = "a threshold in (0, 1)", .dflt = "0.04",
     .at = CLI_AT(run.lens.flow_threshold), .cmds = C_RUN, .section = SEC_LENS,
     .flags = OPT_OPTIONAL | OPT_OPEN_LO | OPT_OPEN_HI,
     .help = "information-flow routes (Ferrando & Voita 2024) from the last (or --position) token's output down "
             "the layers, edges above T"},

    /* Analysis */
    {.name = "stats", .type = OPT_FLAG, .at = CLI_AT(run.stats), .cmds = C_RUN, .section = SEC_ANALYSIS,
     .help = "per layer and head: entropy, mean attention distance, share on [CLS], [SEP], self, previous, next (a "
             "table; JSON with --json); over a batch, the mean over inputs; memory grows with n, not n^2; "
             "encoder-decoders: per stack",
     .man = "Per layer and head: entropy (nats), mean attention distance (tokens), and the share of attention on "
            "[CLS], [SEP], the token itself, the previous and the next token, each averaged over query rows; over "
            "a batch, the mean over inputs. A table on stdout, or JSON with --json. Like attnviz heads, scored from "
            "sums the engine takes as it makes each head's attention rows: no n x n matrix is kept (except with "
            "--no-special or --words), so memory grows with the input, not its square."},
    {.name = "tokens-only", .type = OPT_FLAG, .at = CLI_AT(run.capture.tokens_only), .cmds = C_RUN,
     .section = SEC_ANALYSIS,
     .help = "tokenize only (needs the tokenizer's files and config.json, no weights) and print JSON"},
    {.name = "measure", .arg = "NAME[,NAME...]", .type = OPT_CUSTOM, .parse = parse_measure,
     .choices = "attention|norm|alti|rollout|all", .what = "attention, norm, alti or rollout",
     .dflt = "attention", .cmds = C_RUN | C_HEADS | C_SERVE, .section = SEC_ANALYSIS,
     .help = "attention, norm, alti, rollout, a comma list of them, or all. norm: also value-weighted attention "
             "||a_ij f_h(x_j)|| (Kobayashi et al. 2020; f_h: token j's value through head h's slice of the output "
             "projection): JSON norm_attention and value_norms. alti: each token's contribution to each token after "
             "every layer through attention, residual and layer norm (Ferrando et al. 2022); rollout: 0.5 A + 0.5 I of "
             "the heads' mean, multiplied through the layers (Abnar & Zuidema 2020); one matrix per layer: JSON "
             "alti/rollout and *_layer, .alti.npy/.rollout.npy. The page's measure switch (W) steps through them and its "
             "Compare view draws them side by side; --stats and heads score one (alti, rollout: a row per layer). "
             "docs/measures.md defines them"},
    {.name = "explain", .arg = "L.H", .type = OPT_CUSTOM, .parse = parse_explain, .what = "one head as LAYER.HEAD (e.g. 5.1)",
     .cmds = C_RUN, .section = SEC_ANALYSIS,
     .help = "why head L.H attends where it does: its score q.k split over the residual stream's parts (embeddings, "
             "each earlier head, each MLP, biases) on the query and the key side; a table on stdout, JSON explain, the "
             "page's panel (decoders and encoders, pre- or post-norm; not encoder-decoders)"},
    {.name = "query", .arg = "Q", .type = OPT_INT, .lo = 0, .hi = INT_MAX, .what = "a token index >= 0",
     .at = CLI_AT(run.explain.query), .cmds = C_RUN, .section = SEC_ANALYSIS,
     .help = "--explain's query token (with --key: that pair; alone: its strongest keys)"},
    {.name = "key", .arg = "K", .type = OPT_INT, .lo = 0, .hi = INT_MAX, .what = "a token index >= 0",
     .at = CLI_AT(run.explain.key), .cmds = C_RUN, .section = SEC_ANALYSIS,
     .help = "--explain's key token (default: the head's strongest pairs)"},

    /* Head scores */
    {.name = "score", .arg = "NAME", .type = OPT_CUSTOM, .parse = parse_score,
     .choices = "previous|next|self|first|sep|duplicate|induction|distance|entropy|pattern", .cmds = C_HEADS,
     .section = SEC_HEADS, .flags = OPT_REPEAT,
     .help = "previous, next, self, first, sep, duplicate, induction, distance, entropy or pattern (repeatable; "
             "default: all but pattern)"},
    {.name = "top", .arg = "K", .type = OPT_CUSTOM, .parse = parse_top, .hi = 1 << 20, .what = "a count >= 0",
     .cmds = C_HEADS | C_DIFF, .section = SEC_HEADS,
     .help = "heads: rank the K best heads per score (default 5); diff: the K most divergent heads in the table "
             "(default 10)"},
    {.name = "pattern", .arg = "FILE|RULE", .type = OPT_STRING, .at = CLI_AT(run.heads.pattern), .cmds = C_HEADS,
     .section = SEC_HEADS, .flags = OPT_FILE,
     .help = "your own pattern: an n x n template (.npy, or JSON [[...],...]) or 'offset K' (key i+K for query "
             "i), scored like TransformerLens"},
    {.name = "exclude-bos", .type = OPT_FLAG, .at = CLI_AT(run.heads.exclude_bos), .cmds = C_HEADS,
     .section = SEC_HEADS, .help = "leave attention to position 0 out of the share scores (detect_head's option)"},
    {.name = "exclude-current", .type = OPT_FLAG, .at = CLI_AT(run.heads.exclude_current), .cmds = C_HEADS,
     .section = SEC_HEADS, .help = "leave attention to the token itself out of the share scores"},
    {.name = "induction-seqs", .arg = "N", .type = OPT_INT, .lo = 1, .hi = 10000, .what = "1 to 10000", .dflt = "8",
     .at = CLI_AT(run.heads.induction_seqs), .cmds = C_HEADS, .section = SEC_HEADS,
     .help = "how many random sequences the induction score reads"},
    {.name = "induction-len", .arg = "L", .type = OPT_INT, .lo = 1, .hi = 100000, .what = "1 to 100000", .dflt = "20",
     .at = CLI_AT(run.heads.induction_len), .cmds = C_HEADS, .section = SEC_HEADS,
     .help = "how long each is (tokens; each repeated twice)"},

    /* Merge */
    {.name = "merge", .type = OPT_FLAG, .at = CLI_AT(merge), .cmds = C_STATS, .section = SEC_STATS,
     .help = "add up the FILEs: --stats --json or heads --json outputs of shards (same model and options)"},

    /* Render */
    {.name = "meta", .arg = "FILE", .type = OPT_STRING, .at = CLI_AT(render_spec.meta), .cmds = C_RENDER,
     .section = SEC_RENDER, .flags = OPT_FILE,
     .help = "the tokens: a JSON object {\"tokens\", \"sentence_b_start\", \"model\", \"causal\", \"layers\", "
             "\"encoder_tokens\", \"decoder_tokens\"} (default: INPUT's stem + .json, else the safetensors "
             "metadata's \"attnviz\" entry)"},

    /* Batch */
    {.name = "batch", .arg = "FILE|-", .type = OPT_STRING, .at = CLI_AT(run.batch.path), .cmds = C_RUN | C_HEADS,
     .section = SEC_BATCH, .flags = OPT_FILE,
     .help = "one input per line (TAB separates A and B), JSON Lines out",
     .man = "One input per line (- for stdin), a TAB separating sentence A from sentence B. Output is JSON Lines, "
            "into --json (or -o FILE.jsonl) or stdout, in constant memory; the model is loaded once. A bad line "
            "(invalid UTF-8, empty, an empty sentence A) is reported with its line number and skipped; the exit "
            "status is then 1. FILE may be a pipe or FIFO, not a directory. A line holds at most 16 MiB: a longer "
            "one stops the batch with its line number (exit 1). --html FILE and --npy FILE hold one input: with "
            "--batch they need --out-dir."},
    {.name = "out-dir", .arg = "DIR", .type = OPT_STRING, .at = CLI_AT(run.output.out_dir), .cmds = C_RUN,
     .section = SEC_BATCH, .flags = OPT_DIR,
     .help = "one file per input line instead: DIR/000001.json; with --out-dir, --html and --npy are flags that "
             "add 000001.html / 000001.npy"},
    {.name = "strict", .type = OPT_FLAG, .at = CLI_AT(run.batch.strict), .cmds = C_RUN | C_HEADS,
     .section = SEC_BATCH, .help = "stop at the first bad line (default: report it, skip it, go on)"},
    {.name = "shard", .arg = "I/N", .type = OPT_CUSTOM, .parse = parse_shard,
     .what = "I/N (0 <= I < N, e.g. 0/4) or slurm", .choices = "slurm", .cmds = C_RUN | C_HEADS, .section = SEC_BATCH,
     .help = "only lines I+1, I+1+N, I+1+2N, ... (0 <= I < N; every line counts, blank ones too), for sbatch "
             "--array=0-(N-1) or any N jobs; --shard slurm: I and N from the array task (SLURM_ARRAY_TASK_ID, "
             "_COUNT); attnviz stats --merge joins the shards' --stats/heads --json"},
    {.name = "pack-tokens", .arg = "N", .type = OPT_INT, .lo = 0, .hi = 65536, .what = "0 to 65536",
     .dflt = STR(CLI_PACK_TOKENS), .at = CLI_AT(run.batch.pack_tokens), .cmds = C_RUN | C_HEADS, .section = SEC_BATCH,
     .help = "run short lines together, up to N tokens a pass (0: one at a time); either way each line's output is "
             "its single run's, byte for byte"},

    /* Serve */
    {.name = "port", .arg = "N", .type = OPT_INT, .lo = 0, .hi = 65535, .what = "0 to 65535", .dflt = "8765",
     .at = CLI_AT(serve_spec.port), .cmds = C_SERVE, .section = SEC_SERVE, .help = "port (0: any free port)"},
    {.name = "host", .arg = "ADDR", .type = OPT_STRING, .at = CLI_AT(serve_spec.host), .cmds = C_SERVE,
     .section = SEC_SERVE, .help = "numeric address to bind (default 127.0.0.1; others warn)"},
    {.name = "open", .type = OPT_FLAG, .at = CLI_AT(serve_spec.open_browser), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "open the URL in a browser (xdg-open)"},
    {.name = "cache-mb", .arg = "N", .type = OPT_REAL, .lo = 1, .hi = 1e7, .what = "a size in MB >= 1", .dflt = "2048",
     .at = CLI_AT(serve_spec.cache_mb), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "memory for the runs' queries and keys kept (the least recently used are dropped and recomputed)"},
    {.name = "timeout", .arg = "S", .type = OPT_REAL, .lo = 0.1, .hi = 86400, .what = "seconds from 0.1", .dflt = "60",
     .at = CLI_AT(serve_spec.timeout_s), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "longest a request waits for the model"},
    {.name = "queue", .arg = "N", .type = OPT_INT, .lo = 1, .hi = 4096, .what = "1 to 4096", .dflt = "64",
     .at = CLI_AT(serve_spec.max_queue), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "requests waiting for or running the model at most (then 503)"},
    {.name = "idle-timeout", .arg = "S", .type = OPT_INT, .lo = 1, .hi = 3600, .what = "1 to 3600 seconds", .dflt = "20",
     .at = CLI_AT(serve_spec.idle_s), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "close a connection silent for S seconds"},
    {.name = "qk-precision", .arg = "P", .type = OPT_CHOICE, .choices = "f32|f16|bf16", .dflt = "f32",
     .at = CLI_AT(serve_spec.qk_prec), .cmds = C_SERVE, .section = SEC_SERVE,
     .help = "f16 or bf16: keep the runs' queries and keys in 16 bits, half the memory; heads recomputed from them "
             "differ by that rounding",
     .man = "f32, f16 or bf16: keep the runs' queries and keys rounded to 16 bits (to nearest, ties to even), half "
            "their memory. The forward pass still computes in float32; heads recomputed from the kept copy "
            "(attention, tiles past level 0, exact rows) differ from float32's by that rounding, while thumbnails, "
            "level-0 tiles and head statistics come from the pass. A run whose q or k passes binary16's 65504 fails "
            "with a message (use bf16 or f32)."},

    /* General */
    {.name = "quiet", .type = OPT_FLAG, .at = CLI_AT(run.quiet), .cmds = C_ALL, .section = SEC_GENERAL,
     .help = "no progress or informational lines on stderr (the model used, files written); warnings (an input "
             "truncated, a page replaced) and errors still show"},
    {.name = "profile", .type = OPT_FLAG, .at = CLI_AT(run.profile), .cmds = C_RUN | C_DIFF | C_HEADS,
     .section = SEC_GENERAL, .help = "per-phase times and the kernel on stderr (load_ms= ... kernel=)"},
    {.name = "help", .short_name = 'h', .type = OPT_FLAG, .cmds = C_ALL, .section = SEC_GENERAL, .flags = OPT_ANSWER,
     .help = "this help (attnviz COMMAND --help: that command's)"},
    {.name = "version", .type = OPT_FLAG, .cmds = C_ALL, .section = SEC_GENERAL, .flags = OPT_ANSWER,
     .help = "the version, the kernel in use and those built in"},
    {.name = "completions", .arg = "SHELL", .type = OPT_CUSTOM, .parse = parse_generate, .choices = "bash|zsh|fish",
     .cmds = C_ALL, .section = SEC_GENERAL, .flags = OPT_ANSWER | OPT_HIDDEN,
     .help = "print the completion script for bash, zsh or fish (make install installs them)"},
    {.name = "man", .arg = "TEMPLATE", .type = OPT_CUSTOM, .parse = parse_generate, .cmds = C_ALL,
     .section = SEC_GENERAL, .flags = OPT_ANSWER | OPT_HIDDEN | OPT_FILE,
     .help = "print the man page: TEMPLATE's prose (docs/attnviz.1.in) with the synopsis, commands and options "
             "filled in (make man writes docs/attnviz.1)"},
};

const int CLI_N_OPTIONS = (int)(sizeof CLI_OPTIONS / sizeof CLI_OPTIONS[0]);
_Static_assert(sizeof CLI_OPTIONS / sizeof CLI_OPTIONS[0] <= CLI_MAX_OPTIONS, "raise CLI_MAX_OPTIONS (options.h)");
