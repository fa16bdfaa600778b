/* test_image.c — decoding (image.c), preprocessing (imgproc.c) and the vision
 * encoder's embedding helpers (vision.c) on inputs small enough to reason
 * about; their agreement with PIL and transformers is tests/ref/image_check.sh's
 * and vision_check.sh's. Runs under AddressSanitizer too (make test), which is
 * where the decoders' longjmp paths are worth watching. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "check_util.h"
#include "image.h"
#include "imgproc.h"
#include "vision.h"

/* A PNG of w x h RGB(A) pixels from rgb (h, w, channels) or, with rgb NULL, a header only. */
static unsigned char *png_bytes(int w, int h, int channels, const unsigned char *rgb, size_t *len) {
    const size_t row = (size_t)w * channels + 1, raw_len = rgb ? row * h : 0; /* a header only: no rows */
    unsigned char *raw = calloc(raw_len ? raw_len : 1, 1);
    uLongf zlen = compressBound(raw_len);
    unsigned char *z = malloc(zlen), *out = malloc(zlen + 128);
    ck_assert_ptr_nonnull(raw);
    for (int y = 0; rgb && y < h; y++) memcpy(raw + y * row + 1, rgb + (size_t)y * w * channels, row - 1);
    ck_assert_int_eq(compress(z, &zlen, raw, raw_len), Z_OK);
    size_t n = 0;
    memcpy(out, "\x89PNG\r\n\x1a\n", 8), n = 8;
    unsigned char ihdr[13] = {(unsigned char)(w >> 24), (unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w,
                              (unsigned char)(h >> 24), (unsigned char)(h >> 16), (unsigned char)(h >> 8), (unsigned char)h,
                              8, (unsigned char)(channels == 4 ? 6 : 2), 0, 0, 0};
    struct { const char *type; const unsigned char *d; size_t len; } ch[3] = {{"IHDR", ihdr, 13}, {"IDAT", z, zlen}, {"IEND", NULL, 0}};
    for (int k = 0; k < 3; k++) {
        const uint32_t L = (uint32_t)ch[k].len;
        unsigned char be[4] = {(unsigned char)(L >> 24), (unsigned char)(L >> 16), (unsigned char)(L >> 8), (unsigned char)L};
        memcpy(out + n, be, 4), n += 4;
        memcpy(out + n, ch[k].type, 4), n += 4;
        if (L) memcpy(out + n, ch[k].d, L), n += L;
        uLong crc = crc32(crc32(0, (const Bytef *)ch[k].type, 4), ch[k].d ? ch[k].d : (const Bytef *)"", (uInt)L);
        unsigned char c[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16), (unsigned char)(crc >> 8), (unsigned char)crc};
        memcpy(out + n, c, 4), n += 4;
    }
    free(raw), free(z);
    *len = n;
    return out;
}

START_TEST(a_png_decodes_to_its_pixels_and_transparency_goes_onto_white) {
    unsigned char px[2 * 2 * 4] = {10, 20, 30, 255, 200, 100, 50, 0, 0, 0, 0, 128, 255, 255, 255, 255};
    size_t len;
    unsigned char *png = png_bytes(2, 2, 4, px, &len);
    AvImage img;
    AvErr e = {0};
    ck_assert_int_eq(img_decode(png, len, "t.png", &img, &e), 0);
    ck_assert_int_eq(img.w, 2);
    ck_assert_int_eq(img.h, 2);
    ck_assert_str_eq(img.mode, "RGBA");
    ck_assert_int_eq(img.had_alpha, 1);
    /* opaque: as it is; transparent: white; half-transparent black: PIL's alpha_composite gives 127 */
    const unsigned char want[12] = {10, 20, 30, 255, 255, 255, 127, 127, 127, 255, 255, 255};
    ck_assert_mem_eq(img.rgb, want, 12);
    img_free(&img);
    free(png);
}
END_TEST

START_TEST(png_round_trip_through_the_encoder) {
    unsigned char px[5 * 3 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (unsigned char)(i * 37);
    unsigned char *png;
    size_t len;
    AvErr e = {0};
    ck_assert_int_eq(img_encode_png(px, 5, 3, &png, &len, &e), 0);
    AvImage img;
    ck_assert_int_eq(img_decode(png, len, "rt.png", &img, &e), 0);
    ck_assert_int_eq(img.w, 5);
    ck_assert_int_eq(img.h, 3);
    ck_assert_mem_eq(img.rgb, px, sizeof px);
    img_free(&img);
    free(png);
}
END_TEST

START_TEST(hostile_headers_are_refused_before_allocating) {
    size_t len;
    AvImage img;
    AvErr e = {0};
    unsigned char *bomb = png_bytes(100000, 100000, 3, NULL, &len);
    ck_assert_int_ne(img_decode(bomb, len, "bomb.png", &img, &e), 0);
    ck_assert_ptr_null(img.rgb);
    free(bomb);
    unsigned char *cap = png_bytes(9000, 9000, 3, NULL, &len); /* 81 megapixels: above the cap, within libpng's sides */
    ck_assert_int_ne(img_decode(cap, len, "cap.png", &img, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "above the 64 megapixels"));
    free(cap);
    /* a JPEG frame header of 65000 x 65000 */
    const unsigned char jpeg[] = {0xff, 0xd8, 0xff, 0xc0, 0x00, 0x0b, 0x08, 0xfd, 0xe8, 0xfd, 0xe8, 0x03, 0x01, 0x22, 0x00, 0x11};
    ck_assert_int_ne(img_decode(jpeg, sizeof jpeg, "bomb.jpg", &img, &e), 0);
    ck_assert_int_ne(img_decode((const unsigned char *)"GIF89a", 6, "a.gif", &img, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "not a PNG or JPEG"));
    ck_assert_int_ne(img_decode((const unsigned char *)"", 0, "empty", &img, &e), 0);
    /* a PNG cut anywhere is an error, never a crash */
    unsigned char px[4 * 4 * 3] = {0};
    unsigned char *ok = png_bytes(4, 4, 3, px, &len);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_ne(img_decode(ok, cut, "cut.png", &img, &e), 0);
    free(ok);
}
END_TEST

START_TEST(resizing_keeps_a_flat_image_flat_and_the_same_size_unchanged) {
    unsigned char src[7 * 5 * 3], dst[3 * 9 * 3];
    for (size_t i = 0; i < sizeof src; i++) src[i] = 93;
    AvErr e = {0};
    for (int f = IMG_NEAREST; f <= IMG_HAMMING; f++) {
        ck_assert_int_eq(img_resize(src, 7, 5, dst, 3, 9, (ImgFilter)f, &e), 0);
        for (size_t i = 0; i < sizeof dst; i++) ck_assert_int_eq(dst[i], 93);
    }
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 11);
    unsigned char same[sizeof src];
    ck_assert_int_eq(img_resize(src, 7, 5, same, 7, 5, IMG_BICUBIC, &e), 0);
    ck_assert_mem_eq(same, src, sizeof src);
}
END_TEST

START_TEST(preprocessor_configs_read_as_transformers_reads_them) {
    ImgProc p;
    AvErr e = {0};
    /* an integer size: square for ViT's processor, the shortest edge for CLIP's */
    const char *vit = "{\"feature_extractor_type\": \"ViTFeatureExtractor\", \"size\": 224}";
    ck_assert_int_eq(imgproc_parse(&p, vit, strlen(vit), "p.json", &e), 0);
    ck_assert_int_eq(p.size_mode, IMG_SIZE_FIXED);
    ck_assert_int_eq(p.height, 224);
    ck_assert_int_eq(p.resample, IMG_BILINEAR);
    const char *clip = "{\"image_processor_type\": \"CLIPImageProcessor\", \"size\": 224, \"crop_size\": 224}";
    ck_assert_int_eq(imgproc_parse(&p, clip, strlen(clip), "p.json", &e), 0);
    ck_assert_int_eq(p.size_mode, IMG_SIZE_SHORTEST);
    ck_assert_int_eq(p.shortest_edge, 224);
    ck_assert_int_eq(p.do_center_crop, 1);
    ck_assert_int_eq(p.resample, IMG_BICUBIC);
    int oh, ow;
    imgproc_resize_size(&p, 480, 640, &oh, &ow); /* int(224 * 640 / 480) = 298 */
    ck_assert_int_eq(oh, 224);
    ck_assert_int_eq(ow, 298);
    const char *dup = "{\"size\": 10, \"size\": 20}";
    ck_assert_int_ne(imgproc_parse(&p, dup, strlen(dup), "p.json", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "given twice"));
    const char *bad = "{\"size\": {\"height\": 0, \"width\": 5}}";
    ck_assert_int_ne(imgproc_parse(&p, bad, strlen(bad), "p.json", &e), 0);
}
END_TEST

START_TEST(a_crop_larger_than_the_image_pads_it_with_zeros) {
    const char *cfg = "{\"image_processor_type\": \"DeiTImageProcessor\", \"size\": {\"height\": 2, \"width\": 2}, "
                      "\"crop_size\": {\"height\": 4, \"width\": 4}, \"do_rescale\": false, \"do_normalize\": false}";
    ImgProc p;
    AvErr e = {0};
    ck_assert_int_eq(imgproc_parse(&p, cfg, strlen(cfg), "p.json", &e), 0);
    unsigned char rgb[2 * 2 * 3];
    memset(rgb, 200, sizeof rgb);
    AvImage img = {.w = 2, .h = 2, .rgb = rgb};
    ImgPixels px;
    ck_assert_int_eq(imgproc_run(&p, &img, &px, &e), 0);
    ck_assert_int_eq(px.w, 4);
    ck_assert_int_eq(px.h, 4);
    /* centered: rows and columns 1-2 hold the image */
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) ck_assert_float_eq(px.pixels[y * 4 + x], y >= 1 && y <= 2 && x >= 1 && x <= 2 ? 200.0f : 0.0f);
    imgproc_free(&px);
}
END_TEST

START_TEST(interpolated_positions_keep_a_constant_table_constant) {
    enum { G = 6, D = 3 };
    float table[G * G * D], out[4 * 5 * D];
    for (int i = 0; i < G * G * D; i++) table[i] = 0.25f;
    for (int aa = 0; aa < 2; aa++) {
        vis_interp_pos(table, G, D, 4, 5, aa, out);
        for (int i = 0; i < 4 * 5 * D; i++) ck_assert_float_eq_tol(out[i], 0.25f, 1e-6f);
    }
    /* the same grid: the table itself */
    float same[G * G * D];
    for (int i = 0; i < G * G * D; i++) table[i] = (float)i;
    vis_interp_pos(table, G, D, G, G, 0, same);
    for (int i = 0; i < G * G * D; i++) ck_assert_float_eq_tol(same[i], table[i], 1e-4f);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("image");
    TCase *t = tcase_create("core");
    tcase_add_test(t, a_png_decodes_to_its_pixels_and_transparency_goes_onto_white);
    tcase_add_test(t, png_round_trip_through_the_encoder);
    tcase_add_test(t, hostile_headers_are_refused_before_allocating);
    tcase_add_test(t, resizing_keeps_a_flat_image_flat_and_the_same_size_unchanged);
    tcase_add_test(t, preprocessor_configs_read_as_transformers_reads_them);
    tcase_add_test(t, a_crop_larger_than_the_image_pads_it_with_zeros);
    tcase_add_test(t, interpolated_positions_keep_a_constant_table_constant);
    suite_add_tcase(s, t);
    return s;
}
