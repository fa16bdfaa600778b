/* html.c — the self-contained HTML page (head, model, neuron and matrix views).
 *
 * The page is templates/page.html with its placeholders filled in:
 *   {{title}}          the input text, HTML-escaped (shortened)
 *   {{include NAME}}   another template verbatim (CSS or JS; checked so it cannot
 *                      close its <style>/<script> element early)
 *   {{include A*B}}    every template whose name starts with A and ends with B,
 *                      in byte order of the names, so a new view is one new file
 *                      (templates/view_*.js) and not also a line in page.html
 *   {{meta}}           one JSON object: the members the JSON output has too
 *                      (json_write_common: model, config, text, tokens, selection,
 *                      with the JSON's key names), then the page's own: token
 *                      flags, initial selection, head descriptions and the
 *                      payload's encoding parameters (encoder-decoder pages:
 *                      also "sides" and "stacks"). Strings are written with
 *                      < > & as \u escapes, so the JSON cannot end its <script>
 *                      element whatever the input.
 *   {{payload}}        the numbers, as <script type="application/octet-stream">
 *                      elements holding base-85 text (no markup-significant bytes).
 *
 * Tokens in the meta: "tokens" are the vocab spellings (what Hugging Face's
 * convert_ids_to_tokens gives, e.g. "Ġflies"); "display_tokens" the text as read
 * (" flies"), absent when the doc has none (WordPiece: the spellings are the
 * text). "special" and "word_start" are the tokenizer's flags (TokEncoding):
 * the special tokens ([CLS]/[SEP], <s>/</s>, <|endoftext|>: the page's "hide
 * specials") and the pieces that begin a word (the page's "merge pieces").
 * "config"."causal": a decoder model, where keys after the query are masked (weight exactly 0);
 * the page draws that triangle as masked, not as computed zeros.
 * Templates come from the binary (tools/embed.c) or, with templates_dir, from
 * that folder.
 *
 * Payload encoding (decoded by templates/data.js; keep the two in step)
 * ----------------------------------------------------------------------
 * One chunk per selected layer, so the page decodes the layer it shows first
 * and the others in the background. Each chunk is a sequence of 16-bit codes,
 * split into two byte planes (every low byte, then every high byte: the high
 * plane is nearly constant and compresses to almost nothing), compressed with
 * zlib (RFC 1950; strategy Z_RLE, which here is both faster and ~12% smaller
 * than level 1's default, and is inflated by the browser's native
 * DecompressionStream('deflate')), then written as base 85: each 4 bytes
 * (big-endian, the last group zero-padded) become 5 characters from
 * HTML_B85 below — printable ASCII without " & ' - / < > \ ` — so the text is
 * inert inside <script> and 25% larger than the bytes (base64: 33%).
 * data-z on the element is the compressed byte count.
 *
 *   attention, id "av-att-<i>" (i = index in the layer selection): for each
 *     selected head in selection order, the n x n matrix row-major (query row,
 *     key column), each weight as the code round(a * 10000) in 0..10000:
 *     step 1e-4, error <= 5e-5. The page shows weights with 4 decimals, so what
 *     it shows is exactly the captured float rounded to 4 decimals — the JSON's
 *     number at the page's precision.
 *   queries/keys, id "av-qk-<i>" (only when the capture has q and k): for each
 *     selected head, a q block then a k block. A block with dec decimals holds
 *     the integer codes c = round(v * 10^dec) as d_head per-dimension offsets
 *     o_j (the rounded mean code of dimension j), then n x d_head residuals
 *     c - o_j (row-major, token by token), all zigzag-coded (0,-1,1,-2.. ->
 *     0,1,2,3..). dec is 2 (3 or 4 for a block whose RMS is under 0.1 or 0.01),
 *     lowered until |c| <= 16383 (residuals then fit 16 bits).
 *     meta.qk.dec[i][h] = [dec_q, dec_k]. The page shows q and k with dec
 *     decimals: the captured float rounded to dec places, as the JSON's number
 *     rounded to the same places; q x k, q.k/sqrt(d) are computed from those.
 *
 *   encoder-decoder documents (d->stacks, no capture; attnviz render): one
 *     chunk "av-<name>-<i>" per stack (in d->stacks' order) and selected layer,
 *     name "encoder", "decoder" or "cross", encoded as the attention above but
 *     with each head's block n_rows x n_cols (cross: decoder tokens down,
 *     encoder tokens across). No q/k. meta.stacks lists them ({name, rows,
 *     cols: "encoder"|"decoder", n_rows, n_cols, causal}) and meta.sides holds
 *     each side's tokens ({tokens, display_tokens, special, word_start}).
 *
 *   attnviz diff documents (d->diff): the capture is A's; B's attention
 *     follows as one chunk "av-attb-<i>" per selected layer, encoded as the
 *     attention above over B's tokens (its own n_b x n_b per head). meta.diff
 *     holds the comparison (diff.h's members: alignment, divergence) and
 *     "side_b", B's tokens ({tokens, display_tokens, special, word_start}).
 *
 *   --measure norm documents (d->cap->nattn; never a diff's): value-weighted
 *     attention follows as one chunk "av-natt-<i>" per selected layer, encoded
 *     as the attention above, each row the shares of ||a_ij f_h(x_j)|| (the
 *     row divided by its sum, normattn.h's na_shares), so that every view
 *     draws it as it draws attention. meta.measures lists
 *     ["attention", "norm"]; the page opens on "norm".
 *
 *   --measure alti|rollout documents (d->mix): ALTI's and rollout's matrices
 *     through each selected layer (mixing.h) follow as chunks "av-alti-<i>"
 *     and "av-rollout-<i>", one per selected layer, a single n x n block
 *     (every head's together), codes round(x * 1e4) as the attention's.
 *     meta.measures lists "attention" and the document's measures in
 *     --measure's order, meta.per_layer_measures the per-layer ones; the page
 *     opens on the first listed that is not "attention".
 *
 *   Size budget: if attention + q/k text would pass HTML_PAYLOAD_BUDGET (the
 *   page must stay under 40 MB at 512 tokens x 144 heads), q/k are encoded
 *   again with one decimal fewer (not below 1); meta.qk.dec says what was used.
 *
 * Layers are quantized and compressed in parallel (HTML_THREADS) into memory
 * first, then the template is written out with the meta and the chunks.
 *
 * Measured (tests/browser/page_fixture.c: synthetic BERT-shaped captures, a
 * pessimistic mix with many near-uniform heads; 12 layers x 12 heads, d_head
 * 64; 2-core machine): 7 tokens: 11 KB attention + 228 KB q/k + 105 KB page
 * code; 512 tokens: 25.4 MB attention + 13.5 MB q/k = 38.9 MB, written in
 * 0.5-0.75 s. The demo model (peaky constructed heads) at 512 tokens: 1 MB.
 * A causal capture of the same shape (page_fixture --causal): 28 MB, the
 * masked upper triangle compresses to almost nothing.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "diff_out.h"
#include "mix_out.h"
#include "normattn.h"
#include "output.h"
#include "templates.h"
#include "util.h"

#define HTML_ATT_SCALE 10000.0
#define HTML_MAX_TEMPLATE ((size_t)16 << 20)
/* zlib level (with Z_RLE the level matters little; 1 is the fastest). */
#define HTML_ZLEVEL 1
/* Threads compressing layers in parallel. */
#define HTML_THREADS 4
/* Payload text above which queries/keys lose a decimal (the page must stay
 * under 40 MB at 512 tokens x 144 heads; templates and meta take ~0.2 MB). */
#define HTML_PAYLOAD_BUDGET ((size_t)39500000)

/* ---------------------------------------------------------------- output helpers */

static int put(FILE *f, const void *p, size_t n, AvErr *e) {
    if (n && fwrite(p, 1, n, f) != n) return av_err_errno(e, "html: write failed");
    return 0;
}

static int puts_(FILE *f, const char *s, AvErr *e) { return put(f, s, strlen(s), e); }

/* HTML text escaping for element content (the title): at most max bytes of s,
 * cut at a UTF-8 character boundary, with an ellipsis when shortened. */
static int put_html_text(FILE *f, const char *s, size_t max, AvErr *e) {
    size_t len = strlen(s), lim = len;
    if (len > max) {
        lim = max;
        while (lim > 0 && ((unsigned char)s[lim] & 0xC0) == 0x80) lim--;
    }
    size_t run = 0;
    for (size_t i = 0; i < lim; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default:
            if ((unsigned char)s[i] < 0x20) rep = " ";
        }
        if (rep) {
            if (put(f, s + run, i - run, e) || puts_(f, rep, e)) return -1;
            run = i + 1;
        }
    }
    if (put(f, s + run, lim - run, e)) return -1;
    return lim < len ? puts_(f, "\xe2\x80\xa6", e) : 0;
}

/* The base-85 alphabet: printable ASCII without " & ' - / < > \ ` (85 of 94). */
static const char HTML_B85[] = "!#$%()*+,.0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{|}~";
_Static_assert(sizeof HTML_B85 == 86, "base-85 alphabet");

/* Base 85 of src: 4 bytes (big-endian, zero-padded at the end) -> 5 characters. */
static int put_base85(FILE *f, const unsigned char *src, size_t n, AvErr *e) {
    char out[65536];
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) v = v << 8 | (i + j < n ? src[i + j] : 0u);
        for (int j = 4; j >= 0; j--) {
            out[o + (size_t)j] = HTML_B85[v % 85];
            v /= 85;
        }
        o += 5;
        if (o + 5 > sizeof out) {
            if (put(f, out, o, e)) return -1;
            o = 0;
        }
    }
    return put(f, out, o, e);
}

/* ---------------------------------------------------------------- templates */

typedef struct {
    char *data;
    size_t len;
    int owned;
} Tmpl;

static int tmpl_load(Tmpl *t, const char *dir, const char *name, AvErr *e) {
    t->data = NULL, t->len = 0, t->owned = 0;
    if (dir) {
        char *path = av_path_join(dir, name);
        if (!path) return av_err(e, "html: out of memory");
        int rc = av_read_file(path, HTML_MAX_TEMPLATE, &t->data, &t->len, e);
        free(path);
        if (rc) return av_err_prefix(e, "html: template %s", name);
        t->owned = 1;
        return 0;
    }
    for (int i = 0; i < av_n_templates; i++)
        if (strcmp(av_templates[i].name, name) == 0) {
            t->data = (char *)(uintptr_t)av_templates[i].data; /* read-only, never freed */
            t->len = av_templates[i].len;
            return 0;
        }
    return av_err(e, "html: no template named %s built in", name);
}

static void tmpl_free(Tmpl *t) {
    if (t->owned) free(t->data);
    t->data = NULL;
}

/* Case-insensitive search for needle (lower-case ASCII) in s[0..n). */
static int contains_ci(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m) {
            char c = s[i + j];
            if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != needle[j]) break;
            j++;
        }
        if (j == m) return 1;
    }
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---------------------------------------------------------------- validation */

/* The tokens a stack's rows or columns are: the decoder's or the encoder's. */
static const TokEncoding *stack_side(const OutDoc *d, int decoder) { return decoder ? d->dec_enc : d->enc; }

/* Checks a token side: flags and text for every token. */
static int check_side(const TokEncoding *t, const char *const *display, const char *what, AvErr *e) {
    if (!t->special || !t->word_start || !t->tokens) return av_err(e, "html: the %s tokens have no flags", what);
    for (int i = 0; i < t->n; i++)
        if (!t->tokens[i] || (display && !display[i])) return av_err(e, "html: %s token %d has no text", what, i);
    return 0;
}

/* Display text of the decoder's tokens (byte-level or SentencePiece pieces read
 * as text), as d->display_tokens is for the encoder's; NULL: the spellings. */
static const char *const *dec_display(const OutDoc *d) {
    return d->dec_enc && d->dec_enc->byte_level ? d->dec_enc->display : NULL;
}

/* An encoder-decoder document (d->stacks, no capture): each stack's name, sizes
 * and tokens agree, and its blocks are the document's layers x every head. */
static int check_stacks(const OutDoc *d, AvErr *e) {
    if (d->cap) return av_err(e, "html: a document has either a capture or encoder-decoder stacks, not both");
    if (d->n_stacks < 1 || d->n_stacks > 3) return av_err(e, "html: %d attention stacks (1 to 3)", d->n_stacks);
    if (d->cfg->num_heads < 1) return av_err(e, "html: the config has no heads");
    if (out_n_layers(d) < 1 || out_n_heads(d) < 1) return av_err(e, "html: no layers or heads selected");
    for (int i = 0; i < out_n_heads(d); i++)
        if (out_head(d, i) < 0 || out_head(d, i) >= d->cfg->num_heads)
            return av_err(e, "html: head %d is not among the %d heads", out_head(d, i), d->cfg->num_heads);
    int uses[2] = {0, 0}; /* encoder, decoder tokens */
    for (int k = 0; k < d->n_stacks; k++) {
        const CapStack *st = &d->stacks[k];
        if (!st->name || (strcmp(st->name, "encoder") && strcmp(st->name, "decoder") && strcmp(st->name, "cross")))
            return av_err(e, "html: unknown attention stack %s", st->name ? st->name : "(null)");
        for (int j = 0; j < k; j++)
            if (!strcmp(d->stacks[j].name, st->name)) return av_err(e, "html: two %s stacks", st->name);
        if (!st->attn) return av_err(e, "html: the %s stack has no attention", st->name);
        if (st->causal && (st->rows_decoder != st->cols_decoder))
            return av_err(e, "html: the %s stack is causal but its rows and columns are different tokens", st->name);
        const TokEncoding *r = stack_side(d, st->rows_decoder), *c = stack_side(d, st->cols_decoder);
        if (!r || !c) return av_err(e, "html: the %s stack needs the decoder's tokens", st->name);
        if (st->n_rows < 1 || st->n_cols < 1 || st->n_rows != r->n || st->n_cols != c->n)
            return av_err(e, "html: the %s stack is %d x %d but has %d x %d tokens", st->name, st->n_rows, st->n_cols,
                          r->n, c->n);
        uses[st->rows_decoder] = uses[st->cols_decoder] = 1;
    }
    if (uses[0] && check_side(d->enc, d->display_tokens, "encoder", e)) return -1;
    if (uses[1] && check_side(d->dec_enc, dec_display(d), "decoder", e)) return -1;
    return 0;
}

/* attnviz diff: B's capture holds every selected layer and head over B's tokens. */
static int check_diff(const OutDoc *d, AvErr *e) {
    const OutDoc *b = d->diff->b;
    if (!b || !b->cap || !b->cap->attn || !b->enc || !d->diff->a_to_b || !d->diff->b_to_a || !d->diff->jsd)
        return av_err(e, "html: incomplete comparison");
    const Capture *c = b->cap;
    if (c->n_tokens != b->enc->n || c->n_tokens < 1 || c->n_heads != d->cfg->num_heads)
        return av_err(e, "html: B's capture has %d tokens x %d heads but B has %d tokens and the config %d heads",
                      c->n_tokens, c->n_heads, b->enc->n, d->cfg->num_heads);
    for (int i = 0; i < out_n_layers(d); i++)
        for (int j = 0; j < out_n_heads(d); j++)
            if (out_layer(d, i) >= c->n_layers || !cap_has(c, out_layer(d, i), out_head(d, j)))
                return av_err(e, "html: layer %d head %d is not in B's capture", out_layer(d, i), out_head(d, j));
    for (int i = 0; i < d->enc->n; i++)
        if (d->diff->a_to_b[i] < -1 || d->diff->a_to_b[i] >= b->enc->n) return av_err(e, "html: bad alignment");
    return check_side(b->enc, b->display_tokens, "B", e);
}

static int check_doc(const OutDoc *d, AvErr *e) {
    if (!d || !d->cfg || !d->enc) return av_err(e, "html: incomplete document");
    if (d->stacks || d->n_stacks) return check_stacks(d, e);
    const Capture *c = d->cap;
    if (!c || !c->attn) return av_err(e, "html: the page needs captured attention (not available with --tokens-only)");
    if (!d->enc->special || !d->enc->word_start) return av_err(e, "html: the encoding has no token flags");
    if (c->n_tokens != d->enc->n || c->n_tokens < 1)
        return av_err(e, "html: capture has %d tokens but the encoding has %d", c->n_tokens, d->enc->n);
    if (c->n_heads != d->cfg->num_heads)
        return av_err(e, "html: capture has %d heads but the config has %d", c->n_heads, d->cfg->num_heads);
    if (out_n_layers(d) < 1 || out_n_heads(d) < 1) return av_err(e, "html: no layers or heads selected");
    for (int i = 0; i < out_n_layers(d); i++)
        if (out_layer(d, i) < 0 || out_layer(d, i) >= c->n_layers)
            return av_err(e, "html: layer %d is not in the capture (%d layers)", out_layer(d, i), c->n_layers);
    for (int i = 0; i < out_n_heads(d); i++)
        if (out_head(d, i) < 0 || out_head(d, i) >= c->n_heads)
            return av_err(e, "html: head %d is not in the capture (%d heads)", out_head(d, i), c->n_heads);
    if ((c->q || c->k) && (!c->q || !c->k || c->head_dim < 1))
        return av_err(e, "html: capture has queries without keys or a bad head size");
    for (int i = 0; i < d->enc->n; i++)
        if (!d->enc->tokens[i] || (d->display_tokens && !d->display_tokens[i]))
            return av_err(e, "html: token %d has no text", i);
    return d->diff ? check_diff(d, e) : 0;
}

static int has_qk(const OutDoc *d) { return d->cap && d->cap->q && d->cap->k; }

/* Decimals for one q or k block (see the encoding notes at the top). */
static int qk_decimals(const float *v, size_t n) {
    double m = 0, ss = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        double a = fabs((double)v[i]);
        if (a > m) m = a;
        ss += a * a;
        cnt++;
    }
    double rms = cnt ? sqrt(ss / (double)cnt) : 0;
    int dec = rms < 0.01 ? 4 : rms < 0.1 ? 3 : 2;
    while (dec > 0 && m * pow(10.0, dec) > 16383.0) dec--;
    return dec;
}

/* ---------------------------------------------------------------- tokens */

/* ---------------------------------------------------------------- meta JSON */

static void put_str_or_null(FILE *f, const char *s) {
    if (s) json_write_string(f, s);
    else fputs("null", f);
}

static void put_flags(FILE *f, const char *key, const unsigned char *v, int n) {
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
    fputc(']', f);
}

/* One side's tokens for an encoder-decoder page: spellings, display text (or
 * null) and the flags, as the top level has them for a self-attention page. */
static void write_side(FILE *f, const char *name, const TokEncoding *t, const char *const *display, int first) {
    fprintf(f, "%s\"%s\":{\"tokens\":[", first ? "" : ",", name);
    for (int i = 0; i < t->n; i++) {
        if (i) fputc(',', f);
        json_write_string(f, t->tokens[i]);
    }
    fputs("],\"display_tokens\":", f);
    if (!display) {
        fputs("null", f);
    } else {
        fputc('[', f);
        for (int i = 0; i < t->n; i++) {
            if (i) fputc(',', f);
            json_write_string(f, display[i]);
        }
        fputc(']', f);
    }
    put_flags(f, "special", t->special, t->n);
    put_flags(f, "word_start", t->word_start, t->n);
    fputc('}', f);
}

/* "sides" (the encoder's and decoder's tokens) and "stacks" (each stack's
 * name, which side its rows and columns are, its size and causality, in
 * payload order: chunk "av-<name>-<i>" per selected layer). */
static void write_stacks_meta(FILE *f, const OutDoc *d) {
    int uses[2] = {0, 0};
    for (int k = 0; k < d->n_stacks; k++) uses[d->stacks[k].rows_decoder] = uses[d->stacks[k].cols_decoder] = 1;
    fputs(",\"sides\":{", f);
    if (uses[0]) write_side(f, "encoder", d->enc, d->display_tokens, 1);
    if (uses[1]) write_side(f, "decoder", d->dec_enc, dec_display(d), !uses[0]);
    fputs("},\"stacks\":[", f);
    for (int k = 0; k < d->n_stacks; k++) {
        const CapStack *st = &d->stacks[k];
        fprintf(f, "%s{\"name\":\"%s\",\"rows\":\"%s\",\"cols\":\"%s\",\"n_rows\":%d,\"n_cols\":%d,\"causal\":%s",
                k ? "," : "", st->name, st->rows_decoder ? "decoder" : "encoder", st->cols_decoder ? "decoder" : "encoder",
                st->n_rows, st->n_cols, st->causal ? "true" : "false");
        if (st->n_layers) { /* unequal depths: the stack's own layers (meta.layers are the document's) */
            fputs(",\"layers\":[", f);
            for (int i = 0; i < st->n_layers; i++) fprintf(f, "%s%d", i ? "," : "", st->layers[i]);
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputc(']', f);
}

static int write_meta(FILE *f, const OutDoc *d, const int *qk_dec, AvErr *e) {
    const ModelConfig *cfg = d->cfg;
    const TokEncoding *enc = d->enc;
    const Capture *c = d->cap;
    int nl = out_n_layers(d), nh = out_n_heads(d);

    /* what the JSON says about the run, in the JSON's words; then what only the page needs */
    fputs("{\"format\":1,", f);
    if (json_write_common(f, d, 1, e)) return av_err_prefix(e, "html");
    fputs(",\"special\":[", f);
    for (int i = 0; i < enc->n; i++) fprintf(f, "%s%d", i ? "," : "", enc->special[i]);
    fputs("],\"word_start\":[", f);
    for (int i = 0; i < enc->n; i++) fprintf(f, "%s%d", i ? "," : "", enc->word_start[i]);
    fprintf(f, "],\"init_layer\":%d,\"init_head\":%d,\"precision\":%d", d->init_layer, d->init_head,
            d->precision);
    if (d->init_view) fprintf(f, ",\"init_view\":\"%s\"", d->init_view); /* cli.c admits known names only */
    if (d->theme) fprintf(f, ",\"theme\":\"%s\"", d->theme);
    if (d->init_heads) {
        fputs(",\"init_heads\":[", f);
        for (int i = 0; i < d->n_init_heads; i++) fprintf(f, "%s%d", i ? "," : "", d->init_heads[i]);
        fputc(']', f);
    }
    fputs(",\"head_descriptions\":", f);
    if (!d->head_descriptions) {
        fputs("null", f);
    } else {
        fputc('[', f);
        for (int i = 0; i < nl; i++) {
            fputs(i ? ",[" : "[", f);
            for (int j = 0; j < nh; j++) {
                if (j) fputc(',', f);
                put_str_or_null(f, d->head_descriptions[(size_t)out_layer(d, i) * cfg->num_heads + out_head(d, j)]);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fprintf(f, ",\"n\":%d,\"attention\":{\"scale\":%d,\"codes\":\"u16\",\"planes\":2,\"compression\":\"deflate\"}",
            enc->n, (int)HTML_ATT_SCALE);
    /* value-weighted attention: in the payload (offline), or from the server (live: its capture has the norms);
     * ALTI and rollout (mixing.h): one matrix per selected layer, through it, in chunks av-NAME-<i> */
    if (c && !d->diff && d->n_measures) {
        fputs(",\"measures\":[\"attention\"", f);
        for (int k = 0; k < d->n_measures; k++) fprintf(f, ",\"%s\"", d->measures[k]);
        fputs("],\"per_layer_measures\":[", f);
        for (int k = 0; k < d->n_mix; k++) fprintf(f, "%s\"%s\"", k ? "," : "", d->mix_name[k]);
        fputc(']', f);
    } else if (c && !d->diff && (c->nattn || c->vnorm)) {
        fputs(",\"measures\":[\"attention\",\"norm\"]", f);
    }
    if (qk_dec) {
        fprintf(f, ",\"qk\":{\"head_dim\":%d,\"codes\":\"i16\",\"planes\":2,\"compression\":\"deflate\",\"dec\":[",
                c->head_dim);
        for (int i = 0; i < nl; i++) {
            fputs(i ? ",[" : "[", f);
            for (int j = 0; j < nh; j++)
                fprintf(f, "%s[%d,%d]", j ? "," : "", qk_dec[((size_t)i * nh + j) * 2],
                        qk_dec[((size_t)i * nh + j) * 2 + 1]);
            fputc(']', f);
        }
        fputs("]}", f);
    } else {
        fputs(",\"qk\":null", f);
    }
    if (d->n_stacks) write_stacks_meta(f, d); /* check_doc admitted the names: plain ASCII */
    if (d->diff) {
        fputs(",\"diff\":{", f);
        if (diff_write_members(f, d, e)) return av_err_prefix(e, "html");
        write_side(f, "side_b", d->diff->b->enc, d->diff->b->display_tokens, 0);
        fputc('}', f);
    }
    fputc('}', f);
    if (ferror(f)) return av_err_errno(e, "html: write failed");
    return 0;
}

/* ---------------------------------------------------------------- payload */

typedef struct {
    unsigned char *z; /* zlib stream */
    size_t len;
} Blob;

typedef struct {
    const OutDoc *d;
    int nl, nh;
    int n_att;         /* attention chunks: one per selected layer (of each stack, stack by stack; of a diff's B;
                          of value-weighted attention), then ALTI's and rollout's, one block per selected layer
                          (mix_job) */
    size_t att_raw;    /* bytes of the largest attention chunk before compression */
    const int *qk_dec; /* decimals per (layer, head, q|k) */
    Blob *att, *qk;    /* att: n_att chunks; qk: one per selected layer */
    int next;          /* next job: [0, n_att) attention, [n_att, n_att + nl) q/k */
    int n_jobs;
    pthread_mutex_t mu;
    int failed, mu_ok;
    char err[200];
} Enc;

static inline uint16_t zigzag16(int v) { return (uint16_t)(v >= 0 ? 2 * v : -2 * v - 1); }

/* Selected head hj of attention chunk `job` (rows x cols): the capture's
 * selected layer job (a diff's B capture for job >= nl), or selected layer
 * job % nl of stack job / nl. */
/* --measure norm: chunks [nl, 2 nl) are value-weighted attention's */
static int norm_job(const OutDoc *d, int job) {
    return d->cap && !d->diff && d->cap->nattn && job / out_n_layers(d) == 1;
}

/* --measure alti|rollout: after attention's (and value-weighted attention's) chunks, d->mix[k]'s, one block
 * per selected layer: k, or -1 for another chunk */
static int mix_job(const OutDoc *d, int job) {
    if (!d->cap || d->diff) return -1;
    const int k = job / out_n_layers(d) - 1 - (d->cap->nattn != NULL);
    return k >= 0 && k < d->n_mix ? k : -1;
}

/* A stacks document's attention chunk `job`: its stack (*k) and index into that stack's layers
 * (stack by stack; stacks of unequal depth hold as many chunks as they have layers). */
static int stack_job(const OutDoc *d, int job, int *k) {
    for (*k = 0; *k < d->n_stacks - 1 && job >= out_stack_n_layers(d, &d->stacks[*k]); ++*k)
        job -= out_stack_n_layers(d, &d->stacks[*k]);
    return job;
}

/* The first chunk of stack k. */
static int stack_first_job(const OutDoc *d, int k) {
    int job = 0;
    for (int j = 0; j < k; j++) job += out_stack_n_layers(d, &d->stacks[j]);
    return job;
}

static const float *att_block(const OutDoc *d, int job, int hj, size_t *rows, size_t *cols) {
    int nl = out_n_layers(d);
    if (d->cap) {
        /* a diff document: chunks [nl, 2 nl) are B's */
        const Capture *c = job >= nl && d->diff ? d->diff->b->cap : d->cap;
        *rows = *cols = (size_t)c->n_tokens;
        if (mix_job(d, job) >= 0) return mix_doc_layer(d, mix_job(d, job), job % nl, 0);
        if (norm_job(d, job)) return cap_nattn(c, out_layer(d, job % nl), out_head(d, hj));
        return cap_attn(c, out_layer(d, job % nl), out_head(d, hj));
    }
    int k, li = stack_job(d, job, &k);
    const CapStack *st = &d->stacks[k];
    *rows = (size_t)st->n_rows, *cols = (size_t)st->n_cols;
    return st->attn + ((size_t)li * d->cfg->num_heads + (size_t)out_head(d, hj)) * *rows * *cols;
}

/* One attention block's nn weights as codes round(a * 1e4): low bytes to plo, high bytes to phi. */
static void quant_block(const float *a, size_t nn, unsigned char *plo, unsigned char *phi) {
    for (size_t i = 0; i < nn; i++) {
        /* float * 1e4 is exact in double, so this is the float rounded half-up. */
        double x = (double)a[i] * HTML_ATT_SCALE + 0.5;
        unsigned v = x >= 1.0 ? (x >= HTML_ATT_SCALE ? (unsigned)HTML_ATT_SCALE : (unsigned)x) : 0u;
        plo[i] = (unsigned char)(v & 255);
        phi[i] = (unsigned char)(v >> 8);
    }
}

/* Quantizes attention chunk `job` into raw (2 planes of nh*rows*cols);
 * value-weighted chunks as their rows' shares (shares: rows*cols floats). */
static void quant_att(const OutDoc *d, int job, unsigned char *raw, float *shares) {
    int nh = mix_job(d, job) >= 0 ? 1 : out_n_heads(d);
    size_t r, c;
    att_block(d, job, 0, &r, &c);
    size_t nn = r * c, cnt = (size_t)nh * nn;
    for (int hj = 0; hj < nh; hj++) {
        const float *a = att_block(d, job, hj, &r, &c);
        if (norm_job(d, job)) na_shares(shares, a, (int)r), a = shares;
        quant_block(a, nn, raw + (size_t)hj * nn, raw + cnt + (size_t)hj * nn);
    }
}

/* Quantizes layer li's queries and keys into raw (see the notes at the top). */
static void quant_qk(const OutDoc *d, int li, const int *qk_dec, unsigned char *raw, int *code, int *off) {
    const Capture *c = d->cap;
    int nh = out_n_heads(d), l = out_layer(d, li);
    size_t n = (size_t)c->n_tokens, dh = (size_t)c->head_dim;
    size_t blk = n * dh, per = dh + blk, cnt = (size_t)nh * 2 * per;
    unsigned char *lo = raw, *hi = raw + cnt;
    for (int hj = 0; hj < nh; hj++)
        for (int w = 0; w < 2; w++) {
            const float *v = w ? cap_k(c, l, out_head(d, hj)) : cap_q(c, l, out_head(d, hj));
            double sc = pow(10.0, qk_dec[((size_t)li * nh + hj) * 2 + w]);
            for (size_t i = 0; i < blk; i++) {
                double x = isfinite(v[i]) ? floor((double)v[i] * sc + 0.5) : 0.0;
                if (x > 16383) x = 16383;
                if (x < -16383) x = -16383;
                code[i] = (int)x;
            }
            for (size_t j = 0; j < dh; j++) {
                long long sum = 0;
                for (size_t t = 0; t < n; t++) sum += code[t * dh + j];
                off[j] = (int)llround((double)sum / (double)n);
            }
            size_t o = ((size_t)hj * 2 + (size_t)w) * per;
            for (size_t j = 0; j < dh; j++, o++) {
                uint16_t u = zigzag16(off[j]);
                lo[o] = (unsigned char)(u & 255), hi[o] = (unsigned char)(u >> 8);
            }
            for (size_t i = 0; i < blk; i++, o++) {
                uint16_t u = zigzag16(code[i] - off[i % dh]);
                lo[o] = (unsigned char)(u & 255), hi[o] = (unsigned char)(u >> 8);
            }
        }
}

/* zlib stream of raw[0..n) into a new exact-size buffer; returns 0 or a zlib code. */
static int deflate_blob(const unsigned char *raw, size_t n, Blob *out) {
    if ((uLong)n != n || n > 0xffffffffu) return Z_BUF_ERROR;
    size_t cap = (size_t)compressBound((uLong)n) + 64;
    unsigned char *z = malloc(cap);
    if (!z) return Z_MEM_ERROR;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int zr = deflateInit2(&zs, HTML_ZLEVEL, Z_DEFLATED, 15, 8, Z_RLE);
    if (zr != Z_OK) {
        free(z);
        return zr;
    }
    zs.next_in = (unsigned char *)(uintptr_t)raw;
    zs.avail_in = (uInt)n;
    zs.next_out = z;
    zs.avail_out = (uInt)(cap > 0xffffffffu ? 0xffffffffu : cap);
    zr = deflate(&zs, Z_FINISH);
    size_t zn = (size_t)zs.total_out;
    deflateEnd(&zs);
    if (zr != Z_STREAM_END) {
        free(z);
        return zr == Z_OK ? Z_BUF_ERROR : zr;
    }
    unsigned char *shrunk = realloc(z, zn ? zn : 1);
    out->z = shrunk ? shrunk : z;
    out->len = zn;
    return 0;
}

static void enc_fail(Enc *en, const char *msg, int code) {
    pthread_mutex_lock(&en->mu);
    if (!en->failed) snprintf(en->err, sizeof en->err, "%s (%d)", msg, code);
    en->failed = 1;
    pthread_mutex_unlock(&en->mu);
}

static void *enc_worker(void *arg) {
    Enc *en = arg;
    const OutDoc *d = en->d;
    size_t n = en->qk ? (size_t)d->cap->n_tokens : 0, dh = en->qk ? (size_t)d->cap->head_dim : 0;
    size_t att_raw = en->att_raw;
    size_t qk_raw = en->qk ? (size_t)en->nh * 2 * (dh + n * dh) * 2 : 0;
    unsigned char *raw = NULL;
    int *code = NULL, *off = NULL;
    float *shares = NULL;
    for (;;) {
        pthread_mutex_lock(&en->mu);
        int job = en->failed ? en->n_jobs : en->next++;
        pthread_mutex_unlock(&en->mu);
        if (job >= en->n_jobs) break;
        int is_qk = job >= en->n_att, li = is_qk ? job - en->n_att : job;
        if (!raw) {
            raw = malloc(att_raw > qk_raw ? att_raw : qk_raw);
            if (en->qk) {
                code = malloc(sizeof *code * n * dh);
                off = malloc(sizeof *off * dh);
            }
            if (!raw || (en->qk && (!code || !off))) {
                enc_fail(en, "out of memory", 0);
                break;
            }
        }
        if (!is_qk && norm_job(d, li) && !shares &&
            !(shares = malloc(sizeof *shares * (size_t)d->cap->n_tokens * (size_t)d->cap->n_tokens))) {
            enc_fail(en, "out of memory", 0);
            break;
        }
        if (is_qk) quant_qk(d, li, en->qk_dec, raw, code, off);
        else quant_att(d, li, raw, shares);
        size_t len = qk_raw, r, c;
        if (!is_qk) att_block(d, li, 0, &r, &c), len = (size_t)(mix_job(d, li) >= 0 ? 1 : en->nh) * r * c * 2;
        int zr = deflate_blob(raw, len, is_qk ? &en->qk[li] : &en->att[li]);
        if (zr) enc_fail(en, "deflate failed", zr);
    }
    free(raw);
    free(code);
    free(off);
    free(shares);
    return NULL;
}

/* Encodes jobs [first, last) with up to HTML_THREADS threads. */
static int enc_run(Enc *en, int first, int last, AvErr *e) {
    en->next = first;
    en->n_jobs = last;
    pthread_t th[HTML_THREADS];
    int started = 0;
    int want = last - first < HTML_THREADS ? last - first : HTML_THREADS;
    for (int t = 1; t < want; t++) {
        if (pthread_create(&th[started], NULL, enc_worker, en) != 0) break;
        started++;
    }
    enc_worker(en);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    if (en->failed) return av_err(e, "html: encoding the payload: %s", en->err);
    return 0;
}

static size_t b85_len(size_t n) { return (n + 3) / 4 * 5; }

static void blobs_free(Blob *b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++) free(b[i].z);
    free(b);
}

/* Encodes every chunk into memory. When the payload text would pass the size
 * budget, queries/keys are re-encoded with one decimal fewer (never below 1). */
static int encode_payload(Enc *en, const OutDoc *d, int *qk_dec, AvErr *e) {
    memset(en, 0, sizeof *en);
    en->d = d, en->nl = out_n_layers(d), en->nh = out_n_heads(d), en->qk_dec = qk_dec;
    const int groups = d->cap ? (d->diff ? 2 : 1 + (d->cap->nattn != NULL) + d->n_mix) : d->n_stacks;
    en->n_att = d->cap ? en->nl * groups : stack_first_job(d, d->n_stacks);
    for (int k = 0; k < groups; k++) {
        size_t r, c;
        att_block(d, d->cap ? k * en->nl : stack_first_job(d, k), 0, &r, &c);
        if (r * c * 2 * (size_t)en->nh > en->att_raw) en->att_raw = r * c * 2 * (size_t)en->nh;
    }
    if (pthread_mutex_init(&en->mu, NULL) != 0) return av_err(e, "html: mutex init failed");
    en->mu_ok = 1;
    en->att = calloc((size_t)en->n_att, sizeof *en->att);
    if (qk_dec) en->qk = calloc((size_t)en->nl, sizeof *en->qk);
    if (!en->att || (qk_dec && !en->qk)) return av_err(e, "html: out of memory");
    if (enc_run(en, 0, en->n_att, e)) return -1;
    if (!qk_dec) return 0;
    size_t att_text = 0;
    for (int i = 0; i < en->n_att; i++) att_text += b85_len(en->att[i].len);
    size_t nb = (size_t)en->nl * en->nh * 2;
    for (int shift = 0;; shift++) {
        if (enc_run(en, en->n_att, en->n_att + en->nl, e)) return -1;
        size_t qk_text = 0;
        for (int i = 0; i < en->nl; i++) qk_text += b85_len(en->qk[i].len);
        if (att_text + qk_text <= HTML_PAYLOAD_BUDGET || shift >= 1) break;
        int lowered = 0;
        for (size_t i = 0; i < nb; i++)
            if (qk_dec[i] > 1) qk_dec[i]--, lowered = 1;
        if (!lowered) break;
        for (int i = 0; i < en->nl; i++) {
            free(en->qk[i].z);
            en->qk[i].z = NULL;
        }
    }
    return 0;
}

static void enc_free(Enc *en) {
    blobs_free(en->att, en->n_att);
    blobs_free(en->qk, en->nl);
    en->att = en->qk = NULL;
    if (en->mu_ok) pthread_mutex_destroy(&en->mu);
    en->mu_ok = 0;
}

static int write_blob(FILE *f, const char *id, const Blob *b, AvErr *e) {
    if (fprintf(f, "<script type=\"application/octet-stream\" id=\"%s\" data-z=\"%zu\">", id, b->len) < 0)
        return av_err_errno(e, "html: write failed");
    if (put_base85(f, b->z, b->len, e)) return -1;
    return puts_(f, "</script>\n", e);
}

static int write_payload(FILE *f, const Enc *en, AvErr *e) {
    char id[48];
    for (int j = 0; j < en->n_att; j++) {
        /* self-attention: av-att-<i>; stacks: av-<name>-<i> (check_doc admitted the names) */
        const int mk = mix_job(en->d, j);
        if (en->d->cap && mk >= 0)
            snprintf(id, sizeof id, "av-%s-%d", en->d->mix_name[mk], j % en->nl);
        else if (en->d->cap)
            snprintf(id, sizeof id, j < en->nl ? "av-att-%d" : en->d->diff ? "av-attb-%d" : "av-natt-%d", j % en->nl);
        else {
            int k, li = stack_job(en->d, j, &k);
            snprintf(id, sizeof id, "av-%s-%d", en->d->stacks[k].name, li);
        }
        if (write_blob(f, id, &en->att[j], e)) return -1;
    }
    for (int li = 0; en->qk && li < en->nl; li++) {
        snprintf(id, sizeof id, "av-qk-%d", li);
        if (write_blob(f, id, &en->qk[li], e)) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the page */

static int write_include(FILE *f, const char *dir, const char *name, AvErr *e) {
    Tmpl t;
    if (tmpl_load(&t, dir, name, e)) return -1;
    int rc = 0;
    /* Included text sits inside <script> or <style>: it must not end it early
     * (or, for scripts, enter the "escaped" script-data state with <!--). */
    if (ends_with(name, ".js") && (contains_ci(t.data, t.len, "</script") || contains_ci(t.data, t.len, "<!--")))
        rc = av_err(e, "html: template %s contains </script or <!--", name);
    else if (ends_with(name, ".css") && contains_ci(t.data, t.len, "</style"))
        rc = av_err(e, "html: template %s contains </style", name);
    else
        rc = put(f, t.data, t.len, e);
    tmpl_free(&t);
    return rc;
}

static int glob_match(const char *name, const char *pre, size_t npre, const char *suf) {
    return strncmp(name, pre, npre) == 0 && strlen(name) >= npre + strlen(suf) && ends_with(name, suf);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int view_wanted(const char *dir, const char *name, const OutDoc *d, AvErr *e);

/* {{include A*B}}: the matching templates of the folder or of the binary; for a
 * document's own page, only the views it can show (view_wanted). */
static int write_include_glob(FILE *f, const char *dir, const char *pat, const OutDoc *d, AvErr *e) {
    const char *star = strchr(pat, '*');
    size_t npre = (size_t)(star - pat);
    const char *suf = star + 1;
    if (strchr(suf, '*')) return av_err(e, "html: include pattern %s has more than one *", pat);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    DIR *dd = NULL;
    if (dir && !(dd = opendir(dir))) return av_err(e, "html: cannot list templates folder %s", dir);
    for (int i = 0;; i++) {
        const char *name;
        if (dd) {
            struct dirent *de = readdir(dd);
            if (!de) break;
            name = de->d_name;
        } else {
            if (i >= av_n_templates) break;
            name = av_templates[i].name;
        }
        if (!glob_match(name, pat, npre, suf)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) {
                rc = av_err(e, "html: out of memory");
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(name))) {
            rc = av_err(e, "html: out of memory");
            break;
        }
        n++;
    }
    if (dd) closedir(dd);
    if (rc == 0 && n == 0) rc = av_err(e, "html: no template matches %s", pat);
    if (rc == 0) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const int want = d ? view_wanted(dir, names[i], d, e) : 1;
        rc = want < 0 ? -1 : want ? write_include(f, dir, names[i], e) : 0;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* The views the built-in templates register: each templates/view_*.js ends
 * with Views.register({ id: 'NAME', order: N, ... }), and `diffOnly: true`
 * marks a view only pages of attnviz diff have (templates/views.js). */
typedef struct {
    char id[32];
    long order;
    int diff_only;
    char needs[32]; /* `needs: 'MEMBER'`: the document member the view draws ("image"), or "" */
} ViewEntry;

/* The first `key` in s that starts a name (not "valid: '" for "id: '"). */
static const char *find_key(const char *s, const char *key) {
    for (const char *p = s; (p = strstr(p, key)); p++)
        if (p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '$')) return p;
    return NULL;
}

static int view_entry(const char *js, ViewEntry *v) {
    const char *r = strstr(js, "Views.register({");
    const char *id = r ? find_key(r, "id: '") : NULL;
    const char *q = id ? strchr(id + 5, '\'') : NULL;
    const char *ord = r ? find_key(r, "order: ") : NULL;
    if (!q || !ord || q == id + 5 || (size_t)(q - id - 5) >= sizeof v->id) return -1;
    memcpy(v->id, id + 5, (size_t)(q - id - 5));
    v->id[q - id - 5] = 0;
    v->order = strtol(ord + 7, NULL, 10);
    v->diff_only = find_key(r, "diffOnly: true") != NULL;
    v->needs[0] = 0;
    const char *nd = find_key(r, "needs: '"), *nq = nd ? strchr(nd + 8, '\'') : NULL;
    if (nq && (size_t)(nq - nd - 8) < sizeof v->needs) {
        memcpy(v->needs, nd + 8, (size_t)(nq - nd - 8));
        v->needs[nq - nd - 8] = 0;
    }
    return 0;
}

/* Whether a document's own page includes the template `name`: a view only a
 * page of attnviz diff shows (diffOnly) only on those, a view that draws a
 * member of the document (needs: 'image') only when it has that member; every
 * other template, and a view whose entry is not written with literals (one in
 * a --templates folder), always. The live page has no document: it includes
 * them all (any run may come). 1, 0, or -1 on a read error. */
static int view_wanted(const char *dir, const char *name, const OutDoc *d, AvErr *e) {
    if (!glob_match(name, "view_", 5, ".js")) return 1;
    Tmpl t;
    if (tmpl_load(&t, dir, name, e)) return -1;
    ViewEntry v;
    char *js = malloc(t.len + 1);
    int want = 1;
    if (!js) want = av_err(e, "html: out of memory");
    else {
        memcpy(js, t.data, t.len);
        js[t.len] = 0;
        if (view_entry(js, &v) == 0)
            want = (v.diff_only && !d->diff) || (!strcmp(v.needs, "image") && !d->image) ||
                           (!strcmp(v.needs, "measures") && (d->diff || !d->cap || !(d->n_measures || d->cap->nattn || d->cap->vnorm)))
                       ? 0
                       : 1;
    }
    free(js);
    tmpl_free(&t);
    return want;
}

static int cmp_views(const void *a, const void *b) {
    long x = ((const ViewEntry *)a)->order, y = ((const ViewEntry *)b)->order;
    return (x > y) - (x < y);
}

/* Appends list[0..n) to out as "a, b or c". */
static void join_views(char *out, size_t cap, const char **list, int n) {
    for (int i = 0; i < n; i++) {
        size_t o = strlen(out);
        snprintf(out + o, cap - o, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", list[i]);
    }
}

int html_view_known(const char *name, int diff, char *names, size_t cap) {
    ViewEntry v[32];
    int n = 0, known = 0;
    for (int i = 0; i < av_n_templates && n < 32; i++)
        if (glob_match(av_templates[i].name, "view_", 5, ".js") &&
            view_entry((const char *)av_templates[i].data, &v[n]) == 0)
            n++;
    qsort(v, (size_t)n, sizeof *v, cmp_views);
    const char *all[32], *only[32];
    int na = 0, no = 0;
    for (int i = 0; i < n; i++) {
        if (!v[i].diff_only) all[na++] = v[i].id;
        else if (diff) only[no++] = v[i].id;
        else continue;
        if (strcmp(v[i].id, name) == 0) known = 1;
    }
    if (cap) {
        names[0] = 0;
        join_views(names, cap, all, na);
        if (no) {
            size_t o = strlen(names);
            snprintf(names + o, cap - o, " (or ");
            join_views(names, cap, only, no);
            o = strlen(names);
            snprintf(names + o, cap - o, ")");
        }
    }
    return known;
}

/* What fills page.html's placeholders other than the includes. */
typedef struct {
    const OutDoc *d;        /* NULL: a live page, or a page of pieces */
    const int *qk_dec;
    const Enc *en;
    const char *live_json;  /* the live page's meta.live */
    /* a page of pieces (html_write_pieces): title, meta and chunks made elsewhere */
    const char *title, *meta_json;
    const HtmlChunk *chunks;
    int n_chunks;
} PageParts;

static int fill_page(FILE *f, const char *templates_dir, const PageParts *pp, AvErr *e) {
    Tmpl page;
    if (tmpl_load(&page, templates_dir, "page.html", e)) return -1;
    int rc = 0;
    const OutDoc *d = pp->d;
    const char *p = page.data, *end = page.data + page.len;
    while (p < end && rc == 0) {
        const char *open = NULL;
        for (const char *q = p; q + 1 < end; q++)
            if (q[0] == '{' && q[1] == '{') {
                open = q;
                break;
            }
        if (!open) {
            rc = put(f, p, (size_t)(end - p), e);
            break;
        }
        const char *close = NULL;
        for (const char *q = open + 2; q + 1 < end && q - open < 200; q++)
            if (q[0] == '}' && q[1] == '}') {
                close = q;
                break;
            }
        if (!close) {
            rc = av_err(e, "html: unterminated {{ in page.html");
            break;
        }
        if (put(f, p, (size_t)(open - p), e)) {
            rc = -1;
            break;
        }
        char name[200];
        size_t nlen = (size_t)(close - open - 2);
        memcpy(name, open + 2, nlen);
        name[nlen] = '\0';
        if (strcmp(name, "title") == 0) {
            if (pp->meta_json) {
                rc = put_html_text(f, pp->title ? pp->title : "", 80, e);
            } else if (!d) {
                rc = puts_(f, "attnviz serve", e);
            } else {
                rc = put_html_text(f, d->text_a ? d->text_a : "", 80, e);
                if (!rc && d->text_b) rc = puts_(f, " / ", e) || put_html_text(f, d->text_b, 40, e) ? -1 : 0;
            }
        } else if (strcmp(name, "csp_connect") == 0) {
            /* the live page fetches from the server that served it; the offline page fetches nothing */
            if (!d && !pp->meta_json) rc = puts_(f, " connect-src 'self';", e);
        } else if (strcmp(name, "meta") == 0) {
            if (pp->meta_json) {
                /* html_write_meta's JSON: json_write_string escapes <, > and & in strings, so it cannot end the script */
                rc = puts_(f, pp->meta_json, e);
            } else if (d) {
                rc = write_meta(f, d, pp->qk_dec, e);
            } else {
                fputs("{\"live\":", f);
                fputs(pp->live_json, f);
                fputc('}', f);
            }
        } else if (strcmp(name, "payload") == 0) {
            if (d) rc = write_payload(f, pp->en, e);
            for (int i = 0; i < pp->n_chunks && rc == 0; i++)
                rc = write_blob(f, pp->chunks[i].id, &(Blob){pp->chunks[i].z, pp->chunks[i].len}, e);
        } else if (strncmp(name, "include ", 8) == 0 && strchr(name + 8, '*')) {
            /* a document's page: the views it can show; the live page and a page of pieces: all */
            rc = write_include_glob(f, templates_dir, name + 8, pp->meta_json ? NULL : d, e);
        } else if (strncmp(name, "include ", 8) == 0 && d && !pp->meta_json && strcmp(name + 8, "tiles.js") == 0) {
            /* a document's own page has every matrix and no server: tiles (serve's long inputs and
             * their downloaded page) stay off, and the views read only these three flags */
            rc = puts_(f, "const Tiles = { on: false, offline: false, hasStats: false };\n", e);
        } else if (strncmp(name, "include ", 8) == 0 && d && !pp->meta_json && !d->explain &&
                   strcmp(name + 8, "explain.js") == 0) {
            /* the --explain panel only on a page of a run with --explain (page.js calls Explain.init) */
            rc = puts_(f, "const Explain = { init() {} };\n", e);
        } else if (strncmp(name, "include ", 8) == 0) {
            rc = write_include(f, templates_dir, name + 8, e);
        } else {
            rc = av_err(e, "html: unknown placeholder {{%s}} in page.html", name);
        }
        p = close + 2;
    }
    tmpl_free(&page);
    if (rc == 0 && ferror(f)) rc = av_err_errno(e, "html: write failed");
    return rc;
}

double html_page_estimate(int rows, int cols, size_t blocks, int causal, size_t qk_values) {
    if (rows < 1 || cols < 1) return 0;
    /* cells a head's chunk carries that are not 0 by the mask */
    const double cells = causal && rows == cols ? (double)rows * (rows + 1) / 2 : (double)rows * cols;
    /* bytes per cell after deflate and base 85: 1.3 at 100 keys, falling as (keys / 100)^-0.35
     * (measured 1.15 to 0.35 from 100 to 2,009 keys); never more than two bytes' codes in base 85 */
    double per = 1.3 * pow(cols / 100.0, -0.35);
    if (per > 2.5) per = 2.5;
    /* the page's code and styles (test_html holds them under 320 kB), its meta's few dozen bytes per token,
     * q/k at two bytes a value at most */
    return 3.2e5 + 40.0 * rows + (double)blocks * cells * per + 2.0 * (double)qk_values;
}

int html_write_doc(FILE *f, const OutDoc *d, const char *templates_dir, AvErr *e) {
    if (check_doc(d, e)) return -1;
    int nl = out_n_layers(d), nh = out_n_heads(d);
    int *qk_dec = NULL;
    if (has_qk(d)) {
        qk_dec = malloc(sizeof *qk_dec * (size_t)nl * nh * 2);
        if (!qk_dec) return av_err(e, "html: out of memory");
        size_t blk = (size_t)d->cap->n_tokens * d->cap->head_dim;
        for (int li = 0; li < nl; li++)
            for (int hj = 0; hj < nh; hj++) {
                qk_dec[((size_t)li * nh + hj) * 2] = qk_decimals(cap_q(d->cap, out_layer(d, li), out_head(d, hj)), blk);
                qk_dec[((size_t)li * nh + hj) * 2 + 1] =
                    qk_decimals(cap_k(d->cap, out_layer(d, li), out_head(d, hj)), blk);
            }
    }
    Enc en;
    int rc = encode_payload(&en, d, qk_dec, e);
    if (rc == 0) {
        PageParts pp = {d, qk_dec, &en, NULL, NULL, NULL, NULL, 0};
        rc = fill_page(f, templates_dir, &pp, e);
    }
    enc_free(&en);
    free(qk_dec);
    return rc;
}

int html_write_live(FILE *f, const char *live_json, const char *templates_dir, AvErr *e) {
    if (!live_json || live_json[0] != '{') return av_err(e, "html: the live page needs its description");
    PageParts pp = {NULL, NULL, NULL, live_json, NULL, NULL, NULL, 0};
    return fill_page(f, templates_dir, &pp, e);
}

int html_write_pieces(FILE *f, const char *title, const char *meta_json, const HtmlChunk *chunks, int n_chunks,
                      const char *templates_dir, AvErr *e) {
    if (!meta_json || meta_json[0] != '{') return av_err(e, "html: the page needs its meta");
    PageParts pp = {NULL, NULL, NULL, NULL, title, meta_json, chunks, n_chunks};
    return fill_page(f, templates_dir, &pp, e);
}

int html_encode_codes(const uint16_t *codes, size_t count, unsigned char **z, size_t *zlen, AvErr *e) {
    *z = NULL, *zlen = 0;
    if (count == 0 || count > ((size_t)1 << 31)) return av_err(e, "html: %zu codes do not fit one chunk", count);
    unsigned char *raw = malloc(2 * count);
    if (!raw) return av_err(e, "html: out of memory");
    for (size_t i = 0; i < count; i++) raw[i] = (unsigned char)(codes[i] & 0xff), raw[count + i] = (unsigned char)(codes[i] >> 8);
    Blob blob = {0};
    int zrc = deflate_blob(raw, 2 * count, &blob);
    free(raw);
    if (zrc != Z_OK) return av_err(e, "html: compression failed (zlib %d)", zrc);
    *z = blob.z, *zlen = blob.len;
    return 0;
}

int html_write_meta(FILE *f, const OutDoc *d, AvErr *e) {
    if (!d || !d->cfg || !d->enc || (!d->cap && !d->n_stacks)) return av_err(e, "html: incomplete document");
    if (!d->enc->special || !d->enc->word_start) return av_err(e, "html: the encoding has no token flags");
    if (d->n_stacks && check_stacks(d, e)) return -1; /* attnviz serve's encoder-decoder runs: the page's stacks */
    return write_meta(f, d, NULL, e);
}

int html_encode_attention(HtmlBlockFn get, void *ctx, int n_blocks, size_t rows, size_t cols, unsigned char **z,
                          size_t *zlen, AvErr *e) {
    *z = NULL, *zlen = 0;
    size_t nn = rows * cols, cnt = (size_t)n_blocks * nn;
    if (n_blocks < 1 || nn == 0 || cnt / (size_t)n_blocks != nn || cnt > ((size_t)1 << 31))
        return av_err(e, "html: %d blocks of %zu x %zu do not fit one chunk", n_blocks, rows, cols);
    unsigned char *raw = malloc(2 * cnt);
    if (!raw) return av_err(e, "html: out of memory");
    for (int b = 0; b < n_blocks; b++) {
        const float *a = get(ctx, b, e);
        if (!a) {
            free(raw);
            return -1;
        }
        quant_block(a, nn, raw + (size_t)b * nn, raw + cnt + (size_t)b * nn);
    }
    Blob blob = {0};
    int zrc = deflate_blob(raw, 2 * cnt, &blob);
    free(raw);
    if (zrc != Z_OK) return av_err(e, "html: compression failed (zlib %d)", zrc);
    *z = blob.z, *zlen = blob.len;
    return 0;
}
