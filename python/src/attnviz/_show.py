"""attnviz.show: run a transformers model on a text (or a pair) and draw its attention,
with the queries and keys the neuron view needs.

Queries and keys: with eager attention, transformers' attention modules (BERT, GPT-2, Llama,
Mistral, Qwen, Gemma, ... since transformers 4.48) call their module's function
`eager_attention_forward(module, query, key, value, mask, scaling=...)` with the query and key
exactly as the scores use them: split into heads, after rotary positions and q/k norms. show()
wraps that function for the duration of one forward pass and records its query and key
(keys repeated to the query heads for grouped-query attention). Where that function does not
exist (older transformers), forward hooks on the projections of layouts it knows take over:
BERT-family `query`/`key` Linear outputs and GPT-2's `c_attn` split; those are pre-rotary, so
rotary models get no q/k then. Either way the result is checked: softmax(q.k * scaling) over
the keys the model did not mask must give back the model's attention (within 1e-3); if it
does not (soft-capping, ALiBi, relative position biases), q/k are left out with a warning and
the head, model and matrix views are drawn without the neuron view's vectors.
"""

import inspect
import os
import sys
import warnings

import numpy as np

from ._display import Page, frame_height, model_frame_height, show_or_return
from ._render import cint, render
from ._views import _build


def _records_via_eager(model):
    """Patches every `eager_attention_forward` the model's modules use; returns (records, undo)."""
    records = []
    patched = {}

    def make(orig):
        def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
            scaling = kwargs.get("scaling", args[0] if args else None)
            records.append((query.detach(), key.detach(), scaling))
            return orig(module, query, key, value, attention_mask, *args, **kwargs)
        wrapper.__attnviz_wrapped__ = orig
        return wrapper

    for m in model.modules():
        mod = sys.modules.get(type(m).__module__)
        f = getattr(mod, "eager_attention_forward", None) if mod else None
        if f is not None and mod.__name__ not in patched:
            patched[mod.__name__] = (mod, f)
            mod.eager_attention_forward = make(f)

    def undo():
        for mod, f in patched.values():
            mod.eager_attention_forward = f
    return (records if patched else None), undo


def _records_via_hooks(model):
    """Forward hooks on known projection layouts (pre-rotary): BERT family, GPT-2."""
    records, handles = [], []
    cfg = model.config
    n_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None)
    if getattr(cfg, "rope_theta", None) is not None or getattr(cfg, "rope_scaling", None) is not None:
        return None, lambda: None
    for name, m in model.named_modules():
        q, k = getattr(m, "query", None), getattr(m, "key", None)
        if q is not None and k is not None and hasattr(q, "weight") and hasattr(k, "weight"):  # BERT-style self-attention
            slot = {}
            d = q.weight.shape[0] // n_heads
            handles.append(q.register_forward_hook(lambda mod, i, o, s=slot: s.__setitem__("q", o.detach())))

            def on_key(mod, i, o, s=slot, d=d):
                qv = s.pop("q")
                split = lambda t: t.reshape(t.shape[0], t.shape[1], -1, d).transpose(1, 2)  # noqa: E731
                records.append((split(qv), split(o.detach()), d ** -0.5))
            handles.append(k.register_forward_hook(on_key))
        elif type(m).__name__ == "GPT2Attention" and hasattr(m, "c_attn"):
            def on_c_attn(mod, i, o, n_heads=n_heads):
                qv, kv, _ = o.detach().split(o.shape[-1] // 3, dim=-1)
                d = qv.shape[-1] // n_heads
                split = lambda t: t.reshape(t.shape[0], t.shape[1], n_heads, d).transpose(1, 2)  # noqa: E731
                records.append((split(qv), split(kv), d ** -0.5))
            handles.append(m.c_attn.register_forward_hook(on_c_attn))

    def undo():
        for h in handles:
            h.remove()
    return (records if handles else None), undo


def _qk_from_records(records, attentions):
    """[L, H, n, d] queries and keys from the records, or (None, None, why) when they do not
    reproduce the model's attention."""
    if records is None:
        return None, None, "this model's attention layout is not one attnviz knows"
    if len(records) != len(attentions):
        return None, None, f"recorded {len(records)} attention calls for {len(attentions)} layers"
    qs, ks = [], []
    worst = 0.0
    for (q, k, scaling), att in zip(records, attentions):
        q = q.float().cpu().numpy()[0]
        k = k.float().cpu().numpy()[0]
        if k.shape[0] != q.shape[0]:  # grouped-query attention: each query head reads key head h // groups
            k = np.repeat(k, q.shape[0] // k.shape[0], axis=0)
        a = att.float().cpu().numpy()[0]
        if scaling is None:
            scaling = q.shape[-1] ** -0.5
        s = np.einsum("hid,hjd->hij", q.astype(np.float64), k.astype(np.float64)) * float(scaling)
        s = np.where(a == 0, -np.inf, s)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        worst = max(worst, float(np.abs(p - a).max()))
        qs.append(q)
        ks.append(k)
    if worst > 1e-3:
        return None, None, f"softmax(q.k) differs from the model's attention by {worst:.2g}"
    return np.stack(qs), np.stack(ks), None


def show(model, tokenizer, text, text_b=None, view="head", layer=None, heads=None, include_layers=None,
         include_heads=None, display_mode=None, qk=True, html_action="view", max_length=512, json_path=None,
         _qk_method=None):
    """Runs a transformers model on text (and text_b: sentence B for an encoder, the decoder's
    text for an encoder-decoder model) with eager attention and draws the page.

    view: the tab it opens on ('head', 'model', 'neuron', 'matrix'); layer, heads: its initial
    selection (heads: the first is selected); include_layers / include_heads: what to draw;
    display_mode: 'light' or 'dark' (default: the page follows the system). qk: record queries
    and keys for the neuron view (self-attention models). html_action: 'view' or 'return', as
    head_view. Returns the page object with html_action='return'."""
    import torch  # show() runs a model: torch is there

    if html_action not in ("view", "return"):
        raise ValueError("'html_action' parameter must be 'view' or 'return")
    cfg = model.config
    enc_dec = bool(getattr(cfg, "is_encoder_decoder", False))
    if enc_dec and text_b is None:
        raise ValueError("an encoder-decoder model needs text_b: the decoder's text (e.g. the translation)")
    prev_impl = getattr(cfg, "_attn_implementation", None)
    if prev_impl not in (None, "eager"):
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        else:
            cfg._attn_implementation = "eager"
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    records, undo = None, (lambda: None)
    try:
        if enc_dec:
            enc = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_length)
            dec = tokenizer(text_target=text_b, return_tensors="pt", truncation=True, max_length=max_length)
            with torch.no_grad():
                out = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                            decoder_input_ids=dec["input_ids"].to(device), output_attentions=True)
        else:
            enc = tokenizer(text, text_b, return_tensors="pt", truncation=True, max_length=max_length) \
                if text_b is not None else tokenizer(text, return_tensors="pt", truncation=True, max_length=max_length)
            if qk:
                if _qk_method != "hooks":
                    records, undo = _records_via_eager(model)
                if records is None and _qk_method != "eager":
                    undo()
                    records, undo = _records_via_hooks(model)
            accepted = inspect.signature(model.forward).parameters
            inputs = {k: v.to(device) for k, v in enc.items() if k in accepted}  # decoders take no token_type_ids
            with torch.no_grad():
                out = model(**inputs, output_attentions=True)
    finally:
        undo()
        if prev_impl not in (None, "eager"):
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(prev_impl)
            else:
                cfg._attn_implementation = prev_impl
        if was_training:
            model.train()

    name = getattr(cfg, "_name_or_path", "") or type(model).__name__
    if os.path.isdir(name):  # a local folder: its name, not the whole path
        name = os.path.basename(os.path.normpath(name))
    if enc_dec:
        ids_e, ids_d = enc["input_ids"][0].tolist(), dec["input_ids"][0].tolist()
        arrays, meta, rows = _build(view, None, None, None, True, out.encoder_attentions, out.decoder_attentions,
                                    out.cross_attentions, tokenizer.convert_ids_to_tokens(ids_e),
                                    tokenizer.convert_ids_to_tokens(ids_d), include_layers, include_heads, None, name,
                                    text=text)
    else:
        attentions = out.attentions
        if attentions is None or len(attentions) == 0 or attentions[0] is None:
            raise RuntimeError(f"{type(model).__name__} returned no attention with output_attentions=True")
        ids = enc["input_ids"][0].tolist()
        tokens = tokenizer.convert_ids_to_tokens(ids)
        b_start = None
        if text_b is not None:
            tt = enc.get("token_type_ids")
            if tt is not None and 1 in tt[0].tolist():
                b_start = tt[0].tolist().index(1)
            else:  # no token types (RoBERTa, decoders): the second sequence from the tokenizer's own mapping
                seq = enc.sequence_ids(0) if hasattr(enc, "sequence_ids") else None
                if seq is not None and 1 in seq:
                    b_start = seq.index(1)
        q = k = None
        if qk:
            q, k, why = _qk_from_records(records, attentions)
            if why:
                warnings.warn(f"attnviz: no queries/keys for the neuron view: {why}", stacklevel=2)
        arrays, meta, rows = _build(view, attentions, tokens, b_start, True, None, None, None, None, None,
                                    include_layers, include_heads, None, name, queries=q, keys=k,
                                    text=text if text_b is None else f"{text} | {text_b}")
    if layer is not None and layer not in meta["layers"]:
        raise ValueError(f"Layer {layer} is not in include_layers: {meta['layers']}")
    shown = [cint(h, "heads", 0) for h in (heads or include_heads or [])] or None
    html = render(arrays, meta, layer=layer, head=cint(heads[0], "heads", 0) if heads else None, show_heads=shown, view=view,
                  theme=display_mode, json_path=json_path)
    height = model_frame_height(len(meta["layers"])) if view == "model" else frame_height(rows)
    return show_or_return(Page(html, height), html_action)
