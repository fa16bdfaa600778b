/* run_chat.c — a chat's messages rendered into the prompt text (pipeline.h's
 * pipeline_chat_prompt) by the model's own chat template (chat.h), as
 * transformers' apply_chat_template renders them. */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

const char *pipeline_chat_missing(const Pipeline *p) {
    const ChatTemplate *t;
    if (p->cfg.enc_dec) return "chat templates are for decoders: the model is an encoder-decoder";
    if (!p->cfg.causal && p->have_model) return "chat templates are for decoders: the model is a masked (encoder) model";
    if (pipeline_chat_template(p, &t, NULL) != 0) return p->chat_err;
    if (!t) return "the model ships no chat template";
    return NULL;
}

int pipeline_chat_prompt(const Pipeline *p, const PipeChatMsg *m, int n, char **text, AvErr *e) {
    *text = NULL;
    const char *why = pipeline_chat_missing(p);
    if (why) return av_err_usage(e, "%s: %.1000s", p->name, why);
    if (n < 1) return av_err_usage(e, "%s", "a chat needs at least one message");
    ChatMessage *cm = calloc((size_t)n, sizeof *cm);
    if (!cm) return av_err(e, "out of memory");
    for (int i = 0; i < n; i++) cm[i].role = m[i].role, cm[i].content = m[i].content;
    int rc = chat_render(p->chat, cm, n, 1, text, e);
    free(cm);
    return rc;
}
