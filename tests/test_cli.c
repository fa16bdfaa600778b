/* test_cli.c — argv into typed settings (cli.h, settings.h): what each
 * command hands to the library, and usage errors returned as values (kind
 * usage, the message main prints), never printed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ck_assert(!o.serve && !o.diff && !o.render && !o.merge && !r->heads.on);
    AvErr se = {0};
    ck_assert_int_eq(sel_check(&r->sel, 4, 4, "model", &se), 0);
    cli_options_free(&o);
}
END_TEST

/* --long-from on a run: the page's threshold where the page is all it writes; given with an output the long page
 * cannot hold, a usage error naming it; not given, such a run keeps the whole matrices (0). */
START_TEST(long_from_goes_with_a_runs_page) {
    CliOptions o;
    AvErr e;
    const char *forced[] = {"--html", "p.html", "--long-from", "16", "--predict", "2", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, forced), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 16);
    cli_options_free(&o);
    const char *dflt[] = {"T", NULL};
    ck_assert_int_eq(parse(&o, &e, dflt), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 4096);
    cli_options_free(&o);
    const char *whole[] = {"--html", "p.html", "--json", "o.json", "T", NULL};
    ck_assert_int_eq(parse(&o, &e, whole), CLI_RUN);
    ck_assert_int_eq(o.run.output.long_from, 0);
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
    ck_assert_str_eq(e.msg, "--long-from needs 1 to 8192 tokens, got '8193' (see attnviz --help)");
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
    ck_assert_ptr_nonnull(strstr(cli_help_text(NULL), "Usage: attnviz"));
    ck_assert_ptr_nonnull(strstr(cli_help_text(NULL), "attnviz serve"));
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
    const char *heads = cli_help_text("heads");
    const char *synopsis = "Usage: attnviz heads [--batch FILE | TEXT [TEXT_B]]";
    ck_assert_msg(!strncmp(heads, synopsis, strlen(synopsis)), "%.60s", heads);
    ck_assert_ptr_nonnull(strstr(heads, "Head scores"));
    ck_assert_ptr_nonnull(strstr(heads, "--score NAME"));
    ck_assert_ptr_nonnull(strstr(heads, "--model DIR|FILE"));
    ck_assert_ptr_null(strstr(heads, "attnviz serve"));
    ck_assert_ptr_null(strstr(heads, "--generate"));
    const char *serve = cli_help_text("serve");
    ck_assert_ptr_nonnull(strstr(serve, "--cache-mb N"));
    ck_assert_ptr_null(strstr(serve, "Head scores"));
    ck_assert_ptr_nonnull(strstr(cli_help_text("render"), "--meta FILE"));
    ck_assert_ptr_nonnull(strstr(cli_help_text("diff"), "Jensen-Shannon"));
    ck_assert_ptr_nonnull(strstr(cli_help_text("stats"), "stats --merge FILE..."));
    /* every command's help ends with the exit statuses, and the full help holds every section */
    const char *names[] = {"heads", "serve", "render", "diff", "stats"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_ptr_nonnull(strstr(cli_help_text(names[i]), "Exit status: 0 ok"));
    const char *full = cli_help_text(NULL);
    ck_assert_ptr_nonnull(strstr(full, "Head scores"));
    ck_assert_ptr_nonnull(strstr(full, "Predictions and generation:"));
    ck_assert_ptr_nonnull(strstr(full, "attnviz serve: a local server"));
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

START_TEST(serve_fills_the_serve_settings) {
    CliOptions o;
    AvErr e;
    const char *a[] = {"serve", "--model", "a", "--model", "b", "--port", "0", "--host", "::1", "--cased",
                       "--cache-mb", "10", "--theme", "dark", "hello", NULL};
    ck_assert_int_eq(parse(&o, &e, a), CLI_RUN);
    const ServeSpec *s = &o.serve_spec;
    ck_assert(o.serve && s->n_models == 2);
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
    ck_assert_ptr_nonnull(strstr(e.msg, "serve answers the page's requests"));
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
    ck_assert(o.diff && o.diff_spec.top == 4);
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
    ck_assert(o.render);
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
    ck_assert_str_eq(e.msg, "--measure is attention or norm, not 'Norm' (see attnviz --help)");
    cli_options_free(&o);
    ck_assert_int_eq(parse(&o, &e, diff), -1);
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
    suite_add_tcase(s, t);
    return s;
}
