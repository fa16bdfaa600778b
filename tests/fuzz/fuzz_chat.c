/* libFuzzer target: chat templates (jinja_parse.c, jinja_eval.c) and OpenAI-style messages
 * (chat.c) from arbitrary bytes. The input is a template, optionally followed by "\n@@\n" and a
 * messages JSON; the messages parse strictly, then the template renders over them (or over
 * fixed ones) with transformers' variables, under bounds tight enough that each input ends
 * quickly: a template that loops, recurses or writes without end must stop with an error. */
#define _GNU_SOURCE /* memmem */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data, *sep = memmem(data, size, "\n@@\n", 4);
    size_t tlen = sep ? (size_t)(sep - src) : size;
    AvErr e;
    ChatMessage *m = NULL;
    int n = 0;
    if (sep) (void)chat_messages_parse_json(sep + 4, size - tlen - 4, &m, &n, &e);
    cJSON *vars = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(vars, "messages");
    static const char *const fixed[][2] = {{"system", "Be brief."}, {"user", "Hi {{ x }} \xc3\xa9"},
                                           {"assistant", "  Hello!  "}, {"user", "Why?"}};
    for (int i = 0; i < (m ? n : 4); i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(msgs, o);
        cJSON_AddStringToObject(o, "role", m ? m[i].role : fixed[i][0]);
        if (m && m[i].parts) {
            cJSON *parts = cJSON_AddArrayToObject(o, "content");
            for (int k = 0; k < m[i].n_parts; k++) {
                cJSON *p = cJSON_CreateObject();
                cJSON_AddItemToArray(parts, p);
                cJSON_AddStringToObject(p, "type", "text");
                cJSON_AddStringToObject(p, "text", m[i].parts[k]);
            }
        } else {
            cJSON_AddStringToObject(o, "content", m ? m[i].content : fixed[i][1]);
        }
    }
    cJSON_AddBoolToObject(vars, "add_generation_prompt", 1);
    cJSON_AddStringToObject(vars, "bos_token", "<s>");
    cJSON_AddStringToObject(vars, "eos_token", "</s>");
    cJSON_AddNullToObject(vars, "tools");
    chat_messages_free(m, n);
    JinjaTemplate *t;
    if (jinja_parse(&t, src, tlen, "fuzz", &e) == 0) {
        JinjaOpts o;
        jinja_opts_default(&o);
        o.max_steps = 200000, o.max_output = 1u << 20, o.max_memory = 64u << 20, o.max_calls = 32, o.now = 1700000000;
        char *out;
        size_t len;
        if (jinja_render(t, vars, &o, &out, &len, &e) == 0) {
            if (strlen(out) != len) abort(); /* the text holds no NUL */
            free(out);
        }
        jinja_free(t);
    }
    cJSON_Delete(vars);
    return 0;
}
