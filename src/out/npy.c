/* npy.c — .npy output: a 10-byte preamble, a Python-literal header padded to
 * a multiple of 64 bytes, then the raw little-endian float32 data. */
#include "npy.h"

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c writes the host floats as little-endian <f4"
#endif

int npy_write_header(FILE *f, const long *shape, int ndim) { return npy_write_header_typed(f, "<f4", shape, ndim); }

int npy_write_header_typed(FILE *f, const char *descr, const long *shape, int ndim) {
    char dict[256];
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) k += snprintf(dict + k, sizeof dict - (size_t)k, "%ld, ", shape[i]);
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    size_t total = 10 + (size_t)k + 1; /* preamble + dict + '\n' */
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)k + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)k, f) != (size_t)k) return -1;
    for (size_t i = 0; i < pad; i++)
        if (fputc(' ', f) == EOF) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

static int write_blocks(FILE *f, const OutDoc *d, float *(*block)(const Capture *, int, int), long rows, long cols,
                        AvErr *e) {
    long shape[4] = {out_n_layers(d), out_n_heads(d), rows, cols};
    if (npy_write_header(f, shape, 4) != 0) return av_err_errno(e, "write error");
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            const float *b = block(d->cap, out_layer(d, li), out_head(d, hi));
            size_t cnt = (size_t)(rows * cols);
            if (fwrite(b, sizeof(float), cnt, f) != cnt) return av_err_errno(e, "write error");
        }
    return 0;
}

int npy_write_attention(FILE *f, const OutDoc *d, AvErr *e) {
    return write_blocks(f, d, cap_attn, d->cap->n_tokens, d->cap->n_tokens, e);
}

/* float32 [layers, heads, n]: one value per token of each selected block. */
static int write_token_blocks(FILE *f, const OutDoc *d, float *(*block)(const Capture *, int, int), AvErr *e) {
    long shape[3] = {out_n_layers(d), out_n_heads(d), d->cap->n_tokens};
    if (npy_write_header(f, shape, 3) != 0) return av_err_errno(e, "write error");
    for (int li = 0; li < out_n_layers(d); li++)
        for (int hi = 0; hi < out_n_heads(d); hi++)
            if (fwrite(block(d->cap, out_layer(d, li), out_head(d, hi)), sizeof(float), (size_t)d->cap->n_tokens, f) !=
                (size_t)d->cap->n_tokens)
                return av_err_errno(e, "write error");
    return 0;
}

int npy_write_sinks(FILE *f, const OutDoc *d, AvErr *e) {
    if (!d->cap->sinks) return av_err(e, "the model has no attention sinks");
    return write_token_blocks(f, d, cap_sinks, e);
}

int npy_write_stack(FILE *f, const OutDoc *d, int k, AvErr *e) {
    if (k < 0 || k >= d->n_stacks) return av_err(e, "no attention stack %d", k);
    const CapStack *st = &d->stacks[k];
    /* stacks hold the document's layers (or their own) in order, every head (cmd_render.c, run_seq2seq.c) */
    long shape[4] = {out_stack_n_layers(d, st), d->cfg->num_heads, st->n_rows, st->n_cols};
    if (npy_write_header(f, shape, 4) != 0) return av_err_errno(e, "write error");
    const size_t cnt = (size_t)shape[0] * (size_t)shape[1] * (size_t)st->n_rows * (size_t)st->n_cols;
    return fwrite(st->attn, sizeof(float), cnt, f) == cnt ? 0 : av_err_errno(e, "write error");
}

int npy_write_norm(FILE *f, const OutDoc *d, char what, AvErr *e) {
    if (what == 'v') {
        if (!d->cap->vnorm) return av_err(e, "value norms were not computed (or the view merged tokens: --words)");
        return write_token_blocks(f, d, cap_vnorm, e);
    }
    if (!d->cap->nattn) return av_err(e, "value-weighted attention was not computed (--measure norm)");
    return write_blocks(f, d, cap_nattn, d->cap->n_tokens, d->cap->n_tokens, e);
}

int npy_write_qk(FILE *f, const OutDoc *d, char which, AvErr *e) {
    if (!d->cap->q) return av_err(e, "queries and keys were not captured");
    return write_blocks(f, d, which == 'q' ? cap_q : cap_k, d->cap->n_tokens, d->cap->head_dim, e);
}

static int write_ints(FILE *f, const int *v, size_t n, AvErr *e) {
    for (size_t i = 0; i < n; i++) {
        int32_t x = v[i];
        if (fwrite(&x, sizeof x, 1, f) != 1) return av_err_errno(e, "write error");
    }
    return 0;
}

int npy_write_predictions(FILE *f, const OutDoc *d, char what, AvErr *e) {
    const CapPredictions *p = d->pred;
    if (!p) return av_err(e, "no predictions were made");
    long shape[2] = {p->n, p->k};
    if (npy_write_header_typed(f, what == 'p' ? "<f4" : "<i4", shape, what == 'n' ? 1 : 2) != 0)
        return av_err_errno(e, "write error");
    const size_t cells = (size_t)p->n * (size_t)p->k;
    if (what == 'n') return write_ints(f, p->position, (size_t)p->n, e);
    if (what == 'i') return write_ints(f, p->ids, cells, e);
    return fwrite(p->probs, sizeof(float), cells, f) == cells ? 0 : av_err_errno(e, "write error");
}

int npy_write_ids(FILE *f, const OutDoc *d, AvErr *e) {
    long shape[1] = {d->enc->n};
    if (npy_write_header_typed(f, "<i4", shape, 1) != 0) return av_err_errno(e, "write error");
    return write_ints(f, d->enc->ids, (size_t)d->enc->n, e);
}
