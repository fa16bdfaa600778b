/* arch.c — the table of model families, built from families.h, and what is
 * derived from it. */
#include "arch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"

/* One row per line of families.h, in its order (each row is its family's file's). */
#define AV_FAMILY_ROW(kind, stem) &arch_family_##stem,
static const ArchSpec *const table[] = {AV_FAMILIES(AV_FAMILY_ROW)};
#undef AV_FAMILY_ROW
#define N_ARCH (sizeof table / sizeof table[0])

const ArchSpec *arch_spec(ArchKind kind) {
    for (size_t i = 0; i < N_ARCH; i++)
        if (table[i]->kind == kind) return table[i];
    return NULL;
}

const ArchSpec *arch_detect(const char *model_type, const char *architecture) {
    for (size_t i = 0; i < N_ARCH; i++) {
        if (model_type && !strcmp(model_type, table[i]->model_type)) return table[i];
        if (!model_type && architecture &&
            !strncmp(architecture, table[i]->arch_prefix, strlen(table[i]->arch_prefix)))
            return table[i];
    }
    return NULL;
}

const ArchSpec *arch_default(void) { return arch_spec(ARCH_BERT); }

const ArchSpec *arch_detect_gguf(const char *name) {
    for (size_t i = 0; i < N_ARCH; i++)
        if (table[i]->gguf_arch && !strcmp(name, table[i]->gguf_arch)) return table[i];
    return NULL;
}

/* "a, b and c" of the rows' model_type (gguf: only those with a GGUF architecture). */
static void join_names(char *out, size_t cap, int gguf) {
    size_t n = 0, k = 0, total = 0;
    for (size_t i = 0; i < N_ARCH; i++) total += !gguf || table[i]->gguf_arch;
    out[0] = '\0';
    for (size_t i = 0; i < N_ARCH; i++) {
        if (gguf && !table[i]->gguf_arch) continue;
        const char *sep = k == 0 ? "" : k + 1 == total ? " and " : ", ";
        int w = snprintf(out + n, cap - n, "%s%s", sep, gguf ? table[i]->gguf_arch : table[i]->model_type);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w, k++;
    }
}

static char supported[512], supported_gguf[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;
static void make_names(void) {
    join_names(supported, sizeof supported, 0);
    join_names(supported_gguf, sizeof supported_gguf, 1);
}

const char *arch_supported_list(void) {
    pthread_once(&names_once, make_names);
    return supported;
}

const char *arch_gguf_list(void) {
    pthread_once(&names_once, make_names);
    return supported_gguf;
}

unsigned arch_gguf_tok_flags(const GgufFile *f) {
    const char *name = "";
    size_t len = 0;
    AvErr e;
    if (!gguf_find_kv(f, "general.architecture") || gguf_get_str(f, "general.architecture", &name, &len, &e)) return 0;
    for (size_t i = 0; i < N_ARCH; i++)
        if (table[i]->gguf_arch && strlen(table[i]->gguf_arch) == len && !memcmp(name, table[i]->gguf_arch, len))
            return table[i]->gguf_tok;
    return 0;
}
