/* main.c — entry point: signals, the stderr reporter, the CLI; the only code
 * that writes to stderr and turns errors into exit statuses. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "err.h"
#include "gemm.h"
#include "report.h"
#include "util.h"

/* Exit statuses (docs/errors.md): an error's kind says which. */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Ctrl-C or a kill must not leave half-written outputs behind. */
static void on_signal(int sig) {
    av_out_abort_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A progress line is on screen (no newline yet): the next line clears it first. */
static int progress_shown;

static void clear_progress(void) {
    if (progress_shown) fputs("\r\033[K", stderr);
    progress_shown = 0;
}

/* --profile's lines (one per model) wait for the end of the run, after any
 * error: scripts read them as the last lines, without a prefix. */
static char profile[2][512];
static int n_profile;

/* Messages arrive sanitized (err.c, report.c): nothing from a model file or an
 * input can drive the terminal. */
static void stderr_note(void *ctx, AvNoteKind kind, const char *msg) {
    (void)ctx;
    if (kind == AV_NOTE_PROGRESS || kind == AV_NOTE_PROGRESS_DONE) { /* redrawn in place */
        fprintf(stderr, "\r\033[Kattnviz: %s%s", msg, kind == AV_NOTE_PROGRESS_DONE ? "\n" : "");
        progress_shown = kind == AV_NOTE_PROGRESS;
        return;
    }
    if (kind == AV_NOTE_PROFILE) {
        if (n_profile < 2) snprintf(profile[n_profile++], sizeof profile[0], "%s", msg);
        return;
    }
    clear_progress();
    fprintf(stderr, "attnviz: %s%s\n", kind == AV_NOTE_WARNING ? "warning: " : "", msg);
}

static int report_error(const AvErr *e) {
    clear_progress();
    if (e->msg[0]) fprintf(stderr, "attnviz: %s\n", e->msg);
    return e->kind == AV_ERR_USAGE ? EXIT_USAGE : EXIT_RUNTIME;
}

int main(int argc, char **argv) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    /* Past a file-size limit (ulimit -f) a write fails with EFBIG, reported
     * like a full disk, instead of the signal killing us mid-file. */
    signal(SIGXFSZ, SIG_IGN);

    /* A progress line only where someone watches it redrawn. */
    const AvReporter rep = {stderr_note, NULL, isatty(STDERR_FILENO)};
    av_set_reporter(&rep);

    /* ATTNVIZ_KERNEL pins the products' kernel for the whole run; one it can't run is a usage error. */
    AvErr e = {0};
    if (gemm_kernel_from_env(&e) != 0) {
        e.kind = AV_ERR_USAGE;
        return report_error(&e);
    }

    CliOptions o;
    int rc = EXIT_OK, what = cli_parse(&o, argc, argv, &e);
    if (what == CLI_HELP || what == CLI_GENERATE) {
        char *text = what == CLI_HELP ? cli_help_text(o.command) : cli_generate(&o, &e);
        if (!text && !e.msg[0]) av_err(&e, "out of memory");
        if (!text || fputs(text, stdout) == EOF || fflush(stdout) != 0) {
            if (text) av_err(&e, "stdout: write error");
            rc = report_error(&e);
        }
        free(text);
    } else if (what == CLI_VERSION)
        printf("attnviz %s (kernel %s; built with %s; element-wise loops %s)\n", ATTNVIZ_VERSION, gemm_kernel(),
               gemm_kernel_list(0), (const char *[]){"baseline", "avx2", "avx512"}[gemm_vec_level()]);
    else if (what < 0 || cli_run(&o, &e) != 0) rc = report_error(&e);
    for (int i = 0; i < n_profile; i++) fprintf(stderr, "%s\n", profile[i]);
    cli_options_free(&o);
    return rc;
}
