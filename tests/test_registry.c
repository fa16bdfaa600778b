/* test_registry.c — the family registry (families.h, arch.c): every row
 * reachable every way a family is named, the texts derived from it, and the
 * traits each Llama-style family's own parse sets (arch_llama.c). */
#include <string.h>

#include "arch.h"
#include "config.h"
#include "tokenizer.h"
#include "check_util.h"

START_TEST(every_kind_has_one_row_found_by_each_of_its_names) {
    for (int k = 0; k < ARCH_COUNT; k++) {
        const ArchSpec *s = arch_spec((ArchKind)k);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(s->kind, k);
        ck_assert_ptr_eq(arch_detect(s->model_type, NULL), s);
        ck_assert_ptr_nonnull(s->parse);
        ck_assert_ptr_nonnull(s->load);
        /* a config without model_type: the architectures entry's prefix */
        char arch[64];
        snprintf(arch, sizeof arch, "%sForCausalLM", s->arch_prefix);
        ck_assert_ptr_eq(arch_detect(NULL, arch), s);
        if (s->gguf_arch) {
            ck_assert_ptr_eq(arch_detect_gguf(s->gguf_arch), s);
            ck_assert_ptr_nonnull(s->gguf_config);
            ck_assert_ptr_nonnull(s->gguf_name);
        }
        for (int j = 0; j < k; j++) ck_assert_str_ne(arch_spec((ArchKind)j)->model_type, s->model_type);
    }
    ck_assert_ptr_null(arch_spec(ARCH_COUNT));
    ck_assert_ptr_null(arch_detect("t5", NULL));
    ck_assert_ptr_null(arch_detect_gguf("falcon"));
}
END_TEST

START_TEST(the_names_in_messages_come_from_the_table) {
    ck_assert_str_eq(arch_supported_list(), "bert, roberta, distilbert, gpt2, llama, mistral, qwen2, qwen3 and gemma2");
    ck_assert_str_eq(arch_gguf_list(), "llama, qwen2, qwen3 and gemma2");
    /* the unsupported-family message names the list */
    ModelConfig c;
    AvErr e = {0};
    const char *j = "{\"model_type\":\"t5\"}";
    ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, arch_supported_list()));
}
END_TEST

START_TEST(tokenizer_sources_are_the_familys) {
    ck_assert_int_eq(arch_spec(ARCH_BERT)->tokenizer, TOK_SOURCE_WORDPIECE);
    ck_assert_int_eq(arch_spec(ARCH_DISTILBERT)->tokenizer, TOK_SOURCE_WORDPIECE);
    ck_assert_int_eq(arch_spec(ARCH_GPT2)->tokenizer, TOK_SOURCE_BPE_GPT2);
    ck_assert_int_eq(arch_spec(ARCH_ROBERTA)->tokenizer, TOK_SOURCE_BPE_ROBERTA);
    for (int k = ARCH_LLAMA; k < ARCH_COUNT; k++) ck_assert_int_eq(arch_spec((ArchKind)k)->tokenizer, TOK_SOURCE_JSON);
    for (int k = 0; k < ARCH_COUNT; k++)
        ck_assert_uint_eq(arch_spec((ArchKind)k)->gguf_tok, k == ARCH_GEMMA2 ? TOK_GGUF_SPM_GEMMA : 0u);
}
END_TEST

/* A small Llama-style config of the given family. */
static void parse_family(ModelConfig *c, const char *mt, const char *extra) {
    char j[1024];
    snprintf(j, sizeof j,
             "{\"model_type\":\"%s\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":4,"
             "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":48,"
             "\"max_position_embeddings\":64%s}",
             mt, extra);
    AvErr e = {0};
    ck_assert_msg(cfg_parse(c, j, strlen(j), "config.json", &e) == 0, "%s: %s", mt, e.msg);
}

START_TEST(each_llama_style_family_sets_its_traits) {
    ModelConfig c;
    parse_family(&c, "llama", "");
    ck_assert(!c.qkv_bias && !c.o_bias && !c.qk_norm && !c.sandwich_norm && c.sliding_window == 0);
    parse_family(&c, "llama", ",\"attention_bias\":true");
    ck_assert(c.qkv_bias && c.o_bias);
    parse_family(&c, "qwen2", ",\"attention_bias\":false"); /* q/k/v biased whatever it says; o never */
    ck_assert(c.qkv_bias && !c.o_bias && !c.qk_norm);
    parse_family(&c, "qwen2", ",\"sliding_window\":8"); /* use_sliding_window defaults to false */
    ck_assert_int_eq(c.sliding_window, 0);
    parse_family(&c, "qwen2", ",\"sliding_window\":8,\"use_sliding_window\":true,\"max_window_layers\":2");
    ck_assert(c.sliding_window == 8 && !c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2] &&
              c.layer_sliding[3]);
    parse_family(&c, "qwen3", "");
    ck_assert(c.qk_norm && !c.qkv_bias);
    parse_family(&c, "mistral", ",\"sliding_window\":8");
    ck_assert(c.sliding_window == 8 && c.layer_sliding[0] && c.layer_sliding[3]);
    parse_family(&c, "gemma2", "");
    ck_assert(c.sandwich_norm && c.tie_word_embeddings && c.sliding_window == 4096 && c.head_dim == 256);
    ck_assert(c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2] && !c.layer_sliding[3]);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("registry");
    TCase *t = tcase_create("core");
    tcase_add_test(t, every_kind_has_one_row_found_by_each_of_its_names);
    tcase_add_test(t, the_names_in_messages_come_from_the_table);
    tcase_add_test(t, tokenizer_sources_are_the_familys);
    tcase_add_test(t, each_llama_style_family_sets_its_traits);
    suite_add_tcase(s, t);
    return s;
}
