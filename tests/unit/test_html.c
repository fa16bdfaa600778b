/* test_html.c — the HTML page writer: escaping of hostile input, a complete
 * document, payloads that decode back to the capture within the quantization
 * step, selections, template overrides, errors, and the size/time budgets. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "check_util.h"
#include "output.h"

/* ---------------------------------------------------------------- fixture */

typedef struct {
    ModelConfig cfg;
    Capture cap;
    TokEncoding enc;
    const char **tokens;
    int *ids, *types;
    unsigned char *special, *word_start, *role; /* what the tokenizer would flag */
    OutDoc d;
} Fix;

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static double nrand(void) {
    double u = urand(), v = urand();
    if (u < 1e-12) u = 1e-12;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* n tokens ([CLS] ... [SEP]), L x H heads, random peaky softmax rows, q/k ~ N(0, 1.5). */
static void fix_init(Fix *x, int n, int L, int H, int dh, int with_qk, const char *const *words, int nwords) {
    memset(x, 0, sizeof *x);
    strcpy(x->cfg.model_type, "bert");
    x->cfg.vocab_size = 30522, x->cfg.hidden_size = H * dh, x->cfg.num_layers = L, x->cfg.num_heads = H;
    x->cfg.intermediate_size = 4 * H * dh, x->cfg.max_position_embeddings = 512, x->cfg.type_vocab_size = 2;
    x->cfg.layer_norm_eps = 1e-12f;
    strcpy(x->cfg.hidden_act_name, "gelu");
    x->tokens = calloc((size_t)n, sizeof *x->tokens);
    x->ids = calloc((size_t)n, sizeof *x->ids);
    x->types = calloc((size_t)n, sizeof *x->types);
    ck_assert_ptr_nonnull(x->tokens);
    ck_assert_ptr_nonnull(x->ids);
    ck_assert_ptr_nonnull(x->types);
    x->special = calloc((size_t)n, 1), x->word_start = calloc((size_t)n, 1), x->role = calloc((size_t)n, 1);
    ck_assert(x->special && x->word_start && x->role);
    for (int i = 0; i < n; i++) {
        x->tokens[i] = i == 0 ? "[CLS]" : i == n - 1 ? "[SEP]" : words[(i - 1) % nwords];
        x->ids[i] = 100 + i;
        x->special[i] = i == 0 || i == n - 1;
        x->role[i] = i == 0 ? TOK_ROLE_CLS : i == n - 1 ? TOK_ROLE_SEP : TOK_ROLE_NONE;
        x->word_start[i] = 1; /* tests with word pieces set their own */
    }
    x->enc = (TokEncoding){.n = n, .ids = x->ids, .type_ids = x->types, .tokens = x->tokens, .special = x->special,
                           .word_start = x->word_start, .role = x->role, .b_start = -1};
    Capture *c = &x->cap;
    *c = (Capture){.n_layers = L, .n_heads = H, .n_tokens = n, .head_dim = dh, .hidden_size = H * dh};
    size_t nn = (size_t)n * n, nd = (size_t)n * dh;
    c->attn = malloc(sizeof(float) * (size_t)L * H * nn);
    ck_assert_ptr_nonnull(c->attn);
    double *row = malloc(sizeof(double) * (size_t)n);
    ck_assert_ptr_nonnull(row);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            float *a = cap_attn(c, l, h);
            double temp = 0.3 + 2.0 * urand();
            for (int i = 0; i < n; i++) {
                double s = 0, m = -1e300;
                int peak = (i + l + h) % n;
                for (int j = 0; j < n; j++) {
                    row[j] = nrand() * temp + (j == peak ? 6.0 : 0.0);
                    if (row[j] > m) m = row[j];
                }
                for (int j = 0; j < n; j++) s += row[j] = exp(row[j] - m);
                for (int j = 0; j < n; j++) a[(size_t)i * n + j] = (float)(row[j] / s);
            }
        }
    free(row);
    if (with_qk) {
        c->q = malloc(sizeof(float) * (size_t)L * H * nd);
        c->k = malloc(sizeof(float) * (size_t)L * H * nd);
        ck_assert_ptr_nonnull(c->q);
        ck_assert_ptr_nonnull(c->k);
        for (size_t i = 0; i < (size_t)L * H * nd; i++) {
            c->q[i] = (float)(nrand() * 1.5 + (i % 64 == 3 ? 4.0 : 0.0));
            c->k[i] = (float)(nrand() * 1.2);
        }
    }
    x->d = (OutDoc){.model_name = "test-bert", .cfg = &x->cfg, .dtype = "F32", .text_a = "a test input",
                    .enc = &x->enc, .cap = c, .init_layer = 0, .init_head = 0, .precision = 6, .with_qk = with_qk};
}

static void fix_free(Fix *x) {
    free(x->cap.attn);
    free(x->cap.q);
    free(x->cap.k);
    free(x->tokens);
    free(x->ids);
    free(x->types);
    free(x->special);
    free(x->word_start);
    free(x->role);
}

/* Writes the page into a malloc'd string. */
static char *page(const OutDoc *d, const char *tdir, size_t *len, int *rc, AvErr *e) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    *rc = html_write_doc(f, d, tdir, e);
    ck_assert_int_eq(fclose(f), 0);
    if (len) *len = n;
    return buf;
}

static char *page_ok(const OutDoc *d, size_t *len) {
    AvErr e = {0};
    int rc;
    char *s = page(d, NULL, len, &rc, &e);
    ck_assert_msg(rc == 0, "html_write_doc failed: %s", e.msg);
    return s;
}

/* ---------------------------------------------------------------- payload decoding */

static const char B85[] = "!#$%()*+,.0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{|}~";

/* Finds element id in the page and returns its decoded, inflated bytes. */
static unsigned char *chunk(const char *html, const char *id, size_t expect, size_t *out_len) {
    char pat[64];
    snprintf(pat, sizeof pat, "id=\"%s\" data-z=\"", id);
    const char *p = strstr(html, pat);
    ck_assert_msg(p != NULL, "no element %s", id);
    p += strlen(pat);
    size_t zlen = strtoull(p, NULL, 10);
    p = strchr(p, '>');
    ck_assert_ptr_nonnull(p);
    p++;
    const char *end = strchr(p, '<');
    ck_assert_ptr_nonnull(end);
    size_t tl = (size_t)(end - p);
    ck_assert_uint_eq(tl % 5, 0);
    unsigned char *z = malloc(tl / 5 * 4 + 4);
    ck_assert_ptr_nonnull(z);
    int val[256];
    for (int i = 0; i < 256; i++) val[i] = -1;
    for (int i = 0; B85[i]; i++) val[(unsigned char)B85[i]] = i;
    for (size_t i = 0; i < tl; i += 5) {
        uint64_t v = 0;
        for (int j = 0; j < 5; j++) {
            int d = val[(unsigned char)p[i + (size_t)j]];
            ck_assert_msg(d >= 0, "character outside the base-85 alphabet");
            v = v * 85 + (uint64_t)d;
        }
        ck_assert(v <= 0xffffffffu);
        for (int j = 0; j < 4; j++) z[i / 5 * 4 + (size_t)j] = (unsigned char)(v >> (24 - 8 * j));
    }
    ck_assert_uint_le(zlen, tl / 5 * 4);
    unsigned char *raw = malloc(expect ? expect : 1);
    ck_assert_ptr_nonnull(raw);
    uLongf rl = (uLongf)expect;
    ck_assert_int_eq(uncompress(raw, &rl, z, (uLong)zlen), Z_OK);
    ck_assert_uint_eq(rl, expect);
    free(z);
    *out_len = rl;
    return raw;
}

static unsigned code16(const unsigned char *raw, size_t cnt, size_t i) { return raw[i] | (unsigned)raw[cnt + i] << 8; }
static int unzig(unsigned u) { return (int)(u >> 1) ^ -(int)(u & 1); }

static cJSON *meta_of(const char *html) {
    const char *p = strstr(html, "<script type=\"application/json\" id=\"av-meta\">");
    ck_assert_ptr_nonnull(p);
    p = strchr(p, '>') + 1;
    const char *end = strstr(p, "</script>");
    ck_assert_ptr_nonnull(end);
    cJSON *j = cJSON_ParseWithLength(p, (size_t)(end - p));
    ck_assert_msg(j != NULL, "meta is not JSON");
    return j;
}

static size_t count(const char *s, const char *needle) {
    size_t c = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) c++;
    return c;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *const WORDS[] = {"time", "flies", "like", "an", "arrow"};

/* ---------------------------------------------------------------- tests */

START_TEST(test_hostile_input_is_escaped) {
    static const char *const hostile[] = {"</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                          "<!--", "&amp;", "\"'", "</SCRIPT >", "\\u003c/script>"};
    Fix x;
    fix_init(&x, 9, 2, 3, 8, 1, hostile, 7);
    x.d.text_a = "</script><script>alert(1)</script> <img src=x onerror=alert(1)>";
    x.d.text_b = "<b>bold</b>";
    x.d.model_name = "<script>alert('model')</script>";
    x.d.model_note = "</script><img src=x onerror=alert(2)>";
    const char *pats[2 * 3];
    for (int i = 0; i < 6; i++) pats[i] = hostile[i % 7];
    x.d.head_patterns = pats;
    x.d.head_descriptions = pats;
    size_t len;
    char *s = page_ok(&x.d, &len);
    ck_assert_ptr_null(strstr(s, "<script>alert"));
    ck_assert_ptr_null(strstr(s, "<img"));
    ck_assert_ptr_null(strstr(s, "<b>bold"));
    ck_assert_ptr_null(strstr(s, "</SCRIPT"));
    ck_assert_ptr_null(strstr(s, "<!--"));
    ck_assert_ptr_null(strstr(s, "onerror=alert(1)>"));
    /* every <script opens one of ours and every </script closes one */
    size_t opens = count(s, "<script"), closes = count(s, "</script");
    ck_assert_uint_eq(opens, closes);
    ck_assert_uint_eq(opens, 1 /* meta */ + 2 * 2 /* att + qk chunks */ + 1 /* code */);
    /* the tokens survive the round trip through the meta JSON */
    cJSON *m = meta_of(s);
    cJSON *toks = cJSON_GetObjectItem(m, "tokens");
    ck_assert_int_eq(cJSON_GetArraySize(toks), 9);
    for (int i = 1; i < 8; i++) ck_assert_str_eq(cJSON_GetArrayItem(toks, i)->valuestring, hostile[(i - 1) % 7]);
    ck_assert_str_eq(cJSON_GetObjectItem(m, "text")->valuestring, x.d.text_a);
    ck_assert_str_eq(cJSON_GetObjectItem(m, "model")->valuestring, x.d.model_name);
    /* the title is HTML-escaped */
    ck_assert_ptr_nonnull(strstr(s, "<title>attnviz — &lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

START_TEST(test_document_complete) {
    Fix x;
    fix_init(&x, 7, 12, 12, 64, 1, WORDS, 5);
    size_t len;
    char *s = page_ok(&x.d, &len);
    ck_assert_uint_eq(strlen(s), len);
    ck_assert(strncmp(s, "<!doctype html>", 15) == 0);
    ck_assert(len > 20 && strcmp(s + len - 8, "</html>\n") == 0);
    ck_assert_ptr_nonnull(strstr(s, "Content-Security-Policy"));
    ck_assert_ptr_nonnull(strstr(s, "default-src 'none'"));
    /* every placeholder filled */
    ck_assert_ptr_null(strstr(s, "{{title"));
    ck_assert_ptr_null(strstr(s, "{{meta"));
    ck_assert_ptr_null(strstr(s, "{{payload"));
    ck_assert_ptr_null(strstr(s, "{{include"));
    ck_assert_ptr_nonnull(strstr(s, "id=\"av-att-11\""));
    ck_assert_ptr_nonnull(strstr(s, "id=\"av-qk-11\""));
    ck_assert_ptr_null(strstr(s, "id=\"av-att-12\""));
    cJSON *m = meta_of(s);
    ck_assert_int_eq(cJSON_GetObjectItem(m, "n")->valueint, 7);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "layers")), 12);
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "config"), "head_dim")->valueint, 64);
    ck_assert_ptr_null(cJSON_GetObjectItem(m, "head_patterns"));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(m, "sentence_b_start")));
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

/* The page's metadata describes the run in the JSON's own words: every member
 * the JSON writes before its numbers is in the meta with the same value, except
 * model_dir (a local path, kept out of a file meant to be shared). */
START_TEST(test_meta_shares_the_json_description) {
    Fix x;
    fix_init(&x, 9, 2, 3, 4, 1, WORDS, 5);
    static const char *const pats[6] = {"self", NULL, "next", "cls", "sep", "previous"};
    x.d.head_patterns = pats;
    x.d.is_demo = 1;
    x.d.model_note = "a note";
    x.d.model_dir = "/home/someone/models/x";
    x.d.text_b = "second";
    x.enc.b_start = 5;
    x.enc.n_truncated = 3;
    char *s = page_ok(&x.d, NULL);
    cJSON *m = meta_of(s);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    AvErr e = {0};
    ck_assert_int_eq(json_write_doc(f, &x.d, &e), 0);
    ck_assert_int_eq(fclose(f), 0);
    cJSON *j = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(j);
    int shared = 0;
    for (cJSON *it = j->child; it; it = it->next) {
        if (!strcmp(it->string, "attention")) break; /* the numbers: the page has its own encoding */
        if (!strcmp(it->string, "attnviz_version")) continue;
        if (!strcmp(it->string, "model_dir")) {
            ck_assert_ptr_null(cJSON_GetObjectItem(m, "model_dir"));
            ck_assert_ptr_null(strstr(s, "someone"));
            continue;
        }
        ck_assert_msg(cJSON_Compare(it, cJSON_GetObjectItem(m, it->string), 1), "meta differs at %s", it->string);
        shared++;
    }
    ck_assert_int_ge(shared, 15);
    cJSON_Delete(j);
    cJSON_Delete(m);
    free(buf);
    free(s);
    fix_free(&x);
}
END_TEST

START_TEST(test_attention_round_trip) {
    Fix x;
    fix_init(&x, 23, 3, 4, 16, 0, WORDS, 5);
    size_t len;
    char *s = page_ok(&x.d, &len);
    ck_assert_ptr_null(strstr(s, "id=\"av-qk-0\""));
    size_t nn = 23 * 23, cnt = 4 * nn;
    for (int l = 0; l < 3; l++) {
        char id[32];
        snprintf(id, sizeof id, "av-att-%d", l);
        size_t rl;
        unsigned char *raw = chunk(s, id, cnt * 2, &rl);
        for (int h = 0; h < 4; h++) {
            const float *a = cap_attn(&x.cap, l, h);
            for (size_t i = 0; i < nn; i++) {
                unsigned c = code16(raw, cnt, (size_t)h * nn + i);
                ck_assert_uint_le(c, 10000);
                /* the code is the float rounded to 4 decimals */
                ck_assert_msg(fabs(c / 10000.0 - a[i]) <= 0.5e-4 + 1e-9, "l%d h%d i%zu: %u vs %g", l, h, i, c, a[i]);
            }
        }
        free(raw);
    }
    free(s);
    fix_free(&x);
}
END_TEST

START_TEST(test_qk_round_trip) {
    Fix x;
    fix_init(&x, 11, 2, 3, 16, 1, WORDS, 5);
    /* one tiny head (more decimals) and one huge head (fewer) */
    for (size_t i = 0; i < 11 * 16; i++) cap_q(&x.cap, 1, 1)[i] *= 0.01f;
    for (size_t i = 0; i < 11 * 16; i++) cap_k(&x.cap, 1, 2)[i] *= 100.0f;
    size_t len;
    char *s = page_ok(&x.d, &len);
    cJSON *m = meta_of(s);
    cJSON *dec = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "qk"), "dec");
    ck_assert_ptr_nonnull(dec);
    size_t d = 16, blk = 11 * d, per = d + blk, cnt = 3 * 2 * per;
    for (int l = 0; l < 2; l++) {
        char id[32];
        snprintf(id, sizeof id, "av-qk-%d", l);
        size_t rl;
        unsigned char *raw = chunk(s, id, cnt * 2, &rl);
        for (int h = 0; h < 3; h++)
            for (int w = 0; w < 2; w++) {
                int dc = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(dec, l), h), w)->valueint;
                const float *v = w ? cap_k(&x.cap, l, h) : cap_q(&x.cap, l, h);
                size_t base = ((size_t)h * 2 + (size_t)w) * per;
                double step = pow(10.0, -dc);
                for (size_t i = 0; i < blk; i++) {
                    int off = unzig(code16(raw, cnt, base + i % d));
                    int c = unzig(code16(raw, cnt, base + d + i)) + off;
                    ck_assert_msg(fabs(c * step - v[i]) <= step / 2 + 1e-6 * fabs(v[i]), "l%d h%d w%d i%zu dec %d: %d vs %g",
                                  l, h, w, i, dc, c, v[i]);
                }
                if (l == 1 && h == 1 && w == 0) ck_assert_int_ge(dc, 3);
                if (l == 1 && h == 2 && w == 1) ck_assert_int_le(dc, 1);
                if (l == 0) ck_assert_int_eq(dc, 2);
            }
        free(raw);
    }
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

START_TEST(test_selection) {
    Fix x;
    fix_init(&x, 9, 4, 6, 8, 1, WORDS, 5);
    static const int layers[] = {3, 1}, heads[] = {5, 0, 2};
    static const char *pats[4 * 6];
    static char names[4 * 6][16];
    for (int i = 0; i < 24; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        pats[i] = names[i];
    }
    x.d.layers = layers, x.d.n_sel_layers = 2;
    x.d.heads = heads, x.d.n_sel_heads = 3;
    x.d.head_patterns = pats;
    x.d.is_demo = 1;
    x.d.model_note = "constructed";
    x.d.init_layer = 3, x.d.init_head = 2;
    size_t len;
    char *s = page_ok(&x.d, &len);
    cJSON *m = meta_of(s);
    cJSON *ls = cJSON_GetObjectItem(m, "layers"), *hs = cJSON_GetObjectItem(m, "heads");
    ck_assert_int_eq(cJSON_GetArraySize(ls), 2);
    ck_assert_int_eq(cJSON_GetArrayItem(ls, 0)->valueint, 3);
    ck_assert_int_eq(cJSON_GetArrayItem(hs, 0)->valueint, 5);
    ck_assert_int_eq(cJSON_GetArrayItem(hs, 2)->valueint, 2);
    cJSON *hp = cJSON_GetObjectItem(m, "head_patterns");
    /* labels are indexed by real layer * num_heads + real head */
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(hp, 0), 0)->valuestring, "p23");
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(hp, 1), 2)->valuestring, "p8");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(m, "demo")));
    ck_assert_int_eq(cJSON_GetObjectItem(m, "init_head")->valueint, 2);
    ck_assert_ptr_null(strstr(s, "id=\"av-att-2\""));
    /* chunk 0 holds layer 3's heads 5, 0, 2 */
    size_t nn = 81, cnt = 3 * nn, rl;
    unsigned char *raw = chunk(s, "av-att-0", cnt * 2, &rl);
    for (int hj = 0; hj < 3; hj++)
        for (size_t i = 0; i < nn; i++)
            ck_assert(fabs(code16(raw, cnt, hj * nn + i) / 1e4 - cap_attn(&x.cap, 3, heads[hj])[i]) <= 0.5e-4 + 1e-9);
    free(raw);
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_templates_dir) {
    Fix x;
    fix_init(&x, 5, 1, 2, 4, 0, WORDS, 5);
    char dir[] = "/tmp/attnviz_tmplXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char p1[256], p2[256];
    snprintf(p1, sizeof p1, "%s/page.html", dir);
    snprintf(p2, sizeof p2, "%s/x.js", dir);
    AvErr e = {0};
    int rc;
    /* a minimal page of our own */
    write_file(p1, "<p>{{title}}</p><script>{{include x.js}}</script><script type=\"application/json\">{{meta}}</script>{{payload}}");
    write_file(p2, "var ok = 1;");
    char *s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert(strncmp(s, "<p>a test input</p><script>var ok = 1;</script>", 47) == 0);
    free(s);
    /* a script template that would close its element */
    write_file(p2, "var s = '</script>';");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "x.js"));
    free(s);
    /* unknown placeholder, missing include, unterminated */
    write_file(p1, "{{nope}}");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "nope"));
    free(s);
    write_file(p1, "{{include missing.js}}");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "missing.js"));
    free(s);
    write_file(p1, "abc {{title");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    free(s);
    /* a pattern include: every match, in name order, whatever the folder's order */
    char p3[256], p4[256];
    snprintf(p3, sizeof p3, "%s/v_b.js", dir);
    snprintf(p4, sizeof p4, "%s/v_a.js", dir);
    write_file(p3, "B;");
    write_file(p4, "A;");
    write_file(p2, "X;");
    write_file(p1, "{{include v_*.js}}|{{include x.*}}");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_str_eq(s, "A;B;|X;");
    free(s);
    /* a document's page leaves out a view it cannot show: a diff-only one off diff pages, one that
     * needs a member the document lacks; a view written without literals is always in */
    char p5[256], p6[256], p7[256];
    snprintf(p5, sizeof p5, "%s/view_a.js", dir);
    snprintf(p6, sizeof p6, "%s/view_b.js", dir);
    snprintf(p7, sizeof p7, "%s/view_c.js", dir);
    write_file(p5, "Views.register({ id: 'a', order: 1, needs: 'image', label: 'A' });");
    write_file(p6, "Views.register({ id: 'b', order: 2, diffOnly: true, label: 'B' });");
    write_file(p7, "Views.register(entry); /* C */");
    write_file(p1, "{{include view_*.js}}");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_str_eq(s, "Views.register(entry); /* C */");
    free(s);
    remove(p5);
    remove(p6);
    remove(p7);
    write_file(p1, "{{include w_*.js}}");
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "w_*.js"));
    free(s);
    /* built in: every view, after the helpers it uses and the registry, and
     * before the page's list of them */
    s = page_ok(&x.d, NULL);
    const char *draw = strstr(s, "function headColor("), *reg = strstr(s, "const Views = ("),
               *table = strstr(s, "const VIEWS = Views.list();");
    ck_assert_ptr_nonnull(draw);
    ck_assert_ptr_nonnull(reg);
    ck_assert_ptr_nonnull(table);
    ck_assert(draw < reg);
    const char *views[] = {"Views.register({\n  id: 'head',", "Views.register({\n  id: 'model',",
                           "Views.register({\n  id: 'neuron',", "Views.register({\n  id: 'matrix',",
                           "Views.register({\n  id: 'lens',"};
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) {
        const char *v = strstr(s, views[i]);
        ck_assert_msg(v && v > reg && v < table, "%s", views[i]);
    }
    /* a text document's page: no diff view (diff pages only), no Image view (image runs only) */
    ck_assert_ptr_null(strstr(s, "Views.register({\n  id: 'diff',"));
    ck_assert_ptr_null(strstr(s, "Views.register({\n  id: 'image',"));
    free(s);
    remove(p3);
    remove(p4);
    remove(p1);
    remove(p2);
    /* a folder without page.html */
    s = page(&x.d, dir, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "page.html"));
    free(s);
    rmdir(dir);
    fix_free(&x);
}
END_TEST

/* An encoder-decoder document (attnviz render): no capture, three stacks over
 * two token sides. Each stack's chunk per selected layer decodes back to its
 * n_rows x n_cols blocks (selected heads in order); the meta names the stacks
 * and holds each side's tokens and flags; check_doc is strict about them. */
START_TEST(test_encoder_decoder_stacks) {
    enum { L = 2, H = 3, NE = 6, ND = 4 };
    static const char *etok[NE] = {"\xe2\x96\x81" "She", "\xe2\x96\x81" "sees", "</script><script>alert(1)</script>",
                                   "\xe2\x96\x81" "elephant", ".", "</s>"};
    static const char *dtok[ND] = {"<pad>", "\xe2\x96\x81" "Sie", "\xe2\x96\x81" "sieht", "\xe2\x96\x81" "Elefanten"};
    unsigned char esp[NE] = {0, 0, 0, 0, 0, 1}, dsp[ND] = {1, 0, 0, 0}, ews[NE] = {1, 1, 1, 1, 1, 1},
                  dws[ND] = {1, 1, 1, 1};
    TokEncoding ee = {.n = NE, .tokens = etok, .special = esp, .word_start = ews, .b_start = -1};
    TokEncoding de = {.n = ND, .tokens = dtok, .special = dsp, .word_start = dws, .b_start = -1};
    ModelConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.model_type, "encoder-decoder");
    cfg.num_layers = 5, cfg.num_heads = H;
    /* distinct rows: w(s, l, h, i, j) = (7l + 3h + 5i + 2j + s) mod 9 + 1, normalized; the decoder's causal */
    static float ea[L * H * NE * NE], da[L * H * ND * ND], xa[L * H * ND * NE];
    float *arr[3] = {ea, da, xa};
    const int rows[3] = {NE, ND, ND}, cols[3] = {NE, ND, NE};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < L * H; b++)
            for (int i = 0; i < rows[k]; i++) {
                float *r = arr[k] + ((size_t)b * rows[k] + i) * cols[k];
                double sum = 0;
                for (int j = 0; j < cols[k]; j++)
                    sum += r[j] = k == 1 && j > i ? 0.0f : (float)((7 * (b / H) + 3 * (b % H) + 5 * i + 2 * j + k) % 9 + 1);
                for (int j = 0; j < cols[k]; j++) r[j] = (float)(r[j] / sum);
            }
    CapStack st[3] = {{"encoder", ea, NE, NE, 0, 0, 0, NULL, 0}, {"decoder", da, ND, ND, 1, 1, 1, NULL, 0},
                      {"cross", xa, ND, NE, 1, 0, 0, NULL, 0}};
    static const int layers[L] = {1, 4}, heads[2] = {2, 0};
    OutDoc d = {.model_name = "t5-ish", .cfg = &cfg, .dtype = "F32", .text_a = "", .enc = &ee, .dec_enc = &de,
                .stacks = st, .n_stacks = 3, .layers = layers, .n_sel_layers = L, .heads = heads, .n_sel_heads = 2,
                .init_layer = 1, .init_head = 0, .precision = 6};
    char *s = page_ok(&d, NULL);
    ck_assert_ptr_null(strstr(s, "id=\"av-att-0\""));
    ck_assert_ptr_null(strstr(s, "id=\"av-qk-0\""));
    ck_assert_ptr_null(strstr(s, "<script>alert"));
    for (int k = 0; k < 3; k++)
        for (int li = 0; li < L; li++) {
            char id[32];
            snprintf(id, sizeof id, "av-%s-%d", st[k].name, li);
            size_t nn = (size_t)rows[k] * cols[k], cnt = 2 * nn, rl;
            unsigned char *raw = chunk(s, id, cnt * 2, &rl);
            for (int hj = 0; hj < 2; hj++) {
                const float *a = arr[k] + ((size_t)li * H + heads[hj]) * nn;
                for (size_t i = 0; i < nn; i++) {
                    unsigned c = code16(raw, cnt, (size_t)hj * nn + i);
                    ck_assert_msg(c == (unsigned)floor(a[i] * 10000.0 + 0.5), "%s l%d h%d i%zu: %u vs %g", id, li, hj, i, c,
                                  a[i]);
                }
            }
            free(raw);
        }
    cJSON *m = meta_of(s);
    cJSON *sts = cJSON_GetObjectItem(m, "stacks");
    ck_assert_int_eq(cJSON_GetArraySize(sts), 3);
    static const char *const want[3][3] = {{"encoder", "encoder", "encoder"}, {"decoder", "decoder", "decoder"},
                                           {"cross", "decoder", "encoder"}};
    for (int k = 0; k < 3; k++) {
        cJSON *o = cJSON_GetArrayItem(sts, k);
        ck_assert_str_eq(cJSON_GetObjectItem(o, "name")->valuestring, want[k][0]);
        ck_assert_str_eq(cJSON_GetObjectItem(o, "rows")->valuestring, want[k][1]);
        ck_assert_str_eq(cJSON_GetObjectItem(o, "cols")->valuestring, want[k][2]);
        ck_assert_int_eq(cJSON_GetObjectItem(o, "n_rows")->valueint, rows[k]);
        ck_assert_int_eq(cJSON_GetObjectItem(o, "n_cols")->valueint, cols[k]);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(o, "causal")) == (k == 1));
    }
    cJSON *sides = cJSON_GetObjectItem(m, "sides");
    cJSON *es = cJSON_GetObjectItem(sides, "encoder"), *ds = cJSON_GetObjectItem(sides, "decoder");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(es, "tokens")), NE);
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(es, "tokens"), 2)->valuestring, etok[2]);
    ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(ds, "tokens"), 3)->valuestring, dtok[3]);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(ds, "special"), 0)->valueint, 1);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(es, "special"), 5)->valueint, 1);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(ds, "display_tokens")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "layers")), L);
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "layers"), 1)->valueint, 4);
    cJSON_Delete(m);
    free(s);

    /* only the decoder's stack: no encoder side */
    OutDoc d1 = d;
    d1.enc = &de, d1.stacks = &st[1], d1.n_stacks = 1;
    s = page_ok(&d1, NULL);
    m = meta_of(s);
    ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "sides"), "encoder"));
    ck_assert_ptr_nonnull(strstr(s, "id=\"av-decoder-1\""));
    cJSON_Delete(m);
    free(s);

    /* a decoder shallower than its encoder: the decoder's and cross attention's stacks hold their own
     * layer (4 of a 1-layer selection), the encoder the document's two; chunks go stack by stack, as many
     * as each has, and the meta names a stack's layers only when it has its own */
    static const int dec_layers[1] = {4};
    CapStack ust[3];
    memcpy(ust, st, sizeof ust);
    ust[1].layers = ust[2].layers = dec_layers, ust[1].n_layers = ust[2].n_layers = 1;
    OutDoc du = d;
    du.stacks = ust;
    s = page_ok(&du, NULL);
    ck_assert_ptr_nonnull(strstr(s, "id=\"av-encoder-1\""));
    ck_assert_ptr_null(strstr(s, "id=\"av-decoder-1\""));
    ck_assert_ptr_null(strstr(s, "id=\"av-cross-1\""));
    {
        size_t nn = (size_t)ND * NE, cnt = 2 * nn, rl;
        unsigned char *raw = chunk(s, "av-cross-0", cnt * 2, &rl);
        for (int hj = 0; hj < 2; hj++)
            for (size_t i = 0; i < nn; i++) /* the stack's first block: its layer 4 */
                ck_assert_uint_eq(code16(raw, cnt, (size_t)hj * nn + i),
                                  (unsigned)floor(xa[(size_t)heads[hj] * nn + i] * 10000.0 + 0.5));
        free(raw);
    }
    m = meta_of(s);
    sts = cJSON_GetObjectItem(m, "stacks");
    ck_assert_ptr_null(cJSON_GetObjectItem(cJSON_GetArrayItem(sts, 0), "layers"));
    for (int k = 1; k < 3; k++) {
        cJSON *ls = cJSON_GetObjectItem(cJSON_GetArrayItem(sts, k), "layers");
        ck_assert_int_eq(cJSON_GetArraySize(ls), 1);
        ck_assert_int_eq(cJSON_GetArrayItem(ls, 0)->valueint, 4);
    }
    cJSON_Delete(m);
    free(s);

    /* what check_doc refuses */
    AvErr e = {0};
    int rc;
    OutDoc bad = d;
    CapStack bst[3];
    memcpy(bst, st, sizeof bst);
    bad.stacks = bst;
    bst[2].n_cols = 5; /* disagrees with the encoder's tokens */
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "cross stack is 4 x 5"));
    free(s);
    bst[2].n_cols = NE, bst[2].name = "cross\"><script>";
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "unknown attention stack"));
    free(s);
    bst[2].name = "encoder";
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "two encoder stacks"));
    free(s);
    bst[2].name = "cross";
    bad.dec_enc = NULL;
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "needs the decoder's tokens"));
    free(s);
    bad.dec_enc = &de;
    static const int bad_head[1] = {3};
    bad.heads = bad_head, bad.n_sel_heads = 1;
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "head 3"));
    free(s);
    bad.heads = heads, bad.n_sel_heads = 2;
    Fix x;
    fix_init(&x, 5, 2, 2, 4, 0, WORDS, 5);
    bad.cap = &x.cap; /* a capture and stacks */
    s = page(&bad, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not both"));
    free(s);
    fix_free(&x);
}
END_TEST

/* attnviz diff: B's attention as av-attb-<i> over B's own tokens, the comparison in meta.diff
 * with B's side; a B capture that misses a layer, or an alignment out of range, is refused. */
START_TEST(test_diff_second_capture) {
    Fix a, b;
    fix_init(&a, 7, 2, 3, 8, 1, WORDS, 5);
    fix_init(&b, 9, 2, 3, 8, 0, WORDS + 1, 4);
    int a_to_b[7] = {0, 1, -1, 3, 4, 5, 8}, b_to_a[9] = {0, 1, -1, 3, 4, 5, -1, -1, 6};
    double jsd[6] = {0, 0.1, 0.2, 0.3, 0.4, 0.5};
    b.d.text_a = "the other input";
    struct OutDiff df = {&b.d, 0, a_to_b, b_to_a, 6, jsd, NULL, NULL};
    a.d.diff = &df;
    size_t len;
    char *s = page_ok(&a.d, &len);
    size_t nn = 9 * 9, cnt = 3 * nn;
    for (int l = 0; l < 2; l++) {
        char id[32];
        snprintf(id, sizeof id, "av-attb-%d", l);
        size_t rl;
        unsigned char *raw = chunk(s, id, cnt * 2, &rl);
        for (int h = 0; h < 3; h++) {
            const float *w = cap_attn(&b.cap, l, h);
            for (size_t i = 0; i < nn; i++)
                ck_assert_msg(fabs(code16(raw, cnt, (size_t)h * nn + i) / 10000.0 - w[i]) <= 0.5e-4 + 1e-9, "B l%d h%d", l, h);
        }
        free(raw);
    }
    ck_assert_int_eq(count(s, "id=\"av-att-"), 2);
    ck_assert_int_eq(count(s, "id=\"av-qk-"), 2); /* A's queries and keys only */
    cJSON *m = meta_of(s);
    const cJSON *d = cJSON_GetObjectItem(m, "diff");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "side_b"), "tokens")), 9);
    ck_assert_double_eq_tol(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "divergence"), "per_head"), 1), 2)->valuedouble, 0.5, 1e-12);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "alignment"), "pairs")), 6);
    cJSON_Delete(m);
    free(s);
    AvErr e = {0};
    int rc;
    b.cap.n_tokens = 8; /* B's capture and tokens disagree */
    free(page(&a.d, NULL, NULL, &rc, &e));
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "B's capture"));
    b.cap.n_tokens = 9;
    a_to_b[2] = 9; /* past B's tokens */
    free(page(&a.d, NULL, NULL, &rc, &e));
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad alignment"));
    fix_free(&a);
    fix_free(&b);
}
END_TEST

START_TEST(test_errors) {
    Fix x;
    fix_init(&x, 5, 2, 2, 4, 1, WORDS, 5);
    AvErr e = {0};
    int rc;
    char *s;
    const Capture *keep = x.d.cap;
    x.d.cap = NULL; /* --tokens-only: no page */
    s = page(&x.d, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "attention"));
    free(s);
    x.d.cap = keep;
    static const int bad_layer[] = {0, 7};
    x.d.layers = bad_layer, x.d.n_sel_layers = 2;
    s = page(&x.d, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "layer 7"));
    free(s);
    x.d.layers = NULL;
    x.cap.n_tokens = 4; /* disagrees with the encoding */
    s = page(&x.d, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    free(s);
    x.cap.n_tokens = 5;
    /* a full disk */
    FILE *f = fopen("/dev/full", "wb");
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);
        ck_assert_int_eq(html_write_doc(f, &x.d, NULL, &e), -1);
        fclose(f);
    }
    fix_free(&x);
}
END_TEST

START_TEST(test_title_shortened_at_char_boundary) {
    Fix x;
    fix_init(&x, 5, 1, 1, 4, 0, WORDS, 5);
    char text[400] = "";
    for (int i = 0; i < 60; i++) strcat(text, "é<"); /* 3 bytes each */
    x.d.text_a = text;
    char *s = page_ok(&x.d, NULL);
    const char *t = strstr(s, "<title>");
    const char *end = strstr(s, "</title>");
    ck_assert(t && end && end - t < 400);
    ck_assert_ptr_nonnull(strstr(t, "é&lt;é&lt;"));
    ck_assert_ptr_nonnull(strstr(t, "…</title>"));
    free(s);
    fix_free(&x);
}
END_TEST

/* Byte-level BPE (GPT-2) tokens: Ġ is a space, Ċ a newline. */
#define G "\xc4\xa0"
#define NL "\xc4\x8a"

START_TEST(test_causal_meta_has_display_tokens_specials_and_word_starts) {
    static const char *const vocab[] = {"<|endoftext|>", "Time", G "flies", ".", NL, "The", G "un", "believ", "able",
                                        G "<img src=x onerror=alert(1)>", G G, "<|endoftext|>"};
    static const char *const disp[] = {"<|endoftext|>", "Time", " flies", ".", "\n", "The", " un", "believ", "able",
                                       " <img src=x onerror=alert(1)>", "  ", "<|endoftext|>"};
    /* the byte-level tokenizer's flags: pre-token starts; <|endoftext|> special */
    static const int want_start[] = {1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1};
    static const int want_special[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    Fix x;
    fix_init(&x, 12, 2, 2, 8, 1, WORDS, 5);
    for (int i = 0; i < 12; i++) {
        x.tokens[i] = vocab[i];
        x.word_start[i] = (unsigned char)want_start[i];
        x.special[i] = (unsigned char)want_special[i];
        x.role[i] = TOK_ROLE_NONE;
    }
    x.cfg.causal = 1;
    x.d.display_tokens = disp;
    char *s = page_ok(&x.d, NULL);
    ck_assert_ptr_null(strstr(s, "<img"));
    ck_assert_ptr_null(strstr(s, "onerror=alert(1)>"));
    cJSON *m = meta_of(s);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "config"), "causal")));
    cJSON *toks = cJSON_GetObjectItem(m, "tokens"), *dt = cJSON_GetObjectItem(m, "display_tokens");
    cJSON *ws = cJSON_GetObjectItem(m, "word_start"), *sp = cJSON_GetObjectItem(m, "special");
    ck_assert_int_eq(cJSON_GetArraySize(dt), 12);
    ck_assert_int_eq(cJSON_GetArraySize(ws), 12);
    ck_assert_int_eq(cJSON_GetArraySize(sp), 12);
    for (int i = 0; i < 12; i++) {
        ck_assert_str_eq(cJSON_GetArrayItem(toks, i)->valuestring, vocab[i]); /* vocab spellings kept */
        ck_assert_str_eq(cJSON_GetArrayItem(dt, i)->valuestring, disp[i]);
        ck_assert_msg(cJSON_GetArrayItem(ws, i)->valueint == want_start[i], "word_start[%d]", i);
        ck_assert_msg(cJSON_GetArrayItem(sp, i)->valueint == want_special[i], "special[%d]", i);
    }
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

/* The page writes the tokenizer's flags as they are; without them there is no page. */
START_TEST(test_wordpiece_flags_pass_through_and_page_is_not_causal) {
    static const char *const words[] = {"fl", "##ies", "##", "un", "##believ", "##able"};
    static const int want_start[] = {1, 1, 0, 1, 1, 0, 0, 1};
    Fix x;
    fix_init(&x, 8, 1, 2, 8, 0, words, 6); /* [CLS] fl ##ies ## un ##believ ##able [SEP] */
    for (int i = 0; i < 8; i++) x.word_start[i] = (unsigned char)want_start[i];
    AvErr e = {0};
    int rc;
    x.enc.word_start = NULL;
    char *s = page(&x.d, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "flags"));
    free(s);
    x.enc.word_start = x.word_start;
    s = page_ok(&x.d, NULL);
    cJSON *m = meta_of(s);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "config"), "causal")));
    ck_assert_ptr_null(cJSON_GetObjectItem(m, "display_tokens"));
    cJSON *ws = cJSON_GetObjectItem(m, "word_start"), *sp = cJSON_GetObjectItem(m, "special");
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(cJSON_GetArrayItem(ws, i)->valueint == want_start[i], "word_start[%d]", i);
        ck_assert_int_eq(cJSON_GetArrayItem(sp, i)->valueint, i == 0 || i == 7);
    }
    cJSON_Delete(m);
    free(s);
    fix_free(&x);
}
END_TEST

START_TEST(test_missing_display_token_is_an_error) {
    const char *disp[5] = {"[CLS]", " time", NULL, " like", "[SEP]"};
    Fix x;
    fix_init(&x, 5, 1, 1, 4, 0, WORDS, 5);
    x.d.display_tokens = disp;
    AvErr e = {0};
    int rc;
    char *s = page(&x.d, NULL, NULL, &rc, &e);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "token 2"));
    free(s);
    fix_free(&x);
}
END_TEST
#undef G
#undef NL

/* Size and time budgets (reported on stderr; generous asserts). */
START_TEST(test_budget_small) {
    Fix x;
    fix_init(&x, 7, 12, 12, 64, 0, WORDS, 5);
    size_t len_noqk, len_qk;
    char *s = page_ok(&x.d, &len_noqk);
    free(s);
    fix_free(&x);
    fix_init(&x, 7, 12, 12, 64, 1, WORDS, 5);
    s = page_ok(&x.d, &len_qk);
    free(s);
    fix_free(&x);
    fprintf(stderr, "html 7 tokens 12x12: %zu bytes without q/k, %zu with q/k (q/k part %zu)\n", len_noqk, len_qk,
            len_qk - len_noqk);
    /* the templates are most of a 7-token page: the views it can show (not the diff and Image views; the
     * --explain panel only with --explain); the measure switch's ALTI and rollout and the sink and
     * massive-activation flags 18 KB */
    ck_assert_uint_lt(len_noqk, 320 * 1000);
    /* q/k: 7 x 64 x 144 x 2 values, ~11 bits each after deflate, +25% text */
    ck_assert_uint_lt(len_qk - len_noqk, 350 * 1000);
}
END_TEST

START_TEST(test_budget_512) {
    Fix x;
    fix_init(&x, 512, 12, 12, 64, 1, WORDS, 5);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    AvErr e = {0};
    double t0 = now_ms();
    ck_assert_int_eq(html_write_doc(f, &x.d, NULL, &e), 0);
    double t1 = now_ms();
    ck_assert_int_eq(fclose(f), 0);
    fprintf(stderr, "html 512 tokens 12x12 d64 with q/k: %.1f MB in %.0f ms\n", n / 1e6, t1 - t0);
    ck_assert_uint_lt(n, 40 * 1000 * 1000);
    /* the estimate a run decides by (run/plan.c) is an upper envelope of the pages */
    const double est = html_page_estimate(512, 512, 144, 0, 2 * (size_t)144 * 512 * 64);
    fprintf(stderr, "html 512 tokens: estimated %.1f MB\n", est / 1e6);
    ck_assert_msg(est >= (double)n && est < 2.0 * (double)n, "estimate %.0f for a page of %zu bytes", est, n);
    /* the time is printed, not asserted: speed lives in make bench, where a loaded machine cannot fail it */
    /* spot-check the last layer decodes */
    size_t rl, nn = 512 * 512, cnt = 12 * nn;
    unsigned char *raw = chunk(buf, "av-att-11", cnt * 2, &rl);
    for (size_t i = 0; i < cnt; i += 4099)
        ck_assert(fabs(code16(raw, cnt, i) / 1e4 - cap_attn(&x.cap, 11, 0)[i]) <= 0.5e-4 + 1e-9);
    free(raw);
    free(buf);
    fix_free(&x);
}
END_TEST

/* The estimate of a page before it is written: at least what the page takes (short and long, with and
 * without q/k), its attention part growing as the cells (a causal head's triangle) and shrinking per cell
 * with the row's length, as measured. */
START_TEST(test_page_estimate) {
    for (int n = 7; n <= 128; n += 121) {
        for (int qk = 0; qk <= 1; qk++) {
            Fix x;
            fix_init(&x, n, 12, 12, 64, qk, WORDS, 5);
            size_t len;
            char *page = page_ok(&x.d, &len);
            free(page);
            fix_free(&x);
            const double est = html_page_estimate(n, n, 144, 0, qk ? 2 * (size_t)144 * n * 64 : 0);
            ck_assert_msg(est >= (double)len, "n %d, q/k %d: estimate %.0f below the page's %zu bytes", n, qk, est, len);
        }
    }
    const double b = html_page_estimate(1000, 1000, 100, 0, 0), c = html_page_estimate(1000, 1000, 100, 1, 0);
    ck_assert(c < 0.51 * b && c > 0.49 * b);                                              /* the causal triangle */
    ck_assert(html_page_estimate(2000, 2000, 100, 0, 0) < 4 * b);                          /* fewer bytes a cell */
    ck_assert(html_page_estimate(2000, 2000, 100, 0, 0) > 2 * b);
    ck_assert(html_page_estimate(0, 0, 100, 0, 0) == 0);
}
END_TEST

/* A long input's page past its bound keeps fewer keys per query (down to one), says how many, and stays
 * within the bound; without a bound (or within it) every key the pass kept. */
typedef struct {
    unsigned seed;
} LongGridCtx;
static int long_grid_random(void *ctx, int l, int h, int G, float *grid, AvErr *e) {
    (void)e;
    LongGridCtx *g = ctx;
    for (int i = 0; i < G * G; i++) grid[i] = (float)((g->seed = g->seed * 1103515245u + 12345u + (unsigned)(l * 7 + h)) >> 16 & 1023) / 1024.0f;
    return 0;
}
static char *long_page(Capture *c, size_t max_bytes, int top_k, int *keys, size_t *len) {
    LongGridCtx g = {7};
    HtmlLong lp = {c, 256, 1, top_k, long_grid_random, &g, max_bytes, NULL, NULL};
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    ck_assert_ptr_nonnull(f);
    AvErr e = {0};
    ck_assert_msg(html_write_long(f, "long", "{\"format\":1}", &lp, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(fclose(f), 0);
    *keys = lp.top_k;
    return buf;
}
START_TEST(test_long_page_within_its_bound) {
    const int L = 2, H = 4, n = 6000, K = 8;
    Capture c = {.n_layers = L, .n_heads = H, .n_tokens = n, .head_dim = 8, .tel_top_k = K};
    const size_t rows = (size_t)L * H * n;
    c.tel = calloc(rows * CAP_TEL_N, sizeof *c.tel);
    c.tel_top = malloc(rows * K * sizeof *c.tel_top);
    c.tel_top_w = malloc(rows * K * sizeof *c.tel_top_w);
    ck_assert(c.tel && c.tel_top && c.tel_top_w);
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < K; j++) {
            const int q = (int)(r % (size_t)n);
            c.tel_top[r * K + j] = q >= j ? (int)(urand() * (q + 1)) : -1;
            c.tel_top_w[r * K + j] = (float)(urand() / (j + 1));
        }
    size_t len8, len3, len;
    int keys;
    char *a = long_page(&c, 0, K, &keys, &len8); /* no bound: every key the pass kept */
    ck_assert_int_eq(keys, K);
    ck_assert_ptr_nonnull(strstr(a, "\"top_k\":8,"));
    free(a);
    free(long_page(&c, 0, 3, &keys, &len3));
    ck_assert(keys == 3 && len3 < len8);
    /* bounds between: the page within each, keeping as many keys as fit (the bound a little above the 3-key
     * page keeps at least 3), saying how many */
    const size_t bounds[] = {len3 + 200000, len8 * 2 / 3, len3 / 2};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        char *b = long_page(&c, bounds[i], K, &keys, &len);
        fprintf(stderr, "long page of %d tokens, %zu bytes with 8 keys: bound %zu -> %zu bytes, %d keys\n", n, len8,
                bounds[i], len, keys);
        ck_assert(keys >= 1 && keys < K);
        if (i < 2) ck_assert_uint_le(len, bounds[i]);
        if (i == 0) ck_assert_int_ge(keys, 3);
        if (i == 2) ck_assert_int_eq(keys, 1); /* past even one key's page: one key, the least it keeps */
        char want[32];
        snprintf(want, sizeof want, "\"top_k\":%d,", keys);
        ck_assert_ptr_nonnull(strstr(b, want));
        free(b);
    }
    free(long_page(&c, len8 * 2, K, &keys, &len)); /* within its bound: untouched */
    ck_assert_int_eq(keys, K);
    ck_assert_uint_eq(len, len8);
    free(c.tel), free(c.tel_top), free(c.tel_top_w);
}
END_TEST

/* --view's names come from the views the built-in templates register
 * (templates/view_*.js: Views.register({id, order, ...})), in tab order. */
START_TEST(test_views_from_templates) {
    char names[256];
    const char *ok[] = {"head", "model", "neuron", "matrix", "lens", "attribution", "flow"};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(html_view_known(ok[i], 0, names, sizeof names), 1);
        ck_assert_int_eq(html_view_known(ok[i], 1, names, sizeof names), 1);
    }
    ck_assert_int_eq(html_view_known("nope", 0, names, sizeof names), 0);
    ck_assert_str_eq(names, "head, model, neuron, matrix, lens, attribution, flow, compare or image");
    /* the diff view is only on attnviz diff's pages */
    ck_assert_int_eq(html_view_known("diff", 0, names, sizeof names), 0);
    ck_assert_int_eq(html_view_known("diff", 1, names, sizeof names), 1);
    ck_assert_str_eq(names, "head, model, neuron, matrix, lens, attribution, flow, compare or image (or diff)");
    ck_assert_int_eq(html_view_known("", 1, names, sizeof names), 0);
    /* a short buffer is cut, not overrun */
    char small[8];
    ck_assert_int_eq(html_view_known("head", 1, small, sizeof small), 1);
    ck_assert_str_eq(small, "head, m");
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("html");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_hostile_input_is_escaped);
    tcase_add_test(tc, test_document_complete);
    tcase_add_test(tc, test_meta_shares_the_json_description);
    tcase_add_test(tc, test_attention_round_trip);
    tcase_add_test(tc, test_qk_round_trip);
    tcase_add_test(tc, test_selection);
    tcase_add_test(tc, test_templates_dir);
    tcase_add_test(tc, test_views_from_templates);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_encoder_decoder_stacks);
    tcase_add_test(tc, test_title_shortened_at_char_boundary);
    tcase_add_test(tc, test_causal_meta_has_display_tokens_specials_and_word_starts);
    tcase_add_test(tc, test_wordpiece_flags_pass_through_and_page_is_not_causal);
    tcase_add_test(tc, test_missing_display_token_is_an_error);
    tcase_add_test(tc, test_diff_second_capture);
    tcase_add_test(tc, test_budget_small);
    tcase_add_test(tc, test_budget_512);
    tcase_add_test(tc, test_page_estimate);
    tcase_add_test(tc, test_long_page_within_its_bound);
    suite_add_tcase(s, tc);
    return s;
}
