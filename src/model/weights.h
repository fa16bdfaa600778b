/* weights.h — a loaded Transformer as plain structs: its config and its
 * weights as views into the checkpoint (kernels.h's Linear and Norm), which
 * model/loader.c and the families' loads (arch_*.c) fill and the engine
 * (model.h, seq2seq.h, vision.h) reads. No function here: nothing in model/
 * calls the engine, and the engine knows no file format or family. */
#ifndef ATTNVIZ_WEIGHTS_H
#define ATTNVIZ_WEIGHTS_H

#include "config.h"
#include "kernels.h"
#include "safetensors.h"
#include "util.h"

typedef struct {
    Linear q;             /* (hidden -> num_heads * head_dim) */
    Linear k, v;          /* (hidden -> num_kv_heads * head_dim) */
    Linear o;             /* (num_heads * head_dim -> hidden) attention output */
    Norm attn_norm;       /* (hidden) pre-norm: before attention; post-norm: after its residual */
    Norm attn_post_norm;  /* (hidden) on attention's output before the residual (sandwich), g NULL otherwise */
    Norm q_norm, k_norm;  /* (head_dim) per-head RMSNorm (Qwen3), g NULL otherwise */
    Linear up;            /* (hidden -> intermediate) */
    Linear gate;          /* (hidden -> intermediate) gated MLPs only, w NULL otherwise */
    Linear down;          /* (intermediate -> hidden) */
    Norm mlp_norm;        /* (hidden) pre-norm: before the MLP; post-norm: after its residual */
    Norm mlp_post_norm;   /* (hidden) on the MLP's output before the residual (sandwich), g NULL otherwise */
    Linear router;        /* (hidden -> num_experts) a mixture-of-experts layer's router, w NULL for a dense MLP */
    struct Expert *experts; /* (num_experts) a MoE layer's experts (up/gate/down unused then), NULL otherwise */
    const float *sinks;   /* (num_heads) each head's sink logit (gpt-oss), NULL otherwise */
    const float *ls_attn, *ls_mlp; /* (hidden) DINOv2's layer scales: the attention's and MLP's outputs
                                      multiplied per channel before their residual, NULL otherwise */
} LayerWeights;

/* One expert of a mixture-of-experts MLP: down(act(gate(x)) * up(x)). */
typedef struct Expert {
    Linear gate, up;      /* (hidden -> moe_intermediate) */
    Linear down;          /* (moe_intermediate -> hidden) */
} Expert;

/* What turns the last hidden state into scores over the vocabulary. */
typedef struct {
    Linear dense;         /* (hidden -> hidden, or embedding_size) a masked-LM head's transform, w NULL otherwise */
    ActKind act;          /* after dense */
    Norm norm;            /* (dense's output) after the transform (masked LM), g NULL otherwise */
    Linear out;           /* (hidden -> vocab) lm_head, or tok_emb's rows when tied (with the head's
                             bias, if any); w NULL: the checkpoint has no head */
    float softcap;        /* logits capped as cap * tanh(x / cap) (Gemma 2); 0: none */
} LmHead;

typedef struct {
    Linear tok_emb;       /* (vocab, hidden) rows looked up by id, widened one row at a time */
    const float *pos_emb; /* (max_pos, hidden) learned positions, NULL for rotary families */
    const float *type_emb;/* (type_vocab, hidden), NULL when the family has no token types */
    Norm emb_norm;        /* (hidden, or embedding_size) after the embeddings (BERT), g NULL otherwise */
    Linear emb_proj;      /* (embedding_size -> hidden) after emb_norm (ELECTRA), w NULL otherwise */
    Norm final_norm;      /* (hidden) after the last block (GPT-2's ln_f, Llama's norm), g NULL otherwise */
    LayerWeights *layers; /* (num_layers) */
    LmHead head;          /* on final_norm(x) for decoders, on x for encoders */
    struct VisionWeights *vis; /* a vision encoder's patch embedding, special tokens, positions and pooling
                                  (vision.h; cfg.vision), else NULL */
    struct TextHead *text_head; /* a whole CLIP/SigLIP model's text pooling and similarity (vision.h), else NULL */
} Weights;

typedef struct Model {
    ModelConfig cfg;
    Weights w;
    StFile *files;        /* (n_files) the checkpoint: one file, or a sharded safetensors set */
    int n_files;
    struct GgufFile *gguf;/* or a llama.cpp file (then files is empty) */
    const char *path;     /* the first file's path, for messages */
    char *path_owned;
    float *inv_freq;      /* (rotary_dim / 2) rotary frequencies before any length-dependent scaling
                             (LongRoPE: with the short factors) */
    float *inv_freq_long; /* (rotary_dim / 2) LongRoPE's with the long factors, else NULL */
    float *inv_freq_local;/* (rotary_dim / 2) the layers of layer_rope_local (Gemma 3's sliding ones), else NULL */
    float **owned;        /* converted copies to free */
    int n_owned, cap_owned;
    int max_in;           /* widest product input: the widening scratch's row length */
    char dtype_name[16];  /* dtype of the checkpoint's weights */
    char head_err[512];   /* why a head the checkpoint has in part was not loaded ("" when not) */
    struct S2sWeights *s2s; /* an encoder-decoder model's stacks (seq2seq.h; cfg.enc_dec), else NULL */
    float *vgram;         /* (num_layers, num_heads, head_dim, head_dim) each head's (W_O^h)^T W_O^h for value
                             norms (kernels.h), made a layer at a time by the first pass that asks (forward.c),
                             else NULL; bytes: model_value_gram_bytes */
    unsigned char *vgram_done; /* (num_layers) which layers of vgram are made */
    struct Model *text;   /* a whole CLIP/SigLIP model's text tower (cfg.text_tower), reading this Model's
                             files, else NULL */
    int files_borrowed;   /* files are another Model's (a text tower's): not closed by model_free */
    struct Model *vision; /* a vision-language model's vision tower (cfg.vlm), reading this Model's files or its
                             own (llava.cpp's mmproj GGUF), else NULL */
    struct VlmWeights *vlm; /* its projector (weights.h), else NULL */
    const char *tensor_prefix; /* the prefix its tensors' names take in place of the family's (a
                                  vision-language model's language model: "model.language_model."), or NULL */
    double file_bytes;    /* the weight files' bytes, all of them */
    AvHold hold;          /* how they are held once accepted (util.h's av_hold_plan): mapped, read in, or
                             copied into private memory (then file_bytes of it are anonymous) */
    int held;             /* model_hold has done it */
} Model;

/* An encoder-decoder model's (BART, Marian, T5; cfg.enc_dec): the engine runs them in seq2seq.c. */
typedef struct {
    Linear q, k, v, o;        /* self-attention (hidden -> heads * head_dim, and back) */
    Norm attn_norm;           /* post-norm: after its residual; pre-norm: before it */
    Linear cq, ck, cv, co;    /* decoder layers: cross attention (keys and values from the encoder's output) */
    Norm cross_norm;
    Linear up, gate, down;    /* the MLP; gate.w NULL unless gated: down(act(gate x) * up x) */
    Norm mlp_norm;
} S2sLayer;

/* One stack: the encoder or the decoder. */
typedef struct {
    S2sLayer *layers;
    int n_layers;
    Linear tok_emb;           /* (vocab, hidden): the shared embeddings, or the stack's own */
    const float *pos_emb;     /* (rows, hidden) learned (BART: position p at row p + pos_offset) or the
                                 sinusoids (Marian, computed at load); NULL for relative positions (T5) */
    int pos_rows;
    Norm emb_norm;            /* BART's layernorm_embedding, g NULL otherwise */
    Norm final_norm;          /* T5's final_layer_norm, g NULL otherwise */
    const float *rel_bias;    /* T5: (rel_buckets, heads) the first layer's relative_attention_bias, shared by
                                 every layer of the stack; NULL otherwise */
} S2sStack;

typedef struct S2sWeights {
    S2sStack enc, dec;
    Linear lm_head;           /* (hidden -> vocab): tied to the shared embeddings or its own; w NULL: none */
    const float *logits_bias; /* (vocab) final_logits_bias, or NULL */
    float *sinusoid;          /* Marian's computed position table (owned), else NULL */
} S2sWeights;

/* A vision encoder's ends and a whole CLIP/SigLIP model's text head (cfg.vision): the engine runs them in vision.c. */
typedef struct VisionWeights {
    Linear patch;          /* (num_channels * patch^2 -> hidden) the patch embedding's convolution as a
                              product over each patch's pixels in (channel, row, column) order */
    const float *cls;      /* (hidden) the class token, NULL without one (SigLIP) */
    const float *dist;     /* (hidden) DeiT's distillation token, else NULL */
    const float *registers;/* (vis_registers, hidden) DINOv2's register tokens, else NULL */
    const float *pos;      /* (pos_prefix + pos_grid^2, hidden) the position table */
    int pos_grid;          /* its patch grid's side */
    int pos_prefix;        /* its rows before the grid: the class (and distillation) tokens' */
    Norm post_pooled;      /* (hidden) CLIP's post_layernorm on the class token, g NULL otherwise */
    Linear proj;           /* (hidden -> projection_dim) CLIP's visual_projection, w NULL otherwise */
    /* SigLIP's attention-pooling head: a learned query (probe) attends over every token
     * (nn.MultiheadAttention, num_heads heads), then a residual MLP after a LayerNorm */
    const float *probe;    /* (hidden) */
    Linear pq, pk, pv, po; /* (hidden -> hidden) in_proj_weight's three parts; out_proj */
    Norm pnorm;            /* (hidden) */
    Linear pfc1, pfc2;     /* (hidden -> intermediate), (intermediate -> hidden) */
} VisionWeights;

/* A whole CLIP or SigLIP model's text side (Model.text is its tower, a Model
 * of its own run on token ids; these are what turns its last hidden state
 * into the text embedding, and the two embeddings into a similarity). */
typedef struct TextHead {
    int pool_last;         /* SigLIP: the last token; else CLIP: the first eos_token_id, or the largest id
                              when eos_token_id is 2 (the original CLIP configs) */
    int eos_id;
    Linear proj;           /* CLIP's text_projection (no bias) or SigLIP's text head (with a bias) */
    float logit_scale;     /* the similarity's log scale: exp() of it multiplies the cosine */
    float logit_bias;      /* SigLIP's bias, added after; CLIP: 0 */
    int sigmoid;           /* SigLIP: a probability is sigmoid(logit); CLIP: softmax over the texts */
} TextHead;

/* What turns a vision-language model's vision tower features into its language model's image
 * tokens (Model.vlm; the engine runs it in vision.c). */
typedef enum {
    VLM_PROJ_MLP = 1,      /* LLaVA: linear_1, the activation, linear_2 */
    VLM_PROJ_GEMMA3,       /* Gemma 3: the tower's output average-pooled to vlm_tokens, an RMSNorm, one matrix */
    VLM_PROJ_IDEFICS3      /* Idefics3: the tower's output (post_layernorm) pixel-shuffled by vlm_scale, one matrix */
} VlmProjKind;

typedef struct VlmWeights {
    VlmProjKind kind;
    Linear p1, p2;         /* LLaVA: (vision hidden -> text hidden), (text hidden -> text hidden); Gemma 3: p1 its
                              mm_input_projection_weight (vision hidden -> text hidden, stored (in, out));
                              Idefics3: p1 its modality_projection (vision hidden x scale^2 -> text hidden) */
    Norm norm;             /* Gemma 3's mm_soft_emb_norm (1 + w) */
} VlmWeights;

/* Whether the checkpoint has a (complete) language-model head; head_err says
 * why a partial one was left out. Attention never depends on it. */
static inline int model_has_head(const Model *m) { return m->w.head.out.w != NULL; }

#endif
