/* vision.c — a vision encoder's first and last steps (vision.h): patches
 * embedded with their special tokens and positions, and what pools the last
 * hidden state (SigLIP's attention-pooling head, CLIP's projected class token);
 * a whole CLIP/SigLIP model's text embedding and the image-text similarity. */
#include "vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vis_prefix(const ModelConfig *c) { return c->vis_cls + c->vis_dist + c->vis_registers; }

int vis_grid(const ModelConfig *c, int h, int w, int *rows, int *cols, int *n, AvErr *e) {
    const int P = c->patch_size, grid = c->image_size / P;
    if (h < P || w < P)
        return av_err(e, "the preprocessed image (%d x %d) is smaller than one %d-pixel patch", w, h, P);
    *rows = h / P, *cols = w / P; /* the patch convolution's stride drops a remainder, as torch's does */
    if (c->vis_pos_interp == VIS_POS_EXACT && (*rows != grid || *cols != grid || h != c->image_size ||
                                               w != c->image_size))
        return av_err(e, "the preprocessed image is %d x %d, but the model's positions are for %d x %d "
                      "(preprocessor_config.json and config.json's image_size disagree)", w, h, c->image_size,
                      c->image_size);
    *n = vis_prefix(c) + *rows * *cols;
    if (*n > CFG_MAX_VIS_TOKENS)
        return av_err(e, "a %d x %d image makes %d patches of %d pixels, above the %d tokens attnviz runs", w, h,
                      *rows * *cols, P, CFG_MAX_VIS_TOKENS);
    return 0;
}

/* ---------------------------------------------------------------- positions */

/* torch's cubic convolution (upsample_bicubic2d: A = -0.75; the antialiased
 * kernel's filter: A = -0.5), in float as torch computes float tensors. */
static float cubic1(float x, float A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static float cubic2(float x, float A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

/* Without antialias (upsample_bicubic2d, align_corners=False): 4 taps at
 * floor(scale * (i + 0.5) - 0.5) - 1 .. + 2, clamped to the edges. */
static void taps_cubic(int in, int out, int i, int *idx, float *w) {
    const float scale = (float)in / (float)out;
    const float real = scale * ((float)i + 0.5f) - 0.5f;
    int k = (int)floorf(real);
    if (k > in - 1) k = in - 1;
    float t = real - (float)k;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    w[0] = cubic2(t + 1, -0.75f), w[1] = cubic1(t, -0.75f), w[2] = cubic1(1 - t, -0.75f), w[3] = cubic2(2 - t, -0.75f);
    for (int j = 0; j < 4; j++) {
        int x = k + j - 1;
        idx[j] = x < 0 ? 0 : x > in - 1 ? in - 1 : x;
    }
}

/* Antialiased (_upsample_bicubic2d_aa): the filter stretched by the scale when
 * shrinking, its taps normalized to sum 1 -- PIL's weights, in float. */
static int taps_aa(int in, int out, int i, int *idx, float *w, int max_taps) {
    const float scale = (float)in / (float)out;
    const float support = scale >= 1 ? 2.0f * scale : 2.0f, invscale = scale >= 1 ? 1.0f / scale : 1.0f;
    const float center = scale * ((float)i + 0.5f);
    int xmin = (int)(center - support + 0.5f);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5f);
    if (xmax > in) xmax = in;
    int nt = xmax - xmin;
    if (nt > max_taps) nt = max_taps;
    float total = 0;
    for (int j = 0; j < nt; j++) {
        float x = fabsf(((float)(j + xmin) - center + 0.5f) * invscale);
        w[j] = x < 1 ? cubic1(x, -0.5f) : x < 2 ? cubic2(x, -0.5f) : 0.0f;
        total += w[j];
        idx[j] = j + xmin;
    }
    for (int j = 0; total != 0 && j < nt; j++) w[j] /= total;
    return nt;
}

#define MAX_TAPS 512 /* 2 * support + 1 for a table shrunk up to 127 times */

void vis_interp_pos(const float *table, int grid, int hidden, int rows, int cols, int antialias, float *out) {
    /* out[(y * cols + x) * hidden + d] from table[(gy * grid + gx) * hidden + d], separable:
     * columns first (into tmp: grid rows x cols), then rows */
    int ix[MAX_TAPS], iy[MAX_TAPS];
    float wx[MAX_TAPS], wy[MAX_TAPS];
    float *tmp = malloc((size_t)grid * cols * hidden * sizeof *tmp);
    if (!tmp) {
        memset(out, 0, (size_t)rows * cols * hidden * sizeof *out);
        return;
    }
    for (int x = 0; x < cols; x++) {
        int nt = 4;
        if (antialias) nt = taps_aa(grid, cols, x, ix, wx, MAX_TAPS);
        else taps_cubic(grid, cols, x, ix, wx);
        for (int gy = 0; gy < grid; gy++)
            for (int d = 0; d < hidden; d++) {
                float acc = 0;
                for (int j = 0; j < nt; j++) acc += table[((size_t)gy * grid + ix[j]) * hidden + d] * wx[j];
                tmp[((size_t)gy * cols + x) * hidden + d] = acc;
            }
    }
    for (int y = 0; y < rows; y++) {
        int nt = 4;
        if (antialias) nt = taps_aa(grid, rows, y, iy, wy, MAX_TAPS);
        else taps_cubic(grid, rows, y, iy, wy);
        for (int x = 0; x < cols; x++)
            for (int d = 0; d < hidden; d++) {
                float acc = 0;
                for (int j = 0; j < nt; j++) acc += tmp[((size_t)iy[j] * cols + x) * hidden + d] * wy[j];
                out[((size_t)y * cols + x) * hidden + d] = acc;
            }
    }
    free(tmp);
}

/* ---------------------------------------------------------------- embedding */

int vis_embed(const Model *m, RunState *s, const float *pixels, int h, int w, float *x, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const VisionWeights *v = m->w.vis;
    const int H = c->hidden_size, P = c->patch_size, C = c->num_channels;
    int rows, cols, n;
    if (!v) return av_err(e, "%s: not a vision encoder", m->path);
    if (vis_grid(c, h, w, &rows, &cols, &n, e)) return -1;
    const int np = rows * cols, in = C * P * P, pre = vis_prefix(c);
    float *pT = malloc((size_t)in * np * sizeof *pT);     // (C*P*P, np) each patch's pixels, a column each
    float *yT = malloc((size_t)H * np * sizeof *yT);      // (H, np) the patches embedded
    float *pos = NULL;                                    // (np, H) interpolated patch positions
    int rc = -1;
    if (!pT || !yT) {
        av_err(e, "out of memory embedding %d patches", np);
        goto done;
    }
    /* patch (py, px)'s value (ch, ky, kx): the convolution weight's order */
    for (int ch = 0; ch < C; ch++)
        for (int ky = 0; ky < P; ky++)
            for (int kx = 0; kx < P; kx++) {
                float *dst = pT + ((size_t)(ch * P + ky) * P + kx) * np;
                for (int py = 0; py < rows; py++)
                    for (int px = 0; px < cols; px++)
                        dst[py * cols + px] = pixels[((size_t)ch * h + py * P + ky) * w + px * P + kx];
            }
    if (model_product(m, s, pT, np, &v->patch, yT, -1, e)) goto done;
    const float *patch_pos = v->pos + (size_t)v->pos_prefix * H; // (grid^2, H)
    if (rows != v->pos_grid || cols != v->pos_grid) {
        if (!(pos = malloc((size_t)np * H * sizeof *pos))) {
            av_err(e, "out of memory interpolating positions");
            goto done;
        }
        vis_interp_pos(patch_pos, v->pos_grid, H, rows, cols, c->vis_pos_interp == VIS_POS_BICUBIC_AA, pos);
        patch_pos = pos;
    }
    /* [class] [distillation] (their own position rows) [registers] (none) patches */
    int t = 0;
    if (v->cls) {
        for (int d = 0; d < H; d++) x[d] = v->cls[d] + v->pos[d];
        t++;
    }
    if (v->dist) {
        for (int d = 0; d < H; d++) x[(size_t)t * H + d] = v->dist[d] + v->pos[(size_t)t * H + d];
        t++;
    }
    for (int r = 0; r < c->vis_registers; r++, t++) memcpy(x + (size_t)t * H, v->registers + (size_t)r * H, (size_t)H * sizeof *x);
    for (int i = 0; i < np; i++)
        for (int d = 0; d < H; d++) x[(size_t)(pre + i) * H + d] = yT[(size_t)d * np + i] + patch_pos[(size_t)i * H + d];
    rc = 0;
done:
    free(pT), free(yT), free(pos);
    return rc;
}

/* ---------------------------------------------------------------- pooling */

void vis_pooled_free(VisPooled *p) {
    free(p->embed), free(p->attn);
    memset(p, 0, sizeof *p);
}

/* SigLIP's head on h (n, H), the last hidden state after post_layernorm, hT its transpose. */
static int pool_head(const Model *m, RunState *s, const float *hT, int n, VisPooled *out, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const VisionWeights *v = m->w.vis;
    const int H = c->hidden_size, NH = c->num_heads, dh = c->head_dim, F = (int)v->pfc1.out;
    float *kT = malloc((size_t)H * n * sizeof *kT), *vT = malloc((size_t)H * n * sizeof *vT); // (H, n)
    float *buf = malloc(((size_t)4 * H + F) * sizeof *buf);
    float *q = buf, *ctx = buf + H, *r = buf + 2 * H, *t = buf + 3 * H, *f = buf + 4 * H; // (H) x 4, (F)
    int rc = -1;
    out->attn = malloc((size_t)NH * n * sizeof *out->attn);
    out->embed = malloc((size_t)H * sizeof *out->embed);
    if (!kT || !vT || !buf || !out->attn || !out->embed) {
        av_err(e, "out of memory for the pooling head");
        goto done;
    }
    out->dim = H, out->heads = NH, out->n = n;
    if (model_product(m, s, v->probe, 1, &v->pq, q, -1, e) || model_product(m, s, hT, n, &v->pk, kT, -1, e) ||
        model_product(m, s, hT, n, &v->pv, vT, -1, e))
        goto done;
    const float scale = 1.0f / sqrtf((float)dh);
    for (int hh = 0; hh < NH; hh++) {
        float *a = out->attn + (size_t)hh * n;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) {
            double sc = 0;
            for (int d = 0; d < dh; d++) sc += (double)q[hh * dh + d] * kT[(size_t)(hh * dh + d) * n + i];
            a[i] = (float)(sc * scale);
            mx = a[i] > mx ? a[i] : mx;
        }
        for (int i = 0; i < n; i++) sum += exp((double)a[i] - mx);
        for (int i = 0; i < n; i++) a[i] = (float)(exp((double)a[i] - mx) / sum);
        for (int d = 0; d < dh; d++) {
            double acc = 0;
            for (int i = 0; i < n; i++) acc += (double)a[i] * vT[(size_t)(hh * dh + d) * n + i];
            ctx[hh * dh + d] = (float)acc;
        }
    }
    if (model_product(m, s, ctx, 1, &v->po, r, -1, e)) goto done;
    /* r + fc2(act(fc1(norm(r)))) */
    kern_residual(r, NULL, t, NULL, &v->pnorm, 1, H, 0, 1);
    if (model_product(m, s, t, 1, &v->pfc1, f, (int)c->hidden_act, e) ||
        model_product(m, s, f, 1, &v->pfc2, out->embed, -1, e))
        goto done;
    for (int d = 0; d < H; d++) out->embed[d] += r[d];
    rc = 0;
done:
    free(kT), free(vT), free(buf);
    return rc;
}

int vis_pool(const Model *m, RunState *s, int n, VisPooled *out, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const VisionWeights *v = m->w.vis;
    const int H = c->hidden_size;
    memset(out, 0, sizeof *out);
    if (!v || (!c->vis_pool_head && !v->proj.w)) return 0;
    if (!s->full_last || s->n_last != n) return av_err(e, "the pass stopped before the last layer: nothing to pool");
    int rc = -1;
    if (c->vis_pool_head) {
        float *h = malloc((size_t)n * H * sizeof *h), *hT = malloc((size_t)n * H * sizeof *hT);
        if (!h || !hT) rc = av_err(e, "out of memory for the pooling head");
        else {
            kern_residual(s->x, NULL, h, hT, m->w.final_norm.g ? &m->w.final_norm : NULL, n, H, 0, n);
            rc = pool_head(m, s, hT, n, out, e);
        }
        free(h), free(hT);
    } else {
        /* CLIP: the class token through post_layernorm, then visual_projection */
        float *t = malloc((size_t)H * sizeof *t);
        out->dim = (int)v->proj.out;
        if (!t || !(out->embed = malloc((size_t)out->dim * sizeof *out->embed))) rc = av_err(e, "out of memory");
        else {
            kern_residual(s->x, NULL, t, NULL, v->post_pooled.g ? &v->post_pooled : NULL, 1, H, 0, 1);
            rc = model_product(m, s, t, 1, &v->proj, out->embed, -1, e);
        }
        free(t);
    }
    if (rc) vis_pooled_free(out);
    return rc;
}

/* ---------------------------------------------------------------- the text tower */

int vis_text_embed(const Model *m, RunState *s, const int *ids, int n, Capture *cap, float *embed, AvErr *e) {
    const Model *t = m->text;
    const TextHead *th = m->w.text_head;
    if (!t || !th) return av_err(e, "%s: the model has no text tower", m->path);
    if (model_forward_kv(t, s, NULL, ids, NULL, n, cap, 1, e)) return -1;
    int row = n - 1;
    if (!th->pool_last) {
        /* CLIP: the first eos token (configs with eos_token_id 2 take the largest id: the original
         * checkpoints' end-of-text token, as transformers' argmax does) */
        row = 0;
        for (int i = 0; i < n; i++) {
            if (th->eos_id == 2 ? ids[i] > ids[row] : ids[i] == th->eos_id) {
                row = i;
                if (th->eos_id != 2) break;
            }
        }
    }
    const int H = t->cfg.hidden_size;
    float *x = malloc((size_t)H * sizeof *x);
    if (!x) return av_err(e, "out of memory");
    kern_residual(s->x + (size_t)row * H, NULL, x, NULL, t->w.final_norm.g ? &t->w.final_norm : NULL, 1, H, 0, 1);
    int rc = model_product(t, s, x, 1, &th->proj, embed, -1, e);
    free(x);
    return rc;
}

double vis_similarity(const Model *m, const float *image, const float *text, int dim) {
    const TextHead *th = m->w.text_head;
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < dim; i++) ab += (double)image[i] * text[i], aa += (double)image[i] * image[i], bb += (double)text[i] * text[i];
    const double cosv = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
    return exp((double)th->logit_scale) * cosv + th->logit_bias;
}

/* ---------------------------------------------------------------- vision-language models */

int vlm_feature_index(const Model *m) {
    const int L = m->vision->cfg.num_layers, fl = m->cfg.vlm_feature_layer;
    return fl < 0 ? L + 1 + fl : fl; /* hidden_states has L + 1 entries: the embeddings, then each layer */
}

/* Gemma 3's projector on the tower's last hidden state (vs->x, n = rows x cols patches): post_layernorm, each
 * k x k square of patches averaged (k = rows / sqrt(vlm_tokens): AvgPool2d, token order row by row), the
 * soft RMSNorm, the projection: out (vlm_tokens, text hidden). */
static int gemma3_project(const Model *m, RunState *vs, RunState *s, int rows, int cols, float *out, AvErr *e) {
    const Model *v = m->vision;
    const VlmWeights *pw = m->vlm;
    const int Hv = v->cfg.hidden_size, Ht = m->cfg.hidden_size, np = rows * cols, nt = m->cfg.vlm_tokens;
    const int side = (int)(sqrt((double)nt) + 0.5), k = side ? rows / side : 0;
    if (side * side != nt || rows != cols || k * side != rows)
        return av_err(e, "the tower's %d x %d patches do not pool to %d image tokens", rows, cols, nt);
    float *hx = malloc((size_t)np * Hv * sizeof *hx), *pooled = calloc((size_t)nt * Hv, sizeof *pooled);
    float *pT = malloc((size_t)Hv * nt * sizeof *pT), *yT = malloc((size_t)Ht * nt * sizeof *yT);
    int rc = -1;
    if (!hx || !pooled || !pT || !yT) {
        av_err(e, "out of memory for %d image tokens", nt);
        goto done;
    }
    kern_residual(vs->x, NULL, hx, NULL, v->w.final_norm.g ? &v->w.final_norm : NULL, np, Hv, 0, np);
    /* AvgPool2d: sums of k x k patches in float, divided once (torch's CPU avg_pool2d sums in the accumulate type) */
    for (int ty = 0; ty < side; ty++)
        for (int tx = 0; tx < side; tx++) {
            float *dst = pooled + (size_t)(ty * side + tx) * Hv;
            for (int d = 0; d < Hv; d++) {
                double acc = 0;
                for (int dy = 0; dy < k; dy++)
                    for (int dx = 0; dx < k; dx++) acc += hx[(size_t)((ty * k + dy) * cols + tx * k + dx) * Hv + d];
                dst[d] = (float)(acc / (k * k));
            }
        }
    kern_residual(pooled, NULL, pooled, pT, &pw->norm, nt, Hv, 0, nt);
    if (model_product(m, s, pT, nt, &pw->p1, yT, -1, e)) goto done;
    for (int i = 0; i < nt; i++)
        for (int d = 0; d < Ht; d++) out[(size_t)i * Ht + d] = yT[(size_t)d * nt + i];
    rc = 0;
done:
    free(hx), free(pooled), free(pT), free(yT);
    return rc;
}

/* Idefics3's connector on one tile's last hidden state (vs->x, rows x cols patches): post_layernorm, the pixel
 * shuffle (token (ty, tx) of the (rows / k) x (cols / k) grid holds patch (ty k + i, tx k + j)'s features at
 * (i k + j) Hv: Idefics3Connector.pixel_shuffle's views and permutes), the projection: out (vlm_tokens, text hidden). */
static int idefics3_project(const Model *m, RunState *vs, RunState *s, int rows, int cols, float *out, AvErr *e) {
    const Model *v = m->vision;
    const VlmWeights *pw = m->vlm;
    const int Hv = v->cfg.hidden_size, Ht = m->cfg.hidden_size, np = rows * cols, k = m->cfg.vlm_scale;
    const int tr = k ? rows / k : 0, tc = k ? cols / k : 0, nt = tr * tc, in = Hv * k * k;
    if (rows != cols || tr * k != rows || nt != m->cfg.vlm_tokens)
        return av_err(e, "the tower's %d x %d patches do not shuffle to %d image tokens", rows, cols, m->cfg.vlm_tokens);
    float *hx = malloc((size_t)np * Hv * sizeof *hx);   // (np, Hv) post_layernorm's output
    float *sT = malloc((size_t)in * nt * sizeof *sT);   // (Hv k k, nt) the shuffled tokens, a column each
    float *yT = malloc((size_t)Ht * nt * sizeof *yT);   // (Ht, nt) the projection's output
    int rc = -1;
    if (!hx || !sT || !yT) {
        av_err(e, "out of memory for %d image tokens", nt);
        goto done;
    }
    kern_residual(vs->x, NULL, hx, NULL, v->w.final_norm.g ? &v->w.final_norm : NULL, np, Hv, 0, np);
    for (int ty = 0; ty < tr; ty++)
        for (int tx = 0; tx < tc; tx++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++) {
                    const float *src = hx + (size_t)((ty * k + i) * cols + tx * k + j) * Hv;
                    const size_t t = (size_t)ty * tc + tx, f0 = (size_t)(i * k + j) * Hv;
                    for (int d = 0; d < Hv; d++) sT[(f0 + d) * nt + t] = src[d];
                }
    if (model_product(m, s, sT, nt, &pw->p1, yT, -1, e)) goto done;
    for (int i = 0; i < nt; i++)
        for (int d = 0; d < Ht; d++) out[(size_t)i * Ht + d] = yT[(size_t)d * nt + i];
    rc = 0;
done:
    free(hx), free(sT), free(yT);
    return rc;
}

int vlm_image_embeds(const Model *m, RunState *vs, RunState *s, const float *pixels, int h, int w, Capture *vcap,
                     float *out, AvErr *e) {
    const Model *v = m->vision;
    const ModelConfig *vc = &v->cfg, *c = &m->cfg;
    const VlmWeights *pw = m->vlm;
    const int Hv = vc->hidden_size, Ht = c->hidden_size;
    int rows, cols, n;
    if (!v || !pw) return av_err(e, "%s: not a vision-language model", m->path);
    if (vis_grid(vc, h, w, &rows, &cols, &n, e)) return -1;
    const int skip = c->vlm_drop_cls ? vis_prefix(vc) : 0, nt = n - skip, fi = vlm_feature_index(m);
    if (pw->kind == VLM_PROJ_MLP && nt != c->vlm_tokens)
        return av_err(e, "the picture makes %d image tokens; the model's sequence holds %d", nt, c->vlm_tokens);
    if (fi < 0 || fi > vc->num_layers) return av_err(e, "vision_feature_layer %d is outside the tower's %d layers",
                                                     c->vlm_feature_layer, vc->num_layers);
    if (fi < vc->num_layers && (!vcap || !vcap->hidden))
        return av_err(e, "the vision tower's capture keeps no hidden states for its feature layer");
    float *x = malloc((size_t)n * Hv * sizeof *x);             // (n, Hv) the tower's input, then its features
    float *fT = malloc((size_t)Hv * nt * sizeof *fT);          // (Hv, nt) the features, a column per token
    float *yT = malloc((size_t)Ht * nt * sizeof *yT);          // (Ht, nt) linear_1's output
    float *zT = malloc((size_t)Ht * nt * sizeof *zT);          // (Ht, nt) linear_2's output
    int rc = -1;
    if (!x || !fT || !yT || !zT) {
        av_err(e, "out of memory for %d image tokens", nt);
        goto done;
    }
    if (vis_embed(v, vs, pixels, h, w, x, e) || model_forward_embeds(v, vs, x, n, vcap, 1, e)) goto done;
    if (pw->kind == VLM_PROJ_GEMMA3 || pw->kind == VLM_PROJ_IDEFICS3) {
        rc = pw->kind == VLM_PROJ_GEMMA3 ? gemma3_project(m, vs, s, rows, cols, out, e)
                                         : idefics3_project(m, vs, s, rows, cols, out, e);
        goto done;
    }
    /* the feature layer: a kept hidden state, or the last layer's output (no final norm: CLIP's
     * post_layernorm is the pooled token's) */
    const float *feat = fi < vc->num_layers ? vcap->hidden + (size_t)fi * n * Hv : vs->x;
    for (int i = 0; i < nt; i++)
        for (int d = 0; d < Hv; d++) fT[(size_t)d * nt + i] = feat[(size_t)(skip + i) * Hv + d];
    if (model_product(m, s, fT, nt, &pw->p1, yT, c->vlm_proj_act, e) || model_product(m, s, yT, nt, &pw->p2, zT, -1, e))
        goto done;
    for (int i = 0; i < nt; i++)
        for (int d = 0; d < Ht; d++) out[(size_t)i * Ht + d] = zT[(size_t)d * nt + i];
    rc = 0;
done:
    free(x), free(fT), free(yT), free(zT);
    return rc;
}
