/* session.c — the model a run uses: found (--model, $ATTNVIZ_MODEL, bundled
 * weights, the demo), loaded with its tokenizer and head labels, freed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "gemm.h"
#include "report.h"
#include "run_internal.h"
#include "util.h"

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
static int load_tokenizer(Run *r, int have_cfg, AvErr *e) {
    int rc;
    char used[512];
    snprintf(used, sizeof used, "%s", r->have_model ? r->model.path : r->dir);
    if (r->have_model && r->model.gguf) {
        if (r->m.lowercase == 1)
            return av_err(e, "--uncased: %s carries its own tokenizer, which never lower-cases", r->dir);
        rc = tok_load_gguf(&r->tok, r->model.gguf, r->model.path, arch_spec(r->cfg.arch)->gguf_tok, e);
    } else {
        const ArchSpec *fam = have_cfg ? arch_spec(r->cfg.arch) : NULL;
        /* a vision encoder reads no text: its folder has no tokenizer */
        if (fam && fam->tokenizer == TOK_SOURCE_NONE) return 0;
        TokDirHint hint = {fam ? r->cfg.model_type : NULL, fam ? (TokSource)fam->tokenizer : TOK_SOURCE_ANY,
                           r->m.lowercase, ""};
        rc = tok_load_dir(&r->tok, r->dir, &hint, e);
        snprintf(used, sizeof used, "%s", hint.used);
        if (rc != 0 && have_cfg && r->cfg.vision) {
            /* a whole CLIP/SigLIP model runs on an image alone: its text tower's tokenizer is needed only
             * with a text (run_image.c says why it is missing then) */
            snprintf(r->tok_err, sizeof r->tok_err, "%s", e->msg);
            return 0;
        }
    }
    /* embeddings may have more rows than the tokenizer has ids (padded vocabularies), never fewer */
    const int vocab = r->have_model && r->model.text ? r->model.text->cfg.vocab_size : r->cfg.vocab_size;
    if (rc == 0 && have_cfg && tok_vocab_size(r->tok) > vocab)
        rc = av_err(e, "%s: %d tokens, but %s says vocab_size %d", used, tok_vocab_size(r->tok),
                    r->model.gguf ? "its metadata" : "config.json", vocab);
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
static void read_chat_template(Run *r, int have_cfg) {
    AvErr le = {0};
    if (have_cfg && (!r->cfg.causal || r->cfg.enc_dec)) return;
    if (chat_template_from_model(&r->chat, r->have_model && r->model.gguf ? r->model.path : r->dir,
                                 r->have_model ? r->model.gguf : NULL, &le) != 0) {
        r->chat = NULL;
        r->chat_failed = 1;
        snprintf(r->chat_err, sizeof r->chat_err, "%s", le.msg);
    }
}

int pipeline_chat_template(const Pipeline *p, const ChatTemplate **t, AvErr *e) {
    *t = p->chat;
    if (p->chat_failed) return av_err(e, "%s", p->chat_err);
    return 0;
}

/* --chat and --chat-file: a decoder that ships a template; the messages read. */
static int load_chat(Run *r, int have_cfg, AvErr *e) {
    const RunSpec *o = r->o;
    const ChatTemplate *t;
    if (have_cfg && (!r->cfg.causal || r->cfg.enc_dec))
        return av_err_usage(e, "--chat%s: %s is %s: chat templates are for decoders", o->chat_file ? "-file" : "",
                            r->dir, r->cfg.enc_dec ? "an encoder-decoder" : "a masked (encoder) model");
    if (pipeline_chat_template(r, &t, e) != 0) return -1;
    if (!t)
        return av_err(e, "--chat%s: %s ships no chat template (%s): give the prompt in the model's own format "
                      "without --chat", o->chat_file ? "-file" : "", r->dir,
                      r->have_model && r->model.gguf ? "no tokenizer.chat_template in its metadata"
                                                     : "no chat_template in tokenizer_config.json, no chat_template.jinja");
    if (!o->chat_file) return 0;
    char *buf;
    size_t len;
    if (av_read_file(o->chat_file, 64u << 20, &buf, &len, e) != 0) return -1;
    int rc = chat_messages_parse_json(buf, len, &r->chat_msgs, &r->n_chat_msgs, e);
    free(buf);
    return rc != 0 ? av_err_prefix(e, "%s", o->chat_file) : 0;
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
    if (stat(r->dir, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) av_err(e, "%s: no such file or directory", r->dir);
        else av_err(e, "%s: cannot resolve the model path: %s", r->dir, strerror(errno)); /* a symlink loop, no access */
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
        /* many passes pay for reading the weights in once; one pass does not */
        const int many = r->m.resident || (o->batch.path && long_batch(o->batch.path)) || o->predict.generate_n > 0 ||
                         o->lens.ablate;
        if (model_load_mode(&r->model, r->dir, many ? AV_MAP_RESIDENT : AV_MAP_FILE, e) != 0) goto done;
        r->have_model = 1;
        have_cfg = 1;
        char *gc = model_is_gguf(r->dir) ? NULL : av_path_join(r->dir, "generation_config.json");
        int grc = gc ? cfg_load_generation(&r->model.cfg, gc, e) : 0;
        free(gc);
        if (grc != 0) goto done;
        r->cfg = r->model.cfg;
    }
    if (load_tokenizer(r, have_cfg, e) != 0) goto done;
    if (r->m.mmproj) {
        /* llama.cpp's pair: the text GGUF's <image> is where the picture goes */
        if (!r->have_model) {
            av_err_usage(e, "%s", "--mmproj goes with a model's weights, not --tokens-only");
            goto done;
        }
        const int img = r->tok ? tok_token_to_id(r->tok, "<image>") : -1;
        if (arch_llava_attach_mmproj(&r->model, r->m.mmproj, img, e) != 0) goto done;
        r->cfg = r->model.cfg;
    }
    read_chat_template(r, have_cfg);
    if (run_is_chat(o) && load_chat(r, have_cfg, e) != 0) goto done;
    if (have_cfg && av_file_exists(heads) &&
        cfg_load_head_labels(heads, &r->cfg, &r->patterns, &r->descriptions, e) != 0)
        goto done;
    if (o->stats && stats_init(&r->stats, r->cfg.num_layers, r->cfg.num_heads, e) != 0) goto done;
    for (int k = 0; k < 2 && o->stats && r->cfg.enc_dec; k++)
        if (stats_init(&r->s2s_stats[k], r->cfg.dec_layers, r->cfg.num_heads, e) != 0) goto done;
    const char *name = run_display_name(r->dir, r->cfg.is_demo, r->name, sizeof r->name);
    if (name != r->name) snprintf(r->name, sizeof r->name, "%s", name);
    if (o->heads.on) {
        HeadsOptions ho = {o->heads.n_scores ? o->heads.scores : NULL, o->heads.n_scores, o->heads.pattern, o->heads.exclude_bos,
                           o->heads.exclude_current, o->heads.top_k};
        if (heads_init(&r->heads, r->cfg.num_layers, r->cfg.num_heads, &ho, e) != 0) goto done;
        for (int k = 0; k < 2 && r->cfg.enc_dec; k++)
            if (heads_init(&r->s2s_heads[k], r->cfg.dec_layers, r->cfg.num_heads, &ho, e) != 0) goto done;
        if (o->capture.measure == MEASURE_NORM) r->heads.acc.measure = "norm";
    }
    if (o->stats && o->capture.measure == MEASURE_NORM) r->stats.measure = "norm";
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
    free(r->nattn);
    model_runstate_free(&r->rs);
    model_kv_free(&r->kv);
    pred_free(&r->pred);
    gen_free(&r->gen);
    pipeline_spelling_free(&r->pred_words);
    pipeline_spelling_free(&r->gen_words);
    lens_free(&r->lens);
    flow_free(&r->flow);
    pipeline_spelling_free(&r->lens_words);
    free(r->gen_text);
    stats_free(&r->stats);
    stats_free(&r->s2s_stats[0]);
    stats_free(&r->s2s_stats[1]);
    heads_free(&r->heads);
    heads_free(&r->s2s_heads[0]);
    heads_free(&r->s2s_heads[1]);
    free(r->s2s_layers[0]);
    free(r->s2s_layers[1]);
    tok_free(r->tok);
    chat_template_free(r->chat);
    chat_messages_free(r->chat_msgs, r->n_chat_msgs);
    if (r->have_model) model_free(&r->model);
    free(r->dir);
}

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

void pipeline_close(Pipeline *p) {
    if (!p) return;
    if (p->o->profile)
        av_note(AV_NOTE_PROFILE, "load_ms=%.2f tokenize_ms=%.2f forward_ms=%.2f write_ms=%.2f kernel=%s", p->t_load,
                p->t_tok, p->t_fwd, p->t_write, gemm_kernel());
    run_free(p);
    free(p);
}

const Model *pipeline_model(const Pipeline *p) { return &p->model; }
