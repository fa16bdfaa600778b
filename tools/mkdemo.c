/* mkdemo — generates the attnviz demo model: a BERT checkpoint (Hugging Face
 * layout) whose weights are constructed, not trained, so that every attention
 * head follows a named, checkable pattern. docs/demo-model.md explains the
 * construction; heads.json (written here) names and describes every head.
 *
 * Usage: mkdemo OUT_DIR WORDS_FILE
 * Deterministic: no clock, no system randomness; same input, same bytes.
 *
 * The idea: the residual stream is a set of disjoint blocks (token code, token
 * kind, sentence type, position code, and features layer 0 writes), each block
 * mean-zero with a norm that does not depend on the token or position. LayerNorm
 * then only divides by a known constant, which the LayerNorm gains undo, so
 * every layer reads the blocks exactly where the embeddings put them. Each head
 * uses its 64 query/key dimensions to compare blocks: rotated position codes
 * (previous, next), constant queries against kind indicators (cls, sep), token
 * codes against token codes (same-token)... */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "safetensors.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Shape. The head dimension (64) is what the token-code heads need; 12 heads
 * so that `--layer 0 --head 8` exists; the FFN needs only 4 units. */
enum { HID = 768, N_LAYERS = 2, N_HEADS = 12, HEAD_DIM = 64, INTER = 64, MAX_POS = 512, N_TYPES = 2 };
#define LN_EPS 1e-12

/* Token codes: balanced ±1 vectors (as many +1 as -1, so mean-zero with a fixed
 * norm), pairwise dot product at most CODE_MAX_DOT (cosine 0.39). */
enum { CODE_DIM = 46, CODE_MAX_DOT = 18 };
#define CODE_SEED 0x5EED0A77ull
#define CODE_MAX_TRIES 20000000L
#define MAX_VOCAB 8000

/* Position code: N_FREQ sinusoids, periods 2.5 * 1.5^k. Their mean cosine
 * kernel is 1 at distance 0 and within [-0.60, 0.59] for 1 <= |d| <= 514. */
enum { N_FREQ = 8 };

/* Token kinds, stored as a centred one-hot (mean-zero, same norm for all). */
enum { KIND_CLS, KIND_SEP, KIND_SPECIAL, KIND_WORD, KIND_PIECE, N_KIND };

/* Residual-stream layout: first dimension of each block; the rest stay zero. */
enum {
    R_TOK = 0,                         /* token code, ±A_TOK */
    R_KIND = R_TOK + CODE_DIM,         /* A_KIND * (one-hot - 1/5) */
    R_TYPE = R_KIND + N_KIND,          /* (+A_TYPE, -A_TYPE) for sentence A, negated for B */
    R_POS = 56,                        /* per frequency: +cos, -cos, +sin, -sin (times A_POS) */
    R_PREV_TOK = R_POS + 4 * N_FREQ + 8, /* layer 0: code of token i-1, halved (zero for [CLS]) */
    R_PREV_KIND = R_PREV_TOK + CODE_DIM, /* layer 0: kind of token i-1, halved */
    R_PREV_NULL = R_PREV_KIND + N_KIND,  /* layer 0: ±pair standing in for the [CLS] code */
    R_NEXT_KIND = R_PREV_NULL + 2,       /* layer 0: kind of token i+1, halved */
    R_START = R_NEXT_KIND + N_KIND,      /* layer-0 FFN: +-pair, + when i starts its sentence */
    R_END = R_START + 2,                 /* layer-0 FFN: +-pair, + when i ends its sentence */
    R_USED = R_END + 2
};
_Static_assert((int)R_TYPE + 2 <= (int)R_POS && (int)R_USED <= (int)HID, "residual blocks overlap or overflow");
/* The widest heads: induction (code + position code + sink) and the previous
 * head's value (code + kind + [CLS] indicator). */
_Static_assert((int)CODE_DIM + 2 * (int)N_FREQ + 1 <= (int)HEAD_DIM && (int)CODE_DIM + (int)N_KIND + 1 <= (int)HEAD_DIM,
               "head too narrow");

/* Block amplitudes (per dimension). */
#define A_TOK 2.0
#define A_KIND 6.0
#define A_TYPE 4.0
#define A_POS 3.0
#define A_COPY 0.5 /* copies written by layer 0 are half as large as the originals */
#define A_FLAG 2.0
#define FFN_SHARP 10.0 /* slope of the FFN's clamp */

/* Squared norm of each group of blocks (every token has exactly these). */
#define NORM2_EMB (CODE_DIM * A_TOK * A_TOK + 0.8 * A_KIND * A_KIND + 2 * A_TYPE * A_TYPE + \
                   N_FREQ * 2 * A_POS * A_POS)
#define NORM2_ATT (CODE_DIM * (A_COPY * A_TOK) * (A_COPY * A_TOK) + 2 * 0.8 * (A_COPY * A_KIND) * (A_COPY * A_KIND))
#define NORM2_FFN (2 * 2 * A_FLAG * A_FLAG)

typedef struct {
    float *wq, *bq, *wk, *bk, *wv, *bv; /* (HID, HID), (HID) each */
    float *wo, *bo;                     /* (HID, HID), (HID) */
    float *ln1_g, *ln1_b;               /* (HID) */
    float *w1, *b1;                     /* (INTER, HID), (INTER) */
    float *w2, *b2;                     /* (HID, INTER), (HID) */
    float *ln2_g, *ln2_b;               /* (HID) */
} Layer;

typedef struct {
    int n_vocab;
    char **vocab;        /* (n_vocab) token spellings */
    int8_t *codes;       /* (n_vocab, CODE_DIM) ±1 */
    float *word;         /* (n_vocab, HID) */
    float *pos;          /* (MAX_POS, HID) */
    float *type;         /* (N_TYPES, HID) */
    float *emb_g, *emb_b; /* (HID) */
    Layer layers[N_LAYERS];
    float *arena;        /* every float tensor above lives here */
} Demo;

/* A linear read-out of the residual stream: value = w . x + c. Query, key and
 * value rows, and FFN units, are built as scaled sums of these. */
typedef struct {
    double w[HID];
    double c;
} Reader;

static double freq(int k) { return 2.0 * M_PI / (2.5 * pow(1.5, k)); }

/* ---- vocabulary ---------------------------------------------------------- */

static int kind_of(const char *tok) {
    if (!strcmp(tok, "[CLS]")) return KIND_CLS;
    if (!strcmp(tok, "[SEP]")) return KIND_SEP;
    if (tok[0] == '[') return KIND_SPECIAL;
    if (!strncmp(tok, "##", 2)) return KIND_PIECE;
    return KIND_WORD;
}

static int vocab_has(const Demo *d, const char *s) {
    for (int i = 0; i < d->n_vocab; i++)
        if (!strcmp(d->vocab[i], s)) return 1;
    return 0;
}

static int vocab_add(Demo *d, const char *s, AvErr *e) {
    if (vocab_has(d, s)) return 0;
    if (d->n_vocab >= MAX_VOCAB) return av_err(e, "vocabulary would exceed %d tokens", MAX_VOCAB);
    if (!(d->vocab[d->n_vocab] = strdup(s))) return av_err(e, "out of memory");
    d->n_vocab++;
    return 0;
}

/* [PAD] [UNK] [CLS] [SEP] [MASK], every printable ASCII character except
 * upper case (the model is uncased) and its ## continuation, then the words:
 * any text tokenizes, and listed words are single tokens. */
static int build_vocab(Demo *d, const char *words_path, AvErr *e) {
    if (!(d->vocab = calloc(MAX_VOCAB, sizeof *d->vocab))) return av_err(e, "out of memory");
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 5; i++)
        if (vocab_add(d, specials[i], e)) return -1;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 33; c < 127; c++) {
            if (c >= 'A' && c <= 'Z') continue;
            char s[4] = {'#', '#', (char)c, 0};
            if (vocab_add(d, pass ? s : s + 2, e)) return -1;
        }
    FILE *f = fopen(words_path, "r");
    if (!f) return av_err(e, "%s: %s", words_path, strerror(errno));
    char line[256];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strcspn(line, "\r\n");
        if (line[n] == 0 && !feof(f)) {
            rc = av_err(e, "%s:%d: line too long", words_path, lineno);
            break;
        }
        line[n] = 0;
        if (n == 0) continue;
        /* A word must survive BERT's pre-tokenizer as one piece: lower-case letters and digits. */
        for (size_t i = 0; i < n && !rc; i++)
            if (!((line[i] >= 'a' && line[i] <= 'z') || (line[i] >= '0' && line[i] <= '9')))
                rc = av_err(e, "%s:%d: \"%s\" is not a lower-case word (a-z, 0-9)", words_path, lineno, line);
        if (!rc) rc = vocab_add(d, line, e);
    }
    if (!rc && ferror(f)) rc = av_err(e, "%s: read error", words_path);
    fclose(f);
    return rc;
}

/* ---- token codes --------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Draws balanced codes (fixed-seed shuffle of CODE_DIM/2 ones) and keeps those
 * whose dot product with every code kept so far is <= CODE_MAX_DOT, so two
 * different tokens never look alike to the token-matching heads. */
static int make_codes(Demo *d, AvErr *e) {
    uint64_t *bits = malloc((size_t)d->n_vocab * sizeof *bits); /* (n_vocab) codes as bit masks */
    if (!bits || !(d->codes = malloc((size_t)d->n_vocab * CODE_DIM))) {
        free(bits);
        return av_err(e, "out of memory");
    }
    uint64_t seed = CODE_SEED;
    long tries = 0;
    for (int n = 0; n < d->n_vocab;) {
        if (++tries > CODE_MAX_TRIES) {
            free(bits);
            return av_err(e, "could not draw %d token codes (vocabulary too large)", d->n_vocab);
        }
        int b[CODE_DIM];
        for (int i = 0; i < CODE_DIM; i++) b[i] = i < CODE_DIM / 2;
        for (int i = CODE_DIM - 1; i > 0; i--) {
            int j = (int)(splitmix64(&seed) % (uint64_t)(i + 1)), t = b[i];
            b[i] = b[j];
            b[j] = t;
        }
        uint64_t m = 0;
        for (int i = 0; i < CODE_DIM; i++) m |= (uint64_t)b[i] << i;
        int ok = 1;
        for (int k = 0; k < n && ok; k++) ok = CODE_DIM - 2 * __builtin_popcountll(m ^ bits[k]) <= CODE_MAX_DOT;
        if (!ok) continue;
        bits[n] = m;
        for (int i = 0; i < CODE_DIM; i++) d->codes[(size_t)n * CODE_DIM + i] = (int8_t)(b[i] ? 1 : -1);
        n++;
    }
    free(bits);
    return 0;
}

/* ---- readers ------------------------------------------------------------- */

static void rd_clear(Reader *r) { memset(r, 0, sizeof *r); }

/* r += s * a */
static void rd_add(Reader *r, const Reader *a, double s) {
    for (int i = 0; i < HID; i++) r->w[i] += s * a->w[i];
    r->c += s * a->c;
}

static void rd_const(Reader *r, double c) {
    rd_clear(r);
    r->c = c;
}

/* Coordinate d of the token code (±1). */
static void rd_tok(Reader *r, int d) {
    rd_clear(r);
    r->w[R_TOK + d] = 1.0 / A_TOK;
}

/* Coordinate d of the previous token's code as layer 0 wrote it (±1; 0 after [CLS]). */
static void rd_prev_tok(Reader *r, int d) {
    rd_clear(r);
    r->w[R_PREV_TOK + d] = 1.0 / (A_COPY * A_TOK);
}

/* 1 if the token is of kind k, else 0 (block base selects own/previous/next kind). */
static void rd_kind_at(Reader *r, int base, double amp, int k) {
    rd_clear(r);
    r->w[base + k] = 1.0 / amp;
    r->c = 1.0 / N_KIND;
}
static void rd_kind(Reader *r, int k) { rd_kind_at(r, R_KIND, A_KIND, k); }

/* +1 for sentence A (token_type 0), -1 for sentence B. */
static void rd_type(Reader *r) {
    rd_clear(r);
    r->w[R_TYPE] = 0.5 / A_TYPE;
    r->w[R_TYPE + 1] = -0.5 / A_TYPE;
}

/* cos / sin of frequency k at the token's position. */
static void rd_cos(Reader *r, int k) {
    rd_clear(r);
    r->w[R_POS + 4 * k] = 0.5 / A_POS;
    r->w[R_POS + 4 * k + 1] = -0.5 / A_POS;
}
static void rd_sin(Reader *r, int k) {
    rd_clear(r);
    r->w[R_POS + 4 * k + 2] = 0.5 / A_POS;
    r->w[R_POS + 4 * k + 3] = -0.5 / A_POS;
}

/* +1 / -1 value of a flag pair written by the layer-0 FFN. */
static void rd_flag(Reader *r, int base) {
    rd_clear(r);
    r->w[base] = 0.5 / A_FLAG;
    r->w[base + 1] = -0.5 / A_FLAG;
}

/* Row `row` of head h's query/key/value projection reads scale * r. Queries
 * carry sqrt(HEAD_DIM) so that scores come out in the units the heads are
 * designed in, after BERT's division by sqrt(HEAD_DIM). */
static void set_row(float *w, float *b, int h, int row, const Reader *r, double scale) {
    size_t o = (size_t)(h * HEAD_DIM + row);
    for (int i = 0; i < HID; i++) w[o * HID + i] = (float)(scale * r->w[i]);
    b[o] = (float)(scale * r->c);
}
static void set_q(Layer *L, int h, int row, const Reader *r, double s) { set_row(L->wq, L->bq, h, row, r, s * sqrt(HEAD_DIM)); }
static void set_k(Layer *L, int h, int row, const Reader *r) { set_row(L->wk, L->bk, h, row, r, 1.0); }
static void set_v(Layer *L, int h, int row, const Reader *r) { set_row(L->wv, L->bv, h, row, r, 1.0); }

/* ---- head building blocks ------------------------------------------------ */

/* Adds s * mean_k cos(w_k (j - (i + off))) to the score of query i and key j:
 * the query is the position code rotated by off steps, the key the plain code.
 * Peaks (value s) at j = i + off. With zero_cls the key is zero on [CLS]
 * (always position 0), so a sink there is not disturbed. Returns the next row. */
static int add_position(Layer *L, int h, int row, int off, double s, int zero_cls) {
    Reader c, sn, q, kc, cls;
    rd_kind(&cls, KIND_CLS);
    for (int k = 0; k < N_FREQ; k++) {
        double co = cos(freq(k) * off), si = sin(freq(k) * off);
        rd_cos(&c, k);
        rd_sin(&sn, k);
        rd_clear(&q); /* cos(w(i+off)) */
        rd_add(&q, &c, co);
        rd_add(&q, &sn, -si);
        set_q(L, h, row, &q, s / N_FREQ);
        rd_clear(&q); /* sin(w(i+off)) */
        rd_add(&q, &sn, co);
        rd_add(&q, &c, si);
        set_q(L, h, row + 1, &q, s / N_FREQ);
        kc = c;
        if (zero_cls) rd_add(&kc, &cls, -1.0); /* cos(0) = 1, sin(0) = 0 at position 0 */
        set_k(L, h, row, &kc);
        set_k(L, h, row + 1, &sn);
        row += 2;
    }
    return row;
}

/* Adds beta * (code_i . key_code_j) / CODE_DIM: beta when the codes are equal,
 * at most 0.39 beta otherwise. The key reads the token's own code, or (prev) the
 * code of the token before it; zero_cls subtracts the [CLS] code on [CLS]. */
static int add_token_match(Layer *L, int h, int row, double beta, int prev, const int8_t *zero_cls) {
    Reader q, k, cls;
    rd_kind(&cls, KIND_CLS);
    for (int d = 0; d < CODE_DIM; d++) {
        rd_tok(&q, d);
        set_q(L, h, row + d, &q, beta / CODE_DIM);
        if (prev) rd_prev_tok(&k, d);
        else rd_tok(&k, d);
        if (zero_cls) rd_add(&k, &cls, -zero_cls[d]);
        set_k(L, h, row + d, &k);
    }
    return row + CODE_DIM;
}

/* Adds sigma * key(j) for every query: a constant query against a key feature
 * (an indicator), e.g. "is [CLS]". q_extra, when set, adds to the constant. */
static int add_key_bias(Layer *L, int h, int row, double sigma, const Reader *key, const Reader *q_extra) {
    Reader q;
    rd_const(&q, sigma);
    if (q_extra) rd_add(&q, q_extra, 1.0);
    set_q(L, h, row, &q, 1.0);
    set_k(L, h, row, key);
    return row + 1;
}

/* Adds c * type_i * type_j: +c within a sentence, -c across. */
static int add_same_sentence(Layer *L, int h, int row, double c) {
    Reader t;
    rd_type(&t);
    set_q(L, h, row, &t, c);
    set_k(L, h, row, &t);
    return row + 1;
}

/* ---- head families ------------------------------------------------------- */

/* i + off. `previous` and `next` are sharper (30) and give their row without a
 * target a home: [CLS] for previous, a [SEP] for next (key bias 8, well below
 * the 30 of a real target). */
static void head_offset(Layer *L, int h, int off) {
    Reader key;
    if (off == -1 || off == 1) {
        int row = add_position(L, h, 0, off, 30.0, 0);
        rd_kind(&key, off < 0 ? KIND_CLS : KIND_SEP);
        add_key_bias(L, h, row, 8.0, &key, NULL);
    } else {
        add_position(L, h, 0, off, 24.0, 0);
    }
}

static void head_cls(Layer *L, int h) {
    Reader key;
    rd_kind(&key, KIND_CLS);
    add_key_bias(L, h, 0, 12.0, &key, NULL);
}

/* [SEP] (+12) of the query's own sentence (+5 vs -5). */
static void head_sep(Layer *L, int h) {
    Reader key;
    rd_kind(&key, KIND_SEP);
    int row = add_key_bias(L, h, 0, 12.0, &key, NULL);
    add_same_sentence(L, h, row, 5.0);
}

/* Same id: 24; a position penalty 4 * kernel(j - i) makes the token itself
 * score lowest among its occurrences (the kernel is 1 only at j = i). */
static void head_same_token(Layer *L, int h) {
    int row = add_token_match(L, h, 0, 24.0, 0, NULL);
    add_position(L, h, row, 0, -4.0, 0);
}

/* Same id in the other sentence: 32 + 10; same id in the own sentence
 * (the token itself, repeats): 32 - 10; rows without a match fall back to a
 * [CLS] sink at 32 (its query adds 10 * type_i to cancel the cross-sentence
 * term on [CLS], whose key carries no token code). */
static void head_cross_same_token(Layer *L, int h, const int8_t *cls_code) {
    Reader key, t;
    int row = add_token_match(L, h, 0, 32.0, 0, cls_code);
    row = add_same_sentence(L, h, row, -10.0);
    rd_kind(&key, KIND_CLS);
    rd_type(&t);
    for (int i = 0; i < HID; i++) t.w[i] *= 10.0;
    add_key_bias(L, h, row, 32.0, &key, &t);
}

/* Uniform over the own (sign +1) or the other (sign -1) sentence. */
static void head_sentence(Layer *L, int h, double sign) { add_same_sentence(L, h, 0, 8.0 * sign); }

/* Needs layer 0's previous-token copy: query code_i against key prev_code_j
 * (40 where token j-1 equals token i), minus 14 * kernel(j - (i+1)) so that
 * j = i+1 (the token after the query itself) drops below the [CLS] sink at 29. */
static void head_induction(Layer *L, int h) {
    Reader key;
    int row = add_token_match(L, h, 0, 40.0, 1, NULL);
    row = add_position(L, h, row, 1, -14.0, 1);
    rd_kind(&key, KIND_CLS);
    add_key_bias(L, h, row, 29.0, &key, NULL);
}

/* Needs the layer-0 FFN's start/end flag: 6 * flag_j (+-1) + 6 * same-sentence. */
static void head_boundary(Layer *L, int h, int flag_base) {
    Reader key;
    rd_flag(&key, flag_base);
    int row = add_key_bias(L, h, 0, 6.0, &key, NULL);
    add_same_sentence(L, h, row, 6.0);
}

/* Layer 0's previous head also writes, for each token, the code and kind of
 * the token it attends to (i-1) at half amplitude. The code of [CLS] is
 * replaced by a +-pair of the same norm, so that no key looks like [CLS]
 * to the induction head and the residual norm stays the same. */
static void write_prev_copy(Layer *L, int h, const int8_t *cls_code) {
    Reader v, cls;
    rd_kind(&cls, KIND_CLS);
    for (int d = 0; d < CODE_DIM; d++) {
        rd_tok(&v, d);
        rd_add(&v, &cls, -cls_code[d]);
        set_v(L, h, d, &v);
        L->wo[(size_t)(R_PREV_TOK + d) * HID + h * HEAD_DIM + d] = (float)(A_COPY * A_TOK);
    }
    for (int k = 0; k < N_KIND; k++) {
        rd_clear(&v);
        v.w[R_KIND + k] = 1.0 / A_KIND; /* centred one-hot, mean-zero */
        set_v(L, h, CODE_DIM + k, &v);
        L->wo[(size_t)(R_PREV_KIND + k) * HID + h * HEAD_DIM + CODE_DIM + k] = (float)(A_COPY * A_KIND);
    }
    set_v(L, h, CODE_DIM + N_KIND, &cls);
    double z = sqrt(CODE_DIM / 2.0) * A_COPY * A_TOK;
    L->wo[(size_t)R_PREV_NULL * HID + h * HEAD_DIM + CODE_DIM + N_KIND] = (float)z;
    L->wo[(size_t)(R_PREV_NULL + 1) * HID + h * HEAD_DIM + CODE_DIM + N_KIND] = (float)-z;
}

/* Layer 0's next head writes the kind of token i+1 (for the sentence-end flag). */
static void write_next_kind(Layer *L, int h) {
    Reader v;
    for (int k = 0; k < N_KIND; k++) {
        rd_clear(&v);
        v.w[R_KIND + k] = 1.0 / A_KIND;
        set_v(L, h, k, &v);
        L->wo[(size_t)(R_NEXT_KIND + k) * HID + h * HEAD_DIM + k] = (float)(A_COPY * A_KIND);
    }
}

/* Layer 0's FFN turns the copied kinds into two crisp flags:
 *   start_i = [token i-1 is [CLS] or [SEP]] and i is not [CLS]
 *   end_i   = [token i+1 is [SEP]] and i is not [SEP]
 * Each uses two units computing clamp(y, 0, 1) = (gelu(a y) - gelu(a (y - 1))) / a
 * (exact to 1e-12 for the values y takes: about -0.75 or 1.75), written as
 * A_FLAG * (2 clamp - 1) into a +-pair, so the norm is the same for every token. */
static void ffn_flags(Layer *L) {
    Reader y, t;
    for (int f = 0; f < 2; f++) {
        rd_const(&y, -0.75);
        if (f == 0) {
            rd_kind_at(&t, R_PREV_KIND, A_COPY * A_KIND, KIND_CLS);
            rd_add(&y, &t, 2.5);
            rd_kind_at(&t, R_PREV_KIND, A_COPY * A_KIND, KIND_SEP);
            rd_add(&y, &t, 2.5);
            rd_kind(&t, KIND_CLS);
        } else {
            rd_kind_at(&t, R_NEXT_KIND, A_COPY * A_KIND, KIND_SEP);
            rd_add(&y, &t, 2.5);
            rd_kind(&t, KIND_SEP);
        }
        rd_add(&y, &t, -10.0);
        int u = 2 * f, out = f == 0 ? R_START : R_END;
        for (int i = 0; i < HID; i++) {
            L->w1[(size_t)u * HID + i] = (float)(FFN_SHARP * y.w[i]);
            L->w1[(size_t)(u + 1) * HID + i] = (float)(FFN_SHARP * y.w[i]);
        }
        L->b1[u] = (float)(FFN_SHARP * y.c);
        L->b1[u + 1] = (float)(FFN_SHARP * (y.c - 1.0));
        for (int s = 0; s < 2; s++) {
            double sign = s ? -1.0 : 1.0;
            L->w2[(size_t)(out + s) * INTER + u] = (float)(sign * 2 * A_FLAG / FFN_SHARP);
            L->w2[(size_t)(out + s) * INTER + u + 1] = (float)(-sign * 2 * A_FLAG / FFN_SHARP);
            L->b2[out + s] = (float)(-sign * A_FLAG);
        }
    }
}

/* ---- the heads ----------------------------------------------------------- */

typedef struct {
    const char *pattern;
    const char *description;
} HeadSpec;

static const HeadSpec HEADS[N_LAYERS][N_HEADS] = {
    {
        {"self", "Row i attends to i. Query and key are the position code; the score peaks where the positions match."},
        {"next", "Row i attends to i+1; the last row ([SEP]) attends to a [SEP]. The query is the position code rotated one step forward. Also writes the kind of token i+1 into the residual stream (for the layer-0 FFN's sentence-end flag)."},
        {"cls", "Every row attends to [CLS] (position 0): a constant query against the key's \"is [CLS]\" indicator."},
        {"sep", "Row i attends to the [SEP] that closes its own sentence: the [SEP] after sentence A for [CLS] and A's tokens, the final [SEP] for sentence B's tokens. \"Is [SEP]\" indicator plus a same-sentence (token_type) term."},
        {"same-token", "Row i attends to every position holding the same token id. Where the id occurs more than once the other occurrences get more weight than the token itself (a small position penalty on j = i). Token codes: 46-dimensional balanced +-1 vectors, pairwise cosine <= 0.39."},
        {"previous-2", "Row i attends to i-2 (rows i >= 2). The query is the position code rotated two steps back."},
        {"next-2", "Row i attends to i+2 (rows i <= n-3). The query is the position code rotated two steps forward."},
        {"sentence", "Broad: row i spreads its attention evenly over its own sentence (all positions with its token_type: [CLS] A [SEP], or B [SEP])."},
        {"previous", "Row i attends to i-1; row 0 ([CLS]) attends to itself. The query is the position code rotated one step back. Also writes the code and kind of token i-1 into the residual stream, which layer 1's induction and sentence-start heads read."},
        {"cross-same-token", "Sentence pairs: row i attends to the positions of the other sentence that hold the same token id (e.g. flies -> flies, like -> like). Rows without such a match attend to [CLS]."},
        {"other-sentence", "Broad, sentence pairs: row i spreads its attention evenly over the other sentence (all positions with the other token_type). For a single sentence it is uniform over all tokens."},
        {"previous-3", "Row i attends to i-3 (rows i >= 3). The query is the position code rotated three steps back."},
    },
    {
        {"induction", "Row i attends to the token right after each other occurrence of its own token: positions m+1 where id[m] = id[i], m != i (e.g. in \"a b ... a b\" the first a attends to the second b and vice versa). Reads the previous-token copy written by layer 0's previous head. Rows without a match attend to [CLS]."},
        {"sentence-start", "Row i attends to the first token of its own sentence: position 1 for [CLS] and sentence A, the first token of B for sentence B. Reads the start flag computed by layer 0's FFN from the previous-token kind."},
        {"sentence-end", "Row i attends to the last token of its own sentence (the one before the [SEP] that closes it). Reads the end flag computed by layer 0's FFN from the next-token kind."},
        {"previous", "Row i attends to i-1; row 0 ([CLS]) attends to itself. Same construction as layer 0's previous head, reading the position code through layer 0."},
        {"next", "Row i attends to i+1; the last row attends to a [SEP]. Same construction as layer 0's next head."},
        {"self", "Row i attends to i, as layer 0's self head."},
        {"cls", "Every row attends to [CLS], as layer 0's cls head."},
        {"sep", "Row i attends to the [SEP] that closes its own sentence, as layer 0's sep head."},
        {"same-token", "Row i attends to the positions holding the same token id; other occurrences get more weight than the token itself. As layer 0's same-token head, reading the token code through layer 0."},
        {"next-3", "Row i attends to i+3 (rows i <= n-4)."},
        {"previous-2", "Row i attends to i-2 (rows i >= 2)."},
        {"next-2", "Row i attends to i+2 (rows i <= n-3)."},
    },
};

static int build_head(Demo *d, int l, int h, AvErr *e) {
    Layer *L = &d->layers[l];
    const char *p = HEADS[l][h].pattern;
    const int8_t *cls_code = d->codes + (size_t)2 * CODE_DIM; /* [CLS] is id 2 */
    int n;
    if (!strcmp(p, "self")) head_offset(L, h, 0);
    else if (!strcmp(p, "previous")) head_offset(L, h, -1);
    else if (!strcmp(p, "next")) head_offset(L, h, 1);
    else if (sscanf(p, "previous-%d", &n) == 1) head_offset(L, h, -n);
    else if (sscanf(p, "next-%d", &n) == 1) head_offset(L, h, n);
    else if (!strcmp(p, "cls")) head_cls(L, h);
    else if (!strcmp(p, "sep")) head_sep(L, h);
    else if (!strcmp(p, "same-token")) head_same_token(L, h);
    else if (!strcmp(p, "cross-same-token")) head_cross_same_token(L, h, cls_code);
    else if (!strcmp(p, "sentence")) head_sentence(L, h, 1.0);
    else if (!strcmp(p, "other-sentence")) head_sentence(L, h, -1.0);
    else if (!strcmp(p, "induction")) head_induction(L, h);
    else if (!strcmp(p, "sentence-start")) head_boundary(L, h, R_START);
    else if (!strcmp(p, "sentence-end")) head_boundary(L, h, R_END);
    else return av_err(e, "layer %d head %d: no construction for pattern \"%s\"", l, h, p);
    /* Layer 0's previous and next heads feed layer 1. */
    if (l == 0 && !strcmp(p, "previous")) write_prev_copy(L, h, cls_code);
    if (l == 0 && !strcmp(p, "next")) write_next_kind(L, h);
    return 0;
}

/* ---- model --------------------------------------------------------------- */

static int alloc_model(Demo *d, AvErr *e) {
    size_t per_layer = 4 * ((size_t)HID * HID + HID) + 2 * (size_t)INTER * HID + INTER + 5 * (size_t)HID;
    size_t total = (size_t)d->n_vocab * HID + (size_t)MAX_POS * HID + (size_t)N_TYPES * HID + 2 * HID +
                   N_LAYERS * per_layer;
    float *p = calloc(total, sizeof *p);
    if (!p) return av_err(e, "out of memory (%zu floats)", total);
    d->arena = p;
#define TAKE(ptr, n) ((ptr) = p, p += (n))
    TAKE(d->word, (size_t)d->n_vocab * HID);
    TAKE(d->pos, (size_t)MAX_POS * HID);
    TAKE(d->type, (size_t)N_TYPES * HID);
    TAKE(d->emb_g, HID);
    TAKE(d->emb_b, HID);
    for (int l = 0; l < N_LAYERS; l++) {
        Layer *L = &d->layers[l];
        TAKE(L->wq, (size_t)HID * HID);
        TAKE(L->bq, HID);
        TAKE(L->wk, (size_t)HID * HID);
        TAKE(L->bk, HID);
        TAKE(L->wv, (size_t)HID * HID);
        TAKE(L->bv, HID);
        TAKE(L->wo, (size_t)HID * HID);
        TAKE(L->bo, HID);
        TAKE(L->ln1_g, HID);
        TAKE(L->ln1_b, HID);
        TAKE(L->w1, (size_t)INTER * HID);
        TAKE(L->b1, INTER);
        TAKE(L->w2, (size_t)HID * INTER);
        TAKE(L->b2, HID);
        TAKE(L->ln2_g, HID);
        TAKE(L->ln2_b, HID);
    }
#undef TAKE
    return 0;
}

static void fill(float *x, int n, double v) {
    for (int i = 0; i < n; i++) x[i] = (float)v;
}

static void build_embeddings(Demo *d) {
    for (int t = 0; t < d->n_vocab; t++) {
        float *w = d->word + (size_t)t * HID; /* (HID) */
        for (int i = 0; i < CODE_DIM; i++) w[R_TOK + i] = (float)(A_TOK * d->codes[(size_t)t * CODE_DIM + i]);
        int k = kind_of(d->vocab[t]);
        for (int i = 0; i < N_KIND; i++) w[R_KIND + i] = (float)(A_KIND * ((i == k) - 1.0 / N_KIND));
    }
    for (int i = 0; i < MAX_POS; i++) {
        float *p = d->pos + (size_t)i * HID; /* (HID) */
        for (int k = 0; k < N_FREQ; k++) {
            double c = cos(freq(k) * i), s = sin(freq(k) * i);
            p[R_POS + 4 * k] = (float)(A_POS * c);
            p[R_POS + 4 * k + 1] = (float)(-A_POS * c);
            p[R_POS + 4 * k + 2] = (float)(A_POS * s);
            p[R_POS + 4 * k + 3] = (float)(-A_POS * s);
        }
    }
    for (int t = 0; t < N_TYPES; t++) {
        d->type[(size_t)t * HID + R_TYPE] = (float)(t ? -A_TYPE : A_TYPE);
        d->type[(size_t)t * HID + R_TYPE + 1] = (float)(t ? A_TYPE : -A_TYPE);
    }
    /* LayerNorm divides by sqrt(norm^2 / HID); a gain of the same value undoes
     * it, so LN(x) = x for every residual vector of the designed norm. */
    fill(d->emb_g, HID, sqrt(NORM2_EMB / HID));
}

static int build_model(Demo *d, AvErr *e) {
    if (alloc_model(d, e)) return -1;
    build_embeddings(d);
    for (int l = 0; l < N_LAYERS; l++)
        for (int h = 0; h < N_HEADS; h++)
            if (build_head(d, l, h, e)) return -1;
    ffn_flags(&d->layers[0]);
    /* Layer 0 adds NORM2_ATT (attention copies) then NORM2_FFN (flags); layer 1
     * adds nothing (zero value/output/FFN weights), so its gains stay put. */
    fill(d->layers[0].ln1_g, HID, sqrt((NORM2_EMB + NORM2_ATT) / HID));
    for (int l = 0; l < N_LAYERS; l++) {
        if (l > 0) fill(d->layers[l].ln1_g, HID, sqrt((NORM2_EMB + NORM2_ATT + NORM2_FFN) / HID));
        fill(d->layers[l].ln2_g, HID, sqrt((NORM2_EMB + NORM2_ATT + NORM2_FFN) / HID));
    }
    return 0;
}

/* ---- output -------------------------------------------------------------- */

/* Files are written as "<name>.tmp" and renamed into place at the end, the
 * weights last (they are what make checks), so an interrupted run never leaves
 * a model whose parts disagree. */
typedef struct {
    const char *dir;
    char *tmp[8], *final[8];
    int n;
} Outputs;

static char *join3(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* Registers an output file; returns its temporary path. */
static const char *out_add(Outputs *o, const char *name, AvErr *e) {
    char *fin = join3(o->dir, "/", name);
    char *tmp = fin ? join3(fin, ".tmp", "") : NULL;
    if (!tmp) {
        free(fin);
        av_err(e, "out of memory");
        return NULL;
    }
    o->final[o->n] = fin;
    o->tmp[o->n++] = tmp;
    return tmp;
}

static void out_cleanup(Outputs *o, int remove_tmp) {
    for (int i = 0; i < o->n; i++) {
        if (remove_tmp) unlink(o->tmp[i]);
        free(o->tmp[i]);
        free(o->final[i]);
    }
    o->n = 0;
}

static int out_commit(Outputs *o, AvErr *e) {
    for (int i = 0; i < o->n; i++)
        if (rename(o->tmp[i], o->final[i]) != 0)
            return av_err(e, "%s: cannot rename to %s: %s", o->tmp[i], o->final[i], strerror(errno));
    return 0;
}

static int close_checked(FILE *f, const char *path, AvErr *e) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return av_err(e, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int write_config(const char *path, int n_vocab, AvErr *e) {
    FILE *f = fopen(path, "w");
    if (!f) return av_err(e, "%s: %s", path, strerror(errno));
    fprintf(f,
            "{\n"
            "  \"architectures\": [\"Model\"],\n"
            "  \"model_type\": \"bert\",\n"
            "  \"attnviz_demo\": true,\n"
            "  \"description\": \"attnviz demo model: weights constructed by tools/mkdemo.c, not trained. Every "
            "attention head follows the pattern named in heads.json (see docs/demo-model.md). For real attention, a "
            "trained model installs offline: make weights MODEL=all-MiniLM-L6-v2.\",\n"
            "  \"vocab_size\": %d,\n"
            "  \"hidden_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n"
            "  \"num_attention_heads\": %d,\n"
            "  \"intermediate_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n"
            "  \"type_vocab_size\": %d,\n"
            "  \"layer_norm_eps\": %g,\n"
            "  \"hidden_act\": \"gelu\",\n"
            "  \"hidden_dropout_prob\": 0.0,\n"
            "  \"attention_probs_dropout_prob\": 0.0,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"pad_token_id\": 0,\n"
            "  \"position_embedding_type\": \"absolute\",\n"
            "  \"torch_dtype\": \"float32\"\n"
            "}\n",
            n_vocab, HID, N_LAYERS, N_HEADS, INTER, MAX_POS, N_TYPES, LN_EPS);
    return close_checked(f, path, e);
}

static int write_text(const char *path, const char *text, AvErr *e) {
    FILE *f = fopen(path, "w");
    if (!f) return av_err(e, "%s: %s", path, strerror(errno));
    fputs(text, f);
    return close_checked(f, path, e);
}

static int write_vocab(const char *path, const Demo *d, AvErr *e) {
    FILE *f = fopen(path, "w");
    if (!f) return av_err(e, "%s: %s", path, strerror(errno));
    for (int i = 0; i < d->n_vocab; i++) fprintf(f, "%s\n", d->vocab[i]);
    return close_checked(f, path, e);
}

static int write_heads(const char *path, AvErr *e) {
    FILE *f = fopen(path, "w");
    if (!f) return av_err(e, "%s: %s", path, strerror(errno));
    fputs("{\"heads\": [\n", f);
    for (int l = 0; l < N_LAYERS; l++)
        for (int h = 0; h < N_HEADS; h++) {
            fprintf(f, "  {\"layer\": %d, \"head\": %d, \"pattern\": ", l, h);
            json_str(f, HEADS[l][h].pattern);
            fputs(", \"description\": ", f);
            json_str(f, HEADS[l][h].description);
            fputs(l == N_LAYERS - 1 && h == N_HEADS - 1 ? "}\n" : "},\n", f);
        }
    fputs("]}\n", f);
    return close_checked(f, path, e);
}

static int write_weights(const char *path, const Demo *d, AvErr *e) {
    enum { PER_LAYER = 16 };
    StWriteTensor ts[5 + N_LAYERS * PER_LAYER];
    char names[N_LAYERS * PER_LAYER][96];
    int n = 0;
#define T1(nm, ptr, a) (ts[n++] = (StWriteTensor){.name = (nm), .ndim = 1, .shape = {(a)}, .data = (ptr)})
#define T2(nm, ptr, a, b) (ts[n++] = (StWriteTensor){.name = (nm), .ndim = 2, .shape = {(a), (b)}, .data = (ptr)})
    T2("embeddings.word_embeddings.weight", d->word, d->n_vocab, HID);
    T2("embeddings.position_embeddings.weight", d->pos, MAX_POS, HID);
    T2("embeddings.token_type_embeddings.weight", d->type, N_TYPES, HID);
    T1("embeddings.LayerNorm.weight", d->emb_g, HID);
    T1("embeddings.LayerNorm.bias", d->emb_b, HID);
    int k = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        const Layer *L = &d->layers[l];
        struct {
            const char *suffix;
            const float *p;
            int rows, cols; /* cols 0: a vector */
        } parts[PER_LAYER] = {
            {"attention.self.query.weight", L->wq, HID, HID},     {"attention.self.query.bias", L->bq, HID, 0},
            {"attention.self.key.weight", L->wk, HID, HID},       {"attention.self.key.bias", L->bk, HID, 0},
            {"attention.self.value.weight", L->wv, HID, HID},     {"attention.self.value.bias", L->bv, HID, 0},
            {"attention.output.dense.weight", L->wo, HID, HID},   {"attention.output.dense.bias", L->bo, HID, 0},
            {"attention.output.LayerNorm.weight", L->ln1_g, HID, 0},
            {"attention.output.LayerNorm.bias", L->ln1_b, HID, 0},
            {"intermediate.dense.weight", L->w1, INTER, HID},     {"intermediate.dense.bias", L->b1, INTER, 0},
            {"output.dense.weight", L->w2, HID, INTER},           {"output.dense.bias", L->b2, HID, 0},
            {"output.LayerNorm.weight", L->ln2_g, HID, 0},        {"output.LayerNorm.bias", L->ln2_b, HID, 0},
        };
        for (int i = 0; i < PER_LAYER; i++, k++) {
            snprintf(names[k], sizeof names[k], "encoder.layer.%d.%s", l, parts[i].suffix);
            if (parts[i].cols) T2(names[k], parts[i].p, parts[i].rows, parts[i].cols);
            else T1(names[k], parts[i].p, parts[i].rows);
        }
    }
#undef T1
#undef T2
    return st_write(path, ts, n, ST_F32, e);
}

static int write_all(const char *dir, const Demo *d, AvErr *e) {
    Outputs o = {.dir = dir};
    const char *p;
    int rc = -1;
    if (!(p = out_add(&o, "config.json", e)) || write_config(p, d->n_vocab, e)) goto done;
    if (!(p = out_add(&o, "tokenizer_config.json", e)) ||
        write_text(p, "{\n  \"do_lower_case\": true,\n  \"model_max_length\": 512,\n  \"tokenizer_class\": \"BertTokenizer\"\n}\n", e))
        goto done;
    if (!(p = out_add(&o, "vocab.txt", e)) || write_vocab(p, d, e)) goto done;
    if (!(p = out_add(&o, "heads.json", e)) || write_heads(p, e)) goto done;
    if (!(p = out_add(&o, "model.safetensors", e)) || write_weights(p, d, e)) goto done;
    rc = out_commit(&o, e);
done:
    out_cleanup(&o, rc != 0);
    return rc;
}

/* mkdir -p */
static int make_dirs(const char *path, AvErr *e) {
    char *p = strdup(path);
    if (!p) return av_err(e, "out of memory");
    int rc = 0;
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != 0) continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            rc = av_err(e, "%s: cannot create directory: %s", p, strerror(errno));
            break;
        }
        *s = c;
        if (!c) break;
    }
    free(p);
    return rc;
}

static void demo_free(Demo *d) {
    for (int i = 0; i < d->n_vocab; i++) free(d->vocab[i]);
    free(d->vocab);
    free(d->codes);
    free(d->arena);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s OUT_DIR WORDS_FILE\n", argv[0]);
        return 2;
    }
    AvErr e = {0};
    Demo d = {0};
    int rc = 1;
    if (make_dirs(argv[1], &e) || build_vocab(&d, argv[2], &e) || make_codes(&d, &e) || build_model(&d, &e) || write_all(argv[1], &d, &e))
        goto done;
    fprintf(stderr, "mkdemo: wrote %s (%d tokens, %d layers x %d heads, hidden %d)\n", argv[1], d.n_vocab, N_LAYERS,
            N_HEADS, HID);
    rc = 0;
done:
    if (rc) fprintf(stderr, "mkdemo: %s\n", e.msg);
    demo_free(&d);
    return rc;
}
