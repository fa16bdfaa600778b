/* libFuzzer target: tokenizing arbitrary bytes (sentence A, and B after the
 * first 0x09 byte) with the committed test vocabulary. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static Tokenizer *tok_lower, *tok_cased;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AvErr e;
    if (!tok_lower) {
        const char *v = getenv("FUZZ_VOCAB") ? getenv("FUZZ_VOCAB") : "tests/data/small-f32/vocab.txt";
        if (tok_load(&tok_lower, v, 1, &e) != 0 || tok_load(&tok_cased, v, 0, &e) != 0) abort();
    }
    const char *a = (const char *)data, *tab = memchr(data, '\t', size);
    size_t a_len = tab ? (size_t)(tab - a) : size;
    const char *b = tab ? tab + 1 : NULL;
    size_t b_len = tab ? size - a_len - 1 : 0;
    int max_len = size ? 3 + data[0] % 64 : 8;
    for (int k = 0; k < 2; k++) {
        const Tokenizer *t = k ? tok_cased : tok_lower;
        TokEncoding enc = {0};
        if (tok_encode(t, a, a_len, b, b_len, max_len, &enc, &e) == 0) {
            if (enc.n > max_len || enc.n < 2) __builtin_trap();
            for (int i = 0; i < enc.n; i++)
                if (enc.ids[i] < 0 || enc.ids[i] >= tok_vocab_size(t) || !enc.tokens[i]) __builtin_trap();
        }
        tok_encoding_free(&enc);
    }
    return 0;
}
