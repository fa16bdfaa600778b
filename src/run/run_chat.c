/* run_chat.c — a chat's messages rendered into the prompt text (pipeline.h's
 * pipeline_chat_prompt).
 *
 * A stand-in until the chat-template renderer lands (its chat_render over the
 * template the session loads): this renders only the ChatML layout
 * ("<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then
 * "<|im_start|>assistant\n"), and only for a model whose own template is
 * ChatML (a GGUF's tokenizer.chat_template naming <|im_start|>). It adds no
 * default system message a template may carry: send one. Every other model
 * is refused with that reason. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "run_internal.h"
#include "util.h"

/* The template's text (not NUL-terminated: n bytes), or NULL. */
static const char *template_of(const Pipeline *p, size_t *n) {
    const char *s = NULL;
    AvErr e;
    *n = 0;
    if (!p->model.gguf || gguf_get_str(p->model.gguf, "tokenizer.chat_template", &s, n, &e) != 0) return NULL;
    return s;
}

const char *pipeline_chat_missing(const Pipeline *p) {
    size_t n;
    const char *t = template_of(p, &n);
    if (!t) return "the model has no chat template (a GGUF's tokenizer.chat_template)";
    if (!memmem(t, n, "<|im_start|>", 12)) return "the model's chat template is not ChatML, the only layout this build renders";
    return NULL;
}

int pipeline_chat_prompt(const Pipeline *p, const PipeChatMsg *m, int n, char **text, AvErr *e) {
    *text = NULL;
    const char *why = pipeline_chat_missing(p);
    if (why) return av_err_usage(e, "%s: %s", p->name, why);
    AvBuf b;
    if (av_buf_open(&b)) return av_err(e, "out of memory");
    for (int i = 0; i < n; i++) fprintf(b.f, "<|im_start|>%s\n%s<|im_end|>\n", m[i].role, m[i].content);
    fputs("<|im_start|>assistant\n", b.f);
    if (!(*text = av_buf_close(&b, !ferror(b.f)))) return av_err(e, "out of memory");
    return 0;
}
