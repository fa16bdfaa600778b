/* acmatch.h — byte strings found in a text in one pass (Aho-Corasick): a trie of
 * the strings, each node linked to its longest proper suffix that is also a node
 * (fail) and to the nearest node on that chain where a string ends (out). Reading
 * a text byte by byte costs amortized O(1) a byte, however long or many the
 * strings are: the strings that end at a position are the out chain of the state
 * there, longest first. tokjson.c finds added tokens with it (the strings stored
 * reversed, so a text read backwards gives the longest one starting at each
 * position) and runs Unigram's Viterbi over it (the pieces ending at each position). */
#ifndef ATTNVIZ_ACMATCH_H
#define ATTNVIZ_ACMATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key;  /* parent << 8 | byte */
    int32_t child; /* -1: an empty slot */
} AcEdge;

typedef struct {
    AcEdge *edges;     /* (node, byte) -> child, open addressing, at most half full */
    size_t emask;
    int32_t *id;       /* (n) the string ending at a node, -1 none */
    int32_t *depth;    /* (n) a node's length in bytes */
    int32_t *fail;     /* (n) after ac_build */
    int32_t *out;      /* (n) after ac_build: the node itself when a string ends there, else the nearest such
                        * node on its fail chain, or -1 */
    int32_t *first, *next; /* (n) children lists, for ac_build's walk; freed by it */
    unsigned char *byte;   /* (n) the byte leading to a node, for ac_build; freed by it */
    size_t n, cap;     /* nodes (node 0 is the root) and room */
} AcAuto;

/* An empty automaton; 0, or -1 out of memory. */
int ac_init(AcAuto *a);
void ac_free(AcAuto *a);
/* Adds s (n > 0 bytes, reversed when rev) for id: a string added twice keeps the first id, or
 * the last when keep_last. 0, or -1 out of memory (a is then still safe to free). */
int ac_add(AcAuto *a, const char *s, size_t n, int32_t id, int rev, int keep_last);
/* The fail and out links, once every string is added; 0, or -1 out of memory. */
int ac_build(AcAuto *a);
static inline size_t ac_slot(uint64_t key, size_t mask) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 24) & mask; }
/* The child of node for byte c, or -1. */
static inline int32_t ac_child(const AcAuto *a, int32_t node, unsigned char c) {
    const uint64_t key = (uint64_t)(uint32_t)node << 8 | c;
    for (size_t i = ac_slot(key, a->emask);; i = (i + 1) & a->emask) {
        if (a->edges[i].child < 0) return -1;
        if (a->edges[i].key == key) return a->edges[i].child;
    }
}
/* The state after reading c in state q (ac_build done). */
static inline int32_t ac_step(const AcAuto *a, int32_t q, unsigned char c) {
    for (;;) {
        int32_t ch = ac_child(a, q, c);
        if (ch >= 0) return ch;
        if (!q) return 0;
        q = a->fail[q];
    }
}
/* The id of exactly s (n bytes, as added without rev), or -1. */
int32_t ac_find(const AcAuto *a, const char *s, size_t n);

#endif
