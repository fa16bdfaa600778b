/* test_registry.c — the family registry (families.h, arch.c): every row
 * reachable every way a family is named, the texts derived from it, and the
 * traits each Llama-style family's own parse sets (arch_llama.c). */
#include <math.h>
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
    ck_assert_ptr_null(arch_detect("mbart", NULL));
    ck_assert_ptr_null(arch_detect_gguf("falcon"));
}
END_TEST

START_TEST(the_names_in_messages_come_from_the_table) {
    ck_assert_str_eq(arch_supported_list(), "bert, roberta, distilbert, xlm-roberta, electra, gpt2, llama, mistral, qwen2, "
                                            "qwen3_moe, qwen3, gemma2, gemma3_text, phi3, mixtral, olmoe, gpt_oss, "
                                            "modernbert, bart, marian, t5, mt5, vit, deit, dinov2_with_registers, "
                                            "dinov2, clip_vision_model, clip, siglip_vision_model, siglip, llava, gemma3 and "
                                            "idefics3");
    ck_assert_str_eq(arch_gguf_list(), "llama, qwen2, qwen3moe, qwen3, gemma2, gemma3, phi3, olmoe, gpt-oss and clip");
    /* the unsupported-family message names the list */
    ModelConfig c;
    AvErr e = {0};
    const char *j = "{\"model_type\":\"mbart\"}";
    ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, arch_supported_list()));
}
END_TEST

START_TEST(tokenizer_sources_are_the_familys) {
    ck_assert_int_eq(arch_spec(ARCH_BERT)->tokenizer, TOK_SOURCE_WORDPIECE);
    ck_assert_int_eq(arch_spec(ARCH_DISTILBERT)->tokenizer, TOK_SOURCE_WORDPIECE);
    ck_assert_int_eq(arch_spec(ARCH_GPT2)->tokenizer, TOK_SOURCE_BPE_GPT2);
    ck_assert_int_eq(arch_spec(ARCH_ROBERTA)->tokenizer, TOK_SOURCE_BPE_ROBERTA);
    ck_assert_int_eq(arch_spec(ARCH_XLM_ROBERTA)->tokenizer, TOK_SOURCE_JSON); /* Unigram tokenizer.json */
    ck_assert_int_eq(arch_spec(ARCH_ELECTRA)->tokenizer, TOK_SOURCE_WORDPIECE);
    /* BART's folders hold RoBERTa's vocab.json + merges.txt; Marian's and T5's a tokenizer.json */
    for (int k = ARCH_LLAMA; k <= ARCH_MT5; k++)
        ck_assert_int_eq(arch_spec((ArchKind)k)->tokenizer, k == ARCH_BART ? TOK_SOURCE_BPE_ROBERTA : TOK_SOURCE_JSON);
    /* the vision encoders have none; a whole CLIP or SigLIP model's text tower and a vision-language
     * model's decoder read tokenizer.json */
    for (int k = ARCH_VIT; k < ARCH_COUNT; k++)
        ck_assert_int_eq(arch_spec((ArchKind)k)->tokenizer,
                         k == ARCH_CLIP || k == ARCH_SIGLIP || k == ARCH_LLAVA || k == ARCH_GEMMA3_VLM || k == ARCH_IDEFICS3 ? TOK_SOURCE_JSON : TOK_SOURCE_NONE);
    for (int k = 0; k < ARCH_COUNT; k++)
        ck_assert_uint_eq(arch_spec((ArchKind)k)->gguf_tok, k == ARCH_GEMMA2 || k == ARCH_GEMMA3 ? TOK_GGUF_SPM_GEMMA : 0u);
}
END_TEST

START_TEST(bert_shaped_families_set_their_traits) {
    /* XLM-R numbers positions after padding_idx as RoBERTa; ELECTRA keeps its embedding_size
     * only when it differs from hidden_size (then the embeddings are projected) */
    const char *base = "\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                       "\"intermediate_size\":48,\"max_position_embeddings\":64";
    char j[512];
    ModelConfig c;
    AvErr e = {0};
    snprintf(j, sizeof j, "{\"model_type\":\"xlm-roberta\",%s,\"pad_token_id\":1}", base);
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert(c.arch == ARCH_XLM_ROBERTA && c.pos_offset == 2 && c.pad_token_id == 1 && c.embedding_size == 0);
    snprintf(j, sizeof j, "{\"model_type\":\"electra\",%s,\"embedding_size\":16}", base);
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert(c.arch == ARCH_ELECTRA && c.embedding_size == 16 && c.pos_offset == 0);
    snprintf(j, sizeof j, "{\"model_type\":\"electra\",%s,\"embedding_size\":32}", base);
    ck_assert_int_eq(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert_int_eq(c.embedding_size, 0);
    snprintf(j, sizeof j, "{\"model_type\":\"electra\",%s,\"embedding_size\":0}", base);
    ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "embedding_size"));
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
    ck_assert(c.attn_softcap == 50.0f && c.final_softcap == 30.0f && c.rope_local_theta == 0.0f);
}
END_TEST

/* Gemma 3: five sliding layers to one global (sliding_window_pattern), the sliding ones turning by
 * rope_local_base_freq, q/k norms, no soft-capping; rope_scaling applies to the global layers. */
START_TEST(gemma3_sets_its_pattern_and_two_rotary_bases) {
    ModelConfig c;
    char j[1024];
    snprintf(j, sizeof j,
             "{\"model_type\":\"gemma3_text\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":7,"
             "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":48,"
             "\"max_position_embeddings\":64,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}}");
    AvErr e = {0};
    ck_assert_msg(cfg_parse(&c, j, strlen(j), "config.json", &e) == 0, "%s", e.msg);
    ck_assert(c.qk_norm && c.sandwich_norm && c.tie_word_embeddings && c.attn_softcap == 0 && c.final_softcap == 0);
    ck_assert(c.rope_theta == 1e6f && c.rope_local_theta == 10000.0f && c.rope_kind == ROPE_LINEAR && c.rope_factor == 8);
    for (int l = 0; l < 7; l++) {
        ck_assert_int_eq(c.layer_sliding[l], l != 5);
        ck_assert_int_eq(c.layer_rope_local[l], l != 5);
    }
    parse_family(&c, "gemma3_text", ",\"sliding_window_pattern\":2,\"rope_local_base_freq\":500.0");
    ck_assert(c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2] && !c.layer_sliding[3]);
    ck_assert(c.rope_local_theta == 500.0f && c.rope_kind == ROPE_DEFAULT);
    const char *bi = "{\"model_type\":\"gemma3_text\",\"use_bidirectional_attention\":true,\"vocab_size\":40,"
                     "\"hidden_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":48,"
                     "\"max_position_embeddings\":64}";
    ck_assert_int_ne(cfg_parse(&c, bi, strlen(bi), "config.json", &e), 0);
}
END_TEST

/* Phi-3: LongRoPE's factors, the top-level original context (Phi3Config's 4096 when absent), the
 * attention factor transformers derives, partial rotary. */
START_TEST(phi3_reads_longrope_and_partial_rotary) {
    ModelConfig c;
    parse_family(&c, "phi3", ",\"partial_rotary_factor\":0.75,\"original_max_position_embeddings\":16,"
                             "\"rope_scaling\":{\"type\":\"su\",\"short_factor\":[1,1,1],\"long_factor\":[2,3,4]}");
    ck_assert_int_eq(c.rotary_dim, 6); /* int(8 * 0.75) */
    ck_assert(c.rope_kind == ROPE_LONGROPE && c.rope_n_factors == 3 && c.rope_long[2] == 4.0f);
    ck_assert_int_eq(c.rope_orig_max_pos, 16);
    ck_assert_float_eq_tol(c.rope_attn_factor, sqrt(1 + log(64.0 / 16) / log(16.0)), 1e-6);
    ck_assert(!c.tie_word_embeddings && !c.qk_norm && !c.sandwich_norm && c.sliding_window == 0);
    parse_family(&c, "phi3", ",\"attention_bias\":true,\"mlp_bias\":true,\"sliding_window\":2047");
    ck_assert(!c.qkv_bias && !c.o_bias && !c.mlp_bias && c.sliding_window == 2047 && c.layer_sliding[0] && c.layer_sliding[3]);
    ck_assert(c.rope_kind == ROPE_DEFAULT && c.rotary_dim == 8 && c.rope_recompute_at == 0);
    AvErr e = {0};
    const char *bad = "{\"model_type\":\"phi3\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":2,"
                      "\"num_attention_heads\":4,\"intermediate_size\":48,\"max_position_embeddings\":64,"
                      "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1],\"long_factor\":[2,3]}}";
    ck_assert_int_ne(cfg_parse(&c, bad, strlen(bad), "config.json", &e), 0); /* 4 factors needed */
    ck_assert_ptr_nonnull(strstr(e.msg, "need 4"));
}
END_TEST

/* Mixtures of experts: experts, top-k and renormalization as each family's config gives them (Mixtral
 * always renormalizes; the others per norm_topk_prob), Qwen3-MoE's dense layers and expert width,
 * OLMoE's whole-projection q/k norm; what is refused. */
START_TEST(moe_families_read_their_routing) {
    ModelConfig c;
    parse_family(&c, "mixtral", ",\"num_local_experts\":6,\"num_experts_per_tok\":2,\"norm_topk_prob\":false");
    ck_assert(c.num_experts == 6 && c.experts_per_tok == 2 && c.moe_renorm && c.moe_intermediate == 48 && !c.qk_norm);
    for (int l = 0; l < 4; l++) ck_assert(!c.layer_dense[l]);
    parse_family(&c, "qwen3_moe", ",\"num_experts\":8,\"num_experts_per_tok\":4,\"norm_topk_prob\":true,"
                                  "\"moe_intermediate_size\":12,\"decoder_sparse_step\":2,\"mlp_only_layers\":[3]");
    ck_assert(c.num_experts == 8 && c.experts_per_tok == 4 && c.moe_renorm && c.moe_intermediate == 12 && c.qk_norm);
    ck_assert(c.layer_dense[0] && !c.layer_dense[1] && c.layer_dense[2] && c.layer_dense[3] && !c.qk_norm_full);
    parse_family(&c, "olmoe", ",\"num_experts\":8,\"num_experts_per_tok\":2");
    ck_assert(c.num_experts == 8 && !c.moe_renorm && c.qk_norm && c.qk_norm_full && c.moe_intermediate == 48);
    const char *bad[] = {",\"num_local_experts\":4,\"num_experts_per_tok\":5", ",\"num_local_experts\":100000",
                         ",\"num_experts_per_tok\":0", ",\"clip_qkv\":8.0"};
    const char *why[] = {"exceeds the 4 experts", "num_local_experts", "num_experts_per_tok", "clip_qkv"};
    for (int i = 0; i < 4; i++) {
        char j[1024];
        snprintf(j, sizeof j,
                 "{\"model_type\":\"%s\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":4,"
                 "\"num_attention_heads\":4,\"intermediate_size\":48,\"max_position_embeddings\":64%s}",
                 i == 3 ? "olmoe" : "mixtral", bad[i]);
        AvErr e = {0};
        ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
        ck_assert_msg(strstr(e.msg, why[i]) != NULL, "%s", e.msg);
    }
}
END_TEST

/* gpt-oss: sinks, biases on q/k/v/o by default, alternate sliding layers (window 128 when the config
 * names none), GptOssConfig's YaRN when it names no rotary scaling (attention factor 0.1 ln 32 + 1),
 * a config's YaRN (truncate, mscale ratio), the router's softmax over the top-k logits, the clamped
 * SwiGLU's keys; what is refused. */
START_TEST(gptoss_reads_sinks_yarn_and_its_experts) {
    ModelConfig c;
    parse_family(&c, "gpt_oss", ",\"num_local_experts\":8,\"num_experts_per_tok\":4");
    ck_assert(c.attn_sinks && c.qkv_bias && c.o_bias && !c.mlp_bias && !c.qk_norm && c.moe_topk_logits);
    ck_assert(c.num_experts == 8 && c.experts_per_tok == 4 && c.moe_intermediate == 48);
    ck_assert(c.swiglu_limit == 7.0f && c.swiglu_alpha == 1.702f && c.sliding_window == 128 && c.rope_theta == 150000.0f);
    for (int l = 0; l < 4; l++) ck_assert(c.layer_sliding[l] == (l % 2 == 0));
    ck_assert(c.rope_kind == ROPE_YARN && c.rope_factor == 32.0f && c.rope_orig_max_pos == 4096 && !c.rope_truncate);
    ck_assert_float_eq_tol(c.rope_attn_factor, 0.1 * log(32.0) + 1, 1e-6);
    parse_family(&c, "gpt_oss", ",\"attention_bias\":false,\"swiglu_limit\":5.5,\"sliding_window\":16,"
                                "\"layer_types\":[\"full_attention\",\"sliding_attention\",\"full_attention\",\"full_attention\"],"
                                "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,\"beta_fast\":16,"
                                "\"original_max_position_embeddings\":32,\"mscale\":2,\"mscale_all_dim\":1}");
    ck_assert(!c.qkv_bias && !c.o_bias && c.swiglu_limit == 5.5f && c.sliding_window == 16);
    ck_assert(!c.layer_sliding[0] && c.layer_sliding[1] && !c.layer_sliding[2] && !c.layer_sliding[3]);
    ck_assert(c.rope_kind == ROPE_YARN && c.rope_factor == 4.0f && c.rope_orig_max_pos == 32 && c.rope_truncate);
    ck_assert(c.rope_beta_fast == 16.0f && c.rope_beta_slow == 1.0f);
    ck_assert_float_eq_tol(c.rope_attn_factor, (0.2 * log(4.0) + 1) / (0.1 * log(4.0) + 1), 1e-6);
    const char *bad[] = {",\"num_local_experts\":4,\"num_experts_per_tok\":5", ",\"swiglu_limit\":-1",
                         ",\"rope_scaling\":{\"rope_type\":\"yarn\"}", ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,\"truncate\":3}"};
    const char *why[] = {"exceeds the 4 experts", "swiglu_limit", "needs a \"factor\"", "truncate"};
    for (int i = 0; i < 4; i++) {
        char j[1024];
        snprintf(j, sizeof j,
                 "{\"model_type\":\"gpt_oss\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":4,"
                 "\"num_attention_heads\":4,\"intermediate_size\":48,\"max_position_embeddings\":64%s}", bad[i]);
        AvErr e = {0};
        ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
        ck_assert_msg(strstr(e.msg, why[i]) != NULL, "%s", e.msg);
    }
}
END_TEST

/* ModernBERT: the Hub's keys (global_attn_every_n_layers, global/local_rope_theta; a window of
 * local_attention / 2 either side, itself included) and transformers 5's (layer_types,
 * rope_parameters per layer type); what it refuses. */
START_TEST(modernbert_reads_its_local_layers_both_ways) {
    ModelConfig c;
    parse_family(&c, "modernbert", ",\"global_attn_every_n_layers\":3,\"local_attention\":128,"
                                   "\"global_rope_theta\":160000.0,\"local_rope_theta\":10000.0");
    ck_assert(!c.causal && c.pre_ln && c.gated_mlp && c.norm == NORM_LAYER && c.norm_no_bias && c.pos == POS_ROPE);
    ck_assert(c.sliding_window == 65 && c.window_bidir && !c.qkv_bias && !c.o_bias && !c.mlp_bias);
    ck_assert(c.rope_theta == 160000.0f && c.rope_local_theta == 10000.0f && c.layer_norm_eps == 1e-5f);
    for (int l = 0; l < 4; l++) ck_assert(c.layer_sliding[l] == (l % 3 != 0) && c.layer_rope_local[l] == (l % 3 != 0));
    ck_assert_int_eq(c.num_kv_heads, 4);
    parse_family(&c, "modernbert", ",\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\","
                                   "\"full_attention\"],\"local_attention\":5,\"norm_bias\":true,\"attention_bias\":true,"
                                   "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":9e5},"
                                   "\"sliding_attention\":{\"rope_theta\":500.0}}");
    ck_assert(c.layer_sliding[0] && !c.layer_sliding[1] && c.layer_sliding[2] && !c.layer_sliding[3]);
    ck_assert(c.sliding_window == 3 && !c.norm_no_bias && c.qkv_bias && c.o_bias);
    ck_assert(c.rope_theta == 9e5f && c.rope_local_theta == 500.0f);
    static const char *const bad[][2] = {
        {",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":2}}", "only the default"},
        {",\"classifier_activation\":\"relu\"", "differs from hidden_activation"},
        {",\"layer_types\":[\"full_attention\"]", "one type per layer"},
        {",\"local_attention\":0", "local_attention"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char j[1024];
        snprintf(j, sizeof j,
                 "{\"model_type\":\"modernbert\",\"vocab_size\":40,\"hidden_size\":32,\"num_hidden_layers\":4,"
                 "\"num_attention_heads\":4,\"intermediate_size\":48,\"max_position_embeddings\":64%s}", bad[i][0]);
        AvErr e = {0};
        ck_assert_int_ne(cfg_parse(&c, j, strlen(j), "config.json", &e), 0);
        ck_assert_msg(strstr(e.msg, bad[i][1]) != NULL, "case %zu: %s", i, e.msg);
    }
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("registry");
    TCase *t = tcase_create("core");
    tcase_add_test(t, every_kind_has_one_row_found_by_each_of_its_names);
    tcase_add_test(t, the_names_in_messages_come_from_the_table);
    tcase_add_test(t, tokenizer_sources_are_the_familys);
    tcase_add_test(t, bert_shaped_families_set_their_traits);
    tcase_add_test(t, each_llama_style_family_sets_its_traits);
    tcase_add_test(t, gemma3_sets_its_pattern_and_two_rotary_bases);
    tcase_add_test(t, phi3_reads_longrope_and_partial_rotary);
    tcase_add_test(t, modernbert_reads_its_local_layers_both_ways);
    tcase_add_test(t, moe_families_read_their_routing);
    tcase_add_test(t, gptoss_reads_sinks_yarn_and_its_experts);
    suite_add_tcase(s, t);
    return s;
}
