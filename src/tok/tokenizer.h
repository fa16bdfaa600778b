/* tokenizer.h — the tokenizers of the supported checkpoints, matching Hugging
 * Face's fast tokenizers:
 *  - BERT WordPiece (vocab.txt): BertNormalizer -> BertPreTokenizer -> WordPiece
 *    -> BertProcessing;
 *  - byte-level BPE (vocab.json + merges.txt, see bpe.h) with GPT-2's template
 *    (no special tokens added) or RoBERTa's (RobertaProcessing). */
#ifndef ATTNVIZ_TOKENIZER_H
#define ATTNVIZ_TOKENIZER_H

#include <stddef.h>
#include "err.h"

typedef struct Tokenizer Tokenizer;

typedef enum { TOK_STYLE_BERT, TOK_STYLE_GPT2, TOK_STYLE_ROBERTA, TOK_STYLE_JSON } TokStyle;

/* What a special token stands for in the template: the sequence start ([CLS],
 * RoBERTa's <s>) or a separator ([SEP], </s>); GPT-2 has neither. */
typedef enum { TOK_ROLE_NONE = 0, TOK_ROLE_CLS, TOK_ROLE_SEP } TokRole;

typedef struct {
    int n;              /* number of tokens, specials included */
    int *ids;           /* (n) */
    int *type_ids;      /* (n) BERT: 0 for [CLS] A [SEP], 1 for B [SEP]; GPT-2: 0 for
                           A, 1 for B; RoBERTa: all 0 (as Hugging Face returns them) */
    const char **tokens;/* (n) vocab spellings; point into the Tokenizer */
    const char **display;/* (n) the token as a person reads it: WordPiece: tokens[i]
                           itself; byte-level BPE: the spelling mapped back to bytes
                           (Ġ -> ' ', Ċ -> '\n') when they are valid UTF-8 without
                           NUL, else the spelling; specials as themselves. Point
                           into the Tokenizer. */
    unsigned char *word_start; /* (n) 1 when token i begins a word, as Hugging Face's
                           word_ids() count words: WordPiece: not a "##" piece;
                           byte-level: first piece of a pre-token (" world", ",",
                           "'s" are three words). Specials are word starts. */
    unsigned char *special; /* (n) 1 for the style's special tokens ([CLS] [SEP] ...,
                           <s> </s> ..., <|endoftext|>), template-added or written */
    unsigned char *role;    /* (n) TokRole of each token: CLS/SEP for the style's start
                           and separator tokens (template-added or written), else NONE */
    int byte_level;     /* spellings are byte-level BPE pieces (no "##" marks) */
    int b_start;        /* index of B's first token (BERT: its [SEP] when B is empty;
                           RoBERTa: its final </s>; GPT-2: n), or -1 when there is no B */
    int n_truncated;    /* tokens dropped to fit max_len (0 when none) */
} TokEncoding;

/* Loads vocab.txt (one token per line, CRLF accepted) for BERT. lowercase: 1
 * lowercases and strips accents (uncased models), 0 keeps text as is. */
int tok_load(Tokenizer **out, const char *vocab_path, int lowercase, AvErr *e);

/* Loads a byte-level BPE tokenizer: vocab.json (or encoder.json) and
 * merges.txt (or vocab.bpe). style GPT2: <|endoftext|> in the text stays one
 * token, nothing is added, a pair is A's tokens then B's. style ROBERTA:
 * <s> A </s> and <s> A </s></s> B </s>; <s> <pad> </s> <unk> <mask> in the
 * text stay single tokens, <mask> absorbing the spaces before it (as
 * Hugging Face's lstrip does); the vocab must have <s> and </s>. */
int tok_load_bpe(Tokenizer **out, const char *vocab_json, const char *merges, TokStyle style,
                 AvErr *e);
/* Loads Hugging Face's tokenizer.json (tokjson.h): any BPE or Unigram
 * tokenizer, its normalizers, pre-tokenizers, added tokens and template, as
 * the Rust library encodes. Spellings are the model's pieces (byte_level set
 * in encodings of byte-level BPE). */
int tok_load_json(Tokenizer **out, const char *tokenizer_json, AvErr *e);
/* Wraps an already built TjTokenizer (e.g. from GGUF metadata); takes it over. */
struct TjTokenizer;
int tok_from_tj(Tokenizer **out, struct TjTokenizer *tj, AvErr *e);
/* Which tokenizer a family's folders hold (families.h): tokenizer.json, or
 * the older vocab.txt (WordPiece) / vocab.json + merges.txt (byte-level BPE,
 * GPT-2's or RoBERTa's template) with tokenizer.json as the fallback. */
typedef enum {
    TOK_SOURCE_ANY = 0, /* no config: whatever files the folder has */
    TOK_SOURCE_JSON,
    TOK_SOURCE_WORDPIECE,
    TOK_SOURCE_BPE_GPT2,
    TOK_SOURCE_BPE_ROBERTA,
    TOK_SOURCE_NONE,    /* the family reads images: its folder has no tokenizer */
} TokSource;

/* What a model folder's config says about its tokenizer. */
typedef struct {
    const char *model_type;  /* config.json's model_type (for messages), NULL without a config */
    TokSource source;        /* the family's (TOK_SOURCE_ANY without a config) */
    int lowercase;           /* WordPiece: -1 infer (tokenizer_config.json, then tok_infer_lowercase), 0, 1 */
    char used[512];          /* out: the file the tokenizer was read from */
} TokDirHint;
/* The tokenizer of a model folder: the BERT family's vocab.txt, GPT-2's and
 * RoBERTa's vocab.json + merges.txt (their templates), and tokenizer.json for
 * every other family or when the older files are absent. One line naming
 * what is missing otherwise. */
int tok_load_dir(Tokenizer **out, const char *dir, TokDirHint *hint, AvErr *e);
/* The tokenizer a GGUF file carries (tokgguf.c). */
struct GgufFile;
/* flags: the family's quirks (families.h; arch_gguf_tok_flags reads them from the file) */
#define TOK_GGUF_SPM_GEMMA 1u /* merges in the tokens' order, blank tokens respelled (transformers' gemma_tokenizer) */
int tok_load_gguf(Tokenizer **out, const struct GgufFile *f, const char *path, unsigned flags, AvErr *e);
void tok_free(Tokenizer *t);

/* Encodes A (and B when b != NULL, even if empty) with the style's template;
 * truncates longest-first to max_len tokens, the template's special tokens
 * included (max_len <= 0: no limit; a limit below the template's special
 * token count is an error). Special tokens written in the text stay single
 * tokens, as in Hugging Face. Invalid UTF-8 fails with its byte offset. */
int tok_encode(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len,
               int max_len, TokEncoding *out, AvErr *e);
/* One text with nothing added around it (Hugging Face's add_special_tokens=False):
 * what a chat template's rendered text is tokenized with, its special tokens
 * written in the text and matched as single tokens. */
int tok_encode_plain(const Tokenizer *t, const char *text, size_t len, int max_len, TokEncoding *out, AvErr *e);
void tok_encoding_free(TokEncoding *enc);

int tok_vocab_size(const Tokenizer *t);
const char *tok_id_to_token(const Tokenizer *t, int id);
int tok_token_to_id(const Tokenizer *t, const char *token); /* -1 when absent */
int tok_lowercase(const Tokenizer *t);  /* always 0 for byte-level BPE */
TokStyle tok_style(const Tokenizer *t);
int tok_is_byte_level(const Tokenizer *t);
int tok_is_special(const Tokenizer *t, int id); /* one of the style's special tokens */

/* From ids back to text, for predictions and generated tokens:
 * tok_id_display is one id as TokEncoding's display reads (NULL when out of
 * range); tok_decode is the text of ids (byte-level pieces as their bytes,
 * SentencePiece's "▁" as spaces, WordPiece's "##" joined, special tokens as
 * spelled; bytes that are not UTF-8 become U+FFFD), *out to free;
 * tok_encoding_append adds tokens by id to an encoding (type 0, no role). */
const char *tok_id_display(const Tokenizer *t, int id);
int tok_decode(const Tokenizer *t, const int *ids, int n, char **out, AvErr *e);
int tok_encoding_append(const Tokenizer *t, TokEncoding *enc, const int *ids, int n, AvErr *e);
/* The bytes tok_decode joins before its UTF-8 check (a token may end inside
 * a character: a stream of them is checked as it grows): *out (to free,
 * NUL-terminated, though it may hold NULs) and *len. first: ids[0] begins the
 * text (WordPiece puts no space before it); 0 continues a text. */
int tok_decode_bytes(const Tokenizer *t, const int *ids, int n, int first, char **out, size_t *len, AvErr *e);
/* n bytes as UTF-8 text the way tok_decode makes it: each maximal ill-formed
 * run and each NUL as U+FFFD. *out (to free, NUL-terminated) and *len. */
int tok_utf8_lossy(const char *s, size_t n, char **out, size_t *len, AvErr *e);
/* How tok_encoding_append spells an id past the tokenizer's vocabulary (a
 * padded embedding row): the model can pick one; it decodes to nothing. */
#define TOK_NO_TOKEN "<no token>"

/* Heuristic Hugging Face also relies on when tokenizer_config.json is absent:
 * the model name says cased/uncased, else a vocab without upper-case word
 * tokens is uncased. Returns 1 (lowercase) or 0. */
int tok_infer_lowercase(const char *model_dir, const char *vocab_path);

#endif
