/* json_out.c — JSON writer. Attention at 512 tokens is 38M numbers: they are
 * streamed through a local buffer with a table-driven float formatter, never
 * built as a cJSON tree and never passed through printf one by one. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_out.h"
#include "explain_out.h"
#include "flags_out.h"
#include "image_out.h"
#include "lens_out.h"
#include "mix_out.h"
#include "output.h"
#include "version.h"


/* ---------------------------------------------------------------- buffered sink */

typedef struct {
    FILE *f;
    char *buf;
    size_t cap, len;
    int failed;
} Sink;

static void sink_flush(Sink *s) {
    if (s->len && fwrite(s->buf, 1, s->len, s->f) != s->len) s->failed = 1;
    s->len = 0;
}

static void sink_put(Sink *s, const char *p, size_t n) {
    if (s->len + n > s->cap) sink_flush(s);
    if (n > s->cap) {
        if (fwrite(p, 1, n, s->f) != n) s->failed = 1;
        return;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

static void sink_str(Sink *s, const char *p) { sink_put(s, p, strlen(p)); }

static void sink_int(Sink *s, long long v) {
    char b[32];
    int n = snprintf(b, sizeof b, "%lld", v);
    sink_put(s, b, (size_t)n);
}

/* ---------------------------------------------------------------- floats */

/* 10^k for k in [-60, 60]: covers every float's decimal exponent plus the
 * 9 digits of scaling, so no pow() call is needed per number. */
static const double P10[121] = {1e-60,1e-59,1e-58,1e-57,1e-56,1e-55,1e-54,1e-53,1e-52,1e-51,1e-50,1e-49,1e-48,1e-47,1e-46,1e-45,1e-44,1e-43,1e-42,1e-41,1e-40,1e-39,1e-38,1e-37,1e-36,1e-35,1e-34,1e-33,1e-32,1e-31,1e-30,1e-29,1e-28,1e-27,1e-26,1e-25,1e-24,1e-23,1e-22,1e-21,1e-20,1e-19,1e-18,1e-17,1e-16,1e-15,1e-14,1e-13,1e-12,1e-11,1e-10,1e-9,1e-8,1e-7,1e-6,1e-5,1e-4,1e-3,1e-2,1e-1,1e0,1e1,1e2,1e3,1e4,1e5,1e6,1e7,1e8,1e9,1e10,1e11,1e12,1e13,1e14,1e15,1e16,1e17,1e18,1e19,1e20,1e21,1e22,1e23,1e24,1e25,1e26,1e27,1e28,1e29,1e30,1e31,1e32,1e33,1e34,1e35,1e36,1e37,1e38,1e39,1e40,1e41,1e42,1e43,1e44,1e45,1e46,1e47,1e48,1e49,1e50,1e51,1e52,1e53,1e54,1e55,1e56,1e57,1e58,1e59,1e60};
#define P10_AT(k) (P10[(k) + 60])

static const uint32_t IP10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* Attention weights are almost all in [1e-5, 1): positional notation,
 * "0." + zeros + at most sig digits, with 32-bit integer arithmetic only.
 * Returns 0 when v is outside that range or rounds up to the next decade. */
static int format_unit(char *buf, float v, int sig) {
    static const float DEC[6] = {1e-1f, 1e-2f, 1e-3f, 1e-4f, 1e-5f, 0};
    int z = 0; /* zeros after the point: v in [10^-(z+1), 10^-z) */
    while (z < 5 && v < DEC[z]) z++;
    if (z == 5) return 0;
    uint32_t r = (uint32_t)((double)v * P10_AT(sig + z) + 0.5);
    if (r >= IP10[sig]) return 0; /* rounds to 10^-z: let the general path place it */
    char dig[10];
    for (int i = sig - 1; i >= 0; i--) {
        dig[i] = (char)('0' + r % 10);
        r /= 10;
    }
    int nd = sig;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int k = 0;
    buf[k++] = '0';
    buf[k++] = '.';
    for (int i = 0; i < z; i++) buf[k++] = '0';
    memcpy(buf + k, dig, (size_t)nd);
    k += nd;
    buf[k] = '\0';
    return k;
}

int json_format_float(char *buf, float vf, int sig) {
    if (sig < 1) sig = 1;
    if (sig > 9) sig = 9;
    if (vf >= 1e-5f && vf < 1.0f) {
        int k = format_unit(buf, vf, sig);
        if (k) return k;
    }
    if (!isfinite(vf)) {
        memcpy(buf, "null", 5); /* JSON has no NaN/Inf */
        return 4;
    }
    int k = 0;
    if (vf < 0) {
        buf[k++] = '-';
        vf = -vf;
    }
    if (vf == 0) {
        buf[k++] = '0';
        buf[k] = '\0';
        return k;
    }
    double v = vf;
    /* Decimal exponent from the binary one (floor(e2 * log10 2)), then exact. */
    uint32_t bits;
    memcpy(&bits, &vf, sizeof bits);
    int e2 = (int)((bits >> 23) & 0xff) - 127;
    int e10 = (e2 * 78913) >> 18;
    if (e10 < -46) e10 = -46;
    while (v >= P10_AT(e10 + 1)) e10++;
    while (v < P10_AT(e10)) e10--;
    uint64_t r = (uint64_t)(v * P10_AT(sig - 1 - e10) + 0.5);
    if (r >= IP10[sig]) { /* rounding carried into a new digit */
        r /= 10;
        e10++;
    }
    char dig[16];
    for (int i = sig - 1; i >= 0; i--) {
        dig[i] = (char)('0' + r % 10);
        r /= 10;
    }
    int nd = sig;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    if (e10 >= -5 && e10 < sig) {
        if (e10 < 0) {
            buf[k++] = '0';
            buf[k++] = '.';
            for (int i = -1; i > e10; i--) buf[k++] = '0';
            for (int i = 0; i < nd; i++) buf[k++] = dig[i];
        } else {
            for (int i = 0; i <= e10; i++) buf[k++] = i < nd ? dig[i] : '0';
            if (nd > e10 + 1) {
                buf[k++] = '.';
                for (int i = e10 + 1; i < nd; i++) buf[k++] = dig[i];
            }
        }
    } else {
        buf[k++] = dig[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (int i = 1; i < nd; i++) buf[k++] = dig[i];
        }
        buf[k++] = 'e';
        int x = e10;
        if (x < 0) {
            buf[k++] = '-';
            x = -x;
        }
        if (x >= 10) buf[k++] = (char)('0' + x / 10);
        buf[k++] = (char)('0' + x % 10);
    }
    buf[k] = '\0';
    return k;
}

static void sink_float(Sink *s, float v, int sig) {
    if (s->len + 32 > s->cap) sink_flush(s);
    s->len += (size_t)json_format_float(s->buf + s->len, v, sig);
}

/* ---------------------------------------------------------------- strings */

static void sink_json_string(Sink *s, const char *p) {
    static const char hex[] = "0123456789abcdef";
    sink_put(s, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)p; *c; c++) {
        char esc[8];
        switch (*c) {
        case '"': sink_put(s, "\\\"", 2); break;
        case '\\': sink_put(s, "\\\\", 2); break;
        case '\n': sink_put(s, "\\n", 2); break;
        case '\r': sink_put(s, "\\r", 2); break;
        case '\t': sink_put(s, "\\t", 2); break;
        default:
            /* Controls are invalid in JSON strings; < > & are escaped so the
             * same text is safe inside an HTML <script> element. */
            if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&' || *c == 0x7f) {
                esc[0] = '\\', esc[1] = 'u', esc[2] = '0', esc[3] = '0';
                esc[4] = hex[*c >> 4], esc[5] = hex[*c & 15];
                sink_put(s, esc, 6);
            } else {
                sink_put(s, (const char *)c, 1);
            }
        }
    }
    sink_put(s, "\"", 1);
}

void json_write_string(FILE *f, const char *str) {
    /* one short string: a stack buffer, so nothing can fail to allocate */
    char buf[256];
    Sink s = {f, buf, sizeof buf, 0, 0};
    sink_json_string(&s, str);
    sink_flush(&s);
}

/* ---------------------------------------------------------------- documents */

/* "name":[...] with a leading comma unless first */
static void write_string_array(Sink *s, const char *name, const char *const *v, int n, int first) {
    sink_str(s, first ? "\"" : ",\"");
    sink_str(s, name);
    sink_str(s, "\":[");
    for (int i = 0; i < n; i++) {
        if (i) sink_put(s, ",", 1);
        sink_json_string(s, v[i]);
    }
    sink_put(s, "]", 1);
}

/* v NULL: every element is dflt (an encoding built without ids). */
static void write_int_array(Sink *s, const char *name, const int *v, int n, int dflt) {
    sink_str(s, ",\"");
    sink_str(s, name);
    sink_str(s, "\":[");
    for (int i = 0; i < n; i++) {
        if (i) sink_put(s, ",", 1);
        sink_int(s, v ? v[i] : dflt);
    }
    sink_put(s, "]", 1);
}

static void write_tokens_fields(Sink *s, const OutDoc *d) {
    const TokEncoding *enc = d->enc;
    write_string_array(s, "tokens", enc->tokens, enc->n, 1);
    /* byte-level BPE: "Ġflies" reads " flies" */
    if (d->display_tokens) write_string_array(s, "display_tokens", d->display_tokens, enc->n, 0);
    write_int_array(s, "input_ids", enc->ids, enc->n, -1);
    write_int_array(s, "token_type_ids", enc->type_ids, enc->n, 0);
    sink_str(s, ",\"sentence_b_start\":");
    if (enc->b_start >= 0) sink_int(s, enc->b_start);
    else sink_str(s, "null");
}

/* Documents stream through 64 KB, allocated with the sink. */
#define SINK_CAP (1u << 16)

static Sink *sink_new(FILE *f) {
    Sink *s = malloc(sizeof *s + SINK_CAP);
    if (s) *s = (Sink){f, (char *)(s + 1), SINK_CAP, 0, 0};
    return s;
}

static int sink_done(Sink *s, AvErr *e) {
    sink_flush(s);
    int failed = s->failed || ferror(s->f);
    free(s);
    return failed ? av_err_errno(e, "write error") : 0;
}

int json_write_tokens(FILE *f, const OutDoc *d, AvErr *e) {
    Sink *s = sink_new(f);
    if (!s) return av_err(e, "out of memory");
    sink_put(s, "{", 1);
    write_tokens_fields(s, d);
    sink_put(s, "}", 1);
    return sink_done(s, e);
}

/* [layer][head][row][col] over the selection; per (l, h) the block is rows x cols. */
/* [layer][head][row][col] of each selected block; rows 0: [layer][head][col] (one vector per head). */
static void write_blocks(Sink *s, const OutDoc *d, float *(*block)(const Capture *, int, int), int rows, int cols) {
    const Capture *c = d->cap;
    const int vec = rows == 0;
    sink_put(s, "[", 1);
    for (int li = 0; li < out_n_layers(d); li++) {
        sink_str(s, li ? ",[" : "[");
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            if (!vec) sink_str(s, hi ? ",[" : "[");
            else if (hi) sink_put(s, ",", 1);
            const float *b = block(c, out_layer(d, li), out_head(d, hi));
            for (int i = 0; i < (vec ? 1 : rows); i++) {
                sink_str(s, i ? ",[" : "[");
                for (int j = 0; j < cols; j++) {
                    if (j) sink_put(s, ",", 1);
                    sink_float(s, b[(size_t)i * cols + j], d->precision);
                }
                sink_put(s, "]", 1);
            }
            if (!vec) sink_put(s, "]", 1);
        }
        sink_put(s, "]", 1);
    }
    sink_put(s, "]", 1);
}

/* --telemetry: each selected head's rows as [layer][head][query][field], and
 * its heaviest keys as [layer][head][query][[key, weight], ...]. */
static void write_telemetry(Sink *s, const OutDoc *d) {
    static const char *const fields[CAP_TEL_N] = {"sink", "sink4", "entropy", "prev", "self", "dup", "distance"};
    const Capture *c = d->cap;
    const int n = d->enc->n, K = c->tel_top_k;
    sink_str(s, ",\"telemetry\":{\"fields\":[");
    for (int k = 0; k < CAP_TEL_N; k++) {
        if (k) sink_put(s, ",", 1);
        sink_put(s, "\"", 1);
        sink_str(s, fields[k]);
        sink_put(s, "\"", 1);
    }
    sink_str(s, "],\"top_k\":");
    sink_int(s, K);
    sink_str(s, ",\"rows\":");
    write_blocks(s, d, cap_tel, n, CAP_TEL_N);
    sink_str(s, ",\"top\":[");
    for (int li = 0; li < out_n_layers(d); li++) {
        sink_str(s, li ? ",[" : "[");
        for (int hi = 0; hi < out_n_heads(d); hi++) {
            sink_str(s, hi ? ",[" : "[");
            const size_t at = cap_block(c, out_layer(d, li), out_head(d, hi)) * (size_t)n * K;
            for (int i = 0; i < n; i++) {
                sink_str(s, i ? ",[" : "[");
                for (int k = 0, w = 0; k < K; k++) {
                    const size_t x = at + (size_t)i * K + k;
                    if (c->tel_top[x] < 0) continue; /* a row with fewer keys than K */
                    sink_str(s, w++ ? ",[" : "[");
                    sink_int(s, c->tel_top[x]);
                    sink_put(s, ",", 1);
                    sink_float(s, c->tel_top_w[x], d->precision);
                    sink_put(s, "]", 1);
                }
                sink_put(s, "]", 1);
            }
            sink_put(s, "]", 1);
        }
        sink_put(s, "]", 1);
    }
    sink_str(s, "]}");
}

static void write_index_list(Sink *s, int n, int (*at)(const OutDoc *, int), const OutDoc *d) {
    sink_put(s, "[", 1);
    for (int i = 0; i < n; i++) {
        if (i) sink_put(s, ",", 1);
        sink_int(s, at(d, i));
    }
    sink_put(s, "]", 1);
}

/* What the run was — model, config, input, tokens, selection — as the members
 * of one object (no braces), written alike into the JSON and the page's
 * metadata so that both use one set of key names. Optional members are left
 * out rather than null. page: the copy that goes into a shareable file, so
 * without model_dir (a path on this machine). */
/* [{"token", "display", "id", "prob"}, ...] for k ids and probabilities; w spells
 * them from index at on (NULL: unspelled, ""). */
static void write_top(Sink *s, const OutDoc *d, const int *ids, const float *probs, int k, const OutSpelling *w,
                      size_t at) {
    sink_put(s, "[", 1);
    for (int j = 0; j < k; j++) {
        const int ok = w && at + (size_t)j < (size_t)w->n;
        const char *sp = ok ? w->token[at + j] : NULL, *dp = ok ? w->display[at + j] : NULL;
        sink_str(s, j ? ",{\"token\":" : "{\"token\":");
        sink_json_string(s, sp ? sp : "");
        sink_str(s, ",\"display\":");
        sink_json_string(s, dp ? dp : "");
        sink_str(s, ",\"id\":");
        sink_int(s, ids[j]);
        sink_str(s, ",\"prob\":");
        sink_float(s, probs[j], d->precision);
        sink_put(s, "}", 1);
    }
    sink_put(s, "]", 1);
}

/* "experts": a mixture-of-experts model's routing, {"k", "num_experts",
 * "layers": the sparse layers, "ids" and "weights" [layer][token][k]} (each
 * token's experts, most weight first), every sparse layer whatever the
 * selection; left out where a view merged tokens (--words). */
static void write_experts(Sink *s, const OutDoc *d) {
    const Capture *cap = d->cap;
    if (!cap || !cap->moe_ids || !cap->moe_k) return;
    const ModelConfig *c = d->cfg;
    const int n = d->enc->n, K = cap->moe_k;
    sink_str(s, ",\"experts\":{\"k\":");
    sink_int(s, K);
    sink_str(s, ",\"num_experts\":");
    sink_int(s, c->num_experts);
    sink_str(s, ",\"layers\":[");
    for (int l = 0, k = 0; l < c->num_layers; l++)
        if (!c->layer_dense[l]) {
            if (k++) sink_put(s, ",", 1);
            sink_int(s, l);
        }
    for (int pass = 0; pass < 2; pass++) {
        sink_str(s, pass ? "],\"weights\":[" : "],\"ids\":[");
        for (int l = 0, k = 0; l < c->num_layers; l++) {
            if (c->layer_dense[l]) continue;
            sink_str(s, k++ ? ",[" : "[");
            for (int i = 0; i < n; i++) {
                sink_str(s, i ? ",[" : "[");
                for (int j = 0; j < K; j++) {
                    const size_t at = ((size_t)l * cap->n_tokens + i) * K + j;
                    if (j) sink_put(s, ",", 1);
                    if (pass) sink_float(s, cap->moe_w[at], d->precision);
                    else sink_int(s, cap->moe_ids[at]);
                }
                sink_put(s, "]", 1);
            }
            sink_put(s, "]", 1);
        }
    }
    sink_str(s, "]}");
}

/* "predictions" (--predict) and "generation" (--generate). An encoder-decoder
 * document's positions are the decoder's: its tokens are d->dec_enc's. */
static void write_predictions(Sink *s, const OutDoc *d) {
    const TokEncoding *te = d->n_stacks && d->dec_enc ? d->dec_enc : d->enc;
    const CapPredictions *p = d->pred;
    if (p) {
        sink_str(s, ",\"predictions\":[");
        for (int i = 0; i < p->n; i++) {
            sink_str(s, i ? ",{\"position\":" : "{\"position\":");
            sink_int(s, p->position[i]);
            sink_str(s, ",\"top\":");
            write_top(s, d, p->ids + (size_t)i * p->k, p->probs + (size_t)i * p->k, p->k, d->pred_words,
                      (size_t)i * p->k);
            sink_put(s, "}", 1);
        }
        sink_put(s, "]", 1);
    }
    const CapGeneration *g = d->gen;
    if (!g) return;
    static const char *const stops[] = {"length", "eos", "stop"};
    char num[32];
    sink_str(s, ",\"generation\":{\"prompt_tokens\":");
    sink_int(s, g->n_prompt);
    sink_str(s, ",\"generated_tokens\":");
    sink_int(s, g->n_generated);
    sink_str(s, ",\"stop_reason\":\"");
    sink_str(s, stops[g->stop]);
    sink_str(s, g->temperature > 0 ? "\",\"strategy\":\"sample\",\"temperature\":" : "\",\"strategy\":\"greedy\"");
    if (g->temperature > 0) {
        snprintf(num, sizeof num, "%g", (double)g->temperature);
        sink_str(s, num);
        sink_str(s, ",\"top_p\":");
        snprintf(num, sizeof num, "%g", (double)g->top_p);
        sink_str(s, num);
        sink_str(s, ",\"seed\":");
        snprintf(num, sizeof num, "%llu", g->seed);
        sink_str(s, num);
    }
    sink_str(s, ",\"text\":");
    sink_json_string(s, d->gen_text ? d->gen_text : "");
    sink_str(s, ",\"steps\":[");
    for (int i = 0; i < g->n_generated; i++) {
        const int pos = g->n_prompt + i, id = te->ids[pos];
        sink_str(s, i ? ",{\"position\":" : "{\"position\":");
        sink_int(s, pos);
        sink_str(s, ",\"id\":");
        sink_int(s, id);
        sink_str(s, ",\"token\":");
        sink_json_string(s, te->tokens[pos]);
        sink_str(s, ",\"prob\":");
        sink_float(s, g->chosen_prob[i], d->precision);
        sink_str(s, ",\"top\":");
        write_top(s, d, g->steps.ids + (size_t)i * g->steps.k, g->steps.probs + (size_t)i * g->steps.k, g->steps.k,
                  d->gen_words, (size_t)i * g->steps.k);
        sink_put(s, "}", 1);
    }
    sink_str(s, "]}");
}

static void write_common(Sink *s, const OutDoc *d, int page) {
    const ModelConfig *c = d->cfg;
    char num[32];
    sink_str(s, "\"model\":");
    sink_json_string(s, d->model_name ? d->model_name : "");
    if (!page) {
        sink_str(s, ",\"model_dir\":");
        sink_json_string(s, d->model_dir ? d->model_dir : "");
    }
    sink_str(s, ",\"dtype\":");
    sink_json_string(s, d->dtype ? d->dtype : "");
    sink_str(s, d->is_demo ? ",\"demo\":true" : ",\"demo\":false");
    if (d->model_note) {
        sink_str(s, ",\"model_note\":");
        sink_json_string(s, d->model_note);
    }
    sink_str(s, ",\"config\":{\"model_type\":");
    sink_json_string(s, c->model_type);
    sink_str(s, ",\"layers\":");
    sink_int(s, c->num_layers);
    sink_str(s, ",\"heads\":");
    sink_int(s, c->num_heads);
    sink_str(s, ",\"hidden_size\":");
    sink_int(s, c->hidden_size);
    sink_str(s, ",\"head_dim\":");
    sink_int(s, c->head_dim ? c->head_dim : c->num_heads > 0 ? c->hidden_size / c->num_heads : 0);
    sink_str(s, ",\"intermediate_size\":");
    sink_int(s, c->intermediate_size);
    sink_str(s, ",\"vocab_size\":");
    sink_int(s, c->vocab_size);
    sink_str(s, ",\"max_position_embeddings\":");
    sink_int(s, c->max_position_embeddings);
    sink_str(s, ",\"type_vocab_size\":");
    sink_int(s, c->type_vocab_size);
    sink_str(s, ",\"layer_norm_eps\":");
    snprintf(num, sizeof num, "%g", (double)c->layer_norm_eps);
    sink_str(s, num);
    sink_str(s, ",\"hidden_act\":");
    /* config.c always records the name; a config built in code may not */
    sink_json_string(s, c->hidden_act_name[0] ? c->hidden_act_name : cfg_act_name(c->hidden_act));
    sink_str(s, c->causal ? ",\"causal\":true" : ",\"causal\":false");
    sink_str(s, ",\"position_offset\":");
    sink_int(s, c->pos_offset);
    if (c->enc_dec) { /* a model run natively (render's documents describe no model) */
        sink_str(s, ",\"encoder_decoder\":true,\"decoder_layers\":");
        sink_int(s, c->dec_layers);
        sink_str(s, ",\"decoder_start_token_id\":");
        sink_int(s, c->dec_start_id);
    }
    /* the decoders' extras, written only where a family has them so that the
     * encoders' documents stay as they were */
    const int kv = c->num_kv_heads ? c->num_kv_heads : c->num_heads;
    if (kv != c->num_heads) {
        /* grouped-query attention: query head h reads key/value head kv_head[h] */
        sink_str(s, ",\"kv_heads\":");
        sink_int(s, kv);
        sink_str(s, ",\"kv_head\":[");
        for (int h = 0; h < c->num_heads; h++) {
            if (h) sink_put(s, ",", 1);
            sink_int(s, h / (c->num_heads / kv));
        }
        sink_put(s, "]", 1);
    }
    if (c->pos == POS_ROPE) {
        sink_str(s, ",\"positions\":\"rotary\",\"rope_theta\":");
        snprintf(num, sizeof num, "%g", (double)c->rope_theta);
        sink_str(s, num);
    }
    if (c->sliding_window > 0) {
        /* keys a query sees in the layers listed, itself included; bidirectional (an encoder's
         * local attention): as many on each side, keys j with |i - j| < sliding_window */
        sink_str(s, ",\"sliding_window\":");
        sink_int(s, c->sliding_window);
        sink_str(s, ",\"sliding_layers\":[");
        for (int l = 0, first = 1; l < c->num_layers; l++)
            if (c->layer_sliding[l]) {
                if (!first) sink_put(s, ",", 1);
                sink_int(s, l);
                first = 0;
            }
        sink_put(s, "]", 1);
        if (c->window_bidir) sink_str(s, ",\"sliding_window_bidirectional\":true");
    }
    if (c->attn_softcap > 0) {
        sink_str(s, ",\"attn_logit_softcapping\":");
        snprintf(num, sizeof num, "%g", (double)c->attn_softcap);
        sink_str(s, num);
    }
    if (c->qk_norm) sink_str(s, ",\"qk_norm\":true"); /* q and k RMS-normalized per head before rotary */
    if (c->attn_sinks) sink_str(s, ",\"attention_sinks\":true"); /* gpt-oss: "sinks" holds their shares */
    if (c->vision) { /* a vision encoder: the tokens are an image's patches ("image" says where) */
        sink_str(s, ",\"vision\":true,\"image_size\":");
        sink_int(s, c->image_size);
        sink_str(s, ",\"patch_size\":");
        sink_int(s, c->patch_size);
    }
    if (c->num_experts) { /* a mixture-of-experts MLP */
        sink_str(s, ",\"num_experts\":");
        sink_int(s, c->num_experts);
        sink_str(s, ",\"experts_per_token\":");
        sink_int(s, c->experts_per_tok);
    }
    sink_str(s, "},\"text\":");
    sink_json_string(s, d->text_a ? d->text_a : "");
    sink_str(s, ",\"text_b\":");
    if (d->text_b) sink_json_string(s, d->text_b);
    else sink_str(s, "null");
    sink_put(s, ",", 1);
    write_tokens_fields(s, d);
    sink_str(s, ",\"truncated\":");
    sink_int(s, d->enc->n_truncated);
    sink_str(s, ",\"layers\":");
    write_index_list(s, out_n_layers(d), out_layer, d);
    sink_str(s, ",\"heads\":");
    write_index_list(s, out_n_heads(d), out_head, d);
    if (d->head_patterns) {
        sink_str(s, ",\"head_patterns\":[");
        for (int li = 0; li < out_n_layers(d); li++) {
            sink_str(s, li ? ",[" : "[");
            for (int hi = 0; hi < out_n_heads(d); hi++) {
                if (hi) sink_put(s, ",", 1);
                const char *p = d->head_patterns[out_layer(d, li) * c->num_heads + out_head(d, hi)];
                if (p) sink_json_string(s, p);
                else sink_str(s, "null");
            }
            sink_put(s, "]", 1);
        }
        sink_put(s, "]", 1);
    }
    /* an encoder-decoder page: the predictions strip labels positions with the page's token line, which is
     * the source's, not the decoder's: predictions and generation go to the JSON only */
    if (!(page && d->n_stacks)) write_predictions(s, d);
    write_experts(s, d);
    if (d->cap && d->cap->sinks && !d->n_stacks && !d->diff) {
        /* attention sinks (gpt-oss): [layer][head][query] the share of each row no key took */
        sink_str(s, ",\"sinks\":");
        write_blocks(s, d, cap_sinks, 0, d->enc->n);
    }
    if (d->flags && !d->n_stacks && !d->diff) { /* flags_out.c writes to the stream, as lens_out.c */
        sink_flush(s);
        if (flags_json_members(s->f, d)) s->failed = 1;
    }
    if (d->explain) {
        sink_flush(s);
        if (explain_json_member(s->f, d)) s->failed = 1;
    }
    if (d->lens) { /* lens_out.c writes to the stream: what the sink holds goes first */
        sink_flush(s);
        if (lens_json_members(s->f, d)) s->failed = 1;
    }
    if (d->flow) {
        sink_flush(s);
        if (flow_json_member(s->f, d)) s->failed = 1;
    }
    if (d->image) {
        sink_flush(s);
        if (image_json_member(s->f, d, page)) s->failed = 1;
    }
}

int json_write_common(FILE *f, const OutDoc *d, int page, AvErr *e) {
    Sink *s = sink_new(f);
    if (!s) return av_err(e, "out of memory");
    write_common(s, d, page);
    return sink_done(s, e);
}

/* An encoder-decoder document: each side's tokens, then each stack
 * [layer][head][row][col] as "<name>_attention". */
static void write_stacks(Sink *s, const OutDoc *d) {
    int has_enc = 0;
    for (int k = 0; k < d->n_stacks; k++) has_enc |= !d->stacks[k].rows_decoder || !d->stacks[k].cols_decoder;
    if (has_enc) write_string_array(s, "encoder_tokens", d->enc->tokens, d->enc->n, 0);
    if (d->dec_enc) write_string_array(s, "decoder_tokens", d->dec_enc->tokens, d->dec_enc->n, 0);
    /* a model run (not render's arrays): the decoder's ids too, decoder_start_token_id first */
    if (d->dec_enc && d->cfg->enc_dec) write_int_array(s, "decoder_input_ids", d->dec_enc->ids, d->dec_enc->n, -1);
    for (int k = 0; k < d->n_stacks; k++) {
        const CapStack *st = &d->stacks[k];
        sink_str(s, ",\"");
        sink_str(s, st->name);
        sink_str(s, "_attention\":[");
        const int H = d->cfg->num_heads;
        for (int li = 0; li < out_stack_n_layers(d, st); li++) {
            sink_str(s, li ? ",[" : "[");
            for (int h = 0; h < H; h++) {
                sink_str(s, h ? ",[" : "[");
                const float *b = st->attn + ((size_t)li * H + h) * st->n_rows * st->n_cols;
                for (int i = 0; i < st->n_rows; i++) {
                    sink_str(s, i ? ",[" : "[");
                    for (int j = 0; j < st->n_cols; j++) {
                        if (j) sink_put(s, ",", 1);
                        sink_float(s, b[(size_t)i * st->n_cols + j], d->precision);
                    }
                    sink_put(s, "]", 1);
                }
                sink_put(s, "]", 1);
            }
            sink_put(s, "]", 1);
        }
        sink_put(s, "]", 1);
    }
    /* unequal depths: which layers each stack's holds (the document's "layers" are the encoder's) */
    for (int k = 0; k < d->n_stacks; k++)
        if (d->stacks[k].n_layers) {
            char name[48];
            snprintf(name, sizeof name, "%.30s_layers", d->stacks[k].name);
            write_int_array(s, name, d->stacks[k].layers, d->stacks[k].n_layers, 0);
        }
}

/* --measure norm: "norm_attention" [layer][head][query][key] = ||a_ij f_h(x_j)||,
 * shaped and selected like "attention", and "value_norms" [layer][head][key] =
 * ||f_h(x_j)|| (left out where a view merged tokens: --words). */
static void write_norm(Sink *s, const OutDoc *d, int n) {
    const Capture *c = d->cap;
    if (!c->nattn) return;
    sink_str(s, ",\"norm_attention\":");
    write_blocks(s, d, cap_nattn, n, n);
    if (!c->vnorm) return;
    sink_str(s, ",\"value_norms\":");
    write_blocks(s, d, cap_vnorm, 0, n);
}

int json_write_doc(FILE *f, const OutDoc *d, AvErr *e) {
    Sink *s = sink_new(f);
    if (!s) return av_err(e, "out of memory");
    const ModelConfig *c = d->cfg;
    sink_str(s, "{\"attnviz_version\":\"" ATTNVIZ_VERSION "\",");
    write_common(s, d, 0);
    if (d->n_stacks) {
        write_stacks(s, d);
        sink_put(s, "}", 1);
        return sink_done(s, e);
    }
    int n = d->enc->n;
    if (d->cap->attn) {
        sink_str(s, ",\"attention\":");
        write_blocks(s, d, cap_attn, n, n);
    }
    if (d->cap->tel) write_telemetry(s, d);
    /* the measures besides attention, in --measure's order: the first, and all of them */
    static const char *const NORM_ONLY[1] = {"norm"}; /* a document made without the list (a server's) */
    const char *const *ms = d->n_measures ? d->measures : NORM_ONLY;
    const int n_ms = d->n_measures ? d->n_measures : d->cap->nattn ? 1 : 0;
    for (int k = 0; k < n_ms; k++) {
        if (!k) {
            sink_str(s, ",\"measure\":\"");
            sink_str(s, ms[0]);
            sink_str(s, "\",\"measures\":[");
        }
        sink_str(s, k ? ",\"" : "\"");
        sink_str(s, ms[k]);
        sink_str(s, k + 1 < n_ms ? "\"" : "\"]");
    }
    write_norm(s, d, n);
    if (d->n_mix) { /* mix_out.c writes to the stream: what the sink holds goes first */
        sink_flush(s);
        if (mix_json_members(s->f, d)) s->failed = 1;
    }
    if (d->with_qk && d->cap->q) {
        sink_str(s, ",\"queries\":");
        write_blocks(s, d, cap_q, n, d->cap->head_dim);
        sink_str(s, ",\"keys\":");
        write_blocks(s, d, cap_k, n, d->cap->head_dim);
    }
    if (d->cap->hidden) {
        sink_str(s, ",\"hidden_states\":[");
        int H = d->cap->hidden_size;
        for (int l = 0; l <= c->num_layers; l++) {
            sink_str(s, l ? ",[" : "[");
            for (int i = 0; i < n; i++) {
                sink_str(s, i ? ",[" : "[");
                const float *r = d->cap->hidden + ((size_t)l * n + i) * H;
                for (int j = 0; j < H; j++) {
                    if (j) sink_put(s, ",", 1);
                    sink_float(s, r[j], d->precision);
                }
                sink_put(s, "]", 1);
            }
            sink_put(s, "]", 1);
        }
        sink_put(s, "]", 1);
    }
    sink_put(s, "}", 1);
    return sink_done(s, e);
}
