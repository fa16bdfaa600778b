/* gguf_dump — prints a GGUF file's tensor table, or with a tensor name writes
 * that tensor widened to little-endian f32 to stdout (used by tests/ref/gguf_check.sh). */
#include "gguf.h"
#include "quant.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    GgufFile f;
    AvErr e;
    if (argc < 2) { fprintf(stderr, "usage: gguf_dump FILE [TENSOR]\n"); return 2; }
    if (gguf_open(&f, argv[1], &e) != 0) { fprintf(stderr, "gguf_dump: %s\n", e.msg); return 1; }
    if (argc == 2) {
        printf("version %u alignment %u kv %d tensors %d\n", f.version, f.alignment, f.n_kv, f.n_tensors);
        for (int i = 0; i < f.n_kv; i++) printf("kv %s %s\n", f.kv[i].key, gguf_vtype_name(f.kv[i].type));
        for (int i = 0; i < f.n_tensors; i++) {
            const GgufTensor *t = &f.tensors[i];
            printf("tensor %s %s %llu %llu %llu %llu\n", t->name, gguf_type_name(t->type), (unsigned long long)t->dims[0],
                   (unsigned long long)t->dims[1], (unsigned long long)t->dims[2], (unsigned long long)t->dims[3]);
        }
        gguf_close(&f);
        return 0;
    }
    const GgufTensor *t = gguf_find_tensor(&f, argv[2]);
    if (!t) { fprintf(stderr, "gguf_dump: %s: no tensor '%s'\n", argv[1], argv[2]); gguf_close(&f); return 1; }
    size_t cols = (size_t)t->dims[0], rows = (size_t)(t->dims[1] * t->dims[2] * t->dims[3]);
    float *y = malloc(rows * cols * sizeof *y);
    int rc = 1;
    if (!y) fprintf(stderr, "gguf_dump: out of memory\n");
    else if (quant_rows(t->type, t->data, t->nbytes, rows, cols, 0, rows, y, t->name, &e) != 0) fprintf(stderr, "gguf_dump: %s\n", e.msg);
    else if (fwrite(y, sizeof *y, rows * cols, stdout) != rows * cols) fprintf(stderr, "gguf_dump: write failed\n");
    else rc = 0;
    free(y);
    gguf_close(&f);
    return rc;
}
