/* bpe.c — byte-level BPE (GPT-2, RoBERTa) matching Hugging Face `tokenizers`:
 * vocab.json + merges.txt, the ByteLevel pre-tokenizer (GPT-2's pattern, run
 * here by hand over code points) and the BPE model.
 *
 * Semantics taken from the Rust library, checked against it:
 *  - \s is Unicode White_Space (Oniguruma): U+0085 is a space, U+FEFF is not;
 *    \p{L} / \p{N} are the L* / N* categories (from utf8proc, whose Unicode
 *    version may trail the library's for recently assigned code points);
 *  - merges: repeatedly the adjacent pair with the lowest (rank, position) is
 *    merged, a stale queue entry being recognised by the id it would make;
 *  - merges.txt: lines starting with "#version" are skipped, any other line
 *    must be "a b", a later duplicate of a merge overrides its rank. */
#include "bpe.h"
#include "jsonread.h"
#include "util.h"

#include "strtab.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define BPE_MAX_FILE (64u << 20)      /* GPT-2's files are 1 MB and 0.5 MB */
#define BPE_MAX_TOKEN_BYTES 1024      /* GPT-2's longest token is 256 bytes */
#define BPE_MAX_VOCAB (1 << 22)
#define BPE_CACHE_SLOTS 1024          /* per-scratch word cache (power of 2) */
#define BPE_CACHE_MAX_WORD 64         /* longer words are rare: not cached */
#define BPE_MAX_WORD_BYTES (1u << 30) /* merge positions are int32 */

typedef struct {
    uint32_t a, b;   /* pair of symbol ids; a == UINT32_MAX: empty slot */
    int32_t rank, id;
} MergeSlot;

struct BpeModel {
    char *arena;          /* token spellings, NUL-terminated */
    char *disp_arena;     /* display strings that differ from the spelling */
    AvStrTab vocab;       /* id <-> spelling (in arena) */
    const char **disp;    /* id -> display text */
    int n;
    MergeSlot *merges;
    size_t mmask;
    int n_merges;         /* merge lines read (ranks are 0..n_merges-1) */
    int byte_id[256];     /* id of each byte's one-character token */
};

/* ---- byte <-> unicode ------------------------------------------------- */

/* Bytes without a printable code point of their own, in byte order, get
 * U+0100 + their index: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD. */
uint32_t bpe_byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33u + (uint32_t)(b - 0x7F);
    return 0x143; /* 0xAD */
}

int bpe_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x143) return -1;
    uint32_t k = cp - 0x100;
    if (k <= 0x20) return (int)k;
    if (k < 67) return (int)(0x7F + k - 33);
    return 0xAD;
}

/* ---- character classes -------------------------------------------------- */

int bpe_is_space(int32_t c) {
    if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

enum { CL_LETTER, CL_NUMBER, CL_SPACE, CL_OTHER };

static int classify(int32_t c) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CL_LETTER;
        if (c >= '0' && c <= '9') return CL_NUMBER;
        return bpe_is_space(c) ? CL_SPACE : CL_OTHER;
    }
    if (bpe_is_space(c)) return CL_SPACE;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return CL_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CL_NUMBER;
    default:
        return CL_OTHER;
    }
}

/* Decodes the (valid) UTF-8 character at s[i]; returns its length. */
static size_t decode_at(const uint8_t *s, size_t len, size_t i, int32_t *c) {
    if (s[i] < 0x80) {
        *c = s[i];
        return 1;
    }
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), c);
    if (k <= 0) { /* not reachable for validated input: treat the byte as "other" */
        *c = 0xFFFD;
        return 1;
    }
    return (size_t)k;
}

size_t bpe_pretoken_end(const char *str, size_t len, size_t pos) {
    const uint8_t *s = (const uint8_t *)str;
    int32_t c;
    /* 's|'t|'re|'ve|'m|'ll|'d — ASCII and case-sensitive, tried first. */
    if (s[pos] == '\'' && pos + 1 < len) {
        uint8_t c1 = s[pos + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
        if (pos + 2 < len) {
            uint8_t c2 = s[pos + 2];
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                return pos + 3;
        }
    }
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional U+0020, then a run of one class. */
    size_t j = s[pos] == ' ' ? pos + 1 : pos;
    if (j < len) {
        size_t k = j + decode_at(s, len, j, &c);
        int cl = classify(c);
        if (cl != CL_SPACE) {
            while (k < len) {
                size_t w = decode_at(s, len, k, &c);
                if (classify(c) != cl) break;
                k += w;
            }
            return k;
        }
    }
    /* '\s+(?!\S)|\s+': a run of spaces; before a non-space the run gives up its
     * last character (which then prefixes the next word) unless it is alone. */
    size_t k = pos, last = pos;
    while (k < len) {
        size_t w = decode_at(s, len, k, &c);
        if (classify(c) != CL_SPACE) break;
        last = k;
        k += w;
    }
    if (k == len || last == pos) return k;
    return last;
}

/* Id of the token spelled a followed by b, or -1. */
static int lookup2(const BpeModel *m, const char *a, size_t alen, const char *b, size_t blen) {
    return av_strtab_find2(&m->vocab, a, alen, b, blen);
}

int bpe_token_to_id(const BpeModel *m, const char *tok, size_t len) {
    return lookup2(m, tok, len, "", 0);
}

int bpe_vocab_size(const BpeModel *m) { return m->n; }
int bpe_n_merges(const BpeModel *m) { return m->n_merges; }

const char *bpe_id_to_token(const BpeModel *m, int id) {
    return id >= 0 && id < m->n ? m->vocab.tok[id] : NULL;
}

const char *bpe_id_to_display(const BpeModel *m, int id) {
    return id >= 0 && id < m->n ? m->disp[id] : NULL;
}


/* ---- merge table -------------------------------------------------------- */

static size_t merge_slot(uint32_t a, uint32_t b, size_t mask) {
    uint64_t k = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (size_t)(k >> 32) & mask;
}

/* Id the pair (a, b) merges into (rank in *rank), or -1. */
static int merge_find(const BpeModel *m, int a, int b, int32_t *rank) {
    for (size_t i = merge_slot((uint32_t)a, (uint32_t)b, m->mmask);; i = (i + 1) & m->mmask) {
        const MergeSlot *s = &m->merges[i];
        if (s->a == UINT32_MAX) return -1;
        if (s->a == (uint32_t)a && s->b == (uint32_t)b) {
            *rank = s->rank;
            return s->id;
        }
    }
}

/* ---- loading ------------------------------------------------------------ */

static int utf8_valid(const uint8_t *s, size_t len) { return av_utf8_invalid_at(s, len) < 0; }

static int load_vocab(BpeModel *m, const char *path, AvErr *e) {
    char *buf = NULL;
    size_t len = 0;
    if (av_read_file(path, BPE_MAX_FILE, &buf, &len, e) < 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, path, e);
    int rc = -1;
    if (pr < 0) goto done;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= buf && at <= buf + len ? (long)(at - buf) : -1;
        av_err(e, "%s: not valid JSON (near byte %ld)", path, off);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        av_err(e, "%s: expected a JSON object mapping tokens to ids", path);
        goto done;
    }
    int n = cJSON_GetArraySize(root);
    if (n <= 0 || n > BPE_MAX_VOCAB) {
        av_err(e, "%s: %d tokens (expected 1 to %d)", path, n, BPE_MAX_VOCAB);
        goto done;
    }
    size_t bytes = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) bytes += strlen(it->string) + 1;
    m->arena = malloc(bytes);
    if (!m->arena || av_strtab_init(&m->vocab, n) != 0) {
        av_err(e, "%s: out of memory", path);
        goto done;
    }
    m->n = n;
    char *p = m->arena;
    cJSON_ArrayForEach(it, root) {
        const char *s = it->string;
        size_t sl = strlen(s);
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it)) {
            av_err(e, "%s: token \"%.64s\": the id is not an integer", path, s);
            goto done;
        }
        if (!(v >= 0 && v < n)) { /* also NaN; checked before any conversion */
            av_err(e, "%s: token \"%.64s\": id %.0f outside 0..%d (ids must be 0..n-1)", path, s,
                   v, n - 1);
            goto done;
        }
        int id = (int)v;
        if ((double)id != v) {
            av_err(e, "%s: token \"%.64s\": the id is not an integer", path, s);
            goto done;
        }
        if (sl == 0 || sl > BPE_MAX_TOKEN_BYTES) {
            av_err(e, "%s: token with id %d is %zu bytes long (expected 1 to %d)", path, id, sl,
                   BPE_MAX_TOKEN_BYTES);
            goto done;
        }
        if (!utf8_valid((const uint8_t *)s, sl)) {
            av_err(e, "%s: token with id %d is not valid UTF-8", path, id);
            goto done;
        }
        if (lookup2(m, s, sl, "", 0) >= 0) {
            av_err(e, "%s: duplicate token \"%.64s\"", path, s);
            goto done;
        }
        if (m->vocab.tok[id]) {
            av_err(e, "%s: id %d is given to both \"%.64s\" and \"%.64s\"", path, id, m->vocab.tok[id], s);
            goto done;
        }
        memcpy(p, s, sl + 1);
        av_strtab_set(&m->vocab, id, p, sl);
        p += sl + 1;
    }
    /* n distinct ids in 0..n-1: every id is taken. */
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        utf8proc_ssize_t k = utf8proc_encode_char((int32_t)bpe_byte_to_cp((uint8_t)b), u);
        m->byte_id[b] = lookup2(m, (const char *)u, (size_t)k, "", 0);
        if (m->byte_id[b] < 0) {
            av_err(e, "%s: no token for byte 0x%02X (\"%.*s\"): not a byte-level BPE vocabulary",
                   path, b, (int)k, (const char *)u);
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    free(buf);
    return rc;
}

static int load_merges(BpeModel *m, const char *path, AvErr *e) {
    char *buf = NULL;
    size_t len = 0;
    if (av_read_file(path, BPE_MAX_FILE, &buf, &len, e) < 0) return -1;
    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '\n') n_lines++;
    if (len > 0 && buf[len - 1] != '\n') n_lines++;
    size_t cap = 16;
    while (cap < n_lines * 2) cap *= 2;
    m->merges = malloc(cap * sizeof *m->merges);
    if (!m->merges) {
        free(buf);
        return av_err(e, "%s: out of memory", path);
    }
    memset(m->merges, 0xff, cap * sizeof *m->merges);
    m->mmask = cap - 1;

    int rc = -1;
    char *p = buf, *end = buf + len;
    int32_t rank = 0;
    for (size_t line = 1; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        if (stop > p && stop[-1] == '\r') stop--;
        size_t ll = (size_t)(stop - p);
        char *next = nl ? nl + 1 : end;
        if (ll >= 8 && memcmp(p, "#version", 8) == 0) {
            p = next;
            continue;
        }
        if (ll > 2 * BPE_MAX_TOKEN_BYTES + 1) {
            av_err(e, "%s: line %zu is %zu bytes long: not a merges file?", path, line, ll);
            goto done;
        }
        char *sp = memchr(p, ' ', ll);
        if (!sp || sp == p || sp + 1 == stop || memchr(sp + 1, ' ', (size_t)(stop - sp - 1))) {
            av_err(e, "%s: line %zu: expected two symbols separated by one space", path, line);
            goto done;
        }
        size_t al = (size_t)(sp - p), bl = (size_t)(stop - sp - 1);
        int a = lookup2(m, p, al, "", 0), b = lookup2(m, sp + 1, bl, "", 0);
        int ab = a >= 0 && b >= 0 ? lookup2(m, p, al, sp + 1, bl) : -1;
        if (a < 0 || b < 0 || ab < 0) {
            const char *what = a < 0 ? p : b < 0 ? sp + 1 : p;
            int wl = (int)(a < 0 ? al : b < 0 ? bl : al + 1 + bl);
            if (wl > 64) wl = 64;
            av_err(e, "%s: line %zu: %s \"%.*s\" is not in the vocabulary", path, line,
                   a < 0 || b < 0 ? "symbol" : "the merge of", wl, what);
            goto done;
        }
        size_t i = merge_slot((uint32_t)a, (uint32_t)b, m->mmask);
        while (m->merges[i].a != UINT32_MAX &&
               !(m->merges[i].a == (uint32_t)a && m->merges[i].b == (uint32_t)b))
            i = (i + 1) & m->mmask;
        m->merges[i] = (MergeSlot){(uint32_t)a, (uint32_t)b, rank, ab}; /* later duplicate wins */
        rank++; /* the 64 MB file bound keeps ranks far below INT32_MAX */
        p = next;
    }
    m->n_merges = rank;
    rc = 0;
done:
    free(buf);
    return rc;
}

/* Display text of every token, decoded once at load. */
static int build_display(BpeModel *m, AvErr *e) {
    size_t total = 0, n = (size_t)(unsigned)m->n; /* 1..BPE_MAX_VOCAB */
    for (size_t id = 0; id < n; id++) total += m->vocab.len[id] + 1;
    m->disp_arena = malloc(total);
    m->disp = malloc(n * sizeof *m->disp);
    if (!m->disp_arena || !m->disp) return av_err(e, "out of memory");
    char *p = m->disp_arena;
    for (int id = 0; id < m->n; id++) {
        const uint8_t *s = (const uint8_t *)m->vocab.tok[id];
        size_t sl = m->vocab.len[id], i = 0, k = 0;
        int mapped = 1;
        while (i < sl && mapped) {
            int32_t c;
            i += decode_at(s, sl, i, &c);
            int b = bpe_cp_to_byte((uint32_t)c);
            if (b <= 0) mapped = 0; /* outside the table, or NUL: keep the spelling */
            else p[k++] = (char)b;
        }
        int valid = mapped && utf8_valid((const uint8_t *)p, k);
        if (valid && (k != sl || memcmp(p, s, sl) != 0)) {
            p[k] = '\0';
            m->disp[id] = p;
            p += k + 1;
        } else {
            m->disp[id] = m->vocab.tok[id];
        }
    }
    return 0;
}

int bpe_load(BpeModel **out, const char *vocab_path, const char *merges_path, AvErr *e) {
    *out = NULL;
    BpeModel *m = calloc(1, sizeof *m);
    if (!m) return av_err(e, "out of memory");
    if (load_vocab(m, vocab_path, e) < 0 || load_merges(m, merges_path, e) < 0 ||
        build_display(m, e) < 0) {
        bpe_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void bpe_free(BpeModel *m) {
    if (!m) return;
    free(m->arena);
    free(m->disp_arena);
    av_strtab_free(&m->vocab);
    free((void *)m->disp);
    free(m->merges);
    free(m);
}

/* ---- merging ------------------------------------------------------------ */

typedef struct {
    int32_t rank, pos, id;
} HeapItem;

typedef struct {
    uint32_t hash, len;
    size_t key, ids; /* offsets into the pools */
    uint32_t n_ids;
    int used;
} CacheSlot;

struct BpeScratch {
    int32_t *sym, *prev, *next; /* one entry per byte of the word */
    HeapItem *heap;
    size_t cap, heap_cap;
    int *out;
    size_t out_n;
    CacheSlot cache[BPE_CACHE_SLOTS];
    char *keys;                 /* cached words' bytes */
    size_t keys_n, keys_cap;
    int *cids;                  /* cached words' ids */
    size_t cids_n, cids_cap;
};

BpeScratch *bpe_scratch_new(void) { return calloc(1, sizeof(BpeScratch)); }

void bpe_scratch_free(BpeScratch *sc) {
    if (!sc) return;
    free(sc->sym);
    free(sc->prev);
    free(sc->next);
    free(sc->heap);
    free(sc->out);
    free(sc->keys);
    free(sc->cids);
    free(sc);
}

static int heap_less(const HeapItem *x, const HeapItem *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static int heap_push(BpeScratch *sc, size_t *n, HeapItem it) {
    if (*n == sc->heap_cap) {
        size_t cap = sc->heap_cap ? sc->heap_cap * 2 : 64;
        HeapItem *nh = realloc(sc->heap, cap * sizeof *nh);
        if (!nh) return -1;
        sc->heap = nh;
        sc->heap_cap = cap;
    }
    HeapItem *h = sc->heap;
    size_t i = (*n)++;
    while (i > 0 && heap_less(&it, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = it;
    return 0;
}

static HeapItem heap_pop(BpeScratch *sc, size_t *n) {
    HeapItem *h = sc->heap, top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static int push_pair(const BpeModel *m, BpeScratch *sc, size_t *hn, int32_t pos) {
    int32_t q = sc->next[pos], rank;
    if (q < 0) return 0;
    int id = merge_find(m, sc->sym[pos], sc->sym[q], &rank);
    return id < 0 ? 0 : heap_push(sc, hn, (HeapItem){rank, pos, id});
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np) return -1;
    *p = np;
    *cap = c;
    return 0;
}

/* Merges w's byte symbols into sc->out[0..out_n). */
static int merge_word(const BpeModel *m, BpeScratch *sc, const uint8_t *w, size_t len) {
    if (len > sc->cap) {
        size_t c = sc->cap ? sc->cap : 64;
        while (c < len) c *= 2;
        int32_t *a = realloc(sc->sym, c * sizeof *a);
        if (!a) return -1;
        sc->sym = a;
        if (!(a = realloc(sc->prev, c * sizeof *a))) return -1;
        sc->prev = a;
        if (!(a = realloc(sc->next, c * sizeof *a))) return -1;
        sc->next = a;
        int *o = realloc(sc->out, c * sizeof *o);
        if (!o) return -1;
        sc->out = o;
        sc->cap = c;
    }
    for (size_t i = 0; i < len; i++) {
        sc->sym[i] = m->byte_id[w[i]];
        sc->prev[i] = (int32_t)i - 1;
        sc->next[i] = i + 1 < len ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (push_pair(m, sc, &hn, (int32_t)i) < 0) return -1;
    while (hn > 0) {
        HeapItem top = heap_pop(sc, &hn);
        int32_t p = top.pos, q = sc->next[p], rank;
        if (sc->sym[p] < 0 || q < 0) continue; /* merged away since it was queued */
        if (merge_find(m, sc->sym[p], sc->sym[q], &rank) != top.id) continue;
        sc->sym[p] = top.id;
        sc->sym[q] = -1;
        sc->next[p] = sc->next[q];
        if (sc->next[q] >= 0) sc->prev[sc->next[q]] = p;
        if (sc->prev[p] >= 0 && push_pair(m, sc, &hn, sc->prev[p]) < 0) return -1;
        if (push_pair(m, sc, &hn, p) < 0) return -1;
    }
    sc->out_n = 0;
    for (int32_t i = len ? 0 : -1; i >= 0; i = sc->next[i]) sc->out[sc->out_n++] = sc->sym[i];
    return 0;
}

int bpe_encode_word(const BpeModel *m, BpeScratch *sc, const char *w, size_t len, const int **ids,
                    size_t *n, AvErr *e) {
    *ids = NULL;
    *n = 0;
    if (len == 0) return 0;
    if (len > BPE_MAX_WORD_BYTES) return av_err(e, "a %zu-byte word is too long to tokenize", len);
    CacheSlot *slot = NULL;
    uint32_t h = 0;
    if (len <= BPE_CACHE_MAX_WORD) {
        h = av_fnv1a(w, len, AV_FNV_SEED);
        slot = &sc->cache[h & (BPE_CACHE_SLOTS - 1)];
        if (slot->used && slot->hash == h && slot->len == len &&
            memcmp(sc->keys + slot->key, w, len) == 0) {
            *ids = sc->cids + slot->ids;
            *n = slot->n_ids;
            return 0;
        }
    }
    if (merge_word(m, sc, (const uint8_t *)w, len) < 0) return av_err(e, "out of memory in BPE");
    *ids = sc->out;
    *n = sc->out_n;
    if (slot) { /* a failed insert only costs the cache */
        if (grow((void **)&sc->keys, &sc->keys_cap, sc->keys_n + len, 1) == 0 &&
            grow((void **)&sc->cids, &sc->cids_cap, sc->cids_n + sc->out_n, sizeof(int)) == 0) {
            memcpy(sc->keys + sc->keys_n, w, len);
            memcpy(sc->cids + sc->cids_n, sc->out, sc->out_n * sizeof(int));
            *slot = (CacheSlot){h, (uint32_t)len, sc->keys_n, sc->cids_n, (uint32_t)sc->out_n, 1};
            sc->keys_n += len;
            sc->cids_n += sc->out_n;
        }
    }
    return 0;
}
