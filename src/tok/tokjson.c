/* tokjson.c — tokenizer.json, read generically (see tokjson.h). The steps
 * follow the Rust library's order: added tokens are found in the raw text
 * (leftmost, longest), the gaps normalized, pre-tokenized into pieces, and
 * each piece merged by the BPE model. Regexes are Oniguruma's, the engine
 * the Rust library itself uses; Unicode data is utf8proc's. */
#include "tokjson.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <oniguruma.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "acmatch.h"
#include "bpe.h"
#include "strtab.h"
#include "util.h"

#define TJ_MAX_STEPS 16
#define TJ_MAX_TEMPLATE 8
/* The normalized text may be at most TJ_NORM_GROWTH x the input + TJ_NORM_SLACK
 * bytes. Real normalizers stay far below: NFKD's longest expansion (U+FDFA) is
 * 11x, Metaspace's "▁" for " " 3x. */
#define TJ_NORM_GROWTH 32
#define TJ_NORM_SLACK 64

/* ---------------------------------------------------------------- types */

typedef enum { N_NFC, N_NFKC, N_NFD, N_NFKD, N_LOWER, N_REPLACE, N_PREPEND, N_STRIP, N_PRECOMPILED } NormKind;

/* SentencePiece's precompiled_charsmap: a darts-clone double-array trie of
 * source strings whose values are offsets into a blob of NUL-terminated
 * replacements. Every node reachable from the root is checked once at load
 * (its 256 child slots inside the trie, values inside the blob on a
 * character boundary), so lookups cannot leave the arrays. */
typedef struct {
    uint32_t *units;
    size_t n_units;
    char *norm;              /* the replacements blob (valid UTF-8, NULs between entries) */
    size_t norm_len;
} Charsmap;

typedef struct {
    NormKind kind;
    Charsmap *cm;            /* Precompiled */
    char *pattern, *content; /* Replace: literal pattern (or NULL with re), content; Prepend: content */
    regex_t *re;             /* Replace with a Regex pattern */
    int left, right;         /* Strip */
} NormStep;

typedef enum { B_ISOLATED, B_REMOVED, B_PREV, B_NEXT, B_CONTIGUOUS } Behavior;
typedef enum { P_SPLIT, P_BYTELEVEL, P_METASPACE, P_DIGITS, P_WHITESPACE, P_WSSPLIT, P_PUNCT } PreKind;
typedef struct {
    PreKind kind;
    regex_t *re;             /* Split (Regex or escaped String), ByteLevel's GPT-2 pattern, Whitespace */
    Behavior behavior;
    int invert;
    int add_prefix_space, use_regex;     /* ByteLevel */
    char repl[8];                        /* Metaspace replacement (UTF-8) */
    int prepend;                         /* Metaspace: 0 never, 1 first, 2 always */
    int split;                           /* Metaspace */
    int individual;                      /* Digits */
} PreStep;

typedef struct {
    char *s;
    size_t len;
    int id;
    int special;
    int lstrip, rstrip, single_word;
} Added;

typedef struct {
    uint64_t key; /* (a << 32) | b, 0 = empty slot marker via rank < 0 */
    int32_t rank, result;
} Merge;

struct TjTokenizer {
    char *name;
    AvStrTab vocab;           /* id <-> spelling (each malloc'd here), NULL for unused ids */
    char **display;
    unsigned char *special;   /* id is a special added token */
    int n;                    /* ids 0..n-1 */
    Merge *merges;
    size_t mmask;
    int byte_level, byte_fallback, fuse_unk, ignore_merges, unk;
    char *csp, *eow;          /* BPE's continuing_subword_prefix and end_of_word_suffix ("</w>": CLIP's), NULL: none */
    size_t csp_len, eow_len;
    int unigram;              /* the model is Unigram (else BPE) */
    int uni_n;                /* Unigram: the model's pieces are ids 0..uni_n-1 */
    double *score;            /* Unigram: (uni_n) each piece's log-probability */
    double unk_score;         /* Unigram: the lowest score - 10, as the Rust library gives unknown characters */
    AcAuto uni;               /* Unigram: the pieces (a spelling twice: the last id, as the Rust library's map) */
    int byte_tok[256];        /* byte-level: the id of each byte's character; fallback: of <0xXX>; -1 */
    NormStep norm[TJ_MAX_STEPS];
    int n_norm;
    PreStep pre[TJ_MAX_STEPS];
    int n_pre;
    Added *added;
    int n_added;
    AcAuto added_ac;          /* the added tokens' spellings reversed (one twice: the first) -> index in added */
    size_t added_max;         /* the longest added token's bytes */
    TjItem single[TJ_MAX_TEMPLATE], pair[2 * TJ_MAX_TEMPLATE];
    int n_single, n_pair;
};

/* ---------------------------------------------------------------- small helpers */

typedef struct {
    char *p;
    size_t n, cap;
    size_t max; /* 0: no limit; else longer is refused (-2) */
} Str;

static int str_add(Str *s, const char *p, size_t n) {
    if (s->max && n > s->max - s->n) return -2;
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < s->n + n + 1) cap *= 2;
        char *q = realloc(s->p, cap);
        if (!q) return -1;
        s->p = q, s->cap = cap;
    }
    if (n) memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = '\0';
    return 0;
}


int tj_token_to_id(const TjTokenizer *t, const char *s, size_t len) { return av_strtab_find(&t->vocab, s, len); }

static int merge_lookup(const TjTokenizer *t, int a, int b, int32_t *rank) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->merges[i].rank < 0) return -1;
        if (t->merges[i].key == key) {
            *rank = t->merges[i].rank;
            return t->merges[i].result;
        }
    }
}

static size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* ---------------------------------------------------------------- regexes */

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static void onig_setup(void) {
    OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
}

static regex_t *compile(const char *pattern, size_t len, const char *name, const char *what, AvErr *e) {
    pthread_once(&onig_once, onig_setup);
    regex_t *re = NULL;
    OnigErrorInfo info;
    int r = onig_new(&re, (const UChar *)pattern, (const UChar *)pattern + len, ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                     ONIG_SYNTAX_DEFAULT, &info);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &info);
        av_err(e, "%s: %s: invalid regex: %s", name, what, (const char *)msg);
        return NULL;
    }
    return re;
}

/* A literal as a regex: every character escaped. */
static regex_t *compile_literal(const char *s, const char *name, const char *what, AvErr *e) {
    Str p = {0};
    for (const char *c = s; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u < 0x80 && !((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z'))) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\x{%x}", u);
            if (str_add(&p, esc, strlen(esc))) goto oom;
        } else if (str_add(&p, c, 1)) {
            goto oom;
        }
    }
    if (!p.p && str_add(&p, "", 0)) goto oom;
    regex_t *re = compile(p.p, p.n, name, what, e);
    free(p.p);
    return re;
oom:
    free(p.p);
    av_err(e, "out of memory");
    return NULL;
}

/* ---------------------------------------------------------------- Precompiled */

/* darts-clone's unit layout, as the Rust library's spm_precompiled reads it */
static int cm_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t cm_value(uint32_t u) { return u & 0x7fffffffu; }
static uint32_t cm_label(uint32_t u) { return u & (0x80000000u | 0xffu); }
static size_t cm_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

/* The replacement of the SHORTEST key that is a prefix of s (the Rust
 * library takes the first of its common-prefix results), or 0 when none. */
static int cm_transform(const Charsmap *cm, const char *s, size_t n, const char **out, size_t *out_len) {
    size_t pos = cm_offset(cm->units[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!c) break;
        pos ^= c;
        if (pos >= cm->n_units) return 0; /* not reachable after the load's checks */
        uint32_t u = cm->units[pos];
        if (cm_label(u) != c) return 0;
        pos ^= cm_offset(u);
        if (pos >= cm->n_units) return 0;
        if (cm_has_leaf(u)) {
            size_t v = cm_value(cm->units[pos]);
            if (v > cm->norm_len) return 0;
            *out = cm->norm + v;
            *out_len = strnlen(cm->norm + v, cm->norm_len - v);
            return 1;
        }
    }
    return 0;
}

/* Appends the Precompiled normalization of s: per extended grapheme cluster,
 * the whole cluster's replacement when it is under 6 bytes and has one, else
 * each character's (or the character). This is the Rust library's rule,
 * shortest-prefix lookup included. */
static int cm_normalize(const Charsmap *cm, const char *s, size_t n, Str *out) {
    size_t i = 0;
    while (i < n) {
        /* the cluster [i, j) */
        int32_t prev, c;
        utf8proc_int32_t state = 0;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &prev);
        if (w <= 0) return -1;
        size_t j = i + (size_t)w;
        while (j < n) {
            w = utf8proc_iterate((const utf8proc_uint8_t *)s + j, (utf8proc_ssize_t)(n - j), &c);
            if (w <= 0) return -1;
            if (utf8proc_grapheme_break_stateful(prev, c, &state)) break;
            prev = c;
            j += (size_t)w;
        }
        const char *r;
        size_t rl;
        if (j - i < 6 && cm_transform(cm, s + i, j - i, &r, &rl)) {
            int rc = str_add(out, r, rl);
            if (rc) return rc;
        } else {
            for (size_t k = i; k < j;) {
                size_t cl = utf8_len((unsigned char)s[k]);
                if (cl > j - k) cl = j - k;
                int rc = cm_transform(cm, s + k, cl, &r, &rl) ? str_add(out, r, rl) : str_add(out, s + k, cl);
                if (rc) return rc;
                k += cl;
            }
        }
        i = j;
    }
    return 0;
}

static void cm_free(Charsmap *cm) {
    if (!cm) return;
    free(cm->units);
    free(cm->norm);
    free(cm);
}

/* Standard base64 (padding optional); -1 on any other character. */
static int b64_decode(const char *s, unsigned char **out, size_t *out_len) {
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return -1;
    unsigned char *o = malloc(n / 4 * 3 + 3);
    if (!o) return -2;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
              : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
        if (v < 0) {
            free(o);
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    *out = o;
    *out_len = k;
    return 0;
}

/* Reads and checks a precompiled_charsmap: u32 trie size in bytes, the trie's
 * units, then the replacements. */
static int cm_load(Charsmap **out, const char *b64, const char *name, AvErr *e) {
    unsigned char *b = NULL;
    size_t bn = 0;
    int rc = b64_decode(b64, &b, &bn);
    if (rc == -2) return av_err(e, "out of memory");
    if (rc) return av_err(e, "%s: Precompiled normalizer: precompiled_charsmap is not base64", name);
    Charsmap *cm = calloc(1, sizeof *cm);
    uint32_t *seen = NULL;
    size_t *stack = NULL;
    if (!cm) goto oom;
    if (bn < 4) {
        av_err(e, "%s: Precompiled normalizer: precompiled_charsmap is %zu bytes, shorter than its header", name, bn);
        goto fail;
    }
    size_t ts = (size_t)b[0] | (size_t)b[1] << 8 | (size_t)b[2] << 16 | (size_t)b[3] << 24;
    if (ts == 0 || ts % 4 || ts > bn - 4) {
        av_err(e, "%s: Precompiled normalizer: a trie of %zu bytes does not fit the %zu bytes after the header "
                  "(or is not a positive multiple of 4)", name, ts, bn - 4);
        goto fail;
    }
    cm->n_units = ts / 4;
    cm->norm_len = bn - 4 - ts;
    if (!(cm->units = malloc(ts)) || !(cm->norm = malloc(cm->norm_len + 1))) goto oom;
    for (size_t i = 0; i < cm->n_units; i++) {
        const unsigned char *u = b + 4 + 4 * i;
        cm->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(cm->norm, b + 4 + ts, cm->norm_len);
    cm->norm[cm->norm_len] = '\0';
    free(b);
    b = NULL;
    /* the replacements: UTF-8 (NULs end entries) */
    for (size_t i = 0; i < cm->norm_len;) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)cm->norm + i, (utf8proc_ssize_t)(cm->norm_len - i), &c);
        if (w <= 0) {
            av_err(e, "%s: Precompiled normalizer: the replacements are not UTF-8 (byte %zu)", name, i);
            goto fail;
        }
        i += (size_t)w;
    }
    /* every reachable node once (seen; each is pushed once, so the stack
     * holds at most n_units): its 256 child slots inside the trie, each
     * leaf's value inside the blob on a character boundary */
    if (!(seen = calloc((cm->n_units + 31) / 32, sizeof *seen)) || !(stack = malloc(cm->n_units * sizeof *stack)))
        goto oom;
    size_t sp = 0, root = cm_offset(cm->units[0]);
    if ((root | 0xff) >= cm->n_units) goto bad;
    seen[root / 32] |= 1u << (root % 32);
    stack[sp++] = root;
    while (sp > 0) {
        size_t p = stack[--sp];
        for (unsigned c = 1; c < 256; c++) {
            size_t q = p ^ c;
            uint32_t u = cm->units[q];
            if (cm_label(u) != c) continue;
            size_t child = q ^ cm_offset(u);
            if ((child | 0xff) >= cm->n_units) goto bad;
            if (cm_has_leaf(u)) {
                size_t v = cm_value(cm->units[child]);
                if (v > cm->norm_len || (v < cm->norm_len && ((unsigned char)cm->norm[v] & 0xC0) == 0x80)) goto bad;
            }
            /* darts-clone shares common suffixes: a node may have several parents */
            if (seen[child / 32] >> (child % 32) & 1) continue;
            seen[child / 32] |= 1u << (child % 32);
            stack[sp++] = child;
        }
    }
    free(seen);
    free(stack);
    *out = cm;
    return 0;
bad:
    av_err(e, "%s: Precompiled normalizer: the charsmap's trie points outside itself", name);
    goto fail;
oom:
    av_err(e, "out of memory");
fail:
    free(b);
    free(seen);
    free(stack);
    cm_free(cm);
    return -1;
}

/* ---------------------------------------------------------------- pieces */

typedef struct {
    Str *v;
    int *first;   /* the piece begins the whole input (Metaspace's "first") */
    size_t n, cap;
} Pieces;

static int pieces_push(Pieces *ps, const char *p, size_t n, int first) {
    if (!n) return 0;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 16;
        Str *v = realloc(ps->v, cap * sizeof *v);
        if (!v) return -1;
        ps->v = v;
        int *f = realloc(ps->first, cap * sizeof *f);
        if (!f) return -1;
        ps->first = f, ps->cap = cap;
    }
    ps->v[ps->n] = (Str){0};
    if (str_add(&ps->v[ps->n], p, n)) return -1;
    ps->first[ps->n++] = first;
    return 0;
}

static void pieces_free(Pieces *ps) {
    for (size_t i = 0; i < ps->n; i++) free(ps->v[i].p);
    free(ps->v);
    free(ps->first);
    memset(ps, 0, sizeof *ps);
}

/* Splits s by the spans re matches, per the Rust library's
 * SplitDelimiterBehavior; a delimiter is a match, or a gap when inverted.
 * "the-final--countdown" split at "-": Isolated the|-|final|-|-|countdown,
 * Removed the|final|countdown, MergedWithPrevious the-|final-|-|countdown,
 * MergedWithNext the|-final|-|-countdown, Contiguous the|-|final|--|countdown. */
static int apply_split(Pieces *out, const char *s, size_t n, int first, regex_t *re, Behavior b, int invert) {
    size_t cap = 16, k = 0;
    size_t *sp = malloc(cap * 3 * sizeof *sp); /* (start, end, is_match) covering s */
    OnigRegion *reg = onig_region_new();
    int rc = -1;
    if (!sp || !reg) goto done;
    size_t pos = 0, last = 0;
    const UChar *str = (const UChar *)s, *end = str + n;
    while (pos < n) {
        int r = onig_search(re, str, end, str + pos, end, reg, ONIG_OPTION_NONE);
        if (r < 0) break;
        size_t ms = (size_t)reg->beg[0], me = (size_t)reg->end[0];
        if (me == ms) { /* an empty match splits nothing: step one character */
            pos = ms + utf8_len((unsigned char)s[ms]);
            continue;
        }
        if (k + 3 >= cap) {
            size_t *q = realloc(sp, (cap *= 2) * 3 * sizeof *q);
            if (!q) goto done;
            sp = q;
        }
        if (ms > last) sp[3 * k] = last, sp[3 * k + 1] = ms, sp[3 * k + 2] = 0, k++;
        sp[3 * k] = ms, sp[3 * k + 1] = me, sp[3 * k + 2] = 1, k++;
        last = pos = me;
    }
    if (last < n) {
        if (k + 1 >= cap) {
            size_t *q = realloc(sp, (cap + 1) * 3 * sizeof *q);
            if (!q) goto done;
            sp = q;
        }
        sp[3 * k] = last, sp[3 * k + 1] = n, sp[3 * k + 2] = 0, k++;
    }
    rc = 0;
    size_t cs = 0, ce = 0;
    int have = 0, prev = 0; /* a piece pending; whether the span before was a delimiter */
    for (size_t i = 0; i < k && rc == 0; i++) {
        size_t a = sp[3 * i], z = sp[3 * i + 1];
        int delim = (sp[3 * i + 2] != 0) != (invert != 0);
        int join = 0;
        switch (b) {
        case B_ISOLATED: break;
        case B_REMOVED:
            if (delim) continue;
            break;
        case B_PREV: join = delim && !prev; break;     /* a delimiter joins the piece before it */
        case B_NEXT: join = prev && !delim; break;     /* a delimiter joins what follows unless that is one too */
        case B_CONTIGUOUS: join = delim == prev; break; /* runs of the same kind join */
        }
        prev = delim;
        if (join && have) {
            ce = z;
            continue;
        }
        if (have) rc = pieces_push(out, s + cs, ce - cs, first && cs == 0);
        cs = a, ce = z, have = 1;
    }
    if (rc == 0 && have) rc = pieces_push(out, s + cs, ce - cs, first && cs == 0);
done:
    if (reg) onig_region_free(reg, 1);
    free(sp);
    return rc;
}

/* ---------------------------------------------------------------- normalizers */

/* Normalizes s into out, which may hold at most max bytes (-2 past that: a
 * chain of Replace rules can multiply the text without bound). */
static int normalize(const TjTokenizer *t, const char *s, size_t n, Str *out, size_t max) {
    out->n = 0;
    out->max = 0;
    if (str_add(out, s, n)) return -1;
    for (int k = 0; k < t->n_norm; k++) {
        const NormStep *st = &t->norm[k];
        Str next = {0};
        next.max = max;
        int rc = 0;
        switch (st->kind) {
        case N_NFC: case N_NFKC: case N_NFD: case N_NFKD: {
            utf8proc_option_t opt = UTF8PROC_STABLE | (st->kind == N_NFC || st->kind == N_NFKC ? UTF8PROC_COMPOSE
                                                                                              : UTF8PROC_DECOMPOSE);
            if (st->kind == N_NFKC || st->kind == N_NFKD) opt |= UTF8PROC_COMPAT;
            utf8proc_uint8_t *r = NULL;
            utf8proc_ssize_t l = utf8proc_map((const utf8proc_uint8_t *)out->p, (utf8proc_ssize_t)out->n, &r, opt);
            if (l < 0) return -1;
            rc = str_add(&next, (const char *)r, (size_t)l);
            free(r);
            break;
        }
        case N_LOWER:
            for (size_t i = 0; i < out->n && rc == 0;) {
                int32_t c;
                utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)out->p + i, (utf8proc_ssize_t)(out->n - i), &c);
                if (w <= 0) return -1;
                utf8proc_uint8_t buf[4];
                /* Rust's char::to_lowercase: U+0130 is the one character whose
                 * unconditional lowercase is two (i and a combining dot above) */
                if (c == 0x130) {
                    rc = str_add(&next, "i\xcc\x87", 3);
                } else {
                    utf8proc_ssize_t bl = utf8proc_encode_char(utf8proc_tolower(c), buf);
                    rc = str_add(&next, (const char *)buf, (size_t)bl);
                }
                i += (size_t)w;
            }
            break;
        case N_REPLACE:
            if (st->re) {
                OnigRegion *reg = onig_region_new();
                size_t pos = 0;
                const UChar *p = (const UChar *)out->p, *e = p + out->n;
                while (reg && rc == 0 && pos <= out->n) {
                    int r = onig_search(st->re, p, e, p + pos, e, reg, ONIG_OPTION_NONE);
                    if (r < 0) break;
                    size_t ms = (size_t)reg->beg[0], me = (size_t)reg->end[0];
                    rc = str_add(&next, out->p + pos, ms - pos);
                    rc = rc ? rc : str_add(&next, st->content, strlen(st->content));
                    if (me == ms) {
                        if (ms >= out->n) { pos = out->n + 1; break; }
                        size_t w = utf8_len((unsigned char)out->p[ms]);
                        rc = rc ? rc : str_add(&next, out->p + ms, w);
                        pos = ms + w;
                    } else {
                        pos = me;
                    }
                }
                if (reg) onig_region_free(reg, 1);
                if (!reg) rc = -1;
                if (rc == 0 && pos <= out->n) rc = str_add(&next, out->p + pos, out->n - pos);
            } else {
                /* leftmost, not overlapping; memmem's search is linear however long the pattern */
                const size_t pl = strlen(st->pattern);
                for (size_t i = 0; i < out->n && rc == 0;) {
                    const char *hit = pl ? memmem(out->p + i, out->n - i, st->pattern, pl) : NULL;
                    const size_t upto = hit ? (size_t)(hit - out->p) : out->n;
                    rc = str_add(&next, out->p + i, upto - i);
                    if (rc == 0 && hit) rc = str_add(&next, st->content, strlen(st->content));
                    i = hit ? upto + pl : upto;
                }
            }
            break;
        case N_PREPEND:
            if (out->n) rc = str_add(&next, st->content, strlen(st->content));
            if (out->n && !rc) rc = str_add(&next, out->p, out->n);
            break;
        case N_PRECOMPILED:
            rc = cm_normalize(st->cm, out->p, out->n, &next);
            break;
        case N_STRIP: {
            size_t a = 0, z = out->n;
            while (st->left && a < z) {
                int32_t c;
                utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)out->p + a, (utf8proc_ssize_t)(z - a), &c);
                if (w <= 0 || !bpe_is_space(c)) break;
                a += (size_t)w;
            }
            while (st->right && z > a) {
                size_t b = z - 1;
                while (b > a && ((unsigned char)out->p[b] & 0xC0) == 0x80) b--;
                int32_t c;
                if (utf8proc_iterate((const utf8proc_uint8_t *)out->p + b, (utf8proc_ssize_t)(z - b), &c) <= 0 ||
                    !bpe_is_space(c))
                    break;
                z = b;
            }
            rc = str_add(&next, out->p + a, z - a);
            break;
        }
        }
        if (rc) {
            free(next.p);
            return rc == -2 ? -2 : -1;
        }
        if (!next.p && str_add(&next, "", 0)) return -1;
        free(out->p);
        *out = next;
    }
    return 0;
}

/* ---------------------------------------------------------------- pre-tokenizers */

static int is_punct(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    if (k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO) return 1;
    /* the Rust library also counts ASCII symbols ($ + < = > ^ ` | ~) */
    return c < 0x80 && ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126));
}

static int pretokenize(const TjTokenizer *t, const char *s, size_t n, int first, Pieces *out) {
    Pieces cur = {0};
    if (pieces_push(&cur, s, n, first)) goto oom;
    for (int k = 0; k < t->n_pre; k++) {
        const PreStep *st = &t->pre[k];
        Pieces next = {0};
        for (size_t i = 0; i < cur.n; i++) {
            const char *p = cur.v[i].p;
            size_t pn = cur.v[i].n;
            int f = cur.first[i];
            int rc = 0;
            switch (st->kind) {
            case P_SPLIT: case P_WHITESPACE: case P_WSSPLIT:
                rc = apply_split(&next, p, pn, f, st->re, st->behavior, st->invert);
                break;
            case P_BYTELEVEL:
                if (st->add_prefix_space && p[0] != ' ') {
                    Str tmp = {0};
                    rc = str_add(&tmp, " ", 1) || str_add(&tmp, p, pn);
                    if (!rc) rc = st->use_regex ? apply_split(&next, tmp.p, tmp.n, f, st->re, B_ISOLATED, 0)
                                                : pieces_push(&next, tmp.p, tmp.n, f);
                    free(tmp.p);
                } else {
                    rc = st->use_regex ? apply_split(&next, p, pn, f, st->re, B_ISOLATED, 0) : pieces_push(&next, p, pn, f);
                }
                break;
            case P_METASPACE: {
                /* spaces become the replacement first; the prefix goes on unless the result starts with it */
                Str tmp = {0};
                size_t rl = strlen(st->repl);
                for (size_t j = 0; j < pn && !rc; j++) rc = p[j] == ' ' ? str_add(&tmp, st->repl, rl) : str_add(&tmp, p + j, 1);
                if (!rc && (st->prepend == 2 || (st->prepend == 1 && f)) && !(tmp.n >= rl && !memcmp(tmp.p, st->repl, rl))) {
                    Str pre = {0};
                    rc = str_add(&pre, st->repl, rl) || str_add(&pre, tmp.p ? tmp.p : "", tmp.n);
                    free(tmp.p);
                    tmp = pre;
                }
                if (!rc && tmp.n) {
                    if (st->split) {
                        /* each replacement starts a piece (MergedWithNext) */
                        size_t a = 0;
                        for (size_t j = 1; j < tmp.n && !rc; j++)
                            if (j + rl <= tmp.n && !memcmp(tmp.p + j, st->repl, rl)) {
                                rc = pieces_push(&next, tmp.p + a, j - a, f && a == 0);
                                a = j;
                            }
                        if (!rc) rc = pieces_push(&next, tmp.p + a, tmp.n - a, f && a == 0);
                    } else {
                        rc = pieces_push(&next, tmp.p, tmp.n, f);
                    }
                }
                free(tmp.p);
                break;
            }
            case P_DIGITS: case P_PUNCT: {
                /* runs of digits (or each digit), punctuation isolated */
                size_t a = 0;
                int prev = -1;
                for (size_t j = 0; j <= pn && !rc;) {
                    int32_t c = 0;
                    utf8proc_ssize_t w = 1;
                    int cls = -1;
                    if (j < pn) {
                        w = utf8proc_iterate((const utf8proc_uint8_t *)p + j, (utf8proc_ssize_t)(pn - j), &c);
                        if (w <= 0) w = 1;
                        /* Rust's char::is_numeric: Nd, Nl and No (so "½" counts) */
                        utf8proc_category_t cat = utf8proc_category(c);
                        cls = st->kind == P_DIGITS ? (cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
                                                      cat == UTF8PROC_CATEGORY_NO)
                                                   : is_punct(c);
                    }
                    int cut = j == pn || (j > 0 && (cls != prev || (cls == 1 && (st->kind == P_PUNCT || st->individual))));
                    if (cut && j > a) {
                        rc = pieces_push(&next, p + a, j - a, f && a == 0);
                        a = j;
                    }
                    prev = cls;
                    j += (size_t)w;
                }
                break;
            }
            }
            if (rc) {
                pieces_free(&next);
                goto oom;
            }
        }
        pieces_free(&cur);
        cur = next;
    }
    *out = cur;
    return 0;
oom:
    pieces_free(&cur);
    return -1;
}

/* ---------------------------------------------------------------- BPE */

typedef struct {
    int32_t rank;
    int32_t pos;
    int32_t left_id, right_id; /* the pair as queued: stale when the symbols changed */
} Cand;

static int ids_push(TjIds *o, int id, int start, int special) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        int *ids = realloc(o->ids, cap * sizeof *ids);
        if (!ids) return -1;
        o->ids = ids;
        unsigned char *ws = realloc(o->word_start, cap);
        if (!ws) return -1;
        o->word_start = ws;
        unsigned char *sp = realloc(o->special, cap);
        if (!sp) return -1;
        o->special = sp;
        o->cap = cap;
    }
    o->ids[o->n] = id, o->word_start[o->n] = (unsigned char)start, o->special[o->n] = (unsigned char)special;
    o->n++;
    return 0;
}

static int cand_less(const Cand *a, const Cand *b) { return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos); }

static void heap_up(Cand *h, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&h[i], &h[p])) break;
        Cand x = h[i];
        h[i] = h[p], h[p] = x, i = p;
    }
}

static void heap_down(Cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_less(&h[l], &h[m])) m = l;
        if (r < n && cand_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        Cand x = h[i];
        h[i] = h[m], h[m] = x, i = m;
    }
}

/* The BPE model on one piece: its characters (bytes mapped to characters
 * when byte-level) as symbols, unknown ones as byte-fallback tokens or unk,
 * then merges by rank, lowest first, leftmost among equals. */
static int bpe_piece(const TjTokenizer *t, const char *p, size_t n, TjIds *out) {
    Str mapped = {0};
    const char *s = p;
    size_t sn = n;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++) {
            utf8proc_uint8_t buf[4];
            utf8proc_ssize_t l = utf8proc_encode_char((int32_t)bpe_byte_to_cp((uint8_t)p[i]), buf);
            if (str_add(&mapped, (const char *)buf, (size_t)l)) goto oom;
        }
        s = mapped.p, sn = mapped.n;
    }
    if (t->ignore_merges) {
        int whole = tj_token_to_id(t, s, sn);
        if (whole >= 0) {
            free(mapped.p);
            return ids_push(out, whole, 1, 0);
        }
    }
    /* a symbol per byte at most; a byte fallback over affixed characters takes their affixes' bytes too */
    size_t cap = sn * (1 + t->csp_len) + t->eow_len + 1, m = 0;
    int32_t *sym = malloc(cap * sizeof *sym), *next = malloc(cap * sizeof *next), *prev = malloc(cap * sizeof *prev);
    Cand *heap = malloc(3 * cap * sizeof *heap); /* initial pairs, then at most two per merge */
    if (!sym || !next || !prev || !heap) goto oom2;
    Str aff = {0}; /* a character with the prefix (not the word's first) and the suffix (its last) */
    for (size_t i = 0; i < sn;) {
        size_t w = utf8_len((unsigned char)s[i]);
        if (w > sn - i) w = sn - i;
        const char *cs = s + i; /* the character as looked up (and its bytes as a fallback takes them) */
        size_t cw = w;
        const int pre = t->csp_len && i > 0, suf = t->eow_len && i + w == sn;
        if (pre || suf) {
            aff.n = 0;
            if ((pre && str_add(&aff, t->csp, t->csp_len)) || str_add(&aff, s + i, w) ||
                (suf && str_add(&aff, t->eow, t->eow_len))) {
                free(aff.p);
                goto oom2;
            }
            cs = aff.p, cw = aff.n;
        }
        int id = tj_token_to_id(t, cs, cw);
        if (id >= 0) {
            sym[m++] = id;
        } else if (t->byte_fallback) {
            /* the character's bytes as <0xNN> tokens (unk for a byte without one) */
            for (size_t b = 0; b < cw; b++) {
                int bid = t->byte_tok[(unsigned char)cs[b]];
                if (bid < 0) bid = t->unk;
                if (bid >= 0) sym[m++] = bid;
            }
        } else if (t->unk >= 0 && !(t->fuse_unk && m > 0 && sym[m - 1] == t->unk)) {
            sym[m++] = t->unk;
        } /* no unk token: the character is dropped, as the Rust library does */
        i += w;
    }
    free(aff.p);
    for (size_t i = 0; i < m; i++) next[i] = i + 1 < m ? (int32_t)i + 1 : -1, prev[i] = (int32_t)i - 1;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++) {
        int32_t rank;
        if (merge_lookup(t, sym[i], sym[i + 1], &rank) >= 0) {
            heap[hn] = (Cand){rank, (int32_t)i, sym[i], sym[i + 1]};
            heap_up(heap, hn++);
        }
    }
    while (hn > 0) {
        Cand c = heap[0];
        heap[0] = heap[--hn];
        heap_down(heap, hn, 0);
        int32_t i = c.pos, j = next[i];
        if (sym[i] < 0 || j < 0 || sym[i] != c.left_id || sym[j] != c.right_id) continue; /* stale */
        int32_t rank;
        int merged = merge_lookup(t, sym[i], sym[j], &rank);
        if (merged < 0 || rank != c.rank) continue;
        sym[i] = merged;
        sym[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        if (prev[i] >= 0 && merge_lookup(t, sym[prev[i]], sym[i], &rank) >= 0) {
            heap[hn] = (Cand){rank, prev[i], sym[prev[i]], sym[i]};
            heap_up(heap, hn++);
        }
        if (next[i] >= 0 && merge_lookup(t, sym[i], sym[next[i]], &rank) >= 0) {
            heap[hn] = (Cand){rank, i, sym[i], sym[next[i]]};
            heap_up(heap, hn++);
        }
    }
    int rc = 0, firsttok = 1;
    for (size_t i = 0; i < m && m > 0 && rc == 0; i = next[i] < 0 ? m : (size_t)next[i]) {
        if (sym[i] < 0) continue;
        rc = ids_push(out, sym[i], firsttok, 0);
        firsttok = 0;
    }
    free(sym), free(next), free(prev), free(heap), free(mapped.p);
    return rc;
oom2:
    free(sym), free(next), free(prev), free(heap);
oom:
    free(mapped.p);
    return -1;
}

/* ---------------------------------------------------------------- Unigram */

/* The Unigram model on one piece, as the Rust library's encode_optimized:
 * Viterbi over every vocabulary piece starting at each character (scores
 * summed in double precision; a later start or a shorter piece wins only
 * when strictly better), an unknown character scored unk_score; then runs of
 * unk are fused into one string, which becomes its byte tokens (byte
 * fallback) or unk. Returns -3 when a character has no piece and the model no unk.
 * The pieces ending at each character's end come from the automaton, longest (earliest
 * start) first, which is the order the Rust library's pass over the starts meets them
 * in: no walk from each start down a long piece that does not match. */
static int unigram_piece(const TjTokenizer *t, const char *s, size_t n, TjIds *out) {
    if (!n) return 0;
    double *best = malloc((n + 1) * sizeof *best);
    int32_t *from = malloc((n + 1) * sizeof *from), *tok = malloc((n + 1) * sizeof *tok);
    size_t *seg = malloc((n + 1) * sizeof *seg); /* the best path's boundaries, last first */
    unsigned char *start = malloc(n + 1);        /* a character starts here (as the starts are stepped) */
    int rc = -1;
    if (!best || !from || !tok || !seg || !start) goto done;
    for (size_t i = 0; i <= n; i++) best[i] = 0.0, from[i] = -1, tok[i] = -1, start[i] = 0;
    for (size_t at = 0; at < n;) {
        size_t mb = utf8_len((unsigned char)s[at]);
        start[at] = 1;
        at += mb > n - at ? n - at : mb;
    }
    start[n] = 1;
    const AcAuto *ac = &t->uni;
    int32_t state = 0;
    size_t cs = 0; /* where the character ending at j starts */
    for (size_t j = 1; j <= n; j++) {
        state = ac_step(ac, state, (unsigned char)s[j - 1]);
        if (!start[j]) continue;
        int single = 0;
        for (int32_t x = ac->out[state]; x >= 0; x = ac->out[ac->fail[x]]) {
            const size_t at = j - (size_t)ac->depth[x];
            if (!start[at]) continue;
            const int id = ac->id[x];
            const double cand = t->score[id] + best[at];
            if (from[j] < 0 || cand > best[j]) best[j] = cand, from[j] = (int32_t)at, tok[j] = id;
            if (at == cs) single = 1;
        }
        if (!single) {
            const double cand = t->unk_score + best[cs];
            if (from[j] < 0 || cand > best[j]) {
                if (t->unk < 0) {
                    rc = -3;
                    goto done;
                }
                best[j] = cand, from[j] = (int32_t)cs, tok[j] = t->unk;
            }
        }
        cs = j;
    }
    size_t m = 0;
    for (size_t end = n; end > 0; end = (size_t)from[end]) seg[m++] = end;
    seg[m] = 0;
    int first = 1;
    /* forward over the path: seg[m] = 0 < seg[m-1] < ... < seg[0] = n */
    for (size_t q = m; q > 0;) {
        size_t a = seg[q], b = seg[q - 1];
        q--;
        if (tok[b] == t->unk && t->unk >= 0)
            while (q > 0 && tok[seg[q - 1]] == t->unk) b = seg[--q]; /* fuse the run of unk */
        int id = ac_find(&t->uni, s + a, b - a);
        if (id >= 0) {
            if (ids_push(out, id, first, 0)) goto done;
        } else {
            int bytes_ok = t->byte_fallback;
            for (size_t k = a; k < b && bytes_ok; k++) bytes_ok = t->byte_tok[(unsigned char)s[k]] >= 0;
            if (bytes_ok) {
                for (size_t k = a; k < b; k++)
                    if (ids_push(out, t->byte_tok[(unsigned char)s[k]], first && k == a, 0)) goto done;
            } else if (t->unk < 0) {
                rc = -3;
                goto done;
            } else if (ids_push(out, t->unk, first, 0)) {
                goto done;
            }
        }
        first = 0;
    }
    rc = 0;
done:
    free(best), free(from), free(tok), free(seg), free(start);
    return rc;
}

/* ---------------------------------------------------------------- encode */

/* The added tokens starting at [a, b) of s (n bytes), each the longest one there, as the
 * Rust library's leftmost-longest search finds them; -1 where none. The automaton holds the
 * spellings reversed: reading the text backwards from where the longest one starting
 * before b can end, the first spelling on the state's out chain at p is the longest
 * one starting at p. Each window reads its bytes and at most added_max more. */
typedef struct {
    int32_t *at; /* (b - a) */
    size_t a, b, cap;
} AddedWindow;

static int added_at(const TjTokenizer *t, const char *s, size_t n, size_t i, AddedWindow *w, int32_t *k) {
    if (i < w->a || i >= w->b) {
        size_t want = t->added_max > 65536 ? t->added_max : 65536;
        if (want > n - i) want = n - i;
        if (want > w->cap) {
            int32_t *p = realloc(w->at, want * sizeof *p);
            if (!p) return -1;
            w->at = p, w->cap = want;
        }
        const size_t a = i, b = i + want, hi = t->added_max - 1 > n - b ? n : b + t->added_max - 1;
        const AcAuto *ac = &t->added_ac;
        int32_t q = 0;
        for (size_t p = hi; p > a;) {
            p--;
            q = ac_step(ac, q, (unsigned char)s[p]);
            if (p < b) w->at[p - a] = ac->out[q] >= 0 ? ac->id[ac->out[q]] : -1;
        }
        w->a = a, w->b = b;
    }
    *k = w->at[i - w->a];
    return 0;
}

/* The automaton of the added tokens, for added_at. */
static int index_added(TjTokenizer *t) {
    AcString *v = malloc((t->n_added ? (size_t)t->n_added : 1) * sizeof *v);
    if (!v) return -1;
    for (int k = 0; k < t->n_added; k++) {
        v[k] = (AcString){t->added[k].s, t->added[k].len, k};
        if (t->added[k].len > t->added_max) t->added_max = t->added[k].len;
    }
    const int rc = ac_build(&t->added_ac, v, (size_t)t->n_added, 1, 0);
    free(v);
    return rc;
}

static int is_word_char(const char *s, size_t n, size_t at, int before) {
    int32_t c;
    if (before) {
        if (at == 0) return 0;
        size_t b = at - 1;
        while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
        if (utf8proc_iterate((const utf8proc_uint8_t *)s + b, (utf8proc_ssize_t)(at - b), &c) <= 0) return 0;
    } else {
        if (at >= n || utf8proc_iterate((const utf8proc_uint8_t *)s + at, (utf8proc_ssize_t)(n - at), &c) <= 0) return 0;
    }
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_ND || c == '_';
}

/* Encodes one stretch between added tokens; *budget is what the normalized
 * text may still take (-2 when it would take more). */
static int encode_gap(const TjTokenizer *t, const char *s, size_t n, int first, TjIds *out, size_t *budget) {
    if (!n) return 0;
    if (!*budget) return -2;
    Str norm = {0};
    Pieces ps = {0};
    int rc = normalize(t, s, n, &norm, *budget);
    if (rc == 0) *budget -= norm.n;
    if (rc == 0) rc = pretokenize(t, norm.p, norm.n, first, &ps);
    for (size_t i = 0; i < ps.n && rc == 0; i++)
        rc = t->unigram ? unigram_piece(t, ps.v[i].p, ps.v[i].n, out) : bpe_piece(t, ps.v[i].p, ps.v[i].n, out);
    pieces_free(&ps);
    free(norm.p);
    return rc;
}

int tj_encode(const TjTokenizer *t, const char *text, size_t len, TjIds *out, AvErr *e) {
    size_t seg = 0, i = 0;
    /* Normalizers may grow a text (NFKD, "▁" for " ", a prefix) but only so
     * much: past TJ_NORM_GROWTH times the input (plus a little) it is refused. */
    const size_t limit = len > (SIZE_MAX - TJ_NORM_SLACK) / TJ_NORM_GROWTH ? SIZE_MAX : len * TJ_NORM_GROWTH + TJ_NORM_SLACK;
    size_t budget = limit;
    AddedWindow win = {0};
    int rc = 0;
    while (i <= len && rc == 0) {
        int32_t k = -1;
        if (i < len && t->n_added && added_at(t, text, len, i, &win, &k)) {
            rc = -1;
            break;
        }
        size_t mlen = k >= 0 ? t->added[k].len : 0;
        if (k >= 0 && t->added[k].single_word &&
            (is_word_char(text, len, i, 1) || is_word_char(text, len, i + mlen, 0)))
            k = -1;
        if (i < len && k < 0) {
            i += utf8_len((unsigned char)text[i]);
            continue;
        }
        size_t gap_end = i, after = i + mlen;
        if (k >= 0 && t->added[k].lstrip)
            while (gap_end > seg && (text[gap_end - 1] == ' ' || text[gap_end - 1] == '\t' ||
                                     text[gap_end - 1] == '\n' || text[gap_end - 1] == '\r'))
                gap_end--;
        if ((rc = encode_gap(t, text + seg, gap_end - seg, seg == 0, out, &budget)) != 0 || i >= len) break;
        if (ids_push(out, t->added[k].id, 1, t->added[k].special)) {
            rc = -1;
            break;
        }
        if (t->added[k].rstrip)
            while (after < len && (text[after] == ' ' || text[after] == '\t' || text[after] == '\n' || text[after] == '\r'))
                after++;
        i = seg = after;
    }
    free(win.at);
    if (rc == -2)
        return av_err(e, "%s: the normalizer grows the text past %zu bytes, the limit for %zu input bytes (%dx + %d)",
                      t->name, limit, len, TJ_NORM_GROWTH, TJ_NORM_SLACK);
    if (rc == -3) return av_err(e, "%s: the text has a character the Unigram vocabulary lacks, and no unk_id", t->name);
    if (rc) return av_err(e, "out of memory while tokenizing");
    return 0;
}

void tj_ids_free(TjIds *ids) {
    free(ids->ids);
    free(ids->word_start);
    free(ids->special);
    memset(ids, 0, sizeof *ids);
}

/* ---------------------------------------------------------------- loading */

static int fail(AvErr *e, const char *name, const char *what) { return av_err(e, "%s: %.1000s", name, what); }

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *k, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* Registers spelling s as id (vocab or added token). */
static int set_token(TjTokenizer *t, int id, const char *s, size_t len, const char *name, AvErr *e) {
    if (id < 0 || id >= t->n) return av_err(e, "%s: token id %d is out of range", name, id);
    if (t->vocab.tok[id]) {
        if (t->vocab.len[id] == len && !memcmp(t->vocab.tok[id], s, len)) return 0;
        return av_err(e, "%s: id %d is given to two tokens", name, id);
    }
    char *copy = malloc(len + 1);
    if (!copy) return av_err(e, "out of memory");
    memcpy(copy, s, len);
    copy[len] = '\0';
    av_strtab_set(&t->vocab, id, copy, len); /* an added token repeating a vocab entry keeps the first id for lookups */
    return 0;
}

static int parse_normalizer(TjTokenizer *t, const cJSON *n, const char *name, AvErr *e) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) return fail(e, name, "normalizer without a type");
    if (!strcmp(type, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
            if (parse_normalizer(t, it, name, e)) return -1;
        return 0;
    }
    if (t->n_norm == TJ_MAX_STEPS) return fail(e, name, "too many normalizers");
    NormStep *st = &t->norm[t->n_norm];
    memset(st, 0, sizeof *st);
    if (!strcmp(type, "NFC")) st->kind = N_NFC;
    else if (!strcmp(type, "NFKC")) st->kind = N_NFKC;
    else if (!strcmp(type, "NFD")) st->kind = N_NFD;
    else if (!strcmp(type, "NFKD")) st->kind = N_NFKD;
    else if (!strcmp(type, "Lowercase")) st->kind = N_LOWER;
    else if (!strcmp(type, "Strip")) {
        st->kind = N_STRIP;
        st->left = jbool(n, "strip_left", 1), st->right = jbool(n, "strip_right", 1);
    } else if (!strcmp(type, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p) return fail(e, name, "Prepend normalizer without \"prepend\"");
        st->kind = N_PREPEND;
        if (!(st->content = strdup(p))) return av_err(e, "out of memory");
    } else if (!strcmp(type, "Precompiled")) {
        const char *cm = jstr(n, "precompiled_charsmap");
        if (!cm) return fail(e, name, "Precompiled normalizer without a precompiled_charsmap string");
        st->kind = N_PRECOMPILED;
        if (cm_load(&st->cm, cm, name, e)) return -1;
    } else if (!strcmp(type, "Replace")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern");
        const char *content = jstr(n, "content"), *lit = pat ? jstr(pat, "String") : NULL, *rx = pat ? jstr(pat, "Regex") : NULL;
        if (!content || (!lit && !rx)) return fail(e, name, "Replace normalizer needs a pattern and content");
        st->kind = N_REPLACE;
        if (!(st->content = strdup(content))) return av_err(e, "out of memory");
        if (lit && !(st->pattern = strdup(lit))) return av_err(e, "out of memory");
        if (rx && !(st->re = compile(rx, strlen(rx), name, "Replace normalizer", e))) return -1;
    } else {
        return av_err(e, "%s: normalizer \"%.40s\" is not supported", name, type);
    }
    t->n_norm++;
    return 0;
}

static int parse_behavior(const char *b, Behavior *out) {
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (b && !strcmp(b, names[i])) {
            *out = (Behavior)i;
            return 0;
        }
    return -1;
}

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static int parse_pre(TjTokenizer *t, const cJSON *p, const char *name, AvErr *e) {
    if (!p || cJSON_IsNull(p)) return 0;
    const char *type = jstr(p, "type");
    if (!type) return fail(e, name, "pre-tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"))
            if (parse_pre(t, it, name, e)) return -1;
        return 0;
    }
    if (t->n_pre == TJ_MAX_STEPS) return fail(e, name, "too many pre-tokenizers");
    PreStep *st = &t->pre[t->n_pre];
    memset(st, 0, sizeof *st);
    if (!strcmp(type, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const char *lit = pat ? jstr(pat, "String") : NULL, *rx = pat ? jstr(pat, "Regex") : NULL;
        if (!lit && !rx) return fail(e, name, "Split pre-tokenizer without a pattern");
        if (parse_behavior(jstr(p, "behavior"), &st->behavior))
            return av_err(e, "%s: Split behavior \"%.40s\" is not supported", name, jstr(p, "behavior") ? jstr(p, "behavior") : "");
        st->kind = P_SPLIT;
        st->invert = jbool(p, "invert", 0);
        st->re = rx ? compile(rx, strlen(rx), name, "Split pre-tokenizer", e) : compile_literal(lit, name, "Split pre-tokenizer", e);
        if (!st->re) return -1;
    } else if (!strcmp(type, "ByteLevel")) {
        st->kind = P_BYTELEVEL;
        st->add_prefix_space = jbool(p, "add_prefix_space", 1);
        st->use_regex = jbool(p, "use_regex", 1);
        if (st->use_regex && !(st->re = compile(GPT2_PATTERN, strlen(GPT2_PATTERN), name, "ByteLevel", e))) return -1;
        t->byte_level = 1;
    } else if (!strcmp(type, "Metaspace")) {
        const char *r = jstr(p, "replacement"), *scheme = jstr(p, "prepend_scheme");
        st->kind = P_METASPACE;
        snprintf(st->repl, sizeof st->repl, "%s", r ? r : "\xe2\x96\x81");
        st->prepend = scheme ? (!strcmp(scheme, "always") ? 2 : !strcmp(scheme, "first") ? 1 : 0)
                             : (jbool(p, "add_prefix_space", 1) ? 2 : 0);
        st->split = jbool(p, "split", 1);
    } else if (!strcmp(type, "Digits")) {
        st->kind = P_DIGITS;
        st->individual = jbool(p, "individual_digits", 0);
    } else if (!strcmp(type, "Punctuation")) {
        st->kind = P_PUNCT;
    } else if (!strcmp(type, "Whitespace")) {
        st->kind = P_WHITESPACE;
        st->behavior = B_REMOVED, st->invert = 1; /* keep \w+ and [^\w\s]+ runs */
        static const char ws[] = "\\w+|[^\\w\\s]+";
        if (!(st->re = compile(ws, sizeof ws - 1, name, "Whitespace", e))) return -1;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        st->kind = P_WSSPLIT;
        st->behavior = B_REMOVED;
        static const char wss[] = "\\s+";
        if (!(st->re = compile(wss, sizeof wss - 1, name, "WhitespaceSplit", e))) return -1;
    } else {
        return av_err(e, "%s: pre-tokenizer \"%.40s\" is not supported", name, type);
    }
    t->n_pre++;
    return 0;
}

static int special_ids(const TjTokenizer *t, const cJSON *pp, const char *key, int *out, const char *name, AvErr *e) {
    /* the TemplateProcessing "special_tokens" map, else the token spelled key */
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    const cJSON *ent = map ? cJSON_GetObjectItemCaseSensitive(map, key) : NULL;
    const cJSON *ids = ent ? cJSON_GetObjectItemCaseSensitive(ent, "ids") : NULL;
    if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 1 && cJSON_IsNumber(cJSON_GetArrayItem(ids, 0))) {
        *out = cJSON_GetArrayItem(ids, 0)->valueint;
        if (*out < 0 || *out >= t->n) return av_err(e, "%s: special token \"%.40s\" has an id out of range", name, key);
        return 0;
    }
    *out = tj_token_to_id(t, key, strlen(key));
    return *out < 0 ? av_err(e, "%s: the template's token \"%.40s\" is not in the vocabulary", name, key) : 0;
}

static int parse_template_list(TjTokenizer *t, const cJSON *pp, const cJSON *list, TjItem *items, int max, int *n,
                               const char *name, AvErr *e) {
    const cJSON *it;
    *n = 0;
    cJSON_ArrayForEach(it, list) {
        if (*n == max) return fail(e, name, "template too long");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken"), *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *o = sp ? sp : sq;
        const char *id = o ? jstr(o, "id") : NULL;
        const cJSON *ty = o ? cJSON_GetObjectItemCaseSensitive(o, "type_id") : NULL;
        if (!id) return fail(e, name, "template item without an id");
        TjItem *x = &items[(*n)++];
        x->type_id = cJSON_IsNumber(ty) ? ty->valueint : 0;
        if (sq) {
            if (strcmp(id, "A") && strcmp(id, "B")) return fail(e, name, "template sequence must be A or B");
            x->seq = id[0] == 'B', x->id = -1;
        } else {
            x->seq = -1;
            if (special_ids(t, pp, id, &x->id, name, e)) return -1;
        }
    }
    return 0;
}

static int parse_post(TjTokenizer *t, const cJSON *pp, const char *name, AvErr *e) {
    /* default: A alone, A B for pairs (B with type 1 as the Rust library gives it) */
    t->single[0] = (TjItem){0, -1, 0}, t->n_single = 1;
    t->pair[0] = (TjItem){0, -1, 0}, t->pair[1] = (TjItem){1, -1, 1}, t->n_pair = 2;
    if (!pp || cJSON_IsNull(pp)) return 0;
    const char *type = jstr(pp, "type");
    if (!type) return fail(e, name, "post-processor without a type");
    if (!strcmp(type, "ByteLevel")) return 0;
    if (!strcmp(type, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
            if (parse_post(t, it, name, e)) return -1;
        return 0;
    }
    if (!strcmp(type, "TemplateProcessing"))
        return parse_template_list(t, pp, cJSON_GetObjectItemCaseSensitive(pp, "single"), t->single, TJ_MAX_TEMPLATE,
                                   &t->n_single, name, e) ||
               parse_template_list(t, pp, cJSON_GetObjectItemCaseSensitive(pp, "pair"), t->pair, 2 * TJ_MAX_TEMPLATE,
                                   &t->n_pair, name, e)
                   ? -1 : 0;
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        const cJSON *cid = cJSON_GetArrayItem(cls, 1), *sid = cJSON_GetArrayItem(sep, 1);
        if (!cJSON_IsNumber(cid) || !cJSON_IsNumber(sid)) return fail(e, name, "cls/sep of the post-processor");
        int c = cid->valueint, s = sid->valueint, roberta = type[0] == 'R';
        if (c < 0 || c >= t->n || s < 0 || s >= t->n) return fail(e, name, "cls/sep id out of range");
        t->single[0] = (TjItem){-1, c, 0}, t->single[1] = (TjItem){0, -1, 0}, t->single[2] = (TjItem){-1, s, 0};
        t->n_single = 3;
        int k = 0, tb = roberta ? 0 : 1;
        t->pair[k++] = (TjItem){-1, c, 0}, t->pair[k++] = (TjItem){0, -1, 0}, t->pair[k++] = (TjItem){-1, s, 0};
        if (roberta) t->pair[k++] = (TjItem){-1, s, 0};
        t->pair[k++] = (TjItem){1, -1, tb}, t->pair[k++] = (TjItem){-1, s, tb};
        t->n_pair = k;
        return 0;
    }
    return av_err(e, "%s: post-processor \"%.40s\" is not supported", name, type);
}

/* A person's reading of each token: byte-level spellings mapped back to
 * bytes, "▁" as a space, <0xNN> as its byte, when the result is valid UTF-8;
 * a word's last piece without its end_of_word_suffix (CLIP's "cat</w>": "cat"). */
static char *make_display(const TjTokenizer *t, const char *s, size_t n) {
    Str out = {0};
    int ok = 1;
    if (t->eow_len && n > t->eow_len && !memcmp(s + n - t->eow_len, t->eow, t->eow_len)) n -= t->eow_len;
    if (t->byte_level) {
        for (size_t i = 0; i < n && ok;) {
            int32_t c;
            utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
            int b = w > 0 ? bpe_cp_to_byte((uint32_t)c) : -1;
            if (b < 0) ok = 0;
            else {
                char ch = (char)b;
                if (str_add(&out, &ch, 1)) ok = 0;
            }
            i += w > 0 ? (size_t)w : 1;
        }
    } else if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
        unsigned v;
        ok = sscanf(s + 3, "%2x", &v) == 1 && v < 0x80;
        char ch = (char)v;
        if (ok && str_add(&out, &ch, 1)) ok = 0;
    } else {
        for (size_t i = 0; i < n && ok;) {
            if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) ok = !str_add(&out, " ", 1), i += 3;
            else ok = !str_add(&out, s + i, 1), i++;
        }
    }
    if (ok && out.p && memchr(out.p, '\0', out.n) == NULL &&
        utf8proc_decompose((const utf8proc_uint8_t *)out.p, (utf8proc_ssize_t)out.n, NULL, 0, 0) >= 0)
        return out.p;
    free(out.p);
    return strdup(s);
}

static int parse_added(TjTokenizer *t, const cJSON *list, const char *name, AvErr *e) {
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (!n) return 0;
    if (!(t->added = calloc((size_t)n, sizeof *t->added))) return av_err(e, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        const char *content = jstr(it, "content");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!content || !*content || !cJSON_IsNumber(id)) return fail(e, name, "an added token needs content and id");
        Added *a = &t->added[t->n_added++];
        a->len = strlen(content);
        if (!(a->s = strdup(content))) return av_err(e, "out of memory");
        a->id = id->valueint;
        a->special = jbool(it, "special", 0);
        a->lstrip = jbool(it, "lstrip", 0), a->rstrip = jbool(it, "rstrip", 0), a->single_word = jbool(it, "single_word", 0);
        if (set_token(t, a->id, a->s, a->len, name, e)) return -1;
        if (a->special) t->special[a->id] = 1;
    }
    return 0;
}

/* The Unigram model: vocab [[piece, score], ...] (ids by position), unk_id
 * (absent or null: none), byte_fallback; the pieces' trie for Viterbi. */
static int load_unigram(TjTokenizer *t, const cJSON *model, const cJSON *vocab, const char *name, AvErr *e) {
    const int nv = cJSON_GetArraySize(vocab);
    t->uni_n = nv;
    size_t total = 0, k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        const cJSON *p = cJSON_GetArrayItem(it, 0);
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsString(p) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(it, 1)))
            return av_err(e, "%s: Unigram vocab entry %zu is not [piece, score]", name, k);
        total += strlen(p->valuestring);
        k++;
    }
    if (total > INT32_MAX / 4) return av_err(e, "%s: the Unigram vocab spells %zu bytes (at most 2^29 are read)", name, total);
    AcString *pieces = malloc((size_t)nv * sizeof *pieces);
    if (!(t->score = malloc((size_t)nv * sizeof *t->score)) || !pieces) {
        free(pieces);
        return av_err(e, "out of memory");
    }
    double min = INFINITY;
    int id = 0;
    cJSON_ArrayForEach(it, vocab) {
        const char *p = cJSON_GetArrayItem(it, 0)->valuestring;
        double sc = cJSON_GetArrayItem(it, 1)->valuedouble;
        if (!isfinite(sc)) {
            free(pieces);
            return av_err(e, "%s: Unigram piece %d \"%.40s\" has a score that is not a finite number", name, id, p);
        }
        size_t len = strlen(p);
        if (set_token(t, id, p, len, name, e)) {
            free(pieces);
            return -1;
        }
        pieces[id] = (AcString){t->vocab.tok[id], len, id};
        t->score[id] = sc;
        if (sc < min) min = sc;
        id++;
    }
    /* a spelling twice: the last id, as the Rust library's map from spelling to id keeps it */
    const int built = ac_build(&t->uni, pieces, (size_t)nv, 0, 1);
    free(pieces);
    if (built) return av_err(e, "out of memory");
    t->unk_score = min - 10.0;
    t->unk = -1;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
    if (unk && !cJSON_IsNull(unk)) {
        if (!cJSON_IsNumber(unk) || unk->valuedouble < 0 || unk->valuedouble >= nv || unk->valuedouble != (double)unk->valueint)
            return av_err(e, "%s: the Unigram unk_id is not a piece's id (0 to %d)", name, nv - 1);
        t->unk = unk->valueint;
    }
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    return 0;
}

int tj_load_cjson(TjTokenizer **out, const cJSON *root, const char *name, AvErr *e) {
    *out = NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = model ? jstr(model, "type") : NULL;
    if (!cJSON_IsObject(model)) return fail(e, name, "no \"model\" object");
    if (!mtype && cJSON_GetObjectItemCaseSensitive(model, "merges")) mtype = "BPE"; /* older files: typed by their fields */
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!mtype && cJSON_IsArray(vocab)) mtype = "Unigram";
    const int uni = mtype && !strcmp(mtype, "Unigram");
    if (!mtype || (strcmp(mtype, "BPE") && !uni))
        return av_err(e, "%s: model type \"%.40s\" is not supported (attnviz reads BPE and Unigram tokenizer.json files)",
                      name, mtype ? mtype : "?");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (uni && !cJSON_IsArray(vocab)) return fail(e, name, "Unigram model needs a vocab list of [piece, score]");
    if (!uni && (!cJSON_IsObject(vocab) || (merges && !cJSON_IsArray(merges))))
        return fail(e, name, "BPE model needs a vocab object and a merges list");
    TjTokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return av_err(e, "out of memory");
    }
    t->unigram = uni;
    int max_id = -1;
    const cJSON *it;
    if (uni) {
        int nv = cJSON_GetArraySize(vocab);
        if (nv < 1 || nv > 16777216) {
            tj_free(t);
            return av_err(e, "%s: the Unigram vocab has %d pieces (1 to 2^24 are read)", name, nv);
        }
        max_id = nv - 1;
    } else {
        cJSON_ArrayForEach(it, vocab) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 16777216) {
                tj_free(t);
                return fail(e, name, "vocab ids must be integers in [0, 2^24]");
            }
            if (it->valueint > max_id) max_id = it->valueint;
        }
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (cJSON_IsNumber(id) && id->valuedouble >= 0 && id->valuedouble <= 16777216 && id->valueint > max_id)
            max_id = id->valueint;
    }
    t->n = max_id + 1;
    t->display = calloc((size_t)t->n + 1, sizeof *t->display);
    t->special = calloc((size_t)t->n + 1, 1);
    if (av_strtab_init(&t->vocab, t->n) != 0 || !t->display || !t->special) goto oom;
    if (uni) {
        if (load_unigram(t, model, vocab, name, e)) goto fail;
    } else {
    cJSON_ArrayForEach(it, vocab)
        if (set_token(t, it->valueint, it->string, strlen(it->string), name, e)) goto fail;
    t->unk = -1;
    const char *unk = jstr(model, "unk_token");
    if (unk) t->unk = tj_token_to_id(t, unk, strlen(unk));
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    t->ignore_merges = jbool(model, "ignore_merges", 0);
    /* a word's pieces after its first start with continuing_subword_prefix, its last ends with
     * end_of_word_suffix (CLIP: "", "</w>"); a merge's result drops the prefix of its right part */
    const char *csp = jstr(model, "continuing_subword_prefix"), *eow = jstr(model, "end_of_word_suffix");
    if ((csp && *csp && !(t->csp = strdup(csp))) || (eow && *eow && !(t->eow = strdup(eow)))) goto oom;
    t->csp_len = t->csp ? strlen(t->csp) : 0, t->eow_len = t->eow ? strlen(t->eow) : 0;
    /* merges: "a b" strings or [a, b] pairs; rank = position; result = the joined spelling */
    int nm = merges ? cJSON_GetArraySize(merges) : 0;
    size_t mcap = 16;
    while (mcap < (size_t)nm * 2 + 2) mcap *= 2;
    if (!(t->merges = malloc(mcap * sizeof *t->merges))) goto oom;
    for (size_t i = 0; i < mcap; i++) t->merges[i].rank = -1;
    t->mmask = mcap - 1;
    int rank = 0;
    Str joined = {0};
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t al, bl;
        char *sp = NULL;
        if (cJSON_IsString(it)) {
            sp = strchr(it->valuestring, ' ');
            if (!sp) {
                free(joined.p);
                av_err(e, "%s: merge %d \"%.40s\" is not \"a b\"", name, rank, it->valuestring);
                goto fail;
            }
            a = it->valuestring, al = (size_t)(sp - a), b = sp + 1, bl = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring, al = strlen(a);
            b = cJSON_GetArrayItem(it, 1)->valuestring, bl = strlen(b);
        } else {
            free(joined.p);
            av_err(e, "%s: merge %d is neither \"a b\" nor [a, b]", name, rank);
            goto fail;
        }
        int ia = tj_token_to_id(t, a, al), ib = tj_token_to_id(t, b, bl);
        joined.n = 0;
        const size_t cut = t->csp_len && bl >= t->csp_len && !memcmp(b, t->csp, t->csp_len) ? t->csp_len : 0;
        if (str_add(&joined, a, al) || str_add(&joined, b + cut, bl - cut)) {
            free(joined.p);
            goto oom;
        }
        int ir = tj_token_to_id(t, joined.p, joined.n);
        if (ia < 0 || ib < 0 || ir < 0) {
            av_err(e, "%s: merge %d (\"%.30s\" + \"%.30s\") names a token not in the vocabulary", name, rank, a, b);
            free(joined.p);
            goto fail;
        }
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        size_t s = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & t->mmask;
        while (t->merges[s].rank >= 0 && t->merges[s].key != key) s = (s + 1) & t->mmask;
        if (t->merges[s].rank < 0) t->merges[s] = (Merge){key, rank, ir}; /* the first of duplicate merges wins */
        rank++;
    }
    free(joined.p);
    }
    if (parse_added(t, added, name, e) || parse_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name, e) ||
        parse_pre(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), name, e) ||
        parse_post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), name, e))
        goto fail;
    if (index_added(t)) goto oom;
    for (int b = 0; b < 256; b++) {
        char buf[8];
        if (t->byte_level) {
            utf8proc_uint8_t u[4];
            utf8proc_ssize_t l = utf8proc_encode_char((int32_t)bpe_byte_to_cp((uint8_t)b), u);
            t->byte_tok[b] = tj_token_to_id(t, (const char *)u, (size_t)l);
        } else {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            t->byte_tok[b] = uni ? ac_find(&t->uni, buf, 6) : tj_token_to_id(t, buf, 6);
        }
    }
    for (int i = 0; i < t->n; i++)
        if (t->vocab.tok[i] && !(t->display[i] = make_display(t, t->vocab.tok[i], t->vocab.len[i]))) goto oom;
    *out = t;
    return 0;
oom:
    av_err(e, "out of memory reading %s", name);
fail:
    tj_free(t);
    return -1;
}

void tj_free(TjTokenizer *t) {
    if (!t) return;
    for (int i = 0; t->vocab.tok && i < t->n; i++) free((void *)t->vocab.tok[i]);
    for (int i = 0; t->display && i < t->n; i++) free(t->display[i]);
    av_strtab_free(&t->vocab);
    free(t->display), free(t->special);
    free(t->merges);
    free(t->csp), free(t->eow);
    free(t->score);
    ac_free(&t->uni);
    ac_free(&t->added_ac);
    for (int k = 0; k < t->n_norm; k++) {
        free(t->norm[k].pattern), free(t->norm[k].content);
        cm_free(t->norm[k].cm);
        if (t->norm[k].re) onig_free(t->norm[k].re);
    }
    for (int k = 0; k < t->n_pre; k++)
        if (t->pre[k].re) onig_free(t->pre[k].re);
    for (int k = 0; k < t->n_added; k++) free(t->added[k].s);
    free(t->added);
    free(t->name);
    free(t);
}

int tj_template(const TjTokenizer *t, int pair, const TjItem **items) {
    *items = pair ? t->pair : t->single;
    return pair ? t->n_pair : t->n_single;
}

int tj_vocab_size(const TjTokenizer *t) { return t->n; }
const char *tj_id_to_token(const TjTokenizer *t, int id) { return id >= 0 && id < t->n ? t->vocab.tok[id] : NULL; }
const char *tj_id_to_display(const TjTokenizer *t, int id) { return id >= 0 && id < t->n ? t->display[id] : NULL; }
int tj_is_special(const TjTokenizer *t, int id) { return id >= 0 && id < t->n && t->special[id]; }
int tj_byte_level(const TjTokenizer *t) { return t->byte_level; }
