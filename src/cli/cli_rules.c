/* cli_rules.c — the options that need, or exclude, others: one row per rule
 * (cli_table.h's CliRule), checked by the parser once every option is read
 * and before the command's own check. Which command takes an option is not a
 * rule: it is the option's row (`cmds`). */
#include "cli_table.h"

#define MODEL_CMDS (C_RUN | C_SERVE | C_DIFF | C_HEADS)
#define PAGE_CMDS (C_RUN | C_RENDER | C_DIFF | C_SERVE)

const CliRule CLI_RULES[] = {
    /* the long page keeps no n x n matrix; without --long-from, a run asking any of these writes the whole matrices */
    {C_RUN, "long-from", CLI_EXCLUDES,
     "batch json npy tokens-only telemetry qk hidden stats generate measure=norm measure=alti measure=rollout no-special "
     "words layers heads logit-lens attribution target ablate flow decoder-text explain",
     "--long-from writes a long input's page (--html, for one TEXT) and no whole matrix: not with {other}"},
    {MODEL_CMDS, "cased", CLI_EXCLUDES, "uncased", "--cased and --uncased: one or the other"},
    {C_RUN | C_HEADS, "shard", CLI_NEEDS, "batch", "--shard goes with --batch FILE (a run, --stats or attnviz heads)"},
    {C_RUN | C_HEADS, "strict pack-tokens", CLI_NEEDS, "batch", "{opt} goes with --batch FILE"},
    {C_RUN, "out-dir", CLI_NEEDS, "batch", "--out-dir goes with --batch"},
    {C_RUN, "out-dir", CLI_EXCLUDES, "json stats",
     "--out-dir writes one file per input line (DIR/000001.json): not with {other}"},
    {C_RUN, "stats", CLI_EXCLUDES, "html npy",
     "--stats writes its table (or --json FILE), no page or arrays: not with {other}"},
    {C_RUN, "temperature top-p seed stop", CLI_NEEDS, "generate",
     "--temperature, --top-p, --seed and --stop go with --generate"},
    {C_RUN, "predict generate", CLI_EXCLUDES, "no-special words stats tokens-only",
     "--predict and --generate show every token: not with --no-special, --words, --stats or --tokens-only"},
    {C_RUN, "decoder-text", CLI_EXCLUDES, "generate",
     "--decoder-text gives the decoder its tokens; --generate makes them: one or the other"},
    {C_RUN, "decoder-text", CLI_EXCLUDES, "batch tokens-only telemetry",
     "--decoder-text goes with one source TEXT: not with a second text, --batch (its lines are SOURCE<TAB>TARGET), "
     "--tokens-only or --telemetry"},
    {C_RUN, "chat-file", CLI_EXCLUDES, "batch", "--chat-file FILE is the input: no --batch"},
    {C_RUN, "chat chat-file", CLI_EXCLUDES, "decoder-text",
     "{opt} renders text in a decoder's chat template: not with {other}"},
    {C_RUN, "telemetry", CLI_EXCLUDES,
     "html npy out-dir qk hidden stats predict generate no-special words tokens-only measure=norm measure=alti "
     "measure=rollout logit-lens attribution target ablate flow explain",
     "--telemetry writes each row's statistics instead of the matrices: not with --html, --npy, --out-dir, --qk, "
     "--hidden, --stats, --predict, --generate, --no-special, --words, --tokens-only, --measure, --logit-lens, "
     "--attribution, --ablate, --flow or --explain"},
    {C_RUN, "telemetry", CLI_NEEDS, "json", "--telemetry writes to --json FILE (or - for stdout)"},
    {C_RUN, "logit-lens attribution target ablate flow", CLI_EXCLUDES, "batch stats tokens-only no-special words",
     "--logit-lens, --attribution, --target, --ablate and --flow read one input's own tokens: not with --batch, "
     "--stats, --tokens-only, --no-special or --words"},
    {C_RUN, "flow", CLI_EXCLUDES, "heads", "--flow weighs every head of the layers it traces: not with --heads"},
    {C_RUN, "attribution target", CLI_NEEDS, "predict generate",
     "--attribution and --target go with --predict K or --generate N"},
    {C_RUN, "position", CLI_NEEDS, "attribution target ablate flow",
     "--position goes with --attribution, --target, --ablate or --flow"},
    {C_RUN, "ablate-mode", CLI_NEEDS, "ablate", "--ablate-mode goes with --ablate"},
    {C_RUN, "tokens-only", CLI_EXCLUDES, "stats npy html", "--tokens-only writes tokens only (no --stats, --npy or --html)"},
    {C_RUN, "tokens-only", CLI_EXCLUDES, "measure=norm measure=alti measure=rollout", "--tokens-only runs no model: no {other}"},
    {C_RUN | C_HEADS, "measure=alti measure=rollout", CLI_EXCLUDES, "no-special words",
     "{opt} mixes the raw tokens through every layer: not with --no-special or --words (the page's toggles hide and "
     "merge tokens of its matrices)"},
    {C_RUN, "query key", CLI_NEEDS, "explain", "--query and --key go with --explain L.H"},
    {C_RUN, "explain", CLI_EXCLUDES, "batch stats tokens-only no-special words telemetry",
     "--explain reads one input's residual stream: not with --batch, --stats, --tokens-only, --no-special, --words or "
     "--telemetry"},
    {PAGE_CMDS, "show-heads=all", CLI_EXCLUDES, "head",
     "--show-heads all draws every head; --head opens on one: one or the other"},
};

const int CLI_N_RULES = (int)(sizeof CLI_RULES / sizeof CLI_RULES[0]);
