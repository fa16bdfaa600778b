/* arch_phi3.c — Phi-3, a Llama-style decoder (arch_llama.h) set apart by its
 * traits: q/k/v fused in qkv_proj and gate/up in gate_up_proj (split at
 * load); LongRoPE (a top-level original_max_position_embeddings); partial
 * rotary. */
#include "arch_llama.h"

static const LlamaTraits PHI3 = {.fused = 1, .orig_max_top = 1};
LLAMA_STYLE(phi3, PHI3)
LLAMA_STYLE_GGUF(phi3, PHI3, NAMES_PHI3)

const ArchSpec arch_family_phi3 = {
    .kind = ARCH_PHI3, .model_type = "phi3", .arch_prefix = "Phi3", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = phi3_parse, .load = phi3_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "phi3", .gguf_config = phi3_gguf_config, .gguf_name = phi3_gguf_name,
};
