/* libFuzzer target: tokenizing arbitrary bytes (sentence A, and B after the
 * first 0x09 byte) with the committed test vocabulary (WordPiece, uncased and
 * cased) and with a small byte-level BPE vocabulary built at start-up (GPT-2
 * and RoBERTa templates). For GPT-2 the tokens' bytes must give back A and B. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bpe.h"
#include "tokenizer.h"

static Tokenizer *tok_lower, *tok_cased, *tok_gpt2, *tok_roberta;

/* Raw-text merges for the BPE vocabulary (their results become tokens). */
static const char *const MERGES[][2] = {
    {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"e", "r"}, {" ", "a"}, {"o", "n"},
    {"r", "e"}, {"\xC3", "\xA9"}, {" ", " "}, {"\n", "\n"}, {"in", "g"}, {"'", "s"},
    {"<", "s"}, {"<", "/"}, {"\xE6", "\x97"}, {"\xE6\x97", "\xA5"},
};
static const char *const SPECIALS[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>", "<|endoftext|>"};

static size_t spell(char *o, const char *raw) {
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)raw; *s; s++) {
        uint32_t c = bpe_byte_to_cp(*s);
        if (c < 0x80) o[n++] = (char)c;
        else {
            o[n++] = (char)(0xC0 | c >> 6);
            o[n++] = (char)(0x80 | (c & 0x3F));
        }
    }
    o[n] = '\0';
    return n;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Writes the vocab.json and merges.txt into memfds named by path_v/path_m. */
static int build_bpe(char path_v[64], char path_m[64]) {
    int fv = memfd_create("vocab.json", 0), fm = memfd_create("merges.txt", 0);
    if (fv < 0 || fm < 0) return -1;
    FILE *v = fdopen(dup(fv), "w"), *m = fdopen(dup(fm), "w");
    if (!v || !m) return -1;
    char sym[64];
    int id = 0;
    fputc('{', v);
    for (int b = 0; b < 256; b++) {
        char raw[2] = {(char)b, 0};
        if (b == 0) strcpy(sym, "\xC4\x80"); /* byte 0 cannot pass as a C string */
        else spell(sym, raw);
        fprintf(v, "%s", id ? "," : "");
        json_str(v, sym);
        fprintf(v, ":%d", id++);
    }
    fputs("#version: 0.2\n", m);
    for (size_t i = 0; i < sizeof MERGES / sizeof MERGES[0]; i++) {
        char a[64], b[64], ab[128], raw[64];
        spell(a, MERGES[i][0]);
        spell(b, MERGES[i][1]);
        snprintf(raw, sizeof raw, "%s%s", MERGES[i][0], MERGES[i][1]);
        spell(ab, raw);
        fprintf(m, "%s %s\n", a, b);
        fputc(',', v);
        json_str(v, ab);
        fprintf(v, ":%d", id++);
    }
    for (size_t i = 0; i < sizeof SPECIALS / sizeof SPECIALS[0]; i++) {
        fputc(',', v);
        json_str(v, SPECIALS[i]);
        fprintf(v, ":%d", id++);
    }
    fputc('}', v);
    if (fclose(v) != 0 || fclose(m) != 0) return -1;
    snprintf(path_v, 64, "/proc/self/fd/%d", fv);
    snprintf(path_m, 64, "/proc/self/fd/%d", fm);
    return 0;
}

/* Appends the bytes token id stands for (specials: their text) to out. */
static size_t token_bytes(const Tokenizer *t, int id, char *out) {
    const unsigned char *s = (const unsigned char *)tok_id_to_token(t, id);
    size_t n = 0;
    while (*s) {
        uint32_t c = *s < 0x80 ? *s++ : (uint32_t)((s[0] & 0x1F) << 6 | (s[1] & 0x3F));
        if (c >= 0x80) s += 2;
        int b = bpe_cp_to_byte(c);
        if (b < 0) __builtin_trap(); /* the vocab above only holds mapped symbols */
        out[n++] = (char)b;
    }
    return n;
}

static void check(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len,
                  int max_len, int min_n) {
    AvErr e;
    TokEncoding enc = {0};
    if (tok_encode(t, a, a_len, b, b_len, max_len, &enc, &e) == 0) {
        if ((max_len > 0 && enc.n > max_len) || enc.n < min_n) __builtin_trap();
        if (b && (enc.b_start < 0 || enc.b_start > enc.n)) __builtin_trap();
        for (int i = 0; i < enc.n; i++)
            if (enc.ids[i] < 0 || enc.ids[i] >= tok_vocab_size(t) || !enc.tokens[i] ||
                !enc.display[i] || enc.word_start[i] > 1)
                __builtin_trap();
        /* Byte-level GPT-2 without truncation loses nothing: the tokens' bytes are A then B. */
        if (tok_style(t) == TOK_STYLE_GPT2 && max_len == 0) {
            char *buf = malloc(a_len + b_len + 16);
            size_t n = 0;
            if (!buf) abort();
            for (int i = 0; i < enc.n; i++) {
                if (i == enc.b_start && n != a_len) __builtin_trap();
                if (n > a_len + b_len) __builtin_trap(); /* a token adds at most 13 bytes */
                n += token_bytes(t, enc.ids[i], buf + n);
            }
            if (n != a_len + b_len || memcmp(buf, a, a_len) != 0 ||
                (b_len && memcmp(buf + a_len, b, b_len) != 0))
                __builtin_trap();
            free(buf);
        }
    }
    tok_encoding_free(&enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AvErr e;
    if (!tok_lower) {
        const char *v = getenv("FUZZ_VOCAB") ? getenv("FUZZ_VOCAB") : "tests/data/small-f32/vocab.txt";
        if (tok_load(&tok_lower, v, 1, &e) != 0 || tok_load(&tok_cased, v, 0, &e) != 0) abort();
        char pv[64], pm[64];
        if (build_bpe(pv, pm) != 0 || tok_load_bpe(&tok_gpt2, pv, pm, TOK_STYLE_GPT2, &e) != 0 ||
            tok_load_bpe(&tok_roberta, pv, pm, TOK_STYLE_ROBERTA, &e) != 0) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", e.msg);
            abort();
        }
    }
    const char *a = (const char *)data, *tab = memchr(data, '\t', size);
    size_t a_len = tab ? (size_t)(tab - a) : size;
    const char *b = tab ? tab + 1 : NULL;
    size_t b_len = tab ? size - a_len - 1 : 0;
    int max_len = size ? 4 + data[0] % 64 : 8;
    check(tok_lower, a, a_len, b, b_len, max_len, 2);
    check(tok_cased, a, a_len, b, b_len, max_len, 2);
    check(tok_roberta, a, a_len, b, b_len, max_len, b ? 4 : 2);
    check(tok_gpt2, a, a_len, b, b_len, max_len, 0);
    check(tok_gpt2, a, a_len, b, b_len, 0, 0);
    return 0;
}
