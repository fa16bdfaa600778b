/* cli_table.h — the command line as data. Every option is one row of
 * CLI_OPTIONS (cli_options.c): its name, value, range, default, the commands
 * that take it, its section and help. Every command is one row in a file of
 * its own (commands/command_NAME.c): name, synopsis, what it does, its
 * cross-option rules, its check and its run. The parser (cli.c), --help, the
 * man page and the bash/zsh/fish completions (cli_help.c) are all read from
 * these rows, so they cannot disagree. docs/architecture.md ("Where to add..."): adding an option,
 * adding a command. Private to src/cli/ (and tests/unit/test_cli.c). */
#ifndef ATTNVIZ_CLI_TABLE_H
#define ATTNVIZ_CLI_TABLE_H

#include <stddef.h>

#include "cli.h"

/* The commands, as bits of an option's `cmds` and a rule's (a new one: the next bit, and C_LAST). */
enum {
    C_RUN = 1, C_SERVE = 2, C_RENDER = 4, C_DIFF = 8, C_HEADS = 16, C_STATS = 32, C_HELP = 64,
    C_LAST = C_HELP, C_ALL = 2 * C_LAST - 1
};

/* The sections of --help and of the man page, in order. */
typedef enum {
    SEC_MODEL, SEC_OUTPUT, SEC_LONG, SEC_SELECTION, SEC_PREDICT, SEC_S2S, SEC_IMAGE, SEC_LENS, SEC_ANALYSIS,
    SEC_HEADS, SEC_STATS, SEC_RENDER, SEC_BATCH, SEC_SERVE, SEC_GENERAL, SEC_N
} CliSectionId;

typedef struct {
    const char *title; /* "Model" (the man page's heading is it in capitals) */
    const char *intro; /* a paragraph before the options, or NULL */
} CliSection;

typedef enum {
    OPT_FLAG,   /* no value: the int at `at` becomes 1 */
    OPT_INT,    /* a whole number in [lo, hi] into the int at `at` */
    OPT_REAL,   /* a number in [lo, hi] (open ends: OPT_OPEN_LO/HI) into the double at `at` */
    OPT_SIZE,   /* a byte count: 8G, 500M, 64k or digits, into the double at `at` */
    OPT_STRING, /* a text into the const char * at `at` (not empty with OPT_NONEMPTY) */
    OPT_CHOICE, /* one of `choices` ("a|b|c"): its index into the int at `at`, or the word
                   itself into the const char * at `at` with OPT_WORD */
    OPT_LIST,   /* indices like 0,5-11 into the CliList at `at` */
    OPT_CUSTOM, /* `parse` reads it (what it fills: its comment) */
} CliOptType;

/* A row's flags. */
enum {
    OPT_REPEAT = 1,      /* may be given more than once (each adds: --model for serve, --score) */
    OPT_HIDDEN = 2,      /* not in --help (the man page lists it) */
    OPT_OPTIONAL = 4,    /* the value may be left out: --flow [T] (a number right after it is its value) */
    OPT_OUT_DIR = 8,     /* with --out-dir the value is left out: the option is a flag (--html, --npy) */
    OPT_FILE = 16,       /* the value is a file (completions offer files) */
    OPT_DIR = 32,        /* the value is a folder (completions offer folders) */
    OPT_NONEMPTY = 64,   /* OPT_STRING: an empty value is refused */
    OPT_WORD = 128,      /* OPT_CHOICE: the word itself is kept, not its index */
    OPT_OPEN_LO = 256,   /* OPT_REAL: lo itself is refused */
    OPT_OPEN_HI = 512,   /* OPT_REAL: hi itself is refused */
    OPT_ANSWER = 1024,   /* --help, --version, --completions, --man: answered at once, the rest unread */
};

typedef struct CliOption {
    const char *name;  /* the long name, without "--" */
    char short_name;   /* -o; 0: none */
    const char *arg;   /* the value's name in help (FILE, N); NULL: takes no value */
    CliOptType type;
    double lo, hi;     /* OPT_INT and OPT_REAL: the range. An OPT_INT whose hi is 1 << 20 or more
                          has a limit, not an advertised range: a number past it is "out of range:
                          at most HI" rather than "needs WHAT" */
    const char *what;  /* what a value must be, for messages and the man page: "1 to 9" */
    const char *dflt;  /* the default: set through the row's own parsing before argv is read, and
                          shown in help as "(default DFLT)"; NULL: none, or the help says it */
    const char *choices; /* OPT_CHOICE (and a custom row's words, for messages and completion): "a|b" */
    size_t at;         /* offsetof the field in CliOptions (CLI_AT) */
    /* OPT_CUSTOM: reads arg (NULL: a flag, or an optional value left out) into o */
    int (*parse)(CliOptions *o, const struct CliOption *opt, const char *arg, AvErr *e);
    unsigned cmds;     /* C_*: the commands that take it; refused by the others, naming these */
    CliSectionId section;
    unsigned flags;    /* OPT_* above */
    const char *help;  /* --help's text (wrapped by the printer) */
    const char *man;   /* the man page's longer text, or NULL: help's */
} CliOption;

#define CLI_AT(field) offsetof(CliOptions, field)

extern const CliOption CLI_OPTIONS[];
extern const int CLI_N_OPTIONS;
extern const CliSection CLI_SECTIONS[SEC_N];

/* A cross-option rule of one command (or several): when any option of `when`
 * is given, `kind` says what else must (CLI_NEEDS: one of `others`) or must not
 * (CLI_EXCLUDES: any of `others`) be. Options are named by their long names,
 * space-separated; "measure=norm" matches only that value. The message: `why`
 * with {opt} the option given and {other} the one it conflicts with (the
 * first, in `others`' order), then " (see attnviz --help)". Rules that read
 * values (a pair of texts, consecutive layers, a temperature above 0) are the
 * command's check, in code. */
typedef enum { CLI_NEEDS, CLI_EXCLUDES } CliRuleKind;

typedef struct {
    unsigned cmds;
    const char *when;
    CliRuleKind kind;
    const char *others;
    const char *why;
} CliRule;

extern const CliRule CLI_RULES[];
extern const int CLI_N_RULES;

typedef struct CliCommand {
    const char *name;      /* as typed after attnviz; "" for a run */
    unsigned bit;          /* C_* */
    const char *synopsis;  /* its usage lines, each "attnviz ...", separated by newlines */
    const char *summary;   /* one line for the list of commands */
    const char *about;     /* what it does: a paragraph of --help and of the man page */
    const char *examples;  /* --help's examples, one a line, or NULL */
    int positional_files;  /* completions offer files for its words (render INPUT, stats FILE...) */
    const char *positional_words; /* or these words, space-separated (help: the commands' names) */
    /* After the options are read and the rules hold: the words left (texts, files) and the
       rules that read values. 0, or -1 with a usage error. */
    int (*check)(CliOptions *o, int n, char **words, AvErr *e);
    int (*run)(const CliOptions *o, AvErr *e); /* NULL for a command that only answers */
    int answers; /* CLI_HELP: what cli_parse returns once the check passes (main prints; nothing runs) */
} CliCommand;

extern const CliCommand CLI_CMD_RUN, CLI_CMD_SERVE, CLI_CMD_RENDER, CLI_CMD_DIFF, CLI_CMD_HEADS, CLI_CMD_STATS, CLI_CMD_HELP;
/* All of them, the run first: the order of the synopsis, help and man page. */
extern const CliCommand *const CLI_COMMANDS[];
extern const int CLI_N_COMMANDS;

/* Helpers for the rows (cli.c). */
int cli_usage(AvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* arg read as opt's type says into its field (an OPT_CUSTOM row: its parse); the
 * type's usage error naming the option and what it needs. */
int cli_parse_value(CliOptions *o, const CliOption *opt, const char *arg, AvErr *e);
const CliOption *cli_option(const char *name);   /* by long name; NULL when none */
int cli_given(const CliOptions *o, const char *name); /* argv gave it (after -o is resolved) */
/* The first of `others` (a rule's list) that o gives, or NULL. */
const char *cli_first_given(const CliOptions *o, const char *others);
/* A rule's conflict for o: the first option of `others` given when `when` is
 * (for the long page's "not with" list, read both ways); NULL when none. */
const char *cli_rule_conflict(const CliOptions *o, const char *when);
/* OSA (Damerau) edit distance of a and b, case-insensitive; stops counting past max + 1. */
int cli_edit_distance(const char *a, const char *b, int max);

#endif
