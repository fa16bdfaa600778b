/* libFuzzer target: preprocessor_config.json parsing, then its steps on a
 * small fixed image (sizes, crops and filters the config asks for). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "image.h"
#include "imgproc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ImgProc p;
    AvErr e;
    if (imgproc_parse(&p, (const char *)data, size, "preprocessor_config.json", &e) != 0) return 0;
    if ((unsigned)p.resample > IMG_HAMMING || (p.do_center_crop && (p.crop_height < 1 || p.crop_width < 1)))
        __builtin_trap();
    /* the output is bounded by the config's sizes: keep the fuzzer's images small */
    if (p.do_resize && (p.size_mode == IMG_SIZE_FIXED ? (long)p.height * p.width : (long)p.shortest_edge * p.shortest_edge) >
                           (1L << 20))
        return 0;
    if (p.do_center_crop && (long)p.crop_height * p.crop_width > (1L << 20)) return 0;
    if (p.tiled && ((long)p.longest_edge * p.longest_edge > (1L << 20) || (long)p.max_image_side * p.max_image_side > (1L << 20) ||
                    (long)p.height * p.width > (1L << 20)))
        return 0;
    uint8_t rgb[7 * 5 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 37);
    AvImage img = {.w = 7, .h = 5, .rgb = rgb};
    ImgPixels px;
    if (imgproc_run(&p, &img, &px, &e) == 0) {
        if (px.w < 1 || px.h < 1 || !px.pixels || !px.rgb || px.tiles < 1 || px.tiles > IMG_MAX_TILES ||
            (px.tiles > 1 && px.tiles != px.tile_rows * px.tile_cols + 1))
            __builtin_trap();
        imgproc_free(&px);
    }
    return 0;
}
