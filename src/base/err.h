/* err.h — error reporting for library code: functions return 0 on success or
 * -1 after filling an AvErr with a one-line message and its kind; only main
 * prints them and turns the kind into an exit status. Warnings and progress go
 * to the reporter (report.h). */
#ifndef ATTNVIZ_ERR_H
#define ATTNVIZ_ERR_H

#include <stddef.h>

/* What went wrong decides the exit status main returns: a usage error (the
 * command line asked for something impossible, exit 2) or a runtime one
 * (inputs, files, memory: exit 1). */
typedef enum { AV_ERR_RUNTIME = 0, AV_ERR_USAGE = 1 } AvErrKind;

typedef struct {
    char msg[512];
    AvErrKind kind; /* set by av_err (runtime) and av_err_usage */
} AvErr;

/* Every string a message echoes is cut to this many bytes (a %s without a precision), and a
 * number of more than 32 digits to its first 12 and its length: names and numbers come from
 * files of any size. Text a site composed itself (a reason, a list of remedies) keeps its
 * length: give it a precision ("%.1000s"), or pass it as the whole format "%s". */
#define AV_ERR_ECHO 160

/* Formats a message into e (if non-NULL), sanitized (av_sanitize), and returns -1, so callers can write
 * `return av_err(e, "...")`. Echoed values are cut (AV_ERR_ECHO). */
int av_err(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same for a usage error: the arguments, not the inputs, are wrong. */
int av_err_usage(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* av_err(e, "<what>: <strerror(errno)>"), for a failed write or read: a
 * full disk says "No space left on device", not only "write error". */
int av_err_errno(AvErr *e, const char *what);

/* Prepends "prefix: " to an existing message (context such as a file name). */
int av_err_prefix(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies src into dst (cap bytes, NUL-terminated) with every control character
 * made harmless: newline, CR and TAB become spaces; other C0 controls, DEL and
 * bytes that are not UTF-8 become \xHH; C1 controls (U+0080-U+009F) \u00HH.
 * Truncates at a whole character. Returns the length written. */
size_t av_sanitize(char *dst, size_t cap, const char *src);

#endif
