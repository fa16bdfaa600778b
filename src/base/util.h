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

/* How av_map_file holds a file. AV_MAP_FILE maps it read-only: a page is read
 * from the file (or found in the page cache) when first touched, and the
 * kernel may drop it again under pressure (the page cache is shared and
 * evictable; nothing is copied). AV_MAP_RESIDENT then reads the whole file into
 * private memory in place (av_map_make_resident). A model's loader maps its
 * files, checks them, and only then decides how to hold them (av_hold_plan). */
typedef enum { AV_MAP_FILE = 0, AV_MAP_RESIDENT = 1 } AvMapMode;

/* Holds a whole regular file, read-only, as mode says, starting on a 2 MB
 * boundary (so that a resident copy can take huge pages where it stands).
 * Files shorter than min_len fail with "too_short" in the message
 * ("%s: <too_short> (N bytes)"). Release with munmap(*map, *len) either way. */
int av_map_file(const char *path, size_t min_len, const char *too_short, AvMapMode mode, void **map, size_t *len,
                AvErr *e);

/* How a model's weight files are held once the model is accepted:
 * AV_HOLD_MAPPED    mapped, each page read when a pass first touches it and kept by the page cache
 *                   (shared, evictable): only what the passes use is ever read (not the output head
 *                   of a run that predicts nothing, nor the experts no token chose), and on a cold
 *                   cache the reads overlap the products (measured: docs/models-at-scale.md);
 * AV_HOLD_RESIDENT  copied into private memory in 2 MB pages where the system has them (the products'
 *                   panel copies of W then stop waiting on page-table walks: bench/README.md), for
 *                   processes that make many passes; private memory cannot be dropped under pressure. */
typedef enum { AV_HOLD_MAPPED = 0, AV_HOLD_RESIDENT } AvHold;
/* The plan for files of total bytes: resident only when asked for (many passes), when the products
 * read the weights in place (in_place: F32/F16/BF16; quantized weights are widened into a scratch per
 * panel, so a copy gains nothing) and when the copy is small: at most a quarter of physical memory and
 * half of the memory available (avail or phys 0, unknown: never); else mapped. */
AvHold av_hold_plan(double total, int resident, int in_place, double avail, double phys);
/* Replaces a mapping (av_map_file's) by a private copy of its bytes at the same address, so that
 * pointers into it stay valid; -1 (the mapping unchanged) when memory is short. */
int av_map_make_resident(void *map, size_t len, const char *path, AvErr *e);

/* "8G", "500M", "64k" or a byte count (decimal multiples, an optional B): 0 on success. */
int av_parse_size(const char *s, double *out);

/* The memory a run may count on, in bytes: $ATTNVIZ_MEMORY when set (a size: what a user or a test
 * says this machine has free for attnviz), else the kernel's estimate of what a new allocation can get
 * without swapping (MemAvailable, /proc/meminfo) within the headroom of the process's cgroup when it
 * has a limit. *source (if not NULL) names where the figure came from, for messages. 0 (source
 * "unknown") when neither can be read; -1 with a usage error when $ATTNVIZ_MEMORY is not a size. */
int av_memory_available(double *bytes, const char **source, AvErr *e);
/* A cgroup folder's headroom (v2: memory.max, memory.current, memory.stat's file; v1:
 * memory.limit_in_bytes, memory.usage_in_bytes, memory.stat's total_cache): limit - (usage - page
 * cache); 0 when the folder sets no limit or cannot be read. */
int av_cgroup_headroom(const char *dir, double *bytes);
/* Physical memory, in bytes (0: unknown). */
double av_memory_physical(void);

/* What this process holds now (/proc/self/status), in bytes: anonymous pages (its own copies and
 * buffers: what the kernel must find room for), file-backed pages mapped (shared, evictable page
 * cache: the weights as mapped), and the peak resident set; -1 when it cannot be read. */
typedef struct {
    double anon, file, hwm;
} AvMemUse;
int av_memory_used(AvMemUse *u);

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
