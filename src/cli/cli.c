/* cli.c — options, model selection, and the text -> tokens -> encoder ->
 * capture -> writers pipeline for one input or a batch. */
#include "cli.h"

#include "capture.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"
#include "output.h"
#include "pipeline.h"
#include "serve.h"
#include "config.h"
#include "gemm.h"
#include "heads.h"
#include "report.h"
#include "util.h"


/* attnviz --help is every command's synopsis and every section below, in
 * order; attnviz COMMAND --help is that command's synopsis and the sections
 * it reads (a bit per command). */
enum { H_RUN = 1, H_RENDER = 2, H_SERVE = 4, H_DIFF = 8, H_HEADS = 16, H_STATS = 32, H_ALL = 63 };

typedef struct {
    const char *name;     /* as typed after attnviz; NULL: a run */
    unsigned bit;
    const char *synopsis; /* its usage lines, continuation lines indented for "Usage: " */
} HelpCommand;

static const HelpCommand COMMANDS[] = {
    {NULL, H_RUN, "attnviz [OPTIONS] TEXT [TEXT_B]\n       attnviz [OPTIONS] --batch FILE|-\n"},
    {"render", H_RENDER, "attnviz render INPUT [--meta FILE] [OUTPUT AND PAGE OPTIONS]\n"},
    {"serve", H_SERVE,
     "attnviz serve [--model DIR|FILE]... [--port N] [--host ADDR] [--open] [--cache-mb N]\n"
     "                     [--timeout S] [TEXT [TEXT_B]]\n"},
    {"diff", H_DIFF, "attnviz diff [--model M] TEXT_A TEXT_B | attnviz diff --model A --model B TEXT\n"
                     "       (encoder-decoders: the sources, and --decoder-text TEXT for both)\n"},
    {"heads", H_HEADS, "attnviz heads [--batch FILE | TEXT [TEXT_B]] [--score NAME]... [--top K] [--pattern FILE|RULE]\n"
                       "       (encoder-decoders: SOURCE TARGET, or --batch lines SOURCE<TAB>TARGET)\n"},
    {"stats", H_STATS, "attnviz stats --merge FILE... [--json OUT]\n"},
};

typedef struct {
    unsigned cmds;
    const char *text;
} HelpSection;

static const HelpSection SECTIONS[] = {
    {H_RUN,
     "Run a Transformer (BERT, RoBERTa, DistilBERT, XLM-RoBERTa, ELECTRA, ModernBERT, GPT-2,\n"
     "Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3, Mixtral, Qwen3-MoE, OLMoE, gpt-oss; the\n"
     "encoder-decoders BART, Marian, T5/Flan-T5/mT5; Hugging Face folders or llama.cpp GGUF\n"
     "files) on TEXT (and TEXT_B for a sentence pair), capture the attention of every layer and\n"
     "head, and write JSON, .npy and/or an HTML page.\n"
     "\n"},
    {H_RUN | H_SERVE | H_DIFF | H_HEADS,
     "Model:\n"
     "  --model DIR|FILE    Hugging Face folder (config.json, tokenizer, safetensors or\n"
     "                      pytorch_model.bin), or a .gguf file.\n"
     "                      Default: $ATTNVIZ_MODEL, else weights/bert-base-uncased, else the demo model\n"
     "  --cased, --uncased  override the tokenizer's lower-casing\n"
     "  --threads N         cap the forward pass's threads (default: the cores)\n"
     "\n"},
    {H_RUN | H_RENDER | H_DIFF | H_HEADS,
     "Output:\n"
     "  --json FILE         write JSON (- for stdout); alone, no HTML is written\n"
     "  --html FILE         write the page (default attnviz.html when no other output is named)\n"
     "  --npy FILE          write attention as float32 [layers, heads, n, n] .npy\n"
     "                      (with --qk also FILE's stem + .queries.npy / .keys.npy)\n"
     "  --qk                include queries and keys in the JSON\n"
     "  --hidden            include every layer's hidden states in the JSON\n"
     "  --precision N       significant digits of JSON floats (1-9, default 6)\n"
     "  --layer N, --head N the page's initial layer and head (0-based)\n"
     "  --templates DIR     read page templates from DIR instead of the built-in ones\n"
     "  --view NAME         the page opens on this view: head, model, neuron, matrix, lens,\n"
     "                      attribution or flow\n"
     "  --theme NAME        the page's theme: light or dark (default: the reader's)\n"
     "  --show-heads LIST   the heads the page shows at first (others a click away)\n"
     "\n"},
    {H_RUN,
     "Long inputs:\n"
     "  --long-from N       one input's page past N tokens (1-8192, default 4096) is a long\n"
     "                      input's: zoom levels and each query's 8 heaviest keys, no n x n\n"
     "                      matrix (the server's Download page); only when the page is all\n"
     "                      the run writes (given, it refuses --json, --npy, --stats, --layers...)\n"
     "\n"},
    {H_RUN | H_DIFF | H_HEADS,
     "Selection (applies to JSON, npy, HTML and --stats):\n"
     "  --layers LIST       e.g. 0,5-11 (only these are computed and kept)\n"
     "  --heads LIST        e.g. 8 or 0-3,8\n"
     "  --max-tokens N      truncate inputs to N tokens (with a warning)\n"
     "  --max-capture SIZE  refuse inputs whose captured attention would need more\n"
     "                      memory, e.g. 8G or 500M (default: half of physical RAM)\n"
     "  --telemetry K       no matrices: each query row's statistics (first-token and\n"
     "                      first-four sink mass, entropy, previous/self/duplicate\n"
     "                      shares, mean distance) and its K heaviest keys, per layer\n"
     "                      and head, into --json; memory grows with n, not n^2\n"
     "  --no-special        drop [CLS]/[SEP] rows and columns (rows renormalized)\n"
     "  --words             merge ## pieces into words: attention summed over a word's\n"
     "                      key pieces and averaged over its query pieces\n"
     "\n"},
    {H_RUN,
     "Predictions and generation:\n"
     "  --predict K         the K most probable next tokens at every position (causal\n"
     "                      models) or fill-ins at every [MASK]/<mask> (masked models), 1-100\n"
     "  --generate N        continue TEXT by up to N tokens (causal models), capturing each\n"
     "                      new token's attention; stops at the model's end token\n"
     "  --temperature T     sample with temperature T (default 0: greedy, the most probable)\n"
     "  --top-p P           sample from the smallest set of tokens holding probability P\n"
     "  --seed S            the sampler's seed (default 0): the same seed, the same text\n"
     "  --stop STRING       stop once the generated text contains STRING\n"
     "\n"
     "Encoder-decoder models (bart, marian, t5; TEXT is the source):\n"
     "  --decoder-text T    run the decoder, teacher-forced, over T (after the decoder's start\n"
     "                      token): encoder, decoder and cross attention per layer and head\n"
     "  --batch FILE        lines SOURCE<TAB>TARGET (teacher-forced), or sources with --generate;\n"
     "                      --stats and heads score the three stacks apart\n"
     "  --generate N        without --decoder-text: decode up to N tokens (greedy, or\n"
     "                      --temperature/--top-p/--seed/--stop as above), then capture\n"
     "                      the three stacks over what was generated\n"
     "  --predict K         the K most probable next tokens after every decoder token\n"
     "\n"
     "Beyond attention (causal models with a head; one text):\n"
     "  --logit-lens K      the top K tokens read from the residual stream after every\n"
     "                      captured layer (final norm + unembedding), at every position\n"
     "  --attribution       with --predict/--generate: each head's and MLP's direct share of\n"
     "                      the predicted token's logit (the final norm's scale frozen)\n"
     "  --target TOKEN      attribute (and ablate) this token instead of the prediction\n"
     "  --ablate all|L.H,.. the change in the target's log-probability when a head is ablated\n"
     "  --ablate-mode M     zero (default) or mean (its mean output over the input)\n"
     "  --position N        attribution, ablation and flow at token N (default: attribution at\n"
     "                      every position, ablation and flow at the last)\n"
     "  --flow [T]          information-flow routes (Ferrando & Voita 2024) from the last (or\n"
     "                      --position) token's output down the layers, edges above T (0.04)\n"
     "\n"},
    {H_RENDER,
     "Render (draw attention computed elsewhere, e.g. by transformers):\n"
     "  attnviz render INPUT  INPUT: a .npz or .safetensors holding 'attention' [layers, heads,\n"
     "                      n, n] (or attention.0, attention.1, ... per layer), optionally\n"
     "                      'queries'/'keys' [layers, heads, n, d]; or encoder_attention,\n"
     "                      decoder_attention, cross_attention. The tokens come from\n"
     "  --meta FILE         a JSON object {\"tokens\", \"sentence_b_start\", \"model\", \"causal\",\n"
     "                      \"layers\", \"encoder_tokens\", \"decoder_tokens\"} (default: INPUT's\n"
     "                      stem + .json, else the safetensors metadata's \"attnviz\" entry)\n"
     "\n"},
    {H_DIFF,
     "Diff (compare attention: two texts on one model, or one text on two models of one tokenizer):\n"
     "  attnviz diff        tokens are aligned by a longest common subsequence of their ids; per\n"
     "                      head, the Jensen-Shannon divergence (bits) of aligned query rows; a\n"
     "                      table of the most divergent heads on stdout, --json, and the page\n"
     "                      (default attnviz-diff.html: divergence per head, B - A matrices)\n"
     "  --top N             heads in the table (default 10)\n"
     "  --decoder-text T    encoder-decoders: the decoder's text for both sources; each\n"
     "                      stack (encoder, decoder, cross) compared apart; table and --json\n"
     "\n"},
    {H_RUN,
     "Analysis:\n"
     "  --stats             per layer and head: entropy, mean attention distance, share on\n"
     "                      [CLS], [SEP], self, previous, next (a table; JSON with --json);\n"
     "                      over a batch, the mean over inputs; memory grows with n,\n"
     "                      not n^2 (no matrix is kept); encoder-decoders: per stack\n"
     "  --tokens-only       tokenize only (needs vocab.txt and config.json) and print JSON\n"
     "\n"},
    {H_RUN | H_HEADS | H_SERVE,
     "Measure:\n"
     "  --measure NAME      attention (default) or norm: also value-weighted attention\n"
     "                      ||a_ij f_h(x_j)|| (Kobayashi et al. 2020; f_h: token j's value\n"
     "                      through head h's slice of the output projection): JSON\n"
     "                      norm_attention and value_norms, norm_attention.npy, the page's\n"
     "                      Attention / Norm-weighted switch; --stats and heads score it\n"
     "\n"},
    {H_HEADS | H_STATS,
     "Head scores (attnviz heads; README.md defines them):\n"
     "  --score NAME        previous, next, self, first, sep, duplicate, induction, distance,\n"
     "                      entropy or pattern (repeatable; default: all but pattern)\n"
     "  --top K             rank the K best heads per score (default 5)\n"
     "  --pattern FILE|RULE your own pattern: an n x n template (.npy, or JSON [[...],...])\n"
     "                      or 'offset K' (key i+K for query i), scored like TransformerLens\n"
     "  --exclude-bos, --exclude-current  leave out attention to position 0 / to the token\n"
     "                      itself from the share scores (detect_head's options; default off)\n"
     "  --seed N            the induction score's random sequences (default 0)\n"
     "  --induction-seqs N, --induction-len L  how many, how long (default 8 of 20 tokens,\n"
     "                      each repeated twice)\n"
     "  attnviz stats --merge FILE...  add up --stats --json or heads --json files of shards\n"
     "                      (same model and options): the same numbers as one run over all\n"
     "\n"},
    {H_RUN | H_HEADS,
     "Batch:\n"
     "  --batch FILE|-      one input per line (TAB separates A and B), JSON Lines out\n"
     "  --out-dir DIR       one file per input line instead: DIR/000001.json; with --out-dir,\n"
     "                      --html and --npy are flags that add 000001.html / 000001.npy\n"
     "  --strict            stop at the first bad line (default: report it, skip it, go on)\n"
     "  --shard I/N         only lines I+1, I+1+N, I+1+2N, ... (0 <= I < N; every line counts,\n"
     "                      blank ones too), for sbatch --array=0-(N-1) or any N jobs; --shard\n"
     "                      slurm: I and N from the array task (SLURM_ARRAY_TASK_ID, _COUNT).\n"
     "                      attnviz stats --merge joins the shards' --stats/heads --json\n"
     "  --pack-tokens N     run short lines together, up to N tokens a pass (default 256; 0: one\n"
     "                      at a time); either way each line's output is its single run's, byte\n"
     "                      for byte\n"
     "  --quiet             no progress or informational messages on stderr\n"
     "\n"},
    {H_ALL,
     "  --profile           per-phase times and the kernel on stderr (load_ms= ... kernel=)\n"
     "  -h, --help          this help;  --version  the version\n"
     "\n"
     "Exit status: 0 ok, 1 runtime error (or any failed batch line), 2 usage error.\n"
     "\n"},
    {H_RUN,
     "Examples:\n"
     "  attnviz \"time flies like an arrow\" --layer 0 --head 8\n"
     "  attnviz --model weights/bert-base-uncased --json out.json \"the cat sat\" \"it was tired\"\n"
     "  attnviz --batch corpus.txt --layers 0,5-11 --heads 8 --no-special > maps.jsonl\n"
     "  attnviz --batch corpus.txt --out-dir maps/ --npy\n"
     "  attnviz --batch corpus.txt --stats --json stats.json\n"
     "  attnviz --batch corpus.txt --shard 2/4 --stats --json stats.2.json   (then stats --merge)\n"
     "  attnviz --tokens-only --batch corpus.txt > tokens.jsonl\n"
     "  attnviz --model SmolLM2-135M-Instruct.Q4_1.gguf --generate 20 --predict 5 \"The capital of France is\"\n"
     "  attnviz serve --model weights/bert-base-uncased --model model.gguf --open\n"
     "\n"},
    {H_SERVE,
     "attnviz serve: a local server with the same page, which runs what you type (every view\n"
     "updates) and fetches only the heads it shows, so long inputs stay interactive. It prints\n"
     "one URL with a per-run token; binds 127.0.0.1 unless --host says otherwise.\n"
     "  --model DIR|FILE    repeat to serve several models (picked in the page)\n"
     "  --port N            port (default 8765; 0: any free port)\n"
     "  --host ADDR         numeric address to bind (default 127.0.0.1; others warn)\n"
     "  --open              open the URL in a browser (xdg-open)\n"
     "  --cache-mb N        memory for the runs' queries and keys kept (default 2048)\n"
     "  --timeout S         longest a request waits for the model (default 60)\n"
     "  --queue N           requests waiting for or running the model at most (default 64; then 503)\n"
     "  --idle-timeout S    close a connection silent for S seconds (default 20)\n"
     "  --long-from N       inputs longer than N tokens are browsed by zoom tiles and exact\n"
     "                      query rows, never whole matrices (default 4096; at most 8192)\n"
     "  --qk-precision P    f32 (default), f16 or bf16: keep the runs' queries and keys in 16 bits,\n"
     "                      half the memory; heads recomputed from them differ by that rounding\n"},
};

const char *cli_help_text(const char *command) {
    static char buf[12288];
    const HelpCommand *only = NULL;
    for (size_t i = 0; command && i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (COMMANDS[i].name && !strcmp(COMMANDS[i].name, command)) only = &COMMANDS[i];
    size_t len = 0;
#define PUT(s) (len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, "%s", (s)))
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!only || only == &COMMANDS[i]) {
            PUT(len ? "       " : "Usage: ");
            PUT(COMMANDS[i].synopsis);
        }
    if (only) PUT("\n");
    for (size_t i = 0; i < sizeof SECTIONS / sizeof SECTIONS[0]; i++)
        if (!only || (SECTIONS[i].cmds & only->bit)) PUT(SECTIONS[i].text);
#undef PUT
    return buf;
}

__attribute__((format(printf, 2, 3))) static int usage_error(AvErr *e, const char *fmt, ...);

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* A count option's usage error: a whole number past the limit is "out of
 * range" naming the limit, anything else "needs what". */
static int count_error(AvErr *e, const char *opt, const char *arg, long hi, const char *what) {
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end != arg && !*end && v > 0 && (errno == ERANGE || v > hi))
        return usage_error(e, "%s %s is out of range: at most %ld", opt, arg, hi);
    return usage_error(e, "%s needs %s, got '%s'", opt, what, arg);
}

/* "0.1", ".5", "1e-3", "-2": a number, not a text to run */
static int looks_numeric(const char *s) {
    char *end;
    if (!*s) return 0;
    (void)strtod(s, &end);
    return !*end;
}

static int parse_real(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* Parses "0,5-11" into a sorted list without duplicates of indices < limit (limit
 * checked later, once the model is known). Returns -1 on a malformed list. */
static int parse_list(const char *s, int **out, int *n) {
    int *v = NULL, cnt = 0, cap = 0;
    const char *p = s;
    if (!*p) return -1;
    /* which indices are in already: a scan of the list per index made "0-99999" take minutes */
    unsigned char *seen = calloc(100001, 1);
    if (!seen) return -1;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno || a < 0 || a > 100000) goto bad;
        b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b > 100000) goto bad;
            p = end;
        }
        for (long x = a; x <= b; x++) {
            if (seen[x]) continue;
            seen[x] = 1;
            if (cnt == cap) {
                cap = cap ? cap * 2 : 16;
                int *nv = realloc(v, sizeof(int) * (size_t)cap);
                if (!nv) goto bad;
                v = nv;
            }
            v[cnt++] = (int)x;
        }
        if (*p == ',') p++;
        else if (*p) goto bad;
        if (*p == '\0' && p[-1] == ',') goto bad;
    }
    /* sorted: the indices in order, from the bitmap */
    for (int x = 0, k = 0; k < cnt; x++)
        if (seen[x]) v[k++] = x;
    free(seen);
    free(*out);
    *out = v;
    *n = cnt;
    return 0;
bad:
    free(seen);
    free(v);
    return -1;
}

void cli_options_free(CliOptions *o) {
    free(o->sel_layers);
    free(o->sel_heads);
    free(o->show_heads);
    free(o->serve_models);
    free(o->ablate_pairs);
    o->ablate_pairs = NULL;
    o->sel_layers = o->sel_heads = o->show_heads = NULL;
    o->serve_models = NULL;
}

/* Every usage error ends with the pointer to --help; -1, like av_err. */
__attribute__((format(printf, 2, 3))) static int usage_error(AvErr *e, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return av_err_usage(e, "%s (see attnviz --help)", msg);
}

/* "8G", "500M", "64k" or a byte count; 0 on success. */
static int parse_size(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0)) return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1e3, end++; break;
    case 'm': case 'M': mult = 1e6, end++; break;
    case 'g': case 'G': mult = 1e9, end++; break;
    case 't': case 'T': mult = 1e12, end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = v * mult;
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

/* One SLURM_ARRAY_TASK_* variable as a whole number; dflt when unset (or -1:
 * required). */
static int slurm_var(const char *name, int dflt, int *out, AvErr *e) {
    const char *v = getenv(name), *end = NULL;
    if (!v || !*v) {
        if (dflt >= 0) return *out = dflt, 0;
        return usage_error(e, "--shard slurm: %s is not set (not a task of a Slurm job array: sbatch --array=0-N-1)", name);
    }
    if (parse_digits(v, &end, out) != 0 || *end) return usage_error(e, "--shard slurm: %s is '%s', not a whole number", name, v);
    return 0;
}

/* --shard I/N, or --shard slurm: this array task's place in its array. A
 * Slurm array must be one range in steps of 1 (task I of N is its ID less the
 * first ID): a list or a step would leave some lines to no task. */
static int parse_shard(const char *arg, int *index, int *count, AvErr *e) {
    if (!strcmp(arg, "slurm")) {
        int id = 0, n = 0, lo = 0, hi = 0, step = 1; /* set by slurm_var, or an error returned */
        if (slurm_var("SLURM_ARRAY_TASK_ID", -1, &id, e) || slurm_var("SLURM_ARRAY_TASK_COUNT", -1, &n, e) ||
            slurm_var("SLURM_ARRAY_TASK_MIN", 0, &lo, e) || slurm_var("SLURM_ARRAY_TASK_STEP", 1, &step, e))
            return -1;
        if (n < 1) return usage_error(e, "--shard slurm: SLURM_ARRAY_TASK_COUNT is %d, not at least 1", n);
        long long last = (long long)lo + n - 1; /* the default when _MAX is unset */
        if (slurm_var("SLURM_ARRAY_TASK_MAX", last > INT_MAX ? INT_MAX : (int)last, &hi, e)) return -1;
        if (step != 1 || (long long)hi - lo + 1 != n || id < lo || id > hi)
            return usage_error(e, "--shard slurm: the array is not one range in steps of 1 (tasks %d to %d, step %d, %d tasks): "
                                  "submit with --array=0-%d", lo, hi, step, n, n - 1);
        *index = id - lo, *count = n;
        return 0;
    }
    const char *p = NULL, *q = NULL;
    int i, n, ri = parse_digits(arg, &p, &i), rn = ri == 0 && *p == '/' ? parse_digits(p + 1, &q, &n) : -1;
    if (ri == -2 || rn == -2) return usage_error(e, "--shard %s is out of range: at most %d", arg, INT_MAX);
    if (ri != 0 || rn != 0 || *q) return usage_error(e, "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '%s'", arg);
    if (n < 1) return usage_error(e, "--shard %s: the count N must be at least 1", arg);
    if (i >= n) return usage_error(e, "--shard %s: the index I must be below the count N (0 to %d)", arg, n - 1);
    *index = i, *count = n;
    return 0;
}

/* What parsing saw besides the settings: which subcommand word, which
 * command's options appeared (checked against the command once all are read). */
typedef struct {
    int stats_cmd, heads_only, serve_opts, pack_set, shard_set;
    int long_from; /* --long-from given (attnviz serve, or a run's page) */
    int ablate_mode; /* --ablate-mode given */
    int out_dir_mode; /* --out-dir anywhere: --html and --npy are flags, not file names */
} ParseState;

/* attnviz stats --merge FILE...: only --json goes with it. */
static int check_stats(CliOptions *o, const ParseState *ps, int rest, char **args, AvErr *e) {
    if (!ps->stats_cmd || !o->merge) return usage_error(e, "%s", "--merge goes with attnviz stats: attnviz stats --merge FILE... [--json OUT]");
    if (o->model.path || o->run.batch.path || o->run.output.html_path || o->run.output.npy_path || o->run.output.out_dir || o->run.stats || o->run.predict.k ||
        o->run.predict.generate_n || o->run.capture.tokens_only || o->sel_layers || o->sel_heads || o->sampling_opts)
        return usage_error(e, "%s", "stats --merge adds up files: only --json OUT goes with it");
    if (o->run.capture.measure != MEASURE_ATTENTION)
        return usage_error(e, "%s", "stats --merge adds up files as they were written: no --measure (give it to --stats or heads)");
    if (rest < 1) return usage_error(e, "%s", "stats --merge needs FILE... (--stats --json or heads --json outputs)");
    o->merge_files = (const char *const *)args;
    o->n_merge_files = rest;
    return 0;
}

/* attnviz heads: scores the attention itself (TEXT or --batch). */
static int check_heads(CliOptions *o, int rest, char **args, AvErr *e) {
    if (o->run.stats || o->run.predict.k || o->run.predict.generate_n || o->run.capture.tokens_only || o->run.capture.no_special || o->run.capture.words || o->run.output.out_dir ||
        o->run.output.html_path || o->run.output.npy_path || o->run.predict.temperature > 0 || o->run.predict.top_p < 1 || o->run.predict.stop || o->run.capture.qk || o->run.capture.hidden)
        return usage_error(e, "%s", "heads scores the attention itself: no --stats, --predict, --generate, --tokens-only, "
                                 "--no-special, --words, --out-dir, --html, --npy, --temperature, --top-p, --stop, --qk or --hidden");
    for (int i = 0; i < o->run.heads.n_scores; i++)
        if (o->run.heads.scores[i] == HS_PATTERN && !o->run.heads.pattern) return usage_error(e, "%s", "--score pattern needs --pattern FILE|RULE");
    if (o->run.batch.path) {
        if (rest > 0) return usage_error(e, "--batch takes its inputs from the file, not '%s'", args[0]);
    } else {
        if (rest < 1) return usage_error(e, "%s", "heads needs TEXT or --batch FILE");
        if (rest > 2) return usage_error(e, "too many arguments: '%s' (quote the text)", args[2]);
        o->run.text_a = args[0];
        o->run.text_b = rest == 2 ? args[1] : NULL;
    }
    return 0;
}

/* attnviz render INPUT: draws what it is given. */
static int check_render(CliOptions *o, int rest, char **args, AvErr *e) {
    if (o->model.path || o->run.batch.path || o->run.predict.k || o->run.predict.generate_n || o->run.capture.tokens_only || o->run.stats ||
        o->run.capture.no_special || o->run.capture.words || o->run.capture.hidden || o->sel_layers || o->sel_heads || o->run.capture.max_tokens || o->run.output.out_dir)
        return usage_error(e, "%s", "render draws the attention it is given: no --model, --batch, --predict, --generate, "
                                 "--tokens-only, --stats, --no-special, --words, --hidden, --layers/--heads, "
                                 "--max-tokens or --out-dir");
    if (o->run.capture.measure != MEASURE_ATTENTION)
        return usage_error(e, "%s", "--measure norm needs the model's values and output projection: render has only attention");
    if (rest != 1) return usage_error(e, "%s", rest < 1 ? "render needs INPUT (.npz or .safetensors)" : "render takes one INPUT");
    o->render_spec.input = args[0];
    return 0;
}

/* attnviz serve [TEXT [TEXT_B]]: the page asks for the rest. */
static int check_serve(CliOptions *o, int rest, char **args, AvErr *e) {
    if (o->run.batch.path || o->run.output.json_path || o->run.output.html_path || o->run.output.npy_path || o->run.output.out_dir || o->run.predict.k || o->run.predict.generate_n ||
        o->run.capture.tokens_only || o->run.stats || o->run.capture.no_special || o->run.capture.words || o->run.capture.hidden || o->sel_layers || o->sel_heads ||
        o->render_spec.meta)
        return usage_error(e, "%s", "serve answers the page's requests: no --batch, --json, --html, --npy, --out-dir, "
                                 "--predict, --generate, --tokens-only, --stats, --no-special, --words, --hidden, "
                                 "--layers/--heads or --meta (the page asks for predictions and layers itself)");
    if (rest > 2) return usage_error(e, "too many arguments: '%s' (quote the text)", args[2]);
    o->run.text_a = rest >= 1 ? args[0] : NULL;
    o->run.text_b = rest == 2 ? args[1] : NULL;
    return 0;
}

/* attnviz diff: two texts on one model, or one text on two. */
static int check_diff(CliOptions *o, const ParseState *ps, int rest, char **args, AvErr *e) {
    if (o->run.batch.path || o->run.predict.k || o->run.predict.generate_n || o->run.capture.tokens_only || o->run.stats || o->run.capture.no_special || o->run.capture.words ||
        o->run.capture.hidden || o->run.capture.qk || o->run.output.npy_path || o->run.output.out_dir || ps->pack_set)
        return usage_error(e, "%s", "diff compares two captures: no --batch, --predict, --generate, --tokens-only, "
                                 "--stats, --no-special, --words, --hidden, --qk, --npy, --out-dir or --pack-tokens");
    if (o->run.capture.measure != MEASURE_ATTENTION) return usage_error(e, "%s", "diff compares attention: no --measure norm");
    if (o->diff_spec.model_b ? rest != 1 : rest != 2)
        return usage_error(e, "%s", o->diff_spec.model_b ? "diff --model A --model B takes one TEXT (run on both models)"
                                            : "diff takes TEXT_A TEXT_B (one model), or --model A --model B TEXT");
    o->run.text_a = args[0];
    o->run.text_b = o->diff_spec.model_b ? NULL : args[1];
    return 0;
}

/* A run's page past --long-from (run.c, output.h's html_write_long) keeps no
 * n x n matrix, so it is written only when the page is all the run asks for:
 * 0, or the first option it cannot honour. */
static const char *long_page_conflict(const CliOptions *o) {
    const RunSpec *r = &o->run;
    const LensSpec *ls = &r->lens;
    if (r->batch.path) return "--batch";
    if (r->output.json_path) return "--json";
    if (r->output.npy_path) return "--npy";
    if (r->capture.tokens_only) return "--tokens-only";
    if (r->capture.telemetry) return "--telemetry";
    if (r->capture.qk) return "--qk";
    if (r->capture.hidden) return "--hidden";
    if (r->stats) return "--stats";
    if (r->predict.generate_n) return "--generate";
    if (r->capture.measure != MEASURE_ATTENTION) return "--measure norm";
    if (r->capture.no_special) return "--no-special";
    if (r->capture.words) return "--words";
    if (o->sel_layers) return "--layers";
    if (o->sel_heads) return "--heads";
    if (ls->lens_k) return "--logit-lens";
    if (ls->attribution) return "--attribution";
    if (ls->ablate) return "--ablate";
    if (ls->flow) return "--flow";
    if (r->decoder_text) return "--decoder-text";
    return NULL;
}

/* A run: one input (TEXT [TEXT_B]) or --batch. */
static int check_run(CliOptions *o, const ParseState *ps, int rest, char **args, AvErr *e) {
    const char *clash = long_page_conflict(o);
    if (ps->long_from && clash)
        return usage_error(e, "--long-from writes a long input's page (--html, for one TEXT) and no whole matrix: not with %s",
                           clash);
    /* without --long-from the default applies where the page is all that was asked, else the whole matrices as ever */
    o->run.output.long_from = clash ? 0 : o->serve_spec.long_from;
    if (!o->run.predict.generate_n && (o->run.predict.temperature > 0 || o->sampling_opts || o->run.predict.stop))
        return usage_error(e, "%s", "--temperature, --top-p, --seed and --stop go with --generate");
    if (o->sampling_opts && o->run.predict.temperature <= 0)
        return usage_error(e, "%s", "--top-p and --seed choose how to sample: add --temperature T > 0 (greedy takes no seed)");
    if ((o->run.predict.k || o->run.predict.generate_n) && (o->run.capture.no_special || o->run.capture.words || o->run.stats || o->run.capture.tokens_only))
        return usage_error(e, "%s", "--predict and --generate show every token: not with --no-special, --words, --stats or --tokens-only");
    if (o->run.predict.generate_n && rest == 2 && !o->run.batch.path)
        return usage_error(e, "%s", "--generate continues one text, not a pair");
    if (o->run.output.out_dir && !o->run.batch.path) return usage_error(e, "%s", "--out-dir goes with --batch");
    if (o->run.decoder_text) {
        const RunSpec *r = &o->run;
        if (r->predict.generate_n)
            return usage_error(e, "%s", "--decoder-text gives the decoder its tokens; --generate makes them: one or the other");
        if (r->batch.path || r->capture.tokens_only || r->capture.telemetry || rest == 2)
            return usage_error(e, "%s", "--decoder-text goes with one source TEXT: not with a second text, --batch "
                                        "(its lines are SOURCE<TAB>TARGET), --tokens-only or --telemetry");
    }
    if (o->run.capture.telemetry) {
        const RunSpec *r = &o->run;
        if (r->predict.k || r->predict.generate_n || r->stats || r->capture.tokens_only || r->capture.no_special ||
            r->capture.words || r->capture.qk || r->capture.hidden || r->output.html_path || r->output.npy_path ||
            r->output.out_dir || r->capture.measure != MEASURE_ATTENTION || r->lens.lens_k || r->lens.attribution ||
            r->lens.ablate || r->lens.flow)
            return usage_error(e, "%s", "--telemetry writes each row's statistics instead of the matrices: not with "
                                        "--html, --npy, --out-dir, --qk, --hidden, --stats, --predict, --generate, "
                                        "--no-special, --words, --tokens-only, --measure norm, --logit-lens, --attribution, --ablate or --flow");
        if (!r->output.json_path) return usage_error(e, "%s", "--telemetry writes to --json FILE (or - for stdout)");
    }
    const LensSpec *ls = &o->run.lens;
    const int lens_any = ls->lens_k || ls->attribution || ls->ablate || ls->flow;
    if (lens_any && (o->run.batch.path || o->run.stats || o->run.capture.tokens_only || o->run.capture.no_special || o->run.capture.words))
        return usage_error(e, "%s", "--logit-lens, --attribution, --target, --ablate and --flow read one input's own tokens: "
                                    "not with --batch, --stats, --tokens-only, --no-special or --words");
    if (ls->flow && o->sel_heads)
        return usage_error(e, "%s", "--flow weighs every head of the layers it traces: not with --heads");
    for (int i = 1; ls->flow && i < o->n_sel_layers; i++)
        if (o->sel_layers[i] != o->sel_layers[i - 1] + 1)
            return usage_error(e, "%s", "--flow traces down through consecutive layers: give --layers as one range (e.g. 4-11)");
    if (ls->attribution && !o->run.predict.k && !o->run.predict.generate_n)
        return usage_error(e, "%s", "--attribution and --target go with --predict K or --generate N");
    if (ls->position >= 0 && !ls->attribution && !ls->ablate && !ls->flow)
        return usage_error(e, "%s", "--position goes with --attribution, --target, --ablate or --flow");
    if (o->run.capture.tokens_only && (o->run.stats || o->run.output.npy_path || o->run.output.out_npy || o->run.output.html_path || o->run.output.out_html))
        return usage_error(e, "%s", "--tokens-only writes tokens only (no --stats, --npy or --html)");
    if (o->run.capture.tokens_only && o->run.capture.measure != MEASURE_ATTENTION)
        return usage_error(e, "%s", "--tokens-only runs no model: no --measure norm");
    if (o->run.batch.path) {
        if (rest > 0) return usage_error(e, "--batch takes its inputs from the file, not '%s'", args[0]);
    } else {
        if (rest < 1) return usage_error(e, "%s", "missing TEXT");
        if (rest > 2) return usage_error(e, "too many arguments: '%s' (quote the text)", args[2]);
        o->run.text_a = args[0];
        o->run.text_b = rest == 2 ? args[1] : NULL;
    }
    return 0;
}

/* The options read, checked against the command they go with. */
static int check_command(CliOptions *o, const ParseState *ps, int rest, char **args, AvErr *e) {
    if (o->run.capture.telemetry && (ps->stats_cmd || o->merge || o->run.heads.on || o->render || o->serve || o->diff))
        return usage_error(e, "%s", "--telemetry goes with a run (attnviz TEXT or --batch FILE), not a subcommand");
    /* the commands that take no --batch refuse it themselves */
    if (ps->shard_set && !o->run.batch.path)
        return usage_error(e, "%s", "--shard goes with --batch FILE (a run, --stats or attnviz heads)");
    if (ps->heads_only && !o->run.heads.on)
        return usage_error(e, "%s", "--score, --pattern, --exclude-bos, --exclude-current and --induction-* go with attnviz heads");
    if (ps->serve_opts && !o->serve)
        return usage_error(e, "%s", "--port, --host, --open, --cache-mb, --timeout, --queue, --idle-timeout and "
                                    "--qk-precision go with attnviz serve");
    if (ps->long_from && (ps->stats_cmd || o->merge || o->run.heads.on || o->render || o->diff))
        return usage_error(e, "%s", "--long-from goes with attnviz serve or a run's page (attnviz --html FILE TEXT)");
    const LensSpec *ls = &o->run.lens;
    if ((ls->lens_k || ls->attribution || ls->ablate || ls->flow || ls->position >= 0 || ps->ablate_mode) &&
        (ps->stats_cmd || o->merge || o->run.heads.on || o->render || o->serve || o->diff))
        return usage_error(e, "%s", "--logit-lens, --attribution, --target, --position, --ablate and --flow go with a run on one text");
    if (ps->ablate_mode && !ls->ablate) return usage_error(e, "%s", "--ablate-mode goes with --ablate");
    if (o->run.decoder_text && (ps->stats_cmd || o->merge || o->run.heads.on || o->render || o->serve))
        return usage_error(e, "%s", "--decoder-text goes with a run on one source text (attnviz --model DIR SOURCE "
                                    "--decoder-text TEXT) or diff");
    if (ps->stats_cmd || o->merge) return check_stats(o, ps, rest, args, e);
    if (o->run.heads.on) return check_heads(o, rest, args, e);
    if (o->render) return check_render(o, rest, args, e);
    if (o->serve) return check_serve(o, rest, args, e);
    if (o->render_spec.meta) return usage_error(e, "%s", "--meta goes with attnviz render");
    if (o->diff) return check_diff(o, ps, rest, args, e);
    return check_run(o, ps, rest, args, e);
}

/* getopt_long's codes of the long options. */
enum { O_MODEL = 256, O_JSON, O_HTML, O_BATCH, O_TEMPLATES, O_LAYER, O_HEAD, O_TOKENS, O_QK, O_HIDDEN,
       O_PREC, O_PROFILE, O_CASED, O_UNCASED, O_THREADS, O_QUIET, O_VERSION, O_LAYERS, O_HEADS, O_NOSPECIAL,
       O_WORDS, O_NPY, O_OUTDIR, O_STATS, O_STRICT, O_MAXTOK, O_MAXCAP, O_TELEMETRY, O_PREDICT, O_GENERATE, O_TEMP, O_TOPP,
       O_SEED, O_STOP, O_VIEW, O_THEME, O_SHOWHEADS, O_META, O_PACK, O_PORT, O_HOST, O_OPEN, O_CACHEMB,
       O_TIMEOUT, O_IDLE, O_QUEUE, O_LONGFROM, O_TOP, O_SCORE, O_PATTERN, O_EXBOS,
       O_EXCUR, O_INDSEQS, O_INDLEN, O_MERGE, O_SHARD, O_LENS, O_ATTR, O_TARGET, O_POSITION, O_ABLATE, O_ABLMODE, O_FLOW, O_DECTEXT };

/* --measure's and --qk-precision's codes, apart from the list above. */
enum { O_MEASURE = 1024, O_QKPREC };

/* --ablate all | L.H,L.H,...: the pairs into *pairs (NULL for all). */
static int parse_ablate(const char *arg, int **pairs, int *n) {
    free(*pairs);
    *pairs = NULL, *n = 0;
    if (!strcmp(arg, "all")) return 0;
    size_t cap = 1;
    for (const char *p = arg; *p; p++) cap += *p == ',';
    if (!(*pairs = malloc(cap * 2 * sizeof **pairs))) return -1;
    const char *p = arg;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') return -1;
        long l = strtol(p, &end, 10);
        if (*end != '.' || end[1] < '0' || end[1] > '9' || l > 100000) return -1;
        long h = strtol(end + 1, &end, 10);
        if (h > 100000) return -1;
        (*pairs)[2 * *n] = (int)l, (*pairs)[2 * *n + 1] = (int)h, (*n)++;
        if (!*end) return 0;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

/* One option into the settings: 0, CLI_HELP or CLI_VERSION, or -1 with a usage
 * error (opt: the option as written, for messages). */
/* The options of attnviz serve; -2: not one of them. */
static int parse_serve_option(CliOptions *o, ParseState *ps, int c, const char *arg, AvErr *e) {
    switch (c) {
    case O_PORT:
        if (parse_int(arg, 0, 65535, &o->serve_spec.port)) return usage_error(e, "--port needs 0 to 65535, got '%s'", arg);
        ps->serve_opts = 1;
        break;
    case O_HOST: o->serve_spec.host = arg, ps->serve_opts = 1; break;
    case O_OPEN: o->serve_spec.open_browser = 1, ps->serve_opts = 1; break;
    case O_CACHEMB:
        if (parse_real(arg, 1, 1e7, &o->serve_spec.cache_mb)) return usage_error(e, "--cache-mb needs a size in MB >= 1, got '%s'", arg);
        ps->serve_opts = 1;
        break;
    case O_IDLE:
        if (parse_int(arg, 1, 3600, &o->serve_spec.idle_s)) return usage_error(e, "--idle-timeout needs 1 to 3600 seconds, got '%s'", arg);
        ps->serve_opts = 1;
        break;
    case O_LONGFROM:
        /* at most 8192: past it the server builds no whole matrix (serve.c), so the page must read tiles */
        if (parse_int(arg, 1, 8192, &o->serve_spec.long_from)) return usage_error(e, "--long-from needs 1 to 8192 tokens, got '%s'", arg);
        ps->long_from = 1;
        break;
    case O_QUEUE:
        if (parse_int(arg, 1, 4096, &o->serve_spec.max_queue)) return usage_error(e, "--queue needs 1 to 4096, got '%s'", arg);
        ps->serve_opts = 1;
        break;
    case O_TIMEOUT:
        if (parse_real(arg, 0.1, 86400, &o->serve_spec.timeout_s)) return usage_error(e, "--timeout needs seconds from 0.1, got '%s'", arg);
        ps->serve_opts = 1;
        break;
    case O_QKPREC:
        if (!strcmp(arg, "f32")) o->serve_spec.qk_prec = CAP_QK_F32;
        else if (!strcmp(arg, "f16")) o->serve_spec.qk_prec = CAP_QK_F16;
        else if (!strcmp(arg, "bf16")) o->serve_spec.qk_prec = CAP_QK_BF16;
        else return usage_error(e, "--qk-precision is f32, f16 or bf16, not '%s'", arg);
        ps->serve_opts = 1;
        break;
    default: return -2;
    }
    return 0;
}

/* The options beyond attention maps (--measure, --telemetry, the logit lens,
 * attribution, ablation, flow); -2: not one of them. */
static int parse_analysis_option(CliOptions *o, ParseState *ps, int c, const char *arg, AvErr *e) {
    (void)ps;
    switch (c) {
    case O_TELEMETRY:
        if (parse_int(arg, 0, CAP_TEL_MAX_TOP, &o->run.capture.telemetry_top))
            return usage_error(e, "--telemetry needs a count of top keys from 0 to %d, got '%s'", CAP_TEL_MAX_TOP, arg);
        o->run.capture.telemetry = 1;
        break;
    case O_LENS:
        if (parse_int(arg, 1, 100, &o->run.lens.lens_k)) return usage_error(e, "--logit-lens needs a count from 1 to 100, got '%s'", arg);
        break;
    case O_ATTR: o->run.lens.attribution = 1; break;
    case O_TARGET:
        if (!arg[0]) return usage_error(e, "%s", "--target needs a token");
        o->run.lens.target = arg;
        o->run.lens.attribution = 1;
        break;
    case O_POSITION:
        if (parse_int(arg, 0, INT_MAX, &o->run.lens.position)) return usage_error(e, "--position needs a token index >= 0, got '%s'", arg);
        break;
    case O_ABLATE:
        if (parse_ablate(arg, &o->ablate_pairs, &o->n_ablate_pairs))
            return usage_error(e, "--ablate needs all or heads as LAYER.HEAD,... (e.g. 0.3,2.1), got '%s'", arg);
        o->run.lens.ablate = 1;
        o->run.lens.ablate_pairs = o->ablate_pairs, o->run.lens.n_ablate = o->n_ablate_pairs;
        break;
    case O_FLOW:
        o->run.lens.flow = 1;
        if (arg && parse_real(arg, 0, 1, &o->run.lens.flow_threshold) == 0 && o->run.lens.flow_threshold > 0 &&
            o->run.lens.flow_threshold < 1)
            break;
        if (arg) return usage_error(e, "--flow needs a threshold in (0, 1), got '%s'", arg);
        o->run.lens.flow_threshold = 0.04;
        break;
    case O_ABLMODE:
        if (strcmp(arg, "zero") && strcmp(arg, "mean")) return usage_error(e, "--ablate-mode is zero or mean, not '%s'", arg);
        o->run.lens.ablate_mean = !strcmp(arg, "mean");
        ps->ablate_mode = 1;
        break;
    case O_MEASURE:
        if (!strcmp(arg, "attention")) o->run.capture.measure = MEASURE_ATTENTION;
        else if (!strcmp(arg, "norm")) o->run.capture.measure = MEASURE_NORM;
        else return usage_error(e, "--measure is attention or norm, not '%s'", arg);
        break;
    default: return -2;
    }
    return 0;
}

/* The options of attnviz heads; -2: not one of them. */
static int parse_heads_option(CliOptions *o, ParseState *ps, int c, const char *arg, AvErr *e) {
    switch (c) {
    case O_SCORE: {
        int k = heads_score_by_name(arg);
        if (k < 0) return usage_error(e, "--score is previous, next, self, first, sep, duplicate, induction, distance, "
                                      "entropy or pattern, not '%s'", arg);
        int dup = 0;
        for (int i = 0; i < o->run.heads.n_scores; i++) dup |= o->run.heads.scores[i] == k;
        if (!dup && o->run.heads.n_scores < (int)(sizeof o->run.heads.scores / sizeof o->run.heads.scores[0])) o->run.heads.scores[o->run.heads.n_scores++] = k;
        ps->heads_only = 1;
        break;
    }
    case O_PATTERN: o->run.heads.pattern = arg, ps->heads_only = 1; break;
    case O_EXBOS: o->run.heads.exclude_bos = 1, ps->heads_only = 1; break;
    case O_EXCUR: o->run.heads.exclude_current = 1, ps->heads_only = 1; break;
    case O_INDSEQS:
        if (parse_int(arg, 1, 10000, &o->run.heads.induction_seqs)) return usage_error(e, "--induction-seqs needs 1 to 10000, got '%s'", arg);
        ps->heads_only = 1;
        break;
    case O_INDLEN:
        if (parse_int(arg, 1, 100000, &o->run.heads.induction_len)) return usage_error(e, "--induction-len needs 1 to 100000, got '%s'", arg);
        ps->heads_only = 1;
        break;
    default: return -2;
    }
    return 0;
}

static int parse_option(CliOptions *o, ParseState *ps, int c, const char *arg, const char *opt, AvErr *e) {
    switch (c) {
    case O_MODEL:
        if (o->diff && o->diff_spec.model_b) return usage_error(e, "%s", "diff compares at most two models (--model A --model B)");
        if (o->diff && o->model.path) {
            o->diff_spec.model_b = arg;
            break;
        }
        o->model.path = arg;
        if (o->serve) {
            if (o->n_serve_models == 16) return usage_error(e, "%s", "serve: at most 16 models");
            const char **nm = realloc(o->serve_models, (size_t)(o->n_serve_models + 1) * sizeof *nm);
            if (!nm) return usage_error(e, "%s", "out of memory");
            o->serve_models = nm;
            o->serve_models[o->n_serve_models++] = arg;
        }
        break;
    case O_TOP: /* diff's table, or heads' ranking */
        if (o->run.heads.on) {
            if (parse_int(arg, 0, 1000000, &o->run.heads.top_k)) return count_error(e, "--top", arg, 1000000, "a count >= 0");
            break;
        }
        if (!o->diff) return usage_error(e, "%s", "--top goes with attnviz diff or attnviz heads");
        if (parse_int(arg, 1, 1 << 20, &o->diff_spec.top)) return count_error(e, "--top", arg, 1 << 20, "a count >= 1");
        break;
    case O_JSON: o->run.output.json_path = arg; break;
    case O_HTML:
        if (ps->out_dir_mode) o->run.output.out_html = 1;
        else o->run.output.html_path = arg;
        break;
    case O_NPY:
        if (ps->out_dir_mode) o->run.output.out_npy = 1;
        else o->run.output.npy_path = arg;
        break;
    case O_OUTDIR: o->run.output.out_dir = arg; break;
    case O_LAYERS:
        if (parse_list(arg, &o->sel_layers, &o->n_sel_layers)) return usage_error(e, "--layers needs a list like 0,5-11, got '%s'", arg);
        break;
    case O_HEADS:
        if (parse_list(arg, &o->sel_heads, &o->n_sel_heads)) return usage_error(e, "--heads needs a list like 0-3,8, got '%s'", arg);
        break;
    case O_NOSPECIAL: o->run.capture.no_special = 1; break;
    case O_WORDS: o->run.capture.words = 1; break;
    case O_STATS: o->run.stats = 1; break;
    case O_STRICT: o->run.batch.strict = 1; break;
    case O_MAXTOK:
        if (parse_int(arg, 1, INT_MAX, &o->run.capture.max_tokens)) return count_error(e, "--max-tokens", arg, INT_MAX, "a count >= 1");
        break;
    case O_MAXCAP:
        if (parse_size(arg, &o->run.capture.max_capture)) return usage_error(e, "--max-capture needs a size like 8G or 500M, got '%s'", arg);
        break;
    case O_PREDICT:
        if (parse_int(arg, 1, 100, &o->run.predict.k)) return usage_error(e, "--predict needs a count from 1 to 100, got '%s'", arg);
        break;
    case O_GENERATE:
        if (parse_int(arg, 1, 1 << 20, &o->run.predict.generate_n)) return count_error(e, "--generate", arg, 1 << 20, "a token count >= 1");
        break;
    case O_TEMP:
        if (parse_real(arg, 0, 100, &o->run.predict.temperature)) return usage_error(e, "--temperature needs a number from 0 to 100, got '%s'", arg);
        break;
    case O_TOPP:
        if (parse_real(arg, 1e-9, 1, &o->run.predict.top_p) ) return usage_error(e, "--top-p needs a number in (0, 1], got '%s'", arg);
        o->sampling_opts = 1;
        break;
    case O_SEED: {
        char *end;
        errno = 0;
        o->run.predict.seed = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-') return usage_error(e, "--seed needs a whole number >= 0, got '%s'", arg);
        o->sampling_opts = 1;
        break;
    }
    case O_DECTEXT:
        o->run.decoder_text = arg;
        break;
    case O_STOP:
        if (!arg[0]) return usage_error(e, "%s", "--stop needs a non-empty string");
        o->run.predict.stop = arg;
        break;
    case O_VIEW: {
        char views[256]; /* the views the built-in templates register */
        if (!html_view_known(arg, o->diff, views, sizeof views))
            return usage_error(e, "--view is %s, not '%s'", views, arg);
        o->run.output.view = arg;
        break;
    }
    case O_THEME:
        if (strcmp(arg, "light") && strcmp(arg, "dark")) return usage_error(e, "--theme is light or dark, not '%s'", arg);
        o->run.output.theme = arg;
        break;
    case O_SHOWHEADS:
        if (parse_list(arg, &o->show_heads, &o->n_show_heads)) return usage_error(e, "--show-heads needs a list like 0-3,8, got '%s'", arg);
        break;
    case O_META: o->render_spec.meta = arg; break;
    case O_PACK:
        if (parse_int(arg, 0, 1 << 16, &o->run.batch.pack_tokens)) return usage_error(e, "--pack-tokens needs 0 to 65536, got '%s'", arg);
        ps->pack_set = 1;
        break;
    case O_MERGE: o->merge = 1; break;
    case O_SHARD:
        if (parse_shard(arg, &o->run.batch.shard_index, &o->run.batch.shard_count, e) != 0) return -1;
        ps->shard_set = 1;
        break;
    case O_BATCH: o->run.batch.path = arg; break;
    case O_TEMPLATES: o->run.output.templates_dir = arg; break;
    case O_LAYER:
        if (parse_int(arg, 0, INT_MAX, &o->run.sel.layer)) return count_error(e, "--layer", arg, INT_MAX, "a layer index >= 0");
        break;
    case O_HEAD:
        if (parse_int(arg, 0, INT_MAX, &o->run.sel.head)) return count_error(e, "--head", arg, INT_MAX, "a head index >= 0");
        break;
    case O_TOKENS: o->run.capture.tokens_only = 1; break;
    case O_QK: o->run.capture.qk = 1; break;
    case O_HIDDEN: o->run.capture.hidden = 1; break;
    case O_PREC:
        if (parse_int(arg, 1, 9, &o->run.output.precision)) return usage_error(e, "--precision needs 1 to 9, got '%s'", arg);
        break;
    case O_PROFILE: o->run.profile = 1; break;
    case O_CASED: o->model.lowercase = 0; break;
    case O_UNCASED: o->model.lowercase = 1; break;
    case O_THREADS:
        if (parse_int(arg, 1, 1024, &o->threads)) return usage_error(e, "--threads needs 1 to 1024, got '%s'", arg);
        break;
    case O_QUIET: o->run.quiet = 1; break;
    case 'h': return CLI_HELP;
    case O_VERSION: return CLI_VERSION;
    case ':': return usage_error(e, "option '%s' needs a value", opt);
    default: {
        int rc = parse_serve_option(o, ps, c, arg, e);
        if (rc == -2) rc = parse_analysis_option(o, ps, c, arg, e);
        if (rc == -2) rc = parse_heads_option(o, ps, c, arg, e);
        if (rc == -2) return usage_error(e, "unknown option '%s'", opt);
        return rc;
    }
    }
    return 0;
}

static int parse_args(CliOptions *o, int argc, char **argv, AvErr *e) {
    memset(o, 0, sizeof *o);
    o->run.sel.layer = o->run.sel.head = -1;
    o->run.output.precision = 6;
    o->run.batch.pack_tokens = CLI_PACK_TOKENS;
    o->run.batch.shard_count = 1;
    o->model.lowercase = -1;
    o->run.predict.top_p = 1.0;
    o->run.lens.position = -1;
    o->serve_spec.port = 8765;
    o->serve_spec.cache_mb = 2048;
    o->serve_spec.timeout_s = 60;
    o->serve_spec.idle_s = 20;
    o->serve_spec.max_queue = 64;
    o->serve_spec.long_from = 4096;
    /* With --out-dir, --html and --npy name no file: they add a file per input. */
    ParseState ps = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--out-dir") || !strncmp(argv[i], "--out-dir=", 10)) ps.out_dir_mode = 1;
    }
    const int file_arg = ps.out_dir_mode ? no_argument : required_argument;
    const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"json", required_argument, 0, O_JSON},
        {"html", file_arg, 0, O_HTML},              {"batch", required_argument, 0, O_BATCH},
        {"npy", file_arg, 0, O_NPY},                {"out-dir", required_argument, 0, O_OUTDIR},
        {"layers", required_argument, 0, O_LAYERS}, {"heads", required_argument, 0, O_HEADS},
        {"no-special", no_argument, 0, O_NOSPECIAL}, {"words", no_argument, 0, O_WORDS},
        {"stats", no_argument, 0, O_STATS},         {"strict", no_argument, 0, O_STRICT},
        {"max-tokens", required_argument, 0, O_MAXTOK}, {"max-capture", required_argument, 0, O_MAXCAP},
        {"telemetry", required_argument, 0, O_TELEMETRY},
        {"templates", required_argument, 0, O_TEMPLATES},
        {"predict", required_argument, 0, O_PREDICT}, {"generate", required_argument, 0, O_GENERATE},
        {"temperature", required_argument, 0, O_TEMP}, {"top-p", required_argument, 0, O_TOPP},
        {"seed", required_argument, 0, O_SEED},     {"stop", required_argument, 0, O_STOP},
        {"view", required_argument, 0, O_VIEW},     {"theme", required_argument, 0, O_THEME},
        {"show-heads", required_argument, 0, O_SHOWHEADS}, {"meta", required_argument, 0, O_META},
        {"pack-tokens", required_argument, 0, O_PACK}, {"shard", required_argument, 0, O_SHARD},
        {"measure", required_argument, 0, O_MEASURE},
        {"logit-lens", required_argument, 0, O_LENS}, {"attribution", no_argument, 0, O_ATTR},
        {"target", required_argument, 0, O_TARGET}, {"position", required_argument, 0, O_POSITION},
        {"ablate", required_argument, 0, O_ABLATE}, {"ablate-mode", required_argument, 0, O_ABLMODE},
        {"flow", optional_argument, 0, O_FLOW},    {"decoder-text", required_argument, 0, O_DECTEXT},
        {"port", required_argument, 0, O_PORT},     {"host", required_argument, 0, O_HOST},
        {"open", no_argument, 0, O_OPEN},           {"cache-mb", required_argument, 0, O_CACHEMB},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"idle-timeout", required_argument, 0, O_IDLE},
        {"long-from", required_argument, 0, O_LONGFROM}, {"qk-precision", required_argument, 0, O_QKPREC},
        {"queue", required_argument, 0, O_QUEUE},
        {"top", required_argument, 0, O_TOP},
        {"score", required_argument, 0, O_SCORE},
        {"pattern", required_argument, 0, O_PATTERN}, {"exclude-bos", no_argument, 0, O_EXBOS},
        {"exclude-current", no_argument, 0, O_EXCUR}, {"induction-seqs", required_argument, 0, O_INDSEQS},
        {"induction-len", required_argument, 0, O_INDLEN}, {"merge", no_argument, 0, O_MERGE},
        {"layer", required_argument, 0, O_LAYER},   {"head", required_argument, 0, O_HEAD},
        {"tokens-only", no_argument, 0, O_TOKENS},  {"qk", no_argument, 0, O_QK},
        {"hidden", no_argument, 0, O_HIDDEN},       {"precision", required_argument, 0, O_PREC},
        {"profile", no_argument, 0, O_PROFILE},     {"cased", no_argument, 0, O_CASED},
        {"uncased", no_argument, 0, O_UNCASED},     {"threads", required_argument, 0, O_THREADS},
        {"quiet", no_argument, 0, O_QUIET},         {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, O_VERSION},     {0, 0, 0, 0},
    };
    o->run.heads.top_k = 5;
    o->run.heads.induction_seqs = 8, o->run.heads.induction_len = 20;
    if (argc > 1 && !strcmp(argv[1], "render")) {
        o->command = "render";
        o->render = 1;
        argv++, argc--;
    } else if (argc > 1 && !strcmp(argv[1], "serve")) {
        o->command = "serve";
        o->serve = 1;
        argv++, argc--;
    } else if (argc > 1 && !strcmp(argv[1], "diff")) {
        o->command = "diff";
        o->diff = 1;
        argv++, argc--;
    } else if (argc > 1 && !strcmp(argv[1], "heads")) {
        o->command = "heads";
        o->run.heads.on = 1;
        argv++, argc--;
    } else if (argc > 1 && !strcmp(argv[1], "stats")) {
        o->command = "stats";
        ps.stats_cmd = 1;
        argv++, argc--;
    }
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *arg = optarg;
        /* --flow [T]: a number right after it is its threshold (--flow=T says so outright) */
        if (c == O_FLOW && !arg && optind < argc && looks_numeric(argv[optind])) arg = argv[optind++];
        int rc = parse_option(o, &ps, c, arg, argv[optind - 1], e);
        if (rc != 0) return rc;
    }
    return check_command(o, &ps, argc - optind, argv + optind, e);
}

Selection cli_selection(const CliOptions *o) {
    return (Selection){o->run.sel.layer, o->run.sel.head, o->sel_layers, o->n_sel_layers, o->sel_heads, o->n_sel_heads,
                       o->show_heads, o->n_show_heads};
}

int cli_parse(CliOptions *o, int argc, char **argv, AvErr *e) {
    int rc = parse_args(o, argc, argv, e);
    if (rc != CLI_RUN) return rc;
    /* the settings each command hands on, complete: nothing below reads argv's struct */
    o->run.sel = cli_selection(o);
    o->model.tokenizer_only = o->run.capture.tokens_only;
    ServeSpec *sv = &o->serve_spec;
    sv->models = o->serve_models, sv->n_models = o->n_serve_models;
    sv->lowercase = o->model.lowercase;
    sv->page = o->run;
    return CLI_RUN;
}

int cli_run(const CliOptions *o, AvErr *e) {
    if (o->merge) return heads_merge_files(o->merge_files, o->n_merge_files, o->run.output.json_path, e);
    if (o->render) return pipeline_render(&o->render_spec, &o->run, e);
    model_set_threads(o->threads);
    if (o->diff) return pipeline_diff(&o->model, &o->diff_spec, &o->run, e);
    if (o->serve) return serve_run(&o->serve_spec, e);
    Pipeline *p = NULL;
    const char *dir = NULL, *why = "";
    if (pipeline_open(&p, &o->model, &o->run, &dir, &why, e) != 0) {
        pipeline_close(p);
        return -1;
    }
    const ModelConfig *c = pipeline_config(p);
    if (!o->run.quiet) {
        av_info("model %s (%s)%s", dir, why,
                c->is_demo ? " — the demo model: constructed, not trained; `make weights` fetches bert-base-uncased" : "");
    }
    int rc = -1;
    /* an encoder-decoder's layers: its deeper stack's (run_seq2seq.c keeps each stack's layers in range) */
    const int sel_layers = c->enc_dec && c->dec_layers > c->num_layers ? c->dec_layers : c->num_layers;
    if (sel_check(&o->run.sel, sel_layers, c->num_heads, "model", e) != 0) goto out;
    if (o->run.decoder_text && !c->enc_dec) {
        av_err_usage(e, "--decoder-text goes with an encoder-decoder model (bart, marian, t5 or mt5); %s is a %s (%s) model",
                     dir, c->causal ? "causal" : "masked", c->model_type);
        goto out;
    }
    if (c->enc_dec && !o->run.capture.tokens_only) {
        const RunSpec *r = &o->run;
        if (r->heads.on && !r->batch.path && !r->text_b) {
            av_err_usage(e, "attnviz heads on an encoder-decoder (%s) model scores SOURCE TARGET (the decoder's text "
                            "second), or --batch lines SOURCE<TAB>TARGET", c->model_type);
            goto out;
        }
        if (!r->decoder_text && !r->predict.generate_n && !r->batch.path && !r->heads.on) {
            av_err_usage(e, "%s is an encoder-decoder (%s) model: give the decoder's text (--decoder-text TEXT) or "
                            "let it decode (--generate N)", dir, c->model_type);
            goto out;
        }
        if ((r->text_b && !r->heads.on) || r->capture.qk || r->capture.hidden || r->capture.telemetry ||
            r->capture.measure != MEASURE_ATTENTION || r->capture.no_special || r->capture.words || r->sel.heads ||
            r->lens.lens_k || r->lens.attribution || r->lens.ablate || r->lens.flow) {
            av_err_usage(e, "%s is an encoder-decoder (%s) model: one source text with --decoder-text or --generate, "
                            "or --batch lines, written to --json, --npy, the page or --stats (no second text, --qk, "
                            "--hidden, --telemetry, --measure norm, --no-special, --words, --heads or the "
                            "residual-stream options)",
                         dir, c->model_type);
            goto out;
        }
        if (o->run.output.out_dir && mkdir(o->run.output.out_dir, 0777) != 0 && errno != EEXIST) {
            av_err(e, "%s: cannot create: %s", o->run.output.out_dir, strerror(errno));
            goto out;
        }
        rc = run_seq2seq_pipeline(p, e);
        goto out;
    }
    if (o->run.predict.generate_n && !c->causal) {
        av_err_usage(e, "--generate continues text with a causal model; %s is a masked (%s) model: "
                        "try --predict K with [MASK]/<mask> in the text", dir, c->model_type);
        goto out;
    }
    const char *no_head = pipeline_head_missing(p);
    if ((o->run.predict.k || o->run.predict.generate_n) && no_head) {
        av_err_usage(e, "--%s needs a language-model head, and %s has none: %s",
                     o->run.predict.generate_n ? "generate" : "predict", dir, no_head);
        goto out;
    }
    const LensSpec *ls = &o->run.lens;
    if ((ls->lens_k || ls->attribution || ls->ablate) && (!c->causal || !c->pre_ln)) {
        av_err_usage(e, "--%s reads a causal model's residual stream; %s is a masked (%s) model", ls->lens_k ? "logit-lens"
                     : ls->attribution ? "attribution" : "ablate", dir, c->model_type);
        goto out;
    }
    if (ls->flow && (!c->causal || !c->pre_ln)) {
        av_err_usage(e, "--flow reads a causal pre-norm model's residual stream; %s is a masked (%s) model", dir,
                     c->model_type);
        goto out;
    }
    if ((ls->lens_k || ls->attribution || ls->ablate) && no_head) {
        av_err_usage(e, "--%s needs a language-model head, and %s has none: %s", ls->lens_k ? "logit-lens"
                     : ls->attribution ? "attribution" : "ablate", dir, no_head);
        goto out;
    }
    if (o->run.output.out_dir && mkdir(o->run.output.out_dir, 0777) != 0 && errno != EEXIST) {
        av_err(e, "%s: cannot create: %s", o->run.output.out_dir, strerror(errno));
        goto out;
    }
    rc = pipeline_run(p, e);
out:
    pipeline_close(p);
    return rc;
}
