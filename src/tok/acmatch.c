/* acmatch.c — the Aho-Corasick automaton of acmatch.h. */
#include "acmatch.h"

#include <stdlib.h>
#include <string.h>

int ac_init(AcAuto *a) {
    memset(a, 0, sizeof *a);
    a->cap = 64;
    a->emask = 2 * a->cap - 1;
    a->edges = malloc((a->emask + 1) * sizeof *a->edges);
    a->id = malloc(a->cap * sizeof *a->id);
    a->depth = malloc(a->cap * sizeof *a->depth);
    a->first = malloc(a->cap * sizeof *a->first);
    a->next = malloc(a->cap * sizeof *a->next);
    a->byte = malloc(a->cap);
    if (!a->edges || !a->id || !a->depth || !a->first || !a->next || !a->byte) {
        ac_free(a);
        return -1;
    }
    for (size_t i = 0; i <= a->emask; i++) a->edges[i].child = -1;
    a->n = 1;
    a->id[0] = -1, a->depth[0] = 0, a->first[0] = -1, a->next[0] = -1;
    return 0;
}

void ac_free(AcAuto *a) {
    free(a->edges), free(a->id), free(a->depth), free(a->fail), free(a->out), free(a->first), free(a->next);
    free(a->byte);
    memset(a, 0, sizeof *a);
}

static void put(AcEdge *edges, size_t mask, uint64_t key, int32_t child) {
    size_t k = ac_slot(key, mask);
    while (edges[k].child >= 0) k = (k + 1) & mask;
    edges[k] = (AcEdge){key, child};
}

static int grow_arr(int32_t **p, size_t cap) {
    int32_t *q = realloc(*p, cap * sizeof *q);
    if (!q) return -1;
    *p = q;
    return 0;
}

/* Room for one more node: the node arrays and the edge table double together (edges <= nodes - 1). */
static int room(AcAuto *a) {
    if (a->n < a->cap) return 0;
    size_t cap = 2 * a->cap, emask = 2 * cap - 1;
    AcEdge *ne = malloc((emask + 1) * sizeof *ne);
    unsigned char *nb = ne ? realloc(a->byte, cap) : NULL;
    if (nb) a->byte = nb;
    if (!ne || !nb || grow_arr(&a->id, cap) || grow_arr(&a->depth, cap) || grow_arr(&a->first, cap) ||
        grow_arr(&a->next, cap)) {
        free(ne);
        return -1;
    }
    for (size_t k = 0; k <= emask; k++) ne[k].child = -1;
    for (size_t k = 0; k <= a->emask; k++)
        if (a->edges[k].child >= 0) put(ne, emask, a->edges[k].key, a->edges[k].child);
    free(a->edges);
    a->edges = ne, a->emask = emask, a->cap = cap;
    return 0;
}

int ac_add(AcAuto *a, const char *s, size_t n, int32_t id, int rev, int keep_last) {
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[rev ? n - 1 - i : i];
        int32_t ch = ac_child(a, node, c);
        if (ch < 0) {
            if (room(a)) return -1;
            ch = (int32_t)a->n++;
            put(a->edges, a->emask, (uint64_t)(uint32_t)node << 8 | c, ch);
            a->id[ch] = -1, a->depth[ch] = a->depth[node] + 1;
            a->first[ch] = -1, a->next[ch] = a->first[node], a->first[node] = ch, a->byte[ch] = c;
        }
        node = ch;
    }
    if (n && (keep_last || a->id[node] < 0)) a->id[node] = id;
    return 0;
}

int ac_build(AcAuto *a) {
    int32_t *queue = malloc(a->n * sizeof *queue);
    a->fail = malloc(a->n * sizeof *a->fail);
    a->out = malloc(a->n * sizeof *a->out);
    if (!queue || !a->fail || !a->out) {
        free(queue);
        return -1;
    }
    /* breadth first: a node's fail link is shallower, so it is done before the node */
    size_t head = 0, tail = 0;
    a->fail[0] = 0, a->out[0] = -1;
    queue[tail++] = 0;
    while (head < tail) {
        const int32_t u = queue[head++];
        for (int32_t v = a->first[u]; v >= 0; v = a->next[v]) {
            int32_t f = 0;
            if (u) { /* the longest proper suffix of u's string that continues with v's byte */
                const unsigned char c = a->byte[v];
                f = a->fail[u];
                for (;;) {
                    int32_t g = ac_child(a, f, c);
                    if (g >= 0) {
                        f = g;
                        break;
                    }
                    if (!f) break;
                    f = a->fail[f];
                }
            }
            a->fail[v] = f;
            a->out[v] = a->id[v] >= 0 ? v : a->out[f];
            queue[tail++] = v;
        }
    }
    free(queue);
    free(a->first), free(a->next), free(a->byte);
    a->first = a->next = NULL;
    a->byte = NULL;
    return 0;
}

int32_t ac_find(const AcAuto *a, const char *s, size_t n) {
    int32_t node = 0;
    for (size_t i = 0; i < n && node >= 0; i++) node = ac_child(a, node, (unsigned char)s[i]);
    return node > 0 ? a->id[node] : -1;
}
