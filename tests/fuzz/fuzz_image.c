/* libFuzzer target: PNG and JPEG decoding (libpng, libjpeg-turbo behind
 * img_decode) and, for what decodes, the preprocessing steps on it. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "image.h"
#include "imgproc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    AvImage img;
    AvErr e;
    if (img_decode(data, size, "fuzz", &img, &e) != 0) return 0;
    if (img.w < 1 || img.h < 1 || (uint64_t)img.w * img.h > IMG_MAX_PIXELS || !img.rgb) __builtin_trap();
    /* a CLIP-style processor: shortest edge, bicubic, center crop, rescale, normalize */
    static const char cfg[] = "{\"image_processor_type\": \"CLIPImageProcessor\", \"size\": {\"shortest_edge\": 24}, "
                              "\"crop_size\": {\"height\": 20, \"width\": 20}, \"do_center_crop\": true, \"resample\": 3}";
    ImgProc p;
    ImgPixels px;
    if (imgproc_parse(&p, cfg, sizeof cfg - 1, "cfg", &e) != 0) __builtin_trap();
    if (imgproc_run(&p, &img, &px, &e) == 0) {
        if (px.w != 20 || px.h != 20) __builtin_trap();
        imgproc_free(&px);
    }
    img_free(&img);
    return 0;
}
