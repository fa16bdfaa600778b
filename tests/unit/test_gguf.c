/* test_gguf.c — GGUF reader: well-formed images built byte by byte, hostile
 * images refused with a message, and the real SmolLM2 file when present. */
#include "check_util.h"
#include "gemm.h"
#include "gguf.h"
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t b[4096];
    size_t n;
} Img;

static void put(Img *m, const void *p, size_t n) { memcpy(m->b + m->n, p, n); m->n += n; }
static void u32(Img *m, uint32_t v) { put(m, &v, 4); }
static void u64(Img *m, uint64_t v) { put(m, &v, 8); }
static void str(Img *m, const char *s) { u64(m, strlen(s)); put(m, s, strlen(s)); }
static void hdr(Img *m, uint64_t nt, uint64_t nkv) { m->n = 0; put(m, "GGUF", 4); u32(m, 3); u64(m, nt); u64(m, nkv); }
static void pad(Img *m, size_t a) { while (m->n % a) m->b[m->n++] = 0; }

/* One F32 tensor "w" of 4x2 with metadata of several types. */
static void good(Img *m) {
    hdr(m, 1, 4);
    str(m, "general.architecture"); u32(m, GGUF_V_STRING); str(m, "llama");
    str(m, "llama.block_count"); u32(m, GGUF_V_U32); u32(m, 30);
    str(m, "llama.eps"); u32(m, GGUF_V_F32); float f = 1e-5f; put(m, &f, 4);
    str(m, "tok"); u32(m, GGUF_V_ARRAY); u32(m, GGUF_V_STRING); u64(m, 3); str(m, "a"); str(m, ""); str(m, "ccc");
    str(m, "w"); u32(m, 2); u64(m, 4); u64(m, 2); u32(m, GGUF_T_F32); u64(m, 0);
    pad(m, 32);
    for (int i = 0; i < 8; i++) { float x = (float)i; put(m, &x, 4); }
}

START_TEST(parses_metadata_and_tensor_of_a_well_formed_image) {
    Img m; good(&m);
    GgufFile f; AvErr e;
    ck_assert_int_eq(gguf_parse(&f, m.b, m.n, "t.gguf", &e), 0);
    const char *s; size_t n;
    ck_assert_int_eq(gguf_get_str(&f, "general.architecture", &s, &n, &e), 0);
    ck_assert(n == 5 && !memcmp(s, "llama", 5));
    uint32_t u; ck_assert_int_eq(gguf_get_u32(&f, "llama.block_count", &u, &e), 0); ck_assert_uint_eq(u, 30);
    float x; ck_assert_int_eq(gguf_get_f32(&f, "llama.eps", &x, &e), 0); ck_assert(x == 1e-5f);
    ck_assert_int_eq(gguf_get_f32(&f, "llama.block_count", &x, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "llama.block_count"));
    const GgufKV *kv = gguf_find_kv(&f, "tok");
    ck_assert_ptr_nonnull(kv);
    ck_assert_int_eq(gguf_arr_str(kv, 2, &s, &n, &e), 0); ck_assert(n == 3 && !memcmp(s, "ccc", 3));
    ck_assert_int_eq(gguf_arr_str(kv, 1, &s, &n, &e), 0); ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(gguf_arr_str(kv, 3, &s, &n, &e), -1);
    const GgufTensor *t = gguf_find_tensor(&f, "w");
    ck_assert_ptr_nonnull(t);
    ck_assert(t->n_dims == 2 && t->dims[0] == 4 && t->dims[1] == 2 && t->nbytes == 32);
    float v; memcpy(&v, t->data + 7 * 4, 4); ck_assert(v == 7.0f);
    ck_assert_ptr_null(gguf_find_tensor(&f, "x"));
    gguf_close(&f);
}
END_TEST

START_TEST(a_struct_filled_by_the_reader_is_safe_to_close_whatever_it_held) {
    Img m; good(&m);
    GgufFile f; AvErr e;
    GARBAGE(f);
    ck_assert_int_eq(gguf_parse(&f, m.b, m.n, "t.gguf", &e), 0);
    gguf_close(&f);
    GARBAGE(f);
    ck_assert_int_eq(gguf_parse(&f, m.b, m.n - 1, "t.gguf", &e), -1);
    gguf_close(&f);
    GARBAGE(f);
    ck_assert_int_eq(gguf_open(&f, "/nonexistent/t.gguf", &e), -1);
    gguf_close(&f);
}
END_TEST

static void refuse(Img *m, const char *needle) {
    GgufFile f; AvErr e;
    ck_assert_int_eq(gguf_parse(&f, m->b, m->n, "bad.gguf", &e), -1);
    ck_assert_msg(strstr(e.msg, needle) != NULL, "message '%s' lacks '%s'", e.msg, needle);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad.gguf"));
}

START_TEST(refuses_every_truncation_of_a_well_formed_image) {
    Img m; good(&m);
    for (size_t len = 0; len < m.n; len++) {
        GgufFile f; AvErr e;
        ck_assert_msg(gguf_parse(&f, m.b, len, "bad.gguf", &e) == -1, "accepted %zu of %zu bytes", len, m.n);
    }
}
END_TEST

START_TEST(refuses_hostile_headers_counts_lengths_and_types) {
    Img m;
    hdr(&m, 0, 0); m.b[0] = 'X'; refuse(&m, "bad magic");
    hdr(&m, 0, 0); m.b[4] = 7; refuse(&m, "version 7");
    hdr(&m, 0, UINT64_MAX); refuse(&m, "metadata entries");
    hdr(&m, UINT64_MAX, 0); refuse(&m, "tensors cannot fit");
    hdr(&m, 0, 1); u64(&m, UINT64_MAX - 3); put(&m, "abcdefghijkl", 12); refuse(&m, "key runs past");
    hdr(&m, 0, 1); str(&m, "k"); u32(&m, 99); u64(&m, 0); refuse(&m, "unknown value type 99");
    hdr(&m, 0, 1); str(&m, "k"); u32(&m, GGUF_V_STRING); u64(&m, 1000); refuse(&m, "string runs past");
    hdr(&m, 0, 1); str(&m, "k"); u32(&m, GGUF_V_ARRAY); u32(&m, GGUF_V_ARRAY); u64(&m, 1); u64(&m, 0); refuse(&m, "nested arrays");
    hdr(&m, 0, 1); str(&m, "k"); u32(&m, GGUF_V_ARRAY); u32(&m, GGUF_V_STRING); u64(&m, UINT64_MAX); refuse(&m, "exceeds the file");
    hdr(&m, 0, 1); str(&m, "k"); u32(&m, GGUF_V_ARRAY); u32(&m, GGUF_V_U64); u64(&m, 1ull << 61); u64(&m, 0); refuse(&m, "runs past end");
    hdr(&m, 0, 2); str(&m, "k"); u32(&m, GGUF_V_U8); put(&m, "x", 1); str(&m, "k"); u32(&m, GGUF_V_U8); put(&m, "x", 1);
    refuse(&m, "duplicate metadata key 'k'");
    hdr(&m, 0, 1); str(&m, "general.alignment"); u32(&m, GGUF_V_U32); u32(&m, 24); refuse(&m, "power of two");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 5); for (int i = 0; i < 5; i++) u64(&m, 1); u32(&m, 0); u64(&m, 0);
    refuse(&m, "'t': 5 dimensions");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 1); u64(&m, 32); u32(&m, 5); u64(&m, 0); pad(&m, 32); m.n += 64;
    refuse(&m, "'t': unknown ggml type 5");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 1); u64(&m, 33); u32(&m, GGUF_T_Q8_0); u64(&m, 0); pad(&m, 32); m.n += 64;
    refuse(&m, "not a multiple");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 2); u64(&m, 1ull << 40); u64(&m, 1ull << 40); u32(&m, GGUF_T_F32); u64(&m, 0);
    pad(&m, 32); refuse(&m, "'t'");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 1); u64(&m, 4); u32(&m, GGUF_T_F32); u64(&m, 8); pad(&m, 32); m.n += 64;
    refuse(&m, "not aligned");
    hdr(&m, 1, 0); str(&m, "t"); u32(&m, 1); u64(&m, 4); u32(&m, GGUF_T_F32); u64(&m, 32); pad(&m, 32); m.n += 40;
    refuse(&m, "'t': data");
    hdr(&m, 2, 0); for (int k = 0; k < 2; k++) { str(&m, "t"); u32(&m, 1); u64(&m, 4); u32(&m, GGUF_T_F32); u64(&m, 0); }
    pad(&m, 32); m.n += 16; refuse(&m, "duplicate tensor name 't'");
}
END_TEST

START_TEST(reads_the_real_smollm2_gguf) {
    const char *path = getenv("ATTNVIZ_SMOLLM2_GGUF");
    SKIP_UNLESS(path && *path, "ATTNVIZ_SMOLLM2_GGUF not set (tests/run_all.sh sets it when tools/pymodel.sh smollm2 works)");
    GgufFile f; AvErr e;
    ck_assert_msg(gguf_open(&f, path, &e) == 0, "%s", e.msg);
    const char *s; size_t n;
    ck_assert_int_eq(gguf_get_str(&f, "general.architecture", &s, &n, &e), 0);
    ck_assert(n == 5 && !memcmp(s, "llama", 5));
    uint32_t blocks; ck_assert_int_eq(gguf_get_u32(&f, "llama.block_count", &blocks, &e), 0);
    char nm[64]; snprintf(nm, sizeof nm, "blk.%u.attn_q.weight", blocks - 1);
    ck_assert_ptr_nonnull(gguf_find_tensor(&f, nm));
    gguf_close(&f);
}
END_TEST

START_TEST(dequantizer_refuses_unsupported_types_and_bad_ranges_naming_the_tensor) {
    uint8_t blk[84] = {0};
    float y[256];
    AvErr e;
    ck_assert_int_eq(quant_rows(GGUF_T_Q2_K, blk, sizeof blk, 1, 256, 0, 1, y, "blk.0.w", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "blk.0.w"));
    ck_assert_ptr_nonnull(strstr(e.msg, "Q2_K"));
    ck_assert_int_eq(quant_rows(GGUF_T_Q8_0, blk, 34, 2, 32, 0, 2, y, "w", &e), -1);
    ck_assert_int_eq(quant_rows(GGUF_T_Q8_0, blk, 34, 1, 32, 1, 2, y, "w", &e), -1);
    ck_assert_int_eq(quant_rows_naive(GGUF_T_Q2_K, blk, sizeof blk, 1, 256, 0, 1, y, "blk.0.w", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "blk.0.w"));
    ck_assert_int_eq(quant_rows_naive(GGUF_T_Q8_0, blk, 34, 2, 32, 0, 2, y, "w", &e), -1);
    ck_assert_int_eq(quant_rows(GGUF_T_Q8_0, blk, 34, 1, 48, 0, 1, y, "w", &e), -1);
    /* Q8_0 block: f16 scale 2.0 (0x4000) then codes; element i = code * 2 */
    blk[0] = 0x00; blk[1] = 0x40; blk[2] = (uint8_t)-3; blk[33] = 5;
    ck_assert_int_eq(quant_rows(GGUF_T_Q8_0, blk, 34, 1, 32, 0, 1, y, "w", &e), 0);
    ck_assert(y[0] == -6.0f && y[31] == 10.0f && y[1] == 0.0f);
    ck_assert(quant_f16(0x0001) == 5.9604644775390625e-08f && quant_f16(0xfbff) == -65504.0f);
}
END_TEST

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

/* Equal bits, or both NaN: where a NaN (or inf - inf) meets another NaN, the
 * payload and sign that survive depend on the operand order the compiler
 * chose (clang -O1 differs from GCC here), which says nothing about the data. */
static int same_bits_or_both_nan(float x, float y) {
    return memcmp(&x, &y, sizeof x) == 0 || (x != x && y != y);
}

/* Random bytes put every scale through NaN, inf, subnormal and zero f16s too. */
START_TEST(fast_dequantizer_equals_naive_bit_for_bit_on_random_blocks_and_every_row_range) {
    static const uint32_t types[] = {GGUF_T_F32, GGUF_T_F16, GGUF_T_BF16, GGUF_T_Q8_0, GGUF_T_Q4_0, GGUF_T_Q4_1,
                                     GGUF_T_Q5_0, GGUF_T_Q5_1, GGUF_T_Q4_K, GGUF_T_Q5_K, GGUF_T_Q6_K};
    enum { ROWS = 5 };
    AvErr e;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        uint32_t t = types[ti];
        size_t blk = gguf_type_block(t), cols = blk == 1 ? 37 : 3 * blk, nbytes = ROWS * cols / blk * gguf_type_bytes(t);
        uint8_t *data = malloc(nbytes);
        float *a = malloc(ROWS * cols * sizeof *a), *b = malloc((ROWS * cols + 1) * sizeof *b);
        ck_assert(data && a && b);
        for (int trial = 0; trial < 20; trial++) {
            for (size_t i = 0; i < nbytes; i++) data[i] = rnd8();
            for (size_t r0 = 0; r0 <= ROWS; r0++)
                for (size_t r1 = r0; r1 <= ROWS; r1++) {
                    size_t n = (r1 - r0) * cols;
                    memset(a, 0xA5, ROWS * cols * sizeof *a);
                    memset(b, 0x5A, (ROWS * cols + 1) * sizeof *b);
                    ck_assert_int_eq(quant_rows_naive(t, data, nbytes, ROWS, cols, r0, r1, a, "w", &e), 0);
                    ck_assert_int_eq(quant_rows(t, data, nbytes, ROWS, cols, r0, r1, b, "w", &e), 0);
                    for (size_t i = 0; i < n; i++)
                        if (!same_bits_or_both_nan(a[i], b[i]))
                            ck_abort_msg("type %s rows [%zu, %zu) trial %d element %zu: fast differs from naive",
                                         gguf_type_name(t), r0, r1, trial, i);
                    /* nothing written past the range */
                    ck_assert_uint_eq(((uint8_t *)b)[n * sizeof *b], 0x5A);
                }
        }
        free(data); free(a); free(b);
    }
}
END_TEST

START_TEST(fast_f16_and_bf16_widening_equal_naive_on_all_65536_values) {
    static uint8_t h[65536 * 2];
    static float a[65536], b[65536];
    AvErr e;
    for (uint32_t i = 0; i < 65536; i++) { h[2 * i] = (uint8_t)i; h[2 * i + 1] = (uint8_t)(i >> 8); }
    uint32_t ts[] = {GGUF_T_F16, GGUF_T_BF16};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(quant_rows_naive(ts[k], h, sizeof h, 1, 65536, 0, 1, a, "w", &e), 0);
        ck_assert_int_eq(quant_rows(ts[k], h, sizeof h, 1, 65536, 0, 1, b, "w", &e), 0);
        for (uint32_t i = 0; i < 65536; i++)
            if (memcmp(&a[i], &b[i], 4) != 0) ck_abort_msg("%s value 0x%04x differs", gguf_type_name(ts[k]), i);
    }
}
END_TEST


/* A sane f16 scale (|v| in [2^-8, 2^-1), either sign) at p: the random bytes
 * elsewhere are codes, whose every value the product must read right. */
static void sane_f16(uint8_t *p) {
    uint16_t h = (uint16_t)(0x1C00 + ((unsigned)rnd8() << 5 | (rnd8() & 31)) % 0x1C00) | (uint16_t)((rnd8() & 1) << 15);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

static void sane_scales(uint32_t t, uint8_t *b) {
    switch (t) {
    case GGUF_T_Q4_1: case GGUF_T_Q5_1: case GGUF_T_Q4_K: case GGUF_T_Q5_K: sane_f16(b + 2); sane_f16(b); break;
    case GGUF_T_Q6_K: sane_f16(b + 208); break;
    case GGUF_T_MXFP4: b[0] = (uint8_t)(120 + rnd8() % 12); break;
    default: sane_f16(b); break;
    }
}

/* One token's product from the blocks (every SIMD build and the portable
 * one) against the widened rows summed in double: within 64 float epsilons
 * of sum |x| * max |W| of the row, a bound any misread code or scale breaks by
 * orders of magnitude; odd row counts, row ranges off the start, and nothing
 * written past the range. */
START_TEST(direct_product_from_blocks_matches_the_widened_rows_on_every_kernel) {
    static const uint32_t types[] = {GGUF_T_Q8_0, GGUF_T_Q4_0, GGUF_T_Q4_1, GGUF_T_Q5_0, GGUF_T_Q5_1,
                                     GGUF_T_Q4_K, GGUF_T_Q5_K, GGUF_T_Q6_K, GGUF_T_MXFP4};
    static const char *kernels[] = {"scalar", "avx2", "avx512"};
    enum { ROWS = 7 };
    AvErr e;
    float worst = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const uint32_t t = types[ti];
        ck_assert(quant_matvec_covers(t));
        const size_t blk = gguf_type_block(t), bs = gguf_type_bytes(t), cols = blk == 32 ? 19 * blk : 3 * blk;
        const size_t nbytes = ROWS * cols / blk * bs;
        uint8_t *data = malloc(nbytes);
        float *x = malloc(cols * sizeof *x), *ref = malloc(ROWS * sizeof *ref), *y = malloc((ROWS + 1) * sizeof *y);
        float *wr = malloc(cols * sizeof *wr), *scratch = malloc(quant_matvec_scratch(cols) * sizeof *scratch);
        ck_assert(data && x && ref && y && wr && scratch);
        for (int trial = 0; trial < 4; trial++) {
            for (size_t i = 0; i < nbytes; i++) data[i] = rnd8();
            for (size_t b = 0; b < nbytes / bs; b++) sane_scales(t, data + b * bs);
            for (size_t k = 0; k < cols; k++) x[k] = (float)((int)rnd8() - 128) / 37.0f + (trial & 1 ? 0.5f : 0.0f);
            ck_assert_int_eq(quant_matvec_naive(t, data, nbytes, ROWS, cols, 0, ROWS, x, ref, "w", &e), 0);
            for (size_t kn = 0; kn < 3; kn++) {
                if (gemm_force_kernel(kernels[kn]) != 0) {
                    fprintf(stderr, "NOTE %s: this CPU has no %s kernel\n", __func__, kernels[kn]);
                    continue;
                }
                const size_t ranges[][2] = {{0, ROWS}, {2, 5}, {3, 3}, {ROWS - 1, ROWS}};
                for (size_t ri = 0; ri < 4; ri++) {
                    const size_t r0 = ranges[ri][0], r1 = ranges[ri][1];
                    memset(y, 0x5A, (ROWS + 1) * sizeof *y);
                    ck_assert_int_eq(quant_matvec(t, data, nbytes, ROWS, cols, r0, r1, x, y, scratch, "w", &e), 0);
                    ck_assert_uint_eq(((uint8_t *)y)[(r1 - r0) * sizeof *y], 0x5A);
                    for (size_t r = r0; r < r1; r++) {
                        ck_assert_int_eq(quant_rows_naive(t, data, nbytes, ROWS, cols, r, r + 1, wr, "w", &e), 0);
                        float sx = 0, wmax = 0;
                        for (size_t k = 0; k < cols; k++) sx += fabsf(x[k]), wmax = fmaxf(wmax, fabsf(wr[k]));
                        const float tol = 64 * FLT_EPSILON * sx * wmax, err = fabsf(y[r - r0] - ref[r]);
                        if (!(err <= tol))
                            ck_abort_msg("%s kernel %s rows [%zu, %zu) row %zu: %.9g vs %.9g (tolerance %g)",
                                         gguf_type_name(t), kernels[kn], r0, r1, r, y[r - r0], ref[r], tol);
                        if (err / tol > worst) worst = err / tol;
                    }
                }
            }
        }
        gemm_force_kernel(NULL);
        free(data), free(x), free(ref), free(y), free(wr), free(scratch);
    }
    fprintf(stderr, "NOTE %s: largest error %.3f of the tolerance\n", __func__, worst);
    ck_assert_float_lt(worst, 0.5f); /* a 2x margin */
}
END_TEST

START_TEST(direct_product_refuses_uncovered_types_and_bad_ranges_naming_the_tensor) {
    uint8_t blk[34] = {0};
    float x[32] = {0}, y[2], scratch[2];
    AvErr e;
    ck_assert(!quant_matvec_covers(GGUF_T_F16) && !quant_matvec_covers(GGUF_T_F32) && !quant_matvec_covers(GGUF_T_Q2_K));
    ck_assert_int_eq(quant_matvec(GGUF_T_F16, blk, sizeof blk, 1, 16, 0, 1, x, y, scratch, "blk.3.w", &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "blk.3.w"));
    ck_assert_int_eq(quant_matvec(GGUF_T_Q8_0, blk, 34, 1, 32, 1, 2, x, y, scratch, "w", &e), -1);
    ck_assert_int_eq(quant_matvec(GGUF_T_Q8_0, blk, 34, 2, 32, 0, 2, x, y, scratch, "w", &e), -1);
    ck_assert_int_eq(quant_matvec(GGUF_T_Q8_0, blk, 34, 1, 32, 0, 1, x, y, scratch, "w", &e), 0);
    ck_assert(y[0] == 0.0f);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, parses_metadata_and_tensor_of_a_well_formed_image);
    tcase_add_test(tc, a_struct_filled_by_the_reader_is_safe_to_close_whatever_it_held);
    tcase_add_test(tc, refuses_every_truncation_of_a_well_formed_image);
    tcase_add_test(tc, refuses_hostile_headers_counts_lengths_and_types);
    tcase_add_test(tc, reads_the_real_smollm2_gguf);
    tcase_add_test(tc, dequantizer_refuses_unsupported_types_and_bad_ranges_naming_the_tensor);
    tcase_add_test(tc, fast_dequantizer_equals_naive_bit_for_bit_on_random_blocks_and_every_row_range);
    tcase_add_test(tc, fast_f16_and_bf16_widening_equal_naive_on_all_65536_values);
    tcase_add_test(tc, direct_product_from_blocks_matches_the_widened_rows_on_every_kernel);
    tcase_add_test(tc, direct_product_refuses_uncovered_types_and_bad_ranges_naming_the_tensor);
    suite_add_tcase(s, tc);
    return s;
}
