/* image_out.c — an image run's picture, grid and pooled outputs as JSON
 * members and .npy arrays (image_out.h). Reads the OutDoc only. */
#include "image_out.h"

#include <stdint.h>
#include <string.h>

#include "npy.h"

static const char *const KIND[] = {"patch", "cls", "distillation", "register", "text"};

static void put_float(FILE *f, float v, int sig) {
    char buf[40];
    json_format_float(buf, v, sig);
    fputs(buf, f);
}

static void put_floats(FILE *f, const float *v, int n, int sig) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        put_float(f, v[i], sig);
    }
    fputc(']', f);
}

static void put_base64(FILE *f, const unsigned char *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {A[v >> 18 & 63], A[v >> 12 & 63], i + 1 < n ? A[v >> 6 & 63] : '=', i + 2 < n ? A[v & 63] : '='};
        fwrite(q, 1, 4, f);
    }
}

int image_json_member(FILE *f, const OutDoc *d, int page) {
    const OutImage *im = d->image;
    if (!im) return 0;
    const int n = d->enc->n, sig = d->precision;
    fputs(",\"image\":{\"file\":", f);
    json_write_string(f, im->file ? im->file : "");
    fputs(",\"mode\":", f);
    json_write_string(f, im->mode ? im->mode : "");
    fprintf(f, ",\"size\":[%d,%d],\"resized\":[%d,%d],\"preprocessed\":[%d,%d],\"patch_size\":%d,"
               "\"grid\":{\"rows\":%d,\"cols\":%d,\"tiles\":%d},\"first_patch\":%d,\"token_kinds\":[",
            im->src_w, im->src_h, im->resized_w, im->resized_h, im->w, im->h, im->patch, im->rows, im->cols, im->tiles,
            im->first_patch);
    for (int i = 0; i < n; i++) fprintf(f, "%s\"%s\"", i ? "," : "", KIND[im->kind[i]]);
    fputs("],\"image_tokens\":[", f);
    for (int i = 0, k = 0; i < n; i++)
        if (im->kind[i] != OUT_TOK_TEXT) fprintf(f, "%s%d", k++ ? "," : "", i);
    fputc(']', f);
    if (im->split_rows > 0 && im->tile_first) { /* Idefics3's tiles: where each one's image tokens start */
        fprintf(f, ",\"split\":{\"rows\":%d,\"cols\":%d,\"tile_first\":[", im->split_rows, im->split_cols);
        for (int k = 0; k < im->split_rows * im->split_cols; k++) fprintf(f, "%s%d", k ? "," : "", im->tile_first[k]);
        fputs("]}", f);
    }
    if (im->bidir) { /* [first, end) of the image tokens, which attend to each other both ways */
        int first = -1, end = -1;
        for (int i = 0; i < n; i++)
            if (im->kind[i] == OUT_TOK_PATCH) first = first < 0 ? i : first, end = i + 1;
        fprintf(f, ",\"bidirectional\":[%d,%d]", first, end);
    }
    if (im->vis_attn || im->n_image) /* (a server keeps no tower attention: the tower described all the same) */
        fprintf(f, ",\"vision\":{\"layers\":%d,\"heads\":%d,\"tokens\":%d,\"prefix\":%d,\"feature_layer\":%d,"
                   "\"image_tokens\":%d,\"embeds_dim\":%d}",
                im->vis_layers, im->vis_heads, im->vis_n, im->vis_prefix, im->feature_layer, im->n_image, im->embeds_dim);
    if ((im->vis_attn || im->n_image) && im->vis_kept) /* the attention kept: the last layers, [from, to) */
        fprintf(f, ",\"vision_kept_layers\":[%d,%d]", im->vis_layers - im->vis_kept, im->vis_layers);
    if (im->pool_attn) {
        fputs(",\"pooling_attention\":[", f);
        for (int h = 0; h < im->pool_heads; h++) {
            if (h) fputc(',', f);
            put_floats(f, im->pool_attn + (size_t)h * n, n, sig);
        }
        fputc(']', f);
    }
    if (im->embed) {
        fputs(",\"embedding\":", f);
        put_floats(f, im->embed, im->embed_dim, sig);
    }
    if (im->text_enc) {
        const TokEncoding *t = im->text_enc;
        fputs(",\"text\":{\"tokens\":[", f);
        for (int i = 0; i < t->n; i++) {
            if (i) fputc(',', f);
            json_write_string(f, t->tokens[i]);
        }
        fputs("],\"input_ids\":[", f);
        for (int i = 0; i < t->n; i++) fprintf(f, "%s%d", i ? "," : "", t->ids[i]);
        fputs("],\"logit\":", f);
        put_float(f, (float)im->logit, sig);
        if (im->sigmoid) {
            fputs(",\"probability\":", f);
            put_float(f, (float)(1.0 / (1.0 + __builtin_exp(-im->logit))), sig);
        }
        if (im->text_embed) {
            fputs(",\"embedding\":", f);
            put_floats(f, im->text_embed, im->embed_dim, sig);
        }
        if (!page && im->text_attn) {
            fputs(",\"attention\":[", f);
            for (int l = 0; l < im->text_layers; l++) {
                fputs(l ? ",[" : "[", f);
                for (int h = 0; h < im->text_heads; h++) {
                    fputs(h ? ",[" : "[", f);
                    const float *b = im->text_attn + ((size_t)l * im->text_heads + h) * t->n * t->n;
                    for (int i = 0; i < t->n; i++) {
                        if (i) fputc(',', f);
                        put_floats(f, b + (size_t)i * t->n, t->n, sig);
                    }
                    fputc(']', f);
                }
                fputc(']', f);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
    if (page && im->tower) { /* the other tower's page, beside this one (the CLI writes it) */
        fputs(",\"tower\":{\"suffix\":", f);
        json_write_string(f, im->tower_suffix);
        fputs(",\"label\":", f);
        json_write_string(f, im->tower_label);
        fputc('}', f);
    }
    if (page && im->png) {
        fputs(",\"png\":\"", f);
        put_base64(f, im->png, im->png_len);
        fputc('"', f);
    }
    fputc('}', f);
    return ferror(f) ? -1 : 0;
}

int image_npy_has(const OutDoc *d, int what) {
    const OutImage *im = d->image;
    if (!im) return 0;
    switch (what) {
    case IMAGE_NPY_POOL: return im->pool_attn != NULL;
    case IMAGE_NPY_TEXT: return im->text_attn != NULL;
    case IMAGE_NPY_VISION: return im->vis_attn != NULL;
    case IMAGE_NPY_EMBEDS: return im->image_embeds != NULL;
    case IMAGE_NPY_PIXELS: return im->pixels != NULL;
    default: return 1;
    }
}

static int put_i32(FILE *f, int32_t v) { return fwrite(&v, sizeof v, 1, f) == 1 ? 0 : -1; }

int image_npy_write(FILE *f, const OutDoc *d, int what, AvErr *e) {
    const OutImage *im = d->image;
    const int n = d->enc->n;
    int rc = 0;
    if (!image_npy_has(d, what)) return av_err(e, "no image arrays in this document");
    if (what == IMAGE_NPY_TOKENS) {
        const long shape[2] = {n, 4};
        rc = npy_write_header_typed(f, "<i4", shape, 2);
        for (int i = 0; rc == 0 && i < n; i++) {
            const int p = i - im->first_patch, patch = im->kind[i] == OUT_TOK_PATCH && p >= 0;
            const int per = im->rows * im->cols, tile = patch ? p / per : -1, q = patch ? p % per : 0;
            rc = put_i32(f, patch ? q / im->cols : -1) || put_i32(f, patch ? q % im->cols : -1) || put_i32(f, tile) ||
                 put_i32(f, im->kind[i]);
        }
    } else if (what == IMAGE_NPY_GRID) {
        const long shape[1] = {6};
        const int32_t v[6] = {im->rows, im->cols, im->patch, im->tiles, im->h, im->w};
        rc = npy_write_header_typed(f, "<i4", shape, 1);
        if (rc == 0 && fwrite(v, sizeof v[0], 6, f) != 6) rc = -1;
    } else if (what == IMAGE_NPY_POOL) {
        const long shape[2] = {im->pool_heads, n};
        rc = npy_write_header(f, shape, 2);
        if (rc == 0 && fwrite(im->pool_attn, sizeof(float), (size_t)im->pool_heads * n, f) != (size_t)im->pool_heads * n)
            rc = -1;
    } else if (what == IMAGE_NPY_VISION) {
        const int kept = im->vis_kept ? im->vis_kept : im->vis_layers;
        const long v = im->vis_n, shape[4] = {kept, im->vis_heads, v, v};
        const size_t count = (size_t)kept * im->vis_heads * v * v;
        rc = npy_write_header(f, shape, 4);
        if (rc == 0 && fwrite(im->vis_attn, sizeof(float), count, f) != count) rc = -1;
    } else if (what == IMAGE_NPY_EMBEDS) {
        const long shape[2] = {im->n_image, im->embeds_dim};
        const size_t count = (size_t)im->n_image * im->embeds_dim;
        rc = npy_write_header(f, shape, 2);
        if (rc == 0 && fwrite(im->image_embeds, sizeof(float), count, f) != count) rc = -1;
    } else if (what == IMAGE_NPY_PIXELS) {
        const int tiles = im->pixel_tiles > 1 ? im->pixel_tiles : 1;
        const long shape[4] = {tiles, 3, im->h, im->w};
        const size_t count = (size_t)tiles * 3 * im->h * im->w;
        rc = tiles > 1 ? npy_write_header(f, shape, 4) : npy_write_header(f, shape + 1, 3);
        if (rc == 0 && fwrite(im->pixels, sizeof(float), count, f) != count) rc = -1;
    } else {
        const long t = im->text_enc->n, shape[4] = {im->text_layers, im->text_heads, t, t};
        const size_t count = (size_t)im->text_layers * im->text_heads * t * t;
        rc = npy_write_header(f, shape, 4);
        if (rc == 0 && fwrite(im->text_attn, sizeof(float), count, f) != count) rc = -1;
    }
    return rc ? av_err_errno(e, "write error") : 0;
}
