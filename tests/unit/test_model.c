/* test_model.c — the engine (model.c, forward.c) on the committed
 * fixtures: every family, dtype and naming variant against PyTorch goldens;
 * checkpoint shape errors; threads; pytorch_model.bin. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "gemm.h"
#include "model.h"
#include "util.h"
#include "check_util.h"

static void flatten(const cJSON *a, float *out, size_t *k) {
    if (cJSON_IsNumber(a)) {
        out[(*k)++] = (float)a->valuedouble;
        return;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, a) flatten(it, out, k);
}

static const char *FIXTURES[] = {"tests/data/small-f32",       "tests/data/small-f32-google",
                                 "tests/data/small-f16",       "tests/data/small-bf16",
                                 "tests/data/small-gpt2",      "tests/data/small-gpt2-f16",
                                 "tests/data/small-roberta",   "tests/data/small-distilbert",
                                 "tests/data/small-distilbert-prefixed",
                                 /* Llama-style decoders (tests/ref/make_decoder_goldens.py) */
                                 "tests/data/small-llama",     "tests/data/small-qwen2",
                                 "tests/data/small-qwen3",     "tests/data/small-mistral",
                                 "tests/data/small-gemma2",    "tests/data/small-gemma3",
                                 "tests/data/small-phi3",
                                 /* XLM-R (Unigram tokenizer) and ELECTRA (embeddings_project), by
                                    transformers (tests/ref/make_encoder_goldens.py) */
                                 "tests/data/small-xlmr",      "tests/data/small-electra",
                                 /* ModernBERT: a bidirectional local window (tests/ref/modernbert_check.py --fixture) */
                                 "tests/data/small-modernbert",
                                 /* mixtures of experts (make_decoder_goldens.py): their routing too */
                                 "tests/data/small-mixtral",   "tests/data/small-qwen3moe",
                                 "tests/data/small-olmoe",
                                 /* gpt-oss: attention sinks, YaRN, biased router, clamped SwiGLU */
                                 "tests/data/small-gptoss"};

START_TEST(forward_matches_pytorch_goldens) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    char *gp = av_path_join(dir, "golden.json"), *buf;
    size_t len;
    ck_assert_int_eq(av_read_file(gp, 64 << 20, &buf, &len, &e), 0);
    cJSON *cases = cJSON_Parse(buf);
    ck_assert_ptr_nonnull(cases);
    float worst_attn = 0, worst_qk = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *ids_j = cJSON_GetObjectItem(c, "input_ids"), *types_j = cJSON_GetObjectItem(c, "token_type_ids");
        int n = cJSON_GetArraySize(ids_j);
        int *ids = malloc(sizeof(int) * n), *types = malloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) {
            ids[i] = cJSON_GetArrayItem(ids_j, i)->valueint;
            types[i] = cJSON_GetArrayItem(types_j, i)->valueint;
        }
        RunState rs;
        Capture cap;
        ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
        ck_assert_int_eq(model_capture_alloc(&cap, &m.cfg, n, 1, 1, &e), 0);
        if (model_forward(&m, &rs, ids, types, n, &cap, &e) != 0) ck_abort_msg("forward: %s", e.msg);
        size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * n;
        size_t nq = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * cap.head_dim;
        float *ref = malloc(sizeof(float) * (na > nq ? na : nq));
        size_t k = 0;
        flatten(cJSON_GetObjectItem(c, "attention"), ref, &k);
        ck_assert_uint_eq(k, na);
        worst_attn = fmaxf(worst_attn, max_abs_diff(cap.attn, ref, na));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "queries"), ref, &k);
        ck_assert_uint_eq(k, nq);
        worst_qk = fmaxf(worst_qk, max_abs_diff(cap.q, ref, nq));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "keys"), ref, &k);
        worst_qk = fmaxf(worst_qk, max_abs_diff(cap.k, ref, nq));
        k = 0;
        flatten(cJSON_GetObjectItem(c, "last_hidden"), ref, &k);
        ck_assert_uint_eq(k, (size_t)n * m.cfg.hidden_size);
        float hid = max_abs_diff(cap.hidden + (size_t)m.cfg.num_layers * n * m.cfg.hidden_size, ref, k);
        ck_assert_msg(hid < 1e-3f, "%s: last hidden state differs by %g", dir, hid);
        const cJSON *ex = cJSON_GetObjectItem(c, "experts");
        ck_assert_int_eq(ex != NULL, m.cfg.num_experts > 0);
        if (ex) { /* the router's choices, in order, and their weights */
            const size_t nk = (size_t)m.cfg.num_layers * n * cap.moe_k;
            k = 0;
            flatten(cJSON_GetObjectItem(ex, "ids"), ref, &k);
            ck_assert_uint_eq(k, nk);
            for (size_t i = 0; i < nk; i++)
                ck_assert_msg(cap.moe_ids[i] == (int)ref[i], "%s: routing %zu: expert %d, transformers %g", dir, i,
                              cap.moe_ids[i], ref[i]);
            k = 0;
            flatten(cJSON_GetObjectItem(ex, "weights"), ref, &k);
            ck_assert_uint_eq(k, nk);
            ck_assert_msg(max_abs_diff(cap.moe_w, ref, nk) < 1e-5f, "%s: routing weights differ by %g", dir,
                          max_abs_diff(cap.moe_w, ref, nk));
        }
        const cJSON *sk = cJSON_GetObjectItem(c, "sinks");
        ck_assert_int_eq(sk != NULL, m.cfg.attn_sinks);
        if (sk) { /* each row's sink share: 1 minus transformers' row */
            const size_t ns = (size_t)m.cfg.num_layers * m.cfg.num_heads * n;
            k = 0;
            flatten(sk, ref, &k);
            ck_assert_uint_eq(k, ns);
            ck_assert_msg(max_abs_diff(cap.sinks, ref, ns) < 1e-5f, "%s: sink shares differ by %g", dir,
                          max_abs_diff(cap.sinks, ref, ns));
        }
        free(ref), free(ids), free(types);
        model_capture_free(&cap);
        model_runstate_free(&rs);
    }
    fprintf(stderr, "INFO %s (%s %s): max abs error vs PyTorch: attention %.3g, q/k %.3g\n", dir, m.cfg.model_type, m.dtype_name,
            worst_attn, worst_qk);
    ck_assert_msg(worst_attn <= 1e-4f, "%s: attention differs from PyTorch by %g", dir, worst_attn);
    ck_assert_msg(worst_qk <= 1e-3f, "%s: q/k differ from PyTorch by %g", dir, worst_qk);
    cJSON_Delete(cases);
    free(buf), free(gp);
    model_free(&m);
}
END_TEST

/* Writes a copy of the small fixture with one tensor replaced or dropped. */
static void write_variant(const char *dir, const char *drop, const char *reshape) {
    StFile f;
    AvErr e;
    ck_assert_int_eq(st_open(&f, "tests/data/small-f32/model.safetensors", &e), 0);
    StWriteTensor *ts = calloc((size_t)f.n_tensors, sizeof *ts);
    float **bufs = calloc((size_t)f.n_tensors, sizeof *bufs);
    int n = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const StTensor *t = &f.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        size_t numel = t->nbytes / 4;
        bufs[n] = malloc(t->nbytes);
        st_to_f32(t, bufs[n]);
        ts[n].name = t->name;
        ts[n].ndim = t->ndim;
        memcpy(ts[n].shape, t->shape, sizeof t->shape);
        if (reshape && !strcmp(t->name, reshape)) { /* same numel, wrong shape */
            ts[n].ndim = 2;
            ts[n].shape[0] = 1;
            ts[n].shape[1] = (int64_t)numel;
        }
        ts[n].data = bufs[n];
        n++;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/data/small-f32/config.json tests/data/small-f32/vocab.txt %s/", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    char *p = av_path_join(dir, "model.safetensors");
    ck_assert_int_eq(st_write(p, ts, n, ST_F32, &e), 0);
    free(p);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs), free(ts);
    st_close(&f);
}

START_TEST(load_names_the_tensor_with_a_wrong_shape) {
    char dir[] = "/tmp/attnviz-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_variant(dir, NULL, "encoder.layer.1.attention.self.key.weight");
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, dir, &e), -1);
    ck_assert_msg(strstr(e.msg, "encoder.layer.1.attention.self.key.weight") && strstr(e.msg, "[1, 1024]") &&
                      strstr(e.msg, "[32, 32]"),
                  "message: %s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(load_names_a_missing_tensor) {
    char dir[] = "/tmp/attnviz-test-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_variant(dir, "encoder.layer.0.output.LayerNorm.bias", NULL);
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, dir, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing tensor 'encoder.layer.0.output.LayerNorm.bias'"), "message: %s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(threaded_forward_gives_the_single_thread_result) {
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-f32", &e), 0);
    int n = 64, ids[64], types[64];
    for (int i = 0; i < n; i++) ids[i] = 5 + (i * 7) % 100, types[i] = i >= 32;
    Capture c1, c2;
    RunState rs1, rs2;
    /* the run state runs on the threads its caller asks for */
    ck_assert_int_eq(model_runstate_alloc(&rs1, &m, n, 1, &e), 0);
    ck_assert_int_eq(rs1.n_threads, 1);
    ck_assert_int_eq(model_runstate_alloc(&rs2, &m, n, 3, &e), 0);
    ck_assert_int_eq(rs2.n_threads, 3);
    ck_assert_int_eq(model_capture_alloc(&c1, &m.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&c2, &m.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(model_forward(&m, &rs1, ids, types, n, &c1, &e), 0);
    ck_assert_int_eq(model_forward(&m, &rs2, ids, types, n, &c2, &e), 0);
    /* column-split products sum in another order: equal to float rounding, not bitwise */
    size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * n;
    ck_assert_float_lt(max_abs_diff(c1.attn, c2.attn, na), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1.q, c2.q, (size_t)m.cfg.num_layers * m.cfg.num_heads * n * c1.head_dim), 1e-5f);
    ck_assert_float_lt(max_abs_diff(c1.hidden, c2.hidden, (size_t)(m.cfg.num_layers + 1) * n * m.cfg.hidden_size), 1e-5f);
    /* without hidden states the last layer stops after its attention: same attention */
    Capture c3;
    ck_assert_int_eq(model_capture_alloc(&c3, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_forward(&m, &rs1, ids, types, n, &c3, &e), 0);
    ck_assert_float_eq(max_abs_diff(c1.attn, c3.attn, na), 0.0f);
    model_capture_free(&c3);
    /* without capture the forward pass still runs (per-thread scratch scores) */
    ck_assert_int_eq(model_forward(&m, &rs2, ids, types, n, NULL, &e), 0);
    model_capture_free(&c1), model_capture_free(&c2), model_runstate_free(&rs1), model_runstate_free(&rs2), model_free(&m);
}
END_TEST

/* Short inputs packed into one pass (batches): each input's attention, q/k
 * and hidden states are what a pass over it alone gives, in every family
 * (RoBERTa's pad positions, sentence pairs' token types, causal and
 * sliding-window masks), with every layer kept and with a few. */
START_TEST(packed_inputs_give_what_each_gives_alone) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    enum { G = 4 };
    const int lens[G] = {5, 9, 1, 13}, V = m.cfg.vocab_size;
    int ids[28], types[28], total = 0;
    for (int g = 0; g < G; g++)
        for (int i = 0; i < lens[g]; i++, total++) {
            ids[total] = (3 + 7 * total + g) % V;
            types[total] = m.cfg.type_vocab_size > 1 && i >= lens[g] / 2; /* a pair: B in the second half */
        }
    if (m.cfg.pos_offset > 0) ids[2] = m.cfg.pad_token_id; /* RoBERTa: a pad keeps padding_idx */
    for (int sel = 0; sel < 2; sel++) {
        const int keep[1] = {0}; /* sel 1: layer 0 only, and no hidden states: the pass stops early */
        RunState rs;
        ck_assert_int_eq(model_runstate_alloc(&rs, &m, total, 0, &e), 0);
        Capture caps[G], alone;
        Capture *cp[G];
        for (int g = 0; g < G; g++) {
            ck_assert_int_eq(model_capture_select(&caps[g], &m.cfg, lens[g], 1, !sel, sel ? keep : NULL, sel, NULL, 0, &e), 0);
            cp[g] = &caps[g];
        }
        if (model_forward_packed(&m, &rs, ids, types, lens, G, cp, &e)) ck_abort_msg("packed %s: %s", dir, e.msg);
        float da = 0, dq = 0, dh = 0;
        for (int g = 0, at = 0; g < G; at += lens[g], g++) {
            ck_assert_int_eq(model_capture_select(&alone, &m.cfg, lens[g], 1, !sel, sel ? keep : NULL, sel, NULL, 0, &e), 0);
            if (model_forward(&m, &rs, ids + at, types + at, lens[g], &alone, &e)) ck_abort_msg("alone: %s", e.msg);
            const size_t b = cap_blocks(&alone), n = (size_t)lens[g];
            da = fmaxf(da, max_abs_diff(caps[g].attn, alone.attn, b * n * n));
            dq = fmaxf(dq, max_abs_diff(caps[g].q, alone.q, b * n * alone.head_dim));
            dq = fmaxf(dq, max_abs_diff(caps[g].k, alone.k, b * n * alone.head_dim));
            if (!sel) dh = fmaxf(dh, max_abs_diff(caps[g].hidden, alone.hidden, (m.cfg.num_layers + 1) * n * m.cfg.hidden_size));
            if (alone.moe_ids) { /* each input's routing lands in its own capture, every layer's */
                const size_t nk = (size_t)m.cfg.num_layers * n * alone.moe_k;
                ck_assert(!memcmp(caps[g].moe_ids, alone.moe_ids, nk * sizeof(int)));
                ck_assert(!memcmp(caps[g].moe_w, alone.moe_w, nk * sizeof(float)));
                for (size_t i = 0; i < nk; i++) ck_assert(alone.moe_ids[i] >= 0 || m.cfg.layer_dense[i / (n * alone.moe_k)]);
            }
            model_capture_free(&alone);
        }
        if (!sel) fprintf(stderr, "INFO %s: packed vs alone: attention %.1e, q/k %.1e, hidden %.1e\n", dir, da, dq, dh);
        /* bit for bit: every product rounds each output the same way whatever
         * else shares the pass (gemm.h), and attention runs per input */
        ck_assert_msg(da == 0 && dq == 0 && dh == 0, "%s sel %d: attention %g q/k %g hidden %g", dir, sel, da, dq, dh);
        for (int g = 0; g < G; g++) model_capture_free(&caps[g]);
        model_runstate_free(&rs);
    }
    model_free(&m);
}
END_TEST

/* The whole pass, not only its products: every kernel this CPU can run gives
 * the attention, q/k and hidden states of the scalar fmaf chain bit for bit,
 * in every family (the kernels differ in speed, never in numbers). */
START_TEST(every_kernel_gives_the_whole_pass_of_the_scalar_chain) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const char *kernels[] = {"scalar", "avx512", "avx2", "neon"};
    /* 37 tokens take the kernels' few-token paths, 61 their tiles (with a tail) */
    const int sizes[] = {37, 61};
    for (size_t sz = 0; sz < sizeof sizes / sizeof sizes[0]; sz++) {
        const int n = sizes[sz];
        int ids[61], types[61];
        for (int i = 0; i < n; i++)
            ids[i] = (5 + 11 * i) % m.cfg.vocab_size, types[i] = m.cfg.type_vocab_size > 1 && i >= 20;
        if (m.cfg.pos_offset > 0) ids[3] = m.cfg.pad_token_id;
        Capture ref, got;
        RunState rs;
        ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
        const size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * n;
        int compared = 0;
        char names[64] = "";
        for (size_t kn = 0; kn < sizeof kernels / sizeof kernels[0]; kn++) {
            if (gemm_force_kernel(kernels[kn]) != 0) continue; /* not on this CPU (test_gemm.c says which ran) */
            Capture *c = kn ? &got : &ref;
            ck_assert_int_eq(model_capture_alloc(c, &m.cfg, n, 1, 1, &e), 0);
            if (model_forward(&m, &rs, ids, types, n, c, &e)) ck_abort_msg("%s %s: %s", dir, kernels[kn], e.msg);
            if (!kn) continue;
            const size_t nq = (size_t)m.cfg.num_layers * m.cfg.num_heads * n * got.head_dim;
            const size_t nh = (size_t)(m.cfg.num_layers + 1) * n * m.cfg.hidden_size;
            ck_assert_msg(!memcmp(got.attn, ref.attn, sizeof(float) * na) &&
                              !memcmp(got.q, ref.q, sizeof(float) * nq) && !memcmp(got.k, ref.k, sizeof(float) * nq) &&
                              !memcmp(got.hidden, ref.hidden, sizeof(float) * nh) &&
                              (!ref.moe_ids || (!memcmp(got.moe_ids, ref.moe_ids, sizeof(int) * (size_t)m.cfg.num_layers * n *
                                                                                  got.moe_k) &&
                                                !memcmp(got.moe_w, ref.moe_w, sizeof(float) * (size_t)m.cfg.num_layers * n *
                                                                                  got.moe_k))),
                          "%s, %d tokens: %s differs from scalar: attention %g q %g k %g hidden %g", dir, n,
                          kernels[kn], max_abs_diff(got.attn, ref.attn, na), max_abs_diff(got.q, ref.q, nq),
                          max_abs_diff(got.k, ref.k, nq), max_abs_diff(got.hidden, ref.hidden, nh));
            model_capture_free(&got);
            compared++;
            strcat(strcat(names, " "), kernels[kn]);
        }
        fprintf(stderr, "INFO %s: %s, %d tokens: equal to scalar bit for bit:%s\n", __func__, dir, n,
                compared ? names : " (no other kernel here)");
        gemm_force_kernel(NULL);
        ck_assert_int_eq(gemm_force_kernel("scalar"), 0); /* the scalar reference always ran */
        gemm_force_kernel(NULL);
        if (strcmp(gemm_kernel(), "scalar")) ck_assert_int_ge(compared, 1);
        model_capture_free(&ref), model_runstate_free(&rs);
    }
    model_free(&m);
}
END_TEST

/* The MLP runs over blocks of tokens (model.h's mlp_block) so that its scratch
 * does not grow with the input: a pass whose tokens span several blocks (a
 * short last one too) gives the attention, q/k, hidden states, routing and
 * logits of the pass that takes them all in one block, bit for bit. */
START_TEST(mlp_blocks_give_the_one_block_pass) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    enum { N = 61 };
    const int blocks[] = {N, 16, 7}; /* the first: one block, the reference */
    int ids[N], types[N], rows[N];
    for (int i = 0; i < N; i++)
        ids[i] = (3 + 13 * i) % m.cfg.vocab_size, types[i] = m.cfg.type_vocab_size > 1 && i >= 30, rows[i] = i;
    if (m.cfg.pos_offset > 0) ids[3] = m.cfg.pad_token_id;
    const size_t na = (size_t)m.cfg.num_layers * m.cfg.num_heads * N * N,
                 nq = (size_t)m.cfg.num_layers * m.cfg.num_heads * N * m.cfg.head_dim,
                 nh = (size_t)(m.cfg.num_layers + 1) * N * m.cfg.hidden_size, nl = (size_t)m.cfg.vocab_size * N;
    Capture ref, got;
    float *logits_ref = malloc(sizeof(float) * nl), *logits = malloc(sizeof(float) * nl);
    ck_assert(logits_ref && logits);
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        RunState rs;
        ck_assert_int_eq(model_runstate_alloc_mlp(&rs, &m, N, blocks[b], 0, &e), 0);
        ck_assert_int_eq(rs.mlp_block, blocks[b]);
        Capture *c = b ? &got : &ref;
        ck_assert_int_eq(model_capture_alloc(c, &m.cfg, N, 1, 1, &e), 0);
        if (model_forward(&m, &rs, ids, types, N, c, &e)) ck_abort_msg("%s, blocks of %d: %s", dir, blocks[b], e.msg);
        if (model_has_head(&m) && model_logits(&m, &rs, rows, N, b ? logits : logits_ref, &e))
            ck_abort_msg("%s logits: %s", dir, e.msg);
        model_runstate_free(&rs);
        if (!b) continue;
        const size_t nk = ref.moe_ids ? (size_t)m.cfg.num_layers * N * ref.moe_k : 0;
        ck_assert_msg(!memcmp(got.attn, ref.attn, sizeof(float) * na) && !memcmp(got.q, ref.q, sizeof(float) * nq) &&
                          !memcmp(got.k, ref.k, sizeof(float) * nq) &&
                          !memcmp(got.hidden, ref.hidden, sizeof(float) * nh) &&
                          (!nk || (!memcmp(got.moe_ids, ref.moe_ids, sizeof(int) * nk) &&
                                   !memcmp(got.moe_w, ref.moe_w, sizeof(float) * nk))) &&
                          (!model_has_head(&m) || !memcmp(logits, logits_ref, sizeof(float) * nl)),
                      "%s, blocks of %d tokens: attention %g q %g hidden %g", dir, blocks[b],
                      max_abs_diff(got.attn, ref.attn, na), max_abs_diff(got.q, ref.q, nq),
                      max_abs_diff(got.hidden, ref.hidden, nh));
        model_capture_free(&got);
    }
    fprintf(stderr, "INFO %s: %s, %d tokens in MLP blocks of 16 and 7 as in one (kernel %s%s)\n", __func__, dir, N,
            gemm_kernel(), model_has_head(&m) ? ", logits too" : "");
    model_capture_free(&ref);
    free(logits_ref), free(logits);
    model_free(&m);
}
END_TEST

/* The mixture-of-experts step: only the chosen experts, each on the tokens
 * routed to it, against the naive reference that runs every expert on every
 * token; and grouping tokens changes no bit (each token alone gives the same). */
START_TEST(moe_runs_only_the_chosen_experts_as_the_reference_combines_them) {
    const char *dirs[] = {"tests/data/small-mixtral", "tests/data/small-qwen3moe", "tests/data/small-olmoe",
                          "tests/data/small-gptoss"};
    for (int d = 0; d < 4; d++) {
        Model m;
        AvErr e;
        if (model_load(&m, dirs[d], &e) != 0) ck_abort_msg("load %s: %s", dirs[d], e.msg);
        const int n = 23, H = m.cfg.hidden_size, K = m.cfg.experts_per_tok;
        float *xT = malloc(sizeof(float) * H * n), *y = malloc(sizeof(float) * H * n), *yr = malloc(sizeof(float) * H * n);
        float *w = malloc(sizeof(float) * n * K), *wr = malloc(sizeof(float) * n * K), *y1 = malloc(sizeof(float) * H);
        int *ids = malloc(sizeof(int) * n * K), *idr = malloc(sizeof(int) * n * K), id1[CFG_MAX_TOP_K];
        float x1[64], w1[CFG_MAX_TOP_K];
        ck_assert_int_le(H, 64);
        for (int i = 0; i < H * n; i++) xT[i] = sinf(0.37f * i) * 1.5f;
        RunState rs;
        ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
        int layers = 0, used[CFG_MAX_EXPERTS] = {0}, n_used = 0;
        for (int l = 0; l < m.cfg.num_layers; l++) {
            if (!m.w.layers[l].experts) continue;
            layers++;
            ck_assert_int_eq(model_moe(&m, &rs, l, xT, n, y, ids, w, &e), 0);
            ck_assert_int_eq(model_moe_naive(&m, l, xT, n, yr, idr, wr, &e), 0);
            ck_assert(!memcmp(ids, idr, sizeof(int) * n * K));
            ck_assert_float_lt(max_abs_diff(w, wr, (size_t)n * K), 1e-6f);
            ck_assert_msg(max_abs_diff(y, yr, (size_t)H * n) < 1e-5f, "%s layer %d: %g", dirs[d], l,
                          max_abs_diff(y, yr, (size_t)H * n));
            for (int i = 0; i < n * K; i++) n_used += !used[ids[i]]++;
            for (int i = 0; i < n; i++) {
                for (int h = 0; h < H; h++) x1[h] = xT[(size_t)h * n + i];
                ck_assert_int_eq(model_moe(&m, &rs, l, x1, 1, y1, id1, w1, &e), 0);
                for (int h = 0; h < H; h++) ck_assert(y1[h] == y[(size_t)h * n + i]);
                ck_assert(!memcmp(id1, ids + (size_t)i * K, sizeof(int) * K));
            }
        }
        ck_assert_int_ge(layers, 1);
        ck_assert_int_ge(n_used, 2); /* the inputs reach more than one expert */
        fprintf(stderr, "INFO %s: %s (%s): %d sparse layers, %d experts chosen, as the reference (kernel %s)\n",
                __func__, dirs[d], m.cfg.model_type, layers, n_used, gemm_kernel());
        model_runstate_free(&rs);
        free(xT), free(y), free(yr), free(w), free(wr), free(y1), free(ids), free(idr);
        model_free(&m);
    }
}
END_TEST

/* What attnviz serve keeps: q/k and thumbnails, no attention. A head
 * recomputed from them is what the full capture holds, and the thumbnails are
 * the full attention pooled. */
START_TEST(head_attention_from_captured_qk_equals_the_captured_attention) {
    const char *dir = FIXTURES[_i];
    Model m;
    AvErr e;
    if (model_load(&m, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    const int n = 23, V = m.cfg.vocab_size, ts = 6;
    int ids[23], types[23];
    for (int i = 0; i < n; i++) ids[i] = (5 + 11 * i) % V, types[i] = m.cfg.type_vocab_size > 1 && i > 12;
    if (m.cfg.pos_offset > 0) ids[0] = 0;
    RunState rs;
    Capture full, lean;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&full, &m.cfg, n, 1, 0, &e), 0);
    ck_assert_int_eq(model_capture_qk(&lean, &m.cfg, n, ts, CAP_QK_F32, &e), 0);
    ck_assert_ptr_null(lean.attn);
    ck_assert_uint_eq(model_capture_qk_bytes(&m.cfg, n, ts, CAP_QK_F32),
                      (2 * cap_blocks(&lean) * n * lean.head_dim + cap_blocks(&lean) * ts * ts) * sizeof(float));
    if (model_forward(&m, &rs, ids, types, n, &full, &e) || model_forward(&m, &rs, ids, types, n, &lean, &e))
        ck_abort_msg("%s: %s", dir, e.msg);
    float *probs = malloc(sizeof(float) * n * n), *scratch = malloc(sizeof(float) * 2 * n * lean.head_dim);
    float *pooled = malloc(sizeof(float) * ts * ts);
    float da = 0, dt = 0;
    for (int l = 0; l < m.cfg.num_layers; l++)
        for (int h = 0; h < m.cfg.num_heads; h++) {
            ck_assert_int_eq(model_head_attention(&m, &lean, l, h, probs, scratch, &e), 0);
            da = fmaxf(da, max_abs_diff(probs, cap_attn(&full, l, h), (size_t)n * n));
            memset(pooled, 0, sizeof(float) * ts * ts);
            kern_pool_attention_naive(pooled, ts, cap_attn(&full, l, h), n, 0, n, n, n);
            dt = fmaxf(dt, max_abs_diff(pooled, cap_thumb(&lean, l, h), (size_t)ts * ts));
        }
    ck_assert_msg(da <= 1e-6f && dt <= 1e-6f, "%s: recomputed attention %g, thumbnails %g", dir, da, dt);
    ck_assert_int_eq(model_head_attention(&m, &lean, m.cfg.num_layers, 0, probs, scratch, &e), -1);
    free(probs), free(scratch), free(pooled);
    model_capture_free(&full);
    model_capture_free(&lean);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

START_TEST(forward_rejects_out_of_vocabulary_ids) {
    Model m;
    AvErr e;
    ck_assert_int_eq(model_load(&m, "tests/data/small-f32", &e), 0);
    RunState rs;
    Capture cap;
    ck_assert_int_eq(model_runstate_alloc(&rs, &m, 4, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&cap, &m.cfg, 4, 0, 0, &e), 0);
    int ids[] = {2, 5, 100000, 3}, types[] = {0, 0, 0, 0};
    ck_assert_int_eq(model_forward(&m, &rs, ids, types, 4, &cap, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "position 2"));
    model_capture_free(&cap);
    model_runstate_free(&rs);
    model_free(&m);
}
END_TEST

/* torch.save's pytorch_model.bin of the same F16 tensors: read through the
 * safe zip + pickle reader, the forward pass must not change by a bit. */
START_TEST(pytorch_bin_checkpoint_gives_the_safetensors_result) {
    Model a, b;
    AvErr e;
    if (model_load(&a, "tests/data/small-gpt2-f16", &e) != 0) ck_abort_msg("%s", e.msg);
    if (model_load(&b, "tests/data/small-gpt2-bin", &e) != 0) ck_abort_msg("%s", e.msg);
    ck_assert_ptr_nonnull(strstr(b.path, "pytorch_model.bin"));
    ck_assert_str_eq(b.dtype_name, "F16");
    int ids[] = {5, 77, 300, 12, 9, 150, 41, 41, 2}, n = 9, types[9] = {0};
    RunState rs;
    Capture ca, cb;
    ck_assert_int_eq(model_runstate_alloc(&rs, &a, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&ca, &a.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&cb, &b.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(model_forward(&a, &rs, ids, types, n, &ca, &e), 0);
    ck_assert_int_eq(model_forward(&b, &rs, ids, types, n, &cb, &e), 0);
    size_t na = (size_t)a.cfg.num_layers * a.cfg.num_heads * n * n;
    size_t nh = (size_t)(a.cfg.num_layers + 1) * n * a.cfg.hidden_size;
    ck_assert_int_eq(memcmp(ca.attn, cb.attn, na * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(ca.hidden, cb.hidden, nh * sizeof(float)), 0);
    model_capture_free(&ca), model_capture_free(&cb);
    model_runstate_free(&rs);
    model_free(&a), model_free(&b);
}
END_TEST

/* Weights read into memory (util.h's AV_MAP_RESIDENT, as serve, batch and
 * generation load them) give the pass of the mapped files bit for bit, on
 * every fixture, the pytorch_model.bin one and the real SmolLM2 GGUF too. */
START_TEST(resident_weights_give_the_mapped_pass) {
    const int nf = (int)(sizeof FIXTURES / sizeof FIXTURES[0]);
    const char *dir = _i < nf ? FIXTURES[_i] : _i == nf ? "tests/data/small-gpt2-bin" : getenv("ATTNVIZ_SMOLLM2_GGUF");
    SKIP_UNLESS(dir && *dir, "ATTNVIZ_SMOLLM2_GGUF not set (tests/run_all.sh sets it when tools/pymodel.sh smollm2 works)");
    Model a, b;
    AvErr e;
    if (model_load(&a, dir, &e) != 0) ck_abort_msg("load %s: %s", dir, e.msg);
    if (model_load_mode(&b, dir, AV_MAP_RESIDENT, &e) != 0) ck_abort_msg("load %s resident: %s", dir, e.msg);
    const int n = 23;
    int ids[23], types[23];
    for (int i = 0; i < n; i++) ids[i] = (3 + 7 * i) % a.cfg.vocab_size, types[i] = a.cfg.type_vocab_size > 1 && i >= 12;
    RunState rs;
    Capture ca, cb;
    ck_assert_int_eq(model_runstate_alloc(&rs, &a, n, 0, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&ca, &a.cfg, n, 1, 1, &e), 0);
    ck_assert_int_eq(model_capture_alloc(&cb, &b.cfg, n, 1, 1, &e), 0);
    if (model_forward(&a, &rs, ids, types, n, &ca, &e)) ck_abort_msg("%s: %s", dir, e.msg);
    if (model_forward(&b, &rs, ids, types, n, &cb, &e)) ck_abort_msg("%s resident: %s", dir, e.msg);
    const size_t na = (size_t)a.cfg.num_layers * a.cfg.num_heads * n * n;
    const size_t nh = (size_t)(a.cfg.num_layers + 1) * n * a.cfg.hidden_size;
    ck_assert_msg(!memcmp(ca.attn, cb.attn, na * sizeof(float)) && !memcmp(ca.hidden, cb.hidden, nh * sizeof(float)),
                  "%s: resident weights differ: attention %g hidden %g", dir, max_abs_diff(ca.attn, cb.attn, na),
                  max_abs_diff(ca.hidden, cb.hidden, nh));
    model_capture_free(&ca), model_capture_free(&cb);
    model_runstate_free(&rs);
    model_free(&a), model_free(&b);
}
END_TEST

Suite *make_suite(void) {
    Suite *s = suite_create("model");
    TCase *m = tcase_create("model");
    tcase_set_timeout(m, 60);
    tcase_add_loop_test(m, forward_matches_pytorch_goldens, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(m, load_names_the_tensor_with_a_wrong_shape);
    tcase_add_test(m, load_names_a_missing_tensor);
    tcase_add_test(m, forward_rejects_out_of_vocabulary_ids);
    tcase_add_test(m, threaded_forward_gives_the_single_thread_result);
    tcase_add_loop_test(m, packed_inputs_give_what_each_gives_alone, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_loop_test(m, every_kernel_gives_the_whole_pass_of_the_scalar_chain, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(m, pytorch_bin_checkpoint_gives_the_safetensors_result);
    tcase_add_loop_test(m, resident_weights_give_the_mapped_pass, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]) + 2);
    tcase_add_test(m, moe_runs_only_the_chosen_experts_as_the_reference_combines_them);
    tcase_add_loop_test(m, mlp_blocks_give_the_one_block_pass, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_loop_test(m, head_attention_from_captured_qk_equals_the_captured_attention, 0,
                        (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    suite_add_tcase(s, m);
    return s;
}
