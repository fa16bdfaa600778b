/* run_lens.c — --logit-lens, --attribution/--target and --ablate on the input
 * just run: the target resolved against the vocabulary, the positions
 * checked, lens.c's analyses run, their ids spelled for the writers. */
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"
#include "util.h"

int run_lens_wanted(const RunSpec *o) {
    return o->lens.lens_k || o->lens.attribution || o->lens.ablate || o->lens.flow || o->explain.on;
}

/* --flow: from --position's token (default the last) at the top selected layer down to the first */
static int run_flow(Run *r, AvErr *e) {
    const RunSpec *o = &r->spec;
    const int n = r->in.cap.n_tokens;
    const int lo = o->sel.layers ? o->sel.layers[0] : 0;
    const int hi = o->sel.layers ? o->sel.layers[o->sel.n_layers - 1] : r->s->cfg.num_layers - 1;
    const int pos = o->lens.position >= 0 ? o->lens.position : n - 1;
    return flow_routes(&r->s->model, &r->in.cap, lo, hi, pos, o->lens.flow_threshold, &r->in.flow, e);
}

/* --target TOKEN: the vocabulary's own spelling (e.g. GPT-2's "Ġthe"), else a
 * text that the tokenizer reads as exactly one token besides its specials. */
static int resolve_target(const Run *r, const char *s, int *id, AvErr *e) {
    int t = tok_token_to_id(r->s->tok, s);
    if (t >= 0 && t < r->s->cfg.vocab_size) {
        *id = t;
        return 0;
    }
    TokEncoding enc = {0};
    AvErr ignored;
    int found = -1, count = 0;
    if (tok_encode(r->s->tok, s, strlen(s), NULL, 0, 0, &enc, &ignored) == 0)
        for (int i = 0; i < enc.n; i++)
            if (!enc.special[i]) found = enc.ids[i], count++;
    tok_encoding_free(&enc);
    if (count != 1 || found < 0 || found >= r->s->cfg.vocab_size)
        return av_err_usage(e, "--target '%s' is not a token of the vocabulary (the tokenizer reads it as %d tokens)", s,
                            count);
    *id = found;
    return 0;
}

/* The ids the writers show, in OutDoc.lens_words' order. */
static int spell(Run *r, AvErr *e) {
    const LensResult *L = &r->in.lens;
    const size_t lens_cells = (size_t)L->lens_n * L->n * L->lens_k;
    const size_t total = lens_cells + (size_t)L->n + (size_t)L->attr_n + (L->abl_on ? 1 : 0);
    int *ids = malloc((total ? total : 1) * sizeof *ids);
    if (!ids) return av_err(e, "out of memory");
    size_t at = 0;
    if (lens_cells) memcpy(ids, L->lens_ids, lens_cells * sizeof *ids), at = lens_cells;
    for (int i = 0; i < L->n; i++) ids[at++] = L->final_id[i];
    for (int i = 0; i < L->attr_n; i++) ids[at++] = L->attr_tid[i];
    if (L->abl_on) ids[at++] = L->abl_target;
    int rc = session_spell(r->s, ids, (int)at, &r->in.lens_words, e);
    free(ids);
    return rc;
}

int run_lens(Run *r, const TokEncoding *enc, AvErr *e) {
    const LensSpec *ls = &r->spec.lens;
    const Capture *cap = &r->in.cap;
    const int n = cap->n_tokens;
    lens_free(&r->in.lens);
    flow_free(&r->in.flow);
    if (n != enc->n) return av_err(e, "the capture holds %d tokens, the input %d", n, enc->n);
    int target = -1;
    if (ls->target && resolve_target(r, ls->target, &target, e)) return -1;
    if (ls->position >= n)
        return av_err_usage(e, "--position %d: the input has %d tokens (0 to %d)", ls->position, n, n - 1);
    for (int i = 0; ls->ablate && i < ls->n_ablate; i++) {
        const int l = ls->ablate_pairs[2 * i], h = ls->ablate_pairs[2 * i + 1];
        if (l >= r->s->cfg.num_layers || h >= r->s->cfg.num_heads)
            return av_err_usage(e, "--ablate %d.%d: the model has %d layers (0 to %d) of %d heads (0 to %d)", l, h,
                                r->s->cfg.num_layers, r->s->cfg.num_layers - 1, r->s->cfg.num_heads, r->s->cfg.num_heads - 1);
    }
    const int lens_any = ls->lens_k || ls->attribution || ls->ablate;
    explain_free(&r->in.explain);
    const ExplainSpec *xs = &r->spec.explain;
    /* before ablation, which reruns the pass in the run state */
    if (xs->on && explain_head(&r->s->model, cap, xs->layer, xs->head, xs->query, xs->key, &r->in.explain, e)) return -1;
    /* attribution's and flow's products are OpenBLAS's: on the run's threads */
    kern_blas_threads(pool_threads(r->spec.threads));
    int rc = lens_any ? lens_logit_lens(&r->s->model, cap, r->spec.sel.layers, r->spec.sel.n_layers, ls->lens_k, r->spec.threads,
                                        &r->in.lens, e)
                      : 0;
    if (rc == 0 && ls->attribution) {
        const int one = ls->position >= 0, np = one ? 1 : n;
        int *pos = malloc((size_t)np * sizeof *pos);
        if (!pos) return av_err(e, "out of memory");
        for (int i = 0; i < np; i++) pos[i] = one ? ls->position : i;
        rc = lens_attribution(&r->s->model, cap, pos, np, target, &r->in.lens, e);
        free(pos);
    }
    if (rc == 0 && ls->ablate)
        rc = lens_ablation(&r->s->model, &r->rs, cap, enc->ids, ls->position >= 0 ? ls->position : n - 1, target,
                           ls->ablate_pairs, ls->n_ablate, ls->ablate_mean, &r->in.lens, e);
    if (rc == 0 && ls->flow) rc = run_flow(r, e);
    if (rc == 0 && lens_any) rc = spell(r, e);
    return rc;
}
