/* arch_gptoss.c — gpt-oss, a Llama-style decoder (arch_llama.h) set apart
 * by its traits: learned attention sinks per head (self_attn.sinks), biases on
 * q/k/v/o, sliding window on alternate layers, YaRN; MoE MLPs with a biased
 * router (top-k of the logits, softmax over those k) and experts stacked in
 * 3-D tensors stored (in, out) — gate_up_proj interleaves gate and up
 * columns — with biases and a clamped SwiGLU. */
#include "arch_llama.h"

static const LlamaTraits GPT_OSS = {.window = 128, .slide = SLIDE_ALTERNATE, .theta = 150000.0f, .moe = MOE_GPTOSS,
                                    .sinks = 1};
LLAMA_STYLE(gpt_oss, GPT_OSS)
LLAMA_STYLE_GGUF(gpt_oss, GPT_OSS, NAMES_GPTOSS)

const ArchSpec arch_family_gpt_oss = {
    .kind = ARCH_GPT_OSS, .model_type = "gpt_oss", .arch_prefix = "GptOss", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = gpt_oss_parse, .load = gpt_oss_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "gpt-oss", .gguf_config = gpt_oss_gguf_config, .gguf_name = gpt_oss_gguf_name,
};
