/* fwd_bench.c — times model_forward on n tokens: the first (cold) call and the
 * best of N warm calls, as the peer script does, and the best warm call's CPU time.
 * usage: fwd_bench [--mapped] [--norm | --alti | --rollout | --none | --telemetry K | --scores] MODEL_DIR N_TOKENS [REPEAT]
 * The weights are held as serve, batch and generation hold them (util.h's
 * AV_MAP_RESIDENT: copied where av_hold_plan finds it worth it, else mapped);
 * --mapped maps the files as one pass does.
 * --norm: the pass of --measure norm: the capture computes the value norms
 * and each call ends with the value-weighted matrices (normattn.h's na_fill),
 * everything the CLI adds before writing.
 * --alti, --rollout: the pass of --measure alti|rollout: every layer's and
 *   head's attention (and for ALTI the residual stream and values), each call
 *   ending with the measure's matrices (mixing.h), everything the CLI adds
 *   before writing.
 * --none: a capture that keeps nothing: the same pass as the two below (it
 *   stops at the last layer's attention probabilities), none of it kept.
 * --telemetry K: every head's row telemetry with its K heaviest keys, no matrices.
 * --scores: every head's --stats/heads score sums, no matrices (what those commands keep). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader.h"
#include "gemm.h"
#include "model.h"
#include "mixing.h"
#include "normattn.h"
#include "util.h"

/* CPU time of the whole process: with one thread (OPENBLAS_NUM_THREADS=1), the
 * time the pass had a core, which a machine shared with other work inflates
 * less than the clock's. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    const int mapped = argc > 1 && !strcmp(argv[1], "--mapped");
    if (mapped) argv++, argc--;
    const int norm = argc > 1 && !strcmp(argv[1], "--norm");
    const int alti = argc > 1 && !strcmp(argv[1], "--alti"), roll = argc > 1 && !strcmp(argv[1], "--rollout");
    const int none = argc > 1 && !strcmp(argv[1], "--none");
    const int scores = argc > 1 && !strcmp(argv[1], "--scores");
    const int tel = argc > 2 && !strcmp(argv[1], "--telemetry");
    const int top_k = tel ? atoi(argv[2]) : 0;
    if (tel) argv++, argc--;
    if (norm || alti || roll || none || scores || tel) argv++, argc--;
    if (argc < 3) {
        fprintf(stderr, "usage: fwd_bench [--mapped] [--norm | --alti | --rollout | --none | --telemetry K | --scores] "
                        "MODEL_DIR N_TOKENS [REPEAT]\n");
        return 2;
    }
    int n = atoi(argv[2]), repeat = argc > 3 ? atoi(argv[3]) : 3;
    Model m;
    AvErr e;
    if (model_load_mode(&m, argv[1], mapped ? AV_MAP_FILE : AV_MAP_RESIDENT, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int *ids = malloc(sizeof(int) * n), *types = calloc((size_t)n, sizeof(int));
    if (!ids || !types) return 1;
    for (int i = 0; i < n; i++) ids[i] = 1000 % m.cfg.vocab_size + i % 97;
    RunState rs;
    Capture cap;
    const CapScoring sc = {0};
    memset(&cap, 0, sizeof cap);
    if (model_runstate_alloc(&rs, &m, n, 0, &e) ||
        ((tel || none) ? model_capture_telemetry(&cap, &m.cfg, n, top_k, ids, NULL, 0, NULL, 0, &e)
         : scores ? model_capture_scores(&cap, &m.cfg, n, &sc, NULL, 0, NULL, 0, &e)
         : model_capture_alloc(&cap, &m.cfg, n, 1, 0, &e)) ||
        (norm && model_capture_value_norms(&cap, &e)) ||
        (alti && (model_capture_internals(&cap, &m.cfg, &e) || model_capture_values(&cap, &m.cfg, &e)))) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    if (none) { /* the telemetry capture emptied: its rows go nowhere */
        free(cap.tel), free(cap.tel_top), free(cap.tel_top_w);
        cap.tel = NULL, cap.tel_top = NULL, cap.tel_top_w = NULL;
    }
    double best = 1e30, first = 0, best_cpu = 1e30, best_attn = 0;
    for (int r = 0; r <= repeat; r++) {
        double t0 = av_now_ms(), c0 = cpu_ms();
        rs.attn_ms = 0;
        cap.tel_ids = ids;
        MixResult mix = {0};
        if (model_forward(&m, &rs, ids, types, n, &cap, &e) != 0 || (norm && na_fill_pool(&cap, rs.pool, &e) != 0) ||
            (alti && mix_alti(&m, &cap, rs.pool, &mix, &e) != 0) || (roll && mix_rollout(&cap, &mix, &e) != 0)) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        mix_free(&mix);
        double t = av_now_ms() - t0, c = cpu_ms() - c0;
        if (r == 0) first = t;
        else {
            if (t < best) best = t, best_attn = rs.attn_ms;
            if (c < best_cpu) best_cpu = c;
        }
    }
    /* kernel: which of gemm.h's product kernels this CPU ran; warm_cpu_ms: the
     * process's CPU time (all threads), best of the warm calls; attn_ms: the
     * best call's attention steps (warm_ms last: bench.py reads it to the end) */
    /* anon_mb / file_mb: the process's anonymous and file-backed (mapped weights) memory after the passes */
    AvMemUse u;
    if (av_memory_used(&u) != 0) memset(&u, 0, sizeof u);
    printf("n=%d weights=%s kernel=%s anon_mb=%.0f file_mb=%.0f warm_cpu_ms=%.1f cold_ms=%.1f attn_ms=%.1f warm_ms=%.1f\n",
           n, m.hold == AV_HOLD_RESIDENT ? "resident" : "mapped", gemm_kernel(), u.anon * 1e-6, u.file * 1e-6, best_cpu,
           first, best_attn, best);
    model_capture_free(&cap);
    model_runstate_free(&rs);
    model_free(&m);
    free(ids);
    free(types);
    return 0;
}
