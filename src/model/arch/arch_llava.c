/* arch_llava.c — the vision-language models: LLaVA-1.5 (transformers'
 * LlavaForConditionalGeneration: a CLIP vision tower, a two-layer MLP
 * projector and a Llama language model in one folder) and Gemma 3
 * (Gemma3ForConditionalGeneration: a SigLIP tower, average-pooled, an RMSNorm
 * and one matrix, a Gemma 3 text model whose image tokens attend both ways) and Idefics3 / SmolVLM
 * (Idefics3ForConditionalGeneration: a SigLIP tower over the picture's tiles and its global view, a pixel
 * shuffle and one matrix, a Llama). The Model is the language model (its config the text_config);
 * Model.vision is the vision tower, a second Model over the same files, and
 * Model.vlm the projector (weights.h). The picture's tokens take the places of
 * the <image> placeholders in the sequence (run/run_vlm.c). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "arch_vit.h"
#include "gguf.h"
#include "loader.h"
#include "tokenizer.h"
#include "util.h"

/* LlamaConfig's defaults for the keys a LLaVA text_config may leave out (llava-hf's name only a few:
 * the rest is transformers' LlamaConfig()). */
typedef struct {
    const char *key;
    double value;
} SubDefault;
static const SubDefault LLAMA_DEFAULTS[] = {{"vocab_size", 32000},       {"hidden_size", 4096},           {"intermediate_size", 11008},
                      {"num_hidden_layers", 32},   {"num_attention_heads", 32},     {"max_position_embeddings", 2048},
                      {"rms_norm_eps", 1e-6},      {"eos_token_id", 2}};

static const cJSON *object(const cJSON *root, const char *key, const char *path, char *sub, size_t len, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsObject(v)) {
        av_err(e, "%s: \"%s\" must be an object", path, key);
        return NULL;
    }
    snprintf(sub, len, "%s: %s", path, key);
    return v;
}

/* A sub-config's model_type, when it names one, must be `want`. */
static int sub_type(const cJSON *v, const char *want, const char *sub, const char *family, const char *what, AvErr *e) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(v, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, want)))
        return av_err(e, "%s: model_type \"%.40s\": attnviz runs %s with a %s (%s)", sub,
                      cJSON_IsString(mt) ? mt->valuestring : "?", family, what, want);
    return 0;
}

/* A vision-language config.json's two halves and its text model. */
typedef struct {
    const ArchSpec *text;             /* the text model's row, which parses text_config */
    const char *text_type, *text_what; /* text_config's model_type, when it names one, and what that is */
    const SubDefault *defaults;       /* (n_defaults) the text model's defaults for the keys text_config may leave out */
    size_t n_defaults;
    const char *vision_type, *vision_what;
    const char *family;               /* what messages call the model ("LLaVA") */
} SubConfigs;

/* text_config and vision_config must be objects of the model types s names; text_config, with the defaults
 * of the keys it leaves out, is parsed by s->text into c (its eos ids too). *vc and vsub (vlen bytes): vision_config
 * and its name for messages, for the tower's parse. */
static int sub_configs(ModelConfig *c, const cJSON *root, const char *path, const SubConfigs *s, const cJSON **vc,
                       char *vsub, size_t vlen, AvErr *e) {
    char sub[600];
    const cJSON *tc = object(root, "text_config", path, sub, sizeof sub, e);
    *vc = tc ? object(root, "vision_config", path, vsub, vlen, e) : NULL;
    if (!*vc || sub_type(tc, s->text_type, sub, s->family, s->text_what, e) ||
        sub_type(*vc, s->vision_type, vsub, s->family, s->vision_what, e))
        return -1;
    cJSON *t = cJSON_Duplicate(tc, 1);
    if (!t) return av_err(e, "out of memory");
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->n_defaults; i++)
        if (!cJSON_GetObjectItemCaseSensitive(t, s->defaults[i].key) &&
            !cJSON_AddNumberToObject(t, s->defaults[i].key, s->defaults[i].value))
            rc = av_err(e, "out of memory");
    if (rc == 0) rc = s->text->parse(c, t, sub, e);
    if (rc == 0) rc = cfg_parse_eos(c, t, sub, e);
    cJSON_Delete(t);
    return rc ? -1 : 0;
}

static int llava_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    static const SubConfigs LLAVA = {&arch_family_llama, "llama", "Llama language model", LLAMA_DEFAULTS,
                                     sizeof LLAMA_DEFAULTS / sizeof LLAMA_DEFAULTS[0], "clip_vision_model",
                                     "CLIP vision tower", "LLaVA"};
    char vsub[600];
    const cJSON *vc;
    if (sub_configs(c, root, path, &LLAVA, &vc, vsub, sizeof vsub, e)) return -1;
    c->vlm = 1;
    /* the vision tower's shape: its tokens per picture */
    ModelConfig v;
    memset(&v, 0, sizeof v);
    if (arch_family_clip_vision.parse(&v, vc, vsub, e)) return -1;
    c->image_token_id = 32000;
    c->vlm_feature_layer = -2;
    c->vlm_proj_bias = 1;
    const char *key = cJSON_GetObjectItemCaseSensitive(root, "image_token_id") ? "image_token_id" : "image_token_index";
    if (cfg_opt_int(root, key, 0, c->vocab_size - 1, &c->image_token_id, path, e) ||
        cfg_opt_bool(root, "multimodal_projector_bias", &c->vlm_proj_bias, path, e))
        return -1;
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(root, "vision_feature_layer");
    if (fl && !cJSON_IsNumber(fl))
        return av_err(e, "%s: \"vision_feature_layer\" as a list (features of several layers) is not supported", path);
    if (cfg_opt_int(root, "vision_feature_layer", -(v.num_layers + 1), v.num_layers, &c->vlm_feature_layer, path, e))
        return -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "vision_feature_select_strategy");
    const char *strategy = cJSON_IsString(st) ? st->valuestring : "default";
    if (st && !cJSON_IsString(st)) return av_err(e, "%s: \"vision_feature_select_strategy\" must be a string", path);
    if (strcmp(strategy, "default") && strcmp(strategy, "full"))
        return av_err(e, "%s: vision_feature_select_strategy \"%.40s\" (attnviz reads \"default\" and \"full\")", path,
                      strategy);
    c->vlm_drop_cls = !strcmp(strategy, "default");
    const int grid = v.image_size / v.patch_size;
    c->vlm_tokens = grid * grid + (c->vlm_drop_cls ? 0 : v.vis_cls);
    /* the projector's activation, read into a scratch config (the model's own is the language model's) */
    ModelConfig act;
    memset(&act, 0, sizeof act);
    if (cfg_parse_act(&act, root, "projector_hidden_act", "gelu", path, e)) return -1;
    c->vlm_proj_act = (int)act.hidden_act;
    return 0;
}

/* Where a LLaVA checkpoint keeps its parts: llava-hf's published files and transformers 5's saves
 * ("language_model.model.", the tower under "vision_tower.vision_model." or "vision_tower."), or
 * transformers 4's later names ("model.language_model.", "model.vision_tower.vision_model."). */
static const char *const LM_PREFIX[] = {"language_model.model.", "model.language_model."};
static const char *const VISION_BASE[] = {"vision_tower.vision_model.", "vision_tower.", "model.vision_tower.vision_model.",
                                          "model.vision_tower."};
static const char *const PROJ_PREFIX[] = {"multi_modal_projector.", "model.multi_modal_projector."};
static const char *const HEAD[] = {"language_model.lm_head", "lm_head"};

/* The first of names[n] under which `probe` is a tensor, or NULL. */
static const char *first_with(Model *m, const char *const *names, int n, const char *probe) {
    char nm[300];
    for (int i = 0; i < n; i++) {
        snprintf(nm, sizeof nm, "%s%s", names[i], probe);
        if (model_has_tensor(m, nm)) return names[i];
    }
    return NULL;
}

/* Idefics3VisionConfig's defaults for the keys a vision_config may leave out (a SigLIP tower without its head). */
static const struct {
    const char *key;
    double value;
} IDEFICS3_VISION_DEFAULTS[] = {{"hidden_size", 1152}, {"intermediate_size", 3072}, {"num_hidden_layers", 12},
                                {"num_attention_heads", 16}, {"image_size", 224},       {"patch_size", 32}};

/* vision_config parsed as a SigLIP tower's; idefics3: with Idefics3VisionConfig's defaults and no pooling head. */
static int siglip_tower_parse(ModelConfig *v, const cJSON *vc, int idefics3, const char *sub, AvErr *e) {
    if (!idefics3) return arch_family_siglip_vision.parse(v, vc, sub, e);
    if (cJSON_GetObjectItemCaseSensitive(vc, "vision_use_head"))
        return av_err(e, "%s: \"vision_use_head\": Idefics3's vision tower has no pooling head", sub);
    cJSON *t = cJSON_Duplicate(vc, 1);
    int rc = t ? 0 : av_err(e, "out of memory");
    for (size_t i = 0; rc == 0 && i < sizeof IDEFICS3_VISION_DEFAULTS / sizeof IDEFICS3_VISION_DEFAULTS[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(t, IDEFICS3_VISION_DEFAULTS[i].key) &&
            !cJSON_AddNumberToObject(t, IDEFICS3_VISION_DEFAULTS[i].key, IDEFICS3_VISION_DEFAULTS[i].value))
            rc = av_err(e, "out of memory");
    if (rc == 0 && !cJSON_AddFalseToObject(t, "vision_use_head")) rc = av_err(e, "out of memory");
    if (rc == 0) rc = arch_family_siglip_vision.parse(v, t, sub, e);
    cJSON_Delete(t);
    return rc;
}

/* The vision tower: vision_config as a CLIP (siglip 0), a SigLIP (1) or an Idefics3 (2: SigLIP's, its own
 * defaults) vision tower's, over this model's files. */
static int load_vision_as(Model *m, const char *base, int siglip, AvErr *e) {
    char *dir = NULL, *cfgp = NULL, *buf = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = -1;
    Model *v = calloc(1, sizeof *v);
    if (!v) return av_err(e, "out of memory");
    m->vision = v;
    const char *slash = strrchr(m->files[0].path, '/');
    dir = slash ? strndup(m->files[0].path, (size_t)(slash - m->files[0].path)) : strdup(".");
    if (!dir || !(cfgp = av_path_join(dir, "config.json"))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (av_read_file(cfgp, 1 << 20, &buf, &len, e)) goto done;
    if (!(root = cJSON_ParseWithLength(buf, len))) {
        av_err(e, "%s: not valid JSON", cfgp);
        goto done;
    }
    char sub[600];
    const cJSON *vc = object(root, "vision_config", cfgp, sub, sizeof sub, e);
    if (!vc || (siglip ? siglip_tower_parse(&v->cfg, vc, siglip == 2, sub, e) : arch_family_clip_vision.parse(&v->cfg, vc, sub, e)) ||
        cfg_validate(&v->cfg, "hidden_size", "num_attention_heads", sub, e))
        goto done;
    const ArchSpec *spec = arch_detect(siglip ? "siglip_vision_model" : "clip_vision_model", NULL);
    v->cfg.arch = spec->kind;
    snprintf(v->cfg.model_type, sizeof v->cfg.model_type, "%s", spec->model_type);
    v->files = m->files, v->n_files = m->n_files, v->files_borrowed = 1, v->path = m->path;
    if (!(v->w.layers = calloc((size_t)v->cfg.num_layers, sizeof *v->w.layers))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (siglip ? arch_siglip_vision_load_at(v, base, e) : arch_clip_vision_load_at(v, base, e)) goto done;
    rc = 0;
done:
    cJSON_Delete(root);
    free(buf), free(cfgp), free(dir);
    return rc;
}

static int llava_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const char *lm = first_with(m, LM_PREFIX, 2, "embed_tokens.weight");
    const char *vis = first_with(m, VISION_BASE, 4, "embeddings.patch_embedding.weight");
    const char *proj = first_with(m, PROJ_PREFIX, 2, "linear_1.weight");
    if (!lm) return av_err(e, "%s: no language model (embed_tokens under %s or %s)", m->path, LM_PREFIX[0], LM_PREFIX[1]);
    if (!vis) return av_err(e, "%s: no vision tower (embeddings.patch_embedding under %s or %s)", m->path, VISION_BASE[0],
                            VISION_BASE[2]);
    if (!proj) return av_err(e, "%s: no projector (linear_1 under %s or %s)", m->path, PROJ_PREFIX[0], PROJ_PREFIX[1]);
    m->tensor_prefix = lm;
    if (arch_family_llama.load(m, e)) return -1;
    /* lm_head beside the language model (llava-hf's: under language_model.) */
    const char *head = first_with(m, HEAD, 2, ".weight");
    if (!m->w.head.out.w && !c->tie_word_embeddings && head &&
        model_linear(m, &m->w.head.out, head, c->hidden_size, c->vocab_size, 0, e))
        return -1;
    if (load_vision_as(m, vis, 0, e)) return -1;
    VlmWeights *p = calloc(1, sizeof *p);
    if (!p) return av_err(e, "out of memory");
    m->vlm = p;
    p->kind = VLM_PROJ_MLP;
    char l1[200], l2[200];
    snprintf(l1, sizeof l1, "%slinear_1", proj);
    snprintf(l2, sizeof l2, "%slinear_2", proj);
    const int Hv = m->vision->cfg.hidden_size, Ht = c->hidden_size;
    return model_linear(m, &p->p1, l1, Hv, Ht, c->vlm_proj_bias, e) || model_linear(m, &p->p2, l2, Ht, Ht, c->vlm_proj_bias, e)
               ? -1
               : 0;
}

/* Gemma 3's projector from its mmproj: the soft RMSNorm (its weight stored with the 1 added, as the
 * converter writes it) and the input projection (vision hidden, text hidden), kept F16 by the converter. */
static int attach_gemma3(Model *m, Model *v, int (*token_id)(const void *, const char *),
                         const void *ctx, AvErr *e) {
    ModelConfig *c = &m->cfg;
    const ModelConfig *vc = &v->cfg;
    const int boi = token_id(ctx, "<start_of_image>"), img = token_id(ctx, "<image_soft_token>"),
              eoi = token_id(ctx, "<end_of_image>");
    if (boi < 0 || img < 0 || eoi < 0 || boi >= c->vocab_size || img >= c->vocab_size || eoi >= c->vocab_size)
        return av_err(e, "%s: its tokenizer lacks Gemma 3's picture tokens (<start_of_image>, <image_soft_token>, "
                         "<end_of_image>)", m->path);
    VlmWeights *p = calloc(1, sizeof *p);
    if (!p) return av_err(e, "out of memory");
    m->vlm = p;
    p->kind = VLM_PROJ_GEMMA3;
    const int Hv = vc->hidden_size, Ht = c->hidden_size;
    const char *wn = "multi_modal_projector.mm_input_projection_weight";
    const float *w = model_tensor(v, wn, 2, Hv, Ht, e);
    if (!w || !(p->norm.g = model_tensor(v, "multi_modal_projector.mm_soft_emb_norm.weight", 1, Hv, 0, e)))
        return -1;
    p->norm.rms = 1, p->norm.b = NULL, p->norm.eps = vc->layer_norm_eps;
    p->p1 = (Linear){.type = KERN_F32, .w = w, .b = NULL, .out = Ht, .in = Hv, .conv1d = 1, .ld = Ht, .name = wn};
    const int side = vc->image_size / vc->patch_size / vc->vis_pool_k;
    c->vlm_tokens = side * side;
    c->image_token_id = img, c->vlm_boi_id = boi, c->vlm_eoi_id = eoi;
    c->vlm_feature_layer = -1; /* the last layer's output, through post_layernorm */
    c->vlm_drop_cls = 0;
    c->vlm_bidir = 1;
    c->vlm_kind = VLM_KIND_GEMMA3;
    return 0;
}

int arch_llava_attach_mmproj(Model *m, const char *path, int (*token_id)(const void *, const char *), const void *ctx,
                             AvErr *e) {
    ModelConfig *c = &m->cfg;
    if (!m->gguf) return av_err_usage(e, "--mmproj goes with a llama.cpp text model (a .gguf file)");
    const int llama = c->arch == arch_detect("llama", NULL)->kind, gemma3 = c->arch == arch_detect("gemma3_text", NULL)->kind;
    if (!llama && !gemma3)
        return av_err(e, "%s: a %s model: attnviz reads an mmproj beside a llama (LLaVA) or gemma3 (Gemma 3) text model",
                      m->path, c->model_type);
    Model *v = calloc(1, sizeof *v);
    if (!v) return av_err(e, "out of memory");
    if (model_load_gguf(v, path, e)) {
        free(v);
        return -1;
    }
    m->vision = v;
    const ModelConfig *vc = &v->cfg;
    if (!vc->vision || (!vc->vis_llava_proj && !vc->vis_gemma3_proj))
        return av_err(e, "%s: not an mmproj with a LLaVA or Gemma 3 projector (clip.has_llava_projector, or "
                         "clip.projector_type \"gemma3\")", path);
    if (gemma3 != vc->vis_gemma3_proj)
        return av_err(e, "%s: %s projector does not go with %s, a %s model (another model's mmproj?)", path,
                      vc->vis_gemma3_proj ? "a Gemma 3" : "a LLaVA", m->path, c->model_type);
    const int Hv = vc->hidden_size, Ht = c->hidden_size;
    const GgufTensor *t2 = gguf_find_tensor(v->gguf, gemma3 ? "mm.input_projection.weight" : "mm.2.weight");
    const int out_dim = gemma3 ? 0 : 1; /* ggml's dims: mm.2 (out, in) as [in, out]; the projection (in, out) as [out, in] */
    if (t2 && t2->n_dims == 2 && (int64_t)t2->dims[out_dim] != Ht)
        return av_err(e, "%s: its projector makes %llu-wide image tokens; %s's hidden size is %d (another model's mmproj?)",
                      path, (unsigned long long)t2->dims[out_dim], m->path, Ht);
    /* the products run with the language model's state: its scratch must take the projector's input */
    if (Hv > m->max_in) m->max_in = Hv;
    c->vlm = 1;
    if (gemma3) return attach_gemma3(m, v, token_id, ctx, e);
    const int image_token_id = token_id(ctx, "<image>");
    if (image_token_id < 0 || image_token_id >= c->vocab_size)
        return av_err(e, "%s: its tokenizer has no <image> token to put the picture's tokens in place of", m->path);
    VlmWeights *p = calloc(1, sizeof *p);
    if (!p) return av_err(e, "out of memory");
    m->vlm = p;
    p->kind = VLM_PROJ_MLP;
    if (model_linear(v, &p->p1, "multi_modal_projector.linear_1", Hv, Ht, 1, e) ||
        model_linear(v, &p->p2, "multi_modal_projector.linear_2", Ht, Ht, 1, e))
        return -1;
    c->image_token_id = image_token_id;
    c->vlm_feature_layer = vc->vis_feature_layer;
    c->vlm_drop_cls = 1;
    const int grid = vc->image_size / vc->patch_size;
    c->vlm_tokens = grid * grid;
    c->vlm_proj_act = (int)ACT_GELU;
    c->vlm_proj_bias = 1;
    return 0;
}

/* ---------------------------------------------------------------- Gemma 3 */

/* Gemma3TextConfig's defaults for the keys a text_config may leave out. */
static const SubDefault GEMMA3_DEFAULTS[] = {{"vocab_size", 262208},       {"hidden_size", 2304},       {"intermediate_size", 9216},
                       {"num_hidden_layers", 26},     {"num_attention_heads", 8},  {"num_key_value_heads", 4},
                       {"head_dim", 256},             {"max_position_embeddings", 131072}, {"eos_token_id", 1}};

static int gemma3_vlm_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    static const SubConfigs GEMMA3 = {&arch_family_gemma3, "gemma3_text", "Gemma 3 text model", GEMMA3_DEFAULTS,
                                      sizeof GEMMA3_DEFAULTS / sizeof GEMMA3_DEFAULTS[0], "siglip_vision_model",
                                      "SigLIP vision tower", "Gemma 3"};
    char vsub[600];
    const cJSON *vc;
    if (sub_configs(c, root, path, &GEMMA3, &vc, vsub, sizeof vsub, e)) return -1;
    ModelConfig v;
    memset(&v, 0, sizeof v);
    if (arch_family_siglip_vision.parse(&v, vc, vsub, e)) return -1;
    if (v.vis_pool_head) return av_err(e, "%s: vision_use_head true: Gemma 3's tower has no pooling head", vsub);
    c->vlm = 1;
    c->vlm_tokens = 256, c->vlm_boi_id = 255999, c->vlm_eoi_id = 256000, c->image_token_id = 262144;
    if (cfg_opt_int(root, "mm_tokens_per_image", 1, CFG_MAX_VIS_TOKENS, &c->vlm_tokens, path, e) ||
        cfg_opt_int(root, "boi_token_index", 0, c->vocab_size - 1, &c->vlm_boi_id, path, e) ||
        cfg_opt_int(root, "eoi_token_index", 0, c->vocab_size - 1, &c->vlm_eoi_id, path, e) ||
        cfg_opt_int(root, "image_token_index", 0, c->vocab_size - 1, &c->image_token_id, path, e))
        return -1;
    const int grid = v.image_size / v.patch_size, side = (int)(sqrt((double)c->vlm_tokens) + 0.5);
    if (side * side != c->vlm_tokens || grid % side)
        return av_err(e, "%s: mm_tokens_per_image %d does not pool the %d x %d patches evenly", path, c->vlm_tokens, grid, grid);
    c->vlm_feature_layer = -1; /* the last layer's output, through post_layernorm */
    c->vlm_drop_cls = 0;
    c->vlm_bidir = 1;
    c->vlm_kind = VLM_KIND_GEMMA3;
    return 0;
}

static int gemma3_vlm_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const char *lm = first_with(m, LM_PREFIX, 2, "embed_tokens.weight");
    const char *vis = first_with(m, VISION_BASE, 4, "embeddings.patch_embedding.weight");
    const char *proj = first_with(m, PROJ_PREFIX, 2, "mm_input_projection_weight");
    if (!lm) return av_err(e, "%s: no language model (embed_tokens under %s or %s)", m->path, LM_PREFIX[0], LM_PREFIX[1]);
    if (!vis) return av_err(e, "%s: no vision tower (embeddings.patch_embedding under %s or %s)", m->path, VISION_BASE[1],
                            VISION_BASE[0]);
    if (!proj)
        return av_err(e, "%s: no projector (mm_input_projection_weight under %s or %s)", m->path, PROJ_PREFIX[0],
                      PROJ_PREFIX[1]);
    m->tensor_prefix = lm;
    if (arch_family_gemma3.load(m, e)) return -1; /* Gemma 3 text: its own row's load */
    if (load_vision_as(m, vis, 1, e)) return -1;
    VlmWeights *p = calloc(1, sizeof *p);
    if (!p) return av_err(e, "out of memory");
    m->vlm = p;
    p->kind = VLM_PROJ_GEMMA3;
    const int Hv = m->vision->cfg.hidden_size, Ht = c->hidden_size;
    char wn[200], nn[200];
    snprintf(wn, sizeof wn, "%smm_input_projection_weight", proj);
    snprintf(nn, sizeof nn, "%smm_soft_emb_norm", proj);
    /* the matrix multiplies on the right (x W, W (vision hidden, text hidden)): a Linear of W^T, stored transposed */
    const float *w = model_tensor(m, wn, 2, Hv, Ht, e);
    if (!w || model_norm(m, &p->norm, nn, Hv, e)) return -1;
    p->norm.eps = m->vision->cfg.layer_norm_eps;
    p->p1 = (Linear){.type = KERN_F32, .w = w, .b = NULL, .out = Ht, .in = Hv, .conv1d = 1, .ld = Ht, .name = wn};
    p->p1.name = "multi_modal_projector.mm_input_projection_weight";
    if (Hv > m->max_in) m->max_in = Hv;
    return 0;
}

/* ---------------------------------------------------------------- Idefics3 (SmolVLM) */

/* Idefics3ForConditionalGeneration (SmolVLM-256M/500M-Instruct): a SigLIP tower run on each tile of the picture
 * and on its global view, each tile's last hidden state (post_layernorm) pixel-shuffled (scale_factor x
 * scale_factor patches a token, their features side by side) and projected by one matrix; a Llama text model. */
static int idefics3_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    static const SubConfigs IDEFICS3 = {&arch_family_llama, "llama", "Llama language model", LLAMA_DEFAULTS,
                                        sizeof LLAMA_DEFAULTS / sizeof LLAMA_DEFAULTS[0], "idefics3_vision",
                                        "SigLIP-style vision tower", "Idefics3"};
    char vsub[600];
    const cJSON *vc;
    if (sub_configs(c, root, path, &IDEFICS3, &vc, vsub, sizeof vsub, e)) return -1;
    ModelConfig v;
    memset(&v, 0, sizeof v);
    if (siglip_tower_parse(&v, vc, 1, vsub, e)) return -1;
    c->vlm = 1;
    c->vlm_scale = 2, c->image_token_id = 128257;
    if (cfg_opt_int(root, "scale_factor", 1, 64, &c->vlm_scale, path, e) ||
        cfg_opt_int(root, "image_token_id", 0, c->vocab_size - 1, &c->image_token_id, path, e))
        return -1;
    const int grid = v.image_size / v.patch_size;
    if (grid < 1 || grid % c->vlm_scale)
        return av_err(e, "%s: scale_factor %d does not divide the tower's %d x %d patches", path, c->vlm_scale, grid, grid);
    c->vlm_tokens = (grid / c->vlm_scale) * (grid / c->vlm_scale);
    c->vlm_feature_layer = -1; /* the last layer's output, through post_layernorm */
    c->vlm_drop_cls = 0;
    c->vlm_kind = VLM_KIND_IDEFICS3;
    return 0;
}

static const char *const IDEFICS3_LM[] = {"model.text_model.", "text_model."};
static const char *const IDEFICS3_VISION[] = {"model.vision_model.", "vision_model."};
static const char *const IDEFICS3_PROJ[] = {"model.connector.modality_projection.proj", "connector.modality_projection.proj"};

static int idefics3_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const char *lm = first_with(m, IDEFICS3_LM, 2, "embed_tokens.weight");
    const char *vis = first_with(m, IDEFICS3_VISION, 2, "embeddings.patch_embedding.weight");
    const char *proj = first_with(m, IDEFICS3_PROJ, 2, ".weight");
    if (!lm) return av_err(e, "%s: no language model (embed_tokens under %s)", m->path, IDEFICS3_LM[0]);
    if (!vis) return av_err(e, "%s: no vision tower (embeddings.patch_embedding under %s)", m->path, IDEFICS3_VISION[0]);
    if (!proj) return av_err(e, "%s: no connector (%s.weight)", m->path, IDEFICS3_PROJ[0]);
    m->tensor_prefix = lm;
    if (arch_family_llama.load(m, e)) return -1;
    if (!m->w.head.out.w && !c->tie_word_embeddings && model_has_tensor(m, "lm_head.weight") &&
        model_linear(m, &m->w.head.out, "lm_head", c->hidden_size, c->vocab_size, 0, e))
        return -1;
    if (load_vision_as(m, vis, 2, e)) return -1;
    VlmWeights *p = calloc(1, sizeof *p);
    if (!p) return av_err(e, "out of memory");
    m->vlm = p;
    p->kind = VLM_PROJ_IDEFICS3;
    const ModelConfig *vc = &m->vision->cfg;
    if (vc->image_size % vc->patch_size || (vc->image_size / vc->patch_size) % c->vlm_scale)
        return av_err(e, "%s: the tower's %d-pixel image of %d-pixel patches does not shuffle by %d", m->path,
                      vc->image_size, vc->patch_size, c->vlm_scale);
    const int in = vc->hidden_size * c->vlm_scale * c->vlm_scale;
    if (model_linear(m, &p->p1, proj, in, c->hidden_size, 0, e)) return -1;
    if (in > m->max_in) m->max_in = in;
    return 0;
}

/* ---------------------------------------------------------------- the rows (families.h) */

const ArchSpec arch_family_llava = {
    .kind = ARCH_LLAVA, .model_type = "llava", .arch_prefix = "LlavaForConditionalGeneration", .tensor_prefix = "",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = llava_parse, .load = llava_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_gemma3_vlm = {
    .kind = ARCH_GEMMA3_VLM, .model_type = "gemma3", .arch_prefix = "Gemma3ForConditionalGeneration", .tensor_prefix = "",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = gemma3_vlm_parse, .load = gemma3_vlm_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_idefics3 = {
    .kind = ARCH_IDEFICS3, .model_type = "idefics3", .arch_prefix = "Idefics3ForConditionalGeneration", .tensor_prefix = "",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = idefics3_parse, .load = idefics3_load, .tokenizer = TOK_SOURCE_JSON,
};
