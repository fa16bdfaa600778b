/* route.c — where one input's outputs go (a file each, npy siblings, one
 * file per batch line, or statistics and head scores accumulated) and the
 * table of writers that fill them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "explain_out.h"
#include "flow_out.h"
#include "image_out.h"
#include "lens_out.h"
#include "mix_out.h"
#include "npy.h"
#include "report.h"
#include "run_internal.h"
#include "util.h"

/* The writers (W_* in run_internal.h): one row each, what it writes and whether a newline
 * ends it (JSON documents and lines). Each reads the document only: what a few need beyond
 * the input (the templates folder, --stats' and heads' accumulators) is put into it first. */
static int write_page(FILE *f, const OutDoc *d, AvErr *e) { return html_write_doc(f, d, d->templates_dir, e); }
static int write_npy_q(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_qk(f, d, 'q', e); }
static int write_npy_k(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_qk(f, d, 'k', e); }
static int write_stats(FILE *f, const OutDoc *d, AvErr *e) {
    if (!d->stats) return av_err(e, "no statistics in the document");
    if (d->n_scored == 1) return stats_write_json(f, d->stats[0], d, e);
    return stats_write_json_stacks(f, d->stats, d->stack_names, d->n_scored, d, e);
}
static int write_pred_ids(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_predictions(f, d, 'i', e); }
static int write_pred_probs(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_predictions(f, d, 'p', e); }
static int write_pred_pos(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_predictions(f, d, 'n', e); }
static int write_npy_norm(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_norm(f, d, 'n', e); }
static int write_npy_vnorm(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_norm(f, d, 'v', e); }
static int write_npy_mix(FILE *f, const OutDoc *d, AvErr *e) { return mix_npy_write(f, d, 0, 0, e); }
static int write_npy_mix_layer(FILE *f, const OutDoc *d, AvErr *e) { return mix_npy_write(f, d, 0, 1, e); }
static int write_npy_mix2(FILE *f, const OutDoc *d, AvErr *e) { return mix_npy_write(f, d, 1, 0, e); }
static int write_npy_mix2_layer(FILE *f, const OutDoc *d, AvErr *e) { return mix_npy_write(f, d, 1, 1, e); }
static int write_stack0(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_stack(f, d, 0, e); }
static int write_stack1(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_stack(f, d, 1, e); }
static int write_stack2(FILE *f, const OutDoc *d, AvErr *e) { return npy_write_stack(f, d, 2, e); }
static int write_img_tokens(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_TOKENS, e); }
static int write_img_grid(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_GRID, e); }
static int write_pool_att(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_POOL, e); }
static int write_text_att(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_TEXT, e); }
static int write_vis_att(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_VISION, e); }
static int write_img_embeds(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_EMBEDS, e); }
static int write_pixels(FILE *f, const OutDoc *d, AvErr *e) { return image_npy_write(f, d, IMAGE_NPY_PIXELS, e); }
static int write_heads(FILE *f, const OutDoc *d, AvErr *e) {
    if (!d->scores) return av_err(e, "no head scores in the document");
    if (d->n_scored == 1) return heads_write_json(f, d->scores[0], e);
    return heads_write_json_stacks(f, d->scores, d->stack_names, d->n_scored, e);
}

static const struct {
    int (*write)(FILE *f, const OutDoc *d, AvErr *e);
    int newline;
} WRITERS[] = {
    [W_JSON] = {json_write_doc, 1},     [W_HTML] = {write_page, 0},      [W_NPY_ATT] = {npy_write_attention, 0},
    [W_NPY_Q] = {write_npy_q, 0},       [W_NPY_K] = {write_npy_k, 0},    [W_STATS_JSON] = {write_stats, 0},
    [W_TOKENS] = {json_write_tokens, 1}, [W_NPY_PRED_IDS] = {write_pred_ids, 0}, [W_NPY_PRED_PROBS] = {write_pred_probs, 0},
    [W_NPY_PRED_POS] = {write_pred_pos, 0}, [W_NPY_IDS] = {npy_write_ids, 0}, [W_HEADS_JSON] = {write_heads, 0},
    [W_NPY_NORM] = {write_npy_norm, 0}, [W_NPY_VNORM] = {write_npy_vnorm, 0},
    [W_NPY_FLOW] = {flow_npy_write, 0}, [W_NPY_SINKS] = {npy_write_sinks, 0}, [W_NPY_MIX] = {write_npy_mix, 0},
    [W_NPY_MIX_LAYER] = {write_npy_mix_layer, 0}, [W_NPY_MIX2] = {write_npy_mix2, 0},
    [W_NPY_MIX2_LAYER] = {write_npy_mix2_layer, 0}, [W_NPY_STACK0] = {write_stack0, 0},
    [W_NPY_STACK1] = {write_stack1, 0}, [W_NPY_STACK2] = {write_stack2, 0},
    [W_NPY_IMAGE_TOKENS] = {write_img_tokens, 0}, [W_NPY_IMAGE_GRID] = {write_img_grid, 0},
    [W_NPY_POOL_ATT] = {write_pool_att, 0}, [W_NPY_TEXT_ATT] = {write_text_att, 0},
    [W_NPY_VISION_ATT] = {write_vis_att, 0}, [W_NPY_IMAGE_EMBEDS] = {write_img_embeds, 0}, [W_NPY_PIXELS] = {write_pixels, 0},
};

/* Writes one output of a set (util.h's AvOutSet: in place only once every output is written);
 * a failure aborts the whole set. */
static int write_into(AvOutSet *set, const char *path, const OutDoc *d, int what, AvErr *e) {
    FILE *f = av_outset_add(set, path, e);
    if (!f) return -1;
    int rc = what >= W_NPY_LENS ? lens_npy_write(f, d, what - W_NPY_LENS, e) : WRITERS[what].write(f, d, e);
    if (rc == 0 && what < W_NPY_LENS && WRITERS[what].newline && fputc('\n', f) == EOF) rc = av_err_errno(e, "write error");
    if (rc != 0) {
        av_err_prefix(e, "%s", strcmp(path, "-") ? path : "stdout");
        av_outset_abort(set);
        return -1;
    }
    return 0;
}

/* Commits a set and names every file it put in place, as o says (none without settings, quiet or a
 * batch's one file per line: batch.c says where, once). */
static int commit_named(const RunSpec *o, AvOutSet *set, AvErr *e) {
    const int say = o && !o->quiet && !o->output.out_dir, n = set->n;
    char **names = say && n ? calloc((size_t)n, sizeof *names) : NULL;
    for (int i = 0; names && i < n; i++)
        if (set->outs[i].path) names[i] = strdup(set->outs[i].path);
    const int rc = av_outset_commit(set, e);
    for (int i = 0; names && i < n; i++) {
        if (rc == 0 && names[i]) av_info("wrote %s", names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* Writes one output atomically (temporary file renamed into place), then names it as o says. */
int run_write_file(const char *path, const OutDoc *d, int what, const RunSpec *o, AvErr *e) {
    AvOutSet set = {0};
    return write_into(&set, path, d, what, e) != 0 ? -1 : commit_named(o, &set, e);
}

void run_warn_default_page(const char *path) {
    if (av_file_exists(path))
        av_warn("%s is there already: replacing it (the page's default name; -o FILE or --html FILE names another)", path);
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
static int write_npy_set(AvOutSet *set, const char *path, const OutDoc *d, AvErr *e) {
    static const struct {
        const char *suffix;
        int what;
    } extra[] = {{".queries.npy", W_NPY_Q}, {".keys.npy", W_NPY_K}, {".pred_ids.npy", W_NPY_PRED_IDS},
                 {".pred_probs.npy", W_NPY_PRED_PROBS}, {".pred_positions.npy", W_NPY_PRED_POS}, {".ids.npy", W_NPY_IDS},
                 {".norm_attention.npy", W_NPY_NORM}, {".value_norms.npy", W_NPY_VNORM}, {".flow.npy", W_NPY_FLOW},
                 {".sinks.npy", W_NPY_SINKS}, {".image_tokens.npy", W_NPY_IMAGE_TOKENS},
                 {".image_grid.npy", W_NPY_IMAGE_GRID}, {".pooling_attention.npy", W_NPY_POOL_ATT},
                 {".text_attention.npy", W_NPY_TEXT_ATT}, {".vision_attention.npy", W_NPY_VISION_ATT},
                 {".image_embeds.npy", W_NPY_IMAGE_EMBEDS}, {".pixel_values.npy", W_NPY_PIXELS}};
    static const char *const lens_suffix[] = {".logit_lens_ids.npy", ".logit_lens_probs.npy", ".logit_lens_rank.npy",
                                              ".attribution_heads.npy", ".attribution_mlp.npy", ".ablation.npy"};
    if (d->n_stacks) {
        /* encoder-decoder: FILE the first stack (the encoder's), FILE's stem + .<name>.npy the others */
        for (int k = 0; k < d->n_stacks && k < 3; k++) {
            char suffix[32];
            snprintf(suffix, sizeof suffix, ".%s.npy", d->stacks[k].name);
            char *p = k ? npy_sibling(path, suffix) : strdup(path);
            int rc = p ? write_into(set, p, d, W_NPY_STACK0 + k, e) : (av_outset_abort(set), av_err(e, "out of memory"));
            free(p);
            if (rc) return -1;
        }
        /* --predict: its arrays as for other models, positions the decoder's */
        for (size_t i = 2; d->pred && i < 5; i++) {
            char *p = npy_sibling(path, extra[i].suffix);
            int rc = p ? write_into(set, p, d, extra[i].what, e) : (av_outset_abort(set), av_err(e, "out of memory"));
            free(p);
            if (rc) return -1;
        }
        return 0;
    }
    if (write_into(set, path, d, W_NPY_ATT, e) != 0) return -1;
    for (int i = 0; i < (int)(sizeof lens_suffix / sizeof lens_suffix[0]); i++) {
        if (!lens_npy_has(d, i)) continue;
        char *p = npy_sibling(path, lens_suffix[i]);
        int rc = p ? write_into(set, p, d, W_NPY_LENS + i, e) : (av_outset_abort(set), av_err(e, "out of memory"));
        free(p);
        if (rc) return -1;
    }
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        const int w = extra[i].what;
        if ((w == W_NPY_Q || w == W_NPY_K) && !d->with_qk) continue;
        if ((w == W_NPY_PRED_IDS || w == W_NPY_PRED_PROBS || w == W_NPY_PRED_POS) && !d->pred) continue;
        if (w == W_NPY_IDS && !d->gen) continue;
        if ((w == W_NPY_NORM && !d->cap->nattn) || (w == W_NPY_VNORM && !d->cap->vnorm)) continue;
        if (w == W_NPY_FLOW && !d->flow) continue;
        if (w == W_NPY_SINKS && !d->cap->sinks) continue;
        if ((w == W_NPY_IMAGE_TOKENS && !image_npy_has(d, IMAGE_NPY_TOKENS)) ||
            (w == W_NPY_IMAGE_GRID && !image_npy_has(d, IMAGE_NPY_GRID)) ||
            (w == W_NPY_POOL_ATT && !image_npy_has(d, IMAGE_NPY_POOL)) ||
            (w == W_NPY_TEXT_ATT && !image_npy_has(d, IMAGE_NPY_TEXT)) ||
            (w == W_NPY_VISION_ATT && !image_npy_has(d, IMAGE_NPY_VISION)) ||
            (w == W_NPY_IMAGE_EMBEDS && !image_npy_has(d, IMAGE_NPY_EMBEDS)) ||
            (w == W_NPY_PIXELS && !image_npy_has(d, IMAGE_NPY_PIXELS)))
            continue;
        char *p = npy_sibling(path, extra[i].suffix);
        int rc = p ? write_into(set, p, d, w, e) : (av_outset_abort(set), av_err(e, "out of memory"));
        free(p);
        if (rc) return -1;
    }
    /* --measure alti|rollout: FILE's stem + .alti.npy and .alti_layer.npy, and rollout's */
    for (int k = 0; k < 2 * d->n_mix; k++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".%s%s.npy", d->mix_name[k / 2], k % 2 ? "_layer" : "");
        char *p = npy_sibling(path, suffix);
        static const int W[4] = {W_NPY_MIX, W_NPY_MIX_LAYER, W_NPY_MIX2, W_NPY_MIX2_LAYER};
        const int w = W[k];
        int rc = p ? write_into(set, p, d, w, e) : (av_outset_abort(set), av_err(e, "out of memory"));
        free(p);
        if (rc) return -1;
    }
    return 0;
}

int run_say(const RunSpec *o, const OutDoc *d, AvErr *e) {
    const OutputSpec *w = &o->output;
    if (o->batch.path || o->stats || o->heads.on || o->capture.tokens_only || (!d->gen && !d->pred)) return 0;
    /* for a person at a terminal; a script reads --json, and stdout stays what the run writes there */
    if (!isatty(STDOUT_FILENO)) return 0;
    if ((w->json_path && !strcmp(w->json_path, "-")) || (w->html_path && !strcmp(w->html_path, "-")) ||
        (w->npy_path && !strcmp(w->npy_path, "-")))
        return 0;
    return say_write(stdout, d, e);
}

/* The outputs for one input: everything but the batch's JSON Lines stream. They are committed
 * together (AvOutSet): a failure of any leaves every one as it was. */
int run_write_outputs(const RunSpec *o, const OutDoc *d, long lineno, AvErr *e) {
    AvOutSet set = {0};
    if (o->output.out_dir) {
        char name[64];
        int rc = 0;
        snprintf(name, sizeof name, "%06ld.json", lineno);
        char *p = av_path_join(o->output.out_dir, name);
        if (!p) return av_err(e, "out of memory");
        rc = write_into(&set, p, d, o->capture.tokens_only ? W_TOKENS : W_JSON, e);
        if (rc == 0 && o->output.out_html) {
            strcpy(p + strlen(p) - 5, ".html");
            rc = write_into(&set, p, d, W_HTML, e);
        }
        if (rc == 0 && o->output.out_npy) {
            snprintf(name, sizeof name, "%06ld.npy", lineno);
            free(p);
            p = av_path_join(o->output.out_dir, name);
            rc = p ? write_npy_set(&set, p, d, e) : (av_outset_abort(&set), av_err(e, "out of memory"));
        }
        free(p);
        return rc == 0 ? av_outset_commit(&set, e) : -1;
    }
    if (o->batch.path) return 0;
    if (o->capture.tokens_only) return run_write_file(o->output.json_path ? o->output.json_path : "-", d, W_TOKENS, o, e);
    if (o->output.json_path && write_into(&set, o->output.json_path, d, W_JSON, e) != 0) return -1;
    if (o->output.npy_path && write_npy_set(&set, o->output.npy_path, d, e) != 0) return -1;
    const char *html = o->output.html_path ? o->output.html_path : (o->output.json_path || o->output.npy_path ? NULL : "attnviz.html");
    if (html && !o->output.html_path) run_warn_default_page(html);
    if (html && write_into(&set, html, d, W_HTML, e) != 0) return -1;
    /* an image run's other tower: its own page beside this one, in the same set */
    if (html && strcmp(html, "-") && d->image && d->image->tower) {
        size_t n = strlen(html);
        if (n > 5 && !strcmp(html + n - 5, ".html")) n -= 5;
        char *p = malloc(n + strlen(d->image->tower_suffix) + 1);
        if (p) memcpy(p, html, n), strcpy(p + n, d->image->tower_suffix);
        int rc = p ? write_into(&set, p, d->image->tower, W_HTML, e) : (av_outset_abort(&set), av_err(e, "out of memory"));
        free(p);
        if (rc) return -1;
    }
    if (commit_named(o, &set, e) != 0) return -1;
    /* --explain's table on the terminal, unless the JSON goes there */
    if (d->explain && !(o->output.json_path && !strcmp(o->output.json_path, "-")) && explain_write_table(stdout, d, e) != 0)
        return -1;
    return run_say(o, d, e);
}

int run_emit(Run *r, const OutDoc *d, long lineno, AvErr *e) {
    if (r->spec.stats) return stats_add(&r->stats, d, e);
    if (r->spec.heads.on) return heads_add(&r->heads, d, e);
    return run_write_outputs(&r->spec, d, lineno, e);
}
