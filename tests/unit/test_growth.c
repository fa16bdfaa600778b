/* test_growth.c — work grows with the input about linearly, for every reader and
 * tokenizer's worst case we know of: each case runs at a size n and at 8n and fails
 * when the larger takes more than GROWTH_LIMIT times the smaller (linear is 8, n log n
 * with cache misses about 9 to 18 here, quadratic 64). Times are the thread's CPU time,
 * the best of several runs: other processes loading the machine make a run slower, never
 * faster, and a preempted thread's CPU time does not count the wait. Every case's
 * figures go to stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "jsonread.h"
#include "loader.h"
#include "model.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "torchbin.h"
#include "util.h"
#include "zip.h"
#include "check_util.h"

#define GROWTH 8
#define GROWTH_LIMIT 32.0

typedef void (*Work)(void *ctx, size_t n);

static double thread_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double best_ms(Work w, void *ctx, size_t n, int reps) {
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        const double t0 = thread_ms();
        w(ctx, n);
        const double t = thread_ms() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* The ratio of work(8n) to work(n), printed; fails past GROWTH_LIMIT. A small case under
 * 0.05 ms is timed as 0.05 ms: below that the clock's grain, not the work, would set the ratio. */
static void expect_linear(const char *what, Work w, void *ctx, size_t n) {
    w(ctx, n); /* warm: first-touch page faults and lazy setup are not the work */
    const double small = best_ms(w, ctx, n, 5), big = best_ms(w, ctx, n * GROWTH, 3);
    const double ratio = big / (small > 0.05 ? small : 0.05);
    fprintf(stderr, "growth %-44s n=%-7zu %9.3f ms  8n %9.3f ms  ratio %5.1f\n", what, n, small, big, ratio);
    ck_assert_msg(ratio <= GROWTH_LIMIT, "%s: %zu -> %zu grew the time %.1fx (%.3f -> %.3f ms): faster than linear",
                  what, n, n * GROWTH, ratio, small, big);
}

/* ---------------------------------------------------------------- byte buffers */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} Buf;

static void put(Buf *m, const void *p, size_t n) {
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2 + 64;
        m->b = realloc(m->b, m->cap);
        ck_assert_ptr_nonnull(m->b);
    }
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void put_u32(Buf *m, uint32_t v) { put(m, &v, 4); }
static void put_u64(Buf *m, uint64_t v) { put(m, &v, 8); }
static void put_s(Buf *m, const char *s) { put(m, s, strlen(s)); }
#define PUT_LIT(m, lit) put(m, lit, sizeof lit - 1) /* a literal holding NUL bytes */
static void gguf_str(Buf *m, const char *s, size_t n) { put_u64(m, n); put(m, s, n); }

static char *repeat(const char *unit, size_t n) {
    const size_t ul = strlen(unit);
    char *s = malloc(n * ul + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < n; i++) memcpy(s + i * ul, unit, ul);
    s[n * ul] = '\0';
    return s;
}

static char *temp_file(const void *p, size_t n, const char *suffix) {
    char *path = malloc(96);
    ck_assert_ptr_nonnull(path);
    snprintf(path, 96, "/tmp/attnviz_growth_XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return path;
}

/* ---------------------------------------------------------------- GGUF */

/* A SentencePiece-style ("llama") tokenizer of the 26 letters and one token of n 'a's, with
 * scores and no merges: transformers recovers the merges from every split of every token. */
static void gguf_long_token(void *ctx, size_t n) {
    (void)ctx;
    Buf m = {0};
    put_s(&m, "GGUF"), put_u32(&m, 3), put_u64(&m, 0), put_u64(&m, 4);
    gguf_str(&m, "tokenizer.ggml.model", 20), put_u32(&m, GGUF_V_STRING), gguf_str(&m, "llama", 5);
    gguf_str(&m, "tokenizer.ggml.bos_token_id", 27), put_u32(&m, GGUF_V_U32), put_u32(&m, 0);
    gguf_str(&m, "tokenizer.ggml.tokens", 21), put_u32(&m, GGUF_V_ARRAY), put_u32(&m, GGUF_V_STRING), put_u64(&m, 27);
    char *long_tok = repeat("a", n);
    for (char c = 'a'; c <= 'z'; c++) gguf_str(&m, &c, 1);
    gguf_str(&m, long_tok, n);
    gguf_str(&m, "tokenizer.ggml.scores", 21), put_u32(&m, GGUF_V_ARRAY), put_u32(&m, GGUF_V_F32), put_u64(&m, 27);
    for (int i = 0; i < 27; i++) {
        float s = -(float)i;
        put(&m, &s, 4);
    }
    GgufFile g;
    Tokenizer *t;
    AvErr e;
    ck_assert_msg(gguf_parse(&g, m.b, m.n, "long.gguf", &e) == 0, "%s", e.msg);
    ck_assert_msg(tok_load_gguf(&t, &g, "long.gguf", 0, &e) == 0, "%s", e.msg);
    tok_free(t);
    gguf_close(&g);
    free(long_tok);
    free(m.b);
}

START_TEST(a_gguf_tokenizers_merges_are_recovered_in_time_linear_in_a_long_token) {
    expect_linear("GGUF merges, one token of n bytes", gguf_long_token, NULL, 2500);
}
END_TEST

/* n one-element tensors, each looked up by name after the parse (as a loader does). */
static void gguf_many_tensors(void *ctx, size_t n) {
    (void)ctx;
    Buf m = {0};
    put_s(&m, "GGUF"), put_u32(&m, 3), put_u64(&m, n), put_u64(&m, 0);
    char name[64];
    for (size_t i = 0; i < n; i++) {
        int l = snprintf(name, sizeof name, "blk.%zu.attn_q.weight", (i * 7919) % n);
        gguf_str(&m, name, (size_t)l), put_u32(&m, 1), put_u64(&m, 8), put_u32(&m, GGUF_T_F32), put_u64(&m, i * 32);
    }
    while (m.n % 32) put(&m, "", 1);
    uint8_t zero[32] = {0};
    for (size_t i = 0; i < n; i++) put(&m, zero, 32);
    GgufFile g;
    AvErr e;
    ck_assert_msg(gguf_parse(&g, m.b, m.n, "many.gguf", &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "blk.%zu.attn_q.weight", i);
        ck_assert_ptr_nonnull(gguf_find_tensor(&g, name));
    }
    gguf_close(&g);
    free(m.b);
}

START_TEST(a_gguf_of_many_tensors_is_read_and_searched_in_n_log_n) {
    expect_linear("GGUF, n tensors parsed and looked up", gguf_many_tensors, NULL, 2000);
}
END_TEST

/* ---------------------------------------------------------------- safetensors, .bin */

static void safetensors_many(void *ctx, size_t n) {
    (void)ctx;
    Buf h = {0};
    char ent[160];
    put_s(&h, "{");
    for (size_t i = 0; i < n; i++) {
        int l = snprintf(ent, sizeof ent, "%s\"layers.%zu.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
                         i ? "," : "", (i * 7919) % n, 4 * i, 4 * i + 4);
        put(&h, ent, (size_t)l);
    }
    put_s(&h, "}");
    Buf f = {0};
    put_u64(&f, h.n);
    put(&f, h.b, h.n);
    for (size_t i = 0; i < n; i++) put_u32(&f, 0);
    StFile st;
    AvErr e;
    ck_assert_msg(st_parse(&st, f.b, f.n, "many.safetensors", &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) {
        snprintf(ent, sizeof ent, "layers.%zu.w", i);
        ck_assert_ptr_nonnull(st_find(&st, ent));
    }
    st_close(&st);
    free(h.b), free(f.b);
}

START_TEST(a_safetensors_file_of_many_tensors_is_read_and_searched_in_n_log_n) {
    expect_linear("safetensors, n tensors parsed and looked up", safetensors_many, NULL, 2000);
}
END_TEST

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v & 0xffff), put16(p + 2, v >> 16); }

/* A stored zip of the given entries (names and bytes). */
static void zip_of(Buf *z, const char *const *names, const uint8_t *const *data, const size_t *len, size_t n) {
    uint32_t *offs = malloc((n ? n : 1) * sizeof *offs);
    ck_assert_ptr_nonnull(offs);
    for (size_t i = 0; i < n; i++) {
        uint8_t h[30] = {0};
        const size_t nl = strlen(names[i]);
        offs[i] = (uint32_t)z->n;
        put32(h, 0x04034b50), put32(h + 18, (uint32_t)len[i]), put32(h + 22, (uint32_t)len[i]), put16(h + 26, (unsigned)nl);
        put(z, h, 30), put(z, names[i], nl), put(z, data[i], len[i]);
    }
    const size_t cd = z->n;
    for (size_t i = 0; i < n; i++) {
        uint8_t h[46] = {0};
        const size_t nl = strlen(names[i]);
        put32(h, 0x02014b50), put32(h + 20, (uint32_t)len[i]), put32(h + 24, (uint32_t)len[i]);
        put16(h + 28, (unsigned)nl), put32(h + 42, offs[i]);
        put(z, h, 46), put(z, names[i], nl);
    }
    uint8_t end[22] = {0};
    put32(end, 0x06054b50), put16(end + 8, (unsigned)n), put16(end + 10, (unsigned)n);
    put32(end + 12, (uint32_t)(z->n - cd)), put32(end + 16, (uint32_t)cd);
    put(z, end, 22);
    free(offs);
}

/* torch.save's layout: a dict of n tensors, each one element of the one storage. */
static void torchbin_many(void *ctx, size_t n) {
    (void)ctx;
    Buf p = {0};
    PUT_LIT(&p, "\x80\x02}q\x00("); /* PROTO 2, EMPTY_DICT, BINPUT 0, MARK */
    char key[48];
    for (size_t i = 0; i < n; i++) {
        const int kl = snprintf(key, sizeof key, "layers.%zu.w", (i * 7919) % n);
        put(&p, "X", 1), put_u32(&p, (uint32_t)kl), put(&p, key, (size_t)kl);
        if (i == 0) put_s(&p, "ctorch._utils\n_rebuild_tensor_v2\nq\x01");
        else put_s(&p, "h\x01");
        PUT_LIT(&p, "((X\x07\x00\x00\x00storage");
        if (i == 0) put_s(&p, "ctorch\nFloatStorage\nq\x02");
        else put_s(&p, "h\x02");
        PUT_LIT(&p, "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x01tQK\x00K\x01\x85K\x01\x85\x89)tR");
    }
    put_s(&p, "u.");
    const char *names[2] = {"archive/data.pkl", "archive/data/0"};
    const uint8_t zero[4] = {0}, *data[2] = {p.b, zero};
    const size_t len[2] = {p.n, 4};
    Buf z = {0};
    zip_of(&z, names, data, len, 2);
    StFile st;
    AvErr e;
    ck_assert_msg(tb_parse(&st, z.b, z.n, "many.bin", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.n_tensors, (int)n);
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "layers.%zu.w", i);
        ck_assert_ptr_nonnull(st_find(&st, key));
    }
    st_close(&st);
    free(p.b), free(z.b);
}

START_TEST(a_pytorch_bin_of_many_tensors_is_read_and_searched_in_n_log_n) {
    expect_linear("pytorch_model.bin, n tensors read and looked up", torchbin_many, NULL, 2000);
}
END_TEST

static void zip_many(void *ctx, size_t n) {
    (void)ctx;
    char **names = calloc(n, sizeof *names);
    const uint8_t **data = calloc(n, sizeof *data);
    size_t *len = calloc(n, sizeof *len);
    ck_assert(names && data && len);
    for (size_t i = 0; i < n; i++) {
        names[i] = malloc(48);
        ck_assert_ptr_nonnull(names[i]);
        snprintf(names[i], 48, "attention.%zu.npy", (i * 7919) % n);
        data[i] = (const uint8_t *)"x", len[i] = 1;
    }
    Buf z = {0};
    zip_of(&z, (const char *const *)names, data, len, n);
    Zip zp;
    AvErr e;
    ck_assert_msg(zip_read(&zp, z.b, z.n, ZIP_DEFLATE, "many.npz", &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) ck_assert_ptr_nonnull(zip_find(&zp, "", 0, names[i], strlen(names[i])));
    zip_free(&zp);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names), free(data), free(len), free(z.b);
}

START_TEST(a_zip_of_many_entries_is_read_and_searched_in_n_log_n) {
    expect_linear("zip, n entries read and looked up", zip_many, NULL, 2000);
}
END_TEST

/* A model.safetensors.index.json naming n shard files: each is named once, in order of first
 * mention, before any is opened (the first is missing: the load fails there). */
static void shard_index(void *ctx, size_t n) {
    const char *config = ctx;
    Buf j = {0};
    char ent[96];
    put_s(&j, "{\"weight_map\": {");
    for (size_t i = 0; i < 2 * n; i++) {
        int l = snprintf(ent, sizeof ent, "%s\"t%zu\": \"missing-%05zu-of-%05zu.safetensors\"", i ? "," : "", i, i % n, n);
        put(&j, ent, (size_t)l);
    }
    put_s(&j, "}}");
    char *path = temp_file(j.b, j.n, ".index.json");
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load_files(&m, config, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing-00000-of-"), "%s", e.msg);
    unlink(path);
    free(path), free(j.b);
}

START_TEST(a_shard_index_naming_many_files_is_read_in_n_log_n) {
    expect_linear("shard index, n distinct files", shard_index, "tests/data/small-f32/config.json", 2000);
}
END_TEST

/* ---------------------------------------------------------------- JSON */

/* An object of n keys, each key checked against the others (sorted), and arrays nested
 * as deep as cJSON allows under it. */
static void json_keys(void *ctx, size_t n) {
    (void)ctx;
    Buf j = {0};
    char ent[48];
    put_s(&j, "{");
    for (size_t i = 0; i < n; i++) {
        int l = snprintf(ent, sizeof ent, "%s\"k%zu\":{\"a\":[1]}", i ? "," : "", (i * 7919) % n);
        put(&j, ent, (size_t)l);
    }
    put_s(&j, "}");
    cJSON *root;
    AvErr e;
    ck_assert_msg(av_json_parse(&root, (const char *)j.b, j.n, "keys.json", &e) == 0, "%s", e.msg);
    cJSON_Delete(root);
    free(j.b);
}

START_TEST(a_json_object_of_many_keys_is_checked_in_n_log_n) {
    expect_linear("JSON, an object of n keys checked", json_keys, NULL, 20000);
}
END_TEST

/* ---------------------------------------------------------------- tokenizer.json */

typedef struct {
    Tokenizer *t;
    const char *unit; /* the text: unit repeated */
} TextCase;

static void encode_text(void *ctx, size_t n) {
    const TextCase *c = ctx;
    char *s = repeat(c->unit, n / strlen(c->unit) + 1);
    TokEncoding enc;
    AvErr e;
    if (tok_encode(c->t, s, strlen(s), NULL, 0, 0, &enc, &e) == 0) tok_encoding_free(&enc);
    free(s);
}

static Tokenizer *load_json_text(const char *json) {
    char *path = temp_file(json, strlen(json), ".json");
    Tokenizer *t;
    AvErr e;
    ck_assert_msg(tok_load_json(&t, path, &e) == 0, "%s", e.msg);
    unlink(path);
    free(path);
    return t;
}

/* n added tokens all starting with '<', and a text of '<' n times. */
static void many_added_tokens(void *ctx, size_t n) {
    (void)ctx;
    Buf j = {0};
    char ent[96];
    put_s(&j, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<\":0},\"merges\":[]},\"added_tokens\":[");
    for (size_t i = 0; i < n / 8; i++) {
        int l = snprintf(ent, sizeof ent, "%s{\"id\":%zu,\"content\":\"<tok%zu>\"}", i ? "," : "", i + 1, i);
        put(&j, ent, (size_t)l);
    }
    put_s(&j, "]}");
    put(&j, "", 1);
    TextCase c = {load_json_text((const char *)j.b), "<"};
    encode_text(&c, n);
    tok_free(c.t);
    free(j.b);
}

START_TEST(many_added_tokens_are_found_in_time_linear_in_the_text_and_the_tokens) {
    expect_linear("tokenizer.json: n/8 added tokens, text of n", many_added_tokens, NULL, 4000);
}
END_TEST

/* A Unigram vocabulary of "a", "b" and a piece of n/4 'a's then "b"; a text of n 'a's. */
static void unigram_long_piece(void *ctx, size_t n) {
    (void)ctx;
    char *piece = repeat("a", n / 4);
    Buf j = {0};
    put_s(&j, "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],[\"a\",-1],[\"b\",-2],[\"");
    put_s(&j, piece);
    put_s(&j, "b\",-3]]}}");
    put(&j, "", 1);
    TextCase c = {load_json_text((const char *)j.b), "a"};
    encode_text(&c, n);
    tok_free(c.t);
    free(piece), free(j.b);
}

START_TEST(a_unigram_model_with_a_long_piece_tokenizes_in_linear_time) {
    expect_linear("Unigram: one piece of n/4, text of n", unigram_long_piece, NULL, 4000);
}
END_TEST

/* A Replace normalizer whose pattern is n/4 'a's then "b", over a text of n 'a's. */
static void replace_long_pattern(void *ctx, size_t n) {
    (void)ctx;
    char *pat = repeat("a", n / 4);
    Buf j = {0};
    put_s(&j, "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\"");
    put_s(&j, pat);
    put_s(&j, "b\"},\"content\":\"x\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"x\":1},\"merges\":[]}}");
    put(&j, "", 1);
    TextCase c = {load_json_text((const char *)j.b), "a"};
    encode_text(&c, n);
    tok_free(c.t);
    free(pat), free(j.b);
}

START_TEST(a_replace_normalizer_with_a_long_pattern_runs_in_linear_time) {
    expect_linear("Replace normalizer: pattern of n/4, text of n", replace_long_pattern, NULL, 16000);
}
END_TEST

/* Long texts of one kind of character (or a short mix) through each kind of tokenizer:
 * pre-tokenizer regexes (GPT-2's, Llama 3's, o200k's), BPE merging one long word, Unigram's
 * Viterbi, the Precompiled charsmap's grapheme clusters, WordPiece's longest match. */
static const char *const UNITS[] = {" ", "a", "A", "!", "<", "\n", "7", " a", "aA1! \n", "\xe6\x97\xa5", "e\xcc\x81"};

static const char LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?"
                             "[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
static const char O200K[] = "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}"
                            "\\\\p{Lo}\\\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}"
                            "\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
                            "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n/]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

/* A byte-level BPE of the 256 byte characters, no merges, split first by regex. */
static Tokenizer *regex_tokenizer(const char *regex) {
    Buf j = {0};
    char ent[64];
    put_s(&j, "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"");
    put_s(&j, regex);
    put_s(&j, "\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
              "\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{");
    for (int b = 0, k = 0; b < 256; b++) {
        /* GPT-2's byte alphabet: printable bytes as themselves, the rest from U+0100 on */
        int cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b : 256 + k++;
        snprintf(ent, sizeof ent, "%s\"\\u%04x\":%d", b ? "," : "", cp, b);
        put_s(&j, ent);
    }
    put_s(&j, "}}}");
    put(&j, "", 1);
    Tokenizer *t = load_json_text((const char *)j.b);
    free(j.b);
    return t;
}

static void texts_through(const char *what, Tokenizer *t) {
    char label[96];
    for (size_t u = 0; u < sizeof UNITS / sizeof UNITS[0]; u++) {
        TextCase c = {t, UNITS[u]};
        char shown[16];
        size_t k = 0;
        for (const char *p = UNITS[u]; *p && k < sizeof shown - 3; p++)
            k += (size_t)snprintf(shown + k, sizeof shown - k, "%s", *p == '\n' ? "\\n" : (char[]){*p, 0});
        snprintf(label, sizeof label, "%s, text of \"%s\"", what, shown);
        expect_linear(label, encode_text, &c, 2000);
    }
}

START_TEST(long_texts_tokenize_in_linear_time_with_every_kind_of_tokenizer) {
    AvErr e;
    Tokenizer *t;
    Tokenizer *r = regex_tokenizer(LLAMA3);
    texts_through("Llama 3 regex", r);
    tok_free(r);
    r = regex_tokenizer(O200K);
    texts_through("o200k regex", r);
    tok_free(r);
    static const char *const dirs[] = {"tests/data/small-modernbert", "tests/data/small-xlmr", "tests/data/small-llama",
                                       "tests/data/small-gpt2", "tests/data/small-f32"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        TokDirHint hint = {.lowercase = -1};
        ck_assert_msg(tok_load_dir(&t, dirs[d], &hint, &e) == 0, "%s", e.msg);
        texts_through(strrchr(dirs[d], '/') + 1, t);
        tok_free(t);
    }
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("growth");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_gguf_tokenizers_merges_are_recovered_in_time_linear_in_a_long_token);
    tcase_add_test(t, a_gguf_of_many_tensors_is_read_and_searched_in_n_log_n);
    tcase_add_test(t, a_safetensors_file_of_many_tensors_is_read_and_searched_in_n_log_n);
    tcase_add_test(t, a_pytorch_bin_of_many_tensors_is_read_and_searched_in_n_log_n);
    tcase_add_test(t, a_zip_of_many_entries_is_read_and_searched_in_n_log_n);
    tcase_add_test(t, a_shard_index_naming_many_files_is_read_in_n_log_n);
    tcase_add_test(t, a_json_object_of_many_keys_is_checked_in_n_log_n);
    tcase_add_test(t, many_added_tokens_are_found_in_time_linear_in_the_text_and_the_tokens);
    tcase_add_test(t, a_unigram_model_with_a_long_piece_tokenizes_in_linear_time);
    tcase_add_test(t, a_replace_normalizer_with_a_long_pattern_runs_in_linear_time);
    tcase_add_test(t, long_texts_tokenize_in_linear_time_with_every_kind_of_tokenizer);
    suite_add_tcase(s, t);
    return s;
}
