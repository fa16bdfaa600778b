/* libFuzzer target: vocab.txt loading (through a memfd, as the loader reads a path). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("vocab", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    Tokenizer *t = NULL;
    AvErr e;
    if (tok_load(&t, path, (int)(size & 1), &e) == 0) {
        TokEncoding enc = {0};
        if (tok_encode(t, "hello world, [MASK] cafe\xcc\x81", 25, "b", 1, 16, &enc, &e) == 0) {
            for (int i = 0; i < enc.n; i++)
                if (enc.ids[i] < 0 || enc.ids[i] >= tok_vocab_size(t)) __builtin_trap();
        }
        tok_encoding_free(&enc);
        tok_free(t);
    }
    close(fd);
    return 0;
}
