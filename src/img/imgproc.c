/* imgproc.c — preprocessor_config.json, and its steps on a decoded image as
 * transformers' PilBackend takes them: resize by PIL's Image.resize (the
 * 8-bit path of Resample.c: separable filters whose weights are rounded to
 * 22-bit fixed point, horizontal pass first, each pass rounded and clipped
 * to 8 bits), center crop (np_center_crop, zero padding), rescale (float64
 * product, then float32) and normalize ((x - mean) / std in float32). */
#include "imgproc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---------------------------------------------------------------- PIL's filters */

static double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

static double bilinear_filter(double x) {
    x = x < 0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double hamming_filter(double x) {
    x = x < 0 ? -x : x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x)); /* float constants, as PIL writes them */
}

static double bicubic_filter(double x) { /* Keys' cubic convolution, a = -0.5 */
    const double a = -0.5;
    x = x < 0 ? -x : x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos_filter(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

typedef struct {
    double (*f)(double);
    double support;
} Filter;

static int filter_of(ImgFilter f, Filter *out) {
    switch (f) {
    case IMG_BOX: *out = (Filter){box_filter, 0.5}; return 0;
    case IMG_BILINEAR: *out = (Filter){bilinear_filter, 1.0}; return 0;
    case IMG_HAMMING: *out = (Filter){hamming_filter, 1.0}; return 0;
    case IMG_BICUBIC: *out = (Filter){bicubic_filter, 2.0}; return 0;
    case IMG_LANCZOS: *out = (Filter){lanczos_filter, 3.0}; return 0;
    default: return -1;
    }
}

const char *img_filter_name(ImgFilter f) {
    static const char *const names[] = {"nearest", "lanczos", "bilinear", "bicubic", "box", "hamming"};
    return (unsigned)f < 6 ? names[f] : "?";
}

/* Weights rounded to fixed point with 22 fraction bits: 8 bits of result and
 * two of headroom for filters with negative lobes, in an int. */
#define PRECISION_BITS (32 - 8 - 2)

/* One output position's source range and weights: bounds (out, 2) = first
 * source index and count; kk (out, ksize). As PIL's precompute_coeffs: the
 * filter stretched by the scale when shrinking, weights normalized to sum 1,
 * then rounded to fixed point (normalize_coeffs_8bpc). */
static int coeffs(int in_size, int out_size, const Filter *flt, int **bounds_out, int32_t **kk_out, int *ksize_out) {
    const double scale = (double)(float)in_size / out_size; /* PIL: (in1 - in0) in float, a box of whole pixels */
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = flt->support * filterscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    double *k = malloc((size_t)ksize * sizeof *k);
    int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *kk = malloc((size_t)out_size * ksize * sizeof *kk);
    if (!k || !bounds || !kk) {
        free(k), free(bounds), free(kk);
        return -1;
    }
    for (int xx = 0; xx < out_size; xx++) {
        const double center = (xx + 0.5) * scale, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) ww += k[x] = flt->f((x + xmin - center + 0.5) * ss);
        int32_t *kr = kk + (size_t)xx * ksize;
        for (int x = 0; x < ksize; x++) {
            const double w = x < xmax ? (ww != 0.0 ? k[x] / ww : k[x]) : 0.0;
            kr[x] = w < 0 ? (int32_t)(-0.5 + w * (1 << PRECISION_BITS)) : (int32_t)(0.5 + w * (1 << PRECISION_BITS));
        }
        bounds[2 * xx] = xmin, bounds[2 * xx + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds, *kk_out = kk, *ksize_out = ksize;
    return 0;
}

/* A sum with PIL's rounding half (1 << 21) already in it, back to 8 bits. */
static uint8_t clip8(int v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int img_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, ImgFilter f, AvErr *e) {
    if (w < 1 || h < 1 || ow < 1 || oh < 1) return av_err(e, "resize: empty image (%d x %d -> %d x %d)", w, h, ow, oh);
    if (f == IMG_NEAREST) {
        /* PIL's scaling affine transform (ImagingScaleAffine): the source pixel
         * under each output pixel's center, positions stepped by addition */
        const double sx = (double)w / ow, sy = (double)h / oh;
        double yo = sy * 0.5;
        for (int y = 0; y < oh; y++, yo += sy) {
            int yi = (int)yo;
            yi = yi >= h ? h - 1 : yi;
            double xo = sx * 0.5;
            for (int x = 0; x < ow; x++, xo += sx) {
                int xi = (int)xo;
                xi = xi >= w ? w - 1 : xi;
                memcpy(dst + ((size_t)y * ow + x) * 3, src + ((size_t)yi * w + xi) * 3, 3);
            }
        }
        return 0;
    }
    Filter flt;
    if (filter_of(f, &flt)) return av_err(e, "resize: unknown resampling filter %d", (int)f);
    const int need_h = ow != w, need_v = oh != h;
    if (!need_h && !need_v) {
        memcpy(dst, src, (size_t)w * h * 3);
        return 0;
    }
    int *bv = NULL, *bh = NULL, kv = 0, kh = 0;
    int32_t *wv = NULL, *wh = NULL;
    uint8_t *tmp = NULL;
    int rc = -1;
    if (coeffs(h, oh, &flt, &bv, &wv, &kv) || (need_h && coeffs(w, ow, &flt, &bh, &wh, &kh))) {
        av_err(e, "out of memory resizing %d x %d to %d x %d", w, h, ow, oh);
        goto done;
    }
    /* the horizontal pass over the source rows the vertical one reads */
    const int y_first = bv[0], y_last = bv[2 * oh - 2] + bv[2 * oh - 1];
    const uint8_t *vin = src; // (rows, vw, 3) the vertical pass's input
    int vw = w, y0 = 0;
    if (need_h) {
        const int rows = y_last - y_first;
        if (!(tmp = malloc((size_t)rows * ow * 3))) {
            av_err(e, "out of memory resizing %d x %d to %d x %d", w, h, ow, oh);
            goto done;
        }
        for (int y = 0; y < rows; y++) {
            const uint8_t *in = src + (size_t)(y + y_first) * w * 3;
            uint8_t *out = tmp + (size_t)y * ow * 3;
            for (int xx = 0; xx < ow; xx++) {
                const int xmin = bh[2 * xx], xn = bh[2 * xx + 1];
                const int32_t *k = wh + (size_t)xx * kh;
                int s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int x = 0; x < xn; x++) {
                    const uint8_t *p = in + (size_t)(x + xmin) * 3;
                    s0 += p[0] * k[x], s1 += p[1] * k[x], s2 += p[2] * k[x];
                }
                out[3 * xx] = clip8(s0), out[3 * xx + 1] = clip8(s1), out[3 * xx + 2] = clip8(s2);
            }
        }
        vin = tmp, vw = ow, y0 = y_first;
    }
    if (need_v) {
        for (int yy = 0; yy < oh; yy++) {
            const int ymin = bv[2 * yy] - y0, yn = bv[2 * yy + 1];
            const int32_t *k = wv + (size_t)yy * kv;
            uint8_t *out = dst + (size_t)yy * vw * 3;
            for (int c = 0; c < vw * 3; c++) {
                int s = 1 << (PRECISION_BITS - 1);
                for (int y = 0; y < yn; y++) s += vin[(size_t)(y + ymin) * vw * 3 + c] * k[y];
                out[c] = clip8(s);
            }
        }
    } else {
        memcpy(dst, vin, (size_t)oh * ow * 3);
    }
    rc = 0;
done:
    free(bv), free(bh), free(wv), free(wh), free(tmp);
    return rc;
}

/* ---------------------------------------------------------------- the config */

/* The defaults of transformers' image processor classes for keys a config leaves out. */
typedef struct {
    const char *type;
    int default_to_square;  /* an int size is {"height", "width"} (1) or {"shortest_edge"} (0) */
    ImgFilter resample;
    ImgSizeMode size_mode;
    int size;               /* height = width, or shortest_edge */
    int crop;               /* center crop to crop x crop; 0: no crop */
    const float *mean, *std;
} ProcDefaults;

static const float STANDARD[3] = {0.5f, 0.5f, 0.5f};
static const float CLIP_MEAN[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float CLIP_STD[3] = {0.26862954f, 0.26130258f, 0.27577711f};

static const ProcDefaults DEFAULTS[] = {
    {"ViTImageProcessor", 1, IMG_BILINEAR, IMG_SIZE_FIXED, 224, 0, STANDARD, STANDARD},
    {"DeiTImageProcessor", 1, IMG_BICUBIC, IMG_SIZE_FIXED, 256, 224, STANDARD, STANDARD},
    {"CLIPImageProcessor", 0, IMG_BICUBIC, IMG_SIZE_SHORTEST, 224, 224, CLIP_MEAN, CLIP_STD},
    {"BitImageProcessor", 0, IMG_BICUBIC, IMG_SIZE_SHORTEST, 224, 224, CLIP_MEAN, CLIP_STD},
    {"SiglipImageProcessor", 0, IMG_BICUBIC, IMG_SIZE_FIXED, 224, 0, STANDARD, STANDARD},
    {"Idefics3ImageProcessor", 0, IMG_LANCZOS, IMG_SIZE_LONGEST, 4 * 364, 0, STANDARD, STANDARD},
};
/* BaseImageProcessor's: an int size is square, bilinear */
static const ProcDefaults BASE = {"", 1, IMG_BILINEAR, IMG_SIZE_FIXED, 224, 0, STANDARD, STANDARD};

/* "XImageProcessor", its "...Fast" and "...Pil" backends and the older "XFeatureExtractor" name one class. */
static const ProcDefaults *defaults_of(const char *type) {
    char base[64];
    snprintf(base, sizeof base, "%s", type);
    size_t n = strlen(base);
    if (n > 16 && !strcmp(base + n - 16, "FeatureExtractor")) snprintf(base + n - 16, sizeof base - (n - 16), "ImageProcessor");
    n = strlen(base);
    if (n > 4 && !strcmp(base + n - 4, "Fast")) base[n - 4] = '\0';
    else if (n > 3 && !strcmp(base + n - 3, "Pil")) base[n - 3] = '\0';
    for (size_t i = 0; i < sizeof DEFAULTS / sizeof DEFAULTS[0]; i++)
        if (!strcmp(base, DEFAULTS[i].type)) return &DEFAULTS[i];
    return &BASE;
}

static int get_bool(const cJSON *root, const char *key, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return av_err(e, "%s: \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int as_int(const cJSON *v, const char *key, int lo, int hi, int *out, const char *path, AvErr *e) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != (double)(int)v->valuedouble)
        return av_err(e, "%s: \"%s\" must be an integer in [%d, %d]", path, key, lo, hi);
    *out = (int)v->valuedouble;
    return 0;
}

/* size / crop_size: an int (square, or the shortest edge as the class says), a [h, w] list, or a dict. */
static int get_size(const cJSON *root, const char *key, int default_to_square, ImgSizeMode *mode, int *h, int *w,
                    int *shortest, int *longest, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 1; /* absent: the class's default */
    int s = 0;
    if (cJSON_IsNumber(v)) {
        if (as_int(v, key, 1, IMG_MAX_OUT_SIDE, &s, path, e)) return -1;
        if (default_to_square) *mode = IMG_SIZE_FIXED, *h = *w = s;
        else *mode = IMG_SIZE_SHORTEST, *shortest = s, *longest = 0;
        return 0;
    }
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2) {
        *mode = IMG_SIZE_FIXED;
        return as_int(cJSON_GetArrayItem(v, 0), key, 1, IMG_MAX_OUT_SIDE, h, path, e) ||
                       as_int(cJSON_GetArrayItem(v, 1), key, 1, IMG_MAX_OUT_SIDE, w, path, e)
                   ? -1
                   : 0;
    }
    if (!cJSON_IsObject(v)) return av_err(e, "%s: \"%s\" must be a number, a [height, width] list or an object", path, key);
    const cJSON *hh = cJSON_GetObjectItemCaseSensitive(v, "height"), *ww = cJSON_GetObjectItemCaseSensitive(v, "width");
    const cJSON *se = cJSON_GetObjectItemCaseSensitive(v, "shortest_edge");
    const cJSON *le = cJSON_GetObjectItemCaseSensitive(v, "longest_edge");
    for (const cJSON *c = v->child; c; c = c->next)
        if (strcmp(c->string, "height") && strcmp(c->string, "width") && strcmp(c->string, "shortest_edge") &&
            strcmp(c->string, "longest_edge"))
            return av_err(e, "%s: \"%s\" has \"%.40s\", which attnviz does not read (height and width, or "
                          "shortest_edge and longest_edge)", path, key, c->string);
    if (hh && ww && !se && !le) {
        *mode = IMG_SIZE_FIXED;
        return as_int(hh, "height", 1, IMG_MAX_OUT_SIDE, h, path, e) || as_int(ww, "width", 1, IMG_MAX_OUT_SIDE, w, path, e)
                   ? -1
                   : 0;
    }
    if (le && !se && !hh && !ww) {
        *mode = IMG_SIZE_LONGEST;
        return as_int(le, "longest_edge", 1, IMG_MAX_OUT_SIDE, longest, path, e);
    }
    if (se && !hh && !ww) {
        *mode = IMG_SIZE_SHORTEST, *longest = 0;
        if (as_int(se, "shortest_edge", 1, IMG_MAX_OUT_SIDE, shortest, path, e)) return -1;
        return le ? as_int(le, "longest_edge", *shortest, IMG_MAX_OUT_SIDE, longest, path, e) : 0;
    }
    return av_err(e, "%s: \"%s\" must have height and width, or shortest_edge (and longest_edge)", path, key);
}

static int get_triple(const cJSON *root, const char *key, float *out, int positive, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsNumber(v)) {
        if (positive ? !(v->valuedouble > 0 && v->valuedouble < 1e6) : !(fabs(v->valuedouble) < 1e6))
            return av_err(e, "%s: \"%s\" is out of range", path, key);
        out[0] = out[1] = out[2] = (float)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
        return av_err(e, "%s: \"%s\" must be a number or a list of 3 (one per RGB channel)", path, key);
    for (int i = 0; i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(x) || (positive ? !(x->valuedouble > 0 && x->valuedouble < 1e6) : !(fabs(x->valuedouble) < 1e6)))
            return av_err(e, "%s: \"%s\"[%d] must be a %snumber", path, key, i, positive ? "positive " : "");
        out[i] = (float)x->valuedouble;
    }
    return 0;
}

int imgproc_parse(ImgProc *p, const char *json, size_t len, const char *path, AvErr *e) {
    memset(p, 0, sizeof *p);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return av_err(e, "%s: not a JSON object", path);
    }
    int rc = -1;
    /* a key given twice would be read as its first: refused instead */
    for (const cJSON *a = root->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string)) {
                av_err(e, "%s: \"%.60s\" is given twice", path, a->string);
                goto done;
            }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "image_processor_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(root, "feature_extractor_type");
    if (t && !cJSON_IsString(t)) {
        av_err(e, "%s: \"image_processor_type\" must be a string", path);
        goto done;
    }
    snprintf(p->type, sizeof p->type, "%s", t ? t->valuestring : "");
    const ProcDefaults *d = defaults_of(p->type);
    p->do_resize = p->do_rescale = p->do_normalize = 1;
    p->do_center_crop = d->crop > 0;
    p->size_mode = d->size_mode;
    p->height = p->width = p->shortest_edge = d->size;
    if (d->size_mode == IMG_SIZE_LONGEST) p->longest_edge = d->size, p->shortest_edge = 0;
    p->tiled = !strcmp(d->type, "Idefics3ImageProcessor");
    p->do_image_splitting = p->tiled;
    p->max_image_side = 364;
    p->crop_height = p->crop_width = d->crop;
    p->resample = d->resample;
    p->rescale_factor = 1.0 / 255;
    p->do_convert_rgb = -1;
    memcpy(p->mean, d->mean, sizeof p->mean);
    memcpy(p->std, d->std, sizeof p->std);
    int dts = d->default_to_square, resample = (int)p->resample;
    ImgSizeMode crop_mode = IMG_SIZE_FIXED;
    int unused_s = 0, unused_l = 0;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "rescale_factor");
    if (get_bool(root, "default_to_square", &dts, path, e) || get_bool(root, "do_resize", &p->do_resize, path, e) ||
        get_bool(root, "do_center_crop", &p->do_center_crop, path, e) ||
        get_bool(root, "do_rescale", &p->do_rescale, path, e) ||
        get_bool(root, "do_normalize", &p->do_normalize, path, e) ||
        get_bool(root, "do_convert_rgb", &p->do_convert_rgb, path, e) ||
        get_triple(root, "image_mean", p->mean, 0, path, e) || get_triple(root, "image_std", p->std, 1, path, e))
        goto done;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "resample");
    if (rs && !cJSON_IsNull(rs) && as_int(rs, "resample", 0, 5, &resample, path, e)) goto done;
    p->resample = (ImgFilter)resample;
    if (get_size(root, "size", dts, &p->size_mode, &p->height, &p->width, &p->shortest_edge, &p->longest_edge, path,
                 e) < 0 ||
        get_size(root, "crop_size", 1, &crop_mode, &p->crop_height, &p->crop_width, &unused_s, &unused_l, path, e) < 0)
        goto done;
    if (p->size_mode == IMG_SIZE_LONGEST && !p->tiled) {
        av_err(e, "%s: \"size\" with longest_edge alone is Idefics3's form (%s reads height and width, or "
               "shortest_edge)", path, p->type[0] ? p->type : "this processor");
        goto done;
    }
    if (p->tiled) {
        int mh = 0, mw = 0, ms = 0;
        ImgSizeMode mm = IMG_SIZE_LONGEST;
        if (get_bool(root, "do_image_splitting", &p->do_image_splitting, path, e) ||
            get_size(root, "max_image_size", 0, &mm, &mh, &mw, &ms, &p->max_image_side, path, e) < 0)
            goto done;
        if (mm != IMG_SIZE_LONGEST) {
            av_err(e, "%s: \"max_image_size\" must be {\"longest_edge\": N}", path);
            goto done;
        }
        if (p->size_mode != IMG_SIZE_LONGEST && p->size_mode != IMG_SIZE_FIXED) {
            av_err(e, "%s: \"size\" must be {\"longest_edge\": N} or height and width", path);
            goto done;
        }
        if (p->do_center_crop) {
            av_err(e, "%s: do_center_crop with %s, which does not crop", path, p->type);
            goto done;
        }
        const cJSON *pad = cJSON_GetObjectItemCaseSensitive(root, "do_pad");
        if (pad && !cJSON_IsBool(pad) && !cJSON_IsNull(pad)) {
            av_err(e, "%s: \"do_pad\" must be true or false", path);
            goto done;
        }
    }
    if (crop_mode != IMG_SIZE_FIXED && p->do_center_crop) {
        av_err(e, "%s: \"crop_size\" must have height and width", path);
        goto done;
    }
    if (p->do_center_crop && (p->crop_height < 1 || p->crop_width < 1)) {
        av_err(e, "%s: do_center_crop without a crop_size", path);
        goto done;
    }
    if (rf && !cJSON_IsNull(rf)) {
        if (!cJSON_IsNumber(rf) || !(rf->valuedouble > 0 && rf->valuedouble <= 1)) {
            av_err(e, "%s: \"rescale_factor\" must be a number in (0, 1]", path);
            goto done;
        }
        p->rescale_factor = rf->valuedouble;
    }
    if (!p->do_resize && !p->do_center_crop) {
        av_err(e, "%s: neither do_resize nor do_center_crop: the image's own size would decide the model's input",
               path);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int imgproc_load(ImgProc *p, const char *dir, AvErr *e) {
    char *path = av_path_join(dir, "preprocessor_config.json"), *buf = NULL;
    size_t len = 0;
    if (!path) return av_err(e, "out of memory");
    int rc;
    if (!av_file_exists(path)) rc = av_err(e, "%s: no preprocessor_config.json: the model folder does not say how to "
                                              "prepare an image", dir);
    else rc = av_read_file(path, (size_t)1 << 20, &buf, &len, e) || imgproc_parse(p, buf, len, path, e) ? -1 : 0;
    free(buf);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------- the steps */

void imgproc_resize_size(const ImgProc *p, int h, int w, int *oh, int *ow) {
    if (p->size_mode == IMG_SIZE_FIXED) {
        *oh = p->height, *ow = p->width;
        return;
    }
    int size = p->shortest_edge;
    if (p->longest_edge) { /* get_size_with_aspect_ratio */
        const double mn = h < w ? h : w, mx = h < w ? w : h;
        double raw = -1;
        if (mx / mn * size > p->longest_edge) {
            raw = p->longest_edge * mn / mx;
            size = (int)nearbyint(raw); /* Python's round: half to even */
        }
        if ((h <= w && h == size) || (w <= h && w == size)) *oh = h, *ow = w;
        else if (w < h) *ow = size, *oh = (int)(raw >= 0 ? raw * h / w : (double)size * h / w);
        else *oh = size, *ow = (int)(raw >= 0 ? raw * w / h : (double)size * w / h);
        return;
    }
    /* get_resize_output_image_size: the short side to size, the long one int(size * long / short) */
    const int shorter = w <= h ? w : h, longer = w <= h ? h : w;
    const int new_long = (int)((double)((long long)size * longer) / shorter);
    if (w <= h) *ow = size, *oh = new_long;
    else *oh = size, *ow = new_long;
}

/* np_center_crop: the crop's top-left at floor((orig - crop) / 2); where the
 * crop is larger, the image is first centered on a zero canvas (padding
 * rounded up before it). */
static void center_crop(const uint8_t *src, int w, int h, uint8_t *dst, int cw, int ch) {
    const int top_pad = ch > h ? (ch - h + 1) / 2 : 0, left_pad = cw > w ? (cw - w + 1) / 2 : 0;
    /* floor division of a possibly negative difference */
    const int dy = h - ch, dx = w - cw;
    const int top = (dy >= 0 ? dy / 2 : -((-dy + 1) / 2)) + top_pad;
    const int left = (dx >= 0 ? dx / 2 : -((-dx + 1) / 2)) + left_pad;
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            const int cy = top + y - top_pad, cx = left + x - left_pad; /* canvas -> image */
            uint8_t *o = dst + ((size_t)y * cw + x) * 3;
            if (cy >= 0 && cy < h && cx >= 0 && cx < w) memcpy(o, src + ((size_t)cy * w + cx) * 3, 3);
            else o[0] = o[1] = o[2] = 0;
        }
}

/* rgb (h, w, 3) rescaled and normalized into px (3, h, w). */
static void to_pixels(const ImgProc *p, const uint8_t *rgb, int w, int h, float *px) {
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < (size_t)h * w; i++) {
            float v = p->do_rescale ? (float)((double)rgb[3 * i + c] * p->rescale_factor) : (float)rgb[3 * i + c];
            if (p->do_normalize) v = (v - p->mean[c]) / p->std[c];
            px[(size_t)c * h * w + i] = v;
        }
}

/* A resize into a new buffer (*dst), or a copy where the size is the same (PIL's resize returns a copy). */
static int resized(const uint8_t *src, int w, int h, int ow, int oh, ImgFilter f, uint8_t **dst, AvErr *e) {
    if (!(*dst = malloc((size_t)oh * ow * 3))) return av_err(e, "out of memory resizing to %d x %d", ow, oh);
    if (ow == w && oh == h) {
        memcpy(*dst, src, (size_t)oh * ow * 3);
        return 0;
    }
    if (img_resize(src, w, h, *dst, ow, oh, f, e)) {
        free(*dst), *dst = NULL;
        return -1;
    }
    return 0;
}

/* Idefics3ImageProcessor (its PIL backend's _preprocess, one picture): the longest side to size's longest_edge
 * (the other by the aspect ratio, made even; then within 4,096), then to multiples of the tile side M
 * (resize_for_vision_encoder), cut into M x M tiles row by row and the whole resized to M x M as the global view
 * (split_images; a picture of one tile is that tile alone); without do_image_splitting the picture resized to
 * M x M. Each resize by the config's filter from the 8-bit picture before it. */
static int run_tiled(const ImgProc *p, const AvImage *img, ImgPixels *out, AvErr *e) {
    int h = img->h, w = img->w;
    const int M = p->max_image_side;
    uint8_t *cur = NULL, *fit = NULL, *glob = NULL;
    int rc = -1;
    if (p->do_resize) {
        int oh = h, ow = w;
        if (p->size_mode == IMG_SIZE_FIXED) oh = p->height, ow = p->width;
        else { /* _resize_output_size_rescale_to_max_len, then _scale_below_upper_bound(4096) */
            const double ar = (double)w / h;
            const int L = p->longest_edge;
            if (w >= h) {
                ow = L, oh = (int)(ow / ar);
                if (oh % 2) oh++;
            } else {
                oh = L, ow = (int)(oh * ar);
                if (ow % 2) ow++;
            }
            oh = oh < 1 ? 1 : oh, ow = ow < 1 ? 1 : ow;
            const double ar2 = (double)ow / oh;
            if (ow >= oh && ow > 4096) ow = 4096, oh = (int)(ow / ar2);
            else if (oh > ow && oh > 4096) oh = 4096, ow = (int)(oh * ar2);
            oh = oh < 1 ? 1 : oh, ow = ow < 1 ? 1 : ow;
        }
        if (oh > IMG_MAX_OUT_SIDE || ow > IMG_MAX_OUT_SIDE)
            return av_err(e, "%s resizes a %d x %d image to %d x %d, which is too large", p->type, w, h, ow, oh);
        if (resized(img->rgb, w, h, ow, oh, p->resample, &cur, e)) return -1;
        h = oh, w = ow;
    } else if (!(cur = malloc((size_t)h * w * 3))) {
        return av_err(e, "out of memory");
    } else {
        memcpy(cur, img->rgb, (size_t)h * w * 3);
    }
    out->resized_w = w, out->resized_h = h;
    int tr = 0, tc = 0;
    if (p->do_image_splitting) { /* resize_for_vision_encoder */
        const double ar = (double)w / h;
        int nw, nh;
        if (w >= h) {
            nw = (w + M - 1) / M * M;
            nh = (int)(nw / ar);
            nh = (nh + M - 1) / M * M;
        } else {
            nh = (h + M - 1) / M * M;
            nw = (int)(nh * ar);
            nw = (nw + M - 1) / M * M;
        }
        if (nw < M || nh < M || nw > IMG_MAX_OUT_SIDE || nh > IMG_MAX_OUT_SIDE) {
            av_err(e, "%s makes a %d x %d image %d x %d for its %d-pixel tiles: too thin or too large", p->type, w, h,
                   nw, nh, M);
            goto done;
        }
        if (resized(cur, w, h, nw, nh, p->resample, &fit, e)) goto done;
        free(cur), cur = fit, fit = NULL, h = nh, w = nw;
        if (h > M || w > M) tr = (h - M) / M + 1, tc = (w - M) / M + 1;
    }
    const int tiles = tr * tc + 1;
    if (tiles > IMG_MAX_TILES) {
        av_err(e, "%s cuts the %d x %d picture into %d x %d tiles of %d pixels, above the %d tiles attnviz runs", p->type,
               w, h, tc, tr, M, IMG_MAX_TILES);
        goto done;
    }
    /* the global view (or the picture whole: M x M with the split off, or its one tile already) */
    if (resized(cur, w, h, M, M, p->resample, &glob, e)) goto done;
    const size_t one = (size_t)3 * M * M;
    float *px = malloc((size_t)tiles * one * sizeof *px);
    uint8_t *tile = malloc((size_t)M * M * 3);
    if (!px || !tile) {
        free(px), free(tile);
        av_err(e, "out of memory for %d tiles of %d x %d", tiles, M, M);
        goto done;
    }
    for (int r = 0; r < tr; r++)
        for (int c = 0; c < tc; c++) {
            for (int y = 0; y < M; y++) memcpy(tile + (size_t)y * M * 3, cur + ((size_t)(r * M + y) * w + (size_t)c * M) * 3, (size_t)M * 3);
            to_pixels(p, tile, M, M, px + (size_t)(r * tc + c) * one);
        }
    free(tile);
    to_pixels(p, glob, M, M, px + (size_t)(tiles - 1) * one);
    out->w = out->h = M, out->pixels = px, out->rgb = glob, glob = NULL;
    out->tiles = tiles, out->tile_rows = tr, out->tile_cols = tc;
    rc = 0;
done:
    free(cur), free(fit), free(glob);
    return rc;
}

int imgproc_run(const ImgProc *p, const AvImage *img, ImgPixels *out, AvErr *e) {
    memset(out, 0, sizeof *out);
    out->src_w = img->w, out->src_h = img->h;
    if (p->tiled) return run_tiled(p, img, out, e);
    out->tiles = 1;
    int h = img->h, w = img->w;
    out->src_w = w, out->src_h = h;
    uint8_t *cur = NULL;
    if (p->do_resize) {
        int oh, ow;
        imgproc_resize_size(p, h, w, &oh, &ow);
        /* a shortest edge stretches a thin image's long side (a crop may follow): bounded as a decode is */
        if (oh < 1 || ow < 1 || oh > IMG_MAX_SIDE || ow > IMG_MAX_SIDE || (uint64_t)oh * ow > IMG_MAX_PIXELS ||
            (!p->do_center_crop && (oh > IMG_MAX_OUT_SIDE || ow > IMG_MAX_OUT_SIDE)))
            return av_err(e, "%s resizes a %d x %d image to %d x %d, which is too large (or empty)",
                          p->type[0] ? p->type : "the preprocessor", w, h, ow, oh);
        if (!(cur = malloc((size_t)oh * ow * 3))) return av_err(e, "out of memory resizing to %d x %d", ow, oh);
        if (img_resize(img->rgb, w, h, cur, ow, oh, p->resample, e)) {
            free(cur);
            return -1;
        }
        h = oh, w = ow;
    } else if (h > IMG_MAX_OUT_SIDE || w > IMG_MAX_OUT_SIDE) {
        return av_err(e, "the image is %d x %d, above the %d pixels a side the model's input may have", w, h,
                      IMG_MAX_OUT_SIDE);
    }
    out->resized_w = w, out->resized_h = h;
    if (p->do_center_crop) {
        const int ch = p->crop_height, cw = p->crop_width;
        uint8_t *c = malloc((size_t)ch * cw * 3);
        if (!c) {
            free(cur);
            return av_err(e, "out of memory cropping to %d x %d", cw, ch);
        }
        center_crop(cur ? cur : img->rgb, w, h, c, cw, ch);
        free(cur);
        cur = c, h = ch, w = cw;
    }
    if (!cur) { /* neither step made a copy */
        if (!(cur = malloc((size_t)h * w * 3))) return av_err(e, "out of memory");
        memcpy(cur, img->rgb, (size_t)h * w * 3);
    }
    float *px = malloc((size_t)3 * h * w * sizeof *px);
    if (!px) {
        free(cur);
        return av_err(e, "out of memory for %d x %d pixel values", w, h);
    }
    to_pixels(p, cur, w, h, px);
    out->w = w, out->h = h, out->pixels = px, out->rgb = cur;
    return 0;
}

void imgproc_free(ImgPixels *px) {
    free(px->pixels);
    free(px->rgb);
    memset(px, 0, sizeof *px);
}
