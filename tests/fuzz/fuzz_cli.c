/* libFuzzer target: the command line's parser (cli_parse) on arbitrary
 * arguments: the bytes split at NUL into argv (at most 32), so option values
 * such as --ablate's LAYER.HEAD lists, --layers' ranges and sizes meet every
 * shape. Parsing never prints; whatever it returns, the options free. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[34];
    int argc = 0;
    argv[argc++] = (char *)"attnviz";
    for (size_t i = 0; i <= size && argc < 33;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    CliOptions o;
    AvErr e;
    const int rc = cli_parse(&o, argc, argv, &e);
    if (rc == CLI_RUN && o.run.lens.ablate && o.run.lens.n_ablate && !o.run.lens.ablate_pairs) __builtin_trap();
    for (int i = 0; rc == CLI_RUN && i < o.run.lens.n_ablate; i++)
        if (o.run.lens.ablate_pairs[2 * i] < 0 || o.run.lens.ablate_pairs[2 * i + 1] < 0) __builtin_trap();
    cli_options_free(&o);
    free(buf);
    return 0;
}
