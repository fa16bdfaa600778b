/* chat.h — a model's chat template: found where transformers finds it (a
 * folder's chat_template.jinja, else tokenizer_config.json's chat_template,
 * a string or the "default" of a list of {name, template}, else a
 * processor's chat_template.json (vision-language models); a GGUF's
 * tokenizer.chat_template), with the special tokens the template reads
 * (bos_token, eos_token, ...: tokenizer_config.json's strings or AddedToken
 * objects, special_tokens_map.json for older folders; a GGUF's token ids
 * spelled), and rendered over OpenAI-style messages as transformers'
 * apply_chat_template(messages, add_generation_prompt=..., tokenize=False)
 * renders them (jinja.h). The text is then tokenized with no special tokens
 * added (tok_encode_plain), as apply_chat_template(tokenize=True) does. */
#ifndef ATTNVIZ_CHAT_H
#define ATTNVIZ_CHAT_H

#include <stddef.h>

#include "err.h"

struct GgufFile;
typedef struct ChatTemplate ChatTemplate;

/* One message. content is its text; or, when parts is non-NULL, the content is
 * the list [{"type": "text", "text": parts[0]}, ...] (OpenAI's content parts),
 * handed to the template as such: templates that read content as a string
 * refuse it, as they do in transformers. A NULL part is {"type": "image"}:
 * where a vision-language model's template puts the picture's placeholder.
 * content and parts both NULL: the message has no "content" (OpenAI's null
 * content, a key transformers drops). name: the message's "name", or NULL for
 * none. */
typedef struct {
    const char *role;
    const char *content;
    const char *const *parts;
    int n_parts;
    const char *name;
} ChatMessage;

/* The template of the model at path: a GGUF file (gguf, open) or a folder
 * (gguf NULL). *out is NULL, with 0, when the model ships none. */
int chat_template_from_model(ChatTemplate **out, const char *path, const struct GgufFile *gguf, AvErr *e);
/* A template from its text, with the named special tokens (names[i] = values[i]);
 * origin names it in messages. */
int chat_template_from_source(ChatTemplate **out, const char *src, size_t len, const char *origin,
                              const char *const *names, const char *const *values, int n, AvErr *e);
void chat_template_free(ChatTemplate *t);
/* Where the template came from ("DIR/tokenizer_config.json: chat_template"). */
const char *chat_template_origin(const ChatTemplate *t);
/* The special token a template variable names (e.g. "eos_token"), or NULL. */
const char *chat_template_special(const ChatTemplate *t, const char *name);

/* The n messages (n >= 1) rendered; *out NUL-terminated (free). A template
 * that refuses the messages (raise_exception) fails with its words. */
int chat_render(const ChatTemplate *t, const ChatMessage *m, int n, int add_generation_prompt, char **out, AvErr *e);

/* The same for messages as OpenAI's API means them (what /v1/chat/completions
 * renders): as chat_render, that is as transformers' apply_chat_template,
 * except where the template would show the model something other than what
 * the messages say:
 *  - content parts reach the template as a list only when it reads lists
 *    (chat_template_reads_parts); otherwise their texts joined by "\n" are the
 *    content;
 *  - "developer" stays a role only for a template that names it
 *    (chat_template_names_role); otherwise it is "system";
 *  - a message without content is rendered without the key; if the template
 *    then fails, such messages are rendered with "" instead. */
int chat_render_openai(const ChatTemplate *t, const ChatMessage *m, int n, int add_generation_prompt, char **out,
                       AvErr *e);
/* Whether the template reads a message's content given as text parts: one
 * user message whose content is one text part renders as the same message
 * with that text as its content does (probed when the template is read). */
int chat_template_reads_parts(const ChatTemplate *t);
/* Whether the template's source names role as a string literal ('developer'). */
int chat_template_names_role(const ChatTemplate *t, const char *role);

/* OpenAI-style messages: a JSON array of objects with "role" (system,
 * developer, user or assistant) and "content" (a string, or an array of
 * {"type": "text", "text": ...} parts). Strict: other keys, other part types,
 * duplicate keys, NUL characters, text that is not UTF-8 and an empty array
 * are refused in one line naming the message. *m (n of them) is freed by
 * chat_messages_free. */
int chat_messages_parse_json(const char *json, size_t len, ChatMessage **m, int *n, AvErr *e);
void chat_messages_free(ChatMessage *m, int n);

#endif
