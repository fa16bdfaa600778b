/* acmatch.h — byte strings found in a text in one pass (Aho-Corasick): a trie of
 * the strings, each node linked to its longest proper suffix that is also a node
 * (fail) and to the nearest node on that chain where a string ends (out). Reading
 * a text byte by byte costs amortized O(1) a byte, however long or many the
 * strings are: the strings that end at a position are the out chain of the state
 * there, longest first. tokjson.c finds added tokens with it (the strings stored
 * reversed, so a text read backwards gives the longest one starting at each
 * position) and runs Unigram's Viterbi over it (the pieces ending at each position).
 *
 * The trie is built from the strings sorted (each shares its common prefix with
 * the one before: no lookups while building), then numbered breadth first, so a
 * node's children are consecutive and in byte order: a lookup bisects them. */
#ifndef ATTNVIZ_ACMATCH_H
#define ATTNVIZ_ACMATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *s;
    size_t n;   /* > 0 bytes */
    int32_t id;
} AcString;

typedef struct {
    int32_t n;           /* nodes; node 0 is the root */
    int32_t *id;         /* (n) the string ending at a node, -1 none */
    int32_t *depth;      /* (n) a node's length in bytes */
    unsigned char *byte; /* (n) the byte leading to a node */
    int32_t *kids;       /* (n) a node's first child */
    int32_t *n_kids;     /* (n) its children, consecutive, by byte */
    int32_t *fail;       /* (n) its longest proper suffix that is a node */
    int32_t *out;        /* (n) the node itself when a string ends there, else the nearest such node on its
                          * fail chain, or -1 */
} AcAuto;

/* The automaton of n strings (each reversed when rev; a string given twice keeps the id of
 * its first, or its last when keep_last). 0, or -1 out of memory or past 2^31 nodes (a is
 * then empty; ac_free is safe either way). */
int ac_build(AcAuto *a, const AcString *strs, size_t n, int rev, int keep_last);
void ac_free(AcAuto *a);

/* The child of node for byte c, or -1. */
static inline int32_t ac_child(const AcAuto *a, int32_t node, unsigned char c) {
    int32_t lo = a->kids[node], hi = lo + a->n_kids[node];
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (a->byte[mid] == c) return mid;
        if (a->byte[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* The state after reading c in state q. */
static inline int32_t ac_step(const AcAuto *a, int32_t q, unsigned char c) {
    for (;;) {
        int32_t ch = ac_child(a, q, c);
        if (ch >= 0) return ch;
        if (!q) return 0;
        q = a->fail[q];
    }
}

/* The id of exactly s (n bytes, as built without rev), or -1. */
int32_t ac_find(const AcAuto *a, const char *s, size_t n);

#endif
