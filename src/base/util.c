/* util.c — file reading, atomic output files, timing. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <utf8proc.h>
#include <unistd.h>

const char *av_file_kind(unsigned mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

int av_open_regular(const char *path, struct stat *sb, AvErr *e) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return av_err(e, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, sb) != 0) {
        int err = errno;
        close(fd);
        return av_err(e, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        return av_err(e, "%s: not a regular file (%s)", path, av_file_kind(sb->st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return av_err(e, "%s: cannot open: %s", path, strerror(err));
    }
    return fd;
}

int av_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, AvErr *e) {
    *out = NULL;
    struct stat sb;
    int fd = av_open_regular(path, &sb, e);
    if (fd < 0) return -1;
    if ((size_t)sb.st_size > max_bytes) {
        close(fd);
        return av_err(e, "%s: file is %lld bytes, more than the %zu this file may have", path,
                      (long long)sb.st_size, max_bytes);
    }
    size_t len = (size_t)sb.st_size;
    char *buf = malloc(len + 1);
    if (!buf) {
        close(fd);
        return av_err(e, "%s: out of memory", path);
    }
    size_t got = 0;
    int err = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (got != len) {
        free(buf);
        return err ? av_err(e, "%s: read error: %s", path, strerror(err))
                   : av_err(e, "%s: read error: the file shrank while being read", path);
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return 0;
}

/* Temporary files still open, so a signal handler can remove them. A fixed
 * table: signal handlers must not walk heap structures that may be mid-update. */
#define MAX_OPEN_OUTS 256 /* a run's outputs are open together until they are committed */
static char *volatile open_tmps[MAX_OPEN_OUTS];

/* A slot is claimed by compare-and-swap: libattnviz's callers may write pages from several threads. */
static void track(char *tmp) {
    for (int i = 0; i < MAX_OPEN_OUTS; i++)
        if (__sync_bool_compare_and_swap(&open_tmps[i], NULL, tmp)) return;
}

static void untrack(const char *tmp) {
    for (int i = 0; i < MAX_OPEN_OUTS; i++) __sync_bool_compare_and_swap(&open_tmps[i], (char *)tmp, NULL);
}

void av_out_abort_all(void) {
    for (int i = 0; i < MAX_OPEN_OUTS; i++)
        if (open_tmps[i]) unlink(open_tmps[i]); /* async-signal-safe */
}

int av_out_open(AvOut *o, const char *path, AvErr *e) {
    memset(o, 0, sizeof *o);
    if (!strcmp(path, "-")) {
        o->fp = stdout;
        return 0;
    }
    /* A device, FIFO or socket (/dev/null, /dev/stdout, a pipe) is written in
     * place: renaming a temporary file over it would replace the device. */
    struct stat sb;
    const int exists = stat(path, &sb) == 0;
    if (exists && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode)) return av_err(e, "%s: cannot write: is a directory", path);
        if (!(o->path = strdup(path))) return av_err(e, "%s: out of memory", path);
        o->fp = fopen(path, "wb");
        if (!o->fp) {
            int err = errno;
            free(o->path);
            o->path = NULL;
            return av_err(e, "%s: cannot write: %s", path, strerror(err));
        }
        o->direct = 1;
        return 0;
    }
    size_t n = strlen(path) + 32;
    o->path = strdup(path);
    o->tmp_path = malloc(n);
    if (!o->path || !o->tmp_path) {
        free(o->path);
        free(o->tmp_path);
        return av_err(e, "%s: out of memory", path);
    }
    /* Not mkstemp: its files are 0600 whatever the umask. Created 0666 here, so
     * open() applies the umask (and a default ACL) as for any new file. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        unsigned char rnd[4] = {0};
        if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
            unsigned x = (unsigned)getpid() * 2654435761u ^ (unsigned)(av_now_ms() * 1e3) ^ (unsigned)tries * 40503u;
            memcpy(rnd, &x, sizeof rnd);
        }
        snprintf(o->tmp_path, n, "%s.tmp.%02x%02x%02x%02x", path, rnd[0], rnd[1], rnd[2], rnd[3]);
        fd = open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int err = errno;
        free(o->path);
        free(o->tmp_path);
        memset(o, 0, sizeof *o);
        return av_err(e, "%s: cannot write: %s", path, strerror(err));
    }
    /* Replacing a file keeps its permissions (a 0600 file stays 0600). */
    if (exists && fchmod(fd, sb.st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID)) != 0) {
        int err = errno;
        close(fd);
        unlink(o->tmp_path);
        free(o->path);
        free(o->tmp_path);
        memset(o, 0, sizeof *o);
        return av_err(e, "%s: cannot write: %s", path, strerror(err));
    }
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        close(fd);
        unlink(o->tmp_path);
        free(o->path);
        free(o->tmp_path);
        memset(o, 0, sizeof *o);
        return av_err(e, "%s: cannot write: out of memory", path);
    }
    track(o->tmp_path);
    return 0;
}

int av_out_commit(AvOut *o, AvErr *e) {
    if (!o->fp) return 0;
    /* errno of the failing write: fflush retries what is buffered, and a full
     * disk (ENOSPC), a quota or a size limit (EFBIG) fails again the same way */
    errno = 0;
    int bad = fflush(o->fp) != 0, err = errno;
    if (!bad && ferror(o->fp)) bad = 1, err = EIO;
    if (o->direct) {
        if (fclose(o->fp) != 0 && !bad) bad = 1, err = errno;
        if (bad) av_err(e, "%s: write failed: %s", o->path, strerror(err ? err : EIO));
        free(o->path);
        memset(o, 0, sizeof *o);
        return bad ? -1 : 0;
    }
    if (!o->tmp_path) { /* stdout */
        o->fp = NULL;
        return bad ? av_err(e, "stdout: write failed: %s", strerror(err ? err : EIO)) : 0;
    }
    if (fclose(o->fp) != 0 && !bad) bad = 1, err = errno;
    o->fp = NULL;
    if (bad) {
        if (!err) err = EIO;
        unlink(o->tmp_path);
        untrack(o->tmp_path);
        av_err(e, "%s: write failed: %s", o->path, strerror(err));
        free(o->path);
        free(o->tmp_path);
        memset(o, 0, sizeof *o);
        return -1;
    }
    if (rename(o->tmp_path, o->path) != 0) {
        err = errno;
        unlink(o->tmp_path);
        untrack(o->tmp_path);
        av_err(e, "%s: cannot rename into place: %s", o->path, strerror(err));
        free(o->path);
        free(o->tmp_path);
        memset(o, 0, sizeof *o);
        return -1;
    }
    untrack(o->tmp_path);
    free(o->path);
    free(o->tmp_path);
    memset(o, 0, sizeof *o);
    return 0;
}

void av_out_abort(AvOut *o) {
    if (o->fp && o->direct) fclose(o->fp);
    if (o->direct) {
        free(o->path);
        memset(o, 0, sizeof *o);
        return;
    }
    if (o->tmp_path) { /* open, or closed by av_outset_commit and not yet in place */
        if (o->fp) fclose(o->fp);
        unlink(o->tmp_path);
        untrack(o->tmp_path);
    }
    free(o->path);
    free(o->tmp_path);
    memset(o, 0, sizeof *o);
}

uint32_t av_fnv1a(const void *p, size_t n, uint32_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

FILE *av_outset_add(AvOutSet *s, const char *path, AvErr *e) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        AvOut *o = realloc(s->outs, (size_t)cap * sizeof *o);
        if (!o) {
            av_outset_abort(s);
            av_err(e, "%s: out of memory", path);
            return NULL;
        }
        s->outs = o, s->cap = cap;
    }
    if (av_out_open(&s->outs[s->n], path, e) != 0) {
        av_outset_abort(s);
        return NULL;
    }
    return s->outs[s->n++].fp;
}

void av_outset_abort(AvOutSet *s) {
    for (int i = 0; i < s->n; i++) av_out_abort(&s->outs[i]);
    free(s->outs);
    memset(s, 0, sizeof *s);
}

/* Closes an output's stream: 0, or -1 with the failing write's error in e (the temporary is kept). */
static int out_close(AvOut *o, AvErr *e) {
    errno = 0;
    int bad = fflush(o->fp) != 0, err = errno;
    if (!bad && ferror(o->fp)) bad = 1, err = EIO;
    const char *name = o->path ? o->path : "stdout";
    if (o->tmp_path || o->direct) {
        if (fclose(o->fp) != 0 && !bad) bad = 1, err = errno;
        o->fp = NULL;
    }
    return bad ? av_err(e, "%s: write failed: %s", name, strerror(err ? err : EIO)) : 0;
}

int av_outset_commit(AvOutSet *s, AvErr *e) {
    /* every stream closed first: a full disk or a write error shows here, before any rename */
    for (int i = 0; i < s->n; i++)
        if (s->outs[i].fp && out_close(&s->outs[i], e) != 0) {
            av_outset_abort(s);
            return -1;
        }
    /* then the renames: each target kept as a hard link until all are in place */
    char **keep = calloc((size_t)(s->n ? s->n : 1), sizeof *keep);
    unsigned char *existed = calloc((size_t)(s->n ? s->n : 1), 1), *placed = calloc((size_t)(s->n ? s->n : 1), 1);
    int rc = keep && existed && placed ? 0 : av_err(e, "out of memory");
    for (int i = 0; i < s->n && rc == 0; i++) {
        AvOut *o = &s->outs[i];
        if (!o->tmp_path) continue; /* written in place */
        struct stat sb;
        existed[i] = lstat(o->path, &sb) == 0;
        if (existed[i] && S_ISREG(sb.st_mode) && (keep[i] = malloc(strlen(o->tmp_path) + 5))) {
            sprintf(keep[i], "%s.old", o->tmp_path);
            if (link(o->path, keep[i]) != 0) free(keep[i]), keep[i] = NULL;
        }
        if (rename(o->tmp_path, o->path) != 0) {
            rc = av_err(e, "%s: cannot rename into place: %s", o->path, strerror(errno));
            break;
        }
        placed[i] = 1;
        untrack(o->tmp_path);
        free(o->tmp_path);
        o->tmp_path = NULL; /* in place: av_out_abort leaves it */
    }
    for (int i = 0; keep && i < s->n; i++) {
        if (rc != 0 && placed[i]) { /* every placed output undone: the old file back, or no file as before */
            if (keep[i]) rename(keep[i], s->outs[i].path);
            else if (!existed[i]) unlink(s->outs[i].path);
        }
        if (keep[i]) unlink(keep[i]);
        free(keep[i]);
    }
    free(keep), free(existed), free(placed);
    for (int i = 0; i < s->n; i++) av_out_abort(&s->outs[i]); /* a failure's temporaries removed; the rest freed */
    free(s->outs);
    memset(s, 0, sizeof *s);
    return rc;
}

uint64_t av_fnv1a64(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

long av_utf8_invalid_at(const void *s, size_t n) {
    const uint8_t *b = s;
    for (size_t i = 0; i < n;) {
        if (b[i] < 0x80) { /* ASCII without a call */
            i++;
            continue;
        }
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(b + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) return (long)i;
        i += (size_t)k;
    }
    return -1;
}

double av_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

char *av_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int av_file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

#define HUGE_PAGE ((size_t)2 << 20)

/* len bytes of address space starting on a 2 MB boundary, reserved
 * (PROT_NONE, nothing behind it) so that a mapping can be placed there with
 * MAP_FIXED; exactly [p, p + len) is left reserved. NULL and errno on failure. */
static char *reserve_aligned(size_t len) {
    if (len > SIZE_MAX - HUGE_PAGE) return errno = ENOMEM, NULL;
    char *raw = mmap(NULL, len + HUGE_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    munmap(p + len, (size_t)(raw + HUGE_PAGE - p)); /* p is less than 2 MB past raw: a tail is always left */
    return p;
}

static size_t page_round(size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

int av_map_make_resident(void *map, size_t len, const char *path, AvErr *e) {
    const size_t plen = page_round(len);
    char *copy = reserve_aligned(plen);
    if (!copy || mmap(copy, plen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
        const int err = errno;
        if (copy) munmap(copy, plen);
        return av_err(e, "%s: cannot hold its %zu bytes in memory: %s", path, len, strerror(err));
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(copy, plen, MADV_HUGEPAGE); /* a hint: without it the pages are small */
#endif
    /* a block at a time, each block's file pages unmapped once copied (they stay
     * in the page cache), so that the process never maps the file twice over */
    const size_t block = (size_t)64 << 20;
    for (size_t at = 0; at < len; at += block) {
        const size_t k = len - at < block ? len - at : block;
        memcpy(copy + at, (const char *)map + at, k);
        (void)madvise((char *)map + at, page_round(k), MADV_DONTNEED);
    }
    /* the copy takes the mapping's place (the file's pages are unmapped as it
     * moves), so every pointer into the mapping now reads the copy; both start
     * on a 2 MB boundary, so huge pages stay huge */
    if (mprotect(copy, plen, PROT_READ) != 0 ||
        mremap(copy, plen, plen, MREMAP_MAYMOVE | MREMAP_FIXED, map) == MAP_FAILED) {
        const int err = errno;
        munmap(copy, plen);
        return av_err(e, "%s: cannot hold its %zu bytes in memory: %s", path, len, strerror(err));
    }
    return 0;
}

AvHold av_hold_plan(double total, int resident, int in_place, double avail, double phys) {
    return resident && in_place && phys > 0 && avail > 0 && total <= phys / 4 && total <= avail / 2 ? AV_HOLD_RESIDENT
                                                                                                   : AV_HOLD_MAPPED;
}

int av_map_file(const char *path, size_t min_len, const char *too_short, AvMapMode mode, void **map, size_t *len,
                AvErr *e) {
    *map = NULL;
    *len = 0;
    struct stat sb;
    int fd = av_open_regular(path, &sb, e);
    if (fd < 0) return -1;
    size_t n = (size_t)sb.st_size;
    if (n < min_len || n == 0) {
        close(fd);
        return av_err(e, "%s: %s (%zu bytes)", path, too_short, n);
    }
    /* nothing is read here: a page comes in when first touched (the header a
     * reader parses, then what a pass uses); once the loader has accepted the
     * model it may copy the whole (av_hold_plan) */
    char *at = reserve_aligned(page_round(n));
    void *m = at ? mmap(at, n, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) : MAP_FAILED;
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) {
        if (at) munmap(at, page_round(n));
        return av_err(e, "%s: cannot map: %s", path, strerror(err));
    }
    if (mode == AV_MAP_RESIDENT && av_map_make_resident(m, n, path, e) != 0) {
        munmap(m, n);
        return -1;
    }
    *map = m;
    *len = n;
    return 0;
}

int av_parse_size(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || v > 1e18) return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1e3, end++; break;
    case 'm': case 'M': mult = 1e6, end++; break;
    case 'g': case 'G': mult = 1e9, end++; break;
    case 't': case 'T': mult = 1e12, end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = v * mult;
    return 0;
}

/* The number after "key" in a "key value" / "key: value kB" text file (value in kB when
 * the line says so), or -1. */
static double file_field(const char *path, const char *key) {
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char line[256];
    const size_t kl = strlen(key);
    double v = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != ':' && line[kl] != '\t')) continue;
        char *end;
        const char *p = line + kl + (line[kl] == ':');
        double x = strtod(p, &end);
        if (end == p) break;
        v = strstr(end, "kB") ? x * 1024 : x;
        break;
    }
    fclose(f);
    return v;
}

/* A file holding one number ("max" for none: -1). */
static double file_number(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char buf[64] = "";
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    char *end;
    double v = ok ? strtod(buf, &end) : -1;
    return ok && end != buf ? v : -1;
}

int av_cgroup_headroom(const char *dir, double *bytes) {
    char a[4096], b[4096], c[4096];
    *bytes = 0;
    snprintf(a, sizeof a, "%s/memory.max", dir);
    snprintf(b, sizeof b, "%s/memory.current", dir);
    snprintf(c, sizeof c, "%s/memory.stat", dir);
    double limit = file_number(a), used = file_number(b), cache = file_field(c, "file");
    if (limit < 0) { /* cgroup v1 */
        snprintf(a, sizeof a, "%s/memory.limit_in_bytes", dir);
        snprintf(b, sizeof b, "%s/memory.usage_in_bytes", dir);
        limit = file_number(a), used = file_number(b), cache = file_field(c, "total_cache");
    }
    /* no limit: "max" (v2) or a number past any machine (v1's page-rounded LONG_MAX) */
    if (limit <= 0 || limit >= 1e18 || used < 0) return 0;
    const double busy = used - (cache > 0 && cache < used ? cache : 0);
    *bytes = limit > busy ? limit - busy : 1; /* at the limit: nothing left (1, not 0, which means none) */
    return 0;
}

/* The headroom of this process's cgroup (v2's path from /proc/self/cgroup, else v1's memory
 * controller as mounted), 0 when it has no limit. */
static double cgroup_headroom(void) {
    double h = 0;
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[1024], dir[1200];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3)) continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", line + 3);
        av_cgroup_headroom(dir, &h);
    }
    if (f) fclose(f);
    if (h <= 0) av_cgroup_headroom("/sys/fs/cgroup/memory", &h);
    return h;
}

double av_memory_physical(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

int av_memory_available(double *bytes, const char **source, AvErr *e) {
    const char *env = getenv("ATTNVIZ_MEMORY");
    *bytes = 0;
    if (env && *env) {
        if (av_parse_size(env, bytes) != 0)
            return av_err_usage(e, "ATTNVIZ_MEMORY=%.40s: expected a size like 16G or 500M", env);
        if (source) *source = "ATTNVIZ_MEMORY";
        return 0;
    }
    const double avail = file_field("/proc/meminfo", "MemAvailable"), cg = cgroup_headroom();
    if (cg > 0 && (avail <= 0 || cg < avail)) {
        *bytes = cg;
        if (source) *source = "its cgroup's limit";
    } else if (avail > 0) {
        *bytes = avail;
        if (source) *source = "MemAvailable";
    } else if (source) {
        *source = "unknown";
    }
    return 0;
}

int av_memory_used(AvMemUse *u) {
    u->anon = file_field("/proc/self/status", "RssAnon");
    u->file = file_field("/proc/self/status", "RssFile");
    u->hwm = file_field("/proc/self/status", "VmHWM");
    return u->anon < 0 || u->file < 0 || u->hwm < 0 ? -1 : 0;
}

int av_buf_open(AvBuf *b) {
    b->s = NULL, b->len = 0;
    b->f = open_memstream(&b->s, &b->len);
    return b->f ? 0 : -1;
}

char *av_buf_close(AvBuf *b, int ok) {
    const int bad = fclose(b->f) != 0 || !ok;
    if (bad) {
        free(b->s);
        return NULL;
    }
    return b->s;
}
