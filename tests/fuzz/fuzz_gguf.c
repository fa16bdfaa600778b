/* libFuzzer target: the GGUF parser on arbitrary file images. */
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GgufFile f;
    AvErr e;
    if (gguf_parse(&f, data, size, "fuzz.gguf", &e) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const GgufTensor *t = &f.tensors[i];
            /* every accepted tensor lies inside the image */
            if (t->data < data || t->data + t->nbytes > data + size) __builtin_trap();
            if (gguf_find_tensor(&f, t->name) != t) __builtin_trap();
        }
        for (int i = 0; i < f.n_kv; i++) {
            const GgufKV *kv = &f.kv[i];
            const char *s;
            size_t n;
            double d;
            if (kv->type == GGUF_V_ARRAY && kv->arr_type == GGUF_V_STRING)
                for (uint64_t j = 0; j < kv->arr_n; j++)
                    if (gguf_arr_str(kv, j, &s, &n, &e) != 0 || (const uint8_t *)s + n > data + size) __builtin_trap();
            if (kv->type == GGUF_V_STRING &&
                (gguf_get_str(&f, kv->key, &s, &n, &e) != 0 || (const uint8_t *)s + n > data + size)) __builtin_trap();
            (void)gguf_kv_num(kv, 0, &d, &e);
        }
        gguf_close(&f);
    }
    return 0;
}
