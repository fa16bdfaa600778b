/* pipeline.c — one run of attnviz: the model and tokenizer found and loaded,
 * then each input tokenized, run, transformed and written (one input, or a
 * batch with its progress line and JSON Lines stream). The writers come from
 * one table. cli.c parses argv and checks ranges; this module does the work. */
#include "pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>

#include "diff.h"
#include "gemm.h"
#include "generate.h"
#include "model.h"
#include "npy.h"
#include "predict.h"
#include "render.h"
#include "report.h"
#include "selection.h"
#include "output.h"
#include "heads.h"
#include "stats.h"
#include "tokenizer.h"
#include "transform.h"
#include "util.h"

#define DEMO_NOTE "attnviz demo model: weights constructed by hand (not trained) so that each head has a known pattern. For real attention run `make weights` (bert-base-uncased) and use --model weights/bert-base-uncased."

/* ---------------------------------------------------------------- model selection */

static int dir_has_model(const char *dir) {
    char *p = av_path_join(dir, "config.json");
    int ok = p && av_file_exists(p);
    free(p);
    return ok;
}

/* Looks for rel under the working directory, then beside the executable, then
 * in the data directory of an installed copy (PREFIX/bin/attnviz finds
 * PREFIX/share/attnviz/), whatever PREFIX was. */
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
            if (datadir_rel) {
                char share[PATH_MAX + 64];
                snprintf(share, sizeof share, "%s/../share/attnviz/%s", exe, datadir_rel);
                if (dir_has_model(share)) return strdup(share);
            }
        }
    }
    return NULL;
}

static char *resolve_model(const ModelSpec *m, const char **why) {
    if (m->path) {
        *why = "--model";
        return strdup(m->path);
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

static const char *model_display_name(const char *dir, int is_demo, char *name, size_t len) {
    if (is_demo) return "attnviz-demo";
    const char *end = dir + strlen(dir);
    while (end > dir && end[-1] == '/') end--;
    const char *start = end;
    while (start > dir && start[-1] != '/') start--;
    snprintf(name, len, "%.*s", (int)(end - start), start);
    return name[0] ? name : dir;
}

/* ---------------------------------------------------------------- the run */

struct Pipeline {
    ModelSpec m;
    const RunSpec *o;
    char *dir;
    ModelConfig cfg;
    Model model;
    int have_model;
    Tokenizer *tok;
    char **patterns, **descriptions;
    RunState rs;
    Capture cap;
    int cap_n;       /* tokens the capture and run state hold */
    KvCache kv;      /* with --generate, cap_n tokens */
    CapPredictions pred; /* --predict: this input's */
    CapGeneration gen;   /* --generate: this input's */
    char *gen_text;      /* the generated continuation, decoded */
    HeadStats stats; /* with --stats */
    char name[256];  /* the model's display name */
    HeadScores heads; /* attnviz heads */
    double t_load, t_tok, t_fwd, t_write;
};
typedef struct Pipeline Run;

/* The first of a folder's candidate file names that exists (Hugging Face's
 * name first, OpenAI's original one second); NULL when none does. */
/* The tokenizer: from a GGUF file's metadata, else the one the model folder
 * holds (tok_load_dir chooses); its ids must fit the embeddings. */
static int load_tokenizer(Run *r, int have_cfg, AvErr *e) {
    int rc;
    char used[512];
    snprintf(used, sizeof used, "%s", r->have_model ? r->model.path : r->dir);
    if (r->have_model && r->model.gguf) {
        if (r->m.lowercase == 1)
            return av_err(e, "--uncased: %s carries its own tokenizer, which never lower-cases", r->dir);
        rc = tok_load_gguf(&r->tok, r->model.gguf, r->model.path, e);
    } else {
        TokDirHint hint = {have_cfg ? r->cfg.model_type : NULL, r->m.lowercase, ""};
        rc = tok_load_dir(&r->tok, r->dir, &hint, e);
        snprintf(used, sizeof used, "%s", hint.used);
    }
    /* embeddings may have more rows than the tokenizer has ids (padded vocabularies), never fewer */
    if (rc == 0 && have_cfg && tok_vocab_size(r->tok) > r->cfg.vocab_size)
        rc = av_err(e, "%s: %d tokens, but %s says vocab_size %d", used, tok_vocab_size(r->tok),
                    r->model.gguf ? "its metadata" : "config.json", r->cfg.vocab_size);
    return rc;
}

static int load_all(Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    double t0 = av_now_ms();
    char *cfgp = av_path_join(r->dir, "config.json"), *heads = av_path_join(r->dir, "heads.json");
    int rc = -1, have_cfg = 0;
    if (!cfgp || !heads) {
        av_err(e, "out of memory");
        goto done;
    }
    struct stat sb;
    if (stat(r->dir, &sb) != 0 && errno != ENOENT && errno != ENOTDIR) {
        av_err(e, "%s: cannot resolve the model path: %s", r->dir, strerror(errno)); /* a symlink loop, no access */
        goto done;
    }
    if (!av_file_exists(cfgp) && !r->m.tokenizer_only && !model_is_gguf(r->dir)) {
        av_err(e, "%s: no config.json in the model folder", r->dir);
        goto done;
    }
    if (r->m.tokenizer_only && !model_is_gguf(r->dir)) {
        /* a tokenizer-only folder (e.g. GPT-2's original encoder.json + vocab.bpe) needs no config */
        if (av_file_exists(cfgp)) {
            if (cfg_load(&r->cfg, cfgp, e) != 0) goto done;
            have_cfg = 1;
        }
    } else {
        if (model_load(&r->model, r->dir, e) != 0) goto done;
        r->have_model = 1;
        have_cfg = 1;
        char *gc = model_is_gguf(r->dir) ? NULL : av_path_join(r->dir, "generation_config.json");
        int grc = gc ? cfg_load_generation(&r->model.cfg, gc, e) : 0;
        free(gc);
        if (grc != 0) goto done;
        r->cfg = r->model.cfg;
    }
    if (load_tokenizer(r, have_cfg, e) != 0) goto done;
    if (have_cfg && av_file_exists(heads) &&
        cfg_load_head_labels(heads, &r->cfg, &r->patterns, &r->descriptions, e) != 0)
        goto done;
    if (o->stats && stats_init(&r->stats, r->cfg.num_layers, r->cfg.num_heads, e) != 0) goto done;
    const char *name = model_display_name(r->dir, r->cfg.is_demo, r->name, sizeof r->name);
    if (name != r->name) snprintf(r->name, sizeof r->name, "%s", name);
    if (o->heads.on) {
        HeadsOptions ho = {o->heads.n_scores ? o->heads.scores : NULL, o->heads.n_scores, o->heads.pattern, o->heads.exclude_bos,
                           o->heads.exclude_current, o->heads.top_k};
        if (heads_init(&r->heads, r->cfg.num_layers, r->cfg.num_heads, &ho, e) != 0) goto done;
    }
    rc = 0;
done:
    free(cfgp);
    free(heads);
    r->t_load = av_now_ms() - t0;
    return rc;
}

static void run_free(Run *r) {
    int n = r->cfg.num_layers * r->cfg.num_heads;
    cfg_free_head_labels(r->patterns, n);
    cfg_free_head_labels(r->descriptions, n);
    model_capture_free(&r->cap);
    model_runstate_free(&r->rs);
    model_kv_free(&r->kv);
    pred_free(&r->pred);
    gen_free(&r->gen);
    free(r->gen_text);
    stats_free(&r->stats);
    heads_free(&r->heads);
    tok_free(r->tok);
    if (r->have_model) model_free(&r->model);
    free(r->dir);
}

static const char *human_size(double bytes, char *buf, size_t len) {
    if (bytes >= 1e9) snprintf(buf, len, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, len, "%.1f MB", bytes / 1e6);
    else snprintf(buf, len, "%.0f kB", bytes / 1e3 < 1 ? 1 : bytes / 1e3);
    return buf;
}

/* Grows the run state and capture to hold n tokens (batch inputs vary). */
static int ensure_buffers(Run *r, int n, AvErr *e) {
    if (n <= r->cap_n) return 0;
    const RunSpec *o = r->o;
    const int nl = o->sel.layers ? o->sel.n_layers : r->cfg.num_layers;
    const int nh = o->sel.heads ? o->sel.n_heads : r->cfg.num_heads;
    /* refuse before allocating: a capture grows with the square of the input */
    double need = (double)model_capture_bytes(&r->cfg, n, 1, o->capture.hidden, nl, nh), limit = o->capture.max_capture;
    if (limit <= 0) limit = 0.5 * (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (need > limit) {
        char a[32], b[32];
        return av_err(e, "capturing %d tokens x %d layers x %d heads needs %s, above the %s allowed "
                      "(--max-capture): select fewer with --layers/--heads, or shorten the input (--max-tokens)",
                      n, nl, nh, human_size(need, a, sizeof a), human_size(limit, b, sizeof b));
    }
    model_capture_free(&r->cap);
    model_runstate_free(&r->rs);
    model_kv_free(&r->kv);
    r->cap_n = 0;
    if (model_runstate_alloc(&r->rs, &r->model, n, e) != 0) return -1;
    if (o->predict.generate_n && model_kv_alloc(&r->kv, &r->cfg, n, e) != 0) return -1;
    if (model_capture_select(&r->cap, &r->cfg, n, 1, o->capture.hidden, o->sel.layers, o->sel.n_layers, o->sel.heads,
                             o->sel.n_heads, e) != 0)
        return -1;
    r->cap_n = n;
    return 0;
}

static void fill_doc(const Run *r, OutDoc *d, const TokEncoding *enc, const Capture *cap, const char *a,
                     const char *b) {
    const RunSpec *o = r->o;
    memset(d, 0, sizeof *d);
    d->model_name = r->name;
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
    d->cap = cap;
    d->display_tokens = enc->byte_level ? enc->display : NULL;
    d->layers = o->sel.layers, d->n_sel_layers = o->sel.n_layers;
    d->heads = o->sel.heads, d->n_sel_heads = o->sel.n_heads;
    d->init_layer = o->sel.layer >= 0 ? o->sel.layer : out_layer(d, 0);
    d->init_head = o->sel.head >= 0 ? o->sel.head : out_head(d, 0);
    d->precision = o->output.precision;
    d->with_qk = o->capture.qk;
    d->pred = o->predict.k && !o->capture.tokens_only ? &r->pred : NULL;
    d->gen = o->predict.generate_n && !o->capture.tokens_only ? &r->gen : NULL;
    d->gen_text = r->gen_text;
    d->tok = r->tok;
    d->init_view = o->output.view, d->theme = o->output.theme;
    d->init_heads = o->sel.show_heads, d->n_init_heads = o->sel.n_show_heads;
}

/* The positions of a masked model's mask tokens. */
static int mask_rows(const Run *r, const TokEncoding *enc, int **rows) {
    const char *names[] = {"[MASK]", "<mask>"};
    int n = 0;
    *rows = malloc((size_t)enc->n * sizeof **rows);
    if (!*rows) return -1;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        int id = tok_token_to_id(r->tok, names[k]);
        for (int i = 0; id >= 0 && i < enc->n; i++)
            if (enc->ids[i] == id) (*rows)[n++] = i;
    }
    return n;
}

/* --predict without --generate: every position of a causal model, the
 * masks of a masked one. */
static int predict(Run *r, const TokEncoding *enc, int k, CapPredictions *pred, AvErr *e) {
    int *rows = NULL, n;
    if (r->cfg.causal) {
        if (!(rows = malloc((size_t)enc->n * sizeof *rows))) return av_err(e, "out of memory");
        for (n = 0; n < enc->n; n++) rows[n] = n;
    } else if ((n = mask_rows(r, enc, &rows)) < 0) {
        return av_err(e, "out of memory");
    }
    if (n == 0 && !r->o->quiet) av_warn("no [MASK] or <mask> in the input: no fill-ins to predict");
    int rc = pred_alloc(pred, n, k, e);
    if (rc == 0 && n > 0) rc = pred_rows(&r->model, &r->rs, rows, n, 0, pred, 0, e);
    free(rows);
    return rc;
}

/* A stop string: the generated text so far contains it. */
static int stop_at_string(void *ctx, const int *ids, int n_prompt, int n) {
    const Run *r = ctx;
    char *text = NULL;
    AvErr e;
    if (tok_decode(r->tok, ids + n_prompt, n - n_prompt, &text, &e) != 0) return 0;
    int hit = strstr(text, r->o->predict.stop) != NULL;
    free(text);
    return hit;
}

/* --generate: the prompt's tokens continued; enc grows by what was generated. */
static int generate(Run *r, TokEncoding *enc, AvErr *e) {
    const RunSpec *o = r->o;
    int room = cfg_max_tokens(&r->cfg) - enc->n, max_new = o->predict.generate_n;
    if (room < 1) return av_err(e, "the prompt's %d tokens fill the model's %d positions: nothing can follow", enc->n,
                                cfg_max_tokens(&r->cfg));
    if (max_new > room) {
        if (!o->quiet) av_warn("--generate %d: the model's %d positions leave room for %d",
                               max_new, cfg_max_tokens(&r->cfg), room);
        max_new = room;
    }
    const int total = enc->n + max_new;
    if (ensure_buffers(r, total, e) != 0) return -1;
    int *ids = malloc((size_t)total * sizeof *ids), n = 0;
    if (!ids) return av_err(e, "out of memory");
    memcpy(ids, enc->ids, (size_t)enc->n * sizeof *ids);
    GenOptions go = {.max_new = max_new, .k = o->predict.k ? o->predict.k : 10, .temperature = (float)o->predict.temperature,
                     .top_p = (float)o->predict.top_p, .seed = o->predict.seed, .eos = r->cfg.eos_ids, .n_eos = r->cfg.n_eos,
                     .stop = o->predict.stop ? stop_at_string : NULL, .stop_ctx = r};
    int rc = 0;
    if (o->predict.k) rc = pred_alloc(&r->pred, total, o->predict.k, e);
    go.all = o->predict.k ? &r->pred : NULL;
    if (rc == 0) rc = gen_run(&r->model, &r->rs, &r->kv, &r->cap, ids, enc->n, &go, &r->gen, &n, e);
    if (rc == 0) rc = tok_encoding_append(r->tok, enc, ids + enc->n, n - enc->n, e);
    if (rc == 0) rc = tok_decode(r->tok, ids + r->gen.n_prompt, n - r->gen.n_prompt, &r->gen_text, e);
    free(ids);
    return rc;
}

/* Tokenizes and (unless tokens-only) runs the model on one input. */
static int tokenize(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    const RunSpec *o = r->o;
    double t0 = av_now_ms();
    int max_len = r->cfg.max_position_embeddings ? cfg_max_tokens(&r->cfg) : 0; /* 0: no config, no limit */
    if (o->capture.max_tokens > 0 && (max_len == 0 || o->capture.max_tokens < max_len)) max_len = o->capture.max_tokens;
    int rc = tok_encode(r->tok, a, strlen(a), b, b ? strlen(b) : 0, max_len, enc, e);
    r->t_tok += av_now_ms() - t0;
    return rc;
}

static int process(Run *r, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    const RunSpec *o = r->o;
    if (tokenize(r, a, b, enc, e) != 0) return -1;
    if (o->capture.tokens_only) return 0;
    double t0;
    pred_free(&r->pred);
    gen_free(&r->gen);
    free(r->gen_text);
    r->gen_text = NULL;
    t0 = av_now_ms();
    int rc;
    if (o->predict.generate_n) {
        rc = generate(r, enc, e);
    } else {
        if (ensure_buffers(r, enc->n, e) != 0) return -1;
        rc = model_forward_kv(&r->model, &r->rs, NULL, enc->ids, enc->type_ids, enc->n, &r->cap, o->predict.k > 0, e);
        if (rc == 0 && o->predict.k) rc = predict(r, enc, o->predict.k, &r->pred, e);
    }
    r->t_fwd += av_now_ms() - t0;
    return rc;
}

/* The writers: one row each, what it writes and whether a newline ends it
 * (JSON documents and lines); the run (templates folder, statistics) is
 * passed to the few that need it. */
enum { W_JSON, W_HTML, W_NPY_ATT, W_NPY_Q, W_NPY_K, W_STATS_JSON, W_TOKENS, W_NPY_PRED_IDS, W_NPY_PRED_PROBS,
       W_NPY_PRED_POS, W_NPY_IDS, W_HEADS_JSON };

static int write_json(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return json_write_doc(f, d, e); }
static int write_tokens(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return json_write_tokens(f, d, e); }
static int write_page(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { return html_write_doc(f, d, r->o->output.templates_dir, e); }
static int write_npy_att(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_attention(f, d, e); }
static int write_npy_q(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_qk(f, d, 'q', e); }
static int write_npy_k(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_qk(f, d, 'k', e); }
static int write_stats(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { return stats_write_json(f, &r->stats, d, e); }
static int write_pred_ids(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_predictions(f, d, 'i', e); }
static int write_pred_probs(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_predictions(f, d, 'p', e); }
static int write_pred_pos(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_predictions(f, d, 'n', e); }
static int write_ids(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)r; return npy_write_ids(f, d, e); }
static int write_heads(FILE *f, const OutDoc *d, const Run *r, AvErr *e) { (void)d; return heads_write_json(f, &r->heads, e); }

static const struct {
    int (*write)(FILE *f, const OutDoc *d, const Run *r, AvErr *e);
    int newline;
} WRITERS[] = {
    [W_JSON] = {write_json, 1},         [W_HTML] = {write_page, 0},      [W_NPY_ATT] = {write_npy_att, 0},
    [W_NPY_Q] = {write_npy_q, 0},       [W_NPY_K] = {write_npy_k, 0},    [W_STATS_JSON] = {write_stats, 0},
    [W_TOKENS] = {write_tokens, 1},     [W_NPY_PRED_IDS] = {write_pred_ids, 0}, [W_NPY_PRED_PROBS] = {write_pred_probs, 0},
    [W_NPY_PRED_POS] = {write_pred_pos, 0}, [W_NPY_IDS] = {write_ids, 0}, [W_HEADS_JSON] = {write_heads, 0},
};

/* Writes one output atomically (temporary file renamed into place). */
static int write_file(const Run *r, const char *path, const OutDoc *d, int what, AvErr *e) {
    AvOut out;
    if (av_out_open(&out, path, e) != 0) return -1;
    int rc = WRITERS[what].write(out.fp, d, r, e);
    if (rc == 0 && WRITERS[what].newline && fputc('\n', out.fp) == EOF) rc = av_err_errno(e, "write error");
    if (rc != 0) {
        av_err_prefix(e, "%s", strcmp(path, "-") ? path : "stdout");
        av_out_abort(&out);
        return -1;
    }
    return av_out_commit(&out, e);
}

/* path with its .npy suffix (if any) replaced by suffix, e.g. a.npy -> a.queries.npy */
static char *npy_sibling(const char *path, const char *suffix) {
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".npy")) n -= 4;
    char *p = malloc(n + strlen(suffix) + 1);
    if (p) {
        memcpy(p, path, n);
        strcpy(p + n, suffix);
    }
    return p;
}

/* attention.npy, and beside it (FILE's stem + suffix) what else was asked:
 * queries and keys, predictions, the generated sequence's ids. */
static int write_npy_set(const Run *r, const char *path, const OutDoc *d, AvErr *e) {
    static const struct {
        const char *suffix;
        int what;
    } extra[] = {{".queries.npy", W_NPY_Q}, {".keys.npy", W_NPY_K}, {".pred_ids.npy", W_NPY_PRED_IDS},
                 {".pred_probs.npy", W_NPY_PRED_PROBS}, {".pred_positions.npy", W_NPY_PRED_POS}, {".ids.npy", W_NPY_IDS}};
    if (write_file(r, path, d, W_NPY_ATT, e) != 0) return -1;
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        const int w = extra[i].what;
        if ((w == W_NPY_Q || w == W_NPY_K) && !r->o->capture.qk) continue;
        if ((w == W_NPY_PRED_IDS || w == W_NPY_PRED_PROBS || w == W_NPY_PRED_POS) && !d->pred) continue;
        if (w == W_NPY_IDS && !d->gen) continue;
        char *p = npy_sibling(path, extra[i].suffix);
        int rc = p ? write_file(r, p, d, w, e) : av_err(e, "out of memory");
        free(p);
        if (rc) return -1;
    }
    return 0;
}

/* The outputs for one input: everything but the batch's JSON Lines stream. */
static int emit(Run *r, const OutDoc *d, long lineno, AvErr *e) {
    const RunSpec *o = r->o;
    if (o->stats) return stats_add(&r->stats, d, e);
    if (o->heads.on) return heads_add(&r->heads, d, e);
    if (o->output.out_dir) {
        char name[64];
        int rc = 0;
        snprintf(name, sizeof name, "%06ld.json", lineno);
        char *p = av_path_join(o->output.out_dir, name);
        if (!p) return av_err(e, "out of memory");
        rc = write_file(r, p, d, o->capture.tokens_only ? W_TOKENS : W_JSON, e);
        if (rc == 0 && o->output.out_html) {
            strcpy(p + strlen(p) - 5, ".html");
            rc = write_file(r, p, d, W_HTML, e);
        }
        if (rc == 0 && o->output.out_npy) {
            snprintf(name, sizeof name, "%06ld.npy", lineno);
            free(p);
            p = av_path_join(o->output.out_dir, name);
            rc = p ? write_npy_set(r, p, d, e) : av_err(e, "out of memory");
        }
        free(p);
        return rc;
    }
    if (o->batch.path) return 0;
    if (o->capture.tokens_only) return write_file(r, o->output.json_path ? o->output.json_path : "-", d, W_TOKENS, e);
    if (o->output.json_path && write_file(r, o->output.json_path, d, W_JSON, e) != 0) return -1;
    if (o->output.npy_path && write_npy_set(r, o->output.npy_path, d, e) != 0) return -1;
    const char *html = o->output.html_path ? o->output.html_path : (o->output.json_path || o->output.npy_path ? NULL : "attnviz.html");
    if (html && write_file(r, html, d, W_HTML, e) != 0) return -1;
    if (html && !o->quiet) av_info("wrote %s", html);
    return 0;
}

static void warn_truncated(const Run *r, const TokEncoding *enc, long lineno) {
    const RunSpec *o = r->o;
    if (enc->n_truncated <= 0 || o->quiet) return;
    char limit[64];
    if (o->capture.max_tokens > 0 && o->capture.max_tokens < cfg_max_tokens(&r->cfg))
        snprintf(limit, sizeof limit, "--max-tokens %d", o->capture.max_tokens);
    else
        snprintf(limit, sizeof limit, "the model's %d positions", cfg_max_tokens(&r->cfg));
    if (o->batch.path)
        av_warn("%s:%ld: longer than %s; dropped %d tokens", o->batch.path, lineno, limit,
                enc->n_truncated);
    else
        av_warn("input is longer than %s; dropped %d tokens (longest first)", limit,
                enc->n_truncated);
}

/* Derive the view and write: one input whose capture is filled. */
static int finish_input(Run *r, const char *a, const char *b, long lineno, const TokEncoding *enc, const Capture *cap,
                        FILE *jsonl, AvErr *e) {
    const RunSpec *o = r->o;
    XfView view;
    int derived = !o->capture.tokens_only && (o->capture.no_special || o->capture.words);
    if (derived && xf_apply(enc, cap, o->capture.no_special, o->capture.words, &view, e) != 0) return -1;
    OutDoc d;
    fill_doc(r, &d, derived ? &view.enc : enc, o->capture.tokens_only ? NULL : derived ? &view.cap : cap, a, b);
    double t0 = av_now_ms();
    int rc = emit(r, &d, lineno, e);
    if (rc == 0 && jsonl && !o->stats && !o->heads.on && !o->output.out_dir) {
        rc = o->capture.tokens_only ? json_write_tokens(jsonl, &d, e) : json_write_doc(jsonl, &d, e);
        if (rc == 0 && fputc('\n', jsonl) == EOF) rc = av_err_errno(e, "write error");
        if (rc != 0) av_err_prefix(e, "%s", o->output.json_path ? o->output.json_path : "stdout");
    }
    r->t_write += av_now_ms() - t0;
    if (derived) xf_free(&view);
    return rc;
}

/* Tokenize, run, derive the view, write: one input, single or batch. */
static int handle_input(Run *r, const char *a, const char *b, long lineno, FILE *jsonl, AvErr *e) {
    TokEncoding enc = {0};
    int rc = process(r, a, b, &enc, e);
    if (rc == 0) warn_truncated(r, &enc, lineno);
    if (rc == 0) rc = finish_input(r, a, b, lineno, &enc, &r->cap, jsonl, e);
    tok_encoding_free(&enc);
    return rc;
}

/* Statistics once all inputs are in: a table, or JSON with --json. */
static int finish_stats(Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    OutDoc d;
    TokEncoding none = {0};
    fill_doc(r, &d, &none, NULL, NULL, NULL);
    if (o->output.json_path) return write_file(r, o->output.json_path, &d, W_STATS_JSON, e);
    return stats_write_table(stdout, &r->stats, &d, e);
}

/* attnviz heads once the inputs are in: the induction score's random repeated
 * sequences (ids, not text: they are drawn from the vocabulary), then the table or JSON. */
static int finish_heads(Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    HeadScores *hs = &r->heads;
    if (hs->want[HS_INDUCTION]) {
        int vocab = r->cfg.vocab_size;
        if (heads_make_induction(hs, r->tok, vocab, o->predict.seed, o->heads.induction_seqs, o->heads.induction_len, e) != 0) return -1;
        const HeadsInduction *in = &hs->ind[hs->n_ind - 1];
        if (in->n_ids > cfg_max_tokens(&r->cfg))
            return av_err(e, "--induction-len %d: %d tokens do not fit the model's %d positions", o->heads.induction_len,
                          in->n_ids, cfg_max_tokens(&r->cfg));
        for (int s = 0; s < in->sequences; s++) {
            TokEncoding enc = {0};
            OutDoc d;
            double t0 = av_now_ms();
            int rc = tok_encoding_append(r->tok, &enc, in->ids + (size_t)s * in->n_ids, in->n_ids, e);
            if (rc == 0) rc = ensure_buffers(r, enc.n, e);
            if (rc == 0) rc = model_forward_kv(&r->model, &r->rs, NULL, enc.ids, enc.type_ids, enc.n, &r->cap, 0, e);
            r->t_fwd += av_now_ms() - t0;
            if (rc == 0) {
                fill_doc(r, &d, &enc, &r->cap, NULL, NULL);
                rc = heads_add_induction(hs, &d, e);
            }
            tok_encoding_free(&enc);
            if (rc != 0) return -1;
        }
    }
    if (o->output.json_path) {
        OutDoc d;
        TokEncoding none = {0};
        fill_doc(r, &d, &none, NULL, NULL, NULL);
        return write_file(r, o->output.json_path, &d, W_HEADS_JSON, e);
    }
    return heads_write_table(stdout, hs, e);
}

static int run_single(Run *r, AvErr *e) {
    if (handle_input(r, r->o->text_a, r->o->text_b, 0, NULL, e) != 0) return -1;
    if (r->o->stats && finish_stats(r, e) != 0) return -1;
    if (r->o->heads.on && finish_heads(r, e) != 0) return -1;
    return 0;
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

/* Lines in a regular file, for the progress display (-1 when unknown). */
static long count_lines(FILE *in) {
    struct stat sb;
    if (fstat(fileno(in), &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    char buf[1 << 16];
    long n = 0;
    size_t got;
    int last = '\n';
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) {
        for (char *p = buf; (p = memchr(p, '\n', (size_t)(buf + got - p))); p++) n++;
        last = buf[got - 1];
    }
    if (last != '\n') n++;
    rewind(in);
    return n;
}

static void progress(long done, long total, double t0, int final) {
    double secs = (av_now_ms() - t0) / 1e3, rate = secs > 0 ? done / secs : 0;
    if (total > 0) {
        double eta = rate > 0 ? (total - done) / rate : 0;
        av_progress(final, "%ld/%ld lines  %.1f/s  ETA %d:%02d", done, total, rate, (int)eta / 60, (int)eta % 60);
    } else {
        av_progress(final, "%ld lines  %.1f/s", done, rate);
    }
}

/* Short batch inputs wait here to share one forward pass (model_forward_packed):
 * the weights are read once for all of them. */
#define PACK_MAX_INPUTS 64

/* The longest --batch line read (README.md, docs/attnviz.1): past it the batch
 * stops with the line's number. */
#define BATCH_MAX_LINE (16u << 20)

typedef struct {
    long lineno[PACK_MAX_INPUTS];
    char *a[PACK_MAX_INPUTS], *b[PACK_MAX_INPUTS];
    TokEncoding enc[PACK_MAX_INPUTS];
    Capture cap[PACK_MAX_INPUTS];
    int cap_n[PACK_MAX_INPUTS]; /* tokens each capture holds */
    int n, tokens;
    int *ids, *types;           /* (budget) */
} Pack;

typedef struct {
    Run *r;
    const char *name;
    FILE *jsonl;
    long failed, done;
    int stop, show;
} BatchState;

/* A line that failed: counted and reported; 1 when the batch must stop. */
static int line_failed(BatchState *bs, long lineno, const char *msg) {
    const RunSpec *o = bs->r->o;
    bs->failed++;
    av_note(AV_NOTE_ERROR, "%s:%ld: %s%s", bs->name, lineno, msg, o->batch.strict ? "" : "; skipped");
    /* an output error is not the line's fault: stop */
    if (o->batch.strict || strstr(msg, "write error") || strstr(msg, "cannot write")) bs->stop = 1;
    return bs->stop;
}

static void pack_clear(Pack *p) {
    for (int g = 0; g < p->n; g++) {
        free(p->a[g]);
        tok_encoding_free(&p->enc[g]);
    }
    p->n = p->tokens = 0;
}

static void pack_free(Pack *p) {
    pack_clear(p);
    for (int g = 0; g < PACK_MAX_INPUTS; g++) model_capture_free(&p->cap[g]);
    free(p->ids);
    free(p->types);
}

/* Runs the waiting inputs in one pass, then writes each in order. */
static void pack_flush(BatchState *bs, Pack *p) {
    Run *r = bs->r;
    const RunSpec *o = r->o;
    if (!p->n) return;
    AvErr e;
    int rc = ensure_buffers(r, p->tokens, &e);
    Capture *caps[PACK_MAX_INPUTS];
    int lens[PACK_MAX_INPUTS];
    for (int g = 0, at = 0; g < p->n && rc == 0; at += p->enc[g].n, g++) {
        lens[g] = p->enc[g].n;
        memcpy(p->ids + at, p->enc[g].ids, (size_t)lens[g] * sizeof *p->ids);
        memcpy(p->types + at, p->enc[g].type_ids, (size_t)lens[g] * sizeof *p->types);
        if (p->cap_n[g] < lens[g]) {
            model_capture_free(&p->cap[g]);
            p->cap_n[g] = 0;
            rc = model_capture_select(&p->cap[g], &r->cfg, lens[g], 1, o->capture.hidden, o->sel.layers, o->sel.n_layers,
                                      o->sel.heads, o->sel.n_heads, &e);
            if (rc == 0) p->cap_n[g] = lens[g];
        }
        caps[g] = &p->cap[g];
    }
    double t0 = av_now_ms();
    if (rc == 0) rc = model_forward_packed(&r->model, &r->rs, p->ids, p->types, lens, p->n, caps, &e);
    r->t_fwd += av_now_ms() - t0;
    for (int g = 0; g < p->n && !bs->stop; g++) {
        AvErr le;
        if (rc != 0) {
            line_failed(bs, p->lineno[g], e.msg);
            continue;
        }
        warn_truncated(r, &p->enc[g], p->lineno[g]);
        if (finish_input(r, p->a[g], p->b[g], p->lineno[g], &p->enc[g], &p->cap[g], bs->jsonl, &le) != 0)
            line_failed(bs, p->lineno[g], le.msg);
        else
            bs->done++;
    }
    pack_clear(p);
}

/* One batch line: packed with others when short enough, else run alone. */
static void batch_line(BatchState *bs, Pack *p, char *a, char *b, long lineno) {
    Run *r = bs->r;
    const RunSpec *o = r->o;
    AvErr le;
    const int packing = o->batch.pack_tokens > 0 && !o->capture.tokens_only && !o->predict.k && !o->predict.generate_n;
    if (!packing) {
        if (handle_input(r, a, b, lineno, bs->jsonl, &le) != 0) line_failed(bs, lineno, le.msg);
        else bs->done++;
        return;
    }
    TokEncoding enc = {0};
    if (tokenize(r, a, b, &enc, &le) != 0) {
        tok_encoding_free(&enc);
        line_failed(bs, lineno, le.msg);
        return;
    }
    if (enc.n > o->batch.pack_tokens) { /* long: alone, after what waits (output stays in input order) */
        pack_flush(bs, p);
        if (bs->stop) {
            tok_encoding_free(&enc);
            return;
        }
        int rc = ensure_buffers(r, enc.n, &le);
        double t0 = av_now_ms();
        if (rc == 0) rc = model_forward(&r->model, &r->rs, enc.ids, enc.type_ids, enc.n, &r->cap, &le);
        r->t_fwd += av_now_ms() - t0;
        if (rc == 0) warn_truncated(r, &enc, lineno);
        if (rc == 0) rc = finish_input(r, a, b, lineno, &enc, &r->cap, bs->jsonl, &le);
        if (rc != 0) line_failed(bs, lineno, le.msg);
        else bs->done++;
        tok_encoding_free(&enc);
        return;
    }
    if (p->n == PACK_MAX_INPUTS || p->tokens + enc.n > o->batch.pack_tokens) pack_flush(bs, p);
    if (bs->stop) {
        tok_encoding_free(&enc);
        return;
    }
    /* the line buffer is reused: keep a copy (A and B, split at the TAB) */
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *copy = malloc(la + lb + 2);
    if (!copy) {
        tok_encoding_free(&enc);
        line_failed(bs, lineno, "out of memory");
        return;
    }
    memcpy(copy, a, la + 1);
    if (b) memcpy(copy + la + 1, b, lb + 1);
    const int g = p->n++;
    p->lineno[g] = lineno, p->a[g] = copy, p->b[g] = b ? copy + la + 1 : NULL, p->enc[g] = enc;
    p->tokens += enc.n;
}

/* Reads one line (with its '\n', if any) into *line, never holding more than
 * max bytes: past that *too_long is set and reading stops there (an endless
 * line such as /dev/zero's would otherwise fill the memory). -1 at the end. */
static ssize_t read_line(FILE *in, char **line, size_t *cap, size_t max, int *too_long) {
    size_t n = 0;
    int c = EOF;
    *too_long = 0;
    flockfile(in);
    while ((c = getc_unlocked(in)) != EOF) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            if (nc > max + 2) nc = max + 2;
            char *p = n + 2 > nc ? NULL : realloc(*line, nc);
            if (!p) break; /* only when out of memory: reported as a read error */
            *line = p, *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
        if (n > max) {
            *too_long = 1;
            break;
        }
    }
    funlockfile(in);
    if (n == 0 && c == EOF) return -1;
    if (c != '\n' && c != EOF && !*too_long) return errno = ENOMEM, -2;
    (*line)[n] = '\0';
    return (ssize_t)n;
}

/* A --batch FILE: a regular file, a FIFO or pipe, a device (a stream is read
 * as it comes); never a directory. */
static FILE *open_batch(const char *path, AvErr *e) {
    if (!strcmp(path, "-")) return stdin;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd < 0) return av_err(e, "%s: cannot open: %s", path, strerror(errno)), NULL;
    if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
        int err = S_ISDIR(sb.st_mode) ? EISDIR : errno;
        close(fd);
        return av_err(e, "%s: cannot read: %s", path, strerror(err)), NULL;
    }
    FILE *in = fdopen(fd, "rb");
    if (!in) {
        close(fd);
        av_err(e, "%s: cannot open: out of memory", path);
    }
    return in;
}

static int run_batch(Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    FILE *in = open_batch(o->batch.path, e);
    if (!in) return -1;
    BatchState bs = {r, strcmp(o->batch.path, "-") ? o->batch.path : "stdin", NULL, 0, 0, 0,
                     !o->quiet && av_progress_wanted()};
    long total = bs.show ? count_lines(in) : -1;
    AvOut out = {0};
    int streaming = !o->stats && !o->heads.on && !o->output.out_dir;
    Pack *pack = calloc(1, sizeof *pack);
    if (pack && o->batch.pack_tokens > 0) {
        pack->ids = malloc((size_t)o->batch.pack_tokens * sizeof *pack->ids);
        pack->types = malloc((size_t)o->batch.pack_tokens * sizeof *pack->types);
    }
    if (!pack || (o->batch.pack_tokens > 0 && (!pack->ids || !pack->types))) {
        if (pack) pack_free(pack);
        free(pack);
        if (in != stdin) fclose(in);
        return av_err(e, "out of memory");
    }
    if (streaming && av_out_open(&out, o->output.json_path ? o->output.json_path : "-", e) != 0) {
        pack_free(pack);
        free(pack);
        if (in != stdin) fclose(in);
        return -1;
    }
    bs.jsonl = streaming ? out.fp : NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = 0;
    long lineno = 0;
    int rc = 0, too_long = 0;
    double t0 = av_now_ms(), last_shown = 0;
    while (!bs.stop && (got = read_line(in, &line, &cap, BATCH_MAX_LINE, &too_long)) >= 0) {
        lineno++;
        if (too_long) { /* its end may never come: the batch stops here */
            av_err(e, "%s:%ld: line longer than %u bytes (the --batch line limit)", bs.name, lineno,
                   (unsigned)BATCH_MAX_LINE);
            bs.stop = 1;
            break;
        }
        size_t len = (size_t)got;
        char *b = NULL;
        if (memchr(line, '\0', len)) {
            line_failed(&bs, lineno, "contains a NUL byte");
            continue;
        }
        split_line(line, &len, &b);
        if (len == 0 || !line[0]) {
            line_failed(&bs, lineno, b ? "sentence A is empty (the line starts with its TAB)" : "empty line");
            continue;
        }
        batch_line(&bs, pack, line, b, lineno);
        if (bs.show && av_now_ms() - last_shown > 200) {
            progress(bs.done + bs.failed, total, t0, 0);
            last_shown = av_now_ms();
        }
    }
    if (!bs.stop) pack_flush(&bs, pack);
    pack_free(pack);
    free(pack);
    if (bs.stop) rc = -1;
    if (bs.show) progress(bs.done + bs.failed, total, t0, 1);
    if (rc == 0 && (ferror(in) || got == -2)) rc = av_err(e, "%s: read error: %s", bs.name, strerror(errno));
    free(line);
    if (in != stdin) fclose(in);
    if (rc != 0) {
        if (streaming) av_out_abort(&out);
        return -1;
    }
    if (streaming && av_out_commit(&out, e) != 0) return -1;
    if (o->stats && finish_stats(r, e) != 0) return -1;
    if (o->heads.on && finish_heads(r, e) != 0) return -1;
    if (bs.failed) return av_err(e, "%ld of %ld lines failed", bs.failed, lineno);
    if (!o->quiet) av_info("%ld inputs processed", bs.done);
    return 0;
}

/* ---------------------------------------------------------------- the API */

int pipeline_open(Pipeline **out, const ModelSpec *m, const RunSpec *o, const char **dir, const char **why, AvErr *e) {
    Run *r = calloc(1, sizeof *r);
    *out = r;
    if (!r) return av_err(e, "out of memory");
    r->m = *m;
    r->o = o;
    r->dir = resolve_model(m, why);
    *dir = r->dir;
    if (!r->dir)
        return av_err(e, "no model found: pass --model DIR, set $ATTNVIZ_MODEL, run `make weights` for "
                         "bert-base-uncased, or `make demo-model` to generate the demo model");
    return load_all(r, e);
}

const ModelConfig *pipeline_config(const Pipeline *p) { return &p->cfg; }

const char *pipeline_head_missing(const Pipeline *p) {
    if (!p->have_model || model_has_head(&p->model)) return NULL;
    if (p->model.head_err[0]) return p->model.head_err;
    return p->cfg.causal ? "no lm_head weights and tie_word_embeddings is false (a base model checkpoint?)"
                         : "no masked-LM head weights (a base model checkpoint: use its ...ForMaskedLM one)";
}

int pipeline_run(Pipeline *p, AvErr *e) { return p->o->batch.path ? run_batch(p, e) : run_single(p, e); }

void pipeline_close(Pipeline *p) {
    if (!p) return;
    if (p->o->profile)
        av_note(AV_NOTE_PROFILE, "load_ms=%.2f tokenize_ms=%.2f forward_ms=%.2f write_ms=%.2f kernel=%s", p->t_load,
                p->t_tok, p->t_fwd, p->t_write, gemm_kernel());
    run_free(p);
    free(p);
}

/* ---------------------------------------------------------------- render */

static int in_ints(int x, const int *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

int pipeline_render(const RenderSpec *rs, const RunSpec *o, AvErr *e) {
    Rendered rd;
    if (render_load(&rd, rs->input, rs->meta, e) != 0) return -1;
    int rc = -1;
    const int H = rd.cfg.num_heads;
    CapStack stacks[3];
    int n_stacks = 0;
    if (rd.enc_dec) {
        if (o->output.npy_path) {
            av_err_usage(e, "--npy: encoder-decoder attention goes to --json and the page");
            goto done;
        }
        const RenderStack *src[3] = {&rd.enc, &rd.dec, &rd.cross};
        static const char *const names[3] = {"encoder", "decoder", "cross"};
        for (int k = 0; k < 3; k++)
            if (src[k]->present)
                stacks[n_stacks++] = (CapStack){names[k], k == 2 ? src[k]->cross : src[k]->cap.attn, src[k]->n_rows,
                                                src[k]->n_cols, k >= 1, k == 1, k == 1};
    }
    if (o->sel.layer >= 0 && !in_ints(o->sel.layer, rd.layers, rd.n_layers)) {
        av_err_usage(e, "--layer %d is not among the given layers (%d of them, up to %d)", o->sel.layer, rd.n_layers,
               rd.layers[rd.n_layers - 1]);
        goto done;
    }
    /* the layer was checked against the given ones (not a count from 0); render takes no --layers/--heads */
    const Selection sel = {-1, o->sel.head, NULL, 0, NULL, 0, o->sel.show_heads, o->sel.n_show_heads};
    if (sel_check(&sel, INT_MAX, H, "attention", e) != 0) goto done;
    if (o->capture.qk && (rd.enc_dec || !rd.self.cap.q)) {
        av_err_usage(e, "--qk: %s holds no 'queries' and 'keys'", rs->input);
        goto done;
    }
    OutDoc d;
    memset(&d, 0, sizeof d);
    d.model_name = rd.model_name;
    d.model_dir = rs->input;
    d.cfg = &rd.cfg;
    d.dtype = NULL; /* whatever the arrays were, they are probabilities now */
    d.text_a = rd.text;
    d.text_b = rd.text_b;
    d.enc = &rd.tokens;
    d.cap = rd.enc_dec ? NULL : &rd.self.cap;
    if (rd.enc_dec) {
        /* the encoder's tokens lead; a decoder alone leads with its own */
        d.enc = rd.tokens.n ? &rd.tokens : &rd.dec_tokens;
        d.dec_enc = rd.dec_tokens.n ? &rd.dec_tokens : NULL;
        d.stacks = stacks, d.n_stacks = n_stacks;
    }
    d.display_tokens = rd.tokens.byte_level ? rd.tokens.display : NULL;
    d.layers = rd.layers, d.n_sel_layers = rd.n_layers;
    d.init_layer = o->sel.layer >= 0 ? o->sel.layer : rd.layers[0];
    d.init_head = o->sel.head >= 0 ? o->sel.head : 0;
    d.precision = o->output.precision;
    d.with_qk = o->capture.qk;
    d.init_view = o->output.view, d.theme = o->output.theme;
    d.init_heads = o->sel.show_heads, d.n_init_heads = o->sel.n_show_heads;
    Run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    rc = emit(&run, &d, 0, e);
done:
    render_free(&rd);
    return rc;
}

/* ---------------------------------------------------------------- one input for a server */

const Model *pipeline_model(const Pipeline *p) { return &p->model; }

int pipeline_tokenize(Pipeline *p, const char *a, const char *b, TokEncoding *enc, AvErr *e) {
    return tokenize(p, a, b, enc, e);
}

int pipeline_forward(Pipeline *p, const TokEncoding *enc, Capture *cap, int k, CapPredictions *pred, AvErr *e) {
    if (!p->have_model) return av_err(e, "no model loaded");
    if (p->rs.max_tokens < enc->n) {
        model_runstate_free(&p->rs);
        if (model_runstate_alloc(&p->rs, &p->model, enc->n, e) != 0) return -1;
    }
    double t0 = av_now_ms();
    int rc = model_forward_kv(&p->model, &p->rs, NULL, enc->ids, enc->type_ids, enc->n, cap, k > 0, e);
    if (rc == 0 && k > 0) rc = predict(p, enc, k, pred, e);
    p->t_fwd += av_now_ms() - t0;
    return rc;
}

void pipeline_doc(const Pipeline *p, OutDoc *d, const TokEncoding *enc, const Capture *cap, const CapPredictions *pred,
                  const char *a, const char *b) {
    fill_doc(p, d, enc, cap, a, b);
    d->pred = pred;
    d->gen = NULL;
    d->gen_text = NULL;
}

/* ---------------------------------------------------------------- diff */

/* Runs tokens already in enc; the capture is handed over to cap (the run
 * allocates a new one next time). */
static int run_owned(Run *r, const TokEncoding *enc, Capture *cap, AvErr *e) {
    if (ensure_buffers(r, enc->n, e) != 0) return -1;
    double t0 = av_now_ms();
    int rc = model_forward(&r->model, &r->rs, enc->ids, enc->type_ids, enc->n, &r->cap, e);
    r->t_fwd += av_now_ms() - t0;
    if (rc != 0) return -1;
    *cap = r->cap;
    memset(&r->cap, 0, sizeof r->cap);
    r->cap_n = 0;
    return 0;
}

typedef int (*DiffWriter)(FILE *f, const OutDoc *d, const char *templates_dir, AvErr *e);
static int diff_json(FILE *f, const OutDoc *d, const char *dir, AvErr *e) {
    (void)dir;
    if (diff_write_json(f, d, e) != 0) return -1;
    return fputc('\n', f) == EOF ? av_err_errno(e, "write error") : 0;
}
static int diff_page(FILE *f, const OutDoc *d, const char *dir, AvErr *e) { return html_write_doc(f, d, dir, e); }

static int diff_out(const char *path, DiffWriter w, const OutDoc *d, const char *dir, AvErr *e) {
    AvOut out;
    if (av_out_open(&out, path, e) != 0) return -1;
    if (w(out.fp, d, dir, e) != 0) {
        av_err_prefix(e, "%s", strcmp(path, "-") ? path : "stdout");
        av_out_abort(&out);
        return -1;
    }
    return av_out_commit(&out, e);
}

/* The first token where two models' tokenizations differ, in one line. */
static int tokens_differ(const Run *a, const TokEncoding *ea, const Run *b, const TokEncoding *eb, AvErr *e) {
    int i = 0;
    while (i < ea->n && i < eb->n && ea->ids[i] == eb->ids[i]) i++;
    char ta[80], tb[80];
    snprintf(ta, sizeof ta, "%s", i < ea->n ? ea->tokens[i] : "(end)");
    snprintf(tb, sizeof tb, "%s", i < eb->n ? eb->tokens[i] : "(end)");
    return av_err(e, "diff: %s and %s tokenize the text differently (%d and %d tokens; token %d is '%s' id %d and "
                     "'%s' id %d): --model A --model B needs one tokenizer",
                  a->dir, b->dir, ea->n, eb->n, i, ta, i < ea->n ? ea->ids[i] : -1, tb, i < eb->n ? eb->ids[i] : -1);
}

int pipeline_diff(const ModelSpec *m, const DiffSpec *ds, const RunSpec *o, AvErr *e) {
    ModelSpec mb = *m;
    Run *ra = NULL, *rb = NULL;
    const char *dir = NULL, *why = "";
    TokEncoding ea = {0}, eb = {0};
    Capture ca = {0}, cb = {0};
    DiffAlign al = {0};
    double *jsd = NULL;
    char name_a[256], name_b[256];
    int rc = -1;
    if (pipeline_open(&ra, m, o, &dir, &why, e) != 0) goto done;
    if (!o->quiet) av_info("model A %s (%s)", dir, why);
    if (ds->model_b) {
        mb.path = ds->model_b;
        if (pipeline_open(&rb, &mb, o, &dir, &why, e) != 0) goto done;
        if (!o->quiet) av_info("model B %s (%s)", dir, why);
        if (ra->cfg.num_layers != rb->cfg.num_layers || ra->cfg.num_heads != rb->cfg.num_heads) {
            av_err(e, "diff: %s has %d layers x %d heads but %s has %d x %d: --model A --model B compares models of one shape",
                   ra->dir, ra->cfg.num_layers, ra->cfg.num_heads, rb->dir, rb->cfg.num_layers, rb->cfg.num_heads);
            goto done;
        }
    }
    Run *rB = rb ? rb : ra;
    if (sel_check(&o->sel, ra->cfg.num_layers, ra->cfg.num_heads, "model", e) != 0) goto done;
    const char *ta = o->text_a, *tb = rb ? o->text_a : o->text_b;
    if (tokenize(ra, ta, NULL, &ea, e) != 0 || tokenize(rB, tb, NULL, &eb, e) != 0) goto done;
    if (rb && (ea.n != eb.n || memcmp(ea.ids, eb.ids, sizeof *ea.ids * (size_t)ea.n))) {
        tokens_differ(ra, &ea, rb, &eb, e);
        goto done;
    }
    warn_truncated(ra, &ea, 0);
    warn_truncated(rB, &eb, 0);
    if (run_owned(ra, &ea, &ca, e) != 0 || run_owned(rB, &eb, &cb, e) != 0) goto done;
    double t0 = av_now_ms();
    if (diff_align(ea.ids, ea.n, eb.ids, eb.n, &al, e) != 0) goto done;
    if (al.n_pairs == 0) {
        av_err(e, "diff: no token of A (%d) is also in B (%d): no attention row to compare", ea.n, eb.n);
        goto done;
    }
    OutDoc da, db;
    fill_doc(ra, &da, &ea, &ca, ta, NULL);
    fill_doc(rB, &db, &eb, &cb, tb, NULL);
    if (rb && !strcmp(da.model_name, db.model_name)) { /* e.g. a demo and its edited copy: tell them apart by folder */
        da.model_name = model_display_name(ra->dir, 0, name_a, sizeof name_a);
        db.model_name = model_display_name(rb->dir, 0, name_b, sizeof name_b);
        if (!strcmp(da.model_name, db.model_name)) da.model_name = ra->dir, db.model_name = rb->dir;
    }
    const int nl = out_n_layers(&da), nh = out_n_heads(&da);
    if (!(jsd = malloc(sizeof *jsd * (size_t)nl * nh))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (diff_divergence(&da, &db, &al, jsd, e) != 0) goto done;
    const struct OutDiff df = {&db, rb != NULL, al.a_to_b, al.b_to_a, al.n_pairs, jsd};
    da.diff = &df;
    if (o->sel.layer < 0 && o->sel.head < 0) { /* the page opens on the most divergent head */
        int best = 0;
        for (int i = 1; i < nl * nh; i++)
            if (jsd[i] > jsd[best]) best = i;
        da.init_layer = out_layer(&da, best / nh), da.init_head = out_head(&da, best % nh);
    }
    if (!o->output.view) da.init_view = "diff";
    if (o->output.json_path && diff_out(o->output.json_path, diff_json, &da, NULL, e) != 0) goto done;
    const char *html = o->output.html_path ? o->output.html_path : o->output.json_path ? NULL : "attnviz-diff.html";
    if (html && diff_out(html, diff_page, &da, o->output.templates_dir, e) != 0) goto done;
    if (html && !o->quiet) av_info("wrote %s", html);
    ra->t_write += av_now_ms() - t0;
    const int to_stdout = (o->output.json_path && !strcmp(o->output.json_path, "-")) || (html && !strcmp(html, "-"));
    if (!to_stdout && (diff_write_table(stdout, &da, ds->top ? ds->top : 10, e) != 0 || fflush(stdout) != 0)) {
        if (!e->msg[0]) av_err(e, "stdout: write error");
        goto done;
    }
    rc = 0;
done:
    free(jsd);
    diff_align_free(&al);
    model_capture_free(&ca);
    model_capture_free(&cb);
    tok_encoding_free(&ea);
    tok_encoding_free(&eb);
    pipeline_close(ra);
    pipeline_close(rb);
    return rc;
}
