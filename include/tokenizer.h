/* tokenizer.h — BERT WordPiece tokenizer, matching Hugging Face's tokenizer.json
 * pipeline (BertNormalizer -> BertPreTokenizer -> WordPiece -> BertProcessing). */
#ifndef ATTNVIZ_TOKENIZER_H
#define ATTNVIZ_TOKENIZER_H

#include <stddef.h>
#include "err.h"

typedef struct Tokenizer Tokenizer;

typedef struct {
    int n;              /* number of tokens, specials included */
    int *ids;           /* (n) */
    int *type_ids;      /* (n) 0 for [CLS] A [SEP], 1 for B [SEP] */
    const char **tokens;/* (n) vocab spellings; point into the Tokenizer */
    int b_start;        /* index of B's first token (its [SEP] when B is empty),
                           or -1 when there is no B */
    int n_truncated;    /* tokens dropped to fit max_len (0 when none) */
} TokEncoding;

/* Loads vocab.txt (one token per line, CRLF accepted). lowercase: 1 lowercases
 * and strips accents (uncased models), 0 keeps text as is. */
int tok_load(Tokenizer **out, const char *vocab_path, int lowercase, AvErr *e);
void tok_free(Tokenizer *t);

/* Encodes A (and B when b != NULL, even if empty) as [CLS] A [SEP] (B [SEP]);
 * truncates longest-first to max_len tokens (max_len <= 0: no limit; a limit
 * below the 2 or 3 special tokens is an error). [PAD] [UNK] [CLS] [SEP] [MASK]
 * written in the text stay single tokens, as in Hugging Face. Invalid UTF-8
 * fails with its byte offset. */
int tok_encode(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len,
               int max_len, TokEncoding *out, AvErr *e);
void tok_encoding_free(TokEncoding *enc);

int tok_vocab_size(const Tokenizer *t);
const char *tok_id_to_token(const Tokenizer *t, int id);
int tok_token_to_id(const Tokenizer *t, const char *token); /* -1 when absent */
int tok_lowercase(const Tokenizer *t);

/* Heuristic Hugging Face also relies on when tokenizer_config.json is absent:
 * the model name says cased/uncased, else a vocab without upper-case word
 * tokens is uncased. Returns 1 (lowercase) or 0. */
int tok_infer_lowercase(const char *model_dir, const char *vocab_path);

#endif
