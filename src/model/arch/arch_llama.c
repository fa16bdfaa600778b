/* arch_llama.c — the Llama-style decoders' shared parse, load and GGUF reader
 * (arch_llama.h), and the first of them: Llama (2, 3.x, TinyLlama, SmolLM).
 * Pre-RMSNorm causal decoders with rotary positions, grouped-query attention
 * and gated MLPs; what sets the others apart is a LlamaTraits value in their
 * group's file (arch_mistral.c: Mistral; arch_qwen.c: Qwen2, Qwen3,
 * Qwen3-MoE; arch_gemma.c: Gemma 2 and 3; arch_phi3.c: Phi-3; arch_moe.c:
 * Mixtral, OLMoE; arch_gptoss.c: gpt-oss), which the code here tests; it never
 * tests a family's name. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch_llama.h"
#include "gguf.h"

/* A mixture-of-experts config: experts, top-k, renormalization, each
 * expert's width and (Qwen3-MoE) which layers stay dense. */
static int parse_moe(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
    const int mixtral = fam->moe == MOE_MIXTRAL, gptoss = fam->moe == MOE_GPTOSS;
    int step = 1;
    c->num_experts = mixtral ? 8 : fam->moe == MOE_QWEN || gptoss ? 128 : 64;
    c->experts_per_tok = mixtral ? 2 : gptoss ? 4 : 8;
    c->moe_renorm = mixtral; /* Mixtral always; the others per norm_topk_prob (default false) */
    c->moe_intermediate = fam->moe == MOE_QWEN ? 768 : c->intermediate_size;
    if (cfg_opt_int(root, "num_experts", 1, CFG_MAX_EXPERTS, &c->num_experts, path, e) ||
        cfg_opt_int(root, "num_local_experts", 1, CFG_MAX_EXPERTS, &c->num_experts, path, e) ||
        cfg_opt_int(root, "num_experts_per_tok", 1, CFG_MAX_TOP_K, &c->experts_per_tok, path, e) ||
        (!mixtral && cfg_opt_bool(root, "norm_topk_prob", &c->moe_renorm, path, e)) ||
        (fam->moe == MOE_QWEN && cfg_opt_int(root, "moe_intermediate_size", 1, CFG_MAX_INTER, &c->moe_intermediate, path, e)) ||
        (fam->moe == MOE_QWEN && cfg_opt_int(root, "decoder_sparse_step", 1, CFG_MAX_LAYERS, &step, path, e)))
        return -1;
    if (c->experts_per_tok > c->num_experts)
        return av_err(e, "%s: num_experts_per_tok %d exceeds the %d experts", path, c->experts_per_tok, c->num_experts);
    if (gptoss) {
        /* GptOssTopKRouter: softmax over the k chosen logits; GptOssExperts' clamped SwiGLU */
        c->moe_topk_logits = 1, c->moe_renorm = 1;
        c->swiglu_limit = 7.0f, c->swiglu_alpha = 1.702f;
        if (cfg_opt_float(root, "swiglu_limit", 1e-6, 1e9, &c->swiglu_limit, path, e) ||
            cfg_opt_float(root, "swiglu_alpha", 1e-6, 1e9, &c->swiglu_alpha, path, e))
            return -1;
    }
    /* Qwen3MoeDecoderLayer: sparse unless in mlp_only_layers or off the step */
    for (int l = 0; l < c->num_layers; l++) c->layer_dense[l] = (l + 1) % step != 0;
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (fam->moe == MOE_QWEN && dense && !cJSON_IsNull(dense)) {
        if (!cJSON_IsArray(dense)) return av_err(e, "%s: \"mlp_only_layers\" must be a list of layer numbers", path);
        const cJSON *v;
        cJSON_ArrayForEach(v, dense) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= c->num_layers ||
                v->valuedouble != (int)v->valuedouble)
                return av_err(e, "%s: mlp_only_layers holds %g, not a layer of %d", path,
                              cJSON_IsNumber(v) ? v->valuedouble : -1.0, c->num_layers);
            c->layer_dense[(int)v->valuedouble] = 1;
        }
    }
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(root, "clip_qkv");
    if (clip && !cJSON_IsNull(clip)) return av_err(e, "%s: clip_qkv (clamped q/k/v) is not supported", path);
    c->qk_norm_full = fam->qk_norm_full;
    return 0;
}

/* A list of numbers (LongRoPE's short_factor / long_factor) into out. */
static int parse_factors(const cJSON *r, const char *key, float *out, int *n, const char *path, AvErr *e) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, key);
    if (!cJSON_IsArray(a)) return av_err(e, "%s: rope type \"longrope\" needs \"%s\", a list of numbers", path, key);
    int k = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        if (k >= CFG_MAX_ROPE_FACTORS) return av_err(e, "%s: \"%s\" has more than %d entries", path, key, CFG_MAX_ROPE_FACTORS);
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble < 1e9))
            return av_err(e, "%s: %s[%d] must be a positive number", path, key, k);
        out[k++] = (float)v->valuedouble;
    }
    if (*n && k != *n) return av_err(e, "%s: short_factor and long_factor differ in length (%d, %d)", path, *n, k);
    *n = k;
    return 0;
}

/* YaRN's keys (transformers' _compute_yarn_parameters): factor, the original
 * context (default max_position_embeddings), the ramp's beta_fast / beta_slow
 * (32 and 1 when absent or 0), truncate (default true), and the attention
 * factor that scales cos and sin: given, else mscale / mscale_all_dim's
 * ratio, else 0.1 ln(factor) + 1. */
static double yarn_mscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * log(factor) + 1.0; }

static int parse_yarn(ModelConfig *c, const cJSON *r, const char *path, AvErr *e) {
    float attn = 0, mscale = 0, mscale_all = 0;
    c->rope_beta_fast = 0, c->rope_beta_slow = 0, c->rope_truncate = 1;
    if (cfg_opt_float(r, "factor", 1e-3, 1e6, &c->rope_factor, path, e) ||
        cfg_opt_int(r, "original_max_position_embeddings", 1, 1 << 24, &c->rope_orig_max_pos, path, e) ||
        cfg_opt_float(r, "beta_fast", 0, 1e6, &c->rope_beta_fast, path, e) ||
        cfg_opt_float(r, "beta_slow", 0, 1e6, &c->rope_beta_slow, path, e) ||
        cfg_opt_bool(r, "truncate", &c->rope_truncate, path, e) ||
        cfg_opt_float(r, "attention_factor", 1e-6, 1e9, &attn, path, e) ||
        cfg_opt_float(r, "mscale", 0, 1e9, &mscale, path, e) ||
        cfg_opt_float(r, "mscale_all_dim", 0, 1e9, &mscale_all, path, e))
        return -1;
    if (c->rope_beta_fast == 0) c->rope_beta_fast = 32;
    if (c->rope_beta_slow == 0) c->rope_beta_slow = 1;
    if (attn > 0) c->rope_attn_factor = attn;
    else if (mscale > 0 && mscale_all > 0)
        c->rope_attn_factor = (float)(yarn_mscale(c->rope_factor, mscale) / yarn_mscale(c->rope_factor, mscale_all));
    else c->rope_attn_factor = (float)yarn_mscale(c->rope_factor, 1.0);
    return 0;
}

/* One rope dict (rope_parameters, rope_scaling, or one layer type's): its
 * type and scaling into c. */
static int parse_rope_dict(ModelConfig *c, const cJSON *root, const cJSON *r, const char *path, const LlamaTraits *fam,
                           AvErr *e) {
    if (cfg_opt_float(r, "rope_theta", 1, 1e12, &c->rope_theta, path, e) ||
        cfg_opt_float(r, "partial_rotary_factor", 1e-3, 1, &c->rope_partial, path, e))
        return -1;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(r, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "default";
    if (!strcmp(t, "default")) return 0;
    if (!strcmp(t, "linear")) c->rope_kind = ROPE_LINEAR;
    else if (!strcmp(t, "dynamic")) c->rope_kind = ROPE_DYNAMIC;
    else if (!strcmp(t, "llama3")) c->rope_kind = ROPE_LLAMA3;
    else if (!strcmp(t, "longrope") || !strcmp(t, "su")) c->rope_kind = ROPE_LONGROPE; /* "su": Phi-3's old name */
    else if (!strcmp(t, "yarn")) c->rope_kind = ROPE_YARN;
    else
        return av_err(e, "%s: rope type \"%.40s\" is not supported (default, linear, dynamic, llama3, longrope, yarn)",
                      path, t);
    c->rope_orig_max_pos = c->max_position_embeddings;
    c->rope_low_freq = 1.0f, c->rope_high_freq = 4.0f;
    if (c->rope_kind == ROPE_LONGROPE) {
        /* transformers' _compute_longrope_parameters: factor defaults to the ratio of
         * the two context lengths, the attention factor to sqrt(1 + ln factor / ln orig) */
        float factor = 0, attn = 0;
        if (cfg_opt_int(r, "original_max_position_embeddings", 1, 1 << 24, &c->rope_orig_max_pos, path, e) ||
            (fam->orig_max_top &&
             cfg_opt_int(root, "original_max_position_embeddings", 1, 1 << 24, &c->rope_orig_max_pos, path, e)) ||
            cfg_opt_float(r, "factor", 1e-6, 1e9, &factor, path, e) ||
            cfg_opt_float(r, "attention_factor", 1e-6, 1e9, &attn, path, e))
            return -1;
        if (fam->orig_max_top && !cJSON_GetObjectItemCaseSensitive(root, "original_max_position_embeddings"))
            c->rope_orig_max_pos = 4096; /* Phi3Config's default overrides the dict's */
        /* Phi3ForCausalLM.prepare_inputs_for_generation recomputes the cache once at that length */
        if (fam->orig_max_top) c->rope_recompute_at = c->rope_orig_max_pos;
        double f = factor > 0 ? factor : (double)c->max_position_embeddings / c->rope_orig_max_pos;
        c->rope_attn_factor = attn > 0 ? attn : f <= 1.0 ? 1.0f : (float)sqrt(1 + log(f) / log((double)c->rope_orig_max_pos));
        c->rope_n_factors = 0;
        return parse_factors(r, "short_factor", c->rope_short, &c->rope_n_factors, path, e) ||
               parse_factors(r, "long_factor", c->rope_long, &c->rope_n_factors, path, e) ? -1 : 0;
    }
    if (cJSON_GetObjectItemCaseSensitive(r, "factor") == NULL)
        return av_err(e, "%s: rope type \"%s\" needs a \"factor\"", path, t);
    if (c->rope_kind == ROPE_YARN) return parse_yarn(c, r, path, e);
    if (cfg_opt_float(r, "factor", 1e-3, 1e6, &c->rope_factor, path, e) ||
        cfg_opt_int(r, "original_max_position_embeddings", 1, 1 << 24, &c->rope_orig_max_pos, path, e) ||
        cfg_opt_float(r, "low_freq_factor", 1e-6, 1e6, &c->rope_low_freq, path, e) ||
        cfg_opt_float(r, "high_freq_factor", 1e-6, 1e6, &c->rope_high_freq, path, e))
        return -1;
    if (c->rope_kind == ROPE_LLAMA3 && !(c->rope_high_freq > c->rope_low_freq))
        return av_err(e, "%s: rope llama3 needs high_freq_factor > low_freq_factor", path);
    return 0;
}

/* Rotary positions as config.json gives them: transformers 5's
 * "rope_parameters" (one dict, or one per layer type as Gemma 3 saves it), or
 * the older "rope_theta" + "rope_scaling" (+ Gemma 3's "rope_local_base_freq").
 * Per layer type, the full-attention layers' dict is the main one; the
 * sliding layers' (Gemma 3) may only set its base. */
static int parse_rope(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
    c->rope_theta = fam->theta > 0 ? fam->theta : 10000.0f;
    c->rope_kind = ROPE_DEFAULT;
    c->rope_factor = 1.0f;
    if (fam->rope_local) c->rope_local_theta = 10000.0f;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (cfg_opt_float(root, "rope_theta", 1, 1e12, &c->rope_theta, path, e) ||
        cfg_opt_float(root, "partial_rotary_factor", 1e-3, 1, &c->rope_partial, path, e) ||
        (fam->rope_local && cfg_opt_float(root, "rope_local_base_freq", 1, 1e12, &c->rope_local_theta, path, e)))
        return -1;
    if (params && !cJSON_IsNull(params)) {
        if (!cJSON_IsObject(params)) return av_err(e, "%s: \"rope_parameters\" must be an object", path);
        const cJSON *full = cJSON_GetObjectItemCaseSensitive(params, "full_attention");
        const cJSON *slide = cJSON_GetObjectItemCaseSensitive(params, "sliding_attention");
        if (full || slide) {
            if (slide && cJSON_IsObject(slide)) {
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(slide, "rope_type");
                if (!fam->rope_local || (cJSON_IsString(st) && strcmp(st->valuestring, "default")))
                    return av_err(e, "%s: rotary scaling of the sliding layers is not supported", path);
                if (cfg_opt_float(slide, "rope_theta", 1, 1e12, &c->rope_local_theta, path, e)) return -1;
            }
            params = full;
        }
        if (params && cJSON_IsObject(params) && parse_rope_dict(c, root, params, path, fam, e)) return -1;
    }
    if (scaling && !cJSON_IsNull(scaling)) {
        if (!cJSON_IsObject(scaling)) return av_err(e, "%s: \"rope_scaling\" must be an object or null", path);
        if (parse_rope_dict(c, root, scaling, path, fam, e)) return -1;
    }
    if (fam->sinks && !(params && !cJSON_IsNull(params)) && !(scaling && !cJSON_IsNull(scaling))) {
        /* GptOssConfig's default: YaRN x32 over 4,096 positions, not truncated */
        c->rope_kind = ROPE_YARN, c->rope_factor = 32, c->rope_orig_max_pos = 4096;
        c->rope_beta_fast = 32, c->rope_beta_slow = 1, c->rope_truncate = 0;
        c->rope_attn_factor = (float)yarn_mscale(32, 1.0);
    }
    return 0;
}

/* Which layers use the sliding window: config.json's "layer_types" when
 * present (transformers 5 writes it), else each family's rule. */
static int parse_sliding(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
    int use = !fam->window_off, max_window_layers = 0, pattern = 6;
    if (fam->window) c->sliding_window = fam->window;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (sw && cJSON_IsNull(sw)) c->sliding_window = 0;
    if (cfg_opt_int(root, "sliding_window", 1, 1 << 24, &c->sliding_window, path, e) ||
        cfg_opt_bool(root, "use_sliding_window", &use, path, e) ||
        cfg_opt_int(root, "max_window_layers", 0, CFG_MAX_LAYERS, &max_window_layers, path, e))
        return -1;
    if (!use) c->sliding_window = 0;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->num_layers)
            return av_err(e, "%s: \"layer_types\" must list one type per layer (%d)", path, c->num_layers);
        int l = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, types) {
            if (!cJSON_IsString(t) ||
                (strcmp(t->valuestring, "full_attention") && strcmp(t->valuestring, "sliding_attention")))
                return av_err(e, "%s: layer_types[%d] must be \"full_attention\" or \"sliding_attention\"", path, l);
            const int sliding = !strcmp(t->valuestring, "sliding_attention");
            c->layer_rope_local[l] = fam->rope_local && sliding;
            c->layer_sliding[l++] = sliding && c->sliding_window > 0;
        }
        return 0;
    }
    if (cfg_opt_int(root, "sliding_window_pattern", 1, CFG_MAX_LAYERS, &pattern, path, e)) return -1;
    for (int l = 0; l < c->num_layers; l++) {
        int sliding = 1;
        if (fam->slide == SLIDE_ALTERNATE) sliding = l % 2 == 0;
        else if (fam->slide == SLIDE_FROM_MAX_WINDOW) sliding = l >= max_window_layers;
        else if (fam->slide == SLIDE_PATTERN) sliding = (l + 1) % pattern != 0;
        /* Gemma 3's sliding layers take the local rotary base even with no window */
        c->layer_rope_local[l] = fam->rope_local && sliding;
        c->layer_sliding[l] = sliding && c->sliding_window > 0;
    }
    return 0;
}

int arch_llama_parse(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
    const int gemma = fam->gemma;
    if (cfg_get_int(root, "vocab_size", 1, CFG_MAX_VOCAB, &c->vocab_size, path, e) ||
        cfg_get_int(root, "hidden_size", 1, CFG_MAX_HIDDEN, &c->hidden_size, path, e) ||
        cfg_get_int(root, "num_hidden_layers", 1, CFG_MAX_LAYERS, &c->num_layers, path, e) ||
        cfg_get_int(root, "num_attention_heads", 1, CFG_MAX_HEADS, &c->num_heads, path, e) ||
        cfg_get_int(root, "intermediate_size", 1, CFG_MAX_INTER, &c->intermediate_size, path, e) ||
        cfg_get_int(root, "max_position_embeddings", 1, 1 << 24, &c->max_position_embeddings, path, e))
        return -1;
    c->num_kv_heads = c->num_heads;
    c->layer_norm_eps = 1e-6f;
    c->tie_word_embeddings = gemma;
    c->qkv_bias = fam->qkv_bias || fam->sinks; /* gpt-oss: attention_bias defaults to true */
    c->attn_sinks = fam->sinks;
    int head_dim = gemma ? 256 : 0, mlp_bias = 0;
    if (cfg_opt_int(root, "num_key_value_heads", 1, CFG_MAX_HEADS, &c->num_kv_heads, path, e) ||
        cfg_opt_int(root, "head_dim", 1, 4096, &head_dim, path, e) ||
        cfg_opt_float(root, "rms_norm_eps", 0, 1, &c->layer_norm_eps, path, e) ||
        cfg_opt_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, e) ||
        cfg_opt_bool(root, "mlp_bias", &mlp_bias, path, e) ||
        (!fam->qkv_bias && cfg_opt_bool(root, "attention_bias", &c->qkv_bias, path, e)))
        return -1;
    if (gemma) {
        /* Gemma 2 names it hidden_activation; hidden_act is an old alias */
        const char *key = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation") ? "hidden_activation" : "hidden_act";
        if (cfg_parse_act(c, root, key, "gelu_pytorch_tanh", path, e)) return -1;
    } else if (cfg_parse_act(c, root, "hidden_act", "silu", path, e)) {
        return -1;
    }
    c->head_dim = head_dim;
    c->o_bias = !fam->qkv_bias && c->qkv_bias;
    c->mlp_bias = mlp_bias;
    /* Phi-3's linears have no biases whatever the config says (transformers builds them bias=False) */
    if (fam->fused) c->qkv_bias = c->o_bias = c->mlp_bias = 0;
    c->causal = c->pre_ln = c->gated_mlp = 1;
    c->norm = NORM_RMS;
    c->pos = POS_ROPE;
    c->qk_norm = fam->qk_norm;
    if (gemma) {
        float qpas = 256, cap = fam->softcap ? 50 : 0, fcap = fam->softcap ? 30 : 0;
        int bidirectional = 0;
        if (cfg_opt_bool(root, "use_bidirectional_attention", &bidirectional, path, e)) return -1;
        if (bidirectional) return av_err(e, "%s: use_bidirectional_attention (an encoder's mask) is not supported", path);
        const cJSON *capv = cJSON_GetObjectItemCaseSensitive(root, "attn_logit_softcapping");
        const cJSON *fcapv = cJSON_GetObjectItemCaseSensitive(root, "final_logit_softcapping");
        if (cfg_opt_float(root, "query_pre_attn_scalar", 1e-6, 1e9, &qpas, path, e) ||
            cfg_opt_float(root, "attn_logit_softcapping", 1e-6, 1e9, &cap, path, e) ||
            cfg_opt_float(root, "final_logit_softcapping", 1e-6, 1e9, &fcap, path, e))
            return -1;
        c->final_softcap = fcapv && cJSON_IsNull(fcapv) ? 0.0f : fcap;
        c->norm_offset = 1.0f;
        c->emb_scale = sqrtf((float)c->hidden_size);
        c->attn_scale = 1.0f / sqrtf(qpas);
        c->attn_softcap = capv && cJSON_IsNull(capv) ? 0.0f : cap;
        c->sandwich_norm = 1;
    }
    if (parse_rope(c, root, path, fam, e) || parse_sliding(c, root, path, fam, e)) return -1;
    if (fam->moe && parse_moe(c, root, path, fam, e)) return -1;
    return 0;
}

/* Layer l's router and experts. Mixtral: block_sparse_moe.gate and
 * experts.N.w1 (gate), w3 (up), w2 (down); the others: mlp.gate and
 * mlp.experts.N.gate_proj / up_proj / down_proj. */
static int load_experts(Model *m, LayerWeights *L, int l, const LlamaTraits *fam, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    const int64_t H = c->hidden_size, FE = c->moe_intermediate;
    /* a GGUF's names are llama.cpp's whatever the family (gguf_name maps Mixtral's) */
    const int gptoss = fam->moe == MOE_GPTOSS, mixtral = fam->moe == MOE_MIXTRAL || (m->gguf && !gptoss);
    const char *block = mixtral ? "block_sparse_moe" : "mlp";
    char p[3][200], b[2][200];
    snprintf(p[0], sizeof p[0], gptoss ? "layers.%d.%s.router" : "layers.%d.%s.gate", l, block);
    if (model_linear(m, &L->router, p[0], H, c->num_experts, gptoss, e)) return -1;
    if (!(L->experts = calloc((size_t)c->num_experts, sizeof *L->experts)))
        return av_err(e, "out of memory for layer %d's %d experts", l, c->num_experts);
    for (int x = 0; x < c->num_experts; x++) {
        Expert *X = &L->experts[x];
        if (gptoss && m->gguf) {
            /* llama.cpp's gpt-oss files: gate and up apart (the converter split gate_up_proj's
             * interleaved columns), each projection's experts stacked (ffn_*_exps, as Mixtral's), their
             * biases (experts, out) */
            static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
            Linear *lin[3] = {&X->gate, &X->up, &X->down};
            for (int k = 0; k < 3; k++) {
                const int64_t in = k == 2 ? FE : H, out = k == 2 ? H : FE;
                snprintf(p[0], sizeof p[0], "layers.%d.mlp.experts.%s", l, proj[k]);
                snprintf(b[0], sizeof b[0], "layers.%d.mlp.experts.%s.bias", l, proj[k]);
                const float *bias = NULL;
                if (model_linear_expert(m, lin[k], p[0], c->num_experts, x, in, out, e) ||
                    !(bias = model_tensor(m, b[0], 2, c->num_experts, out, e)))
                    return -1;
                lin[k]->b = bias + (size_t)x * (size_t)out;
            }
            continue;
        }
        if (gptoss) {
            /* GptOssExperts: gate_up_proj (E, H, 2F) with gate in the even columns and up in the
             * odd ones, down_proj (E, F, H); each with a bias per expert */
            snprintf(p[0], sizeof p[0], "layers.%d.mlp.experts.gate_up_proj", l);
            snprintf(p[1], sizeof p[1], "layers.%d.mlp.experts.down_proj", l);
            snprintf(b[0], sizeof b[0], "layers.%d.mlp.experts.gate_up_proj_bias", l);
            snprintf(b[1], sizeof b[1], "layers.%d.mlp.experts.down_proj_bias", l);
            if (model_linear_expert_cols(m, &X->gate, p[0], b[0], c->num_experts, x, H, 2 * FE, 0, 2, FE, e) ||
                model_linear_expert_cols(m, &X->up, p[0], b[0], c->num_experts, x, H, 2 * FE, 1, 2, FE, e) ||
                model_linear_expert_cols(m, &X->down, p[1], b[1], c->num_experts, x, FE, H, 0, 1, H, e))
                return -1;
            continue;
        }
        if (m->gguf) {
            /* llama.cpp stacks each projection's experts in one 3-D tensor (ffn_gate_exps, ...) */
            const char *w[3] = {"w1", "w3", "w2"};
            for (int k = 0; k < 3; k++) snprintf(p[k], sizeof p[k], "layers.%d.block_sparse_moe.experts.%s", l, w[k]);
            if (model_linear_expert(m, &X->gate, p[0], c->num_experts, x, H, FE, e) ||
                model_linear_expert(m, &X->up, p[1], c->num_experts, x, H, FE, e) ||
                model_linear_expert(m, &X->down, p[2], c->num_experts, x, FE, H, e))
                return -1;
            continue;
        }
        snprintf(p[0], sizeof p[0], "layers.%d.%s.experts.%d.%s", l, block, x, mixtral ? "w1" : "gate_proj");
        snprintf(p[1], sizeof p[1], "layers.%d.%s.experts.%d.%s", l, block, x, mixtral ? "w3" : "up_proj");
        snprintf(p[2], sizeof p[2], "layers.%d.%s.experts.%d.%s", l, block, x, mixtral ? "w2" : "down_proj");
        if (model_linear(m, &X->gate, p[0], H, FE, 0, e) || model_linear(m, &X->up, p[1], H, FE, 0, e) ||
            model_linear(m, &X->down, p[2], FE, H, 0, e))
            return -1;
    }
    return 0;
}

/* Tensor names as transformers' Llama-style modules; the base model's, with
 * "model." before them in …ForCausalLM checkpoints (arch.c's prefix). */
int arch_llama_load(Model *m, const LlamaTraits *fam, AvErr *e) {
    const ModelConfig *c = &m->cfg;
    Weights *w = &m->w;
    const int64_t H = c->hidden_size, FF = c->intermediate_size, dh = c->head_dim;
    const int64_t QW = (int64_t)c->num_heads * dh, KW = (int64_t)c->num_kv_heads * dh;
    if (model_linear(m, &w->tok_emb, "embed_tokens", H, c->vocab_size, 0, e) ||
        model_norm(m, &w->final_norm, "norm", H, e))
        return -1;
    char p[16][160];
    static const char *const names[16] = {
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "input_layernorm",
        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "self_attn.q_norm",
        "self_attn.k_norm", "pre_feedforward_layernorm", "post_feedforward_layernorm", "self_attn.qkv_proj",
        "mlp.gate_up_proj"};
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &w->layers[l];
        for (int k = 0; k < 15; k++) snprintf(p[k], sizeof p[k], "layers.%d.%s", l, names[k]);
        if (fam->fused) {
            /* Phi-3: q, k, v are rows of qkv_proj in that order; gate_up_proj's first
             * half is the gate (transformers' chunk(2)) */
            if (model_linear_part(m, &L->q, p[13], H, QW + 2 * KW, 0, QW, e) ||
                model_linear_part(m, &L->k, p[13], H, QW + 2 * KW, QW, KW, e) ||
                model_linear_part(m, &L->v, p[13], H, QW + 2 * KW, QW + KW, KW, e) ||
                model_linear_part(m, &L->gate, p[14], H, 2 * FF, 0, FF, e) ||
                model_linear_part(m, &L->up, p[14], H, 2 * FF, FF, FF, e))
                return -1;
        } else if (model_linear(m, &L->q, p[0], H, QW, c->qkv_bias, e) ||
                   model_linear(m, &L->k, p[1], H, KW, c->qkv_bias, e) ||
                   model_linear(m, &L->v, p[2], H, KW, c->qkv_bias, e)) {
            return -1;
        }
        if (model_linear(m, &L->o, p[3], QW, H, c->o_bias, e) || model_norm(m, &L->attn_norm, p[4], H, e)) return -1;
        if (c->num_experts && !c->layer_dense[l]) {
            if (load_experts(m, L, l, fam, e)) return -1;
        } else if ((!fam->fused && (model_linear(m, &L->gate, p[6], H, FF, c->mlp_bias, e) ||
                                    model_linear(m, &L->up, p[7], H, FF, c->mlp_bias, e))) ||
                   model_linear(m, &L->down, p[8], FF, H, c->mlp_bias, e)) {
            return -1;
        }
        if (c->sandwich_norm) {
            /* Gemma 2: post_attention_layernorm normalizes attention's output;
             * the MLP's input norm is pre_feedforward_layernorm */
            if (model_norm(m, &L->attn_post_norm, p[5], H, e) || model_norm(m, &L->mlp_norm, p[11], H, e) ||
                model_norm(m, &L->mlp_post_norm, p[12], H, e))
                return -1;
        } else if (model_norm(m, &L->mlp_norm, p[5], H, e)) {
            return -1;
        }
        /* OLMoE's norms span the whole projection */
        const int64_t qn = c->qk_norm_full ? QW : dh, kn = c->qk_norm_full ? KW : dh;
        if (c->qk_norm && (model_norm(m, &L->q_norm, p[9], qn, e) || model_norm(m, &L->k_norm, p[10], kn, e)))
            return -1;
        char sk[160];
        snprintf(sk, sizeof sk, "layers.%d.self_attn.sinks", l);
        if (c->attn_sinks && !(L->sinks = model_tensor(m, sk, 1, c->num_heads, 0, e))) return -1;
    }
    /* lm_head: the embeddings when tied; a base model saved without it has no head */
    w->head.softcap = c->final_softcap;
    if (c->tie_word_embeddings) w->head.out = w->tok_emb;
    else if (model_has_tensor(m, "lm_head.weight") && model_linear(m, &w->head.out, "lm_head", H, c->vocab_size, 0, e))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- GGUF */

/* Gemma 2 and 3 as llama.cpp's converter writes them: norm weights already
 * 1 + w (so no offset here), soft-capping (Gemma 2) and the sliding window
 * under <arch>.*, GeGLU. Gemma 2 slides on even layers; Gemma 3 on five of
 * every six, which turn by llama.cpp's fixed local base 10000, unscaled. The
 * scores' scale is llama.cpp's rule: 1/sqrt(head_dim), except the 27B models'
 * 1/sqrt(hidden / heads), for the file stores no query_pre_attn_scalar. */
static int gemma_gguf_config(ModelConfig *c, const GgufFile *f, uint32_t layers, const char *arch,
                             const LlamaTraits *fam, const char *path, AvErr *e) {
    float cap = fam->softcap ? 50.0f : 0.0f, fcap = fam->softcap ? 30.0f : 0.0f;
    uint32_t window = 4096;
    char k1[64], k2[64], k3[64];
    snprintf(k1, sizeof k1, "%s.attn_logit_softcapping", arch);
    snprintf(k2, sizeof k2, "%s.final_logit_softcapping", arch);
    snprintf(k3, sizeof k3, "%s.attention.sliding_window", arch);
    if ((gguf_find_kv(f, k1) && gguf_get_f32(f, k1, &cap, e)) || (gguf_find_kv(f, k2) && gguf_get_f32(f, k2, &fcap, e)) ||
        (gguf_find_kv(f, k3) && gguf_get_u32(f, k3, &window, e)))
        return av_err_prefix(e, "%s", path);
    if (!(cap >= 0 && cap <= 1e9) || !(fcap >= 0 && fcap <= 1e9) || window > (1u << 24))
        return av_err(e, "%s: %s soft-capping or sliding window out of range", path, arch);
    c->hidden_act = ACT_GELU_TANH;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "gelu_pytorch_tanh");
    c->norm_offset = 0.0f;
    c->emb_scale = sqrtf((float)c->hidden_size);
    const int dh = c->head_dim ? c->head_dim : c->hidden_size / c->num_heads;
    const int big = fam->rope_local ? layers == 62 : layers == 46 && c->hidden_size == 4608;
    c->attn_scale = 1.0f / sqrtf(big ? (float)c->hidden_size / c->num_heads : (float)dh);
    c->attn_softcap = cap;
    c->final_softcap = fcap;
    c->sliding_window = (int)window;
    if (fam->rope_local) c->rope_local_theta = 10000.0f;
    for (uint32_t l = 0; l < layers && l < CFG_MAX_LAYERS; l++) {
        const int sliding = fam->slide == SLIDE_PATTERN ? (l + 1) % 6 != 0 : l % 2 == 0;
        c->layer_sliding[l] = window > 0 && sliding;
        c->layer_rope_local[l] = fam->rope_local && sliding;
    }
    c->sandwich_norm = 1;
    return 0;
}

/* Phi-3's LongRoPE as llama.cpp's converter writes it: the factors as the
 * tensors rope_factors_short/long (rotary_dim / 2 floats each), the original
 * context and the attention factor under <arch>.rope.scaling.*. transformers'
 * rule picks the set per pass (long past the original context), not
 * llama.cpp's per context size. */
static int longrope_gguf(ModelConfig *c, const GgufFile *f, const char *arch, const char *path, AvErr *e) {
    const GgufTensor *ts = gguf_find_tensor(f, "rope_factors_short.weight");
    const GgufTensor *tl = gguf_find_tensor(f, "rope_factors_long.weight");
    if (!ts && !tl) return 0;
    if (!ts || !tl || ts->type != 0 || tl->type != 0 || ts->n_dims != 1 || tl->n_dims != 1 || ts->dims[0] != tl->dims[0] ||
        ts->dims[0] > CFG_MAX_ROPE_FACTORS || ts->nbytes < ts->dims[0] * 4 || tl->nbytes < tl->dims[0] * 4)
        return av_err(e, "%s: rope_factors_short/long must be two F32 vectors of one length (at most %d)", path,
                      CFG_MAX_ROPE_FACTORS);
    c->rope_kind = ROPE_LONGROPE;
    c->rope_n_factors = (int)ts->dims[0];
    memcpy(c->rope_short, ts->data, (size_t)c->rope_n_factors * sizeof(float));
    memcpy(c->rope_long, tl->data, (size_t)c->rope_n_factors * sizeof(float));
    for (int i = 0; i < c->rope_n_factors; i++)
        if (!(c->rope_short[i] > 0 && c->rope_short[i] < 1e9) || !(c->rope_long[i] > 0 && c->rope_long[i] < 1e9))
            return av_err(e, "%s: rope factor %d is not a positive number", path, i);
    char k1[80], k2[80];
    uint32_t orig = (uint32_t)c->max_position_embeddings;
    float attn = 0;
    snprintf(k1, sizeof k1, "%s.rope.scaling.original_context_length", arch);
    snprintf(k2, sizeof k2, "%s.rope.scaling.attn_factor", arch);
    if ((gguf_find_kv(f, k1) && gguf_get_u32(f, k1, &orig, e)) || (gguf_find_kv(f, k2) && gguf_get_f32(f, k2, &attn, e)))
        return av_err_prefix(e, "%s", path);
    if (orig < 1 || orig > (1u << 24) || !(attn >= 0 && attn < 1e9))
        return av_err(e, "%s: LongRoPE's original context or attention factor is out of range", path);
    c->rope_orig_max_pos = (int)orig;
    c->rope_recompute_at = (int)orig; /* as transformers' Phi-3 generate() (see parse_rope_dict) */
    double factor = (double)c->max_position_embeddings / orig;
    c->rope_attn_factor = attn > 0 ? attn : factor <= 1.0 ? 1.0f : (float)sqrt(1 + log(factor) / log((double)orig));
    return 0;
}

/* Llama 3.1+'s llama3 rope scaling as llama.cpp's converter writes it: no
 * rope.scaling.type, but a tensor rope_freqs of rotary_dim / 2 F32 factors,
 * each frequency divided by its own (transformers' llama3 rule evaluated per
 * frequency; llama.cpp's ggml_rope_ext freq_factors). cfg_validate checks the
 * count once the rotary dims are known. */
static int rope_freqs_gguf(ModelConfig *c, const GgufTensor *t, const char *path, AvErr *e) {
    if (t->type != 0 || t->n_dims != 1 || t->dims[0] < 1 || t->dims[0] > CFG_MAX_ROPE_FACTORS || t->nbytes < t->dims[0] * 4)
        return av_err(e, "%s: rope_freqs.weight must be one F32 vector of at most %d factors", path, CFG_MAX_ROPE_FACTORS);
    if (c->rope_kind != ROPE_DEFAULT) return av_err(e, "%s: rope_freqs.weight with a rope scaling type as well", path);
    c->rope_kind = ROPE_FACTORS;
    c->rope_n_factors = (int)t->dims[0];
    memcpy(c->rope_short, t->data, (size_t)c->rope_n_factors * sizeof(float));
    for (int i = 0; i < c->rope_n_factors; i++)
        if (!(c->rope_short[i] > 0 && c->rope_short[i] < 1e9f))
            return av_err(e, "%s: rope_freqs.weight's factor %d is not a positive number", path, i);
    return 0;
}

/* YaRN as llama.cpp's converter writes it (gpt-oss): rope.scaling.factor,
 * .original_context_length, .yarn_beta_fast / .yarn_beta_slow (32 and 1 when
 * absent) and .yarn_attn_factor (else 0.1 ln factor + 1, as transformers).
 * The file does not say whether the ramp's ends were truncated: GptOssConfig's
 * YaRN does not truncate, so neither does this. */
static int yarn_gguf(ModelConfig *c, const GgufFile *f, const char *arch, const char *path, AvErr *e) {
    char k[5][96];
    const char *names[5] = {"factor", "original_context_length", "yarn_beta_fast", "yarn_beta_slow", "yarn_attn_factor"};
    for (int i = 0; i < 5; i++) snprintf(k[i], sizeof k[i], "%s.rope.scaling.%s", arch, names[i]);
    float factor = 0, fast = 32, slow = 1, attn = 0;
    uint32_t orig = 0;
    if (gguf_get_f32(f, k[0], &factor, e) || gguf_get_u32(f, k[1], &orig, e) ||
        (gguf_find_kv(f, k[2]) && gguf_get_f32(f, k[2], &fast, e)) ||
        (gguf_find_kv(f, k[3]) && gguf_get_f32(f, k[3], &slow, e)) ||
        (gguf_find_kv(f, k[4]) && gguf_get_f32(f, k[4], &attn, e)))
        return av_err_prefix(e, "%s", path);
    if (!(factor >= 1e-3f && factor <= 1e6f) || orig < 1 || orig > (1u << 24) || !(fast > 0 && fast < 1e6f) ||
        !(slow > 0 && slow < 1e6f) || !(attn >= 0 && attn < 1e9f))
        return av_err(e, "%s: a YaRN parameter in the metadata is out of range (factor %g, original context %u)", path,
                      (double)factor, orig);
    c->rope_kind = ROPE_YARN, c->rope_factor = factor, c->rope_orig_max_pos = (int)orig;
    c->rope_beta_fast = fast, c->rope_beta_slow = slow, c->rope_truncate = 0;
    c->rope_attn_factor = attn > 0 ? attn : (float)yarn_mscale(factor, 1.0);
    return 0;
}

/* Hyper-parameters as llama.cpp's converter writes them: "<arch>.<key>". */
int arch_llama_gguf_config(ModelConfig *c, const GgufFile *f, const char *path, const LlamaTraits *fam, AvErr *e) {
    const ArchSpec *spec = arch_spec(c->arch);
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", spec->gguf_arch, k), key)
    uint32_t layers, ctx, hidden, ff, heads, kv = 0, key_len = 0, rot = 0, swa = 0;
    float theta = 10000.0f, eps = 1e-5f, rope_factor = 1.0f;
    int linear = 0, yarn = 0;
    if (gguf_get_u32(f, KEY("block_count"), &layers, e) || gguf_get_u32(f, KEY("context_length"), &ctx, e) ||
        gguf_get_u32(f, KEY("embedding_length"), &hidden, e) || gguf_get_u32(f, KEY("feed_forward_length"), &ff, e) ||
        gguf_get_u32(f, KEY("attention.head_count"), &heads, e) ||
        gguf_get_f32(f, KEY("attention.layer_norm_rms_epsilon"), &eps, e))
        return av_err_prefix(e, "%s", path);
    if ((gguf_find_kv(f, KEY("attention.head_count_kv")) && gguf_get_u32(f, key, &kv, e)) ||
        (gguf_find_kv(f, KEY("attention.key_length")) && gguf_get_u32(f, key, &key_len, e)) ||
        (gguf_find_kv(f, KEY("rope.freq_base")) && gguf_get_f32(f, key, &theta, e)) ||
        (gguf_find_kv(f, KEY("rope.dimension_count")) && gguf_get_u32(f, key, &rot, e)) ||
        (!fam->gemma && gguf_find_kv(f, KEY("attention.sliding_window")) && gguf_get_u32(f, key, &swa, e)))
        return av_err_prefix(e, "%s", path);
    /* present and 0: no rotary dimensions at all (config.json's partial_rotary_factor 0 is refused too) */
    if (gguf_find_kv(f, KEY("rope.dimension_count")) && rot == 0)
        return av_err(e, "%s: %s is 0: rotary embeddings need at least 2 dimensions", path, key);
    if (gguf_find_kv(f, KEY("rope.scaling.type"))) {
        const char *t;
        size_t tl;
        if (gguf_get_str(f, key, &t, &tl, e)) return av_err_prefix(e, "%s", path);
        /* linear: llama.cpp's freq_scale = 1 / factor (Gemma 3: on its global layers only) */
        linear = tl == 6 && !memcmp(t, "linear", 6);
        if (tl == 4 && !memcmp(t, "yarn", 4) && fam->sinks) {
            if (yarn_gguf(c, f, spec->gguf_arch, path, e)) return -1;
            yarn = 1;
        }
        if (linear && gguf_find_kv(f, KEY("rope.scaling.factor")) && gguf_get_f32(f, key, &rope_factor, e))
            return av_err_prefix(e, "%s", path);
        if (!(tl == 4 && !memcmp(t, "none", 4)) && !linear && !yarn)
            return av_err(e, "%s: rope scaling \"%.*s\" in a GGUF file is not supported yet", path, (int)(tl < 40 ? tl : 40), t);
        if (linear && !(rope_factor >= 1e-3f && rope_factor <= 1e6f))
            return av_err(e, "%s: rope scaling factor %g is out of range", path, (double)rope_factor);
    }
    const GgufTensor *rf = gguf_find_tensor(f, "rope_freqs.weight");
    if (rf && strcmp(spec->gguf_arch, "llama") != 0) /* llama.cpp reads them in llama files only */
        return av_err(e, "%s: per-frequency rope factors (rope_freqs) in a %s file are not supported", path,
                      spec->gguf_arch);
    const GgufTensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return av_err(e, "%s: missing tensor 'token_embd.weight'", path);
#define FITS(v, hi) ((v) >= 1 && (v) <= (uint32_t)(hi))
    if (!FITS(layers, CFG_MAX_LAYERS) || !FITS(hidden, CFG_MAX_HIDDEN) || !FITS(ff, CFG_MAX_INTER) ||
        !FITS(heads, CFG_MAX_HEADS) || (kv && !FITS(kv, CFG_MAX_HEADS)) || !FITS(ctx, 1 << 24) ||
        (key_len && !FITS(key_len, 4096)) || (rot && !FITS(rot, 4096)) || swa > (1u << 24) ||
        !FITS(emb->dims[1], CFG_MAX_VOCAB) || !(eps >= 0 && eps <= 1) ||
        !(theta >= 1 && theta <= 1e12))
        return av_err(e, "%s: a hyper-parameter in the metadata is out of range (layers %u, width %u, ffn %u, "
                      "heads %u/%u, context %u)", path, layers, hidden, ff, heads, kv, ctx);
#undef FITS
#undef KEY
    c->num_layers = (int)layers, c->hidden_size = (int)hidden, c->intermediate_size = (int)ff;
    c->num_heads = (int)heads, c->num_kv_heads = kv ? (int)kv : (int)heads, c->head_dim = (int)key_len;
    c->max_position_embeddings = (int)ctx, c->vocab_size = (int)emb->dims[1];
    c->layer_norm_eps = eps, c->rope_theta = theta;
    if (!yarn) c->rope_kind = linear ? ROPE_LINEAR : ROPE_DEFAULT, c->rope_factor = linear ? rope_factor : 1.0f;
    if (rf && rope_freqs_gguf(c, rf, path, e)) return -1;
    c->rotary_dim = (int)rot; /* partial rotary (Phi-4-mini): fewer dims than head_dim */
    c->hidden_act = ACT_SILU;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "silu");
    if (fam->gemma && gemma_gguf_config(c, f, layers, spec->gguf_arch, fam, path, e)) return -1;
    if (fam->fused && longrope_gguf(c, f, spec->gguf_arch, path, e)) return -1;
    /* a window the file names applies to every layer (Phi-3's converter writes one); gpt-oss's to the
     * even layers (llama.cpp's swa pattern 2, GptOssConfig's alternation) */
    c->sliding_window = fam->gemma ? c->sliding_window : (int)swa;
    for (uint32_t l = 0; !fam->gemma && l < layers; l++) c->layer_sliding[l] = swa > 0 && (!fam->sinks || l % 2 == 0);
    c->causal = c->pre_ln = c->gated_mlp = 1;
    c->norm = NORM_RMS;
    c->pos = POS_ROPE;
    c->qkv_bias = fam->qkv_bias || gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
    c->o_bias = gguf_find_tensor(f, "blk.0.attn_output.bias") != NULL;
    c->qk_norm = fam->qk_norm;
    c->qk_norm_full = fam->qk_norm_full;
    c->attn_sinks = fam->sinks;
    c->tie_word_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
    /* llama.cpp's converter permutes a llama model's q and k rows into
     * interleaved rotary pairs; the forward pass puts them back */
    c->qk_rows_interleaved = fam->rows_interleaved;
    /* a mixture of experts (Mixtral in a llama file): the top-k weights renormalized, as Mixtral's */
    uint32_t n_exp = 0, n_used = 0;
    char ke[96], ku[96];
    snprintf(ke, sizeof ke, "%s.expert_count", spec->gguf_arch);
    snprintf(ku, sizeof ku, "%s.expert_used_count", spec->gguf_arch);
    if ((gguf_find_kv(f, ke) && gguf_get_u32(f, ke, &n_exp, e)) || (gguf_find_kv(f, ku) && gguf_get_u32(f, ku, &n_used, e)))
        return av_err_prefix(e, "%s", path);
    if (n_exp > 0) {
        if (n_exp > CFG_MAX_EXPERTS || n_used < 1 || n_used > CFG_MAX_TOP_K || n_used > n_exp)
            return av_err(e, "%s: expert_count %u / expert_used_count %u out of range (at most %d experts, %d per token)",
                          path, n_exp, n_used, CFG_MAX_EXPERTS, CFG_MAX_TOP_K);
        /* llama.cpp renormalizes the top-k weights of llama (Mixtral) and qwen3moe files (transformers
         * reads the latter with norm_topk_prob true), not OLMoE's (olmoe.cpp) */
        c->num_experts = (int)n_exp, c->experts_per_tok = (int)n_used, c->moe_renorm = fam->moe != MOE_OLMOE;
        /* gpt-oss (llama.cpp's softmax over the chosen logits, SwiGLU-OAI at its fixed 1.702 and 7) */
        if (fam->moe == MOE_GPTOSS) c->moe_topk_logits = 1, c->swiglu_limit = 7.0f, c->swiglu_alpha = 1.702f;
        /* each expert's width: qwen3moe names it apart; a llama file's feed_forward_length is it */
        uint32_t fe = (uint32_t)c->intermediate_size;
        char kf[96];
        snprintf(kf, sizeof kf, "%s.expert_feed_forward_length", spec->gguf_arch);
        if (gguf_find_kv(f, kf) && gguf_get_u32(f, kf, &fe, e)) return av_err_prefix(e, "%s", path);
        if (fe < 1 || fe > CFG_MAX_INTER) return av_err(e, "%s: expert_feed_forward_length %u is out of range", path, fe);
        c->moe_intermediate = (int)fe;
    }
    /* generation stops at the end of text and, as llama.cpp stops at every end-of-generation id,
     * at the end of a turn: an instruct model's chat template ends the assistant's turn with
     * eot_token_id (Llama 3's <|eot_id|>, Gemma's <end_of_turn>) or eom_token_id, which the
     * models' generation_config.json list beside eos_token_id */
    static const char *const stops[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                        "tokenizer.ggml.eom_token_id"};
    c->n_eos = 0;
    for (int k = 0; k < 3; k++) {
        uint32_t id;
        if (!gguf_find_kv(f, stops[k])) continue;
        if (gguf_get_u32(f, stops[k], &id, e)) return av_err_prefix(e, "%s", path);
        if (id >= (uint32_t)c->vocab_size)
            return av_err(e, "%s: %s %u is outside the vocabulary (%d)", path, stops[k], id, c->vocab_size);
        int seen = 0;
        for (int j = 0; j < c->n_eos; j++) seen |= c->eos_ids[j] == (int)id;
        if (!seen) c->eos_ids[c->n_eos++] = (int)id;
    }
    return cfg_validate(c, "embedding_length", "head_count", path, e);
}

/* transformers' names -> llama.cpp's (its LLM_TENSOR_NAMES for these families).
 * Gemma 2's norms around each sublayer have names of their own. */
int arch_llama_gguf_name(const char *hf, char *out, size_t len, GgufNames variant) {
    static const char *const whole[][2] = {
        {"embed_tokens.weight", "token_embd.weight"}, {"norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"}};
    static const char *const block[][2] = {
        {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"}, {"input_layernorm", "attn_norm"},
        {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"}, {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
        /* a mixture of experts (Mixtral as llama.cpp's llama files hold it): the router, then each
         * projection's experts stacked in one 3-D tensor */
        {"block_sparse_moe.gate", "ffn_gate_inp"}, {"block_sparse_moe.experts.w1", "ffn_gate_exps"},
        {"block_sparse_moe.experts.w3", "ffn_up_exps"}, {"block_sparse_moe.experts.w2", "ffn_down_exps"}};
    static const char *const gemma2_block[][2] = {
        {"post_attention_layernorm", "post_attention_norm"}, {"pre_feedforward_layernorm", "ffn_norm"},
        {"post_feedforward_layernorm", "post_ffw_norm"}};
    /* Phi-3's fused projections keep their fusion in the file; no separate up_proj */
    static const char *const phi3_block[][2] = {
        {"self_attn.qkv_proj", "attn_qkv"}, {"mlp.gate_up_proj", "ffn_up"}, {"mlp.up_proj", ""}};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(hf, whole[i][0])) return snprintf(out, len, "%s", whole[i][1]) < (int)len ? 0 : -1;
    int layer, used = 0;
    if (sscanf(hf, "layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
    const char *rest = hf + used, *dot = strrchr(rest, '.');
    if (!dot) return -1;
    for (size_t i = 0; variant == NAMES_GEMMA && i < sizeof gemma2_block / sizeof gemma2_block[0]; i++) {
        size_t bl = strlen(gemma2_block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, gemma2_block[i][0], bl))
            return snprintf(out, len, "blk.%d.%s%s", layer, gemma2_block[i][1], dot) < (int)len ? 0 : -1;
    }
    /* gpt-oss: the MLP's input norm is post_attention_norm; the sinks, router and stacked experts */
    static const char *const gptoss_block[][2] = {
        {"post_attention_layernorm", "post_attention_norm"}, {"mlp.router", "ffn_gate_inp"},
        {"mlp.experts.gate_proj", "ffn_gate_exps"}, {"mlp.experts.up_proj", "ffn_up_exps"},
        {"mlp.experts.down_proj", "ffn_down_exps"}};
    if (variant == NAMES_GPTOSS && !strcmp(rest, "self_attn.sinks"))
        return snprintf(out, len, "blk.%d.attn_sinks.weight", layer) < (int)len ? 0 : -1;
    for (size_t i = 0; variant == NAMES_GPTOSS && i < sizeof gptoss_block / sizeof gptoss_block[0]; i++) {
        size_t bl = strlen(gptoss_block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, gptoss_block[i][0], bl))
            return snprintf(out, len, "blk.%d.%s%s", layer, gptoss_block[i][1], dot) < (int)len ? 0 : -1;
    }
    for (size_t i = 0; variant == NAMES_PHI3 && i < sizeof phi3_block / sizeof phi3_block[0]; i++) {
        size_t bl = strlen(phi3_block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, phi3_block[i][0], bl)) {
            if (!phi3_block[i][1][0]) return -1;
            return snprintf(out, len, "blk.%d.%s%s", layer, phi3_block[i][1], dot) < (int)len ? 0 : -1;
        }
    }
    for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
        size_t bl = strlen(block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, block[i][0], bl))
            return snprintf(out, len, "blk.%d.%s%s", layer, block[i][1], dot) < (int)len ? 0 : -1;
    }
    return -1;
}

/* ---------------------------------------------------------------- Llama */

/* llama.cpp's converter permuted a llama file's q/k rows into rotary pairs */
static const LlamaTraits LLAMA = {.rows_interleaved = 1};
LLAMA_STYLE(llama, LLAMA)
LLAMA_STYLE_GGUF(llama, LLAMA, NAMES_LLAMA)

const ArchSpec arch_family_llama = {
    .kind = ARCH_LLAMA, .model_type = "llama", .arch_prefix = "Llama", .tensor_prefix = "model.",
    .hidden_key = "hidden_size", .heads_key = "num_attention_heads",
    .parse = llama_parse, .load = llama_load, .tokenizer = TOK_SOURCE_JSON,
    .gguf_arch = "llama", .gguf_config = llama_gguf_config, .gguf_name = llama_gguf_name,
};
