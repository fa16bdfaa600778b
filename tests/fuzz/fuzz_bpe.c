/* libFuzzer target: byte-level BPE loading (vocab.json, then a NUL byte, then
 * merges.txt; through memfds, as the loader reads paths) and encoding a fixed
 * text with whatever loaded. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tokenizer.h"

static int memfd_path(const uint8_t *data, size_t size, const char *name, char path[64]) {
    int fd = memfd_create(name, 0);
    if (fd < 0) return -1;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t vlen = nul ? (size_t)(nul - data) : size;
    const uint8_t *m = nul ? nul + 1 : data + size;
    char pv[64], pm[64];
    int fv = memfd_path(data, vlen, "vocab.json", pv);
    int fm = memfd_path(m, size - (size_t)(m - data), "merges.txt", pm);
    if (fv >= 0 && fm >= 0) {
        Tokenizer *t = NULL;
        AvErr e;
        TokStyle style = size & 1 ? TOK_STYLE_ROBERTA : TOK_STYLE_GPT2;
        if (tok_load_bpe(&t, pv, pm, style, &e) == 0) {
            static const char text[] = "Hello world, it's <mask> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac  \n<s>x</s>";
            TokEncoding enc = {0};
            if (tok_encode(t, text, sizeof text - 1, "b  c", 4, 24, &enc, &e) == 0) {
                if (enc.n > 24) __builtin_trap();
                for (int i = 0; i < enc.n; i++)
                    if (enc.ids[i] < 0 || enc.ids[i] >= tok_vocab_size(t) || !enc.tokens[i] ||
                        !enc.display[i])
                        __builtin_trap();
            }
            tok_encoding_free(&enc);
            tok_free(t);
        }
    }
    if (fv >= 0) close(fv);
    if (fm >= 0) close(fm);
    return 0;
}
