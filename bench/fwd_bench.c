/* fwd_bench.c — times bert_forward on n tokens: the first (cold) call and the
 * best of N warm calls, as the peer script does.
 * usage: fwd_bench MODEL_DIR N_TOKENS [REPEAT] */
#include <stdio.h>
#include <stdlib.h>

#include "bert.h"
#include "util.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fwd_bench MODEL_DIR N_TOKENS [REPEAT]\n");
        return 2;
    }
    int n = atoi(argv[2]), repeat = argc > 3 ? atoi(argv[3]) : 3;
    BertModel m;
    AvErr e;
    if (bert_load(&m, argv[1], &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int *ids = malloc(sizeof(int) * n), *types = calloc((size_t)n, sizeof(int));
    if (!ids || !types) return 1;
    for (int i = 0; i < n; i++) ids[i] = 1000 % m.cfg.vocab_size + i % 97;
    BertRunState rs;
    Capture cap;
    if (bert_runstate_alloc(&rs, &m.cfg, n, &e) || bert_capture_alloc(&cap, &m.cfg, n, 1, 0, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double best = 1e30, first = 0;
    for (int r = 0; r <= repeat; r++) {
        double t0 = av_now_ms();
        if (bert_forward(&m, &rs, ids, types, n, &cap, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double t = av_now_ms() - t0;
        if (r == 0) first = t;
        else if (t < best) best = t;
    }
    /* tiled: whether products went to OpenBLAS's small kernels (see bert.c) */
    printf("n=%d tiled=%d cold_ms=%.1f warm_ms=%.1f\n", n, bert_gemm_tiled(), first, best);
    bert_capture_free(&cap);
    bert_runstate_free(&rs);
    bert_free(&m);
    free(ids);
    free(types);
    return 0;
}
