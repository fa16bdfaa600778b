/* test_config.c — config.json parsing: a real published BERT config, defaults,
 * and refusal of missing, mistyped and absurd values before any allocation. */
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>

#include "config.h"
#include "check_util.h"

#define BASE "\"vocab_size\":100,\"hidden_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":4," \
             "\"intermediate_size\":64,\"max_position_embeddings\":64"

static void expect_error(const char *json, const char *needle) {
    ModelConfig c;
    AvErr e;
    ck_assert_int_eq(cfg_parse(&c, json, strlen(json), "config.json", &e), -1);
    ck_assert_msg(strstr(e.msg, needle) && !strncmp(e.msg, "config.json: ", 13), "expected '%s' in: %s", needle, e.msg);
}

/* Gemma 3's vision-language config: its placement is the model's kind, not read from its ids, so a
 * begin-of-image token at id 0 (which a config may name) is still Gemma 3's; LLaVA's is LLaVA's. */
START_TEST(a_vision_language_models_kind_is_its_configs_not_its_ids) {
    const char *gemma = "{\"model_type\":\"gemma3\",\"boi_token_index\":0,\"eoi_token_index\":1,\"image_token_index\":2,"
                        "\"mm_tokens_per_image\":4,\"text_config\":{\"model_type\":\"gemma3_text\",\"vocab_size\":100,"
                        "\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                        "\"num_key_value_heads\":1,\"head_dim\":4},\"vision_config\":{\"model_type\":\"siglip_vision_model\","
                        "\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                        "\"image_size\":32,\"patch_size\":8,\"vision_use_head\":false}}";
    ModelConfig c;
    AvErr e;
    ck_assert_msg(cfg_parse(&c, gemma, strlen(gemma), "config.json", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(c.vlm, 1);
    ck_assert_int_eq(c.vlm_boi_id, 0);
    ck_assert_int_eq(c.vlm_kind, VLM_KIND_GEMMA3);
}
END_TEST

START_TEST(reads_a_real_published_bert_config) {
    /* all-MiniLM-L6-v2's config.json and tokenizer_config.json as published (tools/refdata.sh):
     * a BERT config written by transformers, with keys attnviz does not use */
    char cfg[4096], tcfg[4096];
    refdata(cfg, "all-MiniLM-L6-v2/config.json");
    refdata(tcfg, "all-MiniLM-L6-v2/tokenizer_config.json");
    ModelConfig c;
    AvErr e;
    ck_assert_msg(cfg_load(&c, cfg, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(c.model_type, "bert");
    ck_assert_int_eq(c.vocab_size, 30522);
    ck_assert_int_eq(c.hidden_size, 384);
    ck_assert_int_eq(c.num_layers, 6);
    ck_assert_int_eq(c.num_heads, 12);
    ck_assert_int_eq(c.intermediate_size, 1536);
    ck_assert_int_eq(c.max_position_embeddings, 512);
    ck_assert_int_eq(c.type_vocab_size, 2);
    ck_assert_float_eq(c.layer_norm_eps, 1e-12f);
    ck_assert_int_eq(c.hidden_act, ACT_GELU);
    ck_assert_int_eq(cfg_read_lowercase(tcfg, &e), 1);
}
END_TEST

START_TEST(a_key_given_twice_is_refused_in_every_config_file) {
    /* transformers (Python's json) reads the last of two, cJSON the first: neither is run */
    expect_error("{" BASE ",\"hidden_act\":\"silu\",\"hidden_act\":\"gelu\"}",
                 "key \"hidden_act\" appears twice in the top-level object");
    expect_error("{" BASE ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2,\"factor\":4}}",
                 "key \"factor\" appears twice in rope_scaling");
    ModelConfig c;
    AvErr e;
    const char *ok = "{" BASE "}";
    ck_assert_int_eq(cfg_parse(&c, ok, strlen(ok), "config.json", &e), 0);
    char path[64];
    const char gen[] = "{\"eos_token_id\": 1, \"eos_token_id\": 2}";
    write_temp(path, gen, sizeof gen - 1);
    ck_assert_int_eq(cfg_load_generation(&c, path, &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"eos_token_id\" appears twice") && strstr(e.msg, path), "%s", e.msg);
    unlink(path);
    const char tok[] = "{\"do_lower_case\": true, \"do_lower_case\": false}";
    write_temp(path, tok, sizeof tok - 1);
    ck_assert_int_eq(cfg_read_lowercase(path, &e), -2);
    ck_assert_msg(strstr(e.msg, "key \"do_lower_case\" appears twice"), "%s", e.msg);
    unlink(path);
    const char heads[] = "{\"heads\": [{\"layer\": 0, \"head\": 1, \"pattern\": \"a\", \"head\": 2}]}";
    write_temp(path, heads, sizeof heads - 1);
    char **pat, **desc;
    ck_assert_int_eq(cfg_load_head_labels(path, &c, &pat, &desc, &e), -1);
    ck_assert_msg(strstr(e.msg, "key \"head\" appears twice in heads[0]"), "%s", e.msg);
    unlink(path);
}
END_TEST

START_TEST(applies_defaults_and_activation_names) {
    ModelConfig c;
    AvErr e;
    const char *j = "{" BASE ",\"hidden_act\":\"gelu_pytorch_tanh\"}";
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "c", &e), 0);
    ck_assert_int_eq(c.hidden_act, ACT_GELU_TANH);
    ck_assert_int_eq(c.type_vocab_size, 2);
    ck_assert_str_eq(c.model_type, "bert");
    j = "{" BASE ",\"hidden_act\":\"relu\",\"attnviz_demo\":true}";
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "c", &e), 0);
    ck_assert_int_eq(c.hidden_act, ACT_RELU);
    ck_assert_int_eq(c.is_demo, 1);
}
END_TEST

START_TEST(refuses_bad_configs_naming_the_key) {
    expect_error("{", "not valid JSON");
    expect_error("[]", "not a JSON object");
    expect_error("{\"hidden_size\":32}", "missing key \"vocab_size\"");
    expect_error("{\"vocab_size\":\"100\"}", "\"vocab_size\" must be an integer");
    expect_error("{\"vocab_size\":100,\"hidden_size\":0}", "\"hidden_size\" = 0 is out of range");
    expect_error("{\"vocab_size\":1e12}", "out of range");
    /* found by fuzz_config: a huge value once reached a double-to-integer conversion (UB) */
    expect_error("{\"vocab_size\":1.44444e+24}", "out of range");
    expect_error("{\"vocab_size\":-1e300}", "out of range");
    expect_error("{\"vocab_size\":12.5}", "must be an integer");
    expect_error("{\"vocab_size\":100,\"hidden_size\":30,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                 "\"intermediate_size\":64,\"max_position_embeddings\":64}",
                 "not divisible");
    expect_error("{" BASE ",\"hidden_act\":\"cubic\"}", "unknown hidden_act \"cubic\"");
    expect_error("{" BASE ",\"model_type\":\"mbart\"}", "model type \"mbart\" is not supported");
    expect_error("{" BASE ",\"architectures\":[\"MBartForConditionalGeneration\"]}", "architecture \"MBartForConditionalGeneration\"");
    expect_error("{\"model_type\":\"gpt2\",\"vocab_size\":10,\"n_embd\":30,\"n_layer\":1,\"n_head\":4,\"n_positions\":8}",
                 "n_embd 30 is not divisible by n_head 4");
    expect_error("{\"model_type\":\"gpt2\",\"vocab_size\":10,\"n_embd\":32,\"n_layer\":1,\"n_head\":4}",
                 "missing key \"n_positions\"");
    expect_error("{\"model_type\":\"distilbert\",\"vocab_size\":10,\"dim\":32}", "missing key \"n_layers\"");
    expect_error("{\"model_type\":\"roberta\"," BASE ",\"pad_token_id\":63}", "leaves no positions");
    expect_error("{" BASE ",\"layer_norm_eps\":\"x\"}", "layer_norm_eps");
    expect_error("{\"vocab_size\":100,\"hidden_size\":32,\"num_hidden_layers\":100000}", "\"num_hidden_layers\" = 100000 is out of range");
}
END_TEST

/* The published configs of the hub's gpt2, roberta-base and distilbert-base-uncased (keys trimmed to those
 * that matter plus a few that do not). */
START_TEST(reads_each_family_under_its_own_key_names) {
    ModelConfig c;
    AvErr e;
    const char *gpt2 = "{\"activation_function\":\"gelu_new\",\"architectures\":[\"GPT2LMHeadModel\"],"
                       "\"attn_pdrop\":0.1,\"bos_token_id\":50256,\"eos_token_id\":50256,\"layer_norm_epsilon\":1e-05,"
                       "\"model_type\":\"gpt2\",\"n_ctx\":1024,\"n_embd\":768,\"n_head\":12,\"n_inner\":null,"
                       "\"n_layer\":12,\"n_positions\":1024,\"vocab_size\":50257}";
    ck_assert_int_eq(cfg_parse(&c, gpt2, strlen(gpt2), "c", &e), 0);
    ck_assert_int_eq(c.arch, ARCH_GPT2);
    ck_assert_int_eq(c.causal, 1);
    ck_assert_int_eq(c.pre_ln, 1);
    ck_assert_int_eq(c.hidden_size, 768);
    ck_assert_int_eq(c.intermediate_size, 3072); /* n_inner null: 4 * n_embd */
    ck_assert_int_eq(c.max_position_embeddings, 1024);
    ck_assert_int_eq(c.vocab_size, 50257);
    ck_assert_int_eq(c.hidden_act, ACT_GELU_TANH);
    ck_assert_float_eq(c.layer_norm_eps, 1e-5f);
    ck_assert_int_eq(c.type_vocab_size, 0);
    ck_assert_int_eq(cfg_max_tokens(&c), 1024);
    const char *roberta = "{\"architectures\":[\"RobertaForMaskedLM\"],\"bos_token_id\":0,\"eos_token_id\":2,"
                          "\"hidden_act\":\"gelu\",\"hidden_size\":768,\"intermediate_size\":3072,\"layer_norm_eps\":1e-05,"
                          "\"max_position_embeddings\":514,\"model_type\":\"roberta\",\"num_attention_heads\":12,"
                          "\"num_hidden_layers\":12,\"pad_token_id\":1,\"type_vocab_size\":1,\"vocab_size\":50265}";
    ck_assert_int_eq(cfg_parse(&c, roberta, strlen(roberta), "c", &e), 0);
    ck_assert_int_eq(c.arch, ARCH_ROBERTA);
    ck_assert_int_eq(c.causal, 0);
    ck_assert_int_eq(c.pos_offset, 2);
    ck_assert_int_eq(cfg_max_tokens(&c), 512);
    ck_assert_int_eq(c.type_vocab_size, 1);
    const char *distil = "{\"activation\":\"gelu\",\"architectures\":[\"DistilBertForMaskedLM\"],\"dim\":768,"
                         "\"hidden_dim\":3072,\"max_position_embeddings\":512,\"model_type\":\"distilbert\","
                         "\"n_heads\":12,\"n_layers\":6,\"pad_token_id\":0,\"sinusoidal_pos_embds\":false,"
                         "\"vocab_size\":30522}";
    ck_assert_int_eq(cfg_parse(&c, distil, strlen(distil), "c", &e), 0);
    ck_assert_int_eq(c.arch, ARCH_DISTILBERT);
    ck_assert_int_eq(c.num_layers, 6);
    ck_assert_int_eq(c.intermediate_size, 3072);
    ck_assert_int_eq(c.type_vocab_size, 0);
    ck_assert_float_eq(c.layer_norm_eps, 1e-12f);
    /* old configs name only the architecture */
    const char *arch_only = "{\"architectures\":[\"GPT2LMHeadModel\"],\"vocab_size\":10,\"n_embd\":32,\"n_layer\":1,"
                            "\"n_head\":4,\"n_positions\":8}";
    ck_assert_int_eq(cfg_parse(&c, arch_only, strlen(arch_only), "c", &e), 0);
    ck_assert_int_eq(c.arch, ARCH_GPT2);
    ck_assert_str_eq(c.model_type, "gpt2");
}
END_TEST

START_TEST(head_labels_fill_every_described_head) {
    ModelConfig c;
    AvErr e;
    const char *j = "{" BASE "}";
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "c", &e), 0);
    char path[] = "/tmp/attnviz-heads-XXXXXX";
    int fd = mkstemp(path);
    const char *heads = "{\"heads\":[{\"layer\":1,\"head\":3,\"pattern\":\"previous\",\"description\":\"i-1\"}]}";
    ck_assert_int_eq(write(fd, heads, strlen(heads)), (ssize_t)strlen(heads));
    close(fd);
    char **p, **d;
    ck_assert_int_eq(cfg_load_head_labels(path, &c, &p, &d, &e), 0);
    ck_assert_str_eq(p[7], "previous");
    ck_assert_str_eq(d[7], "i-1");
    ck_assert_ptr_null(p[0]);
    cfg_free_head_labels(p, 8);
    cfg_free_head_labels(d, 8);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "{\"heads\":[{\"layer\":9,\"head\":0,\"pattern\":\"x\"}]}";
    ck_assert_int_eq(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    ck_assert_int_eq(cfg_load_head_labels(path, &c, &p, &d, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "heads[0]"));
    unlink(path);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("config");
    TCase *t = tcase_create("core");
    tcase_add_test(t, reads_a_real_published_bert_config);
    tcase_add_test(t, applies_defaults_and_activation_names);
    tcase_add_test(t, a_key_given_twice_is_refused_in_every_config_file);
    tcase_add_test(t, refuses_bad_configs_naming_the_key);
    tcase_add_test(t, reads_each_family_under_its_own_key_names);
    tcase_add_test(t, head_labels_fill_every_described_head);
    tcase_add_test(t, a_vision_language_models_kind_is_its_configs_not_its_ids);
    suite_add_tcase(s, t);
    return s;
}
