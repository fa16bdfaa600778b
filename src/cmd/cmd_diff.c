/* cmd_diff.c — attnviz diff: two texts on one model or one text on two,
 * through the same loading and tokenizing as a run, compared (diff.h) and
 * written: the table on stdout, --json, the page. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "diff_out.h"
#include "report.h"
#include "run_internal.h"
#include "selection.h"
#include "util.h"

/* Runs tokens already in enc; the capture is handed over to cap (the run
 * allocates a new one next time). */
static int run_owned(Run *r, const TokEncoding *enc, Capture *cap, AvErr *e) {
    if (run_ensure_buffers(r, enc->n, e) != 0) return -1;
    double t0 = av_now_ms();
    int rc = model_forward(&r->s->model, &r->rs, enc->ids, enc->type_ids, enc->n, &r->in.cap, e);
    r->t_fwd += av_now_ms() - t0;
    if (rc != 0) return -1;
    *cap = r->in.cap;
    memset(&r->in.cap, 0, sizeof r->in.cap);
    r->cap_n = 0;
    return 0;
}

typedef int (*DiffWriter)(FILE *f, const OutDoc *d, const char *templates_dir, AvErr *e);
static int diff_json(FILE *f, const OutDoc *d, const char *dir, AvErr *e) {
    (void)dir;
    if (diff_write_json(f, d, e) != 0) return -1;
    return fputc('\n', f) == EOF ? av_err_errno(e, "write error") : 0;
}
static int diff_page(FILE *f, const OutDoc *d, const char *dir, AvErr *e) { return html_write_doc(f, d, dir, e); }

/* One output of the diff's set (committed together: util.h's AvOutSet); a failure aborts them all. */
static int diff_out(AvOutSet *set, const char *path, DiffWriter w, const OutDoc *d, const char *dir, AvErr *e) {
    FILE *f = av_outset_add(set, path, e);
    if (!f) return -1;
    if (w(f, d, dir, e) != 0) {
        av_err_prefix(e, "%s", strcmp(path, "-") ? path : "stdout");
        av_outset_abort(set);
        return -1;
    }
    return 0;
}

/* The first token where two models' tokenizations differ, in one line. */
static int tokens_differ(const Run *a, const TokEncoding *ea, const Run *b, const TokEncoding *eb, AvErr *e) {
    int i = 0;
    while (i < ea->n && i < eb->n && ea->ids[i] == eb->ids[i]) i++;
    char ta[80], tb[80];
    snprintf(ta, sizeof ta, "%s", i < ea->n ? ea->tokens[i] : "(end)");
    snprintf(tb, sizeof tb, "%s", i < eb->n ? eb->tokens[i] : "(end)");
    return av_err(e, "diff: %s and %s tokenize the text differently (%d and %d tokens; token %d is '%s' id %d and "
                     "'%s' id %d): --model A --model B needs one tokenizer",
                  a->s->dir, b->s->dir, ea->n, eb->n, i, ta, i < ea->n ? ea->ids[i] : -1, tb, i < eb->n ? eb->ids[i] : -1);
}

/* An encoder-decoder's diff: the sources (two on one model, or one on two models) with one --decoder-text,
 * teacher-forced; each stack's divergence and sink mass per layer and head; the table and --json (no page). */
static int diff_s2s(Run *ra, Run *rb, const DiffSpec *ds, const RunSpec *o, AvErr *e) {
    Run *rB = rb ? rb : ra;
    const char *ta = o->text_a, *tb = rb ? o->text_a : o->text_b;
    TokEncoding sa = {0}, sb = {0};
    S2sCapture ca = {0}, cb = {0};
    DiffAlign as = {0}, ad = {0};
    int *da = NULL, *db = NULL, na = 0, nb = 0, rc = -1;
    double *grids = NULL;
    /* unequal depths: the encoder's and the decoder's (and cross attention's) layers apart */
    if (run_s2s_stack_layers(ra, ra->s2s_layers, ra->s2s_n_layers, e) != 0) goto done;
    if (run_seq2seq_capture(ra, ta, o->decoder_text, &sa, &da, &na, &ca, e) ||
        run_seq2seq_capture(rB, tb, o->decoder_text, &sb, &db, &nb, &cb, e))
        goto done;
    if (rb && (sa.n != sb.n || memcmp(sa.ids, sb.ids, sizeof *sa.ids * (size_t)sa.n) || na != nb ||
               memcmp(da, db, sizeof *da * (size_t)na))) {
        av_err(e, "diff: %s and %s tokenize the source or the decoder's text differently: --model A --model B needs one "
                  "tokenizer", ra->s->dir, rb->s->dir);
        goto done;
    }
    if (diff_align(sa.ids, sa.n, sb.ids, sb.n, &as, e) || diff_align(da, na, db, nb, &ad, e)) goto done;
    if (as.n_pairs == 0) {
        av_err(e, "diff: no source token of A (%d) is also in B (%d): no attention row to compare", sa.n, sb.n);
        goto done;
    }
    const int nl = o->sel.layers ? o->sel.n_layers : ra->s->cfg.num_layers, H = ra->s->cfg.num_heads;
    const int unequal = ra->s2s_n_layers[0] > 0;
    /* each side's layers: the encoder's (0) and the decoder's (1); equal depths: the selection's for both */
    const int n_side[2] = {unequal ? ra->s2s_n_layers[0] : nl, unequal ? ra->s2s_n_layers[1] : nl};
    const int most = n_side[0] > n_side[1] ? n_side[0] : n_side[1];
    int *layers = malloc(sizeof *layers * (size_t)nl);
    const size_t g = (size_t)most * H;
    grids = malloc(sizeof *grids * g * 9);
    if (!layers || !grids) {
        free(layers);
        av_err(e, "out of memory");
        goto done;
    }
    for (int li = 0; li < nl; li++) layers[li] = o->sel.layers ? o->sel.layers[li] : li;
    const int *side[2] = {unequal ? ra->s2s_layers[0] : layers, unequal ? ra->s2s_layers[1] : layers};
    DiffS2s d = {rb != NULL, ra->s->name, rB->s->name, ta, tb, o->decoder_text, &as, &ad, side[0], n_side[0], H, {{0}}};
    for (int k = 0; k < 3; k++)
        d.stacks[k] = (DiffStack){RUN_S2S_STACKS[k], grids + g * 3 * k, grids + g * (3 * k + 1), grids + g * (3 * k + 2),
                                  unequal ? side[k ? 1 : 0] : NULL, unequal ? n_side[k ? 1 : 0] : 0};
    for (int li = 0; li < n_side[0]; li++)
        for (int h = 0; h < H; h++) {
            const size_t at = (size_t)li * H + h, la = (size_t)side[0][li] * H + h;
            const float *ea = ca.enc_attn + la * sa.n * sa.n, *eb = cb.enc_attn + la * sb.n * sb.n;
            grids[at] = diff_head_jsd(ea, eb, &as), grids[g + at] = diff_sink_mass(ea, sa.n),
            grids[2 * g + at] = diff_sink_mass(eb, sb.n);
        }
    for (int li = 0; li < n_side[1]; li++)
        for (int h = 0; h < H; h++) {
            const size_t at = (size_t)li * H + h, la = (size_t)side[1][li] * H + h;
            const float *xa = ca.dec_attn + la * na * na, *xb = cb.dec_attn + la * nb * nb;
            const float *ca_ = ca.cross_attn + la * na * sa.n, *cb_ = cb.cross_attn + la * nb * sb.n;
            double *v = grids + 3 * g;
            v[at] = diff_head_jsd(xa, xb, &ad), v[g + at] = diff_sink_mass(xa, na), v[2 * g + at] = diff_sink_mass(xb, nb);
            v += 3 * g;
            v[at] = diff_cross_jsd(ca_, cb_, &ad, &as), v[g + at] = diff_cross_sink(ca_, na, sa.n),
            v[2 * g + at] = diff_cross_sink(cb_, nb, sb.n);
        }
    rc = 0;
    if (o->output.json_path) {
        AvOut out;
        rc = av_out_open(&out, o->output.json_path, e);
        if (rc == 0 && diff_write_s2s_json(out.fp, &d, e) != 0) {
            av_err_prefix(e, "%s", strcmp(o->output.json_path, "-") ? o->output.json_path : "stdout");
            av_out_abort(&out);
            rc = -1;
        } else if (rc == 0) {
            rc = av_out_commit(&out, e);
            if (rc == 0 && !o->quiet && strcmp(o->output.json_path, "-")) av_info("wrote %s", o->output.json_path);
        }
    }
    if (rc == 0 && !(o->output.json_path && !strcmp(o->output.json_path, "-")) &&
        (diff_write_s2s_table(stdout, &d, ds->top ? ds->top : 10, e) != 0 || fflush(stdout) != 0))
        rc = e->msg[0] ? -1 : av_err(e, "stdout: write error");
    free(layers);
done:
    free(grids);
    free(da), free(db);
    diff_align_free(&as), diff_align_free(&ad);
    s2s_capture_free(&ca), s2s_capture_free(&cb);
    tok_encoding_free(&sa), tok_encoding_free(&sb);
    return rc;
}

int pipeline_diff(const ModelSpec *m, const DiffSpec *ds, const RunSpec *o, AvErr *e) {
    ModelSpec mb = *m;
    Session *sa = NULL, *sb = NULL;
    Run *ra = NULL, *rb = NULL;
    const char *dir = NULL, *why = "";
    TokEncoding ea = {0}, eb = {0};
    Capture ca = {0}, cb = {0};
    DiffAlign al = {0};
    double *jsd = NULL, *sink_a = NULL, *sink_b = NULL;
    char name_a[256], name_b[256];
    int rc = -1;
    if (session_open_for(&sa, m, o, &dir, &why, e) != 0 || run_open(&ra, sa, o, e) != 0) goto done;
    if (!o->quiet) av_info("model A %s (%s)", dir, why);
    if (sa->cfg.enc_dec != (o->decoder_text != NULL)) {
        if (o->decoder_text)
            av_err_usage(e, "--decoder-text goes with an encoder-decoder model; %s is a %s model", dir, sa->cfg.model_type);
        else
            av_err_usage(e, "diff: %s is an encoder-decoder (%s) model: give the decoder's text (--decoder-text TEXT) "
                            "for both sides", dir, sa->cfg.model_type);
        goto done;
    }
    if (sa->cfg.enc_dec && (o->output.html_path || o->sel.heads)) {
        av_err_usage(e, "diff on an encoder-decoder (%s) model writes the table and --json (no --html, --heads)",
                     sa->cfg.model_type);
        goto done;
    }
    if (ds->model_b) {
        mb.path = ds->model_b;
        if (session_open_for(&sb, &mb, o, &dir, &why, e) != 0 || run_open(&rb, sb, o, e) != 0) goto done;
        if (!o->quiet) av_info("model B %s (%s)", dir, why);
        if (sb->cfg.enc_dec != sa->cfg.enc_dec) {
            av_err_usage(e, "diff: %s is %s encoder-decoder model and %s is %s", sa->dir, sa->cfg.enc_dec ? "an" : "not an",
                         dir, sb->cfg.enc_dec ? "one" : "not");
            goto done;
        }
        if (sa->cfg.num_layers != sb->cfg.num_layers || sa->cfg.num_heads != sb->cfg.num_heads ||
            (sa->cfg.enc_dec && sa->cfg.dec_layers != sb->cfg.dec_layers)) {
            av_err(e, "diff: %s has %d layers x %d heads but %s has %d x %d: --model A --model B compares models of one shape",
                   sa->dir, sa->cfg.num_layers, sa->cfg.num_heads, sb->dir, sb->cfg.num_layers, sb->cfg.num_heads);
            goto done;
        }
    }
    Run *rB = rb ? rb : ra;
    /* an encoder-decoder's layers: its deeper stack's (diff_s2s keeps each stack's in range) */
    const int sel_layers = sa->cfg.enc_dec && sa->cfg.dec_layers > sa->cfg.num_layers ? sa->cfg.dec_layers : sa->cfg.num_layers;
    if (sel_check(&o->sel, sel_layers, sa->cfg.num_heads, "model", e) != 0) goto done;
    if (sa->cfg.enc_dec) {
        rc = diff_s2s(ra, rb, ds, o, e);
        goto done;
    }
    const char *ta = o->text_a, *tb = rb ? o->text_a : o->text_b;
    if (run_tokenize(ra, ta, NULL, &ea, e) != 0 || run_tokenize(rB, tb, NULL, &eb, e) != 0) goto done;
    if (rb && (ea.n != eb.n || memcmp(ea.ids, eb.ids, sizeof *ea.ids * (size_t)ea.n))) {
        tokens_differ(ra, &ea, rb, &eb, e);
        goto done;
    }
    run_warn_truncated(ra, &ea, 0);
    run_warn_truncated(rB, &eb, 0);
    if (run_owned(ra, &ea, &ca, e) != 0 || run_owned(rB, &eb, &cb, e) != 0) goto done;
    double t0 = av_now_ms();
    if (diff_align(ea.ids, ea.n, eb.ids, eb.n, &al, e) != 0) goto done;
    if (al.n_pairs == 0) {
        av_err(e, "diff: no token of A (%d) is also in B (%d): no attention row to compare", ea.n, eb.n);
        goto done;
    }
    OutDoc da, db;
    run_fill_doc(ra, &da, &ea, &ca, ta, NULL);
    run_fill_doc(rB, &db, &eb, &cb, tb, NULL);
    if (rb && !strcmp(da.model_name, db.model_name)) { /* e.g. a demo and its edited copy: tell them apart by folder */
        da.model_name = run_display_name(sa->dir, 0, name_a, sizeof name_a);
        db.model_name = run_display_name(sb->dir, 0, name_b, sizeof name_b);
        if (!strcmp(da.model_name, db.model_name)) da.model_name = sa->dir, db.model_name = sb->dir;
    }
    const int nl = out_n_layers(&da), nh = out_n_heads(&da);
    const size_t grid = sizeof(double) * (size_t)nl * nh;
    if (!(jsd = malloc(grid)) || !(sink_a = malloc(grid)) || !(sink_b = malloc(grid))) {
        av_err(e, "out of memory");
        goto done;
    }
    if (diff_divergence(&da, &db, &al, jsd, e) != 0 || diff_sinks(&da, sink_a, e) != 0 || diff_sinks(&db, sink_b, e) != 0)
        goto done;
    const struct OutDiff df = {&db, rb != NULL, al.a_to_b, al.b_to_a, al.n_pairs, jsd, sink_a, sink_b};
    da.diff = &df;
    if (o->sel.layer < 0 && o->sel.head < 0) { /* the page opens on the most divergent head */
        int best = 0;
        for (int i = 1; i < nl * nh; i++)
            if (jsd[i] > jsd[best]) best = i;
        da.init_layer = out_layer(&da, best / nh), da.init_head = out_head(&da, best % nh);
        if (o->output.show_all_heads) da.init_head = -1; /* the most divergent head's layer, every head drawn */
    }
    if (!o->output.view) da.init_view = "diff";
    AvOutSet set = {0};
    if (o->output.json_path && diff_out(&set, o->output.json_path, diff_json, &da, NULL, e) != 0) goto done;
    const char *html = o->output.html_path ? o->output.html_path : o->output.json_path ? NULL : "attnviz-diff.html";
    if (html && !o->output.html_path) run_warn_default_page(html);
    if (html && diff_out(&set, html, diff_page, &da, o->output.templates_dir, e) != 0) goto done;
    if (av_outset_commit(&set, e) != 0) goto done;
    if (!o->quiet && o->output.json_path && strcmp(o->output.json_path, "-")) av_info("wrote %s", o->output.json_path);
    if (!o->quiet && html && strcmp(html, "-")) av_info("wrote %s", html);
    ra->t_write += av_now_ms() - t0;
    const int to_stdout = (o->output.json_path && !strcmp(o->output.json_path, "-")) || (html && !strcmp(html, "-"));
    if (!to_stdout && (diff_write_table(stdout, &da, ds->top ? ds->top : 10, e) != 0 || fflush(stdout) != 0)) {
        if (!e->msg[0]) av_err(e, "stdout: write error");
        goto done;
    }
    rc = 0;
done:
    free(jsd);
    free(sink_a);
    free(sink_b);
    diff_align_free(&al);
    model_capture_free(&ca);
    model_capture_free(&cb);
    tok_encoding_free(&ea);
    tok_encoding_free(&eb);
    if (o->profile) run_profile(sa, ra);
    run_close(ra);
    session_close(sa);
    if (o->profile) run_profile(sb, rb);
    run_close(rb);
    session_close(sb);
    return rc;
}
