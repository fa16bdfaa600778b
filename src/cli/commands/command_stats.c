/* command_stats.c — attnviz stats --merge FILE...: shards' --stats / heads
 * --json files added up (analysis/heads.c). */
#include <string.h>

#include "../cli_table.h"
#include "heads.h"
#include "report.h"

static int check(CliOptions *o, int n, char **words, AvErr *e) {
    if (!o->merge) return cli_usage(e, "%s", "attnviz stats adds up files: attnviz stats --merge FILE... [--json OUT]");
    if (n < 1) return cli_usage(e, "%s", "stats --merge needs FILE... (--stats --json or heads --json outputs)");
    o->merge_files = (const char *const *)words;
    o->n_merge_files = n;
    return 0;
}

static int run(const CliOptions *o, AvErr *e) {
    const char *json = o->run.output.json_path;
    if (heads_merge_files(o->merge_files, o->n_merge_files, json, e) != 0) return -1;
    if (json && strcmp(json, "-") && !o->run.quiet) av_info("wrote %s", json);
    return 0;
}

const CliCommand CLI_CMD_STATS = {
    .name = "stats",
    .bit = C_STATS,
    .synopsis = "attnviz stats --merge FILE... [--json OUT]",
    .summary = "add up the --stats or heads --json files of shards",
    .about = "attnviz stats --merge FILE... adds up the sums of --stats --json or heads --json files of shards of "
             "one corpus (same model and options): the same numbers, and the same bytes, as one run over all.",
    .examples = "attnviz stats --merge stats.0.json stats.1.json --json all.json",
    .positional_files = 1,
    .check = check,
    .run = run,
};
