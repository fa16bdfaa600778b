/* tokenize.c — a tokenizer.json (or the tokenizer inside a .gguf) applied to
 * a file of inputs, for the oracle checks against the Rust library and
 * transformers (tests/tokenizer/tokjson_check.sh, gguf_tok_check.sh).
 * usage: tokenize TOKENIZER_JSON|FILE.gguf INPUTS_JSONL [--time] [--tokens]
 * Each input line is one JSON string; each output line is {"ids": [...]}, with
 * --tokens {"ids": [...], "tokens": [...]} (the vocabulary's spellings).
 * --time prints the load time in ms on stderr. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "tokenizer.h"
#include "util.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize TOKENIZER_JSON INPUTS_JSONL [--time] [--tokens]\n");
        return 2;
    }
    AvErr e = {0};
    Tokenizer *t;
    double t0 = av_now_ms();
    size_t al = strlen(argv[1]);
    GgufFile g;
    int is_gguf = al > 5 && !strcmp(argv[1] + al - 5, ".gguf");
    if (is_gguf ? (gguf_open(&g, argv[1], &e) != 0 || tok_load_gguf(&t, &g, argv[1], arch_gguf_tok_flags(&g), &e) != 0)
                : tok_load_json(&t, argv[1], &e) != 0) {
        fprintf(stderr, "tokenize: %s\n", e.msg);
        return 1;
    }
    int with_tokens = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--time")) fprintf(stderr, "load_ms=%.1f\n", av_now_ms() - t0);
        else if (!strcmp(argv[i], "--tokens")) with_tokens = 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "tokenize: %s: cannot open\n", argv[2]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        cJSON *s = cJSON_ParseWithLength(line, (size_t)len);
        if (!cJSON_IsString(s)) {
            fprintf(stderr, "tokenize: %s: a line is not a JSON string\n", argv[2]);
            cJSON_Delete(s);
            rc = 1;
            break;
        }
        TokEncoding enc;
        if (tok_encode(t, s->valuestring, strlen(s->valuestring), NULL, 0, 0, &enc, &e) != 0) {
            printf("{\"error\": \"%s\"}\n", "encode failed");
        } else {
            printf("{\"ids\": [");
            for (int i = 0; i < enc.n; i++) printf("%s%d", i ? ", " : "", enc.ids[i]);
            if (with_tokens) {
                /* the spellings as JSON strings, escaped as Python's json.dumps does */
                printf("], \"tokens\": [");
                for (int i = 0; i < enc.n; i++) {
                    cJSON *str = cJSON_CreateString(enc.tokens[i] ? enc.tokens[i] : "");
                    char *js = str ? cJSON_PrintUnformatted(str) : NULL;
                    printf("%s%s", i ? ", " : "", js ? js : "null");
                    cJSON_free(js);
                    cJSON_Delete(str);
                }
            }
            printf("]}\n");
            tok_encoding_free(&enc);
        }
        cJSON_Delete(s);
    }
    free(line);
    fclose(f);
    tok_free(t);
    if (is_gguf) gguf_close(&g);
    return rc;
}
