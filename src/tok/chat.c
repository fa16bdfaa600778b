/* chat.c — a model's chat template found, its special tokens read, messages
 * parsed strictly and rendered (chat.h) through the Jinja subset (jinja.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat.h"
#include "gguf.h"
#include "jinja.h"
#include "util.h"

struct ChatTemplate {
    JinjaTemplate *tpl;
    cJSON *specials; /* {"bos_token": "<s>", ...} */
    char *src;       /* the template's text */
    int reads_parts; /* chat_template_reads_parts */
};

/* The special tokens transformers names (SPECIAL_TOKENS_ATTRIBUTES). */
static const char *const NAMED[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                    "pad_token", "cls_token", "mask_token"};
#define N_NAMED (sizeof NAMED / sizeof NAMED[0])

void chat_template_free(ChatTemplate *t) {
    if (!t) return;
    jinja_free(t->tpl);
    cJSON_Delete(t->specials);
    free(t->src);
    free(t);
}

const char *chat_template_origin(const ChatTemplate *t) { return jinja_origin(t->tpl); }

const char *chat_template_special(const ChatTemplate *t, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t->specials, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int probe_parts(const ChatTemplate *t);

static int make(ChatTemplate **out, const char *src, size_t len, const char *origin, cJSON *specials, AvErr *e) {
    ChatTemplate *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(specials);
        return av_err(e, "out of memory");
    }
    t->specials = specials;
    if (!(t->src = strndup(src, len))) {
        chat_template_free(t);
        return av_err(e, "out of memory");
    }
    if (jinja_parse(&t->tpl, src, len, origin, e) != 0) {
        chat_template_free(t);
        return -1;
    }
    t->reads_parts = probe_parts(t);
    *out = t;
    return 0;
}

int chat_template_from_source(ChatTemplate **out, const char *src, size_t len, const char *origin,
                              const char *const *names, const char *const *values, int n, AvErr *e) {
    *out = NULL;
    cJSON *sp = cJSON_CreateObject();
    if (!sp) return av_err(e, "out of memory");
    for (int k = 0; k < n; k++)
        if (!cJSON_AddStringToObject(sp, names[k], values[k])) {
            cJSON_Delete(sp);
            return av_err(e, "out of memory");
        }
    return make(out, src, len, origin, sp, e);
}

/* ---- a GGUF file ---- */

static int from_gguf(ChatTemplate **out, const char *path, const GgufFile *f, AvErr *e) {
    const char *src;
    size_t len;
    if (!gguf_find_kv(f, "tokenizer.chat_template")) return 0;
    if (gguf_get_str(f, "tokenizer.chat_template", &src, &len, e) != 0) return av_err_prefix(e, "%s", path);
    /* the special tokens transformers' GGUF reader sets, spelled from the vocabulary */
    static const char *const keys[][2] = {
        {"tokenizer.ggml.bos_token_id", "bos_token"},     {"tokenizer.ggml.eos_token_id", "eos_token"},
        {"tokenizer.ggml.unknown_token_id", "unk_token"}, {"tokenizer.ggml.seperator_token_id", "sep_token"},
        {"tokenizer.ggml.padding_token_id", "pad_token"}, {"tokenizer.ggml.cls_token_id", "cls_token"},
        {"tokenizer.ggml.mask_token_id", "mask_token"},
    };
    const GgufKV *toks = gguf_find_kv(f, "tokenizer.ggml.tokens");
    cJSON *sp = cJSON_CreateObject();
    if (!sp) return av_err(e, "out of memory");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        uint32_t id;
        if (!gguf_find_kv(f, keys[k][0])) continue;
        if (gguf_get_u32(f, keys[k][0], &id, e) != 0) goto bad;
        const char *s;
        size_t n;
        if (!toks || id >= toks->arr_n) {
            av_err(e, "%s: %s %u is not a token of tokenizer.ggml.tokens", path, keys[k][0], id);
            goto fail;
        }
        if (gguf_arr_str(toks, id, &s, &n, e) != 0) goto bad;
        char *v = strndup(s, n);
        cJSON *j = v ? cJSON_CreateString(v) : NULL;
        free(v);
        if (!j || !cJSON_AddItemToObject(sp, keys[k][1], j)) {
            cJSON_Delete(j);
            av_err(e, "out of memory");
            goto fail;
        }
    }
    {
        char origin[1100];
        snprintf(origin, sizeof origin, "%s: tokenizer.chat_template", path);
        return make(out, src, len, origin, sp, e);
    }
bad:
    av_err_prefix(e, "%s", path);
fail:
    cJSON_Delete(sp);
    return -1;
}

/* ---- a folder ---- */

static cJSON *read_json(const char *path, AvErr *e, int *absent) {
    char *buf;
    size_t len;
    *absent = !av_file_exists(path);
    if (*absent) return NULL;
    if (av_read_file(path, 64u << 20, &buf, &len, e) != 0) return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!j) av_err(e, "%s: not valid JSON", path);
    else if (!cJSON_IsObject(j)) {
        av_err(e, "%s: not a JSON object", path);
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

/* A special token's text: a string, or an AddedToken object's "content". */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static int is_named(const char *k) {
    for (size_t i = 0; i < N_NAMED; i++)
        if (!strcmp(k, NAMED[i])) return 1;
    return 0;
}

static int set_special(cJSON *sp, const char *name, const char *text, AvErr *e) {
    cJSON_DeleteItemFromObjectCaseSensitive(sp, name);
    if (!cJSON_AddStringToObject(sp, name, text)) return av_err(e, "out of memory");
    return 0;
}

/* transformers' special_tokens_map: the named tokens, keys ending in "_token" with a
 * token for a value, and the entries of extra_special_tokens when it is a dict. */
static int specials_of(cJSON *sp, const cJSON *cfg, AvErr *e) {
    for (const cJSON *c = cfg ? cfg->child : NULL; c; c = c->next) {
        const char *k = c->string;
        size_t n = strlen(k);
        if (!strcmp(k, "extra_special_tokens") && cJSON_IsObject(c)) {
            for (const cJSON *x = c->child; x; x = x->next) {
                const char *t = token_text(x);
                if (t && set_special(sp, x->string, t, e) != 0) return -1;
            }
            continue;
        }
        if (!(is_named(k) || (n > 6 && !strcmp(k + n - 6, "_token")))) continue;
        const char *t = token_text(c);
        if (t && set_special(sp, k, t, e) != 0) return -1;
    }
    return 0;
}

static int from_dir(ChatTemplate **out, const char *dir, AvErr *e) {
    char *cfgp = av_path_join(dir, "tokenizer_config.json"), *jinp = av_path_join(dir, "chat_template.jinja"),
         *mapp = av_path_join(dir, "special_tokens_map.json"), *procp = av_path_join(dir, "chat_template.json");
    cJSON *proc = NULL;
    cJSON *cfg = NULL, *map = NULL, *sp = cJSON_CreateObject();
    char *src = NULL, origin[1100];
    const char *text = NULL;
    size_t len = 0;
    int rc = -1, absent;
    if (!cfgp || !jinp || !mapp || !procp || !sp) {
        av_err(e, "out of memory");
        goto done;
    }
    if (!(cfg = read_json(cfgp, e, &absent)) && !absent) goto done;
    if (av_file_exists(jinp)) {
        /* transformers reads chat_template.jinja over tokenizer_config.json's */
        if (av_read_file(jinp, JINJA_MAX_SOURCE, &src, &len, e) != 0) goto done;
        text = src;
        snprintf(origin, sizeof origin, "%s", jinp);
    } else if (cfg) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        if (cJSON_IsString(ct)) {
            text = ct->valuestring, len = strlen(text);
            snprintf(origin, sizeof origin, "%s: chat_template", cfgp);
        } else if (cJSON_IsArray(ct)) {
            char names[300] = "";
            for (const cJSON *it = ct->child; it; it = it->next) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name"),
                            *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
                if (!cJSON_IsObject(it) || !cJSON_IsString(nm) || !cJSON_IsString(tp)) {
                    av_err(e, "%s: chat_template: a list entry is not {\"name\": ..., \"template\": ...}", cfgp);
                    goto done;
                }
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", nm->valuestring);
                if (!strcmp(nm->valuestring, "default")) {
                    text = tp->valuestring, len = strlen(text);
                    snprintf(origin, sizeof origin, "%s: chat_template \"default\"", cfgp);
                }
            }
            if (!text) {
                av_err(e, "%s: chat_template names %s, and none is \"default\"", cfgp, names[0] ? names : "no template");
                goto done;
            }
        } else if (ct && !cJSON_IsNull(ct)) {
            av_err(e, "%s: chat_template is neither a string nor a list of {name, template}", cfgp);
            goto done;
        }
    }
    if (!text && av_file_exists(procp)) {
        /* a vision-language model's processor keeps its template in chat_template.json */
        if (!(proc = read_json(procp, e, &absent))) goto done;
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(proc, "chat_template");
        if (!cJSON_IsString(ct)) {
            av_err(e, "%s: \"chat_template\" is not a string", procp);
            goto done;
        }
        text = ct->valuestring, len = strlen(text);
        snprintf(origin, sizeof origin, "%s: chat_template", procp);
    }
    if (!text) {
        rc = 0; /* the model ships no template */
        goto done;
    }
    if (specials_of(sp, cfg, e) != 0) goto done;
    /* older folders: special_tokens_map.json, read (over tokenizer_config.json's) only when
     * tokenizer_config.json has no added_tokens_decoder, as transformers does */
    if (!cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder")) {
        if (!(map = read_json(mapp, e, &absent)) && !absent) goto done;
        if (map && specials_of(sp, map, e) != 0) goto done;
    }
    rc = make(out, text, len, origin, sp, e);
    sp = NULL;
done:
    cJSON_Delete(sp);
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    cJSON_Delete(proc);
    free(src);
    free(cfgp);
    free(jinp);
    free(mapp);
    free(procp);
    return rc;
}

int chat_template_from_model(ChatTemplate **out, const char *path, const GgufFile *gguf, AvErr *e) {
    *out = NULL;
    return gguf ? from_gguf(out, path, gguf, e) : from_dir(out, path, e);
}

/* ---- rendering ---- */

/* How render hands messages to the template (chat_render_openai's rules). */
typedef struct {
    int join_parts;     /* content parts joined by "\n" into one string */
    int developer_as;   /* "developer" rendered as "system" */
    int empty_if_none;  /* a message without content gets "" */
} Hand;

/* The text parts joined by "\n" (OpenAI's messages have no picture parts: a NULL one is skipped). */
static char *joined(const ChatMessage *m) {
    size_t n = 1;
    for (int k = 0; k < m->n_parts; k++) n += m->parts[k] ? strlen(m->parts[k]) + 1 : 0;
    char *s = malloc(n), *p = s;
    if (!s) return NULL;
    for (int k = 0, first = 1; k < m->n_parts; k++) {
        if (!m->parts[k]) continue;
        if (!first) *p++ = '\n';
        first = 0;
        const size_t l = strlen(m->parts[k]);
        memcpy(p, m->parts[k], l);
        p += l;
    }
    *p = '\0';
    return s;
}

/* The message as the template sees it: {"role", "content"?, "name"?}. */
static cJSON *message_object(const ChatMessage *m, const Hand *h) {
    cJSON *o = cJSON_CreateObject();
    const char *role = h->developer_as && !strcmp(m->role, "developer") ? "system" : m->role;
    if (!o || !cJSON_AddStringToObject(o, "role", role)) goto oom;
    if (m->parts && h->join_parts) {
        char *s = joined(m);
        const int ok = s && cJSON_AddStringToObject(o, "content", s);
        free(s);
        if (!ok) goto oom;
    } else if (m->parts) {
        cJSON *parts = cJSON_AddArrayToObject(o, "content");
        if (!parts) goto oom;
        for (int k = 0; k < m->n_parts; k++) {
            cJSON *p = cJSON_CreateObject();
            /* a NULL part is a picture's place: {"type": "image"} (a vision-language model's chat) */
            if (!p || !cJSON_AddItemToArray(parts, p) ||
                !cJSON_AddStringToObject(p, "type", m->parts[k] ? "text" : "image") ||
                (m->parts[k] && !cJSON_AddStringToObject(p, "text", m->parts[k])))
                goto oom;
        }
    } else if (m->content || h->empty_if_none) {
        if (!cJSON_AddStringToObject(o, "content", m->content ? m->content : "")) goto oom;
    }
    if (m->name && !cJSON_AddStringToObject(o, "name", m->name)) goto oom;
    return o;
oom:
    cJSON_Delete(o);
    return NULL;
}

static int render(const ChatTemplate *t, const ChatMessage *m, int n, int add_generation_prompt, const Hand *h, char **out,
                  AvErr *e) {
    *out = NULL;
    if (n < 1) return av_err(e, "no messages to render");
    cJSON *vars = cJSON_Duplicate(t->specials, 1), *msgs = cJSON_CreateArray();
    int rc = -1;
    if (!vars || !msgs) goto oom;
    for (int i = 0; i < n; i++) {
        cJSON *o = message_object(&m[i], h);
        if (!o || !cJSON_AddItemToArray(msgs, o)) {
            cJSON_Delete(o);
            goto oom;
        }
    }
    /* what apply_chat_template passes: messages, tools and documents (None), add_generation_prompt, the specials */
    if (!cJSON_AddItemToObject(vars, "messages", msgs)) goto oom;
    msgs = NULL;
    if (!cJSON_AddNullToObject(vars, "tools") || !cJSON_AddNullToObject(vars, "documents") ||
        !cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt))
        goto oom;
    JinjaOpts o;
    jinja_opts_default(&o);
    /* a template walks the messages a bounded number of times: work in proportion to their text
     * (with a floor that the longest published templates stay far below) */
    size_t text = 0;
    for (int i = 0; i < n; i++) {
        text += m[i].content ? strlen(m[i].content) : 0;
        text += m[i].name ? strlen(m[i].name) : 0;
        for (int k = 0; m[i].parts && k < m[i].n_parts; k++) text += (m[i].parts[k] ? strlen(m[i].parts[k]) : 0) + 1;
    }
    o.max_steps = 2000000 + (long long)(text < 2000000 ? text : 2000000) * 100;
    size_t len;
    rc = jinja_render(t->tpl, vars, &o, out, &len, e);
    goto done;
oom:
    av_err(e, "out of memory");
done:
    cJSON_Delete(vars);
    cJSON_Delete(msgs);
    return rc;
}

int chat_render(const ChatTemplate *t, const ChatMessage *m, int n, int add_generation_prompt, char **out, AvErr *e) {
    const Hand h = {0, 0, 0};
    return render(t, m, n, add_generation_prompt, &h, out, e);
}

int chat_render_openai(const ChatTemplate *t, const ChatMessage *m, int n, int add_generation_prompt, char **out,
                       AvErr *e) {
    Hand h = {!t->reads_parts, !chat_template_names_role(t, "developer"), 0};
    if (render(t, m, n, add_generation_prompt, &h, out, e) == 0) return 0;
    int none = 0;
    for (int i = 0; i < n; i++) none |= !m[i].content && !m[i].parts;
    if (!none) return -1;
    /* the template reads the content it was not given: as OpenAI-compatible servers hand it, "" */
    AvErr first = *e;
    h.empty_if_none = 1;
    if (render(t, m, n, add_generation_prompt, &h, out, e) == 0) return 0;
    *e = first;
    return -1;
}

int chat_template_reads_parts(const ChatTemplate *t) { return t->reads_parts; }

int chat_template_names_role(const ChatTemplate *t, const char *role) {
    char q[2][80];
    snprintf(q[0], sizeof q[0], "'%.60s'", role);
    snprintf(q[1], sizeof q[1], "\"%.60s\"", role);
    return strstr(t->src, q[0]) || strstr(t->src, q[1]);
}

/* One user message whose content is one text part, against the same text as its content: the
 * template reads parts when both render alike (a clock the template prints, strftime_now, may
 * turn between two renders: the string is rendered before and after). */
static int probe_parts(const ChatTemplate *t) {
    static const char *const PROBE = "Which is the tallest mountain?";
    const char *parts[1] = {PROBE};
    const ChatMessage as_text = {"user", PROBE, NULL, 0, NULL}, as_parts = {"user", NULL, parts, 1, NULL};
    const Hand h = {0, 0, 0};
    char *a = NULL, *b = NULL, *c = NULL;
    AvErr e = {0};
    int same = 0;
    if (render(t, &as_parts, 1, 1, &h, &b, &e) == 0 && strstr(b, PROBE)) {
        same = render(t, &as_text, 1, 1, &h, &a, &e) == 0 && !strcmp(a, b);
        if (!same) same = render(t, &as_text, 1, 1, &h, &c, &e) == 0 && !strcmp(c, b);
    }
    free(a);
    free(b);
    free(c);
    return same;
}

/* ---- OpenAI-style messages ---- */

void chat_messages_free(ChatMessage *m, int n) {
    if (!m) return;
    for (int i = 0; i < n; i++) {
        free((char *)m[i].role);
        free((char *)m[i].content);
        free((char *)m[i].name);
        for (int k = 0; k < m[i].n_parts; k++) free((char *)m[i].parts[k]);
        free((void *)m[i].parts);
    }
    free(m);
}

/* The raw text's string escapes \u0000 (a NUL that cJSON would silently cut the string at). */
static long nul_escape_at(const char *s, size_t n) {
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in) {
            in = s[i] == '"';
            continue;
        }
        if (s[i] == '"') in = 0;
        else if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return (long)i;
            i++;
        }
    }
    return -1;
}

static int dup_keys(const cJSON *o, const char **dup) {
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string)) {
                *dup = a->string;
                return 1;
            }
    return 0;
}

static char *text_of(const cJSON *v, int i, const char *what, AvErr *e) {
    size_t n = strlen(v->valuestring);
    long bad = av_utf8_invalid_at(v->valuestring, n);
    if (bad >= 0) {
        av_err(e, "message %d: %s is not UTF-8 (byte %ld)", i + 1, what, bad);
        return NULL;
    }
    char *s = strdup(v->valuestring);
    if (!s) av_err(e, "out of memory");
    return s;
}

int chat_messages_parse_json(const char *json, size_t len, ChatMessage **out, int *n_out, AvErr *e) {
    *out = NULL, *n_out = 0;
    if (memchr(json, '\0', len)) return av_err(e, "a NUL byte at byte %ld", (long)((const char *)memchr(json, '\0', len) - json));
    long at = nul_escape_at(json, len);
    if (at >= 0) return av_err(e, "a NUL character (\\u0000) at byte %ld", at);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        const char *where = cJSON_GetErrorPtr();
        return av_err(e, "not valid JSON (near byte %ld)", where && where >= json && where <= json + len ? (long)(where - json) : 0L);
    }
    while (end && end < json + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')) end++;
    int rc = -1, n = 0, cap;
    ChatMessage *m = NULL;
    if (end && end != json + len) {
        av_err(e, "text after the JSON value (byte %ld)", (long)(end - json));
        goto done;
    }
    if (!cJSON_IsArray(root)) {
        av_err(e, "not a JSON array of messages ([{\"role\": \"user\", \"content\": \"...\"}, ...])");
        goto done;
    }
    cap = cJSON_GetArraySize(root);
    if (cap == 0) {
        av_err(e, "an empty array: no messages");
        goto done;
    }
    if (!(m = calloc((size_t)cap, sizeof *m))) {
        av_err(e, "out of memory");
        goto done;
    }
    for (const cJSON *it = root->child; it; it = it->next, n++) {
        const char *dup;
        ChatMessage *msg = &m[n];
        if (!cJSON_IsObject(it)) {
            av_err(e, "message %d: not a JSON object", n + 1);
            goto done;
        }
        if (dup_keys(it, &dup)) {
            av_err(e, "message %d: the key \"%.60s\" appears twice", n + 1, dup);
            goto done;
        }
        for (const cJSON *k = it->child; k; k = k->next)
            if (strcmp(k->string, "role") && strcmp(k->string, "content")) {
                av_err(e, "message %d: unsupported key \"%.60s\" (a message has \"role\" and \"content\")", n + 1, k->string);
                goto done;
            }
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role"), *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!role) {
            av_err(e, "message %d: no \"role\"", n + 1);
            goto done;
        }
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "developer") &&
                                      strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
            char r[80] = "a non-string value";
            if (cJSON_IsString(role)) snprintf(r, sizeof r, "\"%.60s\"", role->valuestring);
            av_err(e, "message %d: role %s is not system, developer, user or assistant", n + 1, r);
            goto done;
        }
        if (!(msg->role = strdup(role->valuestring))) {
            av_err(e, "out of memory");
            goto done;
        }
        if (!content) {
            av_err(e, "message %d: no \"content\"", n + 1);
            goto done;
        }
        if (cJSON_IsString(content)) {
            if (!(msg->content = text_of(content, n, "its content", e))) goto done;
            continue;
        }
        if (!cJSON_IsArray(content)) {
            av_err(e, "message %d: content is neither a string nor a list of {\"type\": \"text\", \"text\": ...} parts", n + 1);
            goto done;
        }
        int np = cJSON_GetArraySize(content), k = 0;
        const char **parts = calloc((size_t)(np ? np : 1), sizeof *parts);
        if (!parts) {
            av_err(e, "out of memory");
            goto done;
        }
        msg->parts = parts;
        for (const cJSON *p = content->child; p; p = p->next, k++) {
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type"), *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
            if (!cJSON_IsObject(p) || dup_keys(p, &dup) || cJSON_GetArraySize(p) != 2 || !cJSON_IsString(ty) ||
                strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
                av_err(e, "message %d: content part %d is not {\"type\": \"text\", \"text\": \"...\"} (only text parts are supported)",
                       n + 1, k + 1);
                goto done;
            }
            if (!(parts[k] = text_of(tx, n, "a content part", e))) goto done;
            msg->n_parts = k + 1;
        }
    }
    *out = m, *n_out = n;
    m = NULL;
    rc = 0;
done:
    if (m) chat_messages_free(m, cap);
    cJSON_Delete(root);
    return rc;
}
