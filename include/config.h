/* config.h — the model's config.json (Hugging Face layout). */
#ifndef ATTNVIZ_CONFIG_H
#define ATTNVIZ_CONFIG_H

#include "err.h"

typedef enum { ACT_GELU = 0, ACT_GELU_TANH, ACT_RELU } ActKind;

/* Model families: how the checkpoint names its tensors and how a block runs. */
typedef enum { ARCH_BERT = 0, ARCH_ROBERTA, ARCH_DISTILBERT, ARCH_GPT2 } ArchKind;

typedef struct {
    char model_type[32];  /* "bert", "roberta", "distilbert", "gpt2" */
    ArchKind arch;
    int causal;           /* decoder: a token attends to itself and earlier tokens only */
    int pre_ln;           /* LayerNorm before attention/MLP (GPT-2), else after (BERT) */
    int pos_offset;       /* first position id: RoBERTa's padding_idx + 1, else 0 */
    int pad_token_id;     /* RoBERTa: a pad token takes position padding_idx and is not counted */
    int inverse_layer_scale; /* GPT-2 scale_attn_by_inverse_layer_idx: scores / (layer + 1) */
    int vocab_size;
    int hidden_size;
    int num_layers;
    int num_heads;
    int intermediate_size;
    int max_position_embeddings;
    int type_vocab_size;  /* 0: the family has no token types (DistilBERT, GPT-2) */
    float layer_norm_eps;
    ActKind hidden_act;
    char hidden_act_name[32];
    int is_demo;          /* "attnviz_demo": true — the constructed demo model */
} BertConfig;

/* Longest input the positions admit (max_position_embeddings - pos_offset). */
static inline int cfg_max_tokens(const BertConfig *c) { return c->max_position_embeddings - c->pos_offset; }

/* Parses config.json at path: the family from model_type (or architectures[0]),
 * then that family's key names; validates every size (positive, bounded, hidden
 * divisible by heads) before anything is allocated from it. */
int cfg_load(BertConfig *c, const char *path, AvErr *e);
int cfg_parse(BertConfig *c, const char *json, size_t len, const char *path, AvErr *e);

/* Reads do_lower_case from tokenizer_config.json; returns 1/0, or -1 when the
 * file or key is absent (not an error). */
int cfg_read_lowercase(const char *tokenizer_config_path);

const char *cfg_act_name(ActKind a);

/* Head labels of a model folder's heads.json ({"heads": [{"layer", "head",
 * "pattern", "description"}]}): fills patterns/descriptions, arrays of
 * num_layers * num_heads strings (NULL where a head is not described). */
int cfg_load_head_labels(const char *path, const BertConfig *c, char ***patterns, char ***descriptions, AvErr *e);
void cfg_free_head_labels(char **labels, int n);

#endif
