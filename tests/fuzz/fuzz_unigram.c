/* libFuzzer target: the Unigram model and the Precompiled normalizer of
 * tokjson.c on arbitrary bytes. The input is three parts split at "\n--\n":
 * a precompiled_charsmap as raw bytes (base64-encoded here, so the fuzzer
 * mutates the trie and the replacements themselves, not their base64), a
 * Unigram vocab as JSON ([[piece, score], ...]) and a text, encoded with
 * whatever loaded (byte fallback on when the text starts with an odd byte).
 * A part left out: no charsmap / a one-piece vocab / a fixed text. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokjson.h"

static const char SEP[] = "\n--\n";

static const uint8_t *cut(const uint8_t *p, size_t n, size_t *part, const uint8_t **rest, size_t *rest_n) {
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(p + i, SEP, 4)) {
            *part = i, *rest = p + i + 4, *rest_n = n - i - 4;
            return p;
        }
    *part = n, *rest = NULL, *rest_n = 0;
    return p;
}

static char *b64(const uint8_t *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = A[v >> 18 & 63], *q++ = A[v >> 12 & 63];
        *q++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? A[v & 63] : '=';
    }
    *q = '\0';
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t cm_n, rest_n, vocab_n, text_n;
    const uint8_t *rest, *text;
    const uint8_t *cm = cut(data, size, &cm_n, &rest, &rest_n);
    const uint8_t *vocab = rest ? cut(rest, rest_n, &vocab_n, &text, &text_n) : NULL;
    if (!rest) vocab_n = 0, text = NULL, text_n = 0;
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON *v = vocab && vocab_n ? cJSON_ParseWithLength((const char *)vocab, vocab_n) : NULL;
    if (!v) v = cJSON_Parse("[[\"<unk>\",0],[\"\\u2581a\",-1],[\"a\",-2],[\"<0x61>\",-3]]");
    char *cm64 = b64(cm, cm_n);
    if (!root || !model || !v || !cm64) goto done;
    cJSON_AddStringToObject(model, "type", "Unigram");
    cJSON_AddItemToObject(model, "vocab", v);
    v = NULL;
    cJSON_AddNumberToObject(model, "unk_id", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", text_n && (text[0] & 1));
    if (cm_n) {
        cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
        cJSON_AddStringToObject(norm, "type", "Precompiled");
        cJSON_AddStringToObject(norm, "precompiled_charsmap", cm64);
    }
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Metaspace");
    cJSON_AddStringToObject(pre, "prepend_scheme", "always");
    TjTokenizer *t = NULL;
    AvErr e;
    if (tj_load_cjson(&t, root, "fuzz", &e) == 0) {
        static const char fixed[] = "Hello \xef\xbc\xa1 e\xcc\x81 \xef\xac\x81 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 aa";
        const char *s = fixed;
        size_t n = sizeof fixed - 1;
        /* the fuzzer's text when it is UTF-8 without NUL (what tok_encode lets through) */
        if (text && text_n && !memchr(text, 0, text_n) &&
            utf8proc_decompose(text, (utf8proc_ssize_t)text_n, NULL, 0, 0) >= 0)
            s = (const char *)text, n = text_n;
        TjIds ids = {0};
        if (tj_encode(t, s, n, &ids, &e) == 0)
            for (size_t i = 0; i < ids.n; i++) (void)tj_id_to_display(t, ids.ids[i]);
        tj_ids_free(&ids);
        tj_free(t);
    }
done:
    cJSON_Delete(v);
    cJSON_Delete(root);
    free(cm64);
    return 0;
}
