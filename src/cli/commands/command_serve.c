/* command_serve.c — attnviz serve: the page, live (src/serve/). */
#include "../cli_table.h"
#include "model.h"
#include "serve.h"

/* Up to two words: the page's first input. */
static int check(CliOptions *o, int n, char **words, AvErr *e) {
    if (measure_any_per_layer(&o->run.capture))
        return cli_usage(e, "serve computes attention and value-weighted attention (--measure norm): --measure %s is the "
                            "command line's (attnviz --html FILE TEXT)",
                         measure_wanted(&o->run.capture, MEASURE_ALTI) ? "alti" : "rollout");
    if (n > 2) return cli_usage(e, "too many arguments: '%s' (quote the text)", words[2]);
    if (o->serve_spec.long_from == 0)
        return cli_usage(e, "%s", "serve browses inputs past --long-from N by tiles (1 to 8192): 0 goes with a run's page");
    o->run.text_a = n >= 1 ? words[0] : NULL;
    o->run.text_b = n == 2 ? words[1] : NULL;
    return 0;
}

static int run(const CliOptions *o, AvErr *e) {
    return serve_run(&o->serve_spec, e);
}

const CliCommand CLI_CMD_SERVE = {
    .name = "serve",
    .bit = C_SERVE,
    .synopsis = "attnviz serve [--model DIR|FILE]... [--port N] [--host ADDR] [--open] [--cache-mb N] [--timeout S] "
                "[TEXT [TEXT_B]]",
    .summary = "a local server with the page, which runs what you type",
    .about = "A local server with the same page, which runs what you type (every view updates) and fetches only the "
             "heads it shows, so long inputs stay interactive. It prints one URL with a per-run token; binds "
             "127.0.0.1 unless --host says otherwise. The page asks for predictions, layers and heads itself. The "
             "API: docs/serve-api.md.",
    .examples = "attnviz serve --model weights/SmolLM2-135M-Instruct.Q4_1.gguf --model weights/all-MiniLM-L6-v2 --open",
    .check = check,
    .run = run,
};
