/* arch_gemma.c — Gemma 2 and Gemma 3, Llama-style decoders (arch_llama.h)
 * set apart by their traits:
 *   gemma2   RMSNorm scaling by 1 + w, embeddings times sqrt(hidden), GeGLU,
 *            query_pre_attn_scalar, attention-logit soft-capping, sandwich
 *            norms around both sublayers, sliding window on alternate layers
 *   gemma3   Gemma 2's block without soft-capping, plus q/k RMSNorm (1 + w);
 *            5 sliding layers to 1 global, the sliding ones with their own
 *            unscaled rotary base (rope_local_base_freq)
 * Their GGUF tokenizers are SentencePiece's as transformers' gemma tokenizer
 * reads them (TOK_GGUF_SPM_GEMMA). */
#include "arch_llama.h"

static const LlamaTraits GEMMA2 = {.gemma = 1, .window = 4096, .slide = SLIDE_ALTERNATE, .softcap = 1},
                         GEMMA3 = {.gemma = 1, .qk_norm = 1, .window = 4096, .slide = SLIDE_PATTERN,
                                   .rope_local = 1, .theta = 1e6f};
LLAMA_STYLE(gemma2, GEMMA2)
LLAMA_STYLE_GGUF(gemma2, GEMMA2, NAMES_GEMMA)
LLAMA_STYLE(gemma3, GEMMA3)
LLAMA_STYLE_GGUF(gemma3, GEMMA3, NAMES_GEMMA)

const ArchSpec arch_family_gemma2 = {
    .kind = ARCH_GEMMA2, .model_type = "gemma2", .arch_prefix = "Gemma2", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = gemma2_parse, .load = gemma2_load, .tokenizer = TOK_SOURCE_JSON, .gguf_tok = TOK_GGUF_SPM_GEMMA,
    .gguf_arch = "gemma2", .gguf_config = gemma2_gguf_config, .gguf_name = gemma2_gguf_name,
};

const ArchSpec arch_family_gemma3 = {
    .kind = ARCH_GEMMA3, .model_type = "gemma3_text", .arch_prefix = "Gemma3ForCausalLM", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = gemma3_parse, .load = gemma3_load, .tokenizer = TOK_SOURCE_JSON, .gguf_tok = TOK_GGUF_SPM_GEMMA,
    .gguf_arch = "gemma3", .gguf_config = gemma3_gguf_config, .gguf_name = gemma3_gguf_name,
};
