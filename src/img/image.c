/* image.c — PNG (libpng) and JPEG (libjpeg-turbo) into 8-bit RGB the way PIL
 * opens them and transformers' convert_to_rgb turns them into RGB:
 *   - 16-bit samples keep their high byte (PIL's "RGB;16B" raw modes; for
 *     16-bit grayscale, which PIL opens as "I;16" and then clips to 255, see
 *     docs/images.md), 1/2/4-bit gray is scaled to 0..255 as PIL unpacks it;
 *   - palettes are looked up; gray is repeated into the three channels;
 *   - transparency (an alpha channel or a tRNS chunk) is composited onto white
 *     with PIL's alpha_composite arithmetic;
 *   - CMYK and YCCK JPEGs are read with Adobe's inverted polarity, as PIL
 *     always assumes, and turned into RGB with PIL's cmyk2rgb.
 * Both libraries report errors through longjmp; every decoder keeps what it
 * allocates in a struct so that the one cleanup frees it either way. */
#include "image.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "util.h"

#define PNG_SIG "\x89PNG\r\n\x1a\n"

/* PIL's alpha_composite of (r, g, b, a) over opaque white, its integer arithmetic
 * (AlphaComposite.c: 7 bits of precision, a division by 255 as shifts). */
static uint8_t over_white(uint8_t c, uint8_t a) {
    if (a == 0) return 255;
    const uint32_t precision = 7;
    const uint32_t blend = 255u * (255u - a);
    const uint32_t outa255 = a * 255u + blend;
    const uint32_t coef1 = a * 255u * 255u * (1u << precision) / outa255;
    const uint32_t coef2 = 255u * (1u << precision) - coef1;
    const uint32_t tmp = c * coef1 + 255u * coef2 + (0x80u << precision);
    return (uint8_t)((((tmp >> 8) + tmp) >> 8) >> precision);
}

/* (n) RGBA pixels -> RGB over white. */
static void composite_row(uint8_t *rgb, const uint8_t *rgba, int n) {
    for (int x = 0; x < n; x++)
        for (int c = 0; c < 3; c++) rgb[3 * x + c] = over_white(rgba[4 * x + c], rgba[4 * x + 3]);
}

/* -1: no pixels; IMG_TOO_LARGE: above max pixels (a caller's own bound, else IMG_MAX_PIXELS) or a side. */
static int check_size(const char *name, const char *what, uint64_t w, uint64_t h, uint64_t max, AvErr *e) {
    if (w < 1 || h < 1) return av_err(e, "%s: the %s has no pixels (%llu x %llu)", name, what, (unsigned long long)w,
                                      (unsigned long long)h);
    if (w > IMG_MAX_SIDE || h > IMG_MAX_SIDE || w * h > max) {
        av_err(e, "%s: the %s is %llu x %llu pixels, above the %.3g megapixels attnviz decodes%s (a "
               "decompression bomb?): scale it down first", name, what, (unsigned long long)w, (unsigned long long)h,
               (double)max / (1 << 20), max < IMG_MAX_PIXELS ? " here" : "");
        return IMG_TOO_LARGE;
    }
    return 0;
}

/* ---------------------------------------------------------------- PNG */

typedef struct {
    const uint8_t *data;
    size_t len, at;
    char msg[200];        /* libpng's error */
    png_structp png;
    png_infop info;
    uint8_t *row;         /* (w, 4) one row with alpha, or NULL */
    uint64_t max_pixels;  /* the header's bound */
    uint8_t *rgba;        /* (h, w, 4) an interlaced image with alpha, or NULL */
    png_bytep *rows;      /* (h) row pointers, or NULL */
} PngRead;

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
    PngRead *r = png_get_io_ptr(png);
    if (n > r->len - r->at) png_error(png, "the data ends early (truncated file)");
    memcpy(out, r->data + r->at, n);
    r->at += n;
}

static void png_fail(png_structp png, png_const_charp msg) {
    PngRead *r = png_get_error_ptr(png);
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings are about chunks libpng skipped (a CRC error in an ancillary chunk,
 * metadata over the chunk limit): the picture is still whole, as PIL reads it. */
static void png_warn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void png_cleanup(PngRead *r) {
    png_destroy_read_struct(&r->png, &r->info, NULL);
    free(r->row), free(r->rgba), free(r->rows);
    r->row = r->rgba = NULL, r->rows = NULL;
}

static const char *png_mode(int color_type, int bits, int trns) {
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return bits == 16 ? "I;16" : bits == 1 ? "1" : trns ? "L+tRNS" : "L";
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "LA";
    case PNG_COLOR_TYPE_PALETTE: return trns ? "P+tRNS" : "P";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA";
    default: return trns ? "RGB+tRNS" : "RGB";
    }
}

/* The steps after setjmp: everything they allocate is in r (png_cleanup frees it). */
static int png_body(PngRead *r, const char *name, AvImage *img, AvErr *e) {
    png_structp png = r->png;
    png_infop info = r->info;
    png_set_read_fn(png, r, png_read_mem);
    /* libpng refuses headers past a million pixels a side (its default) before allocating;
     * check_size refuses ours below that in words of its own, still before allocating; metadata
     * chunks are bounded (skipped with a warning past 8 MB, at most 1000 of them) */
    png_set_user_limits(png, 1000000, 1000000);
    png_set_chunk_malloc_max(png, (png_alloc_size_t)8 << 20);
    png_set_chunk_cache_max(png, 1000);
    png_read_info(png, info);
    png_uint_32 w, h;
    int bits, color_type, interlace;
    png_get_IHDR(png, info, &w, &h, &bits, &color_type, &interlace, NULL, NULL);
    const int sz = check_size(name, "PNG", w, h, r->max_pixels, e);
    if (sz) return sz;
    const int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    snprintf(img->mode, sizeof img->mode, "%s", png_mode(color_type, bits, trns));
    img->bits = bits;
    img->progressive = interlace != PNG_INTERLACE_NONE;
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bits < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (trns) png_set_tRNS_to_alpha(png);
    if (bits == 16) png_set_strip_16(png); /* the high byte, as PIL's 16-bit raw modes */
    if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int channels = png_get_channels(png, info);
    if ((channels != 3 && channels != 4) || png_get_rowbytes(png, info) != (size_t)w * channels)
        return av_err(e, "%s: unexpected PNG layout after conversion (%d channels)", name, channels);
    img->had_alpha = channels == 4;
    img->w = (int)w, img->h = (int)h;
    if (!(img->rgb = malloc((size_t)w * h * 3))) return av_err(e, "%s: out of memory for %u x %u pixels", name, w, h);
    if (channels == 3 || passes == 1) {
        /* row by row: an interlaced RGB image's passes fill the rows in place */
        if (channels == 4 && !(r->row = malloc((size_t)w * 4))) return av_err(e, "%s: out of memory", name);
        for (int p = 0; p < passes; p++)
            for (png_uint_32 y = 0; y < h; y++) {
                uint8_t *dst = img->rgb + (size_t)y * w * 3;
                png_read_row(png, channels == 3 ? dst : r->row, NULL);
                if (channels == 4) composite_row(dst, r->row, (int)w);
            }
    } else {
        /* interlaced with alpha: the passes need the whole RGBA image */
        if (!(r->rgba = malloc((size_t)w * h * 4)) || !(r->rows = malloc((size_t)h * sizeof *r->rows)))
            return av_err(e, "%s: out of memory for %u x %u pixels", name, w, h);
        for (png_uint_32 y = 0; y < h; y++) r->rows[y] = r->rgba + (size_t)y * w * 4;
        png_read_image(png, r->rows);
        for (png_uint_32 y = 0; y < h; y++) composite_row(img->rgb + (size_t)y * w * 3, r->rows[y], (int)w);
    }
    png_read_end(png, NULL);
    return 0;
}

static int decode_png(const uint8_t *data, size_t len, const char *name, uint64_t max, AvImage *img, AvErr *e) {
    /* on the heap, never changed after setjmp: what longjmp returns to reads it through the pointer */
    PngRead *r = calloc(1, sizeof *r);
    if (!r) return av_err(e, "%s: out of memory", name);
    r->data = data, r->len = len, r->max_pixels = max;
    r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_fail, png_warn);
    int rc;
    img->format = IMG_PNG;
    if (!r->png || !(r->info = png_create_info_struct(r->png))) rc = av_err(e, "%s: out of memory", name);
    else if (setjmp(png_jmpbuf(r->png))) rc = av_err(e, "%s: not a readable PNG: %s", name, r->msg);
    else rc = png_body(r, name, img, e);
    png_cleanup(r);
    free(r);
    return rc;
}

/* ---------------------------------------------------------------- JPEG */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
    int corrupt; /* a warning that the data is cut short or broken */
} JpegErr;

static void jpeg_fail(j_common_ptr cinfo) {
    JpegErr *je = (JpegErr *)cinfo->err;
    char buf[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, buf);
    snprintf(je->msg, sizeof je->msg, "%s", buf);
    longjmp(je->jb, 1);
}

/* libjpeg goes on past missing or broken data with a warning (filling gray):
 * those two are errors here, as PIL's "image file is truncated" is. Other
 * warnings (extra bytes before a marker, an unknown JFIF revision) leave the
 * picture whole. Nothing is printed. */
static void jpeg_message(j_common_ptr cinfo, int level) {
    JpegErr *je = (JpegErr *)cinfo->err;
    if (level >= 0) return;
    cinfo->err->num_warnings++;
    const int code = cinfo->err->msg_code;
    if ((code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER) && !je->corrupt) {
        char buf[JMSG_LENGTH_MAX];
        cinfo->err->format_message(cinfo, buf);
        snprintf(je->msg, sizeof je->msg, "%s", buf);
        je->corrupt = 1;
    }
}

/* Each scan of a progressive JPEG is a sweep over the whole image: a file of
 * many tiny scans would be super-linear work, so their count is bounded. */
static void jpeg_progress(j_common_ptr cinfo) {
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (cinfo->is_decompressor && d->input_scan_number > IMG_MAX_JPEG_SCANS) {
        JpegErr *je = (JpegErr *)cinfo->err;
        snprintf(je->msg, sizeof je->msg, "more than %d progressive scans", IMG_MAX_JPEG_SCANS);
        longjmp(je->jb, 1);
    }
}

/* PIL's cmyk2rgb (Convert.c) of its inverted-polarity CMYK: MULDIV255 rounding. */
static uint8_t cmyk_channel(int c, int k) {
    const int nk = 255 - k;
    const int tmp = c * nk + 128;
    const int v = nk - (((tmp >> 8) + tmp) >> 8);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

typedef struct {
    struct jpeg_decompress_struct cinfo;
    JpegErr err;
    struct jpeg_progress_mgr progress;
    uint8_t *row; /* (w, components) */
    uint64_t max_pixels; /* the header's bound */
} JpegRead;

static int jpeg_body(JpegRead *j, const uint8_t *data, size_t len, const char *name, AvImage *img, AvErr *e) {
    struct jpeg_decompress_struct *ci = &j->cinfo;
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    const int sz = check_size(name, "JPEG", ci->image_width, ci->image_height, j->max_pixels, e);
    if (sz) return sz;
    img->bits = 8;
    img->progressive = jpeg_has_multiple_scans(ci) != 0;
    const int four = ci->num_components == 4;
    if (four) {
        ci->out_color_space = JCS_CMYK; /* YCCK too: libjpeg turns it into CMYK */
        snprintf(img->mode, sizeof img->mode, "CMYK");
    } else if (ci->jpeg_color_space == JCS_GRAYSCALE) {
        ci->out_color_space = JCS_GRAYSCALE;
        snprintf(img->mode, sizeof img->mode, "L");
    } else {
        ci->out_color_space = JCS_RGB;
        snprintf(img->mode, sizeof img->mode, "RGB");
    }
    ci->progress = &j->progress;
    jpeg_start_decompress(ci);
    const int w = (int)ci->output_width, h = (int)ci->output_height, nc = ci->output_components;
    if (nc != (four ? 4 : ci->out_color_space == JCS_GRAYSCALE ? 1 : 3))
        return av_err(e, "%s: unexpected JPEG layout (%d components)", name, nc);
    img->w = w, img->h = h;
    if (!(img->rgb = malloc((size_t)w * h * 3)) || !(j->row = malloc((size_t)w * nc)))
        return av_err(e, "%s: out of memory for %d x %d pixels", name, w, h);
    while (ci->output_scanline < ci->output_height) {
        uint8_t *dst = img->rgb + (size_t)ci->output_scanline * w * 3;
        JSAMPROW rowp = nc == 3 ? dst : j->row;
        if (jpeg_read_scanlines(ci, &rowp, 1) != 1) break;
        if (j->err.corrupt) break;
        for (int x = 0; nc == 1 && x < w; x++) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = j->row[x];
        for (int x = 0; four && x < w; x++) {
            const uint8_t *p = j->row + 4 * x; /* stored inverted (Adobe): C = 255 - stored */
            const int k = 255 - p[3];
            for (int c = 0; c < 3; c++) dst[3 * x + c] = cmyk_channel(255 - p[c], k);
        }
    }
    if (!j->err.corrupt) jpeg_finish_decompress(ci);
    if (j->err.corrupt) return av_err(e, "%s: truncated or corrupt JPEG data (%s)", name, j->err.msg);
    return 0;
}

static int decode_jpeg(const uint8_t *data, size_t len, const char *name, uint64_t max, AvImage *img, AvErr *e) {
    JpegRead *j = calloc(1, sizeof *j); /* on the heap: jmp_buf and libjpeg's structs are large */
    if (!j) return av_err(e, "%s: out of memory", name);
    j->max_pixels = max;
    j->cinfo.err = jpeg_std_error(&j->err.pub);
    j->err.pub.error_exit = jpeg_fail;
    j->err.pub.emit_message = jpeg_message;
    j->progress.progress_monitor = jpeg_progress;
    img->format = IMG_JPEG;
    int rc;
    if (setjmp(j->err.jb)) {
        rc = av_err(e, "%s: not a readable JPEG: %s", name, j->err.msg);
    } else {
        jpeg_create_decompress(&j->cinfo);
        rc = jpeg_body(j, data, len, name, img, e);
    }
    jpeg_destroy_decompress(&j->cinfo);
    free(j->row);
    free(j);
    return rc;
}

/* ---------------------------------------------------------------- entry points */

void img_free(AvImage *img) {
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

int img_decode_limit(const uint8_t *data, size_t len, const char *name, uint64_t max_pixels, AvImage *img, AvErr *e) {
    memset(img, 0, sizeof *img);
    int rc;
    if (max_pixels == 0 || max_pixels > IMG_MAX_PIXELS) max_pixels = IMG_MAX_PIXELS;
    if (len >= 8 && !memcmp(data, PNG_SIG, 8)) rc = decode_png(data, len, name, max_pixels, img, e);
    else if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        rc = decode_jpeg(data, len, name, max_pixels, img, e);
    else if (len == 0) rc = av_err(e, "%s: the image file is empty", name);
    else rc = av_err(e, "%s: not a PNG or JPEG image (attnviz reads those two)", name);
    if (rc != 0) img_free(img);
    return rc;
}

int img_decode(const uint8_t *data, size_t len, const char *name, AvImage *img, AvErr *e) {
    return img_decode_limit(data, len, name, IMG_MAX_PIXELS, img, e) < 0 ? -1 : 0;
}

int img_load(const char *path, AvImage *img, AvErr *e) {
    char *data = NULL;
    size_t len = 0;
    memset(img, 0, sizeof *img);
    if (av_read_file(path, IMG_MAX_FILE_BYTES, &data, &len, e) != 0) return -1;
    int rc = img_decode((const uint8_t *)data, len, path, img, e);
    free(data);
    return rc;
}

/* ---------------------------------------------------------------- PNG out */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
    char msg[200];
} PngOut;

static void png_write_mem(png_structp png, png_bytep in, size_t n) {
    PngOut *o = png_get_io_ptr(png);
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 65536;
        while (cap < o->len + n) cap *= 2;
        uint8_t *q = realloc(o->p, cap);
        if (!q) {
            o->oom = 1;
            png_error(png, "out of memory");
        }
        o->p = q, o->cap = cap;
    }
    memcpy(o->p + o->len, in, n);
    o->len += n;
}

static void png_flush_mem(png_structp png) { (void)png; }

static void png_out_fail(png_structp png, png_const_charp msg) {
    PngOut *o = png_get_error_ptr(png);
    snprintf(o->msg, sizeof o->msg, "%s", msg);
    png_longjmp(png, 1);
}

typedef struct {
    PngOut o;
    png_structp png;
    png_infop info;
} PngWrite;

static void png_write_body(PngWrite *p, const uint8_t *rgb, int w, int h) {
    png_set_write_fn(p->png, &p->o, png_write_mem, png_flush_mem);
    png_set_IHDR(p->png, p->info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(p->png, 6);
    png_write_info(p->png, p->info);
    for (int y = 0; y < h; y++) png_write_row(p->png, (png_const_bytep)(rgb + (size_t)y * w * 3));
    png_write_end(p->png, NULL);
}

int img_encode_png(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *len, AvErr *e) {
    PngWrite *p = calloc(1, sizeof *p); /* as decode_png's: not changed after setjmp */
    *out = NULL, *len = 0;
    if (!p) return av_err(e, "out of memory encoding a PNG");
    p->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &p->o, png_out_fail, png_warn);
    int rc = 0;
    if (!p->png || !(p->info = png_create_info_struct(p->png))) rc = av_err(e, "out of memory encoding a PNG");
    else if (setjmp(png_jmpbuf(p->png))) rc = av_err(e, "encoding a PNG: %s", p->o.msg);
    else png_write_body(p, rgb, w, h);
    png_destroy_write_struct(&p->png, &p->info);
    if (rc == 0) *out = p->o.p, *len = p->o.len;
    else free(p->o.p);
    free(p);
    return rc;
}
