/* top_heads.c — libattnviz's example: for one sentence, the token each head
 * attends to most (its weight summed over the query rows, divided by their
 * number), one line per layer and head.
 *
 *   cc top_heads.c $(pkg-config --cflags --libs attnviz) -o top_heads
 *   ./top_heads MODEL "time flies like an arrow" [LAYER...]
 *
 * MODEL is a model folder or a .gguf file; LAYERs (optional) keep only those. */
#include <stdio.h>
#include <stdlib.h>

#include <attnviz.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL TEXT [LAYER...]\n", argv[0]);
        return 2;
    }
    attnviz_error err;
    attnviz_model *m = attnviz_model_open(argv[1], 0, &err);
    if (!m) {
        fprintf(stderr, "top_heads: %s\n", err.message);
        return err.code;
    }
    int layers[64], n_layers = 0;
    for (int i = 3; i < argc && n_layers < 64; i++) layers[n_layers++] = atoi(argv[i]);
    attnviz_run_options opts = {0};
    if (n_layers) opts.layers = layers, opts.n_layers = n_layers;
    attnviz_result *r = attnviz_run(m, argv[2], NULL, &opts, &err);
    if (!r) {
        fprintf(stderr, "top_heads: %s\n", err.message);
        attnviz_model_free(m);
        return err.code;
    }
    size_t shape[4];
    attnviz_result_shape(r, ATTNVIZ_ATTENTION, shape); /* (layers, heads, n, n) */
    const float *a = attnviz_result_data(r, ATTNVIZ_ATTENTION);
    const size_t n = shape[2];
    printf("%s: %zu tokens, %zu layers x %zu heads\n", attnviz_model_name(m), n, shape[0], shape[1]);
    for (size_t l = 0; l < shape[0]; l++)
        for (size_t h = 0; h < shape[1]; h++) {
            const float *block = a + (l * shape[1] + h) * n * n;
            size_t best = 0;
            double best_w = -1;
            for (size_t j = 0; j < n; j++) {
                double w = 0; /* column j: what every query gives token j, in row order */
                for (size_t i = 0; i < n; i++) w += block[i * n + j];
                if (w > best_w) best = j, best_w = w;
            }
            printf("layer %d head %d: %s %.4f\n", attnviz_result_layer(r, (int)l), attnviz_result_head(r, (int)h),
                   attnviz_result_token(r, (int)best), best_w / (double)n);
        }
    attnviz_result_free(r);
    attnviz_model_free(m);
    return 0;
}
