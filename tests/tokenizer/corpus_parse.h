/* corpus_parse.h — reading tests/tokenizer/corpus.tsv-format lines (format in
 * oracle.mjs) and comparing JSON arrays, for the tokenizer Check suites.
 * Header-only: include once per test file, after check.h. */
#ifndef ATTNVIZ_CORPUS_PARSE_H
#define ATTNVIZ_CORPUS_PARSE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len;
} Str;

static inline void put_utf8(Str *o, uint32_t c) {
    char *p = o->s + o->len;
    if (c < 0x80) {
        p[0] = (char)c;
        o->len += 1;
    } else if (c < 0x800) {
        p[0] = (char)(0xC0 | c >> 6);
        p[1] = (char)(0x80 | (c & 0x3F));
        o->len += 2;
    } else if (c < 0x10000) {
        p[0] = (char)(0xE0 | c >> 12);
        p[1] = (char)(0x80 | (c >> 6 & 0x3F));
        p[2] = (char)(0x80 | (c & 0x3F));
        o->len += 3;
    } else {
        p[0] = (char)(0xF0 | c >> 18);
        p[1] = (char)(0x80 | (c >> 12 & 0x3F));
        p[2] = (char)(0x80 | (c >> 6 & 0x3F));
        p[3] = (char)(0x80 | (c & 0x3F));
        o->len += 4;
    }
}

static inline uint32_t hex4(const char *p) {
    char h[5] = {p[0], p[1], p[2], p[3], 0};
    return (uint32_t)strtoul(h, NULL, 16);
}

/* Parses a JSON string literal at *pp (cJSON would stop at an escaped NUL). */
static inline Str parse_json_string(const char **pp) {
    const char *p = *pp;
    ck_assert_int_eq(*p, '"');
    p++;
    Str o = {malloc(strlen(p) + 1), 0};
    ck_assert_ptr_nonnull(o.s);
    while (*p != '"') {
        ck_assert_msg(*p, "unterminated JSON string in corpus");
        if (*p != '\\') {
            o.s[o.len++] = *p++;
            continue;
        }
        p++;
        switch (*p++) {
        case 'n': o.s[o.len++] = '\n'; break;
        case 't': o.s[o.len++] = '\t'; break;
        case 'r': o.s[o.len++] = '\r'; break;
        case 'b': o.s[o.len++] = '\b'; break;
        case 'f': o.s[o.len++] = '\f'; break;
        case 'u': {
            uint32_t c = hex4(p);
            p += 4;
            if (c >= 0xD800 && c < 0xDC00 && p[0] == '\\' && p[1] == 'u') {
                c = 0x10000 + ((c - 0xD800) << 10) + (hex4(p + 2) - 0xDC00);
                p += 6;
            }
            put_utf8(&o, c);
            break;
        }
        default: o.s[o.len++] = p[-1]; break; /* \" \\ \/ */
        }
    }
    *pp = p + 1;
    o.s[o.len] = '\0';
    return o;
}

/* One corpus line -> A and B (b.s == NULL when there is no B); format in oracle.mjs. */
static inline void parse_corpus_line(const char *line, Str *a, Str *b) {
    b->s = NULL;
    b->len = 0;
    if (strncmp(line, "json:", 5) == 0) {
        const char *p = line + 5;
        ck_assert_int_eq(*p++, '[');
        *a = parse_json_string(&p);
        while (*p == ' ') p++;
        if (*p == ',') {
            p++;
            while (*p == ' ') p++;
            *b = parse_json_string(&p);
        }
        ck_assert_int_eq(*p, ']');
        return;
    }
    const char *tab = strchr(line, '\t');
    size_t la = tab ? (size_t)(tab - line) : strlen(line);
    a->s = strndup(line, la);
    a->len = la;
    if (tab) {
        b->s = strdup(tab + 1);
        b->len = strlen(tab + 1);
    }
    ck_assert(a->s && (!tab || b->s));
}

static inline int json_ints_equal(const cJSON *arr, const int *v, int n) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return 0;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        if (!cJSON_IsNumber(x) || x->valueint != v[i++]) return 0;
    }
    return 1;
}

static inline int json_strs_equal(const cJSON *arr, const char *const *v, int n) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return 0;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        if (!cJSON_IsString(x) || strcmp(x->valuestring, v[i++]) != 0) return 0;
    }
    return 1;
}

#endif
