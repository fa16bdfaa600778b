/* arch.c — the table of model families. */
#include "arch.h"

#include <string.h>

static const ArchSpec table[] = {
    {"bert", "Bert", ARCH_BERT, "bert.", "hidden_size", "num_attention_heads", arch_bert_parse, arch_bert_load, NULL, NULL, NULL},
    {"roberta", "Roberta", ARCH_ROBERTA, "roberta.", "hidden_size", "num_attention_heads", arch_bert_parse,
     arch_bert_load, NULL, NULL, NULL},
    {"distilbert", "DistilBert", ARCH_DISTILBERT, "distilbert.", "dim", "n_heads", arch_distilbert_parse,
     arch_bert_load, NULL, NULL, NULL},
    {"gpt2", "GPT2", ARCH_GPT2, "transformer.", "n_embd", "n_head", arch_gpt2_parse, arch_gpt2_load, NULL, NULL, NULL},
    {"llama", "Llama", ARCH_LLAMA, "model.", "hidden_size", "num_attention_heads", arch_llama_parse, arch_llama_load,
     "llama", arch_llama_gguf_config, arch_llama_gguf_name},
    {"mistral", "Mistral", ARCH_MISTRAL, "model.", "hidden_size", "num_attention_heads", arch_llama_parse,
     arch_llama_load, NULL, NULL, NULL},
    {"qwen2", "Qwen2", ARCH_QWEN2, "model.", "hidden_size", "num_attention_heads", arch_llama_parse, arch_llama_load,
     "qwen2", arch_llama_gguf_config, arch_llama_gguf_name},
    {"qwen3", "Qwen3", ARCH_QWEN3, "model.", "hidden_size", "num_attention_heads", arch_llama_parse, arch_llama_load,
     "qwen3", arch_llama_gguf_config, arch_llama_gguf_name},
    {"gemma2", "Gemma2", ARCH_GEMMA2, "model.", "hidden_size", "num_attention_heads", arch_llama_parse,
     arch_llama_load, "gemma2", arch_llama_gguf_config, arch_gemma2_gguf_name},
};
#define N_ARCH (sizeof table / sizeof table[0])

const ArchSpec *arch_spec(ArchKind kind) {
    for (size_t i = 0; i < N_ARCH; i++)
        if (table[i].kind == kind) return &table[i];
    return NULL;
}

const ArchSpec *arch_detect(const char *model_type, const char *architecture) {
    for (size_t i = 0; i < N_ARCH; i++) {
        if (model_type && !strcmp(model_type, table[i].model_type)) return &table[i];
        if (!model_type && architecture &&
            !strncmp(architecture, table[i].arch_prefix, strlen(table[i].arch_prefix)))
            return &table[i];
    }
    return NULL;
}

const ArchSpec *arch_detect_gguf(const char *name) {
    for (size_t i = 0; i < N_ARCH; i++)
        if (table[i].gguf_arch && !strcmp(name, table[i].gguf_arch)) return &table[i];
    return NULL;
}

const char *arch_supported_list(void) {
    return "bert, roberta, distilbert, gpt2, llama, mistral, qwen2, qwen3 and gemma2";
}
