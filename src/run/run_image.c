/* run_image.c — a vision encoder on a picture: decoded and preprocessed as
 * the folder's preprocessor_config.json says (imgproc.h), its tokens named
 * ([CLS], [DIST], [REG1], ..., then each patch by its row and column), the
 * patches embedded and every layer run (vision.h), what pools the last hidden
 * state, and for a whole CLIP/SigLIP model given a text its text tower and
 * the image-text similarity. One picture is a PipeImage (pipeline.h), which
 * the command line's --image and attnviz serve's uploads both run; the
 * command line's then goes through the same view and emit steps as a text
 * run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "imgproc.h"
#include "report.h"
#include "run_internal.h"
#include "vision.h"

#define NAME_LEN 32 /* a token's name: "[REG64]", "9999,9999" (vis_grid bounds the grid) */

/* One picture's run: what it holds from decoding until its outputs are written. */
struct PipeImage {
    ImgProc proc;
    char *name;            /* the file's name, or what a server calls an upload */
    char mode[16];         /* as PIL names the file's mode */
    int src_w, src_h, resized_w, resized_h, w, h;
    int rows, cols, n;
    ImgPixels px;          /* pixel values and the picture (pixel_values freed by run_image_shrink) */
    TokEncoding enc;       /* the image's tokens (names in names) */
    char *names;           /* (n, NAME_LEN) their spellings */
    const char **spell;    /* (n) pointers into names */
    int *kind;             /* (n) OUT_TOK_* */
    unsigned char *png;    /* the preprocessed picture as PNG: the page's, and what a re-run decodes */
    size_t png_len;
    int ran;               /* the ends below are computed (the first pass) */
    VisPooled pool;
    char *text;            /* a whole model's text, or NULL */
    TokEncoding tenc;      /* it tokenized */
    RunState trs;          /* its tower's run state and capture */
    Capture tcap;
    float *text_embed;
    double logit;
    OutImage oi;           /* what the writers read (run_image_out) */
    VlmRun *vlm;           /* a vision-language model's picture and text (run_vlm.c), the rest unused */
};

void run_image_free(PipeImage *im) {
    if (!im) return;
    vlm_free(im->vlm);
    free(im->name);
    imgproc_free(&im->px);
    free(im->enc.ids), free(im->enc.type_ids), free(im->enc.word_start), free(im->enc.special), free(im->enc.role);
    free(im->names), free(im->spell), free(im->kind);
    free(im->png);
    vis_pooled_free(&im->pool);
    free(im->text);
    tok_encoding_free(&im->tenc);
    model_runstate_free(&im->trs);
    model_capture_free(&im->tcap);
    free(im->text_embed);
    free(im);
}

/* The tokens of an image: [CLS] [DIST] [REG1].. then "r,c" for each patch, row by row. */
static int image_tokens(PipeImage *im, const ModelConfig *c, AvErr *e) {
    TokEncoding *t = &im->enc;
    const int n = im->n;
    memset(t, 0, sizeof *t);
    t->n = n, t->b_start = -1;
    im->names = malloc((size_t)n * NAME_LEN);
    im->spell = malloc((size_t)n * sizeof *im->spell);
    im->kind = malloc((size_t)n * sizeof *im->kind);
    t->ids = calloc((size_t)n, sizeof *t->ids);
    t->type_ids = calloc((size_t)n, sizeof *t->type_ids);
    t->word_start = malloc((size_t)n);
    t->special = calloc((size_t)n, 1);
    t->role = calloc((size_t)n, 1);
    if (!im->names || !im->spell || !im->kind || !t->ids || !t->type_ids || !t->word_start || !t->special || !t->role)
        return av_err(e, "out of memory for %d image tokens", n);
    memset(t->word_start, 1, (size_t)n);
    int i = 0;
    if (c->vis_cls) snprintf(im->names, NAME_LEN, "[CLS]"), im->kind[i] = OUT_TOK_CLS, t->role[i] = TOK_ROLE_CLS, t->special[i++] = 1;
    if (c->vis_dist) snprintf(im->names + NAME_LEN * i, NAME_LEN, "[DIST]"), im->kind[i] = OUT_TOK_DIST, t->special[i++] = 1;
    for (unsigned k = 0; k < (unsigned)c->vis_registers; k++)
        snprintf(im->names + NAME_LEN * i, NAME_LEN, "[REG%u]", k + 1), im->kind[i] = OUT_TOK_REGISTER, t->special[i++] = 1;
    for (unsigned y = 0; y < (unsigned)im->rows; y++)
        for (unsigned x = 0; x < (unsigned)im->cols; x++, i++)
            snprintf(im->names + NAME_LEN * i, NAME_LEN, "%u,%u", y, x), im->kind[i] = OUT_TOK_PATCH;
    for (int k = 0; k < n; k++) im->spell[k] = im->names + NAME_LEN * k;
    t->tokens = t->display = im->spell;
    return 0;
}

/* A whole model's text: what its tower reads, and whether it can. */
static int check_text(const Run *r, const char *text, AvErr *e) {
    if (!text) return 0;
    if (!r->s->model.text)
        return av_err_usage(e, "%s is a %s model: it reads the image only, not a text (a whole CLIP or SigLIP model "
                               "reads both)", r->s->name, r->s->cfg.model_type);
    if (!r->s->tok) return av_err(e, "%s: the text tower's tokenizer cannot be read: %s", r->s->name, r->s->tok_err);
    return 0;
}

int run_image_open(const Run *r, const unsigned char *bytes, size_t len, const char *name, uint64_t max_pixels,
                   const char *text, PipeImage **out, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    *out = NULL;
    if (r->s->cfg.vlm) {
        PipeImage *im = calloc(1, sizeof *im);
        if (!im) return av_err(e, "out of memory");
        int rc = vlm_open(r, bytes, len, name, max_pixels, text, &im->vlm, e);
        if (rc != 0) {
            free(im);
            return rc;
        }
        *out = im;
        return 0;
    }
    if (!c->vision) return av_err_usage(e, "%s is a %s model: it reads text, not an image", r->s->name, c->model_type);
    if (check_text(r, text, e)) return -1;
    PipeImage *im = calloc(1, sizeof *im);
    if (!im || !(im->name = strdup(name)) || (text && !(im->text = strdup(text)))) {
        run_image_free(im);
        return av_err(e, "out of memory");
    }
    AvImage img;
    int rc = imgproc_load(&im->proc, r->s->dir, e);
    if (rc == 0 && (rc = img_decode_limit(bytes, len, name, max_pixels, &img, e)) == 0) {
        snprintf(im->mode, sizeof im->mode, "%s", img.mode);
        if (imgproc_run(&im->proc, &img, &im->px, e)) rc = -1;
        img_free(&img);
    }
    if (rc == 0 && vis_grid(c, im->px.h, im->px.w, &im->rows, &im->cols, &im->n, e)) rc = av_err_prefix(e, "%s", name);
    if (rc == 0) {
        im->src_w = im->px.src_w, im->src_h = im->px.src_h, im->resized_w = im->px.resized_w;
        im->resized_h = im->px.resized_h, im->w = im->px.w, im->h = im->px.h;
        if (image_tokens(im, c, e) || img_encode_png(im->px.rgb, im->px.w, im->px.h, &im->png, &im->png_len, e)) rc = -1;
    }
    if (rc == 0 && text) {
        const int max_len = r->s->model.text->cfg.max_position_embeddings;
        if (tok_encode(r->s->tok, text, strlen(text), NULL, 0, max_len, &im->tenc, e)) rc = -1;
        else if (im->tenc.n_truncated > 0)
            av_warn("the text is longer than the text tower's %d positions; dropped %d tokens", max_len, im->tenc.n_truncated);
    }
    if (rc != 0) {
        run_image_free(im);
        return rc;
    }
    *out = im;
    return 0;
}

const TokEncoding *run_image_tokens(const PipeImage *im) { return im->vlm ? vlm_tokens(im->vlm) : &im->enc; }

const unsigned char *run_image_picture(const PipeImage *im, size_t *len) {
    if (im->vlm) return vlm_picture(im->vlm, len);
    *len = im->png_len;
    return im->png;
}

/* (a vision-language model's pixel values stay: its pass frees the tower's capture, the larger part) */
void run_image_shrink(PipeImage *im) { imgproc_free(&im->px); }

/* The pixel values again from the kept PNG (exactly the picture they were made of): a re-run's. */
static int remake_pixels(PipeImage *im, AvErr *e) {
    if (im->px.pixels) return 0;
    AvImage img;
    if (img_decode(im->png, im->png_len, im->name, &img, e)) return -1;
    ImgProc keep = im->proc; /* the picture is already resized and cropped: only rescale and normalize */
    keep.do_resize = keep.do_center_crop = 0;
    int rc = imgproc_run(&keep, &img, &im->px, e);
    img_free(&img);
    return rc;
}

/* A whole model's text tower on the text: tokens, attention, embedding. */
static int run_text(Run *r, PipeImage *im, AvErr *e) {
    const Model *t = r->s->model.text;
    const int n = im->tenc.n;
    if (r->s->model.w.text_head->proj.out != im->pool.dim)
        return av_err(e, "%s: the text embedding (%d) and the image's (%d) differ in width", r->s->name,
                      (int)r->s->model.w.text_head->proj.out, im->pool.dim);
    if (!(im->text_embed = malloc((size_t)im->pool.dim * sizeof *im->text_embed))) return av_err(e, "out of memory");
    if (model_runstate_alloc(&im->trs, t, n, r->spec.threads, e) || model_capture_alloc(&im->tcap, &t->cfg, n, 0, 0, e)) return -1;
    if (vis_text_embed(&r->s->model, &im->trs, im->tenc.ids, n, &im->tcap, im->text_embed, e)) return -1;
    im->logit = vis_similarity(&r->s->model, im->pool.embed, im->text_embed, im->pool.dim);
    return 0;
}

/* The run state grown to n tokens (it only grows: one-input runs share it). */
static int grow_runstate(Run *r, int n, AvErr *e) {
    if (r->rs.max_tokens >= n) return 0;
    model_runstate_free(&r->rs);
    return model_runstate_alloc(&r->rs, &r->s->model, n, r->spec.threads, e);
}

int run_image_forward(Run *r, PipeImage *im, Capture *cap, AvErr *e) {
    if (im->vlm) return vlm_forward(r, im->vlm, cap, e);
    const ModelConfig *c = &r->s->cfg;
    const int n = im->n, first = !im->ran;
    const int pooled = c->vis_pool_head || r->s->model.w.vis->proj.w;
    if (remake_pixels(im, e) || grow_runstate(r, n, e)) return -1;
    float *x = malloc((size_t)n * c->hidden_size * sizeof *x); /* (n, hidden) the first layer's input */
    if (!x) return av_err(e, "out of memory");
    double t0 = av_now_ms();
    int rc = vis_embed(&r->s->model, &r->rs, im->px.pixels, im->px.h, im->px.w, x, e) ||
                     model_forward_embeds(&r->s->model, &r->rs, x, n, cap, first && pooled, e) ||
                     (first && pooled && vis_pool(&r->s->model, &r->rs, n, &im->pool, e)) ||
                     (first && im->text && run_text(r, im, e))
                 ? -1
                 : 0;
    free(x);
    r->t_fwd += av_now_ms() - t0;
    if (rc) return -1;
    if (!first) return 0;
    im->ran = 1;
    OutImage *oi = &im->oi;
    *oi = (OutImage){.file = im->name, .mode = im->mode, .src_w = im->src_w, .src_h = im->src_h,
                     .resized_w = im->resized_w, .resized_h = im->resized_h, .w = im->w, .h = im->h,
                     .patch = c->patch_size, .rows = im->rows, .cols = im->cols, .tiles = 1,
                     .first_patch = vis_prefix(c), .kind = im->kind, .png = im->png, .png_len = im->png_len,
                     .pool_attn = im->pool.attn, .pool_heads = im->pool.heads, .embed = im->pool.embed,
                     .embed_dim = im->pool.dim};
    if (im->text) {
        oi->text_enc = &im->tenc, oi->text_attn = im->tcap.attn, oi->text_layers = im->tcap.n_layers;
        oi->text_heads = im->tcap.n_heads, oi->text_embed = im->text_embed, oi->logit = im->logit;
        oi->sigmoid = r->s->model.w.text_head->sigmoid;
    }
    return 0;
}

const OutImage *run_image_out(const PipeImage *im) {
    if (im->vlm) return vlm_image(im->vlm);
    return im->ran ? &im->oi : NULL;
}

/* ---------------------------------------------------------------- the other tower's page */

void run_tower_doc(const Run *r, OutDoc *d, char *name, size_t name_len, const char *what, const Model *tower,
                   const TokEncoding *enc, const Capture *cap, const char *text) {
    const RunSpec *o = &r->spec;
    memset(d, 0, sizeof *d);
    snprintf(name, name_len, "%s · %s", r->s->name, what);
    d->model_name = name;
    d->model_dir = r->s->dir;
    d->cfg = &tower->cfg;
    d->dtype = tower->dtype_name[0] ? tower->dtype_name : r->s->model.dtype_name;
    d->text_a = text;
    d->enc = enc;
    d->cap = cap;
    d->display_tokens = enc->byte_level ? enc->display : NULL;
    d->init_layer = 0, d->init_head = -1;
    d->precision = o->output.precision;
    d->theme = o->output.theme;
    d->templates_dir = o->output.templates_dir;
}

/* ---------------------------------------------------------------- the command line's --image */

/* What an image run does not take: options that read text's own tokens or a language-model head. */
static int check_image_run(const Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    if (!o->image)
        return av_err_usage(e, "%s is a %s model: give it an image (--image FILE, PNG or JPEG)", r->s->name, c->model_type);
    if (o->text_b) return av_err_usage(e, "%s", "--image takes at most one text (a whole CLIP or SigLIP model's)");
    if (check_text(r, o->text_a, e)) return -1;
    if (run_is_chat(o))
        return av_err_usage(e, "%s is a %s model: --chat renders a decoder's chat template (a vision-language model's, "
                               "with --image)", r->s->name, r->s->cfg.model_type);
    if (o->capture.no_special)
        return av_err_usage(e, "%s", "--image keeps every token (the image's grid reads their places): hide the "
                                     "class and register tokens on the page instead");
    if (o->batch.path || o->predict.k || o->predict.generate_n || o->capture.tokens_only || o->capture.words ||
        o->capture.telemetry || o->lens.lens_k || o->lens.attribution || o->lens.ablate || o->lens.flow ||
        o->explain.on || o->output.out_dir || o->decoder_text)
        return av_err_usage(e, "%s", "--image runs one picture: not with --batch, --out-dir, --predict, --generate, "
                                     "--tokens-only, --words, --telemetry, --decoder-text or the residual-stream "
                                     "options (--explain among them)");
    return 0;
}

int run_image(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    PipeImage *im = NULL;
    char *data = NULL;
    size_t len = 0;
    int rc = -1;
    if (check_image_run(r, e)) return -1;
    double t0 = av_now_ms();
    if (av_read_file(o->image, IMG_MAX_FILE_BYTES, &data, &len, e) ||
        run_image_open(r, (const unsigned char *)data, len, o->image, 0, o->text_a, &im, e) < 0)
        goto done;
    free(data), data = NULL;
    const int n = im->n;
    if (run_ensure_buffers(r, n, e)) goto done;
    r->t_tok += av_now_ms() - t0;
    run_score_input(&r->in.cap, &im->enc);
    if (run_image_forward(r, im, &r->in.cap, e)) goto done;
    run_image_shrink(im);
    if (o->text_a && !o->quiet)
        av_info("%s and \"%.60s\": logit %.4f%s", o->image, o->text_a, im->logit,
                im->oi.sigmoid ? "" : " (exp(logit_scale) x cosine)");
    /* a whole model's text tower: its own page over the text's tokens, beside the picture's */
    OutDoc tower;
    char tname[300];
    if (im->text) {
        run_tower_doc(r, &tower, tname, sizeof tname, "text tower", r->s->model.text, &im->tenc, &im->tcap, im->text);
        im->oi.tower = &tower, im->oi.tower_suffix = ".text.html", im->oi.tower_label = "text tower";
    }
    r->in.image = &im->oi;
    rc = run_finish_input(r, o->text_a ? o->text_a : "", NULL, 0, &im->enc, &r->in.cap, NULL, e);
    r->in.image = NULL;
    /* --stats and heads: the scores of this one input, written as a text run's are */
    if (rc == 0 && o->stats) rc = run_finish_stats(r, e);
    if (rc == 0 && o->heads.on) rc = run_finish_heads(r, e);
done:
    free(data);
    run_image_free(im);
    return rc;
}

