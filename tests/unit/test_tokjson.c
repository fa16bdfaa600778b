/* test_tokjson.c — tokenizer.json read generically (tokjson.c): each
 * component's behaviour on small hand-written files, templates and
 * truncation through tok_encode, the GGUF-built tokenizer, and bad files
 * refused with one line naming the component. (The real files are checked
 * against the Rust library by tests/tokenizer/tokjson_check.sh.) */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"
#include "tokjson.h"
#include "check_util.h"

/* A byte-level BPE over "a", "b", "c", " " (as Ġ) and their merges, with the
 * given normalizer, pre-tokenizer, post-processor and added tokens (JSON text
 * or "null"). */
static char *make_json(const char *normalizer, const char *pre, const char *post, const char *added, const char *model_extra) {
    static const char *vocab =
        "{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"abc\":5,\"\\u0120a\":6,\"\\u0120ab\":7,\"<s>\":8,\"</s>\":9,"
        "\"1\":10,\"2\":11,\"12\":12,\"\\u2581\":13,\"\\u2581a\":14,\"<0x41>\":15,\"<unk>\":16,\"bc\":17,\"cab\":18}";
    static const char *merges = "[\"a b\",\"ab c\",\"\\u0120 a\",\"\\u0120a b\",\"1 2\",\"\\u2581 a\",\"b c\"]";
    size_t cap = 4096;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    snprintf(s, cap,
             "{\"added_tokens\":%s,\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":%s,"
             "\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":%s%s}}",
             added, normalizer, pre, post, vocab, merges, model_extra);
    return s;
}

static Tokenizer *load(const char *json) {
    char path[64] = "/tmp/attnviz_tj_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp: %s", strerror(errno));
    ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    Tokenizer *t = NULL;
    AvErr e = {0};
    int rc = tok_load_json(&t, path, &e);
    unlink(path);
    ck_assert_msg(rc == 0, "load: %s", e.msg);
    return t;
}

static const char *load_error(const char *json) {
    static AvErr e;
    char path[64] = "/tmp/attnviz_tj_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    Tokenizer *t = NULL;
    memset(&e, 0, sizeof e);
    int rc = tok_load_json(&t, path, &e);
    unlink(path);
    tok_free(t);
    ck_assert_msg(rc == -1, "loaded, but should not have: %s", json);
    return e.msg;
}

/* ids of text as a comma-separated string */
static const char *ids_of(const Tokenizer *t, const char *text, int max_len) {
    static char buf[512];
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_msg(tok_encode(t, text, strlen(text), NULL, 0, max_len, &enc, &e) == 0, "encode: %s", e.msg);
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < enc.n; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", i ? "," : "", enc.ids[i]);
    tok_encoding_free(&enc);
    return buf;
}

#define BYTELEVEL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"

START_TEST(byte_level_bpe_merges_by_rank_within_each_pretoken) {
    char *j = make_json("null", BYTELEVEL, "null", "[]", "");
    Tokenizer *t = load(j);
    /* "abc ab": pre-tokens "abc" and " ab"; a+b (rank 0) -> ab, then ab+c -> abc; in "Ġab" a+b
     * (rank 0) merges before Ġ+a (rank 2) could, and "Ġ ab" is no merge: Ġ, ab */
    ck_assert_str_eq(ids_of(t, "abc ab", 0), "5,3,4");
    /* merges go lowest rank first: "bc" exists but "a b" (rank 0) wins in "abc" */
    ck_assert_str_eq(ids_of(t, "bc", 0), "17");
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(added_tokens_split_the_raw_text_and_stay_whole) {
    char *j = make_json("null", BYTELEVEL, "null",
                        "[{\"id\":8,\"content\":\"<s>\",\"special\":true},{\"id\":9,\"content\":\"</s>\",\"special\":true}]", "");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "ab<s>c</s>", 0), "4,8,2,9");
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "ab<s>c", 6, NULL, 0, 0, &enc, &e), 0);
    ck_assert_int_eq(enc.special[1], 1);
    ck_assert_int_eq(enc.special[0], 0);
    ck_assert_int_eq(enc.byte_level, 1);
    tok_encoding_free(&enc);
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(template_adds_bos_and_truncation_keeps_it) {
    char *j = make_json("null", BYTELEVEL,
                        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
                        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
                        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],"
                        "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[8],\"tokens\":[\"<s>\"]}}}",
                        "[{\"id\":8,\"content\":\"<s>\",\"special\":true}]", "");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "ab c", 0), "8,4,3,2");
    ck_assert_str_eq(ids_of(t, "ab c", 2), "8,4");
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "ab", 2, "c", 1, 0, &enc, &e), 0);
    ck_assert_int_eq(enc.n, 3);
    ck_assert_int_eq(enc.b_start, 2);
    ck_assert_int_eq(enc.type_ids[2], 1);
    ck_assert_int_eq(enc.role[0], TOK_ROLE_CLS);
    tok_encoding_free(&enc);
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(sentencepiece_style_normalizers_and_byte_fallback) {
    /* Llama 2's: Prepend ▁, Replace " " by ▁, no pre-tokenizer, byte fallback for what the vocab lacks */
    char *j = make_json("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}",
                        "null", "null", "[]", ",\"byte_fallback\":true,\"unk_token\":\"<unk>\"");
    Tokenizer *t = load(j);
    /* "a a": ▁a ▁a; "A" is not in the vocab: its byte <0x41>; "Z" has no byte token: <unk> */
    ck_assert_str_eq(ids_of(t, "a a", 0), "14,14");
    ck_assert_str_eq(ids_of(t, "A", 0), "13,15");
    ck_assert_str_eq(ids_of(t, "Z", 0), "13,16");
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "a A", 3, NULL, 0, 0, &enc, &e), 0);
    ck_assert_str_eq(enc.display[0], " a"); /* ▁ reads as a space */
    ck_assert_str_eq(enc.display[2], "A");  /* <0x41> reads as its byte */
    tok_encoding_free(&enc);
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(split_regex_isolates_digits_before_byte_level) {
    char *j = make_json("null",
                        "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}\"},"
                        "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                        "\"use_regex\":false}]}",
                        "null", "[]", "");
    Tokenizer *t = load(j);
    /* "12": each digit its own pre-token, so the merge 1+2 never applies */
    ck_assert_str_eq(ids_of(t, "12", 0), "10,11");
    tok_free(t);
    free(j);
    j = make_json("null", BYTELEVEL, "null", "[]", "");
    t = load(j);
    ck_assert_str_eq(ids_of(t, "12", 0), "12"); /* GPT-2's \p{N}+ keeps them together */
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(ignore_merges_takes_a_whole_pretoken_from_the_vocab) {
    /* "cab" is in the vocab but no merge makes it: merges give c, ab; ignore_merges takes it whole */
    char *j = make_json("null", BYTELEVEL, "null", "[]", "");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "cab", 0), "2,4");
    tok_free(t);
    free(j);
    j = make_json("null", BYTELEVEL, "null", "[]", ",\"ignore_merges\":true");
    t = load(j);
    ck_assert_str_eq(ids_of(t, "cab", 0), "18");
    tok_free(t);
    free(j);
}
END_TEST

/* CLIP's BPE: a word's last piece ends with end_of_word_suffix ("</w>"), merges made of such pieces; a
 * continuing_subword_prefix starts the others, and a merge's result drops its right part's prefix. */
START_TEST(end_of_word_suffix_and_continuing_prefix_mark_a_words_pieces) {
    const char *clip = "{\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},\"model\":{\"type\":\"BPE\","
                       "\"end_of_word_suffix\":\"</w>\",\"continuing_subword_prefix\":\"\",\"unk_token\":\"<unk>\","
                       "\"vocab\":{\"a\":0,\"b\":1,\"a</w>\":2,\"b</w>\":3,\"ab</w>\":4,\"ab\":5,\"<unk>\":6,\"aab</w>\":7},"
                       "\"merges\":[\"a b</w>\",\"a ab</w>\",\"a b\"]}}";
    Tokenizer *t = load(clip);
    /* "ab": a + b</w> -> ab</w> (rank 0), not the word-inner "ab"; "aab": a a b</w> -> a ab</w> -> aab</w>;
     * "ba": b, a</w> (no merge); "abb": a b b</w> -> ab (rank 2), b</w>; a word "c": its c</w> is unknown */
    ck_assert_str_eq(ids_of(t, "ab aab ba abb c", 0), "4,7,1,2,5,3,6");
    tok_free(t);
    const char *wp = "{\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},\"model\":{\"type\":\"BPE\","
                     "\"continuing_subword_prefix\":\"##\",\"vocab\":{\"a\":0,\"##b\":1,\"ab\":2,\"##a\":3,\"b\":4},"
                     "\"merges\":[\"a ##b\"]}}";
    t = load(wp);
    /* "ab": a ##b -> ab (the merge drops ##); "ba": b ##a */
    ck_assert_str_eq(ids_of(t, "ab ba", 0), "2,4,3");
    tok_free(t);
}
END_TEST

START_TEST(bad_files_are_refused_naming_the_component) {
    char *j = make_json("{\"type\":\"BertNormalizer\"}", BYTELEVEL, "null", "[]", "");
    ck_assert_ptr_nonnull(strstr(load_error(j), "normalizer \"BertNormalizer\" is not supported"));
    free(j);
    j = make_json("null", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}", "null", "[]", "");
    ck_assert_ptr_nonnull(strstr(load_error(j), "invalid regex"));
    free(j);
    j = make_json("null", "{\"type\":\"CharDelimiterSplit\"}", "null", "[]", "");
    ck_assert_ptr_nonnull(strstr(load_error(j), "pre-tokenizer \"CharDelimiterSplit\" is not supported"));
    free(j);
    ck_assert_ptr_nonnull(strstr(load_error("{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}}}"), "model type \"WordLevel\""));
    ck_assert_ptr_nonnull(strstr(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a q\"]}}"),
                                 "names a token not in the vocabulary"));
    ck_assert_ptr_nonnull(strstr(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-4},\"merges\":[]}}"),
                                 "vocab ids must be integers"));
    ck_assert_ptr_nonnull(strstr(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                                            "\"added_tokens\":[{\"id\":0,\"content\":\"b\"}]}"),
                                 "id 0 is given to two tokens"));
    ck_assert_ptr_nonnull(strstr(load_error("[1,2"), "not valid JSON"));
    ck_assert_ptr_nonnull(strstr(load_error("{}"), "no \"model\" object"));
}
END_TEST


/* A Unigram model over pieces [[spelling, score], ...] (ids by position). */
static char *unigram_json(const char *normalizer, const char *pieces, const char *model_extra) {
    size_t cap = 8192;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    snprintf(s, cap, "{\"normalizer\":%s,\"pre_tokenizer\":null,\"post_processor\":null,"
                     "\"model\":{\"type\":\"Unigram\",\"vocab\":%s%s}}", normalizer, pieces, model_extra);
    return s;
}

/* The Rust library's own example (tokenizers' Unigram::encode doc test): "abcdacdxx" is abcd, a,
 * cd and the two unknown x fused into one unk. */
static const char *RUST_PIECES = "[[\"<unk>\",0],[\"a\",0],[\"b\",0],[\"c\",0],[\"d\",0],[\"cd\",1],[\"ab\",2],"
                                 "[\"abc\",5],[\"abcd\",10],[\"<0x78>\",0]]";

START_TEST(unigram_takes_the_best_scored_path_and_fuses_unknowns) {
    char *j = unigram_json("null", RUST_PIECES, ",\"unk_id\":0");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "abcdacdxx", 0), "8,1,5,0");
    ck_assert_str_eq(ids_of(t, "xax", 0), "0,1,0");      /* unknowns apart stay apart */
    ck_assert_str_eq(ids_of(t, "", 0), "");
    tok_free(t);
    free(j);
    /* byte fallback: the fused "xx" becomes its bytes when each has a <0xNN> piece, else unk */
    j = unigram_json("null", RUST_PIECES, ",\"unk_id\":0,\"byte_fallback\":true");
    t = load(j);
    ck_assert_str_eq(ids_of(t, "abxx", 0), "6,9,9");
    ck_assert_str_eq(ids_of(t, "abxy", 0), "6,0");       /* y has no byte piece: the whole stretch is unk */
    tok_free(t);
    free(j);
    /* no unk_id: a character without a piece cannot be encoded */
    j = unigram_json("null", RUST_PIECES, "");
    t = load(j);
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "abz", 3, NULL, 0, 0, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no unk_id"));
    ck_assert_str_eq(ids_of(t, "abcd", 0), "8");
    tok_free(t);
    free(j);
}
END_TEST

/* Standard base64 of n bytes. */
static char *b64(const unsigned char *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    ck_assert_ptr_nonnull(o);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = A[v >> 18 & 63], *q++ = A[v >> 12 & 63];
        *q++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? A[v & 63] : '=';
    }
    *q = '\0';
    return o;
}

static const char *charsmap_error(const char *cm) {
    char norm[4096];
    snprintf(norm, sizeof norm, "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"%s\"}", cm);
    char *j = unigram_json(norm, RUST_PIECES, ",\"unk_id\":0");
    const char *msg = load_error(j);
    free(j);
    return msg;
}

START_TEST(precompiled_charsmaps_are_checked_at_load) {
    /* a trie of 256 zero units (a root with no children) and an empty blob: valid, maps nothing */
    unsigned char buf[4 + 1024 + 8] = {0};
    buf[1] = 4; /* 1024 bytes of trie */
    char *cm = b64(buf, 4 + 1024);
    char norm[2048];
    snprintf(norm, sizeof norm, "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"%s\"}", cm);
    char *j = unigram_json(norm, RUST_PIECES, ",\"unk_id\":0");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "abcd", 0), "8");
    tok_free(t);
    free(j);
    free(cm);
    ck_assert_ptr_nonnull(strstr(charsmap_error("not*base64"), "precompiled_charsmap is not base64"));
    ck_assert_ptr_nonnull(strstr(charsmap_error("AAA="), "shorter than its header"));
    /* a trie size past the data, not a multiple of 4, zero */
    static const unsigned char huge[8] = {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, odd[8] = {3, 0, 0, 0, 0, 0, 0, 0},
                               zero[8] = {0};
    char *h = b64(huge, 8), *o = b64(odd, 8), *z = b64(zero, 8);
    ck_assert_ptr_nonnull(strstr(charsmap_error(h), "does not fit"));
    ck_assert_ptr_nonnull(strstr(charsmap_error(o), "does not fit"));
    ck_assert_ptr_nonnull(strstr(charsmap_error(z), "does not fit"));
    free(h), free(o), free(z);
    /* the root's offset points past the units */
    buf[4 + 3] = 0x01; /* unit 0 = 0x01000000: offset 0x4000, past the 256 units */
    cm = b64(buf, 4 + 1024);
    ck_assert_ptr_nonnull(strstr(charsmap_error(cm), "points outside itself"));
    free(cm);
    /* a leaf whose value is past the (empty) blob: unit 97 labelled 'a' with has_leaf and offset 0,
     * so its value unit is itself (97 | 1 << 8 = 353) */
    memset(buf + 4, 0, 1024);
    buf[4 + 4 * 97 + 0] = 97, buf[4 + 4 * 97 + 1] = 1;
    cm = b64(buf, 4 + 1024);
    ck_assert_ptr_nonnull(strstr(charsmap_error(cm), "points outside itself"));
    free(cm);
    /* replacements that are not UTF-8 */
    memset(buf + 4, 0, 1024);
    buf[4 + 1024] = 0xff;
    cm = b64(buf, 4 + 1024 + 1);
    ck_assert_ptr_nonnull(strstr(charsmap_error(cm), "not UTF-8"));
    free(cm);
}
END_TEST

static const char *unigram_error(const char *pieces, const char *model_extra) {
    char *j = unigram_json("null", pieces, model_extra);
    const char *msg = load_error(j);
    free(j);
    return msg;
}

START_TEST(unigram_vocab_errors_name_the_problem) {
    ck_assert_ptr_nonnull(strstr(unigram_error("[]", ""), "0 pieces"));
    ck_assert_ptr_nonnull(strstr(unigram_error("[[\"a\"]]", ""), "entry 0 is not [piece, score]"));
    ck_assert_ptr_nonnull(strstr(unigram_error("[[\"a\",0],[\"b\",\"NaN\"]]", ""), "entry 1"));
    ck_assert_ptr_nonnull(strstr(unigram_error("[[\"a\",1e999]]", ""), "not a finite number"));
    ck_assert_ptr_nonnull(strstr(unigram_error("[[\"a\",0]]", ",\"unk_id\":1"), "unk_id"));
    ck_assert_ptr_nonnull(strstr(unigram_error("[[\"a\",0]]", ",\"unk_id\":-1"), "unk_id"));
    /* negative scores are what real files hold; positive ones are read too */
    char *j = unigram_json("null", "[[\"<unk>\",0],[\"a\",-1.5],[\"aa\",-4],[\"b\",2.5]]", ",\"unk_id\":0");
    Tokenizer *t = load(j);
    ck_assert_str_eq(ids_of(t, "aab", 0), "1,1,3"); /* -1.5 - 1.5 beats -4 */
    tok_free(t);
    free(j);
}
END_TEST

/* The committed XLM-R fixture's tokenizer.json (tests/tokenizer/make_unigram.py --tiny): its
 * charsmap (compiled by sentencepiece from a few rules) makes the variants one text. */
START_TEST(xlmr_fixture_normalizes_with_its_charsmap) {
    Tokenizer *t = NULL;
    AvErr e = {0};
    ck_assert_msg(tok_load_json(&t, "tests/data/small-xlmr/tokenizer.json", &e) == 0, "%s", e.msg);
    char want[512];
    snprintf(want, sizeof want, "%s", ids_of(t, "the cafe fine 12", 0));
    ck_assert_str_eq(ids_of(t, "\xef\xbd\x94\xef\xbd\x88\xef\xbd\x85 cafe \xef\xac\x81ne \xef\xbc\x91\xef\xbc\x92", 0), want);
    ck_assert_str_eq(ids_of(t, "the\xc2\xa0" "cafe fine   12", 0), want); /* NBSP; runs of spaces */
    snprintf(want, sizeof want, "%s", ids_of(t, "caf\xc3\xa9", 0));
    ck_assert_str_eq(ids_of(t, "cafe\xcc\x81", 0), want); /* e + U+0301, one grapheme: é */
    ck_assert_str_ne(ids_of(t, "cafe", 0), want);
    /* <s> A </s> */
    const char *ids = ids_of(t, "the", 0);
    ck_assert(!strncmp(ids, "0,", 2) && !strcmp(ids + strlen(ids) - 2, ",2"));
    tok_free(t);
}
END_TEST

START_TEST(invalid_utf8_text_is_refused_with_its_offset) {
    char *j = make_json("null", BYTELEVEL, "null", "[]", "");
    Tokenizer *t = load(j);
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "ab\xff", 3, NULL, 0, 0, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "invalid UTF-8 at byte offset 2"));
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(normalizer_growth_is_capped) {
    /* Replace "a" by 10 a's, eight times over: one "a" would become 10^8 bytes */
    char norm[2048] = "{\"type\":\"Sequence\",\"normalizers\":[";
    for (int i = 0; i < 8; i++)
        strcat(norm, i ? ",{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aaaaaaaaaa\"}"
                       : "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aaaaaaaaaa\"}");
    strcat(norm, "]}");
    char *j = make_json(norm, BYTELEVEL, "null", "[{\"id\":8,\"content\":\"<s>\",\"special\":true}]", "");
    Tokenizer *t = load(j);
    TokEncoding enc;
    AvErr e = {0};
    ck_assert_int_eq(tok_encode(t, "a", 1, NULL, 0, 0, &enc, &e), -1);
    ck_assert_msg(strstr(e.msg, "the normalizer grows the text past 96 bytes, the limit for 1 input bytes"), "%s", e.msg);
    /* the budget is the whole text's, not each stretch's between added tokens */
    ck_assert_int_eq(tok_encode(t, "b<s>a<s>b", 9, NULL, 0, 0, &enc, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "the limit for 9 input bytes"));
    /* text without an "a" is untouched, so it passes */
    ck_assert_str_eq(ids_of(t, "bc", 0), "17");
    tok_free(t);
    free(j);
    /* ordinary growth passes: Prepend ▁ and " " -> ▁ triple a text of spaces */
    j = make_json("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
                  "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}",
                  "null", "null", "[]", ",\"byte_fallback\":true,\"unk_token\":\"<unk>\"");
    t = load(j);
    ck_assert_int_eq(tok_encode(t, "          ", 10, NULL, 0, 0, &enc, &e), 0);
    tok_encoding_free(&enc);
    tok_free(t);
    free(j);
}
END_TEST

START_TEST(wordpiece_files_read_as_berts_tokenizer) {
    static const char *j =
        "{\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true,\"strip_accents\":null},"
        "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\","
        "\"continuing_subword_prefix\":\"##\",\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"un\":4,"
        "\"##aff\":5,\"##able\":6,\"cafe\":7}}}";
    Tokenizer *t = load(j);
    /* lower-cased and accents stripped (BertNormalizer), pieces marked ##, [CLS] ... [SEP] */
    ck_assert_str_eq(ids_of(t, "UnAffable CAF\xc3\x89", 0), "2,4,5,6,7,3");
    tok_free(t);
    ck_assert_ptr_nonnull(strstr(load_error("{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\"},"
                                            "\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}"),
                                 "this one differs"));
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("tokjson");
    TCase *c = tcase_create("core");
    tcase_add_test(c, byte_level_bpe_merges_by_rank_within_each_pretoken);
    tcase_add_test(c, added_tokens_split_the_raw_text_and_stay_whole);
    tcase_add_test(c, template_adds_bos_and_truncation_keeps_it);
    tcase_add_test(c, sentencepiece_style_normalizers_and_byte_fallback);
    tcase_add_test(c, split_regex_isolates_digits_before_byte_level);
    tcase_add_test(c, end_of_word_suffix_and_continuing_prefix_mark_a_words_pieces);
    tcase_add_test(c, ignore_merges_takes_a_whole_pretoken_from_the_vocab);
    tcase_add_test(c, bad_files_are_refused_naming_the_component);
    tcase_add_test(c, invalid_utf8_text_is_refused_with_its_offset);
    tcase_add_test(c, wordpiece_files_read_as_berts_tokenizer);
    tcase_add_test(c, normalizer_growth_is_capped);
    tcase_add_test(c, unigram_takes_the_best_scored_path_and_fuses_unknowns);
    tcase_add_test(c, precompiled_charsmaps_are_checked_at_load);
    tcase_add_test(c, unigram_vocab_errors_name_the_problem);
    tcase_add_test(c, xlmr_fixture_normalizes_with_its_charsmap);
    suite_add_tcase(s, c);
    return s;
}
