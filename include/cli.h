/* cli.h — command-line parsing, usage and range checks; the run itself is pipeline.c's. */
#ifndef ATTNVIZ_CLI_H
#define ATTNVIZ_CLI_H

#include "options.h"
#include "version.h"



void cli_options_free(CliOptions *o);

/* Parses argv; returns EXIT_OK, or EXIT_USAGE after printing the problem. A
 * return of -1 means --help/--version was handled and the program should exit 0. */
int cli_parse(CliOptions *o, int argc, char **argv);

/* Runs attnviz; returns the process exit code. */
int cli_run(const CliOptions *o);

#endif
