/* test_diff.c — attnviz diff's alignment and divergence against naive
 * references written here: an exhaustive LCS length, and the Jensen–Shannon
 * divergence of dense vectors over the merged key axis via KL to the mixture
 * in natural logs (divided by ln 2). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "diff_out.h"
#include "check_util.h"

/* ---------------------------------------------------------------- naive references */

/* LCS length by the plain recursion over suffixes, memoized (sequences <= 16). */
static int lcs_memo[17][17];
static int lcs_rec(const int *a, int n, const int *b, int m, int i, int j) {
    if (i == n || j == m) return 0;
    int *c = &lcs_memo[i][j];
    if (*c >= 0) return *c;
    int best = lcs_rec(a, n, b, m, i + 1, j);
    int t = lcs_rec(a, n, b, m, i, j + 1);
    if (t > best) best = t;
    if (a[i] == b[j]) {
        t = 1 + lcs_rec(a, n, b, m, i + 1, j + 1);
        if (t > best) best = t;
    }
    return *c = best;
}
static int naive_lcs(const int *a, int n, const int *b, int m) {
    memset(lcs_memo, -1, sizeof lcs_memo);
    return lcs_rec(a, n, b, m, 0, 0);
}

/* KL(p || q) in nats over k bins (0 log 0 = 0). */
static double kl(const double *p, const double *q, int k) {
    double s = 0;
    for (int i = 0; i < k; i++)
        if (p[i] > 0) s += p[i] * log(p[i] / q[i]);
    return s;
}

/* Row pa (n_a) vs row pb (n_b) as dense vectors over the merged keys: every A
 * key (B's weight from the alignment, else 0), then every unaligned B key. */
static double naive_row(const float *pa, const float *pb, const DiffAlign *al) {
    int k = al->n_a + al->n_b;
    double *p = calloc((size_t)k, sizeof *p), *q = calloc((size_t)k, sizeof *q), *m = calloc((size_t)k, sizeof *m);
    ck_assert(p && q && m);
    double sa = 0, sb = 0;
    int bins = 0;
    for (int j = 0; j < al->n_a; j++, bins++) {
        p[bins] = pa[j];
        q[bins] = al->a_to_b[j] >= 0 ? pb[al->a_to_b[j]] : 0;
    }
    for (int j = 0; j < al->n_b; j++)
        if (al->b_to_a[j] < 0) q[bins++] = pb[j];
    for (int i = 0; i < bins; i++) sa += p[i], sb += q[i];
    for (int i = 0; i < bins; i++) p[i] /= sa, q[i] /= sb, m[i] = (p[i] + q[i]) / 2;
    double r = (0.5 * kl(p, m, bins) + 0.5 * kl(q, m, bins)) / log(2);
    free(p), free(q), free(m);
    return r;
}

static void check_alignment(const int *a, int n, const int *b, int m, const DiffAlign *al) {
    ck_assert_int_eq(al->n_a, n);
    ck_assert_int_eq(al->n_b, m);
    int pairs = 0, last = -1;
    for (int i = 0; i < n; i++) {
        int j = al->a_to_b[i];
        if (j < 0) continue;
        ck_assert_int_lt(j, m);
        ck_assert_int_gt(j, last); /* monotone */
        ck_assert_int_eq(a[i], b[j]);
        ck_assert_int_eq(al->b_to_a[j], i);
        last = j;
        pairs++;
    }
    for (int j = 0; j < m; j++)
        if (al->b_to_a[j] >= 0) ck_assert_int_eq(al->a_to_b[al->b_to_a[j]], j);
    ck_assert_int_eq(pairs, al->n_pairs);
}

/* Random attention rows (n x n, each summing to 1), some weights exactly 0. */
static void random_attention(float *x, int n, unsigned seed, int causal) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) {
            float v = frand(&seed);
            v = v < -0.4f || (causal && j > i) ? 0 : v + 1.0f;
            x[i * n + j] = v, s += v;
        }
        if (s == 0) x[i * n + i] = 1, s = 1;
        for (int j = 0; j < n; j++) x[i * n + j] = (float)(x[i * n + j] / s);
    }
}

/* ---------------------------------------------------------------- alignment */

START_TEST(alignment_is_a_longest_common_subsequence) {
    unsigned seed = 7;
    for (int t = 0; t < 400; t++) {
        int n = (int)((frand(&seed) + 1) * 8), m = (int)((frand(&seed) + 1) * 8), a[16], b[16];
        int alpha = 2 + t % 4; /* small alphabets: many ties between equally long alignments */
        for (int i = 0; i < n; i++) a[i] = (int)((frand(&seed) + 1) * 0.5f * alpha) % alpha;
        for (int j = 0; j < m; j++) b[j] = (int)((frand(&seed) + 1) * 0.5f * alpha) % alpha;
        DiffAlign al;
        AvErr e;
        ck_assert_int_eq(diff_align(a, n, b, m, &al, &e), 0);
        check_alignment(a, n, b, m, &al);
        ck_assert_int_eq(al.n_pairs, naive_lcs(a, n, b, m));
        diff_align_free(&al);
    }
}
END_TEST

START_TEST(alignment_of_two_sentences) {
    /* [CLS] the cat sat on the mat [SEP] vs [CLS] the dog sat on a mat [SEP] */
    int a[] = {2, 10, 11, 12, 13, 10, 14, 3}, b[] = {2, 10, 15, 12, 13, 16, 14, 3};
    DiffAlign al;
    AvErr e;
    ck_assert_int_eq(diff_align(a, 8, b, 8, &al, &e), 0);
    int want[] = {0, 1, -1, 3, 4, -1, 6, 7};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(al.a_to_b[i], want[i]);
    ck_assert_int_eq(al.n_pairs, 6);
    diff_align_free(&al);
    /* identical: every token with itself; one empty side: nothing aligns */
    ck_assert_int_eq(diff_align(a, 8, a, 8, &al, &e), 0);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(al.a_to_b[i], i);
    diff_align_free(&al);
    ck_assert_int_eq(diff_align(a, 8, b, 0, &al, &e), 0);
    ck_assert_int_eq(al.n_pairs, 0);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(al.a_to_b[i], -1);
    diff_align_free(&al);
}
END_TEST

START_TEST(alignment_refuses_a_huge_middle) {
    int n = 70000;
    int *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    ck_assert(a && b);
    for (int i = 0; i < n; i++) a[i] = i, b[i] = n - i; /* nothing in common at either end */
    DiffAlign al;
    AvErr e;
    ck_assert_int_eq(diff_align(a, n, b, n, &al, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "too many to align"));
    free(a), free(b);
}
END_TEST

/* ---------------------------------------------------------------- divergence */

START_TEST(divergence_matches_the_naive_reference) {
    unsigned seed = 11;
    double worst = 0;
    for (int t = 0; t < 200; t++) {
        int n = 1 + (int)((frand(&seed) + 1) * 6), m = 1 + (int)((frand(&seed) + 1) * 6), a[16], b[16];
        for (int i = 0; i < n; i++) a[i] = (int)((frand(&seed) + 1) * 2);
        for (int j = 0; j < m; j++) b[j] = (int)((frand(&seed) + 1) * 2);
        DiffAlign al;
        AvErr e;
        ck_assert_int_eq(diff_align(a, n, b, m, &al, &e), 0);
        float A[256], B[256];
        random_attention(A, n, seed + 1, t & 1);
        random_attention(B, m, seed + 2, t & 1);
        double sum = 0;
        int rows = 0;
        for (int i = 0; i < n; i++) {
            if (al.a_to_b[i] < 0) continue;
            double got = diff_jsd_row(A + i * n, B + al.a_to_b[i] * m, &al);
            double want = naive_row(A + i * n, B + al.a_to_b[i] * m, &al);
            ck_assert_double_eq_tol(got, want, 1e-12);
            ck_assert(got >= 0 && got <= 1 + 1e-12);
            if (fabs(got - want) > worst) worst = fabs(got - want);
            sum += want, rows++;
        }
        ck_assert_double_eq_tol(diff_head_jsd(A, B, &al), rows ? sum / rows : 0, 1e-12);
        diff_align_free(&al);
    }
    ck_assert(worst < 1e-12);
}
END_TEST

START_TEST(divergence_known_values_and_symmetry) {
    int ids[] = {1, 2, 3};
    DiffAlign al, rev;
    AvErr e;
    ck_assert_int_eq(diff_align(ids, 3, ids, 3, &al, &e), 0);
    float A[9];
    random_attention(A, 3, 5, 0);
    /* identical inputs: 0 */
    ck_assert_double_eq_tol(diff_head_jsd(A, A, &al), 0, 1e-15);
    /* disjoint supports: 1 bit (ln 2 nats) on every row */
    float P[9] = {1, 0, 0, 0.5f, 0.5f, 0, 0, 0, 1}, Q[9] = {0, 0.25f, 0.75f, 0, 0, 1, 0.5f, 0.5f, 0};
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(diff_jsd_row(P + 3 * i, Q + 3 * i, &al), 1, 1e-15);
    ck_assert_double_eq_tol(diff_head_jsd(P, Q, &al), 1, 1e-15);
    /* a half overlap: p = (1, 0), q = (1/2, 1/2): 1.5 - 0.75 log2 3 */
    float p2[2] = {1, 0}, q2[2] = {0.5f, 0.5f};
    int two[] = {1, 2};
    DiffAlign al2;
    ck_assert_int_eq(diff_align(two, 2, two, 2, &al2, &e), 0);
    ck_assert_double_eq_tol(diff_jsd_row(p2, q2, &al2), 1.5 - 0.75 * log2(3.0), 1e-12);
    diff_align_free(&al2);
    /* symmetry, also with unaligned tokens on both sides: JSD(A, B) = JSD(B, A) */
    int a[] = {1, 7, 2, 3, 9}, b[] = {1, 2, 8, 3};
    diff_align_free(&al);
    ck_assert_int_eq(diff_align(a, 5, b, 4, &al, &e), 0);
    ck_assert_int_eq(diff_align(b, 4, a, 5, &rev, &e), 0);
    float X[25], Y[16];
    random_attention(X, 5, 9, 0);
    random_attention(Y, 4, 10, 0);
    ck_assert_double_eq_tol(diff_head_jsd(X, Y, &al), diff_head_jsd(Y, X, &rev), 1e-15);
    ck_assert(diff_head_jsd(X, Y, &al) > 0);
    /* a row all on a key the other input lacks: 1 bit whatever the other row is */
    float onlyA[5] = {0, 1, 0, 0, 0};
    ck_assert_double_eq_tol(diff_jsd_row(onlyA, Y, &al), 1, 1e-15);
    diff_align_free(&al);
    diff_align_free(&rev);
}
END_TEST

/* ---------------------------------------------------------------- documents */

static const char *TOKS_A[] = {"[CLS]", "the", "cat", "sat", "[SEP]"}, *TOKS_B[] = {"[CLS]", "the", "dog", "sat", "[SEP]"};

START_TEST(divergence_per_selected_head_and_its_json) {
    enum { L = 2, H = 3, N = 5 };
    int ia[N] = {2, 10, 11, 12, 3}, ib[N] = {2, 10, 15, 12, 3}, types[N] = {0};
    unsigned char flags[N] = {1, 0, 0, 0, 1}, starts[N] = {1, 1, 1, 1, 1};
    static float attA[L * H * N * N], attB[L * H * N * N];
    for (int k = 0; k < L * H; k++) {
        random_attention(attA + k * N * N, N, 100 + k, 0);
        /* B: A's rows in layer 0, others in layer 1 */
        if (k < H) memcpy(attB + k * N * N, attA + k * N * N, sizeof(float) * N * N);
        else random_attention(attB + k * N * N, N, 200 + k, 0);
    }
    ModelConfig cfg = {.num_layers = L, .num_heads = H};
    TokEncoding ea = {.n = N, .ids = ia, .type_ids = types, .tokens = TOKS_A, .special = flags, .word_start = starts, .b_start = -1};
    TokEncoding eb = ea;
    eb.ids = ib, eb.tokens = TOKS_B;
    Capture ca = {.n_layers = L, .n_heads = H, .n_tokens = N, .head_dim = 1, .attn = attA, .cap_tokens = N};
    Capture cb = ca;
    cb.attn = attB;
    OutDoc a = {.cfg = &cfg, .enc = &ea, .cap = &ca, .model_name = "m", .text_a = "the cat sat", .precision = 6};
    OutDoc b = a;
    b.enc = &eb, b.cap = &cb, b.text_a = "the dog sat";
    DiffAlign al;
    AvErr e;
    ck_assert_int_eq(diff_align(ia, N, ib, N, &al, &e), 0);
    double jsd[L * H];
    ck_assert_int_eq(diff_divergence(&a, &b, &al, jsd, &e), 0);
    for (int k = 0; k < L * H; k++) {
        double want = 0;
        for (int i = 0; i < N; i++)
            if (al.a_to_b[i] >= 0) want += naive_row(attA + k * N * N + i * N, attB + k * N * N + al.a_to_b[i] * N, &al);
        want /= al.n_pairs;
        ck_assert_double_eq_tol(jsd[k], want, 1e-12);
    }
    /* layer 0: the same rows, but A's "cat" and B's "dog" are different keys: > 0 where they get weight */
    for (int h = 0; h < H; h++) ck_assert(jsd[h] > 0 && jsd[h] < jsd[H + h] + 1);
    /* the members are JSON with the numbers and the alignment */
    struct OutDiff df = {&b, 0, al.a_to_b, al.b_to_a, al.n_pairs, jsd, NULL, NULL};
    a.diff = &df;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    fputc('{', f);
    ck_assert_int_eq(diff_write_members(f, &a, &e), 0);
    fputc('}', f);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    ck_assert_msg(j != NULL, "not JSON: %s", buf);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "mode")->valuestring, "texts");
    const cJSON *dv = cJSON_GetObjectItem(j, "divergence"), *ph = cJSON_GetObjectItem(dv, "per_head");
    ck_assert_int_eq(cJSON_GetArraySize(ph), L);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            ck_assert_double_eq_tol(cJSON_GetArrayItem(cJSON_GetArrayItem(ph, l), h)->valuedouble, jsd[l * H + h], 1e-9);
    ck_assert_int_eq(cJSON_GetObjectItem(dv, "log_base")->valueint, 2);
    const cJSON *aln = cJSON_GetObjectItem(j, "alignment");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(aln, "pairs")), 4);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(aln, "only_a"), 0)->valueint, 2);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(aln, "only_b"), 0)->valueint, 2);
    const cJSON *rk = cJSON_GetObjectItem(dv, "ranking");
    ck_assert_int_eq(cJSON_GetArraySize(rk), L * H);
    for (int r = 1; r < L * H; r++)
        ck_assert(cJSON_GetObjectItem(cJSON_GetArrayItem(rk, r - 1), "jsd")->valuedouble >=
                  cJSON_GetObjectItem(cJSON_GetArrayItem(rk, r), "jsd")->valuedouble);
    cJSON_Delete(j);
    free(buf);
    /* a capture of another shape is refused */
    Capture bad = cb;
    bad.n_tokens = N - 1;
    b.cap = &bad;
    ck_assert_int_eq(diff_divergence(&a, &b, &al, jsd, &e), -1);
    diff_align_free(&al);
}
END_TEST

START_TEST(sink_mass_is_the_mean_weight_on_token_0_after_row_0) {
    /* row 0 (all on token 0 in a causal model) is left out */
    const float A[9] = {1.0f, 0, 0, 0.25f, 0.75f, 0, 0.5f, 0.25f, 0.25f};
    ck_assert_double_eq_tol(diff_sink_mass(A, 3), (0.25 + 0.5) / 2, 1e-12);
    const float one[1] = {1.0f};
    ck_assert_double_eq(diff_sink_mass(one, 1), 1.0);
    ck_assert_double_eq(diff_sink_mass(one, 0), 0.0);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, alignment_is_a_longest_common_subsequence);
    tcase_add_test(tc, alignment_of_two_sentences);
    tcase_add_test(tc, alignment_refuses_a_huge_middle);
    tcase_add_test(tc, divergence_matches_the_naive_reference);
    tcase_add_test(tc, divergence_known_values_and_symmetry);
    tcase_add_test(tc, divergence_per_selected_head_and_its_json);
    tcase_add_test(tc, sink_mass_is_the_mean_weight_on_token_0_after_row_0);
    suite_add_tcase(s, tc);
    return s;
}
