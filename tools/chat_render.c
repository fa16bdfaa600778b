/* chat_render.c — chat templates rendered by attnviz over a file of cases, for
 * the check against jinja2 and transformers (tests/ref/chat_check.sh).
 * usage: chat_render --model DIR|FILE.gguf CASES_JSONL [--openai] [--ids [--tokenizer DIR|FILE.gguf]]
 *        chat_render --template FILE VARS_JSONL
 * --model: the model's own template and special tokens (chat.h); each line is
 * {"messages": [...], "add_generation_prompt": true|false}, the messages as
 * --chat-file reads them, or with --openai as /v1/chat/completions reads them
 * (openai.h's oa_parse_request) and renders them (chat_render_openai). --template: a template file rendered over each line's
 * variables (a JSON object) as they are (jinja.h). Each output line is
 * {"text": "..."} or {"error": "..."}; with --ids also the text's token ids
 * ("ids"), tokenized as apply_chat_template(tokenize=True) does: with the
 * model's tokenizer, or --tokenizer's. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "chat.h"
#include "gguf.h"
#include "jinja.h"
#include "loader.h"
#include "openai.h"
#include "tokenizer.h"
#include "util.h"

static int load_tok(Tokenizer **t, const char *path, AvErr *e) {
    if (model_is_gguf(path)) {
        GgufFile g;
        if (gguf_open(&g, path, e) != 0) return -1;
        int rc = tok_load_gguf(t, &g, path, arch_gguf_tok_flags(&g), e);
        gguf_close(&g);
        return rc;
    }
    TokDirHint hint = {NULL, TOK_SOURCE_ANY, -1, ""};
    return tok_load_dir(t, path, &hint, e);
}

static void print_result(int ok, const char *text, const char *err, const TokEncoding *enc) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, ok ? "text" : "error", ok ? text : err);
    if (ok && enc) cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(enc->ids, enc->n));
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s ? s : "{\"error\": \"out of memory\"}");
    free(s);
    cJSON_Delete(o);
}

/* OpenAI's messages (a JSON array's text) through the route's parser, rendered as the route renders them. */
static int render_openai(const ChatTemplate *ct, const char *mj, int agp, char **out, AvErr *e) {
    const char *pre = "{\"model\":\"m\",\"messages\":";
    size_t n = strlen(pre) + strlen(mj) + 2;
    char *body = malloc(n);
    if (!body) return av_err(e, "out of memory");
    snprintf(body, n, "%s%s}", pre, mj);
    OaRequest q;
    OaError oe;
    int rc = oa_parse_request(body, strlen(body), 1, &q, &oe);
    free(body);
    if (rc != 0) return av_err(e, "%s", oe.message);
    ChatMessage *cm = calloc((size_t)q.n_msgs, sizeof *cm);
    if (!cm) rc = av_err(e, "out of memory");
    for (int i = 0; cm && i < q.n_msgs; i++)
        cm[i] = (ChatMessage){q.msgs[i].role, q.msgs[i].content, q.msgs[i].parts, q.msgs[i].n_parts, q.msgs[i].name};
    if (cm) rc = chat_render_openai(ct, cm, q.n_msgs, agp, out, e);
    free(cm);
    oa_request_free(&q);
    return rc;
}

int main(int argc, char **argv) {
    int ids = 0, openai = 0;
    const char *tokp = NULL;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--ids")) ids = 1;
        else if (!strcmp(argv[i], "--openai")) openai = 1;
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokp = argv[++i];
        else argc = 0;
    }
    if (argc < 4 || (strcmp(argv[1], "--model") && strcmp(argv[1], "--template")) ||
        ((ids || openai) && strcmp(argv[1], "--model")) || (tokp && !ids)) {
        fprintf(stderr, "usage: chat_render --model DIR|FILE.gguf CASES_JSONL [--openai] [--ids [--tokenizer DIR|FILE.gguf]] | "
                        "--template FILE VARS_JSONL\n");
        return 2;
    }
    AvErr e = {0};
    int model = !strcmp(argv[1], "--model");
    Tokenizer *tok = NULL;
    if (ids && load_tok(&tok, tokp ? tokp : argv[2], &e) != 0) goto fail;
    ChatTemplate *ct = NULL;
    JinjaTemplate *jt = NULL;
    GgufFile g;
    int have_g = 0;
    if (model) {
        if (model_is_gguf(argv[2])) {
            if (gguf_open(&g, argv[2], &e) != 0) goto fail;
            have_g = 1;
        }
        if (chat_template_from_model(&ct, argv[2], have_g ? &g : NULL, &e) != 0) goto fail;
        if (!ct) {
            fprintf(stderr, "chat_render: %s ships no chat template\n", argv[2]);
            return 1;
        }
    } else {
        char *src;
        size_t len;
        if (av_read_file(argv[2], JINJA_MAX_SOURCE, &src, &len, &e) != 0) goto fail;
        int rc = jinja_parse(&jt, src, len, argv[2], &e);
        free(src);
        if (rc != 0) goto fail;
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f) {
        fprintf(stderr, "chat_render: %s: cannot open\n", argv[3]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        cJSON *c = cJSON_ParseWithLength(line, (size_t)len);
        char *out = NULL;
        AvErr re = {0};
        int ok;
        if (!cJSON_IsObject(c)) {
            fprintf(stderr, "chat_render: %s: a line is not a JSON object\n", argv[3]);
            return 1;
        }
        if (model) {
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
            char *mj = cJSON_PrintUnformatted(msgs);
            ChatMessage *m = NULL;
            int n = 0;
            const int agp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
            if (openai) ok = mj && render_openai(ct, mj, agp, &out, &re) == 0;
            else ok = mj && chat_messages_parse_json(mj, strlen(mj), &m, &n, &re) == 0 &&
                      chat_render(ct, m, n, agp, &out, &re) == 0;
            chat_messages_free(m, n);
            free(mj);
        } else {
            size_t ol;
            ok = jinja_render(jt, c, NULL, &out, &ol, &re) == 0;
        }
        TokEncoding enc = {0};
        if (ok && tok && tok_encode_plain(tok, out, strlen(out), 0, &enc, &re) != 0) ok = 0;
        print_result(ok, out, re.msg, tok ? &enc : NULL);
        tok_encoding_free(&enc);
        free(out);
        cJSON_Delete(c);
    }
    free(line);
    fclose(f);
    chat_template_free(ct);
    jinja_free(jt);
    tok_free(tok);
    if (have_g) gguf_close(&g);
    return 0;
fail:
    fprintf(stderr, "chat_render: %s\n", e.msg);
    return 1;
}
