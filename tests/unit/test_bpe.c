/* test_bpe.c — byte-level BPE (bpe.c) and its GPT-2 / RoBERTa templates in
 * tokenizer.c: against the references' output on the corpora (made by
 * tests/tokenizer/bpe_oracle.mjs: js-tiktoken for GPT-2, Hugging Face's
 * tokenizers for RoBERTa, both equal to the Rust library's), truncation as the
 * Rust library does it, and behaviour on small vocabularies written to temp
 * files. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpe.h"
#include "tokenizer.h"
#include "check_util.h"
#include "../tokenizer/corpus_parse.h"

/* OpenAI's GPT-2 files (= the hub's vocab.json and merges.txt), from tools/refdata.sh */
#define GPT2_VOCAB "gpt2/encoder.json"
#define GPT2_MERGES "gpt2/vocab.bpe"
#define CORPUS_1 "tests/tokenizer/corpus.tsv"
#define CORPUS_2 "tests/tokenizer/bpe_corpus.tsv"
#define GPT2_EXPECTED "tests/tokenizer/bpe_gpt2_expected.jsonl"
#define ROBERTA_EXPECTED "tests/tokenizer/bpe_roberta_expected.jsonl"

/* ---- helpers ----------------------------------------------------------- */


/* The two GPT-2 files' paths: the test fails when they are absent. */
static void gpt2_files(char vocab[4096], char merges[4096]) {
    refdata(vocab, GPT2_VOCAB);
    refdata(merges, GPT2_MERGES);
}

/* GPT-2's bytes_to_unicode, transcribed from the Python original: the
 * printable bytes keep their code point, the rest get 256, 257... in order. */
static void reference_byte_table(uint32_t cp[256]) {
    int printable[256] = {0};
    for (int b = '!'; b <= '~'; b++) printable[b] = 1;
    for (int b = 0xA1; b <= 0xAC; b++) printable[b] = 1;
    for (int b = 0xAE; b <= 0xFF; b++) printable[b] = 1;
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) cp[b] = printable[b] ? (uint32_t)b : 256 + n++;
}

/* Appends s as a JSON string literal. */
static void json_str(char **p, const char *s) {
    *(*p)++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') *(*p)++ = '\\';
        *(*p)++ = *s;
    }
    *(*p)++ = '"';
}

static size_t put_cp(char *o, uint32_t c) {
    Str s = {o, 0};
    put_utf8(&s, c);
    return s.len;
}

/* Byte-mapped spelling of raw text ("hi you" -> "hiĠyou"). */
static char *spell(const char *raw) {
    static char buf[8][256];
    static int k;
    char *o = buf[k++ & 7];
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)raw; *s; s++)
        n += put_cp(o + n, bpe_byte_to_cp(*s));
    o[n] = '\0';
    return o;
}

/* A vocab.json with the 256 byte symbols (ids 0..255 in byte order), then
 * `extra` (raw text, byte-mapped here; NULL-terminated; "=x" is taken
 * verbatim) at 256, 257... */
static void write_vocab(char path[64], const char *const *extra) {
    size_t cap = 1 << 16;
    char *buf = malloc(cap), *p = buf;
    ck_assert_ptr_nonnull(buf);
    *p++ = '{';
    int id = 0;
    for (int b = 0; b < 256; b++, id++) {
        char sym[8] = {0};
        put_cp(sym, bpe_byte_to_cp((uint8_t)b));
        json_str(&p, sym);
        p += sprintf(p, ":%d,", id);
    }
    for (int i = 0; extra && extra[i]; i++, id++) {
        json_str(&p, extra[i][0] == '=' ? extra[i] + 1 : spell(extra[i]));
        p += sprintf(p, ":%d,", id);
    }
    p[-1] = '}';
    ck_assert_uint_lt((size_t)(p - buf), cap);
    write_temp(path, buf, (size_t)(p - buf));
    free(buf);
}

/* Merges text from raw-text pairs "a|b" (byte-mapped), one per line. */
static void write_merges(char path[64], const char *const *pairs) {
    char buf[4096] = "#version: 0.2\n";
    for (int i = 0; pairs && pairs[i]; i++) {
        const char *bar = strchr(pairs[i], '|');
        char left[64];
        snprintf(left, sizeof left, "%.*s", (int)(bar - pairs[i]), pairs[i]);
        strcat(buf, spell(left));
        strcat(buf, " ");
        strcat(buf, spell(bar + 1));
        strcat(buf, "\n");
    }
    write_temp(path, buf, strlen(buf));
}

static Tokenizer *load_small(const char *const *extra, const char *const *pairs, TokStyle style) {
    char vp[64], mp[64];
    write_vocab(vp, extra);
    write_merges(mp, pairs);
    Tokenizer *t = NULL;
    AvErr e = {0};
    int rc = tok_load_bpe(&t, vp, mp, style, &e);
    unlink(vp);
    unlink(mp);
    ck_assert_msg(rc == 0, "tok_load_bpe: %s", e.msg);
    return t;
}

/* Encodes and joins the display texts with '|'. */
static const char *encode_disp(const Tokenizer *t, const char *a, const char *b, TokEncoding *enc) {
    AvErr e = {0};
    int rc = tok_encode(t, a, strlen(a), b, b ? strlen(b) : 0, 0, enc, &e);
    ck_assert_msg(rc == 0, "tok_encode(\"%s\"): %s", a, e.msg);
    static char buf[4096];
    buf[0] = '\0';
    for (int i = 0; i < enc->n; i++) {
        if (i) strcat(buf, "|");
        ck_assert_uint_lt(strlen(buf) + strlen(enc->display[i]) + 2, sizeof buf);
        strcat(buf, enc->display[i]);
    }
    return buf;
}

static void expect_disp(const Tokenizer *t, const char *a, const char *b, const char *want) {
    TokEncoding enc;
    const char *got = encode_disp(t, a, b, &enc);
    ck_assert_msg(strcmp(got, want) == 0, "\"%s\": got \"%s\", want \"%s\"", a, got, want);
    tok_encoding_free(&enc);
}

/* Tokens for the small vocabularies: "hi", " you", "ok" and their merges. */
static const char *const WORDS[] = {"hi", " y", " yo", " you", "ok", " a", " b", "ab", "bc", "abc",
                                    "aa", "aaaa", NULL};
static const char *const WORD_MERGES[] = {"h|i", " |y", " y|o", " yo|u", "o|k", " |a", " |b", NULL};

/* ---- byte table and pre-tokenizer --------------------------------------- */

START_TEST(bpe_byte_table_is_gpt2_bytes_to_unicode) {
    uint32_t want[256];
    reference_byte_table(want);
    for (int b = 0; b < 256; b++) {
        ck_assert_uint_eq(bpe_byte_to_cp((uint8_t)b), want[b]);
        ck_assert_int_eq(bpe_cp_to_byte(want[b]), b);
    }
    ck_assert_uint_eq(bpe_byte_to_cp(' '), 0x120);  /* Ġ */
    ck_assert_uint_eq(bpe_byte_to_cp('\n'), 0x10A); /* Ċ */
    ck_assert_uint_eq(bpe_byte_to_cp(0xAD), 0x143); /* soft hyphen, the last one */
    /* Code points outside the table have no byte. */
    ck_assert_int_eq(bpe_cp_to_byte(' '), -1);
    ck_assert_int_eq(bpe_cp_to_byte(0x7F), -1);
    ck_assert_int_eq(bpe_cp_to_byte(0xAD), -1);
    ck_assert_int_eq(bpe_cp_to_byte(0x144), -1);
    ck_assert_int_eq(bpe_cp_to_byte(0x4E00), -1);
}
END_TEST

/* Splits s with bpe_pretoken_end, joined by '|'. */
static const char *pretok(const char *s) {
    static char buf[512];
    buf[0] = '\0';
    size_t len = strlen(s);
    for (size_t p = 0; p < len;) {
        size_t q = bpe_pretoken_end(s, len, p);
        ck_assert_uint_gt(q, p);
        ck_assert_uint_le(q, len);
        if (p) strcat(buf, "|");
        strncat(buf, s + p, q - p);
        p = q;
    }
    return buf;
}

START_TEST(bpe_pretokenizer_splits_like_gpt2_pattern) {
    /* Expected splits are the Rust library's ByteLevel pre-tokenizer output. */
    static const char *const cases[][2] = {
        {"Hello  world", "Hello| | world"},
        {"it's I'M we'Ve", "it|'s| I|'|M| we|'|Ve"}, /* contractions are lower case only */
        {"don't'll", "don|'t|'ll"},
        {"'''re", "'''|re"},       /* the punctuation run wins over 're */
        {" 's", " '|s"},           /* a space before ' makes it punctuation */
        {"  x\n\ny  ", " | x|\n|\n|y|  "},
        {"x  ", "x|  "},           /* trailing spaces stay together */
        {"a\xC2\xA0\xC2\xA0" "b", "a|\xC2\xA0|\xC2\xA0|b"}, /* only U+0020 prefixes a word */
        {"x\xC2\x85y", "x|\xC2\x85|y"},                  /* U+0085 is a space */
        {"x\xEF\xBB\xBFy", "x|\xEF\xBB\xBF|y"},          /* U+FEFF is not (Cf: other) */
        {"\xE3\x80\x80\xE3\x80\x80z", "\xE3\x80\x80|\xE3\x80\x80|z"},
        {"abc123def !?!", "abc|123|def| !?!"},
        {"e\xCC\x81x", "e|\xCC\x81|x"},                  /* a combining mark is "other" */
        {"x \xF0\x9F\x99\x82\xF0\x9F\x99\x82 y", "x| \xF0\x9F\x99\x82\xF0\x9F\x99\x82| y"},
        {" ?? 12 ab", " ??| 12| ab"},
        {"\tx", "\t|x"},
        {"\xE2\x85\xA4\xE2\x85\xA5 \xC2\xBD", "\xE2\x85\xA4\xE2\x85\xA5| \xC2\xBD"}, /* Nl, No */
        {"\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC", "\xC3\xA9t\xC3\xA9| \xE6\x97\xA5\xE6\x9C\xAC"},
        {" ", " "},
        {"'", "'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = pretok(cases[i][0]);
        ck_assert_msg(strcmp(got, cases[i][1]) == 0, "\"%s\": got \"%s\", want \"%s\"", cases[i][0],
                      got, cases[i][1]);
    }
}
END_TEST

/* ---- merging ------------------------------------------------------------ */

START_TEST(bpe_merges_lowest_rank_pair_first) {
    static const char *const bc_first[] = {"b|c", "a|b", NULL};
    Tokenizer *t = load_small(WORDS, bc_first, TOK_STYLE_GPT2);
    expect_disp(t, "abc", NULL, "a|bc");
    tok_free(t);
    static const char *const ab_first[] = {"a|b", "b|c", NULL};
    t = load_small(WORDS, ab_first, TOK_STYLE_GPT2);
    expect_disp(t, "abc", NULL, "ab|c");
    tok_free(t);
    static const char *const to_abc[] = {"a|b", "ab|c", NULL};
    t = load_small(WORDS, to_abc, TOK_STYLE_GPT2);
    expect_disp(t, "abc abcab", NULL, "abc| |abc|ab");
    tok_free(t);
}
END_TEST

START_TEST(bpe_merges_leftmost_pair_on_equal_rank) {
    static const char *const aa[] = {"a|a", NULL};
    Tokenizer *t = load_small(WORDS, aa, TOK_STYLE_GPT2);
    expect_disp(t, "aaa", NULL, "aa|a");
    expect_disp(t, "aaaaa", NULL, "aa|aa|a");
    tok_free(t);
    static const char *const aaaa[] = {"a|a", "aa|aa", NULL};
    t = load_small(WORDS, aaaa, TOK_STYLE_GPT2);
    expect_disp(t, "aaaaaaa", NULL, "aaaa|aa|a");
    tok_free(t);
}
END_TEST

START_TEST(bpe_later_duplicate_merge_overrides_rank) {
    /* The Rust library keeps the last rank of a repeated merge line. */
    static const char *const dup[] = {"a|b", "b|c", "a|b", NULL};
    Tokenizer *t = load_small(WORDS, dup, TOK_STYLE_GPT2);
    expect_disp(t, "abc", NULL, "a|bc");
    tok_free(t);
}
END_TEST

START_TEST(bpe_exposes_vocab_through_tokenizer_api) {
    Tokenizer *t = load_small(WORDS, WORD_MERGES, TOK_STYLE_GPT2);
    ck_assert_int_eq(tok_vocab_size(t), 256 + 12);
    ck_assert_int_eq(tok_is_byte_level(t), 1);
    ck_assert_int_eq(tok_style(t), TOK_STYLE_GPT2);
    ck_assert_int_eq(tok_lowercase(t), 0);
    ck_assert_str_eq(tok_id_to_token(t, 259), "\xC4\xA0you"); /* Ġyou */
    ck_assert_int_eq(tok_token_to_id(t, "\xC4\xA0you"), 259);
    ck_assert_int_eq(tok_token_to_id(t, " you"), -1);
    ck_assert_ptr_null(tok_id_to_token(t, 268));
    ck_assert_ptr_null(tok_id_to_token(t, -1));
    TokEncoding enc;
    encode_disp(t, "hi you", NULL, &enc);
    ck_assert_int_eq(enc.n, 2);
    ck_assert_int_eq(enc.ids[0], 256);
    ck_assert_int_eq(enc.ids[1], 259);
    for (int i = 0; i < enc.n; i++) ck_assert_ptr_eq(enc.tokens[i], tok_id_to_token(t, enc.ids[i]));
    tok_encoding_free(&enc);
    ck_assert_ptr_null(enc.display);
    tok_free(t);
}
END_TEST

/* ---- display and word starts ---------------------------------------------- */

START_TEST(bpe_display_maps_bytes_back_unless_a_character_is_split) {
    static const char *const extra[] = {"\xC3\xA9", "<|endoftext|>", NULL};
    static const char *const merges[] = {"\xC3|\xA9", NULL};
    Tokenizer *t = load_small(extra, merges, TOK_STYLE_GPT2);
    AvErr e = {0};
    /* Ċ -> newline, Ã© -> é; the three bytes of 日 are three tokens holding
     * part of a character each, shown as spelled (æ Ĺ ¥). */
    TokEncoding enc;
    const char *got = encode_disp(t, "\n\xC3\xA9\xE6\x97\xA5", NULL, &enc);
    ck_assert_str_eq(got, "\n|\xC3\xA9|\xC3\xA6|\xC4\xB9|\xC2\xA5");
    ck_assert_str_eq(enc.tokens[0], "\xC4\x8A");         /* Ċ */
    ck_assert_str_eq(enc.tokens[1], "\xC3\x83\xC2\xA9"); /* Ã© */
    ck_assert_ptr_eq(enc.display[2], enc.tokens[2]);
    tok_encoding_free(&enc);
    /* Ġ alone is a space; a special shows as itself. */
    got = encode_disp(t, "x <|endoftext|>", NULL, &enc);
    ck_assert_str_eq(got, "x| |<|endoftext|>");
    tok_encoding_free(&enc);
    /* Byte 0 (Ā) decodes to NUL, which a C string cannot hold: spelling kept. */
    ck_assert_int_eq(tok_token_to_id(t, "\xC4\x80"), 0);
    static const char zero[] = {'a', 0, 'b'};
    ck_assert_int_eq(tok_encode(t, zero, 3, NULL, 0, 0, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 3);
    ck_assert_str_eq(enc.display[1], "\xC4\x80");
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(bpe_marks_word_starts) {
    static const char *const extra[] = {"hi", " y", "ou", " you", "ok", "\xC2\xA0", "<|endoftext|>",
                                        NULL};
    static const char *const merges[] = {"h|i", " |y", "o|u", " y|ou", "o|k", "\xC2|\xA0", NULL};
    Tokenizer *t = load_small(extra, merges, TOK_STYLE_GPT2);
    TokEncoding enc;
    const char *got = encode_disp(t, "hi you,\nok<|endoftext|>hi\xC2\xA0ok", "okhi", &enc);
    ck_assert_str_eq(got, "hi| you|,|\n|ok|<|endoftext|>|hi|\xC2\xA0|ok|ok|hi");
    /* Words are pre-tokens, as Hugging Face's word_ids() count them: hi,
     * " you", ",", "\n", ok, the special, hi, NBSP, ok, then B's pre-token
     * "okhi" in two pieces: ok starts it, hi continues it. */
    const unsigned char want[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    ck_assert_int_eq(enc.n, 11);
    ck_assert_int_eq(enc.b_start, 9);
    for (int i = 0; i < enc.n; i++)
        ck_assert_msg(enc.word_start[i] == want[i], "token %d (%s): word_start %d", i, enc.display[i],
                      enc.word_start[i]);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(bpe_wordpiece_word_starts_and_display) {
    const char *v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n";
    char path[64];
    write_temp(path, v, strlen(v));
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load(&t, path, 1, &e) == 0, "%s", e.msg);
    unlink(path);
    ck_assert_int_eq(tok_is_byte_level(t), 0);
    TokEncoding enc;
    ck_assert_int_eq(tok_encode(t, "hellos [MASK] world", 19, NULL, 0, 0, &enc, &e), 0);
    const unsigned char want[] = {1, 1, 0, 1, 1, 1};
    ck_assert_int_eq(enc.n, 6);
    for (int i = 0; i < enc.n; i++) {
        ck_assert_ptr_eq(enc.display[i], enc.tokens[i]);
        ck_assert_int_eq(enc.word_start[i], want[i]);
    }
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

/* ---- templates and special tokens ------------------------------------------ */

static const char *const ROBERTA_EXTRA[] = {"=<s>", "=<pad>", "=</s>", "=<unk>", "hi", " y", "ou",
                                            " you", "=<mask>", "<|endoftext|>", NULL};
static const char *const ROBERTA_MERGES[] = {"h|i", " |y", "o|u", " y|ou", NULL};

START_TEST(bpe_gpt2_pair_is_a_then_b_without_specials) {
    Tokenizer *t = load_small(WORDS, WORD_MERGES, TOK_STYLE_GPT2);
    TokEncoding enc;
    ck_assert_str_eq(encode_disp(t, "hi you", "ok", &enc), "hi| you|ok");
    ck_assert_int_eq(enc.b_start, 2);
    const int types[] = {0, 0, 1};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(enc.type_ids[i], types[i]);
    tok_encoding_free(&enc);
    /* An empty B adds nothing: b_start is n. */
    ck_assert_str_eq(encode_disp(t, "hi", "", &enc), "hi");
    ck_assert_int_eq(enc.b_start, 1);
    tok_encoding_free(&enc);
    ck_assert_str_eq(encode_disp(t, "", NULL, &enc), "");
    ck_assert_int_eq(enc.n, 0);
    ck_assert_int_eq(enc.b_start, -1);
    tok_encoding_free(&enc);
    /* <|endoftext|> is not in this vocab: plain text. */
    encode_disp(t, "<|endoftext|>", NULL, &enc);
    ck_assert_int_eq(enc.n, 13);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(bpe_gpt2_keeps_endoftext_in_text_as_one_token) {
    static const char *const extra[] = {"hi", "<|endoftext|>", NULL};
    static const char *const merges[] = {"h|i", NULL};
    Tokenizer *t = load_small(extra, merges, TOK_STYLE_GPT2);
    TokEncoding enc;
    ck_assert_str_eq(encode_disp(t, "hi<|endoftext|> hi<|endoftext|", NULL, &enc),
                     "hi|<|endoftext|>| |hi|<|||e|n|d|o|f|t|e|x|t||");
    ck_assert_int_eq(enc.ids[1], 257);
    ck_assert_int_eq(tok_is_special(t, 257), 1);
    ck_assert_int_eq(tok_is_special(t, 256), 0);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(bpe_roberta_wraps_sequences_and_mask_takes_the_space_before_it) {
    Tokenizer *t = load_small(ROBERTA_EXTRA, ROBERTA_MERGES, TOK_STYLE_ROBERTA);
    ck_assert_int_eq(tok_style(t), TOK_STYLE_ROBERTA);
    expect_disp(t, "hi you!", NULL, "<s>|hi| you|!|</s>");
    /* lstrip: every White_Space character before <mask> goes with it. */
    expect_disp(t, "hi <mask>!", NULL, "<s>|hi|<mask>|!|</s>");
    expect_disp(t, "hi \t\xC2\x85\xC2\xA0<mask> you", NULL, "<s>|hi|<mask>| you|</s>");
    expect_disp(t, "<mask> <mask>", NULL, "<s>|<mask>|<mask>|</s>");
    /* The other specials keep the space before them. */
    expect_disp(t, "hi </s> <s>", NULL, "<s>|hi| |</s>| |<s>|</s>");
    /* <|endoftext|> is GPT-2's, not RoBERTa's: ordinary text. */
    TokEncoding enc;
    encode_disp(t, "<|endoftext|>", NULL, &enc);
    ck_assert_int_eq(enc.n, 2 + 13);
    tok_encoding_free(&enc);
    /* Pairs: <s> A </s></s> B </s>, all type 0, b_start at B's first token. */
    ck_assert_str_eq(encode_disp(t, "hi", "you", &enc), "<s>|hi|</s>|</s>|y|ou|</s>");
    ck_assert_int_eq(enc.b_start, 4);
    for (int i = 0; i < enc.n; i++) ck_assert_int_eq(enc.type_ids[i], 0);
    const unsigned char ws[] = {1, 1, 1, 1, 1, 0, 1};
    for (int i = 0; i < enc.n; i++) ck_assert_int_eq(enc.word_start[i], ws[i]);
    tok_encoding_free(&enc);
    ck_assert_str_eq(encode_disp(t, "hi", "", &enc), "<s>|hi|</s>|</s>|</s>");
    ck_assert_int_eq(enc.b_start, 4);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

/* {style, words in A, words in B, max_len, kept A, kept B}, as the Rust
 * tokenizers library (0.23, LongestFirst) keeps them; every word is a token. */
START_TEST(bpe_truncates_pairs_longest_first_like_rust) {
    static const int cases[][6] = {
        {TOK_STYLE_GPT2, 0, 8, 6, 0, 6},    {TOK_STYLE_GPT2, 2, 8, 6, 2, 4},
        {TOK_STYLE_GPT2, 4, 22, 6, 3, 3},   {TOK_STYLE_GPT2, 10, 2, 6, 4, 2},
        {TOK_STYLE_GPT2, 13, 0, 6, 6, 0},   {TOK_STYLE_GPT2, 8, 8, 9, 4, 5},
        {TOK_STYLE_GPT2, 11, 4, 9, 5, 4},   {TOK_STYLE_GPT2, 24, 2, 9, 7, 2},
        {TOK_STYLE_GPT2, 30, 8, 9, 5, 4},   {TOK_STYLE_GPT2, 2, 19, 10, 2, 8},
        {TOK_STYLE_GPT2, 11, 11, 10, 5, 5}, {TOK_STYLE_GPT2, 13, 4, 10, 6, 4},
        {TOK_STYLE_ROBERTA, 0, 11, 6, 0, 2}, {TOK_STYLE_ROBERTA, 2, 8, 6, 1, 1},
        {TOK_STYLE_ROBERTA, 4, 0, 6, 2, 0},  {TOK_STYLE_ROBERTA, 8, 2, 9, 3, 2},
        {TOK_STYLE_ROBERTA, 10, 8, 9, 3, 2}, {TOK_STYLE_ROBERTA, 11, 0, 9, 5, 0},
        {TOK_STYLE_ROBERTA, 11, 11, 9, 2, 3}, {TOK_STYLE_ROBERTA, 2, 19, 10, 2, 4},
        {TOK_STYLE_ROBERTA, 4, 11, 10, 3, 3}, {TOK_STYLE_ROBERTA, 11, 2, 10, 4, 2},
        {TOK_STYLE_ROBERTA, 24, 0, 10, 6, 0}, {TOK_STYLE_ROBERTA, 30, 22, 10, 3, 3},
    };
    static const char *const ab[] = {"=<s>", "=<pad>", "=</s>", "=<unk>", " a", " b", NULL};
    static const char *const ab_merges[] = {" |a", " |b", NULL};
    Tokenizer *g = load_small(ab, ab_merges, TOK_STYLE_GPT2);
    Tokenizer *r = load_small(ab, ab_merges, TOK_STYLE_ROBERTA);
    char a[128], b[128];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int *k = cases[c];
        const Tokenizer *t = k[0] == TOK_STYLE_GPT2 ? g : r;
        int n_special = k[0] == TOK_STYLE_GPT2 ? 0 : 4;
        a[0] = b[0] = '\0';
        for (int i = 0; i < k[1]; i++) strcat(a, i ? " a" : "a");
        for (int i = 0; i < k[2]; i++) strcat(b, i ? " b" : "b");
        TokEncoding enc;
        AvErr e = {0};
        ck_assert_int_eq(tok_encode(t, a, strlen(a), b, strlen(b), k[3], &enc, &e), 0);
        ck_assert_msg(enc.n == k[4] + k[5] + n_special && enc.b_start == k[4] + n_special * 3 / 4,
                      "case %zu: n=%d b_start=%d", c, enc.n, enc.b_start);
        ck_assert_int_eq(enc.n_truncated, k[1] + k[2] - k[4] - k[5]);
        tok_encoding_free(&enc);
    }
    tok_free(g);
    tok_free(r);
}
END_TEST

START_TEST(bpe_breaks_truncation_ties_like_rust) {
    /* A word crossing max_len lengthens its sequence as the Rust library
     * sees it (it stops tokenizing there): A keeps the odd token. A special
     * token in the text does not count. Expected values: the Rust library. */
    static const char *const ab[] = {"=<s>", "=<pad>", "=</s>", "=<unk>", "=<mask>", " a", " b", NULL};
    static const char *const ab_merges[] = {" |a", " |b", NULL};
    static const struct {
        TokStyle style;
        const char *a;
        int max_len, keep_a, keep_b;
    } cases[] = {
        {TOK_STYLE_GPT2, "a a a a a a a a a a a", 9, 4, 5},
        {TOK_STYLE_GPT2, "a a a a a a a a supercalifragilistic", 9, 5, 4},
        {TOK_STYLE_GPT2, "a a a a a a a a supercalifragilistic", 10, 5, 5},
        {TOK_STYLE_ROBERTA, "a a a a a a a a a a a", 9, 2, 3},
        {TOK_STYLE_ROBERTA, "a a a a a a a a supercalifragilistic", 9, 3, 2},
        {TOK_STYLE_ROBERTA, "a a a a a a a a a <mask> a", 9, 2, 3},
        {TOK_STYLE_ROBERTA, "a a a a a a a a a a <mask>", 9, 2, 3},
    };
    const char *b = "b b b b b b b b b b b";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Tokenizer *t = load_small(ab, ab_merges, cases[i].style);
        TokEncoding enc;
        AvErr e = {0};
        ck_assert_int_eq(tok_encode(t, cases[i].a, strlen(cases[i].a), b, strlen(b), cases[i].max_len,
                                    &enc, &e),
                         0);
        int n_special = cases[i].style == TOK_STYLE_GPT2 ? 0 : 4;
        int kept_b = enc.n - enc.b_start - n_special / 4;
        ck_assert_msg(kept_b == cases[i].keep_b && enc.n == cases[i].max_len,
                      "case %zu: kept B %d (want %d), n %d", i, kept_b, cases[i].keep_b, enc.n);
        ck_assert_int_eq(enc.b_start - n_special * 3 / 4, cases[i].keep_a);
        tok_encoding_free(&enc);
        tok_free(t);
    }
}
END_TEST

START_TEST(bpe_truncates_single_sequences_and_checks_max_len) {
    Tokenizer *t = load_small(ROBERTA_EXTRA, ROBERTA_MERGES, TOK_STYLE_ROBERTA);
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "hi you hi you", 13, NULL, 0, 4, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 4); /* hi, Ġyou | Ġ, hi, Ġyou */
    ck_assert_int_eq(enc.n_truncated, 3);
    ck_assert_str_eq(enc.display[3], "</s>");
    tok_encoding_free(&enc);
    ck_assert_int_eq(tok_encode(t, "hi", 2, "you", 3, 3, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "4 special tokens"));
    ck_assert_int_eq(tok_encode(t, "hi", 2, NULL, 0, 1, &enc, &e), -1);
    tok_free(t);
    t = load_small(WORDS, WORD_MERGES, TOK_STYLE_GPT2);
    ck_assert_int_eq(tok_encode(t, "hi you ok", 9, NULL, 0, 2, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 2); /* hi, Ġyou | Ġ, ok */
    ck_assert_int_eq(enc.n_truncated, 2);
    tok_encoding_free(&enc);
    ck_assert_int_eq(tok_encode(t, "hi you", 6, "ok ok", 5, 1, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 1); /* the Rust library keeps B's first token */
    ck_assert_int_eq(enc.b_start, 0);
    tok_encoding_free(&enc);
    tok_free(t);
}
END_TEST

START_TEST(bpe_reports_invalid_utf8_byte_offset) {
    Tokenizer *t = load_small(WORDS, WORD_MERGES, TOK_STYLE_GPT2);
    static const struct {
        const char *s;
        int off;
    } cases[] = {{"ab\xC3(", 2}, {"\xC0\xAF", 0}, {"ok \xED\xA0\x80", 3}, {"abc\xE2\x82", 3}};
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
    tok_free(t);
}
END_TEST

/* ---- loading errors --------------------------------------------------------- */

/* Loads vocab text `v` (raw JSON) with merges `m`; expects an error naming
 * the file the problem is in and containing `want`. */
static void expect_load_error(const char *v, size_t vlen, const char *m, int blame_merges,
                              const char *want) {
    char vp[64], mp[64];
    write_temp(vp, v, vlen);
    write_temp(mp, m, strlen(m));
    Tokenizer *t = (Tokenizer *)1;
    AvErr e = {0};
    int rc = tok_load_bpe(&t, vp, mp, TOK_STYLE_GPT2, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(e.msg, blame_merges ? mp : vp), "error \"%s\" does not name the %s", e.msg,
                  blame_merges ? "merges file" : "vocab");
    ck_assert_msg(strstr(e.msg, want), "error \"%s\" lacks \"%s\"", e.msg, want);
    unlink(vp);
    unlink(mp);
}

/* The 256 byte symbols as JSON members ("Ā":0,...) followed by `tail`. */
static char *bytes_vocab(const char *tail) {
    char vp[64];
    write_vocab(vp, NULL);
    FILE *f = fopen(vp, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    unlink(vp);
    buf[n - 1] = '\0'; /* drop '}' */
    strcat(buf, tail);
    return buf;
}

START_TEST(bpe_rejects_malformed_vocab_json) {
    const char *m = "#version: 0.2\n";
    expect_load_error("{\"a\":0,", 7, m, 0, "not valid JSON");
    expect_load_error("[1,2]", 5, m, 0, "JSON object");
    expect_load_error("{}", 2, m, 0, "0 tokens");
    char *v = bytes_vocab(",\"xx\":1.5}");
    expect_load_error(v, strlen(v), m, 0, "not an integer");
    free(v);
    v = bytes_vocab(",\"xx\":\"256\"}");
    expect_load_error(v, strlen(v), m, 0, "not an integer");
    free(v);
    v = bytes_vocab(",\"xx\":300}");
    expect_load_error(v, strlen(v), m, 0, "id 300 outside 0..256");
    free(v);
    v = bytes_vocab(",\"xx\":5e72}"); /* far beyond any integer type */
    expect_load_error(v, strlen(v), m, 0, "outside");
    free(v);
    v = bytes_vocab(",\"xx\":-1}");
    expect_load_error(v, strlen(v), m, 0, "outside");
    free(v);
    v = bytes_vocab(",\"xx\":256,\"xx\":257}"); /* the JSON reader refuses a key twice, naming it */
    expect_load_error(v, strlen(v), m, 0, "key \"xx\" appears twice");
    free(v);
    v = bytes_vocab(",\"xx\":256,\"yy\":256}");
    expect_load_error(v, strlen(v), m, 0, "both \"xx\" and \"yy\"");
    free(v);
    v = bytes_vocab(",\"\":256}");
    expect_load_error(v, strlen(v), m, 0, "0 bytes long");
    free(v);
    v = bytes_vocab(",\"\xff\":256}");
    expect_load_error(v, strlen(v), m, 0, "not valid UTF-8");
    free(v);
    const char *no_bytes = "{\"a\":0,\"b\":1}";
    expect_load_error(no_bytes, strlen(no_bytes), m, 0, "no token for byte 0x00");
    char *big = malloc(3000);
    strcpy(big, ",\"");
    memset(big + 2, 'x', 1100);
    strcpy(big + 1102, "\":256}");
    v = bytes_vocab(big);
    expect_load_error(v, strlen(v), m, 0, "1100 bytes long");
    free(v);
    free(big);
}
END_TEST

START_TEST(bpe_rejects_merges_with_unknown_or_malformed_lines) {
    char *v = bytes_vocab(",\"ab\":256}");
    expect_load_error(v, strlen(v), "#version: 0.2\na b\nb \xE2\x82\xAC\n", 1,
                      "line 3: symbol \"\xE2\x82\xAC\" is not in the vocabulary");
    expect_load_error(v, strlen(v), "a b\nb c\n", 1, "line 2: the merge of \"b c\"");
    expect_load_error(v, strlen(v), "a b c\n", 1, "line 1: expected two symbols");
    expect_load_error(v, strlen(v), "a b\n\nb c\n", 1, "line 2: expected two symbols");
    expect_load_error(v, strlen(v), "ab\n", 1, "line 1: expected two symbols");
    expect_load_error(v, strlen(v), " a\n", 1, "line 1: expected two symbols");
    free(v);
    /* CRLF line ends and a missing final newline are fine. */
    v = bytes_vocab(",\"ab\":256,\"abc\":257}");
    char vp[64], mp[64];
    write_temp(vp, v, strlen(v));
    const char *crlf = "#version: 0.2\r\na b\r\nab c";
    write_temp(mp, crlf, strlen(crlf));
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load_bpe(&t, vp, mp, TOK_STYLE_GPT2, &e) == 0, "%s", e.msg);
    expect_disp(t, "abc", NULL, "abc");
    tok_free(t);
    unlink(vp);
    unlink(mp);
    free(v);
}
END_TEST

START_TEST(bpe_load_reports_missing_files_and_bad_styles) {
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_int_eq(tok_load_bpe(&t, "/nonexistent/vocab.json", "/nonexistent/merges.txt",
                                  TOK_STYLE_GPT2, &e),
                     -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/vocab.json"));
    char *v = bytes_vocab("}");
    char vp[64], mp[64];
    write_temp(vp, v, strlen(v));
    free(v);
    ck_assert_int_eq(tok_load_bpe(&t, vp, "/nonexistent/merges.txt", TOK_STYLE_GPT2, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/merges.txt"));
    write_temp(mp, "", 0);
    ck_assert_int_eq(tok_load_bpe(&t, vp, mp, TOK_STYLE_BERT, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "tok_load"));
    /* RoBERTa needs <s> and </s>. */
    ck_assert_int_eq(tok_load_bpe(&t, vp, mp, TOK_STYLE_ROBERTA, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "<s>"));
    /* An empty merges file is a tokenizer of bytes. */
    ck_assert_msg(tok_load_bpe(&t, vp, mp, TOK_STYLE_GPT2, &e) == 0, "%s", e.msg);
    expect_disp(t, "ab", NULL, "a|b");
    tok_free(t);
    unlink(vp);
    unlink(mp);
}
END_TEST

/* ---- the real GPT-2 files against the references ---------------------------- */

/* Runs both corpora through t, comparing ids and type ids with `expected`. */
static void check_corpus(const Tokenizer *t, const char *expected, const char *what) {
    FILE *fe = fopen(expected, "r");
    ck_assert_msg(fe, "cannot open %s", expected);
    const char *corpora[] = {CORPUS_1, CORPUS_2};
    char *cl = NULL, *el = NULL;
    size_t ccap = 0, ecap = 0;
    int line = 0, mismatches = 0;
    for (int c = 0; c < 2; c++) {
        FILE *fc = fopen(corpora[c], "r");
        ck_assert_msg(fc, "cannot open %s", corpora[c]);
        ssize_t n;
        while ((n = getline(&cl, &ccap, fc)) >= 0) {
            line++;
            if (n > 0 && cl[n - 1] == '\n') cl[--n] = '\0';
            ck_assert_msg(getline(&el, &ecap, fe) >= 0, "%s ends before line %d", expected, line);
            Str a, b;
            parse_corpus_line(cl, &a, &b);
            TokEncoding enc;
            AvErr e = {0};
            int rc = tok_encode(t, a.s, a.len, b.s, b.len, 0, &enc, &e);
            ck_assert_msg(rc == 0, "line %d: %s", line, e.msg);
            cJSON *want = cJSON_Parse(el);
            ck_assert_msg(want, "%s line %d is not JSON", expected, line);
            if (!json_ints_equal(cJSON_GetObjectItem(want, "input_ids"), enc.ids, enc.n) ||
                !json_ints_equal(cJSON_GetObjectItem(want, "token_type_ids"), enc.type_ids, enc.n)) {
                mismatches++;
                fprintf(stderr, "%s line %d: %.200s\n  want %.400s  got ", what, line, cl, el);
                for (int i = 0; i < enc.n; i++) fprintf(stderr, "%d ", enc.ids[i]);
                fprintf(stderr, "\n");
            }
            cJSON_Delete(want);
            tok_encoding_free(&enc);
            free(a.s);
            free(b.s);
        }
        fclose(fc);
    }
    ck_assert_msg(getline(&el, &ecap, fe) < 0, "%s has more lines than the corpora", expected);
    free(cl);
    free(el);
    fclose(fe);
    fprintf(stderr, "%s: %d corpus lines, %d mismatches\n", what, line, mismatches);
    ck_assert_int_ge(line, 400);
    ck_assert_msg(mismatches == 0, "%s: %d of %d lines differ from the reference", what, mismatches,
                  line);
}

START_TEST(bpe_gpt2_matches_tiktoken_on_every_corpus_line) {
    char vocab[4096], merges[4096];
    gpt2_files(vocab, merges);
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load_bpe(&t, vocab, merges, TOK_STYLE_GPT2, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(t), 50257);
    ck_assert_int_eq(tok_token_to_id(t, "<|endoftext|>"), 50256);
    TokEncoding enc;
    const char *s = "Hello world";
    ck_assert_int_eq(tok_encode(t, s, strlen(s), NULL, 0, 0, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 2);
    ck_assert_int_eq(enc.ids[0], 15496);
    ck_assert_int_eq(enc.ids[1], 995);
    tok_encoding_free(&enc);
    check_corpus(t, GPT2_EXPECTED, "GPT-2");
    tok_free(t);
}
END_TEST

/* Writes the RoBERTa-style vocab bpe_oracle.mjs builds: <s> <pad> </s> <unk>,
 * GPT-2's tokens shifted by 4, <mask> last. */
static void write_roberta_vocab(char path[64], const char *gpt2_vocab) {
    FILE *f = fopen(gpt2_vocab, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    cJSON *in = cJSON_Parse(buf), *out = cJSON_CreateObject();
    ck_assert(in && out);
    const char *specials[] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; i++) cJSON_AddNumberToObject(out, specials[i], i);
    const cJSON *it;
    int n = 4;
    cJSON_ArrayForEach(it, in) {
        cJSON_AddNumberToObject(out, it->string, it->valuedouble + 4);
        n++;
    }
    cJSON_AddNumberToObject(out, "<mask>", n);
    char *text = cJSON_PrintUnformatted(out);
    ck_assert_ptr_nonnull(text);
    write_temp(path, text, strlen(text));
    free(text);
    cJSON_Delete(in);
    cJSON_Delete(out);
    free(buf);
}

START_TEST(bpe_roberta_matches_hugging_face_on_every_corpus_line) {
    char vocab[4096], merges[4096];
    gpt2_files(vocab, merges);
    char vp[64];
    write_roberta_vocab(vp, vocab);
    Tokenizer *t;
    AvErr e = {0};
    int rc = tok_load_bpe(&t, vp, merges, TOK_STYLE_ROBERTA, &e);
    unlink(vp);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_int_eq(tok_vocab_size(t), 50262);
    check_corpus(t, ROBERTA_EXPECTED, "RoBERTa");
    tok_free(t);
}
END_TEST

START_TEST(bpe_encodes_512_tokens_of_the_corpus_the_same_each_time) {
    char vocab[4096], merges[4096];
    gpt2_files(vocab, merges);
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load_bpe(&t, vocab, merges, TOK_STYLE_GPT2, &e) == 0, "%s", e.msg);
    /* The plain lines of the BERT corpus (varied prose, few repeated words)
     * until the text is 512 tokens or more. */
    FILE *fc = fopen(CORPUS_1, "r");
    ck_assert_ptr_nonnull(fc);
    char text[16384] = "", line[4096];
    TokEncoding enc;
    int n = 0;
    while (n < 512 && fgets(line, sizeof line, fc)) {
        if (!strncmp(line, "json:", 5) || strchr(line, '\t')) continue;
        ck_assert_uint_lt(strlen(text) + strlen(line), sizeof text);
        strcat(text, line);
        ck_assert_int_eq(tok_encode(t, text, strlen(text), NULL, 0, 0, &enc, &e), 0);
        n = enc.n;
        tok_encoding_free(&enc);
    }
    fclose(fc);
    ck_assert_int_ge(n, 512);
    const int reps = 200;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++) {
        ck_assert_int_eq(tok_encode(t, text, strlen(text), NULL, 0, 512, &enc, &e), 0);
        ck_assert_int_eq(enc.n, 512);
        tok_encoding_free(&enc);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / reps;
    fprintf(stderr, "GPT-2 BPE: %zu bytes -> 512 tokens in %.3f ms\n", strlen(text), ms);
    /* the time is printed, not asserted: speed lives in make bench, where a loaded machine cannot fail it */
    tok_free(t);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("bpe");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bpe_byte_table_is_gpt2_bytes_to_unicode);
    tcase_add_test(tc, bpe_pretokenizer_splits_like_gpt2_pattern);
    tcase_add_test(tc, bpe_merges_lowest_rank_pair_first);
    tcase_add_test(tc, bpe_merges_leftmost_pair_on_equal_rank);
    tcase_add_test(tc, bpe_later_duplicate_merge_overrides_rank);
    tcase_add_test(tc, bpe_exposes_vocab_through_tokenizer_api);
    tcase_add_test(tc, bpe_display_maps_bytes_back_unless_a_character_is_split);
    tcase_add_test(tc, bpe_marks_word_starts);
    tcase_add_test(tc, bpe_wordpiece_word_starts_and_display);
    tcase_add_test(tc, bpe_gpt2_pair_is_a_then_b_without_specials);
    tcase_add_test(tc, bpe_gpt2_keeps_endoftext_in_text_as_one_token);
    tcase_add_test(tc, bpe_roberta_wraps_sequences_and_mask_takes_the_space_before_it);
    tcase_add_test(tc, bpe_truncates_pairs_longest_first_like_rust);
    tcase_add_test(tc, bpe_breaks_truncation_ties_like_rust);
    tcase_add_test(tc, bpe_truncates_single_sequences_and_checks_max_len);
    tcase_add_test(tc, bpe_reports_invalid_utf8_byte_offset);
    tcase_add_test(tc, bpe_rejects_malformed_vocab_json);
    tcase_add_test(tc, bpe_rejects_merges_with_unknown_or_malformed_lines);
    tcase_add_test(tc, bpe_load_reports_missing_files_and_bad_styles);
    tcase_add_test(tc, bpe_gpt2_matches_tiktoken_on_every_corpus_line);
    tcase_add_test(tc, bpe_roberta_matches_hugging_face_on_every_corpus_line);
    tcase_add_test(tc, bpe_encodes_512_tokens_of_the_corpus_the_same_each_time);
    suite_add_tcase(s, tc);
    return s;
}
