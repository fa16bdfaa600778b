/* progress.c — the progress line of work that takes a while (a long pass
 * layer by layer, generation token by token, a long page's tiles, heads'
 * sequences): done / total, rate and time left, redrawn in place through the
 * reporter, which shows it only on a terminal. Nothing within the first
 * seconds of a step (ATTNVIZ_PROGRESS_AFTER seconds, 2 by default), so short
 * runs stay silent; nothing with --quiet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "run_internal.h"
#include "util.h"

/* Redraws at most this often. */
#define PROGRESS_EVERY_MS 200.0

static double shown_after_ms(void) {
    const char *s = getenv("ATTNVIZ_PROGRESS_AFTER");
    char *end;
    double v = s && *s ? strtod(s, &end) : -1;
    return s && *s && *end == '\0' && v >= 0 && v < 1e6 ? v * 1e3 : 2000.0;
}

void run_progress_begin(RunProgress *p, const RunSpec *o, const char *what) {
    memset(p, 0, sizeof *p);
    p->on = !o->quiet && av_progress_wanted();
    p->what = what;
    p->t0 = av_now_ms();
    p->after_ms = shown_after_ms();
}

static void draw(RunProgress *p, int last, double now) {
    const double ms = now - p->t0, rate = ms > 0 ? p->done / (ms / 1e3) : 0;
    const int secs = (int)(last ? ms / 1e3 : rate > 0 ? (p->total - p->done) / rate + 0.5 : 0);
    char r[32];
    snprintf(r, sizeof r, rate >= 100 ? "%.0f" : rate >= 10 ? "%.1f" : "%.2f", rate);
    if (p->total < 0) { /* a total not known (a batch from standard input): no time left */
        if (last)
            av_progress(1, "%s: %ld %s, %s %s/s, %d:%02d in all", p->what, p->done, p->unit_name, r, p->unit_name,
                        secs / 60, secs % 60);
        else
            av_progress(0, "%s: %ld %s, %s %s/s", p->what, p->done, p->unit_name, r, p->unit_name);
    } else if (p->done > 0 || last)
        av_progress(last, "%s: %ld/%ld %s, %s %s/s, %d:%02d %s", p->what, p->done, p->total, p->unit_name, r,
                    p->unit_name, secs / 60, secs % 60, last ? "in all" : "left");
    else
        av_progress(0, "%s: 0/%ld %s", p->what, p->total, p->unit_name);
    p->shown = !last;
    p->last_ms = now;
}

void run_progress_step(RunProgress *p, const char *unit, long done, long total) {
    if (!p->on || total == 0) return;
    p->unit_name = unit, p->done = done, p->total = total < 0 ? -1 : total;
    const double now = av_now_ms();
    const int last = total > 0 && done >= total;
    if (now - p->t0 < p->after_ms || (!last && p->shown && now - p->last_ms < PROGRESS_EVERY_MS)) return;
    if (last && !p->shown) return; /* done before it was worth a line */
    draw(p, last, now);
}

void run_progress_end(RunProgress *p) {
    if (p->on && p->shown) draw(p, 1, av_now_ms());
}

void run_progress_model(void *ctx, ModelProgressUnit unit, int done, int total) {
    RunProgress *p = ctx;
    if (unit != p->unit) { /* a new stage (generation after its prompt's pass): timed from now */
        p->unit = unit;
        p->t0 = av_now_ms();
        p->shown = 0;
        p->what = unit == MODEL_PROGRESS_TOKENS ? "generating" : p->what;
    }
    run_progress_step(p, unit == MODEL_PROGRESS_TOKENS ? "tokens" : "layers", done, total);
}

void run_progress_heads(void *ctx, int done, int total) { run_progress_step(ctx, "heads", done, total); }
