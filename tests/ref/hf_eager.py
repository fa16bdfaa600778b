"""Queries and keys as transformers' eager attention receives them (after q/k norm and rotary,
before the scale), for the decoder reference checks: wraps the modeling module's
eager_attention_forward while a forward pass runs."""
import contextlib
import sys


@contextlib.contextmanager
def capture_qk(model):
    """Yields (queries, keys): lists filled per layer with (heads, n, dh) and (kv_heads, n, dh)."""
    mod = sys.modules[type(model.model.layers[0].self_attn).__module__]
    orig = mod.eager_attention_forward
    qs, ks = [], []

    def wrapped(module, query, key, *a, **k):
        qs.append(query[0].detach().clone())
        ks.append(key[0].detach().clone())
        return orig(module, query, key, *a, **k)

    mod.eager_attention_forward = wrapped
    try:
        yield qs, ks
    finally:
        mod.eager_attention_forward = orig
