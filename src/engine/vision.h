/* vision.h — a vision encoder's ends (ViT, DeiT, DINOv2, CLIP's and SigLIP's
 * vision towers): an image's pixel_values (imgproc.h) become the first
 * layer's tokens -- [class] [distillation] [registers] patches, row by row --
 * through the patch embedding and the position table (interpolated where the
 * family does), the layers run as any encoder's (model_forward_embeds), and
 * what follows the last layer: SigLIP's attention-pooling head (its attention
 * kept: vis_pool's attn) or CLIP's class token through post_layernorm and
 * visual_projection; and a whole CLIP or SigLIP model's text tower, its pooled
 * text embedding and the image-text similarity. The engine never knows the
 * family: the config's vision fields say which steps there are. */
#ifndef ATTNVIZ_VISION_H
#define ATTNVIZ_VISION_H

#include "model.h"

/* The patch grid of an h x w image: rows and columns of patch_size patches
 * (the image's sides must be multiples of it, and the grid the table's unless
 * the family interpolates). *n: the tokens of the pass. */
int vis_grid(const ModelConfig *c, int h, int w, int *rows, int *cols, int *n, AvErr *e);
/* The tokens before the patches: class, distillation, registers. */
int vis_prefix(const ModelConfig *c);
/* x (n, hidden) the first layer's input for pixels (3, h, w): vis_grid's n rows. */
int vis_embed(const Model *m, RunState *s, const float *pixels, int h, int w, float *x, AvErr *e);
/* The position table's patch rows brought to a rows x cols grid (torch's
 * bicubic interpolate, antialiased or not) into out (rows * cols, hidden);
 * exposed for its check against torch. */
void vis_interp_pos(const float *table, int grid, int hidden, int rows, int cols, int antialias, float *out);

/* What the pass's last hidden state pools to (after model_forward_embeds with
 * every layer run): SigLIP's head output (hidden) and its attention (num_heads,
 * n), or CLIP's projected class token (projection_dim); out NULL with neither. */
typedef struct {
    float *embed;          /* (dim) the image embedding: SigLIP's pooled output, CLIP's image_embeds */
    int dim;
    float *attn;           /* (num_heads, n) the pooling head's attention (SigLIP), else NULL */
    int heads, n;
} VisPooled;
int vis_pool(const Model *m, RunState *s, int n, VisPooled *out, AvErr *e);
void vis_pooled_free(VisPooled *p);

/* A whole CLIP/SigLIP model's text tower on ids (n): its pooled and projected
 * embedding into embed (dim: TextHead.proj.out), the tower's attention into cap
 * (its own; NULL: none). s: a run state of m->text for n tokens. */
int vis_text_embed(const Model *m, RunState *s, const int *ids, int n, Capture *cap, float *embed, AvErr *e);
/* logit = exp(logit_scale) * cos(image, text) + logit_bias; prob: SigLIP's sigmoid of it (CLIP's needs
 * every text: the caller's softmax). */
double vis_similarity(const Model *m, const float *image, const float *text, int dim);

/* ---------------------------------------------------------------- vision-language models */

/* The vision tower's hidden state a vision-language model reads (cfg.vlm_feature_layer, counted as
 * transformers' hidden_states: the embeddings first): its index into a capture's hidden states, and
 * whether the capture must keep them (not the last layer's). */
int vlm_feature_index(const Model *m);
/* A picture's image tokens as the language model takes them: pixels (3, h, w) through m->vision
 * (vs: its run state; vcap: its capture, all layers, with hidden states when vlm_feature_index says so),
 * the feature layer's tokens (the class token dropped as the config says), projected by m->vlm with
 * s (m's run state): out (cfg.vlm_tokens, hidden). */
int vlm_image_embeds(const Model *m, RunState *vs, RunState *s, const float *pixels, int h, int w, Capture *vcap,
                     float *out, AvErr *e);

#endif
