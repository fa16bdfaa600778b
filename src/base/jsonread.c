/* jsonread.c — cJSON's parse with every object's keys checked (jsonread.h). */
#include "jsonread.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where an object sits, for the message: the keys and indexes leading to it. */
typedef struct Seg {
    const struct Seg *up;
    const char *key; /* NULL: an array element */
    int index;
} Seg;

typedef struct {
    const char **keys; /* the current object's keys, sorted */
    size_t cap;
} Scratch;

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void where(char *buf, size_t n, const Seg *s) {
    const Seg *chain[64];
    int k = 0;
    for (; s && k < 64; s = s->up) chain[k++] = s;
    if (!k) {
        snprintf(buf, n, "the top-level object");
        return;
    }
    size_t len = 0;
    for (int i = k - 1; i >= 0 && len < n; i--) {
        const Seg *c = chain[i];
        int w = c->key ? snprintf(buf + len, n - len, "%s%.40s", len ? "." : "", c->key)
                       : snprintf(buf + len, n - len, "[%d]", c->index);
        if (w < 0) break;
        len += (size_t)w;
    }
    if (len >= n && n > 4) memcpy(buf + n - 4, "...", 4);
}

static int check(const cJSON *node, const Seg *at, Scratch *sc, const char *name, AvErr *e) {
    if (cJSON_IsObject(node)) {
        size_t n = 0;
        for (const cJSON *c = node->child; c; c = c->next) n++;
        if (n > 1) {
            if (n > sc->cap) {
                const char **k = realloc(sc->keys, n * sizeof *k);
                if (!k) return av_err(e, "%s: out of memory", name);
                sc->keys = k, sc->cap = n;
            }
            size_t i = 0;
            for (const cJSON *c = node->child; c; c = c->next) sc->keys[i++] = c->string ? c->string : "";
            qsort(sc->keys, n, sizeof *sc->keys, cmp_key);
            for (i = 1; i < n; i++)
                if (!strcmp(sc->keys[i - 1], sc->keys[i])) {
                    char w[160];
                    where(w, sizeof w, at);
                    return av_err(e, "%s: key \"%s\" appears twice in %s (JSON readers disagree on which one counts)",
                                  name, sc->keys[i], w);
                }
        }
        for (const cJSON *c = node->child; c; c = c->next) {
            if (!c->child) continue; /* only objects and arrays hold keys */
            const Seg s = {at, c->string ? c->string : "", 0};
            if (check(c, &s, sc, name, e)) return -1;
        }
    } else if (cJSON_IsArray(node)) {
        int i = 0;
        for (const cJSON *c = node->child; c; c = c->next, i++) {
            if (!c->child) continue;
            const Seg s = {at, NULL, i};
            if (check(c, &s, sc, name, e)) return -1;
        }
    }
    return 0;
}

/* The offset of a \u0000 escape inside a string of the (valid) JSON text, or -1: cJSON
 * decodes it into a NUL that ends the C string there, and the rest would be dropped unseen. */
static long nul_escape_at(const char *s, size_t n) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            in_str = s[i] == '"';
            continue;
        }
        if (s[i] == '"') {
            in_str = 0;
        } else if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return (long)i;
            i++; /* the escaped character */
        }
    }
    return -1;
}

int av_json_parse(cJSON **out, const char *buf, size_t len, const char *name, AvErr *e) {
    *out = cJSON_ParseWithLength(buf, len);
    if (!*out) return 1;
    const long nul = nul_escape_at(buf, len);
    if (nul >= 0) {
        cJSON_Delete(*out);
        *out = NULL;
        return av_err(e, "%s: a string holds \\u0000 (byte %ld): a NUL character, where C strings end, would cut it short",
                      name, nul);
    }
    Scratch sc = {NULL, 0};
    /* nesting is bounded by cJSON's parse (CJSON_NESTING_LIMIT): so is this recursion */
    const int rc = check(*out, NULL, &sc, name, e);
    free(sc.keys);
    if (rc) {
        cJSON_Delete(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}
