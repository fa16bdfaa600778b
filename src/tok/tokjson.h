/* tokjson.h — Hugging Face's tokenizer.json read generically, matching the
 * Rust `tokenizers` library's Tokenizer.encode: added tokens split the raw
 * text; each gap is normalized (NFC/NFKC/NFD/NFKD, Lowercase, Replace,
 * Prepend, Strip, Sequence), pre-tokenized (Split with an Oniguruma regex or
 * a string, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit,
 * Punctuation, Sequence) and run through the BPE model (byte-level, or with
 * byte_fallback; ignore_merges) or the Unigram model (Viterbi over the pieces'
 * scores, unknowns fused, byte fallback), after the Precompiled normalizer
 * (SentencePiece's charsmap) where the file has it; the post-processor's template (TemplateProcessing,
 * RobertaProcessing, BertProcessing, ByteLevel) says what surrounds A and B.
 * tokenizer.c wraps this as a Tokenizer (tok_load_json). */
#ifndef ATTNVIZ_TOKJSON_H
#define ATTNVIZ_TOKJSON_H

#include <stddef.h>

#include "err.h"

struct cJSON;
typedef struct TjTokenizer TjTokenizer;

/* One sequence's tokens: ids with, per token, whether it begins a
 * pre-token (a word, as word_ids() counts them) and whether it is a special
 * added token. Grown by tj_encode; free with tj_ids_free. */
typedef struct {
    int *ids;
    unsigned char *word_start, *special;
    size_t n, cap;
} TjIds;

/* An item of the post-processor's template: a special token, or sequence A/B. */
typedef struct {
    int seq;      /* -1: the special token id; 0: A; 1: B */
    int id;
    int type_id;
} TjItem;

/* Builds the tokenizer from a parsed tokenizer.json (tok_load_json reads the
 * file; GGUF metadata builds a document); name is used in messages: one line
 * naming the file and the component for anything unsupported or malformed. */
int tj_load_cjson(TjTokenizer **out, const struct cJSON *root, const char *name, AvErr *e);
void tj_free(TjTokenizer *t);

/* Tokenizes one sequence (no template), appending to out. Text must be valid UTF-8. */
int tj_encode(const TjTokenizer *t, const char *text, size_t len, TjIds *out, AvErr *e);
void tj_ids_free(TjIds *ids);

/* The template for one sequence (pair = 0) or two; items point into t. */
int tj_template(const TjTokenizer *t, int pair, const TjItem **items);

int tj_vocab_size(const TjTokenizer *t);
const char *tj_id_to_token(const TjTokenizer *t, int id);   /* NULL when out of range or unused */
const char *tj_id_to_display(const TjTokenizer *t, int id); /* the token as a person reads it */
int tj_token_to_id(const TjTokenizer *t, const char *s, size_t len); /* -1 when absent */
int tj_is_special(const TjTokenizer *t, int id);
int tj_byte_level(const TjTokenizer *t);

#endif
