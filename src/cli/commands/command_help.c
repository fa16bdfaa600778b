/* command_help.c — attnviz help [COMMAND]: the whole help, or one command's
 * (as attnviz COMMAND --help). It only answers: main prints cli_help_text. */
#include <string.h>

#include "../cli_table.h"

static int check(CliOptions *o, int n, char **words, AvErr *e) {
    if (n > 1) return cli_usage(e, "help takes one command's name, not '%s'", words[1]);
    o->command = NULL;
    if (n == 0) return 0;
    for (int c = 1; c < CLI_N_COMMANDS; c++)
        if (!strcmp(words[0], CLI_COMMANDS[c]->name)) {
            o->command = CLI_COMMANDS[c]->name;
            return 0;
        }
    return cli_usage(e, "help takes a command's name (%s), not '%s'", CLI_CMD_HELP.positional_words, words[0]);
}

const CliCommand CLI_CMD_HELP = {
    .name = "help",
    .bit = C_HELP,
    .synopsis = "attnviz help [COMMAND]",
    .summary = "this help, or a command's (as attnviz COMMAND --help)",
    .about = "The help: every command and option, or with COMMAND that command's synopsis and options only (the "
             "same as attnviz COMMAND --help).",
    .examples = "attnviz help serve",
    .positional_words = "serve render diff heads stats help",
    .check = check,
    .answers = CLI_HELP,
};
