/* test_tiles.c — a long input's tiles (tiles.h, engine/tiles.c) on every
 * fixture family: each tile of each zoom level equals the max-pool of the
 * whole matrix the full capture holds, computed here independently; a query
 * row recomputed alone equals the full matrix's row bit for bit; the pass's
 * own overview equals the pool; tiles that do not exist are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "kernels.h"
#include "model.h"
#include "tiles.h"
#include "check_util.h"

static const char *FIXTURES[] = {"tests/data/small-f32",     "tests/data/small-gpt2",    "tests/data/small-roberta",
                                 "tests/data/small-llama",   "tests/data/small-qwen3",   "tests/data/small-mistral",
                                 "tests/data/small-gemma2",  "tests/data/small-gemma3",  "tests/data/small-phi3",
                                 "tests/data/small-modernbert", "tests/data/small-mixtral", "tests/data/small-gptoss"};

/* The whole grid by the definition, in one sweep over the matrix. */
static void naive_grid(const float *A, int n, int G, float *out) {
    memset(out, 0, sizeof(float) * G * G);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float *c = out + ((long)i * G / n) * G + (long)j * G / n;
            if (A[(size_t)i * n + j] > *c) *c = A[(size_t)i * n + j];
        }
}

START_TEST(every_tile_is_the_max_pool_of_the_full_matrix_and_a_row_is_its_row) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int side = 8;
    int n = 61;
    if (n > cfg_max_tokens(&m.cfg)) n = cfg_max_tokens(&m.cfg);
    ck_assert_int_gt(n, 2 * side); /* at least three levels */
    const int V = m.cfg.vocab_size;
    int ids[61], types[61];
    for (int i = 0; i < n; i++) ids[i] = (7 + 13 * i) % V, types[i] = m.cfg.type_vocab_size > 1 && i > n / 2;
    if (m.cfg.pos_offset > 0) ids[0] = 0;
    RunState rs;
    Capture full, lean;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_capture_qk(&lean, &m.cfg, n, 0, CAP_QK_F32, &e), 0);
    ck_assert_int_eq(model_capture_maxpool(&lean, side, &e), 0);
    if (model_forward(&m, &rs, ids, types, n, &full, &e) || model_forward(&m, &rs, ids, types, n, &lean, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
    const int levels = tile_levels(n, side);
    ck_assert_int_eq(tile_grid(n, side, levels - 1), n);
    ck_assert_int_lt(tile_grid(n, side, levels - 2), n);
    float *tile = malloc(sizeof(float) * side * side), *row = malloc(sizeof(float) * n);
    float *want = malloc(sizeof(float) * n * n);
    long cells = 0;
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int h = 0; h < m.cfg.num_heads; h++) {
            const float *A = cap_attn(&full, l, h);
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(model_head_row(&m, &lean, l, h, i, row, &e), 0);
                ck_assert_msg(!memcmp(row, A + (size_t)i * n, sizeof(float) * n), "%s layer %d head %d row %d", dir, l, h, i);
            }
            naive_grid(A, n, side, want);
            ck_assert_msg(!memcmp(cap_mpool(&lean, l, h), want, sizeof(float) * side * side), "%s overview", dir);
            for (int L = 0; L < levels; L++) {
                const int G = tile_grid(n, side, L), T = tile_count(n, side, L);
                naive_grid(A, n, G, want);
                float *whole = malloc(sizeof(float) * G * G);
                ck_assert_int_eq(model_head_grid(&m, &lean, l, h, G, whole, &e), 0);
                ck_assert_msg(!memcmp(whole, want, sizeof(float) * G * G), "%s grid %d", dir, G);
                free(whole);
                for (int tr = 0; tr < T; tr++)
                    for (int tc = 0; tc < T; tc++) {
                        int rows, cols;
                        ck_assert_msg(model_head_tile(&m, &lean, l, h, side, L, tr, tc, tile, &rows, &cols, &e) == 0, "%s", e.msg);
                        ck_assert_int_eq(rows, G - tr * side < side ? G - tr * side : side);
                        ck_assert_int_eq(cols, G - tc * side < side ? G - tc * side : side);
                        for (int i = 0; i < side; i++)
                            for (int j = 0; j < side; j++) {
                                const float w = i < rows && j < cols ? want[(size_t)(tr * side + i) * G + tc * side + j] : 0;
                                ck_assert_msg(tile[i * side + j] == w, "%s layer %d head %d level %d tile %d,%d cell %d,%d: %g, want %g",
                                              dir, l, h, L, tr, tc, i, j, tile[i * side + j], w);
                                cells++;
                            }
                    }
            }
        }
    /* what does not exist */
    int rows, cols;
    ck_assert_int_eq(model_head_tile(&m, &lean, 0, 0, side, levels, 0, 0, tile, &rows, &cols, &e), -1);
    ck_assert_int_eq(model_head_tile(&m, &lean, 0, 0, side, -1, 0, 0, tile, &rows, &cols, &e), -1);
    ck_assert_int_eq(model_head_tile(&m, &lean, 0, 0, side, 1, 2, 0, tile, &rows, &cols, &e), -1);
    ck_assert_int_eq(model_head_tile(&m, &lean, 0, 0, side, 1, 0, -1, tile, &rows, &cols, &e), -1);
    ck_assert_int_eq(model_head_tile(&m, &lean, m.cfg.num_layers, 0, side, 0, 0, 0, tile, &rows, &cols, &e), -1);
    ck_assert_int_eq(model_head_row(&m, &lean, 0, 0, n, row, &e), -1);
    ck_assert_int_eq(model_head_row(&m, &lean, 0, m.cfg.num_heads, 0, row, &e), -1);
    fprintf(stderr, "INFO %s: %s (%s%s): %d levels, %ld cells and every row exact\n", __func__, dir, m.cfg.model_type,
            m.cfg.causal ? ", causal" : "", levels, cells);
    free(tile), free(row), free(want);
    model_capture_free(&full);
    model_capture_free(&lean);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

/* A vision-language model's image tokens attend to each other both ways inside the causal sequence
 * (model_forward_embeds_blocks): a row recomputed from the q/k capture (what attnviz serve draws) sees the
 * keys the pass's row saw, past its own position inside the block, with a sliding window too (Gemma 3). */
static const char *BLOCK_FIXTURES[] = {"tests/data/small-llama", "tests/data/small-gemma3"};

START_TEST(rows_recomputed_from_qk_keep_the_blocks_that_attend_both_ways) {
    const char *dir = BLOCK_FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int n = 40, b0 = 9, b1 = 27, H = m.cfg.hidden_size;
    int ids[40], blk[40];
    for (int i = 0; i < n; i++) ids[i] = (5 + 11 * i) % m.cfg.vocab_size, blk[i] = i >= b0 && i < b1 ? b1 : 0;
    float *x = malloc(sizeof(float) * n * H);
    RunState rs;
    Capture full, lean;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_capture_qk(&lean, &m.cfg, n, 0, CAP_QK_F32, &e), 0);
    if (model_embed_ids(&m, ids, n, x, &e) || model_forward_embeds_blocks(&m, &rs, x, n, blk, &full, 0, &e) ||
        model_embed_ids(&m, ids, n, x, &e) || model_forward_embeds_blocks(&m, &rs, x, n, blk, &lean, 0, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
    float *row = malloc(sizeof(float) * n), *whole = malloc(sizeof(float) * n * n);
    float *scratch = malloc(sizeof(float) * 2 * n * m.cfg.head_dim);
    double ahead = 0; /* the block's rows' weight on later keys: the block is there */
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int h = 0; h < m.cfg.num_heads; h++) {
            const float *A = cap_attn(&full, l, h);
            ck_assert_int_eq(model_head_attention(&m, &lean, l, h, whole, scratch, &e), 0);
            ck_assert_msg(!memcmp(whole, A, sizeof(float) * n * n), "%s layer %d head %d: the whole matrix", dir, l, h);
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(model_head_row(&m, &lean, l, h, i, row, &e), 0);
                ck_assert_msg(!memcmp(row, A + (size_t)i * n, sizeof(float) * n), "%s layer %d head %d row %d", dir, l, h, i);
                for (int k = i + 1; k < n; k++) {
                    ck_assert_msg(k < blk[i] || A[(size_t)i * n + k] == 0, "%s row %d sees key %d", dir, i, k);
                    ahead += A[(size_t)i * n + k];
                }
            }
        }
    ck_assert_msg(ahead > 1.0, "%s: the block's rows put %g on later keys", dir, ahead);
    fprintf(stderr, "INFO %s: %s: every row recomputed from q/k with the block [%d, %d) exact (%.1f on later keys)\n",
            __func__, dir, b0, b1, ahead);
    free(x), free(row), free(whole), free(scratch);
    model_capture_free(&full);
    model_capture_free(&lean);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

/* Long enough that a tile's rows are shared among threads (each pools its
 * share, the shares are merged by their maximum): the same cells. Rotary
 * families only, whose positions have no table to outgrow. */
static const char *LONG_FIXTURES[] = {"tests/data/small-llama", "tests/data/small-modernbert", "tests/data/small-gemma2",
                                      "tests/data/small-gptoss"};

START_TEST(tiles_of_rows_shared_among_threads_are_the_max_pool) {
    const char *dir = LONG_FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int n = 700, side = 64;
    m.cfg.max_position_embeddings = n + m.cfg.pos_offset;
    int *ids = malloc(sizeof(int) * n), *types = calloc(n, sizeof(int));
    for (int i = 0; i < n; i++) ids[i] = (3 + 7 * i + i / 5) % m.cfg.vocab_size;
    RunState rs;
    Capture full, lean;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_capture_qk(&lean, &m.cfg, n, 0, CAP_QK_F32, &e), 0);
    if (model_forward(&m, &rs, ids, types, n, &full, &e) || model_forward(&m, &rs, ids, types, n, &lean, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
    float *want = malloc(sizeof(float) * n * n), *got = malloc(sizeof(float) * n * n), *tile = malloc(sizeof(float) * side * side);
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int h = 0; h < m.cfg.num_heads; h += 3) {
            const float *A = cap_attn(&full, l, h);
            for (int L = 0; L < tile_levels(n, side); L++) {
                const int G = tile_grid(n, side, L), T = tile_count(n, side, L);
                naive_grid(A, n, G, want);
                ck_assert_int_eq(model_head_grid(&m, &lean, l, h, G, got, &e), 0);
                ck_assert_msg(!memcmp(got, want, sizeof(float) * G * G), "%s layer %d head %d grid %d", dir, l, h, G);
                for (int tr = 0; L <= 2 && tr < T; tr++) /* the tiles of the coarse levels (the grids cover all) */
                    for (int tc = 0; tc < T; tc++) {
                        int rows, cols;
                        ck_assert_int_eq(model_head_tile(&m, &lean, l, h, side, L, tr, tc, tile, &rows, &cols, &e), 0);
                        for (int i = 0; i < rows; i++)
                            for (int j = 0; j < cols; j++)
                                ck_assert_msg(tile[i * side + j] == want[(size_t)(tr * side + i) * G + tc * side + j],
                                              "%s layer %d head %d level %d tile %d,%d", dir, l, h, L, tr, tc);
                    }
            }
        }
    fprintf(stderr, "INFO %s: %s: %d tokens, %d levels, rows shared among up to %ld threads\n", __func__, dir, n,
            tile_levels(n, side), sysconf(_SC_NPROCESSORS_ONLN));
    free(want), free(got), free(tile), free(ids), free(types);
    model_capture_free(&full);
    model_capture_free(&lean);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

/* q/k kept in 16 bits (serve --qk-precision): the kept copy is the pass's
 * float32 q/k rounded, element for element; a head recomputed from it differs
 * from the float32 attention by at most HALF_BOUND (and does differ: the
 * option rounds); a row recomputed alone is that head's row bit for bit;
 * level 0 (the pass's overview) and the thumbnails are the float32 attention
 * pooled, deeper levels the recomputed attention pooled; the capture counts 2
 * bytes per q/k value. The fixtures' random weights give the largest
 * differences measured (f16 3.2e-3, bf16 2.3e-2, small-gemma3): the bounds
 * are 2.5x those. */
#define HALF_BOUND_F16 8e-3f
#define HALF_BOUND_BF16 6e-2f

START_TEST(half_precision_qk_is_the_rounded_pass_and_recomputes_within_the_bound) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int side = 8, ts = 6;
    int n = 61;
    if (n > cfg_max_tokens(&m.cfg)) n = cfg_max_tokens(&m.cfg);
    int ids[61], types[61];
    for (int i = 0; i < n; i++) ids[i] = (7 + 13 * i) % m.cfg.vocab_size, types[i] = m.cfg.type_vocab_size > 1 && i > n / 2;
    if (m.cfg.pos_offset > 0) ids[0] = 0;
    RunState rs;
    Capture full, lean32;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_capture_qk(&lean32, &m.cfg, n, 0, CAP_QK_F32, &e), 0);
    if (model_forward(&m, &rs, ids, types, n, &full, &e) || model_forward(&m, &rs, ids, types, n, &lean32, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
    ck_assert_int_eq(model_capture_qk(&lean32, &m.cfg, n, 0, 7, &e), -1); /* no such precision */
    model_capture_free(&lean32);
    ck_assert_int_eq(model_capture_qk(&lean32, &m.cfg, n, 0, CAP_QK_F32, &e), 0);
    if (model_forward(&m, &rs, ids, types, n, &lean32, &e)) ck_abort_msg("%s: %s", dir, e.msg);
    const size_t dh = (size_t)lean32.head_dim, blocks = cap_blocks(&lean32), qk = 2 * blocks * (size_t)n * dh;
    float *probs = malloc(sizeof(float) * n * n), *scratch = malloc(sizeof(float) * 2 * n * dh), *row = malloc(sizeof(float) * n);
    float *want = malloc(sizeof(float) * n * n), *got = malloc(sizeof(float) * n * n), *pooled = malloc(sizeof(float) * ts * ts);
    for (int prec = CAP_QK_F16; prec <= CAP_QK_BF16; prec++) {
        Capture half;
        ck_assert_int_eq(model_capture_qk(&half, &m.cfg, n, ts, prec, &e), 0);
        ck_assert_int_eq(model_capture_maxpool(&half, side, &e), 0);
        ck_assert(half.qh && half.kh && !half.q && !half.k && cap_has_qk(&half));
        ck_assert_uint_eq(model_capture_qk_bytes(&m.cfg, n, ts, prec), qk * 2 + blocks * ts * ts * sizeof(float));
        ck_assert_uint_eq(model_capture_qk_bytes(&m.cfg, n, ts, CAP_QK_F32) - model_capture_qk_bytes(&m.cfg, n, ts, prec), qk * 2);
        if (model_forward(&m, &rs, ids, types, n, &half, &e)) ck_abort_msg("%s: %s", dir, e.msg);
        float worst = 0;
        long rounded = 0;
        for (int l = 0; l < m.cfg.num_layers; l++)
            for (int h = 0; h < m.cfg.num_heads; h++) {
                for (size_t i = 0; i < (size_t)n * dh; i++) {
                    ck_assert_uint_eq(cap_qh(&half, l, h)[i], kern_to_half(cap_q(&lean32, l, h)[i], prec));
                    ck_assert_uint_eq(cap_kh(&half, l, h)[i], kern_to_half(cap_k(&lean32, l, h)[i], prec));
                    rounded += kern_from_half(cap_qh(&half, l, h)[i], prec) != cap_q(&lean32, l, h)[i];
                }
                ck_assert_int_eq(model_head_attention(&m, &half, l, h, probs, scratch, &e), 0);
                const float *A = cap_attn(&full, l, h);
                for (size_t i = 0; i < (size_t)n * n; i++) worst = fmaxf(worst, fabsf(probs[i] - A[i]));
                for (int i = 0; i < n; i += 7) {
                    ck_assert_int_eq(model_head_row(&m, &half, l, h, i, row, &e), 0);
                    ck_assert_msg(!memcmp(row, probs + (size_t)i * n, sizeof(float) * n), "%s layer %d head %d row %d", dir, l, h, i);
                }
                /* level 0: the pass's (float32) overview; the next level: the rounded q/k's attention */
                naive_grid(A, n, side, want);
                ck_assert_int_eq(model_head_grid(&m, &half, l, h, side, got, &e), 0);
                ck_assert_msg(!memcmp(got, want, sizeof(float) * side * side), "%s layer %d head %d level 0", dir, l, h);
                const int G1 = tile_grid(n, side, 1);
                naive_grid(probs, n, G1, want);
                ck_assert_int_eq(model_head_grid(&m, &half, l, h, G1, got, &e), 0);
                ck_assert_msg(!memcmp(got, want, sizeof(float) * G1 * G1), "%s layer %d head %d level 1", dir, l, h);
                memset(pooled, 0, sizeof(float) * ts * ts);
                kern_pool_attention_naive(pooled, ts, A, n, 0, n, n, n);
                for (int i = 0; i < ts * ts; i++) ck_assert_float_eq_tol(cap_thumb(&half, l, h)[i], pooled[i], 1e-6f);
            }
        const float bound = prec == CAP_QK_F16 ? HALF_BOUND_F16 : HALF_BOUND_BF16;
        fprintf(stderr, "INFO %s: %s %s: max |attention - float32's| %.3g (bound %g), %ld of %zu q values rounded\n",
                __func__, dir, prec == CAP_QK_F16 ? "f16" : "bf16", worst, bound, rounded, qk / 2);
        ck_assert_msg(worst <= bound, "%s: %g above %g", dir, worst, bound);
        ck_assert_msg(worst > 0 && rounded > 0, "%s: the 16-bit q/k gave the float32 attention exactly", dir);
        model_capture_free(&half);
    }
    free(probs), free(scratch), free(row), free(want), free(got), free(pooled);
    model_capture_free(&full);
    model_capture_free(&lean32);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

START_TEST(levels_cover_the_tokens) {
    /* grids double until they reach n; cells tile the tokens without gaps */
    const int ns[] = {1, 7, 256, 257, 4096, 8192, 32768, 32769};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int n = ns[k], L = tile_levels(n, TILE_SIDE);
        ck_assert_int_eq(tile_grid(n, TILE_SIDE, 0), n < TILE_SIDE ? n : TILE_SIDE);
        ck_assert_int_eq(tile_grid(n, TILE_SIDE, L - 1), n);
        for (int l = 0; l < L; l++) {
            const int G = tile_grid(n, TILE_SIDE, l);
            ck_assert_int_eq(tile_token(n, G, 0), 0);
            ck_assert_int_eq(tile_token(n, G, G), n);
            for (int c = 0; c < G; c++) {
                const int t0 = tile_token(n, G, c), t1 = tile_token(n, G, c + 1);
                ck_assert_int_lt(t0, t1);
                ck_assert_int_eq((long)t0 * G / n, c);
                ck_assert_int_eq((long)(t1 - 1) * G / n, c);
            }
        }
    }
    ck_assert_int_eq(tile_levels(8192, 256), 6);
    ck_assert_int_eq(tile_count(8192, 256, 5), 32);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("tiles");
    TCase *t = tcase_create("tiles");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, levels_cover_the_tokens);
    tcase_add_loop_test(t, rows_recomputed_from_qk_keep_the_blocks_that_attend_both_ways, 0,
                        (int)(sizeof BLOCK_FIXTURES / sizeof BLOCK_FIXTURES[0]));
    tcase_add_loop_test(t, tiles_of_rows_shared_among_threads_are_the_max_pool, 0,
                        (int)(sizeof LONG_FIXTURES / sizeof LONG_FIXTURES[0]));
    tcase_add_loop_test(t, every_tile_is_the_max_pool_of_the_full_matrix_and_a_row_is_its_row, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_loop_test(t, half_precision_qk_is_the_rounded_pass_and_recomputes_within_the_bound, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    suite_add_tcase(s, t);
    return s;
}
