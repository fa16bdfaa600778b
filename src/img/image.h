/* image.h — a picture from a PNG or JPEG file (libpng, libjpeg-turbo) as 8-bit
 * RGB, as transformers' image processors see it: what PIL's Image.open gives,
 * converted to RGB the way transformers' convert_to_rgb does (transparency
 * composited onto white), and the processor's steps over it (imgproc.h). */
#ifndef ATTNVIZ_IMAGE_H
#define ATTNVIZ_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Bounds checked from the header, before anything is allocated from it: a
 * decompression bomb (a 100,000 x 100,000 header over a few bytes of data) is
 * refused in one line. 64 megapixels (8192 x 8192) is below PIL's own
 * decompression-bomb error (2 x 89,478,485 pixels). A decode holds 3 bytes a
 * pixel, and 4 more only for an interlaced PNG with transparency. */
#define IMG_MAX_PIXELS ((uint64_t)64 << 20)
#define IMG_MAX_SIDE 65535
#define IMG_MAX_FILE_BYTES ((size_t)256 << 20) /* the encoded file */
#define IMG_MAX_JPEG_SCANS 1000 /* a progressive JPEG's scans: each is a sweep over the whole image */

typedef enum { IMG_PNG = 1, IMG_JPEG = 2 } ImgFormat;

typedef struct {
    int w, h;
    uint8_t *rgb;       /* (h, w, 3) */
    ImgFormat format;
    char mode[16];      /* what the file held, as PIL names it: "RGB", "RGBA", "L", "LA", "P", "I;16", "CMYK", ... */
    int bits;           /* bits per sample in the file (PNG: 1, 2, 4, 8, 16; JPEG: 8) */
    int had_alpha;      /* transparency composited onto white */
    int progressive;    /* JPEG: progressive; PNG: interlaced (Adam7) */
} AvImage;

/* Decodes a PNG or JPEG (told apart by their signatures) of len bytes; name
 * is what messages call it (a path, "upload"). Refused in one line: another
 * format, a size above the bounds, truncated or corrupt data (libjpeg's
 * warnings about corrupt data are errors here, as PIL's "image file is
 * truncated" is). */
int img_decode(const uint8_t *data, size_t len, const char *name, AvImage *img, AvErr *e);
/* The same within max_pixels (at most IMG_MAX_PIXELS; 0: that), a bound of
 * the caller's (a server's): IMG_TOO_LARGE (-2) when the header is above it
 * or IMG_MAX_SIDE, -1 for any other failure, e set either way. */
#define IMG_TOO_LARGE (-2)
int img_decode_limit(const uint8_t *data, size_t len, const char *name, uint64_t max_pixels, AvImage *img, AvErr *e);
/* The same for a file (at most IMG_MAX_FILE_BYTES). */
int img_load(const char *path, AvImage *img, AvErr *e);
void img_free(AvImage *img);

/* An RGB image (h, w, 3) as PNG bytes (libpng; level 6), into a malloc'd buffer *out: for the page. */
int img_encode_png(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *len, AvErr *e);

#endif
