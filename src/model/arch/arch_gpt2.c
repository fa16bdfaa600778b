/* arch_gpt2.c — GPT-2: a pre-LayerNorm causal decoder with learned
 * positions and Conv1D weights (stored (in, out), q, k and v side by side). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

static int arch_gpt2_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "n_embd", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "n_layer", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "n_head", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "n_positions", 1, CFG_MAX_POS, &c->max_position_embeddings, path, e))
        return -1;
    if (c->hidden_size > CFG_MAX_INTER / 4) return av_err(e, "%s: \"n_embd\" = %d is too large", path, c->hidden_size);
    c->intermediate_size = 4 * c->hidden_size; /* n_inner: null means 4 * n_embd */
    c->layer_norm_eps = 1e-5f;
    int scale = 1;
    if (cfg_opt_int(root, "n_inner", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_opt_float(root, "layer_norm_epsilon", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_parse_act(c, root, "activation_function", "gelu_new", path, e) ||
        cfg_opt_bool(root, "scale_attn_weights", &scale, path, e) ||
        cfg_opt_bool(root, "scale_attn_by_inverse_layer_idx", &c->inverse_layer_scale, path, e))
        return -1;
    if (!scale) return av_err(e, "%s: \"scale_attn_weights\": false is not supported", path);
    c->causal = 1;
    c->pre_ln = 1;
    c->norm = NORM_LAYER;
    c->pos = POS_TABLE;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    return 0;
}


static int arch_gpt2_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    Weights *w = &m->w;
    int64_t H = c->hidden_size, FF = c->intermediate_size;
    if (model_linear(m, &w->tok_emb, "wte", H, c->vocab_size, 0, e) ||
        !(w->pos_emb = model_tensor(m, "wpe.weight", 2, c->max_position_embeddings, H, e)) ||
        model_norm(m, &w->final_norm, "ln_f", H, e))
        return -1;
    char p[300];
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &w->layers[l];
        Linear qkv[3];
#define GPT2_NAME(suffix) (snprintf(p, sizeof p, "h.%d.%s", l, suffix), p)
        if (model_norm(m, &L->attn_norm, GPT2_NAME("ln_1"), H, e) ||
            model_conv1d(m, qkv, 3, GPT2_NAME("attn.c_attn"), H, H, e) ||
            model_conv1d(m, &L->o, 1, GPT2_NAME("attn.c_proj"), H, H, e) ||
            model_norm(m, &L->mlp_norm, GPT2_NAME("ln_2"), H, e) ||
            model_conv1d(m, &L->up, 1, GPT2_NAME("mlp.c_fc"), H, FF, e) ||
            model_conv1d(m, &L->down, 1, GPT2_NAME("mlp.c_proj"), FF, H, e))
            return -1;
#undef GPT2_NAME
        L->q = qkv[0], L->k = qkv[1], L->v = qkv[2];
    }
    w->head.out = w->tok_emb; /* GPT2LMHeadModel's lm_head is wte itself */
    return 0;
}

const ArchSpec arch_family_gpt2 = {
    .kind = ARCH_GPT2, .model_type = "gpt2", .arch_prefix = "GPT2", .tensor_prefix = "transformer.",
    .hidden_key = "n_embd", .heads_key = "n_head",
    .parse = arch_gpt2_parse, .load = arch_gpt2_load, .tokenizer = TOK_SOURCE_BPE_GPT2,
};
