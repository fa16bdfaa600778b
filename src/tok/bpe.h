/* bpe.h — byte-level BPE as GPT-2 and RoBERTa use it, matching Hugging Face
 * `tokenizers` (ByteLevel pre-tokenizer + BPE model): vocab.json/encoder.json,
 * merges.txt/vocab.bpe, GPT-2's byte <-> unicode table, GPT-2's pre-tokenizer
 * pattern and merges applied by rank. Special tokens, templates and
 * truncation live in tokenizer.c (tok_load_bpe). */
#ifndef ATTNVIZ_BPE_H
#define ATTNVIZ_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

typedef struct BpeModel BpeModel;

/* Loads the vocabulary (a JSON object token -> id; ids must be exactly
 * 0..n-1, each once) and the merges (one "a b" per line, lines starting with
 * "#version" skipped; a later duplicate of a merge wins, as in Hugging Face).
 * Every merge's parts and result must be in the vocabulary, and so must the
 * 256 byte symbols. */
int bpe_load(BpeModel **out, const char *vocab_path, const char *merges_path, AvErr *e);
void bpe_free(BpeModel *m);

int bpe_vocab_size(const BpeModel *m);
int bpe_n_merges(const BpeModel *m);
const char *bpe_id_to_token(const BpeModel *m, int id); /* NULL when out of range */
int bpe_token_to_id(const BpeModel *m, const char *tok, size_t len); /* -1 when absent */

/* The token as a person reads it: its spelling mapped back to bytes (Ġ -> ' ',
 * Ċ -> '\n') when those bytes are valid UTF-8 without NUL, else the spelling
 * itself (a piece holding part of a character). Owned by the model. */
const char *bpe_id_to_display(const BpeModel *m, int id);

/* GPT-2's bytes_to_unicode: every byte gets a printable code point (printable
 * Latin-1 bytes keep theirs, the other 68 get U+0100..U+0143 in byte order). */
uint32_t bpe_byte_to_cp(uint8_t b);
int bpe_cp_to_byte(uint32_t cp); /* -1 for code points outside the table */

/* Unicode White_Space, which is what Hugging Face's regex engine (Oniguruma)
 * takes \s to be and Rust's char::is_whitespace tests. */
int bpe_is_space(int32_t c);

/* End (exclusive byte offset) of the pre-token starting at pos, by GPT-2's
 * pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * over code points. s[0..len) must be valid UTF-8 and pos < len a character start. */
size_t bpe_pretoken_end(const char *s, size_t len, size_t pos);

/* Per-caller working memory (merge buffers and a cache of recent words).
 * The model is read-only during encoding; give each thread its own scratch. */
typedef struct BpeScratch BpeScratch;
BpeScratch *bpe_scratch_new(void);
void bpe_scratch_free(BpeScratch *sc);

/* Applies the merges to one pre-token (raw bytes, not byte-mapped). *ids
 * points into the scratch and stays valid until its next use. 0 or -1 (out
 * of memory). */
int bpe_encode_word(const BpeModel *m, BpeScratch *sc, const char *w, size_t len, const int **ids,
                    size_t *n, AvErr *e);

#endif
