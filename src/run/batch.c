/* batch.c — attnviz --batch: lines read (bounded), short ones packed into
 * shared forward passes, each written in input order; failed lines counted and
 * reported; a progress line when the reporter shows one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"
#include "run_internal.h"
#include "util.h"

/* Strips the line ending and splits at the first TAB into A and B. */
static void split_line(char *line, size_t *len, char **b) {
    while (*len && (line[*len - 1] == '\n' || line[*len - 1] == '\r')) line[--*len] = '\0';
    char *tab = memchr(line, '\t', *len);
    *b = NULL;
    if (tab) {
        *tab = '\0';
        *b = tab + 1;
    }
}

/* Lines in a regular file, for the progress display (-1 when unknown). */
static long count_lines(FILE *in) {
    struct stat sb;
    if (fstat(fileno(in), &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    char buf[1 << 16];
    long n = 0;
    size_t got;
    int last = '\n';
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) {
        for (char *p = buf; (p = memchr(p, '\n', (size_t)(buf + got - p))); p++) n++;
        last = buf[got - 1];
    }
    if (last != '\n') n++;
    rewind(in);
    return n;
}

/* The longest --batch line read (docs/options.md, docs/attnviz.1): past it the batch
 * stops with the line's number. */
#define BATCH_MAX_LINE (16u << 20)

typedef struct {
    long lineno[PACK_MAX_INPUTS];
    char *a[PACK_MAX_INPUTS], *b[PACK_MAX_INPUTS];
    TokEncoding enc[PACK_MAX_INPUTS];
    Capture cap[PACK_MAX_INPUTS];
    int cap_n[PACK_MAX_INPUTS]; /* tokens each capture holds */
    int n, tokens;
    int *ids, *types;           /* (budget) */
} Pack;

typedef struct {
    Run *r;
    const char *name;
    FILE *jsonl;
    long failed, done;
    int stop, show;
} BatchState;

/* A line that failed: counted and reported; 1 when the batch must stop. */
static int line_failed(BatchState *bs, long lineno, const char *msg) {
    const RunSpec *o = &bs->r->spec;
    bs->failed++;
    av_note(AV_NOTE_ERROR, "%s:%ld: %s%s", bs->name, lineno, msg, o->batch.strict ? "" : "; skipped");
    /* an output error is not the line's fault: stop */
    if (o->batch.strict || strstr(msg, "write error") || strstr(msg, "cannot write")) bs->stop = 1;
    return bs->stop;
}

static void pack_clear(Pack *p) {
    for (int g = 0; g < p->n; g++) {
        free(p->a[g]);
        tok_encoding_free(&p->enc[g]);
    }
    p->n = p->tokens = 0;
}

static void pack_free(Pack *p) {
    pack_clear(p);
    for (int g = 0; g < PACK_MAX_INPUTS; g++) model_capture_free(&p->cap[g]);
    free(p->ids);
    free(p->types);
}

/* Runs the waiting inputs in one pass, then writes each in order. */
static void pack_flush(BatchState *bs, Pack *p) {
    Run *r = bs->r;
    if (!p->n) return;
    AvErr e;
    int rc = run_ensure_buffers(r, p->tokens, &e);
    Capture *caps[PACK_MAX_INPUTS];
    int lens[PACK_MAX_INPUTS];
    for (int g = 0, at = 0; g < p->n && rc == 0; at += p->enc[g].n, g++) {
        lens[g] = p->enc[g].n;
        memcpy(p->ids + at, p->enc[g].ids, (size_t)lens[g] * sizeof *p->ids);
        memcpy(p->types + at, p->enc[g].type_ids, (size_t)lens[g] * sizeof *p->types);
        if (p->cap_n[g] < lens[g]) {
            model_capture_free(&p->cap[g]);
            p->cap_n[g] = 0;
            rc = run_capture_make(r, &p->cap[g], lens[g], &e);
            if (rc == 0) p->cap_n[g] = lens[g];
        }
        run_score_input(&p->cap[g], &p->enc[g]);
        caps[g] = &p->cap[g];
    }
    double t0 = av_now_ms();
    if (rc == 0) rc = model_forward_packed(&r->s->model, &r->rs, p->ids, p->types, lens, p->n, caps, &e);
    r->t_fwd += av_now_ms() - t0;
    for (int g = 0; g < p->n && !bs->stop; g++) {
        AvErr le;
        if (rc != 0) {
            line_failed(bs, p->lineno[g], e.msg);
            continue;
        }
        run_warn_truncated(r, &p->enc[g], p->lineno[g]);
        if (run_finish_input(r, p->a[g], p->b[g], p->lineno[g], &p->enc[g], &p->cap[g], bs->jsonl, &le) != 0)
            line_failed(bs, p->lineno[g], le.msg);
        else
            bs->done++;
    }
    pack_clear(p);
}

static void batch_text(BatchState *bs, Pack *p, char *a, char *b, long lineno);

/* One batch line: packed with others when short enough, else run alone; with --chat,
 * as the chat template renders it as one user message. */
static void batch_line(BatchState *bs, Pack *p, char *a, char *b, long lineno) {
    AvErr le;
    char *chat;
    if (run_chat_prompt(bs->r, a, b, &chat, &le) != 0) {
        line_failed(bs, lineno, le.msg);
        return;
    }
    batch_text(bs, p, chat ? chat : a, b, lineno);
    free(chat);
}

static void batch_text(BatchState *bs, Pack *p, char *a, char *b, long lineno) {
    Run *r = bs->r;
    const RunSpec *o = &r->spec;
    AvErr le;
    /* ALTI reads each input's residual stream and values, which a shared pass does not keep */
    const int packing = o->batch.pack_tokens > 0 && !o->capture.tokens_only && !o->predict.k && !o->predict.generate_n &&
                        !measure_wanted(&o->capture, MEASURE_ALTI);
    if (r->s->cfg.enc_dec && !o->capture.tokens_only) { /* SOURCE<TAB>TARGET, or a source that --generate decodes */
        if (o->predict.generate_n && b) line_failed(bs, lineno, "a TAB gives the decoder's text; --generate makes it: one or the other");
        else if (!o->predict.generate_n && !b) line_failed(bs, lineno, "no decoder text: give SOURCE<TAB>TARGET, or --generate N");
        else if (run_seq2seq_input(r, a, b, lineno, bs->jsonl, &le) != 0) line_failed(bs, lineno, le.msg);
        else bs->done++;
        return;
    }
    if (!packing) {
        if (run_handle_text(r, a, b, lineno, bs->jsonl, &le) != 0) line_failed(bs, lineno, le.msg);
        else bs->done++;
        return;
    }
    TokEncoding enc = {0};
    if (run_tokenize(r, a, b, &enc, &le) != 0) {
        tok_encoding_free(&enc);
        line_failed(bs, lineno, le.msg);
        return;
    }
    if (enc.n > o->batch.pack_tokens) { /* long: alone, after what waits (output stays in input order) */
        pack_flush(bs, p);
        if (bs->stop) {
            tok_encoding_free(&enc);
            return;
        }
        int rc = run_ensure_buffers(r, enc.n, &le);
        double t0 = av_now_ms();
        run_score_input(&r->in.cap, &enc);
        if (rc == 0) rc = model_forward(&r->s->model, &r->rs, enc.ids, enc.type_ids, enc.n, &r->in.cap, &le);
        r->t_fwd += av_now_ms() - t0;
        if (rc == 0) run_warn_truncated(r, &enc, lineno);
        if (rc == 0) rc = run_finish_input(r, a, b, lineno, &enc, &r->in.cap, bs->jsonl, &le);
        if (rc != 0) line_failed(bs, lineno, le.msg);
        else bs->done++;
        tok_encoding_free(&enc);
        return;
    }
    if (p->n == PACK_MAX_INPUTS || p->tokens + enc.n > o->batch.pack_tokens) pack_flush(bs, p);
    if (bs->stop) {
        tok_encoding_free(&enc);
        return;
    }
    /* the line buffer is reused: keep a copy (A and B, split at the TAB) */
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *copy = malloc(la + lb + 2);
    if (!copy) {
        tok_encoding_free(&enc);
        line_failed(bs, lineno, "out of memory");
        return;
    }
    memcpy(copy, a, la + 1);
    if (b) memcpy(copy + la + 1, b, lb + 1);
    const int g = p->n++;
    p->lineno[g] = lineno, p->a[g] = copy, p->b[g] = b ? copy + la + 1 : NULL, p->enc[g] = enc;
    p->tokens += enc.n;
}

/* Reads one line (with its '\n', if any) into *line, never holding more than
 * max bytes: past that *too_long is set and reading stops there (an endless
 * line such as /dev/zero's would otherwise fill the memory). -1 at the end. */
static ssize_t read_line(FILE *in, char **line, size_t *cap, size_t max, int *too_long) {
    size_t n = 0;
    int c = EOF;
    *too_long = 0;
    flockfile(in);
    while ((c = getc_unlocked(in)) != EOF) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            if (nc > max + 2) nc = max + 2;
            char *p = n + 2 > nc ? NULL : realloc(*line, nc);
            if (!p) break; /* only when out of memory: reported as a read error */
            *line = p, *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
        if (n > max) {
            *too_long = 1;
            break;
        }
    }
    funlockfile(in);
    if (n == 0 && c == EOF) return -1;
    if (c != '\n' && c != EOF && !*too_long) return errno = ENOMEM, -2;
    (*line)[n] = '\0';
    return (ssize_t)n;
}

/* A --batch FILE: a regular file, a FIFO or pipe, a device (a stream is read
 * as it comes); never a directory. */
static FILE *open_batch(const char *path, AvErr *e) {
    if (!strcmp(path, "-")) return stdin;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd < 0) return av_err(e, "%s: cannot open: %s", path, strerror(errno)), NULL;
    if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
        int err = S_ISDIR(sb.st_mode) ? EISDIR : errno;
        close(fd);
        return av_err(e, "%s: cannot read: %s", path, strerror(err)), NULL;
    }
    FILE *in = fdopen(fd, "rb");
    if (!in) {
        close(fd);
        av_err(e, "%s: cannot open: out of memory", path);
    }
    return in;
}

int run_batch(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    FILE *in = open_batch(o->batch.path, e);
    if (!in) return -1;
    RunProgress pr; /* on a terminal, past a couple of seconds: lines done of the file's */
    run_progress_begin(&pr, o, "batch");
    BatchState bs = {r, strcmp(o->batch.path, "-") ? o->batch.path : "stdin", NULL, 0, 0, 0, pr.on};
    /* --shard I/N: the lines numbered (from 0) I modulo N. Every line is read and
     * counted, blank and bad ones too, so the shards of a file are fixed by the
     * file alone and together hold each line once. */
    const long shard_n = o->batch.shard_count > 1 ? o->batch.shard_count : 1, shard_i = shard_n > 1 ? o->batch.shard_index : 0;
    long total = bs.show ? count_lines(in) : -1;
    if (total > 0 && shard_n > 1) total = total > shard_i ? (total - 1 - shard_i) / shard_n + 1 : 0;
    AvOut out = {0};
    int streaming = !o->stats && !o->heads.on && !o->output.out_dir;
    Pack *pack = calloc(1, sizeof *pack);
    if (pack && o->batch.pack_tokens > 0) {
        pack->ids = malloc((size_t)o->batch.pack_tokens * sizeof *pack->ids);
        pack->types = malloc((size_t)o->batch.pack_tokens * sizeof *pack->types);
    }
    if (!pack || (o->batch.pack_tokens > 0 && (!pack->ids || !pack->types))) {
        if (pack) pack_free(pack);
        free(pack);
        if (in != stdin) fclose(in);
        return av_err(e, "out of memory");
    }
    if (streaming && av_out_open(&out, o->output.json_path ? o->output.json_path : "-", e) != 0) {
        pack_free(pack);
        free(pack);
        if (in != stdin) fclose(in);
        return -1;
    }
    bs.jsonl = streaming ? out.fp : NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = 0;
    long lineno = 0, taken = 0;
    int rc = 0, too_long = 0;
    /* what this run covers, for a --stats / heads file (stats.h's StatsCover): every line's digest
     * (each shard reads them all), and its own lines' */
    uint64_t corpus = 0, covered = 0;
    while (!bs.stop && (got = read_line(in, &line, &cap, BATCH_MAX_LINE, &too_long)) >= 0) {
        lineno++;
        const uint64_t ld = stats_line_digest(line, (size_t)got);
        corpus += ld;
        if ((lineno - 1) % shard_n == shard_i) covered += ld;
        if (too_long) { /* its end may never come: the batch stops here */
            av_err(e, "%s:%ld: line longer than %u bytes (the --batch line limit)", bs.name, lineno,
                   (unsigned)BATCH_MAX_LINE);
            bs.stop = 1;
            break;
        }
        /* after the length check: a line too long stops every shard, as it stops one run */
        if ((lineno - 1) % shard_n != shard_i) continue;
        taken++;
        size_t len = (size_t)got;
        char *b = NULL;
        if (memchr(line, '\0', len)) {
            line_failed(&bs, lineno, "contains a NUL byte");
            continue;
        }
        split_line(line, &len, &b);
        if (len == 0 || !line[0]) {
            line_failed(&bs, lineno, b ? "sentence A is empty (the line starts with its TAB)" : "empty line");
            continue;
        }
        batch_line(&bs, pack, line, b, lineno);
        run_progress_step(&pr, "lines", bs.done + bs.failed, total);
    }
    if (!bs.stop) pack_flush(&bs, pack);
    pack_free(pack);
    free(pack);
    if (bs.stop) rc = -1;
    run_progress_step(&pr, "lines", bs.done + bs.failed, total);
    run_progress_end(&pr);
    if (rc == 0 && (ferror(in) || got == -2)) rc = av_err(e, "%s: read error: %s", bs.name, strerror(errno));
    free(line);
    if (in != stdin) fclose(in);
    if (rc != 0) {
        if (streaming) av_out_abort(&out);
        return -1;
    }
    if (streaming && av_out_commit(&out, e) != 0) return -1;
    r->cover = shard_n > 1 ? (StatsCover){taken, covered, (int)shard_i, (int)shard_n, lineno, corpus}
                           : (StatsCover){lineno, corpus, 0, 0, 0, 0};
    r->have_cover = 1;
    if (!o->quiet && streaming && o->output.json_path && strcmp(o->output.json_path, "-"))
        av_info("wrote %s", o->output.json_path);
    if (!o->quiet && o->output.out_dir && bs.done)
        av_info("wrote a file per line into %s (NNNNNN.json%s%s, NNNNNN the line number)", o->output.out_dir,
                o->output.out_html ? ", .html" : "", o->output.out_npy ? ", .npy" : "");
    if (o->stats && run_finish_stats(r, e) != 0) return -1;
    if (o->heads.on && run_finish_heads(r, e) != 0) return -1;
    if (bs.failed && shard_n > 1)
        return av_err(e, "%ld of %ld lines of shard %ld/%ld failed", bs.failed, taken, shard_i, shard_n);
    if (bs.failed) return av_err(e, "%ld of %ld lines failed", bs.failed, taken);
    if (!o->quiet) av_info("%ld inputs processed", bs.done);
    return 0;
}
