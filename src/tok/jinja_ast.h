/* jinja_ast.h — what jinja_parse.c builds and jinja_eval.c walks: the
 * template's statements and expressions, its symbols, and the values both
 * share (a constant is a value). Private to the two (src/tok). */
#ifndef ATTNVIZ_JINJA_AST_H
#define ATTNVIZ_JINJA_AST_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* ---- memory: bump allocation in chunks, freed at once, with a ceiling ---- */
typedef struct JChunk JChunk;
typedef struct {
    JChunk *head;
    size_t total; /* bytes of chunks held */
    size_t limit; /* 0: none */
} JArena;
void *ja_alloc(JArena *a, size_t n); /* zeroed; NULL when out of memory or past the limit */
void ja_free(JArena *a);

/* ---- values ---- */
typedef enum {
    V_UNDEF = 0, /* a name, key, index or attribute that is not there (jinja2's Undefined) */
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_LIST,   /* also a tuple (tuple set): they differ only in how they print */
    V_DICT,
    V_NS,     /* namespace(): a dict whose attributes can be set */
    V_MACRO,
    V_FUNC,   /* a global function (JFunc) */
    V_METHOD, /* a value's method, bound (string, dict, list or loop) */
    V_LOOP,   /* the loop variable */
} VType;

typedef struct JStr {
    size_t len;
    char s[]; /* UTF-8, NUL-terminated (never holds a NUL of its own) */
} JStr;
typedef struct JList JList;
typedef struct JDict JDict;
typedef struct JMacro JMacro;
typedef struct JClosure JClosure; /* a macro with the frame it was defined in (jinja_eval.c) */
typedef struct JMethod JMethod;
typedef struct JLoop JLoop;

typedef struct {
    unsigned char t;     /* VType */
    unsigned char tuple; /* V_LIST: printed as a tuple; V_STR: markup (|safe, |escape), which escapes what + joins to it */
    int fn;              /* V_FUNC: JFunc */
    union {
        long long i; /* V_INT, V_BOOL */
        double f;
        const JStr *s;
        JList *l;
        JDict *d;   /* V_DICT, V_NS */
        const JClosure *m; /* V_MACRO */
        const JMethod *me;
        JLoop *lp;
        const char *why; /* V_UNDEF: what is missing, for a message ("'x' is undefined") */
    } u;
} JValue;

struct JList {
    int n, cap;
    JValue *v;
};
struct JDict {
    int n, cap;
    JValue *k, *v; /* insertion order */
};

typedef enum { FN_RAISE, FN_STRFTIME, FN_NAMESPACE, FN_RANGE, FN_DICT, FN_N } JFunc;

/* ---- expressions ---- */
typedef enum {
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_AND, E_OR,
    E_BIN, E_COMPARE, E_CONCAT, E_COND, E_LIST, E_TUPLE, E_DICT,
    E_BLOCK /* the text of a {% filter %} or {% set %} block, which the filters apply to */
} EKind;
typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW } JBinOp;
typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } JCmpOp;

typedef struct JExpr JExpr;
typedef struct {
    JExpr **pos;
    int npos;
    const JStr **kw; /* keyword names */
    JExpr **kwv;
    int nkw;
} JArgs;

struct JExpr {
    unsigned char kind; /* EKind */
    unsigned char op;   /* JBinOp, or JCmpOp per operand (cmp.ops) */
    int id;             /* E_FILTER: JFilter; E_TEST: JTest (-1: unsupported); E_NAME: symbol */
    int depth;          /* the tree's depth below and with this node (bounded by the parser) */
    unsigned pos;       /* byte offset in the (newline-normalized) source */
    union {
        JValue k;                                              /* E_CONST */
        struct { JExpr *obj; const JStr *name; } attr;         /* E_ATTR */
        struct { JExpr *obj, *index; } item;                   /* E_ITEM */
        struct { JExpr *obj, *start, *stop, *step; } slice;    /* E_SLICE: any of the three may be NULL */
        struct { JExpr *fn; JArgs a; } call;                   /* E_CALL */
        struct { JExpr *x; JArgs a; int negate; const JStr *name; } ft; /* E_FILTER, E_TEST (id -1: name is
                                                                  outside the subset, refused when reached) */
        struct { JExpr *a, *b; } bin;                          /* E_AND, E_OR, E_BIN */
        JExpr *x;                                              /* E_NEG, E_POS, E_NOT */
        struct { JExpr *first; JExpr **rest; unsigned char *ops; int n; } cmp; /* E_COMPARE */
        struct { JExpr **v; int n; } seq;                      /* E_CONCAT, E_LIST, E_TUPLE */
        struct { JExpr **k, **v; int n; } dict;                /* E_DICT */
        struct { JExpr *test, *yes, *no; } cond;               /* E_COND: no may be NULL */
    } u;
};

/* ---- statements ---- */
typedef enum {
    S_DATA, S_OUTPUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE, S_BODY /* {% generation %} */,
    S_FILTERBLOCK, S_CALLBLOCK
} SKind;
typedef struct JStmt JStmt;
typedef struct {
    JStmt **s;
    int n;
} JBody;

/* An assignment's target: names (several: unpacked), or a namespace's attribute. */
typedef struct {
    int *syms;
    int n;
    const JStr *attr; /* non-NULL: syms[0].attr */
    int tuple;        /* written as a tuple (a, b) even with one name */
} JTarget;

struct JMacro {
    const JStr *name;
    int nparams;
    int *params;       /* symbols */
    JExpr **defaults;  /* (nparams) NULL where none */
    JBody body;
    int catch_varargs, catch_kwargs, uses_caller; /* the body names varargs / kwargs / caller */
};

struct JStmt {
    unsigned char kind; /* SKind */
    unsigned pos;
    union {
        const JStr *data;                                            /* S_DATA */
        JExpr *x;                                                    /* S_OUTPUT */
        struct { JExpr **tests; JBody *bodies; int n; JBody els; } ifs; /* S_IF */
        struct { JTarget target; JExpr *iter, *filter; JBody body, els; } loop; /* S_FOR */
        struct { JTarget target; JExpr *x; } set;                    /* S_SET */
        struct { JTarget target; JExpr *filter; JBody body; } setblock; /* S_SETBLOCK: filter NULL or over E_BLOCK */
        struct { int sym; const JMacro *m; } macro;                  /* S_MACRO */
        JBody body;                                                  /* S_BODY */
        struct { JExpr *filter; JBody body; } filterblock;           /* S_FILTERBLOCK */
        struct { JExpr *call; const JMacro *caller; } callblock;     /* S_CALLBLOCK */
    } u;
};

/* Filters and tests the parser accepts (unknown names are refused there). */
typedef enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_DEFAULT, F_DICTSORT, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT, F_INT, F_ITEMS,
    F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE,
    F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER,
    F_N
} JFilter;
typedef enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_MAPPING, T_SEQUENCE, T_ITERABLE,
    T_BOOLEAN, T_TRUE, T_FALSE, T_CALLABLE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_IN,
    T_SAMEAS, T_LOWER, T_UPPER, T_ESCAPED, T_N
} JTest;
int jinja_filter_id(const char *name); /* -1 when not a supported filter */
int jinja_test_id(const char *name);   /* -1 when not a supported test */

/* Symbols the evaluator knows by number. */
enum { SYM_LOOP, SYM_VARARGS, SYM_KWARGS, SYM_CALLER, SYM_FIXED };

struct JinjaTemplate {
    JArena arena;       /* everything below */
    char *origin;
    char *src;          /* the normalized source (positions point into it) */
    size_t src_len;
    JBody body;
    const JStr **syms;  /* symbol names */
    int *sym_func;      /* a global function's JFunc, or -1 */
    int nsyms;
};

/* "origin:line:col: " prefix for a position of t's source, into buf. */
void jinja_where(const JinjaTemplate *t, unsigned pos, char *buf, size_t len);

#endif
