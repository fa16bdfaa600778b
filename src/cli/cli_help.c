/* cli_help.c — what the table says, written for people and shells: --help
 * (whole, or one command's), the man page (docs/attnviz.1.in's prose with
 * the synopsis, commands and options filled in) and the bash, zsh and fish
 * completions. All read the same rows the parser does. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"
#include "output.h"
#include "util.h"

enum { HELP_WIDTH = 100, HELP_COLUMN = 24 };

static const CliCommand *command_named(const char *name) {
    for (int i = 0; i < CLI_N_COMMANDS; i++)
        if (!strcmp(CLI_COMMANDS[i]->name, name ? name : "")) return CLI_COMMANDS[i];
    return NULL;
}

/* Is opt shown for cmd (NULL: the whole help)? */
static int shows(const CliOption *opt, const CliCommand *cmd) {
    return !(opt->flags & OPT_HIDDEN) && (!cmd || (opt->cmds & cmd->bit));
}

/* "--name ARG" as help and the man page show it (-o, --output FILE). */
static void option_label(const CliOption *opt, char *buf, size_t cap) {
    size_t n = 0;
    if (opt->short_name) n += (size_t)snprintf(buf, cap, "-%c, ", opt->short_name);
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "--%s", opt->name);
    if (opt->arg && n < cap)
        snprintf(buf + n, cap - n, (opt->flags & OPT_OPTIONAL) ? " [%s]" : " %s", opt->arg);
}

/* The commands that take opt: "serve", "diff, heads" (last: " and " between
 * the last two, for prose; the run: "a run"). */
static void command_list(unsigned cmds, const char *last, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    if (cmds == C_ALL) {
        snprintf(buf, cap, "every command");
        return;
    }
    int total = 0, k = 0;
    for (int i = 0; i < CLI_N_COMMANDS; i++) total += (cmds & CLI_COMMANDS[i]->bit) != 0;
    for (int i = 0; i < CLI_N_COMMANDS && n < cap; i++)
        if (cmds & CLI_COMMANDS[i]->bit) {
            k++;
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", k == 1 ? "" : k == total ? last : ", ",
                                  CLI_COMMANDS[i]->bit == C_RUN ? "a run" : CLI_COMMANDS[i]->name);
        }
}

/* text at column `col` (reached, nothing of it written yet), wrapped at HELP_WIDTH, continued at `indent`. */
static void put_wrapped(FILE *f, const char *text, int col, int indent) {
    int started = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t n = strcspn(p, " ");
        if (n == 2 && !strncmp(p, "--", 2) && p[2] == ' ') n += 1 + strcspn(p + 3, " "); /* "-- WORD" stays whole */
        if (started && col + 1 + (int)n > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (started) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, n, f);
        col += (int)n, started = 1;
        p += n;
    }
    fputc('\n', f);
}

/* An option's help with its default: "(1-9; default 6)" when the help ends in
 * parentheses, else "... (default 6)"; then [commands] when given. */
static void help_line(const CliOption *opt, const char *cmds, char *buf, size_t cap) {
    size_t n = strlen(opt->help);
    if (opt->dflt && n && opt->help[n - 1] == ')')
        snprintf(buf, cap, "%.*s; default %s)", (int)(n - 1), opt->help, opt->dflt);
    else if (opt->dflt)
        snprintf(buf, cap, "%s (default %s)", opt->help, opt->dflt);
    else
        snprintf(buf, cap, "%s", opt->help);
    if (cmds[0]) {
        n = strlen(buf);
        snprintf(buf + n, n < cap ? cap - n : 0, " [%s]", cmds);
    }
}

char *cli_help_text(const char *command) {
    const CliCommand *only = command ? command_named(command) : NULL;
    if (command && !only) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    int lines = 0;
    for (int i = 0; i < CLI_N_COMMANDS; i++) {
        if (only && only != CLI_COMMANDS[i]) continue;
        for (const char *s = CLI_COMMANDS[i]->synopsis; *s;) {
            size_t n = strcspn(s, "\n");
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)n, s);
            fputs(lines++ ? "       " : "Usage: ", f);
            /* a long synopsis continues under its first option */
            const size_t head = strlen("attnviz ") + strlen(CLI_COMMANDS[i]->name) + (CLI_COMMANDS[i]->name[0] != 0);
            put_wrapped(f, line, 7, 7 + (int)head);
            s += n + (s[n] == '\n');
        }
    }
    fputc('\n', f);
    put_wrapped(f, (only ? only : &CLI_CMD_RUN)->about, 0, 0);
    fputc('\n', f);
    if (!only) {
        fputs("Commands (attnviz COMMAND --help: its own options):\n", f);
        for (int i = 1; i < CLI_N_COMMANDS; i++) fprintf(f, "  %-8s %s\n", CLI_COMMANDS[i]->name, CLI_COMMANDS[i]->summary);
        fputc('\n', f);
    }
    for (int s = 0; s < SEC_N; s++) {
        int any = 0;
        for (int i = 0; i < CLI_N_OPTIONS && !any; i++) any = CLI_OPTIONS[i].section == (CliSectionId)s && shows(&CLI_OPTIONS[i], only);
        if (!any) continue;
        /* the whole help tags an option that is not a run's with its commands, unless its section is one command's */
        unsigned first_cmds = 0;
        int mixed = 0;
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (opt->section != (CliSectionId)s || !shows(opt, only)) continue;
            if (!first_cmds) first_cmds = opt->cmds;
            mixed |= opt->cmds != first_cmds;
        }
        if (!mixed && !(first_cmds & C_RUN) && !only) {
            char cmds[96];
            command_list(first_cmds, ", ", cmds, sizeof cmds);
            fprintf(f, "%s [%s]:\n", CLI_SECTIONS[s].title, cmds);
        } else {
            fprintf(f, "%s:\n", CLI_SECTIONS[s].title);
        }
        if (CLI_SECTIONS[s].intro && (!only || only->bit == C_RUN)) { /* the intros are about a run */
            fputs("  ", f);
            put_wrapped(f, CLI_SECTIONS[s].intro, 2, 2);
        }
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (opt->section != (CliSectionId)s || !shows(opt, only)) continue;
            char label[64], text[1024], cmds[96] = "";
            option_label(opt, label, sizeof label);
            if (!only && !(opt->cmds & C_RUN) && mixed) command_list(opt->cmds, ", ", cmds, sizeof cmds);
            help_line(opt, cmds, text, sizeof text);
            int col = fprintf(f, "  %s", label);
            if (col >= HELP_COLUMN) {
                fprintf(f, "\n%*s", HELP_COLUMN, "");
            } else {
                fprintf(f, "%*s", HELP_COLUMN - col, "");
            }
            put_wrapped(f, text, HELP_COLUMN, HELP_COLUMN);
        }
        fputc('\n', f);
    }
    fputs("Examples:\n", f);
    for (int i = 0; i < CLI_N_COMMANDS; i++) {
        const char *ex = CLI_COMMANDS[i]->examples;
        if ((only && only != CLI_COMMANDS[i]) || !ex) continue;
        for (const char *s = ex; *s;) {
            size_t n = strcspn(s, "\n");
            fprintf(f, "  %.*s\n", (int)n, s);
            s += n + (s[n] == '\n');
        }
    }
    fputs("\nExit status: 0 ok, 1 runtime error (or any failed batch line), 2 usage error.\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---------------------------------------------------------------- the man page */

/* Prose for roff: - as \-, backslashes escaped, --options in bold; with
 * `caps`, words in capitals (FILE, TEXT) in italics, as a synopsis shows them. */
static void roff_text(FILE *f, const char *s, int caps) {
    if (*s == '.' || *s == '\'') fputs("\\&", f);
    for (const char *p = s; *p;) {
        const int word_start = p == s || !isalnum((unsigned char)p[-1]);
        if (word_start && p[0] == '-' && (p[1] == '-' || isalpha((unsigned char)p[1])) &&
            (p[1] == '-' ? isalpha((unsigned char)p[2]) : !isalnum((unsigned char)p[2]))) {
            size_t n = 1;
            while (p[n] == '-' || isalnum((unsigned char)p[n])) n++;
            fputs("\\fB", f);
            for (size_t i = 0; i < n; i++) fputs(p[i] == '-' ? "\\-" : (char[]){p[i], 0}, f);
            fputs("\\fR", f);
            p += n;
            continue;
        }
        if (caps && word_start && isupper((unsigned char)*p)) {
            size_t n = 0;
            while (isupper((unsigned char)p[n]) || p[n] == '_') n++;
            if (!isalnum((unsigned char)p[n])) {
                fprintf(f, "\\fI%.*s\\fR", (int)n, p);
                p += n;
                continue;
            }
        }
        if (*p == '-') fputs("\\-", f);
        else if (*p == '\\') fputs("\\e", f);
        else fputc(*p, f);
        p++;
    }
}

static void man_synopsis(FILE *f) {
    int first = 1;
    for (int i = 0; i < CLI_N_COMMANDS; i++)
        for (const char *s = CLI_COMMANDS[i]->synopsis; *s;) {
            size_t n = strcspn(s, "\n");
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)n, s);
            /* "attnviz" and the command's name in bold, the rest as a synopsis */
            const char *rest = line + strlen("attnviz");
            const size_t cn = strlen(CLI_COMMANDS[i]->name);
            if (cn && !strncmp(rest + 1, CLI_COMMANDS[i]->name, cn)) rest += 1 + cn;
            if (!first) fputs(".br\n", f);
            fprintf(f, ".B %.*s\n", (int)(rest - line), line);
            while (*rest == ' ') rest++;
            roff_text(f, rest, 1);
            fputc('\n', f);
            first = 0;
            s += n + (s[n] == '\n');
        }
}

static void man_commands(FILE *f) {
    for (int i = 0; i < CLI_N_COMMANDS; i++) {
        const CliCommand *c = CLI_COMMANDS[i];
        fprintf(f, ".TP\n.B attnviz%s%s\n", c->name[0] ? " " : "", c->name);
        roff_text(f, c->about, 0);
        fputc('\n', f);
    }
}

static void man_options(FILE *f) {
    for (int s = 0; s < SEC_N; s++) {
        const CliSection *sec = &CLI_SECTIONS[s];
        const char *paren = strstr(sec->title, " (");
        const size_t tn = paren ? (size_t)(paren - sec->title) : strlen(sec->title);
        fputs(".SH ", f);
        for (size_t i = 0; i < tn; i++) fputs(sec->title[i] == '-' ? "\\-" : (char[]){(char)toupper((unsigned char)sec->title[i]), 0}, f);
        fputc('\n', f);
        if (paren) {
            char p[256];
            snprintf(p, sizeof p, "%.*s.", (int)(strlen(paren + 2) - 1), paren + 2);
            p[0] = (char)toupper((unsigned char)p[0]);
            roff_text(f, p, 0);
            fputc('\n', f);
        }
        if (sec->intro) {
            if (paren) fputs(".PP\n", f);
            roff_text(f, sec->intro, 0);
            fputc('\n', f);
        }
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (opt->section != (CliSectionId)s) continue;
            fputs(".TP\n", f);
            if (opt->short_name) fprintf(f, "\\fB\\-%c\\fR, ", opt->short_name);
            fputs("\\fB", f);
            roff_text(f, "--", 0);
            for (const char *p = opt->name; *p; p++) fputs(*p == '-' ? "\\-" : (char[]){*p, 0}, f);
            fputs("\\fR", f);
            if (opt->arg) {
                fputs(opt->flags & OPT_OPTIONAL ? " [\\fI" : " \\fI", f);
                for (const char *p = opt->arg; *p; p++) fputs(*p == '-' ? "\\-" : (char[]){*p, 0}, f);
                fputs(opt->flags & OPT_OPTIONAL ? "\\fR]" : "\\fR", f);
            }
            fputc('\n', f);
            const char *text = opt->man ? opt->man : opt->help;
            char first[8] = {(char)toupper((unsigned char)text[0]), 0};
            roff_text(f, first, 0);
            roff_text(f, text + 1, 0);
            if (!opt->man && text[strlen(text) - 1] != '.') fputc('.', f);
            if (opt->dflt) {
                fputs(" Default: ", f);
                roff_text(f, opt->dflt, 0);
                fputc('.', f);
            }
            char cmds[96];
            command_list(opt->cmds, " and ", cmds, sizeof cmds);
            fprintf(f, " Taken by %s.\n", cmds);
        }
    }
}

static char *man_page(const char *template_path, AvErr *e) {
    size_t tlen = 0;
    char *tmpl = NULL;
    if (av_read_file(template_path, 1 << 20, &tmpl, &tlen, e) != 0) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        free(tmpl);
        av_err(e, "out of memory");
        return NULL;
    }
    fprintf(f, ".\\\" Generated from %s by attnviz --man (make man): edit that file or src/cli/'s tables, not this one.\n",
            template_path);
    for (const char *s = tmpl; *s;) {
        size_t n = strcspn(s, "\n");
        if (n >= 3 && !strncmp(s, ".\\\"", 3)) { /* the template's own comments */
            s += n + (s[n] == '\n');
            continue;
        }
        if (n == 10 && !strncmp(s, "@SYNOPSIS@", n)) man_synopsis(f);
        else if (n == 10 && !strncmp(s, "@COMMANDS@", n)) man_commands(f);
        else if (n == 9 && !strncmp(s, "@OPTIONS@", n)) man_options(f);
        else {
            const char *v = memchr(s, '@', n);
            if (v && (size_t)(s + n - v) >= 9 && !strncmp(v, "@VERSION@", 9)) {
                fprintf(f, "%.*s%s%.*s\n", (int)(v - s), s, ATTNVIZ_VERSION, (int)(s + n - v - 9), v + 9);
            } else {
                fprintf(f, "%.*s\n", (int)n, s);
            }
        }
        s += n + (s[n] == '\n');
    }
    free(tmpl);
    if (fclose(f) != 0) {
        free(buf);
        av_err(e, "out of memory");
        return NULL;
    }
    return buf;
}

/* ---------------------------------------------------------------- completions */

/* What a value completes to: files, folders, words (into words), or nothing. */
typedef enum { V_NONE, V_FILES, V_DIRS, V_WORDS } ValueKind;

static ValueKind value_kind(const CliOption *opt, char *words, size_t cap) {
    words[0] = '\0';
    if (!opt->arg || (opt->flags & OPT_OPTIONAL)) return V_NONE;
    if (opt->flags & OPT_DIR) return V_DIRS;
    if (opt->flags & OPT_FILE) return V_FILES;
    if (!strcmp(opt->name, "view")) { /* the views the built-in templates register */
        char names[256];
        html_view_known("", 1, names, sizeof names);
        size_t n = 0;
        for (const char *p = names; *p && n + 1 < cap;) {
            size_t k = strcspn(p, ", ()");
            if (k && strncmp(p, "or", k) != 0) n += (size_t)snprintf(words + n, cap - n, "%s%.*s", n ? " " : "", (int)k, p);
            p += k;
            while (*p == ',' || *p == ' ' || *p == '(' || *p == ')') p++;
        }
        return V_WORDS;
    }
    if (opt->choices) {
        size_t n = 0;
        for (const char *p = opt->choices; *p && n + 1 < cap; p++) words[n++] = *p == '|' ? ' ' : *p;
        words[n] = '\0';
        return V_WORDS;
    }
    return V_NONE;
}

/* The help's first clause, for a shell's one-line description. */
static void short_help(const CliOption *opt, char *buf, size_t cap) {
    size_t n = strcspn(opt->help, ";(");
    if (n > 70) n = 70;
    while (n && opt->help[n - 1] == ' ') n--;
    snprintf(buf, cap, "%.*s", (int)n, opt->help);
}

/* The commands' names (the run has none), joined by sep: "serve|render|...". */
static const char *command_names(const char *sep) {
    static char buf[256];
    size_t n = 0;
    buf[0] = '\0';
    for (int c = 1; c < CLI_N_COMMANDS && n < sizeof buf; c++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", c > 1 ? sep : "", CLI_COMMANDS[c]->name);
    return buf;
}

static void bash_completion(FILE *f) {
    fprintf(f, "# bash completion for attnviz (generated by attnviz --completions bash; installed by make install)\n"
               "_attnviz() {\n"
               "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=run opts\n"
               "    COMPREPLY=()\n"
               "    case ${COMP_WORDS[1]} in\n"
               "    %s) [ \"$COMP_CWORD\" -gt 1 ] && cmd=${COMP_WORDS[1]} ;;\n"
               "    esac\n"
               "    case $prev in\n", command_names("|"));
    const char *kinds[] = {"files", "dirs"};
    for (int k = 0; k < 2; k++) {
        int n = 0;
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            char w[256];
            if (value_kind(&CLI_OPTIONS[i], w, sizeof w) != (k ? V_DIRS : V_FILES)) continue;
            fprintf(f, "%s--%s", n++ ? "|" : "    ", CLI_OPTIONS[i].name);
            if (CLI_OPTIONS[i].short_name) fprintf(f, "|-%c", CLI_OPTIONS[i].short_name);
        }
        fprintf(f, ")\n        compopt -o filenames 2>/dev/null\n        COMPREPLY=($(compgen -%c -- \"$cur\"))  # %s\n"
                   "        return ;;\n", k ? 'd' : 'f', kinds[k]);
    }
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        char w[256];
        if (value_kind(&CLI_OPTIONS[i], w, sizeof w) == V_WORDS)
            fprintf(f, "    --%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", CLI_OPTIONS[i].name, w);
    }
    int n = 0; /* a value nothing completes: offer nothing */
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        char w[256];
        if (CLI_OPTIONS[i].arg && !(CLI_OPTIONS[i].flags & OPT_OPTIONAL) && value_kind(&CLI_OPTIONS[i], w, sizeof w) == V_NONE)
            fprintf(f, "%s--%s", n++ ? "|" : "    ", CLI_OPTIONS[i].name);
    }
    fputs(") return ;;\n    esac\n    case $cmd in\n", f);
    for (int c = 0; c < CLI_N_COMMANDS; c++) {
        fprintf(f, "    %s) opts=\"", CLI_COMMANDS[c]->bit == C_RUN ? "run" : CLI_COMMANDS[c]->name);
        int k = 0;
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (!shows(opt, CLI_COMMANDS[c])) continue;
            if (opt->short_name) fprintf(f, "%s-%c", k++ ? " " : "", opt->short_name);
            fprintf(f, "%s--%s", k++ ? " " : "", opt->name);
        }
        fputs("\" ;;\n", f);
    }
    fprintf(f, "    esac\n"
               "    if [[ $cur == -* ]]; then\n"
               "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
               "    elif [ \"$COMP_CWORD\" -eq 1 ]; then\n"
               "        COMPREPLY=($(compgen -W \"%s\" -- \"$cur\"))\n"
               "    else\n"
               "        case $cmd in\n", command_names(" "));
    for (int c = 0; c < CLI_N_COMMANDS; c++)
        if (CLI_COMMANDS[c]->positional_files)
            fprintf(f, "        %s) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n",
                    CLI_COMMANDS[c]->name);
        else if (CLI_COMMANDS[c]->positional_words)
            fprintf(f, "        %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")) ;;\n", CLI_COMMANDS[c]->name,
                    CLI_COMMANDS[c]->positional_words);
    fputs("        esac\n"
          "    fi\n"
          "}\n"
          "complete -F _attnviz attnviz\n", f);
}

/* s inside a zsh '...' spec's [description]: quotes, brackets and colons escaped. */
static void zsh_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else if (*s == '[' || *s == ']' || *s == ':' || *s == '\\') fprintf(f, "\\%c", *s);
        else fputc(*s, f);
    }
}

static void zsh_spec(FILE *f, const CliOption *opt, const char *form) {
    char w[256], help[96];
    const ValueKind k = value_kind(opt, w, sizeof w);
    short_help(opt, help, sizeof help);
    fprintf(f, "    '%s%s", opt->flags & OPT_REPEAT ? "*" : "", form);
    if (opt->arg) fputs(form[1] == '-' ? (opt->flags & OPT_OPTIONAL ? "=-" : "=") : "+", f);
    fputc('[', f);
    zsh_text(f, help);
    fputc(']', f);
    if (opt->arg) {
        fputs(opt->flags & OPT_OPTIONAL ? "::" : ":", f);
        zsh_text(f, opt->arg);
        fputc(':', f);
        if (k == V_FILES) fputs("_files", f);
        else if (k == V_DIRS) fputs("_files -/", f);
        else if (k == V_WORDS) fprintf(f, "(%s)", w);
    }
    fputs("' \\\n", f);
}

static void zsh_completion(FILE *f) {
    fputs("#compdef attnviz\n"
          "# zsh completion for attnviz (generated by attnviz --completions zsh; installed by make install)\n"
          "_attnviz() {\n"
          "  local cmd=run\n"
          "  if (( CURRENT == 2 )) && [[ $PREFIX != -* ]]; then\n"
          "    local -a cmds\n"
          "    cmds=(\n", f);
    for (int c = 1; c < CLI_N_COMMANDS; c++) {
        fprintf(f, "      '%s:", CLI_COMMANDS[c]->name);
        zsh_text(f, CLI_COMMANDS[c]->summary);
        fputs("'\n", f);
    }
    fprintf(f, "    )\n"
               "    _describe -t commands 'attnviz command (or a text)' cmds\n"
               "    return\n"
               "  fi\n"
               "  [[ ${words[2]} == (%s) ]] && cmd=${words[2]}\n"
               "  if [[ $cmd != run ]]; then shift words; (( CURRENT-- )); fi\n"
               "  case $cmd in\n", command_names("|"));
    for (int c = 0; c < CLI_N_COMMANDS; c++) {
        const CliCommand *cmd = CLI_COMMANDS[c];
        fprintf(f, "  %s)\n    _arguments -S \\\n", cmd->bit == C_RUN ? "run" : cmd->name);
        for (int i = 0; i < CLI_N_OPTIONS; i++) {
            const CliOption *opt = &CLI_OPTIONS[i];
            if (!shows(opt, cmd)) continue;
            char form[64];
            if (opt->short_name) {
                snprintf(form, sizeof form, "-%c", opt->short_name);
                zsh_spec(f, opt, form);
            }
            snprintf(form, sizeof form, "--%s", opt->name);
            zsh_spec(f, opt, form);
        }
        if (cmd->positional_files) fputs("    '*:file:_files'\n    ;;\n", f);
        else if (cmd->positional_words) fprintf(f, "    '*:%s:(%s)'\n    ;;\n", cmd->name, cmd->positional_words);
        else fputs("    '*:text: '\n    ;;\n", f);
    }
    fputs("  esac\n"
          "}\n"
          "_attnviz \"$@\"\n", f);
}

static void fish_text(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void fish_completion(FILE *f) {
    fprintf(f, "# fish completion for attnviz (generated by attnviz --completions fish; installed by make install)\n"
               "function __attnviz_cmd\n"
               "    set -l words (commandline -opc)\n"
               "    if test (count $words) -ge 2; and contains -- $words[2] %s\n"
               "        echo $words[2]\n"
               "    else\n"
               "        echo run\n"
               "    end\n"
               "end\n"
               "function __attnviz_takes\n"
               "    contains -- (__attnviz_cmd) $argv\n"
               "end\n"
               "complete -c attnviz -f\n", command_names(" "));
    for (int c = 1; c < CLI_N_COMMANDS; c++) {
        fprintf(f, "complete -c attnviz -n 'test (count (commandline -opc)) -eq 1' -a %s -d ", CLI_COMMANDS[c]->name);
        fish_text(f, CLI_COMMANDS[c]->summary);
        fputc('\n', f);
    }
    for (int c = 0; c < CLI_N_COMMANDS; c++)
        if (CLI_COMMANDS[c]->positional_files)
            fprintf(f, "complete -c attnviz -n '__attnviz_takes %s' -F\n", CLI_COMMANDS[c]->name);
        else if (CLI_COMMANDS[c]->positional_words)
            fprintf(f, "complete -c attnviz -n '__attnviz_takes %s; and test (count (commandline -opc)) -eq 2' -a '%s'\n",
                    CLI_COMMANDS[c]->name, CLI_COMMANDS[c]->positional_words);
    for (int i = 0; i < CLI_N_OPTIONS; i++) {
        const CliOption *opt = &CLI_OPTIONS[i];
        if (opt->flags & OPT_HIDDEN) continue;
        char w[256], help[96];
        const ValueKind k = value_kind(opt, w, sizeof w);
        short_help(opt, help, sizeof help);
        fputs("complete -c attnviz -n '__attnviz_takes", f);
        for (int c = 0; c < CLI_N_COMMANDS; c++)
            if (opt->cmds & CLI_COMMANDS[c]->bit) fprintf(f, " %s", CLI_COMMANDS[c]->bit == C_RUN ? "run" : CLI_COMMANDS[c]->name);
        fputc('\'', f);
        if (opt->short_name) fprintf(f, " -s %c", opt->short_name);
        fprintf(f, " -l %s", opt->name);
        if (opt->arg && !(opt->flags & OPT_OPTIONAL)) fputs(k == V_FILES || k == V_DIRS ? " -r -F" : " -x", f);
        if (k == V_WORDS) fprintf(f, " -a '%s'", w);
        if (k == V_DIRS) fputs(" -a '(__fish_complete_directories)'", f);
        fputs(" -d ", f);
        fish_text(f, help);
        fputc('\n', f);
    }
}

char *cli_generate(const CliOptions *o, AvErr *e) {
    if (!strcmp(o->generate_what, "man")) return man_page(o->generate_arg, e);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        av_err(e, "out of memory");
        return NULL;
    }
    if (!strcmp(o->generate_arg, "bash")) bash_completion(f);
    else if (!strcmp(o->generate_arg, "zsh")) zsh_completion(f);
    else fish_completion(f);
    if (fclose(f) != 0) {
        free(buf);
        av_err(e, "out of memory");
        return NULL;
    }
    return buf;
}
