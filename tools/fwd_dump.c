/* fwd_dump.c — runs the engine on token ids and writes the capture raw, for
 * the reference checks that feed the same ids to transformers
 * (tests/ref/decoder_check.py): no tokenizer involved.
 * usage: fwd_dump [--norm|--mix] MODEL_DIR OUT_PREFIX ID [ID ...]
 * writes OUT_PREFIX.attn (L, H, n, n), .q and .k (L, H, n, head_dim), float32;
 * with --norm also .vnorm (L, H, n) and .nattn (L, H, n, n), the value norms
 * and value-weighted attention as the CLI's --measure norm computes them
 * (normattn.h); a mixture-of-experts model's routing as .experts (L, n, k)
 * int32 ids and .experts_w (L, n, k) float32 weights; a model with attention
 * sinks their share of every row as .sinks (L, H, n); with --mix ALTI and
 * attention rollout (mixing.h) as .alti, .alti_layer, .rollout and
 * .rollout_layer (L, n, n); and prints {"layers", "heads", "kv_heads",
 * "head_dim", "tokens", "experts_k", "sinks"} as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "gemm.h"
#include "model.h"
#include "mixing.h"
#include "normattn.h"

static int dump(const char *prefix, const char *ext, const float *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, sizeof *p, n, f);
    return fclose(f) != 0 || w != n ? -1 : 0;
}

int main(int argc, char **argv) {
    const int norm = argc > 1 && !strcmp(argv[1], "--norm"), mix = argc > 1 && !strcmp(argv[1], "--mix");
    if (norm || mix) argv++, argc--;
    if (argc < 4) {
        fprintf(stderr, "usage: fwd_dump [--norm|--mix] MODEL_DIR OUT_PREFIX ID [ID ...]\n");
        return 2;
    }
    int n = argc - 3;
    int *ids = malloc(sizeof(int) * (size_t)n), *types = calloc((size_t)n, sizeof(int));
    if (!ids || !types) return 1;
    for (int i = 0; i < n; i++) ids[i] = atoi(argv[3 + i]);
    Model m;
    RunState rs;
    Capture cap;
    MixResult alti = {0}, roll = {0};
    AvErr e = {0};
    if (gemm_kernel_from_env(&e) != 0) { /* ATTNVIZ_KERNEL, as the CLI reads it */
        fprintf(stderr, "fwd_dump: %s\n", e.msg);
        return 2;
    }
    if (model_load(&m, argv[1], &e) || model_runstate_alloc(&rs, &m, n, 0, &e) ||
        model_capture_alloc(&cap, &m.cfg, n, 1, 0, &e) || (norm && model_capture_value_norms(&cap, &e)) ||
        (mix && (model_capture_internals(&cap, &m.cfg, &e) || model_capture_values(&cap, &m.cfg, &e))) ||
        model_forward(&m, &rs, ids, types, n, &cap, &e) || (norm && na_fill(&cap, &e)) ||
        (mix && (mix_alti(&m, &cap, rs.pool, &alti, &e) || mix_rollout(&cap, &roll, &e)))) {
        fprintf(stderr, "fwd_dump: %s\n", e.msg);
        return 1;
    }
    size_t LH = (size_t)cap.n_layers * cap.n_heads;
    if (dump(argv[2], "attn", cap.attn, LH * n * n) || dump(argv[2], "q", cap.q, LH * n * cap.head_dim) ||
        dump(argv[2], "k", cap.k, LH * n * cap.head_dim) ||
        (norm && (dump(argv[2], "vnorm", cap.vnorm, LH * n) || dump(argv[2], "nattn", cap.nattn, LH * n * n))) ||
        (cap.moe_ids && (dump(argv[2], "experts", (const float *)(const void *)cap.moe_ids,
                              (size_t)cap.n_layers * n * cap.moe_k) ||
                         dump(argv[2], "experts_w", cap.moe_w, (size_t)cap.n_layers * n * cap.moe_k))) ||
        (cap.sinks && dump(argv[2], "sinks", cap.sinks, LH * n)) ||
        (mix && (dump(argv[2], "alti", alti.agg, (size_t)cap.n_layers * n * n) ||
                 dump(argv[2], "alti_layer", alti.layer, (size_t)cap.n_layers * n * n) ||
                 dump(argv[2], "rollout", roll.agg, (size_t)cap.n_layers * n * n) ||
                 dump(argv[2], "rollout_layer", roll.layer, (size_t)cap.n_layers * n * n)))) {
        fprintf(stderr, "fwd_dump: cannot write %s.*\n", argv[2]);
        return 1;
    }
    printf("{\"layers\": %d, \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"tokens\": %d, \"dtype\": \"%s\", "
           "\"experts_k\": %d, \"sinks\": %d}\n",
           cap.n_layers, cap.n_heads, cap.n_kv_heads, cap.head_dim, n, m.dtype_name, cap.moe_k, cap.sinks != NULL);
    mix_free(&alti);
    mix_free(&roll);
    model_capture_free(&cap);
    model_runstate_free(&rs);
    model_free(&m);
    free(ids);
    free(types);
    return 0;
}
