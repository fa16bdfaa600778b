/* cli.c — argv into typed settings, by the option table (cli_options.c), the
 * rules (cli_rules.c) and the command rows (commands/): which command, each
 * option read as its row says and refused by the commands it does not go with,
 * -o's writer, the rules, then the command's own check. Also what keeps typos
 * from running: a first word a letter or two from a command, an option a
 * letter or two from another. Nothing here prints or opens a model. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"
#include "report.h"
#include "util.h"

const CliCommand *const CLI_COMMANDS[] = {&CLI_CMD_RUN,  &CLI_CMD_SERVE, &CLI_CMD_RENDER, &CLI_CMD_DIFF,
                                          &CLI_CMD_HEADS, &CLI_CMD_STATS, &CLI_CMD_HELP};
const int CLI_N_COMMANDS = (int)(sizeof CLI_COMMANDS / sizeof CLI_COMMANDS[0]);

/* Every usage error ends with the pointer to --help; -1, like av_err. */
int cli_usage(AvErr *e, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return av_err_usage(e, "%.1000s (see attnviz --help)", msg);
}

const CliOption *cli_option(const char *name) {
    for (int i = 0; i < CLI_N_OPTIONS; i++)
        if (!strcmp(CLI_OPTIONS[i].name, name)) return &CLI_OPTIONS[i];
    return NULL;
}

static int opt_index(const CliOption *opt) { return (int)(opt - CLI_OPTIONS); }

/* ---------------------------------------------------------------- values */

static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* "0.1", ".5", "1e-3", "-2": a number, not a text to run */
static int looks_numeric(const char *s) {
    char *end;
    if (!*s) return 0;
    (void)strtod(s, &end);
    return !*end;
}

/* Parses "0,5-11" into a sorted list without duplicates of indices up to
 * 100000 (the model's limits are checked once it is known). -1: malformed. */
static int parse_list(const char *s, CliList *out) {
    int *v = NULL, cnt = 0, cap = 0;
    const char *p = s;
    if (!*p) return -1;
    /* which indices are in already: a scan of the list per index made "0-99999" take minutes */
    unsigned char *seen = calloc(100001, 1);
    if (!seen) return -1;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno || a < 0 || a > 100000) goto bad;
        b = a;
        p = end;
        if (*p == '-') {
            p++;
            b = strtol(p, &end, 10);
            if (end == p || errno || b < a || b > 100000) goto bad;
            p = end;
        }
        for (long x = a; x <= b; x++) {
            if (seen[x]) continue;
            seen[x] = 1;
            if (cnt == cap) {
                cap = cap ? cap * 2 : 16;
                int *nv = realloc(v, sizeof(int) * (size_t)cap);
                if (!nv) goto bad;
                v = nv;
            }
            v[cnt++] = (int)x;
        }
        if (*p == ',') p++;
        else if (*p) goto bad;
        if (*p == '\0' && p[-1] == ',') goto bad;
    }
    for (int x = 0, k = 0; k < cnt; x++) /* sorted: the indices in order, from the bitmap */
        if (seen[x]) v[k++] = x;
    free(seen);
    free(out->v);
    out->v = v, out->n = cnt;
    return 0;
bad:
    free(seen);
    free(v);
    return -1;
}

/* "a|b|c" as "a, b or c", for messages. */
static void choice_words(const char *choices, char *buf, size_t cap) {
    size_t len = 0;
    const char *p = choices;
    buf[0] = '\0';
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        const char *sep = p == choices ? "" : strchr(p, '|') ? ", " : " or ";
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%.*s", sep, (int)n, p);
        p += n + (bar != NULL);
    }
}

/* The index of word among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *word) {
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (strlen(word) == n && !strncmp(p, word, n)) return i;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

int cli_parse_value(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e) {
    void *at = (char *)o + opt->at;
    switch (opt->type) {
    case OPT_CUSTOM: return opt->parse(o, opt, arg, e);
    case OPT_FLAG: *(int *)at = 1; return 0;
    case OPT_INT:
        if (parse_int(arg, (long)opt->lo, (long)opt->hi, at) == 0) return 0;
        if (opt->hi >= (1 << 20)) { /* a limit, not an advertised range: name it when passed */
            char *end;
            errno = 0;
            long long v = strtoll(arg, &end, 10);
            if (end != arg && !*end && v > 0 && (errno == ERANGE || v > (long long)opt->hi))
                return cli_usage(e, "--%s %s is out of range: at most %.0f", opt->name, arg, opt->hi);
        }
        return cli_usage(e, "--%s needs %s, got '%s'", opt->name, opt->what, arg);
    case OPT_REAL: {
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !(v >= opt->lo && v <= opt->hi) || ((opt->flags & OPT_OPEN_LO) && v == opt->lo) ||
            ((opt->flags & OPT_OPEN_HI) && v == opt->hi))
            return cli_usage(e, "--%s needs %s, got '%s'", opt->name, opt->what, arg);
        *(double *)at = v;
        return 0;
    }
    case OPT_SIZE:
        if (av_parse_size(arg, at)) return cli_usage(e, "--%s needs %s, got '%s'", opt->name, opt->what, arg);
        return 0;
    case OPT_STRING:
        if ((opt->flags & OPT_NONEMPTY) && !arg[0]) return cli_usage(e, "--%s needs %s", opt->name, opt->what);
        *(const char **)at = arg;
        return 0;
    case OPT_CHOICE: {
        int k = choice_index(opt->choices, arg);
        if (k < 0) {
            char words[256];
            choice_words(opt->choices, words, sizeof words);
            return cli_usage(e, "--%s is %s, not '%s'", opt->name, words, arg);
        }
        if (opt->flags & OPT_WORD) *(const char **)at = arg;
        else *(int *)at = k;
        return 0;
    }
    case OPT_LIST:
        if (parse_list(arg, at)) return cli_usage(e, "--%s needs %s, got '%s'", opt->name, opt->what, arg);
        return 0;
    }
    return av_err(e, "--%s: no parser", opt->name);
}

/* ---------------------------------------------------------------- typos */

int cli_edit_distance(const char *a, const char *b, int max) {
    const int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 64 || m > 64) return max + 1;
    if (abs(n - m) > max) return max + 1;
    int d[65][65];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            const int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1; /* two letters swapped */
            d[i][j] = v;
        }
    return d[n][m] > max ? max + 1 : d[n][m];
}

/* How far an option's name may be from a known one to be named as its typo:
 * one letter in short names, two from five letters on. */
static int typo_reach(const char *word) { return strlen(word) >= 5 ? 2 : 1; }

/* The same letters, in any order ("sever" and "serve"). */
static int same_letters(const char *a, const char *b) {
    int count[26] = {0};
    if (strlen(a) != strlen(b)) return 0;
    for (; *a; a++, b++) {
        if (!isalpha((unsigned char)*a) || !isalpha((unsigned char)*b)) return 0;
        count[tolower((unsigned char)*a) - 'a']++, count[tolower((unsigned char)*b) - 'a']--;
    }
    for (int i = 0; i < 26; i++)
        if (count[i]) return 0;
    return 1;
}

/* A word is a command's typo one slip away (a letter wrong, missing, extra, or
 * two swapped: "srve", "head", "dif", "sevre") or with the command's letters in
 * another order ("sever"). Two slips of other letters ("header", "reads" is one
 * from heads) are a word of its own more often than a typo. */
static int command_typo(const char *word, const char *name) {
    const int d = cli_edit_distance(word, name, 2);
    return d <= 1 || (d == 2 && same_letters(word, name));
}

/* A single bare word: letters only, at least three (a text has spaces,
 * digits or punctuation far more often than a command does). */
static int bare_word(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isalpha((unsigned char)s[n])) return 0;
    return n >= 3;
}

/* The first word of a run, checked before anything runs: a command written
 * after options, or a word within reach of a command, is refused (exit 2)
 * with the fix; `attnviz -- WORD` runs the text WORD. */
static int check_first_word(const char *w, AvErr *e) {
    if (!bare_word(w)) return 0;
    for (int i = 1; i < CLI_N_COMMANDS; i++)
        if (!strcmp(w, CLI_COMMANDS[i]->name))
            return av_err_usage(e, "'%s' is a command: write it first (attnviz %s ...); to run the text '%s', write "
                                   "attnviz [OPTIONS] -- %s", w, w, w, w);
    const CliCommand *best = NULL;
    for (int i = 1; i < CLI_N_COMMANDS && !best; i++)
        if (command_typo(w, CLI_COMMANDS[i]->name)) best = CLI_COMMANDS[i];
    if (best)
        return av_err_usage(e, "'%s' is not a command: did you mean %s? (to run the text '%s', write attnviz -- %s)", w,
                            best->name, w, w);
    return 0;
}

/* The commands whose words are texts (a run, heads, diff, serve's first input). */
#define TEXT_CMDS (C_RUN | C_HEADS | C_DIFF | C_SERVE)

/* A text word: an empty one is refused (a shell variable left unset, a stray pair of quotes:
 * there is nothing to run), and so is a lone '-' before `--`, which elsewhere means standard
 * input: a run reads its texts from the command line only. */
static int check_text(const char *w, int index, int dashdash, AvErr *e) {
    const char *which = index == 0 ? "the first text" : index == 1 ? "the second text" : "a text";
    if (!w[0]) return av_err_usage(e, "empty input: %s is '' (nothing to run)", which);
    if (!dashdash && !strcmp(w, "-"))
        return av_err_usage(e, "'-' is not read as standard input here: give the text itself (\"$(cat FILE)\" for a "
                               "file's), or --batch - for one input a line from standard input; attnviz -- - runs the "
                               "text '-'");
    return 0;
}

/* An unknown option: the closest known ones (a letter or two away, or the
 * only option it begins), as " (did you mean --X?)" into buf, or "". */
static void suggest_option(const char *name, unsigned cmd, char *buf, size_t cap) {
    const CliOption *found[3];
    int n = 0, best = 99;
    const size_t len = strlen(name);
    for (int pass = 0; pass < 2 && !n; pass++)
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (opt->flags & OPT_HIDDEN) continue;
            int d;
            if (pass == 0) d = cli_edit_distance(name, opt->name, typo_reach(name));
            else d = len >= 3 && !strncmp(opt->name, name, len) ? 0 : 99; /* --temp: --temperature */
            if (pass == 0 ? d > typo_reach(name) : d != 0) continue;
            if (d > best) continue;
            if (d < best) n = 0, best = d;
            /* among equals, the ones this command takes first */
            if (n < 3 && ((opt->cmds & cmd) || n == 0)) found[n++] = opt;
        }
    buf[0] = '\0';
    if (!n) return;
    size_t at = (size_t)snprintf(buf, cap, ": did you mean");
    for (int i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s--%s", i == 0 ? " " : i == n - 1 ? " or " : ", ", found[i]->name);
    if (at < cap) snprintf(buf + at, cap - at, "?");
}

/* ---------------------------------------------------------------- given options */

static int given_matches(const CliOptions *o, const char *token, size_t n) {
    char name[64];
    if (n >= sizeof name) return 0;
    memcpy(name, token, n);
    name[n] = '\0';
    char *eq = strchr(name, '=');
    if (eq) *eq = '\0';
    const CliOption *opt = cli_option(name);
    if (!opt) return 0;
    const int i = opt_index(opt);
    if (!o->given[i]) return 0;
    if (!eq) return 1;
    if (!o->value[i]) return 0;
    /* a comma list (--measure alti,rollout) holds each of its words; "all" every word of the row's choices */
    const size_t want = strlen(eq + 1);
    for (const char *p = o->value[i];;) {
        const size_t len = strcspn(p, ",");
        if (len == want && !strncmp(p, eq + 1, len)) return 1;
        if (len == 3 && !strncmp(p, "all", 3) && opt->choices)
            for (const char *c = opt->choices;;) {
                const size_t cl = strcspn(c, "|");
                if (cl == want && !strncmp(c, eq + 1, cl)) return 1;
                if (!c[cl]) break;
                c += cl + 1;
            }
        if (!p[len]) return 0;
        p += len + 1;
    }
}

int cli_given(const CliOptions *o, const char *name) { return given_matches(o, name, strlen(name)); }

/* "--name", "--measure norm", or -o when -o named it: how a message shows a given option. */
static const char *shown(const CliOptions *o, const char *token, size_t n, char *buf, size_t cap) {
    char name[40];
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), token);
    char *eq = strchr(name, '=');
    if (eq) *eq = '\0';
    const CliOption *opt = cli_option(name);
    if (opt && o->via_output[opt_index(opt)]) snprintf(buf, cap, "-o");
    else if (eq) snprintf(buf, cap, "--%.30s %.30s", name, eq + 1);
    else snprintf(buf, cap, "--%.60s", name);
    return buf;
}

/* The first token of the space-separated list given in o: its place, or NULL. */
static const char *first_given(const CliOptions *o, const char *list, size_t *len) {
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n && given_matches(o, p, n)) return *len = n, p;
        p += n;
    }
    return NULL;
}

const char *cli_first_given(const CliOptions *o, const char *others) {
    static _Thread_local char buf[64];
    size_t n;
    const char *p = first_given(o, others, &n);
    return p ? shown(o, p, n, buf, sizeof buf) : NULL;
}

const char *cli_rule_conflict(const CliOptions *o, const char *when) {
    for (int i = 0; i < CLI_N_RULES; i++)
        if (CLI_RULES[i].kind == CLI_EXCLUDES && !strcmp(CLI_RULES[i].when, when) && (CLI_RULES[i].cmds & o->cmd->bit))
            return cli_first_given(o, CLI_RULES[i].others);
    return NULL;
}

/* why with {opt} and {other} put in. */
static int rule_error(const char *why, const char *opt, const char *other, AvErr *e) {
    char msg[1024];
    size_t len = 0;
    for (const char *p = why; *p && len + 1 < sizeof msg;) {
        const char *put = NULL;
        if (!strncmp(p, "{opt}", 5)) put = opt, p += 5;
        else if (!strncmp(p, "{other}", 7)) put = other ? other : "", p += 7;
        if (put) len += (size_t)snprintf(msg + len, sizeof msg - len, "%s", put);
        else msg[len++] = *p++;
    }
    msg[len < sizeof msg ? len : sizeof msg - 1] = '\0';
    return cli_usage(e, "%s", msg);
}

static int check_rules(const CliOptions *o, AvErr *e) {
    for (int i = 0; i < CLI_N_RULES; i++) {
        const CliRule *r = &CLI_RULES[i];
        if (!(r->cmds & o->cmd->bit)) continue;
        size_t n, m;
        const char *w = first_given(o, r->when, &n);
        if (!w) continue;
        if (!strcmp(r->when, "long-from") && o->serve_spec.long_from == 0) continue; /* 0: the whole matrices, as they ask */
        const char *other = first_given(o, r->others, &m);
        if ((r->kind == CLI_NEEDS) == (other != NULL)) continue;
        char a[64], b[64];
        return rule_error(r->why, shown(o, w, n, a, sizeof a), other ? shown(o, other, m, b, sizeof b) : NULL, e);
    }
    return 0;
}

/* "--port goes with attnviz serve, not a run" */
static int refuse_elsewhere(const CliOptions *o, const CliOption *opt, const char *as_typed, AvErr *e) {
    char list[256];
    size_t len = 0;
    int n = 0, total = 0;
    for (int i = 0; i < CLI_N_COMMANDS; i++) total += (opt->cmds & CLI_COMMANDS[i]->bit) != 0;
    for (int i = 0; i < CLI_N_COMMANDS; i++) {
        const CliCommand *c = CLI_COMMANDS[i];
        if (!(opt->cmds & c->bit)) continue;
        n++;
        const char *sep = n == 1 ? "" : n == total ? " or " : ", ";
        if (c->bit == C_RUN) len += (size_t)snprintf(list + len, sizeof list - len, "%sa run (attnviz TEXT)", sep);
        else len += (size_t)snprintf(list + len, sizeof list - len, "%sattnviz %s", sep, c->name);
        if (len >= sizeof list) break;
    }
    if (o->cmd->bit == C_RUN) return cli_usage(e, "%s goes with %s, not a run", as_typed, list);
    return cli_usage(e, "%s goes with %s, not attnviz %s", as_typed, list, o->cmd->name);
}

/* ---------------------------------------------------------------- -o */

/* -o FILE: the option its extension names (the command's and the run's own
 * choice: a batch's lines are .jsonl, its --stats one .json document). */
static int resolve_output(CliOptions *o, AvErr *e) {
    if (!o->output) return 0;
    const char *path = o->output, *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    char ext[8] = "";
    if (dot && strlen(dot + 1) < sizeof ext)
        for (size_t i = 0; dot[1 + i]; i++) ext[i] = (char)tolower((unsigned char)dot[1 + i]), ext[i + 1] = '\0';
    const unsigned cmd = o->cmd->bit;
    const int batch = o->run.batch.path != NULL, lines = cmd == C_RUN && batch && !o->run.stats;
    if (o->run.output.out_dir)
        return cli_usage(e, "%s", "-o FILE names one file; --out-dir DIR writes one per line (--html and --npy as "
                                  "flags add a page and arrays per line)");
    const char *opt = NULL;
    if (!strcmp(ext, "html") || !strcmp(ext, "htm")) opt = cmd & (C_RUN | C_RENDER | C_DIFF) ? "html" : NULL;
    else if (!strcmp(ext, "npy")) opt = cmd & (C_RUN | C_RENDER) ? "npy" : NULL;
    else if (!strcmp(ext, "json")) {
        if (lines)
            return cli_usage(e, "-o %s: --batch writes JSON Lines, one object a line: name it .jsonl (--stats writes "
                                "one .json document)", path);
        opt = "json";
    } else if (!strcmp(ext, "jsonl")) {
        if (!lines)
            return cli_usage(e, "-o %s: .jsonl is --batch's JSON Lines; %s one JSON document: name it .json", path,
                             cmd == C_RUN && !batch ? "one input writes" : "this writes");
        opt = "json";
    }
    if (!opt) {
        const char *kinds = cmd == C_RUN      ? (lines ? ".jsonl (JSON Lines)" : ".html (the page), .json or .npy (the arrays)")
                            : cmd == C_RENDER ? ".html (the page), .json or .npy (the arrays)"
                            : cmd == C_DIFF   ? ".html (the page) or .json"
                                              : ".json";
        return cli_usage(e, "-o %s: the extension names what to write: %s", path, kinds);
    }
    const CliOption *row = cli_option(opt);
    const int i = opt_index(row);
    if (o->given[i] && o->value[i] && strcmp(o->value[i], path))
        return cli_usage(e, "-o %s and --%s %s both name the %s: give one", path, opt, o->value[i],
                         !strcmp(opt, "html") ? "page" : !strcmp(opt, "npy") ? "arrays" : "JSON");
    if (cli_parse_value(o, row, path, e) != 0) return -1;
    o->given[i] = 1, o->value[i] = path, o->via_output[i] = 1;
    return 0;
}

/* ---------------------------------------------------------------- parsing */

static int set_defaults(CliOptions *o, AvErr *e) {
    memset(o, 0, sizeof *o);
    o->run.sel.layer = o->run.sel.head = -1;
    o->run.lens.position = -1;
    o->run.explain.query = o->run.explain.key = -1;
    o->run.batch.shard_count = 1;
    o->run.heads.top_k = 5;
    o->model.lowercase = -1;
    for (int i = 0; i < CLI_N_OPTIONS; i++)
        if (CLI_OPTIONS[i].dflt && cli_parse_value(o, &CLI_OPTIONS[i], CLI_OPTIONS[i].dflt, e) != 0) return -1;
    return 0;
}

/* What the settings take from which options were given, once all are read. */
static void derive(CliOptions *o) {
    RunSpec *r = &o->run;
    r->capture.telemetry = cli_given(o, "telemetry");
    r->lens.flow = cli_given(o, "flow");
    r->lens.ablate = cli_given(o, "ablate");
    r->lens.ablate_pairs = o->ablate_pairs, r->lens.n_ablate = o->n_ablate_pairs;
    if (cli_given(o, "target")) r->lens.attribution = 1;
    r->heads.on = o->cmd->bit == C_HEADS;
    /* a run's page: the long page only where the page is all it writes; past --long-from N tokens, or (not
     * given) where run/plan.c finds the whole matrices too big; 0: the whole matrices always. An option that
     * keeps the whole matrices is named for the run's messages. */
    const char *clash = o->cmd->bit == C_RUN ? cli_rule_conflict(o, "long-from") : NULL;
    snprintf(o->whole_for, sizeof o->whole_for, "%s", clash ? clash : "");
    r->output.whole_for = clash ? o->whole_for : NULL;
    r->output.long_from = o->cmd->bit != C_RUN || clash ? 0 : cli_given(o, "long-from") ? o->serve_spec.long_from : OUT_LONG_AUTO;
}

Selection cli_selection(const CliOptions *o) {
    return (Selection){o->run.sel.layer, o->run.sel.head, o->sel_layers.v, o->sel_layers.n, o->sel_heads.v, o->sel_heads.n,
                       o->show_heads.v, o->show_heads.n};
}

void cli_options_free(CliOptions *o) {
    free(o->sel_layers.v);
    free(o->sel_heads.v);
    free(o->show_heads.v);
    free(o->serve_models);
    free(o->ablate_pairs);
    free(o->words);
    o->ablate_pairs = NULL;
    o->sel_layers.v = o->sel_heads.v = o->show_heads.v = NULL;
    o->serve_models = NULL;
    o->words = NULL;
}

/* One option as argv wrote it (--name, --name=value, -o VALUE, -oVALUE): its
 * value read, its row's command checked. *i moves past a value taken from the
 * next word. Returns 0, an answer (CLI_HELP, ...), or -1. */
static int read_option(CliOptions *o, int argc, char **argv, int *i, AvErr *e) {
    const char *word = argv[*i], *inline_val = NULL;
    const CliOption *opt = NULL;
    char name[64], typed[80];
    if (word[1] == '-') {
        const char *eq = strchr(word + 2, '=');
        size_t n = eq ? (size_t)(eq - word - 2) : strlen(word + 2);
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), word + 2);
        if (eq) inline_val = eq + 1;
        if (n < sizeof name) opt = cli_option(name);
        snprintf(typed, sizeof typed, "--%s", name);
        if (!opt) {
            char hint[160];
            suggest_option(name, o->cmd->bit, hint, sizeof hint);
            return cli_usage(e, "unknown option '%.*s'%s", (int)(eq ? (size_t)(eq - word) : strlen(word)), word, hint);
        }
    } else {
        for (int k = 0; k < CLI_N_OPTIONS; k++)
            if (CLI_OPTIONS[k].short_name && CLI_OPTIONS[k].short_name == word[1]) opt = &CLI_OPTIONS[k];
        if (!opt) return cli_usage(e, "unknown option '%.2s'", word);
        if (word[2]) inline_val = word + 2;
        snprintf(typed, sizeof typed, "-%c", word[1]);
    }
    if (!(opt->cmds & o->cmd->bit)) return refuse_elsewhere(o, opt, typed, e);
    const int idx = opt_index(opt);
    const char *val = NULL;
    const int flag_here = !opt->arg || ((opt->flags & OPT_OUT_DIR) && o->out_dir_mode);
    if (flag_here) {
        if (inline_val) {
            if (opt->arg) return cli_usage(e, "with --out-dir, %s takes no FILE: it adds a file per line", typed);
            return cli_usage(e, "%s takes no value, got '%s'", typed, inline_val);
        }
    } else if (inline_val) {
        val = inline_val;
    } else if (opt->flags & OPT_OPTIONAL) {
        if (*i + 1 < argc && looks_numeric(argv[*i + 1])) val = argv[++*i];
    } else {
        if (*i + 1 >= argc) return cli_usage(e, "option '%s' needs a value", typed);
        val = argv[++*i];
    }
    if (val && !val[0] && (opt->flags & (OPT_FILE | OPT_DIR)))
        return cli_usage(e, "%s needs a %s name, got ''", typed, opt->flags & OPT_DIR ? "folder" : "file");
    if (o->given[idx] && !(opt->flags & OPT_REPEAT) && val && o->value[idx] && strcmp(val, o->value[idx]))
        return cli_usage(e, "%s given twice ('%s', then '%s'): give it once", typed, o->value[idx], val);
    if (!strcmp(opt->name, "help")) return CLI_HELP;
    if (!strcmp(opt->name, "version")) return CLI_VERSION;
    /* a value left out (--flow alone) keeps the default; a custom row reads NULL itself (--html with --out-dir) */
    const int read = opt->type == OPT_CUSTOM || opt->type == OPT_FLAG || val;
    if (read && cli_parse_value(o, opt, val, e) != 0) return -1;
    o->given[idx] = 1;
    if (val) o->value[idx] = val;
    return opt->flags & OPT_ANSWER ? CLI_GENERATE : 0;
}

int cli_parse(CliOptions *o, int argc, char **argv, AvErr *e) {
    if (set_defaults(o, e) != 0) return -1;
    o->cmd = &CLI_CMD_RUN;
    int first = 1;
    for (int c = 1; argc > 1 && c < CLI_N_COMMANDS; c++)
        if (!strcmp(argv[1], CLI_COMMANDS[c]->name)) o->cmd = CLI_COMMANDS[c], o->command = argv[1], first = 2;
    /* With --out-dir, --html and --npy name no file: they add a file per input. */
    for (int i = first; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--out-dir") || !strncmp(argv[i], "--out-dir=", 10)) o->out_dir_mode = 1;
    if (!(o->words = malloc(sizeof *o->words * (size_t)(argc + 1)))) return av_err(e, "out of memory");
    int n_words = 0, dashdash = 0;
    for (int i = first; i < argc; i++) {
        const char *w = argv[i];
        if (!dashdash && !strcmp(w, "--")) {
            dashdash = 1;
            continue;
        }
        if (dashdash || w[0] != '-' || !w[1]) {
            if (!dashdash && n_words == 0 && o->cmd->bit == C_RUN && check_first_word(w, e) != 0) return -1;
            if ((o->cmd->bit & TEXT_CMDS) && check_text(w, n_words, dashdash, e) != 0) return -1;
            o->words[n_words++] = argv[i];
            continue;
        }
        int rc = read_option(o, argc, argv, &i, e);
        if (rc != 0) return rc;
    }
    o->words[n_words] = NULL;
    if (resolve_output(o, e) != 0) return -1;
    derive(o);
    if (check_rules(o, e) != 0) return -1;
    if (o->cmd->check(o, n_words, o->words, e) != 0) return -1;
    if (o->cmd->answers) return o->cmd->answers;
    /* the settings each command hands on, complete: nothing below reads argv's struct */
    o->run.sel = cli_selection(o);
    o->model.tokenizer_only = o->run.capture.tokens_only;
    ServeSpec *sv = &o->serve_spec;
    sv->models = o->serve_models, sv->n_models = o->n_serve_models;
    sv->lowercase = o->model.lowercase;
    sv->page = o->run;
    return CLI_RUN;
}

int cli_run(const CliOptions *o, AvErr *e) {
    if (!o->cmd->run) return av_err(e, "attnviz %s runs nothing (cli_parse answered it)", o->cmd->name);
    return o->cmd->run(o, e);
}
