/* fit.c — whether a run fits the memory this machine has free, said before
 * anything is allocated or read (docs/models-at-scale.md): the weights (the
 * files' bytes, mapped: the page cache must keep them, or a copy in private
 * memory), the pass's buffers, the key/value cache of --generate and the
 * capture, against util.h's av_memory_available. A run that does not fit is
 * refused in one line naming what does, instead of meeting the kernel's OOM
 * killer or re-reading its weights from disk layer after layer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run_internal.h"

static const char *size_str(double bytes, char *buf, size_t len) {
    if (bytes >= 1e10) snprintf(buf, len, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e9) snprintf(buf, len, "%.2f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, len, "%.0f MB", bytes / 1e6);
    else snprintf(buf, len, "%.0f kB", bytes / 1e3 < 1 ? 1 : bytes / 1e3);
    return buf;
}

/* What the capture of n tokens takes (plan.c's run_capture_need, the one estimate), with
 * --telemetry's rows, which --max-capture leaves out but memory must hold. */
static double capture_bytes(const Run *r, const RunSpec *o, int n) {
    double need = run_capture_need(r, o, n);
    if (o->capture.telemetry) {
        const int nl = o->sel.layers ? o->sel.n_layers : r->s->cfg.num_layers;
        const int nh = o->sel.heads ? o->sel.n_heads : r->s->cfg.num_heads;
        need += (double)model_capture_telemetry_bytes((size_t)nl * nh, n, o->capture.telemetry_top);
    }
    return need;
}

/* The weights' part of m: a resident copy is already held (MemAvailable no longer counts it); mapped
 * files must stay cached. */
static int weights_memory(const Session *s, RunMemory *m, AvErr *e) {
    memset(m, 0, sizeof *m);
    if (av_memory_available(&m->avail, &m->source, e) != 0) return -1;
    if (!s->have_model) return 0;
    if (s->model.hold == AV_HOLD_RESIDENT) m->weights_anon = s->model.file_bytes;
    else m->weights_file = s->model.file_bytes;
    /* llama.cpp's mmproj beside a text GGUF: a file of its own, mapped (a Hugging Face folder's
     * vision tower reads the model's files, counted above) */
    const Model *v = s->model.vision;
    if (v && !v->files_borrowed) {
        if (v->hold == AV_HOLD_RESIDENT) m->weights_anon += v->file_bytes;
        else m->weights_file += v->file_bytes;
    }
    m->need = m->weights_file;
    return 0;
}

int run_memory(const Run *r, int n, RunMemory *m, AvErr *e) {
    const Session *s = r->s;
    const RunSpec *o = &r->spec;
    if (weights_memory(s, m, e) != 0) return -1;
    if (!s->have_model || s->cfg.enc_dec) return 0; /* an encoder-decoder's stacks' buffers: run_seq2seq.c's own check */
    const Model *md = &s->model;
    RunCost c; /* plan.c's estimate of the pass's buffers and key/value cache */
    run_cost(r, o, n, &c);
    m->runstate = c.runstate;
    m->kv = c.kv;
    m->capture = capture_bytes(r, o, n);
    /* what the run holds already (a batch's earlier, shorter inputs) is freed before the new buffers are made */
    m->held = (r->rs.max_tokens > 0 ? (double)model_runstate_bytes(md, r->rs.max_tokens, o->threads) : 0) +
              (r->kv.cap_tokens > 0 ? (double)model_kv_bytes(&s->cfg, r->kv.cap_tokens) : 0) +
              (r->cap_n > 0 ? capture_bytes(r, o, r->cap_n) : 0);
    m->need = m->weights_file + m->runstate + m->kv + m->capture;
    return 0;
}

/* The longest input of at most n tokens whose buffers fit beside the weights (0: none). */
static int longest_fitting(const Run *r, int n, double room) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        RunMemory m;
        AvErr e;
        if (run_memory(r, mid, &m, &e) == 0 && m.runstate + m.kv + m.capture <= room) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The refusal of m (its need past the memory available): the weights past it (with the least a pass
 * takes beside them), or the buffers of n tokens beside them, with fewer (or "") naming what would fit
 * first; n 0: a model just loaded, no input yet. Always -1. */
static int refuse(const Session *s, const RunMemory *m, int n, const char *fewer, AvErr *e) {
    char a[32], b[32], c[32], d[32], f[32], g[32];
    const double buffers = m->runstate + m->kv + m->capture, room = m->avail + m->held - m->weights_file;
    const double ask = ceil((m->need - m->held) / 1e9 + 0.5); /* ATTNVIZ_MEMORY that would let it run, in GB */
    char both[2 * 4096 + 16];
    const char *path = s->model.path ? s->model.path : s->dir;
    const Model *v = s->model.vision;
    if (v && !v->files_borrowed && v->path) { /* the text GGUF and its mmproj: their bytes together */
        snprintf(both, sizeof both, "%.4096s with %.4096s", path, v->path);
        path = both;
    }
    if (n > 0 && buffers > room && room > 0)
        return av_err(e, "%s: %d tokens need %s of memory (weights %s mapped, the pass's buffers %s%s%s, the capture %s) "
                      "but %s is available (%s): %s--layers/--heads to capture fewer heads; ATTNVIZ_MEMORY=%.0fG "
                      "overrides the check",
                      path, n, size_str(m->need, a, sizeof a), size_str(m->weights_file, b, sizeof b),
                      size_str(m->runstate, c, sizeof c), m->kv > 0 ? ", the key/value cache " : "",
                      m->kv > 0 ? size_str(m->kv, g, sizeof g) : "", size_str(m->capture, d, sizeof d),
                      size_str(m->avail, f, sizeof f), m->source, fewer, ask);
    return av_err(e, "%s: the weights take %s (mapped from the file), %s with the run's buffers, but %s is available "
                  "(%s): the weights would not stay in memory (read from disk again and again); a smaller "
                  "quantization of the model, or free memory; ATTNVIZ_MEMORY=%.0fG runs it anyway",
                  path, size_str(m->weights_file, a, sizeof a), size_str(m->need, b, sizeof b),
                  size_str(m->avail, c, sizeof c), m->source, ask);
}

static int fits(const RunMemory *m) { return m->avail <= 0 || m->need <= m->avail + m->held; }

int session_weights_fit(const Session *s, AvErr *e) {
    RunMemory m;
    if (weights_memory(s, &m, e) != 0) return -1;
    if (!s->have_model) return 0;
    /* the least a pass takes beside the weights: one token's buffers */
    m.runstate = (double)model_runstate_bytes(&s->model, 1, 0);
    m.need += m.runstate;
    return fits(&m) ? 0 : refuse(s, &m, 0, "", e);
}

int run_memory_fits(const Run *r, int n, AvErr *e) {
    RunMemory m;
    if (run_memory(r, n > 0 ? n : 1, &m, e) != 0) return -1;
    if (fits(&m)) return 0;
    char fewer[160] = "";
    const int shorter = longest_fitting(r, n, m.avail + m.held - m.weights_file);
    if (shorter >= 1) snprintf(fewer, sizeof fewer, "a shorter input (--max-tokens %d fits), ", shorter);
    if (!r->spec.capture.telemetry)
        snprintf(fewer + strlen(fewer), sizeof fewer - strlen(fewer), "%s",
                 "--telemetry K (each row's statistics, not the matrices), ");
    return refuse(r->s, &m, n, fewer, e);
}

int run_buffers_fit(const Run *r, int n, int kv, double capture, const char *fewer, AvErr *e) {
    RunMemory m;
    if (run_memory(r, n, &m, e) != 0) return -1;
    if (!r->s->have_model || r->s->cfg.enc_dec) return 0;
    m.kv = kv ? (double)model_kv_bytes(&r->s->cfg, n) : 0;
    m.capture = capture;
    m.need = m.weights_file + m.runstate + m.kv + m.capture;
    return fits(&m) ? 0 : refuse(r->s, &m, n, fewer, e);
}
