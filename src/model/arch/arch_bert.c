/* arch_bert.c — the BERT family: BERT and RoBERTa (BertConfig's keys) and
 * DistilBERT (its own). Post-LayerNorm encoders with learned positions;
 * RoBERTa numbers positions after its padding index. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "model.h"

/* BERT and RoBERTa share ModelConfig's key names. */
int arch_bert_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
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
    if (c->arch == ARCH_ROBERTA) {
        /* RoBERTa numbers positions from padding_idx + 1 (HF create_position_ids_from_input_ids) */
        int pad = 1;
        if (cfg_opt_int(root, "pad_token_id", 0, CFG_MAX_POS - 2, &pad, path, e)) return -1;
        c->pos_offset = pad + 1;
        c->pad_token_id = pad;
        if (c->pos_offset >= c->max_position_embeddings)
            return av_err(e, "%s: pad_token_id %d leaves no positions of max_position_embeddings %d", path, pad,
                          c->max_position_embeddings);
    }
    return 0;
}

int arch_distilbert_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
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

/* The masked-LM head of BertForMaskedLM, RobertaForMaskedLM and
 * DistilBertForMaskedLM: dense, activation, LayerNorm, then the word
 * embeddings (tied) with the head's own bias. Absent in base checkpoints. */
static int load_mlm_head(Model *m, AvErr *e) {
    (void)e;
    static const char *const names[3][4] = {
        {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias",
         "cls.predictions.decoder.bias"},
        {"lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder.bias"},
        {"vocab_transform", "vocab_layer_norm", "vocab_projector.bias", "vocab_projector.bias"}};
    const ModelConfig *c = &m->cfg;
    const int which = c->arch == ARCH_BERT ? 0 : c->arch == ARCH_ROBERTA ? 1 : 2;
    const char *const *nm = names[which];
    char w[160];
    snprintf(w, sizeof w, "%s.weight", nm[0]);
    if (!model_has_tensor(m, w)) return 0;
    LmHead *h = &m->w.head;
    const char *bias = model_has_tensor(m, nm[2]) ? nm[2] : nm[3];
    /* attention does not need the head: a broken one is left out, and said
     * why only when predictions are asked for */
    AvErr he = {0};
    if (model_linear(m, &h->dense, nm[0], c->hidden_size, c->hidden_size, 1, &he) ||
        model_norm(m, &h->norm, nm[1], c->hidden_size, &he) || !(h->out.b = model_tensor(m, bias, 1, c->vocab_size, 0, &he))) {
        memset(h, 0, sizeof *h);
        snprintf(m->head_err, sizeof m->head_err, "its masked-LM head is incomplete: %.400s", he.msg);
        return 0;
    }
    h->act = c->arch == ARCH_ROBERTA ? ACT_GELU : c->hidden_act; /* RoBERTa's head calls gelu whatever hidden_act says */
    const float *b = h->out.b;
    h->out = m->w.tok_emb;
    h->out.b = b;
    h->out.name = "the word embeddings (tied decoder)";
    return 0;
}

/* Tensor names follow each family's Hugging Face module names. */
int arch_bert_load(Model *m, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    Weights *w = &m->w;
    int64_t H = c->hidden_size, FF = c->intermediate_size;
    int distil = c->arch == ARCH_DISTILBERT;
    if (model_linear(m, &w->tok_emb, "embeddings.word_embeddings", H, c->vocab_size, 0, e) ||
        !(w->pos_emb = model_tensor(m, "embeddings.position_embeddings.weight", 2, c->max_position_embeddings, H, e)))
        return -1;
    if (!distil && !(w->type_emb = model_tensor(m, "embeddings.token_type_embeddings.weight", 2, c->type_vocab_size, H, e)))
        return -1;
    if (model_norm(m, &w->emb_norm, "embeddings.LayerNorm", H, e)) return -1;
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
