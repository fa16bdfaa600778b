/* arch_bart.c — BART (BartModel, BartForConditionalGeneration) and Marian
 * (MarianMTModel, OPUS-MT): post-LayerNorm encoder-decoders (seq2seq.h).
 *   - token embeddings shared by encoder, decoder and the lm head (tied),
 *     multiplied by sqrt(d_model) when scale_embedding; final_logits_bias
 *     added to the logits
 *   - BART: learned positions, position p at row p + 2 (its offset), and a
 *     LayerNorm on the embeddings (layernorm_embedding)
 *   - Marian: sinusoidal positions (sin in the first half of each vector, cos
 *     in the second), computed here as transformers' create_weight does, no
 *     norm on the embeddings
 *   - every linear has a bias; activation_function for the MLP
 * mBART's pre-norm layers (normalize_before, add_final_layer_norm) and
 * Marian's separate decoder vocabulary are refused. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

/* BartConfig's and MarianConfig's keys (the same names). */
static int parse_keys(ModelConfig *c, const cJSON *root, const char *path, int pad_default, int start_default,
                      AvErr *e) {
    int dec_heads = 0, scale = 0, flag = 0;
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "d_model", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "encoder_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "decoder_layers", 1, CFG_MAX_LAYERS, &c->dec_layers, path, e) ||
        cfg_get_int(root, "encoder_attention_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "decoder_attention_heads", 1, CFG_MAX_HEADS, &dec_heads, path, e) ||
        cfg_get_int(root, "encoder_ffn_dim", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "decoder_ffn_dim", 1, CFG_MAX_INTER, &c->dec_intermediate, path, e) ||
        cfg_get_int(root, "max_position_embeddings", 1, CFG_MAX_POS - 2, &c->max_position_embeddings, path, e) ||
        cfg_parse_act(c, root, "activation_function", "gelu", path, e) ||
        cfg_opt_bool(root, "scale_embedding", &scale, path, e))
        return -1;
    if (dec_heads != c->num_heads)
        return av_err(e, "%s: decoder_attention_heads %d differs from encoder_attention_heads %d (not supported)", path,
                      dec_heads, c->num_heads);
    if (cfg_opt_bool(root, "normalize_before", &flag, path, e)) return -1;
    if (flag) return av_err(e, "%s: normalize_before true (mBART's pre-norm layers) is not supported", path);
    if (cfg_opt_bool(root, "add_final_layer_norm", &flag, path, e)) return -1;
    if (flag) return av_err(e, "%s: add_final_layer_norm true (mBART's final norms) is not supported", path);
    c->pad_token_id = pad_default;
    if (cfg_opt_int(root, "pad_token_id", 0, c->vocab_size - 1, &c->pad_token_id, path, e)) return -1;
    c->dec_start_id = start_default >= 0 && start_default < c->vocab_size ? start_default : c->pad_token_id;
    if (cfg_opt_int(root, "decoder_start_token_id", 0, c->vocab_size - 1, &c->dec_start_id, path, e)) return -1;
    if (c->dec_start_id >= c->vocab_size)
        return av_err(e, "%s: decoder_start_token_id (or pad_token_id) %d is outside vocab_size %d", path, c->dec_start_id,
                      c->vocab_size);
    c->enc_dec = 1;
    c->causal = 0;
    c->pre_ln = 0;
    c->norm = NORM_LAYER;
    c->layer_norm_eps = 1e-5f; /* nn.LayerNorm's default, fixed in both families' modules */
    c->pos = POS_TABLE;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->emb_scale = scale ? sqrtf((float)c->hidden_size) : 0.0f;
    c->tie_word_embeddings = 1;
    return cfg_opt_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, e);
}

static int arch_bart_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_keys(c, root, path, 1, 2, e)) return -1; /* BartConfig's defaults: pad 1, decoder start 2 (</s>) */
    c->s2s_pos = S2S_POS_TABLE;
    c->pos_offset = 2; /* BartLearnedPositionalEmbedding's offset */
    return 0;
}

static int arch_marian_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    /* MarianConfig's pad_token_id default: the last id of its 58,101-token vocabulary */
    if (parse_keys(c, root, path, 58100, -1, e)) return -1;
    int shared = 1;
    if (cfg_opt_bool(root, "share_encoder_decoder_embeddings", &shared, path, e)) return -1;
    if (!shared) return av_err(e, "%s: share_encoder_decoder_embeddings false (a separate decoder vocabulary) is not supported", path);
    c->s2s_pos = S2S_POS_SINUSOID;
    return 0;
}

/* Marian's positions: position_enc[p][j] = p / 10000^(2 (j / 2) / dim), sin of
 * the even j in the first half, cos of the odd j in the second (double, then
 * float, as numpy then torch.FloatTensor compute it). */
static float *sinusoids(int rows, int dim) {
    float *t = malloc((size_t)rows * dim * sizeof *t);
    if (!t) return NULL;
    const int half = dim % 2 == 0 ? dim / 2 : dim / 2 + 1;
    for (int p = 0; p < rows; p++)
        for (int j = 0; j < dim; j++) {
            /* column j of the output: sin of even column 2j (first half), cos of odd column 2(j - half) + 1 */
            const int src = j < half ? 2 * j : 2 * (j - half) + 1;
            const double angle = (double)p / pow(10000.0, 2.0 * (src / 2) / dim);
            t[(size_t)p * dim + j] = (float)(j < half ? sin(angle) : cos(angle));
        }
    return t;
}

/* One layer's linears and norms; decoder layers have cross attention too. */
static int load_layer(Model *m, S2sLayer *L, const char *stack, int l, int ff, int decoder, AvErr *e) {
    const int64_t H = m->cfg.hidden_size, A = (int64_t)m->cfg.num_heads * m->cfg.head_dim;
    char p[12][96];
    static const char *const parts[12] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                          "self_attn.out_proj", "self_attn_layer_norm", "encoder_attn.q_proj",
                                          "encoder_attn.k_proj", "encoder_attn.v_proj", "encoder_attn.out_proj",
                                          "encoder_attn_layer_norm", "fc1", "fc2"};
    for (int k = 0; k < 12; k++) snprintf(p[k], sizeof p[k], "%s.layers.%d.%s", stack, l, parts[k]);
    char fin[96];
    snprintf(fin, sizeof fin, "%s.layers.%d.final_layer_norm", stack, l);
    if (model_linear(m, &L->q, p[0], H, A, 1, e) || model_linear(m, &L->k, p[1], H, A, 1, e) ||
        model_linear(m, &L->v, p[2], H, A, 1, e) || model_linear(m, &L->o, p[3], A, H, 1, e) ||
        model_norm(m, &L->attn_norm, p[4], H, e) || model_linear(m, &L->up, p[10], H, ff, 1, e) ||
        model_linear(m, &L->down, p[11], ff, H, 1, e) || model_norm(m, &L->mlp_norm, fin, H, e))
        return -1;
    if (!decoder) return 0;
    return model_linear(m, &L->cq, p[5], H, A, 1, e) || model_linear(m, &L->ck, p[6], H, A, 1, e) ||
                   model_linear(m, &L->cv, p[7], H, A, 1, e) || model_linear(m, &L->co, p[8], A, H, 1, e) ||
                   model_norm(m, &L->cross_norm, p[9], H, e)
               ? -1
               : 0;
}

/* A stack's embeddings: its own embed_tokens if the checkpoint has them, else the shared ones. */
static int load_embeddings(Model *m, S2sStack *s, const char *stack, const Linear *shared, AvErr *e) {
    char nm[96];
    snprintf(nm, sizeof nm, "%s.embed_tokens.weight", stack);
    if (!shared->w || model_has_tensor(m, nm)) {
        snprintf(nm, sizeof nm, "%s.embed_tokens", stack);
        return model_linear(m, &s->tok_emb, nm, m->cfg.hidden_size, m->cfg.vocab_size, 0, e);
    }
    s->tok_emb = *shared;
    return 0;
}

static int arch_bart_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    if (s2s_weights_alloc(m, e)) return -1;
    S2sWeights *w = m->s2s;
    Linear shared = {0};
    if (model_has_tensor(m, "shared.weight") && model_linear(m, &shared, "shared", H, V, 0, e)) return -1;
    if (load_embeddings(m, &w->enc, "encoder", &shared, e) || load_embeddings(m, &w->dec, "decoder", &shared, e))
        return -1;
    if (!shared.w) shared = w->enc.tok_emb;
    S2sStack *st[2] = {&w->enc, &w->dec};
    static const char *const names[2] = {"encoder", "decoder"};
    char nm[96];
    for (int k = 0; k < 2; k++) {
        const int rows = c->max_position_embeddings + c->pos_offset;
        st[k]->pos_rows = rows;
        if (c->s2s_pos == S2S_POS_TABLE) {
            snprintf(nm, sizeof nm, "%s.embed_positions.weight", names[k]);
            if (!(st[k]->pos_emb = model_tensor(m, nm, 2, rows, H, e))) return -1;
            snprintf(nm, sizeof nm, "%s.layernorm_embedding", names[k]);
            if (model_norm(m, &st[k]->emb_norm, nm, H, e)) return -1;
        } else {
            if (!w->sinusoid && !(w->sinusoid = sinusoids(rows, (int)H))) return av_err(e, "out of memory");
            st[k]->pos_emb = w->sinusoid;
        }
        for (int l = 0; l < st[k]->n_layers; l++)
            if (load_layer(m, &st[k]->layers[l], names[k], l, k ? c->dec_intermediate : c->intermediate_size, k, e))
                return -1;
    }
    /* the lm head: its own weight, else the shared embeddings (tied); a missing one only matters to --generate */
    if (model_has_tensor(m, "lm_head.weight")) {
        if (model_linear(m, &w->lm_head, "lm_head", H, V, 0, e)) return -1;
    } else if (c->tie_word_embeddings) {
        w->lm_head = shared;
        w->lm_head.name = "the shared embeddings (tied lm_head)";
    }
    if (model_has_tensor(m, "final_logits_bias") && !(w->logits_bias = model_tensor(m, "final_logits_bias", 2, 1, V, e)))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- the rows (families.h) */

const ArchSpec arch_family_bart = {
    .kind = ARCH_BART, .model_type = "bart", .arch_prefix = "Bart", .tensor_prefix = "model.",
    .hidden_key = "d_model", .heads_key = "encoder_attention_heads",
    .parse = arch_bart_parse, .load = arch_bart_load, .tokenizer = TOK_SOURCE_BPE_ROBERTA,
};

const ArchSpec arch_family_marian = {
    .kind = ARCH_MARIAN, .model_type = "marian", .arch_prefix = "Marian", .tensor_prefix = "model.",
    .hidden_key = "d_model", .heads_key = "encoder_attention_heads",
    .parse = arch_marian_parse, .load = arch_bart_load, .tokenizer = TOK_SOURCE_JSON,
};
