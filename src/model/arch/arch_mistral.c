/* arch_mistral.c — Mistral, a Llama-style decoder (arch_llama.h): Llama's
 * block with sliding-window attention (sliding_window), nothing else apart. */
#include "arch_llama.h"

static const LlamaTraits MISTRAL = {0};
LLAMA_STYLE(mistral, MISTRAL)

const ArchSpec arch_family_mistral = {
    .kind = ARCH_MISTRAL, .model_type = "mistral", .arch_prefix = "Mistral", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = mistral_parse, .load = mistral_load, .tokenizer = TOK_SOURCE_JSON,
};
