/* report.c — the one reporter the process has: messages formatted and
 * sanitized here, shown by whatever main installed. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>

#include "err.h"

static AvReporter current;

void av_set_reporter(const AvReporter *r) {
    if (r) current = *r;
    else current = (AvReporter){0};
}

/* Strings from model files and inputs end up in notes: no control character
 * may reach the terminal, whoever shows them. */
static void format(char *msg, size_t cap, const char *fmt, va_list ap) {
    char raw[2048];
    vsnprintf(raw, sizeof raw, fmt, ap);
    av_sanitize(msg, cap, raw);
}

void av_note(AvNoteKind kind, const char *fmt, ...) {
    if (!current.note) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    format(msg, sizeof msg, fmt, ap);
    va_end(ap);
    current.note(current.ctx, kind, msg);
}

int av_progress_wanted(void) { return current.progress != NULL; }

void av_progress(int final, const char *fmt, ...) {
    if (!current.progress) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    format(msg, sizeof msg, fmt, ap);
    va_end(ap);
    current.progress(current.ctx, msg, final);
}
