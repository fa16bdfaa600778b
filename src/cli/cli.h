/* cli.h — the command line: argv into typed settings by one table of commands
 * and options (src/cli/cli_table.h), the command run. Nothing here prints:
 * main shows the help, the version, the generated man page and completions,
 * and the errors. */
#ifndef ATTNVIZ_CLI_H
#define ATTNVIZ_CLI_H

#include "err.h"
#include "options.h"
#include "selection.h"
#include "version.h"

/* What cli_parse found the command line asks for. CLI_GENERATE: the hidden
 * --completions SHELL / --man TEMPLATE modes (cli_generate). */
enum { CLI_RUN = 0, CLI_HELP = 1, CLI_VERSION = 2, CLI_GENERATE = 3 };

/* attnviz --help's text (command NULL), or attnviz COMMAND --help's: the
 * command's synopsis, what it does and the options it takes. NULL for a name
 * that is no command. The text is the caller's to free. */
char *cli_help_text(const char *command);

/* What --completions SHELL (bash, zsh, fish) or --man TEMPLATE (the man page:
 * the template's prose with the synopsis, commands and options filled in)
 * asked for, generated from the table; NULL with e set. The caller frees it. */
char *cli_generate(const CliOptions *o, AvErr *e);

void cli_options_free(CliOptions *o);

/* Parses argv: CLI_RUN, CLI_HELP, CLI_VERSION or CLI_GENERATE; -1 with a usage error in e. */
int cli_parse(CliOptions *o, int argc, char **argv, AvErr *e);

/* The layers and heads the options select, for sel_check. */
Selection cli_selection(const CliOptions *o);

/* Runs what o asks for (its command row's run): 0, or -1 with e set (its kind:
 * usage or runtime; an empty message when the failure was already reported,
 * e.g. batch lines). The command line never opens a model itself: a run's
 * checks against the model are run/'s (pipeline_main). */
int cli_run(const CliOptions *o, AvErr *e);

#endif
