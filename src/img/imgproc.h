/* imgproc.h — a model folder's preprocessor_config.json and the steps it names,
 * as transformers' PIL image processors take them (PilBackend._preprocess):
 * resize (PIL's resampling filters, their 8-bit fixed-point arithmetic and
 * two passes), center crop (zero padding where the crop is larger), rescale
 * (in float64, then float32) and normalize (in float32). What an image
 * becomes is the model's pixel_values, bit for bit where PIL is. */
#ifndef ATTNVIZ_IMGPROC_H
#define ATTNVIZ_IMGPROC_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "image.h"

/* PIL's numbering of its resampling filters (PILImageResampling). */
typedef enum {
    IMG_NEAREST = 0,
    IMG_LANCZOS = 1,
    IMG_BILINEAR = 2,
    IMG_BICUBIC = 3,
    IMG_BOX = 4,
    IMG_HAMMING = 5
} ImgFilter;

/* How the resize step picks the output size (transformers' SizeDict forms). */
typedef enum {
    IMG_SIZE_FIXED = 0,   /* {"height", "width"} */
    IMG_SIZE_SHORTEST,    /* {"shortest_edge"} (and "longest_edge": get_size_with_aspect_ratio) */
    IMG_SIZE_LONGEST      /* {"longest_edge"} alone (Idefics3: the longest side to it, up or down) */
} ImgSizeMode;

#define IMG_MAX_OUT_SIDE 4096 /* a processor's output side: bounds the pixel_values allocated */
#define IMG_MAX_TILES 256     /* a tiled processor's tiles and global view (Idefics3's published: at most 17) */

typedef struct {
    char type[64];        /* image_processor_type (or the older feature_extractor_type), for messages */
    int do_resize;
    ImgSizeMode size_mode;
    int height, width;    /* IMG_SIZE_FIXED */
    int shortest_edge, longest_edge; /* IMG_SIZE_SHORTEST; longest_edge 0: none */
    ImgFilter resample;
    int do_center_crop;
    int crop_height, crop_width;
    int do_rescale;
    double rescale_factor;
    int do_normalize;
    float mean[3], std[3];
    int do_convert_rgb;   /* what the config says (1, 0, or -1 absent); attnviz converts every image to RGB */
    int tiled;            /* Idefics3ImageProcessor: the picture split into tiles plus a global view */
    int do_image_splitting;
    int max_image_side;   /* its max_image_size's longest_edge: a tile's side */
} ImgProc;

/* The preprocessor_config.json of a model folder (dir), with the defaults of
 * its image_processor_type where a key is absent (ViT, DeiT, CLIP, Bit -- DINOv2's --,
 * SigLIP; other types take the base class's). A missing file is an error naming it. */
int imgproc_load(ImgProc *p, const char *dir, AvErr *e);
int imgproc_parse(ImgProc *p, const char *json, size_t len, const char *path, AvErr *e);

/* What a preprocessed image is: the model's pixel_values (3, h, w), float32,
 * and the same picture as 8-bit RGB (h, w, 3) before rescale and normalize
 * (what the page draws under the patch grid). */
typedef struct {
    int w, h;
    float *pixels;        /* (3, h, w) */
    uint8_t *rgb;         /* (h, w, 3) */
    int src_w, src_h;     /* the decoded image's size */
    int resized_w, resized_h; /* after the resize step (before the crop; a tiled processor's: before its split) */
    int tiles;            /* pixels holds tiles pictures of (3, h, w), one after another (1 but for a tiled
                             processor: tile_rows x tile_cols tiles row by row, then the global view; rgb is the
                             global view's) */
    int tile_rows, tile_cols; /* 0, 0: the picture whole, no split */
} ImgPixels;

int imgproc_run(const ImgProc *p, const AvImage *img, ImgPixels *out, AvErr *e);
void imgproc_free(ImgPixels *px);

/* The resize step alone: src (h, w, 3) to dst (oh, ow, 3) by PIL's filter f
 * (Image.resize with no box or reducing gap). */
int img_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, ImgFilter f, AvErr *e);
/* The output size the resize step picks for an h x w image. */
void imgproc_resize_size(const ImgProc *p, int h, int w, int *oh, int *ow);
const char *img_filter_name(ImgFilter f);

#endif
