/* test_tokenizer.c — the BERT tokenizer against Hugging Face's output on a wide
 * corpus (tests/tokenizer/, made by oracle.mjs) and behaviour tests on small
 * vocabularies written to temp files. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer.h"
#include "check_util.h"

#define CORPUS_PATH "tests/tokenizer/corpus.tsv"
#define EXPECTED_PATH "tests/tokenizer/expected.jsonl"
/* The same pipeline with "lowercase": false, "strip_accents": null (cased and
 * multilingual-cased BERT), from a tokenizer.json variant oracle_check.sh builds. */
#define EXPECTED_CASED_PATH "tests/tokenizer/expected_cased.jsonl"
/* bert-base-uncased's vocab.txt, from tools/refdata.sh */
#define REAL_VOCAB "bert-base-uncased/vocab.txt"

/* ---- helpers ----------------------------------------------------------- */

/* Writes `content` to a fresh temp file; the caller unlinks path. */

/* A small uncased-style vocab for behaviour tests; ids are line numbers. */
static const char *SMALL_VOCAB =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"          /* 0-4 */
    "the\nun\nuna\n##aff\n##able\n##ffable\n"       /* 5-10 */
    "a\n##a\nb\n##b\n"                              /* 11-14 */
    "hello\nworld\n,\n!\n.\n[\n]\nmask\n"           /* 15-22 */
    "我\n爱\ncafe\nnaive\nCafé\nοδοσ\nσ\n"          /* 23-29 */
    "ab\ncd\ne\nf\n¿\n—\n##af\n";                   /* 30-36 */

static Tokenizer *load_str(const char *content, int lowercase) {
    char path[64];
    write_temp(path, content, strlen(content));
    Tokenizer *t = NULL;
    AvErr e = {0};
    int rc = tok_load(&t, path, lowercase, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "tok_load: %s", e.msg);
    return t;
}

static Tokenizer *small(void) { return load_str(SMALL_VOCAB, 1); }

/* Encodes A (and B unless NULL) and returns the tokens joined by spaces. */
static char *encode_join(const Tokenizer *t, const char *a, const char *b, int max_len,
                         TokEncoding *enc) {
    AvErr e = {0};
    int rc = tok_encode(t, a, strlen(a), b, b ? strlen(b) : 0, max_len, enc, &e);
    ck_assert_msg(rc == 0, "tok_encode(\"%s\"): %s", a, e.msg);
    static char buf[4096];
    buf[0] = '\0';
    for (int i = 0; i < enc->n; i++) {
        if (i) strcat(buf, " ");
        ck_assert_uint_lt(strlen(buf) + strlen(enc->tokens[i]) + 2, sizeof buf);
        strcat(buf, enc->tokens[i]);
    }
    return buf;
}

static void expect_tokens(const Tokenizer *t, const char *a, const char *b, const char *want) {
    TokEncoding enc;
    const char *got = encode_join(t, a, b, 0, &enc);
    ck_assert_msg(strcmp(got, want) == 0, "\"%s\": got \"%s\", want \"%s\"", a, got, want);
    tok_encoding_free(&enc);
}


#include "../tokenizer/corpus_parse.h"

/* ---- tests against the real bert-base-uncased vocab --------------------- */

START_TEST(tokenizer_encodes_time_flies_like_an_arrow) {
    char vocab[4096];
    refdata(vocab, REAL_VOCAB);
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load(&t, vocab, 1, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(t), 30522);
    TokEncoding enc;
    const char *s = "time flies like an arrow";
    ck_assert_int_eq(tok_encode(t, s, strlen(s), NULL, 0, 512, &enc, &e), 0);
    const int want[] = {101, 2051, 10029, 2066, 2019, 8612, 102};
    ck_assert_int_eq(enc.n, 7);
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(enc.ids[i], want[i]);
        ck_assert_int_eq(enc.type_ids[i], 0);
    }
    ck_assert_int_eq(enc.b_start, -1);
    ck_assert_int_eq(enc.n_truncated, 0);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

/* Every corpus line through the real vocab, against the oracle's output. */
static void check_corpus(int lowercase, const char *expected) {
    char vocab[4096];
    refdata(vocab, REAL_VOCAB);
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load(&t, vocab, lowercase, &e) == 0, "%s", e.msg);
    FILE *fc = fopen(CORPUS_PATH, "r"), *fe = fopen(expected, "r");
    ck_assert_msg(fc && fe, "cannot open %s / %s", CORPUS_PATH, expected);
    char *cl = NULL, *el = NULL;
    size_t ccap = 0, ecap = 0;
    int line = 0, mismatches = 0;
    ssize_t n;
    while ((n = getline(&cl, &ccap, fc)) >= 0) {
        line++;
        if (n > 0 && cl[n - 1] == '\n') cl[--n] = '\0';
        ck_assert_msg(getline(&el, &ecap, fe) >= 0, "%s ends before corpus line %d", expected,
                      line);
        Str a, b;
        parse_corpus_line(cl, &a, &b);
        TokEncoding enc;
        int rc = tok_encode(t, a.s, a.len, b.s, b.len, 0, &enc, &e);
        ck_assert_msg(rc == 0, "line %d: %s", line, e.msg);
        cJSON *want = cJSON_Parse(el);
        ck_assert_msg(want, "%s line %d is not JSON", expected, line);
        int ok = json_ints_equal(cJSON_GetObjectItem(want, "input_ids"), enc.ids, enc.n) &&
                 json_ints_equal(cJSON_GetObjectItem(want, "token_type_ids"), enc.type_ids,
                                 enc.n) &&
                 json_strs_equal(cJSON_GetObjectItem(want, "tokens"), enc.tokens, enc.n);
        if (!ok) {
            mismatches++;
            fprintf(stderr, "corpus line %d: %s\n  want %s  got ", line, cl, el);
            for (int i = 0; i < enc.n; i++) fprintf(stderr, "%d:%s ", enc.ids[i], enc.tokens[i]);
            fprintf(stderr, "\n");
        }
        cJSON_Delete(want);
        tok_encoding_free(&enc);
        free(a.s);
        free(b.s);
    }
    ck_assert_msg(getline(&el, &ecap, fe) < 0, "%s has more lines than the corpus", expected);
    free(cl);
    free(el);
    fclose(fc);
    fclose(fe);
    tok_free(t);
    ck_assert_int_ge(line, 200);
    ck_assert_msg(mismatches == 0, "%s: %d of %d corpus lines differ from Hugging Face", expected,
                  mismatches, line);
}

START_TEST(tokenizer_matches_hugging_face_on_every_corpus_line) {
    check_corpus(1, EXPECTED_PATH);
}
END_TEST

START_TEST(tokenizer_cased_matches_hugging_face_on_every_corpus_line) {
    /* No lowercasing, no accent stripping, CJK still split: the uncased vocab
     * read as cased makes many [UNK]s, which is what tells the modes apart. */
    check_corpus(0, EXPECTED_CASED_PATH);
}
END_TEST

/* ---- behaviour on small vocabularies ------------------------------------- */

START_TEST(tokenizer_takes_longest_wordpiece_match_first) {
    Tokenizer *t = small();
    /* "una" beats "un"; then "##ffable" is the longest continuation. */
    expect_tokens(t, "unaffable", NULL, "[CLS] una ##ffable [SEP]");
    expect_tokens(t, "aaa bab", NULL, "[CLS] a ##a ##a b ##a ##b [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_maps_word_with_unmatchable_rest_to_single_unk) {
    Tokenizer *t = small();
    /* Greedy "una" leaves "f" (no "##f"): no backtracking to "un ##af", one [UNK]. */
    expect_tokens(t, "unaf", NULL, "[CLS] [UNK] [SEP]");
    expect_tokens(t, "hello xyz world", NULL, "[CLS] hello [UNK] world [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_maps_words_over_100_chars_to_unk) {
    Tokenizer *t = small();
    char w[128];
    memset(w, 'a', 100);
    w[100] = '\0';
    TokEncoding enc;
    encode_join(t, w, NULL, 0, &enc);
    ck_assert_int_eq(enc.n, 102); /* a ##a x99 */
    ck_assert_str_eq(enc.tokens[100], "##a");
    tok_encoding_free(&enc);
    w[100] = 'a';
    w[101] = '\0';
    expect_tokens(t, w, NULL, "[CLS] [UNK] [SEP]");
    /* The limit counts code points after normalization: 101 x "á" is too long. */
    char accented[256] = "";
    for (int i = 0; i < 101; i++) strcat(accented, "\xC3\xA1");
    expect_tokens(t, accented, NULL, "[CLS] [UNK] [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_splits_cjk_characters) {
    Tokenizer *t = small();
    expect_tokens(t, "我爱hello", NULL, "[CLS] 我 爱 hello [SEP]");
    /* Kana and Hangul are not split per character: each run is one word. */
    expect_tokens(t, "テスト 한국", NULL, "[CLS] [UNK] [UNK] [SEP]");
    /* Supplementary-plane ideographs are split too (U+20000). */
    expect_tokens(t, "hello\xF0\xA0\x80\x80world", NULL, "[CLS] hello [UNK] world [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_splits_punctuation_into_own_tokens) {
    Tokenizer *t = small();
    expect_tokens(t, "hello,world!", NULL, "[CLS] hello , world ! [SEP]");
    expect_tokens(t, "¿hello—world...", NULL, "[CLS] ¿ hello — world . . . [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_lowercases_and_strips_accents_when_uncased) {
    Tokenizer *t = small();
    expect_tokens(t, "CAFÉ Naïve", NULL, "[CLS] cafe naive [SEP]");
    /* Decomposed input (e + U+0301) normalizes the same way. */
    expect_tokens(t, "Cafe\xCC\x81", NULL, "[CLS] cafe [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_keeps_case_and_accents_when_cased) {
    Tokenizer *t = load_str(SMALL_VOCAB, 0);
    ck_assert_int_eq(tok_lowercase(t), 0);
    expect_tokens(t, "Café cafe", NULL, "[CLS] Café cafe [SEP]");
    expect_tokens(t, "CAFE", NULL, "[CLS] [UNK] [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_lowercases_sigma_per_code_point_like_rust) {
    Tokenizer *t = small();
    /* Rust lowercases char by char: a final Σ becomes σ, not ς. */
    expect_tokens(t, "ΟΔΟΣ Σ", NULL, "[CLS] οδοσ σ [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_drops_control_chars_and_maps_spaces) {
    Tokenizer *t = small();
    /* NUL, U+FFFD, U+200B (Cf) and U+0085 (Cc) vanish; tab and NBSP separate. */
    static const char s[] = "a\0b c\xEF\xBF\xBD" "d\te\xC2\xA0" "f a\xE2\x80\x8B" "b c\xC2\x85" "d";
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, s, sizeof s - 1, NULL, 0, 0, &enc, &e), 0);
    const char *want[] = {"[CLS]", "ab", "cd", "e", "f", "ab", "cd", "[SEP]"};
    ck_assert_int_eq(enc.n, 8);
    for (int i = 0; i < enc.n; i++) ck_assert_str_eq(enc.tokens[i], want[i]);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_keeps_special_tokens_written_in_text) {
    Tokenizer *t = small();
    expect_tokens(t, "the [MASK]!", NULL, "[CLS] the [MASK] ! [SEP]");
    expect_tokens(t, "a[MASK][SEP]b", NULL, "[CLS] a [MASK] [SEP] b [SEP]");
    /* Matching is on the raw text: lower case is ordinary punctuation + word. */
    expect_tokens(t, "[mask]", NULL, "[CLS] [ mask ] [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_marks_pair_type_ids_and_b_start) {
    Tokenizer *t = small();
    TokEncoding enc;
    const char *got = encode_join(t, "hello world", "the a", 0, &enc);
    ck_assert_str_eq(got, "[CLS] hello world [SEP] the a [SEP]");
    const int types[] = {0, 0, 0, 0, 1, 1, 1};
    ck_assert_int_eq(enc.n, 7);
    for (int i = 0; i < 7; i++) ck_assert_int_eq(enc.type_ids[i], types[i]);
    ck_assert_int_eq(enc.b_start, 4);
    ck_assert_int_eq(enc.ids[0], 2);
    ck_assert_int_eq(enc.ids[3], 3);
    /* the template's tokens carry their role, the words none */
    const int roles[] = {TOK_ROLE_CLS, 0, 0, TOK_ROLE_SEP, 0, 0, TOK_ROLE_SEP};
    for (int i = 0; i < 7; i++) ck_assert_int_eq(enc.role[i], roles[i]);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_encodes_empty_b_as_a_pair) {
    Tokenizer *t = small();
    TokEncoding enc;
    const char *got = encode_join(t, "hello", "", 0, &enc);
    ck_assert_str_eq(got, "[CLS] hello [SEP] [SEP]");
    ck_assert_int_eq(enc.type_ids[3], 1);
    ck_assert_int_eq(enc.b_start, 3);
    tok_encoding_free(&enc);
    got = encode_join(t, "", NULL, 0, &enc);
    ck_assert_str_eq(got, "[CLS] [SEP]");
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

static char *repeat_word(const char *w, int n) {
    static char buf[2][512];
    static int k;
    char *b = buf[k++ & 1];
    b[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strcat(b, " ");
        strcat(b, w);
    }
    return b;
}

START_TEST(tokenizer_truncates_pairs_longest_first) {
    Tokenizer *t = small();
    /* {len A, len B, max_len, kept A, kept B}, as the Rust tokenizers library
     * (0.23, truncation LongestFirst) keeps them. */
    static const int cases[][5] = {
        {2, 8, 10, 2, 5}, {4, 4, 10, 3, 4}, {4, 8, 10, 3, 4}, {8, 8, 10, 3, 4},
        {8, 2, 10, 5, 2}, {8, 4, 10, 4, 3}, {0, 8, 10, 0, 7}, {8, 0, 10, 7, 0},
        {5, 10, 10, 3, 4}, {3, 3, 10, 3, 3}, {2, 8, 9, 2, 4},  {4, 4, 9, 3, 3},
        {8, 2, 9, 4, 2},  {8, 4, 9, 3, 3},  {8, 8, 3, 0, 0},
        /* Both longer than max_len: a tie, whichever is longer. */
        {11, 10, 10, 3, 4}, {13, 11, 10, 3, 4}, {24, 22, 20, 8, 9}, {30, 19, 20, 9, 8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int *k = cases[c];
        TokEncoding enc;
        AvErr e = {0};
        const char *a = repeat_word("a", k[0]), *b = repeat_word("b", k[1]);
        ck_assert_int_eq(tok_encode(t, a, strlen(a), b, strlen(b), k[2], &enc, &e), 0);
        ck_assert_msg(enc.n == k[3] + k[4] + 3 && enc.b_start == k[3] + 2,
                      "case %zu: n=%d b_start=%d", c, enc.n, enc.b_start);
        ck_assert_int_eq(enc.n_truncated, k[0] + k[1] - k[3] - k[4]);
        ck_assert_int_eq(enc.ids[enc.n - 1], 3); /* still ends with [SEP] */
        tok_encoding_free(&enc);
    }
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_breaks_truncation_ties_like_rust) {
    Tokenizer *t = small();
    /* Two sequences over max_len tie (B keeps the odd token) unless a word
     * crossing max_len, or a special token just before it, lengthens one. */
    static const struct {
        const char *a, *want;
    } cases[] = {
        {"a a a a a a a a a a a", "[CLS] a a a [SEP] b b b b [SEP]"},
        {"a a a a a a a a a unaffable", "[CLS] a a a a [SEP] b b b [SEP]"},
        {"a a a a a a a a a [MASK] a", "[CLS] a a a a [SEP] b b b [SEP]"},
        {"a a a a a a a a a a [MASK]", "[CLS] a a a [SEP] b b b b [SEP]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TokEncoding enc;
        const char *got = encode_join(t, cases[i].a, "b b b b b b b b b b b", 10, &enc);
        ck_assert_msg(strcmp(got, cases[i].want) == 0, "case %zu: got \"%s\"", i, got);
        ck_assert_int_eq(enc.n_truncated, 22 - 7);
        tok_encoding_free(&enc);
    }
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_truncates_single_sequence_to_max_len) {
    Tokenizer *t = small();
    TokEncoding enc;
    const char *got = encode_join(t, "hello world the a b", NULL, 5, &enc);
    ck_assert_str_eq(got, "[CLS] hello world the [SEP]");
    ck_assert_int_eq(enc.n_truncated, 2);
    tok_encoding_free(&enc);
    got = encode_join(t, "hello world", NULL, 4, &enc);
    ck_assert_int_eq(enc.n_truncated, 0);
    tok_encoding_free(&enc);
    /* Sub-word pieces are cut like any token. */
    got = encode_join(t, "aaaa", NULL, 4, &enc);
    ck_assert_str_eq(got, "[CLS] a ##a [SEP]");
    ck_assert_int_eq(enc.n_truncated, 2);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_rejects_max_len_below_special_tokens) {
    Tokenizer *t = small();
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "a", 1, "b", 1, 2, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "max length 2"));
    ck_assert_int_eq(tok_encode(t, "a", 1, NULL, 0, 1, &enc, &e), -1);
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_reports_invalid_utf8_byte_offset) {
    Tokenizer *t = small();
    static const struct {
        const char *s;
        int off;
    } cases[] = {
        {"ab\xC3(", 2},          /* bad continuation byte */
        {"\xC0\xAF", 0},         /* overlong '/' */
        {"ok \xED\xA0\x80", 3},  /* UTF-16 surrogate */
        {"abc\xE2\x82", 3},      /* truncated at the end */
        {"\xF4\x90\x80\x80", 0}, /* beyond U+10FFFF */
        {"caf\xC3\xA9 \xFF", 6}, /* after a valid 2-byte char */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TokEncoding enc;
        AvErr e = {0};
        ck_assert_int_eq(tok_encode(t, cases[i].s, strlen(cases[i].s), NULL, 0, 0, &enc, &e), -1);
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte offset %d", cases[i].off);
        ck_assert_msg(strstr(e.msg, want), "case %zu: \"%s\" lacks \"%s\"", i, e.msg, want);
    }
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "fine", 4, "x\x80", 2, 0, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "sentence B"));
    ck_assert_ptr_nonnull(strstr(e.msg, "byte offset 1"));
    tok_free(t);
}
END_TEST

START_TEST(tokenizer_tokens_point_into_the_vocab) {
    Tokenizer *t = small();
    TokEncoding enc;
    encode_join(t, "hello unaffable", "world", 0, &enc);
    for (int i = 0; i < enc.n; i++)
        ck_assert_ptr_eq(enc.tokens[i], tok_id_to_token(t, enc.ids[i]));
    tok_encoding_free(&enc);
    ck_assert_int_eq(tok_vocab_size(t), 37);
    ck_assert_int_eq(tok_token_to_id(t, "##ffable"), 10);
    ck_assert_int_eq(tok_token_to_id(t, "missing"), -1);
    ck_assert_str_eq(tok_id_to_token(t, 24), "爱");
    ck_assert_ptr_null(tok_id_to_token(t, 37));
    ck_assert_ptr_null(tok_id_to_token(t, -1));
    tok_free(t);
}
END_TEST

/* ---- vocabulary loading ------------------------------------------------- */

static void expect_load_error(const char *content, size_t len, const char *want1,
                              const char *want2) {
    char path[64];
    write_temp(path, content, len);
    Tokenizer *t = (Tokenizer *)1;
    AvErr e = {0};
    int rc = tok_load(&t, path, 1, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(e.msg, path), "error \"%s\" does not name the file", e.msg);
    ck_assert_msg(strstr(e.msg, want1), "error \"%s\" lacks \"%s\"", e.msg, want1);
    if (want2) ck_assert_msg(strstr(e.msg, want2), "error \"%s\" lacks \"%s\"", e.msg, want2);
    unlink(path);
}

START_TEST(vocab_without_unk_is_rejected) {
    const char *v = "[PAD]\n[CLS]\n[SEP]\nhello\n";
    expect_load_error(v, strlen(v), "[UNK]", NULL);
    v = "[UNK]\n[CLS]\nhello\n";
    expect_load_error(v, strlen(v), "[SEP]", NULL);
}
END_TEST

START_TEST(vocab_with_duplicate_token_is_rejected_naming_the_line) {
    const char *v = "[UNK]\n[CLS]\n[SEP]\nhello\nworld\nhello\n";
    expect_load_error(v, strlen(v), "line 6", "hello");
}
END_TEST

START_TEST(vocab_empty_is_rejected) { expect_load_error("", 0, "empty", NULL); }
END_TEST

START_TEST(vocab_with_absurdly_long_line_is_rejected) {
    char *v = malloc(3000);
    ck_assert_ptr_nonnull(v);
    strcpy(v, "[UNK]\n[CLS]\n[SEP]\n");
    size_t n = strlen(v);
    memset(v + n, 'x', 1500);
    strcpy(v + n + 1500, "\n");
    expect_load_error(v, strlen(v), "line 4", NULL);
    free(v);
}
END_TEST

/* Generated ids back to text (tok_decode) and into an encoding (tok_encoding_append). */
START_TEST(decode_replaces_each_broken_character_once) {
    Tokenizer *t;
    AvErr e;
    TokDirHint hint = {"gpt2", TOK_SOURCE_BPE_GPT2, -1, ""};
    ck_assert_int_eq(tok_load_dir(&t, "tests/data/small-gpt2", &hint, &e), 0);
    /* E6 B0 (two bytes of a three-byte character), F0 AA A9 (three of four), FF (never UTF-8) */
    const char *pieces[] = {"a", "\xc3\xa6", "\xc2\xb0", "b", "\xc3\xb0", "\xc2\xaa", "\xc2\xa9", "\xc3\xbf", "\xc3\xbf"};
    int ids[9];
    for (int i = 0; i < 9; i++) {
        ids[i] = tok_token_to_id(t, pieces[i]);
        ck_assert_int_ge(ids[i], 0);
    }
    char *text;
    ck_assert_int_eq(tok_decode(t, ids, 9, &text, &e), 0);
    ck_assert_str_eq(text, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(text);
    /* an id past the tokenizer (a padded embedding row) is spelled, decodes to nothing */
    TokEncoding enc = {0};
    enc.b_start = -1;
    int extra[2] = {ids[0], tok_vocab_size(t) + 5};
    ck_assert_int_eq(tok_encoding_append(t, &enc, extra, 2, &e), 0);
    ck_assert_int_eq(enc.n, 2);
    ck_assert_str_eq(enc.tokens[1], TOK_NO_TOKEN);
    ck_assert_int_eq(tok_decode(t, extra, 2, &text, &e), 0);
    ck_assert_str_eq(text, "a");
    free(text);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(vocab_missing_file_is_reported) {
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_int_eq(tok_load(&t, "/nonexistent/vocab.txt", 1, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/vocab.txt"));
}
END_TEST

START_TEST(vocab_with_crlf_line_ends_loads) {
    const char *v = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\r\n##s\r\nworld"; /* no final EOL */
    Tokenizer *t = load_str(v, 1);
    ck_assert_int_eq(tok_vocab_size(t), 7);
    ck_assert_int_eq(tok_token_to_id(t, "hello"), 4);
    ck_assert_int_eq(tok_token_to_id(t, "world"), 6);
    ck_assert_str_eq(tok_id_to_token(t, 4), "hello");
    expect_tokens(t, "Hellos world", NULL, "[CLS] hello ##s world [SEP]");
    tok_free(t);
}
END_TEST

START_TEST(infer_lowercase_reads_model_name_then_vocab) {
    ck_assert_int_eq(tok_infer_lowercase("models/bert-base-uncased", NULL), 1);
    ck_assert_int_eq(tok_infer_lowercase("models/bert-base-cased/", NULL), 0);
    ck_assert_int_eq(tok_infer_lowercase("/x/BERT-Large-Cased", NULL), 0);
    char path[64];
    const char *cased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nHello\n";
    write_temp(path, cased, strlen(cased));
    ck_assert_int_eq(tok_infer_lowercase("models/mybert", path), 0);
    /* The directory name wins over the vocab. */
    ck_assert_int_eq(tok_infer_lowercase("models/uncased_L-12", path), 1);
    unlink(path);
    const char *uncased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[unused0]\nhello\n##s\n";
    write_temp(path, uncased, strlen(uncased));
    ck_assert_int_eq(tok_infer_lowercase("models/mybert", path), 1);
    unlink(path);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("tokenizer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tokenizer_encodes_time_flies_like_an_arrow);
    tcase_add_test(tc, tokenizer_matches_hugging_face_on_every_corpus_line);
    tcase_add_test(tc, tokenizer_cased_matches_hugging_face_on_every_corpus_line);
    tcase_add_test(tc, tokenizer_takes_longest_wordpiece_match_first);
    tcase_add_test(tc, tokenizer_maps_word_with_unmatchable_rest_to_single_unk);
    tcase_add_test(tc, tokenizer_maps_words_over_100_chars_to_unk);
    tcase_add_test(tc, tokenizer_splits_cjk_characters);
    tcase_add_test(tc, tokenizer_splits_punctuation_into_own_tokens);
    tcase_add_test(tc, tokenizer_lowercases_and_strips_accents_when_uncased);
    tcase_add_test(tc, tokenizer_keeps_case_and_accents_when_cased);
    tcase_add_test(tc, tokenizer_lowercases_sigma_per_code_point_like_rust);
    tcase_add_test(tc, tokenizer_drops_control_chars_and_maps_spaces);
    tcase_add_test(tc, tokenizer_keeps_special_tokens_written_in_text);
    tcase_add_test(tc, tokenizer_marks_pair_type_ids_and_b_start);
    tcase_add_test(tc, tokenizer_encodes_empty_b_as_a_pair);
    tcase_add_test(tc, tokenizer_truncates_pairs_longest_first);
    tcase_add_test(tc, tokenizer_breaks_truncation_ties_like_rust);
    tcase_add_test(tc, tokenizer_truncates_single_sequence_to_max_len);
    tcase_add_test(tc, tokenizer_rejects_max_len_below_special_tokens);
    tcase_add_test(tc, tokenizer_reports_invalid_utf8_byte_offset);
    tcase_add_test(tc, tokenizer_tokens_point_into_the_vocab);
    tcase_add_test(tc, vocab_without_unk_is_rejected);
    tcase_add_test(tc, vocab_with_duplicate_token_is_rejected_naming_the_line);
    tcase_add_test(tc, vocab_empty_is_rejected);
    tcase_add_test(tc, vocab_with_absurdly_long_line_is_rejected);
    tcase_add_test(tc, vocab_missing_file_is_reported);
    tcase_add_test(tc, vocab_with_crlf_line_ends_loads);
    tcase_add_test(tc, infer_lowercase_reads_model_name_then_vocab);
    tcase_add_test(tc, decode_replaces_each_broken_character_once);
    suite_add_tcase(s, tc);
    return s;
}
