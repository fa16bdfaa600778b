/* page_fixture.c — writes a page (and the matching JSON) from a synthetic
 * capture, so the page can be developed and tested without a model.
 *
 *   page_fixture OUT.html OUT.json [options]
 *     --n N          tokens in total, specials included (default 7)
 *     --layers L --heads H --dh D   shape (default 12 12 64)
 *     --pair         a sentence pair (B starts half way)
 *     --inject       hostile tokens and input text
 *     --no-qk        no queries/keys
 *     --demo         demo-model note and head pattern labels
 *     --causal       a GPT-2-shaped decoder: byte-level BPE tokens ("Ġflies",
 *                    "Ċ", "<|endoftext|>", an injection attempt) with display
 *                    text (Ġ -> space, Ċ -> newline), attention masked to the
 *                    lower triangle (softmax over keys j <= i only)
 *     --sel-layers a,b,c  --sel-heads a,b   page selection
 *     --init-layer N --init-head N
 *     --templates DIR
 *     --seed S
 * Attention is self-consistent: attn = softmax(q.k / sqrt(d)) for random q, k
 * built so each head has a pattern (previous/next token, [SEP], self, broad,
 * [CLS]; causal: next becomes self and [SEP] the first token); prints the time
 * html_write_doc took to stderr.
 *
 * Build (after make; tests/browser/lib.mjs does this when it is stale):
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -o build/page_fixture tests/browser/page_fixture.c \
 *      build/libattnviz.a $(pkg-config --libs libcjson libutf8proc openblas zlib) -lm -lpthread
 * --dump FILE also writes the raw float32 attention, q and k (for encoding
 * experiments).
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"

static int ends_in_space(const char *t) {
    size_t l = strlen(t);
    return l > 0 && isspace((unsigned char)t[l - 1]);
}

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double nrand(void) {
    double u = urand(), v = urand();
    if (u < 1e-12) u = 1e-12;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static int parse_list(const char *s, int **out) {
    int n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    *out = malloc(sizeof(int) * (size_t)n);
    if (!*out) return 0;
    int i = 0;
    char *end;
    const char *p = s;
    while (*p && i < n) {
        (*out)[i++] = (int)strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) break;
    }
    return i;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: page_fixture OUT.html OUT.json [--n N] [--layers L] [--heads H] [--dh D] "
                        "[--pair] [--inject] [--no-qk] [--demo] [--causal] [--sel-layers a,b] [--sel-heads a,b] "
                        "[--init-layer N] [--init-head N] [--templates DIR] [--seed S]\n");
        return 2;
    }
    int n = 7, L = 12, H = 12, dh = 64, pair = 0, inject = 0, qk = 1, demo = 0, init_l = 0, init_h = -1, causal = 0;
    int *sel_l = NULL, *sel_h = NULL, nsl = 0, nsh = 0;
    const char *tdir = NULL, *dump = NULL;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (!strcmp(a, "--n")) n = atoi(v), i++;
        else if (!strcmp(a, "--layers")) L = atoi(v), i++;
        else if (!strcmp(a, "--heads")) H = atoi(v), i++;
        else if (!strcmp(a, "--dh")) dh = atoi(v), i++;
        else if (!strcmp(a, "--pair")) pair = 1;
        else if (!strcmp(a, "--inject")) inject = 1;
        else if (!strcmp(a, "--no-qk")) qk = 0;
        else if (!strcmp(a, "--demo")) demo = 1;
        else if (!strcmp(a, "--causal")) causal = 1;
        else if (!strcmp(a, "--sel-layers")) nsl = parse_list(v, &sel_l), i++;
        else if (!strcmp(a, "--sel-heads")) nsh = parse_list(v, &sel_h), i++;
        else if (!strcmp(a, "--init-layer")) init_l = atoi(v), i++;
        else if (!strcmp(a, "--init-head")) init_h = atoi(v), i++;
        else if (!strcmp(a, "--templates")) tdir = v, i++;
        else if (!strcmp(a, "--dump")) dump = v, i++;
        else if (!strcmp(a, "--seed")) rng_state ^= (uint64_t)atoll(v) * 0x9E3779B97F4A7C15ull, i++;
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    if (n < 3) n = 3;
    if (causal) pair = 0; /* a decoder reads one text */

    /* Tokens. */
    static const char *words[] = {"time", "flies", "like", "an", "arrow", "fruit", "fl", "##ies", "a",
                                  "banana", "the", "quick", "brown", "fox", "jump", "##ed", "over",
                                  "lazy", "dog", "##s", ",", "."};
    static const char *hostile[] = {"</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                    "&amp;", "\"quoted\"", "<!--", "\\u003c"};
    /* Byte-level BPE (GPT-2 spellings): Ġ (U+0120) is a space, Ċ (U+010A) a newline. */
#define G "\xc4\xa0"
#define NL "\xc4\x8a"
    static const char *bpe[] = {"Time", G "flies", G "like", G "an", G "arrow", ".", NL,
                                G "<img src=x onerror=alert(1)>", G G, G "un", "believ", "able", NL,
                                G "Fruit", G "fl", "ies", G "like", G "a", G "banana", G "time"};
#undef G
#undef NL
    const char **tok = calloc((size_t)n, sizeof *tok);
    char **disp = calloc((size_t)n, sizeof *disp);
    int *ids = calloc((size_t)n, sizeof *ids), *types = calloc((size_t)n, sizeof *types);
    if (!tok || !disp || !ids || !types) return 1;
    int b_start = pair ? n / 2 + 1 : -1;
    for (int i = 0; causal && i < n; i++) {
        tok[i] = i == 0 || i == n - 1 ? "<|endoftext|>" : bpe[(i - 1) % (int)(sizeof bpe / sizeof *bpe)];
        ids[i] = i == 0 || i == n - 1 ? 50256 : 1000 + i;
        /* display text: U+0120 (c4 a0) -> ' ', U+010A (c4 8a) -> '\n' */
        size_t len = strlen(tok[i]), o = 0;
        if (!(disp[i] = malloc(len + 1))) return 1;
        for (size_t j = 0; j < len; j++) {
            if ((unsigned char)tok[i][j] == 0xc4 && j + 1 < len && ((unsigned char)tok[i][j + 1] == 0xa0 ||
                                                                   (unsigned char)tok[i][j + 1] == 0x8a)) {
                disp[i][o++] = (unsigned char)tok[i][j + 1] == 0xa0 ? ' ' : '\n';
                j++;
            } else {
                disp[i][o++] = tok[i][j];
            }
        }
        disp[i][o] = '\0';
    }
    for (int i = 0; !causal && i < n; i++) {
        if (i == 0) tok[i] = "[CLS]";
        else if (i == n - 1 || (pair && i == b_start - 1)) tok[i] = "[SEP]";
        else if (inject && i <= 6) tok[i] = hostile[(i - 1) % 6];
        else tok[i] = words[(i - 1) % (int)(sizeof words / sizeof *words)];
        ids[i] = 1000 + i;
        types[i] = pair && i >= b_start ? 1 : 0;
    }
    /* the flags a tokenizer gives: the template's tokens are special; a word
     * starts at a special, after one, at a space (byte-level), or at any piece
     * but a "##" continuation (WordPiece) */
    unsigned char *special = calloc((size_t)n, 1), *start = calloc((size_t)n, 1), *role = calloc((size_t)n, 1);
    if (!special || !start || !role) return 1;
    for (int i = 0; i < n; i++) {
        special[i] = i == 0 || i == n - 1 || (!causal && pair && i == b_start - 1);
        role[i] = causal || !special[i] ? TOK_ROLE_NONE : i == 0 ? TOK_ROLE_CLS : TOK_ROLE_SEP;
    }
    for (int i = 0; i < n; i++) {
        if (i == 0 || special[i] || special[i - 1]) start[i] = 1;
        else if (causal) start[i] = isspace((unsigned char)disp[i][0]) || ends_in_space(disp[i - 1]);
        else start[i] = !(strncmp(tok[i], "##", 2) == 0 && tok[i][2] != '\0');
    }
    TokEncoding enc = {.n = n, .ids = ids, .type_ids = types, .tokens = tok, .special = special, .word_start = start,
                       .role = role, .b_start = b_start};

    ModelConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.model_type, causal ? "gpt2" : "bert");
    cfg.vocab_size = causal ? 50257 : 30522, cfg.hidden_size = H * dh, cfg.num_layers = L, cfg.num_heads = H;
    cfg.intermediate_size = 4 * H * dh, cfg.max_position_embeddings = causal ? 1024 : 512;
    cfg.type_vocab_size = causal ? 0 : 2;
    cfg.layer_norm_eps = 1e-12f;
    strcpy(cfg.hidden_act_name, "gelu");
    cfg.causal = causal;

    /* Capture: q = c * k[target] + noise, attn = softmax(q.k / sqrt d). */
    Capture cap = {.n_layers = L, .n_heads = H, .n_tokens = n, .head_dim = dh, .hidden_size = H * dh};
    size_t nn = (size_t)n * n, nd = (size_t)n * dh, heads = (size_t)L * H;
    cap.attn = malloc(sizeof(float) * heads * nn);
    cap.q = malloc(sizeof(float) * heads * nd);
    cap.k = malloc(sizeof(float) * heads * nd);
    double *sc = malloc(sizeof(double) * (size_t)n);
    if (!cap.attn || !cap.q || !cap.k || !sc) return 1;
    const char **pat = calloc(heads, sizeof *pat);
    static const char *pnames[] = {"previous token", "next token", "[SEP]", "self", "broad", "[CLS]"};
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            int kind = (l * 5 + h * 7 + l * h) % 6;
            pat[(size_t)l * H + h] = pnames[kind];
            float *q = cap_q(&cap, l, h), *k = cap_k(&cap, l, h), *a = cap_attn(&cap, l, h);
            double ks = 0.6 + 0.8 * urand();
            for (size_t i = 0; i < nd; i++) k[i] = (float)(nrand() * ks + (i % 7 == 0 ? 0.4 : 0));
            double c = kind == 4 ? 0.05 : 0.09 + 0.06 * urand();
            for (int i = 0; i < n; i++) {
                int t = i;
                if (kind == 0) t = i > 0 ? i - 1 : 0;
                else if (kind == 1) t = i < n - 1 ? i + 1 : n - 1;
                else if (kind == 2) t = pair && i < b_start ? b_start - 1 : n - 1;
                else if (kind == 5) t = 0;
                if (causal && t > i) t = kind == 2 ? 0 : i; /* a decoder sees no later token */
                for (int j = 0; j < dh; j++)
                    q[(size_t)i * dh + j] = (float)(c * 8 * k[(size_t)t * dh + j] + nrand() * 0.7);
            }
            for (int i = 0; i < n; i++) {
                /* causal: keys after the query are masked out of the softmax (exactly 0) */
                int last = causal ? i : n - 1;
                double m = -1e300, s = 0;
                for (int j = 0; j <= last; j++) {
                    double dot = 0;
                    for (int x = 0; x < dh; x++) dot += (double)q[(size_t)i * dh + x] * k[(size_t)j * dh + x];
                    sc[j] = dot / sqrt((double)dh);
                    if (sc[j] > m) m = sc[j];
                }
                for (int j = 0; j <= last; j++) s += sc[j] = exp(sc[j] - m);
                for (int j = 0; j < n; j++) a[(size_t)i * n + j] = j <= last ? (float)(sc[j] / s) : 0.0f;
            }
        }
    if (dump) { /* raw float32 attn, q, k for encoding experiments */
        FILE *df = fopen(dump, "wb");
        if (!df || fwrite(cap.attn, sizeof(float), heads * nn, df) != heads * nn ||
            fwrite(cap.q, sizeof(float), heads * nd, df) != heads * nd ||
            fwrite(cap.k, sizeof(float), heads * nd, df) != heads * nd || fclose(df))
            return perror(dump), 1;
    }
    if (!qk) {
        free(cap.q), free(cap.k);
        cap.q = cap.k = NULL;
    }

    char text_a[4096], text_b[1024];
    if (inject) snprintf(text_a, sizeof text_a, "</script><script>alert(1)</script> <img src=x onerror=alert(1)>");
    else snprintf(text_a, sizeof text_a, "synthetic input with %d tokens", n);
    if (causal) { /* the text the tokens spell (specials aside), shortened */
        size_t o = 0;
        for (int i = 1; i < n - 1; i++) {
            size_t len = strlen(disp[i]);
            if (o + len + 1 >= sizeof text_a) break;
            memcpy(text_a + o, disp[i], len);
            o += len;
        }
        text_a[o] = '\0';
    }
    snprintf(text_b, sizeof text_b, "and a second sentence");

    OutDoc d = {
        .model_name = demo ? "attnviz-demo" : causal ? "synthetic-gpt2" : "synthetic-bert",
        .model_dir = "weights/synthetic",
        .cfg = &cfg,
        .dtype = "F32",
        .is_demo = demo,
        .model_note = demo ? "Constructed demo model: its weights are built by hand so each head shows one "
                             "textbook pattern; it is not trained. `make weights MODEL=all-MiniLM-L6-v2` installs a trained one."
                           : NULL,
        .head_patterns = demo ? pat : NULL,
        .text_a = text_a,
        .text_b = pair ? text_b : NULL,
        .enc = &enc,
        .cap = &cap,
        .init_layer = init_l,
        .init_head = init_h,
        .layers = sel_l,
        .n_sel_layers = nsl,
        .heads = sel_h,
        .n_sel_heads = nsh,
        .precision = 6,
        .with_qk = qk,
        .display_tokens = causal ? (const char *const *)disp : NULL,
    };

    AvErr e = {0};
    FILE *f = fopen(argv[1], "wb");
    if (!f) return perror(argv[1]), 1;
    double t0 = now_ms();
    if (html_write_doc(f, &d, tdir, &e)) {
        fprintf(stderr, "page_fixture: %s\n", e.msg);
        return 1;
    }
    if (fclose(f)) return perror(argv[1]), 1;
    double t1 = now_ms();
    fprintf(stderr, "html_write_doc: %.1f ms\n", t1 - t0);
    f = fopen(argv[2], "wb");
    if (!f) return perror(argv[2]), 1;
    if (json_write_doc(f, &d, &e)) {
        fprintf(stderr, "page_fixture: %s\n", e.msg);
        return 1;
    }
    if (fclose(f)) return perror(argv[2]), 1;
    for (int i = 0; i < n; i++) free(disp[i]);
    free(cap.attn), free(cap.q), free(cap.k), free(sc), free(pat), free(tok), free(disp), free(ids), free(types);
    free(special), free(start), free(role);
    free(sel_l), free(sel_h);
    return 0;
}
