/* err.c — one-line error messages carried back to main, made safe for a
 * terminal (main prints them; nothing here does). */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The length of a valid UTF-8 sequence at s (at most n bytes) that encodes a
 * character other than a C1 control (U+0080-U+009F); 0 when there is none. */
static size_t utf8_printable(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xC2 && s[1] <= 0x9F) return 0;                    /* C1 controls, e.g. U+009B (CSI) */
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xF0 && s[1] < 0x90)) return 0; /* overlong */
    if ((c == 0xED && s[1] >= 0xA0) || (c == 0xF4 && s[1] >= 0x90)) return 0; /* surrogates, > U+10FFFF */
    return len;
}

size_t av_sanitize(char *dst, size_t cap, const char *src) {
    const unsigned char *s = (const unsigned char *)src;
    size_t n = strlen(src), k = 0;
    if (!cap) return 0;
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t w = 1, el;
        const char *out;
        if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') { /* messages are one line */
            out = " ", el = 1;
        } else if (s[i] >= 0x20 && s[i] < 0x7F) {
            out = (const char *)s + i, el = 1;
        } else if (s[i] >= 0x80 && (w = utf8_printable(s + i, n - i)) > 0) {
            out = (const char *)s + i, el = w;
        } else if (s[i] == 0xC2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F) {
            snprintf(esc, sizeof esc, "\\u%04x", s[i + 1]); /* a C1 control in UTF-8 */
            out = esc, el = 6, w = 2;
        } else { /* C0 (ESC, BEL, ...), DEL, or a byte that is not UTF-8 */
            snprintf(esc, sizeof esc, "\\x%02x", s[i]);
            out = esc, el = 4, w = 1;
        }
        if (k + el >= cap) break; /* truncated at a whole character or escape */
        memcpy(dst + k, out, el);
        k += el;
        i += w;
    }
    dst[k] = '\0';
    return k;
}

/* fmt with every echoed string cut short: a %s without a precision gets AV_ERR_ECHO (a name or
 * string read from a file may be any length). A site passing text it composed (a reason, a list
 * of remedies) gives it a precision ("%.1000s") or passes it alone ("%s"), and it stays whole. Everything else is copied as it is, so the
 * arguments are read the same. */
static const char *cut_echoes(char *out, size_t cap, const char *fmt) {
    if (!strcmp(fmt, "%s")) return fmt; /* a site's own text, passed whole; its echoes were cut when composed */
    size_t k = 0;
    for (const char *p = fmt; *p;) {
        if (k + 16 >= cap) return fmt; /* no room: the format as given (the message is cut at its end anyway) */
        if (*p != '%') {
            out[k++] = *p++;
            continue;
        }
        const char *start = p++;
        if (*p == '%') {
            out[k++] = '%', out[k++] = '%', p++;
            continue;
        }
        while (*p && strchr("-+ #0'", *p)) p++;
        while (*p == '*' || (*p >= '0' && *p <= '9')) p++;
        const char *prec = NULL, *prec_end = NULL;
        if (*p == '.') {
            prec = p++;
            while (*p == '*' || (*p >= '0' && *p <= '9')) p++;
            prec_end = p;
        }
        const char *len = p;
        while (*p && strchr("hlLqjzt", *p)) p++;
        const char conv = *p;
        if (!conv) return fmt;
        p++;
        const int any_string = conv == 's' && !prec;
        const size_t head = (size_t)((prec ? prec : len) - start), mods = (size_t)(p - 1 - len);
        if (k + head + mods + 24 >= cap) return fmt;
        memcpy(out + k, start, head), k += head;
        if (any_string) k += (size_t)snprintf(out + k, cap - k, ".%d", AV_ERR_ECHO);
        else if (prec) memcpy(out + k, prec, (size_t)(prec_end - prec)), k += (size_t)(prec_end - prec);
        memcpy(out + k, len, mods), k += mods;
        out[k++] = conv;
    }
    out[k] = '\0';
    return out;
}

/* A run of more than AV_ERR_DIGITS digits (a number read from a file and printed whole: a
 * 300-digit "hidden_size") kept as its first 12 and how many there were, in place. */
#define AV_ERR_DIGITS 32
static void cut_digits(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        size_t n = 0;
        while (r[n] >= '0' && r[n] <= '9') n++;
        char tail[32];
        const int t = n > AV_ERR_DIGITS ? snprintf(tail, sizeof tail, "...(%zu digits)", n) : 0;
        if (n > AV_ERR_DIGITS && 12 + (size_t)t < n) { /* only ever shorter: written behind what is read */
            memmove(w, r, 12);
            memcpy(w + 12, tail, (size_t)t);
            w += 12 + t, r += n;
        } else if (n) {
            memmove(w, r, n), w += n, r += n;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

__attribute__((format(printf, 3, 0))) static int set_err(AvErr *e, AvErrKind kind, const char *fmt, va_list ap) {
    if (!e) return -1;
    char raw[sizeof e->msg], cut[1024];
    const char *f = cut_echoes(cut, sizeof cut, fmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* fmt itself, its echoes cut: the same arguments */
    vsnprintf(raw, sizeof raw, f, ap);
#pragma GCC diagnostic pop
    cut_digits(raw);
    /* Strings from model files and inputs end up here: no control character
     * (a terminal escape, a newline) may reach the user's terminal. */
    av_sanitize(e->msg, sizeof e->msg, raw);
    e->kind = kind;
    return -1;
}

int av_err(AvErr *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_err(e, AV_ERR_RUNTIME, fmt, ap);
    va_end(ap);
    return -1;
}

int av_err_usage(AvErr *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_err(e, AV_ERR_USAGE, fmt, ap);
    va_end(ap);
    return -1;
}

int av_err_prefix(AvErr *e, const char *fmt, ...) {
    if (!e) return -1;
    char prefix[256], old[sizeof e->msg], raw[sizeof prefix + sizeof e->msg + 2];
    va_list ap;
    char cut[1024];
    const char *f = cut_echoes(cut, sizeof cut, fmt);
    va_start(ap, fmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    vsnprintf(prefix, sizeof prefix, f, ap);
#pragma GCC diagnostic pop
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* Truncation is acceptable: the message stays one readable line. */
    snprintf(raw, sizeof raw, "%s: %s", prefix, old);
    av_sanitize(e->msg, sizeof e->msg, raw);
    return -1;
}

int av_err_errno(AvErr *e, const char *what) {
    int err = errno ? errno : EIO; /* EIO: a stream's error flag with errno lost */
    return av_err(e, "%s: %s", what, strerror(err));
}
