/* families.h — THE list of model families, one line each. Everything that
 * names a family is derived from it: the ArchKind enum (config.h), arch.c's
 * table (detection from config.json or a GGUF file, the supported-names text
 * of messages), the tokenizer a folder of that family uses and how a GGUF's
 * tokenizer is read. Adding a family = its parse/load functions in
 * src/model/arch/ and one line here; nothing else names it.
 *
 * X(KIND, model_type, architectures prefix, tensor prefix, config's hidden and heads keys,
 *   parse, load, GGUF general.architecture (NULL: none), gguf_config, gguf_name,
 *   tokenizer of a folder (TokSource), GGUF tokenizer flags (TOK_GGUF_*)) */
#ifndef ATTNVIZ_FAMILIES_H
#define ATTNVIZ_FAMILIES_H

#define AV_FAMILIES(X)                                                                                              \
    X(BERT, "bert", "Bert", "bert.", "hidden_size", "num_attention_heads", arch_bert_parse, arch_bert_load, NULL,    \
      NULL, NULL, TOK_SOURCE_WORDPIECE, 0)                                                                          \
    X(ROBERTA, "roberta", "Roberta", "roberta.", "hidden_size", "num_attention_heads", arch_roberta_parse,          \
      arch_bert_load, NULL, NULL, NULL, TOK_SOURCE_BPE_ROBERTA, 0)                                                  \
    X(DISTILBERT, "distilbert", "DistilBert", "distilbert.", "dim", "n_heads", arch_distilbert_parse,               \
      arch_bert_load, NULL, NULL, NULL, TOK_SOURCE_WORDPIECE, 0)                                                    \
    X(XLM_ROBERTA, "xlm-roberta", "XLMRoberta", "roberta.", "hidden_size", "num_attention_heads",                   \
      arch_roberta_parse, arch_bert_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                     \
    X(ELECTRA, "electra", "Electra", "electra.", "hidden_size", "num_attention_heads", arch_electra_parse,          \
      arch_bert_load, NULL, NULL, NULL, TOK_SOURCE_WORDPIECE, 0)                                                    \
    X(GPT2, "gpt2", "GPT2", "transformer.", "n_embd", "n_head", arch_gpt2_parse, arch_gpt2_load, NULL, NULL, NULL,  \
      TOK_SOURCE_BPE_GPT2, 0)                                                                                       \
    X(LLAMA, "llama", "Llama", "model.", "hidden_size", "num_attention_heads", arch_llama_parse, arch_llama_load,    \
      "llama", arch_llama_gguf_config, arch_llama_gguf_name, TOK_SOURCE_JSON, 0)                                    \
    X(MISTRAL, "mistral", "Mistral", "model.", "hidden_size", "num_attention_heads", arch_mistral_parse,            \
      arch_llama_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                                        \
    X(QWEN2, "qwen2", "Qwen2", "model.", "hidden_size", "num_attention_heads", arch_qwen2_parse, arch_llama_load,   \
      "qwen2", arch_qwen2_gguf_config, arch_llama_gguf_name, TOK_SOURCE_JSON, 0)                                    \
    X(QWEN3_MOE, "qwen3_moe", "Qwen3Moe", "model.", "hidden_size", "num_attention_heads", arch_qwen3_moe_parse,     \
      arch_qwen3_moe_load, "qwen3moe", arch_qwen3_moe_gguf_config, arch_llama_gguf_name, TOK_SOURCE_JSON, 0)                                                   \
    X(QWEN3, "qwen3", "Qwen3", "model.", "hidden_size", "num_attention_heads", arch_qwen3_parse, arch_llama_load,   \
      "qwen3", arch_qwen3_gguf_config, arch_llama_gguf_name, TOK_SOURCE_JSON, 0)                                    \
    X(GEMMA2, "gemma2", "Gemma2", "model.", "hidden_size", "num_attention_heads", arch_gemma2_parse,                \
      arch_llama_load, "gemma2", arch_gemma2_gguf_config, arch_gemma2_gguf_name, TOK_SOURCE_JSON,                   \
      TOK_GGUF_SPM_GEMMA)                                                                                           \
    X(GEMMA3, "gemma3_text", "Gemma3ForCausalLM", "model.", "hidden_size", "num_attention_heads", arch_gemma3_parse, \
      arch_llama_load, "gemma3", arch_gemma3_gguf_config, arch_gemma2_gguf_name, TOK_SOURCE_JSON,                   \
      TOK_GGUF_SPM_GEMMA)                                                                                           \
    X(PHI3, "phi3", "Phi3", "model.", "hidden_size", "num_attention_heads", arch_phi3_parse, arch_phi3_load, "phi3", \
      arch_phi3_gguf_config, arch_phi3_gguf_name, TOK_SOURCE_JSON, 0)                                              \
    X(MIXTRAL, "mixtral", "Mixtral", "model.", "hidden_size", "num_attention_heads", arch_mixtral_parse,           \
      arch_mixtral_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                                      \
    X(OLMOE, "olmoe", "Olmoe", "model.", "hidden_size", "num_attention_heads", arch_olmoe_parse, arch_olmoe_load,  \
      "olmoe", arch_olmoe_gguf_config, arch_llama_gguf_name, TOK_SOURCE_JSON, 0)                                                                         \
    X(GPT_OSS, "gpt_oss", "GptOss", "model.", "hidden_size", "num_attention_heads", arch_gptoss_parse,              \
      arch_gptoss_load, "gpt-oss", arch_gptoss_gguf_config, arch_gptoss_gguf_name, TOK_SOURCE_JSON, 0)              \
    X(MODERNBERT, "modernbert", "ModernBert", "model.", "hidden_size", "num_attention_heads", arch_modernbert_parse, \
      arch_modernbert_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                                    \
    X(BART, "bart", "Bart", "model.", "d_model", "encoder_attention_heads", arch_bart_parse, arch_bart_load, NULL,   \
      NULL, NULL, TOK_SOURCE_BPE_ROBERTA, 0)                                                                        \
    X(MARIAN, "marian", "Marian", "model.", "d_model", "encoder_attention_heads", arch_marian_parse, arch_bart_load, \
      NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                                                         \
    X(T5, "t5", "T5", "", "d_model", "num_heads", arch_t5_parse, arch_t5_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0) \
    X(MT5, "mt5", "MT5", "", "d_model", "num_heads", arch_mt5_parse, arch_t5_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0) \
    X(VIT, "vit", "ViT", "vit.", "hidden_size", "num_attention_heads", arch_vit_parse, arch_vit_load, NULL, NULL, NULL, \
      TOK_SOURCE_NONE, 0)                                                                                           \
    X(DEIT, "deit", "DeiT", "deit.", "hidden_size", "num_attention_heads", arch_deit_parse, arch_vit_load, NULL, NULL, \
      NULL, TOK_SOURCE_NONE, 0)                                                                                     \
    X(DINOV2_REG, "dinov2_with_registers", "Dinov2WithRegisters", "dinov2_with_registers.", "hidden_size",          \
      "num_attention_heads", arch_dinov2_reg_parse, arch_dinov2_load, NULL, NULL, NULL, TOK_SOURCE_NONE, 0)        \
    X(DINOV2, "dinov2", "Dinov2", "dinov2.", "hidden_size", "num_attention_heads", arch_dinov2_parse, arch_dinov2_load, \
      NULL, NULL, NULL, TOK_SOURCE_NONE, 0)                                                                         \
    X(CLIP_VISION, "clip_vision_model", "CLIPVision", "vision_model.", "hidden_size", "num_attention_heads",       \
      arch_clip_vision_parse, arch_clip_vision_load, "clip", arch_clip_gguf_config, arch_clip_gguf_name,           \
      TOK_SOURCE_NONE, 0)                                                         \
    X(CLIP, "clip", "CLIP", "", "hidden_size", "num_attention_heads", arch_clip_parse, arch_clip_load, NULL, NULL,  \
      NULL, TOK_SOURCE_JSON, 0)                                                                                     \
    X(SIGLIP_VISION, "siglip_vision_model", "SiglipVision", "vision_model.", "hidden_size", "num_attention_heads", \
      arch_siglip_vision_parse, arch_siglip_vision_load, NULL, NULL, NULL, TOK_SOURCE_NONE, 0)                            \
    X(SIGLIP, "siglip", "Siglip", "", "hidden_size", "num_attention_heads", arch_siglip_parse, arch_siglip_load, NULL, \
      NULL, NULL, TOK_SOURCE_JSON, 0)                                                                                     \
    X(LLAVA, "llava", "LlavaForConditionalGeneration", "", "hidden_size", "num_attention_heads", arch_llava_parse,   \
      arch_llava_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)                                                                                   \
    X(GEMMA3_VLM, "gemma3", "Gemma3ForConditionalGeneration", "", "hidden_size", "num_attention_heads",          \
      arch_gemma3_vlm_parse, arch_gemma3_vlm_load, NULL, NULL, NULL, TOK_SOURCE_JSON, 0)

#endif
