/* tiles.h — a long input's attention as max-pooled tiles at zoom levels, so
 * that a viewer can browse an n x n matrix of 8k-32k tokens without it ever
 * existing whole (attnviz serve's /api/tile, the offline page's embedded
 * levels).
 *
 * Level L is a grid of G = min(n, side << L) cells a side; token t falls in
 * cell t * G / n (rounded down), so cell c covers tokens [tile_token(c),
 * tile_token(c + 1)). A cell's value is the largest weight of its query rows
 * on its keys: one strong weight stays visible however far out one zooms.
 * The grid is cut into tiles of side x side cells, tile (r, c) covering cells
 * [r * side, (r + 1) * side) x [c * side, (c + 1) * side), clipped to G. The
 * deepest level has G = n: a cell is one weight. */
#ifndef ATTNVIZ_TILES_H
#define ATTNVIZ_TILES_H

#include "capture.h"
#include "err.h"

#define TILE_SIDE 256
#define TILE_MAX_LEVELS 16

/* G of level L (level >= 0). */
int tile_grid(int n, int side, int level);
/* How many levels there are: the first whose grid is n, plus one. */
int tile_levels(int n, int side);
/* Tiles along each axis of level L: ceil(G / side). */
int tile_count(int n, int side, int level);
/* The first token of cell c of a G-cell grid: ceil(c * n / G) (c = G: n). */
int tile_token(int n, int G, int c);

/* Max-pools rows [row0, row0 + nrows) of an n x n matrix, given as probs
 * (nrows, ldp) with its first ncols columns set (the rest are 0), into tile
 * (side x side, row-major): the cells [cr0, cr0 + side) x [cc0, cc0 + side) of
 * the G-cell grid. Rows outside the tile's cells are skipped; cells past G stay
 * as they are. Fill tile with 0 first (weights are >= 0). */
void tile_pool_rows(float *tile, int side, int n, int G, int cr0, int cc0, const float *probs, int ldp, int row0,
                    int nrows, int ncols);

/* Tile (tr, tc) of level `level` of head (l, h), recomputed from the
 * capture's q/k (model_head_rows: its query rows, each over the keys it sees)
 * and max-pooled: tile (side x side floats, row-major; *rows x *cols of it
 * set, the tile clipped to the grid, the rest 0). Level 0 comes from the
 * capture's overview when it has one of that size. Tiles of a causal head
 * wholly after the diagonal are 0 without computing. -1 with e set for a tile
 * that does not exist or when memory runs out. */
struct Model;
int model_head_tile(const struct Model *m, const Capture *cap, int l, int h, int side, int level, int tr, int tc,
                    float *tile, int *rows, int *cols, AvErr *e);
/* The whole G-cell grid of head (l, h) (G x G floats, row-major): a level's
 * every tile at once, from one pass over the head's rows (the capture's
 * overview when it is that grid). */
int model_head_grid(const struct Model *m, const Capture *cap, int l, int h, int G, float *grid, AvErr *e);
/* Query i's row of head (l, h) into row (n floats): model_head_attention's
 * row i, bit for bit. */
int model_head_row(const struct Model *m, const Capture *cap, int l, int h, int i, float *row, AvErr *e);

#endif
