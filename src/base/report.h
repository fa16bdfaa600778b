/* report.h — where warnings, notes and progress go. Library code never writes
 * to stderr: it hands each line to the reporter main installed (stderr for the
 * command line); with none installed the lines are dropped. Errors are not
 * reported here: they travel back as an AvErr (err.h). */
#ifndef ATTNVIZ_REPORT_H
#define ATTNVIZ_REPORT_H

typedef enum {
    AV_NOTE_INFO,    /* what happened: "wrote attnviz.html", the model used */
    AV_NOTE_WARNING, /* the run went on, but not quite as asked (truncation, ...) */
    AV_NOTE_ERROR,   /* one input failed and the run went on (a --batch line) */
    AV_NOTE_PROFILE, /* --profile's machine-read "load_ms=... kernel=..." line */
    AV_NOTE_PROGRESS,      /* a progress line that replaces the previous one */
    AV_NOTE_PROGRESS_DONE, /* the last progress line of the run */
} AvNoteKind;

typedef struct {
    /* One line, sanitized (av_sanitize), without "attnviz: " or "warning: ". */
    void (*note)(void *ctx, AvNoteKind kind, const char *msg);
    void *ctx;
    int progress; /* progress lines wanted (a terminal; not a server or a file) */
} AvReporter;

/* Installs r (copied; NULL: drop everything). Not thread-safe: main sets it
 * once before any work starts. */
void av_set_reporter(const AvReporter *r);

/* For this thread only, until called again with NULL: notes go to r (copied)
 * instead of the process's reporter. A server's worker collects one request's
 * warnings this way, in the same words the command line prints. */
void av_set_thread_reporter(const AvReporter *r);

void av_note(AvNoteKind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define av_info(...) av_note(AV_NOTE_INFO, __VA_ARGS__)
#define av_warn(...) av_note(AV_NOTE_WARNING, __VA_ARGS__)

/* Whether the reporter shows progress (so a batch counts its lines for it);
 * progress notes are dropped when it does not. */
int av_progress_wanted(void);
#define av_progress(final, ...) av_note((final) ? AV_NOTE_PROGRESS_DONE : AV_NOTE_PROGRESS, __VA_ARGS__)

#endif
