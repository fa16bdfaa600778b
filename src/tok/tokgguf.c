/* tokgguf.c — the tokenizer a GGUF file carries, built as transformers builds
 * it from the same file (AutoTokenizer.from_pretrained(..., gguf_file=...)):
 * a SentencePiece-style BPE ("llama" model: tokens as spelled, merges
 * recovered from the scores, byte fallback, Metaspace, BOS first) or
 * a byte-level BPE ("gpt2" model) from tokenizer.ggml.tokens and .merges,
 * tokens outside the byte alphabet respelled in it, control tokens (type 3)
 * as special added tokens and user-defined ones (type 4) as plain added
 * tokens, the split regex its "pre" names (GPT-2's otherwise), and BOS first
 * when add_bos_token says so. Handed to tokjson.c as a tokenizer.json document. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <utf8proc.h>

#include "bpe.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokjson.h"
#include "util.h"

/* The split patterns transformers pairs with llama.cpp's "pre" names. */
static const struct {
    const char *pre, *regex;
} SPLITS[] = {
    {"llama3", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    /* o200k (gpt-oss; llama.cpp names it after GPT-4o): the tokenizer.json's own pattern */
    {"gpt-4o", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
               "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

/* token spelled in GPT-2's byte alphabet already? */
static int in_alphabet(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (w <= 0 || bpe_cp_to_byte((uint32_t)c) < 0) return 0;
        i += (size_t)w;
    }
    return 1;
}

/* s's bytes each written as their byte-alphabet character. */
static char *respell(const char *s, size_t n) {
    char *out = malloc(n * 2 + 1), *p = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) p += utf8proc_encode_char((int32_t)bpe_byte_to_cp((uint8_t)s[i]), (utf8proc_uint8_t *)p);
    *p = '\0';
    return out;
}

/* The file's BOS, EOS and UNK ids (-1 where absent): transformers registers
 * those as special tokens. Read once, not per token. */
static void named_specials(const GgufFile *f, int64_t ids[3]) {
    static const char *const keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.unknown_token_id"};
    for (size_t k = 0; k < 3; k++) {
        uint32_t id;
        ids[k] = gguf_find_kv(f, keys[k]) && gguf_get_u32(f, keys[k], &id, NULL) == 0 ? (int64_t)id : -1;
    }
}

typedef struct {
    int32_t l, r;        /* ids of the two pieces */
    float score;         /* the merged token's score */
    int32_t len_l, len_r; /* in characters */
    int64_t order;       /* position before sorting: the sort is stable */
} GenMerge;

static int gen_cmp(const void *a, const void *b) {
    const GenMerge *x = a, *y = b;
    /* transformers' generate_merges: score, then the pieces' lengths, all descending; stable */
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->len_l != y->len_l) return x->len_l > y->len_l ? -1 : 1;
    if (x->len_r != y->len_r) return x->len_r > y->len_r ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* A token's spelling: sp[i], len[i] bytes. */
typedef struct {
    const char **sp;
    const uint32_t *len;
    int rev; /* compared from the last byte back */
} Spellings;

static unsigned char byte_at(const Spellings *s, int32_t i, size_t k) {
    return (unsigned char)s->sp[i][s->rev ? s->len[i] - 1 - k : k];
}

static int cmp_spelling(const void *a, const void *b, void *ctx) {
    const Spellings *s = ctx;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const size_t n = s->len[x] < s->len[y] ? s->len[x] : s->len[y];
    if (!s->rev) {
        int c = memcmp(s->sp[x], s->sp[y], n);
        if (c) return c;
    } else {
        for (size_t k = 0; k < n; k++)
            if (byte_at(s, x, k) != byte_at(s, y, k)) return byte_at(s, x, k) < byte_at(s, y, k) ? -1 : 1;
    }
    if (s->len[x] != s->len[y]) return s->len[x] < s->len[y] ? -1 : 1;
    return (x > y) - (x < y); /* one spelling twice: the first id first, as lookups keep it */
}

/* For every token, the longest shorter token its spelling starts with (rev: ends with), or -1,
 * through canonical ids (a spelling given twice is known by its first id). The spellings in
 * sorted order put a token's prefixes before it: a stack of the tokens that prefix the
 * previous spelling, cut to the common prefix of the two neighbours, holds the current one's.
 * The sort's n log n compares and one pass over the neighbours' common prefixes: no work per
 * split of a token, so a long token costs its length, not its length squared. */
static int link_prefixes(const Spellings *s, int32_t n, int32_t *parent) {
    int32_t *ord = malloc((size_t)(n ? n : 1) * sizeof *ord), *stack = malloc((size_t)(n ? n : 1) * sizeof *stack);
    if (!ord || !stack) {
        free(ord), free(stack);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) ord[i] = i;
    qsort_r(ord, (size_t)n, sizeof *ord, cmp_spelling, (void *)s);
    int32_t top = 0;
    for (int32_t k = 0; k < n; k++) {
        const int32_t i = ord[k];
        size_t common = 0;
        if (k) {
            const int32_t p = ord[k - 1];
            const size_t m = s->len[p] < s->len[i] ? s->len[p] : s->len[i];
            while (common < m && byte_at(s, p, common) == byte_at(s, i, common)) common++;
        }
        while (top && s->len[stack[top - 1]] > common) top--;
        if (top && s->len[stack[top - 1]] == s->len[i]) { /* the same spelling as an earlier id */
            parent[i] = parent[stack[top - 1]];
            continue;
        }
        parent[i] = top ? stack[top - 1] : -1;
        stack[top++] = i;
    }
    free(ord), free(stack);
    return 0;
}

static int cmp_pieces(const void *a, const void *b) {
    const GenMerge *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

/* SentencePiece files carry scores, not merges: transformers recovers the merges
 * (generate_merges): every split of a token into two tokens, ranked by the whole
 * token's score (scores NULL: by its position, earlier first). respelled: NULL,
 * or per token a spelling to use instead of the file's (or NULL). Appends
 * [left, right] pairs to mlist. A token's splits are its prefix tokens met by its
 * suffix tokens (link_prefixes, both ways): work linear in the vocabulary's bytes. */
static int generate_merges(const GgufKV *toks, const GgufKV *scores, char *const *respelled, cJSON *mlist,
                           const char *path, AvErr *e) {
    const size_t n = (size_t)toks->arr_n;
    if (n > (size_t)(INT32_MAX / 4)) return av_err(e, "%s: %zu tokens: too many", path, n);
    const char **sp = malloc((n ? n : 1) * sizeof *sp);
    uint32_t *len = malloc((n ? n : 1) * sizeof *len);
    int32_t *fwd = malloc((n ? n : 1) * sizeof *fwd), *bwd = malloc((n ? n : 1) * sizeof *bwd);
    int32_t *pre = NULL, *suf = NULL; /* per prefix / suffix length of the current token: its id, or -1 */
    GenMerge *gm = NULL;
    size_t ng = 0, gcap = 0, longest = 0;
    int rc = -1;
    if (!sp || !len || !fwd || !bwd) goto oom;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t sl;
        if (gguf_arr_str(toks, i, &s, &sl, e)) goto bad;
        if (respelled && respelled[i]) s = respelled[i], sl = strlen(respelled[i]);
        if (sl > UINT32_MAX) {
            av_err(e, "token %zu is %zu bytes long", i, sl);
            goto bad;
        }
        sp[i] = s, len[i] = (uint32_t)sl;
        if (sl > longest) longest = sl;
    }
    Spellings fs = {sp, len, 0}, bs = {sp, len, 1};
    if (link_prefixes(&fs, (int32_t)n, fwd) || link_prefixes(&bs, (int32_t)n, bwd)) goto oom;
    if (!(pre = malloc((longest + 1) * sizeof *pre)) || !(suf = malloc((longest + 1) * sizeof *suf))) goto oom;
    for (size_t k = 0; k <= longest; k++) pre[k] = suf[k] = -1;
    for (size_t i = 0; i < n; i++) {
        double sc = -(double)i; /* no scores: the file's order ranks the merges (Gemma) */
        if (scores && gguf_kv_num(scores, i, &sc, e)) goto bad;
        const size_t first = ng, L = len[i];
        for (int32_t x = fwd[i]; x >= 0; x = fwd[x]) pre[len[x]] = x;
        for (int32_t x = bwd[i]; x >= 0; x = bwd[x]) suf[len[x]] = x;
        int32_t chars_l = 0, chars = 0;
        for (size_t k = 0; k < L; k++) chars += ((unsigned char)sp[i][k] & 0xC0) != 0x80;
        for (size_t k = 1; k < L; k++) {
            chars_l += ((unsigned char)sp[i][k - 1] & 0xC0) != 0x80;
            if (((unsigned char)sp[i][k] & 0xC0) == 0x80) continue; /* split between characters */
            const int32_t l = pre[k], r = suf[L - k];
            if (l < 0 || r < 0) continue;
            if (ng == gcap) {
                gcap = gcap ? gcap * 2 : 1024;
                GenMerge *g2 = realloc(gm, gcap * sizeof *g2);
                if (!g2) goto oom;
                gm = g2;
            }
            gm[ng++] = (GenMerge){l, r, (float)sc, chars_l, chars - chars_l, 0};
        }
        for (int32_t x = fwd[i]; x >= 0; x = fwd[x]) pre[len[x]] = -1;
        for (int32_t x = bwd[i]; x >= 0; x = bwd[x]) suf[len[x]] = -1;
        /* within a token, by the pieces' ids */
        if (ng - first > 1) qsort(gm + first, ng - first, sizeof *gm, cmp_pieces);
    }
    for (size_t i = 0; i < ng; i++) gm[i].order = (int64_t)i;
    if (ng) qsort(gm, ng, sizeof *gm, gen_cmp);
    for (size_t i = 0; i < ng; i++) {
        cJSON *pair = cJSON_CreateArray();
        char *a = strndup(sp[gm[i].l], len[gm[i].l]), *b = strndup(sp[gm[i].r], len[gm[i].r]);
        int ok = pair && a && b && cJSON_AddItemToArray(pair, cJSON_CreateString(a)) &&
                 cJSON_AddItemToArray(pair, cJSON_CreateString(b)) && cJSON_AddItemToArray(mlist, pair);
        free(a), free(b);
        if (!ok) {
            cJSON_Delete(pair);
            goto oom;
        }
    }
    rc = 0;
    goto done;
oom:
    av_err(e, "%s: out of memory recovering the merges", path);
    goto done;
bad:
    av_err_prefix(e, "%s", path);
done:
    free(sp), free(len), free(fwd), free(bwd), free(pre), free(suf);
    free(gm);
    return rc;
}

/* Gemma files store a token of blanks as the blanks themselves, where the
 * tokenizer looks them up as "▁" runs: transformers respells a token holding a
 * space and only whitespace as that many "▁" (its gemma_tokenizer). NULL when
 * the token is not one. */
static char *gemma_blank(const char *s, size_t n) {
    int space = 0;
    size_t chars = 0;
    for (size_t i = 0; i < n;) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (w <= 0) return NULL;
        utf8proc_category_t k = utf8proc_category(c);
        int white = (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || k == UTF8PROC_CATEGORY_ZS ||
                    k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
        if (!white) return NULL;
        space |= c == ' ';
        chars++;
        i += (size_t)w;
    }
    if (!space) return NULL;
    char *out = malloc(chars * 3 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < chars; i++) memcpy(out + 3 * i, "\xe2\x96\x81", 3);
    out[chars * 3] = '\0';
    return out;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Two tokens spelled alike: llama.cpp refuses such a vocabulary (its map from spelling to id
 * would hold fewer entries than its tokens, GGML_ASSERT(id_to_token.size() ==
 * token_to_id.size())), and which id an encoding gives would depend on the reader. */
static int vocab_twice(const cJSON *vocab, const char *path, AvErr *e) {
    const int n = cJSON_GetArraySize(vocab);
    const cJSON **v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return av_err(e, "%s: out of memory building its tokenizer", path);
    int k = 0;
    for (const cJSON *c = vocab->child; c; c = c->next) v[k++] = c;
    qsort(v, (size_t)k, sizeof *v, cmp_key);
    for (int i = 1; i < k; i++)
        if (!strcmp(v[i - 1]->string, v[i]->string)) {
            const int a = v[i - 1]->valueint, b = v[i]->valueint, rc = av_err(
                e, "%s: tokens %d and %d are both spelled '%s' (llama.cpp refuses such a vocabulary too)", path,
                a < b ? a : b, a < b ? b : a, v[i]->string);
            free(v);
            return rc;
        }
    free(v);
    return 0;
}

static cJSON *item(const char *kind, const char *id, int type_id) {
    cJSON *o = cJSON_CreateObject(), *in = cJSON_CreateObject();
    if (!o || !in || !cJSON_AddStringToObject(in, "id", id) || !cJSON_AddNumberToObject(in, "type_id", type_id) ||
        !cJSON_AddItemToObject(o, kind, in)) {
        cJSON_Delete(o);
        cJSON_Delete(in);
        return NULL;
    }
    return o;
}

int tok_load_gguf(Tokenizer **out, const GgufFile *f, const char *path, unsigned flags, AvErr *e) {
    *out = NULL;
    const char *model, *pre = "";
    size_t ml, pl = 0;
    if (gguf_get_str(f, "tokenizer.ggml.model", &model, &ml, e) != 0) return av_err_prefix(e, "%s", path);
    const int spm = ml == 5 && !memcmp(model, "llama", 5);
    if (!(ml == 4 && !memcmp(model, "gpt2", 4)) && !spm)
        return av_err(e, "%s: tokenizer model \"%.*s\" is not supported yet (attnviz reads the \"gpt2\" and \"llama\" "
                      "GGUF tokenizers)", path, (int)(ml < 40 ? ml : 40), model);
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && gguf_get_str(f, "tokenizer.ggml.pre", &pre, &pl, e) != 0)
        return av_err_prefix(e, "%s", path);
    const GgufKV *toks = gguf_find_kv(f, "tokenizer.ggml.tokens"), *merges = gguf_find_kv(f, "tokenizer.ggml.merges");
    const GgufKV *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    const GgufKV *scores = gguf_find_kv(f, "tokenizer.ggml.scores");
    if (!toks || toks->type != GGUF_V_ARRAY || toks->arr_type != GGUF_V_STRING ||
        (merges && (merges->type != GGUF_V_ARRAY || merges->arr_type != GGUF_V_STRING)))
        return av_err(e, "%s: tokenizer.ggml.tokens (and .merges) must be string arrays", path);
    if (!merges && !spm) return av_err(e, "%s: a gpt2 tokenizer needs tokenizer.ggml.merges", path);
    if (!merges && (!scores || scores->type != GGUF_V_ARRAY || scores->arr_n != toks->arr_n))
        return av_err(e, "%s: a llama tokenizer without merges needs one tokenizer.ggml.scores entry per token", path);
    if (toks->arr_n > 16777216 || (merges && merges->arr_n > 16777216)) return av_err(e, "%s: tokenizer too large", path);
    if (types && (types->type != GGUF_V_ARRAY || types->arr_n != toks->arr_n))
        return av_err(e, "%s: tokenizer.ggml.token_type must give one type per token", path);
    int add_bos = spm; /* transformers: llama tokenizers add BOS unless the file says otherwise */
    uint32_t bos = 0;
    int prefix_space = 1;
    if (gguf_find_kv(f, "tokenizer.ggml.add_space_prefix") &&
        gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &prefix_space, e))
        return av_err_prefix(e, "%s", path);
    if (gguf_find_kv(f, "tokenizer.ggml.add_bos_token") && gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, e))
        return av_err_prefix(e, "%s", path);
    if (add_bos && gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &bos, e)) return av_err_prefix(e, "%s", path);

    /* Gemma's merges follow the tokens' order, not their scores, and its blank
     * tokens are respelled (transformers' gemma_tokenizer): the family says so */
    const int gemma = spm && (flags & TOK_GGUF_SPM_GEMMA);
    char **blank = gemma ? calloc((size_t)toks->arr_n, sizeof *blank) : NULL;
    if (gemma && !blank) return av_err(e, "%s: out of memory building its tokenizer", path);
    for (uint64_t i = 0; gemma && i < toks->arr_n; i++) {
        const char *ts;
        size_t tn;
        if (gguf_arr_str(toks, i, &ts, &tn, e)) {
            for (uint64_t j = 0; j < i; j++) free(blank[j]);
            free(blank);
            return av_err_prefix(e, "%s", path);
        }
        blank[i] = gemma_blank(ts, tn);
    }

    int rc = -1;
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *mlist = cJSON_CreateArray(), *added = cJSON_CreateArray();
    char *name = NULL;
    if (!root || !m || !vocab || !mlist || !added) goto oom;
    int64_t named[3];
    named_specials(f, named);
    for (uint64_t i = 0; i < toks->arr_n; i++) {
        const char *s;
        size_t n;
        double ty = 1;
        if (gguf_arr_str(toks, i, &s, &n, e) || (types && gguf_kv_num(types, i, &ty, e))) goto prefixed;
        if (!n || memchr(s, '\0', n)) {
            av_err(e, "%s: token %llu is empty or holds a NUL byte", path, (unsigned long long)i);
            goto done;
        }
        int alpha = spm || in_alphabet(s, n);
        name = blank && blank[i] ? strdup(blank[i]) : alpha ? strndup(s, n) : respell(s, n);
        if (!name) goto oom;
        if (!cJSON_AddNumberToObject(vocab, name, (double)i)) goto oom;
        /* control (3) tokens become special added tokens, unless spelled outside the byte
         * alphabet (a llama.cpp mislabel transformers skips); user-defined (4) plain ones */
        int named_special = spm && ((int64_t)i == named[0] || (int64_t)i == named[1] || (int64_t)i == named[2]);
        if ((ty == 3 && alpha) || ty == 4 || named_special) {
            cJSON *a = cJSON_CreateObject();
            if (!a || !cJSON_AddItemToArray(added, a) || !cJSON_AddNumberToObject(a, "id", (double)i) ||
                !cJSON_AddStringToObject(a, "content", name) || !cJSON_AddBoolToObject(a, "special", ty != 4))
                goto oom;
        }
        free(name);
        name = NULL;
    }
    for (uint64_t i = 0; merges && i < merges->arr_n; i++) {
        const char *s;
        size_t n;
        if (gguf_arr_str(merges, i, &s, &n, e)) goto prefixed;
        if (!(name = strndup(s, n)) || !cJSON_AddItemToArray(mlist, cJSON_CreateString(name))) goto oom;
        free(name);
        name = NULL;
    }
    if (vocab_twice(vocab, path, e) != 0) goto done;
    if (!merges && generate_merges(toks, gemma ? NULL : scores, blank, mlist, path, e) != 0) goto done;
    if (!cJSON_AddStringToObject(m, "type", "BPE") || !cJSON_AddItemToObject(m, "vocab", vocab)) goto oom;
    if (spm && (!cJSON_AddBoolToObject(m, "byte_fallback", 1) || !cJSON_AddBoolToObject(m, "fuse_unk", 1))) goto oom;
    vocab = NULL;
    if (!cJSON_AddItemToObject(m, "merges", mlist)) goto oom;
    mlist = NULL;
    if (!cJSON_AddItemToObject(root, "model", m)) goto oom;
    m = NULL;
    if (!cJSON_AddItemToObject(root, "added_tokens", added)) goto oom;
    added = NULL;
    /* pre-tokenizer: the named split then bytes, or GPT-2's ByteLevel with its regex */
    cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
    if (!pt) goto oom;
    const char *regex = NULL;
    for (size_t k = 0; k < sizeof SPLITS / sizeof SPLITS[0]; k++)
        if (strlen(SPLITS[k].pre) == pl && !memcmp(pre, SPLITS[k].pre, pl)) regex = SPLITS[k].regex;
    if (spm) {
        /* LlamaTokenizer's: spaces as ▁, one prefixed to the text's start (unless the file says no), no split */
        if (!cJSON_AddStringToObject(pt, "type", "Metaspace") || !cJSON_AddStringToObject(pt, "replacement", "\xe2\x96\x81") ||
            !cJSON_AddStringToObject(pt, "prepend_scheme", prefix_space ? "first" : "never") ||
            !cJSON_AddBoolToObject(pt, "split", 0))
            goto oom;
    } else if (regex) {
        cJSON *seq = cJSON_AddArrayToObject(pt, "pretokenizers"), *sp = cJSON_CreateObject(), *bl = cJSON_CreateObject();
        if (!cJSON_AddStringToObject(pt, "type", "Sequence") || !seq || !sp || !bl || !cJSON_AddItemToArray(seq, sp) ||
            !cJSON_AddItemToArray(seq, bl) || !cJSON_AddStringToObject(sp, "type", "Split") ||
            !cJSON_AddStringToObject(cJSON_AddObjectToObject(sp, "pattern"), "Regex", regex) ||
            !cJSON_AddStringToObject(sp, "behavior", "Isolated") || !cJSON_AddStringToObject(bl, "type", "ByteLevel") ||
            !cJSON_AddBoolToObject(bl, "add_prefix_space", 0) || !cJSON_AddBoolToObject(bl, "use_regex", 0))
            goto oom;
    } else if (!cJSON_AddStringToObject(pt, "type", "ByteLevel") || !cJSON_AddBoolToObject(pt, "add_prefix_space", 0) ||
               !cJSON_AddBoolToObject(pt, "use_regex", 1)) {
        goto oom;
    }
    if (add_bos) {
        if (bos >= toks->arr_n) {
            av_err(e, "%s: tokenizer.ggml.bos_token_id %u is not a token", path, bos);
            goto done;
        }
        const char *bs;
        size_t bn;
        if (gguf_arr_str(toks, bos, &bs, &bn, e)) goto prefixed;
        char *bname = in_alphabet(bs, bn) ? strndup(bs, bn) : respell(bs, bn);
        cJSON *pp = cJSON_AddObjectToObject(root, "post_processor"), *single, *pair, *sp, *ent, *ids;
        int ok = bname && pp && cJSON_AddStringToObject(pp, "type", "TemplateProcessing") &&
                 (single = cJSON_AddArrayToObject(pp, "single")) && (pair = cJSON_AddArrayToObject(pp, "pair")) &&
                 cJSON_AddItemToArray(single, item("SpecialToken", bname, 0)) &&
                 cJSON_AddItemToArray(single, item("Sequence", "A", 0)) &&
                 cJSON_AddItemToArray(pair, item("SpecialToken", bname, 0)) &&
                 cJSON_AddItemToArray(pair, item("Sequence", "A", 0)) &&
                 cJSON_AddItemToArray(pair, item("SpecialToken", bname, 1)) &&
                 cJSON_AddItemToArray(pair, item("Sequence", "B", 1)) &&
                 (sp = cJSON_AddObjectToObject(pp, "special_tokens")) && (ent = cJSON_AddObjectToObject(sp, bname)) &&
                 (ids = cJSON_AddArrayToObject(ent, "ids")) && cJSON_AddItemToArray(ids, cJSON_CreateNumber(bos));
        free(bname);
        if (!ok) goto oom;
    }
    TjTokenizer *tj;
    if (tj_load_cjson(&tj, root, path, e) != 0) goto done;
    rc = tok_from_tj(out, tj, e);
    goto done;
prefixed:
    av_err_prefix(e, "%s", path);
    goto done;
oom:
    av_err(e, "%s: out of memory building its tokenizer", path);
done:
    free(name);
    for (uint64_t i = 0; blank && i < toks->arr_n; i++) free(blank[i]);
    free(blank);
    cJSON_Delete(root);
    cJSON_Delete(m);
    cJSON_Delete(vocab);
    cJSON_Delete(mlist);
    cJSON_Delete(added);
    return rc;
}
