/* tiles.c — zoom levels and max-pooling of attention rows into tiles (tiles.h). */
#include "tiles.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"

int tile_grid(int n, int side, int level) {
    long g = side;
    for (int l = 0; l < level && g < n; l++) g *= 2;
    return g < n ? (int)g : n;
}

int tile_levels(int n, int side) {
    int L = 0;
    while (tile_grid(n, side, L) < n && L + 1 < TILE_MAX_LEVELS) L++;
    return L + 1;
}

int tile_count(int n, int side, int level) { return (tile_grid(n, side, level) + side - 1) / side; }

int tile_token(int n, int G, int c) { return (int)(((long long)c * n + G - 1) / G); }

void tile_pool_rows(float *tile, int side, int n, int G, int cr0, int cc0, const float *probs, int ldp, int row0,
                    int nrows, int ncols) {
    const int cc1 = cc0 + side < G ? cc0 + side : G;
    for (int r = 0; r < nrows; r++) {
        const int i = row0 + r;
        const int ci = (int)((long long)i * G / n) - cr0;
        if (ci < 0 || ci >= side) continue;
        const float *p = probs + (long)r * ldp;
        float *out = tile + (long)ci * side;
        int j = tile_token(n, G, cc0);
        for (int c = cc0; c < cc1 && j < ncols; c++) {
            const int j1 = tile_token(n, G, c + 1), end = j1 < ncols ? j1 : ncols;
            float m = out[c - cc0];
            for (; j < end; j++) m = p[j] > m ? p[j] : m;
            out[c - cc0] = m;
            j = j1;
        }
    }
}

/* ---------------------------------------------------------------- from a capture's q/k */

typedef struct {
    float *tile;
    int side, n, G, cr0, cc0, row0;
} PoolCtx;

static void pool_rows(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    (void)st;
    const PoolCtx *p = ctx;
    tile_pool_rows(p->tile, p->side, p->n, p->G, p->cr0, p->cc0, probs, ldp, p->row0 + i0, i1 - i0, p->n);
}

/* Rows [r0, r1) of head (l, h) max-pooled into tile (side x side; zeroed by
 * the caller), the rows shared among up to TILE_THREADS threads: each pools
 * its share into a tile of its own (thread 0 into tile itself) and the tiles
 * are merged by their maximum, which is the same whatever the split. A causal
 * row's cost grows with its position, so the shares are of equal area. */
#define TILE_THREADS 8
#define TILE_MIN_ROWS 96 /* rows a thread is worth */

typedef struct {
    const Model *m;
    const Capture *cap;
    int l, h, r0, r1, side, G, cr0, cc0;
    float *tile;
    int rc;
    AvErr e;
} TilePart;

static void *tile_part(void *arg) {
    TilePart *t = arg;
    const int n = t->cap->n_tokens;
    float *buf = malloc((size_t)kern_attention_rows() * n * sizeof *buf);
    float *scratch = malloc(((size_t)n + (size_t)(t->r1 - t->r0)) * (size_t)t->cap->head_dim * sizeof *scratch);
    PoolCtx p = {t->tile, t->side, n, t->G, t->cr0, t->cc0, t->r0};
    t->rc = buf && scratch ? model_head_rows(t->m, t->cap, t->l, t->h, t->r0, t->r1, buf, scratch, pool_rows, &p, &t->e)
                           : av_err(&t->e, "out of memory for the rows of %d tokens", n);
    free(buf);
    free(scratch);
    return NULL;
}

static int pooled_rows(const Model *m, const Capture *cap, int l, int h, int r0, int r1, int side, int G, int cr0,
                       int cc0, float *tile, AvErr *e) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int T = (r1 - r0) / TILE_MIN_ROWS;
    if (T > cpus) T = (int)cpus;
    if (T > TILE_THREADS) T = TILE_THREADS;
    if (T < 1) T = 1;
    TilePart part[TILE_THREADS];
    pthread_t tid[TILE_THREADS];
    int started[TILE_THREADS] = {0};
    const size_t cells = (size_t)side * side;
    const double a0 = (double)r0 * r0, a1 = (double)r1 * r1;
    int at = r0;
    for (int k = 0; k < T; k++) {
        int end = k == T - 1 ? r1 : m->cfg.causal ? (int)sqrt(a0 + (a1 - a0) * (k + 1) / T) : r0 + (int)((long)(r1 - r0) * (k + 1) / T);
        if (end <= at) end = at + 1 < r1 ? at + 1 : r1;
        part[k] = (TilePart){.m = m, .cap = cap, .l = l, .h = h, .r0 = at, .r1 = end, .side = side, .G = G, .cr0 = cr0,
                             .cc0 = cc0, .tile = k ? calloc(cells, sizeof(float)) : tile};
        at = end;
    }
    int rc = 0;
    for (int k = 1; k < T; k++) {
        if (!part[k].tile) rc = av_err(e, "out of memory for a tile");
        else if (part[k].r0 < part[k].r1 && pthread_create(&tid[k], NULL, tile_part, &part[k]) == 0) started[k] = 1;
    }
    tile_part(&part[0]); /* this thread's share */
    for (int k = 1; k < T; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else if (part[k].tile && part[k].r0 < part[k].r1) tile_part(&part[k]); /* no thread: here */
    }
    for (int k = 0; k < T; k++) {
        if (part[k].rc && !rc) {
            *e = part[k].e;
            rc = -1;
        }
        if (!k || !part[k].tile) continue;
        for (size_t i = 0; i < cells; i++) tile[i] = part[k].tile[i] > tile[i] ? part[k].tile[i] : tile[i];
        free(part[k].tile);
    }
    return rc;
}

int model_head_tile(const Model *m, const Capture *cap, int l, int h, int side, int level, int tr, int tc, float *tile,
                    int *rows, int *cols, AvErr *e) {
    const int n = cap->n_tokens;
    if (side < 1 || level < 0 || level >= tile_levels(n, side)) return av_err(e, "level %d does not exist", level);
    const int G = tile_grid(n, side, level), T = tile_count(n, side, level);
    if (tr < 0 || tc < 0 || tr >= T || tc >= T) return av_err(e, "tile %d,%d is outside level %d's %d x %d", tr, tc, level, T, T);
    if (l < 0 || l >= cap->n_layers || h < 0 || h >= cap->n_heads || !cap_has(cap, l, h))
        return av_err(e, "layer %d head %d is not captured", l, h);
    if (!cap_has_qk(cap)) return av_err(e, "layer %d head %d: no queries and keys captured", l, h);
    const int cr0 = tr * side, cc0 = tc * side;
    *rows = G - cr0 < side ? G - cr0 : side;
    *cols = G - cc0 < side ? G - cc0 : side;
    memset(tile, 0, (size_t)side * side * sizeof *tile);
    if (level == 0 && cap->mpool && cap->mpool_size == G) {
        for (int i = 0; i < G; i++) memcpy(tile + (size_t)i * side, cap_mpool(cap, l, h) + (size_t)i * G, (size_t)G * sizeof *tile);
        return 0;
    }
    const int t0 = tile_token(n, G, cr0), t1 = tile_token(n, G, cr0 + *rows);
    if (m->cfg.causal && t1 - 1 < tile_token(n, G, cc0)) return 0; /* every key after every query */
    return pooled_rows(m, cap, l, h, t0, t1, side, G, cr0, cc0, tile, e);
}

int model_head_grid(const Model *m, const Capture *cap, int l, int h, int G, float *grid, AvErr *e) {
    const int n = cap->n_tokens;
    if (G < 1 || G > n) return av_err(e, "a grid of %d cells for %d tokens", G, n);
    if (l < 0 || l >= cap->n_layers || h < 0 || h >= cap->n_heads || !cap_has(cap, l, h))
        return av_err(e, "layer %d head %d is not captured", l, h);
    if (cap->mpool && cap->mpool_size == G) {
        memcpy(grid, cap_mpool(cap, l, h), (size_t)G * G * sizeof *grid);
        return 0;
    }
    if (!cap_has_qk(cap)) return av_err(e, "layer %d head %d: no queries and keys captured", l, h);
    memset(grid, 0, (size_t)G * G * sizeof *grid);
    return pooled_rows(m, cap, l, h, 0, n, G, G, 0, 0, grid, e);
}

static void copy_row(void *ctx, int i0, int i1, const float *probs, int ldp, const KernRowStats *st) {
    (void)i1, (void)st;
    float *row = ctx;
    if (i0 == 0) memcpy(row, probs, (size_t)ldp * sizeof *row);
}

int model_head_row(const Model *m, const Capture *cap, int l, int h, int i, float *row, AvErr *e) {
    const int n = cap->n_tokens;
    if (i < 0 || i >= n) return av_err(e, "query %d is outside the %d tokens", i, n);
    float *buf = malloc((size_t)kern_attention_rows() * n * sizeof *buf);
    float *scratch = malloc(((size_t)n + 1) * (size_t)cap->head_dim * sizeof *scratch);
    int rc = buf && scratch ? model_head_rows(m, cap, l, h, i, i + 1, buf, scratch, copy_row, row, e)
                            : av_err(e, "out of memory for a row of %d tokens", n);
    free(buf);
    free(scratch);
    return rc;
}
