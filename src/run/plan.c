/* plan.c — what one input's run will hold, known before it starts (the
 * capture, the run state, the key/value cache, the page), from the model's
 * config and the token count; from that, whether one input's page is its
 * whole matrices or the long input's page, and when nothing fits, a refusal
 * that names every remedy that would (docs/long-inputs.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "normattn.h"
#include "report.h"
#include "run_internal.h"
#include "tiles.h"

const char *run_human_size(double bytes, char *buf, size_t len) {
    if (bytes >= 1e9) snprintf(buf, len, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6) snprintf(buf, len, "%.1f MB", bytes / 1e6);
    else snprintf(buf, len, "%.0f kB", bytes / 1e3 < 1 ? 1 : bytes / 1e3);
    return buf;
}

static double physical_memory(void) { return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE); }

double run_memory_budget(const RunSpec *o) {
    return o->capture.max_capture > 0 ? o->capture.max_capture : 0.5 * physical_memory();
}

/* The layers and heads the run keeps. */
static void kept(const Run *r, const RunSpec *o, int *nl, int *nh) {
    /* ALTI and rollout read every layer and head, whatever the selection shows */
    const int whole = measure_any_per_layer(&o->capture);
    *nl = o->sel.layers && !whole ? o->sel.n_layers : r->s->cfg.num_layers;
    *nh = o->sel.heads && !whole ? o->sel.n_heads : r->s->cfg.num_heads;
}

static double capture_need_heads(const Run *r, const RunSpec *o, int n, int nl, int nh) {
    const int streamed = run_scores_streamed(o);
    double need = o->capture.telemetry ? 0
                  : streamed           ? (double)model_capture_scores_bytes(n, nl, nh)
                                       : (double)model_capture_bytes(&r->s->cfg, n, 1, o->capture.hidden, nl, nh);
    if (measure_wanted(&o->capture, MEASURE_NORM)) /* the value norms, and the value-weighted matrices derived from them */
        need += (double)model_capture_value_norms_bytes(n, nl, nh) +
                (streamed ? 0 : (double)na_bytes(n, (size_t)nl * (size_t)nh));
    const int alti = measure_wanted(&o->capture, MEASURE_ALTI);
    if (run_lens_wanted(o) || alti) need += (double)model_capture_internals_bytes(&r->s->cfg, n);
    if (alti) need += (double)model_capture_values_bytes(&r->s->cfg, n);
    need += (double)mix_bytes(&r->s->cfg, n) * (alti + measure_wanted(&o->capture, MEASURE_ROLLOUT));
    return need;
}

double run_capture_need(const Run *r, const RunSpec *o, int n) {
    int nl, nh;
    kept(r, o, &nl, &nh);
    return capture_need_heads(r, o, n, nl, nh);
}

/* The long input's page of n tokens: its pass keeps each head's overview
 * (tiles' level 0), each row's statistics and heaviest keys, and queries and
 * keys only when the page embeds a deeper level (computed from them). */
double run_long_need(const Run *r, int n, int *levels) {
    const size_t blocks = (size_t)r->s->cfg.num_layers * (size_t)r->s->cfg.num_heads;
    const int over = n < TILE_SIDE ? n : TILE_SIDE;
    int lv, keys;
    html_long_plan_n(n, blocks, HTML_LONG_TOP_K, TILE_SIDE, 0, &lv, &keys);
    if (levels) *levels = lv;
    return (lv > 1 ? (double)model_capture_qk_bytes(&r->s->cfg, n, 0, CAP_QK_F32) : 0) +
           (double)blocks * over * over * sizeof(float) + (double)model_capture_telemetry_bytes(blocks, n, HTML_LONG_TOP_K);
}

void run_cost(const Run *r, const RunSpec *o, int n, RunCost *c) {
    int nl, nh;
    kept(r, o, &nl, &nh);
    memset(c, 0, sizeof *c);
    c->n = n;
    c->capture = capture_need_heads(r, o, n, nl, nh);
    c->runstate = r->s->have_model ? (double)model_runstate_bytes(&r->s->model, n, o->threads) : 0;
    c->kv = o->predict.generate_n ? (double)model_kv_bytes(&r->s->cfg, n) : 0;
    const size_t blocks = (size_t)nl * (size_t)nh;
    c->page = html_page_estimate(n, n, blocks, r->s->cfg.causal, 2 * blocks * (size_t)n * (size_t)r->s->cfg.head_dim);
    c->long_capture = run_long_need(r, n, NULL);
    c->budget = run_memory_budget(o);
}

/* The longest input whose capture fits the budget (0: none). */
static int longest_fitting(const Run *r, const RunSpec *o, int n, double budget) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (run_capture_need(r, o, mid) <= budget) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int run_refuse(const Run *r, const RunSpec *o, int n, AvErr *e) {
    int nl, nh;
    kept(r, o, &nl, &nh);
    const double need = capture_need_heads(r, o, n, nl, nh), budget = run_memory_budget(o);
    char a[32], b[32], what[1024] = "";
    size_t at = 0;
#define ADD(...) (at += (size_t)snprintf(what + at, at < sizeof what ? sizeof what - at : 0, __VA_ARGS__))
    /* the long input's page: one input's, within the budget */
    const int image = o->image != NULL; /* a picture's patches: no long page, no shorter input */
    if (!image && !o->batch.path && !r->s->cfg.enc_dec && n <= HTML_LONG_MAX_TOKENS && run_long_need(r, n, NULL) <= budget) {
        if (o->output.whole_for)
            ADD("the long input's page (without %s: --html FILE alone)", o->output.whole_for);
        else if (o->output.long_from == 0)
            ADD("%s", "the long input's page (without --long-from 0)");
        else
            ADD("the long input's page (--long-from below %d)", n);
    }
    /* attnviz serve keeps queries and keys, and makes the heads a page shows */
    if (!o->batch.path && !r->s->cfg.enc_dec && (double)model_capture_qk_bytes(&r->s->cfg, n, 0, CAP_QK_F16) <= budget)
        ADD("%sattnviz serve", at ? ", " : "");
    /* fewer heads: what one head takes, as many as fit */
    const double per_head = need / ((double)nl * nh);
    const long fit = per_head > 0 ? (long)floor(budget / per_head) : 0;
    if (fit >= 1 && !r->s->cfg.enc_dec)
        ADD("%sselect fewer with --layers/--heads (%ld of the %d heads fit)", at ? ", " : "",
            fit < (long)nl * nh ? fit : (long)nl * nh - 1, nl * nh);
    if (!r->s->cfg.enc_dec && !o->capture.telemetry &&
        (double)model_capture_telemetry_bytes((size_t)nl * nh, n, 8) <= budget)
        ADD("%s--telemetry 8 --json FILE (each row's statistics and 8 heaviest keys)", at ? ", " : "");
    const int shorter = image ? 0 : longest_fitting(r, o, n, budget);
    if (shorter >= 1) ADD("%sa shorter input (--max-tokens %d fits)", at ? ", " : "", shorter);
    const double ram = physical_memory();
    if (need < 0.8 * ram)
        ADD("%s--max-capture %.0fG (this machine has %s)", at ? ", " : "", ceil(need / 1e9 + 0.5),
            run_human_size(ram, b, sizeof b));
#undef ADD
    return av_err(e, "capturing %d tokens x %d layers x %d heads needs %s, above the %s allowed (--max-capture): %s%.1000s", n,
                  nl, nh, run_human_size(need, a, sizeof a), run_human_size(budget, b, sizeof b),
                  at ? "what fits: " : "nothing fits: shorten the input", what); /* composed here: whole */
}

/* Whether the run writes a page (route.c's run_emit: --html, or attnviz.html when no other output is named). */
static int writes_page(const RunSpec *o) {
    return !o->capture.tokens_only && !o->stats && !o->heads.on &&
           (o->output.html_path || (!o->output.json_path && !o->output.npy_path));
}

int run_plan_page(const Run *r, const TokEncoding *enc, AvErr *e) {
    const RunSpec *o = &r->spec;
    const int n = enc->n;
    char a[32], b[32], how[96];
    if (o->batch.path || r->s->cfg.enc_dec || n > HTML_LONG_MAX_TOKENS) return RUN_PAGE_WHOLE;
    if (o->output.long_from > 0) return n > o->output.long_from ? RUN_PAGE_LONG : RUN_PAGE_WHOLE;
    RunCost c;
    run_cost(r, o, n + o->predict.generate_n, &c);
    const int memory = c.capture > c.budget, page = c.page > (double)HTML_PAGE_BOUND;
    if (o->output.long_from == 0) {
        /* an option keeps the whole matrices: a page past the bound is said before the run, not refused */
        if (page && !memory && o->output.whole_for && writes_page(o))
            av_warn("the page of %d tokens will be up to %s (a browser struggles past %.0f MB): %s keeps the whole "
                    "matrices; without it the page would be the long input's", c.n, run_human_size(c.page, a, sizeof a),
                    (double)HTML_PAGE_BOUND / 1e6, o->output.whole_for);
        return RUN_PAGE_WHOLE; /* past the budget, run_ensure_buffers refuses it naming what fits */
    }
    if (!memory && !page) return RUN_PAGE_WHOLE;
    run_cost(r, o, n, &c);
    if (c.long_capture > c.budget) return run_refuse(r, o, n, e);
    /* how to force the whole matrices, where the machine could hold them */
    if (c.capture >= 0.8 * physical_memory())
        snprintf(how, sizeof how, "they pass this machine's %s: --layers/--heads keep fewer whole",
                 run_human_size(physical_memory(), b, sizeof b));
    else if (memory)
        snprintf(how, sizeof how, "--long-from 0 --max-capture %.0fG writes the whole matrices", ceil(c.capture / 1e9 + 0.5));
    else
        snprintf(how, sizeof how, "%s", "--long-from 0 writes the whole matrices");
    if (o->quiet) return RUN_PAGE_LONG;
    char held[32];
    run_human_size(c.long_capture + c.runstate, held, sizeof held);
    if (memory)
        av_info("%d tokens: the whole matrices need %s, above the %s allowed (--max-capture): writing the long "
                "input's page (zoom tiles, each query's heaviest keys; %s held); %s",
                n, run_human_size(c.capture, a, sizeof a), run_human_size(c.budget, b, sizeof b), held, how);
    else
        av_info("%d tokens: the whole matrices would hold %s and make a page of up to %s (a browser struggles past "
                "%.0f MB): writing the long input's page (zoom tiles, each query's heaviest keys; %s held); %s",
                n, run_human_size(c.capture + c.runstate, a, sizeof a), run_human_size(c.page, b, sizeof b),
                (double)HTML_PAGE_BOUND / 1e6, held, how);
    return RUN_PAGE_LONG;
}

/* ---------------------------------------------------------------- a vision-language model's tower */

double run_tower_need(const ModelConfig *vc, int nv, int want_hidden, int layers) {
    return (double)model_capture_bytes(vc, nv, 0, want_hidden, layers, vc->num_heads);
}

double run_tower_page(const ModelConfig *vc, int nv, int layers) {
    return html_page_estimate(nv, nv, (size_t)layers * (size_t)vc->num_heads, 0, 0);
}

int run_plan_tower(const Run *r, const ModelConfig *vc, int nv, int want_hidden, double beside, TowerPlan *p, AvErr *e) {
    const RunSpec *o = &r->spec;
    const int L = vc->num_layers;
    char a[32], b[32], c[32];
    memset(p, 0, sizeof *p);
    p->layers = L, p->page = writes_page(o);
    const double budget = run_memory_budget(o), room = budget - beside, whole = run_tower_need(vc, nv, want_hidden, L);
    /* the last layers that fit beside the decoder's capture: the projector reads the last ones */
    int mem = 0;
    while (mem < L && run_tower_need(vc, nv, want_hidden, mem + 1) <= room) mem++;
    if (mem == 0) {
        const double ram = physical_memory(), one = run_tower_need(vc, nv, want_hidden, 1) + beside;
        char d[32], more[96] = "";
        if (one < 0.8 * ram) snprintf(more, sizeof more, "--max-capture %.0fG keeps its last layer, ", ceil(one / 1e9 + 0.5));
        return av_err(e, "the vision tower's attention (%d layers x %d heads over %d tokens) needs %s, and not even its last "
                         "layer fits the %s allowed (--max-capture) beside the decoder's %s: %sattnviz serve runs the "
                         "picture and text without keeping the tower's attention",
                      L, vc->num_heads, nv, run_human_size(whole, a, sizeof a), run_human_size(budget, b, sizeof b),
                      run_human_size(beside, d, sizeof d), more);
    }
    /* the tower's page: where it is all the run writes, as many of those layers as a browser opens (none: no
     * page, the attention for --npy); an option that keeps the whole matrices keeps them, the page's size said */
    const int bounded = p->page && !o->output.whole_for && o->output.long_from != 0;
    int pg = mem;
    if (bounded)
        while (pg > 0 && run_tower_page(vc, nv, pg) > (double)HTML_PAGE_BOUND) pg--;
    if (pg == 0) p->page = 0, pg = mem;
    p->layers = pg;
    const double page = p->page ? run_tower_page(vc, nv, pg) : 0;
    const int big = page > (double)HTML_PAGE_BOUND, dropped = writes_page(o) && !p->page;
    if (dropped) p->layers = 0; /* the page is all the run writes (no --npy): nothing would read them */
    if ((pg == L && !dropped && !big) || o->quiet) return 0;
    char what[256], tail[200] = "";
    if (dropped)
        snprintf(what, sizeof what, "one layer's page would pass %.0f MB (what a browser opens) and nothing else writes "
                 "it: not kept, no FILE.vision.html (--npy FILE keeps %s %d layers)", (double)HTML_PAGE_BOUND / 1e6,
                 pg < L ? "its last" : "all", pg);
    else if (pg < L)
        snprintf(what, sizeof what, "keeping its last %d of %d layers (%s%s)", pg, L,
                 run_human_size(run_tower_need(vc, nv, want_hidden, pg), b, sizeof b), pg < mem ? ", a page a browser opens" : "");
    else
        snprintf(what, sizeof what, "keeping all %d layers", L);
    if (big)
        snprintf(tail, sizeof tail, "; their page FILE.vision.html will be up to %s (a browser struggles past %.0f MB): %s "
                 "keeps them", run_human_size(page, b, sizeof b), (double)HTML_PAGE_BOUND / 1e6,
                 o->output.whole_for ? o->output.whole_for : "--long-from 0");
    av_info("the vision tower's attention (%d layers x %d heads over %d tokens) needs %s%s%s: %s%s", L, vc->num_heads, nv,
            run_human_size(whole, a, sizeof a), mem < L ? " beside the decoder's, above the allowed " : "",
            mem < L ? run_human_size(budget, c, sizeof c) : "", what, tail);
    return 0;
}
