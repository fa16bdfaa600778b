/* jinja_parse.c — a chat template's source into statements and expressions
 * (jinja_ast.h), lexed and parsed as jinja2 3.1's Lexer and Parser do with
 * transformers' settings: newlines normalized and one trailing newline dropped,
 * trim_blocks (the newline after a block or comment tag goes), lstrip_blocks
 * (spaces and tabs from the start of a line to a block or comment tag go),
 * "-" and "+" whitespace control, string literals unescaped as Python's
 * unicode-escape does, and jinja2's operator precedence (filters and tests bind
 * tighter than arithmetic, unary minus tighter than **). Bounded: source size,
 * block and expression nesting. Anything outside the subset stops here with
 * the construct's name and position, before a render begins. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "jinja_ast.h"
#include "util.h"

/* Blocks nested in blocks, and parentheses, lists and calls nested in
 * expressions; an expression's tree depth (long chains such as a + b + c ...
 * nest to the left without parentheses) is bounded separately. */
#define MAX_NESTING 64
#define MAX_EXPR_DEPTH 256

/* ------------------------------------------------------------------ memory */

struct JChunk {
    JChunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *ja_alloc(JArena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    JChunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 60000 ? n : 65536 - sizeof(JChunk);
        if (a->limit && a->total + cap > a->limit) return NULL;
        c = malloc(sizeof(JChunk) + cap);
        if (!c) return NULL;
        c->next = a->head, c->used = 0, c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void ja_free(JArena *a) {
    for (JChunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* ------------------------------------------------------------------ names */

static const char *const FILTER_NAMES[F_N] = {
    [F_ABS] = "abs", [F_ATTR] = "attr", [F_CAPITALIZE] = "capitalize", [F_DEFAULT] = "default",
    [F_DICTSORT] = "dictsort", [F_ESCAPE] = "escape", [F_FIRST] = "first", [F_FLOAT] = "float",
    [F_INDENT] = "indent", [F_INT] = "int", [F_ITEMS] = "items", [F_JOIN] = "join", [F_LAST] = "last",
    [F_LENGTH] = "length", [F_LIST] = "list", [F_LOWER] = "lower", [F_MAP] = "map", [F_MAX] = "max",
    [F_MIN] = "min", [F_REJECT] = "reject", [F_REJECTATTR] = "rejectattr", [F_REPLACE] = "replace",
    [F_REVERSE] = "reverse", [F_ROUND] = "round", [F_SAFE] = "safe", [F_SELECT] = "select",
    [F_SELECTATTR] = "selectattr", [F_SORT] = "sort", [F_STRING] = "string", [F_SUM] = "sum", [F_TITLE] = "title",
    [F_TOJSON] = "tojson", [F_TRIM] = "trim", [F_UNIQUE] = "unique", [F_UPPER] = "upper",
};

int jinja_filter_id(const char *name) {
    if (!strcmp(name, "d")) return F_DEFAULT;
    if (!strcmp(name, "e")) return F_ESCAPE;
    if (!strcmp(name, "count")) return F_LENGTH;
    for (int i = 0; i < F_N; i++)
        if (!strcmp(name, FILTER_NAMES[i])) return i;
    return -1;
}

int jinja_test_id(const char *name) {
    static const struct {
        const char *name;
        int id;
    } T[] = {
        {"defined", T_DEFINED}, {"undefined", T_UNDEFINED}, {"none", T_NONE}, {"string", T_STRING},
        {"number", T_NUMBER}, {"integer", T_INTEGER}, {"float", T_FLOAT}, {"mapping", T_MAPPING},
        {"sequence", T_SEQUENCE}, {"iterable", T_ITERABLE}, {"boolean", T_BOOLEAN}, {"true", T_TRUE},
        {"false", T_FALSE}, {"callable", T_CALLABLE}, {"odd", T_ODD}, {"even", T_EVEN},
        {"divisibleby", T_DIVISIBLEBY}, {"eq", T_EQ}, {"equalto", T_EQ}, {"==", T_EQ}, {"ne", T_NE},
        {"!=", T_NE}, {"lt", T_LT}, {"lessthan", T_LT}, {"<", T_LT}, {"le", T_LE}, {"<=", T_LE}, {"gt", T_GT},
        {"greaterthan", T_GT}, {">", T_GT}, {"ge", T_GE}, {">=", T_GE}, {"in", T_IN}, {"sameas", T_SAMEAS},
        {"lower", T_LOWER}, {"upper", T_UPPER}, {"escaped", T_ESCAPED},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(name, T[i].name)) return T[i].id;
    return -1;
}

/* ------------------------------------------------------------------ positions */

void jinja_where(const JinjaTemplate *t, unsigned pos, char *buf, size_t len) {
    unsigned line = 1, col = 1;
    for (size_t i = 0; i < pos && i < t->src_len; i++) {
        unsigned char c = (unsigned char)t->src[i];
        if (c == '\n') line++, col = 1;
        else if ((c & 0xC0) != 0x80) col++; /* columns count characters, not bytes */
    }
    snprintf(buf, len, "%s:%u:%u", t->origin, line, col);
}

typedef struct {
    JinjaTemplate *t;
    AvErr *e;
    int failed;
} Ctx;

__attribute__((format(printf, 3, 4))) static int perr(Ctx *c, unsigned pos, const char *fmt, ...) {
    if (c->failed) return -1;
    char where[600], msg[400];
    jinja_where(c->t, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = 1;
    return av_err(c->e, "%s: %.1000s", where, msg);
}

static int oom(Ctx *c) {
    if (c->failed) return -1;
    c->failed = 1;
    return av_err(c->e, "%s: out of memory while parsing the template", c->t->origin);
}

static JStr *mkstr(Ctx *c, const char *s, size_t n) {
    JStr *r = ja_alloc(&c->t->arena, sizeof(JStr) + n + 1);
    if (!r) {
        oom(c);
        return NULL;
    }
    r->len = n;
    memcpy(r->s, s, n);
    r->s[n] = '\0';
    return r;
}

/* ------------------------------------------------------------------ unicode whitespace */

/* The length of the whitespace character at s (Python's str.isspace(), which
 * its regular expressions' \s and str.strip() use), or 0. */
static int ws_len(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (n == 0) return 0;
    if (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80) return 0;
    unsigned cp;
    int k;
    if ((c & 0xE0) == 0xC0 && n >= 2) cp = (c & 0x1Fu) << 6 | ((unsigned char)s[1] & 0x3Fu), k = 2;
    else if ((c & 0xF0) == 0xE0 && n >= 3)
        cp = (c & 0x0Fu) << 12 | ((unsigned char)s[1] & 0x3Fu) << 6 | ((unsigned char)s[2] & 0x3Fu), k = 3;
    else return 0;
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return k;
    return 0;
}

/* Length of text[0..n) without its trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t st = end - 1; /* start of the last character */
        while (st > 0 && ((unsigned char)s[st] & 0xC0) == 0x80) st--;
        if (ws_len(s + st, end - st) != (int)(end - st)) break;
        end = st;
    }
    return end;
}

static size_t skip_ws(const char *s, size_t n, size_t p) {
    int k;
    while (p < n && (k = ws_len(s + p, n - p)) > 0) p += (size_t)k;
    return p;
}

/* ------------------------------------------------------------------ lexer */

typedef enum { K_DATA, K_VBEGIN, K_VEND, K_BBEGIN, K_BEND, K_NAME, K_STRING, K_INT, K_FLOAT, K_OP, K_EOF } TKind;
typedef enum {
    O_ADD, O_SUB, O_DIV, O_FLOORDIV, O_MUL, O_MOD, O_POW, O_TILDE, O_LBRACKET, O_RBRACKET, O_LPAREN, O_RPAREN,
    O_LBRACE, O_RBRACE, O_EQ, O_NE, O_GT, O_GE, O_LT, O_LE, O_ASSIGN, O_DOT, O_COLON, O_PIPE, O_COMMA, O_SEMICOLON
} TOp;
static const char *const OP_TEXT[] = {"+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")", "{", "}",
                                      "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";"};

typedef struct {
    unsigned char kind, op;
    unsigned pos;
    const JStr *s; /* K_DATA, K_NAME, K_STRING */
    long long i;
    double f;
} Tok;

typedef struct {
    Ctx *c;
    const char *s;
    size_t n;
    Tok *v;
    int nv, cap;
} Lex;

static int emit(Lex *L, TKind k, unsigned pos, Tok **out) {
    if (L->nv == L->cap) {
        int cap = L->cap ? L->cap * 2 : 256;
        Tok *v = realloc(L->v, (size_t)cap * sizeof *v);
        if (!v) return oom(L->c);
        L->v = v, L->cap = cap;
    }
    Tok *t = &L->v[L->nv++];
    memset(t, 0, sizeof *t);
    t->kind = (unsigned char)k, t->pos = pos;
    if (out) *out = t;
    return 0;
}

static int emit_data(Lex *L, size_t from, size_t len) {
    if (len == 0) return 0;
    Tok *t;
    if (emit(L, K_DATA, (unsigned)from, &t) != 0) return -1;
    return (t->s = mkstr(L->c, L->s + from, len)) ? 0 : -1;
}

/* lstrip_blocks: the text before a block or comment tag loses the spaces from
 * its last line start, when nothing else is on that line. */
static size_t lstrip_text(const char *s, size_t from, size_t len, int line_starting) {
    size_t l = len;
    while (l > 0 && s[from + l - 1] != '\n') l--;
    if (l == 0 && !line_starting) return len;
    if (l == len) return len; /* \s+ needs at least one character */
    return skip_ws(s + from, len, l) == len ? l : len;
}

static int is_hex(char c) { return isxdigit((unsigned char)c) != 0; }

static int put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F)), o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string literal's body s[0..n) unescaped as Python's
 * value.encode("ascii", "backslashreplace").decode("unicode-escape"). */
static const JStr *unescape(Lex *L, const char *s, size_t n, unsigned pos) {
    char *o = malloc(n * 3 + 16);
    if (!o) return oom(L->c), NULL;
    size_t k = 0;
    const JStr *r = NULL;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            o[k++] = s[i++];
            continue;
        }
        unsigned char c = (unsigned char)s[i + 1]; /* the lexer's pattern guarantees one */
        i += 2;
        unsigned cp = 0;
        int digits = 0;
        switch (c) {
        case '\n': continue; /* a backslash-newline joins lines */
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = '\a'; continue;
        case 'b': o[k++] = '\b'; continue;
        case 'f': o[k++] = '\f'; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = '\v'; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N': perr(L->c, pos, "unsupported Jinja construct: \\N{...} escape in a string"); goto done;
        default:
            if (c >= '0' && c <= '7') {
                cp = c - '0';
                for (int d = 0; d < 2 && i < n && s[i] >= '0' && s[i] <= '7'; d++) cp = cp * 8 + (unsigned)(s[i++] - '0');
                if (cp == 0) {
                    perr(L->c, pos, "a NUL character in a string literal");
                    goto done;
                }
                k += (size_t)put_utf8(o + k, cp);
                continue;
            }
            if (c >= 0x80) {
                /* backslashreplace spelled the character as \xNN, \uNNNN or \UNNNNNNNN, and the
                 * backslash before it escapes that spelling's backslash */
                unsigned ch;
                int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
                ch = len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
                for (int d = 1; d < len; d++) ch = ch << 6 | ((unsigned char)s[i - 1 + d] & 0x3Fu);
                i += (size_t)len - 1;
                k += (size_t)sprintf(o + k, ch < 0x100 ? "\\x%02x" : ch < 0x10000 ? "\\u%04x" : "\\U%08x", ch);
                continue;
            }
            o[k++] = '\\';
            o[k++] = (char)c;
            continue;
        }
        for (int d = 0; d < digits; d++, i++) {
            if (i >= n || !is_hex(s[i])) {
                perr(L->c, pos, "truncated \\%c escape in a string literal", c);
                goto done;
            }
            cp = cp * 16 + (unsigned)(isdigit((unsigned char)s[i]) ? s[i] - '0' : (tolower((unsigned char)s[i]) - 'a' + 10));
        }
        if (cp > 0x10FFFF) {
            perr(L->c, pos, "\\U escape out of range in a string literal");
            goto done;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            perr(L->c, pos, "unsupported Jinja construct: a surrogate escape (\\u%04x) in a string", cp);
            goto done;
        }
        if (cp == 0) {
            perr(L->c, pos, "a NUL character in a string literal");
            goto done;
        }
        k += (size_t)put_utf8(o + k, cp);
    }
    r = mkstr(L->c, o, k);
done:
    free(o);
    return r;
}

/* Whether s[p..] starts a block-end ("+%}", "-%}" + whitespace, "%}" + one newline)
 * or a variable-end ("-}}" + whitespace, "}}"); *end gets where the match ends. */
static int match_end(const char *s, size_t n, size_t p, int block, size_t *end) {
    if (block) {
        if (p + 3 <= n && s[p] == '+' && s[p + 1] == '%' && s[p + 2] == '}') return *end = p + 3, 1;
        if (p + 3 <= n && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') return *end = skip_ws(s, n, p + 3), 1;
        if (p + 2 <= n && s[p] == '%' && s[p + 1] == '}') return *end = p + 2 + (p + 2 < n && s[p + 2] == '\n'), 1;
        return 0;
    }
    if (p + 3 <= n && s[p] == '-' && s[p + 1] == '}' && s[p + 2] == '}') return *end = skip_ws(s, n, p + 3), 1;
    if (p + 2 <= n && s[p] == '}' && s[p + 1] == '}') return *end = p + 2, 1;
    return 0;
}

/* The digits of a number with "_" separators ((\d+_)*\d+), from p; 0 when none. */
static size_t digits_us(const char *s, size_t n, size_t p) {
    size_t q = p;
    if (q >= n || !isdigit((unsigned char)s[q])) return 0;
    for (;;) {
        while (q < n && isdigit((unsigned char)s[q])) q++;
        if (q + 1 < n && s[q] == '_' && isdigit((unsigned char)s[q + 1])) {
            q++;
            continue;
        }
        return q - p;
    }
}

static int lex_number(Lex *L, size_t *pp) {
    const char *s = L->s;
    size_t n = L->n, p = *pp;
    /* float: not right after a '.', digits, then a fraction and/or an exponent */
    if (!(p > 0 && s[p - 1] == '.')) {
        size_t a = digits_us(s, n, p), q = p + a;
        if (a) {
            size_t frac = 0, ex = 0;
            if (q < n && s[q] == '.') frac = digits_us(s, n, q + 1);
            size_t r = frac ? q + 1 + frac : q;
            if (r < n && (s[r] == 'e' || s[r] == 'E')) {
                size_t t = r + 1;
                if (t < n && (s[t] == '+' || s[t] == '-')) t++;
                size_t d = digits_us(s, n, t);
                if (d) ex = t + d - r;
            }
            if (frac || ex) {
                size_t end = r + ex;
                char buf[128];
                size_t k = 0;
                for (size_t i = p; i < end && k < sizeof buf - 1; i++)
                    if (s[i] != '_') buf[k++] = s[i];
                buf[k] = '\0';
                Tok *t;
                if (emit(L, K_FLOAT, (unsigned)p, &t) != 0) return -1;
                t->f = strtod(buf, NULL);
                *pp = end;
                return 0;
            }
        }
    }
    /* integer: 0b/0o/0x with "_" separators, a decimal, or zeros */
    int base = 10;
    size_t q = p, start;
    if (s[p] == '0' && p + 1 < n && strchr("bBoOxX", s[p + 1])) {
        char b = (char)tolower((unsigned char)s[p + 1]);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        q = p + 2;
    }
    start = q;
    unsigned long long v = 0;
    int any = 0, over = 0;
    while (q < n) {
        char ch = s[q];
        if (ch == '_' && any && q + 1 < n && s[q + 1] != '_') {
            q++;
            continue;
        }
        int d = isdigit((unsigned char)ch) ? ch - '0' : isalpha((unsigned char)ch) ? tolower((unsigned char)ch) - 'a' + 10 : 99;
        if (d >= base) break;
        if (base == 10 && any && v == 0 && s[start] == '0' && d != 0) break; /* "0(_?0)*": 01 is 0 then 1 */
        if (v > (unsigned long long)LLONG_MAX / (unsigned)base ||
            v * (unsigned)base > (unsigned long long)LLONG_MAX - (unsigned)d)
            over = 1;
        v = v * (unsigned)base + (unsigned)d;
        any = 1;
        q++;
    }
    if (!any) return perr(L->c, (unsigned)p, "unexpected character '%c'", s[p]);
    if (over) return perr(L->c, (unsigned)p, "unsupported Jinja construct: an integer literal beyond 64 bits");
    Tok *t;
    if (emit(L, K_INT, (unsigned)p, &t) != 0) return -1;
    t->i = (long long)v;
    *pp = q;
    return 0;
}

/* One {{ ... }} or {% ... %}: tokens until its end, brackets balanced. */
static int lex_tag(Lex *L, size_t *pp, int block, int *line_starting) {
    const char *s = L->s;
    size_t n = L->n, p = *pp, end;
    char stack[MAX_NESTING];
    int depth = 0;
    for (;;) {
        if (depth == 0 && match_end(s, n, p, block, &end)) {
            if (emit(L, block ? K_BEND : K_VEND, (unsigned)p, NULL) != 0) return -1;
            *line_starting = end > 0 && s[end - 1] == '\n';
            *pp = end;
            return 0;
        }
        if (p >= n) return perr(L->c, (unsigned)p, "unexpected end of template: the tag is not closed");
        int w = ws_len(s + p, n - p);
        if (w > 0) {
            p += (size_t)w;
            continue;
        }
        unsigned char c = (unsigned char)s[p];
        if (isdigit(c)) {
            if (lex_number(L, &p) != 0) return -1;
            continue;
        }
        if (isalpha(c) || c == '_') {
            size_t q = p;
            while (q < n && (isalnum((unsigned char)s[q]) || s[q] == '_')) q++;
            if (q < n && (unsigned char)s[q] >= 0x80)
                return perr(L->c, (unsigned)p, "unsupported Jinja construct: a name with non-ASCII letters");
            Tok *t;
            if (emit(L, K_NAME, (unsigned)p, &t) != 0 || !(t->s = mkstr(L->c, s + p, q - p))) return -1;
            p = q;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t q = p + 1;
            while (q < n && s[q] != (char)c) q += s[q] == '\\' && q + 1 < n ? 2 : 1;
            if (q >= n) return perr(L->c, (unsigned)p, "unterminated string literal");
            Tok *t;
            if (emit(L, K_STRING, (unsigned)p, &t) != 0) return -1;
            if (!(t->s = unescape(L, s + p + 1, q - p - 1, (unsigned)p))) return -1;
            p = q + 1;
            continue;
        }
        int op = -1;
        for (int k = 0; k < (int)(sizeof OP_TEXT / sizeof OP_TEXT[0]); k++) {
            size_t l = strlen(OP_TEXT[k]);
            if (p + l <= n && !memcmp(s + p, OP_TEXT[k], l) && (op < 0 || l > strlen(OP_TEXT[op]))) op = k;
        }
        if (op < 0) {
            if (c >= 0x80 || c < 0x20) return perr(L->c, (unsigned)p, "unexpected character (byte 0x%02x)", c);
            return perr(L->c, (unsigned)p, "unexpected character '%c'", c);
        }
        if (op == O_LPAREN || op == O_LBRACKET || op == O_LBRACE) {
            if (depth == MAX_NESTING)
                return perr(L->c, (unsigned)p, "brackets nested deeper than %d", MAX_NESTING);
            stack[depth++] = op == O_LPAREN ? ')' : op == O_LBRACKET ? ']' : '}';
        } else if (op == O_RPAREN || op == O_RBRACKET || op == O_RBRACE) {
            if (depth == 0) return perr(L->c, (unsigned)p, "unexpected '%c'", c);
            if (stack[--depth] != (char)c) return perr(L->c, (unsigned)p, "unexpected '%c', expected '%c'", c, stack[depth]);
        }
        Tok *t;
        if (emit(L, K_OP, (unsigned)p, &t) != 0) return -1;
        t->op = (unsigned char)op;
        p += strlen(OP_TEXT[op]);
    }
}

/* "{%" [-+] \s* "raw" \s* ("-%}" \s* | "%}"), from p: its end, or 0. */
static size_t match_raw(const char *s, size_t n, size_t p, const char *word, int trim_after) {
    size_t q = p + 2;
    if (q < n && (s[q] == '-' || s[q] == '+')) q++;
    q = skip_ws(s, n, q);
    size_t wl = strlen(word);
    if (q + wl > n || memcmp(s + q, word, wl)) return 0;
    q = skip_ws(s, n, q + wl);
    if (q + 3 <= n && s[q] == '-' && s[q + 1] == '%' && s[q + 2] == '}') return skip_ws(s, n, q + 3);
    if (trim_after && q + 3 <= n && s[q] == '+' && s[q + 1] == '%' && s[q + 2] == '}') return q + 3;
    if (q + 2 <= n && s[q] == '%' && s[q + 1] == '}') return q + 2 + (trim_after && q + 2 < n && s[q + 2] == '\n');
    return 0;
}

static int lex_all(Lex *L) {
    const char *s = L->s;
    size_t n = L->n, p = 0;
    int line_starting = 1;
    while (p < n) {
        size_t q = p;
        const char *hit = NULL;
        while (q + 1 < n) {
            hit = memchr(s + q, '{', n - q - 1);
            if (!hit) break;
            q = (size_t)(hit - s);
            if (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#') break;
            q++;
            hit = NULL;
        }
        if (!hit) return emit_data(L, p, n - p);
        char kind = s[q + 1];
        char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        size_t raw_end = kind == '%' ? match_raw(s, n, q, "raw", 0) : 0;
        size_t text = q - p;
        if (sign == '-') text = rstrip_len(s + p, text);
        else if (sign != '+' && kind != '{') text = lstrip_text(s, p, text, line_starting);
        if (emit_data(L, p, text) != 0) return -1;
        if (raw_end) {
            /* raw text up to the first {% endraw %}, its own whitespace control applied */
            size_t r = raw_end, e2 = 0;
            for (; r + 1 < n; r++)
                if (s[r] == '{' && s[r + 1] == '%' && (e2 = match_raw(s, n, r, "endraw", 1))) break;
            if (!e2) return perr(L->c, (unsigned)q, "missing {%% endraw %%}");
            char rs = r + 2 < n && (s[r + 2] == '-' || s[r + 2] == '+') ? s[r + 2] : 0;
            size_t body = r - raw_end;
            if (rs == '-') body = rstrip_len(s + raw_end, body);
            else if (rs != '+') body = lstrip_text(s, raw_end, body, 0);
            if (emit_data(L, raw_end, body) != 0) return -1;
            line_starting = s[e2 - 1] == '\n';
            p = e2;
            continue;
        }
        if (kind == '#') {
            size_t r = q + 2 + (sign != 0), end = 0;
            for (; r + 1 < n; r++) {
                if ((s[r] == '+' || s[r] == '-') && r + 2 < n && s[r + 1] == '#' && s[r + 2] == '}') {
                    end = s[r] == '-' ? skip_ws(s, n, r + 3) : r + 3;
                    break;
                }
                if (s[r] == '#' && s[r + 1] == '}') {
                    end = r + 2 + (r + 2 < n && s[r + 2] == '\n');
                    break;
                }
            }
            if (!end) return perr(L->c, (unsigned)q, "missing end of comment tag (#})");
            line_starting = s[end - 1] == '\n';
            p = end;
            continue;
        }
        if (emit(L, kind == '{' ? K_VBEGIN : K_BBEGIN, (unsigned)q, NULL) != 0) return -1;
        p = q + 2 + (sign != 0);
        if (lex_tag(L, &p, kind == '%', &line_starting) != 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    Ctx *c;
    Tok *v;
    int n, i;
    int nest;      /* expressions open (parentheses, lists, calls) */
    int blocks;    /* blocks open */
    int in_macro;  /* parsing a macro's body: the fixed symbols it names are noted */
    int macro_uses[SYM_FIXED];
    /* symbols: a hash of names to numbers */
    int *hash;
    int hcap;
    int scap;
} P;

#define CUR(p) (&(p)->v[(p)->i])

static int is_name(const Tok *t, const char *w) { return t->kind == K_NAME && !strcmp(t->s->s, w); }
static int is_op(const Tok *t, int op) { return t->kind == K_OP && t->op == op; }

static const char *tok_desc(const Tok *t, char *buf, size_t len) {
    switch (t->kind) {
    case K_DATA: return "template text";
    case K_VBEGIN: return "'{{'";
    case K_VEND: return "end of print statement '}}'";
    case K_BBEGIN: return "'{%'";
    case K_BEND: return "end of statement block '%}'";
    case K_NAME: snprintf(buf, len, "'%.40s'", t->s->s); return buf;
    case K_STRING: return "a string";
    case K_INT: case K_FLOAT: return "a number";
    case K_OP: snprintf(buf, len, "'%s'", OP_TEXT[t->op]); return buf;
    default: return "end of template";
    }
}

static int expected(P *p, const char *what) {
    char b[64];
    return perr(p->c, CUR(p)->pos, "expected %s, got %s", what, tok_desc(CUR(p), b, sizeof b));
}

static int expect_op(P *p, int op) {
    if (!is_op(CUR(p), op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", OP_TEXT[op]);
        return expected(p, w);
    }
    p->i++;
    return 0;
}

static int skip_op(P *p, int op) {
    if (!is_op(CUR(p), op)) return 0;
    p->i++;
    return 1;
}

static int skip_name(P *p, const char *w) {
    if (!is_name(CUR(p), w)) return 0;
    p->i++;
    return 1;
}

static unsigned hash_name(const char *s) { return av_fnv1a(s, strlen(s), 2166136261u); }

static int sym_of(P *p, const char *name) {
    JinjaTemplate *t = p->c->t;
    if (t->nsyms * 2 >= p->hcap) {
        int cap = p->hcap ? p->hcap * 2 : 64;
        int *h = malloc((size_t)cap * sizeof *h);
        if (!h) return oom(p->c);
        for (int k = 0; k < cap; k++) h[k] = -1;
        for (int k = 0; k < t->nsyms; k++) {
            unsigned x = hash_name(t->syms[k]->s) & (unsigned)(cap - 1);
            while (h[x] >= 0) x = (x + 1) & (unsigned)(cap - 1);
            h[x] = k;
        }
        free(p->hash);
        p->hash = h, p->hcap = cap;
    }
    unsigned x = hash_name(name) & (unsigned)(p->hcap - 1);
    while (p->hash[x] >= 0) {
        if (!strcmp(t->syms[p->hash[x]]->s, name)) return p->hash[x];
        x = (x + 1) & (unsigned)(p->hcap - 1);
    }
    if (t->nsyms == p->scap) {
        int cap = p->scap ? p->scap * 2 : 64;
        const JStr **ns = ja_alloc(&t->arena, (size_t)cap * sizeof *ns);
        int *nf = ja_alloc(&t->arena, (size_t)cap * sizeof *nf);
        if (!ns || !nf) return oom(p->c);
        if (t->nsyms) {
            memcpy(ns, t->syms, (size_t)t->nsyms * sizeof *ns);
            memcpy(nf, t->sym_func, (size_t)t->nsyms * sizeof *nf);
        }
        t->syms = ns, t->sym_func = nf, p->scap = cap;
    }
    const JStr *s = mkstr(p->c, name, strlen(name));
    if (!s) return -1;
    static const char *const FUNCS[FN_N] = {[FN_RAISE] = "raise_exception", [FN_STRFTIME] = "strftime_now",
                                            [FN_NAMESPACE] = "namespace", [FN_RANGE] = "range", [FN_DICT] = "dict"};
    int f = -1;
    for (int k = 0; k < FN_N; k++)
        if (!strcmp(name, FUNCS[k])) f = k;
    t->syms[t->nsyms] = s;
    t->sym_func[t->nsyms] = f;
    p->hash[x] = t->nsyms;
    return t->nsyms++;
}

static JExpr *node(P *p, int kind, unsigned pos) {
    JExpr *x = ja_alloc(&p->c->t->arena, sizeof *x);
    if (!x) return oom(p->c), NULL;
    x->kind = (unsigned char)kind, x->pos = pos, x->depth = 1;
    return x;
}

/* Expressions nest through parentheses (bounded while lexing) and through
 * chains such as a + b + c, whose trees grow to the left: each node keeps its
 * depth, one more than its deepest child's, and a tree deeper than
 * MAX_EXPR_DEPTH is refused, so evaluating one recurses a bounded number of
 * times. */
static void *grow(P *p, void *v, int n, size_t elem) {
    /* arrays in the arena grow by doubling at powers of two */
    if (n > 0 && (n & (n - 1))) return v;
    void *nv = ja_alloc(&p->c->t->arena, (size_t)(n ? 2 * n : 4) * elem);
    if (!nv) return oom(p->c), NULL;
    if (n) memcpy(nv, v, (size_t)n * elem);
    return nv;
}
#define PUSH(p, arr, n, val)                                                     \
    do {                                                                         \
        void *g_ = grow((p), (arr), (n), sizeof *(arr));                          \
        if (!g_) return NULL;                                                    \
        (arr) = g_;                                                              \
        (arr)[(n)++] = (val);                                                    \
    } while (0)

static JExpr *parse_expression(P *p, int with_condexpr);
static JExpr *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens);
static JExpr *parse_unary(P *p, int with_filter);
static JExpr *parse_primary(P *p);
static JExpr *parse_postfix(P *p, JExpr *x);
static JExpr *parse_filter_expr(P *p, JExpr *x);
static JExpr *parse_filter(P *p, JExpr *x, int start_inline);

static int deeper(int m, const JExpr *c) { return c && c->depth > m ? c->depth : m; }
static int args_depth(int m, const JArgs *a) {
    for (int k = 0; k < a->npos; k++) m = deeper(m, a->pos[k]);
    for (int k = 0; k < a->nkw; k++) m = deeper(m, a->kwv[k]);
    return m;
}

/* Sets x's depth from its children's (call once its children are in place). */
static JExpr *check_depth(P *p, JExpr *x) {
    int m = 0;
    switch (x->kind) {
    case E_ATTR: m = deeper(m, x->u.attr.obj); break;
    case E_ITEM: m = deeper(deeper(m, x->u.item.obj), x->u.item.index); break;
    case E_SLICE:
        m = deeper(deeper(m, x->u.slice.obj), x->u.slice.start);
        m = deeper(deeper(m, x->u.slice.stop), x->u.slice.step);
        break;
    case E_CALL: m = args_depth(deeper(m, x->u.call.fn), &x->u.call.a); break;
    case E_FILTER: case E_TEST: m = args_depth(deeper(m, x->u.ft.x), &x->u.ft.a); break;
    case E_NEG: case E_POS: case E_NOT: m = deeper(m, x->u.x); break;
    case E_AND: case E_OR: case E_BIN: m = deeper(deeper(m, x->u.bin.a), x->u.bin.b); break;
    case E_COMPARE:
        m = deeper(m, x->u.cmp.first);
        for (int k = 0; k < x->u.cmp.n; k++) m = deeper(m, x->u.cmp.rest[k]);
        break;
    case E_CONCAT: case E_LIST: case E_TUPLE:
        for (int k = 0; k < x->u.seq.n; k++) m = deeper(m, x->u.seq.v[k]);
        break;
    case E_DICT:
        for (int k = 0; k < x->u.dict.n; k++) m = deeper(deeper(m, x->u.dict.k[k]), x->u.dict.v[k]);
        break;
    case E_COND: m = deeper(deeper(deeper(m, x->u.cond.test), x->u.cond.yes), x->u.cond.no); break;
    default: break;
    }
    if (m + 1 > MAX_EXPR_DEPTH) {
        perr(p->c, x->pos, "an expression nested deeper than %d", MAX_EXPR_DEPTH);
        return NULL;
    }
    x->depth = m + 1;
    return x;
}

static int parse_args(P *p, JArgs *a) {
    /* "(" [expr | name=expr] {"," ...} [","] ")" ; the "(" is current */
    if (expect_op(p, O_LPAREN) != 0) return -1;
    int seen_kw = 0;
    while (!is_op(CUR(p), O_RPAREN)) {
        if (a->npos + a->nkw > 0 && expect_op(p, O_COMMA) != 0) return -1;
        if (is_op(CUR(p), O_RPAREN)) break;
        if (is_op(CUR(p), O_MUL) || is_op(CUR(p), O_POW))
            return perr(p->c, CUR(p)->pos, "unsupported Jinja construct: *args or **kwargs in a call");
        if (CUR(p)->kind == K_NAME && is_op(&p->v[p->i + 1], O_ASSIGN)) {
            const JStr *name = CUR(p)->s;
            p->i += 2;
            JExpr *v = parse_expression(p, 1);
            if (!v) return -1;
            void *g = grow(p, a->kw, a->nkw, sizeof *a->kw), *g2 = grow(p, a->kwv, a->nkw, sizeof *a->kwv);
            if (!g || !g2) return -1;
            a->kw = g, a->kwv = g2;
            a->kw[a->nkw] = name, a->kwv[a->nkw] = v, a->nkw++;
            seen_kw = 1;
        } else {
            if (seen_kw) return perr(p->c, CUR(p)->pos, "a positional argument after a keyword argument");
            JExpr *v = parse_expression(p, 1);
            if (!v) return -1;
            void *g = grow(p, a->pos, a->npos, sizeof *a->pos);
            if (!g) return -1;
            a->pos = g;
            a->pos[a->npos++] = v;
        }
    }
    p->i++;
    return 0;
}

static JExpr *parse_condexpr(P *p) {
    JExpr *x = parse_expression(p, 0);
    while (x && is_name(CUR(p), "if")) {
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *test = parse_expression(p, 0), *no = NULL;
        if (!test) return NULL;
        if (skip_name(p, "else") && !(no = parse_condexpr(p))) return NULL;
        JExpr *c = node(p, E_COND, pos);
        if (!c) return NULL;
        c->u.cond.test = test, c->u.cond.yes = x, c->u.cond.no = no;
        x = check_depth(p, c);
    }
    return x;
}

static JExpr *parse_compare(P *p);

static JExpr *parse_not(P *p) {
    if (is_name(CUR(p), "not")) {
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *x = parse_not(p), *n;
        if (!x || !(n = node(p, E_NOT, pos))) return NULL;
        n->u.x = x;
        return check_depth(p, n);
    }
    return parse_compare(p);
}

static JExpr *parse_and(P *p) {
    JExpr *x = parse_not(p);
    while (x && is_name(CUR(p), "and")) {
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *b = parse_not(p), *n;
        if (!b || !(n = node(p, E_AND, pos))) return NULL;
        n->u.bin.a = x, n->u.bin.b = b;
        x = check_depth(p, n);
    }
    return x;
}

static JExpr *parse_or(P *p) {
    JExpr *x = parse_and(p);
    while (x && is_name(CUR(p), "or")) {
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *b = parse_and(p), *n;
        if (!b || !(n = node(p, E_OR, pos))) return NULL;
        n->u.bin.a = x, n->u.bin.b = b;
        x = check_depth(p, n);
    }
    return x;
}

static JExpr *parse_expression(P *p, int with_condexpr) { return with_condexpr ? parse_condexpr(p) : parse_or(p); }

static JExpr *binop(P *p, JExpr *a, JExpr *b, int op, unsigned pos) {
    JExpr *n = node(p, E_BIN, pos);
    if (!n) return NULL;
    n->op = (unsigned char)op, n->u.bin.a = a, n->u.bin.b = b;
    return check_depth(p, n);
}

static JExpr *parse_pow(P *p) {
    JExpr *x = parse_unary(p, 1);
    while (x && is_op(CUR(p), O_POW)) {
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *b = parse_unary(p, 1);
        if (!b) return NULL;
        x = binop(p, x, b, OP_POW, pos);
    }
    return x;
}

static JExpr *parse_math2(P *p) {
    JExpr *x = parse_pow(p);
    while (x && CUR(p)->kind == K_OP &&
           (CUR(p)->op == O_MUL || CUR(p)->op == O_DIV || CUR(p)->op == O_FLOORDIV || CUR(p)->op == O_MOD)) {
        int o = CUR(p)->op;
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *b = parse_pow(p);
        if (!b) return NULL;
        x = binop(p, x, b, o == O_MUL ? OP_MUL : o == O_DIV ? OP_DIV : o == O_FLOORDIV ? OP_FLOORDIV : OP_MOD, pos);
    }
    return x;
}

static JExpr *parse_concat(P *p) {
    JExpr *x = parse_math2(p);
    if (!x || !is_op(CUR(p), O_TILDE)) return x;
    JExpr *n = node(p, E_CONCAT, CUR(p)->pos);
    if (!n) return NULL;
    PUSH(p, n->u.seq.v, n->u.seq.n, x);
    while (skip_op(p, O_TILDE)) {
        JExpr *b = parse_math2(p);
        if (!b) return NULL;
        PUSH(p, n->u.seq.v, n->u.seq.n, b);
    }
    return check_depth(p, n);
}

static JExpr *parse_math1(P *p) {
    JExpr *x = parse_concat(p);
    while (x && CUR(p)->kind == K_OP && (CUR(p)->op == O_ADD || CUR(p)->op == O_SUB)) {
        int o = CUR(p)->op;
        unsigned pos = CUR(p)->pos;
        p->i++;
        JExpr *b = parse_concat(p);
        if (!b) return NULL;
        x = binop(p, x, b, o == O_ADD ? OP_ADD : OP_SUB, pos);
    }
    return x;
}

static JExpr *parse_compare(P *p) {
    unsigned pos = CUR(p)->pos;
    JExpr *x = parse_math1(p);
    if (!x) return NULL;
    JExpr *n = NULL;
    for (;;) {
        int op = -1;
        const Tok *t = CUR(p);
        if (t->kind == K_OP) {
            switch (t->op) {
            case O_EQ: op = CMP_EQ; break;
            case O_NE: op = CMP_NE; break;
            case O_LT: op = CMP_LT; break;
            case O_LE: op = CMP_LE; break;
            case O_GT: op = CMP_GT; break;
            case O_GE: op = CMP_GE; break;
            default: break;
            }
            if (op >= 0) p->i++;
        } else if (is_name(t, "in")) {
            op = CMP_IN;
            p->i++;
        } else if (is_name(t, "not") && is_name(&p->v[p->i + 1], "in")) {
            op = CMP_NOTIN;
            p->i += 2;
        }
        if (op < 0) break;
        JExpr *b = parse_math1(p);
        if (!b) return NULL;
        if (!n) {
            if (!(n = node(p, E_COMPARE, pos))) return NULL;
            n->u.cmp.first = x;
        }
        int k = n->u.cmp.n;
        void *g = grow(p, n->u.cmp.rest, k, sizeof *n->u.cmp.rest), *g2 = grow(p, n->u.cmp.ops, k, 1);
        if (!g || !g2) return NULL;
        n->u.cmp.rest = g, n->u.cmp.ops = g2;
        n->u.cmp.rest[k] = b, n->u.cmp.ops[k] = (unsigned char)op, n->u.cmp.n = k + 1;
    }
    return n ? check_depth(p, n) : x;
}

static JExpr *parse_unary(P *p, int with_filter) {
    if (++p->nest > MAX_NESTING) {
        perr(p->c, CUR(p)->pos, "an expression nested deeper than %d", MAX_NESTING);
        return NULL;
    }
    JExpr *x;
    unsigned pos = CUR(p)->pos;
    if (is_op(CUR(p), O_SUB) || is_op(CUR(p), O_ADD)) {
        int neg = CUR(p)->op == O_SUB;
        p->i++;
        JExpr *in = parse_unary(p, 0);
        if (!in || !(x = node(p, neg ? E_NEG : E_POS, pos))) return NULL;
        x->u.x = in;
        x = check_depth(p, x);
    } else {
        x = parse_primary(p);
    }
    if (x) x = parse_postfix(p, x);
    if (x && with_filter) x = parse_filter_expr(p, x);
    p->nest--;
    return x;
}

static JExpr *cnst(P *p, unsigned pos, JValue v) {
    JExpr *x = node(p, E_CONST, pos);
    if (x) x->u.k = v;
    return x;
}

static JExpr *parse_primary(P *p) {
    Tok *t = CUR(p);
    JValue v = {0};
    switch (t->kind) {
    case K_NAME: {
        const char *w = t->s->s;
        p->i++;
        if (!strcmp(w, "true") || !strcmp(w, "True") || !strcmp(w, "false") || !strcmp(w, "False")) {
            v.t = V_BOOL, v.u.i = w[0] == 't' || w[0] == 'T';
            return cnst(p, t->pos, v);
        }
        if (!strcmp(w, "none") || !strcmp(w, "None")) {
            v.t = V_NONE;
            return cnst(p, t->pos, v);
        }
        JExpr *x = node(p, E_NAME, t->pos);
        if (!x || (x->id = sym_of(p, w)) < 0) return NULL;
        if (p->in_macro && x->id < SYM_FIXED) p->macro_uses[x->id] = 1;
        return x;
    }
    case K_STRING: {
        /* adjacent literals are one string */
        size_t len = 0;
        int k = p->i;
        while (p->v[k].kind == K_STRING) len += p->v[k++].s->len;
        JStr *s = ja_alloc(&p->c->t->arena, sizeof(JStr) + len + 1);
        if (!s) return oom(p->c), NULL;
        for (size_t at = 0; p->i < k; p->i++) {
            memcpy(s->s + at, p->v[p->i].s->s, p->v[p->i].s->len);
            at += p->v[p->i].s->len;
        }
        s->len = len;
        v.t = V_STR, v.u.s = s;
        return cnst(p, t->pos, v);
    }
    case K_INT:
        p->i++;
        v.t = V_INT, v.u.i = t->i;
        return cnst(p, t->pos, v);
    case K_FLOAT:
        p->i++;
        v.t = V_FLOAT, v.u.f = t->f;
        return cnst(p, t->pos, v);
    case K_OP:
        if (t->op == O_LPAREN) {
            p->i++;
            JExpr *x = parse_tuple(p, 0, 1, NULL, 1);
            if (!x || expect_op(p, O_RPAREN) != 0) return NULL;
            return x;
        }
        if (t->op == O_LBRACKET) {
            p->i++;
            JExpr *x = node(p, E_LIST, t->pos);
            if (!x) return NULL;
            while (!is_op(CUR(p), O_RBRACKET)) {
                if (x->u.seq.n && expect_op(p, O_COMMA) != 0) return NULL;
                if (is_op(CUR(p), O_RBRACKET)) break;
                JExpr *it = parse_expression(p, 1);
                if (!it) return NULL;
                PUSH(p, x->u.seq.v, x->u.seq.n, it);
            }
            p->i++;
            return check_depth(p, x);
        }
        if (t->op == O_LBRACE) {
            p->i++;
            JExpr *x = node(p, E_DICT, t->pos);
            if (!x) return NULL;
            while (!is_op(CUR(p), O_RBRACE)) {
                if (x->u.dict.n && expect_op(p, O_COMMA) != 0) return NULL;
                if (is_op(CUR(p), O_RBRACE)) break;
                JExpr *k = parse_expression(p, 1), *val;
                if (!k || expect_op(p, O_COLON) != 0 || !(val = parse_expression(p, 1))) return NULL;
                int n = x->u.dict.n;
                void *g = grow(p, x->u.dict.k, n, sizeof(JExpr *)), *g2 = grow(p, x->u.dict.v, n, sizeof(JExpr *));
                if (!g || !g2) return NULL;
                x->u.dict.k = g, x->u.dict.v = g2;
                x->u.dict.k[n] = k, x->u.dict.v[n] = val, x->u.dict.n = n + 1;
            }
            p->i++;
            return check_depth(p, x);
        }
        break;
    default: break;
    }
    expected(p, "an expression");
    return NULL;
}

static int tuple_end(P *p, const char *extra_end) {
    const Tok *t = CUR(p);
    if (t->kind == K_VEND || t->kind == K_BEND || t->kind == K_EOF || is_op(t, O_RPAREN)) return 1;
    if (extra_end && is_name(t, extra_end)) return 1;
    return 0;
}

static JExpr *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens) {
    unsigned pos = CUR(p)->pos;
    JExpr **items = NULL;
    int n = 0, is_tuple = 0;
    for (;;) {
        if (n && expect_op(p, O_COMMA) != 0) return NULL;
        if (tuple_end(p, extra_end)) break;
        JExpr *x = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        if (!x) return NULL;
        PUSH(p, items, n, x);
        if (is_op(CUR(p), O_COMMA)) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (n) return items[0];
        if (!explicit_parens) {
            expected(p, "an expression");
            return NULL;
        }
    }
    JExpr *t = node(p, E_TUPLE, pos);
    if (!t) return NULL;
    t->u.seq.v = items, t->u.seq.n = n;
    return check_depth(p, t);
}

static JExpr *parse_subscript(P *p, JExpr *obj) {
    Tok *t = CUR(p);
    if (is_op(t, O_DOT)) {
        p->i++;
        Tok *a = CUR(p);
        if (a->kind == K_NAME) {
            p->i++;
            JExpr *x = node(p, E_ATTR, t->pos);
            if (!x) return NULL;
            x->u.attr.obj = obj, x->u.attr.name = a->s;
            return check_depth(p, x);
        }
        if (a->kind == K_INT) {
            p->i++;
            JValue v = {.t = V_INT, .u.i = a->i};
            JExpr *idx = cnst(p, a->pos, v), *x = node(p, E_ITEM, t->pos);
            if (!idx || !x) return NULL;
            x->u.item.obj = obj, x->u.item.index = idx;
            return check_depth(p, x);
        }
        expected(p, "a name or number after '.'");
        return NULL;
    }
    /* "[" subscript "]": an index or a slice (a tuple of indices is refused) */
    p->i++;
    JExpr *parts[3] = {NULL, NULL, NULL};
    int colons = 0;
    for (;;) {
        if (is_op(CUR(p), O_RBRACKET)) break;
        if (is_op(CUR(p), O_COLON)) {
            if (++colons > 2) {
                expected(p, "']'");
                return NULL;
            }
            p->i++;
            continue;
        }
        if (is_op(CUR(p), O_COMMA))
            return perr(p->c, CUR(p)->pos, "unsupported Jinja construct: a tuple as a subscript"), NULL;
        if (parts[colons]) {
            expected(p, "']' or ':'");
            return NULL;
        }
        if (!(parts[colons] = parse_expression(p, 1))) return NULL;
    }
    p->i++;
    JExpr *x;
    if (colons == 0) {
        if (!parts[0]) {
            expected(p, "an index");
            return NULL;
        }
        if (!(x = node(p, E_ITEM, t->pos))) return NULL;
        x->u.item.obj = obj, x->u.item.index = parts[0];
    } else {
        if (!(x = node(p, E_SLICE, t->pos))) return NULL;
        x->u.slice.obj = obj, x->u.slice.start = parts[0], x->u.slice.stop = parts[1], x->u.slice.step = parts[2];
    }
    return check_depth(p, x);
}

static JExpr *parse_call(P *p, JExpr *fn) {
    JExpr *x = node(p, E_CALL, CUR(p)->pos);
    if (!x) return NULL;
    x->u.call.fn = fn;
    if (parse_args(p, &x->u.call.a) != 0) return NULL;
    return check_depth(p, x);
}

static JExpr *parse_postfix(P *p, JExpr *x) {
    while (x) {
        if (is_op(CUR(p), O_DOT) || is_op(CUR(p), O_LBRACKET)) x = parse_subscript(p, x);
        else if (is_op(CUR(p), O_LPAREN)) x = parse_call(p, x);
        else break;
    }
    return x;
}

/* A filter's or test's name (dotted names are jinja2's; none of them is supported). */
static const char *ft_name(P *p, char *buf, size_t len) {
    if (CUR(p)->kind != K_NAME) {
        expected(p, "a name");
        return NULL;
    }
    snprintf(buf, len, "%s", CUR(p)->s->s);
    p->i++;
    if (is_op(CUR(p), O_DOT)) {
        perr(p->c, CUR(p)->pos, "unsupported Jinja construct: a dotted filter or test name");
        return NULL;
    }
    return buf;
}

static JExpr *parse_filter(P *p, JExpr *x, int start_inline) {
    while (is_op(CUR(p), O_PIPE) || start_inline) {
        if (!start_inline) p->i++;
        start_inline = 0;
        unsigned pos = CUR(p)->pos;
        char name[64];
        if (!ft_name(p, name, sizeof name)) return NULL;
        /* a filter outside the subset fails where it is reached, as jinja2 fails on an unknown filter
         * inside a block that may not run (a tool-calling branch of a template must not stop plain chats) */
        int id = jinja_filter_id(name);
        JExpr *f = node(p, E_FILTER, pos);
        if (!f) return NULL;
        f->id = id, f->u.ft.x = x;
        if (id < 0 && !(f->u.ft.name = mkstr(p->c, name, strlen(name)))) return NULL;
        if (is_op(CUR(p), O_LPAREN) && parse_args(p, &f->u.ft.a) != 0) return NULL;
        x = check_depth(p, f);
        if (!x) return NULL;
    }
    return x;
}

static JExpr *parse_test(P *p, JExpr *x) {
    p->i++; /* "is" */
    int negate = skip_name(p, "not");
    unsigned pos = CUR(p)->pos;
    char name[64];
    if (!ft_name(p, name, sizeof name)) return NULL;
    int id = jinja_test_id(name);
    JExpr *t = node(p, E_TEST, pos);
    if (!t) return NULL;
    t->id = id, t->u.ft.x = x, t->u.ft.negate = negate;
    if (id < 0 && !(t->u.ft.name = mkstr(p->c, name, strlen(name)))) return NULL;
    Tok *c = CUR(p);
    if (is_op(c, O_LPAREN)) {
        if (parse_args(p, &t->u.ft.a) != 0) return NULL;
    } else if ((c->kind == K_NAME || c->kind == K_STRING || c->kind == K_INT || c->kind == K_FLOAT ||
                is_op(c, O_LBRACKET) || is_op(c, O_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) return perr(p->c, c->pos, "tests cannot be chained with 'is'"), NULL;
        JExpr *arg = parse_primary(p);
        if (!arg || !(arg = parse_postfix(p, arg))) return NULL;
        PUSH(p, t->u.ft.a.pos, t->u.ft.a.npos, arg);
    }
    return check_depth(p, t);
}

static JExpr *parse_filter_expr(P *p, JExpr *x) {
    while (x) {
        if (is_op(CUR(p), O_PIPE)) x = parse_filter(p, x, 0);
        else if (is_name(CUR(p), "is")) x = parse_test(p, x);
        else if (is_op(CUR(p), O_LPAREN)) x = parse_call(p, x);
        else break;
    }
    return x;
}

/* ------------------------------------------------------------------ statements */

static JStmt *stmt(P *p, int kind, unsigned pos) {
    JStmt *s = ja_alloc(&p->c->t->arena, sizeof *s);
    if (!s) return oom(p->c), NULL;
    s->kind = (unsigned char)kind, s->pos = pos;
    return s;
}

static int subparse(P *p, JBody *body, const char *const *ends, int *which);
static int expect_bend(P *p) {
    if (CUR(p)->kind != K_BEND) return expected(p, "end of statement block '%}'");
    p->i++;
    return 0;
}

/* The statements up to one of ends (its name consumed; its block end not). */
static int parse_statements(P *p, JBody *body, const char *const *ends, int *which) {
    skip_op(p, O_COLON);
    if (expect_bend(p) != 0) return -1;
    if (subparse(p, body, ends, which) != 0) return -1;
    if (*which < 0) {
        char list[160] = "";
        for (int k = 0; ends[k]; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", k ? " or " : "", ends[k]);
        return perr(p->c, CUR(p)->pos, "unexpected end of template: expected %s", list);
    }
    p->i++; /* the end's name */
    return 0;
}

static int parse_target(P *p, JTarget *tg, const char *extra_end, int with_ns) {
    if (with_ns && CUR(p)->kind == K_NAME && is_op(&p->v[p->i + 1], O_DOT) && p->v[p->i + 2].kind == K_NAME) {
        int s = sym_of(p, CUR(p)->s->s);
        if (s < 0) return -1;
        if (!(tg->syms = ja_alloc(&p->c->t->arena, sizeof(int)))) return oom(p->c);
        tg->syms[0] = s, tg->n = 1, tg->attr = p->v[p->i + 2].s;
        p->i += 3;
        return 0;
    }
    unsigned pos = CUR(p)->pos;
    JExpr *x = parse_tuple(p, 1, 1, extra_end, 0);
    if (!x) return -1;
    if (x->kind == E_NAME) {
        if (!(tg->syms = ja_alloc(&p->c->t->arena, sizeof(int)))) return oom(p->c);
        tg->syms[0] = x->id, tg->n = 1;
        return 0;
    }
    if (x->kind == E_TUPLE) {
        if (!(tg->syms = ja_alloc(&p->c->t->arena, (size_t)(x->u.seq.n + 1) * sizeof(int)))) return oom(p->c);
        for (int k = 0; k < x->u.seq.n; k++) {
            if (x->u.seq.v[k]->kind != E_NAME)
                return perr(p->c, x->u.seq.v[k]->pos, "unsupported Jinja construct: a nested target in an assignment");
            tg->syms[k] = x->u.seq.v[k]->id;
        }
        tg->n = x->u.seq.n, tg->tuple = 1;
        return 0;
    }
    return perr(p->c, pos, "cannot assign to this expression");
}

static int push_stmt(P *p, JBody *b, JStmt *s) {
    void *g = grow(p, b->s, b->n, sizeof *b->s);
    if (!g) return -1;
    b->s = g;
    b->s[b->n++] = s;
    return 0;
}

static JMacro *parse_macro_sig(P *p, const JStr *name) {
    JMacro *m = ja_alloc(&p->c->t->arena, sizeof *m);
    if (!m) return oom(p->c), NULL;
    m->name = name;
    if (expect_op(p, O_LPAREN) != 0) return NULL;
    int seen_default = 0;
    while (!is_op(CUR(p), O_RPAREN)) {
        if (m->nparams && expect_op(p, O_COMMA) != 0) return NULL;
        if (is_op(CUR(p), O_RPAREN)) break;
        if (CUR(p)->kind != K_NAME) {
            expected(p, "a parameter name");
            return NULL;
        }
        int s = sym_of(p, CUR(p)->s->s);
        if (s < 0) return NULL;
        for (int k = 0; k < m->nparams; k++)
            if (m->params[k] == s) return perr(p->c, CUR(p)->pos, "a parameter named twice"), NULL;
        p->i++;
        JExpr *def = NULL;
        if (skip_op(p, O_ASSIGN)) {
            if (!(def = parse_expression(p, 1))) return NULL;
            seen_default = 1;
        } else if (seen_default) {
            return perr(p->c, CUR(p)->pos, "a parameter without a default after one with a default"), NULL;
        }
        int n = m->nparams;
        void *g = grow(p, m->params, n, sizeof(int)), *g2 = grow(p, m->defaults, n, sizeof(JExpr *));
        if (!g || !g2) return NULL;
        m->params = g, m->defaults = g2;
        m->params[n] = s, m->defaults[n] = def, m->nparams = n + 1;
    }
    p->i++;
    return m;
}

static int parse_macro_body(P *p, JMacro *m, const char *end) {
    const char *ends[] = {end, NULL};
    int which, saved = p->in_macro, uses[SYM_FIXED];
    memcpy(uses, p->macro_uses, sizeof uses);
    memset(p->macro_uses, 0, sizeof p->macro_uses);
    p->in_macro = 1;
    int rc = parse_statements(p, &m->body, ends, &which);
    m->catch_varargs = p->macro_uses[SYM_VARARGS], m->catch_kwargs = p->macro_uses[SYM_KWARGS];
    m->uses_caller = p->macro_uses[SYM_CALLER];
    for (int k = 0; k < SYM_FIXED; k++) p->macro_uses[k] |= uses[k];
    p->in_macro = saved;
    return rc;
}

static JStmt *parse_statement(P *p) {
    Tok *t = CUR(p);
    if (t->kind != K_NAME) {
        expected(p, "a statement name");
        return NULL;
    }
    const char *w = t->s->s;
    unsigned pos = t->pos;
    if (++p->blocks > MAX_NESTING) return perr(p->c, pos, "blocks nested deeper than %d", MAX_NESTING), NULL;
    p->i++;
    JStmt *s = NULL;
    int which;
    if (!strcmp(w, "if")) {
        if (!(s = stmt(p, S_IF, pos))) return NULL;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        for (;;) {
            JExpr *test = parse_tuple(p, 0, 0, NULL, 0);
            JBody b = {0};
            if (!test || parse_statements(p, &b, ends, &which) != 0) return NULL;
            int n = s->u.ifs.n;
            void *g = grow(p, s->u.ifs.tests, n, sizeof(JExpr *)), *g2 = grow(p, s->u.ifs.bodies, n, sizeof(JBody));
            if (!g || !g2) return NULL;
            s->u.ifs.tests = g, s->u.ifs.bodies = g2;
            s->u.ifs.tests[n] = test, s->u.ifs.bodies[n] = b, s->u.ifs.n = n + 1;
            if (which == 0) continue;
            if (which == 1) {
                static const char *const end[] = {"endif", NULL};
                if (parse_statements(p, &s->u.ifs.els, end, &which) != 0) return NULL;
            }
            break;
        }
    } else if (!strcmp(w, "for")) {
        if (!(s = stmt(p, S_FOR, pos))) return NULL;
        if (parse_target(p, &s->u.loop.target, "in", 0) != 0) return NULL;
        if (!skip_name(p, "in")) {
            expected(p, "'in'");
            return NULL;
        }
        if (!(s->u.loop.iter = parse_tuple(p, 0, 0, "recursive", 0))) return NULL;
        if (skip_name(p, "if") && !(s->u.loop.filter = parse_expression(p, 1))) return NULL;
        if (is_name(CUR(p), "recursive"))
            return perr(p->c, CUR(p)->pos, "unsupported Jinja construct: recursive for loops"), NULL;
        static const char *const ends[] = {"endfor", "else", NULL};
        if (parse_statements(p, &s->u.loop.body, ends, &which) != 0) return NULL;
        if (which == 1) {
            static const char *const end[] = {"endfor", NULL};
            if (parse_statements(p, &s->u.loop.els, end, &which) != 0) return NULL;
        }
    } else if (!strcmp(w, "set")) {
        JTarget tg = {0};
        if (parse_target(p, &tg, NULL, 1) != 0) return NULL;
        if (skip_op(p, O_ASSIGN)) {
            if (!(s = stmt(p, S_SET, pos))) return NULL;
            s->u.set.target = tg;
            if (!(s->u.set.x = parse_tuple(p, 0, 1, NULL, 0))) return NULL;
        } else {
            if (tg.attr || tg.n != 1 || tg.tuple)
                return perr(p->c, pos, "unsupported Jinja construct: a block set of several names or an attribute"), NULL;
            if (!(s = stmt(p, S_SETBLOCK, pos))) return NULL;
            s->u.setblock.target = tg;
            if (is_op(CUR(p), O_PIPE)) {
                JExpr *blk = node(p, E_BLOCK, CUR(p)->pos);
                if (!blk || !(s->u.setblock.filter = parse_filter(p, blk, 0))) return NULL;
            }
            static const char *const end[] = {"endset", NULL};
            if (parse_statements(p, &s->u.setblock.body, end, &which) != 0) return NULL;
        }
    } else if (!strcmp(w, "macro")) {
        if (CUR(p)->kind != K_NAME) {
            expected(p, "a macro name");
            return NULL;
        }
        const JStr *name = CUR(p)->s;
        int sym = sym_of(p, name->s);
        p->i++;
        JMacro *m;
        if (sym < 0 || !(m = parse_macro_sig(p, name)) || parse_macro_body(p, m, "endmacro") != 0) return NULL;
        if (!(s = stmt(p, S_MACRO, pos))) return NULL;
        s->u.macro.sym = sym, s->u.macro.m = m;
    } else if (!strcmp(w, "call")) {
        JMacro *m;
        if (is_op(CUR(p), O_LPAREN)) {
            if (!(m = parse_macro_sig(p, NULL))) return NULL;
        } else if (!(m = ja_alloc(&p->c->t->arena, sizeof *m))) {
            return oom(p->c), NULL;
        }
        JExpr *call = parse_expression(p, 1);
        if (!call) return NULL;
        if (call->kind != E_CALL) return perr(p->c, call->pos, "expected a call in {%% call %%}"), NULL;
        if (parse_macro_body(p, m, "endcall") != 0 || !(s = stmt(p, S_CALLBLOCK, pos))) return NULL;
        s->u.callblock.call = call, s->u.callblock.caller = m;
    } else if (!strcmp(w, "filter")) {
        if (!(s = stmt(p, S_FILTERBLOCK, pos))) return NULL;
        JExpr *blk = node(p, E_BLOCK, CUR(p)->pos);
        if (!blk || !(s->u.filterblock.filter = parse_filter(p, blk, 1))) return NULL;
        static const char *const end[] = {"endfilter", NULL};
        if (parse_statements(p, &s->u.filterblock.body, end, &which) != 0) return NULL;
    } else if (!strcmp(w, "generation")) {
        /* transformers' extension: marks the assistant's text; it renders as is */
        if (!(s = stmt(p, S_BODY, pos))) return NULL;
        static const char *const end[] = {"endgeneration", NULL};
        if (parse_statements(p, &s->u.body, end, &which) != 0) return NULL;
    } else if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        if (!(s = stmt(p, w[0] == 'b' ? S_BREAK : S_CONTINUE, pos))) return NULL;
    } else {
        static const char *const known[] = {"with", "block", "extends", "include", "import", "from", "autoescape",
                                            "do", "trans", "pluralize", NULL};
        for (int k = 0; known[k]; k++)
            if (!strcmp(w, known[k])) return perr(p->c, pos, "unsupported Jinja construct: {%% %s %%}", w), NULL;
        return perr(p->c, pos, "unknown tag '%.40s'", w), NULL;
    }
    p->blocks--;
    return s;
}

/* Statements until a block tag naming one of ends (*which: its index; -1 at the end of the template). */
static int subparse(P *p, JBody *body, const char *const *ends, int *which) {
    *which = -1;
    for (;;) {
        Tok *t = CUR(p);
        if (t->kind == K_EOF) return 0;
        if (t->kind == K_DATA) {
            JStmt *s = stmt(p, S_DATA, t->pos);
            if (!s) return -1;
            s->u.data = t->s;
            p->i++;
            if (push_stmt(p, body, s) != 0) return -1;
            continue;
        }
        if (t->kind == K_VBEGIN) {
            p->i++;
            JStmt *s = stmt(p, S_OUTPUT, t->pos);
            if (!s || !(s->u.x = parse_tuple(p, 0, 1, NULL, 0))) return -1;
            if (CUR(p)->kind != K_VEND) return expected(p, "end of print statement '}}'");
            p->i++;
            if (push_stmt(p, body, s) != 0) return -1;
            continue;
        }
        if (t->kind == K_BBEGIN) {
            p->i++;
            for (int k = 0; ends && ends[k]; k++)
                if (is_name(CUR(p), ends[k])) {
                    *which = k;
                    return 0;
                }
            JStmt *s = parse_statement(p);
            if (!s || expect_bend(p) != 0 || push_stmt(p, body, s) != 0) return -1;
            continue;
        }
        char b[64];
        return perr(p->c, t->pos, "unexpected %s", tok_desc(t, b, sizeof b));
    }
}

/* ------------------------------------------------------------------ entry */

void jinja_free(JinjaTemplate *t) {
    if (!t) return;
    free(t->origin);
    free(t->src);
    ja_free(&t->arena);
    free(t);
}

const char *jinja_origin(const JinjaTemplate *t) { return t->origin; }

int jinja_parse(JinjaTemplate **out, const char *src, size_t len, const char *origin, AvErr *e) {
    *out = NULL;
    if (len > JINJA_MAX_SOURCE)
        return av_err(e, "%s: the chat template is %zu bytes, more than the %u accepted", origin, len,
                      (unsigned)JINJA_MAX_SOURCE);
    long bad = av_utf8_invalid_at(src, len);
    if (bad >= 0) return av_err(e, "%s: the chat template is not UTF-8 (byte %ld)", origin, bad);
    if (memchr(src, '\0', len)) return av_err(e, "%s: the chat template holds a NUL byte", origin);
    JinjaTemplate *t = calloc(1, sizeof *t);
    if (!t || !(t->origin = strdup(origin)) || !(t->src = malloc(len + 1))) {
        jinja_free(t);
        return av_err(e, "%s: out of memory", origin);
    }
    /* newlines normalized (\r\n and \r become \n) and one trailing newline dropped, as jinja2's lexer does */
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            t->src[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            t->src[k++] = src[i];
        }
    }
    if (k > 0 && t->src[k - 1] == '\n') k--;
    t->src[k] = '\0';
    t->src_len = k;
    Ctx c = {t, e, 0};
    Lex L = {&c, t->src, k, NULL, 0, 0};
    P p = {&c, NULL, 0, 0, 0, 0, 0, {0}, NULL, 0, 0};
    int rc = -1;
    static const char *const fixed[SYM_FIXED] = {"loop", "varargs", "kwargs", "caller"};
    for (int s = 0; s < SYM_FIXED; s++)
        if (sym_of(&p, fixed[s]) != s) goto done;
    if (lex_all(&L) != 0 || emit(&L, K_EOF, (unsigned)k, NULL) != 0) goto done;
    p.v = L.v, p.n = L.nv;
    int which;
    if (subparse(&p, &t->body, NULL, &which) != 0) goto done;
    rc = 0;
done:
    free(L.v);
    free(p.hash);
    if (rc != 0) {
        if (!c.failed) av_err(e, "%s: cannot parse the chat template", origin);
        jinja_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
