/* families.h — THE list of model families, one line each: X(KIND, stem).
 * Everything that names a family is derived from it: the ArchKind enum
 * (config.h: ARCH_<KIND>), the family table (arch.c: one row per line, in this
 * order, which detection by architectures prefix follows), and the rows'
 * declarations (arch.h). A family's row is `const ArchSpec arch_family_<stem>`,
 * written with designated initializers (arch.h's ArchSpec: its config.json and
 * GGUF names, its parse and load, its tokenizer) in the src/model/arch/ file
 * that implements it. Adding a family = that file (or a row in one) and one line
 * here; nothing else names it. */
#ifndef ATTNVIZ_FAMILIES_H
#define ATTNVIZ_FAMILIES_H

#define AV_FAMILIES(X)         \
    X(BERT, bert)              \
    X(ROBERTA, roberta)        \
    X(DISTILBERT, distilbert)  \
    X(XLM_ROBERTA, xlm_roberta) \
    X(ELECTRA, electra)        \
    X(GPT2, gpt2)              \
    X(LLAMA, llama)            \
    X(MISTRAL, mistral)        \
    X(QWEN2, qwen2)            \
    X(QWEN3_MOE, qwen3_moe)    \
    X(QWEN3, qwen3)            \
    X(GEMMA2, gemma2)          \
    X(GEMMA3, gemma3)          \
    X(PHI3, phi3)              \
    X(MIXTRAL, mixtral)        \
    X(OLMOE, olmoe)            \
    X(GPT_OSS, gpt_oss)        \
    X(MODERNBERT, modernbert)  \
    X(BART, bart)              \
    X(MARIAN, marian)          \
    X(T5, t5)                  \
    X(MT5, mt5)                \
    X(VIT, vit)                \
    X(DEIT, deit)              \
    X(DINOV2_REG, dinov2_reg)  \
    X(DINOV2, dinov2)          \
    X(CLIP_VISION, clip_vision) \
    X(CLIP, clip)              \
    X(SIGLIP_VISION, siglip_vision) \
    X(SIGLIP, siglip)          \
    X(LLAVA, llava)            \
    X(GEMMA3_VLM, gemma3_vlm)  \
    X(IDEFICS3, idefics3)

#endif
