/* acmatch.c — the Aho-Corasick automaton of acmatch.h. */
#include "acmatch.h"

#include <stdlib.h>
#include <string.h>

void ac_free(AcAuto *a) {
    free(a->id), free(a->depth), free(a->byte), free(a->kids), free(a->n_kids), free(a->fail), free(a->out);
    memset(a, 0, sizeof *a);
}

typedef struct {
    const AcString *s;
    int rev;
} Ctx;

static unsigned char at(const AcString *x, size_t k, int rev) { return (unsigned char)x->s[rev ? x->n - 1 - k : k]; }

static size_t common(const AcString *x, const AcString *y, int rev) {
    const size_t m = x->n < y->n ? x->n : y->n;
    size_t k = 0;
    if (!rev) {
        while (k < m && x->s[k] == y->s[k]) k++;
    } else {
        while (k < m && at(x, k, 1) == at(y, k, 1)) k++;
    }
    return k;
}

static int cmp_str(const void *a, const void *b, void *ctx) {
    const Ctx *c = ctx;
    const size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const AcString *x = &c->s[i], *y = &c->s[j];
    const size_t k = common(x, y, c->rev);
    if (k < x->n && k < y->n) return at(x, k, c->rev) < at(y, k, c->rev) ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return (i > j) - (i < j); /* a string given twice: in the order given */
}

int ac_build(AcAuto *a, const AcString *strs, size_t n, int rev, int keep_last) {
    memset(a, 0, sizeof *a);
    size_t *ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord) return -1;
    for (size_t i = 0; i < n; i++) ord[i] = i;
    Ctx ctx = {strs, rev};
    qsort_r(ord, n, sizeof *ord, cmp_str, &ctx);
    /* nodes: the root and, per string, the bytes past what it shares with the one before */
    size_t nodes = 1, longest = 0;
    for (size_t k = 0; k < n; k++) {
        const AcString *x = &strs[ord[k]];
        nodes += x->n - (k ? common(&strs[ord[k - 1]], x, rev) : 0);
        if (x->n > longest) longest = x->n;
        if (nodes > INT32_MAX) {
            free(ord);
            return -1;
        }
    }
    /* the trie in insertion order (t*), then renumbered breadth first */
    int32_t *tid = malloc(nodes * sizeof *tid), *tdepth = malloc(nodes * sizeof *tdepth);
    int32_t *tfirst = malloc(nodes * sizeof *tfirst), *tnext = malloc(nodes * sizeof *tnext);
    unsigned char *tbyte = malloc(nodes);
    int32_t *path = malloc((longest + 1) * sizeof *path), *order = malloc(nodes * sizeof *order);
    a->id = malloc(nodes * sizeof *a->id), a->depth = malloc(nodes * sizeof *a->depth), a->byte = malloc(nodes);
    a->kids = malloc(nodes * sizeof *a->kids), a->n_kids = malloc(nodes * sizeof *a->n_kids);
    a->fail = malloc(nodes * sizeof *a->fail), a->out = malloc(nodes * sizeof *a->out);
    int rc = -1;
    if (!tid || !tdepth || !tfirst || !tnext || !tbyte || !path || !order || !a->id || !a->depth || !a->byte || !a->kids ||
        !a->n_kids || !a->fail || !a->out)
        goto done;
    int32_t m = 1;
    tid[0] = -1, tdepth[0] = 0, tfirst[0] = tnext[0] = -1, tbyte[0] = 0, path[0] = 0;
    for (size_t k = 0; k < n; k++) {
        const AcString *x = &strs[ord[k]];
        if (!x->n) continue; /* sorted first: shares nothing, holds no node */
        const size_t l = k ? common(&strs[ord[k - 1]], x, rev) : 0, prev_n = k ? strs[ord[k - 1]].n : 0;
        for (size_t d = l; d < x->n; d++) {
            /* a new last child of path[d]: sorted input gives children in byte order; the child
             * before it, if any, is the previous string's node at depth d + 1 */
            const int32_t v = m++, parent = path[d];
            tid[v] = -1, tdepth[v] = (int32_t)d + 1, tbyte[v] = at(x, d, rev), tfirst[v] = tnext[v] = -1;
            if (d == l && k && l < prev_n) tnext[path[d + 1]] = v;
            else tfirst[parent] = v;
            path[d + 1] = v;
        }
        const int32_t end = path[x->n];
        if (tid[end] < 0 || keep_last) tid[end] = x->id;
    }
    /* breadth first: order[new] = old; each node's children get consecutive numbers */
    int32_t done_n = 0, next = 1;
    order[0] = 0;
    while (done_n < next) {
        const int32_t u = order[done_n];
        a->kids[done_n] = next;
        for (int32_t v = tfirst[u]; v >= 0; v = tnext[v]) order[next++] = v;
        a->n_kids[done_n] = next - a->kids[done_n];
        done_n++;
    }
    for (int32_t k = 0; k < m; k++) a->id[k] = tid[order[k]], a->depth[k] = tdepth[order[k]], a->byte[k] = tbyte[order[k]];
    a->n = m;
    /* a node's fail link is shallower, so numbered and done before it */
    a->fail[0] = 0, a->out[0] = -1;
    for (int32_t u = 0; u < m; u++)
        for (int32_t v = a->kids[u]; v < a->kids[u] + a->n_kids[u]; v++) {
            int32_t f = 0;
            if (u) { /* the longest proper suffix of u's string that continues with v's byte */
                f = a->fail[u];
                for (;;) {
                    const int32_t g = ac_child(a, f, a->byte[v]);
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
        }
    rc = 0;
done:
    free(ord), free(tid), free(tdepth), free(tfirst), free(tnext), free(tbyte), free(path), free(order);
    if (rc) ac_free(a);
    return rc;
}

int32_t ac_find(const AcAuto *a, const char *s, size_t n) {
    if (!a->n) return -1;
    int32_t node = 0;
    for (size_t i = 0; i < n && node >= 0; i++) node = ac_child(a, node, (unsigned char)s[i]);
    return node > 0 ? a->id[node] : -1;
}
