/* test_chat.c — chat templates: the Jinja subset's meaning where jinja2's is
 * subtle (whitespace control with trim_blocks and lstrip_blocks, loop scoping,
 * Undefined, precedence, Python's values), the bounds that stop a template
 * that loops, recurses or writes without end, refusals naming the construct
 * and its position, message text that is never run as template, strict
 * OpenAI-style messages, and where a model folder's template and special tokens
 * come from. (Every family's real template is checked against transformers by
 * tests/ref/chat_check.sh; the expectations here are jinja2 3.1's outputs.) */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "gguf.h"
#include "jinja.h"
#include "tokenizer.h"
#include "check_util.h"

/* src rendered over vars (JSON text): 0 with *out, or -1 with e. */
static int render_opts(const char *src, const char *vars, const JinjaOpts *o, char **out, AvErr *e) {
    JinjaTemplate *t;
    *out = NULL;
    if (jinja_parse(&t, src, strlen(src), "t.jinja", e) != 0) return -1;
    cJSON *v = cJSON_Parse(vars ? vars : "{}");
    ck_assert_ptr_nonnull(v);
    size_t len;
    int rc = jinja_render(t, v, o, out, &len, e);
    if (rc == 0) ck_assert_uint_eq(len, strlen(*out));
    cJSON_Delete(v);
    jinja_free(t);
    return rc;
}

#define MSGS "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}"

/* Renders and checks the text. */
static void expect_text(const char *src, const char *vars, const char *want) {
    char *out;
    AvErr e = {0};
    ck_assert_msg(render_opts(src, vars, NULL, &out, &e) == 0, "%s: %s", src, e.msg);
    ck_assert_msg(!strcmp(out, want), "%s\n  gave  [%s]\n  wants [%s]", src, out, want);
    free(out);
}

/* Renders (or parses) and checks that it fails with every fragment in the message. */
static void expect_error(const char *src, const char *vars, const JinjaOpts *o, const char *frag1, const char *frag2) {
    char *out;
    AvErr e = {0};
    ck_assert_msg(render_opts(src, vars, o, &out, &e) != 0, "%s rendered [%s]", src, out ? out : "");
    ck_assert_msg(strstr(e.msg, frag1) && (!frag2 || strstr(e.msg, frag2)), "%s: [%s] lacks [%s] [%s]", src, e.msg,
                  frag1, frag2 ? frag2 : "");
}

START_TEST(whitespace_control_follows_trim_and_lstrip_blocks) {
    expect_text("  {% if 1 %}\n  x\n  {% endif %}\n", NULL, "  x\n");
    expect_text("{%- for i in range(2) -%}\n  {{ i }}\n{% endfor %}", NULL, "0\n1\n");
    expect_text("{%- set a = 'x' -%} \n  {{- a }}", NULL, "x");
    expect_text("{{ '  a' }}{# c #}\n  {# d #}\n b", NULL, "  a b");
    expect_text("x {% raw %}{{ y }}{% endraw %} z", NULL, "x {{ y }} z");
    expect_text("a\r\nb\rc\n", NULL, "a\nb\nc"); /* newlines normalized, one trailing newline dropped */
    expect_text("{{+ 1 }}|  {%+ if 1 %}y{% endif %}", NULL, "1|  y");
}
END_TEST

START_TEST(values_print_as_python_prints_them) {
    expect_text("{{ [1,'a',none,true,1.5,{'k':'v\\n'}] }}", NULL, "[1, 'a', None, True, 1.5, {'k': 'v\\n'}]");
    expect_text("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 10/2 }}", NULL,
                "1e+16 1000000000000000.0 0.0001 1e-05 0.3333333333333333 5.0");
    expect_text("{{ -1|abs }} {{ -2**2 }} {{ 'ab'[::-1] }} {{ 'h\xc3\xa9llo'[1:3] }}", NULL, "1 4 ba \xc3\xa9l");
    expect_text("{{ \"it's\" }}{{ ['it\\'s', \"q\\\"\"] }}", NULL, "it's[\"it's\", 'q\"']");
    expect_text("{{ 3 // 2 }} {{ -3 // 2 }} {{ -3 % 2 }} {{ 7 / 2 }} {{ 1 == 1.0 }} {{ true == 1 }}", NULL,
                "1 -2 1 3.5 True True");
    expect_text("{{ 'x' ~ none ~ 1 }} {{ 1 and 2 }} {{ 0 or 'x' }} {{ not 1 }}", NULL, "xNone1 2 x False");
    expect_text("{{ {'b': 1, 'a': [1, 2.5, 'e\"\\n'], 'c': none} | tojson }}", NULL,
                "{\"b\": 1, \"a\": [1, 2.5, \"e\\\"\\n\"], \"c\": null}");
    expect_text("{{ {'b': 1, 'a': [1, 2]} | tojson(indent=2) }}", NULL, "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}");
    expect_text("{{ '\\u00e9\\x41\\n\\q' }}", NULL, "\xc3\xa9" "A\n\\q");
    expect_text("{{ '\xc3\x9f' | upper }} {{ '\\u3000x\\xa0' | trim | length }} {{ 'a b' | title }}", NULL, "SS 1 A B");
}
END_TEST

START_TEST(loops_scope_like_jinja2) {
    /* a loop body's assignments last one iteration; namespace() carries values out */
    expect_text("{% set x = 0 %}{% for i in range(3) %}[{{ x }}]{% set x = i + 10 %}({{ x }}){% endfor %}{{ x }}", NULL,
                "[0](10)[0](11)[0](12)0");
    expect_text("{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}",
                NULL, "4");
    expect_text("{% if true %}{% set z = 1 %}{% endif %}{{ z }}", NULL, "1");
    /* macros see the template's names as they are when called, not the caller's loop */
    expect_text("{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 7 %}{{ m() }}", NULL, "7");
    expect_text("{% macro m() %}{{ i }}{% endmacro %}{% for i in range(2) %}{{ m() }}{% endfor %}", NULL, "");
    expect_text("{% macro m(a, b='d') %}{{a}}{{b}}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}{{ m(1,2,3) }}{{ m(1, c=4) }}",
                NULL, "1d(){}12(3,){}1d(){'c': 4}");
    expect_text("{% for a in [1,2,3] if a > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.last }};{% else %}none{% endfor %}",
                NULL, "1/2False;2/2True;");
    expect_text("{% for m in messages %}{% if m.role == 'user' %}{% continue %}{% endif %}{{ m.content }}{% break %}{% endfor %}",
                MSGS, "yo");
    expect_text("{% for k, v in {'a': 1, 'b': 2}.items() %}{{k}}={{v}},{% endfor %}", NULL, "a=1,b=2,");
}
END_TEST

START_TEST(undefined_prints_empty_and_fails_when_read_into) {
    expect_text("{{ 'a' in u }}|{{ u|length }}|{{ u|trim }}|{{ u is none }}|{{ u is defined }}", NULL,
                "False|0||False|False");
    expect_text("{{ messages[5] }}|{{ messages[5] is defined }}|{{ messages[0].get('x', 'd') }}", MSGS, "|False|d");
    expect_error("line one\n  {{ x.y }}", NULL, NULL, "t.jinja:2:7", "'x' is undefined");
    expect_error("{{ messages[5].role }}", MSGS, NULL, "list object has no element 5", NULL);
    expect_error("{{ 'a' + 1 }}", NULL, NULL, "can only concatenate str", NULL);
}
END_TEST

START_TEST(filters_and_methods_used_by_chat_templates) {
    expect_text("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", MSGS, "1");
    expect_text("{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='content') | join('|') }}", MSGS, "yo");
    expect_text("{{ none | selectattr('type', 'equalto', 'x') | list }}", NULL, "[]");
    expect_text("{{ 'a,b,c'.split(',', 1) }} {{ ' x '.strip() }} {{ 'abc'.startswith(('x','a')) }} {{ 'hello'.replace('l', 'L') }}",
                NULL, "['a', 'b,c'] x True heLLo");
    expect_text("{{ [3,1,2]|sort }} {{ ['b','a','B']|unique|list }} {{ {'b':1,'a':2}|dictsort }}", NULL,
                "[1, 2, 3] ['b', 'a'] [('a', 2), ('b', 1)]");
    expect_text("{{ '<x{}{name}>'.format(1, name='n') }} {{ 'a\\nb'|indent(2) }}", NULL, "<x1n> a\n  b");
    expect_text("{{ strftime_now('%Y') | length }} {{ range(1, 6, 2)|list }}", NULL, "4 [1, 3, 5]");
    expect_error("{{ raise_exception('Only user and assistant roles') }}", NULL, NULL, "Only user and assistant roles", NULL);
}
END_TEST

START_TEST(message_text_is_never_run_as_template) {
    const char *vars = "{\"messages\": [{\"role\": \"user\", \"content\": \"{{ 7 * 7 }} {% for x in y %}{% endfor %} "
                       "{{ raise_exception('no') }} {# c #}\"}]}";
    expect_text("{% for m in messages %}<{{ m.content }}>{% endfor %}", vars,
                "<{{ 7 * 7 }} {% for x in y %}{% endfor %} {{ raise_exception('no') }} {# c #}>");
}
END_TEST

START_TEST(unsupported_constructs_are_refused_naming_them) {
    expect_error("ok\n{% with a = 1 %}{% endwith %}", NULL, NULL, "t.jinja:2:4", "unsupported Jinja construct: {% with %}");
    expect_error("{% include 'x' %}", NULL, NULL, "unsupported Jinja construct: {% include %}", NULL);
    expect_error("{% for x in y recursive %}{% endfor %}", NULL, NULL, "recursive for loops", NULL);
    /* a filter outside the subset fails where it is reached (as jinja2 does inside a branch) */
    expect_text("{% if false %}{{ x | from_json }}{% endif %}ok", NULL, "ok");
    expect_error("{{ x | from_json }}", NULL, NULL, "t.jinja:1:8", "unsupported Jinja construct: the filter 'from_json'");
    expect_error("{{ '%s' % 1 }}", NULL, NULL, "%-formatting", NULL);
    expect_error("{{ 2 ** 100 }}", NULL, NULL, "beyond 64 bits", NULL);
    expect_error("{{ [1].append(2) }}", NULL, NULL, "sandbox refuses 'append'", NULL);
    expect_error("{% if x %}", NULL, NULL, "unexpected end of template", "'endif'");
    expect_error("{{ 'a\\x00' }}", NULL, NULL, "NUL", NULL);
}
END_TEST

START_TEST(bounds_stop_loops_recursion_and_floods) {
    JinjaOpts o;
    jinja_opts_default(&o);
    o.max_steps = 100000, o.max_output = 1 << 20, o.max_memory = 32 << 20, o.max_calls = 16;
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", NULL, &o,
                 "more than 100000 steps", NULL);
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &o, "macros nested deeper than 16", NULL);
    o.max_steps = 100000000;
    expect_error("{% set s = 'abcdefghij' * 1000 %}{% for i in range(100000) %}{{ s }}{% endfor %}", NULL, &o,
                 "passed 1 MB", NULL);
    expect_error("{% set s = 'x' * 100000000 %}", NULL, &o, "more than 32 MB of memory", NULL);
    expect_error("{% for i in range(1000000) %}{% endfor %}", NULL, &o, "range too big", NULL);
    /* nesting: parentheses, blocks, and chains that nest to the left */
    char src[8192];
    size_t k = 0;
    k += (size_t)sprintf(src + k, "{{ ");
    for (int i = 0; i < 200; i++) src[k++] = '(';
    src[k++] = '1';
    for (int i = 0; i < 200; i++) src[k++] = ')';
    sprintf(src + k, " }}");
    expect_error(src, NULL, NULL, "nested deeper than", NULL);
    k = (size_t)sprintf(src, "{{ 1");
    for (int i = 0; i < 400; i++) k += (size_t)sprintf(src + k, " + 1");
    sprintf(src + k, " }}");
    expect_error(src, NULL, NULL, "an expression nested deeper than 256", NULL);
    k = 0;
    for (int i = 0; i < 100; i++) k += (size_t)sprintf(src + k, "{%% if 1 %%}");
    expect_error(src, NULL, NULL, "blocks nested deeper than 64", NULL);
    /* a source past the size bound is refused before parsing */
    size_t n = JINJA_MAX_SOURCE + 1;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', n);
    big[n] = '\0';
    JinjaTemplate *t;
    AvErr e = {0};
    ck_assert_int_ne(jinja_parse(&t, big, n, "big.jinja", &e), 0);
    ck_assert_msg(strstr(e.msg, "big.jinja") && strstr(e.msg, "more than"), "%s", e.msg);
    free(big);
}
END_TEST

/* messages.json text: 0 or -1 with the error. */
static int parse(const char *json, ChatMessage **m, int *n, AvErr *e) {
    return chat_messages_parse_json(json, strlen(json), m, n, e);
}

static void expect_refused(const char *json, size_t len, const char *frag) {
    if (len == 0) len = strlen(json);
    ChatMessage *m;
    int n;
    AvErr e = {0};
    ck_assert_msg(chat_messages_parse_json(json, len, &m, &n, &e) != 0, "accepted %s", json);
    ck_assert_msg(strstr(e.msg, frag), "%s: [%s] lacks [%s]", json, e.msg, frag);
}

START_TEST(messages_are_parsed_strictly) {
    ChatMessage *m;
    int n;
    AvErr e = {0};
    ck_assert_msg(parse("[{\"role\": \"system\", \"content\": \"S\"}, {\"content\": [{\"type\": \"text\", \"text\": \"a\"}, "
                        "{\"text\": \"b\", \"type\": \"text\"}], \"role\": \"user\"}]",
                        &m, &n, &e) == 0,
                  "%s", e.msg);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(m[0].role, "system");
    ck_assert_str_eq(m[0].content, "S");
    ck_assert_ptr_null(m[1].content);
    ck_assert_int_eq(m[1].n_parts, 2);
    ck_assert_str_eq(m[1].parts[1], "b");
    chat_messages_free(m, n);
    expect_refused("{\"role\": \"user\"}", 0, "not a JSON array");
    expect_refused("[]", 0, "no messages");
    expect_refused("[{\"content\": \"x\"}]", 0, "message 1: no \"role\"");
    expect_refused("[{\"role\": \"user\", \"content\": \"a\", \"role\": \"user\"}]", 0, "\"role\" appears twice");
    expect_refused("[{\"role\": \"user\", \"content\": \"a\\u0000b\"}]", 0, "NUL");
    expect_refused("[{\"role\": \"user\", \"content\": \"a\0b\"}]", 36, "NUL byte");
    expect_refused("[{\"role\": \"tool\", \"content\": \"x\"}]", 0, "role \"tool\" is not system");
    expect_refused("[{\"role\": \"user\", \"content\": null}]", 0, "neither a string nor a list");
    expect_refused("[{\"role\": \"user\", \"content\": \"x\", \"name\": \"n\"}]", 0, "unsupported key \"name\"");
    expect_refused("[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]", 0,
                   "only text parts");
    expect_refused("[{\"role\": \"user\", \"content\": \"\xff\"}]", 0, "not UTF-8");
    expect_refused("[{\"role\": \"user\", \"content\": \"x\"}] [", 0, "text after the JSON value");
    expect_refused("[{\"role\": \"user\", \"content\": \"x\"", 0, "not valid JSON");
    expect_refused("[[{\"role\": \"user\"}]]", 0, "message 1: not a JSON object");
    /* a backslash before u0000 escapes the backslash: no NUL */
    ck_assert_int_eq(parse("[{\"role\": \"user\", \"content\": \"a\\\\u0000\"}]", &m, &n, &e), 0);
    ck_assert_str_eq(m[0].content, "a\\u0000");
    chat_messages_free(m, n);
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *render_dir(const char *dir, const char *content, AvErr *e) {
    ChatTemplate *t;
    char *out = NULL;
    if (chat_template_from_model(&t, dir, NULL, e) != 0) return NULL;
    ck_assert_ptr_nonnull(t);
    ChatMessage m = {"user", content, NULL, 0, NULL};
    int rc = chat_render(t, &m, 1, 1, &out, e);
    chat_template_free(t);
    return rc == 0 ? out : NULL;
}

/* A template from its source, with no special tokens. */
static ChatTemplate *template_of(const char *src) {
    ChatTemplate *t;
    AvErr e = {0};
    ck_assert_msg(chat_template_from_source(&t, src, strlen(src), "t.jinja", NULL, NULL, 0, &e) == 0, "%s", e.msg);
    return t;
}

static void expect_openai(const ChatTemplate *t, const ChatMessage *m, int n, const char *want) {
    char *out;
    AvErr e = {0};
    ck_assert_msg(chat_render_openai(t, m, n, 0, &out, &e) == 0, "%s", e.msg);
    ck_assert_msg(!strcmp(out, want), "gave [%s], wants [%s]", out, want);
    free(out);
}

START_TEST(openai_messages_follow_what_the_template_reads) {
    /* reads content as a string only (SmolLM2's way: parts would fail the concatenation) */
    ChatTemplate *str = template_of("{% for m in messages %}<{{ m.role }}{% if m.name is defined %}:{{ m.name }}{% endif %}>"
                                    "{{ m['content'] + '|' }}{% endfor %}");
    /* reads parts (Gemma 3's way) and names the developer role */
    ChatTemplate *lst = template_of("{% for m in messages %}<{{ 'dev' if m.role == 'developer' else m.role }}>"
                                    "{% if m.content is string %}{{ m.content }}{% elif m.content is defined %}"
                                    "{% for p in m.content %}{{ p.text }}{% endfor %}{% else %}(none){% endif %}{% endfor %}");
    ck_assert(!chat_template_reads_parts(str) && chat_template_reads_parts(lst));
    ck_assert(!chat_template_names_role(str, "developer") && chat_template_names_role(lst, "developer"));
    const char *two[] = {"A", "B"};
    const ChatMessage m[] = {{"developer", "Be brief.", NULL, 0, NULL},
                             {"user", NULL, two, 2, "ann"},
                             {"assistant", NULL, NULL, 0, NULL}};
    /* parts joined by a newline, developer as system, the missing content given as "" once the template fails on it */
    expect_openai(str, m, 3, "<system>Be brief.|<user:ann>A\nB|<assistant>|");
    /* as transformers hands them: the list, the role kept, no content key */
    expect_openai(lst, m, 3, "<dev>Be brief.<user>AB<assistant>(none)");
    /* chat_render keeps transformers' meaning: the string template refuses the parts */
    char *out;
    AvErr e = {0};
    ck_assert(chat_render(str, m, 2, 0, &out, &e) != 0);
    /* a failure that is not about missing content is the template's own */
    ChatTemplate *raises = template_of("{{ raise_exception('only user turns') }}");
    ck_assert(chat_render_openai(raises, m, 3, 0, &out, &e) != 0 && strstr(e.msg, "only user turns"));
    chat_template_free(str);
    chat_template_free(lst);
    chat_template_free(raises);
}
END_TEST

START_TEST(a_folders_template_and_special_tokens) {
    char dir[] = "/tmp/attnviz_chat_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ChatTemplate *t;
    AvErr e = {0};
    /* none */
    ck_assert_int_eq(chat_template_from_model(&t, dir, NULL, &e), 0);
    ck_assert_ptr_null(t);
    write_file(dir, "tokenizer_config.json", "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\"}, "
                                             "\"eos_token\": \"</s>\", \"pad_token\": null, \"image_token\": \"<img>\", "
                                             "\"chat_template\": \"{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"
                                             "{{ pad_token is defined }}{{ image_token }}\"}");
    char *out = render_dir(dir, "hi", &e);
    ck_assert_msg(out, "%s", e.msg);
    ck_assert_str_eq(out, "<s>hi</s>False<img>");
    free(out);
    /* chat_template.jinja over tokenizer_config.json's, as transformers reads them */
    write_file(dir, "chat_template.jinja", "[{{ messages[0].content }}]\n");
    ck_assert_ptr_nonnull(out = render_dir(dir, "x", &e));
    ck_assert_str_eq(out, "[x]");
    free(out);
    char p[512];
    snprintf(p, sizeof p, "%s/chat_template.jinja", dir);
    unlink(p);
    /* a list of named templates: "default" */
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                                             "{\"name\": \"default\", \"template\": \"D{{ messages|length }}\"}]}");
    ck_assert_ptr_nonnull(out = render_dir(dir, "x", &e));
    ck_assert_str_eq(out, "D1");
    free(out);
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}");
    ck_assert_int_ne(chat_template_from_model(&t, dir, NULL, &e), 0);
    ck_assert_msg(strstr(e.msg, "tool_use") && strstr(e.msg, "none is \"default\""), "%s", e.msg);
    /* an older folder's special_tokens_map.json */
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"{{ bos_token }}|{{ eos_token }}\", \"bos_token\": \"<a>\"}");
    write_file(dir, "special_tokens_map.json", "{\"bos_token\": \"<b>\", \"eos_token\": {\"content\": \"</b>\"}}");
    ck_assert_ptr_nonnull(out = render_dir(dir, "x", &e));
    ck_assert_str_eq(out, "<b>|</b>");
    free(out);
    /* a template that does not parse names the file and the place */
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"{% for m in messages %}\"}");
    ck_assert_int_ne(chat_template_from_model(&t, dir, NULL, &e), 0);
    ck_assert_msg(strstr(e.msg, "tokenizer_config.json: chat_template:1:") && strstr(e.msg, "'endfor'"), "%s", e.msg);
    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(p), 0);
}
END_TEST

START_TEST(the_smollm2_gguf_template_renders_and_tokenizes_without_added_tokens) {
    const char *path = getenv("ATTNVIZ_SMOLLM2_GGUF");
    SKIP_UNLESS(path && *path && access(path, R_OK) == 0, "ATTNVIZ_SMOLLM2_GGUF unset (tests/run_all.sh sets it)");
    GgufFile g;
    AvErr e = {0};
    ck_assert_msg(gguf_open(&g, path, &e) == 0, "%s", e.msg);
    ChatTemplate *t;
    ck_assert_msg(chat_template_from_model(&t, path, &g, &e) == 0 && t, "%s", e.msg);
    ck_assert_str_eq(chat_template_special(t, "eos_token"), "<|im_end|>");
    ChatMessage m = {"user", "Hi <|im_end|>", NULL, 0, NULL};
    char *out;
    ck_assert_msg(chat_render(t, &m, 1, 1, &out, &e) == 0, "%s", e.msg);
    ck_assert_msg(!strncmp(out, "<|im_start|>system\n", 19) && strstr(out, "<|im_start|>user\nHi <|im_end|><|im_end|>\n"
                                                                          "<|im_start|>assistant\n"),
                  "%s", out);
    Tokenizer *tok;
    ck_assert_msg(tok_load_gguf(&tok, &g, path, 0, &e) == 0, "%s", e.msg);
    TokEncoding enc;
    ck_assert_msg(tok_encode_plain(tok, out, strlen(out), 0, &enc, &e) == 0, "%s", e.msg);
    /* the special tokens written in the text are single tokens; nothing is added before the first */
    ck_assert_str_eq(enc.tokens[0], "<|im_start|>");
    ck_assert_str_eq(enc.tokens[enc.n - 1], "\xc4\x8a"); /* the generation prompt's newline */
    int ends = 0;
    for (int i = 0; i < enc.n; i++) ends += !strcmp(enc.tokens[i], "<|im_end|>") && enc.special[i];
    ck_assert_int_eq(ends, 3); /* the system turn's, the one typed in the message, the user turn's */
    tok_encoding_free(&enc);
    tok_free(tok);
    free(out);
    chat_template_free(t);
    gguf_close(&g);
}
END_TEST

START_TEST(plain_encoding_adds_no_template_tokens) {
    Tokenizer *t;
    AvErr e = {0};
    ck_assert_msg(tok_load_json(&t, "tests/data/small-llama/tokenizer.json", &e) == 0, "%s", e.msg);
    TokEncoding a, b;
    ck_assert_int_eq(tok_encode(t, "<s>hi", 5, NULL, 0, 0, &a, &e), 0);
    ck_assert_int_eq(tok_encode_plain(t, "<s>hi", 5, 0, &b, &e), 0);
    ck_assert_int_eq(a.n, b.n + 1); /* the template's <s>, then the same tokens */
    ck_assert_int_eq(a.ids[0], a.ids[1]);
    for (int i = 0; i < b.n; i++) ck_assert_int_eq(a.ids[i + 1], b.ids[i]);
    ck_assert_int_eq(b.special[0], 1);
    tok_encoding_free(&a);
    tok_encoding_free(&b);
    tok_free(t);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("chat");
    TCase *c = tcase_create("core");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, whitespace_control_follows_trim_and_lstrip_blocks);
    tcase_add_test(c, values_print_as_python_prints_them);
    tcase_add_test(c, loops_scope_like_jinja2);
    tcase_add_test(c, undefined_prints_empty_and_fails_when_read_into);
    tcase_add_test(c, filters_and_methods_used_by_chat_templates);
    tcase_add_test(c, message_text_is_never_run_as_template);
    tcase_add_test(c, unsupported_constructs_are_refused_naming_them);
    tcase_add_test(c, bounds_stop_loops_recursion_and_floods);
    tcase_add_test(c, messages_are_parsed_strictly);
    tcase_add_test(c, openai_messages_follow_what_the_template_reads);
    tcase_add_test(c, a_folders_template_and_special_tokens);
    tcase_add_test(c, the_smollm2_gguf_template_renders_and_tokenizes_without_added_tokens);
    tcase_add_test(c, plain_encoding_adds_no_template_tokens);
    suite_add_tcase(s, c);
    return s;
}
