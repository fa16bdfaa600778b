/* arch_vit.h — what the vision encoders' file (arch_vit.c) lends the
 * vision-language models (arch_llava.c): a CLIP or SigLIP vision tower read
 * under another model's prefix. Their parses are the rows' (arch.h). */
#ifndef ATTNVIZ_ARCH_VIT_H
#define ATTNVIZ_ARCH_VIT_H

#include "err.h"
#include "loader.h"

/* The tower's tensors under base ("vision_tower.vision_model.": a vision-language model's). */
int arch_clip_vision_load_at(Model *m, const char *base, AvErr *e);
int arch_siglip_vision_load_at(Model *m, const char *base, AvErr *e);

#endif
