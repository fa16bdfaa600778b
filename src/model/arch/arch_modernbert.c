/* arch_modernbert.c — ModernBERT (ModernBertModel, ModernBertForMaskedLM): a
 * pre-LayerNorm encoder with rotary positions and no position table.
 *   - local and global layers alternate (global_attn_every_n_layers, or
 *     transformers 5's layer_types): a local layer's query sees the keys
 *     within local_attention / 2 on either side (transformers'
 *     sliding_window_bidirectional_overlay: |i - j| <= local_attention // 2),
 *     and turns by its own rotary base (local_rope_theta; global layers
 *     global_rope_theta)
 *   - q, k and v fused in attn.Wqkv, the GeGLU's two halves in mlp.Wi (the
 *     first half activated, the second multiplying it): split at load
 *   - LayerNorms without bias (norm_bias), no linear biases unless
 *     attention_bias / mlp_bias; a norm after the embeddings, none before
 *     layer 0's attention (an Identity in transformers), a final norm
 *   - the masked-LM head: head.dense, the activation, head.norm, then the
 *     word embeddings (tied) with decoder.bias */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

/* rope_parameters[layer_type]: only the default kind, its base into *theta. */
static int parse_rope_type(const cJSON *params, const char *type, float *theta, const char *path, AvErr *e) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(params, type);
    if (!r || cJSON_IsNull(r)) return 0;
    if (!cJSON_IsObject(r)) return av_err(e, "%s: rope_parameters.%s must be an object", path, type);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
    if (t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default")))
        return av_err(e, "%s: rope_parameters.%s: only the default rope type is supported for modernbert", path, type);
    return cfg_opt_float(r, "rope_theta", 1, 1e12, theta, path, e);
}

static int arch_modernbert_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "hidden_size", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "num_hidden_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "num_attention_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "intermediate_size", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "max_position_embeddings", 1, CFG_MAX_POS, &c->max_position_embeddings, path, e))
        return -1;
    int local = 128, every = 3, norm_bias = 0, attn_bias = 0, mlp_bias = 0;
    c->layer_norm_eps = 1e-5f;
    c->rope_theta = 160000.0f;      /* ModernBertConfig's defaults */
    c->rope_local_theta = 10000.0f;
    if (cfg_opt_float(root, "norm_eps", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_opt_bool(root, "norm_bias", &norm_bias, path, e) || cfg_opt_bool(root, "attention_bias", &attn_bias, path, e) ||
        cfg_opt_bool(root, "mlp_bias", &mlp_bias, path, e) ||
        cfg_opt_int(root, "local_attention", 2, 1 << 24, &local, path, e) ||
        cfg_opt_int(root, "global_attn_every_n_layers", 1, CFG_MAX_LAYERS, &every, path, e) ||
        cfg_opt_float(root, "global_rope_theta", 1, 1e12, &c->rope_theta, path, e) ||
        cfg_opt_float(root, "local_rope_theta", 1, 1e12, &c->rope_local_theta, path, e))
        return -1;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (params && !cJSON_IsNull(params)) {
        if (!cJSON_IsObject(params)) return av_err(e, "%s: \"rope_parameters\" must be an object", path);
        if (parse_rope_type(params, "full_attention", &c->rope_theta, path, e) ||
            parse_rope_type(params, "sliding_attention", &c->rope_local_theta, path, e))
            return -1;
    }
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (scaling && !cJSON_IsNull(scaling))
        return av_err(e, "%s: rope_scaling is not supported for modernbert", path);
    /* the head's activation is the block's in every published checkpoint; the
     * engine's head takes one activation, so another one is refused */
    ModelConfig head = *c;
    if (cfg_parse_act(c, root, "hidden_activation", "gelu", path, e) ||
        cfg_parse_act(&head, root, "classifier_activation", "gelu", path, e))
        return -1;
    if (head.hidden_act != c->hidden_act)
        return av_err(e, "%s: classifier_activation \"%s\" differs from hidden_activation \"%s\" (not supported)", path,
                      head.hidden_act_name, c->hidden_act_name);
    /* which layers are local: transformers 5's layer_types, else every n-th layer is global */
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types && !cJSON_IsNull(types) &&
        (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->num_layers))
        return av_err(e, "%s: \"layer_types\" must list one type per layer (%d)", path, c->num_layers);
    const cJSON *t = types && !cJSON_IsNull(types) ? types->child : NULL; /* walked, not indexed: one pass */
    for (int l = 0; l < c->num_layers; l++, t = t ? t->next : NULL) {
        int sliding = l % every != 0;
        if (types && !cJSON_IsNull(types)) {
            if (!cJSON_IsString(t) ||
                (strcmp(t->valuestring, "full_attention") && strcmp(t->valuestring, "sliding_attention")))
                return av_err(e, "%s: layer_types[%d] must be \"full_attention\" or \"sliding_attention\"", path, l);
            sliding = !strcmp(t->valuestring, "sliding_attention");
        }
        c->layer_sliding[l] = c->layer_rope_local[l] = (unsigned char)sliding;
    }
    /* |i - j| <= local_attention // 2: keys within window - 1 of the query, either side */
    c->sliding_window = local / 2 + 1;
    c->window_bidir = 1;
    c->causal = 0;
    c->pre_ln = 1;
    c->norm = NORM_LAYER;
    c->pos = POS_ROPE;
    c->rope_kind = ROPE_DEFAULT;
    c->rope_factor = 1.0f;
    c->gated_mlp = 1;
    c->qkv_bias = c->o_bias = attn_bias;
    c->mlp_bias = mlp_bias;
    c->tie_word_embeddings = 1;
    if (cfg_opt_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, e)) return -1;
    c->norm_no_bias = !norm_bias;
    return 0;
}

/* Rows [part * rows, (part + 1) * rows) of a fused linear (prefix.weight, total
 * rows), with the same rows of prefix.bias when the config has biases. */
static int fused_part(Model *m, Linear *lin, const char *prefix, int64_t in, int64_t rows, int parts, int part,
                      int bias, AvErr *e) {
    if (model_linear_part(m, lin, prefix, in, parts * rows, part * rows, rows, e)) return -1;
    if (!bias) return 0;
    char nm[300];
    snprintf(nm, sizeof nm, "%.250s.bias", prefix);
    const float *b = model_tensor(m, nm, 1, parts * rows, 0, e);
    if (!b) return -1;
    lin->b = b + part * rows;
    return 0;
}

/* ModernBertForMaskedLM's head: dense (bias with classifier_bias), the
 * activation, a norm, then the word embeddings with decoder.bias (or an
 * untied decoder.weight). Absent in a bare ModernBertModel. */
static int load_mlm_head(Model *m) {
    const ModelConfig *c = &m->cfg;
    if (!model_has_tensor(m, "head.dense.weight")) return 0;
    LmHead *h = &m->w.head;
    /* attention does not need the head: a broken one is left out, and said
     * why only when predictions are asked for */
    AvErr he = {0};
    const float *bias = NULL;
    int rc = model_linear(m, &h->dense, "head.dense", c->hidden_size, c->hidden_size, -1, &he) ||
             model_norm(m, &h->norm, "head.norm", c->hidden_size, &he);
    if (!rc && model_has_tensor(m, "decoder.bias") && !(bias = model_tensor(m, "decoder.bias", 1, c->vocab_size, 0, &he)))
        rc = -1;
    if (!rc && !c->tie_word_embeddings) rc = model_linear(m, &h->out, "decoder", c->hidden_size, c->vocab_size, 0, &he);
    if (rc) {
        memset(h, 0, sizeof *h);
        snprintf(m->head_err, sizeof m->head_err, "its masked-LM head is incomplete: %.400s", he.msg);
        return 0;
    }
    h->act = c->hidden_act; /* classifier_activation: the parse checked it is the same */
    if (c->tie_word_embeddings) {
        h->out = m->w.tok_emb;
        h->out.name = "the word embeddings (tied decoder)";
    }
    h->out.b = bias;
    return 0;
}

static int arch_modernbert_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    Weights *w = &m->w;
    const int64_t H = c->hidden_size, FF = c->intermediate_size;
    if (model_linear(m, &w->tok_emb, "embeddings.tok_embeddings", H, c->vocab_size, 0, e) ||
        model_norm(m, &w->emb_norm, "embeddings.norm", H, e) || model_norm(m, &w->final_norm, "final_norm", H, e))
        return -1;
    char p[6][64];
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &w->layers[l];
        static const char *const parts[6] = {"attn_norm", "attn.Wqkv", "attn.Wo", "mlp_norm", "mlp.Wi", "mlp.Wo"};
        for (int k = 0; k < 6; k++) snprintf(p[k], sizeof p[k], "layers.%d.%s", l, parts[k]);
        /* layer 0's attention reads the normalized embeddings as they are */
        if ((l > 0 && model_norm(m, &L->attn_norm, p[0], H, e)) ||
            fused_part(m, &L->q, p[1], H, H, 3, 0, c->qkv_bias, e) || fused_part(m, &L->k, p[1], H, H, 3, 1, c->qkv_bias, e) ||
            fused_part(m, &L->v, p[1], H, H, 3, 2, c->qkv_bias, e) || model_linear(m, &L->o, p[2], H, H, c->o_bias, e) ||
            model_norm(m, &L->mlp_norm, p[3], H, e) ||
            fused_part(m, &L->gate, p[4], H, FF, 2, 0, c->mlp_bias, e) ||
            fused_part(m, &L->up, p[4], H, FF, 2, 1, c->mlp_bias, e) ||
            model_linear(m, &L->down, p[5], FF, H, c->mlp_bias, e))
            return -1;
    }
    return load_mlm_head(m);
}

const ArchSpec arch_family_modernbert = {
    .kind = ARCH_MODERNBERT, .model_type = "modernbert", .arch_prefix = "ModernBert", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_modernbert_parse, .load = arch_modernbert_load, .tokenizer = TOK_SOURCE_JSON,
};
