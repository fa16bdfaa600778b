/* generate.c — libattnviz's generation example: continues a prompt greedily,
 * one line per token as it comes, with the token's attention row in every
 * layer and head (their means: the entropy, and the weight on the first
 * token), then its whole rows as the last fields when asked.
 *
 *   cc generate.c $(pkg-config --cflags --libs attnviz) -o generate
 *   ./generate MODEL N "The capital of France is" [rows]
 *
 * Each line: index position id logprob "text" mean-entropy mean-sink [rows...]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnviz.h>

static int print_token(void *ctx, const attnviz_token *t) {
    const int rows = *(const int *)ctx, blocks = t->n_layers * t->n_heads;
    double ent = 0, sink = 0;
    const char *c;
    int b, j;
    for (b = 0; b < blocks; b++) ent += t->entropy[b], sink += t->sink[b];
    printf("%d %d %d %.9g \"", t->index, t->position, t->id, t->logprob);
    for (c = t->text; *c; c++) /* the line stays one line */
        if (*c == '\n') printf("\\n");
        else if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else putchar(*c);
    printf("\" %.6f %.6f", ent / blocks, sink / blocks);
    for (b = 0; rows && b < blocks; b++)
        for (j = 0; j < t->n_keys; j++) printf(" %.9g", (double)t->rows[(size_t)b * t->n_keys + j]);
    printf("\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL N PROMPT [rows]\n", argv[0]);
        return 2;
    }
    attnviz_error err;
    attnviz_model *m = attnviz_model_open(argv[1], 0, &err);
    if (!m) {
        fprintf(stderr, "generate: %s\n", err.message);
        return err.code;
    }
    int rows = argc > 4 && !strcmp(argv[4], "rows");
    attnviz_generate_options opts = {0};
    opts.max_tokens = atoi(argv[2]);
    opts.flags = ATTNVIZ_GEN_ATTENTION | (rows ? ATTNVIZ_GEN_ROWS : 0);
    attnviz_finish finish;
    attnviz_status st = attnviz_generate(m, argv[3], &opts, print_token, &rows, &finish, &err);
    if (st != ATTNVIZ_OK) fprintf(stderr, "generate: %s\n", err.message);
    else fprintf(stderr, "generate: stopped: %s\n", finish == ATTNVIZ_FINISH_EOS ? "end token" : "length");
    attnviz_model_free(m);
    return st;
}
