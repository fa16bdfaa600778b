/* strtab.h — the one spelling -> id table the tokenizers share (WordPiece's
 * vocab.txt, byte-level BPE's vocab.json, tokenizer.json's vocabularies, the
 * merges GGUF files leave out): per id a spelling the caller keeps, and open
 * addressing over the ids, hashed with av_fnv1a. A spelling given twice keeps
 * its first id for lookups (the caller decides whether that is an error). */
#ifndef ATTNVIZ_STRTAB_H
#define ATTNVIZ_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char **tok; /* id -> spelling (the caller's bytes), NULL: not set */
    uint32_t *len;    /* id -> its length in bytes */
    uint32_t *hash;   /* id -> its hash, to skip most compares */
    int32_t *slots;   /* ids by hash, -1 = empty */
    size_t mask;
    int n;            /* ids 0..n-1 */
} AvStrTab;

/* Room for n ids (0 <= n <= INT32_MAX / 4), none set; 0, or -1 out of memory. */
int av_strtab_init(AvStrTab *t, int n);
void av_strtab_free(AvStrTab *t);
/* The id spelled prefix followed by s (plen and n bytes; prefix may be NULL
 * when plen is 0), or -1. */
int av_strtab_find2(const AvStrTab *t, const char *prefix, size_t plen, const char *s, size_t n);
static inline int av_strtab_find(const AvStrTab *t, const char *s, size_t n) { return av_strtab_find2(t, NULL, 0, s, n); }
/* Gives id (0..n-1, not set yet) the spelling s (n bytes, kept by the caller
 * while t lives, n < 2^32). Returns id, or the id that already had that
 * spelling (then id is set but not found by lookups). */
int av_strtab_set(AvStrTab *t, int id, const char *s, size_t n);

#endif
