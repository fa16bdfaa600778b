"""attnviz: attnviz's engine in Python (no torch), and bertviz's head_view and model_view drawn
as one self-contained page that works offline (no CDN, no widget state, no network request).

    r = attnviz.Model("SmolLM2-135M-Instruct.Q4_1.gguf").run("The cat sat", predict=5)
    r.attention                                   # NumPy float32 [layers, heads, n, n]
    r.head_view()

    from attnviz import head_view, model_view     # instead of: from bertviz import ...
    head_view(outputs.attentions, tokens)

attnviz.show(model, tokenizer, text) runs a transformers model and adds the queries and keys
of the neuron view. Pages are drawn by libattnviz, built with the package (or by the binary
$ATTNVIZ_BIN names, or the one on PATH when the library is not built).
"""

__version__ = "0.1.0"  # = ATTNVIZ_VERSION in src/base/version.h

from ._display import Page, iframe
from ._engine import Generation, LibraryNotFoundError, Model, Result, Token, library_path
from ._render import AttnvizError, BinaryNotFoundError, find_binary, render
from ._show import show
from ._views import head_view, model_view

__all__ = ["Model", "Result", "Generation", "Token", "head_view", "model_view", "show", "Page", "iframe", "render", "find_binary",
           "library_path", "AttnvizError", "BinaryNotFoundError", "LibraryNotFoundError", "__version__"]
