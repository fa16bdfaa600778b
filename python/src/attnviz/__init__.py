"""attnviz: bertviz's head_view and model_view, drawn by the attnviz binary as one
self-contained page that works offline (no CDN, no widget state, no network request).

    from attnviz import head_view, model_view     # instead of: from bertviz import ...
    head_view(outputs.attentions, tokens)

attnviz.show(model, tokenizer, text) runs a transformers model and adds the queries and keys
of the neuron view. The page is drawn by `attnviz render` (found via $ATTNVIZ_BIN, PATH,
or the attnviz repository this package sits in).
"""

__version__ = "0.1.0"  # = ATTNVIZ_VERSION in include/version.h

from ._display import Page, iframe
from ._render import AttnvizError, BinaryNotFoundError, find_binary, render
from ._show import show
from ._views import head_view, model_view

__all__ = ["head_view", "model_view", "show", "Page", "iframe", "render", "find_binary", "AttnvizError",
           "BinaryNotFoundError", "__version__"]
