"""attnviz.show: run a transformers model and draw its attention (placeholder, filled in below)."""


def show(model, tokenizer, text, text_b=None, **kw):
    raise NotImplementedError
