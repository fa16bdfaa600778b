/* config.h — the model's config.json (Hugging Face layout). */
#ifndef ATTNVIZ_CONFIG_H
#define ATTNVIZ_CONFIG_H

#include "err.h"
#include "families.h"
#include "kernels.h" /* ActKind: the activations the kernels compute */

/* Model families: how the checkpoint names its tensors and how a block runs
 * (families.h lists them; arch.c's table has one row per family). */
#define AV_FAMILY_ENUM(kind, ...) ARCH_##kind,
typedef enum { AV_FAMILIES(AV_FAMILY_ENUM) ARCH_COUNT } ArchKind;
#undef AV_FAMILY_ENUM

typedef enum { NORM_LAYER = 0, NORM_RMS } NormKind;
/* Positions: a learned table added to the embeddings, or rotary (RoPE) on q and k. */
typedef enum { POS_TABLE = 0, POS_ROPE } PosKind;
/* How an encoder-decoder model's positions enter: a learned table added to the
 * embeddings (BART, from row pos_offset), sinusoids added (Marian), or a
 * relative bias on the attention scores (T5). */
typedef enum { S2S_POS_TABLE = 0, S2S_POS_SINUSOID, S2S_POS_RELATIVE } S2sPos;
/* ROPE_FACTORS: each frequency divided by its own factor, one per rotary pair, as a
 * llama.cpp file gives them (the rope_freqs tensor its converter writes for Llama 3.1+'s
 * llama3 scaling, computed from the same rule ROPE_LLAMA3 applies to a folder's config). */
typedef enum { ROPE_DEFAULT = 0, ROPE_LINEAR, ROPE_DYNAMIC, ROPE_LLAMA3, ROPE_LONGROPE, ROPE_YARN, ROPE_FACTORS } RopeKind;

/* Bounds that refuse absurd configs before anything is allocated from them.
 * Generous: they admit every published size of the supported families. */
#define CFG_MAX_VOCAB 1000000
#define CFG_MAX_HIDDEN 16384
#define CFG_MAX_LAYERS 256
#define CFG_MAX_HEADS 256
#define CFG_MAX_INTER 131072
#define CFG_MAX_POS 65536
#define CFG_MAX_TYPES 1024
#define CFG_MAX_EOS 8
#define CFG_MAX_EXPERTS 1024    /* a mixture-of-experts layer's experts */
#define CFG_MAX_TOP_K 64        /* experts a token is routed to */
#define CFG_MAX_ROPE_FACTORS 512 /* per-frequency factors (LongRoPE's, rope_freqs): rotary_dim / 2 */
#define CFG_MAX_PATCH 64          /* a vision encoder's patch side */
#define CFG_MAX_REGISTERS 64      /* DINOv2's register tokens */
#define CFG_MAX_VIS_TOKENS 16384  /* a vision encoder's tokens: class, registers and patches */

typedef struct {
    char model_type[32];  /* the family's config.json model_type (families.h) */
    ArchKind arch;
    int causal;           /* decoder: a token attends to itself and earlier tokens only */
    int pre_ln;           /* norm before attention/MLP (GPT-2, Llama), else after (BERT) */
    NormKind norm;
    int norm_no_bias;     /* LayerNorms scale only, with no bias (ModernBERT's norm_bias false) */
    float norm_offset;    /* added to every norm weight: Gemma's RMSNorm scales by 1 + w */
    PosKind pos;
    int pos_offset;       /* first position id: RoBERTa's padding_idx + 1, else 0 */
    int pad_token_id;     /* RoBERTa: a pad token takes position padding_idx and is not counted */
    int inverse_layer_scale; /* GPT-2 scale_attn_by_inverse_layer_idx: scores / (layer + 1) */
    int vocab_size;
    int hidden_size;
    int embedding_size;   /* the embeddings' width when it is not hidden_size (ELECTRA: projected to
                             hidden_size after their LayerNorm), else 0 */
    int num_layers;
    int num_heads;        /* query heads */
    int num_kv_heads;     /* key/value heads (grouped-query attention), num_heads when not grouped */
    int head_dim;         /* hidden_size / num_heads unless the config gives it */
    int intermediate_size;
    int max_position_embeddings;
    int type_vocab_size;  /* 0: the family has no token types (DistilBERT, GPT-2, decoders) */
    float layer_norm_eps;
    ActKind hidden_act;
    char hidden_act_name[32];
    int gated_mlp;        /* down(act(gate(x)) * up(x)) (SwiGLU, GeGLU), else down(act(up(x))) */
    int qkv_bias;         /* q, k and v have biases */
    int o_bias;           /* the attention output has a bias */
    int mlp_bias;         /* the MLP's linears have biases */
    int qk_norm;          /* per-head RMSNorm of q and k before rotary (Qwen3) */
    int qk_norm_full;     /* with qk_norm: one RMSNorm over each token's whole q (and k) projection, all heads
                             together (OLMoE), not per head */
    int num_experts;      /* mixture-of-experts MLP: experts per sparse layer; 0: every MLP is dense */
    int experts_per_tok;  /* top-k: experts each token is routed to */
    int moe_renorm;       /* the top-k routing weights are divided by their sum (Mixtral; Qwen3-MoE and
                             OLMoE when norm_topk_prob) */
    int moe_intermediate; /* each expert's gated MLP width */
    int moe_topk_logits;  /* top-k of the router's logits, then a softmax over those k only (gpt-oss's
                             GptOssTopKRouter), instead of the top-k of a softmax over all experts */
    float swiglu_limit;   /* > 0: the experts' clamped SwiGLU (gpt-oss): gate clamped above at the limit,
                             up to [-limit, limit], out = (up + 1) * gate * sigmoid(alpha * gate) */
    float swiglu_alpha;   /* its sigmoid's gain (1.702) */
    int attn_sinks;       /* every layer has a learned logit per head (gpt-oss's sinks) that joins each
                             softmax with no key or value: it takes a share of the probability, so a row's
                             weights over the keys sum to 1 minus that share */
    unsigned char layer_dense[CFG_MAX_LAYERS]; /* 1: layer l of a MoE model has a dense MLP of
                                                  intermediate_size (Qwen3-MoE's mlp_only_layers) */
    int sandwich_norm;    /* sublayer outputs normalized before the residual (Gemma 2) */
    float emb_scale;      /* embeddings multiplied by this (Gemma: sqrt(hidden)); 0: not at all */
    float attn_scale;     /* scores' scale; 0: 1 / sqrt(head_dim) */
    float attn_softcap;   /* attention-logit soft-capping (Gemma 2); 0: none */
    int sliding_window;   /* keys a sliding layer's query sees, itself included; 0: none */
    int window_bidir;     /* the window reaches both ways (an encoder's local attention, ModernBERT): a
                             sliding layer's query sees keys j with |i - j| < sliding_window */
    unsigned char layer_sliding[CFG_MAX_LAYERS]; /* 1: layer l uses the sliding window */
    int tie_word_embeddings;
    int qk_rows_interleaved; /* q/k weight rows in llama.cpp's interleaved rotary order (GGUF llama) */
    float rope_theta;
    RopeKind rope_kind;
    float rope_factor;
    float rope_low_freq, rope_high_freq; /* llama3 */
    float rope_beta_fast, rope_beta_slow; /* yarn: the ramp's ends, in rotations over the original context */
    int rope_truncate;    /* yarn: the ramp's ends rounded outwards to whole dims (transformers' default) */
    int rope_orig_max_pos; /* llama3, dynamic; LongRoPE: longer passes take the long factors */
    float rope_partial;   /* partial_rotary_factor as the config gives it (0: none); cfg_validate turns
                             it into rotary_dim once head_dim is known */
    int rotary_dim;       /* the first dims of each head that rotary turns (cfg_validate: head_dim unless
                             partial; the rest pass through as transformers' apply_rotary_pos_emb does) */
    float rope_attn_factor; /* LongRoPE: cos and sin scaled by it (transformers' attention_scaling); 0: 1 */
    int rope_n_factors;   /* LongRoPE: rotary_dim / 2 factors each; ROPE_FACTORS: rope_short's count */
    float rope_short[CFG_MAX_ROPE_FACTORS], rope_long[CFG_MAX_ROPE_FACTORS];
    int rope_recompute_at; /* generation: once the sequence grows past this many tokens, the cache is
                              dropped and the whole sequence runs again (transformers' Phi-3 generate(),
                              for LongRoPE's long factors; its original context); 0: never */
    float rope_local_theta; /* layers marked in layer_rope_local turn by this base, unscaled (Gemma 3's
                               sliding layers); 0: none */
    unsigned char layer_rope_local[CFG_MAX_LAYERS];
    float final_softcap;  /* output logits capped as cap * tanh(x / cap) (Gemma 2); 0: none */
    int eos_ids[CFG_MAX_EOS]; /* generation stops at any of these (config.json, generation_config.json, GGUF) */
    int n_eos;
    int is_demo;          /* "attnviz_demo": true — the constructed demo model */
    /* Encoder-decoder models (seq2seq.h: BART, Marian, T5). num_layers, num_heads and intermediate_size
     * are the encoder's; the decoder's heads and head_dim are the same (the parse refuses others). */
    int enc_dec;
    int dec_layers;
    int dec_intermediate;
    int dec_start_id;     /* decoder_start_token_id: the decoder's first input */
    S2sPos s2s_pos;
    int rel_buckets, rel_max_distance; /* T5's relative position buckets */
    float logits_scale;   /* the decoder's output scaled before the lm head (T5 with tied embeddings:
                             d_model^-0.5); 0: not at all */
    /* Vision encoders (ViT, DeiT, DINOv2, CLIP's and SigLIP's vision towers: vision.h). Their tokens
     * are an image's patches, embedded by vision.c from pixel_values, not ids; num_layers, num_heads,
     * hidden_size, ... are the vision tower's. */
    int vision;           /* 1: the input is an image */
    int image_size;       /* the side the position table was made for (config's image_size) */
    int patch_size, num_channels;
    int vis_cls, vis_dist; /* a class token (all but SigLIP), DeiT's distillation token, before the patches */
    int vis_registers;    /* DINOv2 with registers: tokens after the class token, with no position */
    int vis_pos_interp;   /* how positions reach another grid than the table's (VisPosInterp) */
    int vis_pool_head;    /* SigLIP's attention-pooling head after the last layer */
    int vis_post_pooled;  /* CLIP: post_layernorm on the class token only (not the final_norm of every token) */
    int vis_projection;   /* CLIP: visual_projection's width (projection_dim); 0: none */
    int layer_scale;      /* DINOv2: each block's attention and MLP outputs scaled per channel */
    int text_tower;       /* the folder is a whole CLIP or SigLIP model: Model.text holds the text tower */
    /* a vision tower read from llama.cpp's mmproj GGUF ("clip"): the normalization its metadata gives
     * (the folder's preprocessor_config.json otherwise), fc1 and fc2 under each other's names (the
     * legacy LLaVA converter's ffn_down/ffn_up), and its LLaVA projector's feature layer (clip.vision.
     * feature_layer, a hidden_states index) */
    float vis_mean[3], vis_std[3];
    int vis_norm_given;
    int vis_ffn_swapped;
    int vis_llava_proj;   /* clip.has_llava_projector with projector_type "mlp" */
    int vis_feature_layer;
    int vis_gemma3_proj;  /* clip.projector_type "gemma3": a SigLIP tower (no class token, post_layernorm on every
                             token), pooled vis_pool_k x vis_pool_k, the soft RMSNorm and the input projection */
    int vis_pool_k;       /* clip.vision.projector.scale_factor (4 when absent) */
    /* Vision-language models (LLaVA, ...: vision.h's VlmWeights): this config is the language model's;
     * Model.vision holds the vision tower (its own config), whose features, projected, take the place
     * of the image tokens in the decoder's sequence. */
    int vlm;              /* 1: a vision-language model */
    int image_token_id;   /* the placeholder each image token of the sequence is (LLaVA's <image>: 32000) */
    int vlm_feature_layer;/* which hidden state of the vision tower is the features: -1 the last layer's, -2 the one
                             before (LLaVA's vision_feature_layer); counted as transformers' hidden_states */
    int vlm_drop_cls;     /* the class token's feature is dropped (vision_feature_select_strategy "default") */
    int vlm_tokens;       /* image tokens per image in the sequence */
    int vlm_proj_act;     /* the projector's activation (ActKind; LLaVA's projector_hidden_act) */
    int vlm_proj_bias;    /* the projector's linears have biases (LLaVA's multimodal_projector_bias) */
    int vlm_boi_id, vlm_eoi_id; /* Gemma 3: the picture's start (what the text writes) and end tokens, -1: none */
    int vlm_bidir;        /* the image tokens attend to each other both ways (Gemma 3's token_type_ids mask) */
    int vlm_kind;         /* VlmKind: how the text places the picture (not read from the ids: 0 is a token id) */
    int vlm_scale;        /* Idefics3: the pixel shuffle's scale factor (scale x scale patches a token) */
} ModelConfig;

/* VlmKind: a vision-language model's placement of the picture in its text. */
enum {
    VLM_KIND_LLAVA,  /* the image token, once per image token */
    VLM_KIND_GEMMA3, /* the text's <start_of_image> becomes "\n\n" boi, the image tokens, eoi "\n\n" */
    VLM_KIND_IDEFICS3, /* the text's <image> becomes each tile's <fake_token_around_image><row_r_col_c> and image
                          tokens, then the global view's (Idefics3Processor's prompt) */
};

/* VisPosInterp: the patch grid of the preprocessed image against the position table's. */
enum {
    VIS_POS_EXACT = 0,     /* must match (ViT, DeiT, CLIP, SigLIP: transformers refuses another size) */
    VIS_POS_BICUBIC,       /* torch's bicubic interpolation, align_corners=False (DINOv2) */
    VIS_POS_BICUBIC_AA     /* the same with antialias=True (DINOv2 with registers) */
};

/* The checks every family's sizes pass once read (defaults for kv heads and
 * head_dim filled in): heads divide evenly, rotary dims pair up. */
int cfg_validate(ModelConfig *c, const char *hidden_key, const char *heads_key, const char *path, AvErr *e);

/* Longest input the positions admit: max_position_embeddings - pos_offset where the offset is rows of the table
 * (RoBERTa's padding_idx + 1); BART's table has its offset's rows besides max_position_embeddings (transformers'
 * BartLearnedPositionalEmbedding), so all of them are positions. */
static inline int cfg_max_tokens(const ModelConfig *c) {
    return c->max_position_embeddings - (c->enc_dec ? 0 : c->pos_offset);
}

/* Parses config.json at path: the family from model_type (or architectures[0]),
 * then that family's key names (arch.c); validates every size (positive,
 * bounded, heads dividing evenly) before anything is allocated from it. */
int cfg_load(ModelConfig *c, const char *path, AvErr *e);
int cfg_parse(ModelConfig *c, const char *json, size_t len, const char *path, AvErr *e);

struct cJSON;
/* eos_token_id (an id or a list of ids) of a config.json or
 * generation_config.json object into c->eos_ids; absent or null leaves them. */
int cfg_parse_eos(ModelConfig *c, const struct cJSON *root, const char *path, AvErr *e);
/* generation_config.json: its eos_token_id replaces config.json's, as
 * transformers' generate() reads it. A missing file is not an error. */
int cfg_load_generation(ModelConfig *c, const char *path, AvErr *e);

/* Reads do_lower_case from tokenizer_config.json; returns 1/0, -1 when the
 * file or key is absent (not an error), or -2 when the file is refused (a key
 * given twice: e says which). */
int cfg_read_lowercase(const char *tokenizer_config_path, AvErr *e);

const char *cfg_act_name(ActKind a);

/* Readers of config.json keys for the families' parsers (arch_*.c): -1 with
 * one line naming the key when it is missing (cfg_get_int), of the wrong type
 * or out of range; an optional key that is absent or null leaves *out as is. */
struct cJSON;
int cfg_get_int(const struct cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e);
int cfg_opt_int(const struct cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e);
int cfg_opt_float(const struct cJSON *root, const char *key, double lo, double hi, float *out, const char *path,
                  AvErr *e);
int cfg_opt_bool(const struct cJSON *root, const char *key, int *out, const char *path, AvErr *e);
int cfg_parse_act(ModelConfig *c, const struct cJSON *root, const char *key, const char *dflt, const char *path,
                  AvErr *e);

/* Head labels of a model folder's heads.json ({"heads": [{"layer", "head",
 * "pattern", "description"}]}): fills patterns/descriptions, arrays of
 * num_layers * num_heads strings (NULL where a head is not described). */
int cfg_load_head_labels(const char *path, const ModelConfig *c, char ***patterns, char ***descriptions, AvErr *e);
void cfg_free_head_labels(char **labels, int n);

#endif
