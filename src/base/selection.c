/* selection.c — the layer/head range check every command shares (run, diff,
 * render): one wording for one mistake. */
#include "selection.h"

#include <stddef.h>
#include <string.h>

static int in_list(int x, const int *v, int n) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

int sel_check(const Selection *s, int n_layers, int n_heads, const char *owner, AvErr *e) {
    if (s->layer >= n_layers)
        return av_err_usage(e, "--layer %d is out of range: the %s has %d layers (0-%d)", s->layer, owner, n_layers,
                            n_layers - 1);
    if (s->head >= n_heads)
        return av_err_usage(e, "--head %d is out of range: the %s has %d heads (0-%d)", s->head, owner, n_heads,
                            n_heads - 1);
    /* "the model has 12 show-heads" is how the model's check has always worded it (kept so
     * outputs stay byte-identical; the attention's check says "heads") */
    const int model = !strcmp(owner, "model");
    const struct {
        const char *what, *unit;
        const int *v;
        int n, limit;
    } lists[] = {{"layers", "layers", s->layers, s->n_layers, n_layers},
                 {"heads", "heads", s->heads, s->n_heads, n_heads},
                 {"show-heads", model ? "show-heads" : "heads", s->show_heads, s->n_show_heads, n_heads}};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
        for (int i = 0; i < lists[k].n; i++)
            if (lists[k].v[i] >= lists[k].limit)
                return av_err_usage(e, "--%s %d is out of range: the %s has %d %s (0-%d)", lists[k].what,
                                    lists[k].v[i], owner, lists[k].limit, lists[k].unit, lists[k].limit - 1);
    if ((s->layer >= 0 && s->layers && !in_list(s->layer, s->layers, s->n_layers)) ||
        (s->head >= 0 && s->heads && !in_list(s->head, s->heads, s->n_heads)))
        return av_err_usage(e, "--layer/--head must be among the selected --layers/--heads");
    return 0;
}
