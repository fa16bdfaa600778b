/* say.c — what the model said, as text for a person (the command line prints
 * it on stdout when no output goes there): --generate's continuation and why
 * it stopped; --predict's top K after the last position (a masked model's: at
 * each mask). Text from the model never drives the terminal: control
 * characters are written as escapes. */
#include <stdio.h>
#include <string.h>

#include "output.h"

/* s (len bytes) with control characters escaped; newlines and tabs kept unless quoted (then \n, \t). */
static void put_text(FILE *f, const char *s, size_t len, int quoted) {
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (quoted && (c == '"' || c == '\\')) fprintf(f, "\\%c", c);
        else if (c == '\n') fputs(quoted ? "\\n" : "\n", f);
        else if (c == '\t') fputs(quoted ? "\\t" : "\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f)
            fprintf(f, "\\u%04x", (unsigned char)s[++i]); /* a C1 control (U+0080..U+009F) */
        else fputc(c, f);
    }
}

static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    if (s) put_text(f, s, strlen(s), 1);
    fputc('"', f);
}

/* The last few dozen bytes of s, cut at a character's start. */
static const char *tail(const char *s, size_t want) {
    const size_t len = strlen(s);
    if (len <= want) return s;
    const char *p = s + len - want;
    while (*p && ((unsigned char)*p & 0xc0) == 0x80) p++;
    return p;
}

static void put_top(FILE *f, const OutDoc *d, int row) {
    const CapPredictions *p = d->pred;
    for (int j = 0; j < p->k; j++) {
        const size_t at = (size_t)row * p->k + j;
        const char *w = d->pred_words && at < (size_t)d->pred_words->n ? d->pred_words->display[at] : NULL;
        fprintf(f, "  %6.2f%%  ", 100.0 * p->probs[at]);
        if (w) put_quoted(f, w);
        else fprintf(f, "id %d", p->ids[at]);
        fputc('\n', f);
    }
}

static int say_generation(FILE *f, const OutDoc *d) {
    const CapGeneration *g = d->gen;
    const TokEncoding *seq = d->dec_enc ? d->dec_enc : d->enc;
    const char *last = seq && seq->n > 0 ? seq->tokens[seq->n - 1] : NULL;
    fprintf(f, "generated %d token%s, ", g->n_generated, g->n_generated == 1 ? "" : "s");
    if (g->stop == CAP_STOP_EOS) {
        fputs("stopped at the model's end token ", f);
        put_quoted(f, last);
    } else if (g->stop == CAP_STOP_STRING) {
        fputs("stopped where the --stop string appeared", f);
    } else {
        fprintf(f, "stopped at the limit of %d new tokens", g->n_generated);
    }
    /* the text without the end token's own spelling */
    const char *text = d->gen_text ? d->gen_text : "";
    size_t len = strlen(text);
    if (g->stop == CAP_STOP_EOS && last && len >= strlen(last) && !strcmp(text + len - strlen(last), last))
        len -= strlen(last);
    if (!len) {
        fputs(" (no text before it)\n", f);
        return 0;
    }
    fputs(":\n", f);
    put_text(f, text, len, 0);
    if (text[len - 1] != '\n') fputc('\n', f);
    return 0;
}

int say_write(FILE *f, const OutDoc *d, AvErr *e) {
    if (d->gen) say_generation(f, d);
    else if (d->pred && d->pred->n > 0 && d->cfg && d->cfg->causal) {
        /* the next token after the whole input */
        const char *text = d->text_b ? d->text_b : d->text_a ? d->text_a : "";
        const char *t = tail(text, 40);
        fprintf(f, "after \"%s", t != text ? "..." : "");
        put_text(f, t, strlen(t), 1);
        fprintf(f, "\", the top %d next tokens:\n", d->pred->k);
        put_top(f, d, d->pred->n - 1);
    } else if (d->pred) {
        /* a masked model's fill-ins, mask by mask */
        for (int r = 0; r < d->pred->n; r++) {
            const int pos = d->pred->position[r];
            const char *tok = d->enc && pos >= 0 && pos < d->enc->n ? d->enc->tokens[pos] : NULL;
            put_quoted(f, tok);
            fprintf(f, " at token %d, the top %d fill-ins:\n", pos, d->pred->k);
            put_top(f, d, r);
        }
    }
    if (fflush(f) != 0 || ferror(f)) return av_err_errno(e, "stdout: write error");
    return 0;
}
