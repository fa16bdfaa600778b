/* vis_dump.c — a vision encoder (and a whole CLIP/SigLIP model's text tower)
 * run on an image by the engine, the capture written raw, for
 * tests/ref/vision_check.py, which feeds the same pixels to transformers.
 * usage: vis_dump MODEL_DIR IMAGE OUT_PREFIX [TEXT_ID ...]
 * writes OUT_PREFIX.pixels (3, h, w), .attn (L, H, n, n), .q and .k (L, H, n,
 * head_dim), the pooled .embed (dim) and the pooling head's .pool_attn (H, n)
 * where the model has them; with ids, the text tower's .text_attn (L', H', t, t)
 * and .text_embed (dim); prints {"layers", "heads", "head_dim", "tokens", "rows",
 * "cols", "prefix", "pixels_h", "pixels_w", "embed_dim", "pool", "text_layers",
 * "text_heads", "similarity"} as JSON. float32 throughout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "gemm.h"
#include "image.h"
#include "imgproc.h"
#include "model.h"
#include "vision.h"

static int dump(const char *prefix, const char *ext, const float *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, sizeof *p, n, f);
    return fclose(f) != 0 || w != n ? -1 : 0;
}

static int fail(const AvErr *e) {
    fprintf(stderr, "vis_dump: %s\n", e->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: vis_dump MODEL_DIR IMAGE OUT_PREFIX [TEXT_ID ...]\n");
        return 2;
    }
    AvErr e = {0};
    if (gemm_kernel_from_env(&e) != 0) return fail(&e);
    Model m;
    ImgProc p;
    AvImage img;
    ImgPixels px;
    RunState rs;
    Capture cap;
    VisPooled pool;
    int rows, cols, n;
    if (model_load(&m, argv[1], &e) || !m.cfg.vision) {
        if (!e.msg[0]) snprintf(e.msg, sizeof e.msg, "%s is not a vision encoder", argv[1]);
        return fail(&e);
    }
    if (imgproc_load(&p, argv[1], &e) || img_load(argv[2], &img, &e) || imgproc_run(&p, &img, &px, &e) ||
        vis_grid(&m.cfg, px.h, px.w, &rows, &cols, &n, &e))
        return fail(&e);
    float *x = malloc((size_t)n * m.cfg.hidden_size * sizeof *x);
    if (!x) return 1;
    if (model_runstate_alloc(&rs, &m, n, 0, &e) || model_capture_alloc(&cap, &m.cfg, n, 1, 0, &e) ||
        vis_embed(&m, &rs, px.pixels, px.h, px.w, x, &e) || model_forward_embeds(&m, &rs, x, n, &cap, 1, &e) ||
        vis_pool(&m, &rs, n, &pool, &e))
        return fail(&e);
    const size_t LH = (size_t)cap.n_layers * cap.n_heads;
    if (dump(argv[3], "pixels", px.pixels, (size_t)3 * px.h * px.w) || dump(argv[3], "attn", cap.attn, LH * n * n) ||
        dump(argv[3], "q", cap.q, LH * n * cap.head_dim) || dump(argv[3], "k", cap.k, LH * n * cap.head_dim) ||
        (pool.embed && dump(argv[3], "embed", pool.embed, (size_t)pool.dim)) ||
        (pool.attn && dump(argv[3], "pool_attn", pool.attn, (size_t)pool.heads * n)))
        return fail(&(AvErr){.msg = "cannot write the outputs"});
    int tl = 0, th = 0, nt = argc - 4;
    double sim = 0;
    if (nt > 0) {
        if (!m.text) return fail(&(AvErr){.msg = "token ids given, but the model has no text tower"});
        int *ids = malloc((size_t)nt * sizeof *ids);
        float *temb = malloc((size_t)m.w.text_head->proj.out * sizeof *temb);
        RunState trs;
        Capture tcap;
        for (int i = 0; i < nt; i++) ids[i] = atoi(argv[4 + i]);
        if (model_runstate_alloc(&trs, m.text, nt, 0, &e) || model_capture_alloc(&tcap, &m.text->cfg, nt, 0, 0, &e) ||
            vis_text_embed(&m, &trs, ids, nt, &tcap, temb, &e))
            return fail(&e);
        tl = tcap.n_layers, th = tcap.n_heads;
        sim = vis_similarity(&m, pool.embed, temb, pool.dim);
        if (dump(argv[3], "text_attn", tcap.attn, (size_t)tl * th * nt * nt) ||
            dump(argv[3], "text_embed", temb, (size_t)m.w.text_head->proj.out))
            return fail(&(AvErr){.msg = "cannot write the outputs"});
        model_capture_free(&tcap);
        model_runstate_free(&trs);
        free(ids), free(temb);
    }
    printf("{\"layers\": %d, \"heads\": %d, \"head_dim\": %d, \"tokens\": %d, \"rows\": %d, \"cols\": %d, "
           "\"prefix\": %d, \"pixels_h\": %d, \"pixels_w\": %d, \"embed_dim\": %d, \"pool\": %d, \"text_layers\": %d, "
           "\"text_heads\": %d, \"similarity\": %.9g, \"dtype\": \"%s\"}\n",
           cap.n_layers, cap.n_heads, cap.head_dim, n, rows, cols, vis_prefix(&m.cfg), px.h, px.w, pool.dim,
           pool.attn != NULL, tl, th, sim, m.dtype_name);
    vis_pooled_free(&pool);
    model_capture_free(&cap);
    model_runstate_free(&rs);
    imgproc_free(&px);
    img_free(&img);
    free(x);
    model_free(&m);
    return 0;
}
