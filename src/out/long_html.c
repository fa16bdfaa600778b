/* long_html.c — a long input's offline page (output.h: html_write_long), the
 * one implementation behind attnviz serve's /api/page and the command line's
 * --html past --long-from: no n x n matrix, but per head the first zoom
 * levels as whole grids and each query's heaviest keys from the pass's
 * telemetry, with the head statistics for the ranking. Its size is bounded by
 * what it keeps, not by n^2: L * H * (sum of G_e^2 + 2 * n * K) 16-bit codes
 * before compression, which meta.tiles states (the page says it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "tiles.h"
#include "util.h"

static const char *const HEADSTAT_FIELDS[CAP_TEL_N] = {"sink", "sink4", "entropy", "prev", "self", "dup", "distance"};

int json_write_headstats(FILE *f, const Capture *c, AvErr *e) {
    if (!c->tel) return av_err(e, "the pass kept no row statistics");
    fputs("{\"fields\":[", f);
    for (int k = 0; k < CAP_TEL_N; k++) fprintf(f, "%s\"%s\"", k ? "," : "", HEADSTAT_FIELDS[k]);
    fprintf(f, "],\"layers\":%d,\"heads\":%d,\"n\":%d,\"mean\":[", c->n_layers, c->n_heads, c->n_tokens);
    for (int l = 0; l < c->n_layers; l++) {
        fputs(l ? ",[" : "[", f);
        for (int h = 0; h < c->n_heads; h++) {
            /* each statistic's mean over the query rows, summed in double */
            double sum[CAP_TEL_N] = {0};
            const float *t = cap_tel(c, l, h);
            for (int i = 0; i < c->n_tokens; i++)
                for (int k = 0; k < CAP_TEL_N; k++) sum[k] += t[(size_t)i * CAP_TEL_N + k];
            fputs(h ? ",[" : "[", f);
            for (int k = 0; k < CAP_TEL_N; k++) fprintf(f, "%s%.9g", k ? "," : "", sum[k] / c->n_tokens);
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputs("]}", f);
    return ferror(f) ? av_err(e, "write error") : 0;
}

/* Levels 0-1 (unless asked otherwise) and all the keys the pass kept per
 * query while they fit HTML_LONG_CODES, else level 0 alone, then fewer keys
 * (at least one): the keys grow with n, the levels not at all. */
void html_long_plan_n(int n, size_t heads, int Kc, int side, int asked, int *levels, int *keys) {
    size_t cells[3] = {0};
    for (int l = 0; l < 3; l++) {
        const size_t g = (size_t)tile_grid(n, side, l);
        cells[l] = (l ? cells[l - 1] : 0) + g * g;
    }
    *levels = asked > 0 ? asked : heads * (cells[1] + 2 * (size_t)n * Kc) <= HTML_LONG_CODES ? 2 : 1;
    *keys = Kc;
    while (*keys > 1 && heads * (cells[*levels - 1] + 2 * (size_t)n * *keys) > HTML_LONG_CODES) --*keys;
}

void html_long_plan(const Capture *cap, int side, int asked, int *levels, int *keys) {
    html_long_plan_n(cap->n_tokens, (size_t)cap->n_layers * cap->n_heads, cap->tel_top_k, side, asked, levels, keys);
}

/* Layer l's every head's K heaviest keys per query (65535: none), then their
 * weights as the page's codes, encoded as one chunk; the telemetry keeps
 * Kc >= K per row, heaviest first. top: 2 * heads * n * K codes of room. */
static int encode_keys(const Capture *c, int l, int K, uint16_t *top, HtmlChunk *ch, AvErr *e) {
    const int n = c->n_tokens, nh = c->n_heads, Kc = c->tel_top_k;
    const size_t per = (size_t)n * K;
    for (int h = 0; h < nh; h++) {
        const size_t at = cap_block(c, l, h) * (size_t)n * Kc;
        for (size_t q = 0; q < (size_t)n; q++)
            for (int j = 0; j < K; j++) {
                const size_t src = at + q * Kc + j, dst = (size_t)h * per + q * K + j;
                const int key = c->tel_top[src];
                top[dst] = key < 0 ? 65535 : (uint16_t)key;
                /* the attention's own codes: round half-up in double (html.c's quant_block) */
                const double x = (double)c->tel_top_w[src] * 10000.0 + 0.5;
                top[(size_t)nh * per + dst] = (uint16_t)(x >= 1.0 ? (x >= 10000.0 ? 10000u : (unsigned)x) : 0u);
            }
    }
    free(ch->z);
    ch->z = NULL;
    snprintf(ch->id, sizeof ch->id, "av-top-%d", l);
    return html_encode_codes(top, 2 * (size_t)nh * per, &ch->z, &ch->len, e);
}

/* Base 85's text for n bytes (html.c writes the chunks so). */
static size_t b85_text(size_t n) { return (n + 3) / 4 * 5; }

/* What the page carries besides its chunks' text and meta: its code and
 * styles (the built-in templates take ~0.3 MB), each head's statistics. */
#define LONG_PAGE_OVERHEAD ((size_t)400000)

/* The page's bytes, near enough: chunks as base 85, the meta, the rest. */
static size_t long_text(const HtmlChunk *ch, int k, size_t mlen, int heads) {
    size_t text = mlen + LONG_PAGE_OVERHEAD + (size_t)heads * 256;
    for (int i = 0; i < k; i++) text += b85_text(ch[i].len);
    return text;
}

/* block b of a run of equal blocks */
typedef struct {
    const float *v;
    size_t len;
} GridBlocks;

static const float *grid_block(void *ctx, int b, AvErr *e) {
    (void)e;
    const GridBlocks *g = ctx;
    return g->v + (size_t)b * g->len;
}

int html_write_long(FILE *f, const char *title, const char *meta_json, HtmlLong *lp, const char *templates_dir,
                    AvErr *e) {
    const Capture *c = lp->cap;
    const int n = c->n_tokens, side = lp->side, nl = c->n_layers, nh = c->n_heads, Kc = c->tel_top_k;
    int levels = lp->levels, K = lp->top_k;
    const size_t mlen = meta_json ? strlen(meta_json) : 0;
    if (!mlen || meta_json[0] != '{' || meta_json[mlen - 1] != '}') return av_err(e, "html: the page needs its meta");
    if (!c->tel || !lp->grid) return av_err(e, "html: a long input's page needs the pass's row statistics and grids");
    if (n > HTML_LONG_MAX_TOKENS)
        return av_err(e, "a page of %d tokens: its keys need more than 16 bits (%d at most)", n, HTML_LONG_MAX_TOKENS);
    if (K > Kc) K = Kc;
    if (levels > tile_levels(n, side)) levels = tile_levels(n, side);
    if (levels < 1) return av_err(e, "html: a long input's page keeps at least one level");
    int G[TILE_MAX_LEVELS];
    size_t cells = 0;
    for (int l = 0; l < levels; l++) G[l] = tile_grid(n, side, l), cells += (size_t)G[l] * G[l];
    const int n_chunks = nl * (levels + (K > 0));
    HtmlChunk *ch = calloc((size_t)n_chunks, sizeof *ch);
    float *grid = malloc((size_t)G[levels - 1] * G[levels - 1] * nh * sizeof *grid);
    uint16_t *top = K ? malloc(2 * (size_t)nh * n * K * sizeof *top) : NULL;
    char *meta = NULL;
    int *top_at = NULL;
    AvBuf b = {0};
    int rc = -1, k = 0;
    if (!ch || !grid || (K && !top)) {
        av_err(e, "out of memory for the page of %d tokens", n);
        goto done;
    }
    if (!(top_at = calloc((size_t)nl, sizeof *top_at))) { /* each layer's keys chunk */
        av_err(e, "out of memory for the page of %d tokens", n);
        goto done;
    }
    for (int l = 0; l < nl; l++) {
        for (int lev = 0; lev < levels; lev++) {
            const size_t gg = (size_t)G[lev] * G[lev];
            for (int h = 0; h < nh; h++) {
                if (lp->grid(lp->grid_ctx, l, h, G[lev], grid + (size_t)h * gg, e)) goto done;
                if (lp->progress) lp->progress(lp->progress_ctx, (l * levels + lev) * nh + h + 1, nl * levels * nh);
            }
            snprintf(ch[k].id, sizeof ch[k].id, "av-tile-%d-%d", l, lev);
            if (html_encode_attention(grid_block, &(GridBlocks){grid, gg}, nh, (size_t)G[lev], (size_t)G[lev], &ch[k].z,
                                      &ch[k].len, e))
                goto done;
            k++;
        }
        if (!K) continue;
        top_at[l] = k;
        if (encode_keys(c, l, K, top, &ch[k], e)) goto done;
        k++;
    }
    /* within the page's bound: the most keys per query that fit (at least one), found by halving */
    if (lp->max_bytes && K > 1 && long_text(ch, k, mlen, nl * nh) > lp->max_bytes) {
        int lo = 1, hi = K - 1; /* K keys do not fit; lo is kept even if it does not */
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            for (int l = 0; l < nl; l++)
                if (encode_keys(c, l, mid, top, &ch[top_at[l]], e)) goto done;
            if (long_text(ch, k, mlen, nl * nh) <= lp->max_bytes) lo = mid;
            else hi = mid - 1;
        }
        K = lo;
        for (int l = 0; l < nl; l++)
            if (encode_keys(c, l, K, top, &ch[top_at[l]], e)) goto done;
    }
    const size_t codes = (size_t)nl * nh * (cells + 2 * (size_t)n * K);
    /* the tiles are encoded, so their compressed size can be stated; free the grids before the page is written */
    free(grid), grid = NULL;
    free(top), top = NULL;
    size_t zbytes = 0;
    for (int i = 0; i < k; i++) zbytes += ch[i].len;
    /* meta: the document's, with the page's "tiles" member last */
    if (av_buf_open(&b)) {
        av_err(e, "out of memory");
        goto done;
    }
    fwrite(meta_json, 1, mlen - 1, b.f);
    fprintf(b.f, "%s\"tiles\":{\"side\":%d,\"levels\":%d,\"long\":true,\"embedded\":%d,\"grids\":[", mlen > 2 ? "," : "",
            side, tile_levels(n, side), levels);
    for (int l = 0; l < levels; l++) fprintf(b.f, "%s%d", l ? "," : "", G[l]);
    fprintf(b.f, "],\"top_k\":%d,\"codes\":%zu,\"zbytes\":%zu,\"stats\":true,\"headstats\":", K, codes, zbytes);
    int hrc = json_write_headstats(b.f, c, e);
    fputs("}}", b.f);
    if (!(meta = av_buf_close(&b, hrc == 0 && !ferror(b.f)))) {
        if (hrc == 0) av_err(e, "out of memory");
        goto done;
    }
    rc = html_write_pieces(f, title, meta, ch, k, templates_dir, e);
    lp->top_k = K;
done:
    for (int i = 0; ch && i < n_chunks; i++) free(ch[i].z);
    free(ch), free(grid), free(top), free(meta), free(top_at);
    return rc;
}
