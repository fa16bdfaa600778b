/* command_heads.c — attnviz heads: scores per head over the inputs
 * (analysis/heads.c), through the run (heads.on). */
#include "../cli_table.h"
#include "heads.h"
#include "model.h"
#include "pipeline.h"

static int check(CliOptions *o, int n, char **words, AvErr *e) {
    for (int i = 0; i < o->run.heads.n_scores; i++)
        if (o->run.heads.scores[i] == HS_PATTERN && !o->run.heads.pattern)
            return cli_usage(e, "%s", "--score pattern needs --pattern FILE|RULE");
    if (o->run.capture.n_measures > 1)
        return cli_usage(e, "%s", "heads scores one measure: give --measure one name");
    if (o->run.batch.path) {
        if (n > 0) return cli_usage(e, "--batch takes its inputs from the file, not '%s'", words[0]);
        return 0;
    }
    if (n < 1) return cli_usage(e, "%s", "heads needs TEXT or --batch FILE");
    if (n > 2) return cli_usage(e, "too many arguments: '%s' (quote the text)", words[2]);
    o->run.text_a = words[0];
    o->run.text_b = n == 2 ? words[1] : NULL;
    return 0;
}

static int run(const CliOptions *o, AvErr *e) {
    return pipeline_main(&o->model, &o->run, e);
}

const CliCommand CLI_CMD_HEADS = {
    .name = "heads",
    .bit = C_HEADS,
    .synopsis = "attnviz heads [--batch FILE | TEXT [TEXT_B]] [--score NAME]... [--top K] [--pattern FILE|RULE]",
    .summary = "score every head (previous, induction, ...) over the inputs",
    .about = "Per layer and head, scores averaged over the inputs: previous, next, self, first, sep, duplicate "
             "(shares of all attention on a pattern, as TransformerLens's detect_head), induction (on random "
             "sequences repeated twice), distance, entropy, and pattern (your own); a table with the top K heads per "
             "score, or JSON with --json. Encoder-decoders: SOURCE TARGET, or --batch lines SOURCE<TAB>TARGET, "
             "each stack scored apart.",
    .examples = "attnviz heads --batch corpus.txt --score induction --top 3",
    .check = check,
    .run = run,
};
