/* err.h — error reporting for library code: functions return 0 on success or
 * -1 after filling an AvErr with a one-line message; only main prints/exits. */
#ifndef ATTNVIZ_ERR_H
#define ATTNVIZ_ERR_H

#include <stddef.h>

typedef struct {
    char msg[512];
} AvErr;

/* Formats a message into e (if non-NULL) and returns -1, so callers can write
 * `return av_err(e, "...")`. */
int av_err(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message (context such as a file name). */
int av_err_prefix(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
