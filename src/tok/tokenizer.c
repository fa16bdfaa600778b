/* tokenizer.c — the Tokenizer type: BERT WordPiece matching Hugging Face
 * `tokenizers` (the Rust library behind AutoTokenizer) for bert-*-(un)cased
 * tokenizer.json: special-token split -> BertNormalizer -> BertPreTokenizer ->
 * WordPiece -> [CLS] A [SEP] (B [SEP]) with longest-first truncation; and
 * byte-level BPE (bpe.c) with GPT-2's or RoBERTa's special tokens and template.
 *
 * Deliberate Rust (not Python/JS) semantics, checked against the real library:
 *  - lowercase is per code point (char::to_lowercase): Σ is always σ, never
 *    the word-final ς that Python/JS string lowercasing produces;
 *  - accents are stripped (NFD, drop Mn) before lowercasing;
 *  - the CJK ranges are Rust's, whose Extension E range starts at U+2B920;
 *  - pair truncation is truncate_encodings' LongestFirst, with the lengths
 *    the library compares (see EarlyStop).
 * Unicode properties come from utf8proc; HF's own tables (unicode_categories)
 * are older, so code points assigned since then can differ. */
#include "tokenizer.h"
#include "jsonread.h"
#include "bpe.h"
#include "tokjson.h"
#include "config.h"
#include "strtab.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOK_MAX_WORD_CHARS 100   /* WordPiece max_input_chars_per_word */
#define TOK_MAX_LINE_BYTES 1000  /* longer vocab lines mean a wrong file */

/* Tokens Hugging Face registers as special added tokens for BERT: matched in
 * the raw input before normalization, so "[MASK]" in text stays one token. */
static const char *const SPECIAL_NAMES[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
#define N_SPECIAL_NAMES (sizeof SPECIAL_NAMES / sizeof SPECIAL_NAMES[0])
/* Byte-level BPE: GPT-2's single added token; RoBERTa's five, of which only
 * <mask> has lstrip (it takes the spaces before it) in Hugging Face's files. */
static const char *const GPT2_SPECIALS[] = {"<|endoftext|>"};
static const char *const ROBERTA_SPECIALS[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};
#define TOK_MAX_SPECIALS 8

struct Tokenizer {
    char *buf;             /* vocab file bytes; each line NUL-terminated in place */
    AvStrTab vocab;        /* id <-> spelling (pointing into buf) */
    int n;
    int lowercase;
    int unk, cls, sep;     /* RoBERTa: <unk> (or -1), <s>, </s>; GPT-2: -1 */
    TokStyle style;
    BpeModel *bpe;         /* byte-level styles; the WordPiece fields are unused then */
    TjTokenizer *tj;       /* a tokenizer.json (TOK_STYLE_JSON); the fields above are unused then */
    int n_special;
    int special_id[TOK_MAX_SPECIALS];
    const char *special_str[TOK_MAX_SPECIALS];
    size_t special_len[TOK_MAX_SPECIALS];
    unsigned char special_lstrip[TOK_MAX_SPECIALS];
    unsigned char special_first[256]; /* bytes that can start a special token */
    size_t max_word_bytes; /* longest vocab entry: bounds the longest-match scan */
    size_t max_cont_bytes; /* longest "##" entry, prefix excluded */
};

/* ---- vocab lookups ---------------------------------------------------- */

/* prefix then data, so "##" + piece is looked up without a copy. */
static int lookup(const Tokenizer *t, const char *prefix, size_t plen, const char *data, size_t len) {
    return av_strtab_find2(&t->vocab, prefix, plen, data, len);
}

/* ---- loading ------------------------------------------------------------ */

/* Registers a special token (when the vocab has it) for matching in text. */
static void add_special(Tokenizer *t, const char *name, int lstrip) {
    int id = tok_token_to_id(t, name);
    if (id < 0 || t->n_special == TOK_MAX_SPECIALS) return;
    int k = t->n_special++;
    t->special_id[k] = id;
    t->special_str[k] = tok_id_to_token(t, id);
    t->special_len[k] = strlen(name);
    t->special_lstrip[k] = (unsigned char)lstrip;
    t->special_first[(unsigned char)name[0]] = 1;
}

/* A vocab.txt is a few hundred KB; anything past this is not one. */
#define MAX_VOCAB_FILE (256u << 20)


/* The WordPiece tokenizer from vocab lines in t->buf (len bytes, owned by t);
 * vocab_path names them in messages. Frees t on failure. */
static int load_vocab_lines(Tokenizer **out, Tokenizer *t, size_t len, const char *vocab_path, AvErr *e);

int tok_load(Tokenizer **out, const char *vocab_path, int lowercase, AvErr *e) {
    *out = NULL;
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) return av_err(e, "out of memory");
    t->lowercase = lowercase ? 1 : 0;
    size_t len = 0;
    if (av_read_file(vocab_path, MAX_VOCAB_FILE, &t->buf, &len, e) < 0) {
        free(t);
        return -1;
    }
    return load_vocab_lines(out, t, len, vocab_path, e);
}

static int load_vocab_lines(Tokenizer **out, Tokenizer *t, size_t len, const char *vocab_path, AvErr *e) {

    /* One token per line; a final line without '\n' still counts. */
    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++)
        if (t->buf[i] == '\n') n_lines++;
    if (len > 0 && t->buf[len - 1] != '\n') n_lines++;
    if (n_lines == 0) {
        av_err(e, "%s: empty vocabulary", vocab_path);
        goto fail;
    }
    if (n_lines > INT32_MAX / 4) {
        av_err(e, "%s: too many lines", vocab_path);
        goto fail;
    }
    if (av_strtab_init(&t->vocab, (int)n_lines) != 0) {
        av_err(e, "%s: out of memory", vocab_path);
        goto fail;
    }

    char *p = t->buf, *end = t->buf + len;
    for (int id = 0; p < end; id++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        if (stop > p && stop[-1] == '\r') stop--;
        size_t tl = (size_t)(stop - p);
        if (tl > TOK_MAX_LINE_BYTES) {
            av_err(e, "%s: line %d is %zu bytes long (limit %d): not a vocab file?", vocab_path,
                   id + 1, tl, TOK_MAX_LINE_BYTES);
            goto fail;
        }
        if (memchr(p, '\0', tl)) {
            av_err(e, "%s: line %d contains a NUL byte", vocab_path, id + 1);
            goto fail;
        }
        *stop = '\0';
        int dup = lookup(t, "", 0, p, tl);
        if (dup >= 0) {
            av_err(e, "%s: line %d: duplicate token \"%s\" (first on line %d)", vocab_path, id + 1,
                   p, dup + 1);
            goto fail;
        }
        av_strtab_set(&t->vocab, id, p, tl);
        t->n = id + 1;
        if (tl >= 2 && p[0] == '#' && p[1] == '#') {
            if (tl - 2 > t->max_cont_bytes) t->max_cont_bytes = tl - 2;
        }
        if (tl > t->max_word_bytes) t->max_word_bytes = tl;
        p = nl ? nl + 1 : end;
    }

    t->unk = tok_token_to_id(t, "[UNK]");
    t->cls = tok_token_to_id(t, "[CLS]");
    t->sep = tok_token_to_id(t, "[SEP]");
    const char *missing = t->unk < 0 ? "[UNK]" : t->cls < 0 ? "[CLS]" : t->sep < 0 ? "[SEP]" : NULL;
    if (missing) {
        av_err(e, "%s: vocabulary has no %s token", vocab_path, missing);
        goto fail;
    }
    for (size_t i = 0; i < N_SPECIAL_NAMES; i++) add_special(t, SPECIAL_NAMES[i], 0);
    *out = t;
    return 0;
fail:
    tok_free(t);
    return -1;
}

int tok_load_bpe(Tokenizer **out, const char *vocab_json, const char *merges, TokStyle style,
                 AvErr *e) {
    *out = NULL;
    if (style != TOK_STYLE_GPT2 && style != TOK_STYLE_ROBERTA)
        return av_err(e, "tok_load_bpe: style must be GPT-2 or RoBERTa (BERT uses tok_load)");
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) return av_err(e, "out of memory");
    t->style = style;
    t->unk = t->cls = t->sep = -1;
    if (bpe_load(&t->bpe, vocab_json, merges, e) < 0) {
        free(t);
        return -1;
    }
    if (style == TOK_STYLE_GPT2) {
        add_special(t, GPT2_SPECIALS[0], 0);
    } else {
        for (size_t i = 0; i < sizeof ROBERTA_SPECIALS / sizeof ROBERTA_SPECIALS[0]; i++)
            add_special(t, ROBERTA_SPECIALS[i], !strcmp(ROBERTA_SPECIALS[i], "<mask>"));
        t->cls = tok_token_to_id(t, "<s>");
        t->sep = tok_token_to_id(t, "</s>");
        t->unk = tok_token_to_id(t, "<unk>");
        if (t->cls < 0 || t->sep < 0) {
            av_err(e, "%s: a RoBERTa vocabulary needs <s> and </s>, which are absent", vocab_json);
            tok_free(t);
            return -1;
        }
    }
    *out = t;
    return 0;
}

/* A WordPiece tokenizer.json (BERT's): the same pipeline as vocab.txt's
 * (BertNormalizer, BertPreTokenizer, WordPiece with "##", [CLS] A [SEP]), so
 * its vocabulary goes to that loader; anything else in such a file is refused. */
static int load_wordpiece_json(Tokenizer **out, const cJSON *root, const char *path, AvErr *e) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *pfx = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *ntype = cJSON_GetObjectItemCaseSensitive(norm, "type"), *ptype = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (!cJSON_IsObject(vocab)) return av_err(e, "%s: WordPiece model without a vocab object", path);
    if (!cJSON_IsString(ntype) || strcmp(ntype->valuestring, "BertNormalizer") || !cJSON_IsString(ptype) ||
        strcmp(ptype->valuestring, "BertPreTokenizer") || (cJSON_IsString(pfx) && strcmp(pfx->valuestring, "##")))
        return av_err(e, "%s: a WordPiece tokenizer.json is read as BERT's (BertNormalizer, BertPreTokenizer, \"##\"); "
                      "this one differs", path);
    const cJSON *lc = cJSON_GetObjectItemCaseSensitive(norm, "lowercase"), *sa = cJSON_GetObjectItemCaseSensitive(norm, "strip_accents");
    int lower = cJSON_IsFalse(lc) ? 0 : 1;
    /* strip_accents null follows lowercase, which is how the vocab.txt path behaves */
    if ((cJSON_IsTrue(sa) && !lower) || (cJSON_IsFalse(sa) && lower))
        return av_err(e, "%s: strip_accents differing from lowercase is not supported", path);
    int n = cJSON_GetArraySize(vocab);
    char **by_id = calloc((size_t)n + 1, sizeof *by_id);
    if (!by_id) return av_err(e, "out of memory");
    const cJSON *it;
    size_t len = 0;
    int rc = -1;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= n || by_id[it->valueint] ||
            strchr(it->string, '\n')) {
            av_err(e, "%s: vocab ids must be 0..%d, each once", path, n - 1);
            goto done;
        }
        by_id[it->valueint] = it->string;
        len += strlen(it->string) + 1;
    }
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->buf = malloc(len + 1))) {
        free(t);
        av_err(e, "out of memory");
        goto done;
    }
    t->lowercase = lower;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(by_id[i]);
        memcpy(t->buf + k, by_id[i], l);
        t->buf[k + l] = '\n';
        k += l + 1;
    }
    rc = load_vocab_lines(out, t, k, path, e);
done:
    free(by_id);
    return rc;
}

int tok_load_json(Tokenizer **out, const char *tokenizer_json, AvErr *e) {
    *out = NULL;
    char *buf;
    size_t len;
    if (av_read_file(tokenizer_json, 256u << 20, &buf, &len, e) != 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, tokenizer_json, e);
    free(buf);
    if (pr) return pr < 0 ? -1 : av_err(e, "%s: not valid JSON", tokenizer_json);
    int rc;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(model, "type");
    /* older files leave the type out; the Rust library then goes by the fields */
    int wordpiece = cJSON_IsString(mt) ? !strcmp(mt->valuestring, "WordPiece")
                                       : model && cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word") &&
                                             !cJSON_GetObjectItemCaseSensitive(model, "merges");
    TjTokenizer *tj;
    if (!cJSON_IsObject(root)) rc = av_err(e, "%s: not a JSON object", tokenizer_json);
    else if (wordpiece) rc = load_wordpiece_json(out, root, tokenizer_json, e); /* BERT's pipeline, tokenizer.c's */
    else rc = tj_load_cjson(&tj, root, tokenizer_json, e) != 0 ? -1 : tok_from_tj(out, tj, e);
    cJSON_Delete(root);
    return rc;
}

int tok_from_tj(Tokenizer **out, TjTokenizer *tj, AvErr *e) {
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        tj_free(tj);
        return av_err(e, "out of memory");
    }
    t->style = TOK_STYLE_JSON;
    t->unk = t->cls = t->sep = -1;
    t->tj = tj;
    *out = t;
    return 0;
}

static char *find_file(const char *dir, const char *name, const char *alt) {
    const char *names[] = {name, alt};
    for (int i = 0; i < 2; i++) {
        if (!names[i]) continue;
        char *p = av_path_join(dir, names[i]);
        if (p && av_file_exists(p)) return p;
        free(p);
    }
    return NULL;
}

int tok_load_dir(Tokenizer **out, const char *dir, TokDirHint *hint, AvErr *e) {
    *out = NULL;
    const char *mt = hint->model_type;
    char *vocab_txt = find_file(dir, "vocab.txt", NULL);
    char *vocab_json = find_file(dir, "vocab.json", "encoder.json");
    char *merges = find_file(dir, "merges.txt", "vocab.bpe");
    char *tjson = find_file(dir, "tokenizer.json", NULL);
    const TokSource src = hint->source;
    int bert_family = src == TOK_SOURCE_WORDPIECE;
    int bpe_family = src == TOK_SOURCE_BPE_GPT2 || src == TOK_SOURCE_BPE_ROBERTA;
    int rc = -1;
    snprintf(hint->used, sizeof hint->used, "%s", dir);
    /* decoders, folders with nothing else, and encoder folders that ship only tokenizer.json */
    if (src == TOK_SOURCE_JSON || (src == TOK_SOURCE_ANY && !vocab_txt && !vocab_json) ||
        (tjson && ((bert_family && !vocab_txt) || (bpe_family && (!vocab_json || !merges))))) {
        if (!tjson) {
            av_err(e, "%s: no tokenizer.json in the model folder%s%s", dir, mt ? " (a " : "", mt ? mt : "");
            if (mt) snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg), " model needs it)");
            /* Marian's folders ship SentencePiece files only, and transformers writes no tokenizer.json for them */
            char *spm = find_file(dir, "source.spm", NULL);
            if (spm)
                snprintf(e->msg + strlen(e->msg), sizeof e->msg - strlen(e->msg),
                         "; source.spm is a SentencePiece model, which attnviz does not read (transformers has no "
                         "converter for it: attnviz's tools/marian_tokenizer.py writes the tokenizer.json)");
            free(spm);
            goto done;
        }
        if (hint->lowercase == 1) {
            av_err(e, "--uncased: %s uses its tokenizer.json, which says itself whether it lower-cases", dir);
            goto done;
        }
        snprintf(hint->used, sizeof hint->used, "%s", tjson);
        rc = tok_load_json(out, tjson, e);
        goto done;
    }
    int bpe = src != TOK_SOURCE_ANY ? bpe_family : (!vocab_txt && vocab_json);
    if (bpe) {
        if (!vocab_json || !merges) {
            av_err(e, "%s: a %s model needs vocab.json and merges.txt (missing %s)", dir, mt ? mt : "byte-level BPE",
                   !vocab_json ? "vocab.json" : "merges.txt");
            goto done;
        }
        if (hint->lowercase == 1) {
            av_err(e, "--uncased: %s uses a byte-level BPE tokenizer, which never lower-cases", dir);
            goto done;
        }
        snprintf(hint->used, sizeof hint->used, "%s", vocab_json);
        rc = tok_load_bpe(out, vocab_json, merges, src == TOK_SOURCE_BPE_ROBERTA ? TOK_STYLE_ROBERTA : TOK_STYLE_GPT2, e);
        goto done;
    }
    if (!vocab_txt) {
        av_err(e, "%s: no vocab.txt in the model folder", dir);
        goto done;
    }
    char *tcfg = av_path_join(dir, "tokenizer_config.json");
    if (!tcfg) {
        av_err(e, "out of memory");
        goto done;
    }
    int lower = hint->lowercase;
    if (lower < 0) lower = cfg_read_lowercase(tcfg, e);
    free(tcfg);
    if (lower == -2) goto done;
    if (lower < 0) lower = tok_infer_lowercase(dir, vocab_txt);
    snprintf(hint->used, sizeof hint->used, "%s", vocab_txt);
    rc = tok_load(out, vocab_txt, lower, e);
done:
    free(vocab_txt);
    free(vocab_json);
    free(merges);
    free(tjson);
    return rc;
}

void tok_free(Tokenizer *t) {
    if (!t) return;
    tj_free(t->tj);
    bpe_free(t->bpe);
    free(t->buf);
    av_strtab_free(&t->vocab);
    free(t);
}

int tok_vocab_size(const Tokenizer *t) { return t->tj ? tj_vocab_size(t->tj) : t->bpe ? bpe_vocab_size(t->bpe) : t->n; }

const char *tok_id_to_token(const Tokenizer *t, int id) {
    if (t->tj) return tj_id_to_token(t->tj, id);
    if (t->bpe) return bpe_id_to_token(t->bpe, id);
    return id >= 0 && id < t->n ? t->vocab.tok[id] : NULL;
}

int tok_token_to_id(const Tokenizer *t, const char *token) {
    if (t->tj) return tj_token_to_id(t->tj, token, strlen(token));
    if (t->bpe) return bpe_token_to_id(t->bpe, token, strlen(token));
    return lookup(t, "", 0, token, strlen(token));
}

int tok_lowercase(const Tokenizer *t) { return t->lowercase; }

TokStyle tok_style(const Tokenizer *t) { return t->style; }

int tok_is_byte_level(const Tokenizer *t) { return t->bpe != NULL || t->tj != NULL; }

int tok_is_special(const Tokenizer *t, int id) {
    if (t->tj) return tj_is_special(t->tj, id);
    for (int k = 0; k < t->n_special; k++)
        if (t->special_id[k] == id) return 1;
    return 0;
}

int tok_infer_lowercase(const char *model_dir, const char *vocab_path) {
    if (model_dir && *model_dir) {
        /* Only the directory's own name speaks for the model, not its parents. */
        size_t n = strlen(model_dir);
        while (n > 1 && model_dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && model_dir[b - 1] != '/') b--;
        char name[256];
        size_t m = n - b < sizeof name - 1 ? n - b : sizeof name - 1;
        for (size_t i = 0; i < m; i++) {
            char c = model_dir[b + i];
            name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        name[m] = '\0';
        if (strstr(name, "uncased")) return 1;
        if (strstr(name, "cased")) return 0;
    }
    struct stat sb;
    int fd = vocab_path ? av_open_regular(vocab_path, &sb, NULL) : -1; /* never a FIFO's wait */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0) close(fd);
    if (!f) return 1; /* nothing to go on: uncased is the common BERT */
    char line[TOK_MAX_LINE_BYTES + 8];
    int upper = 0;
    while (!upper && fgets(line, sizeof line, f)) {
        size_t l = strcspn(line, "\r\n");
        /* Bracketed entries ([CLS], [unused0]...) are specials, not words. */
        if (l >= 2 && line[0] == '[' && line[l - 1] == ']') continue;
        for (size_t i = 0; i < l; i++)
            if (line[i] >= 'A' && line[i] <= 'Z') {
                upper = 1;
                break;
            }
    }
    fclose(f);
    return upper ? 0 : 1;
}

/* ---- growable arrays ---------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} CpVec;

typedef struct {
    int *v;
    size_t n, cap;
} IdVec;

static int cp_reserve(CpVec *a, size_t extra) {
    if (a->n + extra <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 64;
    while (cap < a->n + extra) cap *= 2;
    int32_t *nv = realloc(a->v, cap * sizeof *nv);
    if (!nv) return -1;
    a->v = nv;
    a->cap = cap;
    return 0;
}

static int id_push(IdVec *a, int id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

/* ---- normalization (BertNormalizer) ------------------------------------ */

static int is_control(int32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return 0;
    if (c < 0x80) return c < 0x20 || c == 0x7f;
    utf8proc_category_t cat = utf8proc_category(c);
    /* HF's is_other(): Cc, Cf, Co (Cs cannot occur in valid UTF-8). Unassigned
     * (Cn) code points are kept, as the Rust library keeps them. */
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS;
}

/* Rust char::is_whitespace (White_Space); the Cc members are gone by now. */
static int is_whitespace(int32_t c) {
    if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
    if (c == 0x85) return 1;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP;
}

static int is_punct(int32_t c) {
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
               (c >= 123 && c <= 126);
    utf8proc_category_t cat = utf8proc_category(c);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* The Rust normalizer's table; note Extension E starts at U+2B920 there (the
 * original BERT code says U+2B820), so U+2B820..2B91F are not split. */
static int is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Appends c's canonical decomposition, keeping combining marks in canonical
 * order (NFD) by sinking each mark past earlier marks of higher class. */
static int push_nfd(CpVec *o, int32_t c) {
    int32_t d[32];
    int bound = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char(c, d, 32, UTF8PROC_DECOMPOSE, &bound);
    if (k < 0 || k > 32) { /* cannot happen for valid scalars; keep c */
        d[0] = c;
        k = 1;
    }
    if (cp_reserve(o, (size_t)k) < 0) return -1;
    for (utf8proc_ssize_t j = 0; j < k; j++) {
        int32_t x = d[j];
        int cc = x < 0x300 ? 0 : utf8proc_get_property(x)->combining_class;
        size_t pos = o->n++;
        if (cc) {
            while (pos > 0) {
                int32_t prev = o->v[pos - 1];
                int pc = prev < 0x300 ? 0 : utf8proc_get_property(prev)->combining_class;
                if (pc <= cc) break;
                o->v[pos] = prev;
                pos--;
            }
        }
        o->v[pos] = x;
    }
    return 0;
}

/* Normalizes one raw segment (valid UTF-8) into code points. */
static int normalize(const Tokenizer *t, const uint8_t *s, size_t len, CpVec *o) {
    o->n = 0;
    size_t i = 0;
    while (i < len) {
        int32_t c;
        if (s[i] < 0x80) {
            c = s[i++];
        } else {
            utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
            i += (size_t)k; /* input was validated */
        }
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x80 && is_whitespace(c))) c = ' ';
        if (c < 0x80) {
            if (cp_reserve(o, 1) < 0) return -1;
            o->v[o->n++] = t->lowercase && c >= 'A' && c <= 'Z' ? c + 32 : c;
            continue;
        }
        int cjk = is_cjk(c);
        if (cjk) {
            if (cp_reserve(o, 1) < 0) return -1;
            o->v[o->n++] = ' ';
        }
        if (t->lowercase) {
            if (push_nfd(o, c) < 0) return -1;
        } else {
            if (cp_reserve(o, 1) < 0) return -1;
            o->v[o->n++] = c;
        }
        if (cjk) {
            if (cp_reserve(o, 1) < 0) return -1;
            o->v[o->n++] = ' ';
        }
    }
    if (t->lowercase) {
        /* Strip accents (drop Mn after NFD), then lowercase: Rust's order. The
         * one multi-code-point lowercase (U+0130) was decomposed by NFD. */
        size_t w = 0;
        for (size_t r = 0; r < o->n; r++) {
            int32_t c = o->v[r];
            if (c >= 0x80) {
                if (utf8proc_category(c) == UTF8PROC_CATEGORY_MN) continue;
                c = utf8proc_tolower(c);
            } else if (c >= 'A' && c <= 'Z') { /* from a decomposition, e.g. Å */
                c += 32;
            }
            o->v[w++] = c;
        }
        o->n = w;
    }
    return 0;
}

/* ---- pre-tokenization + WordPiece --------------------------------------- */

typedef struct {
    char *bytes;      /* word as UTF-8 */
    size_t *off;      /* byte offset of each char, plus the end */
    size_t cap_bytes, cap_chars;
} WordBuf;

static int wordpiece(const Tokenizer *t, const int32_t *cps, size_t nch, WordBuf *w, IdVec *out) {
    if (nch > TOK_MAX_WORD_CHARS) return id_push(out, t->unk);
    if (w->cap_chars < nch + 1) {
        size_t *no = realloc(w->off, (nch + 1) * sizeof *no);
        if (!no) return -1;
        w->off = no;
        w->cap_chars = nch + 1;
    }
    if (w->cap_bytes < nch * 4) {
        char *nb = realloc(w->bytes, nch * 4);
        if (!nb) return -1;
        w->bytes = nb;
        w->cap_bytes = nch * 4;
    }
    size_t nb = 0;
    for (size_t k = 0; k < nch; k++) {
        w->off[k] = nb;
        nb += (size_t)utf8proc_encode_char(cps[k], (uint8_t *)w->bytes + nb);
    }
    w->off[nch] = nb;

    size_t mark = out->n, start = 0;
    while (start < nch) {
        size_t lim = start ? t->max_cont_bytes : t->max_word_bytes, end = nch;
        int id = -1;
        for (; end > start; end--) {
            size_t bl = w->off[end] - w->off[start];
            if (bl > lim) continue; /* longer than any vocab entry */
            id = start ? lookup(t, "##", 2, w->bytes + w->off[start], bl)
                       : lookup(t, "", 0, w->bytes, bl);
            if (id >= 0) break;
        }
        if (id < 0) { /* unmatchable remainder: the whole word is [UNK] */
            out->n = mark;
            return id_push(out, t->unk);
        }
        if (id_push(out, id) < 0) return -1;
        start = end;
    }
    return 0;
}

/* Pair truncation compares lengths as the Rust library (tokenizers 0.23) sees
 * them: it stops tokenizing a sequence after the first word that brings it to
 * max_len tokens or more (special tokens written in the text do not stop it).
 * That length only matters when both sides are that long: it decides which
 * one keeps the odd token. */
typedef struct {
    size_t cap; /* max_len, 0 = none */
    size_t eff; /* length when tokenizing stopped, SIZE_MAX while it has not */
} EarlyStop;

static int pretokenize(const Tokenizer *t, const CpVec *s, WordBuf *w, IdVec *out, EarlyStop *es) {
    size_t i = 0;
    while (i < s->n) {
        int32_t c = s->v[i];
        if (is_whitespace(c)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        if (!is_punct(c))
            while (j < s->n && !is_whitespace(s->v[j]) && !is_punct(s->v[j])) j++;
        if (wordpiece(t, s->v + i, j - i, w, out) < 0) return -1;
        if (es->cap && es->eff == SIZE_MAX && out->n >= es->cap) es->eff = out->n;
        i = j;
    }
    return 0;
}


/* Which special token (index into special_id, or -1) starts at s[0];
 * longest wins as in HF. */
static int special_at(const Tokenizer *t, const char *s, size_t avail, size_t *mlen) {
    int best = -1;
    size_t blen = 0;
    if (!t->special_first[(unsigned char)s[0]]) return -1;
    for (int k = 0; k < t->n_special; k++) {
        size_t l = t->special_len[k];
        if (l <= avail && l > blen && memcmp(s, t->special_str[k], l) == 0) {
            best = k;
            blen = l;
        }
    }
    *mlen = blen;
    return best;
}

/* Tokenizes one sequence (no [CLS]/[SEP]) into ids. */
static int encode_seq(const Tokenizer *t, const char *text, size_t len, CpVec *norm, WordBuf *w,
                      IdVec *out, EarlyStop *es) {
    size_t seg = 0, i = 0;
    while (i <= len) {
        size_t mlen = 0;
        int sk = i < len ? special_at(t, text + i, len - i, &mlen) : -1;
        if (i == len || sk >= 0) {
            if (i > seg) {
                if (normalize(t, (const uint8_t *)text + seg, i - seg, norm) < 0) return -1;
                if (pretokenize(t, norm, w, out, es) < 0) return -1;
            }
            if (i == len) break;
            if (id_push(out, t->special_id[sk]) < 0) return -1;
            i += mlen;
            seg = i;
        } else {
            i++;
        }
    }
    return 0;
}

/* Start of the character ending just before s[end] (valid UTF-8, end > 0). */
static size_t char_before(const uint8_t *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && (s[i] & 0xC0) == 0x80) i--;
    return i;
}

/* Byte-level BPE of one sequence: special tokens split the raw text (an
 * lstrip token takes the White_Space before it), each gap is pre-tokenized
 * and every pre-token merged; EarlyStop counts after each pre-token. */
static int encode_seq_bpe(const Tokenizer *t, const char *text, size_t len, BpeScratch *sc,
                          IdVec *out, IdVec *starts, EarlyStop *es, AvErr *e) {
    size_t seg = 0, i = 0;
    while (i <= len) {
        size_t mlen = 0;
        int sk = i < len ? special_at(t, text + i, len - i, &mlen) : -1;
        if (i < len && sk < 0) {
            i++;
            continue;
        }
        size_t gap_end = i;
        if (sk >= 0 && t->special_lstrip[sk]) {
            while (gap_end > seg) {
                size_t c0 = char_before((const uint8_t *)text, gap_end);
                int32_t c;
                if (utf8proc_iterate((const uint8_t *)text + c0, (utf8proc_ssize_t)(gap_end - c0),
                                     &c) <= 0 || !bpe_is_space(c))
                    break;
                gap_end = c0;
            }
        }
        for (size_t p = seg; p < gap_end;) {
            size_t q = bpe_pretoken_end(text, gap_end, p);
            const int *ids;
            size_t n;
            if (bpe_encode_word(t->bpe, sc, text + p, q - p, &ids, &n, e) < 0) return -1;
            /* a pre-token is a word, as Hugging Face's word_ids() count them */
            for (size_t k = 0; k < n; k++)
                if (id_push(out, ids[k]) < 0 || id_push(starts, k == 0) < 0)
                    return av_err(e, "out of memory while tokenizing");
            if (es->cap && es->eff == SIZE_MAX && out->n >= es->cap) es->eff = out->n;
            p = q;
        }
        if (i == len) break;
        if (id_push(out, t->special_id[sk]) < 0 || id_push(starts, 1) < 0)
            return av_err(e, "out of memory while tokenizing");
        i += mlen;
        seg = i;
    }
    return 0;
}

/* Hugging Face truncate_encodings, LongestFirst: the shorter sequence keeps
 * its length when the longer can absorb the cut; otherwise both get half,
 * the longer (B on a tie) taking the odd token. */
static void truncate_pair(size_t *na, size_t *nb, size_t max) {
    size_t n1 = *na, n2 = *nb;
    if (n1 + n2 <= max) return;
    int swap = n1 > n2;
    if (swap) {
        size_t tmp = n1;
        n1 = n2;
        n2 = tmp;
    }
    n2 = n1 > max ? n1 : (n1 > max - n1 ? n1 : max - n1);
    if (n1 + n2 > max) {
        n1 = max / 2;
        n2 = n1 + max % 2;
    }
    if (swap) {
        size_t tmp = n1;
        n1 = n2;
        n2 = tmp;
    }
    if (n1 < *na) *na = n1;
    if (n2 < *nb) *nb = n2;
}

/* word_start, special, role and display of a finished encoding (see tokenizer.h); sa and sb
 * flag the byte-level pieces of A and B that begin a pre-token. */
static void describe(const Tokenizer *t, TokEncoding *out, int a_first, const IdVec *sa, const IdVec *sb) {
    out->byte_level = t->bpe != NULL;
    for (int i = 0; i < out->n; i++) {
        int id = out->ids[i];
        int special = tok_is_special(t, id);
        out->special[i] = (unsigned char)special;
        out->role[i] = (unsigned char)(!special ? TOK_ROLE_NONE
                                       : id == t->cls ? TOK_ROLE_CLS
                                       : id == t->sep ? TOK_ROLE_SEP
                                                      : TOK_ROLE_NONE);
        if (!t->bpe) {
            out->display[i] = out->tokens[i];
            out->word_start[i] = (unsigned char)(special || strncmp(out->tokens[i], "##", 2) != 0);
            continue;
        }
        out->display[i] = special ? out->tokens[i] : bpe_id_to_display(t->bpe, id);
        int start = 1;
        if (i >= a_first && (size_t)(i - a_first) < sa->n) start = sa->v[i - a_first];
        else if (out->b_start >= 0 && i >= out->b_start && (size_t)(i - out->b_start) < sb->n)
            start = sb->v[i - out->b_start];
        out->word_start[i] = (unsigned char)(special || start);
    }
}

/* The arrays of an encoding of up to n tokens; on failure none is left allocated. */
static int alloc_encoding(TokEncoding *out, size_t n) {
    out->ids = malloc(n * sizeof *out->ids);
    out->type_ids = malloc(n * sizeof *out->type_ids);
    out->tokens = malloc(n * sizeof *out->tokens);
    out->display = malloc(n * sizeof *out->display);
    out->word_start = malloc(n);
    out->special = malloc(n);
    out->role = malloc(n);
    if (out->ids && out->type_ids && out->tokens && out->display && out->word_start && out->special && out->role)
        return 0;
    tok_encoding_free(out);
    return -1;
}

/* A tokenizer.json: each sequence tokenized, truncated longest-first to fit
 * max_len with the template's special tokens, then laid out by the template. */
static int encode_json(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len, int max_len,
                       int plain, TokEncoding *out, AvErr *e) {
    TjIds ia = {0}, ib = {0};
    const TjItem *items;
    static const TjItem A_ONLY = {0, 0, 0}; /* plain: sequence A and nothing around it */
    int n_items = plain ? (items = &A_ONLY, 1) : tj_template(t->tj, b != NULL, &items), rc = -1;
    size_t n_added = 0;
    for (int i = 0; i < n_items; i++) n_added += items[i].seq < 0;
    if (max_len > 0 && (size_t)max_len < n_added)
        return av_err(e, "max length %d cannot hold the %zu special tokens", max_len, n_added);
    if (tj_encode(t->tj, a ? a : "", a_len, &ia, e) != 0 || (b && tj_encode(t->tj, b, b_len, &ib, e) != 0)) goto done;
    size_t na = ia.n, nb = ib.n;
    if (max_len > 0) {
        size_t room = (size_t)max_len - n_added;
        if (b) truncate_pair(&na, &nb, room);
        else if (na > room) na = room;
    }
    size_t n = na + nb + n_added, n_alloc = n ? n : 1;
    if (n > (size_t)INT32_MAX) {
        rc = av_err(e, "input too long: %zu tokens", n);
        goto done;
    }
    if (alloc_encoding(out, n_alloc) != 0) {
        rc = av_err(e, "out of memory while tokenizing");
        goto done;
    }
    memset(out->role, TOK_ROLE_NONE, n_alloc);
    size_t k = 0;
    int seen_seq = 0;
    for (int i = 0; i < n_items; i++) {
        const TjItem *it = &items[i];
        if (it->seq < 0) {
            /* the template's start token (before A: BOS, <s>, [CLS]) and separators after it */
            out->ids[k] = it->id, out->type_ids[k] = it->type_id, out->special[k] = 1, out->word_start[k] = 1;
            out->role[k] = seen_seq ? TOK_ROLE_SEP : TOK_ROLE_CLS;
            k++;
            continue;
        }
        seen_seq = 1;
        const TjIds *src = it->seq ? &ib : &ia;
        size_t cnt = it->seq ? nb : na;
        if (it->seq == 1) out->b_start = (int)k;
        for (size_t j = 0; j < cnt; j++, k++) {
            out->ids[k] = src->ids[j], out->type_ids[k] = it->type_id;
            out->special[k] = src->special[j], out->word_start[k] = src->word_start[j];
        }
    }
    for (size_t i = 0; i < k; i++) {
        out->tokens[i] = tj_id_to_token(t->tj, out->ids[i]);
        out->display[i] = out->special[i] ? out->tokens[i] : tj_id_to_display(t->tj, out->ids[i]);
    }
    out->n = (int)k;
    out->n_truncated = (int)(ia.n - na + ib.n - nb);
    out->byte_level = 1;
    rc = 0;
done:
    tj_ids_free(&ia);
    tj_ids_free(&ib);
    return rc;
}

static int encode_any(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len, int max_len,
                      int plain, TokEncoding *out, AvErr *e);

int tok_encode(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len,
               int max_len, TokEncoding *out, AvErr *e) {
    return encode_any(t, a, a_len, b, b_len, max_len, 0, out, e);
}

int tok_encode_plain(const Tokenizer *t, const char *text, size_t len, int max_len, TokEncoding *out, AvErr *e) {
    return encode_any(t, text, len, NULL, 0, max_len, 1, out, e);
}

static int encode_any(const Tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len, int max_len,
                      int plain, TokEncoding *out, AvErr *e) {
    memset(out, 0, sizeof *out);
    out->b_start = -1;
    if (!a) a_len = 0;
    long bad = av_utf8_invalid_at(a, a_len);
    if (bad >= 0) return av_err(e, "invalid UTF-8 at byte offset %ld", bad);
    if (b) {
        bad = av_utf8_invalid_at(b, b_len);
        if (bad >= 0) return av_err(e, "sentence B: invalid UTF-8 at byte offset %ld", bad);
    }
    if (t->tj) return encode_json(t, a, a_len, b, b_len, max_len, plain, out, e);
    /* Special tokens the template adds: before A, between A and B, after B (none when plain). */
    size_t pre = 0, mid = 0, post = 0;
    switch (plain ? TOK_STYLE_GPT2 : t->style) {
    case TOK_STYLE_BERT: pre = 1, mid = 1, post = b ? 1 : 0; break;
    case TOK_STYLE_ROBERTA: pre = 1, mid = b ? 2 : 1, post = b ? 1 : 0; break;
    case TOK_STYLE_GPT2: case TOK_STYLE_JSON: break;
    }
    size_t n_added = pre + mid + post;
    if (max_len > 0 && (size_t)max_len < n_added)
        return av_err(e, "max length %d cannot hold the %zu special tokens", max_len, n_added);

    CpVec norm = {0};
    WordBuf w = {0};
    IdVec ia = {0}, ib = {0}, sa = {0}, sb = {0};
    BpeScratch *sc = NULL;
    int rc = -1;
    size_t cap = max_len > 0 ? (size_t)max_len : 0;
    EarlyStop ea = {cap, SIZE_MAX}, eb = {cap, SIZE_MAX};
    if (t->bpe) {
        if (!(sc = bpe_scratch_new())) goto oom;
        if (encode_seq_bpe(t, a ? a : "", a_len, sc, &ia, &sa, &ea, e) < 0 ||
            (b && encode_seq_bpe(t, b, b_len, sc, &ib, &sb, &eb, e) < 0))
            goto done;
    } else {
        if (encode_seq(t, a, a_len, &norm, &w, &ia, &ea) < 0) goto oom;
        if (b && encode_seq(t, b, b_len, &norm, &w, &ib, &eb) < 0) goto oom;
    }

    size_t na = ia.n, nb = ib.n;
    if (max_len > 0) {
        size_t room = (size_t)max_len - n_added;
        if (b) {
            if (ea.eff < na) na = ea.eff;
            if (eb.eff < nb) nb = eb.eff;
            truncate_pair(&na, &nb, room);
        } else if (na > room) {
            na = room;
        }
    }
    size_t n = na + nb + n_added;
    if (n > (size_t)INT32_MAX) {
        rc = av_err(e, "input too long: %zu tokens", n);
        goto done;
    }
    size_t n_alloc = n ? n : 1;
    if (alloc_encoding(out, n_alloc) != 0) goto oom;
    /* BERT: [CLS] A [SEP] (B [SEP]); RoBERTa: <s> A </s> (</s> B </s>);
     * GPT-2: A (B). B's part has type 1 for BERT and GPT-2, 0 for RoBERTa
     * (what the Rust library returns). */
    int b_type = t->style == TOK_STYLE_ROBERTA ? 0 : 1;
    size_t k = 0;
    for (size_t i = 0; i < pre; i++) {
        out->ids[k] = t->cls;
        out->type_ids[k++] = 0;
    }
    int a_first = (int)k;
    for (size_t i = 0; i < na; i++) {
        out->ids[k] = ia.v[i];
        out->type_ids[k++] = 0;
    }
    for (size_t i = 0; i < mid; i++) {
        out->ids[k] = t->sep;
        out->type_ids[k++] = 0;
    }
    if (b) {
        out->b_start = (int)k;
        for (size_t i = 0; i < nb; i++) {
            out->ids[k] = ib.v[i];
            out->type_ids[k++] = b_type;
        }
        for (size_t i = 0; i < post; i++) {
            out->ids[k] = t->sep;
            out->type_ids[k++] = b_type;
        }
    }
    for (size_t i = 0; i < k; i++) out->tokens[i] = tok_id_to_token(t, out->ids[i]);
    out->n = (int)k;
    out->n_truncated = (int)(ia.n - na + ib.n - nb);
    describe(t, out, a_first, &sa, &sb);
    rc = 0;
    goto done;
oom:
    rc = av_err(e, "out of memory while tokenizing");
done:
    free(norm.v);
    free(w.bytes);
    free(w.off);
    free(ia.v);
    free(ib.v);
    free(sa.v);
    free(sb.v);
    bpe_scratch_free(sc);
    return rc;
}

void tok_encoding_free(TokEncoding *enc) {
    if (!enc) return;
    free(enc->ids);
    free(enc->type_ids);
    free((void *)enc->tokens);
    free((void *)enc->display);
    free(enc->word_start);
    free(enc->special);
    free(enc->role);
    memset(enc, 0, sizeof *enc);
    enc->b_start = -1;
}

/* ---- from ids back to text (predictions, generated tokens) ------------ */

const char *tok_id_display(const Tokenizer *t, int id) {
    if (id < 0 || id >= tok_vocab_size(t)) return NULL;
    if (tok_is_special(t, id)) return tok_id_to_token(t, id);
    if (t->tj) return tj_id_to_display(t->tj, id);
    if (t->bpe) return bpe_id_to_display(t->bpe, id);
    return t->vocab.tok[id];
}

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static int buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* The bytes a token stands for: byte-level pieces mapped back, SentencePiece's
 * "▁" as a space and <0xNN> as its byte, WordPiece pieces as spelled
 * ("##" dropped, a space before a word). */
static int token_bytes(const Tokenizer *t, int id, int first, Buf *b) {
    const char *s = tok_id_to_token(t, id);
    if (!s) return 0;
    size_t n = strlen(s);
    if (tok_is_special(t, id)) return buf_add(b, s, n);
    if (!t->bpe && !t->tj) {
        if (!strncmp(s, "##", 2)) return buf_add(b, s + 2, n - 2);
        return (first ? 0 : buf_add(b, " ", 1)) || buf_add(b, s, n);
    }
    if (t->bpe || tj_byte_level(t->tj)) {
        for (size_t i = 0; i < n;) {
            int32_t c;
            utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
            int by = w > 0 ? bpe_cp_to_byte((uint32_t)c) : -1;
            char ch = (char)by;
            if (by < 0 ? buf_add(b, s + i, w > 0 ? (size_t)w : 1) : buf_add(b, &ch, 1)) return -1;
            i += w > 0 ? (size_t)w : 1;
        }
        return 0;
    }
    unsigned v;
    if (n == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' && sscanf(s + 3, "%2x", &v) == 1) {
        char ch = (char)v;
        return buf_add(b, &ch, 1);
    }
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
            if (buf_add(b, " ", 1)) return -1;
            i += 3;
        } else if (buf_add(b, s + i++, 1)) {
            return -1;
        }
    }
    return 0;
}

/* Bytes an ill-formed sequence at p covers: a lead byte and the continuation
 * bytes that could still have completed it (the Unicode "maximal subpart"),
 * else the one byte. */
static size_t invalid_run(const unsigned char *p, size_t n) {
    const unsigned char c = p[0];
    int need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
    size_t k = 1;
    for (int j = 1; j <= need && k < n; j++, k++) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (j == 1) {
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        if (p[k] < lo || p[k] > hi) break;
    }
    return k;
}

int tok_decode(const Tokenizer *t, const int *ids, int n, char **out, AvErr *e) {
    Buf b = {0}, v = {0};
    *out = NULL;
    int rc = buf_add(&b, "", 0);
    for (int i = 0; i < n && rc == 0; i++) rc = token_bytes(t, ids[i], i == 0, &b);
    /* bytes that are not UTF-8 (a character cut between tokens) become U+FFFD,
     * one for each maximal ill-formed run as Rust's from_utf8_lossy (and so
     * Hugging Face's decode) counts them; a NUL too, which a C string cannot hold */
    for (size_t i = 0; i < b.n && rc == 0;) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)b.p + i, (utf8proc_ssize_t)(b.n - i), &c);
        if (w > 0 && c != 0) {
            rc = buf_add(&v, b.p + i, (size_t)w), i += (size_t)w;
            continue;
        }
        i += w > 0 ? (size_t)w : invalid_run((const unsigned char *)b.p + i, b.n - i);
        rc = buf_add(&v, "\xef\xbf\xbd", 3);
    }
    if (rc == 0 && !v.p) rc = buf_add(&v, "", 0);
    free(b.p);
    if (rc) {
        free(v.p);
        return av_err(e, "out of memory decoding %d tokens", n);
    }
    *out = v.p;
    return 0;
}

int tok_utf8_lossy(const char *s, size_t n, char **out, size_t *len, AvErr *e) {
    Buf v = {0};
    int rc = buf_add(&v, "", 0);
    for (size_t i = 0; i < n && rc == 0;) {
        int32_t c;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (w > 0 && c != 0) {
            rc = buf_add(&v, s + i, (size_t)w), i += (size_t)w;
            continue;
        }
        i += w > 0 ? (size_t)w : invalid_run((const unsigned char *)s + i, n - i);
        rc = buf_add(&v, "\xef\xbf\xbd", 3);
    }
    if (rc) {
        free(v.p);
        *out = NULL, *len = 0;
        return av_err(e, "out of memory");
    }
    *out = v.p, *len = v.n;
    return 0;
}

int tok_decode_bytes(const Tokenizer *t, const int *ids, int n, int first, char **out, size_t *len, AvErr *e) {
    Buf b = {0};
    *out = NULL, *len = 0;
    int rc = buf_add(&b, "", 0);
    for (int i = 0; i < n && rc == 0; i++) rc = token_bytes(t, ids[i], first && i == 0, &b);
    if (rc) {
        free(b.p);
        return av_err(e, "out of memory decoding %d tokens", n);
    }
    *out = b.p, *len = b.n;
    return 0;
}

int tok_encoding_append(const Tokenizer *t, TokEncoding *enc, const int *ids, int n, AvErr *e) {
    TokEncoding old = *enc, grown = {0};
    const size_t total = (size_t)old.n + (size_t)n;
    if (alloc_encoding(&grown, total ? total : 1) != 0) return av_err(e, "out of memory");
    for (int i = 0; i < old.n; i++) {
        grown.ids[i] = old.ids[i], grown.type_ids[i] = old.type_ids[i], grown.tokens[i] = old.tokens[i];
        grown.display[i] = old.display[i], grown.word_start[i] = old.word_start[i];
        grown.special[i] = old.special[i], grown.role[i] = old.role[i];
    }
    for (int j = 0; j < n; j++) {
        const int i = old.n + j, id = ids[j];
        const char *sp = tok_id_to_token(t, id), *d = tok_id_display(t, id);
        if (id < 0) {
            tok_encoding_free(&grown);
            return av_err(e, "token id %d is negative", id);
        }
        /* a row of a padded embedding the tokenizer has no token for (Qwen's,
         * Gemma 3's): the model may still pick it; it decodes to nothing */
        if (!sp || !d) sp = d = TOK_NO_TOKEN;
        grown.ids[i] = id, grown.type_ids[i] = 0, grown.tokens[i] = sp, grown.display[i] = d;
        grown.special[i] = (unsigned char)tok_is_special(t, id), grown.role[i] = TOK_ROLE_NONE;
        /* a word starts at a special token, a space, or where WordPiece has no "##" */
        grown.word_start[i] = (unsigned char)(grown.special[i] || d[0] == ' ' || d[0] == '\n' ||
                                              (!t->bpe && !t->tj && strncmp(sp, "##", 2) != 0));
    }
    grown.n = (int)total;
    grown.byte_level = old.byte_level;
    grown.b_start = old.b_start;
    grown.n_truncated = old.n_truncated;
    tok_encoding_free(enc);
    *enc = grown;
    return 0;
}
