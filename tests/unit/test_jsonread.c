/* test_jsonread.c — a JSON key given twice is refused, naming the key, the object and
 * the file: by the strict reader itself (jsonread.c), and by every reader of a file kind
 * that goes through it (config.json and its siblings are test_config.c's, vocab.json
 * test_bpe.c's). cJSON would read the first of two keys, Python's json (transformers,
 * the safetensors library) the last: attnviz runs neither. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heads.h"
#include "jsonread.h"
#include "loader.h"
#include "model.h"
#include "render.h"
#include "safetensors.h"
#include "serve.h"
#include "tokenizer.h"
#include "check_util.h"

static void expect_refused(const char *json, const char *needle) {
    cJSON *j = (cJSON *)1;
    AvErr e = {0};
    ck_assert_int_eq(av_json_parse(&j, json, strlen(json), "doc.json", &e), -1);
    ck_assert_ptr_null(j);
    ck_assert_msg(strstr(e.msg, needle) && !strncmp(e.msg, "doc.json: ", 10), "expected '%s' in: %s", needle, e.msg);
}

START_TEST(a_key_twice_is_refused_with_its_place) {
    expect_refused("{\"a\": 1, \"b\": 2, \"a\": 3}", "key \"a\" appears twice in the top-level object");
    expect_refused("{\"model\": {\"vocab\": {\"x\": 0, \"y\": 1, \"x\": 2}}}", "key \"x\" appears twice in model.vocab");
    expect_refused("{\"heads\": [{\"l\": 0}, {\"l\": 1, \"l\": 2}]}", "key \"l\" appears twice in heads[1]");
    expect_refused("[[{}, {\"k\": [], \"k\": {}}]]", "key \"k\" appears twice in [0][1]");
}
END_TEST

START_TEST(a_string_holding_a_nul_escape_is_refused) {
    /* cJSON decodes \u0000 into a NUL that ends the C string: "a\u0000 secret" would read "a" */
    expect_refused("{\"text\": \"a\\u0000 secret\"}", "a string holds \\u0000 (byte 11)");
    expect_refused("{\"k\\u0000x\": 1}", "a string holds \\u0000");
    cJSON *j;
    AvErr e = {0};
    const char ok[] = "{\"text\": \"a\\\\u0000 is spelled out\", \"u\": \"\\u0001\"}"; /* an escaped backslash, then u0000 */
    ck_assert_msg(av_json_parse(&j, ok, sizeof ok - 1, "doc.json", &e) == 0, "%s", e.msg);
    cJSON_Delete(j);
}
END_TEST

START_TEST(the_same_key_in_different_objects_and_plain_documents_are_read) {
    static const char *const ok[] = {"{\"a\": {\"a\": {\"a\": 1}}, \"b\": {\"a\": 2}}", "[{\"x\": 1}, {\"x\": 2}]", "{}",
                                     "[]", "\"text\"", "42", "{\"A\": 1, \"a\": 2}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cJSON *j;
        AvErr e = {0};
        ck_assert_msg(av_json_parse(&j, ok[i], strlen(ok[i]), "doc.json", &e) == 0, "%s: %s", ok[i], e.msg);
        cJSON_Delete(j);
    }
    cJSON *j;
    AvErr e = {0};
    ck_assert_int_eq(av_json_parse(&j, "{\"a\":", 5, "doc.json", &e), 1); /* not JSON: the caller's words */
    ck_assert_ptr_null(j);
    ck_assert_str_eq(e.msg, "");
}
END_TEST

START_TEST(an_object_of_100000_keys_is_checked_and_one_repeated_found) {
    const int n = 100000;
    char *s = malloc((size_t)n * 24 + 64), *p = s;
    ck_assert_ptr_nonnull(s);
    p += sprintf(p, "{");
    for (int i = 0; i < n; i++) p += sprintf(p, "%s\"key%d\":%d", i ? "," : "", (i * 7919) % n, i);
    cJSON *j;
    AvErr e = {0};
    sprintf(p, "}");
    ck_assert_msg(av_json_parse(&j, s, strlen(s), "big.json", &e) == 0, "%s", e.msg);
    cJSON_Delete(j);
    sprintf(p, ",\"key77777\":0}");
    ck_assert_int_eq(av_json_parse(&j, s, strlen(s), "big.json", &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"key77777\" appears twice"), "%s", e.msg);
    free(s);
}
END_TEST

/* ---- each reader */

static char *temp_with(const char *content, size_t len, const char *suffix) {
    char *path = malloc(96);
    ck_assert_ptr_nonnull(path);
    snprintf(path, 96, "/tmp/attnviz_dup_XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

START_TEST(a_safetensors_header_listing_a_tensor_twice_is_refused) {
    /* the second entry points at other data: the safetensors library would read it */
    const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    uint8_t img[8 + sizeof hdr - 1 + 8] = {0};
    img[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(img + 8, hdr, sizeof hdr - 1);
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_parse(&f, img, sizeof img, "model.safetensors", &e), -1);
    ck_assert_msg(strstr(e.msg, "model.safetensors: key \"w\" appears twice in the top-level object"), "%s", e.msg);
}
END_TEST

START_TEST(a_tokenizer_json_with_a_vocabulary_entry_twice_is_refused) {
    const char j[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"a\":2},\"merges\":[]}}";
    char *path = temp_with(j, sizeof j - 1, ".json");
    Tokenizer *t;
    AvErr e;
    ck_assert_int_eq(tok_load_json(&t, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"a\" appears twice in model.vocab") && strstr(e.msg, path), "%s", e.msg);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(a_shard_index_naming_a_tensor_twice_is_refused) {
    const char j[] = "{\"weight_map\": {\"w\": \"a.safetensors\", \"w\": \"b.safetensors\"}}";
    char *path = temp_with(j, sizeof j - 1, ".index.json");
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load_files(&m, "tests/data/small-f32/config.json", path, &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"w\" appears twice in weight_map") && strstr(e.msg, path), "%s", e.msg);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(render_metadata_giving_the_tokens_twice_is_refused) {
    /* attention [1, 1, 2, 2] as a safetensors file, its tokens in a sidecar .json */
    const char hdr[] = "{\"attention\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[0,16]}}";
    const float v[4] = {1, 0, 0.5f, 0.5f};
    uint8_t img[8 + sizeof hdr - 1 + sizeof v] = {0};
    img[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(img + 8, hdr, sizeof hdr - 1);
    memcpy(img + 8 + sizeof hdr - 1, v, sizeof v);
    char *st = temp_with((const char *)img, sizeof img, ".safetensors");
    const char meta[] = "{\"tokens\": [\"a\", \"b\"], \"tokens\": [\"c\", \"d\"]}";
    char *mp = temp_with(meta, sizeof meta - 1, ".json");
    Rendered r;
    AvErr e;
    ck_assert_int_eq(render_load(&r, st, mp, 0, &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"tokens\" appears twice in the top-level object") && strstr(e.msg, mp), "%s", e.msg);
    unlink(st), unlink(mp);
    free(st), free(mp);
}
END_TEST

START_TEST(a_stats_or_heads_file_giving_a_field_twice_is_refused) {
    const char j[] = "{\"kind\": \"stats\", \"model\": \"m\", \"inputs\": 4, \"inputs\": 40, \"layers\": 1}";
    HeadScores hs;
    AvErr e;
    ck_assert_int_eq(heads_parse_json(&hs, "shard0.json", j, &e), -1);
    ck_assert_msg(strstr(e.msg, "shard0.json: key \"inputs\" appears twice"), "%s", e.msg);
}
END_TEST

START_TEST(a_serve_request_body_giving_the_text_twice_is_refused) {
    const char body[] = "{\"text\": \"a harmless sentence\", \"text\": \"another one\"}";
    ServeRunReq q;
    const char *why;
    ck_assert_int_eq(serve_parse_run(body, sizeof body - 1, &q, &why), -1);
    ck_assert_msg(why && strstr(why, "key \"text\" appears twice"), "%s", why ? why : "(none)");
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("jsonread");
    TCase *t = tcase_create("core");
    tcase_add_test(t, a_key_twice_is_refused_with_its_place);
    tcase_add_test(t, the_same_key_in_different_objects_and_plain_documents_are_read);
    tcase_add_test(t, a_string_holding_a_nul_escape_is_refused);
    tcase_add_test(t, an_object_of_100000_keys_is_checked_and_one_repeated_found);
    tcase_add_test(t, a_safetensors_header_listing_a_tensor_twice_is_refused);
    tcase_add_test(t, a_tokenizer_json_with_a_vocabulary_entry_twice_is_refused);
    tcase_add_test(t, a_shard_index_naming_a_tensor_twice_is_refused);
    tcase_add_test(t, render_metadata_giving_the_tokens_twice_is_refused);
    tcase_add_test(t, a_stats_or_heads_file_giving_a_field_twice_is_refused);
    tcase_add_test(t, a_serve_request_body_giving_the_text_twice_is_refused);
    suite_add_tcase(s, t);
    return s;
}
