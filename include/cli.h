/* cli.h — command-line parsing, usage and range checks; the run itself is pipeline.c's.
 * Nothing here prints: main shows the help, the version and the errors. */
#ifndef ATTNVIZ_CLI_H
#define ATTNVIZ_CLI_H

#include "err.h"
#include "options.h"
#include "selection.h"
#include "version.h"

/* What cli_parse found the command line asks for. */
enum { CLI_RUN = 0, CLI_HELP = 1, CLI_VERSION = 2 };

/* attnviz --help's text (command NULL), or attnviz COMMAND --help's: the
 * command's synopsis and the sections of options it reads. */
const char *cli_help_text(const char *command);

void cli_options_free(CliOptions *o);

/* Parses argv: CLI_RUN, CLI_HELP or CLI_VERSION; -1 with a usage error in e. */
int cli_parse(CliOptions *o, int argc, char **argv, AvErr *e);

/* The layers and heads the options select, for sel_check. */
Selection cli_selection(const CliOptions *o);

/* Runs what o asks for: 0, or -1 with e set (its kind: usage or runtime;
 * an empty message when the failure was already reported, e.g. batch lines). */
int cli_run(const CliOptions *o, AvErr *e);

#endif
