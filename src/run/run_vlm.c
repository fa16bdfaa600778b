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

#define NAME_LEN 16 /* an image token's name: "9999,9999" */

typedef struct {
    TokEncoding text;      /* the text as the tokenizer reads it */
    TokEncoding enc;       /* the sequence: the placeholder replaced by the image tokens */
    char *names;           /* (n_image, NAME_LEN) */
    int *kind;             /* (n) OUT_TOK_TEXT / OUT_TOK_PATCH */
    ImgProc proc;
    AvImage img;
    ImgPixels px;
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
} VlmRun;

static void vlm_run_free(VlmRun *v) {
    tok_encoding_free(&v->text);
    free(v->enc.ids), free(v->enc.type_ids), free((void *)v->enc.tokens), free((void *)v->enc.display);
    free(v->enc.word_start), free(v->enc.special), free(v->enc.role);
    free(v->names), free(v->kind);
    img_free(&v->img);
    imgproc_free(&v->px);
    model_runstate_free(&v->vrs);
    model_capture_free(&v->vcap);
    free(v->embeds), free(v->x), free(v->png), free(v->chat);
    free(v->venc.ids), free(v->venc.type_ids), free((void *)v->venc.tokens), free(v->venc.word_start), free(v->venc.special);
    free(v->venc.role), free(v->vkind), free(v->vnames), free(v->blk_end);
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
        o->output.out_dir || o->decoder_text)
        return av_err_usage(e, "%s", "--image with a vision-language model runs one picture and text: not with --batch, "
                                     "--out-dir, --predict, --generate, --tokens-only, --words, --telemetry, "
                                     "--decoder-text or the residual-stream options (yet)");
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

/* The text with its one placeholder for the picture (LLaVA's <image>, Gemma 3's <start_of_image>: the token the
 * model's processor looks for) replaced as the processor replaces it: the image token once per image token
 * (LLaVA), or "\n\n<start_of_image>" + the image tokens + "<end_of_image>\n\n" (Gemma 3). Tokenizing the
 * result gives the processor's ids. */
static int expand_text(const Run *r, const char *text, char **out, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const int gemma = c->vlm_boi_id > 0;
    const char *ph = tok_id_to_token(r->s->tok, gemma ? c->vlm_boi_id : c->image_token_id);
    const char *img = tok_id_to_token(r->s->tok, c->image_token_id), *eoi = gemma ? tok_id_to_token(r->s->tok, c->vlm_eoi_id) : "";
    if (!ph || !img || !eoi || !*ph)
        return av_err(e, "%s: the tokenizer does not spell the picture's tokens (ids %d, %d)", r->s->name,
                      gemma ? c->vlm_boi_id : c->image_token_id, c->image_token_id);
    int count = 0;
    const char *at = NULL;
    for (const char *p = text; (p = strstr(p, ph)); p += strlen(ph)) count++, at = at ? at : p;
    if (count == 0)
        return av_err_usage(e, "the text has no %s: write it where the picture goes, e.g. \"%s\"", ph,
                            gemma ? "<start_of_turn>user\n<start_of_image>What is in the picture?<end_of_turn>\n"
                                    "<start_of_turn>model\n"
                                  : "USER: <image>\nWhat is in the picture? ASSISTANT:");
    if (count > 1) return av_err_usage(e, "the text has %d %s: one picture a run", count, ph);
    AvBuf b;
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    fwrite(text, 1, (size_t)(at - text), b.f);
    if (gemma) fprintf(b.f, "\n\n%s", ph);
    for (int k = 0; k < c->vlm_tokens; k++) fputs(img, b.f);
    if (gemma) fprintf(b.f, "%s\n\n", eoi);
    fputs(at + strlen(ph), b.f);
    if (!(*out = av_buf_close(&b, !ferror(b.f)))) return av_err(e, "out of memory");
    return 0;
}

/* The sequence: the expanded text's tokens, its image tokens (one run of them) named by their place in the
 * image tokens' grid (gc columns). The run's first position, or -1. */
static int name_sequence(const Run *r, VlmRun *v, int gc, AvErr *e) {
    const ModelConfig *c = &r->s->cfg;
    const TokEncoding *t = &v->text;
    const int ni = c->vlm_tokens;
    int first = -1, count = 0;
    for (int i = 0; i < t->n; i++)
        if (t->ids[i] == c->image_token_id) count++, first = first < 0 ? i : first;
    if (t->n_truncated)
        return av_err(e, "the text and the picture's %d tokens make %d, above the model's %d positions", ni,
                      t->n + t->n_truncated, cfg_max_tokens(c));
    if (count != ni)
        return av_err(e, "the text tokenizes to %d of the picture's token (id %d), not its %d: the tokenizer splits its "
                         "spelling, or the text holds it too", count, c->image_token_id, ni);
    for (int i = first; i < first + ni; i++)
        if (t->ids[i] != c->image_token_id)
            return av_err(e, "the text holds the picture's token %d apart from its place", c->image_token_id);
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
    v->names = malloc((size_t)ni * NAME_LEN);
    v->kind = malloc((size_t)n * sizeof *v->kind);
    if (!s->ids || !s->type_ids || !s->tokens || !s->display || !s->word_start || !s->special || !s->role || !v->names ||
        !v->kind)
        return av_err(e, "out of memory for %d tokens", n);
    for (int i = 0; i < n; i++) {
        s->ids[i] = t->ids[i];
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

int run_vlm(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    const Model *vm = r->s->model.vision;
    const ModelConfig *vc = &vm->cfg;
    VlmRun v;
    memset(&v, 0, sizeof v);
    int rc = -1, rows, cols, nv;
    if (check_vlm_run(r, e)) return -1;
    double t0 = av_now_ms();
    if (load_proc(r, &v.proc, e) || img_load(o->image, &v.img, e) || imgproc_run(&v.proc, &v.img, &v.px, e))
        goto done;
    if (vis_grid(vc, v.px.h, v.px.w, &rows, &cols, &nv, e)) {
        av_err_prefix(e, "%s", o->image);
        goto done;
    }
    /* --chat: the message is the picture then the text, rendered by the model's template, which writes
     * the placeholder where it puts pictures */
    char *chat = NULL;
    if (run_is_chat(o)) {
        const ChatTemplate *t;
        const char *parts[2] = {NULL, o->text_a};
        ChatMessage one = {"user", NULL, parts, 2};
        if (session_chat_template(r->s, &t, e)) goto done;
        if (!t) {
            av_err(e, "--chat: %s ships no chat template", r->s->dir);
            goto done;
        }
        if (chat_render(t, &one, 1, 1, &chat, e)) goto done;
    }
    /* as transformers' processors tokenize a rendered chat: with the tokenizer's special tokens unless
     * the template wrote the first one itself (LLaVA's writes none: <s> is added) */
    const char *bos = chat && r->s->chat ? chat_template_special(r->s->chat, "bos_token") : NULL;
    const int plain = chat && bos && *bos && !strncmp(chat, bos, strlen(bos));
    free(v.chat);
    v.chat = chat;
    char *full = NULL;
    if (expand_text(r, chat ? chat : o->text_a, &full, e)) goto done;
    const int trc = chat && !plain ? tok_encode(r->s->tok, full, strlen(full), NULL, 0, cfg_max_tokens(c), &v.text, e)
                                   : run_tokenize(r, full, NULL, &v.text, e);
    free(full);
    if (trc) goto done;
    /* the image tokens' grid: the tower's patches (LLaVA), or Gemma 3's pooled squares */
    const int gside = c->vlm_boi_id > 0 ? (int)(sqrt((double)c->vlm_tokens) + 0.5) : 0;
    const int gr = gside ? gside : rows, gc = gside ? gside : cols;
    if (gr * gc != c->vlm_tokens || rows % gr) {
        av_err(e, "the picture's grid %d x %d is not the model's %d image tokens", gr, gc, c->vlm_tokens);
        goto done;
    }
    const int first = name_sequence(r, &v, gc, e);
    if (first < 0) goto done;
    const int n = v.enc.n, H = c->hidden_size, ni = c->vlm_tokens;
    const int fi = vlm_feature_index(&r->s->model);
    if (run_ensure_buffers(r, n, e) || model_runstate_alloc(&v.vrs, vm, nv, r->spec.threads, e) ||
        model_capture_alloc(&v.vcap, vc, nv, 0, fi < vc->num_layers, e))
        goto done;
    r->t_tok += av_now_ms() - t0;
    t0 = av_now_ms();
    if (!(v.embeds = malloc((size_t)ni * H * sizeof *v.embeds)) || !(v.x = malloc((size_t)n * H * sizeof *v.x))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (vlm_image_embeds(&r->s->model, &v.vrs, &r->rs, v.px.pixels, v.px.h, v.px.w, &v.vcap, v.embeds, e) ||
        model_embed_ids(&r->s->model, v.enc.ids, n, v.x, e))
        goto done;
    memcpy(v.x + (size_t)first * H, v.embeds, (size_t)ni * H * sizeof *v.x);
    run_score_input(&r->in.cap, &v.enc);
    if (c->vlm_bidir) { /* Gemma 3: the image tokens attend to each other both ways */
        if (!(v.blk_end = calloc((size_t)n, sizeof *v.blk_end))) {
            av_err(e, "out of memory");
            goto done;
        }
        for (int i = first; i < first + ni; i++) v.blk_end[i] = first + ni;
    }
    if (model_forward_embeds_blocks(&r->s->model, &r->rs, v.x, n, v.blk_end, &r->in.cap, 0, e)) goto done;
    r->t_fwd += av_now_ms() - t0;
    if (img_encode_png(v.px.rgb, v.px.w, v.px.h, &v.png, &v.png_len, e)) goto done;
    OutImage oi = {.file = o->image, .mode = v.img.mode, .src_w = v.img.w, .src_h = v.img.h,
                   .resized_w = v.px.resized_w, .resized_h = v.px.resized_h, .w = v.px.w, .h = v.px.h,
                   .patch = vc->patch_size * (rows / gr), .rows = gr, .cols = gc, .tiles = 1, .first_patch = first,
                   .kind = v.kind, .png = v.png, .png_len = v.png_len, .vis_attn = v.vcap.attn,
                   .vis_layers = v.vcap.n_layers, .vis_heads = v.vcap.n_heads, .vis_n = nv, .vis_prefix = vis_prefix(vc),
                   .feature_layer = c->vlm_feature_layer, .image_embeds = v.embeds, .n_image = ni, .embeds_dim = H,
                   .pixels = v.px.pixels, .bidir = c->vlm_bidir};
    /* the vision tower's own page: its attention over the class token and the patches, with the picture */
    OutDoc tower;
    OutImage toi = oi;
    char tname[300];
    const int pre = vis_prefix(vc);
    if (tower_tokens(&v, pre, nv, cols, e)) goto done;
    toi.first_patch = pre, toi.kind = v.vkind, toi.vis_attn = NULL, toi.image_embeds = NULL, toi.pixels = NULL;
    toi.patch = vc->patch_size, toi.rows = rows, toi.cols = cols, toi.bidir = 0;
    run_tower_doc(r, &tower, tname, sizeof tname, "vision tower", vm, &v.venc, &v.vcap, o->image);
    tower.image = &toi, tower.init_view = "image";
    oi.tower = &tower, oi.tower_suffix = ".vision.html", oi.tower_label = "vision tower";
    r->in.image = &oi;
    rc = run_finish_input(r, v.chat ? v.chat : o->text_a, NULL, 0, &v.enc, &r->in.cap, NULL, e);
    r->in.image = NULL;
    if (rc == 0 && o->stats) rc = run_finish_stats(r, e);
    if (rc == 0 && o->heads.on) rc = run_finish_heads(r, e);
done:
    vlm_run_free(&v);
    return rc;
}
