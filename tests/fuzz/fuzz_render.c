/* libFuzzer target: attnviz render's readers (render.c: the .npz zip walk,
 * inflation and .npy headers; .safetensors; the checks on every array) on
 * arbitrary file images. The first byte picks the container; the tokens come
 * from a fixed five-token JSON, so shapes, values and counts are what vary. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char meta[64], npz[64], st[64];
    if (!meta[0]) {
        snprintf(meta, sizeof meta, "/tmp/attnviz_fuzz_render_%d.json", (int)getpid());
        snprintf(npz, sizeof npz, "/tmp/attnviz_fuzz_render_%d.npz", (int)getpid());
        snprintf(st, sizeof st, "/tmp/attnviz_fuzz_render_%d.safetensors", (int)getpid());
        FILE *m = fopen(meta, "w");
        if (!m) return 0;
        fputs("{\"tokens\": [\"a\", \"b\", \"c\", \"d\", \"e\"], \"causal\": true, \"layers\": [0, 3]}", m);
        fclose(m);
    }
    if (size < 1) return 0;
    const char *path = data[0] & 1 ? st : npz;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(data + 1, 1, size - 1, f);
    if (fclose(f) != 0 || w != size - 1) return 0;
    Rendered r;
    AvErr e;
    if (render_load(&r, path, meta, 0, &e) == 0) {
        /* what the writers rely on */
        if (r.n_layers < 1 || (r.self.present && r.self.cap.n_tokens != 5)) __builtin_trap();
        render_free(&r);
    }
    return 0;
}
