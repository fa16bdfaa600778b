/* strtab.c — spelling -> id lookups for every tokenizer (strtab.h). */
#include "strtab.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

int av_strtab_init(AvStrTab *t, int n) {
    memset(t, 0, sizeof *t);
    if (n < 0 || n > INT32_MAX / 4) return -1;
    size_t cap = 16;
    while (cap < (size_t)n * 2 + 2) cap *= 2; /* at most half full: short probes */
    size_t ids = (size_t)n + 1;              /* never a zero-byte allocation */
    t->tok = calloc(ids, sizeof *t->tok);
    t->len = calloc(ids, sizeof *t->len);
    t->hash = calloc(ids, sizeof *t->hash);
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->tok || !t->len || !t->hash || !t->slots) {
        av_strtab_free(t);
        return -1;
    }
    memset(t->slots, 0xff, cap * sizeof *t->slots);
    t->mask = cap - 1;
    t->n = n;
    return 0;
}

void av_strtab_free(AvStrTab *t) {
    free(t->tok);
    free(t->len);
    free(t->hash);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint32_t hash2(const char *prefix, size_t plen, const char *s, size_t n) {
    return av_fnv1a(s, n, av_fnv1a(prefix, plen, AV_FNV_SEED));
}

int av_strtab_find2(const AvStrTab *t, const char *prefix, size_t plen, const char *s, size_t n) {
    uint32_t h = hash2(prefix, plen, s, n);
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->hash[id] == h && t->len[id] == plen + n && (plen == 0 || memcmp(t->tok[id], prefix, plen) == 0) &&
            memcmp(t->tok[id] + plen, s, n) == 0)
            return id;
    }
}

int av_strtab_set(AvStrTab *t, int id, const char *s, size_t n) {
    int first = av_strtab_find(t, s, n);
    t->tok[id] = s;
    t->len[id] = (uint32_t)n;
    t->hash[id] = hash2(NULL, 0, s, n);
    if (first >= 0) return first;
    size_t i = t->hash[id] & t->mask;
    while (t->slots[i] >= 0) i = (i + 1) & t->mask;
    t->slots[i] = id;
    return id;
}
