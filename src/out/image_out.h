/* image_out.h — an image run's description (output.h's OutImage) as JSON
 * members (the JSON document and the page's meta share them) and .npy arrays,
 * from the OutDoc alone. */
#ifndef ATTNVIZ_IMAGE_OUT_H
#define ATTNVIZ_IMAGE_OUT_H

#include <stdio.h>

#include "err.h"
#include "output.h"

/* ,"image":{...} when d->image is set: the file, its mode and sizes, the
 * preprocessed size, patch size and grid, each token's kind and place, the
 * pooling head's attention, the embedding and (a whole CLIP/SigLIP model's
 * text) the text tower's tokens, attention and the similarity. page: the
 * preprocessed picture itself too ("png": base64), for the Image view. -1 on
 * a write error. */
int image_json_member(FILE *f, const OutDoc *d, int page);

/* FILE.image_tokens.npy: int32 [n, 4], per token (row, column, tile, kind:
 * 0 patch, 1 class, 2 distillation, 3 register; row and column -1 but for
 * patches); FILE.image_grid.npy: int32 [6] (rows, columns, patch size, tiles,
 * preprocessed height, width); FILE.pooling_attention.npy: float32 [heads, n]
 * (SigLIP); FILE.text_attention.npy: float32 [layers, heads, t, t]. A token kind 4: a vision-language
 * model's text token. */
/* A vision-language model's: FILE.vision_attention.npy float32 [layers, heads, n_v, n_v] (the vision tower's
 * own tokens), FILE.image_embeds.npy float32 [n_image, hidden] (the image tokens as the decoder reads
 * them: the projector's output), FILE.pixel_values.npy float32 [3, h, w]. */
enum { IMAGE_NPY_TOKENS, IMAGE_NPY_GRID, IMAGE_NPY_POOL, IMAGE_NPY_TEXT, IMAGE_NPY_VISION, IMAGE_NPY_EMBEDS, IMAGE_NPY_PIXELS };
int image_npy_has(const OutDoc *d, int what);
int image_npy_write(FILE *f, const OutDoc *d, int what, AvErr *e);

#endif
