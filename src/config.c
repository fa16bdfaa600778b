/* config.c — config.json parsing and validation. */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Bounds that refuse absurd configs before anything is allocated from them.
 * Generous: they admit every published BERT-family size. */
#define MAX_VOCAB 1000000
#define MAX_HIDDEN 16384
#define MAX_LAYERS 256
#define MAX_HEADS 256
#define MAX_INTER 131072
#define MAX_POS 65536
#define MAX_TYPES 1024

const char *cfg_act_name(ActKind a) {
    switch (a) {
    case ACT_GELU: return "gelu";
    case ACT_GELU_TANH: return "gelu_new";
    case ACT_RELU: return "relu";
    }
    return "?";
}

static int get_int(const cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return av_err(e, "%s: missing key \"%s\"", path, key);
    if (!cJSON_IsNumber(v)) return av_err(e, "%s: \"%s\" must be an integer", path, key);
    /* range first: converting a huge double to an integer type is undefined */
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return av_err(e, "%s: \"%s\" = %.0f is out of range [%d, %d]", path, key, v->valuedouble, lo, hi);
    if (v->valuedouble != (double)(int)v->valuedouble)
        return av_err(e, "%s: \"%s\" must be an integer", path, key);
    *out = (int)v->valuedouble;
    return 0;
}

/* An optional key: absent leaves *out as is. */
static int opt_int(const cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    return get_int(root, key, lo, hi, out, path, e);
}

static int opt_eps(const cJSON *root, const char *key, float *out, const char *path, AvErr *e) {
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!eps) return 0;
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble >= 0) || eps->valuedouble > 1)
        return av_err(e, "%s: \"%s\" must be a number in [0, 1]", path, key);
    *out = (float)eps->valuedouble;
    return 0;
}

static int opt_bool(const cJSON *root, const char *key, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return av_err(e, "%s: \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int parse_act(BertConfig *c, const cJSON *root, const char *key, const char *dflt, const char *path, AvErr *e) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, key);
    const char *a = dflt;
    if (act) {
        if (!cJSON_IsString(act)) return av_err(e, "%s: \"%s\" must be a string", path, key);
        a = act->valuestring;
    }
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "%s", a);
    if (!strcmp(a, "gelu")) c->hidden_act = ACT_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh")) c->hidden_act = ACT_GELU_TANH;
    else if (!strcmp(a, "relu")) c->hidden_act = ACT_RELU;
    else
        return av_err(e, "%s: unknown %s \"%.40s\" (supported: gelu, gelu_new, gelu_pytorch_tanh, relu)", path, key,
                      a);
    return 0;
}

/* The family, from model_type or else the first of "architectures" (old
 * configs have only that); a config with neither is taken as BERT. */
static int detect_arch(BertConfig *c, const cJSON *root, const char *path, AvErr *e) {
    static const struct {
        const char *type, *arch_prefix;
        ArchKind kind;
    } known[] = {{"bert", "Bert", ARCH_BERT},
                 {"roberta", "Roberta", ARCH_ROBERTA},
                 {"distilbert", "DistilBert", ARCH_DISTILBERT},
                 {"gpt2", "GPT2", ARCH_GPT2}};
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !cJSON_IsString(mt)) return av_err(e, "%s: \"model_type\" must be a string", path);
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        size_t pl = strlen(known[i].arch_prefix);
        int by_type = mt && !strcmp(mt->valuestring, known[i].type);
        int by_arch = !mt && cJSON_IsString(a0) && !strncmp(a0->valuestring, known[i].arch_prefix, pl);
        if (by_type || by_arch) {
            c->arch = known[i].kind;
            snprintf(c->model_type, sizeof c->model_type, "%s", known[i].type);
            return 0;
        }
    }
    if (!mt && !cJSON_IsString(a0)) {
        c->arch = ARCH_BERT;
        snprintf(c->model_type, sizeof c->model_type, "bert");
        return 0;
    }
    return av_err(e, "%s: model %s \"%.40s\" is not supported (attnviz runs bert, roberta, distilbert and gpt2)", path,
                  mt ? "type" : "architecture", mt ? mt->valuestring : a0->valuestring);
}

/* BERT and RoBERTa share BertConfig's key names. */
static int parse_bert_keys(BertConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (get_int(root, "vocab_size", 1, MAX_VOCAB, &c->vocab_size, path, e) ||
        get_int(root, "hidden_size", 1, MAX_HIDDEN, &c->hidden_size, path, e) ||
        get_int(root, "num_hidden_layers", 1, MAX_LAYERS, &c->num_layers, path, e) ||
        get_int(root, "num_attention_heads", 1, MAX_HEADS, &c->num_heads, path, e) ||
        get_int(root, "intermediate_size", 1, MAX_INTER, &c->intermediate_size, path, e) ||
        get_int(root, "max_position_embeddings", 1, MAX_POS, &c->max_position_embeddings, path, e))
        return -1;
    c->type_vocab_size = 2;
    c->layer_norm_eps = 1e-12f;
    if (opt_int(root, "type_vocab_size", 1, MAX_TYPES, &c->type_vocab_size, path, e) ||
        opt_eps(root, "layer_norm_eps", &c->layer_norm_eps, path, e) ||
        parse_act(c, root, "hidden_act", "gelu", path, e))
        return -1;
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
    if (pet && (!cJSON_IsString(pet) || strcmp(pet->valuestring, "absolute") != 0))
        return av_err(e, "%s: position_embedding_type must be \"absolute\"", path);
    if (c->arch == ARCH_ROBERTA) {
        /* RoBERTa numbers positions from padding_idx + 1 (HF create_position_ids_from_input_ids) */
        int pad = 1;
        if (opt_int(root, "pad_token_id", 0, MAX_POS - 2, &pad, path, e)) return -1;
        c->pos_offset = pad + 1;
        c->pad_token_id = pad;
        if (c->pos_offset >= c->max_position_embeddings)
            return av_err(e, "%s: pad_token_id %d leaves no positions of max_position_embeddings %d", path, pad,
                          c->max_position_embeddings);
    }
    return 0;
}

static int parse_distilbert_keys(BertConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (get_int(root, "vocab_size", 1, MAX_VOCAB, &c->vocab_size, path, e) ||
        get_int(root, "dim", 1, MAX_HIDDEN, &c->hidden_size, path, e) ||
        get_int(root, "n_layers", 1, MAX_LAYERS, &c->num_layers, path, e) ||
        get_int(root, "n_heads", 1, MAX_HEADS, &c->num_heads, path, e) ||
        get_int(root, "hidden_dim", 1, MAX_INTER, &c->intermediate_size, path, e) ||
        get_int(root, "max_position_embeddings", 1, MAX_POS, &c->max_position_embeddings, path, e) ||
        parse_act(c, root, "activation", "gelu", path, e))
        return -1;
    c->layer_norm_eps = 1e-12f; /* fixed in DistilBERT's modules */
    return 0;
}

static int parse_gpt2_keys(BertConfig *c, const cJSON *root, const char *path, AvErr *e) {
    if (get_int(root, "vocab_size", 1, MAX_VOCAB, &c->vocab_size, path, e) ||
        get_int(root, "n_embd", 1, MAX_HIDDEN, &c->hidden_size, path, e) ||
        get_int(root, "n_layer", 1, MAX_LAYERS, &c->num_layers, path, e) ||
        get_int(root, "n_head", 1, MAX_HEADS, &c->num_heads, path, e) ||
        get_int(root, "n_positions", 1, MAX_POS, &c->max_position_embeddings, path, e))
        return -1;
    if (c->hidden_size > MAX_INTER / 4) return av_err(e, "%s: \"n_embd\" = %d is too large", path, c->hidden_size);
    c->intermediate_size = 4 * c->hidden_size; /* n_inner: null means 4 * n_embd */
    c->layer_norm_eps = 1e-5f;
    int scale = 1;
    if (opt_int(root, "n_inner", 1, MAX_INTER, &c->intermediate_size, path, e) ||
        opt_eps(root, "layer_norm_epsilon", &c->layer_norm_eps, path, e) ||
        parse_act(c, root, "activation_function", "gelu_new", path, e) ||
        opt_bool(root, "scale_attn_weights", &scale, path, e) ||
        opt_bool(root, "scale_attn_by_inverse_layer_idx", &c->inverse_layer_scale, path, e))
        return -1;
    if (!scale) return av_err(e, "%s: \"scale_attn_weights\": false is not supported", path);
    c->causal = 1;
    c->pre_ln = 1;
    return 0;
}

int cfg_parse(BertConfig *c, const char *json, size_t len, const char *path, AvErr *e) {
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return av_err(e, "%s: not valid JSON", path);
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        av_err(e, "%s: not a JSON object", path);
        goto done;
    }
    if (detect_arch(c, root, path, e) != 0) goto done;
    switch (c->arch) {
    case ARCH_BERT:
    case ARCH_ROBERTA: rc = parse_bert_keys(c, root, path, e); break;
    case ARCH_DISTILBERT: rc = parse_distilbert_keys(c, root, path, e); break;
    case ARCH_GPT2: rc = parse_gpt2_keys(c, root, path, e); break;
    }
    if (rc != 0) goto done;
    rc = -1;
    if (c->hidden_size % c->num_heads != 0) {
        static const char *names[][2] = {[ARCH_BERT] = {"hidden_size", "num_attention_heads"},
                                         [ARCH_ROBERTA] = {"hidden_size", "num_attention_heads"},
                                         [ARCH_DISTILBERT] = {"dim", "n_heads"},
                                         [ARCH_GPT2] = {"n_embd", "n_head"}};
        av_err(e, "%s: %s %d is not divisible by %s %d", path, names[c->arch][0], c->hidden_size,
               names[c->arch][1], c->num_heads);
        goto done;
    }
    c->is_demo = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "attnviz_demo"));
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int cfg_load(BertConfig *c, const char *path, AvErr *e) {
    char *buf;
    size_t len;
    if (av_read_file(path, 1 << 20, &buf, &len, e) != 0) return -1;
    int rc = cfg_parse(c, buf, len, path, e);
    free(buf);
    return rc;
}

int cfg_read_lowercase(const char *path) {
    char *buf;
    size_t len;
    if (av_read_file(path, 1 << 20, &buf, &len, NULL) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    int rc = -1;
    const cJSON *v = root ? cJSON_GetObjectItemCaseSensitive(root, "do_lower_case") : NULL;
    if (cJSON_IsBool(v)) rc = cJSON_IsTrue(v) ? 1 : 0;
    cJSON_Delete(root);
    return rc;
}

void cfg_free_head_labels(char **labels, int n) {
    if (!labels) return;
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

int cfg_load_head_labels(const char *path, const BertConfig *c, char ***patterns, char ***descriptions, AvErr *e) {
    *patterns = *descriptions = NULL;
    char *buf;
    size_t len;
    if (av_read_file(path, 4 << 20, &buf, &len, e) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength(buf, len);
    free(buf);
    int n = c->num_layers * c->num_heads, rc = -1;
    char **pat = calloc((size_t)n, sizeof *pat), **desc = calloc((size_t)n, sizeof *desc);
    const cJSON *heads = root ? cJSON_GetObjectItemCaseSensitive(root, "heads") : NULL;
    if (!pat || !desc) {
        av_err(e, "%s: out of memory", path);
        goto done;
    }
    if (!cJSON_IsArray(heads)) {
        av_err(e, "%s: expected {\"heads\": [...]}", path);
        goto done;
    }
    const cJSON *h;
    int idx = 0;
    cJSON_ArrayForEach(h, heads) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(h, "layer"), *hd = cJSON_GetObjectItemCaseSensitive(h, "head");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(h, "pattern"), *d = cJSON_GetObjectItemCaseSensitive(h, "description");
        if (!cJSON_IsNumber(l) || !cJSON_IsNumber(hd) || !cJSON_IsString(p) || l->valueint < 0 ||
            l->valueint >= c->num_layers || hd->valueint < 0 || hd->valueint >= c->num_heads) {
            av_err(e, "%s: heads[%d] needs a valid layer, head and pattern", path, idx);
            goto done;
        }
        int k = l->valueint * c->num_heads + hd->valueint;
        free(pat[k]);
        free(desc[k]);
        pat[k] = strdup(p->valuestring);
        desc[k] = strdup(cJSON_IsString(d) ? d->valuestring : "");
        if (!pat[k] || !desc[k]) {
            av_err(e, "%s: out of memory", path);
            goto done;
        }
        idx++;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) {
        cfg_free_head_labels(pat, n);
        cfg_free_head_labels(desc, n);
    } else {
        *patterns = pat;
        *descriptions = desc;
    }
    return rc;
}
