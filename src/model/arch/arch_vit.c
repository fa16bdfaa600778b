/* arch_vit.c — the vision encoders: ViT, DeiT (a distillation token), DINOv2
 * with and without registers (layer scales, positions interpolated to the
 * image's grid), and CLIP's and SigLIP's vision towers, alone or in the whole
 * model with its text tower (vision.h). Pre-LayerNorm encoders over patches;
 * what differs is the config's vision fields and the tensor names, never a
 * test of the family in the engine. */
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

/* The keys every vision family shares (ViTConfig's names; CLIP's and SigLIP's
 * vision_config use the same), with transformers' defaults where a key is absent. */
typedef struct {
    int hidden, layers, heads, inter, image, patch;
    const char *act;
    float eps;
} VisDefaults;

static int parse_vision_keys(ModelConfig *c, const cJSON *root, const VisDefaults *d, const char *path, AvErr *e) {
    c->hidden_size = d->hidden, c->num_layers = d->layers, c->num_heads = d->heads, c->intermediate_size = d->inter;
    c->image_size = d->image, c->patch_size = d->patch, c->num_channels = 3, c->layer_norm_eps = d->eps;
    if (cfg_opt_int(root, "hidden_size", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_opt_int(root, "num_hidden_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_opt_int(root, "num_attention_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_opt_int(root, "intermediate_size", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_opt_int(root, "image_size", 1, 8192, &c->image_size, path, e) ||
        cfg_opt_int(root, "patch_size", 1, CFG_MAX_PATCH, &c->patch_size, path, e) ||
        cfg_opt_int(root, "num_channels", 3, 3, &c->num_channels, path, e) ||
        cfg_opt_float(root, "layer_norm_eps", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_parse_act(c, root, "hidden_act", d->act, path, e))
        return -1;
    if (c->image_size % c->patch_size)
        return av_err(e, "%s: image_size %d is not a multiple of patch_size %d", path, c->image_size, c->patch_size);
    c->vision = 1;
    c->norm = NORM_LAYER;
    c->pos = POS_TABLE;
    c->pre_ln = 1;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->vocab_size = 1; /* no token ids: the tokens are patches */
    c->max_position_embeddings = CFG_MAX_VIS_TOKENS;
    c->vis_cls = 1;
    return 0;
}

static const VisDefaults VIT = {768, 12, 12, 3072, 224, 16, "gelu", 1e-12f};

static int arch_vit_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_vision_keys(c, root, &VIT, path, e)) return -1;
    int qkv_bias = 1;
    if (cfg_opt_bool(root, "qkv_bias", &qkv_bias, path, e)) return -1;
    if (!qkv_bias) return av_err(e, "%s: qkv_bias false is not supported (every published ViT has the biases)", path);
    return 0;
}

static int arch_deit_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (arch_vit_parse(c, root, path, e)) return -1;
    c->vis_dist = 1;
    return 0;
}

/* DINOv2: the MLP's width is mlp_ratio x hidden; layer scales; positions for
 * image_size (518) interpolated to whatever grid the processor's crop makes. */
static int arch_dinov2_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    static const VisDefaults D = {768, 12, 12, 0, 224, 16, "gelu", 1e-6f};
    if (parse_vision_keys(c, root, &D, path, e)) return -1;
    float ratio = 4;
    int swiglu = 0;
    if (cfg_opt_float(root, "mlp_ratio", 0.01, 64, &ratio, path, e) || cfg_opt_bool(root, "use_swiglu_ffn", &swiglu, path, e))
        return -1;
    if (swiglu) return av_err(e, "%s: use_swiglu_ffn (DINOv2 giant) is not supported", path);
    c->intermediate_size = (int)((double)c->hidden_size * ratio);
    c->layer_scale = 1;
    c->vis_pos_interp = VIS_POS_BICUBIC;
    if (cfg_opt_int(root, "num_register_tokens", 0, CFG_MAX_REGISTERS, &c->vis_registers, path, e)) return -1;
    return 0;
}

/* The registers' variant interpolates with antialias (transformers' Dinov2WithRegistersEmbeddings). */
static int arch_dinov2_reg_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    c->vis_registers = 4;
    if (arch_dinov2_parse(c, root, path, e)) return -1;
    c->vis_pos_interp = VIS_POS_BICUBIC_AA;
    return 0;
}

/* CLIP's and SigLIP's vision keys: the whole model's vision_config, or the tower's own config. */
static const VisDefaults CLIP_V = {768, 12, 12, 3072, 224, 32, "quick_gelu", 1e-5f};
static const VisDefaults SIGLIP_V = {768, 12, 12, 3072, 224, 16, "gelu_pytorch_tanh", 1e-6f};

static const cJSON *sub_config(const cJSON *root, const char *key, const char *path, char *sub, size_t len, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsObject(v)) {
        av_err(e, "%s: \"%s\" must be an object", path, key);
        return NULL;
    }
    snprintf(sub, len, "%s: %s", path, key);
    return v;
}

static int arch_clip_vision_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_vision_keys(c, root, &CLIP_V, path, e)) return -1;
    c->vis_projection = 512;
    return cfg_opt_int(root, "projection_dim", 1, CFG_MAX_HIDDEN, &c->vis_projection, path, e);
}

static int arch_clip_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    char sub[600];
    const cJSON *v = sub_config(root, "vision_config", path, sub, sizeof sub, e);
    if (!v || parse_vision_keys(c, v, &CLIP_V, sub, e)) return -1;
    c->vis_projection = 512;
    if (cfg_opt_int(root, "projection_dim", 1, CFG_MAX_HIDDEN, &c->vis_projection, path, e)) return -1;
    c->text_tower = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "text_config"));
    return 0;
}

static int arch_siglip_vision_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_vision_keys(c, root, &SIGLIP_V, path, e)) return -1;
    c->vis_cls = 0;
    c->vis_pool_head = 1;
    return cfg_opt_bool(root, "vision_use_head", &c->vis_pool_head, path, e);
}

static int arch_siglip_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    char sub[600];
    const cJSON *v = sub_config(root, "vision_config", path, sub, sizeof sub, e);
    if (!v || arch_siglip_vision_parse(c, v, sub, e)) return -1;
    c->text_tower = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "text_config"));
    return 0;
}

/* ---------------------------------------------------------------- loading */

/* The module names of one block, per naming scheme, under "LAYERS.N." (encoder.layer for ViT,
 * DeiT and DINOv2; vision_model.encoder.layers and text_model.encoder.layers for CLIP and SigLIP). */
typedef struct {
    const char *q, *k, *v, *o, *norm1, *norm2, *fc1, *fc2, *ls1, *ls2;
} BlockNames;

static const BlockNames VIT_NAMES = {"attention.attention.query", "attention.attention.key", "attention.attention.value",
                                     "attention.output.dense", "layernorm_before", "layernorm_after",
                                     "intermediate.dense", "output.dense", NULL, NULL};
static const BlockNames DINO_NAMES = {"attention.attention.query", "attention.attention.key", "attention.attention.value",
                                      "attention.output.dense", "norm1", "norm2", "mlp.fc1", "mlp.fc2",
                                      "layer_scale1.lambda1", "layer_scale2.lambda1"};

static int load_blocks(Model *m, const char *layers, const BlockNames *nm, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int64_t H = c->hidden_size, FF = c->intermediate_size;
    char p[9][300];
    /* the legacy LLaVA converter's mmproj files hold fc1 as ffn_down and fc2 as ffn_up */
    const char *fc1 = c->vis_ffn_swapped ? nm->fc2 : nm->fc1, *fc2 = c->vis_ffn_swapped ? nm->fc1 : nm->fc2;
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &m->w.layers[l];
        const char *parts[9] = {nm->q, nm->k, nm->v, nm->o, nm->norm1, nm->norm2, fc1, fc2, nm->ls1};
        for (int k = 0; k < 9; k++)
            if (parts[k]) snprintf(p[k], sizeof p[k], "%s.%d.%s", layers, l, parts[k]);
        if (model_linear(m, &L->q, p[0], H, H, 1, e) || model_linear(m, &L->k, p[1], H, H, 1, e) ||
            model_linear(m, &L->v, p[2], H, H, 1, e) || model_linear(m, &L->o, p[3], H, H, 1, e) ||
            model_norm(m, &L->attn_norm, p[4], H, e) || model_norm(m, &L->mlp_norm, p[5], H, e) ||
            model_linear(m, &L->up, p[6], H, FF, 1, e) || model_linear(m, &L->down, p[7], FF, H, 1, e))
            return -1;
        if (c->layer_scale) {
            char ls2[300];
            snprintf(ls2, sizeof ls2, "%s.%d.%s", layers, l, nm->ls2);
            if (!(L->ls_attn = model_tensor(m, p[8], 1, H, 0, e)) || !(L->ls_mlp = model_tensor(m, ls2, 1, H, 0, e)))
                return -1;
        }
    }
    return 0;
}

/* The position table: rows = pos_prefix + a square grid; that grid must be
 * image_size / patch_size's unless positions are interpolated anyway. */
static int load_positions(Model *m, VisionWeights *v, const char *name, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size, grid = c->image_size / c->patch_size;
    v->pos_prefix = c->vis_cls + c->vis_dist;
    v->pos_grid = grid;
    /* DINOv2 configs name the size the table was trained at (518): the table is that grid */
    if (!(v->pos = model_tensor_flat(m, name, (int64_t)(v->pos_prefix + grid * grid) * H, e))) return -1;
    return 0;
}

static VisionWeights *new_vis(Model *m, AvErr *e) {
    if (!(m->w.vis = calloc(1, sizeof *m->w.vis))) av_err(e, "out of memory");
    return m->w.vis;
}

/* ViT and DeiT (ViTModel, ViTForImageClassification's "vit." names; DeiT's "deit."). */
static int arch_vit_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    VisionWeights *v = new_vis(m, e);
    if (!v || model_linear_conv(m, &v->patch, "embeddings.patch_embeddings.projection", c->num_channels, c->patch_size,
                                H, 1, e) ||
        !(v->cls = model_tensor_flat(m, "embeddings.cls_token", H, e)) ||
        (c->vis_dist && !(v->dist = model_tensor_flat(m, "embeddings.distillation_token", H, e))) ||
        load_positions(m, v, "embeddings.position_embeddings", e) ||
        load_blocks(m, "encoder.layer", &VIT_NAMES, e) || model_norm(m, &m->w.final_norm, "layernorm", H, e))
        return -1;
    return 0;
}

static int arch_dinov2_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    VisionWeights *v = new_vis(m, e);
    if (!v || model_linear_conv(m, &v->patch, "embeddings.patch_embeddings.projection", c->num_channels, c->patch_size,
                                H, 1, e) ||
        !(v->cls = model_tensor_flat(m, "embeddings.cls_token", H, e)) ||
        (c->vis_registers &&
         !(v->registers = model_tensor_flat(m, "embeddings.register_tokens", (int64_t)c->vis_registers * H, e))) ||
        load_positions(m, v, "embeddings.position_embeddings", e) ||
        load_blocks(m, "encoder.layer", &DINO_NAMES, e) || model_norm(m, &m->w.final_norm, "layernorm", H, e))
        return -1;
    return 0;
}

static const BlockNames CLIP_NAMES = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                      "self_attn.out_proj", "layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2", NULL,
                                      NULL};

/* Tensor names under a tower's base: "vision_model." in a whole model; "" for a tower saved alone,
 * whose family row adds "vision_model." as the prefix older files have (find_variant tries both). */
static const char *vname(char *buf, size_t len, const char *base, const char *name) {
    snprintf(buf, len, "%s%s", base, name);
    return buf;
}

/* CLIP's vision tower: class_embedding, a bias-free patch convolution,
 * pre_layrnorm on the embeddings, post_layernorm on the class token only, and
 * visual_projection when the checkpoint has it. */
static int load_clip_vision(Model *m, const char *base, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    char b[6][160];
    VisionWeights *v = new_vis(m, e);
    if (!v ||
        model_linear_conv(m, &v->patch, vname(b[0], 160, base, "embeddings.patch_embedding"), c->num_channels,
                          c->patch_size, H, 0, e) ||
        !(v->cls = model_tensor_flat(m, vname(b[1], 160, base, "embeddings.class_embedding"), H, e)) ||
        load_positions(m, v, vname(b[2], 160, base, "embeddings.position_embedding.weight"), e) ||
        model_norm(m, &m->w.emb_norm, vname(b[3], 160, base, "pre_layrnorm"), H, e) ||
        load_blocks(m, vname(b[4], 160, base, "encoder.layers"), &CLIP_NAMES, e))
        return -1;
    /* post_layernorm: the class token's, for CLIP's pooled output (an mmproj for LLaVA leaves it out) */
    vname(b[5], 160, base, "post_layernorm");
    char pw[200];
    snprintf(pw, sizeof pw, "%s.weight", b[5]);
    if ((!m->gguf || model_has_tensor(m, pw)) && model_norm(m, &v->post_pooled, b[5], H, e)) return -1;
    if (model_has_tensor(m, "visual_projection.weight") &&
        model_linear(m, &v->proj, "visual_projection", H, c->vis_projection, 0, e))
        return -1;
    return 0;
}

/* SigLIP's vision tower: no class token, post_layernorm on every token, the
 * attention-pooling head (its in_proj_weight split into q, k and v). */
static int load_siglip_vision(Model *m, const char *base, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int H = c->hidden_size;
    char b[12][160];
    VisionWeights *v = new_vis(m, e);
    if (!v ||
        model_linear_conv(m, &v->patch, vname(b[0], 160, base, "embeddings.patch_embedding"), c->num_channels,
                          c->patch_size, H, 1, e) ||
        load_positions(m, v, vname(b[1], 160, base, "embeddings.position_embedding.weight"), e) ||
        load_blocks(m, vname(b[2], 160, base, "encoder.layers"), &CLIP_NAMES, e) ||
        model_norm(m, &m->w.final_norm, vname(b[3], 160, base, "post_layernorm"), H, e))
        return -1;
    if (!c->vis_pool_head) return 0;
    const float *bias;
    const char *in_w = vname(b[4], 160, base, "head.attention.in_proj_weight");
    if (!(v->probe = model_tensor_flat(m, vname(b[5], 160, base, "head.probe"), H, e)) ||
        model_linear_rows(m, &v->pq, in_w, H, 3 * H, 0, H, e) || model_linear_rows(m, &v->pk, in_w, H, 3 * H, H, H, e) ||
        model_linear_rows(m, &v->pv, in_w, H, 3 * H, 2 * H, H, e) ||
        !(bias = model_tensor(m, vname(b[6], 160, base, "head.attention.in_proj_bias"), 1, 3 * H, 0, e)) ||
        model_linear(m, &v->po, vname(b[7], 160, base, "head.attention.out_proj"), H, H, 1, e) ||
        model_norm(m, &v->pnorm, vname(b[8], 160, base, "head.layernorm"), H, e) ||
        model_linear(m, &v->pfc1, vname(b[9], 160, base, "head.mlp.fc1"), H, c->intermediate_size, 1, e) ||
        model_linear(m, &v->pfc2, vname(b[10], 160, base, "head.mlp.fc2"), c->intermediate_size, H, 1, e))
        return -1;
    v->pq.b = bias, v->pk.b = bias + H, v->pv.b = bias + 2 * H;
    return 0;
}

/* ---------------------------------------------------------------- the text tower */

/* The text_config of a whole CLIP (causal, quick_gelu, eos pooling) or SigLIP
 * (bidirectional, last-token pooling) model, as a Model of its own on ids. */
static int parse_text(ModelConfig *t, const cJSON *root, int siglip, const char *path, AvErr *e) {
    char sub[600];
    const cJSON *tc = sub_config(root, "text_config", path, sub, sizeof sub, e);
    if (!tc) return -1;
    t->hidden_size = 512, t->num_layers = 12, t->num_heads = 8, t->intermediate_size = 2048;
    t->max_position_embeddings = siglip ? 64 : 77, t->vocab_size = siglip ? 32000 : 49408;
    t->layer_norm_eps = siglip ? 1e-6f : 1e-5f;
    if (siglip) t->hidden_size = 768, t->num_heads = 12, t->intermediate_size = 3072;
    if (cfg_opt_int(tc, "vocab_size", 1, CFG_MAX_VOCAB, &t->vocab_size, sub, e) ||
        cfg_opt_int(tc, "hidden_size", 1, CFG_MAX_HIDDEN, &t->hidden_size, sub, e) ||
        cfg_opt_int(tc, "num_hidden_layers", 1, CFG_MAX_LAYERS, &t->num_layers, sub, e) ||
        cfg_opt_int(tc, "num_attention_heads", 1, CFG_MAX_HEADS, &t->num_heads, sub, e) ||
        cfg_opt_int(tc, "intermediate_size", 1, CFG_MAX_INTER, &t->intermediate_size, sub, e) ||
        cfg_opt_int(tc, "max_position_embeddings", 1, CFG_MAX_POS, &t->max_position_embeddings, sub, e) ||
        cfg_opt_float(tc, "layer_norm_eps", 0, 1, &t->layer_norm_eps, sub, e) ||
        cfg_parse_act(t, tc, "hidden_act", siglip ? "gelu_pytorch_tanh" : "quick_gelu", sub, e))
        return -1;
    t->norm = NORM_LAYER, t->pos = POS_TABLE, t->pre_ln = 1, t->causal = !siglip;
    t->qkv_bias = t->o_bias = t->mlp_bias = 1;
    t->n_eos = 0;
    return cfg_validate(t, "hidden_size", "num_attention_heads", sub, e);
}

static int load_text_tower(Model *m, int siglip, AvErr *e) {
    char *dir = NULL, *cfgp = NULL, *buf = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    int rc = -1;
    Model *t = calloc(1, sizeof *t);
    TextHead *th = calloc(1, sizeof *th);
    if (!t || !th) {
        free(t), free(th);
        return av_err(e, "out of memory");
    }
    m->text = t, m->w.text_head = th;
    /* the text tower's sizes are in config.json beside the weights */
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
    t->cfg.arch = m->cfg.arch;
    snprintf(t->cfg.model_type, sizeof t->cfg.model_type, "%s", m->cfg.model_type);
    if (parse_text(&t->cfg, root, siglip, cfgp, e)) goto done;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    th->eos_id = 2; /* CLIP pools at its first eos token (SigLIP at the last token: its eos is not read) */
    if (!siglip && cfg_opt_int(tc, "eos_token_id", 0, t->cfg.vocab_size - 1, &th->eos_id, cfgp, e)) goto done;
    th->pool_last = siglip;
    th->sigmoid = siglip;
    t->files = m->files, t->n_files = m->n_files, t->files_borrowed = 1, t->path = m->path;
    if (!(t->w.layers = calloc((size_t)t->cfg.num_layers, sizeof *t->w.layers))) {
        av_err(e, "out of memory");
        goto done;
    }
    const int H = t->cfg.hidden_size;
    if (model_linear(t, &t->w.tok_emb, "text_model.embeddings.token_embedding", H, t->cfg.vocab_size, 0, e) ||
        !(t->w.pos_emb = model_tensor(t, "text_model.embeddings.position_embedding.weight", 2,
                                      t->cfg.max_position_embeddings, H, e)) ||
        load_blocks(t, "text_model.encoder.layers", &CLIP_NAMES, e) ||
        model_norm(t, &t->w.final_norm, "text_model.final_layer_norm", H, e))
        goto done;
    if (siglip) {
        if (model_linear(t, &th->proj, "text_model.head", H, H, 1, e) || model_scalar(t, "logit_scale", &th->logit_scale, e) ||
            model_scalar(t, "logit_bias", &th->logit_bias, e))
            goto done;
    } else if (model_linear(t, &th->proj, "text_projection", H, m->cfg.vis_projection, 0, e) ||
               model_scalar(t, "logit_scale", &th->logit_scale, e)) {
        goto done;
    }
    if (!m->w.vis->proj.w && !siglip) {
        av_err(e, "%s: a whole CLIP model without visual_projection", m->path);
        goto done;
    }
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", m->dtype_name);
    rc = 0;
done:
    cJSON_Delete(root);
    free(buf), free(cfgp), free(dir);
    return rc;
}

static int arch_clip_load(Model *m, AvErr *e) {
    if (load_clip_vision(m, "vision_model.", e)) return -1;
    return m->cfg.text_tower ? load_text_tower(m, 0, e) : 0;
}

/* A tower saved alone; from an mmproj GGUF without a class token (Gemma 3's), SigLIP's. */
static int arch_clip_vision_load(Model *m, AvErr *e) {
    return m->gguf && m->cfg.vis_gemma3_proj ? load_siglip_vision(m, "", e) : load_clip_vision(m, "", e);
}

int arch_clip_vision_load_at(Model *m, const char *base, AvErr *e) { return load_clip_vision(m, base, e); }

/* ---------------------------------------------------------------- llama.cpp's mmproj ("clip") */

/* A vision tower as llama.cpp's mmproj GGUF describes it (clip.vision.*): CLIP's, with quick_gelu unless
 * clip.use_gelu, the normalization its metadata holds, a LLaVA projector's feature layer. */
static int arch_clip_gguf_config(ModelConfig *c, const GgufFile *f, const char *path, AvErr *e) {
    int has_vision = 0, gelu = 0;
    uint32_t hidden, ff, heads, layers, image, patch, proj = 0;
    float eps;
    if (gguf_get_bool(f, "clip.has_vision_encoder", &has_vision, e)) return av_err_prefix(e, "%s", path);
    if (!has_vision) return av_err(e, "%s: an mmproj without a vision encoder (clip.has_vision_encoder false)", path);
    if (gguf_get_u32(f, "clip.vision.embedding_length", &hidden, e) ||
        gguf_get_u32(f, "clip.vision.feed_forward_length", &ff, e) ||
        gguf_get_u32(f, "clip.vision.attention.head_count", &heads, e) ||
        gguf_get_u32(f, "clip.vision.block_count", &layers, e) || gguf_get_u32(f, "clip.vision.image_size", &image, e) ||
        gguf_get_u32(f, "clip.vision.patch_size", &patch, e) ||
        gguf_get_f32(f, "clip.vision.attention.layer_norm_epsilon", &eps, e) ||
        (gguf_find_kv(f, "clip.vision.projection_dim") && gguf_get_u32(f, "clip.vision.projection_dim", &proj, e)) ||
        (gguf_find_kv(f, "clip.use_gelu") && gguf_get_bool(f, "clip.use_gelu", &gelu, e)))
        return av_err_prefix(e, "%s", path);
    if (!hidden || hidden > CFG_MAX_HIDDEN || !ff || ff > CFG_MAX_INTER || !heads || heads > CFG_MAX_HEADS ||
        !layers || layers > CFG_MAX_LAYERS || !patch || patch > CFG_MAX_PATCH || !image || image > 8192 ||
        image % patch || !(eps > 0 && eps < 1))
        return av_err(e, "%s: its clip.vision sizes are out of range (hidden %u, ff %u, heads %u, layers %u, image %u, "
                         "patch %u)", path, hidden, ff, heads, layers, image, patch);
    c->hidden_size = (int)hidden, c->intermediate_size = (int)ff, c->num_heads = (int)heads, c->num_layers = (int)layers;
    c->image_size = (int)image, c->patch_size = (int)patch, c->num_channels = 3, c->layer_norm_eps = eps;
    c->vision = 1, c->norm = NORM_LAYER, c->pos = POS_TABLE, c->pre_ln = 1;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->vocab_size = 1, c->max_position_embeddings = CFG_MAX_VIS_TOKENS, c->vis_cls = 1;
    c->vis_projection = (int)proj;
    if (cfg_validate(c, "clip.vision.embedding_length", "clip.vision.attention.head_count", path, e)) return -1;
    c->hidden_act = gelu ? ACT_GELU : ACT_QUICK_GELU;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "%s", gelu ? "gelu" : "quick_gelu");
    /* the normalization llama.cpp applies, as a CLIP processor's */
    static const char *const keys[2] = {"clip.vision.image_mean", "clip.vision.image_std"};
    for (int k = 0; k < 2; k++) {
        GgufVType t;
        uint64_t n;
        const GgufKV *kv = gguf_find_kv(f, keys[k]);
        if (!kv) continue;
        if (gguf_get_arr(f, keys[k], &t, &n, e)) return av_err_prefix(e, "%s", path);
        if (n != 3) return av_err(e, "%s: %s holds %llu values, not 3", path, keys[k], (unsigned long long)n);
        for (int i = 0; i < 3; i++) {
            double v;
            if (gguf_kv_num(kv, (uint64_t)i, &v, e)) return av_err_prefix(e, "%s", path);
            if (!(v > -10 && v < 10) || (k && !(v > 0))) return av_err(e, "%s: %s[%d] = %g is out of range", path, keys[k], i, v);
            (k ? c->vis_std : c->vis_mean)[i] = (float)v;
        }
        c->vis_norm_given |= 1 << k;
    }
    /* the projector: LLaVA's two-layer MLP after the feature layer's hidden state, or Gemma 3's pooling */
    int llava = 0;
    const char *pt = NULL;
    size_t pl = 0;
    if ((gguf_find_kv(f, "clip.has_llava_projector") && gguf_get_bool(f, "clip.has_llava_projector", &llava, e)) ||
        (gguf_find_kv(f, "clip.projector_type") && gguf_get_str(f, "clip.projector_type", &pt, &pl, e)))
        return av_err_prefix(e, "%s", path);
    const int is_mlp = !pt || (pl == 3 && !memcmp(pt, "mlp", 3)), is_gemma3 = pt && pl == 6 && !memcmp(pt, "gemma3", 6);
    if ((llava && !is_mlp) || (pt && !is_mlp && !is_gemma3)) {
        const int idefics3 = pt && pl == 8 && !memcmp(pt, "idefics3", 8);
        return av_err(e, "%s: clip.projector_type \"%.*s\": attnviz reads LLaVA's two-layer \"mlp\" projector and "
                         "Gemma 3's \"gemma3\"%s", path, (int)(pl < 40 ? pl : 40), pt,
                      idefics3 ? " (SmolVLM / Idefics3: give its Hugging Face folder to --model)" : "");
    }
    if (is_gemma3) {
        /* SigLIP's tower: patches only, GELU's tanh form (gelu_pytorch_tanh), post_layernorm on every token */
        uint32_t k = 4;
        if (gguf_find_kv(f, "clip.vision.projector.scale_factor") &&
            gguf_get_u32(f, "clip.vision.projector.scale_factor", &k, e))
            return av_err_prefix(e, "%s", path);
        const uint32_t grid = image / patch;
        if (!k || grid % k)
            return av_err(e, "%s: clip.vision.projector.scale_factor %u does not pool the %u x %u patches evenly", path, k,
                          grid, grid);
        c->vis_gemma3_proj = 1, c->vis_pool_k = (int)k, c->vis_cls = 0;
        c->hidden_act = ACT_GELU_TANH;
        snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "gelu_pytorch_tanh");
    }
    if (llava) {
        c->vis_llava_proj = 1;
        c->vis_feature_layer = (int)layers; /* the converter keeps the layers up to the feature layer */
        const GgufKV *fl = gguf_find_kv(f, "clip.vision.feature_layer");
        double v;
        if (fl && gguf_kv_num(fl, 0, &v, e)) return av_err_prefix(e, "%s", path);
        if (fl && (v != (double)(int)layers))
            return av_err(e, "%s: clip.vision.feature_layer %g is not the last of its %u layers", path, v, layers);
    }
    /* fc1 (hidden -> ff) under ffn_down, as the legacy converter names it */
    const GgufTensor *up = gguf_find_tensor(f, "v.blk.0.ffn_up.weight");
    c->vis_ffn_swapped = up && up->n_dims == 2 && up->dims[1] == hidden && up->dims[0] == ff;
    return 0;
}

/* transformers' CLIPVisionModel names (without "vision_model.") -> llama.cpp's mmproj names; the
 * projector's (LLaVA's multi_modal_projector.linear_1/2 -> mm.0/mm.2). */
static int arch_clip_gguf_name(const char *hf, char *out, size_t len) {
    static const char *const whole[][2] = {
        {"embeddings.patch_embedding.weight", "v.patch_embd.weight"}, {"embeddings.class_embedding", "v.class_embd"},
        {"embeddings.position_embedding.weight", "v.position_embd.weight"}, {"pre_layrnorm.weight", "v.pre_ln.weight"},
        {"pre_layrnorm.bias", "v.pre_ln.bias"}, {"post_layernorm.weight", "v.post_ln.weight"},
        {"post_layernorm.bias", "v.post_ln.bias"}, {"multi_modal_projector.linear_1.weight", "mm.0.weight"},
        {"multi_modal_projector.linear_1.bias", "mm.0.bias"}, {"multi_modal_projector.linear_2.weight", "mm.2.weight"},
        {"multi_modal_projector.linear_2.bias", "mm.2.bias"}, {"embeddings.patch_embedding.bias", "v.patch_embd.bias"},
        {"multi_modal_projector.mm_input_projection_weight", "mm.input_projection.weight"},
        {"multi_modal_projector.mm_soft_emb_norm.weight", "mm.soft_emb_norm.weight"}};
    static const char *const block[][2] = {
        {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
        {"self_attn.out_proj", "attn_out"}, {"layer_norm1", "ln1"}, {"layer_norm2", "ln2"}, {"mlp.fc1", "ffn_up"},
        {"mlp.fc2", "ffn_down"}};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(hf, whole[i][0])) return snprintf(out, len, "%s", whole[i][1]) < (int)len ? 0 : -1;
    int layer, used = 0;
    if (sscanf(hf, "encoder.layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
    const char *rest = hf + used, *dot = strrchr(rest, '.');
    if (!dot) return -1;
    for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
        size_t bl = strlen(block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, block[i][0], bl))
            return snprintf(out, len, "v.blk.%d.%s%s", layer, block[i][1], dot) < (int)len ? 0 : -1;
    }
    return -1;
}

static int arch_siglip_load(Model *m, AvErr *e) {
    if (load_siglip_vision(m, "vision_model.", e)) return -1;
    return m->cfg.text_tower ? load_text_tower(m, 1, e) : 0;
}

static int arch_siglip_vision_load(Model *m, AvErr *e) { return load_siglip_vision(m, "", e); }

int arch_siglip_vision_load_at(Model *m, const char *base, AvErr *e) { return load_siglip_vision(m, base, e); }

/* ---------------------------------------------------------------- the rows (families.h) */

const ArchSpec arch_family_vit = {
    .kind = ARCH_VIT, .model_type = "vit", .arch_prefix = "ViT", .tensor_prefix = "vit.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_vit_parse, .load = arch_vit_load, .tokenizer = TOK_SOURCE_NONE,
};

const ArchSpec arch_family_deit = {
    .kind = ARCH_DEIT, .model_type = "deit", .arch_prefix = "DeiT", .tensor_prefix = "deit.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_deit_parse, .load = arch_vit_load, .tokenizer = TOK_SOURCE_NONE,
};

const ArchSpec arch_family_dinov2_reg = {
    .kind = ARCH_DINOV2_REG, .model_type = "dinov2_with_registers", .arch_prefix = "Dinov2WithRegisters", .tensor_prefix = "dinov2_with_registers.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_dinov2_reg_parse, .load = arch_dinov2_load, .tokenizer = TOK_SOURCE_NONE,
};

const ArchSpec arch_family_dinov2 = {
    .kind = ARCH_DINOV2, .model_type = "dinov2", .arch_prefix = "Dinov2", .tensor_prefix = "dinov2.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_dinov2_parse, .load = arch_dinov2_load, .tokenizer = TOK_SOURCE_NONE,
};

const ArchSpec arch_family_clip_vision = {
    .kind = ARCH_CLIP_VISION, .model_type = "clip_vision_model", .arch_prefix = "CLIPVision", .tensor_prefix = "vision_model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_clip_vision_parse, .load = arch_clip_vision_load, .tokenizer = TOK_SOURCE_NONE,
    .gguf_arch = "clip", .gguf_config = arch_clip_gguf_config, .gguf_name = arch_clip_gguf_name,
};

const ArchSpec arch_family_clip = {
    .kind = ARCH_CLIP, .model_type = "clip", .arch_prefix = "CLIP", .tensor_prefix = "",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_clip_parse, .load = arch_clip_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_siglip_vision = {
    .kind = ARCH_SIGLIP_VISION, .model_type = "siglip_vision_model", .arch_prefix = "SiglipVision", .tensor_prefix = "vision_model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_siglip_vision_parse, .load = arch_siglip_vision_load, .tokenizer = TOK_SOURCE_NONE,
};

const ArchSpec arch_family_siglip = {
    .kind = ARCH_SIGLIP, .model_type = "siglip", .arch_prefix = "Siglip", .tensor_prefix = "",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_siglip_parse, .load = arch_siglip_load, .tokenizer = TOK_SOURCE_JSON,
};
