/* run_image.c — a vision encoder on --image: the picture decoded and
 * preprocessed as the folder's preprocessor_config.json says (imgproc.h), its
 * tokens named ([CLS], [DIST], [REG1], ..., then each patch by its row and
 * column), the patches embedded and every layer run (vision.h), what pools
 * the last hidden state, and for a whole CLIP/SigLIP model given a text its
 * text tower and the image-text similarity; then the writers, through the
 * same view and emit steps as a text run. */
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

/* What a run of one image holds until its outputs are written. */
typedef struct {
    ImgProc proc;
    AvImage img;
    ImgPixels px;
    TokEncoding enc;       /* the image's tokens (names in names) */
    char *names;           /* (n, NAME_LEN) their spellings */
    const char **spell;    /* (n) pointers into names */
    int *kind;             /* (n) OUT_TOK_* */
    float *x;              /* (n, hidden) the first layer's input */
    VisPooled pool;
    unsigned char *png;
    size_t png_len;
    TokEncoding text;      /* a whole model's text, tokenized */
    RunState trs;          /* its tower's run state and capture */
    Capture tcap;
    float *text_embed;
} ImageRun;

static void image_run_free(ImageRun *ir) {
    img_free(&ir->img);
    imgproc_free(&ir->px);
    free(ir->enc.ids), free(ir->enc.type_ids), free(ir->enc.word_start), free(ir->enc.special), free(ir->enc.role);
    free(ir->names), free(ir->spell), free(ir->kind), free(ir->x);
    vis_pooled_free(&ir->pool);
    free(ir->png);
    tok_encoding_free(&ir->text);
    model_runstate_free(&ir->trs);
    model_capture_free(&ir->tcap);
    free(ir->text_embed);
}

/* The tokens of an image: [CLS] [DIST] [REG1].. then "r,c" for each patch, row by row. */
static int image_tokens(ImageRun *ir, const ModelConfig *c, int rows, int cols, int n, AvErr *e) {
    TokEncoding *t = &ir->enc;
    memset(t, 0, sizeof *t);
    t->n = n, t->b_start = -1;
    ir->names = malloc((size_t)n * NAME_LEN);
    ir->spell = malloc((size_t)n * sizeof *ir->spell);
    ir->kind = malloc((size_t)n * sizeof *ir->kind);
    t->ids = calloc((size_t)n, sizeof *t->ids);
    t->type_ids = calloc((size_t)n, sizeof *t->type_ids);
    t->word_start = malloc((size_t)n);
    t->special = calloc((size_t)n, 1);
    t->role = calloc((size_t)n, 1);
    if (!ir->names || !ir->spell || !ir->kind || !t->ids || !t->type_ids || !t->word_start || !t->special || !t->role)
        return av_err(e, "out of memory for %d image tokens", n);
    memset(t->word_start, 1, (size_t)n);
    int i = 0;
    if (c->vis_cls) snprintf(ir->names, NAME_LEN, "[CLS]"), ir->kind[i] = OUT_TOK_CLS, t->role[i] = TOK_ROLE_CLS, t->special[i++] = 1;
    if (c->vis_dist) snprintf(ir->names + NAME_LEN * i, NAME_LEN, "[DIST]"), ir->kind[i] = OUT_TOK_DIST, t->special[i++] = 1;
    for (unsigned k = 0; k < (unsigned)c->vis_registers; k++)
        snprintf(ir->names + NAME_LEN * i, NAME_LEN, "[REG%u]", k + 1), ir->kind[i] = OUT_TOK_REGISTER, t->special[i++] = 1;
    for (unsigned y = 0; y < (unsigned)rows; y++)
        for (unsigned x = 0; x < (unsigned)cols; x++, i++)
            snprintf(ir->names + NAME_LEN * i, NAME_LEN, "%u,%u", y, x), ir->kind[i] = OUT_TOK_PATCH;
    for (int k = 0; k < n; k++) ir->spell[k] = ir->names + NAME_LEN * k;
    t->tokens = t->display = ir->spell;
    return 0;
}

/* What an image run does not take: options that read text's own tokens or a language-model head. */
static int check_image_run(const Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    const ModelConfig *c = &r->cfg;
    if (!o->image)
        return av_err_usage(e, "%s is a %s model: give it an image (--image FILE, PNG or JPEG)", r->name, c->model_type);
    if (o->text_b) return av_err_usage(e, "%s", "--image takes at most one text (a whole CLIP or SigLIP model's)");
    if (o->text_a && !r->model.text)
        return av_err_usage(e, "%s is a %s model: it reads the image only, not a text (a whole CLIP or SigLIP model "
                               "reads both)", r->name, c->model_type);
    if (o->text_a && !r->tok) return av_err(e, "%s: the text tower's tokenizer cannot be read: %s", r->name, r->tok_err);
    if (o->capture.no_special)
        return av_err_usage(e, "%s", "--image keeps every token (the image's grid reads their places): hide the "
                                     "class and register tokens on the page instead");
    if (o->batch.path || o->predict.k || o->predict.generate_n || o->capture.tokens_only || o->capture.words ||
        o->capture.telemetry || o->lens.lens_k || o->lens.attribution || o->lens.ablate || o->lens.flow ||
        o->output.out_dir || o->decoder_text)
        return av_err_usage(e, "%s", "--image runs one picture: not with --batch, --out-dir, --predict, --generate, "
                                     "--tokens-only, --words, --telemetry, --decoder-text or the residual-stream "
                                     "options");
    return 0;
}

/* A whole model's text tower on text_a: tokens, attention, embedding. */
static int run_text(Run *r, ImageRun *ir, AvErr *e) {
    const Model *t = r->model.text;
    const int max_len = t->cfg.max_position_embeddings;
    if (tok_encode(r->tok, r->o->text_a, strlen(r->o->text_a), NULL, 0, max_len, &ir->text, e)) return -1;
    if (ir->text.n_truncated > 0 && !r->o->quiet)
        av_warn("the text is longer than the text tower's %d positions; dropped %d tokens", max_len, ir->text.n_truncated);
    const int n = ir->text.n;
    if (r->model.w.text_head->proj.out != ir->pool.dim)
        return av_err(e, "%s: the text embedding (%d) and the image's (%d) differ in width", r->name,
                      (int)r->model.w.text_head->proj.out, ir->pool.dim);
    if (!(ir->text_embed = malloc((size_t)ir->pool.dim * sizeof *ir->text_embed))) return av_err(e, "out of memory");
    if (model_runstate_alloc(&ir->trs, t, n, e) || model_capture_alloc(&ir->tcap, &t->cfg, n, 0, 0, e)) return -1;
    return vis_text_embed(&r->model, &ir->trs, ir->text.ids, n, &ir->tcap, ir->text_embed, e);
}

int run_image(Run *r, AvErr *e) {
    const RunSpec *o = r->o;
    const ModelConfig *c = &r->cfg;
    ImageRun ir;
    memset(&ir, 0, sizeof ir);
    int rows, cols, n, rc = -1;
    if (check_image_run(r, e)) return -1;
    double t0 = av_now_ms();
    if (imgproc_load(&ir.proc, r->dir, e) || img_load(o->image, &ir.img, e) || imgproc_run(&ir.proc, &ir.img, &ir.px, e))
        goto done;
    if (vis_grid(c, ir.px.h, ir.px.w, &rows, &cols, &n, e)) {
        av_err_prefix(e, "%s", o->image);
        goto done;
    }
    if (image_tokens(&ir, c, rows, cols, n, e) || run_ensure_buffers(r, n, e)) goto done;
    r->t_tok += av_now_ms() - t0;
    t0 = av_now_ms();
    run_score_input(&r->cap, &ir.enc);
    const int pooled = c->vis_pool_head || r->model.w.vis->proj.w;
    if (!(ir.x = malloc((size_t)n * c->hidden_size * sizeof *ir.x))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (vis_embed(&r->model, &r->rs, ir.px.pixels, ir.px.h, ir.px.w, ir.x, e) ||
        model_forward_embeds(&r->model, &r->rs, ir.x, n, &r->cap, pooled, e) ||
        (pooled && vis_pool(&r->model, &r->rs, n, &ir.pool, e)) || (o->text_a && run_text(r, &ir, e)))
        goto done;
    r->t_fwd += av_now_ms() - t0;
    if (img_encode_png(ir.px.rgb, ir.px.w, ir.px.h, &ir.png, &ir.png_len, e)) goto done;
    OutImage oi = {.file = o->image, .mode = ir.img.mode, .src_w = ir.img.w, .src_h = ir.img.h,
                   .resized_w = ir.px.resized_w, .resized_h = ir.px.resized_h, .w = ir.px.w, .h = ir.px.h,
                   .patch = c->patch_size, .rows = rows, .cols = cols, .tiles = 1, .first_patch = vis_prefix(c),
                   .kind = ir.kind, .png = ir.png, .png_len = ir.png_len, .pool_attn = ir.pool.attn,
                   .pool_heads = ir.pool.heads, .embed = ir.pool.embed, .embed_dim = ir.pool.dim};
    if (o->text_a) {
        oi.text_enc = &ir.text, oi.text_attn = ir.tcap.attn, oi.text_layers = ir.tcap.n_layers;
        oi.text_heads = ir.tcap.n_heads, oi.text_embed = ir.text_embed;
        oi.logit = vis_similarity(&r->model, ir.pool.embed, ir.text_embed, ir.pool.dim);
        oi.sigmoid = r->model.w.text_head->sigmoid;
        if (!o->quiet)
            av_info("%s and \"%.60s\": logit %.4f%s", o->image, o->text_a, oi.logit,
                    oi.sigmoid ? "" : " (exp(logit_scale) x cosine)");
    }
    r->image = &oi;
    rc = run_finish_input(r, o->text_a ? o->text_a : "", NULL, 0, &ir.enc, &r->cap, NULL, e);
    r->image = NULL;
    /* --stats and heads: the scores of this one input, written as a text run's are */
    if (rc == 0 && o->stats) rc = run_finish_stats(r, e);
    if (rc == 0 && o->heads.on) rc = run_finish_heads(r, e);
done:
    image_run_free(&ir);
    return rc;
}

int pipeline_image(Pipeline *p, AvErr *e) { return run_image(p, e); }
