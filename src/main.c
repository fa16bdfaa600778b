/* main.c — entry point: signals, then the CLI. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "err.h"
#include "gemm.h"
#include "util.h"

/* Ctrl-C or a kill must not leave half-written outputs behind. */
static void on_signal(int sig) {
    av_out_abort_all();
    signal(sig, SIG_DFL);
    raise(sig);
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

    /* ATTNVIZ_KERNEL pins the products' kernel for the whole run; one it can't run is a usage error. */
    AvErr e;
    if (gemm_kernel_from_env(&e) != 0) {
        av_report("%s", e.msg);
        return EXIT_USAGE;
    }

    CliOptions o;
    int rc = cli_parse(&o, argc, argv);
    if (rc == EXIT_OK) rc = cli_run(&o);
    else if (rc < 0) rc = EXIT_OK; /* --help, --version */
    cli_options_free(&o);
    return rc;
}
