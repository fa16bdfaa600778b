/* torchbin.c — reads pytorch_model.bin (torch.save's zip format) without
 * executing it: a bounds-checked zip central-directory walk over stored
 * entries, then a pickle machine that understands only what a state-dict
 * pickle contains and evaluates its few allowed calls symbolically. */
#include "torchbin.h"
#include "zip.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Limits: far above any real checkpoint, low enough that a hostile file
 * cannot make us allocate or loop without bound. */
#define TB_MAX_PICKLE (256u << 20)   /* data.pkl bytes */
#define TB_MAX_STACK 1000000u        /* pickle stack slots */
#define TB_MAX_MARKS 1000u           /* MARK nesting */
#define TB_MAX_MEMO (1u << 20)       /* memo slots */
#define TB_MAX_ARENA ((size_t)512 << 20) /* bytes of pickle values */
#define TB_MAX_TENSORS 100000
#define TB_MAX_NAME 4096             /* bytes of a flattened tensor name */
#define TB_MAX_NAME_BYTES (64u << 20) /* all names: shared dicts can multiply paths */
#define TB_MAX_DEPTH 32              /* nested dicts */
#define TB_MAX_VISITS 10000000u      /* dict items visited while flattening */
#define TB_MAX_GLOBAL 256            /* bytes of a GLOBAL module or name line */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ------------------------------------------------------- pickle values */

typedef enum { V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR } VKind;

static const char *const kind_name[] = {"None", "bool", "int", "float", "str", "tuple",
                                        "list", "dict", "global", "storage", "tensor"};

typedef struct {
    int dtype;             /* index into storage_types */
    const uint8_t *data;   /* the entry's bytes */
    uint64_t numel;
    const char *key;
    size_t key_len;
} StorageRec;

typedef struct {
    const StorageRec *storage;
    uint64_t offset;
    int ndim;
    int64_t size[ST_MAX_DIMS], stride[ST_MAX_DIMS];
} TensorRec;

typedef struct Val Val;
struct Val {
    VKind kind;
    union {
        int64_t i;
        double d;
        struct { const char *p; size_t n; } s;
        struct { Val **v; size_t n, cap; } seq; /* dict: keys and values interleaved */
        int g;
        StorageRec *st;
        TensorRec *t;
    } u;
};

/* Globals a state-dict pickle names; nothing else may even be looked up. */
enum { G_ODICT, G_REBUILD_V2, G_REBUILD_PARAM, G_REBUILD_PARAM_STATE, G_STORAGE0 };

static const struct { const char *module, *name; } callables[] = {
    [G_ODICT] = {"collections", "OrderedDict"},
    [G_REBUILD_V2] = {"torch._utils", "_rebuild_tensor_v2"},
    [G_REBUILD_PARAM] = {"torch._utils", "_rebuild_parameter"},
    [G_REBUILD_PARAM_STATE] = {"torch._utils", "_rebuild_parameter_with_state"},
};

static const struct { const char *name; StDtype dtype; const char *dtype_name; size_t esz; } storage_types[] = {
    {"FloatStorage", ST_F32, "F32", 4},         {"HalfStorage", ST_F16, "F16", 2},
    {"BFloat16Storage", ST_BF16, "BF16", 2},    {"DoubleStorage", ST_OTHER, "F64", 8},
    {"LongStorage", ST_OTHER, "I64", 8},        {"IntStorage", ST_OTHER, "I32", 4},
    {"ShortStorage", ST_OTHER, "I16", 2},       {"CharStorage", ST_OTHER, "I8", 1},
    {"ByteStorage", ST_OTHER, "U8", 1},         {"BoolStorage", ST_OTHER, "BOOL", 1},
    {"ComplexFloatStorage", ST_OTHER, "C64", 8}, {"ComplexDoubleStorage", ST_OTHER, "C128", 16},
};
#define N_STORAGE_TYPES (int)(sizeof storage_types / sizeof storage_types[0])
#define N_CALLABLES (int)(sizeof callables / sizeof callables[0])

/* All values live in one arena, freed at once: the memo and containers share
 * pointers freely (tied weights), so there is no per-value ownership. */
typedef struct Block {
    struct Block *next;
    size_t used, cap;
    unsigned char data[]; /* 8-aligned: the header is three 8-byte fields */
} Block;

typedef struct {
    Block *head;
    size_t total;
} Arena;

static void *arena_alloc(Arena *a, size_t n) {
    if (n > TB_MAX_ARENA) return NULL;
    n = (n + 7) & ~(size_t)7;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (cap > TB_MAX_ARENA - a->total) return NULL;
        Block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->total += cap;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_free(Arena *a) {
    while (a->head) {
        Block *b = a->head;
        a->head = b->next;
        free(b);
    }
    a->total = 0;
}

/* ------------------------------------------------------ pickle machine */

typedef struct {
    const uint8_t *p;
    size_t len, pos, op_at;
    const char *path;
    AvErr *e;
    Arena arena;
    Val **stack;
    size_t sp, scap;
    size_t marks[TB_MAX_MARKS];
    size_t nmarks;
    Val **memo;
    size_t memo_cap, memo_count;
    const Zip *zip;
    const char *prefix; /* "<archive>/" */
    size_t prefix_len;
} Pm;

static int pm_err(Pm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pm_err(Pm *m, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return av_err(m->e, "%s: data.pkl offset %zu: %.1000s", m->path, m->op_at, msg);
}

static Val *new_val(Pm *m, VKind k) {
    Val *v = arena_alloc(&m->arena, sizeof *v);
    if (!v) {
        pm_err(m, "out of memory (pickle values exceed %zu MB)", TB_MAX_ARENA >> 20);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->kind = k;
    return v;
}

static int push(Pm *m, Val *v) {
    if (!v) return -1;
    if (m->sp == m->scap) {
        if (m->scap >= TB_MAX_STACK) return pm_err(m, "pickle stack deeper than %u entries", TB_MAX_STACK);
        size_t nc = m->scap ? m->scap * 2 : 256;
        if (nc > TB_MAX_STACK) nc = TB_MAX_STACK;
        Val **ns = realloc(m->stack, nc * sizeof *ns);
        if (!ns) return pm_err(m, "out of memory");
        m->stack = ns;
        m->scap = nc;
    }
    m->stack[m->sp++] = v;
    return 0;
}

/* The stack above the innermost MARK is the current frame, as in CPython. */
static size_t frame_base(const Pm *m) { return m->nmarks ? m->marks[m->nmarks - 1] : 0; }

static Val *pop(Pm *m) {
    if (m->sp <= frame_base(m)) {
        pm_err(m, "pickle stack underflow");
        return NULL;
    }
    return m->stack[--m->sp];
}

static Val *top(Pm *m) {
    if (m->sp <= frame_base(m)) {
        pm_err(m, "pickle stack underflow");
        return NULL;
    }
    return m->stack[m->sp - 1];
}

/* Pops to the innermost MARK; returns the index of the first popped item. */
static int pop_mark(Pm *m, size_t *from) {
    if (!m->nmarks) return pm_err(m, "pickle uses a MARK that was never set");
    *from = m->marks[--m->nmarks];
    return 0;
}

static int need(Pm *m, size_t n) {
    if (m->len - m->pos < n) return pm_err(m, "pickle truncated (opcode needs %zu more bytes)", n);
    return 0;
}

/* Appends items to a list/dict, growing its array inside the arena. */
static int seq_append(Pm *m, Val *c, Val *const *items, size_t k) {
    if (k == 0) return 0; /* SETITEMS/APPENDS on an empty MARK; v may be NULL */
    if (k > SIZE_MAX / 2 / sizeof(Val *) - c->u.seq.n) return pm_err(m, "container too large");
    if (c->u.seq.n + k > c->u.seq.cap) {
        size_t nc = c->u.seq.cap ? c->u.seq.cap * 2 : 8;
        if (nc < c->u.seq.n + k) nc = c->u.seq.n + k;
        Val **nv = arena_alloc(&m->arena, nc * sizeof *nv);
        if (!nv) return pm_err(m, "out of memory (pickle values exceed %zu MB)", TB_MAX_ARENA >> 20);
        if (c->u.seq.n) memcpy(nv, c->u.seq.v, c->u.seq.n * sizeof *nv);
        c->u.seq.v = nv;
        c->u.seq.cap = nc;
    }
    memcpy(c->u.seq.v + c->u.seq.n, items, k * sizeof *items);
    c->u.seq.n += k;
    return 0;
}

static Val *make_tuple(Pm *m, Val *const *items, size_t k) {
    Val *t = new_val(m, V_TUPLE);
    if (t && k && seq_append(m, t, items, k) != 0) return NULL;
    return t;
}

static int memo_put(Pm *m, uint64_t idx) {
    Val *v = top(m);
    if (!v) return -1;
    if (idx >= TB_MAX_MEMO) return pm_err(m, "memo index %llu exceeds the limit %u", (unsigned long long)idx, TB_MAX_MEMO);
    if (idx >= m->memo_cap) {
        size_t nc = m->memo_cap ? m->memo_cap : 64;
        while (nc <= idx) nc *= 2;
        if (nc > TB_MAX_MEMO) nc = TB_MAX_MEMO;
        Val **nm = realloc(m->memo, nc * sizeof *nm);
        if (!nm) return pm_err(m, "out of memory");
        memset(nm + m->memo_cap, 0, (nc - m->memo_cap) * sizeof *nm);
        m->memo = nm;
        m->memo_cap = nc;
    }
    if (!m->memo[idx]) m->memo_count++;
    m->memo[idx] = v;
    return 0;
}

static int memo_get(Pm *m, uint64_t idx) {
    if (idx >= m->memo_cap || !m->memo[idx])
        return pm_err(m, "memo index %llu is not set", (unsigned long long)idx);
    return push(m, m->memo[idx]);
}

static int str_is(const Val *v, const char *s) {
    return v->kind == V_STR && v->u.s.n == strlen(s) && !memcmp(v->u.s.p, s, v->u.s.n);
}

/* Looks a global up in the allow-list; refuses (naming it) anything else. */
static int push_global(Pm *m, const char *mod, size_t ml, const char *name, size_t nl) {
    int g = -1;
    for (int i = 0; i < N_CALLABLES && g < 0; i++)
        if (ml == strlen(callables[i].module) && !memcmp(mod, callables[i].module, ml) &&
            nl == strlen(callables[i].name) && !memcmp(name, callables[i].name, nl))
            g = i;
    if (g < 0 && ml == 5 && !memcmp(mod, "torch", 5))
        for (int i = 0; i < N_STORAGE_TYPES && g < 0; i++)
            if (nl == strlen(storage_types[i].name) && !memcmp(name, storage_types[i].name, nl)) g = G_STORAGE0 + i;
    if (g < 0)
        return pm_err(m, "refusing pickle global '%.*s.%.*s' (only state-dict tensors are read)", (int)(ml > 100 ? 100 : ml),
                      mod, (int)(nl > 100 ? 100 : nl), name);
    Val *v = new_val(m, V_GLOBAL);
    if (!v) return -1;
    v->u.g = g;
    return push(m, v);
}

static int read_line(Pm *m, const char **s, size_t *n) {
    const uint8_t *start = m->p + m->pos;
    size_t max = m->len - m->pos;
    if (max > TB_MAX_GLOBAL + 1) max = TB_MAX_GLOBAL + 1;
    const uint8_t *nl = memchr(start, '\n', max);
    if (!nl) return pm_err(m, "GLOBAL name is unterminated or longer than %d bytes", TB_MAX_GLOBAL);
    *s = (const char *)start;
    *n = (size_t)(nl - start);
    m->pos += *n + 1;
    return 0;
}

static void global_name(int g, char *buf, size_t n) {
    if (g >= G_STORAGE0) snprintf(buf, n, "torch.%s", storage_types[g - G_STORAGE0].name);
    else snprintf(buf, n, "%s.%s", callables[g].module, callables[g].name);
}

static int int_tuple(Pm *m, const Val *v, const char *what, int64_t *out, int *nd) {
    if (v->kind != V_TUPLE) return pm_err(m, "_rebuild_tensor_v2: %s is a %s, not a tuple", what, kind_name[v->kind]);
    if (v->u.seq.n > ST_MAX_DIMS)
        return pm_err(m, "_rebuild_tensor_v2: %s has %zu dimensions (limit %d)", what, v->u.seq.n, ST_MAX_DIMS);
    for (size_t i = 0; i < v->u.seq.n; i++) {
        const Val *x = v->u.seq.v[i];
        if (x->kind != V_INT || x->u.i < 0)
            return pm_err(m, "_rebuild_tensor_v2: %s[%zu] is not a non-negative int", what, i);
        out[i] = x->u.i;
    }
    *nd = (int)v->u.seq.n;
    return 0;
}

/* REDUCE: calls an allowed callable symbolically. */
static int reduce(Pm *m) {
    Val *args = pop(m);
    Val *fn = args ? pop(m) : NULL;
    if (!fn) return -1;
    if (fn->kind != V_GLOBAL) return pm_err(m, "REDUCE on a %s, not an allowed global", kind_name[fn->kind]);
    if (fn->u.g >= G_STORAGE0) {
        char name[64];
        global_name(fn->u.g, name, sizeof name);
        return pm_err(m, "refusing to call pickle global '%s' (only state-dict tensors are read)", name);
    }
    if (args->kind != V_TUPLE) return pm_err(m, "REDUCE arguments are a %s, not a tuple", kind_name[args->kind]);
    Val *const *a = args->u.seq.v;
    size_t na = args->u.seq.n;
    switch (fn->u.g) {
    case G_ODICT:
        if (na != 0) return pm_err(m, "OrderedDict called with %zu arguments (only OrderedDict() is read)", na);
        return push(m, new_val(m, V_DICT));
    case G_REBUILD_PARAM:
    case G_REBUILD_PARAM_STATE: {
        size_t want = fn->u.g == G_REBUILD_PARAM ? 3 : 4;
        if (na != want || a[0]->kind != V_TENSOR)
            return pm_err(m, "_rebuild_parameter%s: expected (tensor, ...) with %zu arguments",
                          fn->u.g == G_REBUILD_PARAM ? "" : "_with_state", want);
        return push(m, a[0]); /* a Parameter is its tensor; grad flags and hooks are ignored */
    }
    case G_REBUILD_V2: {
        /* (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
        if (na != 6 && na != 7) return pm_err(m, "_rebuild_tensor_v2 called with %zu arguments (expected 6 or 7)", na);
        if (a[0]->kind != V_STORAGE)
            return pm_err(m, "_rebuild_tensor_v2: argument 1 is a %s, not a storage", kind_name[a[0]->kind]);
        if (a[1]->kind != V_INT || a[1]->u.i < 0)
            return pm_err(m, "_rebuild_tensor_v2: storage offset is not a non-negative int");
        if (a[4]->kind != V_BOOL) return pm_err(m, "_rebuild_tensor_v2: requires_grad is not a bool");
        TensorRec *t = arena_alloc(&m->arena, sizeof *t);
        if (!t) return pm_err(m, "out of memory (pickle values exceed %zu MB)", TB_MAX_ARENA >> 20);
        memset(t, 0, sizeof *t);
        int nds = 0;
        if (int_tuple(m, a[2], "size", t->size, &t->ndim) != 0 || int_tuple(m, a[3], "stride", t->stride, &nds) != 0)
            return -1;
        if (nds != t->ndim) return pm_err(m, "_rebuild_tensor_v2: size has %d dimensions but stride %d", t->ndim, nds);
        t->storage = a[0]->u.st;
        t->offset = (uint64_t)a[1]->u.i;
        Val *v = new_val(m, V_TENSOR);
        if (!v) return -1;
        v->u.t = t;
        return push(m, v);
    }
    default: return pm_err(m, "internal: unknown callable");
    }
}

/* BINPERSID: torch's persistent id ('storage', StorageType, key, location, numel). */
static int persistent_load(Pm *m) {
    Val *pid = pop(m);
    if (!pid) return -1;
    if (pid->kind != V_TUPLE || pid->u.seq.n != 5 || !str_is(pid->u.seq.v[0], "storage"))
        return pm_err(m, "persistent id is not ('storage', type, key, location, numel)");
    Val *const *a = pid->u.seq.v;
    if (a[1]->kind != V_GLOBAL || a[1]->u.g < G_STORAGE0)
        return pm_err(m, "persistent id: storage type is not a torch.*Storage global");
    if (a[2]->kind != V_STR || a[3]->kind != V_STR || a[4]->kind != V_INT || a[4]->u.i < 0)
        return pm_err(m, "persistent id: key, location or numel has the wrong type");
    int dt = a[1]->u.g - G_STORAGE0;
    const char *key = a[2]->u.s.p;
    size_t kl = a[2]->u.s.n;
    if (memchr(key, '/', kl) || memchr(key, '\0', kl))
        return pm_err(m, "storage key '" NAMEF "' is not a plain name", NAMEA(key, kl));
    char rest[64 + 8];
    if (kl > 64) return pm_err(m, "storage key '" NAMEF "' is longer than 64 bytes", NAMEA(key, kl));
    memcpy(rest, "data/", 5);
    memcpy(rest + 5, key, kl);
    const ZEntry *ent = zip_find(m->zip, m->prefix, m->prefix_len, rest, 5 + kl);
    if (!ent)
        return pm_err(m, "storage '" NAMEF "' has no entry '%.*sdata/" NAMEF "' in the archive", NAMEA(key, kl),
                      (int)m->prefix_len, m->prefix, NAMEA(key, kl));
    uint64_t numel = (uint64_t)a[4]->u.i, esz = storage_types[dt].esz;
    if (numel > ent->size / esz)
        return pm_err(m, "storage '" NAMEF "': %llu %s elements need more than the %llu bytes its entry holds",
                      NAMEA(key, kl), (unsigned long long)numel, storage_types[dt].dtype_name,
                      (unsigned long long)ent->size);
    StorageRec *s = arena_alloc(&m->arena, sizeof *s);
    Val *v = s ? new_val(m, V_STORAGE) : NULL;
    if (!v) return s ? -1 : pm_err(m, "out of memory");
    *s = (StorageRec){dt, ent->data, numel, key, kl};
    v->u.st = s;
    return push(m, v);
}

static const char *opcode_name(uint8_t op) {
    static const struct { uint8_t op; const char *name; } t[] = {
        {'I', "INT"}, {'L', "LONG"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
        {'V', "UNICODE"}, {'F', "FLOAT"}, {'l', "LIST"}, {'d', "DICT"}, {'i', "INST"}, {'o', "OBJ"},
        {'p', "PUT"}, {'g', "GET"}, {'P', "PERSID"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
        {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x8b, "LONG4"},
        {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"},
        {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"}, {0x96, "BYTEARRAY8"},
        {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].op == op) return t[i].name;
    return NULL;
}

static int push_str(Pm *m, uint64_t n) {
    if (need(m, n) != 0) return -1;
    Val *v = new_val(m, V_STR);
    if (!v) return -1;
    v->u.s.p = (const char *)m->p + m->pos;
    v->u.s.n = (size_t)n;
    m->pos += (size_t)n;
    return push(m, v);
}

static int push_int(Pm *m, int64_t i) {
    Val *v = new_val(m, V_INT);
    if (!v) return -1;
    v->u.i = i;
    return push(m, v);
}

/* Runs the pickle to STOP; *out is the top-level object. */
static int pm_run(Pm *m, Val **out) {
    for (;;) {
        if (m->pos >= m->len) {
            m->op_at = m->pos;
            return pm_err(m, "pickle ends without STOP (truncated)");
        }
        m->op_at = m->pos;
        uint8_t op = m->p[m->pos++];
        const uint8_t *a = m->p + m->pos;
        int rc = 0;
        switch (op) {
        case 0x80: /* PROTO */
            if ((rc = need(m, 1)) != 0) break;
            if (a[0] < 2 || a[0] > 5) return pm_err(m, "unsupported pickle protocol %u", a[0]);
            m->pos += 1;
            break;
        case 0x95: /* FRAME: a length hint only */
            if ((rc = need(m, 8)) != 0) break;
            if (rd64(a) > m->len - m->pos - 8) return pm_err(m, "FRAME runs past the end of data.pkl");
            m->pos += 8;
            break;
        case '.': { /* STOP */
            Val *v = pop(m);
            if (!v) return -1;
            *out = v;
            return 0;
        }
        case '}': rc = push(m, new_val(m, V_DICT)); break;
        case ']': rc = push(m, new_val(m, V_LIST)); break;
        case ')': rc = push(m, new_val(m, V_TUPLE)); break;
        case 'N': rc = push(m, new_val(m, V_NONE)); break;
        case 0x88:
        case 0x89: { /* NEWTRUE, NEWFALSE */
            Val *v = new_val(m, V_BOOL);
            if (v) v->u.i = op == 0x88;
            rc = push(m, v);
            break;
        }
        case '(': /* MARK */
            if (m->nmarks >= TB_MAX_MARKS) return pm_err(m, "MARK nesting deeper than %u", TB_MAX_MARKS);
            m->marks[m->nmarks++] = m->sp;
            break;
        case 'X': /* BINUNICODE */
            if ((rc = need(m, 4)) != 0) break;
            m->pos += 4;
            rc = push_str(m, rd32(a));
            break;
        case 0x8c: /* SHORT_BINUNICODE */
            if ((rc = need(m, 1)) != 0) break;
            m->pos += 1;
            rc = push_str(m, a[0]);
            break;
        case 0x8d: /* BINUNICODE8 */
            if ((rc = need(m, 8)) != 0) break;
            m->pos += 8;
            rc = push_str(m, rd64(a));
            break;
        case 'J': /* BININT */
            if ((rc = need(m, 4)) != 0) break;
            m->pos += 4;
            rc = push_int(m, (int32_t)rd32(a));
            break;
        case 'K': /* BININT1 */
            if ((rc = need(m, 1)) != 0) break;
            m->pos += 1;
            rc = push_int(m, a[0]);
            break;
        case 'M': /* BININT2 */
            if ((rc = need(m, 2)) != 0) break;
            m->pos += 2;
            rc = push_int(m, rd16(a));
            break;
        case 0x8a: { /* LONG1: little-endian two's complement */
            if ((rc = need(m, 1)) != 0) break;
            unsigned n = a[0];
            if (n > 8) return pm_err(m, "LONG1 of %u bytes does not fit in 64 bits", n);
            if ((rc = need(m, 1 + n)) != 0) break;
            uint64_t u = 0;
            for (unsigned i = 0; i < n; i++) u |= (uint64_t)a[1 + i] << (8 * i);
            if (n > 0 && n < 8 && (a[n] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
            m->pos += 1 + n;
            rc = push_int(m, (int64_t)u);
            break;
        }
        case 'G': { /* BINFLOAT: big-endian double */
            if ((rc = need(m, 8)) != 0) break;
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = u << 8 | a[i];
            m->pos += 8;
            Val *v = new_val(m, V_FLOAT);
            if (v) memcpy(&v->u.d, &u, sizeof u);
            rc = push(m, v);
            break;
        }
        case 't': { /* TUPLE */
            size_t from = 0;
            if ((rc = pop_mark(m, &from)) != 0) break;
            Val *t = make_tuple(m, m->stack + from, m->sp - from);
            m->sp = from;
            rc = push(m, t);
            break;
        }
        case 0x85:
        case 0x86:
        case 0x87: { /* TUPLE1..3 */
            size_t k = (size_t)(op - 0x84);
            if (m->sp - frame_base(m) < k) return pm_err(m, "pickle stack underflow");
            Val *t = make_tuple(m, m->stack + m->sp - k, k);
            m->sp -= k;
            rc = push(m, t);
            break;
        }
        case 'q': /* BINPUT */
            if ((rc = need(m, 1)) != 0) break;
            m->pos += 1;
            rc = memo_put(m, a[0]);
            break;
        case 'r': /* LONG_BINPUT */
            if ((rc = need(m, 4)) != 0) break;
            m->pos += 4;
            rc = memo_put(m, rd32(a));
            break;
        case 0x94: rc = memo_put(m, m->memo_count); break; /* MEMOIZE */
        case 'h': /* BINGET */
            if ((rc = need(m, 1)) != 0) break;
            m->pos += 1;
            rc = memo_get(m, a[0]);
            break;
        case 'j': /* LONG_BINGET */
            if ((rc = need(m, 4)) != 0) break;
            m->pos += 4;
            rc = memo_get(m, rd32(a));
            break;
        case 's': { /* SETITEM */
            Val *kv[2];
            if (!(kv[1] = pop(m)) || !(kv[0] = pop(m))) return -1;
            Val *c = top(m);
            if (!c) return -1;
            if (c->kind != V_DICT) return pm_err(m, "SETITEM on a %s", kind_name[c->kind]);
            rc = seq_append(m, c, kv, 2);
            break;
        }
        case 'a': { /* APPEND */
            Val *v = pop(m), *c = v ? top(m) : NULL;
            if (!c) return -1;
            if (c->kind != V_LIST) return pm_err(m, "APPEND on a %s", kind_name[c->kind]);
            rc = seq_append(m, c, &v, 1);
            break;
        }
        case 'u':   /* SETITEMS */
        case 'e': { /* APPENDS */
            size_t from = 0;
            if ((rc = pop_mark(m, &from)) != 0) break;
            size_t k = m->sp - from;
            m->sp = from;
            Val *c = top(m);
            if (!c) return -1;
            if (c->kind != (op == 'u' ? V_DICT : V_LIST))
                return pm_err(m, "%s on a %s", op == 'u' ? "SETITEMS" : "APPENDS", kind_name[c->kind]);
            if (op == 'u' && k % 2) return pm_err(m, "SETITEMS with an odd number of items");
            rc = seq_append(m, c, m->stack + from, k);
            break;
        }
        case 'c': { /* GLOBAL */
            const char *mod = NULL, *name = NULL;
            size_t ml = 0, nl = 0;
            if ((rc = read_line(m, &mod, &ml)) != 0 || (rc = read_line(m, &name, &nl)) != 0) break;
            rc = push_global(m, mod, ml, name, nl);
            break;
        }
        case 0x93: { /* STACK_GLOBAL */
            Val *name = pop(m), *mod = name ? pop(m) : NULL;
            if (!mod) return -1;
            if (mod->kind != V_STR || name->kind != V_STR) return pm_err(m, "STACK_GLOBAL needs two strings");
            rc = push_global(m, mod->u.s.p, mod->u.s.n, name->u.s.p, name->u.s.n);
            break;
        }
        case 'R': rc = reduce(m); break;
        case 'Q': rc = persistent_load(m); break;
        case 'b': { /* BUILD: only an OrderedDict's state (its _metadata), ignored */
            Val *state = pop(m), *obj = state ? top(m) : NULL;
            if (!obj) return -1;
            if (obj->kind != V_DICT)
                return pm_err(m, "BUILD on a %s (only OrderedDict state is accepted)", kind_name[obj->kind]);
            break;
        }
        default: {
            const char *name = opcode_name(op);
            if (name)
                return pm_err(m, "refusing pickle opcode %s (0x%02x) (only state-dict tensors are read)", name, op);
            return pm_err(m, "unknown pickle opcode 0x%02x", op);
        }
        }
        if (rc != 0) return -1;
    }
}

/* ---------------------------------------------------------- flattening */

typedef struct {
    StTensor *t;
    int n, cap;
    size_t visits, name_bytes;
    char name[TB_MAX_NAME + 1];
} Out;

static void free_out(Out *o) {
    for (int i = 0; i < o->n; i++) free(o->t[i].name);
    free(o->t);
    o->t = NULL;
    o->n = o->cap = 0;
}

static int emit_tensor(Out *o, const TensorRec *r, const char *path, AvErr *e) {
    const StorageRec *s = r->storage;
    const char *name = o->name;
    uint64_t numel = 1;
    int zero = 0, overflow = 0;
    for (int d = 0; d < r->ndim; d++) {
        uint64_t sz = (uint64_t)r->size[d];
        if (sz == 0) zero = 1;
        else if (numel > UINT64_MAX / sz) overflow = 1;
        else numel *= sz;
    }
    if (zero) numel = 0;
    else if (overflow) return av_err(e, "%s: tensor '%s': shape's element count overflows", path, name);
    /* Contiguous as torch defines it: size-1 dimensions may have any stride. */
    if (numel > 0) {
        uint64_t expect = 1;
        for (int d = r->ndim - 1; d >= 0; d--) {
            if (r->size[d] != 1 && (uint64_t)r->stride[d] != expect) {
                char sz[256] = "", st[256] = ""; /* 8 dims x ", " + 20 digits fits */
                size_t a = 0, b = 0;
                for (int i = 0; i < r->ndim && a < 200 && b < 200; i++) {
                    a += (size_t)snprintf(sz + a, sizeof sz - a, "%s%lld", i ? ", " : "", (long long)r->size[i]);
                    b += (size_t)snprintf(st + b, sizeof st - b, "%s%lld", i ? ", " : "", (long long)r->stride[i]);
                }
                return av_err(e, "%s: tensor '%s' is not contiguous (size [%s], stride [%s]); save it after .contiguous()",
                              path, name, sz, st);
            }
            expect *= (uint64_t)r->size[d]; /* <= numel: no overflow */
        }
    }
    if (r->offset > s->numel || numel > s->numel - r->offset)
        return av_err(e, "%s: tensor '%s': storage offset %llu + %llu elements run past its storage '" NAMEF "' (%llu elements)",
                      path, name, (unsigned long long)r->offset, (unsigned long long)numel, NAMEA(s->key, s->key_len),
                      (unsigned long long)s->numel);
    if (o->n >= TB_MAX_TENSORS) return av_err(e, "%s: more than %d tensors", path, TB_MAX_TENSORS);
    o->name_bytes += strlen(name) + 1;
    if (o->name_bytes > TB_MAX_NAME_BYTES)
        return av_err(e, "%s: tensor names exceed %u MB in total", path, TB_MAX_NAME_BYTES >> 20);
    if (o->n == o->cap) {
        int nc = o->cap ? o->cap * 2 : 64;
        StTensor *nt = realloc(o->t, (size_t)nc * sizeof *nt);
        if (!nt) return av_err(e, "%s: out of memory", path);
        o->t = nt;
        o->cap = nc;
    }
    StTensor *t = &o->t[o->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return av_err(e, "%s: out of memory", path);
    o->n++;
    size_t esz = storage_types[s->dtype].esz;
    t->dtype = storage_types[s->dtype].dtype;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", storage_types[s->dtype].dtype_name);
    t->ndim = r->ndim;
    memcpy(t->shape, r->size, sizeof t->shape);
    /* offset + numel <= storage numel and numel*esz fits the entry: no overflow. */
    t->data = s->data + r->offset * esz;
    t->nbytes = (size_t)(numel * esz);
    return 0;
}

/* Emits every tensor reachable through dicts, with '.'-joined key names. */
static int flatten(Out *o, const Val *dict, size_t plen, int depth, const char *path, AvErr *e) {
    if (depth > TB_MAX_DEPTH) return av_err(e, "%s: dicts nested deeper than %d", path, TB_MAX_DEPTH);
    for (size_t i = 0; i + 1 < dict->u.seq.n; i += 2) {
        const Val *k = dict->u.seq.v[i], *v = dict->u.seq.v[i + 1];
        if (++o->visits > TB_MAX_VISITS) return av_err(e, "%s: more than %u dict items", path, TB_MAX_VISITS);
        if (v->kind != V_TENSOR && v->kind != V_DICT) continue;
        char num[24];
        const char *ks;
        size_t kl;
        if (k->kind == V_STR) {
            ks = k->u.s.p;
            kl = k->u.s.n;
            if (memchr(ks, '\0', kl))
                return av_err(e, "%s: tensor name '" NAMEF "' contains a NUL byte", path, NAMEA(ks, kl));
        } else if (k->kind == V_INT) {
            kl = (size_t)snprintf(num, sizeof num, "%lld", (long long)k->u.i);
            ks = num;
        } else {
            continue; /* e.g. tuple keys: not a tensor name */
        }
        size_t sep = plen ? 1 : 0;
        if (plen + sep + kl > TB_MAX_NAME)
            return av_err(e, "%s: tensor name '%.*s...' is longer than %d bytes", path, (int)(plen < 80 ? plen : 80),
                          o->name, TB_MAX_NAME);
        if (sep) o->name[plen] = '.';
        memcpy(o->name + plen + sep, ks, kl);
        o->name[plen + sep + kl] = '\0';
        int rc = v->kind == V_TENSOR ? emit_tensor(o, v->u.t, path, e)
                                     : flatten(o, v, plen + sep + kl, depth + 1, path, e);
        if (rc != 0) return -1;
        o->name[plen] = '\0';
    }
    return 0;
}

/* ---------------------------------------------------------------- API */

int tb_parse(StFile *f, const uint8_t *buf, size_t len, const char *path, AvErr *e) {
    memset(f, 0, sizeof *f); /* safe to st_close whatever it held before, as st_parse */
    Zip z;
    if (len >= 1 && buf[0] == 0x80)
        return av_err(e, "%s: legacy torch.save format; re-save with torch>=1.6 or convert to safetensors", path);
    if (len >= 262 && !memcmp(buf + 257, "ustar", 5))
        return av_err(e, "%s: legacy torch.save format (tar); re-save with torch>=1.6 or convert to safetensors", path);
    if (len < 4 || memcmp(buf, "PK\3\4", 4) != 0)
        return av_err(e, "%s: not a PyTorch checkpoint (no zip signature; torch.save writes a zip since 1.6)", path);
    if (zip_read(&z, buf, len, 0, path, e) != 0) return -1;

    /* The pickle is "<archive>/data.pkl"; the archive name is free-form
     * ("archive", "pytorch_model", the saved file's stem, ...). */
    const ZEntry *pkl = NULL;
    for (size_t i = 0; i < z.n && !pkl; i++) {
        const ZEntry *x = &z.ent[i];
        if (x->name_len > 9 && !memcmp(x->name + x->name_len - 9, "/data.pkl", 9) &&
            !memchr(x->name, '/', x->name_len - 9))
            pkl = x;
    }
    int rc = -1;
    Pm m;
    memset(&m, 0, sizeof m);
    Out *o = NULL;
    if (!pkl) {
        av_err(e, "%s: zip archive has no <archive>/data.pkl (not a torch.save checkpoint)", path);
        goto done;
    }
    size_t plen = pkl->name_len - 8; /* keeps the '/' */
    const char *prefix = (const char *)pkl->name;
    if (pkl->size > TB_MAX_PICKLE) {
        av_err(e, "%s: data.pkl is %llu bytes (limit %u)", path, (unsigned long long)pkl->size, TB_MAX_PICKLE);
        goto done;
    }
    /* torch >= 2.4 may write a zero CRC when checksums are switched off. */
    if (pkl->crc != 0 && crc32_z(0, pkl->data, (size_t)pkl->size) != pkl->crc) {
        av_err(e, "%s: data.pkl fails its CRC-32 check (file corrupt)", path);
        goto done;
    }
    const ZEntry *bo = zip_find(&z, prefix, plen, "byteorder", 9);
    if (bo && !(bo->size == 6 && !memcmp(bo->data, "little", 6))) {
        if (bo->size == 3 && !memcmp(bo->data, "big", 3))
            av_err(e, "%s: big-endian checkpoint (byteorder 'big'); only little-endian files are read", path);
        else
            av_err(e, "%s: unknown byteorder '" NAMEF "'", path, NAMEA(bo->data, bo->size));
        goto done;
    }

    m.p = pkl->data;
    m.len = (size_t)pkl->size;
    m.path = path;
    m.e = e;
    m.zip = &z;
    m.prefix = prefix;
    m.prefix_len = plen;
    m.scap = 256; /* never NULL: "stack + mark" is computed even for empty tuples */
    m.stack = malloc(m.scap * sizeof *m.stack);
    if (!m.stack) {
        av_err(e, "%s: out of memory", path);
        goto done;
    }
    Val *root = NULL;
    if (pm_run(&m, &root) != 0) goto done;
    if (root->kind != V_DICT) {
        av_err(e, "%s: data.pkl holds a %s, not a dict of tensors", path, kind_name[root->kind]);
        goto done;
    }
    o = calloc(1, sizeof *o);
    if (!o) {
        av_err(e, "%s: out of memory", path);
        goto done;
    }
    if (flatten(o, root, 0, 0, path, e) != 0) goto done;

    f->tensors = o->t ? o->t : calloc(1, sizeof *f->tensors);
    if (!f->tensors) {
        av_err(e, "%s: out of memory", path);
        goto done;
    }
    f->n_tensors = o->n;
    o->t = NULL;
    o->n = 0;
    /* names sorted for st_find; a name twice refused */
    if (st_index(f, path, e) != 0) {
        st_close(f);
        goto done;
    }
    rc = 0;
done:
    if (o) free_out(o);
    free(o);
    arena_free(&m.arena);
    free(m.stack);
    free(m.memo);
    free(z.ent);
    return rc;
}

int tb_open(StFile *f, const char *path, AvErr *e) { return tb_open_mode(f, path, AV_MAP_FILE, e); }

int tb_open_mode(StFile *f, const char *path, AvMapMode mode, AvErr *e) {
    return st_open_with(f, path, 1, "empty file", tb_parse, mode, e);
}
