/* config.c — config.json parsing and validation. */
#include "config.h"
#include "jsonread.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "util.h"

const char *cfg_act_name(ActKind a) {
    switch (a) {
    case ACT_GELU: return "gelu";
    case ACT_GELU_TANH: return "gelu_new";
    case ACT_RELU: return "relu";
    case ACT_SILU: return "silu";
    case ACT_QUICK_GELU: return "quick_gelu";
    }
    return "?";
}

int cfg_get_int(const cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e) {
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
int cfg_opt_int(const cJSON *root, const char *key, int lo, int hi, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    return cfg_get_int(root, key, lo, hi, out, path, e);
}

int cfg_opt_float(const cJSON *root, const char *key, double lo, double hi, float *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || !(v->valuedouble <= hi))
        return av_err(e, "%s: \"%s\" must be a number in [%g, %g]", path, key, lo, hi);
    *out = (float)v->valuedouble;
    return 0;
}

int cfg_opt_bool(const cJSON *root, const char *key, int *out, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return av_err(e, "%s: \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

int cfg_parse_act(ModelConfig *c, const cJSON *root, const char *key, const char *dflt, const char *path, AvErr *e) {
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
    else if (!strcmp(a, "silu") || !strcmp(a, "swish")) c->hidden_act = ACT_SILU;
    else if (!strcmp(a, "quick_gelu")) c->hidden_act = ACT_QUICK_GELU;
    else
        return av_err(e, "%s: unknown %s \"%.40s\" (supported: gelu, gelu_new, gelu_pytorch_tanh, relu, silu, "
                      "quick_gelu)", path, key, a);
    return 0;
}

/* The family, from model_type or else the first of "architectures" (old
 * configs have only that); a config with neither is taken as BERT. */
static const ArchSpec *detect_arch(const cJSON *root, const char *path, AvErr *e) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !cJSON_IsString(mt)) {
        av_err(e, "%s: \"model_type\" must be a string", path);
        return NULL;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const char *arch0 = cJSON_IsString(a0) ? a0->valuestring : NULL;
    if (!mt && !arch0) return arch_default();
    const ArchSpec *spec = arch_detect(mt ? mt->valuestring : NULL, arch0);
    /* vision-language models (image tokens inside a decoder's sequence) are named, not listed among
     * the families: one line saying what attnviz reads of them instead */
    static const char *const VLM[] = {"llava_next", "llava_onevision", "smolvlm",
                                      "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "paligemma", "mllama", "idefics2"};
    for (size_t i = 0; !spec && mt && i < sizeof VLM / sizeof VLM[0]; i++)
        if (!strcmp(mt->valuestring, VLM[i])) {
            av_err(e, "%s: \"%s\" is a vision-language model attnviz does not run yet (it runs llava, gemma3 and idefics3; "
                      "this one's vision tower alone as a clip or siglip folder, its text model alone, or a vision "
                      "encoder: docs/images.md)", path, VLM[i]);
            return NULL;
        }
    if (!spec)
        av_err(e, "%s: model %s \"%.40s\" is not supported (attnviz runs %.1000s)", path, mt ? "type" : "architecture",
               mt ? mt->valuestring : arch0, arch_supported_list());
    return spec;
}

int cfg_validate(ModelConfig *c, const char *hidden_key, const char *heads_key, const char *path, AvErr *e) {
    if (!c->num_kv_heads) c->num_kv_heads = c->num_heads;
    if (!c->head_dim) {
        if (c->hidden_size % c->num_heads != 0) {
            return av_err(e, "%s: %s %d is not divisible by %s %d", path, hidden_key, c->hidden_size, heads_key,
                          c->num_heads);
        }
        c->head_dim = c->hidden_size / c->num_heads;
    }
    if (c->num_heads % c->num_kv_heads != 0) {
        return av_err(e, "%s: %s %d is not a multiple of %d key/value heads", path, heads_key, c->num_heads,
                      c->num_kv_heads);
    }
    if (c->pos == POS_ROPE && c->head_dim % 2 != 0) {
        return av_err(e, "%s: head_dim %d is odd; rotary positions need pairs of dimensions", path, c->head_dim);
    }
    if (c->pos == POS_ROPE) {
        /* transformers: dim = int(head_dim * partial_rotary_factor) */
        if (!c->rotary_dim) c->rotary_dim = c->rope_partial > 0 ? (int)((double)c->head_dim * c->rope_partial) : c->head_dim;
        if (c->rotary_dim < 2 || c->rotary_dim > c->head_dim || c->rotary_dim % 2)
            return av_err(e, "%s: rotary dims %d (partial_rotary_factor) must be even and within head_dim %d", path,
                          c->rotary_dim, c->head_dim);
        if (c->rope_kind == ROPE_LONGROPE && c->rope_n_factors != c->rotary_dim / 2)
            return av_err(e, "%s: rope short_factor/long_factor have %d entries; rotary dims %d need %d", path,
                          c->rope_n_factors, c->rotary_dim, c->rotary_dim / 2);
        if (c->rope_kind == ROPE_FACTORS && c->rope_n_factors != c->rotary_dim / 2)
            return av_err(e, "%s: rope_freqs has %d entries; rotary dims %d need %d", path, c->rope_n_factors,
                          c->rotary_dim, c->rotary_dim / 2);
    }
    return 0;
}

int cfg_parse(ModelConfig *c, const char *json, size_t len, const char *path, AvErr *e) {
    memset(c, 0, sizeof *c);
    cJSON *root;
    const int pr = av_json_parse(&root, json, len, path, e);
    if (pr) return pr < 0 ? -1 : av_err(e, "%s: not valid JSON", path);
    int rc = -1;
    const ArchSpec *spec = NULL;
    if (!cJSON_IsObject(root)) {
        av_err(e, "%s: not a JSON object", path);
        goto done;
    }
    if (!(spec = detect_arch(root, path, e))) goto done;
    c->arch = spec->kind;
    snprintf(c->model_type, sizeof c->model_type, "%s", spec->model_type);
    if (spec->parse(c, root, path, e) != 0) goto done;
    if (cfg_validate(c, spec->hidden_key, spec->heads_key, path, e) != 0) goto done;
    if (cfg_parse_eos(c, root, path, e) != 0) goto done;
    c->is_demo = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "attnviz_demo"));
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int cfg_load(ModelConfig *c, const char *path, AvErr *e) {
    char *buf;
    size_t len;
    if (av_read_file(path, 1 << 20, &buf, &len, e) != 0) return -1;
    int rc = cfg_parse(c, buf, len, path, e);
    free(buf);
    return rc;
}

int cfg_parse_eos(ModelConfig *c, const cJSON *root, const char *path, AvErr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!v || cJSON_IsNull(v)) return 0;
    const cJSON *item = v;
    int n = 0, one = cJSON_IsNumber(v);
    if (!one && !cJSON_IsArray(v)) return av_err(e, "%s: \"eos_token_id\" must be an id or a list of ids", path);
    if (!one) item = v->child;
    for (; item; item = one ? NULL : item->next) {
        double d = item->valuedouble;
        if (!cJSON_IsNumber(item) || !(d >= 0 && d < c->vocab_size) || d != floor(d))
            return av_err(e, "%s: \"eos_token_id\" holds %g, not an id below vocab_size %d", path,
                          cJSON_IsNumber(item) ? d : -1.0, c->vocab_size);
        if (n == CFG_MAX_EOS) return av_err(e, "%s: \"eos_token_id\" lists more than %d ids", path, CFG_MAX_EOS);
        c->eos_ids[n++] = (int)d;
    }
    c->n_eos = n;
    return 0;
}

int cfg_load_generation(ModelConfig *c, const char *path, AvErr *e) {
    if (!av_file_exists(path)) return 0;
    char *buf;
    size_t len;
    if (av_read_file(path, 1 << 20, &buf, &len, e) != 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, path, e);
    free(buf);
    if (pr < 0) return -1;
    int rc = !cJSON_IsObject(root) ? av_err(e, "%s: not a JSON object", path) : cfg_parse_eos(c, root, path, e);
    cJSON_Delete(root);
    return rc;
}

int cfg_read_lowercase(const char *path, AvErr *e) {
    char *buf;
    size_t len;
    if (av_read_file(path, 1 << 20, &buf, &len, NULL) != 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, path, e);
    free(buf);
    if (pr < 0) return -2;
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

int cfg_load_head_labels(const char *path, const ModelConfig *c, char ***patterns, char ***descriptions, AvErr *e) {
    *patterns = *descriptions = NULL;
    char *buf;
    size_t len;
    if (av_read_file(path, 4 << 20, &buf, &len, e) != 0) return -1;
    cJSON *root;
    const int pr = av_json_parse(&root, buf, len, path, e);
    free(buf);
    if (pr < 0) return -1;
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
