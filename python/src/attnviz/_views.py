"""head_view and model_view with bertviz's signatures (bertviz 1.4.1), drawn by `attnviz render`."""

import numpy as np

from ._display import Page, frame_height, model_frame_height, show_or_return
from ._render import cint, format_attention, render


def _prettify(tokens):
    # bertviz's util.format_special_chars
    return [t.replace("Ġ", " ").replace("▁", " ").replace("</w>", "") for t in tokens]


def _is_causal(a):
    """True when every weight above the diagonal is exactly 0 (a decoder's mask) in every layer and head."""
    n = a.shape[-1]
    if n < 2 or a.shape[-2] != n:
        return False
    return not np.any(a[..., np.triu(np.ones((n, n), dtype=bool), 1)])


def _check_tokens(a, left, right, what):
    # bertviz's messages for a token count that does not match the attention
    if a.shape[-2] != len(left):
        raise ValueError(f"Attention has {a.shape[-2]} positions, while number of tokens is {len(left)} "
                         f"for tokens: {' '.join(left)}")
    if a.shape[-1] != len(right):
        raise ValueError(f"Attention has {a.shape[-1]} positions, while number of tokens is {len(right)} "
                         f"for tokens: {' '.join(right)}")


def _layers(include_layers, n):
    if not include_layers:
        return list(range(n))
    layers = [cint(x, "include_layers", 0) for x in include_layers]
    if len(set(layers)) != len(layers):
        raise ValueError(f"include_layers has a layer twice: {include_layers}")
    return layers


def _build(kind, attention, tokens, sentence_b_start, prettify_tokens, encoder_attention, decoder_attention,
           cross_attention, encoder_tokens, decoder_tokens, include_layers, include_heads, causal, model_name,
           queries=None, keys=None, text=None):
    """Checks the arguments as bertviz does; returns (arrays, meta, rows shown)."""
    arrays, meta = {}, {"model": model_name or "attention"}
    if text is not None:
        meta["text"] = text
    if attention is not None:
        if tokens is None:
            raise ValueError("'tokens' is required")
        if encoder_attention is not None or decoder_attention is not None or cross_attention is not None \
                or encoder_tokens is not None or decoder_tokens is not None:
            raise ValueError("If you specify 'attention' you may not specify any encoder-decoder arguments. This"
                             " argument is only for self-attention models.")
        layers = _layers(include_layers, len(attention))
        order = sorted(range(len(layers)), key=lambda i: layers[i])  # the page lists layers in order
        layers = [layers[i] for i in order]
        a = format_attention(attention, layers)
        tokens = list(tokens)
        _check_tokens(a, tokens, tokens, "attention")
        arrays["attention"] = a
        if queries is not None and keys is not None:
            arrays["queries"] = format_attention(queries, layers, None, "queries")
            arrays["keys"] = format_attention(keys, layers, None, "keys")
        meta["tokens"] = tokens
        if not prettify_tokens:  # shown as spelled ("Ġcat")
            meta["display_tokens"] = tokens
        elif any("</w>" in t for t in tokens):  # the binary reads Ġ, Ċ and ▁ itself; not </w>
            meta["display_tokens"] = _prettify(tokens)
        meta["sentence_b_start"] = None if sentence_b_start is None else cint(sentence_b_start, "sentence_b_start", 0)
        meta["causal"] = bool(_is_causal(a)) if causal is None else bool(causal)
        rows = len(tokens)
    elif encoder_attention is not None or decoder_attention is not None or cross_attention is not None:
        n_layers = len(next(x for x in (encoder_attention, decoder_attention, cross_attention) if x is not None))
        layers = sorted(_layers(include_layers, n_layers))
        if encoder_attention is not None and encoder_tokens is None:
            raise ValueError("'encoder_tokens' required if 'encoder_attention' is not None")
        if decoder_attention is not None and decoder_tokens is None:
            raise ValueError("'decoder_tokens' required if 'decoder_attention' is not None")
        if cross_attention is not None and (encoder_tokens is None or decoder_tokens is None):
            which = "encoder_tokens" if encoder_tokens is None else "decoder_tokens"
            raise ValueError(f"'{which}' required if 'cross_attention' is not None")
        enc = list(encoder_tokens) if encoder_tokens is not None else None
        dec = list(decoder_tokens) if decoder_tokens is not None else None
        if encoder_attention is not None:
            a = arrays["encoder_attention"] = format_attention(encoder_attention, layers, None, "encoder_attention")
            _check_tokens(a, enc, enc, "encoder_attention")
        if decoder_attention is not None:
            a = arrays["decoder_attention"] = format_attention(decoder_attention, layers, None, "decoder_attention")
            _check_tokens(a, dec, dec, "decoder_attention")
        if cross_attention is not None:
            a = arrays["cross_attention"] = format_attention(cross_attention, layers, None, "cross_attention")
            _check_tokens(a, dec, enc, "cross_attention")
        if enc is not None:
            meta["encoder_tokens"] = enc
        if dec is not None:
            meta["decoder_tokens"] = dec
        rows = max(len(enc or []), len(dec or []))
    else:
        raise ValueError("You must specify at least one attention argument.")
    meta["layers"] = layers
    if include_heads:
        # every head goes to the page, which shows these at first (the others a click away), so
        # each keeps its own index; `attnviz render` has no head filter of its own
        n_heads = next(iter(arrays.values())).shape[1]
        for h in include_heads:
            if not isinstance(h, (int, np.integer)) or not 0 <= h < n_heads:
                raise ValueError(f"include_heads: {h} is not a head (the attention has {n_heads} heads: 0-{n_heads - 1})")
    return arrays, meta, rows


def head_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, layer=None, heads=None,
              encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
              decoder_tokens=None, include_layers=None, html_action="view", *, causal=None, model_name=None,
              json_path=None):
    """Render head view (bertviz's arguments; see bertviz.head_view).

    attention: what transformers returns with output_attentions=True, a tuple (one per layer) of
        [1, heads, n, n] torch tensors or NumPy arrays; tokens: the n tokens; sentence_b_start: index
        of sentence B's first token. Encoder-decoder models: encoder_attention, decoder_attention,
        cross_attention ([1, heads, n_dec, n_enc]), encoder_tokens, decoder_tokens.
    layer: initially selected layer (an original index, one of include_layers); heads: initially
        selected heads (the page shows these, the first one selected); include_layers: layers to draw.
    html_action: 'view' shows the page in the notebook (an offline, sandboxed iframe); 'return'
        gives an IPython.display.HTML whose .data is the whole page.
    attnviz's own (keyword-only): causal (default: detected from an all-zero upper triangle),
    model_name (shown on the page), json_path (also write attnviz's JSON of the same numbers there).
    """
    if html_action not in ("view", "return"):
        raise ValueError("'html_action' parameter must be 'view' or 'return")
    arrays, meta, rows = _build("head", attention, tokens, sentence_b_start, prettify_tokens, encoder_attention,
                                decoder_attention, cross_attention, encoder_tokens, decoder_tokens, include_layers,
                                None, causal, model_name)
    if layer is not None and layer not in meta["layers"]:
        raise ValueError(f"Layer {layer} is not in include_layers: {meta['layers']}")
    heads = [cint(h, "heads", 0) for h in heads] if heads else None
    html = render(arrays, meta, layer=layer, head=heads[0] if heads else None, show_heads=heads, view="head",
                  json_path=json_path)
    return show_or_return(Page(html, frame_height(rows)), html_action)


def model_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, display_mode="dark",
               encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
               decoder_tokens=None, include_layers=None, include_heads=None, html_action="view", *, causal=None,
               model_name=None, json_path=None):
    """Render model view (bertviz's arguments; see bertviz.model_view): every layer x head as a grid
    of thumbnails. display_mode: 'dark' (bertviz's default) or 'light'. include_layers: the layers
    to draw; include_heads: the heads shown at first (every head is on the page, each under its
    own index; the others are a click away). Other arguments as head_view."""
    if html_action not in ("view", "return"):
        raise ValueError("'html_action' parameter must be 'view' or 'return")
    if display_mode not in ("dark", "light"):
        raise ValueError("display_mode must be 'dark' or 'light'")
    arrays, meta, rows = _build("model", attention, tokens, sentence_b_start, prettify_tokens, encoder_attention,
                                decoder_attention, cross_attention, encoder_tokens, decoder_tokens, include_layers,
                                include_heads, causal, model_name)
    heads = [cint(h, "include_heads", 0) for h in include_heads] if include_heads else None
    html = render(arrays, meta, view="model", theme=display_mode, show_heads=heads, json_path=json_path)
    return show_or_return(Page(html, model_frame_height(len(meta["layers"]))), html_action)
