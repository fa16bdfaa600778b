"""Tensors in, page out: arrays to a temporary .npz + JSON sidecar, drawn by libattnviz (the package's
own engine) or the binary's `attnviz render`, HTML back.

Nothing here imports torch: a torch tensor is recognised by its type's module and
converted with its own methods (.detach().cpu().float().numpy()).
"""

import json
import operator
import os
import shutil
import subprocess
import tempfile

import numpy as np

_BUILD_HINT = (
    "attnviz needs the attnviz binary (the C program that draws the page). Build it from the "
    "attnviz repository with `make` (it writes ./attnviz), then put it on PATH or set "
    "ATTNVIZ_BIN=/path/to/attnviz"
)


class AttnvizError(RuntimeError):
    """`attnviz render` refused the input: the message is the binary's own (one line)."""


class BinaryNotFoundError(AttnvizError, FileNotFoundError):
    """No attnviz binary: not in ATTNVIZ_BIN, on PATH, next to the package or in its repository."""


_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


def cint(x, what, lo=_INT_MIN, hi=_INT_MAX):
    """x as a whole number that the C library's int holds, within [lo, hi]: a float (which int() would
    cut), a value past a C int (which ctypes would wrap: 2**32 + 1 read as 1) or one out of range is
    refused here, naming the argument (TypeError, OverflowError, ValueError)."""
    if isinstance(x, bool):
        raise TypeError(f"{what} must be a whole number, not a bool")
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be a whole number, not {type(x).__name__} ({x!r})") from None
    if not _INT_MIN <= v <= _INT_MAX:
        raise OverflowError(f"{what} = {v} does not fit a C int (-2**31 to 2**31 - 1)")
    if not lo <= v <= hi:
        raise ValueError(f"{what} = {v} is out of range ({lo} to {hi})")
    return v


def no_nul(s, what):
    """s unchanged, unless it holds a NUL character: a C string ends there, and the rest would be
    dropped without a word (ValueError)."""
    if s is not None and ("\0" in s if isinstance(s, str) else b"\0" in bytes(s)):
        raise ValueError(f"{what} holds a NUL character (\\x00): the C library would read it only up to there")
    return s


def _executable(p):
    return p is not None and os.path.isfile(p) and os.access(p, os.X_OK)


def find_binary():
    """Path of the attnviz binary: $ATTNVIZ_BIN, then PATH, then next to the package
    (attnviz/bin/attnviz), then the repository's ./attnviz when the package is used from
    a checkout (python/src/attnviz). Raises BinaryNotFoundError saying how to build it."""
    env = os.environ.get("ATTNVIZ_BIN")
    if env:
        if _executable(env):
            return env
        raise BinaryNotFoundError(f"ATTNVIZ_BIN={env} is not an executable file. {_BUILD_HINT}")
    on_path = shutil.which("attnviz")
    if _executable(on_path):
        return on_path
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "bin", "attnviz")]
    src = os.path.dirname(here)
    if os.path.basename(src) == "src":  # python/src/attnviz inside a checkout
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(src)), "attnviz"))
    for c in candidates:
        if _executable(c):
            return c
    raise BinaryNotFoundError(f"no attnviz binary found (ATTNVIZ_BIN unset, none on PATH). {_BUILD_HINT}")


def to_numpy(t):
    """A torch tensor (any device, any float dtype), a NumPy array or nested lists, as a
    float32 NumPy array."""
    mod = type(t).__module__ or ""
    if mod.startswith("torch"):
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if not t.is_floating_point() or t.dtype.itemsize < 4:  # bfloat16 has no NumPy type
            t = t.float()
        t = t.numpy()
    a = np.asarray(t)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"attention must hold numbers, not {a.dtype}")
    return a.astype(np.float32, copy=False)


def format_attention(attention, layers=None, heads=None, what="attention"):
    """bertviz's util.format_attention without torch: a tuple (one per layer) of
    [1, heads, rows, cols] tensors (or one stacked array) -> float32 [len(layers), len(heads), rows, cols]."""
    n_layers = len(attention)
    if n_layers == 0:
        raise ValueError(f"{what} holds no layers: pass the model's outputs.attentions, with output_attentions=True "
                         "(in transformers 5, outputs[-1] of a BertModel is its empty cross_attentions)")
    if layers:
        for li in layers:
            if not isinstance(li, (int, np.integer)) or not 0 <= li < n_layers:
                raise ValueError(f"include_layers: {li} is not a layer of {what} (it has {n_layers} layers: 0-{n_layers - 1})")
        picked = [attention[li] for li in layers]
    else:
        picked = list(attention)
    out = []
    for a in picked:
        a = to_numpy(a)
        if a.ndim == 4:
            if a.shape[0] != 1:
                raise ValueError(f"{what}: batch size is {a.shape[0]}; attnviz (like bertviz) draws one input: pass a batch of 1")
            a = a[0]
        elif a.ndim != 3:
            raise ValueError("The attention tensor does not have the correct number of dimensions. Make sure you set "
                             "output_attentions=True when initializing your model.")
        if heads:
            n_heads = a.shape[0]
            for h in heads:
                if not isinstance(h, (int, np.integer)) or not 0 <= h < n_heads:
                    raise ValueError(f"include_heads: {h} is not a head of {what} (it has {n_heads} heads: 0-{n_heads - 1})")
            a = a[list(heads)]
        out.append(a)
    shapes = {a.shape for a in out}
    if len(shapes) != 1:
        raise ValueError(f"{what}: layers have different shapes: {sorted(shapes)}")
    return np.stack(out)


def render(arrays, meta, layer=None, head=None, view=None, theme=None, show_heads=None, json_path=None):
    """Draws arrays with libattnviz in-process (attnviz_render), or with the binary's `attnviz
    render` when $ATTNVIZ_BIN names one or the library is not built; on arrays (name -> float array) and meta (the JSON sidecar);
    returns the page's HTML. layer: the initial layer (an original index, one of meta's
    "layers"); head: the initial head; show_heads: the heads the page shows at first; view:
    head, model, neuron or matrix; theme: light or dark. With json_path, the binary also writes
    its JSON there (the numbers the page embeds, before the page's 4-decimal quantization). The binary's one-line complaint,
    if any, is raised as AttnvizError."""
    engine = None
    if not os.environ.get("ATTNVIZ_BIN"):  # an explicit binary is used as asked; else the library first
        from . import _engine
        try:
            engine = _engine.load_library() and _engine
        except _engine.LibraryNotFoundError:
            engine = None
    binary = None if engine else find_binary()
    with tempfile.TemporaryDirectory(prefix="attnviz-") as d:
        npz = os.path.join(d, "attention.npz")
        meta_path = os.path.join(d, "attention.json")
        html_path = os.path.join(d, "attention.html")
        np.savez(npz, **{k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()})
        with open(meta_path, "w", encoding="utf-8") as f:
            json.dump(meta, f, ensure_ascii=False)
        if engine:
            try:
                engine.render_file(npz, meta_path, html_path, None if json_path is None else os.fspath(json_path),
                                   qk="queries" in arrays and json_path is not None, layer=layer, head=head, view=view,
                                   theme=theme, show_heads=show_heads)
            except AttnvizError as e:
                # the library names our temporary files; they mean nothing to the caller
                raise AttnvizError(str(e).replace(npz, "input").replace(meta_path, "meta")) from None
            with open(html_path, encoding="utf-8") as f:
                return f.read()
        cmd = [binary, "render", npz, "--meta", meta_path, "--html", html_path, "--quiet"]
        if json_path is not None:
            cmd += ["--json", os.fspath(json_path)]
            if "queries" in arrays:
                cmd += ["--qk"]
        if layer is not None:
            cmd += ["--layer", str(cint(layer, "layer", 0))]
        if head is not None:
            cmd += ["--head", str(cint(head, "head", 0))]
        if view is not None:
            cmd += ["--view", no_nul(view, "view")]
        if show_heads:
            cmd += ["--show-heads", ",".join(str(cint(h, "show_heads", 0)) for h in show_heads)]
        if theme is not None:
            cmd += ["--theme", theme]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            msg = p.stderr.decode("utf-8", "replace").strip() or f"exit status {p.returncode}"
            # the binary names our temporary files; they mean nothing to the caller
            msg = msg.replace(npz, "input").replace(meta_path, "meta")
            raise AttnvizError(msg)
        with open(html_path, encoding="utf-8") as f:
            return f.read()
