/* arch_llama.c — Llama-style decoders: Llama (2, 3.x, TinyLlama, SmolLM),
 * Mistral, Qwen2, Qwen3 and Gemma 2. Pre-RMSNorm causal decoders with rotary
 * positions, grouped-query attention and gated MLPs; what sets each apart:
 *   mistral  sliding-window attention
 *   qwen2    q/k/v biases; sliding window from max_window_layers on
 *   qwen3    per-head RMSNorm of q and k before rotary
 *   gemma2   RMSNorm scaling by 1 + w, embeddings times sqrt(hidden), GeGLU,
 *            query_pre_attn_scalar, attention-logit soft-capping, sandwich
 *            norms around both sublayers, sliding window on alternate layers */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "gguf.h"
#include "model.h"

/* Which layers slide when config.json has no "layer_types". */
typedef enum { SLIDE_ALL = 0, SLIDE_ALTERNATE, SLIDE_FROM_MAX_WINDOW } SlideRule;

/* What sets one family apart from Llama: each family's parse passes its own,
 * so the shared code tests traits, never a family's name. */
typedef struct {
    int gemma;          /* Gemma 2's block: 1 + w norms, sqrt(hidden) embeddings, GeGLU, soft-caps,
                           sandwich norms, head_dim 256, tied embeddings */
    int qkv_bias;       /* q/k/v always biased and the output never; no "attention_bias" key (Qwen2) */
    int qk_norm;        /* per-head RMSNorm of q and k before rotary (Qwen3) */
    int window;         /* the sliding window when the config names none (Gemma 2: 4096) */
    int window_off;     /* "use_sliding_window" defaults to false (Qwen) */
    SlideRule slide;
    int rows_interleaved; /* llama.cpp's converter permuted q/k rows into rotary pairs (its llama files) */
} LlamaTraits;

static const LlamaTraits LLAMA = {.rows_interleaved = 1}, MISTRAL = {0},
                         QWEN2 = {.qkv_bias = 1, .window_off = 1, .slide = SLIDE_FROM_MAX_WINDOW},
                         QWEN3 = {.qk_norm = 1, .window_off = 1, .slide = SLIDE_FROM_MAX_WINDOW},
                         GEMMA2 = {.gemma = 1, .window = 4096, .slide = SLIDE_ALTERNATE};

/* Rotary positions as config.json gives them: transformers 5's
 * "rope_parameters", or the older "rope_theta" + "rope_scaling". */
static int parse_rope(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    c->rope_theta = 10000.0f;
    c->rope_kind = ROPE_DEFAULT;
    c->rope_factor = 1.0f;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (cfg_opt_float(root, "rope_theta", 1, 1e12, &c->rope_theta, path, e)) return -1;
    const cJSON *r = NULL;
    if (params && !cJSON_IsNull(params)) {
        if (!cJSON_IsObject(params)) return av_err(e, "%s: \"rope_parameters\" must be an object", path);
        if (cfg_opt_float(params, "rope_theta", 1, 1e12, &c->rope_theta, path, e)) return -1;
        r = params;
    }
    if (scaling && !cJSON_IsNull(scaling)) {
        if (!cJSON_IsObject(scaling)) return av_err(e, "%s: \"rope_scaling\" must be an object or null", path);
        r = scaling;
    }
    if (!r) return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(r, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "default";
    if (!strcmp(t, "default")) return 0;
    if (!strcmp(t, "linear")) c->rope_kind = ROPE_LINEAR;
    else if (!strcmp(t, "dynamic")) c->rope_kind = ROPE_DYNAMIC;
    else if (!strcmp(t, "llama3")) c->rope_kind = ROPE_LLAMA3;
    else
        return av_err(e, "%s: rope type \"%.40s\" is not supported (default, linear, dynamic, llama3)", path, t);
    c->rope_orig_max_pos = c->max_position_embeddings;
    c->rope_low_freq = 1.0f, c->rope_high_freq = 4.0f;
    if (cJSON_GetObjectItemCaseSensitive(r, "factor") == NULL)
        return av_err(e, "%s: rope type \"%s\" needs a \"factor\"", path, t);
    if (cfg_opt_float(r, "factor", 1e-3, 1e6, &c->rope_factor, path, e) ||
        cfg_opt_int(r, "original_max_position_embeddings", 1, 1 << 24, &c->rope_orig_max_pos, path, e) ||
        cfg_opt_float(r, "low_freq_factor", 1e-6, 1e6, &c->rope_low_freq, path, e) ||
        cfg_opt_float(r, "high_freq_factor", 1e-6, 1e6, &c->rope_high_freq, path, e))
        return -1;
    if (c->rope_kind == ROPE_LLAMA3 && !(c->rope_high_freq > c->rope_low_freq))
        return av_err(e, "%s: rope llama3 needs high_freq_factor > low_freq_factor", path);
    return 0;
}

/* Which layers use the sliding window: config.json's "layer_types" when
 * present (transformers 5 writes it), else each family's rule. */
static int parse_sliding(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
    int use = !fam->window_off, max_window_layers = 0;
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
            c->layer_sliding[l++] = !strcmp(t->valuestring, "sliding_attention") && c->sliding_window > 0;
        }
        return 0;
    }
    for (int l = 0; l < c->num_layers && c->sliding_window > 0; l++) {
        if (fam->slide == SLIDE_ALTERNATE) c->layer_sliding[l] = l % 2 == 0;
        else if (fam->slide == SLIDE_FROM_MAX_WINDOW) c->layer_sliding[l] = l >= max_window_layers;
        else c->layer_sliding[l] = 1;
    }
    return 0;
}

static int llama_parse(ModelConfig *c, const cJSON *root, const char *path, const LlamaTraits *fam, AvErr *e) {
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
    c->qkv_bias = fam->qkv_bias;
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
    c->causal = c->pre_ln = c->gated_mlp = 1;
    c->norm = NORM_RMS;
    c->pos = POS_ROPE;
    c->qk_norm = fam->qk_norm;
    if (gemma) {
        float qpas = 256, cap = 50, fcap = 30;
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
    if (parse_rope(c, root, path, e) || parse_sliding(c, root, path, fam, e)) return -1;
    return 0;
}

/* Each family's parse: the shared one with its traits. */
#define FAMILY_PARSE(name, traits)                                                                  \
    int arch_##name##_parse(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {        \
        return llama_parse(c, root, path, &traits, e);                                              \
    }
FAMILY_PARSE(llama, LLAMA)
FAMILY_PARSE(mistral, MISTRAL)
FAMILY_PARSE(qwen2, QWEN2)
FAMILY_PARSE(qwen3, QWEN3)
FAMILY_PARSE(gemma2, GEMMA2)

/* Tensor names as transformers' Llama-style modules; the base model's, with
 * "model." before them in …ForCausalLM checkpoints (arch.c's prefix). */
int arch_llama_load(Model *m, AvErr *e) {
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
        "self_attn.k_norm", "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    for (int l = 0; l < c->num_layers; l++) {
        LayerWeights *L = &w->layers[l];
        for (int k = 0; k < 13; k++) snprintf(p[k], sizeof p[k], "layers.%d.%s", l, names[k]);
        if (model_linear(m, &L->q, p[0], H, QW, c->qkv_bias, e) || model_linear(m, &L->k, p[1], H, KW, c->qkv_bias, e) ||
            model_linear(m, &L->v, p[2], H, KW, c->qkv_bias, e) || model_linear(m, &L->o, p[3], QW, H, c->o_bias, e) ||
            model_norm(m, &L->attn_norm, p[4], H, e) || model_linear(m, &L->gate, p[6], H, FF, c->mlp_bias, e) ||
            model_linear(m, &L->up, p[7], H, FF, c->mlp_bias, e) || model_linear(m, &L->down, p[8], FF, H, c->mlp_bias, e))
            return -1;
        if (c->sandwich_norm) {
            /* Gemma 2: post_attention_layernorm normalizes attention's output;
             * the MLP's input norm is pre_feedforward_layernorm */
            if (model_norm(m, &L->attn_post_norm, p[5], H, e) || model_norm(m, &L->mlp_norm, p[11], H, e) ||
                model_norm(m, &L->mlp_post_norm, p[12], H, e))
                return -1;
        } else if (model_norm(m, &L->mlp_norm, p[5], H, e)) {
            return -1;
        }
        if (c->qk_norm && (model_norm(m, &L->q_norm, p[9], dh, e) || model_norm(m, &L->k_norm, p[10], dh, e)))
            return -1;
    }
    /* lm_head: the embeddings when tied; a base model saved without it has no head */
    w->head.softcap = c->final_softcap;
    if (c->tie_word_embeddings) w->head.out = w->tok_emb;
    else if (model_has_tensor(m, "lm_head.weight") && model_linear(m, &w->head.out, "lm_head", H, c->vocab_size, 0, e))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- GGUF */

/* Gemma 2 as llama.cpp's converter writes it: norm weights already 1 + w
 * (so no offset here), soft-capping and the sliding window under gemma2.*,
 * the window on even layers, GeGLU. The scores' scale is llama.cpp's rule:
 * 1/sqrt(head_dim), except the 27B model's 1/sqrt(hidden / heads), for the
 * file stores no query_pre_attn_scalar. */
static int gemma2_gguf_config(ModelConfig *c, const GgufFile *f, uint32_t layers, const char *path, AvErr *e) {
    float cap = 50.0f, fcap = 30.0f;
    uint32_t window = 4096;
    if ((gguf_find_kv(f, "gemma2.attn_logit_softcapping") && gguf_get_f32(f, "gemma2.attn_logit_softcapping", &cap, e)) ||
        (gguf_find_kv(f, "gemma2.final_logit_softcapping") && gguf_get_f32(f, "gemma2.final_logit_softcapping", &fcap, e)) ||
        (gguf_find_kv(f, "gemma2.attention.sliding_window") && gguf_get_u32(f, "gemma2.attention.sliding_window", &window, e)))
        return av_err_prefix(e, "%s", path);
    if (!(cap >= 0 && cap <= 1e9) || !(fcap >= 0 && fcap <= 1e9) || window > (1u << 24))
        return av_err(e, "%s: gemma2 soft-capping or sliding window out of range", path);
    c->hidden_act = ACT_GELU_TANH;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "gelu_pytorch_tanh");
    c->norm_offset = 0.0f;
    c->emb_scale = sqrtf((float)c->hidden_size);
    const int dh = c->head_dim ? c->head_dim : c->hidden_size / c->num_heads;
    c->attn_scale = 1.0f / sqrtf(layers == 46 && c->hidden_size == 4608 ? (float)c->hidden_size / c->num_heads : (float)dh);
    c->attn_softcap = cap;
    c->final_softcap = fcap;
    c->sliding_window = (int)window;
    for (uint32_t l = 0; l < layers && l < CFG_MAX_LAYERS; l++) c->layer_sliding[l] = window > 0 && l % 2 == 0;
    c->sandwich_norm = 1;
    return 0;
}

/* Hyper-parameters as llama.cpp's converter writes them: "<arch>.<key>". */
static int llama_gguf_config(ModelConfig *c, const GgufFile *f, const char *path, const LlamaTraits *fam, AvErr *e) {
    const ArchSpec *spec = arch_spec(c->arch);
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", spec->gguf_arch, k), key)
    uint32_t layers, ctx, hidden, ff, heads, kv = 0, key_len = 0;
    float theta = 10000.0f, eps = 1e-5f;
    if (gguf_get_u32(f, KEY("block_count"), &layers, e) || gguf_get_u32(f, KEY("context_length"), &ctx, e) ||
        gguf_get_u32(f, KEY("embedding_length"), &hidden, e) || gguf_get_u32(f, KEY("feed_forward_length"), &ff, e) ||
        gguf_get_u32(f, KEY("attention.head_count"), &heads, e) ||
        gguf_get_f32(f, KEY("attention.layer_norm_rms_epsilon"), &eps, e))
        return av_err_prefix(e, "%s", path);
    if ((gguf_find_kv(f, KEY("attention.head_count_kv")) && gguf_get_u32(f, key, &kv, e)) ||
        (gguf_find_kv(f, KEY("attention.key_length")) && gguf_get_u32(f, key, &key_len, e)) ||
        (gguf_find_kv(f, KEY("rope.freq_base")) && gguf_get_f32(f, key, &theta, e)))
        return av_err_prefix(e, "%s", path);
    if (gguf_find_kv(f, KEY("rope.scaling.type"))) {
        const char *t;
        size_t tl;
        if (gguf_get_str(f, key, &t, &tl, e)) return av_err_prefix(e, "%s", path);
        if (!(tl == 4 && !memcmp(t, "none", 4)))
            return av_err(e, "%s: rope scaling \"%.*s\" in a GGUF file is not supported yet", path, (int)(tl < 40 ? tl : 40), t);
    }
    if (gguf_find_tensor(f, "rope_freqs.weight"))
        return av_err(e, "%s: per-frequency rope factors (rope_freqs, Llama 3.1+) are not supported yet", path);
    const GgufTensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return av_err(e, "%s: missing tensor 'token_embd.weight'", path);
#define FITS(v, hi) ((v) >= 1 && (v) <= (uint32_t)(hi))
    if (!FITS(layers, CFG_MAX_LAYERS) || !FITS(hidden, CFG_MAX_HIDDEN) || !FITS(ff, CFG_MAX_INTER) ||
        !FITS(heads, CFG_MAX_HEADS) || (kv && !FITS(kv, CFG_MAX_HEADS)) || !FITS(ctx, 1 << 24) ||
        (key_len && !FITS(key_len, 4096)) || !FITS(emb->dims[1], CFG_MAX_VOCAB) || !(eps >= 0 && eps <= 1) ||
        !(theta >= 1 && theta <= 1e12))
        return av_err(e, "%s: a hyper-parameter in the metadata is out of range (layers %u, width %u, ffn %u, "
                      "heads %u/%u, context %u)", path, layers, hidden, ff, heads, kv, ctx);
#undef FITS
#undef KEY
    c->num_layers = (int)layers, c->hidden_size = (int)hidden, c->intermediate_size = (int)ff;
    c->num_heads = (int)heads, c->num_kv_heads = kv ? (int)kv : (int)heads, c->head_dim = (int)key_len;
    c->max_position_embeddings = (int)ctx, c->vocab_size = (int)emb->dims[1];
    c->layer_norm_eps = eps, c->rope_theta = theta, c->rope_kind = ROPE_DEFAULT, c->rope_factor = 1.0f;
    c->hidden_act = ACT_SILU;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "silu");
    if (fam->gemma && gemma2_gguf_config(c, f, layers, path, e)) return -1;
    c->causal = c->pre_ln = c->gated_mlp = 1;
    c->norm = NORM_RMS;
    c->pos = POS_ROPE;
    c->qkv_bias = fam->qkv_bias || gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
    c->o_bias = gguf_find_tensor(f, "blk.0.attn_output.bias") != NULL;
    c->qk_norm = fam->qk_norm;
    c->tie_word_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
    /* llama.cpp's converter permutes a llama model's q and k rows into
     * interleaved rotary pairs; the forward pass puts them back */
    c->qk_rows_interleaved = fam->rows_interleaved;
    uint32_t eos;
    if (gguf_find_kv(f, "tokenizer.ggml.eos_token_id")) {
        if (gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos, e)) return av_err_prefix(e, "%s", path);
        if (eos >= (uint32_t)c->vocab_size)
            return av_err(e, "%s: tokenizer.ggml.eos_token_id %u is outside the vocabulary (%d)", path, eos, c->vocab_size);
        c->eos_ids[0] = (int)eos, c->n_eos = 1;
    }
    return cfg_validate(c, "embedding_length", "head_count", path, e);
}

/* Each family's reader of llama.cpp's metadata (the families llama.cpp writes). */
#define FAMILY_GGUF(name, traits)                                                                   \
    int arch_##name##_gguf_config(ModelConfig *c, const GgufFile *f, const char *path, AvErr *e) { \
        return llama_gguf_config(c, f, path, &traits, e);                                           \
    }
FAMILY_GGUF(llama, LLAMA)
FAMILY_GGUF(qwen2, QWEN2)
FAMILY_GGUF(qwen3, QWEN3)
FAMILY_GGUF(gemma2, GEMMA2)

/* transformers' names -> llama.cpp's (its LLM_TENSOR_NAMES for these families).
 * Gemma 2's norms around each sublayer have names of their own. */
static int gguf_name(const char *hf, char *out, size_t len, int gemma2) {
    static const char *const whole[][2] = {
        {"embed_tokens.weight", "token_embd.weight"}, {"norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"}};
    static const char *const block[][2] = {
        {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"}, {"input_layernorm", "attn_norm"},
        {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"}, {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"}};
    static const char *const gemma2_block[][2] = {
        {"post_attention_layernorm", "post_attention_norm"}, {"pre_feedforward_layernorm", "ffn_norm"},
        {"post_feedforward_layernorm", "post_ffw_norm"}};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(hf, whole[i][0])) return snprintf(out, len, "%s", whole[i][1]) < (int)len ? 0 : -1;
    int layer, used = 0;
    if (sscanf(hf, "layers.%d.%n", &layer, &used) != 1 || used == 0) return -1;
    const char *rest = hf + used, *dot = strrchr(rest, '.');
    if (!dot) return -1;
    for (size_t i = 0; gemma2 && i < sizeof gemma2_block / sizeof gemma2_block[0]; i++) {
        size_t bl = strlen(gemma2_block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, gemma2_block[i][0], bl))
            return snprintf(out, len, "blk.%d.%s%s", layer, gemma2_block[i][1], dot) < (int)len ? 0 : -1;
    }
    for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
        size_t bl = strlen(block[i][0]);
        if ((size_t)(dot - rest) == bl && !strncmp(rest, block[i][0], bl))
            return snprintf(out, len, "blk.%d.%s%s", layer, block[i][1], dot) < (int)len ? 0 : -1;
    }
    return -1;
}

int arch_llama_gguf_name(const char *hf, char *out, size_t len) { return gguf_name(hf, out, len, 0); }
int arch_gemma2_gguf_name(const char *hf, char *out, size_t len) { return gguf_name(hf, out, len, 1); }
