/* jinja_eval.c — a parsed chat template rendered over its variables, with
 * Python's and jinja2's meaning: str() and repr() of values, int/float
 * arithmetic, equality and ordering, truthiness, jinja2's Undefined (printing
 * it is empty, reading into it fails), attribute and item lookup (a dict's
 * methods before its keys, as getattr does), loop scoping (a for body's
 * assignments last one iteration), macros that see the frame they were
 * defined in, and transformers' globals. Every value lives in one arena per
 * render, freed at its end; steps, memory, output and nesting are bounded. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "jinja.h"
#include "jinja_ast.h"
#include "util.h"

/* Evaluation recursion (expressions in statements in macros) stays below this,
 * whatever the template: a few hundred bytes of stack each. */
#define MAX_RECURSION 2000
/* The sandbox's bound on range() (jinja2's MAX_RANGE). */
#define MAX_RANGE 100000

void jinja_opts_default(JinjaOpts *o) {
    o->max_steps = 20000000;
    o->max_output = 32u << 20;
    o->max_memory = 512u << 20;
    o->max_calls = 64;
    o->now = 0;
}

/* ------------------------------------------------------------------ render state */

typedef struct Frame Frame;
struct Frame {
    Frame *parent;
    int captured; /* a macro defined here keeps it: a loop's next iteration takes a new frame */
    int n, cap;
    int *syms;
    JValue *vals;
};

struct JClosure {
    const JMacro *m;
    Frame *env;
};

typedef enum {
    M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_STARTSWITH, M_ENDSWITH, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_REPLACE, M_FIND, M_RFIND, M_COUNT, M_JOIN, M_SPLITLINES, M_ISDIGIT, M_ISALPHA, M_ISALNUM,
    M_ISSPACE, M_ISLOWER, M_ISUPPER, M_FORMAT, M_STR_N,
    M_ITEMS = M_STR_N, M_KEYS, M_VALUES, M_GET, M_DICT_N,
    M_LIST_INDEX = M_DICT_N, M_LIST_COUNT, M_LIST_N,
    M_CYCLE = M_LIST_N,
    M_MODIFY /* a method that changes its object: the sandbox refuses it */
} JMethodId;

struct JMethod {
    JValue self;
    int id;
    const char *name;
};

struct JLoop {
    JList *items;
    int i;
};

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

typedef struct {
    const JinjaTemplate *t;
    const JinjaOpts *o;
    AvErr *e;
    JArena a;
    long long steps;
    int calls, rec, loops, failed;
    Buf *out;
    JValue block; /* E_BLOCK's value */
    Frame *global;
    Frame *cur; /* the frame names are looked up from */
    time_t now;
} R;

static const JValue UNDEF = {0};

__attribute__((format(printf, 3, 4))) static int rerr(R *r, unsigned pos, const char *fmt, ...) {
    if (r->failed) return -1;
    char where[600], msg[420];
    jinja_where(r->t, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->failed = 1;
    return av_err(r->e, "%s: %.1000s", where, msg);
}

static int roomless(R *r) {
    if (r->failed) return -1;
    r->failed = 1;
    return av_err(r->e, "%s: rendering took more than %zu MB of memory", r->t->origin, r->o->max_memory >> 20);
}

static void *alloc(R *r, size_t n) {
    void *p = ja_alloc(&r->a, n);
    if (!p) roomless(r);
    return p;
}

/* Work is bounded: each node evaluated and each item walked is a step. */
static int step(R *r, long long n, unsigned pos) {
    r->steps += n;
    if (r->steps > r->o->max_steps)
        return rerr(r, pos, "rendering took more than %lld steps (a loop that does not end?)", r->o->max_steps);
    return 0;
}

/* ------------------------------------------------------------------ strings */

static JStr *str_alloc(R *r, size_t n) {
    if (n > r->o->max_memory) return roomless(r), NULL;
    JStr *s = alloc(r, sizeof(JStr) + n + 1);
    if (s) s->len = n;
    return s;
}

static JValue vstr(const JStr *s) {
    JValue v = {.t = V_STR};
    v.u.s = s;
    return v;
}

static int mkstr(R *r, const char *p, size_t n, JValue *out) {
    JStr *s = str_alloc(r, n);
    if (!s) return -1;
    memcpy(s->s, p, n);
    s->s[n] = '\0';
    *out = vstr(s);
    return 0;
}

static JValue vint(long long i) {
    JValue v = {.t = V_INT};
    v.u.i = i;
    return v;
}
static JValue vfloat(double f) {
    JValue v = {.t = V_FLOAT};
    v.u.f = f;
    return v;
}
static JValue vbool(int b) {
    JValue v = {.t = V_BOOL};
    v.u.i = b != 0;
    return v;
}
static JValue vnone(void) {
    JValue v = {.t = V_NONE};
    return v;
}

static JValue undef(R *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static JValue undef(R *r, const char *fmt, ...) {
    JValue v = {0};
    char buf[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    char *w = alloc(r, n + 1);
    if (w) memcpy(w, buf, n + 1);
    v.u.why = w;
    return v;
}

static int buf_put(R *r, Buf *b, const char *s, size_t n) {
    if (b->n + n > r->o->max_output)
        return rerr(r, 0, "the rendered text passed %zu MB (a template that writes without end?)", r->o->max_output >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = alloc(r, cap);
        if (!p) return -1;
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}
static int buf_puts(R *r, Buf *b, const char *s) { return buf_put(r, b, s, strlen(s)); }

static int buf_value(R *r, Buf *b, JValue *out) { return mkstr(r, b->n ? b->p : "", b->n, out); }

/* ---- UTF-8 ---- */

static int cp_at(const char *s, size_t n, size_t i, unsigned *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
    if (k <= 0) {
        *cp = (unsigned char)s[i];
        return 1;
    }
    *cp = (unsigned)c;
    return (int)k;
}

static size_t cp_count(const JStr *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++) n += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return n;
}

/* Byte offset of code point k (k <= count). */
static size_t cp_offset(const JStr *s, size_t k) {
    size_t i = 0;
    for (; i < s->len && k > 0; k--) {
        i++;
        while (i < s->len && ((unsigned char)s->s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

static int put_cp(R *r, Buf *b, unsigned cp) {
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, u);
    return buf_put(r, b, (const char *)u, (size_t)k);
}

static int is_space(unsigned cp) {
    return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* Python's str.upper()/title() give several characters for these (Unicode's SpecialCasing.txt:
 * what Python 3.11's str.upper() and str.title() return for each code point that maps to more than one). */
static const uint32_t FULL_UPPER[][4] = {
    {0xDF, 0x53, 0x53, 0x0}, {0x149, 0x2BC, 0x4E, 0x0}, {0x1F0, 0x4A, 0x30C, 0x0},
    {0x390, 0x399, 0x308, 0x301}, {0x3B0, 0x3A5, 0x308, 0x301}, {0x587, 0x535, 0x552, 0x0},
    {0x1E96, 0x48, 0x331, 0x0}, {0x1E97, 0x54, 0x308, 0x0}, {0x1E98, 0x57, 0x30A, 0x0},
    {0x1E99, 0x59, 0x30A, 0x0}, {0x1E9A, 0x41, 0x2BE, 0x0}, {0x1F50, 0x3A5, 0x313, 0x0},
    {0x1F52, 0x3A5, 0x313, 0x300}, {0x1F54, 0x3A5, 0x313, 0x301}, {0x1F56, 0x3A5, 0x313, 0x342},
    {0x1F80, 0x1F08, 0x399, 0x0}, {0x1F81, 0x1F09, 0x399, 0x0}, {0x1F82, 0x1F0A, 0x399, 0x0},
    {0x1F83, 0x1F0B, 0x399, 0x0}, {0x1F84, 0x1F0C, 0x399, 0x0}, {0x1F85, 0x1F0D, 0x399, 0x0},
    {0x1F86, 0x1F0E, 0x399, 0x0}, {0x1F87, 0x1F0F, 0x399, 0x0}, {0x1F88, 0x1F08, 0x399, 0x0},
    {0x1F89, 0x1F09, 0x399, 0x0}, {0x1F8A, 0x1F0A, 0x399, 0x0}, {0x1F8B, 0x1F0B, 0x399, 0x0},
    {0x1F8C, 0x1F0C, 0x399, 0x0}, {0x1F8D, 0x1F0D, 0x399, 0x0}, {0x1F8E, 0x1F0E, 0x399, 0x0},
    {0x1F8F, 0x1F0F, 0x399, 0x0}, {0x1F90, 0x1F28, 0x399, 0x0}, {0x1F91, 0x1F29, 0x399, 0x0},
    {0x1F92, 0x1F2A, 0x399, 0x0}, {0x1F93, 0x1F2B, 0x399, 0x0}, {0x1F94, 0x1F2C, 0x399, 0x0},
    {0x1F95, 0x1F2D, 0x399, 0x0}, {0x1F96, 0x1F2E, 0x399, 0x0}, {0x1F97, 0x1F2F, 0x399, 0x0},
    {0x1F98, 0x1F28, 0x399, 0x0}, {0x1F99, 0x1F29, 0x399, 0x0}, {0x1F9A, 0x1F2A, 0x399, 0x0},
    {0x1F9B, 0x1F2B, 0x399, 0x0}, {0x1F9C, 0x1F2C, 0x399, 0x0}, {0x1F9D, 0x1F2D, 0x399, 0x0},
    {0x1F9E, 0x1F2E, 0x399, 0x0}, {0x1F9F, 0x1F2F, 0x399, 0x0}, {0x1FA0, 0x1F68, 0x399, 0x0},
    {0x1FA1, 0x1F69, 0x399, 0x0}, {0x1FA2, 0x1F6A, 0x399, 0x0}, {0x1FA3, 0x1F6B, 0x399, 0x0},
    {0x1FA4, 0x1F6C, 0x399, 0x0}, {0x1FA5, 0x1F6D, 0x399, 0x0}, {0x1FA6, 0x1F6E, 0x399, 0x0},
    {0x1FA7, 0x1F6F, 0x399, 0x0}, {0x1FA8, 0x1F68, 0x399, 0x0}, {0x1FA9, 0x1F69, 0x399, 0x0},
    {0x1FAA, 0x1F6A, 0x399, 0x0}, {0x1FAB, 0x1F6B, 0x399, 0x0}, {0x1FAC, 0x1F6C, 0x399, 0x0},
    {0x1FAD, 0x1F6D, 0x399, 0x0}, {0x1FAE, 0x1F6E, 0x399, 0x0}, {0x1FAF, 0x1F6F, 0x399, 0x0},
    {0x1FB2, 0x1FBA, 0x399, 0x0}, {0x1FB3, 0x391, 0x399, 0x0}, {0x1FB4, 0x386, 0x399, 0x0},
    {0x1FB6, 0x391, 0x342, 0x0}, {0x1FB7, 0x391, 0x342, 0x399}, {0x1FBC, 0x391, 0x399, 0x0},
    {0x1FC2, 0x1FCA, 0x399, 0x0}, {0x1FC3, 0x397, 0x399, 0x0}, {0x1FC4, 0x389, 0x399, 0x0},
    {0x1FC6, 0x397, 0x342, 0x0}, {0x1FC7, 0x397, 0x342, 0x399}, {0x1FCC, 0x397, 0x399, 0x0},
    {0x1FD2, 0x399, 0x308, 0x300}, {0x1FD3, 0x399, 0x308, 0x301}, {0x1FD6, 0x399, 0x342, 0x0},
    {0x1FD7, 0x399, 0x308, 0x342}, {0x1FE2, 0x3A5, 0x308, 0x300}, {0x1FE3, 0x3A5, 0x308, 0x301},
    {0x1FE4, 0x3A1, 0x313, 0x0}, {0x1FE6, 0x3A5, 0x342, 0x0}, {0x1FE7, 0x3A5, 0x308, 0x342},
    {0x1FF2, 0x1FFA, 0x399, 0x0}, {0x1FF3, 0x3A9, 0x399, 0x0}, {0x1FF4, 0x38F, 0x399, 0x0},
    {0x1FF6, 0x3A9, 0x342, 0x0}, {0x1FF7, 0x3A9, 0x342, 0x399}, {0x1FFC, 0x3A9, 0x399, 0x0},
    {0xFB00, 0x46, 0x46, 0x0}, {0xFB01, 0x46, 0x49, 0x0}, {0xFB02, 0x46, 0x4C, 0x0},
    {0xFB03, 0x46, 0x46, 0x49}, {0xFB04, 0x46, 0x46, 0x4C}, {0xFB05, 0x53, 0x54, 0x0},
    {0xFB06, 0x53, 0x54, 0x0}, {0xFB13, 0x544, 0x546, 0x0}, {0xFB14, 0x544, 0x535, 0x0},
    {0xFB15, 0x544, 0x53B, 0x0}, {0xFB16, 0x54E, 0x546, 0x0}, {0xFB17, 0x544, 0x53D, 0x0},
};
static const uint32_t FULL_TITLE[][4] = {
    {0xDF, 0x53, 0x73, 0x0}, {0x149, 0x2BC, 0x4E, 0x0}, {0x1F0, 0x4A, 0x30C, 0x0},
    {0x390, 0x399, 0x308, 0x301}, {0x3B0, 0x3A5, 0x308, 0x301}, {0x587, 0x535, 0x582, 0x0},
    {0x1E96, 0x48, 0x331, 0x0}, {0x1E97, 0x54, 0x308, 0x0}, {0x1E98, 0x57, 0x30A, 0x0},
    {0x1E99, 0x59, 0x30A, 0x0}, {0x1E9A, 0x41, 0x2BE, 0x0}, {0x1F50, 0x3A5, 0x313, 0x0},
    {0x1F52, 0x3A5, 0x313, 0x300}, {0x1F54, 0x3A5, 0x313, 0x301}, {0x1F56, 0x3A5, 0x313, 0x342},
    {0x1FB2, 0x1FBA, 0x345, 0x0}, {0x1FB4, 0x386, 0x345, 0x0}, {0x1FB6, 0x391, 0x342, 0x0},
    {0x1FB7, 0x391, 0x342, 0x345}, {0x1FC2, 0x1FCA, 0x345, 0x0}, {0x1FC4, 0x389, 0x345, 0x0},
    {0x1FC6, 0x397, 0x342, 0x0}, {0x1FC7, 0x397, 0x342, 0x345}, {0x1FD2, 0x399, 0x308, 0x300},
    {0x1FD3, 0x399, 0x308, 0x301}, {0x1FD6, 0x399, 0x342, 0x0}, {0x1FD7, 0x399, 0x308, 0x342},
    {0x1FE2, 0x3A5, 0x308, 0x300}, {0x1FE3, 0x3A5, 0x308, 0x301}, {0x1FE4, 0x3A1, 0x313, 0x0},
    {0x1FE6, 0x3A5, 0x342, 0x0}, {0x1FE7, 0x3A5, 0x308, 0x342}, {0x1FF2, 0x1FFA, 0x345, 0x0},
    {0x1FF4, 0x38F, 0x345, 0x0}, {0x1FF6, 0x3A9, 0x342, 0x0}, {0x1FF7, 0x3A9, 0x342, 0x345},
    {0xFB00, 0x46, 0x66, 0x0}, {0xFB01, 0x46, 0x69, 0x0}, {0xFB02, 0x46, 0x6C, 0x0},
    {0xFB03, 0x46, 0x66, 0x69}, {0xFB04, 0x46, 0x66, 0x6C}, {0xFB05, 0x53, 0x74, 0x0},
    {0xFB06, 0x53, 0x74, 0x0}, {0xFB13, 0x544, 0x576, 0x0}, {0xFB14, 0x544, 0x565, 0x0},
    {0xFB15, 0x544, 0x56B, 0x0}, {0xFB16, 0x54E, 0x576, 0x0}, {0xFB17, 0x544, 0x56D, 0x0},
};

static int is_cased(unsigned cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           utf8proc_toupper((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp ||
           utf8proc_tolower((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp;
}

static int case_ignorable(unsigned cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_ME || c == UTF8PROC_CATEGORY_CF ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_SK || cp == '\'' || cp == '.' || cp == ':' ||
           cp == 0xB7 || cp == 0x2019;
}

static const uint32_t *full_map(const uint32_t (*tab)[4], size_t n, unsigned cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tab[mid][0] == cp) return tab[mid] + 1;
        if (tab[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

typedef enum { CASE_UPPER, CASE_LOWER, CASE_TITLE } CaseKind;

static int put_case(R *r, Buf *b, unsigned cp, CaseKind k, const char *s, size_t n, size_t at, size_t next) {
    if (k == CASE_LOWER) {
        if (cp == 0x130) return put_cp(r, b, 'i') || put_cp(r, b, 0x307);
        if (cp == 0x3A3) { /* final sigma: after a cased letter, not before one */
            int before = 0, after = 0;
            for (size_t j = at; j > 0;) {
                size_t st = j - 1;
                while (st > 0 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
                unsigned c2;
                cp_at(s, n, st, &c2);
                j = st;
                if (case_ignorable(c2)) continue;
                before = is_cased(c2);
                break;
            }
            for (size_t j = next; j < n;) {
                unsigned c2;
                j += (size_t)cp_at(s, n, j, &c2);
                if (case_ignorable(c2)) continue;
                after = is_cased(c2);
                break;
            }
            return put_cp(r, b, before && !after ? 0x3C2 : 0x3C3);
        }
        return put_cp(r, b, (unsigned)utf8proc_tolower((utf8proc_int32_t)cp));
    }
    const uint32_t *m = k == CASE_UPPER ? full_map(FULL_UPPER, sizeof FULL_UPPER / sizeof FULL_UPPER[0], cp)
                                        : full_map(FULL_TITLE, sizeof FULL_TITLE / sizeof FULL_TITLE[0], cp);
    if (m) {
        for (int j = 0; j < 3 && m[j]; j++)
            if (put_cp(r, b, m[j]) != 0) return -1;
        return 0;
    }
    return put_cp(r, b, (unsigned)(k == CASE_UPPER ? utf8proc_toupper((utf8proc_int32_t)cp)
                                                   : utf8proc_totitle((utf8proc_int32_t)cp)));
}

/* mode 0 upper, 1 lower, 2 Python's capitalize(), 3 Python's title(), 4 jinja2's |title */
static int str_case(R *r, const JStr *s, int mode, JValue *out) {
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0) return -1;
    int prev_cased = 0, first = 1, word_start = 1;
    for (size_t i = 0; i < s->len;) {
        unsigned cp;
        size_t at = i;
        i += (size_t)cp_at(s->s, s->len, i, &cp);
        CaseKind k;
        if (mode == 0) k = CASE_UPPER;
        else if (mode == 1) k = CASE_LOWER;
        else if (mode == 2) k = first ? CASE_TITLE : CASE_LOWER;
        else if (mode == 3) {
            int cased = is_cased(cp);
            k = cased ? (prev_cased ? CASE_LOWER : CASE_TITLE) : CASE_LOWER;
            if (!cased) {
                if (put_cp(r, &b, cp) != 0) return -1;
                prev_cased = 0;
                continue;
            }
            prev_cased = 1;
        } else {
            /* jinja2: split at runs of "-", whitespace, "(", "{", "[", "<"; each piece's first character upper */
            int sep = cp == '-' || is_space(cp) || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            if (sep) {
                if (put_cp(r, &b, cp) != 0) return -1;
                word_start = 1;
                continue;
            }
            k = word_start ? CASE_UPPER : CASE_LOWER;
            word_start = 0;
        }
        first = 0;
        if (put_case(r, &b, cp, k, s->s, s->len, at, i) != 0) return -1;
    }
    return buf_value(r, &b, out);
}

/* ------------------------------------------------------------------ lists and dicts */

static JList *list_new(R *r, int cap) {
    JList *l = alloc(r, sizeof *l);
    if (!l) return NULL;
    if (cap > 0 && !(l->v = alloc(r, (size_t)cap * sizeof *l->v))) return NULL;
    l->cap = cap;
    return l;
}

static int list_push(R *r, JList *l, JValue v) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        JValue *nv = alloc(r, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv, l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

static JValue vlist(JList *l, int tuple) {
    JValue v = {.t = V_LIST, .tuple = (unsigned char)tuple};
    v.u.l = l;
    return v;
}

static JDict *dict_new(R *r) { return alloc(r, sizeof(JDict)); }

static int value_eq(R *r, JValue a, JValue b, int *eq, unsigned pos);

static int dict_find(R *r, const JDict *d, JValue k, unsigned pos) {
    if (step(r, 1 + d->n / 16, pos) != 0) return -2;
    for (int i = 0; i < d->n; i++) {
        if (k.t == V_STR && d->k[i].t == V_STR) {
            if (k.u.s->len == d->k[i].u.s->len && !memcmp(k.u.s->s, d->k[i].u.s->s, k.u.s->len)) return i;
            continue;
        }
        int eq;
        if (value_eq(r, k, d->k[i], &eq, pos) != 0) return -2;
        if (eq) return i;
    }
    return -1;
}

static int dict_set(R *r, JDict *d, JValue k, JValue v, unsigned pos) {
    int i = dict_find(r, d, k, pos);
    if (i == -2) return -1;
    if (i >= 0) {
        d->v[i] = v;
        return 0;
    }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 4;
        JValue *nk = alloc(r, (size_t)cap * sizeof *nk), *nv = alloc(r, (size_t)cap * sizeof *nv);
        if (!nk || !nv) return -1;
        if (d->n) {
            memcpy(nk, d->k, (size_t)d->n * sizeof *nk);
            memcpy(nv, d->v, (size_t)d->n * sizeof *nv);
        }
        d->k = nk, d->v = nv, d->cap = cap;
    }
    d->k[d->n] = k, d->v[d->n] = v, d->n++;
    return 0;
}

static JDict *dict_copy(R *r, const JDict *s) {
    JDict *d = dict_new(r);
    if (!d) return NULL;
    if (s->n) {
        if (!(d->k = alloc(r, (size_t)s->n * sizeof *d->k)) || !(d->v = alloc(r, (size_t)s->n * sizeof *d->v))) return NULL;
        memcpy(d->k, s->k, (size_t)s->n * sizeof *d->k);
        memcpy(d->v, s->v, (size_t)s->n * sizeof *d->v);
    }
    d->n = d->cap = s->n;
    return d;
}

static JValue vdict(JDict *d, int ns) {
    JValue v = {.t = (unsigned char)(ns ? V_NS : V_DICT)};
    v.u.d = d;
    return v;
}

/* ------------------------------------------------------------------ str() and repr() */

static const char *type_name(JValue v) {
    switch (v.t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return v.tuple ? "tuple" : "list";
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_MACRO: return "Macro";
    case V_FUNC: return "function";
    case V_METHOD: return "method";
    default: return "LoopContext";
    }
}

/* Python's repr(float): the shortest digits that read back, in fixed notation
 * for exponents from -4 to 15, else d.ddde+XX. */
static void fmt_float(double f, char *out, size_t len) {
    if (isnan(f)) {
        snprintf(out, len, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, len, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *p = e + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp < -4 || exp >= 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, len - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        out[k++] = '0', out[k++] = '.';
        for (int i = -1; i > exp; i--) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = digits[i];
    } else {
        for (int i = 0; i <= exp; i++) out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > exp + 1)
            for (int i = exp + 1; i < nd; i++) out[k++] = digits[i];
        else
            out[k++] = '0';
    }
    out[k] = '\0';
}

static int to_str(R *r, Buf *b, JValue v, unsigned pos);

/* Python's repr() of a string: single quotes unless it has one and no double quote. */
static int repr_str(R *r, Buf *b, const JStr *s) {
    char q = memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len) ? '"' : '\'';
    if (buf_put(r, b, &q, 1) != 0) return -1;
    for (size_t i = 0; i < s->len;) {
        unsigned cp;
        int k = cp_at(s->s, s->len, i, &cp);
        char esc[16] = "";
        if (cp == (unsigned char)q || cp == '\\') snprintf(esc, sizeof esc, "\\%c", (char)cp);
        else if (cp == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (cp == '\r') snprintf(esc, sizeof esc, "\\r");
        else if (cp == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (cp < 0x20 || cp == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", cp);
        else if (cp >= 0x80) {
            /* Python escapes what str.isprintable() refuses: other (C*), separators (Z*) but space */
            utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
            if (c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
                c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZL ||
                c == UTF8PROC_CATEGORY_ZP || c == UTF8PROC_CATEGORY_ZS)
                snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
        }
        if (esc[0] ? buf_puts(r, b, esc) : buf_put(r, b, s->s + i, (size_t)k)) return -1;
        i += (size_t)k;
    }
    return buf_put(r, b, &q, 1);
}

static int repr(R *r, Buf *b, JValue v, unsigned pos) {
    if (++r->rec > MAX_RECURSION) return rerr(r, pos, "values nested deeper than %d", MAX_RECURSION);
    int rc = 0;
    switch (v.t) {
    case V_STR: rc = repr_str(r, b, v.u.s); break;
    case V_UNDEF: rc = buf_puts(r, b, "Undefined"); break;
    case V_LIST: {
        rc = buf_puts(r, b, v.tuple ? "(" : "[");
        for (int i = 0; rc == 0 && i < v.u.l->n; i++) {
            if (i && buf_puts(r, b, ", ") != 0) return -1;
            rc = step(r, 1, pos) || repr(r, b, v.u.l->v[i], pos);
        }
        if (rc == 0) rc = buf_puts(r, b, v.tuple && v.u.l->n == 1 ? ",)" : v.tuple ? ")" : "]");
        break;
    }
    case V_DICT: case V_NS: {
        rc = buf_puts(r, b, v.t == V_NS ? "<Namespace {" : "{");
        for (int i = 0; rc == 0 && i < v.u.d->n; i++) {
            if (i && buf_puts(r, b, ", ") != 0) return -1;
            rc = step(r, 1, pos) || repr(r, b, v.u.d->k[i], pos) || buf_puts(r, b, ": ") ||
                 repr(r, b, v.u.d->v[i], pos);
        }
        if (rc == 0) rc = buf_puts(r, b, v.t == V_NS ? "}>" : "}");
        break;
    }
    default: rc = to_str(r, b, v, pos);
    }
    r->rec--;
    return rc ? -1 : 0;
}

/* str(v) appended to b: what {{ v }} and ~ write. */
static int to_str(R *r, Buf *b, JValue v, unsigned pos) {
    char tmp[64];
    switch (v.t) {
    case V_UNDEF: return 0;
    case V_NONE: return buf_puts(r, b, "None");
    case V_BOOL: return buf_puts(r, b, v.u.i ? "True" : "False");
    case V_INT: snprintf(tmp, sizeof tmp, "%lld", v.u.i); return buf_puts(r, b, tmp);
    case V_FLOAT: fmt_float(v.u.f, tmp, sizeof tmp); return buf_puts(r, b, tmp);
    case V_STR: return buf_put(r, b, v.u.s->s, v.u.s->len);
    case V_LIST: case V_DICT: case V_NS: return repr(r, b, v, pos);
    default: return rerr(r, pos, "unsupported Jinja construct: printing a %s", type_name(v));
    }
}

static int str_of(R *r, JValue v, unsigned pos, const JStr **out) {
    if (v.t == V_STR) {
        *out = v.u.s;
        return 0;
    }
    Buf b = {0};
    JValue s;
    if (buf_put(r, &b, "", 0) != 0 || to_str(r, &b, v, pos) != 0 || buf_value(r, &b, &s) != 0) return -1;
    *out = s.u.s;
    return 0;
}

/* ------------------------------------------------------------------ truth, equality, order */

static int truthy(JValue v) {
    switch (v.t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0;
    case V_STR: return v.u.s->len != 0;
    case V_LIST: return v.u.l->n != 0;
    case V_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static int is_num(JValue v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static double num(JValue v) { return v.t == V_FLOAT ? v.u.f : (double)v.u.i; }

static int value_eq(R *r, JValue a, JValue b, int *eq, unsigned pos) {
    if (++r->rec > MAX_RECURSION) return rerr(r, pos, "values nested deeper than %d", MAX_RECURSION);
    int rc = 0;
    *eq = 0;
    if (is_num(a) && is_num(b)) {
        *eq = a.t != V_FLOAT && b.t != V_FLOAT ? a.u.i == b.u.i : num(a) == num(b);
    } else if (a.t != b.t) {
        *eq = 0;
    } else {
        switch (a.t) {
        case V_UNDEF: case V_NONE: *eq = 1; break;
        case V_STR: *eq = a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len); break;
        case V_LIST:
            *eq = a.tuple == b.tuple && a.u.l->n == b.u.l->n;
            for (int i = 0; *eq && i < a.u.l->n && rc == 0; i++)
                rc = step(r, 1, pos) || value_eq(r, a.u.l->v[i], b.u.l->v[i], eq, pos);
            break;
        case V_DICT: case V_NS:
            *eq = a.u.d->n == b.u.d->n;
            for (int i = 0; *eq && i < a.u.d->n && rc == 0; i++) {
                int j = dict_find(r, b.u.d, a.u.d->k[i], pos);
                if (j == -2) rc = -1;
                else if (j < 0) *eq = 0;
                else rc = value_eq(r, a.u.d->v[i], b.u.d->v[j], eq, pos);
            }
            break;
        case V_MACRO: *eq = a.u.m == b.u.m; break;
        case V_FUNC: *eq = a.fn == b.fn; break;
        default: *eq = 0;
        }
    }
    r->rec--;
    return rc ? -1 : 0;
}

/* Python's ordering: numbers with numbers, strings with strings, lists and tuples item by item. */
static int value_cmp(R *r, JValue a, JValue b, int *c, unsigned pos) {
    if (++r->rec > MAX_RECURSION) return rerr(r, pos, "values nested deeper than %d", MAX_RECURSION);
    int rc = 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) *c = (a.u.i > b.u.i) - (a.u.i < b.u.i);
        else if (isnan(num(a)) || isnan(num(b))) *c = 2; /* unordered: every comparison false */
        else *c = (num(a) > num(b)) - (num(a) < num(b));
    } else if (a.t == V_STR && b.t == V_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int m = memcmp(a.u.s->s, b.u.s->s, n);
        *c = m ? (m > 0) - (m < 0) : (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    } else if (a.t == V_LIST && b.t == V_LIST && a.tuple == b.tuple) {
        int i, decided = 0;
        for (i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            int eq;
            if (step(r, 1, pos) || value_eq(r, a.u.l->v[i], b.u.l->v[i], &eq, pos)) {
                rc = -1;
                break;
            }
            if (!eq) {
                rc = value_cmp(r, a.u.l->v[i], b.u.l->v[i], c, pos);
                decided = 1;
                break;
            }
        }
        if (rc == 0 && !decided) *c = (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    } else {
        rc = rerr(r, pos, "'<' not supported between instances of '%s' and '%s'", type_name(a), type_name(b));
    }
    r->rec--;
    return rc;
}

/* ------------------------------------------------------------------ iteration */

/* What a for loop or a filter walks: a list's items, a dict's keys, a string's characters. */
static int iterate(R *r, JValue v, unsigned pos, JList **out) {
    switch (v.t) {
    case V_LIST: *out = v.u.l; return 0;
    case V_UNDEF: return (*out = list_new(r, 0)) ? 0 : -1;
    case V_DICT: {
        JList *l = list_new(r, v.u.d->n);
        if (!l) return -1;
        memcpy(l->v, v.u.d->k, (size_t)v.u.d->n * sizeof *l->v);
        l->n = v.u.d->n;
        *out = l;
        return step(r, v.u.d->n, pos);
    }
    case V_STR: {
        JList *l = list_new(r, (int)cp_count(v.u.s));
        if (!l) return -1;
        for (size_t i = 0; i < v.u.s->len;) {
            unsigned cp;
            int k = cp_at(v.u.s->s, v.u.s->len, i, &cp);
            JValue c;
            if (mkstr(r, v.u.s->s + i, (size_t)k, &c) != 0 || list_push(r, l, c) != 0) return -1;
            i += (size_t)k;
        }
        *out = l;
        return step(r, l->n, pos);
    }
    default: return rerr(r, pos, "'%s' object is not iterable", type_name(v));
    }
}

/* ------------------------------------------------------------------ frames */

static Frame *frame_new(R *r, Frame *parent) {
    Frame *f = alloc(r, sizeof *f);
    if (f) f->parent = parent;
    return f;
}

static int frame_set(R *r, Frame *f, int sym, JValue v) {
    for (int i = 0; i < f->n; i++)
        if (f->syms[i] == sym) {
            f->vals[i] = v;
            return 0;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 4;
        int *ns = alloc(r, (size_t)cap * sizeof *ns);
        JValue *nv = alloc(r, (size_t)cap * sizeof *nv);
        if (!ns || !nv) return -1;
        if (f->n) {
            memcpy(ns, f->syms, (size_t)f->n * sizeof *ns);
            memcpy(nv, f->vals, (size_t)f->n * sizeof *nv);
        }
        f->syms = ns, f->vals = nv, f->cap = cap;
    }
    f->syms[f->n] = sym, f->vals[f->n] = v, f->n++;
    return 0;
}

static int frame_get(const Frame *f, int sym, JValue *v) {
    for (; f; f = f->parent)
        for (int i = f->n - 1; i >= 0; i--)
            if (f->syms[i] == sym) {
                *v = f->vals[i];
                return 1;
            }
    return 0;
}

/* ------------------------------------------------------------------ attributes and items */

static JValue method(R *r, JValue self, int id, const char *name) {
    JMethod *m = alloc(r, sizeof *m);
    JValue v = {.t = V_METHOD};
    if (!m) return UNDEF;
    m->self = self, m->id = id, m->name = name;
    v.u.me = m;
    return v;
}

static int method_id(JValue obj, const char *a) {
    static const char *const STR_M[M_STR_N] = {
        [M_STRIP] = "strip", [M_LSTRIP] = "lstrip", [M_RSTRIP] = "rstrip", [M_SPLIT] = "split",
        [M_RSPLIT] = "rsplit", [M_STARTSWITH] = "startswith", [M_ENDSWITH] = "endswith", [M_UPPER] = "upper",
        [M_LOWER] = "lower", [M_TITLE] = "title", [M_CAPITALIZE] = "capitalize", [M_REPLACE] = "replace",
        [M_FIND] = "find", [M_RFIND] = "rfind", [M_COUNT] = "count", [M_JOIN] = "join",
        [M_SPLITLINES] = "splitlines", [M_ISDIGIT] = "isdigit", [M_ISALPHA] = "isalpha", [M_ISALNUM] = "isalnum",
        [M_ISSPACE] = "isspace", [M_ISLOWER] = "islower", [M_ISUPPER] = "isupper", [M_FORMAT] = "format"};
    static const char *const STR_OTHER[] = {"format_map", "encode", "center", "ljust", "rjust", "zfill",
                                            "partition", "rpartition", "index", "rindex", "expandtabs", "casefold",
                                            "swapcase", "translate", "maketrans", "removeprefix", "removesuffix",
                                            "isnumeric", "isdecimal", "isidentifier", "isprintable", "istitle",
                                            "isascii", NULL};
    static const char *const DICT_OTHER[] = {"pop", "popitem", "setdefault", "update", "clear", "copy", "fromkeys", NULL};
    static const char *const LIST_MOD[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                           "reverse", "copy", NULL};
    if (obj.t == V_STR) {
        for (int k = 0; k < M_STR_N; k++)
            if (!strcmp(a, STR_M[k])) return k;
        for (int k = 0; STR_OTHER[k]; k++)
            if (!strcmp(a, STR_OTHER[k])) return M_MODIFY + 1; /* a method not implemented */
    } else if (obj.t == V_DICT) {
        if (!strcmp(a, "items")) return M_ITEMS;
        if (!strcmp(a, "keys")) return M_KEYS;
        if (!strcmp(a, "values")) return M_VALUES;
        if (!strcmp(a, "get")) return M_GET;
        for (int k = 0; DICT_OTHER[k]; k++)
            if (!strcmp(a, DICT_OTHER[k])) return k < 5 ? M_MODIFY : M_MODIFY + 1;
    } else if (obj.t == V_LIST) {
        if (!strcmp(a, "index")) return M_LIST_INDEX;
        if (!strcmp(a, "count")) return M_LIST_COUNT;
        for (int k = 0; LIST_MOD[k]; k++)
            if (!strcmp(a, LIST_MOD[k])) return k < 8 ? M_MODIFY : M_MODIFY + 1;
    } else if (obj.t == V_LOOP) {
        if (!strcmp(a, "cycle")) return M_CYCLE;
        if (!strcmp(a, "changed")) return M_MODIFY + 1;
    }
    return -1;
}

static JValue loop_attr(R *r, JLoop *lp, const char *a) {
    int n = lp->items->n, i = lp->i;
    if (!strcmp(a, "index")) return vint(i + 1);
    if (!strcmp(a, "index0")) return vint(i);
    if (!strcmp(a, "revindex")) return vint(n - i);
    if (!strcmp(a, "revindex0")) return vint(n - i - 1);
    if (!strcmp(a, "first")) return vbool(i == 0);
    if (!strcmp(a, "last")) return vbool(i == n - 1);
    if (!strcmp(a, "length")) return vint(n);
    if (!strcmp(a, "depth")) return vint(1);
    if (!strcmp(a, "depth0")) return vint(0);
    if (!strcmp(a, "previtem")) return i > 0 ? lp->items->v[i - 1] : undef(r, "there is no previous item");
    if (!strcmp(a, "nextitem")) return i < n - 1 ? lp->items->v[i + 1] : undef(r, "there is no next item");
    return undef(r, "'LoopContext' object has no attribute '%.60s'", a);
}

/* jinja2's getattr: the value's attribute (a method), else its item, else undefined. */
static int get_attr(R *r, JValue obj, const JStr *name, unsigned pos, JValue *out) {
    const char *a = name->s;
    if (obj.t == V_UNDEF)
        return rerr(r, pos, "%s (reading its attribute '%.60s')", obj.u.why ? obj.u.why : "undefined", a);
    if (a[0] == '_' && a[1] == '_') return rerr(r, pos, "access to the attribute '%.60s' is unsafe", a);
    int m = method_id(obj, a);
    if (m >= 0) {
        *out = method(r, obj, m, a);
        return r->failed ? -1 : 0;
    }
    if (obj.t == V_LOOP) {
        *out = loop_attr(r, obj.u.lp, a);
        return r->failed ? -1 : 0;
    }
    if (obj.t == V_DICT || obj.t == V_NS) {
        int i = dict_find(r, obj.u.d, vstr(name), pos);
        if (i == -2) return -1;
        if (i >= 0) {
            *out = obj.u.d->v[i];
            return 0;
        }
    }
    *out = undef(r, "'%s' object has no attribute '%.60s'", type_name(obj), a);
    return r->failed ? -1 : 0;
}

static int get_item(R *r, JValue obj, JValue key, unsigned pos, JValue *out) {
    if (obj.t == V_UNDEF) return rerr(r, pos, "%s (reading an item of it)", obj.u.why ? obj.u.why : "undefined");
    if ((obj.t == V_LIST || obj.t == V_STR) && (key.t == V_INT || key.t == V_BOOL)) {
        long long n = obj.t == V_LIST ? obj.u.l->n : (long long)cp_count(obj.u.s), i = key.u.i;
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            *out = undef(r, "%s object has no element %lld", type_name(obj), key.u.i);
            return r->failed ? -1 : 0;
        }
        if (obj.t == V_LIST) {
            *out = obj.u.l->v[i];
            return 0;
        }
        size_t at = cp_offset(obj.u.s, (size_t)i);
        unsigned cp;
        int k = cp_at(obj.u.s->s, obj.u.s->len, at, &cp);
        return step(r, 1 + (long long)at / 64, pos) || mkstr(r, obj.u.s->s + at, (size_t)k, out);
    }
    if (obj.t == V_DICT) {
        int i = dict_find(r, obj.u.d, key, pos);
        if (i == -2) return -1;
        if (i >= 0) {
            *out = obj.u.d->v[i];
            return 0;
        }
    }
    if (key.t == V_STR) {
        /* not an item: an attribute of that name (a dict's or string's method) */
        int m = method_id(obj, key.u.s->s);
        if (m >= 0) {
            *out = method(r, obj, m, key.u.s->s);
            return r->failed ? -1 : 0;
        }
        if (obj.t == V_LOOP || obj.t == V_NS) return get_attr(r, obj, key.u.s, pos, out);
        *out = undef(r, "'%s' object has no key '%.60s'", type_name(obj), key.u.s->s);
    } else {
        *out = undef(r, "'%s' object has no item of that key", type_name(obj));
    }
    return r->failed ? -1 : 0;
}

/* Python's slice of a length-n sequence: the indices it takes, in order. */
static int slice_indices(R *r, long long n, const JValue *sv, unsigned pos, long long *start, long long *stop,
                         long long *stepv) {
    long long st = 1;
    if (sv[2].t != V_NONE) {
        if (sv[2].t != V_INT && sv[2].t != V_BOOL) return rerr(r, pos, "slice indices must be integers or None");
        st = sv[2].u.i;
        if (st == 0) return rerr(r, pos, "slice step cannot be zero");
    }
    long long lo = 0, hi = 0;
    for (int k = 0; k < 2; k++) {
        long long d = k == 0 ? (st > 0 ? 0 : n - 1) : (st > 0 ? n : -1), x;
        if (sv[k].t == V_NONE) x = d;
        else if (sv[k].t == V_INT || sv[k].t == V_BOOL) {
            x = sv[k].u.i;
            if (x < 0) x += n;
            if (st > 0) x = x < 0 ? 0 : x > n ? n : x;
            else x = x < -1 ? -1 : x > n - 1 ? n - 1 : x;
        } else {
            return rerr(r, pos, "slice indices must be integers or None");
        }
        if (k == 0) lo = x;
        else hi = x;
    }
    *start = lo, *stop = hi, *stepv = st;
    return 0;
}

static int get_slice(R *r, JValue obj, const JValue *sv, unsigned pos, JValue *out) {
    if (obj.t == V_UNDEF) return rerr(r, pos, "%s (slicing it)", obj.u.why ? obj.u.why : "undefined");
    if (obj.t != V_LIST && obj.t != V_STR) {
        *out = undef(r, "'%s' object cannot be sliced", type_name(obj));
        return r->failed ? -1 : 0;
    }
    long long n = obj.t == V_LIST ? obj.u.l->n : (long long)cp_count(obj.u.s), a = 0, b = 0, s = 1;
    if (slice_indices(r, n, sv, pos, &a, &b, &s) != 0) return -1;
    if (obj.t == V_LIST) {
        JList *l = list_new(r, 0);
        if (!l) return -1;
        for (long long i = a; s > 0 ? i < b : i > b; i += s)
            if (step(r, 1, pos) || list_push(r, l, obj.u.l->v[i])) return -1;
        *out = vlist(l, obj.tuple);
        return 0;
    }
    /* a string: its characters' offsets first */
    size_t *off = alloc(r, (size_t)(n + 1) * sizeof *off);
    if (!off) return -1;
    for (size_t i = 0, k = 0; k <= (size_t)n; k++) {
        off[k] = i;
        if (i < obj.u.s->len) {
            unsigned cp;
            i += (size_t)cp_at(obj.u.s->s, obj.u.s->len, i, &cp);
        }
    }
    if (step(r, n, pos) != 0) return -1;
    Buf bf = {0};
    if (buf_put(r, &bf, "", 0) != 0) return -1;
    if (s == 1) {
        if (b > a && buf_put(r, &bf, obj.u.s->s + off[a], off[b] - off[a]) != 0) return -1;
    } else {
        for (long long i = a; s > 0 ? i < b : i > b; i += s)
            if (buf_put(r, &bf, obj.u.s->s + off[i], off[i + 1] - off[i]) != 0) return -1;
    }
    return buf_value(r, &bf, out);
}

/* ------------------------------------------------------------------ arithmetic */

static int arith(R *r, int op, JValue a, JValue b, unsigned pos, JValue *out) {
    if (a.t == V_UNDEF || b.t == V_UNDEF) {
        JValue u = a.t == V_UNDEF ? a : b;
        return rerr(r, pos, "%s", u.u.why ? u.u.why : "an undefined value in arithmetic");
    }
    if (is_num(a) && is_num(b)) {
        int ints = a.t != V_FLOAT && b.t != V_FLOAT;
        long long x = ints ? a.u.i : 0, y = ints ? b.u.i : 0, z;
        double fx = num(a), fy = num(b);
        switch (op) {
        case OP_ADD:
            if (ints) {
                if (__builtin_add_overflow(x, y, &z)) goto overflow;
                return *out = vint(z), 0;
            }
            return *out = vfloat(fx + fy), 0;
        case OP_SUB:
            if (ints) {
                if (__builtin_sub_overflow(x, y, &z)) goto overflow;
                return *out = vint(z), 0;
            }
            return *out = vfloat(fx - fy), 0;
        case OP_MUL:
            if (ints) {
                if (__builtin_mul_overflow(x, y, &z)) goto overflow;
                return *out = vint(z), 0;
            }
            return *out = vfloat(fx * fy), 0;
        case OP_DIV:
            if (fy == 0) return rerr(r, pos, "division by zero");
            return *out = vfloat(fx / fy), 0;
        case OP_FLOORDIV: case OP_MOD:
            if (ints) {
                if (y == 0) return rerr(r, pos, "integer division or modulo by zero");
                if (x == LLONG_MIN && y == -1) goto overflow;
                long long q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) m += y, q--;
                return *out = vint(op == OP_MOD ? m : q), 0;
            } else {
                if (fy == 0) return rerr(r, pos, "float division by zero");
                /* CPython's float_divmod */
                double mod = fmod(fx, fy), div = (fx - mod) / fy, fl;
                if (mod != 0) {
                    if ((fy < 0) != (mod < 0)) mod += fy, div -= 1.0;
                } else {
                    mod = copysign(0.0, fy);
                }
                if (div != 0) {
                    fl = floor(div);
                    if (div - fl > 0.5) fl += 1.0;
                } else {
                    fl = copysign(0.0, fx / fy);
                }
                return *out = vfloat(op == OP_MOD ? mod : fl), 0;
            }
        case OP_POW:
            if (ints && y >= 0) {
                long long res = 1, base = x;
                for (long long e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(res, base, &res)) goto overflow;
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) goto overflow;
                }
                return *out = vint(res), 0;
            }
            if (fx == 0 && fy < 0) return rerr(r, pos, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) return rerr(r, pos, "unsupported Jinja construct: a complex power");
            double p = pow(fx, fy);
            if (isinf(p) && !isinf(fx) && !isinf(fy)) return rerr(r, pos, "numerical result out of range");
            return *out = vfloat(p), 0;
        }
    }
    if (op == OP_ADD && a.t == V_STR && b.t == V_STR) {
        /* markup escapes the plain string it is added to (Markup.__add__ / __radd__) */
        if (a.tuple != b.tuple) return rerr(r, pos, "unsupported Jinja construct: adding text to |safe or |escape markup");
        JStr *s = str_alloc(r, a.u.s->len + b.u.s->len);
        if (!s || step(r, 1 + (long long)s->len / 256, pos)) return -1;
        memcpy(s->s, a.u.s->s, a.u.s->len);
        memcpy(s->s + a.u.s->len, b.u.s->s, b.u.s->len);
        s->s[s->len] = '\0';
        *out = vstr(s);
        out->tuple = a.tuple;
        return 0;
    }
    if (op == OP_ADD && a.t == V_LIST && b.t == V_LIST && a.tuple == b.tuple) {
        JList *l = list_new(r, a.u.l->n + b.u.l->n);
        if (!l || step(r, l->cap, pos)) return -1;
        if (a.u.l->n) memcpy(l->v, a.u.l->v, (size_t)a.u.l->n * sizeof *l->v);
        if (b.u.l->n) memcpy(l->v + a.u.l->n, b.u.l->v, (size_t)b.u.l->n * sizeof *l->v);
        l->n = l->cap;
        *out = vlist(l, a.tuple);
        return 0;
    }
    if (op == OP_MUL && (((a.t == V_STR || a.t == V_LIST) && (b.t == V_INT || b.t == V_BOOL)) ||
                         ((b.t == V_STR || b.t == V_LIST) && (a.t == V_INT || a.t == V_BOOL)))) {
        JValue seq = a.t == V_STR || a.t == V_LIST ? a : b;
        long long times = a.t == V_STR || a.t == V_LIST ? b.u.i : a.u.i;
        if (times < 0) times = 0;
        size_t unit = seq.t == V_STR ? seq.u.s->len : (size_t)seq.u.l->n * sizeof(JValue);
        if (unit && (unsigned long long)times > r->o->max_memory / unit) return roomless(r);
        if (seq.t == V_STR) {
            JStr *s = str_alloc(r, seq.u.s->len * (size_t)times);
            if (!s || step(r, 1 + (long long)s->len / 256, pos)) return -1;
            for (long long k = 0; k < times; k++) memcpy(s->s + (size_t)k * seq.u.s->len, seq.u.s->s, seq.u.s->len);
            s->s[s->len] = '\0';
            *out = vstr(s);
            return 0;
        }
        JList *l = list_new(r, 0);
        if (!l) return -1;
        for (long long k = 0; k < times; k++)
            for (int i = 0; i < seq.u.l->n; i++)
                if (step(r, 1, pos) || list_push(r, l, seq.u.l->v[i])) return -1;
        *out = vlist(l, seq.tuple);
        return 0;
    }
    if (op == OP_MOD && a.t == V_STR) return rerr(r, pos, "unsupported Jinja construct: %%-formatting of a string");
    {
        static const char *const OPS[] = {"+", "-", "*", "/", "//", "%", "**"};
        if (op == OP_ADD && a.t == V_STR)
            return rerr(r, pos, "can only concatenate str (not \"%s\") to str", type_name(b));
        return rerr(r, pos, "unsupported operand type(s) for %s: '%s' and '%s'", OPS[op], type_name(a), type_name(b));
    }
overflow:
    return rerr(r, pos, "unsupported Jinja construct: an integer beyond 64 bits");
}

/* ------------------------------------------------------------------ JSON (transformers' tojson) */

typedef struct {
    const char *indent; /* NULL: one line */
    const char *item_sep, *key_sep;
    int sort_keys, ensure_ascii;
} JsonFmt;

static int json_str(R *r, Buf *b, const JStr *s, int ensure_ascii) {
    if (buf_put(r, b, "\"", 1) != 0) return -1;
    for (size_t i = 0; i < s->len;) {
        unsigned cp;
        int k = cp_at(s->s, s->len, i, &cp);
        char esc[16] = "";
        switch (cp) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        default:
            if (cp < 0x20 || (ensure_ascii && cp == 0x7f)) snprintf(esc, sizeof esc, "\\u%04x", cp);
            else if (ensure_ascii && cp >= 0x80) {
                if (cp >= 0x10000)
                    snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
                else
                    snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
        }
        if (esc[0] ? buf_puts(r, b, esc) : buf_put(r, b, s->s + i, (size_t)k)) return -1;
        i += (size_t)k;
    }
    return buf_put(r, b, "\"", 1);
}

static int json_nl(R *r, Buf *b, const JsonFmt *f, int level) {
    if (!f->indent) return 0;
    if (buf_put(r, b, "\n", 1) != 0) return -1;
    for (int k = 0; k < level; k++)
        if (buf_puts(r, b, f->indent) != 0) return -1;
    return 0;
}

static int sort_values(R *r, JValue *v, int n, int *idx, unsigned pos, int (*cmp)(R *, JValue, JValue, int *, unsigned));

static int cmp_plain(R *r, JValue a, JValue b, int *c, unsigned pos) { return value_cmp(r, a, b, c, pos); }

static int json_dump(R *r, Buf *b, JValue v, const JsonFmt *f, int level, unsigned pos) {
    if (++r->rec > MAX_RECURSION) return rerr(r, pos, "values nested deeper than %d", MAX_RECURSION);
    if (step(r, 1, pos) != 0) return -1;
    int rc = 0;
    char tmp[64];
    switch (v.t) {
    case V_NONE: rc = buf_puts(r, b, "null"); break;
    case V_BOOL: rc = buf_puts(r, b, v.u.i ? "true" : "false"); break;
    case V_INT: snprintf(tmp, sizeof tmp, "%lld", v.u.i); rc = buf_puts(r, b, tmp); break;
    case V_FLOAT:
        if (isnan(v.u.f)) rc = buf_puts(r, b, "NaN");
        else if (isinf(v.u.f)) rc = buf_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else fmt_float(v.u.f, tmp, sizeof tmp), rc = buf_puts(r, b, tmp);
        break;
    case V_STR: rc = json_str(r, b, v.u.s, f->ensure_ascii); break;
    case V_LIST:
        if (v.u.l->n == 0) {
            rc = buf_puts(r, b, "[]");
            break;
        }
        rc = buf_puts(r, b, "[");
        for (int i = 0; rc == 0 && i < v.u.l->n; i++)
            rc = (i && buf_puts(r, b, f->item_sep)) || json_nl(r, b, f, level + 1) ||
                 json_dump(r, b, v.u.l->v[i], f, level + 1, pos);
        if (rc == 0) rc = json_nl(r, b, f, level) || buf_puts(r, b, "]");
        break;
    case V_DICT: {
        if (v.u.d->n == 0) {
            rc = buf_puts(r, b, "{}");
            break;
        }
        int n = v.u.d->n, *idx = alloc(r, (size_t)n * sizeof *idx);
        if (!idx) return -1;
        for (int i = 0; i < n; i++) idx[i] = i;
        if (f->sort_keys && sort_values(r, v.u.d->k, n, idx, pos, cmp_plain) != 0) return -1;
        rc = buf_puts(r, b, "{");
        for (int j = 0; rc == 0 && j < n; j++) {
            JValue k = v.u.d->k[idx[j]];
            rc = (j && buf_puts(r, b, f->item_sep)) || json_nl(r, b, f, level + 1);
            if (rc) break;
            /* keys: strings as they are; numbers, booleans and None spelled (json.dumps) */
            if (k.t == V_STR) rc = json_str(r, b, k.u.s, f->ensure_ascii);
            else if (k.t == V_NONE || k.t == V_BOOL || k.t == V_INT || k.t == V_FLOAT) {
                Buf kb = {0};
                rc = buf_puts(r, &kb, "") || json_dump(r, &kb, k, f, level, pos) || buf_puts(r, b, "\"") ||
                     buf_put(r, b, kb.p, kb.n) || buf_puts(r, b, "\"");
            } else {
                rc = rerr(r, pos, "keys must be str, int, float, bool or None, not %s", type_name(k));
            }
            if (rc == 0) rc = buf_puts(r, b, f->key_sep) || json_dump(r, b, v.u.d->v[idx[j]], f, level + 1, pos);
        }
        if (rc == 0) rc = json_nl(r, b, f, level) || buf_puts(r, b, "}");
        break;
    }
    default: rc = rerr(r, pos, "Object of type %s is not JSON serializable", type_name(v));
    }
    r->rec--;
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ sorting */

/* A stable merge sort of idx by cmp over v (values keyed as the caller prepared them). */
static int sort_values(R *r, JValue *v, int n, int *idx, unsigned pos, int (*cmp)(R *, JValue, JValue, int *, unsigned)) {
    int *tmp = alloc(r, (size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return -1;
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                if (step(r, 1, pos) || cmp(r, v[idx[j]], v[idx[i]], &c, pos)) return -1;
                tmp[k++] = c < 0 ? idx[j++] : idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
    return 0;
}

/* ------------------------------------------------------------------ evaluation */

static int eval(R *r, const JExpr *x, JValue *out);
static int exec_body(R *r, const JBody *b, Frame *f);

typedef struct {
    JValue *pos;
    int npos;
    const JStr **kw;
    JValue *kwv;
    int nkw;
} Args;

static int eval_args(R *r, const JArgs *a, Args *out) {
    memset(out, 0, sizeof *out);
    if (a->npos && !(out->pos = alloc(r, (size_t)a->npos * sizeof *out->pos))) return -1;
    if (a->nkw && !(out->kwv = alloc(r, (size_t)a->nkw * sizeof *out->kwv))) return -1;
    for (int k = 0; k < a->npos; k++)
        if (eval(r, a->pos[k], &out->pos[k]) != 0) return -1;
    for (int k = 0; k < a->nkw; k++)
        if (eval(r, a->kwv[k], &out->kwv[k]) != 0) return -1;
    out->npos = a->npos, out->kw = a->kw, out->nkw = a->nkw;
    return 0;
}

/* The argument named name or at position i (after the value a filter applies to), else dflt. */
static JValue arg(const Args *a, int i, const char *name, JValue dflt, int *given) {
    if (given) *given = 1;
    for (int k = 0; k < a->nkw; k++)
        if (!strcmp(a->kw[k]->s, name)) return a->kwv[k];
    if (i >= 0 && i < a->npos) return a->pos[i];
    if (given) *given = 0;
    return dflt;
}

/* Refuses keyword arguments other than the names listed (NULL-terminated), and more than npos positional ones. */
static int check_args(R *r, const Args *a, int npos, const char *const *names, const char *what, unsigned pos) {
    if (a->npos > npos) return rerr(r, pos, "%s takes at most %d positional argument(s)", what, npos);
    for (int k = 0; k < a->nkw; k++) {
        int ok = 0;
        for (int j = 0; names && names[j]; j++) ok |= !strcmp(a->kw[k]->s, names[j]);
        if (!ok) return rerr(r, pos, "%s got an unexpected keyword argument '%.60s'", what, a->kw[k]->s);
    }
    return 0;
}

static int call_value(R *r, JValue fn, Args *a, unsigned pos, JValue *out);
static int apply_filter(R *r, int id, JValue v, Args *a, unsigned pos, JValue *out);
static int apply_test(R *r, int id, JValue v, Args *a, unsigned pos, int *res);

/* A dotted attribute path ("a.b.0") read as jinja2's make_attrgetter does (items first). */
static int attr_path(R *r, JValue v, const JStr *path, unsigned pos, JValue *out) {
    const char *p = path->s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        JValue key;
        char *end;
        long long i = strtoll(p, &end, 10);
        if (n > 0 && end == p + n && (p[0] != '-' || n > 1)) key = vint(i);
        else if (mkstr(r, p, n, &key) != 0) return -1;
        if (get_item(r, v, key, pos, &v) != 0) return -1;
        if (!dot) break;
        p = dot + 1;
    }
    *out = v;
    return 0;
}

static int in_op(R *r, JValue item, JValue seq, unsigned pos, int *res) {
    *res = 0;
    if (seq.t == V_STR) {
        if (item.t != V_STR) return rerr(r, pos, "'in <string>' requires string as left operand, not %s", type_name(item));
        *res = memmem(seq.u.s->s, seq.u.s->len, item.u.s->s, item.u.s->len) != NULL || item.u.s->len == 0;
        return step(r, 1 + (long long)seq.u.s->len / 256, pos);
    }
    if (seq.t == V_DICT || seq.t == V_NS) {
        int i = dict_find(r, seq.u.d, item, pos);
        if (i == -2) return -1;
        *res = i >= 0;
        return 0;
    }
    if (seq.t == V_UNDEF) return 0;
    if (seq.t != V_LIST) return rerr(r, pos, "argument of type '%s' is not iterable", type_name(seq));
    for (int i = 0; i < seq.u.l->n && !*res; i++)
        if (step(r, 1, pos) || value_eq(r, item, seq.u.l->v[i], res, pos)) return -1;
    return 0;
}

static int compare(R *r, int op, JValue a, JValue b, unsigned pos, int *res) {
    int c;
    switch (op) {
    case CMP_EQ: return value_eq(r, a, b, res, pos);
    case CMP_NE:
        if (value_eq(r, a, b, res, pos) != 0) return -1;
        *res = !*res;
        return 0;
    case CMP_IN: return in_op(r, a, b, pos, res);
    case CMP_NOTIN:
        if (in_op(r, a, b, pos, res) != 0) return -1;
        *res = !*res;
        return 0;
    default:
        if (a.t == V_UNDEF || b.t == V_UNDEF) {
            JValue u = a.t == V_UNDEF ? a : b;
            return rerr(r, pos, "%s (comparing it)", u.u.why ? u.u.why : "undefined");
        }
        if (value_cmp(r, a, b, &c, pos) != 0) return -1;
        if (c == 2) *res = 0;
        else *res = op == CMP_LT ? c < 0 : op == CMP_LE ? c <= 0 : op == CMP_GT ? c > 0 : c >= 0;
        return 0;
    }
}

static int eval_inner(R *r, const JExpr *x, JValue *out) {
    JValue a, b;
    switch (x->kind) {
    case E_CONST: *out = x->u.k; return 0;
    case E_BLOCK: *out = r->block; return 0;
    case E_NAME:
        if (frame_get(r->cur, x->id, out)) return 0;
        if (r->t->sym_func[x->id] >= 0) {
            JValue f = {.t = V_FUNC, .fn = r->t->sym_func[x->id]};
            *out = f;
            return 0;
        }
        *out = undef(r, "'%.80s' is undefined", r->t->syms[x->id]->s);
        return r->failed ? -1 : 0;
    case E_ATTR:
        if (eval(r, x->u.attr.obj, &a) != 0) return -1;
        return get_attr(r, a, x->u.attr.name, x->pos, out);
    case E_ITEM:
        if (eval(r, x->u.item.obj, &a) != 0 || eval(r, x->u.item.index, &b) != 0) return -1;
        return get_item(r, a, b, x->pos, out);
    case E_SLICE: {
        JValue sv[3] = {vnone(), vnone(), vnone()};
        const JExpr *parts[3] = {x->u.slice.start, x->u.slice.stop, x->u.slice.step};
        if (eval(r, x->u.slice.obj, &a) != 0) return -1;
        for (int k = 0; k < 3; k++)
            if (parts[k] && eval(r, parts[k], &sv[k]) != 0) return -1;
        return get_slice(r, a, sv, x->pos, out);
    }
    case E_CALL: {
        Args args;
        if (eval(r, x->u.call.fn, &a) != 0 || eval_args(r, &x->u.call.a, &args) != 0) return -1;
        return call_value(r, a, &args, x->pos, out);
    }
    case E_FILTER: {
        Args args;
        if (x->id < 0) return rerr(r, x->pos, "unsupported Jinja construct: the filter '%.60s'", x->u.ft.name->s);
        if (eval(r, x->u.ft.x, &a) != 0 || eval_args(r, &x->u.ft.a, &args) != 0) return -1;
        return apply_filter(r, x->id, a, &args, x->pos, out);
    }
    case E_TEST: {
        Args args;
        int res;
        if (x->id < 0) return rerr(r, x->pos, "unsupported Jinja construct: the test '%.60s'", x->u.ft.name->s);
        if (eval(r, x->u.ft.x, &a) != 0 || eval_args(r, &x->u.ft.a, &args) != 0) return -1;
        if (apply_test(r, x->id, a, &args, x->pos, &res) != 0) return -1;
        *out = vbool(x->u.ft.negate ? !res : res);
        return 0;
    }
    case E_NEG: case E_POS:
        if (eval(r, x->u.x, &a) != 0) return -1;
        if (!is_num(a)) return rerr(r, x->pos, "bad operand type for unary %c: '%s'", x->kind == E_NEG ? '-' : '+', type_name(a));
        if (x->kind == E_POS) return *out = a.t == V_BOOL ? vint(a.u.i) : a, 0;
        if (a.t == V_FLOAT) return *out = vfloat(-a.u.f), 0;
        if (a.u.i == LLONG_MIN) return rerr(r, x->pos, "unsupported Jinja construct: an integer beyond 64 bits");
        return *out = vint(-a.u.i), 0;
    case E_NOT:
        if (eval(r, x->u.x, &a) != 0) return -1;
        return *out = vbool(!truthy(a)), 0;
    case E_AND: case E_OR:
        if (eval(r, x->u.bin.a, &a) != 0) return -1;
        if (x->kind == E_AND ? !truthy(a) : truthy(a)) return *out = a, 0;
        return eval(r, x->u.bin.b, out);
    case E_BIN:
        if (eval(r, x->u.bin.a, &a) != 0 || eval(r, x->u.bin.b, &b) != 0) return -1;
        return arith(r, x->op, a, b, x->pos, out);
    case E_COMPARE: {
        if (eval(r, x->u.cmp.first, &a) != 0) return -1;
        int res = 1;
        for (int k = 0; k < x->u.cmp.n && res; k++) {
            if (eval(r, x->u.cmp.rest[k], &b) != 0 || compare(r, x->u.cmp.ops[k], a, b, x->pos, &res) != 0) return -1;
            a = b;
        }
        return *out = vbool(res), 0;
    }
    case E_CONCAT: {
        Buf bf = {0};
        if (buf_put(r, &bf, "", 0) != 0) return -1;
        for (int k = 0; k < x->u.seq.n; k++)
            if (eval(r, x->u.seq.v[k], &a) != 0 || to_str(r, &bf, a, x->pos) != 0) return -1;
        return buf_value(r, &bf, out);
    }
    case E_COND:
        if (eval(r, x->u.cond.test, &a) != 0) return -1;
        if (truthy(a)) return eval(r, x->u.cond.yes, out);
        if (x->u.cond.no) return eval(r, x->u.cond.no, out);
        *out = undef(r, "the inline if has no else and its test was false");
        return r->failed ? -1 : 0;
    case E_LIST: case E_TUPLE: {
        JList *l = list_new(r, x->u.seq.n);
        if (!l) return -1;
        for (int k = 0; k < x->u.seq.n; k++)
            if (eval(r, x->u.seq.v[k], &l->v[k]) != 0) return -1;
        l->n = x->u.seq.n;
        *out = vlist(l, x->kind == E_TUPLE);
        return 0;
    }
    case E_DICT: {
        JDict *d = dict_new(r);
        if (!d) return -1;
        for (int k = 0; k < x->u.dict.n; k++) {
            if (eval(r, x->u.dict.k[k], &a) != 0 || eval(r, x->u.dict.v[k], &b) != 0) return -1;
            if (a.t == V_LIST && !a.tuple) return rerr(r, x->pos, "unhashable type: 'list'");
            if (a.t == V_DICT || a.t == V_NS) return rerr(r, x->pos, "unhashable type: 'dict'");
            if (dict_set(r, d, a, b, x->pos) != 0) return -1;
        }
        *out = vdict(d, 0);
        return 0;
    }
    }
    return rerr(r, x->pos, "unknown expression");
}

static int eval(R *r, const JExpr *x, JValue *out) {
    if (++r->rec > MAX_RECURSION) return rerr(r, x->pos, "expressions nested deeper than %d", MAX_RECURSION);
    int rc = step(r, 1, x->pos) || eval_inner(r, x, out);
    r->rec--;
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ calls */

static int render_capture(R *r, const JBody *body, Frame *f, JValue *out) {
    Buf b = {0}, *saved = r->out;
    if (buf_put(r, &b, "", 0) != 0) return -1;
    r->out = &b;
    int loops = r->loops;
    r->loops = 0; /* break/continue do not cross a macro or block */
    int rc = exec_body(r, body, f);
    r->loops = loops;
    r->out = saved;
    if (rc > 0) return -1; /* break or continue outside a loop: already reported */
    if (rc != 0) return -1;
    return buf_value(r, &b, out);
}

static int call_macro(R *r, const JClosure *c, Args *a, unsigned pos, JValue *out) {
    const JMacro *m = c->m;
    const char *name = m->name ? m->name->s : "caller";
    if (r->calls >= r->o->max_calls)
        return rerr(r, pos, "macros nested deeper than %d (a macro that calls itself without end?)", r->o->max_calls);
    Frame *f = frame_new(r, c->env);
    if (!f) return -1;
    unsigned char *set = alloc(r, (size_t)(m->nparams ? m->nparams : 1));
    if (!set) return -1;
    JList *varargs = list_new(r, 0);
    JDict *kwargs = dict_new(r);
    if (!varargs || !kwargs) return -1;
    for (int k = 0; k < a->npos; k++) {
        if (k < m->nparams) {
            if (frame_set(r, f, m->params[k], a->pos[k]) != 0) return -1;
            set[k] = 1;
        } else if (m->catch_varargs) {
            if (list_push(r, varargs, a->pos[k]) != 0) return -1;
        } else {
            return rerr(r, pos, "macro '%.60s' takes not more than %d argument(s)", name, m->nparams);
        }
    }
    JValue caller = UNDEF;
    int have_caller = 0;
    for (int k = 0; k < a->nkw; k++) {
        int j;
        for (j = 0; j < m->nparams; j++)
            if (!strcmp(r->t->syms[m->params[j]]->s, a->kw[k]->s)) break;
        if (j < m->nparams) {
            if (set[j]) return rerr(r, pos, "macro '%.60s' got multiple values for argument '%.60s'", name, a->kw[k]->s);
            if (frame_set(r, f, m->params[j], a->kwv[k]) != 0) return -1;
            set[j] = 1;
        } else if (!strcmp(a->kw[k]->s, "caller") && m->uses_caller) {
            caller = a->kwv[k], have_caller = 1;
        } else if (m->catch_kwargs) {
            if (dict_set(r, kwargs, vstr(a->kw[k]), a->kwv[k], pos) != 0) return -1;
        } else {
            return rerr(r, pos, "macro '%.60s' takes no keyword argument '%.60s'", name, a->kw[k]->s);
        }
    }
    r->calls++;
    Frame *saved = r->cur;
    r->cur = f;
    for (int j = 0; j < m->nparams; j++) {
        if (set[j]) continue;
        JValue v;
        if (m->defaults[j]) {
            if (eval(r, m->defaults[j], &v) != 0) goto fail;
        } else {
            v = undef(r, "parameter '%.60s' was not provided", r->t->syms[m->params[j]]->s);
        }
        if (frame_set(r, f, m->params[j], v) != 0) goto fail;
    }
    if (frame_set(r, f, SYM_VARARGS, vlist(varargs, 1)) != 0 || frame_set(r, f, SYM_KWARGS, vdict(kwargs, 0)) != 0)
        goto fail;
    if (m->uses_caller && frame_set(r, f, SYM_CALLER, have_caller ? caller : undef(r, "no caller defined")) != 0)
        goto fail;
    int rc = render_capture(r, &m->body, f, out);
    r->cur = saved;
    r->calls--;
    return rc;
fail:
    r->cur = saved;
    r->calls--;
    return -1;
}

static const char *const FUNC_NAMES[FN_N] = {"raise_exception", "strftime_now", "namespace", "range", "dict"};

static int call_func(R *r, int fn, Args *a, unsigned pos, JValue *out) {
    switch (fn) {
    case FN_RAISE: {
        const JStr *msg;
        if (a->npos < 1) return rerr(r, pos, "raise_exception() needs a message");
        if (str_of(r, a->pos[0], pos, &msg) != 0) return -1;
        return rerr(r, pos, "the chat template refused the messages: %s", msg->s);
    }
    case FN_STRFTIME: {
        const JStr *fmt;
        if (a->npos != 1 || a->nkw) return rerr(r, pos, "strftime_now() takes one format");
        if (str_of(r, a->pos[0], pos, &fmt) != 0) return -1;
        struct tm tm;
        if (!localtime_r(&r->now, &tm)) return rerr(r, pos, "strftime_now(): the clock cannot be read");
        char buf[512];
        locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        size_t n = c ? strftime_l(buf, sizeof buf, fmt->s, &tm, c) : 0;
        if (c) freelocale(c);
        if (n == 0 && fmt->len) return rerr(r, pos, "strftime_now(): the format gives no text or too much");
        return mkstr(r, buf, n, out);
    }
    case FN_NAMESPACE: case FN_DICT: {
        JDict *d = dict_new(r);
        if (!d) return -1;
        if (a->npos > 1) return rerr(r, pos, "%s() takes at most one positional argument", FUNC_NAMES[fn]);
        if (a->npos == 1) {
            if (a->pos[0].t != V_DICT && a->pos[0].t != V_NS)
                return rerr(r, pos, "unsupported Jinja construct: %s() of a %s", FUNC_NAMES[fn], type_name(a->pos[0]));
            if (!(d = dict_copy(r, a->pos[0].u.d))) return -1;
        }
        for (int k = 0; k < a->nkw; k++) {
            if (fn == FN_NAMESPACE && a->kw[k]->s[0] == '_')
                return rerr(r, pos, "a namespace's attribute cannot start with '_' ('%.60s')", a->kw[k]->s);
            if (dict_set(r, d, vstr(a->kw[k]), a->kwv[k], pos) != 0) return -1;
        }
        *out = vdict(d, fn == FN_NAMESPACE);
        return 0;
    }
    case FN_RANGE: {
        long long v[3] = {0, 0, 1};
        if (a->nkw || a->npos < 1 || a->npos > 3) return rerr(r, pos, "range() takes 1 to 3 integers");
        for (int k = 0; k < a->npos; k++) {
            if (a->pos[k].t != V_INT && a->pos[k].t != V_BOOL)
                return rerr(r, pos, "'%s' object cannot be interpreted as an integer", type_name(a->pos[k]));
        }
        if (a->npos == 1) v[1] = a->pos[0].u.i;
        else {
            v[0] = a->pos[0].u.i, v[1] = a->pos[1].u.i;
            if (a->npos == 3) v[2] = a->pos[2].u.i;
        }
        if (v[2] == 0) return rerr(r, pos, "range() arg 3 must not be zero");
        long double cnt = v[2] > 0 ? ((long double)v[1] - v[0] + v[2] - 1) / v[2] : ((long double)v[0] - v[1] - v[2] - 1) / -v[2];
        if (cnt < 0) cnt = 0;
        if (cnt > MAX_RANGE)
            return rerr(r, pos, "range too big: the sandbox allows at most %d items (jinja2's MAX_RANGE)", MAX_RANGE);
        JList *l = list_new(r, (int)cnt);
        if (!l || step(r, (long long)cnt, pos)) return -1;
        for (long long i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) l->v[l->n++] = vint(i);
        *out = vlist(l, 0);
        return 0;
    }
    }
    return rerr(r, pos, "unknown function");
}

/* Python's str.split(sep, maxsplit) (rsplit when from_right). */
static int py_split(R *r, const JStr *s, JValue sepv, long long maxsplit, int from_right, unsigned pos, JValue *out) {
    JList *l = list_new(r, 0);
    if (!l) return -1;
    if (sepv.t == V_NONE || sepv.t == V_UNDEF) {
        /* runs of whitespace; none at either end */
        size_t i = 0, n = s->len;
        if (!from_right) {
            while (i < n) {
                unsigned cp;
                while (i < n) {
                    int k = cp_at(s->s, n, i, &cp);
                    if (!is_space(cp)) break;
                    i += (size_t)k;
                }
                if (i >= n) break;
                size_t st = i;
                if (maxsplit >= 0 && l->n >= maxsplit) {
                    size_t end = n;
                    while (end > st) {
                        size_t b = end - 1;
                        while (b > st && ((unsigned char)s->s[b] & 0xC0) == 0x80) b--;
                        cp_at(s->s, n, b, &cp);
                        if (!is_space(cp)) break;
                        end = b;
                    }
                    JValue w;
                    if (mkstr(r, s->s + st, end - st, &w) != 0 || list_push(r, l, w) != 0) return -1;
                    break;
                }
                while (i < n) {
                    int k = cp_at(s->s, n, i, &cp);
                    if (is_space(cp)) break;
                    i += (size_t)k;
                }
                JValue w;
                if (mkstr(r, s->s + st, i - st, &w) != 0 || list_push(r, l, w) != 0) return -1;
            }
            *out = vlist(l, 0);
            return step(r, l->n, pos);
        }
        return rerr(r, pos, "unsupported Jinja construct: rsplit() without a separator");
    }
    if (sepv.t != V_STR) return rerr(r, pos, "must be str or None, not %s", type_name(sepv));
    const JStr *sep = sepv.u.s;
    if (sep->len == 0) return rerr(r, pos, "empty separator");
    if (!from_right) {
        size_t i = 0;
        for (;;) {
            const char *hit = maxsplit >= 0 && l->n >= maxsplit ? NULL : memmem(s->s + i, s->len - i, sep->s, sep->len);
            size_t end = hit ? (size_t)(hit - s->s) : s->len;
            JValue w;
            if (mkstr(r, s->s + i, end - i, &w) != 0 || list_push(r, l, w) != 0 || step(r, 1, pos)) return -1;
            if (!hit) break;
            i = end + sep->len;
        }
        *out = vlist(l, 0);
        return 0;
    }
    /* from the right: pieces collected backwards, then reversed */
    size_t end = s->len;
    for (;;) {
        const char *hit = NULL;
        if (!(maxsplit >= 0 && l->n >= maxsplit))
            for (size_t j = end; j >= sep->len; j--)
                if (!memcmp(s->s + j - sep->len, sep->s, sep->len)) {
                    hit = s->s + j - sep->len;
                    break;
                }
        size_t st = hit ? (size_t)(hit - s->s) + sep->len : 0;
        JValue w;
        if (mkstr(r, s->s + st, end - st, &w) != 0 || list_push(r, l, w) != 0 || step(r, 1, pos)) return -1;
        if (!hit) break;
        end = (size_t)(hit - s->s);
    }
    for (int i = 0, j = l->n - 1; i < j; i++, j--) {
        JValue t = l->v[i];
        l->v[i] = l->v[j], l->v[j] = t;
    }
    *out = vlist(l, 0);
    return 0;
}

/* Python's str.strip(chars) (which 1 left, 2 right, 3 both). */
static int py_strip(R *r, const JStr *s, JValue chars, int which, unsigned pos, JValue *out) {
    if (chars.t != V_NONE && chars.t != V_UNDEF && chars.t != V_STR)
        return rerr(r, pos, "strip arg must be None or str");
    const JStr *cs = chars.t == V_STR ? chars.u.s : NULL;
    size_t a = 0, b = s->len;
#define STRIPS(cp) (cs ? memmem(cs->s, cs->len, s->s + at_, (size_t)k_) != NULL : is_space(cp))
    if (which & 1)
        while (a < b) {
            unsigned cp;
            size_t at_ = a;
            int k_ = cp_at(s->s, s->len, a, &cp);
            if (!STRIPS(cp)) break;
            a += (size_t)k_;
        }
    if (which & 2)
        while (b > a) {
            size_t at_ = b - 1;
            while (at_ > a && ((unsigned char)s->s[at_] & 0xC0) == 0x80) at_--;
            unsigned cp;
            int k_ = cp_at(s->s, s->len, at_, &cp);
            if (!STRIPS(cp)) break;
            b = at_;
        }
#undef STRIPS
    if (step(r, 1 + (long long)s->len / 256, pos) != 0) return -1;
    if (a == 0 && b == s->len) return *out = vstr(s), 0;
    return mkstr(r, s->s + a, b - a, out);
}

/* Python's str.replace(old, new, count). */
static int py_replace(R *r, const JStr *s, JValue oldv, JValue newv, long long count, unsigned pos, JValue *out) {
    if (oldv.t != V_STR || newv.t != V_STR) return rerr(r, pos, "replace() arguments must be str");
    const JStr *o = oldv.u.s, *nw = newv.u.s;
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0) return -1;
    if (o->len == 0) {
        /* between every character, and at both ends */
        long long done = 0;
        for (size_t i = 0;; done++) {
            if (count < 0 || done < count) {
                if (buf_put(r, &b, nw->s, nw->len) != 0) return -1;
            } else {
                if (buf_put(r, &b, s->s + i, s->len - i) != 0) return -1;
                break;
            }
            if (i >= s->len) break;
            unsigned cp;
            int k = cp_at(s->s, s->len, i, &cp);
            if (buf_put(r, &b, s->s + i, (size_t)k) != 0) return -1;
            i += (size_t)k;
        }
        return buf_value(r, &b, out);
    }
    size_t i = 0;
    for (long long done = 0; count < 0 || done < count; done++) {
        const char *hit = memmem(s->s + i, s->len - i, o->s, o->len);
        if (!hit) break;
        if (buf_put(r, &b, s->s + i, (size_t)(hit - s->s) - i) != 0 || buf_put(r, &b, nw->s, nw->len) != 0 ||
            step(r, 1, pos))
            return -1;
        i = (size_t)(hit - s->s) + o->len;
    }
    if (buf_put(r, &b, s->s + i, s->len - i) != 0) return -1;
    return buf_value(r, &b, out);
}

/* Line boundaries of Python's str.splitlines(). */
static int line_break(unsigned cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static int py_splitlines(R *r, const JStr *s, unsigned pos, JList **out) {
    JList *l = list_new(r, 0);
    if (!l) return -1;
    size_t st = 0, i = 0;
    while (i < s->len) {
        unsigned cp;
        int k = cp_at(s->s, s->len, i, &cp);
        if (line_break(cp)) {
            JValue w;
            if (mkstr(r, s->s + st, i - st, &w) != 0 || list_push(r, l, w) != 0 || step(r, 1, pos)) return -1;
            i += (size_t)k;
            if (cp == '\r' && i < s->len && s->s[i] == '\n') i++;
            st = i;
        } else {
            i += (size_t)k;
        }
    }
    if (st < s->len) {
        JValue w;
        if (mkstr(r, s->s + st, s->len - st, &w) != 0 || list_push(r, l, w) != 0) return -1;
    }
    *out = l;
    return 0;
}

static int str_is(const JStr *s, int id) {
    if (s->len == 0) return 0;
    int cased = 0;
    for (size_t i = 0; i < s->len;) {
        unsigned cp;
        i += (size_t)cp_at(s->s, s->len, i, &cp);
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        int letter = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
        int digit = c == UTF8PROC_CATEGORY_ND;
        switch (id) {
        case M_ISDIGIT: if (!digit) return 0; break;
        case M_ISALPHA: if (!letter) return 0; break;
        case M_ISALNUM: if (!letter && !digit && c != UTF8PROC_CATEGORY_NL && c != UTF8PROC_CATEGORY_NO) return 0; break;
        case M_ISSPACE: if (!is_space(cp)) return 0; break;
        case M_ISLOWER:
            if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT) return 0;
            if (c == UTF8PROC_CATEGORY_LL) cased = 1;
            break;
        case M_ISUPPER:
            if (c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return 0;
            if (c == UTF8PROC_CATEGORY_LU) cased = 1;
            break;
        }
    }
    return id == M_ISLOWER || id == M_ISUPPER ? cased : 1;
}

/* Python's str.format with plain fields: {}, {0}, {name}, and {{ }} for braces; a field's
 * conversion (!r) or format spec (:>8) is refused. */
static int str_format(R *r, const JStr *s, Args *a, unsigned pos, JValue *out) {
    Buf b = {0};
    int auto_i = 0, manual = 0;
    if (buf_put(r, &b, "", 0) != 0) return -1;
    for (size_t i = 0; i < s->len; i++) {
        char c = s->s[i];
        if ((c == '{' || c == '}') && i + 1 < s->len && s->s[i + 1] == c) {
            if (buf_put(r, &b, &c, 1) != 0) return -1;
            i++;
            continue;
        }
        if (c == '}') return rerr(r, pos, "single '}' encountered in format string");
        if (c != '{') {
            if (buf_put(r, &b, &c, 1) != 0) return -1;
            continue;
        }
        const char *close = memchr(s->s + i, '}', s->len - i);
        if (!close) return rerr(r, pos, "single '{' encountered in format string");
        size_t fl = (size_t)(close - s->s) - i - 1;
        const char *field = s->s + i + 1;
        if (memchr(field, '!', fl) || memchr(field, ':', fl) || memchr(field, '[', fl) || memchr(field, '.', fl) ||
            memchr(field, '{', fl))
            return rerr(r, pos, "unsupported Jinja construct: a str.format field other than {}, {N} or {name}");
        JValue v;
        if (fl == 0 || (field[0] >= '0' && field[0] <= '9')) {
            long k = 0;
            if (fl == 0) {
                if (manual) return rerr(r, pos, "cannot switch from manual field numbering to automatic");
                k = auto_i++;
            } else {
                for (size_t j = 0; j < fl; j++) {
                    if (field[j] < '0' || field[j] > '9' || k > 100000) return rerr(r, pos, "a bad field in a format string");
                    k = k * 10 + (field[j] - '0');
                }
                if (auto_i) return rerr(r, pos, "cannot switch from automatic field numbering to manual");
                manual = 1;
            }
            if (k >= a->npos) return rerr(r, pos, "replacement index %ld out of range for positional args tuple", k);
            v = a->pos[k];
        } else {
            int k;
            for (k = 0; k < a->nkw; k++)
                if (strlen(a->kw[k]->s) == fl && !memcmp(a->kw[k]->s, field, fl)) break;
            if (k == a->nkw) return rerr(r, pos, "no keyword argument '%.*s' to format", (int)(fl > 60 ? 60 : fl), field);
            v = a->kwv[k];
        }
        if (v.t == V_UNDEF) return rerr(r, pos, "%s (formatting it)", v.u.why ? v.u.why : "undefined");
        if (to_str(r, &b, v, pos) != 0) return -1;
        i += fl + 1;
    }
    return buf_value(r, &b, out);
}

static int call_method(R *r, const JMethod *m, Args *a, unsigned pos, JValue *out) {
    JValue self = m->self;
    JValue none = vnone();
    if (m->id == M_MODIFY)
        return rerr(r, pos, "the sandbox refuses '%s', which would change the %s", m->name, type_name(self));
    if (m->id > M_MODIFY) return rerr(r, pos, "unsupported Jinja construct: the %s method '%s'", type_name(self), m->name);
    if (self.t == V_STR) {
        const JStr *s = self.u.s;
        switch (m->id) {
        case M_STRIP: case M_LSTRIP: case M_RSTRIP:
            if (check_args(r, a, 1, NULL, m->name, pos)) return -1;
            return py_strip(r, s, arg(a, 0, "", none, NULL), m->id == M_STRIP ? 3 : m->id == M_LSTRIP ? 1 : 2, pos, out);
        case M_SPLIT: case M_RSPLIT: {
            static const char *const names[] = {"sep", "maxsplit", NULL};
            if (check_args(r, a, 2, names, m->name, pos)) return -1;
            JValue ms = arg(a, 1, "maxsplit", vint(-1), NULL);
            if (ms.t != V_INT) return rerr(r, pos, "maxsplit must be an integer");
            return py_split(r, s, arg(a, 0, "sep", none, NULL), ms.u.i, m->id == M_RSPLIT, pos, out);
        }
        case M_STARTSWITH: case M_ENDSWITH: {
            if (a->npos != 1 || a->nkw) return rerr(r, pos, "unsupported Jinja construct: %s() with start or end", m->name);
            JValue p = a->pos[0];
            int n = p.t == V_LIST && p.tuple ? p.u.l->n : 1, res = 0;
            for (int k = 0; k < n && !res; k++) {
                JValue q = p.t == V_LIST ? p.u.l->v[k] : p;
                if (q.t != V_STR) return rerr(r, pos, "%s first arg must be str or a tuple of str", m->name);
                const JStr *x = q.u.s;
                res = x->len <= s->len &&
                      !memcmp(m->id == M_STARTSWITH ? s->s : s->s + s->len - x->len, x->s, x->len);
            }
            return *out = vbool(res), 0;
        }
        case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE:
            if (a->npos || a->nkw) return rerr(r, pos, "%s() takes no arguments", m->name);
            return str_case(r, s, m->id == M_UPPER ? 0 : m->id == M_LOWER ? 1 : m->id == M_CAPITALIZE ? 2 : 3, out);
        case M_REPLACE: {
            if (a->npos < 2 || a->npos > 3 || a->nkw) return rerr(r, pos, "replace() takes 2 or 3 arguments");
            long long cnt = -1;
            if (a->npos == 3) {
                if (a->pos[2].t != V_INT) return rerr(r, pos, "replace() count must be an integer");
                cnt = a->pos[2].u.i;
            }
            return py_replace(r, s, a->pos[0], a->pos[1], cnt, pos, out);
        }
        case M_FIND: case M_RFIND: case M_COUNT: {
            if (a->npos != 1 || a->nkw || a->pos[0].t != V_STR)
                return rerr(r, pos, "unsupported Jinja construct: %s() other than of one string", m->name);
            const JStr *x = a->pos[0].u.s;
            if (m->id == M_COUNT) {
                long long c = 0;
                if (x->len == 0) c = (long long)cp_count(s) + 1;
                else
                    for (const char *h = s->s; (h = memmem(h, s->len - (size_t)(h - s->s), x->s, x->len)); h += x->len) c++;
                return *out = vint(c), 0;
            }
            const char *hit = NULL;
            if (m->id == M_FIND) {
                hit = memmem(s->s, s->len, x->s, x->len);
            } else {
                for (size_t j = s->len;; j--) {
                    if (j >= x->len && !memcmp(s->s + j - x->len, x->s, x->len)) {
                        hit = s->s + j - x->len;
                        break;
                    }
                    if (j == 0) break;
                }
            }
            if (!hit) return *out = vint(-1), 0;
            long long cps = 0;
            for (const char *q = s->s; q < hit; q++) cps += ((unsigned char)*q & 0xC0) != 0x80;
            return *out = vint(cps), 0;
        }
        case M_JOIN: {
            JList *l;
            if (a->npos != 1 || a->nkw) return rerr(r, pos, "join() takes one argument");
            if (iterate(r, a->pos[0], pos, &l) != 0) return -1;
            Buf b = {0};
            if (buf_put(r, &b, "", 0) != 0) return -1;
            for (int k = 0; k < l->n; k++) {
                if (l->v[k].t != V_STR)
                    return rerr(r, pos, "sequence item %d: expected str instance, %s found", k, type_name(l->v[k]));
                if ((k && buf_put(r, &b, s->s, s->len)) || buf_put(r, &b, l->v[k].u.s->s, l->v[k].u.s->len)) return -1;
            }
            return buf_value(r, &b, out);
        }
        case M_SPLITLINES: {
            JList *l;
            if (a->npos || a->nkw) return rerr(r, pos, "unsupported Jinja construct: splitlines(keepends)");
            if (py_splitlines(r, s, pos, &l) != 0) return -1;
            return *out = vlist(l, 0), 0;
        }
        case M_FORMAT: return str_format(r, s, a, pos, out);
        default: return *out = vbool(str_is(s, m->id)), 0;
        }
    }
    if (self.t == V_DICT) {
        JDict *d = self.u.d;
        if (m->id == M_GET) {
            if (a->npos < 1 || a->npos > 2 || a->nkw) return rerr(r, pos, "get() takes 1 or 2 arguments");
            int i = dict_find(r, d, a->pos[0], pos);
            if (i == -2) return -1;
            return *out = i >= 0 ? d->v[i] : a->npos == 2 ? a->pos[1] : none, 0;
        }
        if (a->npos || a->nkw) return rerr(r, pos, "%s() takes no arguments", m->name);
        JList *l = list_new(r, d->n);
        if (!l || step(r, d->n, pos)) return -1;
        for (int i = 0; i < d->n; i++) {
            if (m->id == M_ITEMS) {
                JList *pair = list_new(r, 2);
                if (!pair) return -1;
                pair->v[0] = d->k[i], pair->v[1] = d->v[i], pair->n = 2;
                l->v[i] = vlist(pair, 1);
            } else {
                l->v[i] = m->id == M_KEYS ? d->k[i] : d->v[i];
            }
        }
        l->n = d->n;
        return *out = vlist(l, 0), 0;
    }
    if (self.t == V_LIST) {
        if (a->npos != 1 || a->nkw) return rerr(r, pos, "%s() takes one argument", m->name);
        long long c = 0;
        for (int i = 0; i < self.u.l->n; i++) {
            int eq;
            if (step(r, 1, pos) || value_eq(r, self.u.l->v[i], a->pos[0], &eq, pos)) return -1;
            if (eq && m->id == M_LIST_INDEX) return *out = vint(i), 0;
            c += eq;
        }
        if (m->id == M_LIST_INDEX) return rerr(r, pos, "the value is not in the list");
        return *out = vint(c), 0;
    }
    if (self.t == V_LOOP && m->id == M_CYCLE) {
        if (a->npos == 0) return rerr(r, pos, "no items for cycling given");
        return *out = a->pos[self.u.lp->i % a->npos], 0;
    }
    return rerr(r, pos, "unknown method");
}

static int call_value(R *r, JValue fn, Args *a, unsigned pos, JValue *out) {
    switch (fn.t) {
    case V_MACRO: return call_macro(r, fn.u.m, a, pos, out);
    case V_FUNC: return call_func(r, fn.fn, a, pos, out);
    case V_METHOD: return call_method(r, fn.u.me, a, pos, out);
    case V_UNDEF: return rerr(r, pos, "%s (calling it)", fn.u.why ? fn.u.why : "undefined");
    default: return rerr(r, pos, "'%s' object is not callable", type_name(fn));
    }
}

/* ------------------------------------------------------------------ filters */

static int len_of(R *r, JValue v, unsigned pos, long long *n) {
    switch (v.t) {
    case V_STR: *n = (long long)cp_count(v.u.s); return 0;
    case V_LIST: *n = v.u.l->n; return 0;
    case V_DICT: case V_NS: *n = v.u.d->n; return 0;
    case V_UNDEF: *n = 0; return 0;
    default: return rerr(r, pos, "object of type '%s' has no len()", type_name(v));
    }
}

/* A key for sorting and min/max: the attribute (dotted path) when given, lower-cased strings unless case_sensitive. */
static int sort_key(R *r, JValue v, const JStr *attribute, int case_sensitive, unsigned pos, JValue *out) {
    if (attribute && attr_path(r, v, attribute, pos, &v) != 0) return -1;
    if (!case_sensitive && v.t == V_STR) return str_case(r, v.u.s, 1, out);
    *out = v;
    return 0;
}

static int to_int(JValue v, long long dflt, int base, JValue *out) {
    switch (v.t) {
    case V_INT: case V_BOOL: return *out = vint(v.u.i), 0;
    case V_FLOAT:
        if (isfinite(v.u.f) && fabs(v.u.f) < 9.2e18) return *out = vint((long long)v.u.f), 0;
        return *out = vint(dflt), 0;
    case V_STR: {
        /* int(s, base), else int(float(s)), else the default */
        const char *s = v.u.s->s;
        char *end;
        while (is_space((unsigned char)*s)) s++;
        errno = 0;
        long long x = strtoll(s, &end, base);
        const char *e2 = end;
        while (*e2 && is_space((unsigned char)*e2)) e2++;
        if (end != s && !*e2 && errno == 0 && !strchr(v.u.s->s, '_')) return *out = vint(x), 0;
        double f = strtod(s, &end);
        e2 = end;
        while (*e2 && is_space((unsigned char)*e2)) e2++;
        if (end != s && !*e2 && isfinite(f) && fabs(f) < 9.2e18 && !strchr(v.u.s->s, '_')) return *out = vint((long long)f), 0;
        return *out = vint(dflt), 0;
    }
    default: return *out = vint(dflt), 0;
    }
}

static int indent_filter(R *r, const JStr *s, JValue width, int first, int blank, unsigned pos, JValue *out) {
    Buf ind = {0};
    if (buf_put(r, &ind, "", 0) != 0) return -1;
    if (width.t == V_STR) {
        if (buf_put(r, &ind, width.u.s->s, width.u.s->len) != 0) return -1;
    } else if (width.t == V_INT) {
        for (long long k = 0; k < width.u.i; k++)
            if (buf_put(r, &ind, " ", 1) != 0) return -1;
    } else {
        return rerr(r, pos, "indent width must be an integer or a string");
    }
    /* s + "\n", split into lines */
    JStr *t = str_alloc(r, s->len + 1);
    if (!t) return -1;
    memcpy(t->s, s->s, s->len);
    t->s[s->len] = '\n', t->s[s->len + 1] = '\0';
    JList *lines;
    if (py_splitlines(r, t, pos, &lines) != 0) return -1;
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0) return -1;
    if (first && buf_put(r, &b, ind.p, ind.n) != 0) return -1;
    for (int k = 0; k < lines->n; k++) {
        const JStr *ln = lines->v[k].u.s;
        if (k && buf_put(r, &b, "\n", 1) != 0) return -1;
        if (k && (blank || ln->len) && buf_put(r, &b, ind.p, ind.n) != 0) return -1;
        if (buf_put(r, &b, ln->s, ln->len) != 0) return -1;
    }
    return buf_value(r, &b, out);
}

static int select_items(R *r, int id, JValue v, Args *a, unsigned pos, JValue *out) {
    JList *in, *res;
    if (!(res = list_new(r, 0))) return -1;
    if (!truthy(v)) return *out = vlist(res, 0), 0; /* jinja2 walks the value only when it is true */
    if (iterate(r, v, pos, &in) != 0) return -1;
    int attr = id == F_SELECTATTR || id == F_REJECTATTR, keep = id == F_SELECT || id == F_SELECTATTR;
    if (a->nkw) return rerr(r, pos, "unsupported Jinja construct: keyword arguments to %sselect", keep ? "" : "re");
    if (attr && (a->npos < 1 || a->pos[0].t != V_STR)) return rerr(r, pos, "an attribute name is needed");
    int ti = attr ? 1 : 0, test = -1;
    if (a->npos > ti) {
        if (a->pos[ti].t != V_STR) return rerr(r, pos, "the test's name must be a string");
        if ((test = jinja_test_id(a->pos[ti].u.s->s)) < 0)
            return rerr(r, pos, "unsupported Jinja construct: the test '%.60s'", a->pos[ti].u.s->s);
    }
    Args targs = {a->npos > ti + 1 ? a->pos + ti + 1 : NULL, a->npos > ti + 1 ? a->npos - ti - 1 : 0, NULL, NULL, 0};
    for (int k = 0; k < in->n; k++) {
        JValue item = in->v[k], x = item;
        int ok;
        if (step(r, 1, pos) != 0) return -1;
        if (attr && attr_path(r, item, a->pos[0].u.s, pos, &x) != 0) return -1;
        if (test < 0) ok = truthy(x);
        else if (apply_test(r, test, x, &targs, pos, &ok) != 0) return -1;
        if (ok == keep && list_push(r, res, item) != 0) return -1;
    }
    *out = vlist(res, 0);
    return 0;
}

/* The larger filters, each apart (apply_filter dispatches). */
static int filter_default(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    static const char *const names[] = {"default_value", "boolean", NULL};
    if (check_args(r, a, 2, names, "default", pos)) return -1;
    JValue dv, dflt = {.t = V_STR};
    if (mkstr(r, "", 0, &dflt) != 0) return -1;
    dv = arg(a, 0, "default_value", dflt, NULL);
    int boolean = truthy(arg(a, 1, "boolean", vbool(0), NULL));
    return *out = v.t == V_UNDEF || (boolean && !truthy(v)) ? dv : v, 0;
}

static int filter_dictsort(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    int given;
    static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
    if (check_args(r, a, 3, names, "dictsort", pos)) return -1;
    if (v.t != V_DICT) return rerr(r, pos, "dictsort needs a dict, not %s", type_name(v));
    int cs = truthy(arg(a, 0, "case_sensitive", vbool(0), NULL)), rev = truthy(arg(a, 2, "reverse", vbool(0), NULL));
    JValue by = arg(a, 1, "by", none, &given);
    int by_value = given && by.t == V_STR && !strcmp(by.u.s->s, "value");
    if (given && !(by.t == V_STR && (!strcmp(by.u.s->s, "key") || by_value)))
        return rerr(r, pos, "You can only sort by either \"key\" or \"value\"");
    int n = v.u.d->n, *idx = alloc(r, (size_t)(n ? n : 1) * sizeof *idx);
    JValue *keys = alloc(r, (size_t)(n ? n : 1) * sizeof *keys);
    JList *l = list_new(r, n);
    if (!idx || !keys || !l) return -1;
    for (int k = 0; k < n; k++) {
        idx[k] = k;
        if (sort_key(r, by_value ? v.u.d->v[k] : v.u.d->k[k], NULL, cs, pos, &keys[k]) != 0) return -1;
    }
    if (sort_values(r, keys, n, idx, pos, cmp_plain) != 0) return -1;
    for (int k = 0; k < n; k++) {
        int j = idx[rev ? n - 1 - k : k];
        JList *pair = list_new(r, 2);
        if (!pair) return -1;
        pair->v[0] = v.u.d->k[j], pair->v[1] = v.u.d->v[j], pair->n = 2;
        l->v[k] = vlist(pair, 1);
    }
    l->n = n;
    return *out = vlist(l, 0), 0;
}

static int filter_escape(R *r, JValue v, unsigned pos, JValue *out) {
    if (v.t == V_STR && v.tuple) return *out = v, 0;
    const JStr *s;
    if (str_of(r, v, pos, &s) != 0) return -1;
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0) return -1;
    for (size_t i = 0; i < s->len; i++) {
        const char *rep = s->s[i] == '&' ? "&amp;" : s->s[i] == '<' ? "&lt;" : s->s[i] == '>' ? "&gt;"
                        : s->s[i] == '"' ? "&#34;" : s->s[i] == '\'' ? "&#39;" : NULL;
        if (rep ? buf_puts(r, &b, rep) : buf_put(r, &b, s->s + i, 1)) return -1;
    }
    if (buf_value(r, &b, out) != 0) return -1;
    out->tuple = 1;
    return 0;
}

static int filter_float(JValue v, Args *a, JValue *out) {
    JValue d = arg(a, 0, "default", vfloat(0.0), NULL);
    if (v.t == V_FLOAT) return *out = v, 0;
    if (v.t == V_INT || v.t == V_BOOL) return *out = vfloat((double)v.u.i), 0;
    if (v.t == V_STR && !strchr(v.u.s->s, '_')) {
        const char *s = v.u.s->s;
        while (is_space((unsigned char)*s)) s++;
        char *end;
        double f = strtod(s, &end);
        const char *e2 = end;
        while (*e2 && is_space((unsigned char)*e2)) e2++;
        int hex = strchr(s, 'x') || strchr(s, 'X');
        if (end != s && !*e2 && !hex) return *out = vfloat(f), 0;
    }
    return *out = d, 0;
}

static int filter_int(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    static const char *const names[] = {"default", "base", NULL};
    if (check_args(r, a, 2, names, "int", pos)) return -1;
    JValue d = arg(a, 0, "default", vint(0), NULL), base = arg(a, 1, "base", vint(10), NULL);
    if (d.t != V_INT || base.t != V_INT || base.u.i < 2 || base.u.i > 36)
        return rerr(r, pos, "unsupported Jinja construct: int() with that default or base");
    return to_int(v, d.u.i, (int)base.u.i, out);
}

static int filter_indent(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    static const char *const names[] = {"width", "first", "blank", NULL};
    if (check_args(r, a, 3, names, "indent", pos)) return -1;
    const JStr *s;
    if (str_of(r, v, pos, &s) != 0) return -1;
    return indent_filter(r, s, arg(a, 0, "width", vint(4), NULL), truthy(arg(a, 1, "first", vbool(0), NULL)),
                         truthy(arg(a, 2, "blank", vbool(0), NULL)), pos, out);
}

static int filter_join(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    int given;
    static const char *const names[] = {"d", "attribute", NULL};
    if (check_args(r, a, 2, names, "join", pos)) return -1;
    JList *l;
    JValue sepv = arg(a, 0, "d", none, &given), at = arg(a, 1, "attribute", none, NULL);
    const JStr *sep = NULL;
    if (given && str_of(r, sepv, pos, &sep) != 0) return -1;
    if (iterate(r, v, pos, &l) != 0) return -1;
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0) return -1;
    for (int k = 0; k < l->n; k++) {
        JValue x = l->v[k];
        if (at.t == V_STR && attr_path(r, x, at.u.s, pos, &x) != 0) return -1;
        if (k && sep && buf_put(r, &b, sep->s, sep->len) != 0) return -1;
        if (step(r, 1, pos) || to_str(r, &b, x, pos)) return -1;
    }
    return buf_value(r, &b, out);
}

static int filter_map(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    int given;
    JList *l, *res;
    if (!truthy(v)) return (res = list_new(r, 0)) ? (*out = vlist(res, 0), 0) : -1;
    if (iterate(r, v, pos, &l) != 0 || !(res = list_new(r, l->n))) return -1;
    JValue at = arg(a, -1, "attribute", none, &given);
    if (given) {
        static const char *const names[] = {"attribute", "default", NULL};
        if (check_args(r, a, 0, names, "map", pos)) return -1;
        if (at.t != V_STR) return rerr(r, pos, "map's attribute must be a string");
        int have_d;
        JValue dflt = arg(a, -1, "default", none, &have_d);
        for (int k = 0; k < l->n; k++) {
            JValue x;
            if (step(r, 1, pos) || attr_path(r, l->v[k], at.u.s, pos, &x)) return -1;
            res->v[k] = have_d && x.t == V_UNDEF ? dflt : x;
        }
    } else {
        if (a->npos < 1 || a->pos[0].t != V_STR) return rerr(r, pos, "map needs a filter's name or attribute=");
        int f = jinja_filter_id(a->pos[0].u.s->s);
        if (f < 0) return rerr(r, pos, "unsupported Jinja construct: the filter '%.60s'", a->pos[0].u.s->s);
        Args fa = {a->npos > 1 ? a->pos + 1 : NULL, a->npos - 1, a->kw, a->kwv, a->nkw};
        for (int k = 0; k < l->n; k++)
            if (step(r, 1, pos) || apply_filter(r, f, l->v[k], &fa, pos, &res->v[k])) return -1;
    }
    res->n = l->n;
    return *out = vlist(res, 0), 0;
}

static int filter_minmax(R *r, int id, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    if (check_args(r, a, 2, names, id == F_MAX ? "max" : "min", pos)) return -1;
    JList *l;
    if (iterate(r, v, pos, &l) != 0) return -1;
    if (l->n == 0) return *out = undef(r, "no %s item, the sequence was empty", id == F_MAX ? "largest" : "smallest"), r->failed ? -1 : 0;
    int cs = truthy(arg(a, 0, "case_sensitive", vbool(0), NULL));
    JValue at = arg(a, 1, "attribute", none, NULL);
    int best = 0;
    JValue bk;
    if (sort_key(r, l->v[0], at.t == V_STR ? at.u.s : NULL, cs, pos, &bk) != 0) return -1;
    for (int k = 1; k < l->n; k++) {
        JValue key;
        int c;
        if (step(r, 1, pos) || sort_key(r, l->v[k], at.t == V_STR ? at.u.s : NULL, cs, pos, &key) ||
            value_cmp(r, key, bk, &c, pos))
            return -1;
        if (c != 2 && (id == F_MAX ? c > 0 : c < 0)) best = k, bk = key;
    }
    return *out = l->v[best], 0;
}

static int filter_replace(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    if (a->npos < 2 || a->npos > 3 || a->nkw) return rerr(r, pos, "replace takes 2 or 3 arguments");
    const JStr *s, *o, *nw;
    long long cnt = -1;
    if (a->npos == 3) {
        if (a->pos[2].t != V_INT) return rerr(r, pos, "replace's count must be an integer");
        cnt = a->pos[2].u.i;
    }
    if (str_of(r, v, pos, &s) || str_of(r, a->pos[0], pos, &o) || str_of(r, a->pos[1], pos, &nw)) return -1;
    return py_replace(r, s, vstr(o), vstr(nw), cnt, pos, out);
}

static int filter_round(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    int given;
    static const char *const names[] = {"precision", "method", NULL};
    if (check_args(r, a, 2, names, "round", pos)) return -1;
    JValue pr = arg(a, 0, "precision", vint(0), NULL), me = arg(a, 1, "method", none, &given);
    if (pr.t != V_INT) return rerr(r, pos, "round's precision must be an integer");
    if (!is_num(v)) return rerr(r, pos, "type %s doesn't define __round__ method", type_name(v));
    const char *mth = given && me.t == V_STR ? me.u.s->s : "common";
    double x = num(v), s = pow(10.0, (double)pr.u.i);
    if (!strcmp(mth, "common")) {
        if (v.t != V_FLOAT) return *out = vint(v.u.i), 0;
        if (pr.u.i != 0) return rerr(r, pos, "unsupported Jinja construct: round() to %lld places", pr.u.i);
        return *out = vfloat(nearbyint(x)), 0; /* half to even, as Python's round() */
    }
    if (!strcmp(mth, "ceil")) return *out = vfloat(ceil(x * s) / s), 0;
    if (!strcmp(mth, "floor")) return *out = vfloat(floor(x * s) / s), 0;
    return rerr(r, pos, "method must be common, ceil or floor");
}

static int filter_sort_unique(R *r, int id, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    static const char *const snames[] = {"reverse", "case_sensitive", "attribute", NULL};
    static const char *const unames[] = {"case_sensitive", "attribute", NULL};
    int is_sort = id == F_SORT;
    if (check_args(r, a, is_sort ? 3 : 2, is_sort ? snames : unames, is_sort ? "sort" : "unique", pos)) return -1;
    JList *l, *res;
    if (iterate(r, v, pos, &l) != 0 || !(res = list_new(r, l->n))) return -1;
    int rev = is_sort && truthy(arg(a, 0, "reverse", vbool(0), NULL));
    int cs = truthy(arg(a, is_sort ? 1 : 0, "case_sensitive", vbool(0), NULL));
    JValue at = arg(a, is_sort ? 2 : 1, "attribute", none, NULL);
    int n = l->n, *idx = alloc(r, (size_t)(n ? n : 1) * sizeof *idx);
    JValue *keys = alloc(r, (size_t)(n ? n : 1) * sizeof *keys);
    if (!idx || !keys) return -1;
    for (int k = 0; k < n; k++) {
        idx[k] = k;
        if (sort_key(r, l->v[k], at.t == V_STR ? at.u.s : NULL, cs, pos, &keys[k]) != 0) return -1;
    }
    if (is_sort) {
        if (sort_values(r, keys, n, idx, pos, cmp_plain) != 0) return -1;
        for (int k = 0; k < n; k++) res->v[k] = l->v[idx[rev ? n - 1 - k : k]];
        /* reverse=True sorts descending, stable among equals as Python's sorted(reverse=True) */
        if (rev) {
            int k = 0;
            while (k < n) {
                int j = k + 1, eq = 1;
                while (j < n) {
                    if (value_eq(r, keys[idx[n - 1 - k]], keys[idx[n - 1 - j]], &eq, pos) != 0) return -1;
                    if (!eq) break;
                    j++;
                }
                for (int x = k, y = j - 1; x < y; x++, y--) {
                    JValue t = res->v[x];
                    res->v[x] = res->v[y], res->v[y] = t;
                }
                k = j;
            }
        }
        res->n = n;
    } else {
        for (int k = 0; k < n; k++) {
            int seen = 0;
            for (int j = 0; j < k && !seen; j++)
                if (step(r, 1, pos) || value_eq(r, keys[k], keys[j], &seen, pos)) return -1;
            if (!seen) res->v[res->n++] = l->v[k];
        }
    }
    return *out = vlist(res, 0), 0;
}

static int filter_sum(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    static const char *const names[] = {"attribute", "start", NULL};
    if (check_args(r, a, 2, names, "sum", pos)) return -1;
    JList *l;
    if (iterate(r, v, pos, &l) != 0) return -1;
    JValue at = arg(a, 0, "attribute", none, NULL), acc = arg(a, 1, "start", vint(0), NULL);
    for (int k = 0; k < l->n; k++) {
        JValue x = l->v[k];
        if (at.t == V_STR && attr_path(r, x, at.u.s, pos, &x) != 0) return -1;
        if (step(r, 1, pos) || arith(r, OP_ADD, acc, x, pos, &acc)) return -1;
    }
    return *out = acc, 0;
}

static int filter_tojson(R *r, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    if (check_args(r, a, 4, names, "tojson", pos)) return -1;
    JsonFmt f = {NULL, ", ", ": ", 0, 0};
    f.ensure_ascii = truthy(arg(a, 0, "ensure_ascii", vbool(0), NULL));
    JValue ind = arg(a, 1, "indent", none, NULL), seps = arg(a, 2, "separators", none, NULL);
    f.sort_keys = truthy(arg(a, 3, "sort_keys", vbool(0), NULL));
    Buf ib = {0};
    if (ind.t == V_INT) {
        if (buf_put(r, &ib, "", 0) != 0) return -1;
        for (long long k = 0; k < ind.u.i; k++)
            if (buf_put(r, &ib, " ", 1) != 0) return -1;
        f.indent = ib.p, f.item_sep = ",";
    } else if (ind.t == V_STR) {
        f.indent = ind.u.s->s, f.item_sep = ",";
    } else if (ind.t != V_NONE) {
        return rerr(r, pos, "tojson's indent must be an integer or a string");
    }
    if (seps.t == V_LIST) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].t != V_STR || seps.u.l->v[1].t != V_STR)
            return rerr(r, pos, "tojson's separators must be two strings");
        f.item_sep = seps.u.l->v[0].u.s->s, f.key_sep = seps.u.l->v[1].u.s->s;
    } else if (seps.t != V_NONE) {
        return rerr(r, pos, "tojson's separators must be two strings");
    }
    Buf b = {0};
    if (buf_put(r, &b, "", 0) != 0 || json_dump(r, &b, v, &f, 0, pos) != 0) return -1;
    return buf_value(r, &b, out);
}

static int apply_filter(R *r, int id, JValue v, Args *a, unsigned pos, JValue *out) {
    JValue none = vnone();
    switch (id) {
    case F_ABS:
        if (v.t == V_FLOAT) return *out = vfloat(fabs(v.u.f)), 0;
        if (v.t == V_INT || v.t == V_BOOL) {
            if (v.u.i == LLONG_MIN) return rerr(r, pos, "unsupported Jinja construct: an integer beyond 64 bits");
            return *out = vint(v.u.i < 0 ? -v.u.i : v.u.i), 0;
        }
        return rerr(r, pos, "bad operand type for abs(): '%s'", type_name(v));
    case F_ATTR: {
        if (a->npos != 1 || a->pos[0].t != V_STR) return rerr(r, pos, "attr() takes an attribute name");
        int m = method_id(v, a->pos[0].u.s->s);
        if (m >= 0) return *out = method(r, v, m, a->pos[0].u.s->s), r->failed ? -1 : 0;
        if (v.t == V_LOOP || v.t == V_NS) return get_attr(r, v, a->pos[0].u.s, pos, out);
        *out = undef(r, "'%s' object has no attribute '%.60s'", type_name(v), a->pos[0].u.s->s);
        return r->failed ? -1 : 0;
    }
    case F_CAPITALIZE: case F_LOWER: case F_UPPER: case F_TITLE: {
        const JStr *s;
        if (str_of(r, v, pos, &s) != 0) return -1;
        return str_case(r, s, id == F_UPPER ? 0 : id == F_LOWER ? 1 : id == F_CAPITALIZE ? 2 : 4, out);
    }
    case F_DEFAULT:
        return filter_default(r, v, a, pos, out);
    case F_DICTSORT:
        return filter_dictsort(r, v, a, pos, out);
    case F_ESCAPE:
        return filter_escape(r, v, pos, out);
    case F_SAFE: {
        const JStr *s;
        if (str_of(r, v, pos, &s) != 0) return -1;
        *out = vstr(s);
        out->tuple = 1;
        return 0;
    }
    case F_FIRST: case F_LAST: {
        JList *l;
        if (iterate(r, v, pos, &l) != 0) return -1;
        if (l->n == 0) return *out = undef(r, "no %s item, the sequence was empty", id == F_FIRST ? "first" : "last"), r->failed ? -1 : 0;
        return *out = l->v[id == F_FIRST ? 0 : l->n - 1], 0;
    }
    case F_FLOAT:
        return filter_float(v, a, out);
    case F_INT:
        return filter_int(r, v, a, pos, out);
    case F_INDENT:
        return filter_indent(r, v, a, pos, out);
    case F_ITEMS: {
        if (v.t == V_UNDEF) {
            JList *l = list_new(r, 0);
            return l ? (*out = vlist(l, 0), 0) : -1;
        }
        if (v.t != V_DICT) return rerr(r, pos, "can only get item pairs from a mapping");
        JMethod m = {v, M_ITEMS, "items"};
        Args none_args = {0};
        return call_method(r, &m, &none_args, pos, out);
    }
    case F_JOIN:
        return filter_join(r, v, a, pos, out);
    case F_LENGTH: {
        long long n = 0;
        if (len_of(r, v, pos, &n) != 0) return -1;
        return *out = vint(n), 0;
    }
    case F_LIST: {
        JList *l, *c;
        if (iterate(r, v, pos, &l) != 0 || !(c = list_new(r, l->n))) return -1;
        if (l->n) memcpy(c->v, l->v, (size_t)l->n * sizeof *c->v);
        c->n = l->n;
        return *out = vlist(c, 0), 0;
    }
    case F_MAP:
        return filter_map(r, v, a, pos, out);
    case F_MAX: case F_MIN:
        return filter_minmax(r, id, v, a, pos, out);
    case F_SELECT: case F_REJECT: case F_SELECTATTR: case F_REJECTATTR: return select_items(r, id, v, a, pos, out);
    case F_REPLACE:
        return filter_replace(r, v, a, pos, out);
    case F_REVERSE: {
        if (v.t == V_STR) {
            JValue sv[3] = {vnone(), vnone(), vint(-1)};
            return get_slice(r, v, sv, pos, out);
        }
        JList *l, *c;
        if (iterate(r, v, pos, &l) != 0 || !(c = list_new(r, l->n))) return -1;
        for (int k = 0; k < l->n; k++) c->v[k] = l->v[l->n - 1 - k];
        c->n = l->n;
        return *out = vlist(c, 0), 0;
    }
    case F_ROUND:
        return filter_round(r, v, a, pos, out);
    case F_SORT: case F_UNIQUE:
        return filter_sort_unique(r, id, v, a, pos, out);
    case F_STRING: {
        if (v.t == V_STR) return *out = v, 0;
        const JStr *s;
        if (str_of(r, v, pos, &s) != 0) return -1;
        return *out = vstr(s), 0;
    }
    case F_SUM:
        return filter_sum(r, v, a, pos, out);
    case F_TOJSON:
        return filter_tojson(r, v, a, pos, out);
    case F_TRIM: {
        static const char *const names[] = {"chars", NULL};
        if (check_args(r, a, 1, names, "trim", pos)) return -1;
        const JStr *s;
        if (str_of(r, v, pos, &s) != 0) return -1;
        int markup = v.t == V_STR && v.tuple;
        if (py_strip(r, s, arg(a, 0, "chars", none, NULL), 3, pos, out) != 0) return -1;
        out->tuple = (unsigned char)markup;
        return 0;
    }
    }
    return rerr(r, pos, "unknown filter");
}

/* ------------------------------------------------------------------ tests */

static int apply_test(R *r, int id, JValue v, Args *a, unsigned pos, int *res) {
    JValue o = a->npos ? a->pos[0] : UNDEF;
    int needs = id == T_DIVISIBLEBY || id == T_EQ || id == T_NE || id == T_LT || id == T_LE || id == T_GT ||
                id == T_GE || id == T_IN || id == T_SAMEAS;
    if (a->nkw || a->npos > (needs ? 1 : 0) || (needs && a->npos < 1))
        return rerr(r, pos, "the test takes %s argument", needs ? "one" : "no");
    switch (id) {
    case T_DEFINED: *res = v.t != V_UNDEF; return 0;
    case T_UNDEFINED: *res = v.t == V_UNDEF; return 0;
    case T_NONE: *res = v.t == V_NONE; return 0;
    case T_STRING: *res = v.t == V_STR; return 0;
    case T_NUMBER: *res = is_num(v); return 0;
    case T_INTEGER: *res = v.t == V_INT; return 0;
    case T_FLOAT: *res = v.t == V_FLOAT; return 0;
    case T_MAPPING: *res = v.t == V_DICT; return 0;
    case T_SEQUENCE: *res = v.t == V_STR || v.t == V_LIST || v.t == V_DICT; return 0;
    case T_ITERABLE: *res = v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF; return 0;
    case T_BOOLEAN: *res = v.t == V_BOOL; return 0;
    case T_TRUE: *res = v.t == V_BOOL && v.u.i; return 0;
    case T_FALSE: *res = v.t == V_BOOL && !v.u.i; return 0;
    case T_CALLABLE: *res = v.t == V_MACRO || v.t == V_FUNC || v.t == V_METHOD; return 0;
    case T_ODD: case T_EVEN:
        if (v.t != V_INT && v.t != V_BOOL) return rerr(r, pos, "odd/even need an integer, not %s", type_name(v));
        *res = (v.u.i & 1) == (id == T_ODD);
        return 0;
    case T_DIVISIBLEBY: {
        JValue m;
        if (arith(r, OP_MOD, v, o, pos, &m) != 0) return -1;
        *res = num(m) == 0;
        return 0;
    }
    case T_EQ: return compare(r, CMP_EQ, v, o, pos, res);
    case T_NE: return compare(r, CMP_NE, v, o, pos, res);
    case T_LT: return compare(r, CMP_LT, v, o, pos, res);
    case T_LE: return compare(r, CMP_LE, v, o, pos, res);
    case T_GT: return compare(r, CMP_GT, v, o, pos, res);
    case T_GE: return compare(r, CMP_GE, v, o, pos, res);
    case T_IN: return in_op(r, v, o, pos, res);
    case T_SAMEAS:
        if (v.t != o.t) *res = 0;
        else if (v.t == V_NONE || v.t == V_UNDEF) *res = 1;
        else if (v.t == V_BOOL) *res = v.u.i == o.u.i;
        else if (v.t == V_INT) *res = v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256; /* CPython's cached ints */
        else if (v.t == V_STR) *res = v.u.s == o.u.s;
        else if (v.t == V_LIST) *res = v.u.l == o.u.l;
        else if (v.t == V_DICT || v.t == V_NS) *res = v.u.d == o.u.d;
        else *res = 0;
        return 0;
    case T_LOWER: case T_UPPER: {
        const JStr *s;
        if (str_of(r, v, pos, &s) != 0) return -1;
        *res = str_is(s, id == T_LOWER ? M_ISLOWER : M_ISUPPER);
        return 0;
    }
    case T_ESCAPED: *res = v.t == V_STR && v.tuple; return 0;
    }
    return rerr(r, pos, "unknown test");
}

/* ------------------------------------------------------------------ statements */

static int assign(R *r, const JTarget *tg, JValue v, Frame *f, unsigned pos) {
    if (tg->attr) {
        JValue ns;
        if (!frame_get(f, tg->syms[0], &ns)) ns = UNDEF;
        if (ns.t != V_NS) return rerr(r, pos, "cannot assign an attribute of a non-namespace object");
        if (tg->attr->s[0] == '_')
            return rerr(r, pos, "a namespace's attribute cannot start with '_' ('%.60s')", tg->attr->s);
        return dict_set(r, ns.u.d, vstr(tg->attr), v, pos);
    }
    if (!tg->tuple) return frame_set(r, f, tg->syms[0], v);
    JList *l;
    if (iterate(r, v, pos, &l) != 0) return -1;
    if (l->n != tg->n)
        return rerr(r, pos, l->n < tg->n ? "not enough values to unpack (expected %d, got %d)"
                                         : "too many values to unpack (expected %d, got %d)", tg->n, l->n);
    for (int k = 0; k < tg->n; k++)
        if (frame_set(r, f, tg->syms[k], l->v[k]) != 0) return -1;
    return 0;
}

/* 0, -1 error, 1 break, 2 continue */
static int exec_stmt(R *r, const JStmt *s, Frame *f) {
    JValue v;
    if (step(r, 1, s->pos) != 0) return -1;
    switch (s->kind) {
    case S_DATA: return buf_put(r, r->out, s->u.data->s, s->u.data->len);
    case S_OUTPUT: return eval(r, s->u.x, &v) || to_str(r, r->out, v, s->pos) ? -1 : 0;
    case S_IF:
        for (int k = 0; k < s->u.ifs.n; k++) {
            if (eval(r, s->u.ifs.tests[k], &v) != 0) return -1;
            if (truthy(v)) return exec_body(r, &s->u.ifs.bodies[k], f);
        }
        return exec_body(r, &s->u.ifs.els, f);
    case S_FOR: {
        JList *items, *kept;
        if (eval(r, s->u.loop.iter, &v) != 0 || iterate(r, v, s->pos, &items) != 0) return -1;
        if (s->u.loop.filter) {
            /* filtered first: loop.length and loop.last count the kept items */
            if (!(kept = list_new(r, 0))) return -1;
            Frame *it = frame_new(r, f); /* expressions define no macros: one frame serves every item */
            if (!it) return -1;
            for (int k = 0; k < items->n; k++) {
                JValue t;
                it->n = 0;
                if (step(r, 1, s->pos) || assign(r, &s->u.loop.target, items->v[k], it, s->pos)) return -1;
                Frame *saved = r->cur;
                r->cur = it;
                int rc = eval(r, s->u.loop.filter, &t);
                r->cur = saved;
                if (rc != 0) return -1;
                if (truthy(t) && list_push(r, kept, items->v[k]) != 0) return -1;
            }
            items = kept;
        }
        if (items->n == 0) return exec_body(r, &s->u.loop.els, f);
        JLoop *lp = alloc(r, sizeof *lp);
        if (!lp) return -1;
        lp->items = items;
        r->loops++;
        Frame *it = NULL;
        for (int k = 0; k < items->n; k++) {
            /* each iteration starts from the enclosing frame's names (jinja2's loop scoping): the
             * previous iteration's frame is emptied and reused unless a macro defined in it keeps it */
            if (!it || it->captured) it = frame_new(r, f);
            else it->n = 0;
            JValue lv = {.t = V_LOOP};
            lv.u.lp = lp;
            lp->i = k;
            if (!it || step(r, 1, s->pos) || assign(r, &s->u.loop.target, items->v[k], it, s->pos) ||
                frame_set(r, it, SYM_LOOP, lv)) {
                r->loops--;
                return -1;
            }
            int rc = exec_body(r, &s->u.loop.body, it);
            if (rc < 0) {
                r->loops--;
                return -1;
            }
            if (rc == 1) break;
        }
        r->loops--;
        return 0;
    }
    case S_SET:
        if (eval(r, s->u.set.x, &v) != 0) return -1;
        return assign(r, &s->u.set.target, v, f, s->pos);
    case S_SETBLOCK: {
        if (render_capture(r, &s->u.setblock.body, f, &v) != 0) return -1;
        if (s->u.setblock.filter) {
            JValue saved = r->block;
            r->block = v;
            int rc = eval(r, s->u.setblock.filter, &v);
            r->block = saved;
            if (rc != 0) return -1;
        }
        return assign(r, &s->u.setblock.target, v, f, s->pos);
    }
    case S_MACRO: {
        JClosure *c = alloc(r, sizeof *c);
        if (!c) return -1;
        c->m = s->u.macro.m, c->env = f;
        f->captured = 1;
        JValue mv = {.t = V_MACRO};
        mv.u.m = c;
        return frame_set(r, f, s->u.macro.sym, mv);
    }
    case S_BREAK: case S_CONTINUE:
        if (r->loops == 0) return rerr(r, s->pos, "'%s' outside a loop", s->kind == S_BREAK ? "break" : "continue");
        return s->kind == S_BREAK ? 1 : 2;
    case S_BODY: return exec_body(r, &s->u.body, f);
    case S_FILTERBLOCK: {
        if (render_capture(r, &s->u.filterblock.body, f, &v) != 0) return -1;
        JValue saved = r->block;
        r->block = v;
        int rc = eval(r, s->u.filterblock.filter, &v);
        r->block = saved;
        return rc || to_str(r, r->out, v, s->pos) ? -1 : 0;
    }
    case S_CALLBLOCK: {
        const JExpr *call = s->u.callblock.call;
        JValue fn;
        Args args;
        JClosure *c = alloc(r, sizeof *c);
        if (!c || eval(r, call->u.call.fn, &fn) != 0 || eval_args(r, &call->u.call.a, &args) != 0) return -1;
        c->m = s->u.callblock.caller, c->env = f;
        f->captured = 1;
        /* the body goes in as the keyword argument caller */
        const JStr **kw = alloc(r, (size_t)(args.nkw + 1) * sizeof *kw);
        JValue *kwv = alloc(r, (size_t)(args.nkw + 1) * sizeof *kwv);
        JValue cv = {.t = V_MACRO};
        if (!kw || !kwv) return -1;
        if (args.nkw) {
            memcpy(kw, args.kw, (size_t)args.nkw * sizeof *kw);
            memcpy(kwv, args.kwv, (size_t)args.nkw * sizeof *kwv);
        }
        JValue caller_name;
        if (mkstr(r, "caller", 6, &caller_name) != 0) return -1;
        cv.u.m = c;
        kw[args.nkw] = caller_name.u.s, kwv[args.nkw] = cv;
        args.kw = kw, args.kwv = kwv, args.nkw++;
        return call_value(r, fn, &args, s->pos, &v) || to_str(r, r->out, v, s->pos) ? -1 : 0;
    }
    }
    return rerr(r, s->pos, "unknown statement");
}

static int exec_body(R *r, const JBody *b, Frame *f) {
    if (++r->rec > MAX_RECURSION) return rerr(r, 0, "blocks nested deeper than %d", MAX_RECURSION);
    Frame *saved = r->cur;
    r->cur = f;
    int rc = 0;
    for (int k = 0; k < b->n && rc == 0; k++) rc = exec_stmt(r, b->s[k], f);
    r->cur = saved;
    r->rec--;
    return rc;
}

/* ------------------------------------------------------------------ variables */

static int from_json(R *r, const cJSON *j, JValue *out, int depth) {
    if (depth > 200) return rerr(r, 0, "the variables are nested deeper than 200");
    if (cJSON_IsNull(j)) return *out = vnone(), 0;
    if (cJSON_IsBool(j)) return *out = vbool(cJSON_IsTrue(j)), 0;
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) <= 9007199254740992.0) return *out = vint((long long)d), 0;
        return *out = vfloat(d), 0;
    }
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        long bad = av_utf8_invalid_at(j->valuestring, n);
        if (bad >= 0) return rerr(r, 0, "a variable's text is not UTF-8 (byte %ld)", bad);
        return mkstr(r, j->valuestring, n, out);
    }
    if (cJSON_IsArray(j)) {
        JList *l = list_new(r, 0);
        if (!l) return -1;
        for (const cJSON *c = j->child; c; c = c->next) {
            JValue v;
            if (from_json(r, c, &v, depth + 1) != 0 || list_push(r, l, v) != 0) return -1;
        }
        return *out = vlist(l, 0), 0;
    }
    if (cJSON_IsObject(j)) {
        JDict *d = dict_new(r);
        if (!d) return -1;
        for (const cJSON *c = j->child; c; c = c->next) {
            JValue k, v;
            if (mkstr(r, c->string, strlen(c->string), &k) != 0 || from_json(r, c, &v, depth + 1) != 0 ||
                dict_set(r, d, k, v, 0) != 0)
                return -1;
        }
        return *out = vdict(d, 0), 0;
    }
    return rerr(r, 0, "a variable of an unknown JSON type");
}

/* The symbol of a name the template uses, or -1 (a variable it never names cannot matter). */
static int sym_lookup(const JinjaTemplate *t, const char *name) {
    for (int k = 0; k < t->nsyms; k++)
        if (!strcmp(t->syms[k]->s, name)) return k;
    return -1;
}

int jinja_render(const JinjaTemplate *t, const cJSON *vars, const JinjaOpts *o, char **out, size_t *len, AvErr *e) {
    JinjaOpts dflt;
    if (!o) {
        jinja_opts_default(&dflt);
        o = &dflt;
    }
    *out = NULL;
    if (len) *len = 0;
    R r = {0};
    r.t = t, r.o = o, r.e = e;
    r.a.limit = o->max_memory;
    r.now = o->now ? o->now : time(NULL);
    Buf b = {0};
    int rc = -1;
    if (!(r.global = frame_new(&r, NULL)) || buf_put(&r, &b, "", 0) != 0) goto done;
    if (vars && !cJSON_IsObject(vars)) {
        rerr(&r, 0, "the variables must be a JSON object");
        goto done;
    }
    for (const cJSON *c = vars ? vars->child : NULL; c; c = c->next) {
        int sym = sym_lookup(t, c->string);
        JValue v;
        if (sym < 0) continue;
        if (from_json(&r, c, &v, 0) != 0 || frame_set(&r, r.global, sym, v) != 0) goto done;
    }
    r.out = &b;
    r.cur = r.global;
    int x = exec_body(&r, &t->body, r.global);
    if (x != 0) {
        if (x > 0) rerr(&r, 0, "break or continue outside a loop");
        goto done;
    }
    if (!(*out = malloc(b.n + 1))) {
        av_err(e, "%s: out of memory", t->origin);
        goto done;
    }
    memcpy(*out, b.p, b.n + 1);
    if (len) *len = b.n;
    rc = 0;
done:
    if (rc != 0 && !r.failed) av_err(e, "%s: cannot render the chat template", t->origin);
    ja_free(&r.a);
    return rc;
}
