/* libFuzzer target: the pytorch_model.bin reader on arbitrary inputs.
 * An input starting with 'P' is a whole file image (zip walk + pickle); any
 * other input is taken as data.pkl alone and wrapped in a stored zip with
 * storages archive/data/0..15 (256 bytes each), so mutations exercise the
 * pickle machine instead of mostly breaking the zip. Whole-file seeds carry
 * zero CRCs so mutated pickles get past the data.pkl checksum. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "torchbin.h"

#define N_STORAGES 16
#define STORAGE_BYTES 256

static void put16(uint8_t *p, size_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, size_t v) { put16(p, v & 0xffff); put16(p + 2, (v >> 16) & 0xffff); }

/* Stored zip of data.pkl = pkl plus the storages; returns its length. */
static uint8_t *wrap(const uint8_t *pkl, size_t n, size_t *len) {
    char names[N_STORAGES + 1][32];
    const uint8_t *datas[N_STORAGES + 1];
    size_t lens[N_STORAGES + 1], offs[N_STORAGES + 1];
    static const uint8_t zeros[STORAGE_BYTES];
    snprintf(names[0], sizeof names[0], "archive/data.pkl");
    datas[0] = pkl;
    lens[0] = n;
    for (int i = 1; i <= N_STORAGES; i++) {
        snprintf(names[i], sizeof names[i], "archive/data/%d", i - 1);
        datas[i] = zeros;
        lens[i] = STORAGE_BYTES;
    }
    size_t cap = n + 22 + (N_STORAGES + 1) * (30 + 46 + 64 + STORAGE_BYTES);
    uint8_t *b = calloc(cap, 1), *p = b;
    if (!b) return NULL;
    for (int i = 0; i <= N_STORAGES; i++) {
        size_t nl = strlen(names[i]);
        offs[i] = (size_t)(p - b);
        put32(p, 0x04034b50);
        put32(p + 14, 0);
        put32(p + 18, lens[i]);
        put32(p + 22, lens[i]);
        put16(p + 26, nl);
        memcpy(p + 30, names[i], nl);
        if (lens[i]) memcpy(p + 30 + nl, datas[i], lens[i]);
        p += 30 + nl + lens[i];
    }
    uint8_t *cd = p;
    for (int i = 0; i <= N_STORAGES; i++) {
        size_t nl = strlen(names[i]);
        put32(p, 0x02014b50); /* CRC stays 0: not checked */
        put32(p + 20, lens[i]);
        put32(p + 24, lens[i]);
        put16(p + 28, nl);
        put32(p + 42, offs[i]);
        memcpy(p + 46, names[i], nl);
        p += 46 + nl;
    }
    put32(p, 0x06054b50);
    put16(p + 8, N_STORAGES + 1);
    put16(p + 10, N_STORAGES + 1);
    put32(p + 12, (size_t)(p - cd));
    put32(p + 16, (size_t)(cd - b));
    *len = (size_t)(p + 22 - b);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *img = NULL;
    const uint8_t *buf = data;
    size_t len = size;
    if (size > 0 && data[0] != 'P') {
        img = wrap(data, size, &len);
        if (!img) return 0;
        buf = img;
    }
    StFile f = {0};
    AvErr e;
    if (tb_parse(&f, buf, len, "fuzz.bin", &e) == 0) {
        for (int i = 0; i < f.n_tensors; i++) {
            const StTensor *t = &f.tensors[i];
            /* every accepted tensor lies inside the image and has a sane shape */
            if (t->data < buf || t->data + t->nbytes > buf + len) __builtin_trap();
            if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) __builtin_trap();
            if (st_find(&f, t->name) != t) __builtin_trap(); /* names are unique */
        }
        /* tb_parse leaves map NULL: st_close frees only the tensor table */
        st_close(&f);
    } else if (strncmp(e.msg, "fuzz.bin: ", 10) != 0) {
        __builtin_trap(); /* every error names the file */
    }
    free(img);
    return 0;
}
