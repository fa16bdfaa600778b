/* img_dump.c — an image decoded and preprocessed as attnviz does, written raw
 * for tests/ref/image_check.py, which compares it with PIL and transformers'
 * image processors.
 * usage: img_dump MODEL_DIR|- IMAGE OUT_PREFIX
 * writes OUT_PREFIX.rgb, the decoded picture (h, w, 3) uint8, and, with a
 * model folder (its preprocessor_config.json), OUT_PREFIX.pixels, the
 * pixel_values (3, h, w) float32; prints {"w", "h", "mode", "bits",
 * "pixels_w", "pixels_h"} as JSON. Exit 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "imgproc.h"

static int dump(const char *prefix, const char *ext, const void *p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, bytes, f);
    return fclose(f) != 0 || w != bytes ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: img_dump MODEL_DIR|- IMAGE OUT_PREFIX\n");
        return 2;
    }
    AvErr e = {0};
    AvImage img;
    ImgProc p;
    ImgPixels px = {0};
    const int proc = strcmp(argv[1], "-") != 0;
    if (img_load(argv[2], &img, &e) || (proc && (imgproc_load(&p, argv[1], &e) || imgproc_run(&p, &img, &px, &e)))) {
        fprintf(stderr, "img_dump: %s\n", e.msg);
        return 1;
    }
    if (dump(argv[3], "rgb", img.rgb, (size_t)img.w * img.h * 3) ||
        (proc && dump(argv[3], "pixels", px.pixels, (size_t)3 * px.w * px.h * sizeof(float)))) {
        fprintf(stderr, "img_dump: cannot write %s.*\n", argv[3]);
        return 1;
    }
    printf("{\"w\": %d, \"h\": %d, \"mode\": \"%s\", \"bits\": %d, \"pixels_w\": %d, \"pixels_h\": %d}\n", img.w, img.h,
           img.mode, img.bits, px.w, px.h);
    img_free(&img);
    imgproc_free(&px);
    return 0;
}
