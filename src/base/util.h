/* util.h — small shared helpers: whole-file reads, atomic output files, timing. */
#ifndef ATTNVIZ_UTIL_H
#define ATTNVIZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "err.h"

struct stat;

/* Opens a file the user named for reading: never blocks on a FIFO (opened
 * O_NONBLOCK, then checked), refuses anything but a regular file with one
 * line naming it and its kind. Returns the descriptor (O_CLOEXEC, blocking
 * again) with *sb filled, or -1. Every reader of a named file goes through it. */
int av_open_regular(const char *path, struct stat *sb, AvErr *e);

/* "a directory", "a FIFO", "a character device", ... for a st_mode. */
const char *av_file_kind(unsigned mode);

/* Reads a whole file (at most max_bytes) into a NUL-terminated malloc'd buffer. */
int av_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, AvErr *e);

/* How av_map_file holds a file. AV_MAP_FILE maps it read-only, faulting it in
 * up front (MAP_POPULATE: one sequential read instead of scattered page faults
 * inside the first matrix products); starting costs nothing beyond that.
 * AV_MAP_RESIDENT reads it into private memory in 2 MB pages where the system
 * has them (MADV_HUGEPAGE): a weight matrix then spans a few pages instead of
 * thousands, and the products' copies of W stop waiting on page-table walks,
 * but the read and the fresh pages cost time once. For processes that make
 * many passes (serve, batch, generation). A file over a quarter of physical
 * memory is mapped as by AV_MAP_FILE instead: private memory cannot be
 * dropped under pressure, the page cache can. */
typedef enum { AV_MAP_FILE = 0, AV_MAP_RESIDENT = 1 } AvMapMode;

/* Holds a whole regular file, read-only, as mode says. Files shorter than
 * min_len fail with "too_short" in the message ("%s: <too_short> (N bytes)").
 * Release with munmap(*map, *len) either way. */
int av_map_file(const char *path, size_t min_len, const char *too_short, AvMapMode mode, void **map, size_t *len,
                AvErr *e);

/* Atomic output: writes go to a temporary file in the same directory (created
 * with the umask applied; replacing a file keeps that file's mode), which
 * av_out_commit renames over the target; av_out_abort removes it. "-" means stdout. */
typedef struct {
    FILE *fp;
    char *path;     /* final path (also when direct), or NULL for stdout */
    char *tmp_path; /* temporary path, or NULL for stdout */
    int direct;     /* a device or FIFO, written in place */
} AvOut;

int av_out_open(AvOut *o, const char *path, AvErr *e);
int av_out_commit(AvOut *o, AvErr *e);
void av_out_abort(AvOut *o);

/* Removes every temporary output still open (for signal handlers / exit paths). */
void av_out_abort_all(void);

/* A run's outputs, committed together: each is written to its own temporary file (av_outset_add
 * gives its stream), and av_outset_commit renames them into place only once every one is
 * written and closed. A failure (a full disk, a missing folder, a write error) leaves every
 * target as it was and no temporary behind: a target replaced before a later rename failed is
 * put back from the hard link kept of it (where the file system has hard links). Devices, FIFOs
 * and stdout are written in place as they come, as av_out_open does. */
typedef struct {
    AvOut *outs;
    int n, cap;
} AvOutSet;
/* The stream of a new output of the set, or NULL (e filled; the set is then aborted). */
FILE *av_outset_add(AvOutSet *s, const char *path, AvErr *e);
int av_outset_commit(AvOutSet *s, AvErr *e);
void av_outset_abort(AvOutSet *s);

/* FNV-1a over n bytes, continuing from h (AV_FNV_SEED to start): every
 * string table of the tokenizers hashes with it, a prefix and then the rest
 * without a copy. */
#define AV_FNV_SEED 2166136261u
uint32_t av_fnv1a(const void *p, size_t n, uint32_t h);
/* The 64-bit FNV-1a, for digests that tell files apart (stats shards' corpora, setups). */
#define AV_FNV64_SEED 14695981039346656037ull
uint64_t av_fnv1a64(const void *p, size_t n, uint64_t h);

/* Offset of the first byte that does not start a valid UTF-8 sequence, or -1
 * when all n bytes are valid UTF-8 (NUL included: callers that refuse it say so). */
long av_utf8_invalid_at(const void *s, size_t n);

/* Monotonic clock in milliseconds. */
double av_now_ms(void);

/* Joins dir and name into a malloc'd path. */
char *av_path_join(const char *dir, const char *name);

int av_file_exists(const char *path);

/* A growing string written through a FILE (open_memstream): JSON bodies and
 * pages built in memory. av_buf_close returns the string (the caller frees
 * it), or NULL, freeing it, when the stream failed or ok is 0. */
typedef struct {
    char *s;
    size_t len;
    FILE *f;
} AvBuf;
int av_buf_open(AvBuf *b);
char *av_buf_close(AvBuf *b, int ok);

#endif
