/* cli.c — options, model selection, and the text -> tokens -> encoder ->
 * capture -> writers pipeline for one input or a batch. */
#include "cli.h"

#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert.h"
#include "config.h"
#include "output.h"
#include "tokenizer.h"
#include "util.h"

#ifndef ATTNVIZ_DATADIR
#define ATTNVIZ_DATADIR "/usr/local/share/attnviz"
#endif

#define DEMO_NOTE "attnviz demo model: weights constructed by hand (not trained) so that each head has a known pattern. For real attention run `make weights` (bert-base-uncased) and use --model weights/bert-base-uncased."

static void usage(FILE *f) {
    fputs("Usage: attnviz [OPTIONS] TEXT [TEXT_B]\n"
          "       attnviz [OPTIONS] --batch FILE|-\n"
          "Run a BERT encoder on TEXT (and TEXT_B for a sentence pair), capture the\n"
          "attention of every layer and head, and write JSON and/or an HTML page.\n"
          "\n"
          "Model:\n"
          "  --model DIR        Hugging Face folder (config.json, vocab.txt, model.safetensors).\n"
          "                     Default: $ATTNVIZ_MODEL, else weights/bert-base-uncased, else the demo model\n"
          "  --cased, --uncased override the tokenizer's lower-casing\n"
          "  --threads N        cap the BLAS threads\n"
          "\n"
          "Output:\n"
          "  --json FILE        write JSON (- for stdout); alone, no HTML is written\n"
          "  --html FILE        write the page (default attnviz.html when no --json)\n"
          "  --qk               include queries and keys in the JSON\n"
          "  --hidden           include every layer's hidden states in the JSON\n"
          "  --precision N      significant digits of JSON floats (1-9, default 6)\n"
          "  --layer N, --head N  the page's initial layer and head (0-based)\n"
          "  --templates DIR    read page templates from DIR instead of the built-in ones\n"
          "\n"
          "Modes:\n"
          "  --tokens-only      tokenize only (needs vocab.txt and config.json) and print JSON\n"
          "  --batch FILE|-     one input per line (TAB separates A and B), JSON Lines out\n"
          "  --profile          per-phase times on stderr (load_ms= tokenize_ms= forward_ms= write_ms=)\n"
          "  --quiet            no informational messages on stderr\n"
          "  -h, --help         this help;  --version  the version\n"
          "\n"
          "Examples:\n"
          "  attnviz \"time flies like an arrow\" --layer 0 --head 8\n"
          "  attnviz --model weights/bert-base-uncased --json out.json \"the cat sat\" \"it was tired\"\n"
          "  attnviz --tokens-only --batch corpus.txt > tokens.jsonl\n",
          f);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("attnviz: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see attnviz --help)\n", stderr);
    return EXIT_USAGE;
}

int cli_parse(CliOptions *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->layer = o->head = -1;
    o->precision = 6;
    o->lowercase = -1;
    enum { O_MODEL = 256, O_JSON, O_HTML, O_BATCH, O_TEMPLATES, O_LAYER, O_HEAD, O_TOKENS, O_QK, O_HIDDEN,
           O_PREC, O_PROFILE, O_CASED, O_UNCASED, O_THREADS, O_QUIET, O_VERSION };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"json", required_argument, 0, O_JSON},
        {"html", required_argument, 0, O_HTML},     {"batch", required_argument, 0, O_BATCH},
        {"templates", required_argument, 0, O_TEMPLATES},
        {"layer", required_argument, 0, O_LAYER},   {"head", required_argument, 0, O_HEAD},
        {"tokens-only", no_argument, 0, O_TOKENS},  {"qk", no_argument, 0, O_QK},
        {"hidden", no_argument, 0, O_HIDDEN},       {"precision", required_argument, 0, O_PREC},
        {"profile", no_argument, 0, O_PROFILE},     {"cased", no_argument, 0, O_CASED},
        {"uncased", no_argument, 0, O_UNCASED},     {"threads", required_argument, 0, O_THREADS},
        {"quiet", no_argument, 0, O_QUIET},         {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, O_VERSION},     {0, 0, 0, 0},
    };
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model_dir = optarg; break;
        case O_JSON: o->json_path = optarg; break;
        case O_HTML: o->html_path = optarg; break;
        case O_BATCH: o->batch_path = optarg; break;
        case O_TEMPLATES: o->templates_dir = optarg; break;
        case O_LAYER:
            if (parse_int(optarg, 0, INT_MAX, &o->layer)) return usage_error("--layer needs a layer index >= 0, got '%s'", optarg);
            break;
        case O_HEAD:
            if (parse_int(optarg, 0, INT_MAX, &o->head)) return usage_error("--head needs a head index >= 0, got '%s'", optarg);
            break;
        case O_TOKENS: o->tokens_only = 1; break;
        case O_QK: o->qk = 1; break;
        case O_HIDDEN: o->hidden = 1; break;
        case O_PREC:
            if (parse_int(optarg, 1, 9, &o->precision)) return usage_error("--precision needs 1 to 9, got '%s'", optarg);
            break;
        case O_PROFILE: o->profile = 1; break;
        case O_CASED: o->lowercase = 0; break;
        case O_UNCASED: o->lowercase = 1; break;
        case O_THREADS:
            if (parse_int(optarg, 1, 1024, &o->threads)) return usage_error("--threads needs 1 to 1024, got '%s'", optarg);
            break;
        case O_QUIET: o->quiet = 1; break;
        case 'h': usage(stdout); return -1;
        case O_VERSION: printf("attnviz %s\n", ATTNVIZ_VERSION); return -1;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    int rest = argc - optind;
    if (o->batch_path) {
        if (rest > 0) return usage_error("--batch takes its inputs from the file, not '%s'", argv[optind]);
    } else {
        if (rest < 1) return usage_error("%s", "missing TEXT");
        if (rest > 2) return usage_error("too many arguments: '%s' (quote the text)", argv[optind + 2]);
        o->text_a = argv[optind];
        o->text_b = rest == 2 ? argv[optind + 1] : NULL;
    }
    return EXIT_OK;
}

/* ---------------------------------------------------------------- model selection */

static int dir_has_model(const char *dir) {
    char *p = av_path_join(dir, "config.json");
    int ok = p && av_file_exists(p);
    free(p);
    return ok;
}

/* Looks for rel under the working directory, then beside the executable, then
 * in the installed data directory. */
static char *find_bundled(const char *rel, const char *datadir_rel) {
    if (dir_has_model(rel)) return strdup(rel);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char *p = av_path_join(exe, rel);
            if (p && dir_has_model(p)) return p;
            free(p);
        }
    }
    if (datadir_rel) {
        char *p = av_path_join(ATTNVIZ_DATADIR, datadir_rel);
        if (p && dir_has_model(p)) return p;
        free(p);
    }
    return NULL;
}

static char *resolve_model(const CliOptions *o, const char **why) {
    if (o->model_dir) {
        *why = "--model";
        return strdup(o->model_dir);
    }
    const char *env = getenv("ATTNVIZ_MODEL");
    if (env && *env) {
        *why = "$ATTNVIZ_MODEL";
        return strdup(env);
    }
    char *p = find_bundled("weights/bert-base-uncased", NULL);
    if (p) {
        *why = "default";
        return p;
    }
    *why = "default: no bert-base-uncased weights found";
    return find_bundled("weights/demo", "demo");
}

static const char *model_display_name(const char *dir, int is_demo) {
    if (is_demo) return "attnviz-demo";
    const char *end = dir + strlen(dir);
    while (end > dir && end[-1] == '/') end--;
    const char *start = end;
    while (start > dir && start[-1] != '/') start--;
    static char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(end - start), start);
    return name[0] ? name : dir;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    const CliOptions *o;
    char *dir;
    BertConfig cfg;
    BertModel model;
    int have_model;
    Tokenizer *tok;
    char **patterns, **descriptions;
    BertRunState rs;
    Capture cap;
    int cap_n;     /* tokens the capture and run state hold */
    double t_load, t_tok, t_fwd, t_write;
} Run;

static int load_all(Run *r, AvErr *e) {
    const CliOptions *o = r->o;
    double t0 = av_now_ms();
    char *vocab = av_path_join(r->dir, "vocab.txt"), *tcfg = av_path_join(r->dir, "tokenizer_config.json");
    char *cfgp = av_path_join(r->dir, "config.json");
    int rc = -1;
    if (!vocab || !tcfg || !cfgp) {
        av_err(e, "out of memory");
        goto done;
    }
    if (!av_file_exists(cfgp)) {
        av_err(e, "%s: no config.json in the model folder", r->dir);
        goto done;
    }
    if (r->o->tokens_only) {
        if (cfg_load(&r->cfg, cfgp, e) != 0) goto done;
    } else {
        if (bert_load(&r->model, r->dir, e) != 0) goto done;
        r->have_model = 1;
        r->cfg = r->model.cfg;
    }
    int lower = o->lowercase;
    if (lower < 0) lower = cfg_read_lowercase(tcfg);
    if (lower < 0) lower = tok_infer_lowercase(r->dir, vocab);
    if (tok_load(&r->tok, vocab, lower, e) != 0) goto done;
    if (tok_vocab_size(r->tok) != r->cfg.vocab_size && !o->tokens_only) {
        av_err(e, "%s: %d tokens, but config.json says vocab_size %d", vocab, tok_vocab_size(r->tok),
               r->cfg.vocab_size);
        goto done;
    }
    char *heads = av_path_join(r->dir, "heads.json");
    if (heads && av_file_exists(heads) &&
        cfg_load_head_labels(heads, &r->cfg, &r->patterns, &r->descriptions, e) != 0) {
        free(heads);
        goto done;
    }
    free(heads);
    rc = 0;
done:
    free(vocab);
    free(tcfg);
    free(cfgp);
    r->t_load = av_now_ms() - t0;
    return rc;
}

static void run_free(Run *r) {
    int n = r->cfg.num_layers * r->cfg.num_heads;
    cfg_free_head_labels(r->patterns, n);
    cfg_free_head_labels(r->descriptions, n);
    bert_capture_free(&r->cap);
    bert_runstate_free(&r->rs);
    tok_free(r->tok);
    if (r->have_model) bert_free(&r->model);
    free(r->dir);
}

/* Grows the run state and capture to hold n tokens (batch inputs vary). */
static int ensure_buffers(Run *r, int n, AvErr *e) {
    if (n <= r->cap_n) return 0;
    bert_capture_free(&r->cap);
    bert_runstate_free(&r->rs);
    r->cap_n = 0;
    if (bert_runstate_alloc(&r->rs, &r->cfg, n, e) != 0) return -1;
    if (bert_capture_alloc(&r->cap, &r->cfg, n, 1, r->o->hidden, e) != 0) return -1;
    r->cap_n = n;
    return 0;
}

static void fill_doc(const Run *r, OutDoc *d, const TokEncoding *enc, const char *a, const char *b) {
    memset(d, 0, sizeof *d);
    d->model_name = model_display_name(r->dir, r->cfg.is_demo);
    d->model_dir = r->dir;
    d->cfg = &r->cfg;
    d->dtype = r->have_model ? r->model.dtype_name : NULL;
    d->is_demo = r->cfg.is_demo;
    d->model_note = r->cfg.is_demo ? DEMO_NOTE : NULL;
    d->head_patterns = (const char *const *)r->patterns;
    d->head_descriptions = (const char *const *)r->descriptions;
    d->text_a = a;
    d->text_b = b;
    d->enc = enc;
    d->cap = r->have_model ? &r->cap : NULL;
    d->init_layer = r->o->layer >= 0 ? r->o->layer : 0;
    d->init_head = r->o->head >= 0 ? r->o->head : 0;
    d->precision = r->o->precision;
    d->with_qk = r->o->qk;
}

/* Tokenizes and (unless tokens-only) runs the encoder on one input. */
static int process(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    double t0 = av_now_ms();
    if (tok_encode(r->tok, a, strlen(a), b, b ? strlen(b) : 0, r->cfg.max_position_embeddings, enc, e) != 0)
        return -1;
    r->t_tok += av_now_ms() - t0;
    if (r->o->tokens_only) return 0;
    if (ensure_buffers(r, enc->n, e) != 0) return -1;
    t0 = av_now_ms();
    int rc = bert_forward(&r->model, &r->rs, enc->ids, enc->type_ids, enc->n, &r->cap, e);
    r->t_fwd += av_now_ms() - t0;
    return rc;
}

static int write_file(const char *path, const OutDoc *d, int html, const char *templates, AvErr *e) {
    AvOut out;
    if (av_out_open(&out, path, e) != 0) return -1;
    int rc = html ? html_write_doc(out.fp, d, templates, e) : json_write_doc(out.fp, d, e);
    if (rc == 0 && !html && !strcmp(path, "-")) rc = fputc('\n', out.fp) == EOF ? av_err(e, "stdout: write error") : 0;
    if (rc != 0) {
        av_err_prefix(e, "%s", path);
        av_out_abort(&out);
        return -1;
    }
    return av_out_commit(&out, e);
}

static int run_single(Run *r, AvErr *e) {
    const CliOptions *o = r->o;
    TokEncoding enc = {0};
    if (process(r, o->text_a, o->text_b, &enc, e) != 0) return EXIT_RUNTIME;
    if (enc.n_truncated > 0)
        fprintf(stderr, "attnviz: warning: input is longer than the model's %d positions; dropped %d tokens (longest first)\n",
                r->cfg.max_position_embeddings, enc.n_truncated);
    OutDoc d;
    fill_doc(r, &d, &enc, o->text_a, o->text_b);
    double t0 = av_now_ms();
    int rc = EXIT_OK;
    if (o->tokens_only) {
        AvOut out;
        const char *path = o->json_path ? o->json_path : "-";
        if (av_out_open(&out, path, e) != 0 || json_write_tokens(out.fp, &d, e) != 0 || fputc('\n', out.fp) == EOF) {
            if (out.fp) av_out_abort(&out);
            rc = EXIT_RUNTIME;
        } else if (av_out_commit(&out, e) != 0) {
            rc = EXIT_RUNTIME;
        }
    } else {
        const char *html = o->html_path ? o->html_path : (o->json_path ? NULL : "attnviz.html");
        if (o->json_path && write_file(o->json_path, &d, 0, NULL, e) != 0) rc = EXIT_RUNTIME;
        if (rc == EXIT_OK && html && write_file(html, &d, 1, o->templates_dir, e) != 0) rc = EXIT_RUNTIME;
        if (rc == EXIT_OK && html && !o->quiet) fprintf(stderr, "attnviz: wrote %s\n", html);
    }
    r->t_write = av_now_ms() - t0;
    tok_encoding_free(&enc);
    return rc;
}

/* Strips the line ending and splits at the first TAB into A and B. */
static void split_line(char *line, size_t *len, char **b) {
    while (*len && (line[*len - 1] == '\n' || line[*len - 1] == '\r')) line[--*len] = '\0';
    char *tab = memchr(line, '\t', *len);
    *b = NULL;
    if (tab) {
        *tab = '\0';
        *b = tab + 1;
    }
}

static int run_batch(Run *r, AvErr *e) {
    const CliOptions *o = r->o;
    FILE *in = strcmp(o->batch_path, "-") ? fopen(o->batch_path, "rb") : stdin;
    if (!in) {
        av_err(e, "%s: cannot open: %s", o->batch_path, strerror(errno));
        return EXIT_RUNTIME;
    }
    AvOut out;
    if (av_out_open(&out, o->json_path ? o->json_path : "-", e) != 0) {
        if (in != stdin) fclose(in);
        return EXIT_RUNTIME;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0, failed = 0, done = 0;
    int rc = EXIT_OK;
    while ((got = getline(&line, &cap, in)) != -1) {
        lineno++;
        size_t len = (size_t)got;
        if (memchr(line, '\0', len)) {
            fprintf(stderr, "attnviz: %s:%ld: input contains a NUL byte; skipped\n", o->batch_path, lineno);
            failed++;
            continue;
        }
        char *b;
        split_line(line, &len, &b);
        TokEncoding enc = {0};
        AvErr le;
        if (process(r, line, b, &enc, &le) != 0) {
            fprintf(stderr, "attnviz: %s:%ld: %s; skipped\n", o->batch_path, lineno, le.msg);
            failed++;
            tok_encoding_free(&enc);
            continue;
        }
        if (enc.n_truncated > 0 && !o->quiet)
            fprintf(stderr, "attnviz: warning: %s:%ld: dropped %d tokens to fit %d positions\n", o->batch_path, lineno,
                    enc.n_truncated, r->cfg.max_position_embeddings);
        OutDoc d;
        fill_doc(r, &d, &enc, line, b);
        double t0 = av_now_ms();
        int wr = o->tokens_only ? json_write_tokens(out.fp, &d, e) : json_write_doc(out.fp, &d, e);
        if (wr == 0 && fputc('\n', out.fp) == EOF) wr = av_err(e, "write error");
        r->t_write += av_now_ms() - t0;
        tok_encoding_free(&enc);
        if (wr != 0) {
            av_err_prefix(e, "%s", o->json_path ? o->json_path : "stdout");
            rc = EXIT_RUNTIME;
            break;
        }
        done++;
    }
    if (rc == EXIT_OK && ferror(in)) {
        av_err(e, "%s: read error", o->batch_path);
        rc = EXIT_RUNTIME;
    }
    free(line);
    if (in != stdin) fclose(in);
    if (rc != EXIT_OK) {
        av_out_abort(&out);
        return rc;
    }
    if (av_out_commit(&out, e) != 0) return EXIT_RUNTIME;
    if (failed) {
        fprintf(stderr, "attnviz: %ld of %ld lines failed\n", failed, lineno);
        return EXIT_RUNTIME;
    }
    if (!o->quiet) fprintf(stderr, "attnviz: %ld inputs processed\n", done);
    return EXIT_OK;
}

int cli_run(const CliOptions *o) {
    Run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    AvErr e = {{0}};
    if (o->threads > 0) openblas_set_num_threads(o->threads);
    const char *why = "";
    r.dir = resolve_model(o, &why);
    if (!r.dir) {
        fprintf(stderr, "attnviz: no model found: pass --model DIR, set $ATTNVIZ_MODEL, run `make weights` for "
                        "bert-base-uncased, or `make demo-model` to generate the demo model\n");
        return EXIT_RUNTIME;
    }
    int rc = EXIT_RUNTIME;
    if (load_all(&r, &e) != 0) goto fail;
    if (!o->quiet) {
        fprintf(stderr, "attnviz: model %s (%s)%s\n", r.dir, why,
                r.cfg.is_demo ? " — the demo model: constructed, not trained; `make weights` fetches bert-base-uncased" : "");
    }
    if (o->layer >= r.cfg.num_layers) {
        fprintf(stderr, "attnviz: --layer %d is out of range: the model has %d layers (0-%d)\n", o->layer,
                r.cfg.num_layers, r.cfg.num_layers - 1);
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->head >= r.cfg.num_heads) {
        fprintf(stderr, "attnviz: --head %d is out of range: the model has %d heads (0-%d)\n", o->head,
                r.cfg.num_heads, r.cfg.num_heads - 1);
        rc = EXIT_USAGE;
        goto out;
    }
    rc = o->batch_path ? run_batch(&r, &e) : run_single(&r, &e);
    if (rc == EXIT_RUNTIME && e.msg[0]) goto fail;
    goto out;
fail:
    fprintf(stderr, "attnviz: %s\n", e.msg);
    rc = EXIT_RUNTIME;
out:
    if (o->profile)
        fprintf(stderr, "load_ms=%.2f tokenize_ms=%.2f forward_ms=%.2f write_ms=%.2f\n", r.t_load, r.t_tok, r.t_fwd,
                r.t_write);
    run_free(&r);
    return rc;
}
