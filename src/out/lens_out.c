/* lens_out.c — the logit lens, attribution and ablation (lens.h) as JSON
 * members (the JSON document and the page's meta share them) and .npy
 * arrays. Reads the OutDoc only: ids arrive spelled in d->lens_words. */
#include "lens_out.h"

#include <stdint.h>
#include <string.h>

#include "lens.h"
#include "npy.h"

static void put_float(FILE *f, float v, int sig) {
    char buf[40];
    json_format_float(buf, v, sig);
    fputs(buf, f);
}

/* the spelling of lens_words' entry at (or "" past its end) */
static void put_token(FILE *f, const OutDoc *d, size_t at, int display) {
    const OutSpelling *w = d->lens_words;
    const char *s = w && at < (size_t)w->n ? (display ? w->display[at] : w->token[at]) : NULL;
    json_write_string(f, s ? s : "");
}

static void put_id_token(FILE *f, const OutDoc *d, int id, size_t at) {
    fprintf(f, "\"id\":%d,\"token\":", id);
    put_token(f, d, at, 0);
    fputs(",\"display\":", f);
    put_token(f, d, at, 1);
}

int lens_json_members(FILE *f, const OutDoc *d) {
    const LensResult *r = d->lens;
    if (!r) return 0;
    const int n = r->n, L = r->n_layers, NH = r->n_heads, sig = d->precision;
    const size_t lens_cells = (size_t)r->lens_n * n * r->lens_k, final_at = lens_cells;
    const size_t attr_at = final_at + (size_t)n, abl_at = attr_at + (size_t)r->attr_n;
    if (r->lens_n) {
        fputs(",\"logit_lens_layers\":[", f);
        for (int i = 0; i < r->lens_n; i++) fprintf(f, "%s%d", i ? "," : "", r->lens_layer[i]);
        fputs("],\"logit_lens_final\":[", f);
        for (int p = 0; p < n; p++) {
            fputs(p ? ",{" : "{", f);
            put_id_token(f, d, r->final_id[p], final_at + (size_t)p);
            fputc('}', f);
        }
        fputs("],\"logit_lens\":[", f);
        for (int i = 0; i < r->lens_n; i++) {
            fputs(i ? ",[" : "[", f);
            for (int p = 0; p < n; p++) {
                const size_t cell = (size_t)i * n + p;
                fputs(p ? ",{\"top\":[" : "{\"top\":[", f);
                for (int j = 0; j < r->lens_k; j++) {
                    const size_t at = cell * r->lens_k + j;
                    fputs(j ? ",{" : "{", f);
                    put_id_token(f, d, r->lens_ids[at], at);
                    fputs(",\"prob\":", f);
                    put_float(f, r->lens_probs[at], sig);
                    fputc('}', f);
                }
                fprintf(f, "],\"rank\":%d,\"final_prob\":", r->lens_rank[cell]);
                put_float(f, r->lens_final_prob[cell], sig);
                fputc('}', f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    if (r->attr_n) {
        fputs(",\"attribution\":{\"target_id\":", f);
        if (r->attr_target >= 0) fprintf(f, "%d", r->attr_target);
        else fputs("null", f);
        fputs(",\"positions\":[", f);
        for (int i = 0; i < r->attr_n; i++) {
            fprintf(f, "%s{\"position\":%d,\"target_id\":%d,\"token\":", i ? "," : "", r->attr_pos[i], r->attr_tid[i]);
            put_token(f, d, attr_at + (size_t)i, 0);
            fputs(",\"display\":", f);
            put_token(f, d, attr_at + (size_t)i, 1);
            fputs(",\"logit\":", f);
            put_float(f, r->attr_logit[i], sig);
            fputs(",\"other\":", f);
            put_float(f, r->attr_other[i], sig);
            fputs(",\"heads\":[", f);
            for (int l = 0; l < L; l++) {
                fputs(l ? ",[" : "[", f);
                for (int h = 0; h < NH; h++) {
                    if (h) fputc(',', f);
                    put_float(f, r->attr_heads[((size_t)i * L + l) * NH + h], sig);
                }
                fputc(']', f);
            }
            fputs("],\"mlp\":[", f);
            for (int l = 0; l < L; l++) {
                if (l) fputc(',', f);
                put_float(f, r->attr_mlp[(size_t)i * L + l], sig);
            }
            fputs("]}", f);
        }
        fputs("]}", f);
    }
    if (r->abl_on) {
        fprintf(f, ",\"ablation\":{\"target_id\":%d,\"token\":", r->abl_target);
        put_token(f, d, abl_at, 0);
        fputs(",\"display\":", f);
        put_token(f, d, abl_at, 1);
        fprintf(f, ",\"position\":%d,\"mode\":\"%s\",\"base_logprob\":", r->abl_pos, r->abl_mean ? "mean" : "zero");
        put_float(f, r->abl_base, sig);
        fputs(",\"effects\":[", f);
        for (int l = 0; l < L; l++) {
            fputs(l ? ",[" : "[", f);
            for (int h = 0; h < NH; h++) {
                if (h) fputc(',', f);
                put_float(f, r->abl_effects[(size_t)l * NH + h], sig); /* NaN (not ablated): null */
            }
            fputc(']', f);
        }
        fputs("]}", f);
    }
    return ferror(f) ? -1 : 0;
}

static int put_ints(FILE *f, const int *v, size_t n, AvErr *e) {
    for (size_t i = 0; i < n; i++) {
        int32_t x = v[i];
        if (fwrite(&x, sizeof x, 1, f) != 1) return av_err_errno(e, "write error");
    }
    return 0;
}

int lens_npy_has(const OutDoc *d, int what) {
    const LensResult *r = d->lens;
    if (!r) return 0;
    switch (what) {
    case LENS_NPY_IDS:
    case LENS_NPY_PROBS:
    case LENS_NPY_RANK: return r->lens_n > 0;
    case LENS_NPY_ATTR_HEADS:
    case LENS_NPY_ATTR_MLP: return r->attr_n > 0;
    case LENS_NPY_ABLATION: return r->abl_on;
    }
    return 0;
}

int lens_npy_write(FILE *f, const OutDoc *d, int what, AvErr *e) {
    const LensResult *r = d->lens;
    if (!lens_npy_has(d, what)) return av_err(e, "not computed");
    const long n = r->n, L = r->n_layers, NH = r->n_heads;
    long shape[3];
    int nd;
    const char *type = "<f4";
    const float *fv = NULL;
    const int *iv = NULL;
    switch (what) {
    case LENS_NPY_IDS: shape[0] = r->lens_n, shape[1] = n, shape[2] = r->lens_k, nd = 3, type = "<i4", iv = r->lens_ids; break;
    case LENS_NPY_PROBS: shape[0] = r->lens_n, shape[1] = n, shape[2] = r->lens_k, nd = 3, fv = r->lens_probs; break;
    case LENS_NPY_RANK: shape[0] = r->lens_n, shape[1] = n, nd = 2, type = "<i4", iv = r->lens_rank; break;
    case LENS_NPY_ATTR_HEADS: shape[0] = r->attr_n, shape[1] = L, shape[2] = NH, nd = 3, fv = r->attr_heads; break;
    case LENS_NPY_ATTR_MLP: shape[0] = r->attr_n, shape[1] = L, nd = 2, fv = r->attr_mlp; break;
    default: shape[0] = L, shape[1] = NH, nd = 2, fv = r->abl_effects; break;
    }
    if (npy_write_header_typed(f, type, shape, nd) != 0) return av_err_errno(e, "write error");
    size_t cells = 1;
    for (int i = 0; i < nd; i++) cells *= (size_t)shape[i];
    if (iv) return put_ints(f, iv, cells, e);
    return fwrite(fv, sizeof(float), cells, f) == cells ? 0 : av_err_errno(e, "write error");
}
