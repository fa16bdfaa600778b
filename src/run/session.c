/* session.c — the model runs use (session.h): found (--model, $ATTNVIZ_MODEL,
 * bundled weights, the demo), loaded with its tokenizer and head labels, freed;
 * its part of every document (session_doc). */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"
#include "arch.h"
#include "gemm.h"
#include "report.h"
#include "run_internal.h"
#include "session.h"
#include "util.h"

#define DEMO_NOTE                                                                                                 \
    "attnviz demo model: weights constructed by hand (not trained) so that each head has a known pattern. For real " \
    "attention, trained models install offline: `make weights MODEL=all-MiniLM-L6-v2` (an encoder; then --model "  \
    "weights/all-MiniLM-L6-v2) or `make weights MODEL=smollm2` (a decoder LLM; then --model "                       \
    "weights/SmolLM2-135M-Instruct.Q4_1.gguf)."

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

/* A --model path that is not there, said with what was likely meant: the file a trailing '/'
 * hides, a folder under weights/ named bare, or a hub name (models install with make weights). */
static int missing_model(const char *path, AvErr *e) {
    struct stat sb;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    if (n < strlen(path)) {
        char bare[PATH_MAX];
        snprintf(bare, sizeof bare, "%.*s", (int)n, path);
        if (stat(bare, &sb) == 0 && S_ISREG(sb.st_mode))
            return av_err(e, "%s: not a folder: the model is the file %s (--model %s)", path, bare, bare);
    }
    if (!strchr(path, '/')) {
        char *w = av_path_join("weights", path);
        const int there = w && stat(w, &sb) == 0;
        free(w);
        if (there) return av_err(e, "%s: no such file or directory (weights/%s is there: --model weights/%s)", path, path, path);
    }
    /* "gpt2", "ORG/REPO": a name, not a path */
    const char *slash = strchr(path, '/');
    char first[PATH_MAX];
    snprintf(first, sizeof first, "%.*s", slash ? (int)(slash - path) : (int)strlen(path), path);
    const int hub_like = path[0] != '/' && path[0] != '.' && path[0] != '~' && (!slash || !strchr(slash + 1, '/')) &&
                         !(n > 5 && !strncmp(path + n - 5, ".gguf", 5)) && !(slash && stat(first, &sb) == 0);
    if (hub_like)
        return av_err(e, "%s: no such file or directory (--model takes a local folder or .gguf file, not a model's "
                         "name: make weights MODEL=%s installs a known one into weights/; docs/models.md)", path, path);
    return av_err(e, "%s: no such file or directory", path);
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

const char *run_display_name(const char *dir, int is_demo, char *name, size_t len) {
    if (is_demo) return "attnviz-demo";
    const char *end = dir + strlen(dir);
    while (end > dir && end[-1] == '/') end--;
    const char *start = end;
    while (start > dir && start[-1] != '/') start--;
    snprintf(name, len, "%.*s", (int)(end - start), start);
    return name[0] ? name : dir;
}

/* The tokenizer: from a GGUF file's metadata, else the one the model folder
 * holds (tok_load_dir chooses); its ids must fit the embeddings. */
static int load_tokenizer(Session *s, int lowercase, int have_cfg, AvErr *e) {
    int rc;
    char used[512];
    snprintf(used, sizeof used, "%s", s->have_model ? s->model.path : s->dir);
    if (s->have_model && s->model.gguf) {
        if (lowercase == 1)
            return av_err(e, "--uncased: %s carries its own tokenizer, which never lower-cases", s->dir);
        rc = tok_load_gguf(&s->tok, s->model.gguf, s->model.path, arch_spec(s->cfg.arch)->gguf_tok, e);
    } else {
        const ArchSpec *fam = have_cfg ? arch_spec(s->cfg.arch) : NULL;
        /* a vision encoder reads no text: its folder has no tokenizer */
        if (fam && fam->tokenizer == TOK_SOURCE_NONE) return 0;
        TokDirHint hint = {fam ? s->cfg.model_type : NULL, fam ? (TokSource)fam->tokenizer : TOK_SOURCE_ANY,
                           lowercase, ""};
        rc = tok_load_dir(&s->tok, s->dir, &hint, e);
        snprintf(used, sizeof used, "%s", hint.used);
        if (rc != 0 && have_cfg && s->cfg.vision) {
            /* a whole CLIP/SigLIP model runs on an image alone: its text tower's tokenizer is needed only
             * with a text (run_image.c says why it is missing then) */
            snprintf(s->tok_err, sizeof s->tok_err, "%s", e->msg);
            return 0;
        }
    }
    /* embeddings may have more rows than the tokenizer has ids (padded vocabularies), never fewer */
    const int vocab = s->have_model && s->model.text ? s->model.text->cfg.vocab_size : s->cfg.vocab_size;
    if (rc == 0 && have_cfg && tok_vocab_size(s->tok) > vocab)
        rc = av_err(e, "%s: %d tokens, but %s says vocab_size %d", used, tok_vocab_size(s->tok),
                    s->model.gguf ? "its metadata" : "config.json", vocab);
    return rc;
}

/* A batch long enough to pay for reading the weights in (util.h's
 * AV_MAP_RESIDENT: faster products in every pass, against one read at the
 * start; bench/README.md has the measurements): standard input, or a file of
 * 256 KB or more (thousands of short sentences). */
static int long_batch(const char *path) {
    struct stat sb;
    if (!strcmp(path, "-")) return 1;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 256 * 1024;
}

/* A decoder's chat template, read with the model (a model without a config, tokens only, may be
 * one): kept, or why it could not be read, so that a run that never asks for a chat is not stopped
 * by a template it does not use. Reading it afterwards only reads. */
static void read_chat_template(Session *s, int have_cfg) {
    AvErr le = {0};
    if (have_cfg && (!s->cfg.causal || s->cfg.enc_dec)) return;
    if (chat_template_from_model(&s->chat, s->have_model && s->model.gguf ? s->model.path : s->dir,
                                 s->have_model ? s->model.gguf : NULL, &le) != 0) {
        s->chat = NULL;
        s->chat_failed = 1;
        snprintf(s->chat_err, sizeof s->chat_err, "%s", le.msg);
    }
}

int session_chat_template(const Session *s, const ChatTemplate **t, AvErr *e) {
    *t = s->chat;
    if (s->chat_failed) return av_err(e, "%s", s->chat_err);
    return 0;
}

/* The text tokenizer's id of a token's spelling, for the mmproj's placeholders (-1: absent, or no tokenizer). */
static int session_token_id(const void *tok, const char *spelling) {
    return tok ? tok_token_to_id((const Tokenizer *)tok, spelling) : -1;
}

static int load_all(Session *s, const ModelSpec *m, AvErr *e) {
    double t0 = av_now_ms();
    char *cfgp = av_path_join(s->dir, "config.json"), *heads = av_path_join(s->dir, "heads.json");
    int rc = -1, have_cfg = 0;
    if (!cfgp || !heads) {
        av_err(e, "out of memory");
        goto done;
    }
    struct stat sb;
    if (stat(s->dir, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) missing_model(s->dir, e);
        else av_err(e, "%s: cannot resolve the model path: %s", s->dir, strerror(errno)); /* a symlink loop, no access */
        goto done;
    }
    if (!av_file_exists(cfgp) && !m->tokenizer_only && !model_is_gguf(s->dir)) {
        av_err(e, "%s: no config.json in the model folder", s->dir);
        goto done;
    }
    if (m->tokenizer_only && !model_is_gguf(s->dir)) {
        /* a tokenizer-only folder (e.g. GPT-2's original encoder.json + vocab.bpe) needs no config */
        if (av_file_exists(cfgp)) {
            if (cfg_load(&s->cfg, cfgp, e) != 0) goto done;
            have_cfg = 1;
        }
    } else {
        if (model_load_deferred(&s->model, s->dir, m->resident ? AV_MAP_RESIDENT : AV_MAP_FILE, e) != 0) goto done;
        s->have_model = 1;
        have_cfg = 1;
        char *gc = model_is_gguf(s->dir) ? NULL : av_path_join(s->dir, "generation_config.json");
        int grc = gc ? cfg_load_generation(&s->model.cfg, gc, e) : 0;
        free(gc);
        if (grc != 0) goto done;
        s->cfg = s->model.cfg;
        /* weights larger than the memory free are refused here, before any input and before any of
         * them is read (fit.c); then held as the loader planned (a resident copy, or mapped) */
        if (session_weights_fit(s, e) != 0 || model_hold(&s->model, e) != 0) goto done;
    }
    if (load_tokenizer(s, m->lowercase, have_cfg, e) != 0) goto done;
    s->have_cfg = have_cfg;
    if (m->mmproj) {
        /* llama.cpp's pair: the text GGUF's tokenizer spells the picture's tokens */
        if (!s->have_model) {
            av_err_usage(e, "%s", "--mmproj goes with a model's weights, not --tokens-only");
            goto done;
        }
        if (arch_llava_attach_mmproj(&s->model, m->mmproj, session_token_id, s->tok, e) != 0) goto done;
        s->cfg = s->model.cfg;
        /* the two files together, before any of the mmproj's weights is read */
        if (session_weights_fit(s, e) != 0) goto done;
    }
    read_chat_template(s, have_cfg);
    /* a GGUF's vocabulary is built as a tokenizer.json tree, freed in many small pieces that malloc
     * would keep: handed back, Gemma 3's 262,144 pieces leave 61 MB of the process's memory, not 249 */
    malloc_trim(0);
    if (have_cfg && av_file_exists(heads) &&
        cfg_load_head_labels(heads, &s->cfg, &s->patterns, &s->descriptions, e) != 0)
        goto done;
    const char *name = run_display_name(s->dir, s->cfg.is_demo, s->name, sizeof s->name);
    if (name != s->name) snprintf(s->name, sizeof s->name, "%s", name);
    rc = 0;
done:
    free(cfgp);
    free(heads);
    s->t_load = av_now_ms() - t0;
    if (av_memory_used(&s->mem_load) != 0) memset(&s->mem_load, 0, sizeof s->mem_load);
    return rc;
}

int session_open(Session **out, const ModelSpec *m, const char **dir, const char **why, AvErr *e) {
    Session *s = calloc(1, sizeof *s);
    *out = s;
    *dir = NULL;
    if (!s) return av_err(e, "out of memory");
    s->dir = resolve_model(m, why);
    *dir = s->dir;
    if (!s->dir)
        return av_err(e, "no model found: pass --model DIR|FILE, set $ATTNVIZ_MODEL, install a trained model "
                         "offline (make weights MODEL=all-MiniLM-L6-v2), or generate the demo model (make demo-model)");
    return load_all(s, m, e);
}

void session_close(Session *s) {
    if (!s) return;
    int n = s->cfg.num_layers * s->cfg.num_heads;
    cfg_free_head_labels(s->patterns, n);
    cfg_free_head_labels(s->descriptions, n);
    tok_free(s->tok);
    chat_template_free(s->chat);
    if (s->have_model) model_free(&s->model);
    free(s->dir);
    free(s);
}

const ModelConfig *session_config(const Session *s) { return &s->cfg; }

const char *session_head_missing(const Session *s) {
    if (!s->have_model || model_has_head(&s->model)) return NULL;
    if (s->cfg.is_demo)
        return "the demo model is built by hand without one; a trained model with one installs offline: make weights "
               "MODEL=smollm2, then --model weights/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (s->model.head_err[0]) return s->model.head_err;
    return s->cfg.causal ? "no lm_head weights and tie_word_embeddings is false (a base model checkpoint?)"
                         : "no masked-LM head weights (a base model checkpoint: use its ...ForMaskedLM one)";
}

void session_spelling_free(OutSpelling *w) {
    free(w->token);
    free(w->display);
    memset(w, 0, sizeof *w);
}

int session_spell(const Session *s, const int *ids, int n, OutSpelling *w, AvErr *e) {
    session_spelling_free(w);
    if (n <= 0) return 0;
    w->token = malloc((size_t)n * sizeof *w->token);
    w->display = malloc((size_t)n * sizeof *w->display);
    if (!w->token || !w->display) {
        session_spelling_free(w);
        return av_err(e, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        w->token[i] = tok_id_to_token(s->tok, ids[i]);
        w->display[i] = tok_id_display(s->tok, ids[i]);
    }
    w->n = n;
    return 0;
}

void session_doc(const Session *s, const RunSpec *o, OutDoc *d, const TokEncoding *enc, const Capture *cap,
                 const char *a, const char *b) {
    memset(d, 0, sizeof *d);
    d->model_name = s->name;
    d->model_dir = s->dir;
    d->cfg = &s->cfg;
    d->dtype = s->have_model ? s->model.dtype_name : NULL;
    d->is_demo = s->cfg.is_demo;
    d->model_note = s->cfg.is_demo ? DEMO_NOTE : NULL;
    d->head_patterns = (const char *const *)s->patterns;
    d->head_descriptions = (const char *const *)s->descriptions;
    d->text_a = a;
    d->text_b = b;
    d->enc = enc;
    d->cap = cap;
    d->display_tokens = enc->byte_level ? enc->display : NULL;
    d->layers = o->sel.layers, d->n_sel_layers = o->sel.n_layers;
    d->heads = o->sel.heads, d->n_sel_heads = o->sel.n_heads;
    d->init_layer = o->sel.layer >= 0 ? o->sel.layer : out_layer(d, 0);
    /* --show-heads all: no head to narrow the head view to (the page draws every head) */
    d->init_head = o->sel.head >= 0 ? o->sel.head : -1; /* every head, as bertviz's head view opens (--show-heads all too) */
    d->precision = o->output.precision;
    d->with_qk = o->capture.qk;
    d->init_view = o->output.view, d->theme = o->output.theme;
    d->init_heads = o->sel.show_heads, d->n_init_heads = o->sel.n_show_heads;
    d->templates_dir = o->output.templates_dir;
}

/* ---------------------------------------------------------------- opening for a run */

int session_open_for(Session **out, const ModelSpec *m, const RunSpec *o, const char **dir, const char **why, AvErr *e) {
    /* many passes pay for reading the weights in once; one pass does not */
    ModelSpec ms = *m;
    ms.resident = m->resident || (o->batch.path && long_batch(o->batch.path)) || o->predict.generate_n > 0 || o->lens.ablate;
    return session_open(out, &ms, dir, why, e);
}

void run_profile(const Session *s, const Run *r) {
    if (!s) return;
    /* memory: after the load, and now (the run's buffers still held, the weights' pages still mapped):
     * anonymous (the process's own copies and buffers) and file-backed (the weights as mapped) */
    AvMemUse u;
    if (av_memory_used(&u) != 0) memset(&u, 0, sizeof u);
    const double mb = 1e-6;
    av_note(AV_NOTE_PROFILE,
            "load_ms=%.2f tokenize_ms=%.2f forward_ms=%.2f write_ms=%.2f kernel=%s weights=%s weights_mb=%.0f "
            "load_anon_mb=%.0f load_file_mb=%.0f anon_mb=%.0f file_mb=%.0f peak_rss_mb=%.0f",
            s->t_load, r ? r->t_tok : 0, r ? r->t_fwd : 0, r ? r->t_write : 0, gemm_kernel(),
            s->have_model ? (const char *[]){"mapped", "resident"}[s->model.hold] : "none", s->model.file_bytes * mb,
            s->mem_load.anon * mb, s->mem_load.file * mb, u.anon * mb, u.file * mb, u.hwm * mb);
}
