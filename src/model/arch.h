/* arch.h — the model families, one table row each (families.h lists them):
 * how config.json names a family's sizes (parse) and how its checkpoint names
 * its tensors (load). Adding a family = its row (an ArchSpec with designated
 * initializers) and its parse and load in src/model/arch/, and one line in
 * families.h; the engine (model.c, forward.c) needs no change unless the
 * family brings a new kind of block step. */
#ifndef ATTNVIZ_ARCH_H
#define ATTNVIZ_ARCH_H

#include <stddef.h>

#include "config.h"
#include "err.h"

struct cJSON;
struct Model;
struct GgufFile;

typedef struct {
    const char *model_type;    /* config.json's model_type */
    const char *arch_prefix;   /* architectures[0]'s prefix, for configs without model_type */
    ArchKind kind;
    const char *tensor_prefix; /* what task models (…ForMaskedLM, …ForCausalLM) put before the base names */
    const char *hidden_key, *heads_key; /* the config's names, for messages */
    /* Reads the family's keys into c (model_type and arch already set). */
    int (*parse)(ModelConfig *c, const struct cJSON *root, const char *path, AvErr *e);
    /* Fills m->w from m's checkpoint, every tensor shape-checked. */
    int (*load)(struct Model *m, AvErr *e);
    /* llama.cpp files, for families that have them (else NULL): general.architecture's
     * value, the hyper-parameters from the metadata, and the GGUF name of a
     * Hugging Face tensor name (-1 when the family has no such tensor there). */
    const char *gguf_arch;
    int (*gguf_config)(ModelConfig *c, const struct GgufFile *f, const char *path, AvErr *e);
    int (*gguf_name)(const char *hf_name, char *out, size_t len);
    int tokenizer;             /* TokSource: which files a folder's tokenizer is read from */
    unsigned gguf_tok;         /* TOK_GGUF_*: how its GGUF tokenizer is read */
} ArchSpec;

/* The row for a family; NULL for an unknown kind. */
const ArchSpec *arch_spec(ArchKind kind);
/* The row for config.json's model_type, else the first of its architectures
 * (by prefix); NULL when neither names a supported family. */
const ArchSpec *arch_detect(const char *model_type, const char *architecture);
/* The family of a config.json that names none (neither model_type nor
 * architectures): the oldest BERT configs. */
const ArchSpec *arch_default(void);
/* The row whose gguf_arch is name; NULL when none. */
const ArchSpec *arch_detect_gguf(const char *name);
/* "bert, roberta, …": the supported model_types, for messages. */
const char *arch_supported_list(void);
/* "llama, qwen2, …": the GGUF architectures read. */
const char *arch_gguf_list(void);
/* The TOK_GGUF_* flags of f's family (0 for a family not in the table). */
unsigned arch_gguf_tok_flags(const struct GgufFile *f);

/* Each family's row (families.h's stem), defined in its src/model/arch/ file. */
#define AV_FAMILY_DECL(kind, stem) extern const ArchSpec arch_family_##stem;
AV_FAMILIES(AV_FAMILY_DECL)
#undef AV_FAMILY_DECL

/* A vision-language model from llama.cpp's pair (arch_llava.c): the language model m (its text GGUF, loaded)
 * with the vision tower and projector of the mmproj GGUF at path: LLaVA (a llama text model; the legacy
 * converter's "clip" file with a LLaVA projector) or Gemma 3 (a gemma3 text model; convert_hf_to_gguf.py
 * --mmproj's projector_type "gemma3"). token_id(ctx, spelling): the text tokenizer's id of a token, -1 when
 * absent (LLaVA's <image>; Gemma 3's <start_of_image>, <image_soft_token> and <end_of_image>). */
int arch_llava_attach_mmproj(struct Model *m, const char *path, int (*token_id)(const void *ctx, const char *spelling),
                             const void *ctx, AvErr *e);

#endif
