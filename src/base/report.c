/* report.c — the one reporter the process has: messages formatted and
 * sanitized here, shown by whatever main installed. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>

#include "err.h"

static AvReporter current;
static _Thread_local AvReporter local; /* note != NULL: this thread's override */

void av_set_reporter(const AvReporter *r) {
    if (r) current = *r;
    else current = (AvReporter){0};
}

void av_set_thread_reporter(const AvReporter *r) {
    if (r) local = *r;
    else local = (AvReporter){0};
}

static const AvReporter *reporter(void) { return local.note ? &local : &current; }

void av_note(AvNoteKind kind, const char *fmt, ...) {
    const int progress = kind == AV_NOTE_PROGRESS || kind == AV_NOTE_PROGRESS_DONE;
    const AvReporter *to = reporter();
    if (!to->note || (progress && !to->progress)) return;
    char raw[2048], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Strings from model files and inputs end up in notes: no control character
     * may reach the terminal, whoever shows them. */
    av_sanitize(msg, sizeof msg, raw);
    to->note(to->ctx, kind, msg);
}

int av_progress_wanted(void) {
    const AvReporter *to = reporter();
    return to->note && to->progress;
}
