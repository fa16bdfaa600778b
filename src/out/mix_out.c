/* mix_out.c — ALTI and rollout (mixing.h) as JSON members and .npy arrays of
 * the document's selected layers. */
#include "mix_out.h"

#include "mixing.h"
#include "npy.h"

const float *mix_doc_layer(const OutDoc *d, int k, int li, int layer_only) {
    const MixResult *m = d->mix[k];
    const size_t nn = (size_t)m->n * m->n;
    return (layer_only ? m->layer : m->agg) + (size_t)out_layer(d, li) * nn;
}

static int write_stack(FILE *f, const OutDoc *d, int k, int layer_only) {
    const int n = d->mix[k]->n;
    char buf[40];
    fputc('[', f);
    for (int li = 0; li < out_n_layers(d); li++) {
        const float *b = mix_doc_layer(d, k, li, layer_only);
        fputs(li ? ",[" : "[", f);
        for (int i = 0; i < n; i++) {
            fputs(i ? ",[" : "[", f);
            for (int j = 0; j < n; j++) {
                if (j) fputc(',', f);
                json_format_float(buf, b[(size_t)i * n + j], d->precision);
                fputs(buf, f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputc(']', f);
    return ferror(f) ? -1 : 0;
}

int mix_json_members(FILE *f, const OutDoc *d) {
    for (int k = 0; k < d->n_mix; k++) {
        fprintf(f, ",\"%s\":", d->mix_name[k]);
        if (write_stack(f, d, k, 0)) return -1;
        fprintf(f, ",\"%s_layer\":", d->mix_name[k]);
        if (write_stack(f, d, k, 1)) return -1;
    }
    return 0;
}

int mix_npy_write(FILE *f, const OutDoc *d, int k, int layer_only, AvErr *e) {
    if (k >= d->n_mix) return av_err(e, "no ALTI or rollout was computed (--measure alti|rollout)");
    const long n = d->mix[k]->n;
    long shape[3] = {out_n_layers(d), n, n};
    if (npy_write_header(f, shape, 3) != 0) return av_err_errno(e, "write error");
    for (int li = 0; li < out_n_layers(d); li++)
        if (fwrite(mix_doc_layer(d, k, li, layer_only), sizeof(float), (size_t)(n * n), f) != (size_t)(n * n))
            return av_err_errno(e, "write error");
    return 0;
}
