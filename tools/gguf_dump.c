/* gguf_dump — inspection tool. With a file only, prints its header, metadata
 * (types and values; arrays as their length and first items) and tensor table
 * as JSON; with a tensor name, writes that tensor widened to little-endian
 * f32 to stdout (used by tests/ref/gguf_check.sh). */
#include "gguf.h"
#include "quant.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

enum { ARRAY_HEAD = 8 };

/* A JSON string from len bytes that may hold invalid UTF-8 or NULs: those
 * become U+FFFD so the output always parses. */
static cJSON *str_item(const char *s, size_t len) {
    char *buf = malloc(len * 3 + 1), *o = buf;
    if (!buf) return NULL;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0 || cp == 0) { memcpy(o, "\xEF\xBF\xBD", 3); o += 3; i++; }
        else { memcpy(o, s + i, (size_t)k); o += k; i += (size_t)k; }
    }
    *o = 0;
    cJSON *item = cJSON_CreateString(buf);
    free(buf);
    return item;
}

/* Element i of kv (i == 0 for a scalar) as a JSON value of its own type. */
static cJSON *value_item(const GgufKV *kv, GgufVType t, uint64_t i, AvErr *e) {
    if (t == GGUF_V_STRING) {
        const char *s;
        size_t len;
        if (kv->type == GGUF_V_ARRAY) { if (gguf_arr_str(kv, i, &s, &len, e) != 0) return NULL; }
        else { uint64_t n = 0; memcpy(&n, kv->data, 8); s = (const char *)kv->data + 8; len = (size_t)n; }
        return str_item(s, len);
    }
    double d;
    if (gguf_kv_num(kv, i, &d, e) != 0) return NULL;
    return t == GGUF_V_BOOL ? cJSON_CreateBool(d != 0) : cJSON_CreateNumber(d);
}

/* Adds item (NULL when its creation failed) to an object (key) or an array. */
static int add(cJSON *parent, const char *key, cJSON *item) {
    if (!item || !parent) { cJSON_Delete(item); return -1; }
    if (key ? !cJSON_AddItemToObject(parent, key, item) : !cJSON_AddItemToArray(parent, item)) { cJSON_Delete(item); return -1; }
    return 0;
}

/* Every container is attached to root as soon as it is made, so one
 * cJSON_Delete(root) frees everything on any failure. */
static cJSON *describe(const GgufFile *f, AvErr *e) {
    cJSON *root = cJSON_CreateObject(), *kvs = cJSON_CreateArray(), *ts = cJSON_CreateArray();
    e->msg[0] = 0;
    if (add(root, "version", cJSON_CreateNumber(f->version)) || add(root, "alignment", cJSON_CreateNumber(f->alignment)) ||
        add(root, "data_offset", cJSON_CreateNumber((double)f->data_offset)) ||
        add(root, "n_kv", cJSON_CreateNumber(f->n_kv)) || add(root, "n_tensors", cJSON_CreateNumber(f->n_tensors)) ||
        add(root, "metadata", kvs) || add(root, "tensors", ts))
        goto fail;
    for (int i = 0; i < f->n_kv; i++) {
        const GgufKV *kv = &f->kv[i];
        cJSON *o = cJSON_CreateObject();
        if (add(kvs, NULL, o) || add(o, "key", str_item(kv->key, strlen(kv->key))) ||
            add(o, "type", cJSON_CreateString(gguf_vtype_name(kv->type))))
            goto fail;
        if (kv->type == GGUF_V_ARRAY) {
            cJSON *head = cJSON_CreateArray();
            if (add(o, "elem_type", cJSON_CreateString(gguf_vtype_name(kv->arr_type))) ||
                add(o, "length", cJSON_CreateNumber((double)kv->arr_n)) || add(o, "first", head))
                goto fail;
            for (uint64_t j = 0; j < kv->arr_n && j < ARRAY_HEAD; j++)
                if (add(head, NULL, value_item(kv, kv->arr_type, j, e))) goto fail;
        } else if (add(o, "value", value_item(kv, kv->type, 0, e))) goto fail;
    }
    for (int i = 0; i < f->n_tensors; i++) {
        const GgufTensor *t = &f->tensors[i];
        cJSON *o = cJSON_CreateObject(), *dims = cJSON_CreateArray();
        if (add(ts, NULL, o) || add(o, "name", str_item(t->name, strlen(t->name))) ||
            add(o, "type", cJSON_CreateString(gguf_type_name(t->type)))) {
            cJSON_Delete(dims);
            goto fail;
        }
        if (add(o, "dims", dims)) goto fail;
        for (int k = 0; k < t->n_dims; k++)
            if (add(dims, NULL, cJSON_CreateNumber((double)t->dims[k]))) goto fail;
        if (add(o, "offset", cJSON_CreateNumber((double)t->offset)) || add(o, "bytes", cJSON_CreateNumber((double)t->nbytes)))
            goto fail;
    }
    return root;
fail:
    if (!e->msg[0]) av_err(e, "out of memory building the JSON");
    cJSON_Delete(root);
    return NULL;
}

int main(int argc, char **argv) {
    GgufFile f;
    AvErr e;
    if (argc < 2 || argc > 3) { fprintf(stderr, "usage: gguf_dump FILE [TENSOR]\n"); return 2; }
    if (gguf_open(&f, argv[1], &e) != 0) { fprintf(stderr, "gguf_dump: %s\n", e.msg); return 1; }
    int rc = 1;
    if (argc == 2) {
        cJSON *root = describe(&f, &e);
        char *text = root ? cJSON_Print(root) : NULL;
        if (!root) fprintf(stderr, "gguf_dump: %s: %s\n", argv[1], e.msg);
        else if (!text) fprintf(stderr, "gguf_dump: out of memory printing the JSON\n");
        else if (puts(text) < 0 || fflush(stdout) != 0) fprintf(stderr, "gguf_dump: write failed\n");
        else rc = 0;
        free(text);
        cJSON_Delete(root);
        gguf_close(&f);
        return rc;
    }
    const GgufTensor *t = gguf_find_tensor(&f, argv[2]);
    if (!t) { fprintf(stderr, "gguf_dump: %s: no tensor '%s'\n", argv[1], argv[2]); gguf_close(&f); return 1; }
    size_t cols = (size_t)t->dims[0], rows = (size_t)(t->dims[1] * t->dims[2] * t->dims[3]);
    float *y = malloc(rows * cols * sizeof *y);
    if (!y) fprintf(stderr, "gguf_dump: out of memory\n");
    else if (quant_rows(t->type, t->data, t->nbytes, rows, cols, 0, rows, y, t->name, &e) != 0) fprintf(stderr, "gguf_dump: %s\n", e.msg);
    else if (fwrite(y, sizeof *y, rows * cols, stdout) != rows * cols || fflush(stdout) != 0) fprintf(stderr, "gguf_dump: write failed\n");
    else rc = 0;
    free(y);
    gguf_close(&f);
    return rc;
}
