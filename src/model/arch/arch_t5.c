/* arch_t5.c — T5, Flan-T5 and mT5 (T5Model, T5ForConditionalGeneration, MT5...): pre-norm
 * encoder-decoders (seq2seq.h).
 *   - RMSNorm without mean or bias (T5LayerNorm), before each sublayer, and a
 *     final one per stack
 *   - no position table: a learned bias per relative-position bucket and head
 *     added to the scores, held by each stack's first layer
 *     (relative_attention_bias) and shared by its later layers; cross
 *     attention has none
 *   - q . k is not scaled; no linear has a bias
 *   - feed_forward_proj: "relu" (T5 v1.0: wo(relu(wi x))) or "gated-gelu"
 *     (v1.1, Flan-T5: wo(gelu_new(wi_0 x) * wi_1 x)), or another
 *     [gated-]activation
 *   - the lm head: lm_head.weight, else the shared embeddings; the decoder's
 *     output scaled by d_model^-0.5 first unless the config says the two are
 *     not tied (transformers' scale_decoder_outputs) */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

static int arch_t5_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "d_model", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "d_kv", 1, CFG_MAX_HIDDEN, &c->head_dim, path, e) ||
        cfg_get_int(root, "d_ff", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "num_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "num_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e))
        return -1;
    c->dec_layers = c->num_layers;
    c->rel_buckets = 32, c->rel_max_distance = 128;
    c->layer_norm_eps = 1e-6f;
    c->pad_token_id = 0;
    if (cfg_opt_int(root, "num_decoder_layers", 1, CFG_MAX_LAYERS, &c->dec_layers, path, e) ||
        cfg_opt_int(root, "relative_attention_num_buckets", 2, 4096, &c->rel_buckets, path, e) ||
        cfg_opt_int(root, "relative_attention_max_distance", 1, 1 << 20, &c->rel_max_distance, path, e) ||
        cfg_opt_float(root, "layer_norm_epsilon", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_opt_int(root, "pad_token_id", 0, c->vocab_size - 1, &c->pad_token_id, path, e))
        return -1;
    /* the bucket function divides by log(max_distance / max_exact), max_exact being a quarter of the
     * buckets (a half in the decoder): fewer buckets or a shorter distance leave it no logarithmic range */
    if (c->rel_buckets < 4 || c->rel_max_distance <= c->rel_buckets / 2)
        return av_err(e, "%s: relative_attention_num_buckets %d and relative_attention_max_distance %d leave no "
                      "logarithmic buckets (need at least 4 buckets and a distance above half of them)", path,
                      c->rel_buckets, c->rel_max_distance);
    c->dec_start_id = c->pad_token_id; /* T5 starts the decoder at its pad token */
    if (cfg_opt_int(root, "decoder_start_token_id", 0, c->vocab_size - 1, &c->dec_start_id, path, e)) return -1;
    /* feed_forward_proj: "ACT" or "gated-ACT"; "gated-gelu" means gelu_new (transformers' backwards compatibility) */
    const cJSON *ff = cJSON_GetObjectItemCaseSensitive(root, "feed_forward_proj");
    const char *proj = "relu";
    if (ff && !cJSON_IsNull(ff)) {
        if (!cJSON_IsString(ff)) return av_err(e, "%s: \"feed_forward_proj\" must be a string", path);
        proj = ff->valuestring;
    }
    c->gated_mlp = !strncmp(proj, "gated-", 6);
    const char *act = c->gated_mlp ? proj + 6 : proj;
    if (!strcmp(proj, "gated-gelu")) act = "gelu_new";
    cJSON *a = cJSON_CreateObject();
    if (!a || !cJSON_AddStringToObject(a, "act", act)) {
        cJSON_Delete(a);
        return av_err(e, "out of memory");
    }
    int rc = cfg_parse_act(c, a, "act", "relu", path, e);
    cJSON_Delete(a);
    if (rc) return av_err_prefix(e, "feed_forward_proj \"%.40s\"", proj);
    /* the output is scaled unless the config says the head is not tied (transformers' scale_decoder_outputs) */
    int tied = 1, scale = -1;
    if (cfg_opt_bool(root, "tie_word_embeddings", &tied, path, e) ||
        cfg_opt_bool(root, "scale_decoder_outputs", &scale, path, e))
        return -1;
    c->tie_word_embeddings = tied;
    c->logits_scale = (scale >= 0 ? scale : tied) ? 1.0f / sqrtf((float)c->hidden_size) : 0.0f;
    c->enc_dec = 1;
    c->dec_intermediate = c->intermediate_size;
    c->causal = 0;
    c->pre_ln = 1;
    c->norm = NORM_RMS;
    c->pos = POS_TABLE;
    c->s2s_pos = S2S_POS_RELATIVE;
    c->attn_scale = 1.0f; /* scores are q . k as they are */
    c->max_position_embeddings = CFG_MAX_POS; /* relative positions: no table bounds the input */
    return 0;
}

/* mT5: T5 v1.1's blocks; its decoder output goes to the head unscaled whatever the config says of tying
 * (transformers' MT5ForConditionalGeneration has no scale_decoder_outputs). */
static int arch_mt5_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (arch_t5_parse(c, root, path, e)) return -1;
    c->logits_scale = 0.0f;
    return 0;
}

static int load_layer(Model *m, S2sLayer *L, const char *stack, int l, int decoder, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int64_t H = c->hidden_size, A = (int64_t)c->num_heads * c->head_dim, FF = c->intermediate_size;
    char p[96];
    const int ffi = decoder ? 2 : 1; /* the MLP's sublayer: layer.1 (encoder), layer.2 (decoder) */
#define NAME(fmt, ...) (snprintf(p, sizeof p, "%s.block.%d.layer." fmt, stack, l, __VA_ARGS__), p)
    if (model_linear(m, &L->q, NAME("%d.SelfAttention.q", 0), H, A, 0, e) ||
        model_linear(m, &L->k, NAME("%d.SelfAttention.k", 0), H, A, 0, e) ||
        model_linear(m, &L->v, NAME("%d.SelfAttention.v", 0), H, A, 0, e) ||
        model_linear(m, &L->o, NAME("%d.SelfAttention.o", 0), A, H, 0, e) ||
        model_norm(m, &L->attn_norm, NAME("%d.layer_norm", 0), H, e) ||
        model_norm(m, &L->mlp_norm, NAME("%d.layer_norm", ffi), H, e) ||
        model_linear(m, &L->down, NAME("%d.DenseReluDense.wo", ffi), FF, H, 0, e))
        return -1;
    if (c->gated_mlp ? model_linear(m, &L->gate, NAME("%d.DenseReluDense.wi_0", ffi), H, FF, 0, e) ||
                           model_linear(m, &L->up, NAME("%d.DenseReluDense.wi_1", ffi), H, FF, 0, e)
                     : model_linear(m, &L->up, NAME("%d.DenseReluDense.wi", ffi), H, FF, 0, e))
        return -1;
    if (!decoder) return 0;
    if (model_linear(m, &L->cq, NAME("%d.EncDecAttention.q", 1), H, A, 0, e) ||
        model_linear(m, &L->ck, NAME("%d.EncDecAttention.k", 1), H, A, 0, e) ||
        model_linear(m, &L->cv, NAME("%d.EncDecAttention.v", 1), H, A, 0, e) ||
        model_linear(m, &L->co, NAME("%d.EncDecAttention.o", 1), A, H, 0, e) ||
        model_norm(m, &L->cross_norm, NAME("%d.layer_norm", 1), H, e))
        return -1;
#undef NAME
    return 0;
}

static int arch_t5_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    if (s2s_weights_alloc(m, e)) return -1;
    S2sWeights *w = m->s2s;
    Linear shared;
    if (model_linear(m, &shared, model_has_tensor(m, "shared.weight") ? "shared" : "encoder.embed_tokens", H, V, 0, e))
        return -1;
    S2sStack *st[2] = {&w->enc, &w->dec};
    static const char *const names[2] = {"encoder", "decoder"};
    char nm[128];
    for (int k = 0; k < 2; k++) {
        st[k]->tok_emb = shared;
        snprintf(nm, sizeof nm, "%s.block.0.layer.0.SelfAttention.relative_attention_bias.weight", names[k]);
        if (!(st[k]->rel_bias = model_tensor(m, nm, 2, c->rel_buckets, c->num_heads, e))) return -1;
        snprintf(nm, sizeof nm, "%s.final_layer_norm", names[k]);
        if (model_norm(m, &st[k]->final_norm, nm, H, e)) return -1;
        for (int l = 0; l < st[k]->n_layers; l++)
            if (load_layer(m, &st[k]->layers[l], names[k], l, k, e)) return -1;
    }
    if (model_has_tensor(m, "lm_head.weight")) {
        if (model_linear(m, &w->lm_head, "lm_head", H, V, 0, e)) return -1;
    } else {
        w->lm_head = shared;
        w->lm_head.name = "the shared embeddings (tied lm_head)";
    }
    return 0;
}

/* ---------------------------------------------------------------- the rows (families.h) */

const ArchSpec arch_family_t5 = {
    .kind = ARCH_T5, .model_type = "t5", .arch_prefix = "T5", .tensor_prefix = "",
    .hidden_key = "d_model", .heads_key = "num_heads",
    .parse = arch_t5_parse, .load = arch_t5_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_mt5 = {
    .kind = ARCH_MT5, .model_type = "mt5", .arch_prefix = "MT5", .tensor_prefix = "",
    .hidden_key = "d_model", .heads_key = "num_heads",
    .parse = arch_mt5_parse, .load = arch_t5_load, .tokenizer = TOK_SOURCE_JSON,
};
