/* test_cli.c — argv into typed settings (cli.h, settings.h): what each
 * command hands to the library, and usage errors returned as values (kind
 * usage, the message main prints), never printed here. Then the table
 * itself (src/cli/cli_table.h): every option accepted exactly by the commands
 * its row names, and --help, the man page and the bash/zsh/fish completions
 * agreeing with the parser; the typo rules; -o. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/cli_table.h"
#include "cli.h"
#include "heads.h"
#include "check_util.h"

/* Parses a NULL-terminated argument list (argv[0] "attnviz" added). */
static int parse(CliOptions *o, AvErr *e, const char *const *args) {
    static char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"attnviz";
    for (; *args; args++) argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    memset(e, 0, sizeof *e);
    return cli_parse(o, argc, argv, e);
}

START_TEST(a_run_fills_the_run_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--model", "m", "--json", "o.json", "--layers", "3,0-1", "--heads", "2", "--qk", "--predict", "3",
                       "--max-tokens", "9", "--precision", "4", "--layer", "1", "--view", "matrix", "A", "B", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert_str_eq(o.model.path, "m");
    ck_assert_int_eq(o.model.lowercase, -1);
    const RunSpec *r = &o.run;
    ck_assert_str_eq(r->output.json_path, "o.json");
    ck_assert_ptr_null(r->output.html_path);
    ck_assert_int_eq(r->output.precision, 4);
    ck_assert_str_eq(r->output.view, "matrix");
    ck_assert_int_eq(r->sel.n_layers, 3);
    ck_assert(r->sel.layers[0] == 0 && r->sel.layers[1] == 1 && r->sel.layers[2] == 3); /* sorted */
    ck_assert(r->sel.n_heads == 1 && r->sel.heads[0] == 2);
    ck_assert(r->sel.layer == 1 && r->sel.head == -1);
    ck_assert(r->capture.qk && !r->capture.hidden && r->capture.max_tokens == 9);
    ck_assert_int_eq(r->predict.k, 3);
    ck_assert_str_eq(r->text_a, "A");
    ck_assert_str_eq(r->text_b, "B");
    ck_assert_int_eq(r->batch.pack_tokens, CLI_PACK_TOKENS);
    ck_assert(o.cmd == &CLI_CMD_RUN && !o.merge && !r->heads.on);
    AvErr se = {0};
    ck_assert_int_eq(sel_check(&r->sel, 4, 4, "model", &se), 0);
    cli_options_free(&o);
}
END_TEST

/* --long-from on a run: the page's threshold where the page is all it writes; given with an output the long page
 * cannot hold, a usage error naming it; not given, the run chooses (OUT_LONG_AUTO) where the page is all it writes
 * and keeps the whole matrices (0) otherwise, naming the option for its messages; 0: the whole matrices always. */
START_TEST(long_from_goes_with_a_runs_page) {
    CliOptions o;
    AvErr e;
    const char *forced[] = {"--html", "p.html", "--long-from", "16", "--predict", "2", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, forced), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 16);
    cli_options_free(&o);
    const char *dflt[] = {"T", NULL};
    ck_assert_int_eq(parse(&o, &e, dflt), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, OUT_LONG_AUTO);
    ck_assert_ptr_null(o.run.output.whole_for);
    cli_options_free(&o);
    const char *whole[] = {"--html", "p.html", "--json", "o.json", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, whole), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 0);
    ck_assert_str_eq(o.run.output.whole_for, "--json");
    cli_options_free(&o);
    const char *never[] = {"--long-from", "0", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, never), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 0);
    cli_options_free(&o);
    const char *never_json[] = {"--long-from", "0", "--json", "o.json", "T", NULL}; /* says what --json does anyway */
    ck_assert_int_eq(parse(&o, &e, never_json), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 0);
    cli_options_free(&o);
    const char *serve0[] = {"serve", "--long-from", "0", NULL};
    ck_assert_int_eq(parse(&o, &e, serve0), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    cli_options_free(&o);
    const struct {
        const char *opt, *arg, *named;
    } clash[] = {{"--json", "o.json", "--json"}, {"--npy", "o.npy", "--npy"}, {"--layers", "0", "--layers"},
                 {"--measure", "norm", "--measure norm"}, {"--stats", NULL, "--stats"}, {"--batch", "b.txt", "--batch"}};
    for (size_t i = 0; i < sizeof clash / sizeof clash[0]; i++) {
        const char *a[] = {"--long-from", "16", clash[i].opt, clash[i].arg, clash[i].arg ? "T" : NULL, NULL};
        if (!strcmp(clash[i].opt, "--batch")) a[4] = NULL;
        if (!clash[i].arg) a[3] = "T";
        ck_assert_int_eq(parse(&o, &e, a), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        char want[256];
        snprintf(want, sizeof want, "--long-from writes a long input's page (--html, for one TEXT) and no whole matrix: "
                                    "not with %s (see attnviz --help)", clash[i].named);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
    }
    const char *range[] = {"--long-from", "8193", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, range), -1);
    ck_assert_str_eq(e.msg, "--long-from needs 1 to 8192 tokens (0: never), got '8193' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(tokens_only_needs_no_weights) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--tokens-only", "--batch", "-", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.model.tokenizer_only && o.run.capture.tokens_only);
    ck_assert_str_eq(o.run.batch.path, "-");
    cli_options_free(&o);
}
END_TEST

START_TEST(help_and_version_are_answers_not_prints) {
    CliOptions o;
    AvErr e;
    const char *h[] = {"--help", NULL};
    ck_assert_int_eq(parse(&o, &e, h), CLI_HELP);
    cli_options_free(&o);
    char *full = cli_help_text(NULL);
    ck_assert_ptr_nonnull(strstr(full, "Usage: attnviz"));
    ck_assert_ptr_nonnull(strstr(full, "attnviz serve"));
    free(full);
    ck_assert_ptr_null(cli_help_text("nope"));
}
END_TEST

/* attnviz COMMAND --help: that command's synopsis and its options' sections, not the others'. */
START_TEST(a_command_has_its_own_help) {
    CliOptions o;
    AvErr e;
    const char *h[] = {"heads", "--help", NULL};
    ck_assert_int_eq(parse(&o, &e, h), CLI_HELP);
    ck_assert_str_eq(o.command, "heads");
    cli_options_free(&o);
    char *heads = cli_help_text("heads");
    const char *synopsis = "Usage: attnviz heads [--batch FILE | TEXT [TEXT_B]]";
    ck_assert_msg(!strncmp(heads, synopsis, strlen(synopsis)), "%.60s", heads);
    ck_assert_ptr_nonnull(strstr(heads, "Head scores"));
    ck_assert_ptr_nonnull(strstr(heads, "--score NAME"));
    ck_assert_ptr_nonnull(strstr(heads, "--model DIR|FILE"));
    ck_assert_ptr_null(strstr(heads, "attnviz serve"));
    ck_assert_ptr_null(strstr(heads, "--generate"));
    free(heads);
    char *serve = cli_help_text("serve");
    ck_assert_ptr_nonnull(strstr(serve, "--cache-mb N"));
    ck_assert_ptr_null(strstr(serve, "Head scores"));
    free(serve);
    char *render = cli_help_text("render"), *diff = cli_help_text("diff"), *stats = cli_help_text("stats");
    ck_assert_ptr_nonnull(strstr(render, "--meta FILE"));
    ck_assert_ptr_nonnull(strstr(diff, "Jensen-Shannon"));
    ck_assert_ptr_nonnull(strstr(stats, "stats --merge FILE..."));
    free(render), free(diff), free(stats);
    /* every command's help ends with the exit statuses, and the full help holds every section */
    const char *names[] = {"heads", "serve", "render", "diff", "stats"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *text = cli_help_text(names[i]);
        ck_assert_ptr_nonnull(strstr(text, "Exit status: 0 ok"));
        free(text);
    }
    char *full = cli_help_text(NULL);
    ck_assert_ptr_nonnull(strstr(full, "Head scores"));
    ck_assert_ptr_nonnull(strstr(full, "Predictions and generation:"));
    ck_assert_ptr_nonnull(strstr(full, "serve    a local server"));
    free(full);
}
END_TEST

/* attnviz help [COMMAND]: the help, answered like --help (main prints it). */
START_TEST(the_help_command_answers) {
    CliOptions o;
    AvErr e;
    const char *all[] = {"help", NULL}, *one[] = {"help", "serve", NULL}, *bad[] = {"help", "sever", NULL},
               *two[] = {"help", "serve", "diff", NULL};
    ck_assert_int_eq(parse(&o, &e, all), CLI_HELP);
    ck_assert_ptr_null(o.command);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, one), CLI_HELP);
    ck_assert_str_eq(o.command, "serve");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, bad), -1);
    ck_assert_str_eq(e.msg, "help takes a command's name (serve render diff heads stats help), not 'sever' (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, two), -1);
    ck_assert_str_eq(e.msg, "help takes one command's name, not 'diff' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(version_is_an_answer) {
    CliOptions o;
    AvErr e;
    const char *v[] = {"--version", NULL};
    ck_assert_int_eq(parse(&o, &e, v), CLI_VERSION);
    cli_options_free(&o);
}
END_TEST

START_TEST(an_unknown_option_is_a_usage_error) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--frobnicate", "x", NULL};
    ck_assert_int_eq(parse(&o, &e, a), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "unknown option '--frobnicate' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(a_bad_value_is_a_usage_error) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--precision", "12", "x", NULL};
    ck_assert_int_eq(parse(&o, &e, a), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "--precision needs 1 to 9, got '12' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(lens_options_fill_the_lens_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--predict", "2", "--logit-lens", "5", "--target", " the", "--ablate", "0.3,12.1",
                       "--ablate-mode", "mean", "--position", "4", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    const LensSpec *l = &o.run.lens;
    ck_assert(l->lens_k == 5 && l->attribution && l->ablate && l->ablate_mean && l->position == 4);
    ck_assert_str_eq(l->target, " the");
    ck_assert_int_eq(l->n_ablate, 2);
    ck_assert(l->ablate_pairs[0] == 0 && l->ablate_pairs[1] == 3 && l->ablate_pairs[2] == 12 && l->ablate_pairs[3] == 1);
    cli_options_free(&o);
    const char *all[] = {"--ablate", "all", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, all), CLI_RUN);
    ck_assert(o.run.lens.ablate && !o.run.lens.ablate_pairs && o.run.lens.position == -1 && !o.run.lens.ablate_mean);
    cli_options_free(&o);
    /* each refusal: one usage error */
    const char *const *bad[] = {
        (const char *[]){"--ablate", "3", "T", NULL},        (const char *[]){"--ablate", "1.2,", "T", NULL},
        (const char *[]){"--ablate", "-1.0", "T", NULL},     (const char *[]){"--ablate-mode", "mean", "T", NULL},
        (const char *[]){"--ablate", "all", "--ablate-mode", "half", "T", NULL},
        (const char *[]){"--attribution", "T", NULL},        (const char *[]){"--logit-lens", "0", "T", NULL},
        (const char *[]){"--position", "2", "T", NULL},      (const char *[]){"--logit-lens", "3", "--batch", "-", NULL},
        (const char *[]){"heads", "--logit-lens", "3", "T", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(parse(&o, &e, bad[i]), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        cli_options_free(&o);
    }
}
END_TEST

/* --flow [T]: a number right after it is the threshold, a text is the text */
START_TEST(flow_takes_an_optional_threshold) {
    CliOptions o;
    AvErr e;
    const char *plain[] = {"--flow", "The cat", NULL};
    ck_assert_int_eq(parse(&o, &e, plain), CLI_RUN);
    ck_assert(o.run.lens.flow && o.run.lens.flow_threshold == 0.04);
    ck_assert_str_eq(o.run.text_a, "The cat");
    cli_options_free(&o);
    const char *spaced[] = {"--flow", "0.1", "--position", "3", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, spaced), CLI_RUN);
    ck_assert(o.run.lens.flow && o.run.lens.flow_threshold == 0.1 && o.run.lens.position == 3);
    ck_assert_str_eq(o.run.text_a, "T");
    cli_options_free(&o);
    const char *joined[] = {"T", "--flow=0.25", "--layers", "2-5", NULL};
    ck_assert_int_eq(parse(&o, &e, joined), CLI_RUN);
    ck_assert(o.run.lens.flow && o.run.lens.flow_threshold == 0.25);
    ck_assert_str_eq(o.run.text_a, "T");
    cli_options_free(&o);
    const char *const *bad[] = {
        (const char *[]){"--flow", "0", "T", NULL},        (const char *[]){"--flow=1", "T", NULL},
        (const char *[]){"--flow", "1.5", "T", NULL},      (const char *[]){"--flow=x", "T", NULL},
        (const char *[]){"--flow", "--heads", "1", "T", NULL}, (const char *[]){"--flow", "--layers", "0,2", "T", NULL},
        (const char *[]){"--flow", "--batch", "-", NULL},  (const char *[]){"heads", "--flow", "T", NULL},
        (const char *[]){"--flow", "--telemetry", "4", "--json", "-", "T", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(parse(&o, &e, bad[i]), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        cli_options_free(&o);
    }
}
END_TEST

START_TEST(no_text_is_a_usage_error) {
    CliOptions o;
    AvErr e;
    const char *a[] = {NULL};
    ck_assert_int_eq(parse(&o, &e, a), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "missing TEXT (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(chat_and_chat_file_fill_the_run_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--chat", "--generate", "5", "What is it?", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.run.chat && !o.run.chat_file);
    ck_assert_str_eq(o.run.text_a, "What is it?");
    cli_options_free(&o);
    const char *b[] = {"--chat-file", "m.json", "--predict", "3", NULL};
    ck_assert_int_eq(parse(&o, &e, b), CLI_RUN);
    ck_assert_str_eq(o.run.chat_file, "m.json");
    ck_assert_ptr_null(o.run.text_a); /* the messages are the input */
    cli_options_free(&o);
    const char *c[] = {"--chat", "--batch", "lines.txt", NULL};
    ck_assert_int_eq(parse(&o, &e, c), CLI_RUN);
    ck_assert(o.run.chat && o.run.batch.path);
    cli_options_free(&o);
    /* what they cannot go with */
    static const char *const bad[][6] = {
        {"--chat", "a", "b", NULL},                          /* a sentence pair */
        {"--chat-file", "m.json", "text", NULL},             /* a text beside the messages */
        {"--chat-file", "m.json", "--batch", "x.txt", NULL}, /* a batch */
        {"serve", "--chat", NULL},                           /* the page has its own box */
        {"heads", "--chat", "a b", NULL},
        {"diff", "--chat", "a", "b", NULL},
    };
    static const char *const why[] = {"not a sentence pair", "is the input: no TEXT", "is the input: no --batch",
                                      "--chat goes with a run", "--chat goes with a run", "--chat goes with a run"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_int_eq(parse(&o, &e, bad[k]), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        ck_assert_msg(strstr(e.msg, why[k]), "%s: %s", bad[k][0], e.msg);
        cli_options_free(&o);
    }
}
END_TEST

START_TEST(serve_fills_the_serve_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"serve", "--model", "a", "--model", "b", "--port", "0", "--host", "::1", "--cased",
                       "--cache-mb", "10", "--theme", "dark", "hello", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    const ServeSpec *s = &o.serve_spec;
    ck_assert(o.cmd == &CLI_CMD_SERVE && s->n_models == 2);
    ck_assert_str_eq(s->models[0], "a");
    ck_assert_str_eq(s->models[1], "b");
    ck_assert(s->port == 0 && s->cache_mb == 10 && s->lowercase == 0);
    ck_assert_str_eq(s->host, "::1");
    ck_assert_str_eq(s->page.text_a, "hello");
    ck_assert_str_eq(s->page.output.theme, "dark");
    cli_options_free(&o);
}
END_TEST

START_TEST(serve_refuses_what_the_page_asks_itself) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"serve", "--layers", "1", NULL};
    ck_assert_int_eq(parse(&o, &e, a), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "--layers goes with a run (attnviz TEXT), attnviz diff or attnviz heads, not attnviz serve "
                            "(see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

START_TEST(heads_fills_the_heads_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"heads", "--score", "previous", "--score", "induction", "--top", "3", "--seed", "5", "x y", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    const HeadsSpec *h = &o.run.heads;
    ck_assert(h->on && h->n_scores == 2 && h->scores[0] == HS_PREVIOUS && h->scores[1] == HS_INDUCTION);
    ck_assert_int_eq(h->top_k, 3);
    ck_assert_uint_eq(o.run.predict.seed, 5); /* the induction sequences' seed */
    ck_assert_str_eq(o.run.text_a, "x y");
    cli_options_free(&o);
}
END_TEST

START_TEST(diff_and_stats_and_render_fill_theirs) {
    CliOptions o;
    AvErr e;
    const char *d[] = {"diff", "--model", "A", "--model", "B", "--top", "4", "text", NULL};
    ck_assert_int_eq(parse(&o, &e, d), CLI_RUN);
    ck_assert(o.cmd == &CLI_CMD_DIFF && o.diff_spec.top == 4);
    ck_assert_str_eq(o.model.path, "A");
    ck_assert_str_eq(o.diff_spec.model_b, "B");
    ck_assert_str_eq(o.run.text_a, "text");
    ck_assert_ptr_null(o.run.text_b);
    cli_options_free(&o);
}
END_TEST

START_TEST(stats_merge_lists_its_files) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"stats", "--merge", "a.json", "b.json", "--json", "m.json", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.merge && o.n_merge_files == 2);
    ck_assert_str_eq(o.merge_files[1], "b.json");
    ck_assert_str_eq(o.run.output.json_path, "m.json");
    cli_options_free(&o);
}
END_TEST

START_TEST(render_takes_its_input_and_meta) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"render", "att.npz", "--meta", "m.json", "--html", "p.html", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.cmd == &CLI_CMD_RENDER);
    ck_assert_str_eq(o.render_spec.input, "att.npz");
    ck_assert_str_eq(o.render_spec.meta, "m.json");
    ck_assert_str_eq(o.run.output.html_path, "p.html");
    cli_options_free(&o);
}
END_TEST

START_TEST(shard_takes_an_index_and_a_count) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--batch", "c.txt", "--shard", "2/5", "--stats", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.run.batch.shard_index == 2 && o.run.batch.shard_count == 5);
    cli_options_free(&o);
    const char *h[] = {"heads", "--batch", "c.txt", "--shard", "0/1", NULL};
    ck_assert_int_eq(parse(&o, &e, h), CLI_RUN);
    ck_assert(o.run.heads.on && o.run.batch.shard_index == 0 && o.run.batch.shard_count == 1);
    cli_options_free(&o);
    const char *none[] = {"--batch", "c.txt", NULL}; /* unsharded: one shard of one */
    ck_assert_int_eq(parse(&o, &e, none), CLI_RUN);
    ck_assert(o.run.batch.shard_index == 0 && o.run.batch.shard_count == 1);
    cli_options_free(&o);
}
END_TEST

/* Each bad --shard is one usage error naming the option and what it needs. */
START_TEST(a_bad_shard_is_a_usage_error) {
    static const struct {
        const char *arg, *msg;
    } cases[] = {
        {"4/4", "--shard 4/4: the index I must be below the count N (0 to 3)"},
        {"0/0", "--shard 0/0: the count N must be at least 1"},
        {"-1/4", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '-1/4'"},
        {"+1/4", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '+1/4'"},
        {" 1/4", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got ' 1/4'"},
        {"1/4x", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '1/4x'"},
        {"1/4/8", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '1/4/8'"},
        {"1", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '1'"},
        {"1/", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '1/'"},
        {"/4", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '/4'"},
        {"1.5/4", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got '1.5/4'"},
        {"", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got ''"},
        {"SLURM", "--shard needs I/N (0 <= I < N, e.g. 0/4) or slurm, got 'SLURM'"},
        {"1/99999999999", "--shard 1/99999999999 is out of range: at most 2147483647"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CliOptions o;
        AvErr e;
        const char *a[] = {"--batch", "c.txt", "--shard", cases[i].arg, NULL};
        ck_assert_int_eq(parse(&o, &e, a), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        char want[512];
        snprintf(want, sizeof want, "%s (see attnviz --help)", cases[i].msg);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
    }
    CliOptions o;
    AvErr e;
    const char *single[] = {"--shard", "0/2", "one text", NULL};
    ck_assert_int_eq(parse(&o, &e, single), -1);
    ck_assert_str_eq(e.msg, "--shard goes with --batch FILE (a run, --stats or attnviz heads) (see attnviz --help)");
    cli_options_free(&o);
    const char *merge[] = {"stats", "--merge", "a.json", "--shard", "0/2", NULL};
    ck_assert_int_eq(parse(&o, &e, merge), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    cli_options_free(&o);
}
END_TEST

START_TEST(measure_is_attention_or_norm) {
    CliOptions o;
    AvErr e;
    const char *def[] = {"x", NULL}, *norm[] = {"--measure", "norm", "x", NULL}, *heads[] = {"heads", "--measure", "norm", "x", NULL},
               *serve[] = {"serve", "--measure", "norm", NULL}, *bad[] = {"--measure", "Norm", "x", NULL},
               *diff[] = {"diff", "--measure", "norm", "a", "b", NULL};
    ck_assert_int_eq(parse(&o, &e, def), CLI_RUN);
    ck_assert_int_eq(o.run.capture.measure, MEASURE_ATTENTION);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, norm), CLI_RUN);
    ck_assert_int_eq(o.run.capture.measure, MEASURE_NORM);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, heads), CLI_RUN);
    ck_assert(o.run.heads.on && o.run.capture.measure == MEASURE_NORM);
    cli_options_free(&o);
    ck_assert_int_ge(parse(&o, &e, serve), 0);
    ck_assert_int_eq(o.serve_spec.page.capture.measure, MEASURE_NORM);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, bad), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_str_eq(e.msg, "--measure is attention, norm, alti or rollout, or all, comma-separated, not 'Norm' (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, diff), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    cli_options_free(&o);
}
END_TEST

/* --measure alti|rollout: per-layer measures of a run (and heads, --stats); not where the raw tokens are
 * merged or hidden, not for serve, diff or render. */
START_TEST(measure_alti_and_rollout) {
    CliOptions o;
    AvErr e;
    const char *alti[] = {"--measure", "alti", "x", NULL}, *roll[] = {"heads", "--measure", "rollout", "x", NULL},
               *words[] = {"--measure", "alti", "--words", "x", NULL},
               *serve[] = {"serve", "--measure", "rollout", NULL}, *diff[] = {"diff", "--measure", "alti", "a", "b", NULL};
    ck_assert_int_eq(parse(&o, &e, alti), CLI_RUN);
    ck_assert_int_eq(o.run.capture.measure, MEASURE_ALTI);
    ck_assert(measure_per_layer(o.run.capture.measure));
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, roll), CLI_RUN);
    ck_assert(o.run.heads.on && o.run.capture.measure == MEASURE_ROLLOUT);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, words), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    ck_assert_msg(strstr(e.msg, "--measure alti mixes the raw tokens") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, serve), -1);
    ck_assert_msg(strstr(e.msg, "--measure rollout is the command line's") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, diff), -1);
    ck_assert_str_eq(e.msg, "--measure goes with a run (attnviz TEXT), attnviz serve or attnviz heads, not attnviz diff "
                            "(see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

/* --measure LIST and all: every measure named, in the order given, the first the one scored; each name once;
 * --stats and heads score one; the rules read every name of the list (serve, --words). */
START_TEST(measure_takes_a_list) {
    CliOptions o;
    AvErr e;
    const char *list[] = {"--measure", "rollout,norm,alti", "x", NULL}, *all[] = {"--measure", "all", "x", NULL},
               *twice[] = {"--measure", "alti,norm,alti", "x", NULL}, *empty[] = {"--measure", "alti,", "x", NULL},
               *stats[] = {"--measure", "norm,alti", "--stats", "x", NULL}, *heads[] = {"heads", "--measure", "all", "x", NULL},
               *words[] = {"--measure", "norm,rollout", "--words", "x", NULL},
               *serve[] = {"serve", "--measure", "attention,norm,alti", NULL}, *serve_ok[] = {"serve", "--measure", "attention,norm", NULL};
    ck_assert_int_eq(parse(&o, &e, list), CLI_RUN);
    const CaptureSpec *c = &o.run.capture;
    ck_assert_int_eq(c->measure, MEASURE_ROLLOUT);
    ck_assert_int_eq(c->n_measures, 3);
    ck_assert(c->measures[0] == MEASURE_ROLLOUT && c->measures[1] == MEASURE_NORM && c->measures[2] == MEASURE_ALTI);
    ck_assert(measure_wanted(c, MEASURE_NORM) && measure_wanted(c, MEASURE_ALTI) && measure_any_per_layer(c));
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, all), CLI_RUN);
    ck_assert_int_eq(o.run.capture.n_measures, 4);
    ck_assert_int_eq(o.run.capture.measure, MEASURE_ATTENTION);
    ck_assert(measure_wanted(&o.run.capture, MEASURE_ROLLOUT) && measure_wanted(&o.run.capture, MEASURE_NORM));
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, twice), -1);
    ck_assert_str_eq(e.msg, "--measure names alti twice in 'alti,norm,alti' (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, empty), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, stats), -1);
    ck_assert_msg(strstr(e.msg, "--stats scores one measure") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, heads), -1);
    ck_assert_msg(strstr(e.msg, "heads scores one measure") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, words), -1);
    ck_assert_msg(strstr(e.msg, "--measure rollout mixes the raw tokens") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, serve), -1);
    ck_assert_msg(strstr(e.msg, "--measure alti is the command line's") != NULL, "%s", e.msg);
    cli_options_free(&o);
    ck_assert_int_ge(parse(&o, &e, serve_ok), 0);
    ck_assert(measure_wanted(&o.serve_spec.page.capture, MEASURE_NORM));
    cli_options_free(&o);
}
END_TEST

/* --explain L.H [--query Q --key K]: one head; the pair options only with it; one input's stream. */
START_TEST(explain_takes_one_head) {
    CliOptions o;
    AvErr e;
    const char *ok[] = {"--explain", "5.1", "--query", "7", "--key", "3", "x", NULL}, *two[] = {"--explain", "1.2,3.4", "x", NULL},
               *bare[] = {"--query", "2", "x", NULL}, *batch[] = {"--explain", "0.0", "--batch", "f", NULL},
               *junk[] = {"--explain", "5", "x", NULL};
    ck_assert_int_eq(parse(&o, &e, ok), CLI_RUN);
    ck_assert(o.run.explain.on && o.run.explain.layer == 5 && o.run.explain.head == 1);
    ck_assert(o.run.explain.query == 7 && o.run.explain.key == 3);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, two), -1);
    ck_assert_str_eq(e.msg, "--explain needs one head as LAYER.HEAD (e.g. 5.1), got '1.2,3.4' (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, junk), -1);
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, bare), -1);
    ck_assert_str_eq(e.msg, "--query and --key go with --explain L.H (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, batch), -1);
    ck_assert_int_eq(e.kind, AV_ERR_USAGE);
    cli_options_free(&o);
}
END_TEST

static void slurm_env(const char *id, const char *count, const char *min, const char *max, const char *step) {
    const char *names[] = {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                           "SLURM_ARRAY_TASK_STEP"};
    const char *vals[] = {id, count, min, max, step};
    for (int i = 0; i < 5; i++) {
        if (vals[i]) setenv(names[i], vals[i], 1);
        else unsetenv(names[i]);
    }
}

/* --shard slurm: the array task's place, from Slurm's variables, or one line saying why not. */
START_TEST(shard_slurm_reads_the_array_task) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--batch", "c.txt", "--shard", "slurm", NULL};
    slurm_env("3", "4", "0", "3", "1");
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.run.batch.shard_index == 3 && o.run.batch.shard_count == 4);
    cli_options_free(&o);
    slurm_env("2", "4", "1", "4", NULL); /* --array=1-4: the second task is shard 1 */
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    ck_assert(o.run.batch.shard_index == 1 && o.run.batch.shard_count == 4);
    cli_options_free(&o);
    static const struct {
        const char *id, *count, *min, *max, *step, *msg;
    } bad[] = {
        {NULL, NULL, NULL, NULL, NULL,
         "--shard slurm: SLURM_ARRAY_TASK_ID is not set (not a task of a Slurm job array: sbatch --array=0-N-1)"},
        {"0", NULL, NULL, NULL, NULL,
         "--shard slurm: SLURM_ARRAY_TASK_COUNT is not set (not a task of a Slurm job array: sbatch --array=0-N-1)"},
        {"x1", "4", "0", "3", "1", "--shard slurm: SLURM_ARRAY_TASK_ID is 'x1', not a whole number"},
        {"2", "3", "0", "5", "1", /* --array=0,2,5 */
         "--shard slurm: the array is not one range in steps of 1 (tasks 0 to 5, step 1, 3 tasks): submit with --array=0-2"},
        {"2", "4", "0", "6", "2", /* --array=0-6:2 */
         "--shard slurm: the array is not one range in steps of 1 (tasks 0 to 6, step 2, 4 tasks): submit with --array=0-3"},
        {"0", "0", "0", "0", "1", "--shard slurm: SLURM_ARRAY_TASK_COUNT is 0, not at least 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        slurm_env(bad[i].id, bad[i].count, bad[i].min, bad[i].max, bad[i].step);
        ck_assert_int_eq(parse(&o, &e, a), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        char want[512];
        snprintf(want, sizeof want, "%s (see attnviz --help)", bad[i].msg);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
    }
    slurm_env(NULL, NULL, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------------ the table */

/* A value each row parses (no model is opened: parsing never reads one). */
static const char *sample(const CliOption *opt) {
    static const struct {
        const char *name, *value;
    } custom[] = {{"model", "m"},     {"output", "o.json"}, {"html", "p.html"},   {"npy", "a.npy"},
                  {"view", "head"},   {"show-heads", "0"},  {"top", "3"},         {"seed", "1"},
                  {"ablate", "all"},  {"score", "previous"}, {"shard", "0/2"},    {"completions", "bash"},
                  {"man", "docs/attnviz.1.in"}};
    for (size_t i = 0; i < sizeof custom / sizeof custom[0]; i++)
        if (!strcmp(opt->name, custom[i].name)) return custom[i].value;
    switch (opt->type) {
    case OPT_INT: return opt->lo > 0 ? "1" : "0";
    case OPT_REAL: return "0.5";
    case OPT_SIZE: return "1G";
    case OPT_STRING: return "x";
    case OPT_CHOICE: return opt->choices[0] == 'f' ? "f16" : opt->choices[0] == 'a' ? "attention" : opt->choices[0] == 'z' ? "zero" : "dark";
    case OPT_LIST: return "0";
    default: return NULL;
    }
}

/* A refusal for belonging elsewhere: "--X goes with ..., not a run" / "not attnviz CMD". */
static int refused_elsewhere(const AvErr *e, const CliCommand *cmd) {
    char tail[64];
    if (cmd->bit == C_RUN) snprintf(tail, sizeof tail, ", not a run (see attnviz --help)");
    else snprintf(tail, sizeof tail, ", not attnviz %s (see attnviz --help)", cmd->name);
    const size_t n = strlen(e->msg), t = strlen(tail);
    return strstr(e->msg, " goes with ") && n > t && !strcmp(e->msg + n - t, tail);
}

/* Parses [CMD] --opt [VALUE] (plus a text or file, so a command's own check has its words). */
static int parse_option_for(CliOptions *o, AvErr *e, const CliCommand *cmd, const CliOption *opt, const char *spelled) {
    const char *a[8];
    int n = 0;
    if (cmd->bit != C_RUN) a[n++] = cmd->name;
    a[n++] = spelled;
    if (opt->arg && !(opt->flags & OPT_OPTIONAL)) a[n++] = sample(opt);
    a[n++] = cmd->bit == C_STATS ? "--merge" : "--quiet";
    a[n++] = cmd->bit == C_STATS || cmd->bit == C_RENDER ? "f.json" : "T";
    a[n] = NULL;
    return parse(o, e, a);
}

/* Every option is read by exactly the commands its row names: elsewhere the one line
 * naming where it goes, never an unknown option; there never that line. */
START_TEST(each_option_goes_where_its_row_says) {
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        const CliOption *opt = &CLI_OPTIONS[i];
        char spelled[64];
        snprintf(spelled, sizeof spelled, "--%s", opt->name);
        for (int c = 0; c < CLI_N_COMMANDS; c++) {
            const CliCommand *cmd = CLI_COMMANDS[c];
            CliOptions o;
            AvErr e;
            const int rc = parse_option_for(&o, &e, cmd, opt, spelled);
            if (opt->cmds & cmd->bit) {
                ck_assert_msg(rc >= 0 || (!refused_elsewhere(&e, cmd) && !strstr(e.msg, "unknown option")),
                              "%s refused by '%s': %s", spelled, cmd->name, e.msg);
            } else {
                ck_assert_msg(rc == -1 && e.kind == AV_ERR_USAGE && refused_elsewhere(&e, cmd),
                              "%s taken by '%s' (rc %d: %s)", spelled, cmd->name, rc, e.msg);
                ck_assert_msg(!strncmp(e.msg, spelled, strlen(spelled)), "%s", e.msg);
            }
            cli_options_free(&o);
        }
    }
}
END_TEST

/* The rows are well formed, and every rule names options of the table, taken by its commands. */
START_TEST(the_table_is_consistent) {
    ck_assert_int_le(CLI_N_OPTIONS, CLI_MAX_OPTIONS);
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        const CliOption *a = &CLI_OPTIONS[i];
        ck_assert_msg(a->cmds && a->help && a->help[0] && a->section < SEC_N, "--%s", a->name);
        ck_assert_msg(a->type != OPT_CUSTOM || a->parse, "--%s: custom without a parser", a->name);
        ck_assert_msg(a->type != OPT_CHOICE || a->choices, "--%s: choice without choices", a->name);
        ck_assert_msg(!((a->type == OPT_INT || a->type == OPT_REAL || a->type == OPT_SIZE || a->type == OPT_LIST) && !a->what),
                      "--%s: no `what` for its messages", a->name);
        ck_assert_msg((a->type == OPT_FLAG) == (a->arg == NULL) || a->type == OPT_CUSTOM, "--%s: arg vs type", a->name);
        ck_assert_msg(a->type == OPT_CUSTOM || (a->flags & OPT_ANSWER) || a->at != 0, "--%s: no field", a->name);
        for (int j = i + 1; j < CLI_N_OPTIONS; j++) {
            ck_assert_msg(strcmp(a->name, CLI_OPTIONS[j].name), "--%s defined twice", a->name);
            ck_assert_msg(!a->short_name || a->short_name != CLI_OPTIONS[j].short_name, "-%c defined twice", a->short_name);
        }
    }
    for (int r = 0; r < CLI_N_RULES; r++) {
        const char *lists[2] = {CLI_RULES[r].when, CLI_RULES[r].others};
        for (int l = 0; l < 2; l++)
            for (const char *p = lists[l]; *p;) {
                size_t n = strcspn(p, " =");
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)n, p);
                const CliOption *opt = cli_option(name);
                ck_assert_msg(opt, "rule %d names --%s, no option", r, name);
                ck_assert_msg(l == 1 || (opt->cmds & CLI_RULES[r].cmds) == CLI_RULES[r].cmds,
                              "rule %d: --%s is not taken by all its commands", r, name);
                p += strcspn(p, " ");
                while (*p == ' ') p++;
            }
    }
}
END_TEST

/* Does text hold the option's help line ("  --name" then a space or the end of the line)? */
static int lists_option(const char *text, const char *label) {
    for (const char *p = text; (p = strstr(p, label)); p++)
        if ((p == text || p[-1] == '\n') && (p[strlen(label)] == ' ' || p[strlen(label)] == '\n')) return 1;
    return 0;
}

/* --help (whole, and each command's) lists every option a command takes, and none it does not. */
START_TEST(help_lists_exactly_the_options_each_command_takes) {
    char *full = cli_help_text(NULL);
    for (int c = 0; c < CLI_N_COMMANDS; c++) {
        const CliCommand *cmd = CLI_COMMANDS[c];
        char *text = cli_help_text(cmd->name);
        ck_assert_ptr_nonnull(text);
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            char label[64];
            if (opt->short_name) snprintf(label, sizeof label, "  -%c, --%s", opt->short_name, opt->name);
            else snprintf(label, sizeof label, "  --%s", opt->name);
            const int want = (opt->cmds & cmd->bit) && !(opt->flags & OPT_HIDDEN);
            ck_assert_msg(lists_option(text, label) == want, "'%s' --help %s %s", cmd->name, want ? "lacks" : "lists", label);
            ck_assert_msg(lists_option(full, label) == !(opt->flags & OPT_HIDDEN), "attnviz --help and %s", label);
        }
        free(text);
    }
    free(full);
}
END_TEST

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 4096 > cap) ck_assert_ptr_nonnull(buf = realloc(buf, cap = cap * 2 + 8192));
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* The man page is generated from the table (make man): the committed docs/attnviz.1 is what
 * the table and docs/attnviz.1.in make now, and it names every option, hidden ones too. */
START_TEST(the_committed_man_page_is_the_tables) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--man", "docs/attnviz.1.in", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_GENERATE);
    char *man = cli_generate(&o, &e);
    ck_assert_msg(man != NULL, "%s", e.msg);
    char *committed = slurp("docs/attnviz.1");
    ck_assert_msg(!strcmp(man, committed), "docs/attnviz.1 is not what the table makes: run make man");
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        char roff[96], *p = roff;
        p += sprintf(p, "\\fB\\-\\-");
        for (const char *q = CLI_OPTIONS[i].name; *q; q++) p += sprintf(p, *q == '-' ? "\\-" : "%c", *q);
        sprintf(p, "\\fR");
        ck_assert_msg(strstr(man, roff), "the man page lacks --%s", CLI_OPTIONS[i].name);
    }
    for (int c = 1; c < CLI_N_COMMANDS; c++) {
        char tp[64];
        snprintf(tp, sizeof tp, ".B attnviz %s\n", CLI_COMMANDS[c]->name);
        ck_assert_msg(strstr(man, tp), "the man page lacks %s", tp);
    }
    free(committed);
    free(man);
    cli_options_free(&o);
    const char *missing[] = {"--man", "docs/no-such.1.in", NULL};
    ck_assert_int_eq(parse(&o, &e, missing), CLI_GENERATE);
    ck_assert_ptr_null(cli_generate(&o, &e));
    ck_assert_ptr_nonnull(strstr(e.msg, "docs/no-such.1.in"));
    cli_options_free(&o);
}
END_TEST

static char *completion(const char *shell) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"--completions", shell, NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_GENERATE);
    char *text = cli_generate(&o, &e);
    ck_assert_msg(text != NULL, "%s", e.msg);
    cli_options_free(&o);
    return text;
}

/* The options a completion script offers for cmd ("run", "serve", ...): each "--name" in
 * the script's part for that command, marked in seen[] by row. */
static void offered(const char *shell, const char *script, const char *cmd, unsigned char *seen) {
    memset(seen, 0, CLI_MAX_OPTIONS);
    char start[64];
    const char *from, *to;
    if (!strcmp(shell, "fish")) { /* one line per option, its commands in the condition */
        for (const char *p = script; (p = strstr(p, "complete -c attnviz -n '__attnviz_takes")); p++) {
            const char *eol = strchr(p, '\n'), *cond_end = strchr(p + 40, '\'');
            char cond[160];
            snprintf(cond, sizeof cond, " %.*s ", (int)(cond_end - p - 39), p + 39);
            char want[32];
            snprintf(want, sizeof want, " %s ", cmd);
            const char *l = strstr(p, " -l ");
            if (!strstr(cond, want) || !l || l > eol) continue;
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(l + 4, " \n"), l + 4);
            const CliOption *opt = cli_option(name);
            ck_assert_msg(opt, "fish offers --%s, no option", name);
            seen[opt - CLI_OPTIONS] = 1;
        }
        return;
    }
    snprintf(start, sizeof start, strcmp(shell, "bash") ? "\n  %s)\n" : "\n    %s) opts=", cmd);
    ck_assert_msg((from = strstr(script, start)), "%s: no part for %s", shell, cmd);
    to = strcmp(shell, "bash") ? strstr(from + 1, "\n    ;;") : strchr(from + 1, '\n');
    const int zsh = !strcmp(shell, "zsh");
    for (const char *p = from; (p = strstr(p, zsh ? "\n    '" : "--")) && p < to; p++) {
        if (zsh) { /* a spec line: '--name=[...]' or '*--name...' ("-o+": the short form) */
            p += 6 + (p[6] == '*');
            if (strncmp(p, "--", 2)) continue;
        } else if (p[2] == ' ' || p[-1] == '-') {
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(p + 2, " =[\"'+\n"), p + 2);
        const CliOption *opt = cli_option(name);
        ck_assert_msg(opt, "%s offers --%s for %s, no option", shell, name, cmd);
        seen[opt - CLI_OPTIONS] = 1;
        p += strlen(name);
    }
}

/* bash, zsh and fish offer each command exactly the options its rows give it, and the
 * parser takes every option they offer. */
START_TEST(completions_offer_what_the_parser_takes) {
    const char *shells[] = {"bash", "zsh", "fish"};
    for (int s = 0; s < 3; s++) {
        char *script = completion(shells[s]);
        for (int c = 0; c < CLI_N_COMMANDS; c++) {
            const CliCommand *cmd = CLI_COMMANDS[c];
            unsigned char seen[CLI_MAX_OPTIONS];
            offered(shells[s], script, cmd->bit == C_RUN ? "run" : cmd->name, seen);
            for (int i = 0; i < CLI_N_OPTIONS; i++) {
                const CliOption *opt = &CLI_OPTIONS[i];
                const int want = (opt->cmds & cmd->bit) && !(opt->flags & OPT_HIDDEN);
                ck_assert_msg(seen[i] == want, "%s %s --%s for %s", shells[s], want ? "lacks" : "offers", opt->name,
                              cmd->name);
                if (!seen[i]) continue;
                char spelled[64];
                snprintf(spelled, sizeof spelled, "--%s", opt->name);
                CliOptions o;
                AvErr e;
                const int rc = parse_option_for(&o, &e, cmd, opt, spelled);
                ck_assert_msg(rc >= 0 || (!refused_elsewhere(&e, cmd) && !strstr(e.msg, "unknown option")),
                              "%s offers %s for '%s', the parser says: %s", shells[s], spelled, cmd->name, e.msg);
                cli_options_free(&o);
            }
        }
        free(script);
    }
    CliOptions o;
    AvErr e;
    const char *bad[] = {"--completions", "tcsh", NULL};
    ck_assert_int_eq(parse(&o, &e, bad), -1);
    ck_assert_str_eq(e.msg, "--completions is bash, zsh or fish, not 'tcsh' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

/* ------------------------------------------------------------------ typos */

START_TEST(edit_distance_counts_swaps_as_one) {
    ck_assert_int_eq(cli_edit_distance("serve", "serve", 2), 0);
    ck_assert_int_eq(cli_edit_distance("sevre", "serve", 2), 1); /* two letters swapped */
    ck_assert_int_eq(cli_edit_distance("sever", "serve", 2), 2);
    ck_assert_int_eq(cli_edit_distance("dif", "diff", 2), 1);
    ck_assert_int_eq(cli_edit_distance("HEADS", "heads", 2), 0);
    ck_assert_int_eq(cli_edit_distance("frobnicate", "render", 2), 3); /* past max: max + 1 */
}
END_TEST

/* A first word a letter or two from a command is refused with the fix, before anything
 * runs; a real one-word text runs, and -- makes any word a text. */
START_TEST(a_mistyped_command_is_refused) {
    static const struct {
        const char *word, *cmd;
    } typos[] = {{"sever", "serve"}, {"srve", "serve"}, {"head", "heads"}, {"dif", "diff"},  {"stat", "stats"},
                 {"rendr", "render"}, {"Serve", "serve"}, {"hedas", "heads"}, {"sevre", "serve"}, {"server", "serve"}};
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        CliOptions o;
        AvErr e;
        const char *a[] = {typos[i].word, "--model", "m", "hi", NULL};
        ck_assert_int_eq(parse(&o, &e, a), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        char want[256];
        snprintf(want, sizeof want, "'%s' is not a command: did you mean %s? (to run the text '%s', write attnviz -- %s)",
                 typos[i].word, typos[i].cmd, typos[i].word, typos[i].word);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
        const char *forced[] = {"--", typos[i].word, NULL}; /* the fix the message gives */
        ck_assert_int_eq(parse(&o, &e, forced), CLI_RUN);
        ck_assert_str_eq(o.run.text_a, typos[i].word);
        cli_options_free(&o);
    }
    const char *texts[] = {"hello", "frobnicate", "header", "wonder", "time flies", "cat", "he", "stats2", "heads-up", " "};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        CliOptions o;
        AvErr e;
        const char *a[] = {texts[i], NULL};
        ck_assert_msg(parse(&o, &e, a) == CLI_RUN, "'%s': %s", texts[i], e.msg);
        ck_assert_str_eq(o.run.text_a, texts[i]);
        cli_options_free(&o);
    }
    CliOptions o;
    AvErr e;
    const char *late[] = {"--model", "m", "serve", NULL}; /* a command after options */
    ck_assert_int_eq(parse(&o, &e, late), -1);
    ck_assert_str_eq(e.msg, "'serve' is a command: write it first (attnviz serve ...); to run the text 'serve', write "
                            "attnviz [OPTIONS] -- serve");
    cli_options_free(&o);
    const char *help[] = {"hepl", NULL}; /* "hello" is further from "help": a text (above) */
    ck_assert_int_eq(parse(&o, &e, help), -1);
    ck_assert_str_eq(e.msg, "'hepl' is not a command: did you mean help? (to run the text 'hepl', write attnviz -- hepl)");
    cli_options_free(&o);
    /* an empty text is refused (nothing to run), and a lone '-' (standard input elsewhere): after -- it is a text */
    static const struct {
        const char *const argv[5];
        const char *want;
    } refused[] = {
        {{"", NULL}, "empty input: the first text is '' (nothing to run)"},
        {{"a", "", NULL}, "empty input: the second text is '' (nothing to run)"},
        {{"--", "", NULL}, "empty input: the first text is '' (nothing to run)"},
        {{"heads", "--model", "m", "", NULL}, "empty input: the first text is '' (nothing to run)"},
        {{"diff", "a", "", NULL}, "empty input: the second text is '' (nothing to run)"},
        {{"serve", "", NULL}, "empty input: the first text is '' (nothing to run)"},
        {{"--model", "m", "-", NULL}, "'-' is not read as standard input here: give the text itself (\"$(cat FILE)\" for "
                                      "a file's), or --batch - for one input a line from standard input; attnviz -- - "
                                      "runs the text '-'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_int_eq(parse(&o, &e, refused[i].argv), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        ck_assert_str_eq(e.msg, refused[i].want);
        cli_options_free(&o);
    }
    const char *dash[] = {"--", "-", NULL};
    ck_assert_int_eq(parse(&o, &e, dash), CLI_RUN);
    ck_assert_str_eq(o.run.text_a, "-");
    cli_options_free(&o);
    const char *texts_of[] = {"heads", "--model", "m", "sever", "head", NULL}; /* heads' texts are texts */
    ck_assert_int_eq(parse(&o, &e, texts_of), CLI_RUN);
    ck_assert_str_eq(o.run.text_a, "sever");
    cli_options_free(&o);
}
END_TEST

/* An unknown option a letter or two from a known one (or the start of one) is named. */
START_TEST(an_unknown_option_names_the_near_ones) {
    static const struct {
        const char *typed, *msg;
    } cases[] = {
        {"--mdoel", "unknown option '--mdoel': did you mean --model? (see attnviz --help)"},
        {"--predcit", "unknown option '--predcit': did you mean --predict? (see attnviz --help)"},
        {"--temp", "unknown option '--temp': did you mean --templates or --temperature? (see attnviz --help)"},
        {"--colour", "unknown option '--colour' (see attnviz --help)"},
        {"--quite=1", "unknown option '--quite': did you mean --quiet? (see attnviz --help)"},
        {"-x", "unknown option '-x' (see attnviz --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CliOptions o;
        AvErr e;
        const char *a[] = {cases[i].typed, "T", NULL};
        ck_assert_int_eq(parse(&o, &e, a), -1);
        ck_assert_str_eq(e.msg, cases[i].msg);
        cli_options_free(&o);
    }
}
END_TEST

/* Given twice with two values: refused (the last no longer silently wins); repeatable rows add. */
START_TEST(an_option_given_twice_is_refused) {
    CliOptions o;
    AvErr e;
    const char *twice[] = {"--json", "a.json", "T", "--json", "b.json", NULL};
    ck_assert_int_eq(parse(&o, &e, twice), -1);
    ck_assert_str_eq(e.msg, "--json given twice ('a.json', then 'b.json'): give it once (see attnviz --help)");
    cli_options_free(&o);
    const char *same[] = {"--json", "a.json", "--json", "a.json", "--quiet", "--quiet", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, same), CLI_RUN);
    cli_options_free(&o);
    const char *model[] = {"--model", "a", "--model", "b", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, model), -1);
    ck_assert_str_eq(e.msg, "--model given twice ('a', then 'b'): a run reads one model (see attnviz --help)");
    cli_options_free(&o);
    const char *flags[] = {"--qk=yes", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, flags), -1);
    ck_assert_str_eq(e.msg, "--qk takes no value, got 'yes' (see attnviz --help)");
    cli_options_free(&o);
    const char *empty[] = {"--json", "", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, empty), -1);
    ck_assert_str_eq(e.msg, "--json needs a file name, got '' (see attnviz --help)");
    cli_options_free(&o);
    const char *cased[] = {"--cased", "--uncased", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, cased), -1);
    ck_assert_str_eq(e.msg, "--cased and --uncased: one or the other (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

/* ------------------------------------------------------------------ -o and batch outputs */

START_TEST(dash_o_names_the_writer_by_its_extension) {
    static const struct {
        const char *const args[8];
        size_t field; /* CLI_AT of the path it fills */
    } ok[] = {
        {{"-o", "p.html", "T"}, CLI_AT(run.output.html_path)},
        {{"-o", "P.HTM", "T"}, CLI_AT(run.output.html_path)},
        {{"-o", "o.json", "T"}, CLI_AT(run.output.json_path)},
        {{"-oo.json", "T"}, CLI_AT(run.output.json_path)},
        {{"--output=dir/a.npy", "T"}, CLI_AT(run.output.npy_path)},
        {{"--batch", "b.txt", "-o", "l.jsonl"}, CLI_AT(run.output.json_path)},
        {{"--batch", "b.txt", "--stats", "-o", "s.json"}, CLI_AT(run.output.json_path)},
        {{"-o", "o.json", "--json", "o.json", "T"}, CLI_AT(run.output.json_path)},
        {{"render", "a.npz", "-o", "a.npy"}, CLI_AT(run.output.npy_path)},
        {{"diff", "-o", "d.html", "A", "B"}, CLI_AT(run.output.html_path)},
        {{"heads", "-o", "h.json", "T"}, CLI_AT(run.output.json_path)},
        {{"stats", "--merge", "-o", "m.json", "a.json"}, CLI_AT(run.output.json_path)},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CliOptions o;
        AvErr e;
        ck_assert_msg(parse(&o, &e, (const char *const *)ok[i].args) == CLI_RUN, "%zu: %s", i, e.msg);
        const char *got = *(const char **)((char *)&o + ok[i].field);
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, o.output);
        cli_options_free(&o);
    }
    static const struct {
        const char *const args[8];
        const char *msg;
    } bad[] = {
        {{"-o", "out.txt", "T"}, "-o out.txt: the extension names what to write: .html (the page), .json or .npy (the arrays)"},
        {{"-o", "noext", "T"}, "-o noext: the extension names what to write: .html (the page), .json or .npy (the arrays)"},
        {{"-o", "l.jsonl", "T"}, "-o l.jsonl: .jsonl is --batch's JSON Lines; one input writes one JSON document: name it .json"},
        {{"--batch", "b.txt", "-o", "l.json"},
         "-o l.json: --batch writes JSON Lines, one object a line: name it .jsonl (--stats writes one .json document)"},
        {{"-o", "a.json", "--json", "b.json", "T"}, "-o a.json and --json b.json both name the JSON: give one"},
        {{"diff", "-o", "d.npy", "A", "B"}, "-o d.npy: the extension names what to write: .html (the page) or .json"},
        {{"heads", "-o", "h.html", "T"}, "-o h.html: the extension names what to write: .json"},
        {{"serve", "-o", "x.html"}, "-o goes with a run (attnviz TEXT), attnviz render, attnviz diff, attnviz heads or attnviz stats, not attnviz serve"},
        {{"--batch", "b.txt", "--out-dir", "d", "-o", "x.json"},
         "-o FILE names one file; --out-dir DIR writes one per line (--html and --npy as flags add a page and arrays per line)"},
        {{"-o", "p.html", "--long-from", "8", "--json", "j.json", "T"},
         "--long-from writes a long input's page (--html, for one TEXT) and no whole matrix: not with --json"},
        {{"-o", "j.json", "--long-from", "8", "T"},
         "--long-from writes a long input's page (--html, for one TEXT) and no whole matrix: not with -o"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CliOptions o;
        AvErr e;
        ck_assert_int_eq(parse(&o, &e, (const char *const *)bad[i].args), -1);
        ck_assert_int_eq(e.kind, AV_ERR_USAGE);
        char want[512];
        snprintf(want, sizeof want, "%s (see attnviz --help)", bad[i].msg);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
    }
}
END_TEST

/* --batch with --html FILE or --npy FILE (one input's outputs) and no --out-dir: refused,
 * naming --out-dir; with it, --html and --npy are flags. Silent drops are refused too. */
START_TEST(batch_outputs_are_never_dropped_silently) {
    static const struct {
        const char *const args[8];
        const char *msg;
    } bad[] = {
        {{"--batch", "b.txt", "--html", "b.html"},
         "--batch writes JSON Lines; --html FILE holds one input's page: add --out-dir DIR for a page per line (DIR/000001.html)"},
        {{"--batch", "b.txt", "--npy", "b.npy"},
         "--batch writes JSON Lines; --npy FILE holds one input's arrays: add --out-dir DIR for arrays per line (DIR/000001.npy)"},
        {{"--batch", "b.txt", "-o", "b.html"},
         "--batch writes JSON Lines; --html FILE holds one input's page: add --out-dir DIR for a page per line (DIR/000001.html)"},
        {{"--batch", "b.txt", "--out-dir", "d", "--json", "j.jsonl"},
         "--out-dir writes one file per input line (DIR/000001.json): not with --json"},
        {{"--batch", "b.txt", "--out-dir", "d", "--stats"}, "--out-dir writes one file per input line (DIR/000001.json): not with --stats"},
        {{"--stats", "--html", "s.html", "T"}, "--stats writes its table (or --json FILE), no page or arrays: not with --html"},
        {{"--pack-tokens", "8", "T"}, "--pack-tokens goes with --batch FILE"},
        {{"--out-dir", "=x", "--html", "T"}, "--out-dir goes with --batch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CliOptions o;
        AvErr e;
        ck_assert_int_eq(parse(&o, &e, (const char *const *)bad[i].args), -1);
        char want[512];
        snprintf(want, sizeof want, "%s (see attnviz --help)", bad[i].msg);
        ck_assert_str_eq(e.msg, want);
        cli_options_free(&o);
    }
    CliOptions o;
    AvErr e;
    const char *dir[] = {"--batch", "b.txt", "--out-dir", "d", "--html", "--npy", NULL};
    ck_assert_int_eq(parse(&o, &e, dir), CLI_RUN);
    ck_assert(o.run.output.out_html && o.run.output.out_npy && !o.run.output.html_path && !o.run.output.npy_path);
    cli_options_free(&o);
    const char *flagval[] = {"--batch", "b.txt", "--out-dir", "d", "--html=p.html", NULL};
    ck_assert_int_eq(parse(&o, &e, flagval), -1);
    ck_assert_str_eq(e.msg, "with --out-dir, --html takes no FILE: it adds a file per line (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

/* --show-heads all: every head drawn at first (the page's init_head left unset). */
START_TEST(show_heads_all_draws_every_head) {
    CliOptions o;
    AvErr e;
    const char *all[] = {"--show-heads", "all", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, all), CLI_RUN);
    ck_assert(o.run.output.show_all_heads && !o.run.sel.show_heads);
    cli_options_free(&o);
    const char *list[] = {"render", "a.npz", "--show-heads", "1,3", NULL};
    ck_assert_int_eq(parse(&o, &e, list), CLI_RUN);
    ck_assert(!o.run.output.show_all_heads && o.run.sel.n_show_heads == 2 && o.run.sel.show_heads[1] == 3);
    cli_options_free(&o);
    const char *head[] = {"--show-heads", "all", "--head", "2", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, head), -1);
    ck_assert_str_eq(e.msg, "--show-heads all draws every head; --head opens on one: one or the other (see attnviz --help)");
    cli_options_free(&o);
    const char *bad[] = {"--show-heads", "every", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, bad), -1);
    ck_assert_str_eq(e.msg, "--show-heads needs a list like 0-3,8, got 'every' (see attnviz --help)");
    cli_options_free(&o);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("cli");
    TCase *t = tcase_create("core");
    tcase_add_test(t, a_run_fills_the_run_settings);
    tcase_add_test(t, lens_options_fill_the_lens_settings);
    tcase_add_test(t, flow_takes_an_optional_threshold);
    tcase_add_test(t, tokens_only_needs_no_weights);
    tcase_add_test(t, long_from_goes_with_a_runs_page);
    tcase_add_test(t, help_and_version_are_answers_not_prints);
    tcase_add_test(t, a_command_has_its_own_help);
    tcase_add_test(t, version_is_an_answer);
    tcase_add_test(t, the_help_command_answers);
    tcase_add_test(t, an_unknown_option_is_a_usage_error);
    tcase_add_test(t, a_bad_value_is_a_usage_error);
    tcase_add_test(t, no_text_is_a_usage_error);
    tcase_add_test(t, serve_fills_the_serve_settings);
    tcase_add_test(t, serve_refuses_what_the_page_asks_itself);
    tcase_add_test(t, heads_fills_the_heads_settings);
    tcase_add_test(t, diff_and_stats_and_render_fill_theirs);
    tcase_add_test(t, stats_merge_lists_its_files);
    tcase_add_test(t, render_takes_its_input_and_meta);
    tcase_add_test(t, shard_takes_an_index_and_a_count);
    tcase_add_test(t, a_bad_shard_is_a_usage_error);
    tcase_add_test(t, shard_slurm_reads_the_array_task);
    tcase_add_test(t, measure_is_attention_or_norm);
    tcase_add_test(t, chat_and_chat_file_fill_the_run_settings);
    tcase_add_test(t, measure_alti_and_rollout);
    tcase_add_test(t, measure_takes_a_list);
    tcase_add_test(t, explain_takes_one_head);
    suite_add_tcase(s, t);
    TCase *tab = tcase_create("table");
    tcase_add_test(tab, each_option_goes_where_its_row_says);
    tcase_add_test(tab, the_table_is_consistent);
    tcase_add_test(tab, help_lists_exactly_the_options_each_command_takes);
    tcase_add_test(tab, the_committed_man_page_is_the_tables);
    tcase_add_test(tab, completions_offer_what_the_parser_takes);
    tcase_add_test(tab, edit_distance_counts_swaps_as_one);
    tcase_add_test(tab, a_mistyped_command_is_refused);
    tcase_add_test(tab, an_unknown_option_names_the_near_ones);
    tcase_add_test(tab, an_option_given_twice_is_refused);
    tcase_add_test(tab, dash_o_names_the_writer_by_its_extension);
    tcase_add_test(tab, batch_outputs_are_never_dropped_silently);
    tcase_add_test(tab, show_heads_all_draws_every_head);
    suite_add_tcase(s, tab);
    return s;
}
