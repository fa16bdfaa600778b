/* arch_bert.c — the BERT family: BERT, RoBERTa and XLM-RoBERTa, ELECTRA
 * (BertConfig's keys) and DistilBERT (its own). Post-LayerNorm encoders with
 * learned positions. Their differences are traits of the parse functions
 * (RoBERTa-style positions after the padding index; ELECTRA's embedding_size)
 * and of the checkpoint (which masked-LM head names it holds), never tests of
 * the family. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

/* BertConfig's key names, shared by BERT, RoBERTa, XLM-RoBERTa and ELECTRA. */
static int parse_bert_keys(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "hidden_size", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "num_hidden_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "num_attention_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "intermediate_size", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "max_position_embeddings", 1, CFG_MAX_POS, &c->max_position_embeddings, path, e))
        return -1;
    c->type_vocab_size = 2;
    c->layer_norm_eps = 1e-12f;
    if (cfg_opt_int(root, "type_vocab_size", 1, CFG_MAX_TYPES, &c->type_vocab_size, path, e) ||
        cfg_opt_float(root, "layer_norm_eps", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_parse_act(c, root, "hidden_act", "gelu", path, e))
        return -1;
    c->norm = NORM_LAYER;
    c->pos = POS_TABLE;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
    if (pet && (!cJSON_IsString(pet) || strcmp(pet->valuestring, "absolute") != 0))
        return av_err(e, "%s: position_embedding_type must be \"absolute\"", path);
    return 0;
}

static int arch_bert_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    return parse_bert_keys(c, root, path, e);
}

/* RoBERTa and XLM-RoBERTa number positions from padding_idx + 1 (HF
 * create_position_ids_from_input_ids). */
static int arch_roberta_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_bert_keys(c, root, path, e)) return -1;
    int pad = 1;
    if (cfg_opt_int(root, "pad_token_id", 0, CFG_MAX_POS - 2, &pad, path, e)) return -1;
    c->pos_offset = pad + 1;
    c->pad_token_id = pad;
    if (c->pos_offset >= c->max_position_embeddings)
        return av_err(e, "%s: pad_token_id %d leaves no positions of max_position_embeddings %d", path, pad,
                      c->max_position_embeddings);
    return 0;
}

/* ELECTRA: embeddings of embedding_size, projected to hidden_size when the two differ. */
static int arch_electra_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (parse_bert_keys(c, root, path, e)) return -1;
    int E = 128; /* ElectraConfig's default */
    if (cfg_opt_int(root, "embedding_size", 1, CFG_MAX_HIDDEN, &E, path, e)) return -1;
    c->embedding_size = E == c->hidden_size ? 0 : E;
    return 0;
}

static int arch_distilbert_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "dim", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "n_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "n_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "hidden_dim", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "max_position_embeddings", 1, CFG_MAX_POS, &c->max_position_embeddings, path, e) ||
        cfg_parse_act(c, root, "activation", "gelu", path, e))
        return -1;
    c->layer_norm_eps = 1e-12f; /* fixed in DistilBERT's modules */
    c->norm = NORM_LAYER;
    c->pos = POS_TABLE;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    return 0;
}

/* The masked-LM heads: dense, activation, LayerNorm, then the word
 * embeddings (tied) with the head's own bias. Which one a checkpoint has is
 * read from its tensor names (absent in base checkpoints). RoBERTa's and
 * ELECTRA's heads call gelu whatever hidden_act says; ELECTRA's generator
 * head maps hidden_size to embedding_size. */
static int load_mlm_head(Model *m, AvErr *e) {
    (void)e;
    static const struct {
        const char *dense, *norm, *bias, *bias2;
        int gelu; /* the head's activation is gelu, not hidden_act */
    } heads[] = {
        {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias",
         "cls.predictions.decoder.bias", 0},                                            /* BertForMaskedLM */
        {"lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder.bias", 1}, /* RoBERTa, XLM-R */
        {"vocab_transform", "vocab_layer_norm", "vocab_projector.bias", "vocab_projector.bias", 0}, /* DistilBERT */
        {"generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head.bias",
         "generator_lm_head.bias", 1},                                                  /* ElectraForMaskedLM */
    };
    const ModelConfig *c = &m->cfg;
    const int D = c->embedding_size ? c->embedding_size : c->hidden_size;
    char w[160];
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) {
        snprintf(w, sizeof w, "%s.weight", heads[k].dense);
        if (!model_has_tensor(m, w)) continue;
        LmHead *h = &m->w.head;
        const char *bias = model_has_tensor(m, heads[k].bias) ? heads[k].bias : heads[k].bias2;
        /* attention does not need the head: a broken one is left out, and said
         * why only when predictions are asked for */
        AvErr he = {0};
        if (model_linear(m, &h->dense, heads[k].dense, c->hidden_size, D, 1, &he) ||
            model_norm(m, &h->norm, heads[k].norm, D, &he) ||
            !(h->out.b = model_tensor(m, bias, 1, c->vocab_size, 0, &he))) {
            memset(h, 0, sizeof *h);
            snprintf(m->head_err, sizeof m->head_err, "its masked-LM head is incomplete: %.400s", he.msg);
            return 0;
        }
        h->act = heads[k].gelu ? ACT_GELU : c->hidden_act;
        const float *b = h->out.b;
        h->out = m->w.tok_emb;
        h->out.b = b;
        h->out.name = "the word embeddings (tied decoder)";
        return 0;
    }
    return 0;
}

/* Tensor names follow each family's Hugging Face module names. */
static int arch_bert_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    Weights *w = &m->w;
    int64_t H = c->hidden_size, FF = c->intermediate_size, E = c->embedding_size ? c->embedding_size : H;
    const int distil = c->type_vocab_size == 0; /* DistilBERT's names (its parse leaves no token types) */
    if (model_linear(m, &w->tok_emb, "embeddings.word_embeddings", E, c->vocab_size, 0, e) ||
        !(w->pos_emb = model_tensor(m, "embeddings.position_embeddings.weight", 2, c->max_position_embeddings, E, e)))
        return -1;
    if (!distil && !(w->type_emb = model_tensor(m, "embeddings.token_type_embeddings.weight", 2, c->type_vocab_size, E, e)))
        return -1;
    if (model_norm(m, &w->emb_norm, "embeddings.LayerNorm", E, e)) return -1;
    if (c->embedding_size && model_linear(m, &w->emb_proj, "embeddings_project", E, H, 1, e)) return -1;
    /* the block's modules: q, k, v, attention output, its LayerNorm, the two MLP
     * linears, the output LayerNorm; BERT/RoBERTa names, then DistilBERT's */
    static const char *const names[2][8] = {
        {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
         "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"},
        {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin", "sa_layer_norm", "ffn.lin1",
         "ffn.lin2", "output_layer_norm"}};
    const char *const *nm = names[distil];
    char p[8][240];
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &w->layers[l];
        for (int k = 0; k < 8; k++)
            snprintf(p[k], sizeof p[k], "%s.%d.%s", distil ? "transformer.layer" : "encoder.layer", l, nm[k]);
        if (model_linear(m, &L->q, p[0], H, H, 1, e) || model_linear(m, &L->k, p[1], H, H, 1, e) ||
            model_linear(m, &L->v, p[2], H, H, 1, e) || model_linear(m, &L->o, p[3], H, H, 1, e) ||
            model_norm(m, &L->attn_norm, p[4], H, e) || model_linear(m, &L->up, p[5], H, FF, 1, e) ||
            model_linear(m, &L->down, p[6], FF, H, 1, e) || model_norm(m, &L->mlp_norm, p[7], H, e))
            return -1;
    }
    return load_mlm_head(m, e);
}

/* ---------------------------------------------------------------- the rows (families.h) */

const ArchSpec arch_family_bert = {
    .kind = ARCH_BERT, .model_type = "bert", .arch_prefix = "Bert", .tensor_prefix = "bert.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_bert_parse, .load = arch_bert_load, .tokenizer = TOK_SOURCE_WORDPIECE,
};

const ArchSpec arch_family_roberta = {
    .kind = ARCH_ROBERTA, .model_type = "roberta", .arch_prefix = "Roberta", .tensor_prefix = "roberta.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_roberta_parse, .load = arch_bert_load, .tokenizer = TOK_SOURCE_BPE_ROBERTA,
};

const ArchSpec arch_family_distilbert = {
    .kind = ARCH_DISTILBERT, .model_type = "distilbert", .arch_prefix = "DistilBert", .tensor_prefix = "distilbert.",
    .hidden_key = "dim", .heads_key = "n_heads",
    .parse = arch_distilbert_parse, .load = arch_bert_load, .tokenizer = TOK_SOURCE_WORDPIECE,
};

const ArchSpec arch_family_xlm_roberta = {
    .kind = ARCH_XLM_ROBERTA, .model_type = "xlm-roberta", .arch_prefix = "XLMRoberta", .tensor_prefix = "roberta.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_roberta_parse, .load = arch_bert_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_electra = {
    .kind = ARCH_ELECTRA, .model_type = "electra", .arch_prefix = "Electra", .tensor_prefix = "electra.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = arch_electra_parse, .load = arch_bert_load, .tokenizer = TOK_SOURCE_WORDPIECE,
};
