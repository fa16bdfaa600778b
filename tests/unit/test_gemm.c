/* test_gemm.c — the products behind every linear layer (gemm.h): each kernel
 * this CPU has gives exactly the bits of the plain fmaf chain, in both weight
 * layouts and all three storage types, and a token's outputs do not depend on
 * the tokens it shares a product with. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "safetensors.h"
#include "check_util.h"

/* Every kernel a build can have; the ones this build lacks (x86 kernels on
 * Arm, NEON on x86) are refused by gemm_force_kernel like the ones the CPU lacks. */
static const char *const KERNEL_NAMES[] = {"avx512", "avx2", "neon", "scalar"};

/* W (rows, in) in the given type and layout: row-major, or transposed as
 * GPT-2's Conv1D stores it; returns the storage and its strides. */
static void *make_weights(int rows, int in, GemmType type, int transposed, unsigned seed, size_t *w_row, size_t *w_col) {
    float *f = malloc(sizeof(float) * rows * in);
    ck_assert_ptr_nonnull(f);
    fill(f, (size_t)rows * in, seed, 0.5f);
    *w_row = transposed ? 1 : (size_t)in;
    *w_col = transposed ? (size_t)rows : 1;
    if (type == GEMM_F32) return f;
    uint16_t *h = malloc(sizeof(uint16_t) * rows * in);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < (size_t)rows * in; i++) h[i] = type == GEMM_BF16 ? st_f32_to_bf16(f[i]) : st_f32_to_f16(f[i]);
    free(f);
    return h;
}

/* Every kernel this CPU has against the plain chain, on each shape (rows,
 * in) x token count, both layouts of F32 weights and row-major F16/BF16. */
static void check_kernels(const char *test, const int (*shapes)[2], size_t n_shapes, const int *tokens,
                          size_t n_tokens) {
    /* A kernel this CPU can't run is never chosen on it, and nothing here can
     * emulate it: it is tested on the CPUs that have it (the log says which ran). */
    const char *usable[sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]];
    int ran = 0;
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]; kn++)
        if (gemm_force_kernel(KERNEL_NAMES[kn]) == 0) {
            fprintf(stderr, "INFO %s: %s kernel\n", test, KERNEL_NAMES[kn]);
            usable[ran++] = KERNEL_NAMES[kn];
        }
    /* the reference once per case, every kernel against it (the sanitizer build runs this too) */
    for (size_t sh = 0; sh < n_shapes; sh++)
        for (int type = GEMM_F32; type <= GEMM_F16; type++)
            for (int tr = 0; tr < 2; tr++) {
                if (tr && type != GEMM_F32) continue; /* half weights come row-major only */
                const int rows = shapes[sh][0], in = shapes[sh][1];
                size_t w_row, w_col;
                void *w = make_weights(rows, in, (GemmType)type, tr, 7 + (unsigned)sh, &w_row, &w_col);
                for (size_t ti = 0; ti < n_tokens; ti++) {
                    const int n = tokens[ti];
                    float *x = malloc(sizeof(float) * in * n), *y = malloc(sizeof(float) * rows * n);
                    float *ref = malloc(sizeof(float) * rows * n);
                    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
                    ck_assert(x && y && ref && scratch);
                    fill(x, (size_t)in * n, 99 + (unsigned)ti, 2.0f);
                    gemm_rows_naive(ref, w, (GemmType)type, w_row, w_col, x, n, rows, in);
                    for (int kn = 0; kn < ran; kn++) {
                        ck_assert_int_eq(gemm_force_kernel(usable[kn]), 0);
                        memset(y, 0xff, sizeof(float) * rows * n); /* NaNs: no output left from the kernel before */
                        gemm_rows(y, w, (GemmType)type, w_row, w_col, x, n, rows, in, scratch);
                        ck_assert_msg(!memcmp(y, ref, sizeof(float) * rows * n),
                                      "%s: %dx%d type %d transposed %d, %d tokens: max diff %g", usable[kn], rows, in,
                                      type, tr, n, max_abs_diff(y, ref, (size_t)rows * n));
                    }
                    free(x), free(y), free(ref), free(scratch);
                }
                free(w);
            }
    gemm_force_kernel(NULL);
    /* at least the scalar chain and the kernel this CPU would choose */
    ck_assert_int_ge(ran, strcmp(gemm_kernel(), "scalar") ? 2 : 1);
}

START_TEST(every_kernel_gives_the_bits_of_the_fmaf_chain) {
    const int shapes[][2] = {{1, 1}, {15, 17}, {16, 256}, {37, 300}, {33, 800}};
    const int tokens[] = {1, 2, 7, 15, 16, 17, 31, 33, 47, 48, 49, 64, 130};
    check_kernels(__func__, shapes, sizeof shapes / sizeof shapes[0], tokens, sizeof tokens / sizeof tokens[0]);
}
END_TEST

/* The AVX2 kernel's edges: whole and partial panels of 24 rows (F32 weights
 * read in place up to 64 tokens in 12- and 6-row tiles, a last panel of 1 to
 * 23 rows), token counts around its 8- and 16-token vectors, the switch to
 * packed panels past 64 tokens and the row-vector tail (n % 16 of 1, 8, 15);
 * rows 4 KB apart (1,024 inputs), which the in-place tiles read without
 * fetching the next tile's rows. */
START_TEST(every_kernel_gives_the_bits_of_the_fmaf_chain_at_the_avx2_edges) {
    const int shapes[][2] = {{48, 264}, {31, 264}, {79, 40}, {49, 1024}};
    const int tokens[] = {5, 6, 8, 9, 23, 24, 25, 63, 65, 95, 96, 97};
    check_kernels(__func__, shapes, sizeof shapes / sizeof shapes[0], tokens, sizeof tokens / sizeof tokens[0]);
}
END_TEST

/* The first in of a W whose rows are 1,024 floats (4 KB) apart, as a caller
 * passes part of a wider matrix: the AVX2 kernel's in-place tiles read such
 * rows a line at a time through a copy, a last part of 8 inputs step by step;
 * every kernel gives the chain's bits for each token count it takes in place. */
START_TEST(rows_4_kb_apart_give_the_bits_of_the_fmaf_chain) {
    const int rows = 37, w_row = 1024, ins[] = {1000, 1024, 40};
    float *w = malloc(sizeof(float) * rows * w_row);
    ck_assert_ptr_nonnull(w);
    fill(w, (size_t)rows * w_row, 5, 0.5f);
    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
    ck_assert_ptr_nonnull(scratch);
    for (size_t ii = 0; ii < sizeof ins / sizeof ins[0]; ii++)
        for (int n = 1; n <= 17; n += 4) {
            const int in = ins[ii];
            float *x = malloc(sizeof(float) * in * n), *y = malloc(sizeof(float) * rows * n);
            float *ref = malloc(sizeof(float) * rows * n);
            ck_assert(x && y && ref);
            fill(x, (size_t)in * n, 11 + (unsigned)n, 2.0f);
            gemm_rows_naive(ref, w, GEMM_F32, w_row, 1, x, n, rows, in);
            for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]; kn++) {
                if (gemm_force_kernel(KERNEL_NAMES[kn]) != 0) continue;
                memset(y, 0xff, sizeof(float) * rows * n);
                gemm_rows(y, w, GEMM_F32, w_row, 1, x, n, rows, in, scratch);
                ck_assert_msg(!memcmp(y, ref, sizeof(float) * rows * n), "%s: in %d, %d tokens: max diff %g",
                              KERNEL_NAMES[kn], in, n, max_abs_diff(y, ref, (size_t)rows * n));
            }
            free(x), free(y), free(ref);
        }
    gemm_force_kernel(NULL);
    free(scratch), free(w);
}
END_TEST

/* A long input's tokens go through in blocks (gemm.c's GEMM_NC, 512): one
 * block and a part, and several with a short last one, give the same bits. */
START_TEST(every_kernel_gives_the_bits_of_the_fmaf_chain_past_a_block_of_tokens) {
    const int shapes[][2] = {{37, 300}, {24, 40}};
    const int tokens[] = {513, 700, 1100};
    check_kernels(__func__, shapes, sizeof shapes / sizeof shapes[0], tokens, sizeof tokens / sizeof tokens[0]);
}
END_TEST

/* The vector kernels widen half-precision weights with their own
 * instructions (AVX-512's vcvtph2ps, NEON's fcvtl, shifts for BF16): every
 * one of the 65536 bit patterns, subnormals and infinities included, must
 * give the scalar chain's bits (NaNs: a NaN, whose payload the ISAs choose).
 * 16 inputs a row: specials share rows only with specials; 19: whole panels
 * whose k is not a multiple of 4 (the tails of the vector panel copies). */
START_TEST(every_half_bit_pattern_gives_the_bits_of_the_fmaf_chain) {
    const int rows = 4096, ins[] = {16, 19};
    uint16_t *w = malloc(sizeof(uint16_t) * rows * 19);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < rows * 19; i++) w[i] = (uint16_t)i;
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]; kn++) {
        if (gemm_force_kernel(KERNEL_NAMES[kn]) != 0) continue;
        for (size_t ii = 0; ii < sizeof ins / sizeof ins[0]; ii++)
            for (int type = GEMM_BF16; type <= GEMM_F16; type++)
                for (int n = 1; n <= 49; n += 48) { /* the few-token path and the tiles (with a tail) */
                    const int in = ins[ii];
                    float *x = malloc(sizeof(float) * in * n), *y = malloc(sizeof(float) * rows * n);
                    float *ref = malloc(sizeof(float) * rows * n);
                    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
                    ck_assert(x && y && ref && scratch);
                    fill(x, (size_t)in * n, 3, 1.5f);
                    gemm_rows(y, w, (GemmType)type, in, 1, x, n, rows, in, scratch);
                    gemm_rows_naive(ref, w, (GemmType)type, in, 1, x, n, rows, in);
                    for (size_t i = 0; i < (size_t)rows * n; i++)
                        ck_assert_msg(isnan(y[i]) ? isnan(ref[i]) : !memcmp(y + i, ref + i, sizeof(float)),
                                      "%s: type %d, %d inputs, %d tokens: row %zu (patterns from 0x%04zx) gives %a, "
                                      "the chain %a",
                                      KERNEL_NAMES[kn], type, in, n, i / n, (i / n * in) & 0xffff, y[i], ref[i]);
                    free(x), free(y), free(ref), free(scratch);
                }
    }
    gemm_force_kernel(NULL);
    free(w);
}
END_TEST

/* Products over parts of larger matrices (attention's q k^T and probs v, the
 * causal triangle a block of rows at a time): with row strides of their own,
 * every kernel gives the chain's bits in the n columns it owns and leaves the
 * rest of each output row as it was; an empty sum (in = 0) is zeros. */
START_TEST(every_kernel_gives_the_bits_of_the_fmaf_chain_with_leading_dimensions) {
    const int shapes[][2] = {{24, 64}, {37, 64}, {7, 300}, {50, 33}};
    const int tokens[] = {1, 5, 16, 40, 64, 65, 150};
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]; kn++) {
        if (gemm_force_kernel(KERNEL_NAMES[kn]) != 0) continue;
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int tr = 0; tr < 2; tr++)
                for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++) {
                    const int rows = shapes[sh][0], in = shapes[sh][1], n = tokens[ti];
                    const size_t ldx = (size_t)n + 3 + ti, ldy = (size_t)n + 11;
                    size_t w_row, w_col;
                    float *w = make_weights(rows, in, GEMM_F32, tr, 21 + (unsigned)sh, &w_row, &w_col);
                    float *x = malloc(sizeof(float) * in * ldx), *y = malloc(sizeof(float) * rows * ldy);
                    float *ref = malloc(sizeof(float) * rows * ldy);
                    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
                    ck_assert(x && y && ref && scratch);
                    fill(x, (size_t)in * ldx, 31 + (unsigned)ti, 2.0f);
                    for (size_t i = 0; i < (size_t)rows * ldy; i++) y[i] = ref[i] = -7.0f - (float)(i % 5);
                    gemm_rows_ld_naive(ref, ldy, w, GEMM_F32, w_row, w_col, x, ldx, n, rows, in);
                    gemm_rows_ld(y, ldy, w, GEMM_F32, w_row, w_col, x, ldx, n, rows, in, scratch);
                    ck_assert_msg(!memcmp(y, ref, sizeof(float) * rows * ldy),
                                  "%s: %dx%d transposed %d, %d tokens (ldx %zu, ldy %zu): max diff %g",
                                  KERNEL_NAMES[kn], rows, in, tr, n, ldx, ldy, max_abs_diff(y, ref, (size_t)rows * ldy));
                    /* the naive reference itself against the plain one on a contiguous copy */
                    float *xc = malloc(sizeof(float) * in * n), *yc = malloc(sizeof(float) * rows * n);
                    ck_assert(xc && yc);
                    for (int k = 0; k < in; k++) memcpy(xc + (size_t)k * n, x + (size_t)k * ldx, sizeof(float) * n);
                    gemm_rows_naive(yc, w, GEMM_F32, w_row, w_col, xc, n, rows, in);
                    for (int r = 0; r < rows; r++) {
                        ck_assert(!memcmp(yc + (size_t)r * n, ref + (size_t)r * ldy, sizeof(float) * n));
                        ck_assert_float_eq(ref[(size_t)r * ldy + n], -7.0f - (float)(((size_t)r * ldy + n) % 5));
                    }
                    gemm_rows_ld(y, ldy, w, GEMM_F32, w_row, w_col, x, ldx, n, rows, 0, scratch);
                    for (int r = 0; r < rows; r++)
                        for (int j = 0; j < n; j++) ck_assert_float_eq(y[(size_t)r * ldy + j], 0.0f);
                    free(w), free(x), free(y), free(ref), free(scratch), free(xc), free(yc);
                }
    }
    gemm_force_kernel(NULL);
}
END_TEST

/* What packing short inputs into one pass relies on: the columns of a slice of
 * the tokens, computed alone, are the bits the whole product gave them. */
START_TEST(a_token_gets_the_same_bits_whatever_shares_its_product) {
    const int rows = 64, in = 768, n = 150;
    size_t w_row, w_col;
    float *w = make_weights(rows, in, GEMM_F32, 0, 5, &w_row, &w_col);
    float *x = malloc(sizeof(float) * in * n), *y = malloc(sizeof(float) * rows * n);
    float *scratch = aligned_alloc(64, sizeof(float) * GEMM_SCRATCH);
    ck_assert(x && y && scratch);
    fill(x, (size_t)in * n, 6, 1.0f);
    gemm_rows(y, w, GEMM_F32, w_row, w_col, x, n, rows, in, scratch);
    const int slices[][2] = {{0, 7}, {7, 13}, {20, 1}, {21, 40}, {61, 89}, {3, 64}};
    for (size_t s = 0; s < sizeof slices / sizeof slices[0]; s++) {
        const int a = slices[s][0], len = slices[s][1];
        float *xs = malloc(sizeof(float) * in * len), *ys = malloc(sizeof(float) * rows * len);
        ck_assert(xs && ys);
        for (int k = 0; k < in; k++) memcpy(xs + (size_t)k * len, x + (size_t)k * n + a, sizeof(float) * len);
        gemm_rows(ys, w, GEMM_F32, w_row, w_col, xs, len, rows, in, scratch);
        for (int r = 0; r < rows; r++)
            ck_assert_msg(!memcmp(ys + (size_t)r * len, y + (size_t)r * n + a, sizeof(float) * len),
                          "tokens [%d, %d) alone differ in row %d", a, a + len, r);
        free(xs), free(ys);
    }
    free(w), free(x), free(y), free(scratch);
}
END_TEST

/* Why the chain is blocked (gemm.h): on wide products its error against
 * double-precision sums is well below one chain over all inputs. */
START_TEST(blocked_chains_are_more_accurate_than_one_chain) {
    const int rows = 32, in = 3072, n = 32;
    size_t w_row, w_col;
    float *w = make_weights(rows, in, GEMM_F32, 0, 11, &w_row, &w_col);
    float *x = malloc(sizeof(float) * in * n), *y = malloc(sizeof(float) * rows * n);
    ck_assert(x && y);
    fill(x, (size_t)in * n, 12, 1.0f);
    for (size_t i = 0; i < (size_t)in * n; i++) x[i] += 0.25f; /* a mean, as activations have: errors then add up */
    gemm_rows_naive(y, w, GEMM_F32, w_row, w_col, x, n, rows, in);
    double err_blocked = 0, err_one = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            double exact = 0;
            float one = 0.0f;
            for (int k = 0; k < in; k++) {
                exact += (double)w[(size_t)r * in + k] * x[(size_t)k * n + j];
                one = fmaf(w[(size_t)r * in + k], x[(size_t)k * n + j], one);
            }
            err_blocked += fabs(y[(size_t)r * n + j] - exact), err_one += fabs(one - exact);
        }
    fprintf(stderr, "INFO %s: mean error, blocked %.3g, one chain %.3g\n", __func__, err_blocked / (rows * n),
            err_one / (rows * n));
    ck_assert_msg(err_blocked < 0.5 * err_one, "blocked %g, one chain %g", err_blocked, err_one);
    free(w), free(x), free(y);
}
END_TEST

START_TEST(forcing_a_kernel_the_cpu_lacks_is_refused) {
    ck_assert_int_eq(gemm_force_kernel("no-such-kernel"), -1);
    /* every kernel the build lists as usable can be forced, and the others can't */
    char usable[64];
    snprintf(usable, sizeof usable, "|%s|", gemm_kernel_list(1));
    for (size_t kn = 0; kn < sizeof KERNEL_NAMES / sizeof KERNEL_NAMES[0]; kn++) {
        char bar[16];
        snprintf(bar, sizeof bar, "|%s|", KERNEL_NAMES[kn]);
        ck_assert_int_eq(gemm_force_kernel(KERNEL_NAMES[kn]), strstr(usable, bar) ? 0 : -1);
    }
    ck_assert_int_eq(gemm_force_kernel("scalar"), 0);
    ck_assert_str_eq(gemm_kernel(), "scalar");
    ck_assert_int_eq(gemm_force_kernel(NULL), 0);
    ck_assert_ptr_nonnull(gemm_kernel());
}
END_TEST

/* The element-wise loops' build (vecfn.h) goes with the kernel forced: what
 * a CPU without AVX-512 runs when avx2 is, baseline code for scalar. */
START_TEST(the_element_wise_loops_follow_the_kernel) {
    const struct {
        const char *kernel;
        int level;
    } want[] = {{"scalar", 0}, {"neon", 0}, {"avx2", 1}, {"avx512", 2}};
    int forced = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (gemm_force_kernel(want[i].kernel) != 0) continue;
        forced++;
        /* avx512 without the rest of x86-64-v4 takes the AVX2 build */
        if (want[i].level == 2 && gemm_vec_level() == 1)
            fprintf(stderr, "INFO %s: avx512 without x86-64-v4: the AVX2 build\n", __func__);
        else
            ck_assert_msg(gemm_vec_level() == want[i].level, "%s: level %d, want %d", want[i].kernel, gemm_vec_level(),
                          want[i].level);
    }
    ck_assert_int_ge(forced, 1);
    gemm_force_kernel(NULL);
}
END_TEST

/* ATTNVIZ_KERNEL: a usable name pins the kernel, a name the build lacks is
 * refused with a message that lists what it has; unset keeps the best. */
START_TEST(the_environment_pins_a_kernel) {
    AvErr e;
    const char *outer = getenv(GEMM_KERNEL_ENV); /* CI runs the suites once per kernel this way */
    char *saved = outer ? strdup(outer) : NULL;
    unsetenv(GEMM_KERNEL_ENV);
    gemm_force_kernel(NULL);
    const char *best = gemm_kernel();
    setenv(GEMM_KERNEL_ENV, "scalar", 1);
    ck_assert_int_eq(gemm_kernel_from_env(&e), 0);
    ck_assert_str_eq(gemm_kernel(), "scalar");
    setenv(GEMM_KERNEL_ENV, "sse9", 1);
    ck_assert_int_eq(gemm_kernel_from_env(&e), -1);
    ck_assert_msg(strstr(e.msg, "ATTNVIZ_KERNEL=sse9") && strstr(e.msg, "scalar"), "%s", e.msg);
    unsetenv(GEMM_KERNEL_ENV);
    gemm_force_kernel(NULL);
    ck_assert_int_eq(gemm_kernel_from_env(&e), 0);
    ck_assert_str_eq(gemm_kernel(), best);
    if (saved) {
        setenv(GEMM_KERNEL_ENV, saved, 1);
        ck_assert_int_eq(gemm_kernel_from_env(&e), 0);
        free(saved);
    }
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *k = tcase_create("gemm");
    tcase_set_timeout(k, 600); /* every kernel over 65,536 half patterns: a minute under ASan on a loaded machine */
    tcase_add_test(k, every_kernel_gives_the_bits_of_the_fmaf_chain);
    tcase_add_test(k, every_half_bit_pattern_gives_the_bits_of_the_fmaf_chain);
    tcase_add_test(k, every_kernel_gives_the_bits_of_the_fmaf_chain_at_the_avx2_edges);
    tcase_add_test(k, every_kernel_gives_the_bits_of_the_fmaf_chain_past_a_block_of_tokens);
    tcase_add_test(k, rows_4_kb_apart_give_the_bits_of_the_fmaf_chain);
    tcase_add_test(k, every_kernel_gives_the_bits_of_the_fmaf_chain_with_leading_dimensions);
    tcase_add_test(k, the_environment_pins_a_kernel);
    tcase_add_test(k, blocked_chains_are_more_accurate_than_one_chain);
    tcase_add_test(k, a_token_gets_the_same_bits_whatever_shares_its_product);
    tcase_add_test(k, forcing_a_kernel_the_cpu_lacks_is_refused);
    tcase_add_test(k, the_element_wise_loops_follow_the_kernel);
    suite_add_tcase(s, k);
    return s;
}
