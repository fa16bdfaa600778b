/* vis_bench.c — times a vision encoder's image pass: the patches embedded
 * (vision.h's vis_embed), every layer run with every head's attention kept,
 * and what pools the last hidden state (SigLIP's head, CLIP's projection), on
 * the folder's own preprocessing of IMAGE (done once, outside the timing): the
 * first (cold) call and the best of N warm calls, as bench/peer_vision.py
 * times transformers.
 * usage: vis_bench MODEL_DIR IMAGE [REPEAT]
 * prints n=<tokens> kernel=<k> cold_ms=<ms> warm_ms=<ms> (warm_ms last). */
#include <stdio.h>
#include <stdlib.h>

#include "loader.h"
#include "gemm.h"
#include "image.h"
#include "imgproc.h"
#include "model.h"
#include "util.h"
#include "vision.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: vis_bench MODEL_DIR IMAGE [REPEAT]\n");
        return 2;
    }
    const int repeat = argc > 3 ? atoi(argv[3]) : 5;
    AvErr e = {0};
    Model m;
    ImgProc p;
    AvImage img;
    ImgPixels px;
    RunState rs;
    Capture cap;
    int rows, cols, n;
    if (gemm_kernel_from_env(&e) || model_load_mode(&m, argv[1], AV_MAP_RESIDENT, &e) || imgproc_load(&p, argv[1], &e) ||
        img_load(argv[2], &img, &e) || imgproc_run(&p, &img, &px, &e) || vis_grid(&m.cfg, px.h, px.w, &rows, &cols, &n, &e) ||
        model_runstate_alloc(&rs, &m, n, 0, &e) || model_capture_alloc(&cap, &m.cfg, n, 0, 0, &e)) {
        fprintf(stderr, "vis_bench: %s\n", e.msg);
        return 1;
    }
    float *x = malloc((size_t)n * m.cfg.hidden_size * sizeof *x);
    if (!x) return 1;
    const int pooled = m.cfg.vis_pool_head || (m.w.vis && m.w.vis->proj.w);
    double cold = 0, best = 1e30;
    for (int r = 0; r <= repeat; r++) {
        VisPooled pool = {0};
        const double t0 = av_now_ms();
        if (vis_embed(&m, &rs, px.pixels, px.h, px.w, x, &e) || model_forward_embeds(&m, &rs, x, n, &cap, pooled, &e) ||
            (pooled && vis_pool(&m, &rs, n, &pool, &e))) {
            fprintf(stderr, "vis_bench: %s\n", e.msg);
            return 1;
        }
        const double dt = av_now_ms() - t0;
        vis_pooled_free(&pool);
        if (r == 0) cold = dt;
        else if (dt < best) best = dt;
    }
    printf("n=%d kernel=%s cold_ms=%.1f warm_ms=%.1f\n", n, gemm_kernel(), cold, best);
    free(x);
    model_capture_free(&cap);
    model_runstate_free(&rs);
    imgproc_free(&px);
    img_free(&img);
    model_free(&m);
    return 0;
}
