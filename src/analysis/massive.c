/* massive.c — the flags of flags.h: each selected head's share on the
 * attention sink, and the stream's massive activations, from a capture. */
#include "flags.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void flags_free(FlagsResult *f) {
    free(f->layers);
    free(f->heads);
    free(f->first);
    free(f->learned);
    free(f->median);
    free(f->max_abs);
    free(f->found);
    memset(f, 0, sizeof *f);
}

static int sinks(const Capture *cap, FlagsResult *f) {
    const int n = cap->n_tokens;
    for (int li = 0; li < f->nl; li++)
        for (int hk = 0; hk < f->nh; hk++) {
            const int l = f->layers[li], h = f->heads[hk];
            const float *A = cap_attn(cap, l, h);
            double s = 0;
            for (int i = 1; i < n; i++) s += A[(size_t)i * n];
            f->first[(size_t)li * f->nh + hk] = n > 1 ? (float)(s / (n - 1)) : 0.0f;
            if (!f->learned) continue;
            const float *sk = cap_sinks(cap, l, h);
            double t = 0;
            for (int i = 0; i < n; i++) t += sk[i];
            f->learned[(size_t)li * f->nh + hk] = (float)(t / n);
        }
    return 0;
}

static int massive(const Capture *cap, FlagsResult *f, AvErr *e) {
    const int B = cap->act_median ? cap->act_blocks : 0;
    f->blocks = B;
    if (!B) return 0;
    f->median = malloc((size_t)B * sizeof *f->median);
    f->max_abs = malloc((size_t)B * sizeof *f->max_abs);
    f->found = malloc((size_t)B * CAP_ACT_TOP * sizeof *f->found);
    if (!f->median || !f->max_abs || !f->found) return av_err(e, "out of memory");
    for (int b = 0; b < B; b++) {
        const float med = cap->act_median[b];
        f->median[b] = med;
        f->max_abs[b] = fabsf(cap->act_val[(size_t)b * CAP_ACT_TOP]);
        for (int k = 0; k < CAP_ACT_TOP; k++) {
            const size_t at = (size_t)b * CAP_ACT_TOP + k;
            const double m = fabs((double)cap->act_val[at]);
            if (cap->act_tok[at] < 0 || !(m > FLAGS_MASSIVE_ABS && m > FLAGS_MASSIVE_RATIO * med)) break;
            f->found[f->n_found++] = (FlagsEntry){b, cap->act_tok[at], cap->act_dim[at], cap->act_val[at],
                                                  med > 0 ? (float)(m / med) : INFINITY};
        }
    }
    return 0;
}

int flags_compute(const Capture *cap, const int *layers, int nl, const int *heads, int nh, FlagsResult *f, AvErr *e) {
    memset(f, 0, sizeof *f);
    if (!cap->attn) return av_err(e, "the sink shares need the attention");
    f->nl = layers ? nl : cap->n_layers, f->nh = heads ? nh : cap->n_heads;
    f->layers = malloc((size_t)f->nl * sizeof *f->layers);
    f->heads = malloc((size_t)f->nh * sizeof *f->heads);
    f->first = malloc((size_t)f->nl * f->nh * sizeof *f->first);
    if (cap->sinks) f->learned = malloc((size_t)f->nl * f->nh * sizeof *f->learned);
    if (!f->layers || !f->heads || !f->first || (cap->sinks && !f->learned)) {
        flags_free(f);
        return av_err(e, "out of memory");
    }
    for (int i = 0; i < f->nl; i++) f->layers[i] = layers ? layers[i] : i;
    for (int k = 0; k < f->nh; k++) f->heads[k] = heads ? heads[k] : k;
    for (int i = 0; i < f->nl; i++)
        for (int k = 0; k < f->nh; k++)
            if (!cap_has(cap, f->layers[i], f->heads[k])) {
                flags_free(f);
                return av_err(e, "head %d.%d was not captured", layers ? layers[i] : i, heads ? heads[k] : k);
            }
    if (sinks(cap, f) || massive(cap, f, e)) {
        flags_free(f);
        return -1;
    }
    return 0;
}
