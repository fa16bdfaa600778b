/* arch_llama.h — what the Llama-style families share (arch_llama.c): pre-RMSNorm
 * causal decoders with rotary positions, grouped-query attention and gated MLPs,
 * read from config.json, a checkpoint or a llama.cpp file by one parse, one
 * load and one GGUF reader that test a family's traits, never its name. A
 * family is a LlamaTraits value and a row (arch_llama.c: Llama; arch_mistral.c,
 * arch_qwen.c, arch_gemma.c, arch_phi3.c, arch_moe.c, arch_gptoss.c). */
#ifndef ATTNVIZ_ARCH_LLAMA_H
#define ATTNVIZ_ARCH_LLAMA_H

#include <stddef.h>

#include "arch.h"
#include "loader.h"
#include "tokenizer.h"

struct cJSON;
struct GgufFile;

/* Which layers slide when config.json has no "layer_types". */
typedef enum { SLIDE_ALL = 0, SLIDE_ALTERNATE, SLIDE_FROM_MAX_WINDOW, SLIDE_PATTERN } SlideRule;

/* How a mixture-of-experts family names its router and experts. */
typedef enum { MOE_NONE = 0, MOE_MIXTRAL, MOE_QWEN, MOE_OLMOE, MOE_GPTOSS } MoeKind;

/* What sets one family apart from Llama: each family's parse passes its own,
 * so the shared code tests traits, never a family's name. */
typedef struct {
    int gemma;          /* Gemma 2's block: 1 + w norms, sqrt(hidden) embeddings, GeGLU, soft-caps,
                           sandwich norms, head_dim 256, tied embeddings */
    int qkv_bias;       /* q/k/v always biased and the output never; no "attention_bias" key (Qwen2) */
    int qk_norm;        /* per-head RMSNorm of q and k before rotary (Qwen3) */
    int window;         /* the sliding window when the config names none (Gemma 2: 4096) */
    int window_off;     /* "use_sliding_window" defaults to false (Qwen) */
    SlideRule slide;      /* SLIDE_PATTERN: layer l slides unless (l + 1) % sliding_window_pattern == 0 (Gemma 3) */
    int rows_interleaved; /* llama.cpp's converter permuted q/k rows into rotary pairs (its llama files) */
    int softcap;          /* soft-capping defaults to 50 (scores) and 30 (logits) when the config is silent (Gemma 2) */
    int rope_local;       /* sliding layers turn by rope_local_base_freq, unscaled (Gemma 3) */
    float theta;          /* rope_theta when the config is silent (0: 10000) */
    int fused;            /* qkv_proj and gate_up_proj (Phi-3) */
    int orig_max_top;     /* a top-level original_max_position_embeddings (default 4096) is LongRoPE's (Phi-3) */
    MoeKind moe;          /* a mixture-of-experts MLP, and how its config and tensors are named */
    int qk_norm_full;     /* q/k RMSNorm over the whole projection, not per head (OLMoE) */
    int sinks;            /* a learned sink logit per head in every softmax; attention_bias defaults to true;
                             YaRN when the config names no rotary scaling (gpt-oss) */
} LlamaTraits;

/* How llama.cpp names a family's tensors: llama's names, with Gemma 2's,
 * Phi-3's or gpt-oss's own for their blocks (arch_llama_gguf_name). */
typedef enum { NAMES_LLAMA = 0, NAMES_GEMMA, NAMES_PHI3, NAMES_GPTOSS } GgufNames;

/* config.json's keys into c, as the family's traits read them. */
int arch_llama_parse(ModelConfig *c, const struct cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e);
/* The tensors as transformers' Llama-style modules name them (the base model's; "model." before them in
 * …ForCausalLM checkpoints). */
int arch_llama_load(Model *m, const LlamaTraits *fam, AvErr *e);
/* Hyper-parameters as llama.cpp's converter writes them: "<arch>.<key>". */
int arch_llama_gguf_config(ModelConfig *c, const struct GgufFile *f, const char *path, const LlamaTraits *fam, AvErr *e);
/* A transformers tensor name as llama.cpp's (its LLM_TENSOR_NAMES for these families); -1: none. */
int arch_llama_gguf_name(const char *hf, char *out, size_t len, GgufNames names);

/* A family's parse and load over its traits (static: its row names them). */
#define LLAMA_STYLE(stem, traits)                                                                     \
    static int stem##_parse(ModelConfig *c, const struct cJSON *root, const char *path, AvErr *e) {    \
        return arch_llama_parse(c, root, path, &(traits), e);                                         \
    }                                                                                                 \
    static int stem##_load(Model *m, AvErr *e) { return arch_llama_load(m, &(traits), e); }
/* And its reader of llama.cpp's files, their tensors named as `names` says. */
#define LLAMA_STYLE_GGUF(stem, traits, names)                                                              \
    static int stem##_gguf_config(ModelConfig *c, const struct GgufFile *f, const char *path, AvErr *e) {  \
        return arch_llama_gguf_config(c, f, path, &(traits), e);                                           \
    }                                                                                                      \
    static int stem##_gguf_name(const char *hf, char *out, size_t len) { return arch_llama_gguf_name(hf, out, len, names); }

#endif
