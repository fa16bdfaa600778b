/* run_chat.c — a chat's messages rendered into the prompt text (pipeline.h's
 * session_chat_prompt) by the model's own chat template (chat.h), as
 * transformers' apply_chat_template renders them. */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

const char *session_chat_missing(const Session *s) {
    const ChatTemplate *t;
    if (s->cfg.enc_dec) return "chat templates are for decoders: the model is an encoder-decoder";
    if (!s->cfg.causal && s->have_model) return "chat templates are for decoders: the model is a masked (encoder) model";
    if (session_chat_template(s, &t, NULL) != 0) return s->chat_err;
    if (!t) return "the model ships no chat template";
    return NULL;
}

int session_chat_prompt(const Session *s, const PipeChatMsg *m, int n, int openai, char **text, AvErr *e) {
    *text = NULL;
    const char *why = session_chat_missing(s);
    if (why) return av_err_usage(e, "%s: %.1000s", s->name, why);
    if (n < 1) return av_err_usage(e, "%s", "a chat needs at least one message");
    ChatMessage *cm = calloc((size_t)n, sizeof *cm);
    if (!cm) return av_err(e, "out of memory");
    for (int i = 0; i < n; i++)
        cm[i] = (ChatMessage){m[i].role, m[i].content, m[i].parts, m[i].n_parts, m[i].name};
    int rc = openai ? chat_render_openai(s->chat, cm, n, 1, text, e) : chat_render(s->chat, cm, n, 1, text, e);
    free(cm);
    return rc;
}
