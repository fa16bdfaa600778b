/* command_diff.c — attnviz diff: two texts on one model, or one text on two
 * models (src/cmd/cmd_diff.c). */
#include "../cli_table.h"
#include "model.h"
#include "pipeline.h"

static int check(CliOptions *o, int n, char **words, AvErr *e) {
    const int two_models = o->diff_spec.model_b != NULL;
    if (two_models ? n != 1 : n != 2)
        return cli_usage(e, "%s", two_models ? "diff --model A --model B takes one TEXT (run on both models)"
                                             : "diff takes TEXT_A TEXT_B (one model), or --model A --model B TEXT");
    o->run.text_a = words[0];
    o->run.text_b = two_models ? NULL : words[1];
    return 0;
}

static int run(const CliOptions *o, AvErr *e) {
    return pipeline_diff(&o->model, &o->diff_spec, &o->run, e);
}

const CliCommand CLI_CMD_DIFF = {
    .name = "diff",
    .bit = C_DIFF,
    .synopsis = "attnviz diff [--model M] TEXT_A TEXT_B\nattnviz diff --model A --model B TEXT",
    .summary = "compare attention: two texts on one model, or one text on two",
    .about = "Compare attention: two texts on one model, or one text on two models of one tokenizer (refused, exit "
             "1, when their token ids or layer/head counts differ). Tokens are aligned by a longest common "
             "subsequence of their ids; per head, the Jensen-Shannon divergence (bits) of aligned query rows; a "
             "table of the most divergent heads on stdout, --json, and the page (default attnviz-diff.html: "
             "divergence per head, B - A matrices). Encoder-decoders: the two sources, and --decoder-text TEXT for "
             "both; each stack compared apart (table and --json).",
    .examples = "attnviz diff \"the cat sat on the mat\" \"the dog sat on the log\"",
    .check = check,
    .run = run,
};
