/* libFuzzer target: the GGUF parser on arbitrary file images, both
 * dequantizers on the first rows of every accepted tensor (fast == naive),
 * and the tokenizer built from the metadata (tokgguf.c), encoding a fixed text. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "quant.h"
#include "tokenizer.h"

enum { MAX_WIDE = 4096 };

/* Same bits, or both NaN: when two NaN operands meet (a NaN scale and a NaN
 * min), which payload survives depends on the operand order the compiler
 * picked for a commutative + or *. */
static int same(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0 && !(a[i] != a[i] && b[i] != b[i])) return 0;
    return 1;
}

/* Up to MAX_WIDE elements of whole rows, widened both ways, the same values;
 * any refusal must come from both. */
static void widen(const GgufTensor *t) {
    static float a[MAX_WIDE], b[MAX_WIDE];
    AvErr e;
    size_t cols = (size_t)t->dims[0], rows = 1;
    for (int k = 1; k < GGUF_MAX_DIMS; k++) {
        if (t->dims[k] && rows > SIZE_MAX / (size_t)t->dims[k]) return;
        rows *= (size_t)t->dims[k];
    }
    if (!cols || cols > MAX_WIDE) return;
    size_t r1 = rows < MAX_WIDE / cols ? rows : MAX_WIDE / cols;
    int ra = quant_rows_naive(t->type, t->data, t->nbytes, rows, cols, 0, r1, a, t->name, &e);
    int rb = quant_rows(t->type, t->data, t->nbytes, rows, cols, 0, r1, b, t->name, &e);
    if (ra != rb || (ra == 0 && !same(a, b, r1 * cols))) __builtin_trap();
}

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
            widen(t);
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
        Tokenizer *tok = NULL;
        if (tok_load_gguf(&tok, &f, "fuzz.gguf", arch_gguf_tok_flags(&f), &e) == 0) {
            static const char text[] = "Hello <s>world</s> 12345 caf\xc3\xa9  \n";
            TokEncoding enc;
            if (tok_encode(tok, text, sizeof text - 1, NULL, 0, 64, &enc, &e) == 0) tok_encoding_free(&enc);
            tok_free(tok);
        }
        gguf_close(&f);
    }
    return 0;
}
