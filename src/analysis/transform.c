/* transform.c — --no-special and --words views of a capture. */
#include "transform.h"

#include <stdlib.h>
#include <string.h>

XfRole xf_special_role(const TokEncoding *enc, int i) { return (XfRole)enc->role[i]; }

/* Token i continues the word before it: a piece the tokenizer did not mark as
 * a word start (WordPiece "##" pieces, byte-level pieces inside a pre-token). */
static int continues_word(const TokEncoding *enc, int i) {
    if (i == 0 || enc->special[i] || enc->special[i - 1]) return 0;
    return !enc->word_start[i];
}

void xf_free(XfView *v) {
    for (int i = 0; i < v->enc.n; i++) {
        if (v->enc.display && v->enc.display[i] != v->enc.tokens[i]) free((char *)v->enc.display[i]);
        free((char *)v->enc.tokens[i]);
    }
    free(v->enc.display);
    free(v->enc.word_start);
    free(v->enc.special);
    free(v->enc.role);
    free(v->enc.tokens);
    free(v->enc.ids);
    free(v->enc.type_ids);
    free(v->cap.attn);
    free(v->cap.nattn);
    free(v->cap.vnorm);
    free(v->cap.sinks);
    free(v->cap.moe_ids);
    free(v->cap.moe_w);
    free(v->cap.q);
    free(v->cap.k);
    memset(v, 0, sizeof *v);
}

int xf_apply(const TokEncoding *enc, const Capture *cap, int no_special, int words, XfView *out, AvErr *e) {
    memset(out, 0, sizeof *out);
    const int n = enc->n;
    int *group = malloc(sizeof(int) * (size_t)n); /* token -> group, -1 when dropped */
    int *first = malloc(sizeof(int) * (size_t)n); /* group -> its first token */
    int *size = calloc((size_t)n, sizeof(int));
    if (!group || !first || !size) {
        free(group), free(first), free(size);
        return av_err(e, "out of memory");
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (no_special && xf_special_role(enc, i) != XF_NONE) {
            group[i] = -1;
            continue;
        }
        /* a continuation joins the word before it (never a special token) */
        if (words && continues_word(enc, i) && group[i - 1] >= 0 && xf_special_role(enc, i - 1) == XF_NONE) {
            group[i] = group[i - 1];
        } else {
            first[m] = i;
            group[i] = m++;
        }
        size[group[i]]++;
    }
    if (m == 0) {
        free(group), free(first), free(size);
        return av_err(e, "no tokens left after dropping [CLS]/[SEP]");
    }
    TokEncoding *d = &out->enc;
    d->n = m;
    d->b_start = -1;
    d->tokens = calloc((size_t)m, sizeof *d->tokens);
    d->display = calloc((size_t)m, sizeof *d->display);
    d->word_start = malloc((size_t)m);
    d->special = malloc((size_t)m);
    d->role = malloc((size_t)m);
    d->byte_level = enc->byte_level;
    d->ids = malloc(sizeof(int) * (size_t)m);
    d->type_ids = malloc(sizeof(int) * (size_t)m);
    Capture *c = &out->cap;
    *c = *cap;
    c->n_tokens = m;
    c->cap_tokens = (size_t)m;
    c->hidden = NULL;
    size_t LH = cap_blocks(cap); /* the kept blocks, in the same grid */
    c->attn = calloc(LH * m * m, sizeof(float));
    c->q = cap->q ? calloc(LH * m * cap->head_dim, sizeof(float)) : NULL;
    c->k = cap->k ? calloc(LH * m * cap->head_dim, sizeof(float)) : NULL;
    /* value-weighted attention: merged like attention, never renormalized (its rows are norms, not
     * shares); a token's value norm has no merged counterpart, so --words leaves the norms out */
    c->nattn = cap->nattn ? calloc(LH * m * m, sizeof(float)) : NULL;
    c->vnorm = cap->vnorm && !words ? calloc(LH * m, sizeof(float)) : NULL;
    /* attention sinks (gpt-oss): a row's sink share, merged like its attention row */
    c->sinks = cap->sinks ? calloc(LH * m, sizeof(float)) : NULL;
    /* a MoE model's routing: the kept tokens' rows; a merged word has no one choice, so --words leaves it out */
    const int keep_moe = cap->moe_ids && !words;
    const size_t KL = (size_t)cap->n_layers * (size_t)cap->moe_k;
    c->moe_ids = keep_moe ? malloc(KL * m * sizeof *c->moe_ids) : NULL;
    c->moe_w = keep_moe ? malloc(KL * m * sizeof *c->moe_w) : NULL;
    if (!keep_moe) c->moe_k = 0;
    int bad = !d->tokens || !d->display || !d->word_start || !d->special || !d->role || !d->ids || !d->type_ids ||
              !c->attn || (cap->nattn && !c->nattn) || (cap->sinks && !c->sinks) || (cap->vnorm && !words && !c->vnorm) ||
              (cap->q && (!c->q || !c->k)) || (keep_moe && (!c->moe_ids || !c->moe_w));
    for (int l = 0; keep_moe && !bad && l < cap->n_layers; l++)
        for (int i = 0; i < n; i++) {
            if (group[i] < 0) continue;
            const size_t K = (size_t)cap->moe_k, from = ((size_t)l * n + i) * K, to = ((size_t)l * m + group[i]) * K;
            memcpy(c->moe_ids + to, cap->moe_ids + from, K * sizeof *c->moe_ids);
            memcpy(c->moe_w + to, cap->moe_w + from, K * sizeof *c->moe_w);
        }
    for (int g = 0; g < m && !bad; g++) {
        /* a word's spelling: its pieces joined, WordPiece's "##" marks dropped */
        size_t len = 1, dlen = 1;
        for (int i = first[g]; i < n && group[i] == g; i++) {
            len += strlen(enc->tokens[i]);
            dlen += strlen(enc->display ? enc->display[i] : enc->tokens[i]);
        }
        char *s = malloc(len), *ds = enc->display && enc->byte_level ? malloc(dlen) : NULL;
        if (!s || (enc->display && enc->byte_level && !ds)) {
            free(s), free(ds);
            bad = 1;
            break;
        }
        s[0] = '\0';
        if (ds) ds[0] = '\0';
        for (int i = first[g]; i < n && group[i] == g; i++) {
            int strip = i != first[g] && !enc->byte_level;
            strcat(s, enc->tokens[i] + (strip ? 2 : 0));
            if (ds) strcat(ds, enc->display[i]);
        }
        d->tokens[g] = s;
        d->display[g] = ds ? ds : s;
        d->word_start[g] = (unsigned char)(words ? 1 : enc->word_start[first[g]]);
        d->special[g] = enc->special[first[g]];
        d->role[g] = enc->role[first[g]];
        d->ids[g] = enc->ids[first[g]];
        d->type_ids[g] = enc->type_ids[first[g]];
        if (d->b_start < 0 && enc->b_start >= 0 && first[g] >= enc->b_start) d->b_start = g;
    }
    if (bad) {
        free(group), free(first), free(size);
        xf_free(out);
        return av_err(e, "out of memory");
    }
    for (size_t lh = 0; lh < LH; lh++) {
        const float *A = cap->attn + lh * n * n; // (n, n)
        float *B = c->attn + lh * m * m;        // (m, m)
        for (int i = 0; i < n; i++) {
            if (group[i] < 0) continue;
            float *row = B + (size_t)group[i] * m;
            for (int j = 0; j < n; j++)
                if (group[j] >= 0) row[group[j]] += A[(size_t)i * n + j] / (float)size[group[i]];
        }
        if (cap->nattn) {
            const float *N = cap->nattn + lh * n * n;
            float *M = c->nattn + lh * m * m;
            for (int i = 0; i < n; i++) {
                if (group[i] < 0) continue;
                for (int j = 0; j < n; j++)
                    if (group[j] >= 0) M[(size_t)group[i] * m + group[j]] += N[(size_t)i * n + j] / (float)size[group[i]];
            }
        }
        if (c->vnorm)
            for (int i = 0; i < n; i++)
                if (group[i] >= 0) c->vnorm[lh * m + group[i]] = cap->vnorm[lh * n + i];
        float *S = c->sinks ? c->sinks + lh * m : NULL; // (m) the rows' sink shares
        for (int i = 0; S && i < n; i++)
            if (group[i] >= 0) S[group[i]] += cap->sinks[lh * n + i] / (float)size[group[i]];
        if (no_special) /* the dropped columns took weight: rows (and their sink) sum to 1 again */
            for (int g = 0; g < m; g++) {
                double sum = S ? S[g] : 0;
                for (int h = 0; h < m; h++) sum += B[(size_t)g * m + h];
                if (sum > 0)
                    for (int h = 0; h < m; h++) B[(size_t)g * m + h] = (float)(B[(size_t)g * m + h] / sum);
                if (S && sum > 0) S[g] = (float)(S[g] / sum);
            }
        if (cap->q) {
            const int dh = cap->head_dim;
            for (int i = 0; i < n; i++) {
                if (group[i] < 0) continue;
                for (int x = 0; x < dh; x++) {
                    c->q[(lh * m + group[i]) * dh + x] += cap->q[(lh * n + i) * dh + x] / (float)size[group[i]];
                    c->k[(lh * m + group[i]) * dh + x] += cap->k[(lh * n + i) * dh + x] / (float)size[group[i]];
                }
            }
        }
    }
    free(group), free(first), free(size);
    return 0;
}
