/* tokgguf.c — the tokenizer a GGUF file carries, built as transformers builds
 * it from the same file (AutoTokenizer.from_pretrained(..., gguf_file=...)):
 * a byte-level BPE ("gpt2" model) from tokenizer.ggml.tokens and .merges,
 * tokens outside the byte alphabet respelled in it, control tokens (type 3)
 * as special added tokens and user-defined ones (type 4) as plain added
 * tokens, the split regex its "pre" names (GPT-2's otherwise), and BOS first
 * when add_bos_token says so. Handed to tokjson.c as a tokenizer.json document. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "bpe.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokjson.h"

/* The split patterns transformers pairs with llama.cpp's "pre" names. */
static const struct {
    const char *pre, *regex;
} SPLITS[] = {
    {"llama3", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
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

int tok_load_gguf(Tokenizer **out, const GgufFile *f, const char *path, AvErr *e) {
    *out = NULL;
    const char *model, *pre = "";
    size_t ml, pl = 0;
    if (gguf_get_str(f, "tokenizer.ggml.model", &model, &ml, e) != 0) return av_err_prefix(e, "%s", path);
    if (!(ml == 4 && !memcmp(model, "gpt2", 4)))
        return av_err(e, "%s: tokenizer model \"%.*s\" is not supported yet (attnviz reads byte-level \"gpt2\" GGUF "
                      "tokenizers)", path, (int)(ml < 40 ? ml : 40), model);
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && gguf_get_str(f, "tokenizer.ggml.pre", &pre, &pl, e) != 0)
        return av_err_prefix(e, "%s", path);
    const GgufKV *toks = gguf_find_kv(f, "tokenizer.ggml.tokens"), *merges = gguf_find_kv(f, "tokenizer.ggml.merges");
    const GgufKV *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    if (!toks || toks->type != GGUF_V_ARRAY || toks->arr_type != GGUF_V_STRING || !merges ||
        merges->type != GGUF_V_ARRAY || merges->arr_type != GGUF_V_STRING)
        return av_err(e, "%s: tokenizer.ggml.tokens and tokenizer.ggml.merges must be string arrays", path);
    if (toks->arr_n > 16777216 || merges->arr_n > 16777216) return av_err(e, "%s: tokenizer too large", path);
    if (types && (types->type != GGUF_V_ARRAY || types->arr_n != toks->arr_n))
        return av_err(e, "%s: tokenizer.ggml.token_type must give one type per token", path);
    int add_bos = 0;
    uint32_t bos = 0;
    if (gguf_find_kv(f, "tokenizer.ggml.add_bos_token") && gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, e))
        return av_err_prefix(e, "%s", path);
    if (add_bos && gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &bos, e)) return av_err_prefix(e, "%s", path);

    int rc = -1;
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *mlist = cJSON_CreateArray(), *added = cJSON_CreateArray();
    char *name = NULL;
    if (!root || !m || !vocab || !mlist || !added) goto oom;
    for (uint64_t i = 0; i < toks->arr_n; i++) {
        const char *s;
        size_t n;
        double ty = 1;
        if (gguf_arr_str(toks, i, &s, &n, e) || (types && gguf_kv_num(types, i, &ty, e))) goto prefixed;
        if (!n || memchr(s, '\0', n)) {
            av_err(e, "%s: token %llu is empty or holds a NUL byte", path, (unsigned long long)i);
            goto done;
        }
        int alpha = in_alphabet(s, n);
        name = alpha ? strndup(s, n) : respell(s, n);
        if (!name) goto oom;
        if (!cJSON_AddNumberToObject(vocab, name, (double)i)) goto oom;
        /* control (3) tokens become special added tokens, unless spelled outside the byte
         * alphabet (a llama.cpp mislabel transformers skips); user-defined (4) plain ones */
        if ((ty == 3 && alpha) || ty == 4) {
            cJSON *a = cJSON_CreateObject();
            if (!a || !cJSON_AddItemToArray(added, a) || !cJSON_AddNumberToObject(a, "id", (double)i) ||
                !cJSON_AddStringToObject(a, "content", name) || !cJSON_AddBoolToObject(a, "special", ty == 3))
                goto oom;
        }
        free(name);
        name = NULL;
    }
    for (uint64_t i = 0; i < merges->arr_n; i++) {
        const char *s;
        size_t n;
        if (gguf_arr_str(merges, i, &s, &n, e)) goto prefixed;
        if (!(name = strndup(s, n)) || !cJSON_AddItemToArray(mlist, cJSON_CreateString(name))) goto oom;
        free(name);
        name = NULL;
    }
    if (!cJSON_AddStringToObject(m, "type", "BPE") || !cJSON_AddItemToObject(m, "vocab", vocab)) goto oom;
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
    if (regex) {
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
    cJSON_Delete(root);
    cJSON_Delete(m);
    cJSON_Delete(vocab);
    cJSON_Delete(mlist);
    cJSON_Delete(added);
    return rc;
}
