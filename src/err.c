/* err.c — one-line error messages carried back to main. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int av_err(AvErr *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    /* Messages are one line: fold any newline an embedded string brought in. */
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return -1;
}

int av_err_prefix(AvErr *e, const char *fmt, ...) {
    if (!e) return -1;
    char prefix[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* Truncation is acceptable: the message stays one readable line. */
    size_t k = strnlen(prefix, sizeof e->msg - 3);
    memcpy(e->msg, prefix, k);
    memcpy(e->msg + k, ": ", 2);
    size_t rest = sizeof e->msg - k - 3;
    size_t ol = strnlen(old, rest);
    memcpy(e->msg + k + 2, old, ol);
    e->msg[k + 2 + ol] = '\0';
    return -1;
}
