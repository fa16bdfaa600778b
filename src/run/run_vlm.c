/* run_vlm.c — a vision-language model (LLaVA: cfg.vlm) on --image and its
 * text: the text tokenized as the model's tokenizer does, its one image
 * placeholder (<image>) expanded into the picture's image tokens, named by
 * their patch ("r,c"); the picture decoded and preprocessed as the folder's
 * preprocessor_config.json says (imgproc.h), run through the vision tower
 * (its attention kept) and the projector (vision.h's vlm_image_embeds); the
 * text tokens' embeddings with the image tokens' in their places run through
 * the decoder; then the writers, through the same view and emit steps as a
 * text run, with the picture, the vision tower's attention and the image
 * tokens' embeddings in OutImage.
 *
 * The placement is the text's: whatever put the placeholder there (the user,
 * or a chat template rendered before tokenizing) decides where the picture's
 * tokens go, as transformers' processors expand it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "image.h"
#include "imgproc.h"
#include "report.h"
#include "run_internal.h"
#include "vision.h"

#define NAME_LEN 48 /* an image token's name: "9999,9999", an Idefics3 tile's "r1c2:7,7" (room for any unsigned) */

struct VlmRun {
    TokEncoding text;      /* the text as the tokenizer reads it */
    TokEncoding enc;       /* the sequence: the placeholder replaced by the image tokens */
    char *names;           /* (n_image, NAME_LEN) */
    int *kind;             /* (n) OUT_TOK_TEXT / OUT_TOK_PATCH */
    ImgProc proc;
    ImgPixels px;
    char *name;            /* the picture's file, or what a server calls an upload */
    char mode[16];         /* as PIL names the file's mode */
    char *text_in;         /* the text as given (or the chat rendered) */
    int rows, cols, nv;    /* the tower's patch grid and tokens */
    int gr, gc, first;     /* the image tokens' grid and their first position in the sequence (Idefics3: the global
                              view's, after its tiles') */
    int *tile_at;          /* (px.tiles) where each tile's image tokens start (Idefics3; the last is `first`) */
    RunState vrs;          /* the vision tower's */
    Capture vcap;
    float *embeds;         /* (n_image, hidden) */
    float *x;              /* (n, hidden) the decoder's input */
    unsigned char *png;
    size_t png_len;
    char *chat;            /* --chat: the rendered prompt */
    TokEncoding venc;      /* the vision tower's own tokens ([CLS], then the patches), for its page */
    int *vkind;
    char *vnames;          /* (patches, NAME_LEN) their names */
    int *blk_end;          /* (n) Gemma 3: the image tokens' block end (they attend both ways), else NULL */
    int tower_layers[CAP_MAX_LAYERS]; /* the tower's layers kept (its plan's last ones), n_tower_layers of them */
    int n_tower_layers;
    int ran;
    OutImage oi;           /* what the writers read */
};

void vlm_free(VlmRun *v) {
    if (!v) return;
    tok_encoding_free(&v->text);
    free(v->enc.ids), free(v->enc.type_ids), free((void *)v->enc.tokens), free((void *)v->enc.display);
    free(v->enc.word_start), free(v->enc.special), free(v->enc.role);
    free(v->names), free(v->kind), free(v->name), free(v->text_in), free(v->tile_at);
    imgproc_free(&v->px);
    model_runstate_free(&v->vrs);
    model_capture_free(&v->vcap);
    free(v->embeds), free(v->x), free(v->png), free(v->chat);
    free(v->venc.ids), free(v->venc.type_ids), free((void *)v->venc.tokens), free(v->venc.word_start), free(v->venc.special);
    free(v->venc.role), free(v->vkind), free(v->vnames), free(v->blk_end);
    free(v);
}

static int check_vlm_run(const Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    if (!o->text_a)
        return av_err_usage(e, "%s is a vision-language model: with --image give its text too, with <image> where the "
                               "picture goes (\"USER: <image>\\nWhat is in the picture? ASSISTANT:\")", r->s->name);
    if (o->text_b) return av_err_usage(e, "%s", "--image with a vision-language model takes one text");
    if (o->chat_file)
        return av_err_usage(e, "%s", "--chat-file with --image: not yet (--chat TEXT puts the picture where the "
                                     "template says)");
    if (o->capture.no_special)
        return av_err_usage(e, "%s", "--image keeps every token (the picture's grid reads their places): hide the "
                                     "special tokens on the page instead");
    if (o->batch.path || o->predict.k || o->predict.generate_n || o->capture.tokens_only || o->capture.words ||
        o->capture.telemetry || o->lens.lens_k || o->lens.attribution || o->lens.ablate || o->lens.flow ||
        o->explain.on || o->output.out_dir || o->decoder_text)
        return av_err_usage(e, "%s", "--image with a vision-language model runs one picture and text: not with --batch, "
                                     "--out-dir, --predict, --generate, --tokens-only, --words, --telemetry, "
                                     "--decoder-text or the residual-stream options (--explain among them; yet)");
    if (measure_any_per_layer(&o->capture))
        return av_err_usage(e, "--measure %s with --image is for vision encoders (ViT, DeiT, DINOv2, CLIP, SigLIP): a "
                               "vision-language model's tower and text are not yet checked against a reference",
                            measure_wanted(&o->capture, MEASURE_ALTI) ? "alti" : "rollout");
    return 0;
}

/* How a picture is prepared: the folder's preprocessor_config.json; for llama.cpp's pair, the steps of the
 * processor the Hugging Face folder it came from would have, at the mmproj's image size with its
 * normalization: LLaVA's CLIPImageProcessor (shortest edge, then the center crop, bicubic), Gemma 3's
 * Gemma3ImageProcessor (resized to the square, bilinear, no crop; pan and scan off, as its default). */
static int load_proc(const Run *r, ImgProc *p, AvErr *e) {
    const Model *v = r->s->model.vision;
    if (!v->gguf) return imgproc_load(p, r->s->dir, e);
    const ModelConfig *vc = &v->cfg;
    static const float CLIP_MEAN[3] = {0.48145466f, 0.4578275f, 0.40821073f}, CLIP_STD[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    static const float HALF[3] = {0.5f, 0.5f, 0.5f};
    const int gemma3 = vc->vis_gemma3_proj;
    const float *mean = vc->vis_norm_given & 1 ? vc->vis_mean : gemma3 ? HALF : CLIP_MEAN;
    const float *std = vc->vis_norm_given & 2 ? vc->vis_std : gemma3 ? HALF : CLIP_STD;
    char json[600];
    if (gemma3)
        snprintf(json, sizeof json,
                 "{\"image_processor_type\": \"Gemma3ImageProcessor\", \"size\": {\"height\": %d, \"width\": %d}, "
                 "\"do_center_crop\": false, \"resample\": 2, \"image_mean\": [%.9g, %.9g, %.9g], "
                 "\"image_std\": [%.9g, %.9g, %.9g]}",
                 vc->image_size, vc->image_size, mean[0], mean[1], mean[2], std[0], std[1], std[2]);
    else
        snprintf(json, sizeof json,
                 "{\"image_processor_type\": \"CLIPImageProcessor\", \"size\": {\"shortest_edge\": %d}, \"crop_size\": "
                 "{\"height\": %d, \"width\": %d}, \"do_center_crop\": true, \"resample\": 3, \"image_mean\": [%.9g, %.9g, %.9g], "
                 "\"image_std\": [%.9g, %.9g, %.9g]}",
                 vc->image_size, vc->image_size, vc->image_size, mean[0], mean[1], mean[2], std[0], std[1], std[2]);
    return imgproc_parse(p, json, strlen(json), "the mmproj's clip.vision metadata", e);
}

static const char *example_text(const ModelConfig *c) {
    return c->vlm_kind == VLM_KIND_GEMMA3     ? "<start_of_turn>user\n<start_of_image>What is in the picture?<end_of_turn>\n<start_of_turn>model\n"
           : c->vlm_kind == VLM_KIND_IDEFICS3 ? "<|im_start|>User:<image>What is in the picture?<end_of_utterance>\nAssistant:"
                                              : "USER: <image>\nWhat is in the picture? ASSISTANT:";
}

/* Idefics3Processor's replacement of <image> (replace_image_token): each tile row by row as
 * <fake_token_around_image><row_r_col_c> and its image tokens, a newline after each row, then a newline and the
 * global view as <fake_token_around_image><global-img>, its image tokens, <fake_token_around_image>; a picture
 * not split: the global view's part alone. */
static void idefics3_expand(FILE *f, const char *img, int n, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            fprintf(f, "<fake_token_around_image><row_%d_col_%d>", r + 1, c + 1);
            for (int k = 0; k < n; k++) fputs(img, f);
        }
        fputc('\n', f);
    }
    fputs(rows ? "\n<fake_token_around_image><global-img>" : "<fake_token_around_image><global-img>", f);
    for (int k = 0; k < n; k++) fputs(img, f);
    fputs("<fake_token_around_image>", f);
}

/* The text with its one placeholder for the picture (LLaVA's <image>, Gemma 3's <start_of_image>: the token the
 * model's processor looks for) replaced as the processor replaces it: the image token once per image token
 * (LLaVA), or "\n\n<start_of_image>" + the image tokens + "<end_of_image>\n\n" (Gemma 3). Tokenizing the
 * result gives the processor's ids. */
static int expand_text(const Run *r, const VlmRun *v, const char *text, char **out, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const int gemma = c->vlm_kind == VLM_KIND_GEMMA3;
    const char *ph = tok_id_to_token(r->s->tok, gemma ? c->vlm_boi_id : c->image_token_id);
    const char *img = tok_id_to_token(r->s->tok, c->image_token_id), *eoi = gemma ? tok_id_to_token(r->s->tok, c->vlm_eoi_id) : "";
    if (!ph || !img || !eoi || !*ph)
        return av_err(e, "%s: the tokenizer does not spell the picture's tokens (ids %d, %d)", r->s->name,
                      gemma ? c->vlm_boi_id : c->image_token_id, c->image_token_id);
    int count = 0;
    const char *at = NULL;
    for (const char *p = text; (p = strstr(p, ph)); p += strlen(ph)) count++, at = at ? at : p;
    if (count == 0)
        return av_err_usage(e, "the text has no %s: write it where the picture goes, e.g. \"%s\"", ph, example_text(c));
    if (count > 1) return av_err_usage(e, "the text has %d %s: one picture a run", count, ph);
    AvBuf b;
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    fwrite(text, 1, (size_t)(at - text), b.f);
    if (c->vlm_kind == VLM_KIND_IDEFICS3) {
        idefics3_expand(b.f, img, c->vlm_tokens, v->px.tile_rows, v->px.tile_cols);
    } else {
        if (gemma) fprintf(b.f, "\n\n%s", ph);
        for (int k = 0; k < c->vlm_tokens; k++) fputs(img, b.f);
        if (gemma) fprintf(b.f, "%s\n\n", eoi);
    }
    fputs(at + strlen(ph), b.f);
    if (!(*out = av_buf_close(&b, !ferror(b.f)))) return av_err(e, "out of memory");
    return 0;
}

/* The sequence: the expanded text's tokens, its image tokens (one run of them) named by their place in the
 * image tokens' grid (gc columns). The run's first position, or -1. */
static int name_sequence(const Run *r, VlmRun *v, int gc, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const TokEncoding *t = &v->text;
    const int ni = c->vlm_tokens, tiles = v->px.tiles > 1 ? v->px.tiles : 1;
    int first = -1, count = 0;
    for (int i = 0; i < t->n; i++)
        if (t->ids[i] == c->image_token_id) count++;
    if (t->n_truncated)
        return av_err(e, "the text and the picture's %d tokens make %d, above the model's %d positions", ni * tiles,
                      t->n + t->n_truncated, cfg_max_tokens(c));
    if (count != ni * tiles)
        return av_err(e, "the text tokenizes to %d of the picture's token (id %d), not its %d: the tokenizer splits its "
                         "spelling, or the text holds it too", count, c->image_token_id, ni * tiles);
    /* each tile's tokens one run (Idefics3: between its tile's tokens), the last run the global view's */
    if (!(v->tile_at = malloc((size_t)tiles * sizeof *v->tile_at))) return av_err(e, "out of memory");
    for (int i = 0, k = 0; i < t->n; i++)
        if (t->ids[i] == c->image_token_id) {
            for (int j = i; j < i + ni; j++)
                if (j >= t->n || t->ids[j] != c->image_token_id)
                    return av_err(e, "the text holds the picture's token %d apart from its place", c->image_token_id);
            v->tile_at[k++] = i;
            i += ni - 1;
        }
    first = v->tile_at[tiles - 1];
    const int n = t->n;
    TokEncoding *s = &v->enc;
    memset(s, 0, sizeof *s);
    s->n = n, s->b_start = -1, s->byte_level = t->byte_level;
    s->ids = malloc((size_t)n * sizeof *s->ids);
    s->type_ids = calloc((size_t)n, sizeof *s->type_ids);
    s->tokens = malloc((size_t)n * sizeof *s->tokens);
    s->display = malloc((size_t)n * sizeof *s->display);
    s->word_start = malloc((size_t)n);
    s->special = malloc((size_t)n);
    s->role = malloc((size_t)n);
    v->names = malloc((size_t)ni * tiles * NAME_LEN);
    v->kind = malloc((size_t)n * sizeof *v->kind);
    if (!s->ids || !s->type_ids || !s->tokens || !s->display || !s->word_start || !s->special || !s->role || !v->names ||
        !v->kind)
        return av_err(e, "out of memory for %d tokens", n);
    for (int i = 0; i < n; i++) {
        s->ids[i] = t->ids[i];
        int tile = -1; /* a tile's image token (not the global view's): named "rRcC:i,j", a text token to the page */
        for (int k = 0; k + 1 < tiles; k++)
            if (i >= v->tile_at[k] && i < v->tile_at[k] + ni) tile = k;
        if (tile >= 0) {
            const int k = i - v->tile_at[tile], tc = v->px.tile_cols > 0 ? v->px.tile_cols : 1;
            char *nm = v->names + ((size_t)(tile + 1) * ni + k) * NAME_LEN;
            snprintf(nm, NAME_LEN, "r%uc%u:%u,%u", (unsigned)(tile / tc + 1), (unsigned)(tile % tc + 1),
                     (unsigned)(k / gc), (unsigned)(k % gc));
            s->tokens[i] = s->display[i] = nm;
            s->word_start[i] = 1, s->special[i] = 0, s->role[i] = TOK_ROLE_NONE;
            v->kind[i] = OUT_TOK_TEXT;
            continue;
        }
        if (i < first || i >= first + ni) {
            s->tokens[i] = t->tokens[i], s->display[i] = t->display[i];
            s->word_start[i] = t->word_start[i], s->special[i] = t->special[i], s->role[i] = t->role[i];
            v->kind[i] = OUT_TOK_TEXT;
            continue;
        }
        const int k = i - first;
        char *nm = v->names + (size_t)k * NAME_LEN;
        snprintf(nm, NAME_LEN, "%u,%u", (unsigned)(k / gc), (unsigned)(k % gc));
        s->tokens[i] = s->display[i] = nm;
        s->word_start[i] = 1, s->special[i] = 0, s->role[i] = TOK_ROLE_NONE;
        v->kind[i] = OUT_TOK_PATCH;
    }
    return first;
}

/* The vision tower's tokens for its page: its class token, then its patches "r,c" (cols columns). */
static int tower_tokens(VlmRun *v, int pre, int nv, int cols, AvErr *e) {
    TokEncoding *t = &v->venc;
    memset(t, 0, sizeof *t);
    t->n = nv, t->b_start = -1;
    t->ids = calloc((size_t)nv, sizeof *t->ids);
    t->type_ids = calloc((size_t)nv, sizeof *t->type_ids);
    t->tokens = malloc((size_t)nv * sizeof *t->tokens);
    t->word_start = malloc((size_t)nv);
    t->special = calloc((size_t)nv, 1);
    t->role = calloc((size_t)nv, 1);
    v->vkind = malloc((size_t)nv * sizeof *v->vkind);
    v->vnames = malloc((size_t)nv * NAME_LEN);
    if (!t->ids || !t->type_ids || !t->tokens || !t->word_start || !t->special || !t->role || !v->vkind || !v->vnames)
        return av_err(e, "out of memory");
    memset(t->word_start, 1, (size_t)nv);
    for (int i = 0; i < nv; i++) {
        const int cls = i < pre;
        char *nm = v->vnames + (size_t)i * NAME_LEN;
        if (!cls) snprintf(nm, NAME_LEN, "%u,%u", (unsigned)((i - pre) / cols), (unsigned)((i - pre) % cols));
        t->tokens[i] = cls ? "[CLS]" : nm;
        t->special[i] = (unsigned char)cls;
        t->role[i] = cls ? TOK_ROLE_CLS : TOK_ROLE_NONE;
        v->vkind[i] = cls ? OUT_TOK_CLS : OUT_TOK_PATCH;
    }
    t->display = t->tokens;
    return 0;
}

/* The picture prepared and the text made the sequence: preprocessed (load_proc), the text's placeholder
 * expanded and tokenized (with the tokenizer's special tokens unless `plain`: a rendered chat that wrote its
 * own), the image tokens named, the preprocessed picture kept as PNG. Reads the pipeline only. */
static int vlm_prepare(const Run *r, VlmRun *v, const AvImage *img, const char *text, int plain, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const ModelConfig *vc = &r->s->model.vision->cfg;
    snprintf(v->mode, sizeof v->mode, "%s", img->mode);
    if (load_proc(r, &v->proc, e) || imgproc_run(&v->proc, img, &v->px, e)) return -1;
    if (vis_grid(vc, v->px.h, v->px.w, &v->rows, &v->cols, &v->nv, e)) return av_err_prefix(e, "%s", v->name);
    if (v->px.tiles > 1 && (long)v->px.tiles * c->vlm_tokens > CFG_MAX_VIS_TOKENS)
        return av_err(e, "%s: the picture makes %d tiles of %d image tokens, above the %d image tokens attnviz runs",
                      v->name, v->px.tiles, c->vlm_tokens, CFG_MAX_VIS_TOKENS);
    char *full = NULL;
    if (expand_text(r, v, text, &full, e)) return -1;
    const int trc = plain ? tok_encode(r->s->tok, full, strlen(full), NULL, 0, cfg_max_tokens(c), &v->text, e)
                          : run_tokenize((Run *)r, full, NULL, &v->text, e);
    free(full);
    if (trc) return -1;
    /* the image tokens' grid: the tower's patches (LLaVA), or Gemma 3's pooled squares */
    const int gside = c->vlm_kind != VLM_KIND_LLAVA ? (int)(sqrt((double)c->vlm_tokens) + 0.5) : 0;
    v->gr = gside ? gside : v->rows, v->gc = gside ? gside : v->cols;
    if (v->gr * v->gc != c->vlm_tokens || v->rows % v->gr)
        return av_err(e, "the picture's grid %d x %d is not the model's %d image tokens", v->gr, v->gc, c->vlm_tokens);
    if ((v->first = name_sequence(r, v, v->gc, e)) < 0) return -1;
    return img_encode_png(v->px.rgb, v->px.w, v->px.h, &v->png, &v->png_len, e);
}

/* The pass into cap (n tokens; rs the language model's run state, at least n): the vision tower (its attention
 * into the VlmRun's own capture), the projector, the text's embeddings with the image tokens' in their places,
 * the decoder. keep_tower: the tower's capture and the embeddings stay for the outputs; else its capture is
 * freed after the pass. Then the OutImage the writers read. */
static int vlm_pass(Run *r, VlmRun *v, RunState *rs, Capture *cap, int keep_tower, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const Model *vm = r->s->model.vision;
    const ModelConfig *vc = &vm->cfg;
    const int n = v->enc.n, H = c->hidden_size, ni = c->vlm_tokens, fi = vlm_feature_index(&r->s->model);
    const int tiles = v->px.tiles > 1 ? v->px.tiles : 1;
    /* the command line plans the tower's capture before (vlm_plan_tower); a server keeps one head of the last
     * layer, which the pass needs somewhere to write (its attention is not served) */
    const int last = vc->num_layers - 1, first_head = 0;
    if ((!v->vrs.x && model_runstate_alloc(&v->vrs, vm, v->nv, r->spec.threads, e)) ||
        (!v->vcap.attn && model_capture_select(&v->vcap, vc, v->nv, 0, fi < vc->num_layers, &last, 1, &first_head, 1, e)))
        return -1;
    if ((!v->embeds && !(v->embeds = malloc((size_t)tiles * ni * H * sizeof *v->embeds))) ||
        (!v->x && !(v->x = malloc((size_t)n * H * sizeof *v->x))))
        return av_err(e, "out of memory");
    if (model_embed_ids(&r->s->model, v->enc.ids, n, v->x, e)) return -1;
    /* each tile through the tower (Idefics3's, row by row, then the global view: the capture keeps the last's) */
    for (int k = 0; k < tiles; k++) {
        float *emb = v->embeds + (size_t)k * ni * H;
        const float *px = v->px.pixels + (size_t)k * 3 * v->px.h * v->px.w;
        if (vlm_image_embeds(&r->s->model, &v->vrs, rs, px, v->px.h, v->px.w, &v->vcap, emb, e)) return -1;
        memcpy(v->x + (size_t)(tiles > 1 ? v->tile_at[k] : v->first) * H, emb, (size_t)ni * H * sizeof *v->x);
    }
    if (c->vlm_bidir && !v->blk_end) { /* Gemma 3: the image tokens attend to each other both ways */
        if (!(v->blk_end = calloc((size_t)n, sizeof *v->blk_end))) return av_err(e, "out of memory");
        for (int i = v->first; i < v->first + ni; i++) v->blk_end[i] = v->first + ni;
    }
    if (model_forward_embeds_blocks(&r->s->model, rs, v->x, n, v->blk_end, cap, 0, e)) return -1;
    if (!keep_tower) {
        model_capture_free(&v->vcap);
        model_runstate_free(&v->vrs);
        free(v->x), v->x = NULL;
    }
    v->oi = (OutImage){.file = v->name, .mode = v->mode, .src_w = v->px.src_w, .src_h = v->px.src_h,
                       .resized_w = v->px.resized_w, .resized_h = v->px.resized_h, .w = v->px.w, .h = v->px.h,
                       .patch = vc->patch_size * (v->rows / v->gr), .rows = v->gr, .cols = v->gc, .tiles = tiles,
                       .first_patch = v->first, .kind = v->kind, .png = v->png, .png_len = v->png_len,
                       .feature_layer = c->vlm_feature_layer, .n_image = ni, .embeds_dim = H, .bidir = c->vlm_bidir,
                       .vis_layers = vc->num_layers, .vis_heads = vc->num_heads, .vis_n = v->nv, .vis_prefix = vis_prefix(vc)};
    v->oi.split_rows = v->px.tile_rows, v->oi.split_cols = v->px.tile_cols;
    v->oi.tile_first = tiles > 1 ? v->tile_at : NULL;
    if (keep_tower) { /* the tower's attention (what its plan kept), the embeddings and the pixel values for the outputs */
        if (v->n_tower_layers) v->oi.vis_attn = v->vcap.attn, v->oi.vis_kept = v->vcap.n_kept_layers;
        v->oi.vis_layers = v->vcap.n_layers, v->oi.vis_heads = v->vcap.n_heads;
        v->oi.image_embeds = v->embeds + (size_t)(tiles - 1) * ni * H; /* the global view's (Idefics3) */
        v->oi.pixels = v->px.pixels, v->oi.pixel_tiles = tiles;
    }
    v->ran = 1;
    return 0;
}

/* The tower's capture before its pass, as plan.c's run_plan_tower says fits beside the decoder's: every layer,
 * or the last ones (all their heads). */
static int vlm_plan_tower(const Run *r, VlmRun *v, TowerPlan *tp, AvErr *e) {
    const ModelConfig *vc = &r->s->model.vision->cfg;
    const int want_hidden = vlm_feature_index(&r->s->model) < vc->num_layers, L = vc->num_layers;
    if (run_plan_tower(r, vc, v->nv, want_hidden, run_capture_need(r, &r->spec, v->enc.n), tp, e)) return -1;
    v->n_tower_layers = tp->layers;
    if (tp->layers == 0) return 0; /* the pass keeps one head of the last layer, as a server's */
    for (int i = 0; i < tp->layers; i++) v->tower_layers[i] = L - tp->layers + i;
    if (tp->layers == L) return model_capture_alloc(&v->vcap, vc, v->nv, 0, want_hidden, e);
    return model_capture_select(&v->vcap, vc, v->nv, 0, want_hidden, v->tower_layers, tp->layers, NULL, 0, e);
}

int run_vlm(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const Model *vm = r->s->model.vision;
    const ModelConfig *vc = &vm->cfg;
    int rc = -1;
    if (check_vlm_run(r, e)) return -1;
    VlmRun *v = calloc(1, sizeof *v);
    if (!v || !(v->name = strdup(o->image))) {
        free(v);
        return av_err(e, "out of memory");
    }
    double t0 = av_now_ms();
    AvImage img;
    memset(&img, 0, sizeof img);
    if (img_load(o->image, &img, e)) goto done;
    /* --chat: the message is the picture then the text, rendered by the model's template, which writes
     * the placeholder where it puts pictures */
    if (run_is_chat(o)) {
        const ChatTemplate *t;
        const char *parts[2] = {NULL, o->text_a};
        ChatMessage one = {"user", NULL, parts, 2, NULL};
        if (session_chat_template(r->s, &t, e)) goto done;
        if (!t) {
            av_err(e, "--chat: %s ships no chat template", r->s->dir);
            goto done;
        }
        if (chat_render(t, &one, 1, 1, &v->chat, e)) goto done;
    }
    /* as transformers' processors tokenize a rendered chat: with the tokenizer's special tokens unless
     * the template wrote the first one itself (LLaVA's writes none: <s> is added) */
    const char *bos = v->chat && r->s->chat ? chat_template_special(r->s->chat, "bos_token") : NULL;
    const int plain = v->chat && bos && *bos && !strncmp(v->chat, bos, strlen(bos));
    TowerPlan tp;
    if (vlm_prepare(r, v, &img, v->chat ? v->chat : o->text_a, v->chat && !plain, e) ||
        run_ensure_buffers(r, v->enc.n, e) || vlm_plan_tower(r, v, &tp, e))
        goto done;
    r->t_tok += av_now_ms() - t0;
    t0 = av_now_ms();
    run_score_input(&r->in.cap, &v->enc);
    if (vlm_pass(r, v, &r->rs, &r->in.cap, 1, e)) goto done;
    r->t_fwd += av_now_ms() - t0;
    /* the vision tower's own page: its attention over the class token and the patches, with the picture */
    OutDoc tower;
    OutImage toi = v->oi;
    char tname[300];
    const int pre = vis_prefix(vc);
    if (tower_tokens(v, pre, v->nv, v->cols, e)) goto done;
    toi.first_patch = pre, toi.kind = v->vkind, toi.vis_attn = NULL, toi.image_embeds = NULL, toi.pixels = NULL;
    toi.patch = vc->patch_size, toi.rows = v->rows, toi.cols = v->cols, toi.bidir = 0;
    run_tower_doc(r, &tower, tname, sizeof tname, "vision tower", vm, &v->venc, &v->vcap, o->image);
    tower.image = &toi, tower.init_view = "image";
    if (v->n_tower_layers && v->n_tower_layers < vc->num_layers) /* the page shows the layers kept */
        tower.layers = v->tower_layers, tower.n_sel_layers = v->n_tower_layers, tower.init_layer = v->tower_layers[0];
    if (tp.page) v->oi.tower = &tower, v->oi.tower_suffix = ".vision.html", v->oi.tower_label = "vision tower";
    r->in.image = &v->oi;
    rc = run_finish_input(r, v->chat ? v->chat : o->text_a, NULL, 0, &v->enc, &r->in.cap, NULL, e);
    r->in.image = NULL;
    if (rc == 0 && o->stats) rc = run_finish_stats(r, e);
    if (rc == 0 && o->heads.on) rc = run_finish_heads(r, e);
done:
    img_free(&img);
    vlm_free(v);
    return rc;
}

/* ---------------------------------------------------------------- one upload, for a server */

int vlm_open(const Run *p, const unsigned char *bytes, size_t len, const char *name, uint64_t max_pixels,
             const char *text, VlmRun **out, AvErr *e) {
    *out = NULL;
    if (!p->s->model.vision || !p->s->model.vlm)
        return av_err_usage(e, "%s is a %s model: not a vision-language model", p->s->name, p->s->cfg.model_type);
    if (!text || !*text) {
        const char *ph = tok_id_to_token(p->s->tok, p->s->cfg.vlm_kind == VLM_KIND_GEMMA3 ? p->s->cfg.vlm_boi_id : p->s->cfg.image_token_id);
        return av_err_usage(e, "%s is a vision-language model: send its text too, with %s where the picture goes", p->s->name,
                            ph ? ph : "the picture's token");
    }
    VlmRun *v = calloc(1, sizeof *v);
    if (!v || !(v->name = strdup(name)) || !(v->text_in = strdup(text))) {
        vlm_free(v);
        return av_err(e, "out of memory");
    }
    AvImage img;
    int rc = img_decode_limit(bytes, len, name, max_pixels, &img, e);
    if (rc == 0) {
        if (vlm_prepare(p, v, &img, text, 1, e)) rc = -1;
        img_free(&img);
    }
    if (rc != 0) {
        vlm_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

const TokEncoding *vlm_tokens(const VlmRun *v) { return &v->enc; }

const unsigned char *vlm_picture(const VlmRun *v, size_t *len) {
    *len = v->png_len;
    return v->png;
}

int vlm_forward(Run *p, VlmRun *v, Capture *cap, AvErr *e) {
    const int n = v->enc.n;
    if (p->rs.max_tokens < n) { /* the run state only grows: one-input runs share it */
        model_runstate_free(&p->rs);
        if (model_runstate_alloc(&p->rs, &p->s->model, n, p->spec.threads, e)) return -1;
    }
    double t0 = av_now_ms();
    int rc = vlm_pass(p, v, &p->rs, cap, 0, e);
    p->t_fwd += av_now_ms() - t0;
    return rc;
}

const OutImage *vlm_image(const VlmRun *v) { return v->ran ? &v->oi : NULL; }

const char *run_image_placeholder(const Session *s) {
    const ModelConfig *c = &s->cfg;
    if (!c->vlm || !s->tok) return NULL;
    return tok_id_to_token(s->tok, c->vlm_kind == VLM_KIND_GEMMA3 ? c->vlm_boi_id : c->image_token_id);
}

const char *run_image_example(const Session *s) { return example_text(&s->cfg); }
