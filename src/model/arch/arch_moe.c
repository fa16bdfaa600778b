/* arch_moe.c — Mixtral and OLMoE, Llama-style decoders (arch_llama.h) with
 * mixture-of-experts MLPs, set apart by their traits:
 *   mixtral  Mistral's block with a mixture-of-experts MLP (block_sparse_moe:
 *            router "gate", experts w1/w3/w2), top-k weights renormalized
 *   olmoe    MoE MLPs as Qwen3-MoE's (arch_qwen.c), q/k RMSNorm over the whole
 *            projection (all heads at once) */
#include "arch_llama.h"

static const LlamaTraits MIXTRAL = {.moe = MOE_MIXTRAL}, OLMOE = {.qk_norm = 1, .qk_norm_full = 1, .moe = MOE_OLMOE};
LLAMA_STYLE(mixtral, MIXTRAL)
LLAMA_STYLE(olmoe, OLMOE)
LLAMA_STYLE_GGUF(olmoe, OLMOE, NAMES_LLAMA)

const ArchSpec arch_family_mixtral = {
    .kind = ARCH_MIXTRAL, .model_type = "mixtral", .arch_prefix = "Mixtral", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = mixtral_parse, .load = mixtral_load, .tokenizer = TOK_SOURCE_JSON,
};

const ArchSpec arch_family_olmoe = {
    .kind = ARCH_OLMOE, .model_type = "olmoe", .arch_prefix = "Olmoe", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = olmoe_parse, .load = olmoe_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "olmoe", .gguf_config = olmoe_gguf_config, .gguf_name = olmoe_gguf_name,
};
