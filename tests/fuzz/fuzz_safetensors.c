/* libFuzzer target: the safetensors header parser on arbitrary file images. */
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile f = {0};
    AvErr e;
    if (st_parse(&f, data, size, "fuzz.safetensors", &e) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const StTensor *t = &f.tensors[i];
            /* every accepted tensor lies inside the image */
            if (t->data < data || t->data + t->nbytes > data + size) __builtin_trap();
            if (st_find(&f, t->name) == NULL) __builtin_trap();
        }
        /* st_parse leaves map NULL: st_close frees only the tensor table */
        st_close(&f);
    }
    return 0;
}
