/* arch_qwen.c — Qwen2, Qwen3 and Qwen3-MoE, Llama-style decoders
 * (arch_llama.h) set apart by their traits:
 *   qwen2     q/k/v biases; sliding window from max_window_layers on
 *   qwen3     per-head RMSNorm of q and k before rotary
 *   qwen3_moe Qwen3's block, MoE MLPs (mlp.gate, mlp.experts.N.*_proj) on the
 *             layers decoder_sparse_step and mlp_only_layers leave sparse;
 *             norm_topk_prob */
#include "arch_llama.h"

static const LlamaTraits QWEN2 = {.qkv_bias = 1, .window_off = 1, .slide = SLIDE_FROM_MAX_WINDOW},
                         QWEN3 = {.qk_norm = 1, .window_off = 1, .slide = SLIDE_FROM_MAX_WINDOW},
                         QWEN3_MOE = {.qk_norm = 1, .window_off = 1, .slide = SLIDE_FROM_MAX_WINDOW, .moe = MOE_QWEN};
LLAMA_STYLE(qwen2, QWEN2)
LLAMA_STYLE_GGUF(qwen2, QWEN2, NAMES_LLAMA)
LLAMA_STYLE(qwen3_moe, QWEN3_MOE)
LLAMA_STYLE_GGUF(qwen3_moe, QWEN3_MOE, NAMES_LLAMA)
LLAMA_STYLE(qwen3, QWEN3)
LLAMA_STYLE_GGUF(qwen3, QWEN3, NAMES_LLAMA)

const ArchSpec arch_family_qwen2 = {
    .kind = ARCH_QWEN2, .model_type = "qwen2", .arch_prefix = "Qwen2", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = qwen2_parse, .load = qwen2_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "qwen2", .gguf_config = qwen2_gguf_config, .gguf_name = qwen2_gguf_name,
};

const ArchSpec arch_family_qwen3_moe = {
    .kind = ARCH_QWEN3_MOE, .model_type = "qwen3_moe", .arch_prefix = "Qwen3Moe", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = qwen3_moe_parse, .load = qwen3_moe_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "qwen3moe", .gguf_config = qwen3_moe_gguf_config, .gguf_name = qwen3_moe_gguf_name,
};

const ArchSpec arch_family_qwen3 = {
    .kind = ARCH_QWEN3, .model_type = "qwen3", .arch_prefix = "Qwen3", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = qwen3_parse, .load = qwen3_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "qwen3", .gguf_config = qwen3_gguf_config, .gguf_name = qwen3_gguf_name,
};
