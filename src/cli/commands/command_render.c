/* command_render.c — attnviz render INPUT: attention computed elsewhere,
 * through the run's writers (src/cmd/cmd_render.c). */
#include "../cli_table.h"
#include "pipeline.h"

static int check(CliOptions *o, int n, char **words, AvErr *e) {
    if (n != 1) return cli_usage(e, "%s", n < 1 ? "render needs INPUT (.npz or .safetensors)" : "render takes one INPUT");
    o->render_spec.input = words[0];
    return 0;
}

static int run(const CliOptions *o, AvErr *e) { return pipeline_render(&o->render_spec, &o->run, e); }

const CliCommand CLI_CMD_RENDER = {
    .name = "render",
    .bit = C_RENDER,
    .synopsis = "attnviz render INPUT [--meta FILE] [OUTPUT AND PAGE OPTIONS]",
    .summary = "draw attention computed elsewhere (e.g. by transformers)",
    .about = "Draw attention computed elsewhere, e.g. by transformers. INPUT: a .npz or .safetensors holding "
             "'attention' [layers, heads, n, n] (or attention.0, attention.1, ... per layer), optionally "
             "'queries'/'keys' [layers, heads, n, d]; or encoder_attention, decoder_attention, cross_attention. "
             "The tokens come from --meta.",
    .examples = "attnviz render attention.npz --meta tokens.json -o page.html",
    .positional_files = 1,
    .check = check,
    .run = run,
};
