/* cmd_render.c — attnviz render: attention computed elsewhere (render.h)
 * checked against the page's selection and written by the same writers. */
#include <limits.h>
#include <string.h>

#include "render.h"
#include "run_internal.h"
#include "selection.h"

static int in_ints(int x, const int *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

int pipeline_render(const RenderSpec *rs, const RunSpec *o, AvErr *e) {
    Rendered rd;
    if (render_load(&rd, rs->input, rs->meta, o->capture.max_capture, e) != 0) return -1;
    int rc = -1;
    const int H = rd.cfg.num_heads;
    CapStack stacks[3];
    int n_stacks = 0;
    if (rd.enc_dec) {
        if (o->output.npy_path) {
            av_err_usage(e, "--npy: encoder-decoder attention goes to --json and the page");
            goto done;
        }
        const RenderStack *src[3] = {&rd.enc, &rd.dec, &rd.cross};
        static const char *const names[3] = {"encoder", "decoder", "cross"};
        for (int k = 0; k < 3; k++)
            if (src[k]->present)
                stacks[n_stacks++] = (CapStack){names[k], k == 2 ? src[k]->cross : src[k]->cap.attn, src[k]->n_rows,
                                                src[k]->n_cols, k >= 1, k == 1, k == 1, NULL, 0};
    }
    if (o->sel.layer >= 0 && !in_ints(o->sel.layer, rd.layers, rd.n_layers)) {
        av_err_usage(e, "--layer %d is not among the given layers (%d of them, up to %d)", o->sel.layer, rd.n_layers,
               rd.layers[rd.n_layers - 1]);
        goto done;
    }
    /* the layer was checked against the given ones (not a count from 0); render takes no --layers/--heads */
    const Selection sel = {-1, o->sel.head, NULL, 0, NULL, 0, o->sel.show_heads, o->sel.n_show_heads};
    if (sel_check(&sel, INT_MAX, H, "attention", e) != 0) goto done;
    if (o->capture.qk && (rd.enc_dec || !rd.self.cap.q)) {
        av_err_usage(e, "--qk: %s holds no 'queries' and 'keys'", rs->input);
        goto done;
    }
    OutDoc d;
    memset(&d, 0, sizeof d);
    d.model_name = rd.model_name;
    d.model_dir = rs->input;
    d.cfg = &rd.cfg;
    d.dtype = NULL; /* whatever the arrays were, they are probabilities now */
    d.text_a = rd.text;
    d.text_b = rd.text_b;
    d.enc = &rd.tokens;
    d.cap = rd.enc_dec ? NULL : &rd.self.cap;
    if (rd.enc_dec) {
        /* the encoder's tokens lead; a decoder alone leads with its own */
        d.enc = rd.tokens.n ? &rd.tokens : &rd.dec_tokens;
        d.dec_enc = rd.dec_tokens.n ? &rd.dec_tokens : NULL;
        d.stacks = stacks, d.n_stacks = n_stacks;
    }
    d.display_tokens = rd.tokens.byte_level ? rd.tokens.display : NULL;
    d.layers = rd.layers, d.n_sel_layers = rd.n_layers;
    d.init_layer = o->sel.layer >= 0 ? o->sel.layer : rd.layers[0];
    d.init_head = o->sel.head >= 0 ? o->sel.head : -1; /* every head, as bertviz's head view opens (--show-heads all too) */
    d.precision = o->output.precision;
    d.with_qk = o->capture.qk;
    d.init_view = o->output.view, d.theme = o->output.theme;
    d.init_heads = o->sel.show_heads, d.n_init_heads = o->sel.n_show_heads;
    d.templates_dir = o->output.templates_dir;
    rc = run_write_outputs(o, &d, 0, e);
done:
    render_free(&rd);
    return rc;
}
