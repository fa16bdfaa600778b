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

int cfg_parse(BertConfig *c, const char *json, size_t len, const char *path, AvErr *e) {
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return av_err(e, "%s: not valid JSON", path);
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        av_err(e, "%s: not a JSON object", path);
        goto done;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !cJSON_IsString(mt)) {
        av_err(e, "%s: \"model_type\" must be a string", path);
        goto done;
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", mt ? mt->valuestring : "bert");
    if (strcmp(c->model_type, "bert") != 0) {
        av_err(e, "%s: model_type \"%s\" is not supported (attnviz runs BERT checkpoints)", path, c->model_type);
        goto done;
    }
    if (get_int(root, "vocab_size", 1, MAX_VOCAB, &c->vocab_size, path, e) ||
        get_int(root, "hidden_size", 1, MAX_HIDDEN, &c->hidden_size, path, e) ||
        get_int(root, "num_hidden_layers", 1, MAX_LAYERS, &c->num_layers, path, e) ||
        get_int(root, "num_attention_heads", 1, MAX_HEADS, &c->num_heads, path, e) ||
        get_int(root, "intermediate_size", 1, MAX_INTER, &c->intermediate_size, path, e) ||
        get_int(root, "max_position_embeddings", 1, MAX_POS, &c->max_position_embeddings, path, e))
        goto done;
    c->type_vocab_size = 2;
    if (cJSON_GetObjectItemCaseSensitive(root, "type_vocab_size") &&
        get_int(root, "type_vocab_size", 1, MAX_TYPES, &c->type_vocab_size, path, e))
        goto done;
    if (c->hidden_size % c->num_heads != 0) {
        av_err(e, "%s: hidden_size %d is not divisible by num_attention_heads %d", path, c->hidden_size,
               c->num_heads);
        goto done;
    }
    c->layer_norm_eps = 1e-12f;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_eps");
    if (eps) {
        if (!cJSON_IsNumber(eps) || !(eps->valuedouble >= 0) || eps->valuedouble > 1) {
            av_err(e, "%s: \"layer_norm_eps\" must be a number in [0, 1]", path);
            goto done;
        }
        c->layer_norm_eps = (float)eps->valuedouble;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    const char *a = "gelu";
    if (act) {
        if (!cJSON_IsString(act)) {
            av_err(e, "%s: \"hidden_act\" must be a string", path);
            goto done;
        }
        a = act->valuestring;
    }
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "%s", a);
    if (!strcmp(a, "gelu")) c->hidden_act = ACT_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh")) c->hidden_act = ACT_GELU_TANH;
    else if (!strcmp(a, "relu")) c->hidden_act = ACT_RELU;
    else {
        av_err(e, "%s: unknown hidden_act \"%.40s\" (supported: gelu, gelu_new, gelu_pytorch_tanh, relu)", path, a);
        goto done;
    }
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
    if (pet && (!cJSON_IsString(pet) || strcmp(pet->valuestring, "absolute") != 0)) {
        av_err(e, "%s: position_embedding_type must be \"absolute\"", path);
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
