"""The engine in-process: libattnviz (built with the package, include/attnviz.h) through ctypes.

    m = attnviz.Model("SmolLM2-135M-Instruct.Q4_1.gguf")        # a .gguf file or a model folder
    r = m.run("The cat sat on the mat", layers=[0, 29], heads=[0, 1], predict=5)
    r.attention                       # float32 [layers, heads, n, n]
    r.head_view()                     # the page, in a notebook

No torch: the numbers come from attnviz's own C engine (the CLI's), as NumPy arrays.
"""

import ctypes
import os
import tempfile

import numpy as np

from ._display import Page, frame_height, model_frame_height, show_or_return
from ._render import AttnvizError, cint, no_nul


class LibraryNotFoundError(AttnvizError, OSError):
    """No libattnviz: the package was not built from the repository's sources."""


_HERE = os.path.dirname(os.path.abspath(__file__))
_lib = None


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class _RunOptions(ctypes.Structure):
    _fields_ = [("layers", ctypes.POINTER(ctypes.c_int)), ("n_layers", ctypes.c_int),
                ("heads", ctypes.POINTER(ctypes.c_int)), ("n_heads", ctypes.c_int),
                ("predict", ctypes.c_int), ("max_tokens", ctypes.c_int), ("flags", ctypes.c_uint)]


class _RenderOptions(ctypes.Structure):
    _fields_ = [("meta", ctypes.c_char_p), ("html_path", ctypes.c_char_p), ("json_path", ctypes.c_char_p),
                ("qk", ctypes.c_int), ("layer", ctypes.c_int), ("head", ctypes.c_int), ("view", ctypes.c_char_p),
                ("theme", ctypes.c_char_p), ("show_heads", ctypes.POINTER(ctypes.c_int)), ("n_show_heads", ctypes.c_int)]


class _GenOptions(ctypes.Structure):
    _fields_ = [("max_tokens", ctypes.c_int), ("temperature", ctypes.c_double), ("top_p", ctypes.c_double),
                ("seed", ctypes.c_ulonglong), ("stop", ctypes.POINTER(ctypes.c_char_p)), ("n_stop", ctypes.c_int),
                ("top_logprobs", ctypes.c_int), ("flags", ctypes.c_uint), ("layers", ctypes.POINTER(ctypes.c_int)),
                ("n_layers", ctypes.c_int), ("heads", ctypes.POINTER(ctypes.c_int)), ("n_heads", ctypes.c_int),
                ("top_k", ctypes.c_int)]


class _Token(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int), ("position", ctypes.c_int), ("id", ctypes.c_int),
                ("token", ctypes.c_char_p), ("text", ctypes.c_char_p), ("logprob", ctypes.c_double),
                ("n_top", ctypes.c_int), ("top_ids", ctypes.POINTER(ctypes.c_int)),
                ("top_logprobs", ctypes.POINTER(ctypes.c_double)), ("n_layers", ctypes.c_int), ("n_heads", ctypes.c_int),
                ("layers", ctypes.POINTER(ctypes.c_int)), ("heads", ctypes.POINTER(ctypes.c_int)), ("top_k", ctypes.c_int),
                ("top_keys", ctypes.POINTER(ctypes.c_int)), ("top_weights", ctypes.POINTER(ctypes.c_float)),
                ("entropy", ctypes.POINTER(ctypes.c_float)), ("sink", ctypes.POINTER(ctypes.c_float)),
                ("distance", ctypes.POINTER(ctypes.c_float)), ("n_keys", ctypes.c_int),
                ("rows", ctypes.POINTER(ctypes.c_float))]


_TOKEN_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Token))
_GEN_ATTENTION, _GEN_ROWS, _GEN_PROMPT = 1, 2, 4
_FINISH = {0: "length", 1: "eos", 2: "stop", 3: "stopped"}

_ATTENTION, _QUERIES, _KEYS, _HIDDEN = 0, 1, 2, 3
_RUN_HIDDEN = 1
_JSON_QK = 1
_OPEN_CASED, _OPEN_UNCASED = 1, 2


def library_path():
    """Where libattnviz is: $ATTNVIZ_LIB, then the package's own (attnviz/_lib/, built by pip),
    then the repository's build/ when the package is used from a checkout (python/src/attnviz)."""
    env = os.environ.get("ATTNVIZ_LIB")
    if env:
        return env
    cands = [os.path.join(_HERE, "_lib", "libattnviz.so")]
    src = os.path.dirname(_HERE)
    if os.path.basename(src) == "src":
        cands.append(os.path.join(os.path.dirname(os.path.dirname(src)), "build", "libattnviz.so"))
    for c in cands:
        if os.path.isfile(c):
            return c
    return None


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)


def load_library():
    """libattnviz loaded and typed once; LibraryNotFoundError says how to get it."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if path is None:
        raise LibraryNotFoundError("libattnviz is not built: install the package from the attnviz repository "
                                   "(pip install ./python compiles it), or run `make` in a checkout, or set "
                                   "ATTNVIZ_LIB=/path/to/libattnviz.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryNotFoundError(f"{path}: {e}") from None
    P, I, U, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
    E = ctypes.POINTER(_Error)
    cp = ctypes.c_char_p
    _sig(lib, "attnviz_version", cp)
    _sig(lib, "attnviz_model_open", P, cp, U, E)
    _sig(lib, "attnviz_model_free", None, P)
    for n in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_size", "vocab_size", "max_tokens",
              "is_causal", "can_predict"):
        _sig(lib, "attnviz_model_" + n, I, P)
    _sig(lib, "attnviz_model_name", cp, P)
    _sig(lib, "attnviz_model_type", cp, P)
    _sig(lib, "attnviz_model_token", cp, P, I)
    _sig(lib, "attnviz_model_token_text", cp, P, I)
    _sig(lib, "attnviz_tokenize", I, P, cp, cp, ctypes.POINTER(I), S, ctypes.POINTER(S), E)
    _sig(lib, "attnviz_run", P, P, cp, cp, ctypes.POINTER(_RunOptions), E)
    _sig(lib, "attnviz_run_batch", I, P, ctypes.POINTER(cp), ctypes.POINTER(cp), S, ctypes.POINTER(_RunOptions), I,
         ctypes.POINTER(P), E)
    _sig(lib, "attnviz_result_free", None, P)
    for n in ("n_tokens", "n_truncated", "n_layers", "n_heads", "n_predictions", "predict_k"):
        _sig(lib, "attnviz_result_" + n, I, P)
    _sig(lib, "attnviz_result_layer", I, P, I)
    _sig(lib, "attnviz_result_head", I, P, I)
    _sig(lib, "attnviz_result_ids", ctypes.POINTER(I), P)
    _sig(lib, "attnviz_result_token", cp, P, I)
    _sig(lib, "attnviz_result_token_text", cp, P, I)
    _sig(lib, "attnviz_result_token_is_special", I, P, I)
    _sig(lib, "attnviz_result_shape", I, P, I, ctypes.POINTER(S))
    _sig(lib, "attnviz_result_copy", I, P, I, ctypes.POINTER(ctypes.c_float), S, E)
    _sig(lib, "attnviz_result_prediction_positions", ctypes.POINTER(I), P)
    _sig(lib, "attnviz_result_prediction_ids", ctypes.POINTER(I), P)
    _sig(lib, "attnviz_result_prediction_probs", ctypes.POINTER(ctypes.c_float), P)
    _sig(lib, "attnviz_result_write_json", I, P, cp, I, U, E)
    _sig(lib, "attnviz_result_write_page", I, P, cp, cp, E)
    _sig(lib, "attnviz_render", I, cp, ctypes.POINTER(_RenderOptions), E)
    _sig(lib, "attnviz_generate", I, P, cp, ctypes.POINTER(_GenOptions), _TOKEN_CB, P, ctypes.POINTER(I), E)
    _lib = lib
    return lib


def _b(s, what="a string"):
    """A str or path as the C library's bytes; a NUL in it is refused (it would end the C string there)."""
    if s is None:
        return None
    return no_nul(os.fsencode(s) if isinstance(s, os.PathLike) else s.encode("utf-8"), what)


def _s(b):
    return None if b is None else b.decode("utf-8", "replace")


def _raise(err):
    raise AttnvizError(err.message.decode("utf-8", "replace"))


def _ints(xs, what):
    if xs is None:
        return None, 0
    if isinstance(xs, (int, np.integer)):
        xs = [xs]
    xs = [cint(x, what, 0) for x in xs]
    if not xs:
        raise ValueError(f"{what}: an empty list (None keeps them all)")
    return (ctypes.c_int * len(xs))(*xs), len(xs)


def render_file(npz, meta=None, html_path=None, json_path=None, qk=False, layer=None, head=None, view=None,
                theme=None, show_heads=None):
    """`attnviz render` in-process (attnviz_render): draws an .npz/.safetensors of attention."""
    lib = load_library()
    sh, n_sh = _ints(show_heads, "show_heads") if show_heads else (None, 0)
    o = _RenderOptions(_b(meta, "meta"), _b(html_path, "html_path"), _b(json_path, "json_path"), int(bool(qk)),
                       -1 if layer is None else cint(layer, "layer", 0), -1 if head is None else cint(head, "head", 0),
                       _b(view, "view"), _b(theme, "theme"), sh, n_sh)
    err = _Error()
    if lib.attnviz_render(_b(os.fspath(npz), "the input"), ctypes.byref(o), ctypes.byref(err)) != 0:
        _raise(err)


class Model:
    """A model loaded once: a Hugging Face folder or a llama.cpp .gguf file (or a folder holding
    one). cased: True/False overrides a WordPiece vocabulary's lower-casing (None: the model's).
    A Model may be used from several threads (its runs take turns)."""

    def __init__(self, path, cased=None):
        self._lib = load_library()
        self._h = None
        flags = 0 if cased is None else _OPEN_CASED if cased else _OPEN_UNCASED
        err = _Error()
        h = self._lib.attnviz_model_open(_b(os.fspath(path), "path"), flags, ctypes.byref(err))
        if not h:
            _raise(err)
        self._h = h
        self.path = os.fspath(path)
        lib = self._lib
        self.n_layers = lib.attnviz_model_n_layers(h)
        self.n_heads = lib.attnviz_model_n_heads(h)
        self.n_kv_heads = lib.attnviz_model_n_kv_heads(h)
        self.head_dim = lib.attnviz_model_head_dim(h)
        self.hidden_size = lib.attnviz_model_hidden_size(h)
        self.vocab_size = lib.attnviz_model_vocab_size(h)
        self.max_tokens = lib.attnviz_model_max_tokens(h)
        self.causal = bool(lib.attnviz_model_is_causal(h))
        self.can_predict = bool(lib.attnviz_model_can_predict(h))
        self.name = _s(lib.attnviz_model_name(h))
        self.model_type = _s(lib.attnviz_model_type(h))

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.attnviz_model_free(self._h)
            self._h = None

    def close(self):
        """Releases the model now (results still held keep what they need)."""
        self.__del__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<attnviz.Model {self.name}: {self.model_type}, {self.n_layers} layers x {self.n_heads} heads"
                f"{', causal' if self.causal else ''}>")

    def _handle(self):
        if not self._h:
            raise AttnvizError("the model was closed")
        return self._h

    def token(self, i):
        """The vocabulary's spelling of id i (None when there is none)."""
        return _s(self._lib.attnviz_model_token(self._handle(), cint(i, "i")))

    def tokenize(self, text, text_b=None):
        """Token ids as a run would make them (specials included), int32."""
        n = ctypes.c_size_t()
        err = _Error()
        h = self._handle()
        a, b = _b(text, "text"), _b(text_b, "text_b")
        if self._lib.attnviz_tokenize(h, a, b, None, 0, ctypes.byref(n), ctypes.byref(err)):
            _raise(err)
        ids = np.zeros(n.value, dtype=np.int32)
        if self._lib.attnviz_tokenize(h, a, b, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
                                      n.value, ctypes.byref(n), ctypes.byref(err)):
            _raise(err)
        return ids

    def run(self, text, text_b=None, *, layers=None, heads=None, predict=0, max_tokens=0, hidden=False):
        """Runs the model on text (and text_b): a Result with NumPy arrays. layers, heads: the ones
        to keep (None: all); predict: the top-K next tokens (causal) or mask fill-ins (0: none);
        max_tokens: truncate (0: the model's limit); hidden: keep the hidden states too."""
        if not isinstance(text, str) or (text_b is not None and not isinstance(text_b, str)):
            raise TypeError("text and text_b are str")
        la, nl = _ints(layers, "layers")
        he, nh = _ints(heads, "heads")
        o = _RunOptions(la, nl, he, nh, cint(predict, "predict", 0), cint(max_tokens, "max_tokens", 0),
                        _RUN_HIDDEN if hidden else 0)
        err = _Error()
        r = self._lib.attnviz_run(self._handle(), _b(text, "text"), _b(text_b, "text_b"), ctypes.byref(o),
                                  ctypes.byref(err))
        if not r:
            _raise(err)
        return Result(self, r, text, text_b)

    def run_batch(self, texts, *, layers=None, heads=None, predict=0, max_tokens=0, hidden=False, pack_tokens=256,
                  chunk=64):
        """A generator of Results, one per input (a str, or a (text, text_b) pair), in order; the
        options are run()'s. Inputs are taken chunk at a time (texts may be any iterable, even an
        endless one) and run with the CLI's --batch packing: short consecutive ones share a forward
        pass of up to pack_tokens tokens (0: one pass each), each result the same numbers as its own
        run. With predict, each input runs alone."""
        la, nl = _ints(layers, "layers")
        he, nh = _ints(heads, "heads")
        o = _RunOptions(la, nl, he, nh, cint(predict, "predict", 0), cint(max_tokens, "max_tokens", 0),
                        _RUN_HIDDEN if hidden else 0)
        pack_tokens, chunk = cint(pack_tokens, "pack_tokens", 0), cint(chunk, "chunk", 1)
        it = iter(texts)
        while True:
            group = []
            for t in it:
                a, b = (t[0], t[1] if len(t) > 1 else None) if isinstance(t, (tuple, list)) else (t, None)
                if not isinstance(a, str) or (b is not None and not isinstance(b, str)):
                    raise TypeError("each input is a str or a (str, str) pair")
                group.append((a, b))
                if len(group) == chunk:
                    break
            if not group:
                return
            n = len(group)
            ta = (ctypes.c_char_p * n)(*[_b(a, "text") for a, _ in group])
            tb = (ctypes.c_char_p * n)(*[_b(b, "text_b") for _, b in group])
            out = (ctypes.c_void_p * n)()
            err = _Error()
            if self._lib.attnviz_run_batch(self._handle(), ta, tb, n, ctypes.byref(o), pack_tokens, out,
                                           ctypes.byref(err)):
                _raise(err)
            results = [Result(self, out[i], a, b) for i, (a, b) in enumerate(group)]
            del out
            yield from results


    def generate(self, prompt, *, max_tokens=16, temperature=0.0, top_p=1.0, seed=0, stop=None, top_logprobs=0,
                 attention=None):
        """Continues prompt on a causal model, yielding a Token as each one comes (a Generation: iterate
        it; its finish says why it ended: "length", "eos", "stop" or "stopped" when you stop early).
        temperature 0: greedy; top_p: the nucleus; seed: the same seed, the same tokens; stop: a string
        or up to 4 (the text ends before the first); top_logprobs: the most probable tokens'
        log-probabilities at each step (0-20). attention: None (nothing captured: plain generation's
        cost), True, or a dict of layers, heads (None: all), top_k (8), rows (False: whole rows too)
        and prompt (False: the prompt's tokens first, as Tokens whose index is -1)."""
        if not isinstance(prompt, str):
            raise TypeError("prompt is a str")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if not all(isinstance(x, str) for x in stops):
            raise TypeError("stop is a str or a list of str")
        a = {} if attention is True else dict(attention) if attention else None
        if a is not None and set(a) - {"layers", "heads", "top_k", "rows", "prompt"}:
            raise ValueError(f"attention: unknown keys {sorted(set(a) - {'layers', 'heads', 'top_k', 'rows', 'prompt'})} "
                             "(layers, heads, top_k, rows, prompt)")
        flags = 0
        la, nl = he, nh = None, 0
        if a is not None:
            flags = _GEN_ATTENTION | (_GEN_ROWS if a.get("rows") else 0) | (_GEN_PROMPT if a.get("prompt") else 0)
            la, nl = _ints(a.get("layers"), "layers")
            he, nh = _ints(a.get("heads"), "heads")
        st = (ctypes.c_char_p * max(1, len(stops)))(*[_b(x) for x in stops])
        o = _GenOptions(int(max_tokens), float(temperature), float(top_p), int(seed) & (2 ** 64 - 1),
                        st if stops else None, len(stops), int(top_logprobs), flags, la, nl, he, nh,
                        int(a.get("top_k", 8)) if a is not None else 0)
        return Generation(self, prompt, o, (st, la, he))


class Token:
    """One token of a generation. index: 0, 1, ... (-1 for a prompt token); position in the sequence;
    id; token (the vocabulary's spelling); text (what it completes: maybe "" while a character or a
    possible stop string waits); logprob (under the model: the softmax of its scores); top: the
    most probable tokens at that step as (id, token, logprob). With attention: layers, heads (the
    kept ones), and per kept layer and head its row's top_keys int32 [layers, heads, top_k],
    top_weights, entropy, sink (key 0's weight), distance (mean distance) float32 [layers, heads],
    rows float32 [layers, heads, position + 1] (None unless asked)."""

    def __init__(self, model, t):
        self.index, self.position, self.id = t.index, t.position, t.id
        self.token, self.text, self.logprob = _s(t.token), _s(t.text), t.logprob
        self.top = [(t.top_ids[i], model.token(t.top_ids[i]), t.top_logprobs[i]) for i in range(t.n_top)]
        L, H = t.n_layers, t.n_heads
        self.layers = [t.layers[i] for i in range(L)]
        self.heads = [t.heads[i] for i in range(H)]
        self.top_keys = self.top_weights = self.entropy = self.sink = self.distance = self.rows = None
        if L:
            def arr(p, shape, dtype):
                n = int(np.prod(shape))
                return np.ctypeslib.as_array(p, shape=(n,)).astype(dtype).reshape(shape) if n else np.zeros(shape, dtype)
            if t.top_k:
                self.top_keys = arr(t.top_keys, (L, H, t.top_k), np.int32)
                self.top_weights = arr(t.top_weights, (L, H, t.top_k), np.float32)
            self.entropy = arr(t.entropy, (L, H), np.float32)
            self.sink = arr(t.sink, (L, H), np.float32)
            self.distance = arr(t.distance, (L, H), np.float32)
            if t.rows:
                self.rows = arr(t.rows, (L, H, t.n_keys), np.float32)

    def __repr__(self):
        return f"<attnviz.Token {self.index} at {self.position}: {self.token!r} logprob {self.logprob:.4f}>"


class Generation:
    """The tokens of Model.generate as they come: iterate it (each a Token); finish is set once it has
    ended. The model generates on a thread of its own one token ahead of you; closing the iteration
    early (break, close()) stops it after the token it is on."""

    def __init__(self, model, prompt, opts, keep):
        import queue
        import threading
        self.model, self.finish = model, None
        self._q = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._keep = (opts, keep)  # the option arrays live as long as the call
        self._error = None
        self._done = object()

        def cb(ctx, tp):
            try:
                tok = Token(model, tp.contents)
                while not self._stop.is_set():
                    try:
                        self._q.put(tok, timeout=0.05)
                        return 0
                    except queue.Full:
                        pass
                return 1
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                self._error = e
                return 1

        self._cb = _TOKEN_CB(cb)

        def run():
            err, fin = _Error(), ctypes.c_int(0)
            rc = model._lib.attnviz_generate(model._handle(), _b(prompt), ctypes.byref(opts), self._cb, None,
                                             ctypes.byref(fin), ctypes.byref(err))
            if rc and self._error is None:
                self._error = AttnvizError(err.message.decode("utf-8", "replace"))
            self.finish = _FINISH.get(fin.value) if not rc else None
            while True:
                try:
                    self._q.put(self._done, timeout=0.05)
                    return
                except queue.Full:
                    if self._stop.is_set():
                        return

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def __iter__(self):
        try:
            while True:
                item = self._q.get()
                if item is self._done:
                    break
                yield item
        finally:
            self.close()
        if self._error is not None:
            raise self._error

    def close(self):
        """Stops the generation (after the token it is on) and waits for it."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._q.get(timeout=0.05)
            except Exception:  # noqa: BLE001 - empty: look again
                pass
        self._thread.join()
        if self.finish is None and self._error is None:
            self.finish = "stopped"


class Result:
    """One run's numbers as NumPy arrays (copies: they outlive the result):
    attention float32 [layers, heads, n, n]; queries, keys float32 [layers, heads, n, head_dim];
    hidden float32 [model layers + 1, n, hidden_size] or None; tokens (spellings), token_texts
    (as read), ids int32 [n]; layers, heads: the kept ones' indices in the model; predictions:
    None or, per predicted position, a list of (token, probability), most probable first, with
    prediction_ids int32 [positions, K], prediction_probs float32 [positions, K] and
    prediction_positions int32 [positions]."""

    def __init__(self, model, handle, text, text_b):
        self._lib = model._lib
        self._h = handle
        self.model = model
        self.text, self.text_b = text, text_b
        lib, h = self._lib, handle
        n = lib.attnviz_result_n_tokens(h)
        self.n_truncated = lib.attnviz_result_n_truncated(h)
        self.tokens = [_s(lib.attnviz_result_token(h, i)) for i in range(n)]
        self.token_texts = [_s(lib.attnviz_result_token_text(h, i)) for i in range(n)]
        self.special = np.array([lib.attnviz_result_token_is_special(h, i) for i in range(n)], dtype=bool)
        self.ids = np.ctypeslib.as_array(lib.attnviz_result_ids(h), shape=(n,)).astype(np.int32) if n else \
            np.zeros(0, np.int32)
        self.layers = [lib.attnviz_result_layer(h, i) for i in range(lib.attnviz_result_n_layers(h))]
        self.heads = [lib.attnviz_result_head(h, i) for i in range(lib.attnviz_result_n_heads(h))]
        self.attention = self._tensor(_ATTENTION)
        self.queries = self._tensor(_QUERIES)
        self.keys = self._tensor(_KEYS)
        self.hidden = self._tensor(_HIDDEN)
        np_, k = lib.attnviz_result_n_predictions(h), lib.attnviz_result_predict_k(h)
        if k:
            self.prediction_positions = np.ctypeslib.as_array(lib.attnviz_result_prediction_positions(h),
                                                              shape=(np_,)).astype(np.int32) if np_ else np.zeros(0, np.int32)
            self.prediction_ids = np.ctypeslib.as_array(lib.attnviz_result_prediction_ids(h),
                                                        shape=(np_, k)).astype(np.int32) if np_ else np.zeros((0, k), np.int32)
            self.prediction_probs = np.ctypeslib.as_array(lib.attnviz_result_prediction_probs(h),
                                                          shape=(np_, k)).astype(np.float32) if np_ else np.zeros((0, k), np.float32)
            self.predictions = [[(model.token(i), float(p)) for i, p in zip(ids, ps)]
                                for ids, ps in zip(self.prediction_ids, self.prediction_probs)]
        else:
            self.prediction_positions = self.prediction_ids = self.prediction_probs = self.predictions = None

    def _tensor(self, which):
        shape = (ctypes.c_size_t * 4)()
        nd = self._lib.attnviz_result_shape(self._h, which, shape)
        if nd == 0:
            return None
        dims = tuple(shape[i] for i in range(nd))
        out = np.empty(dims, dtype=np.float32)
        err = _Error()
        if self._lib.attnviz_result_copy(self._h, which, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size,
                                         ctypes.byref(err)):
            _raise(err)
        return out

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.attnviz_result_free(self._h)
            self._h = None

    def __repr__(self):
        return (f"<attnviz.Result: {len(self.tokens)} tokens, attention {tuple(self.attention.shape)}"
                f"{', predictions' if self.predictions is not None else ''}>")

    def write_json(self, path, precision=6, qk=False):
        """attnviz's JSON of this result (the CLI's --json), floats to precision digits."""
        err = _Error()
        if self._lib.attnviz_result_write_json(self._h, _b(os.fspath(path), "path"), cint(precision, "precision"),
                                               _JSON_QK if qk else 0,
                                               ctypes.byref(err)):
            _raise(err)

    def write_page(self, path, view=None):
        """The self-contained HTML page (the CLI's --html), opening on view."""
        err = _Error()
        if self._lib.attnviz_result_write_page(self._h, _b(os.fspath(path), "path"), _b(view, "view"), ctypes.byref(err)):
            _raise(err)

    def page(self, view=None):
        """The page's HTML as a str."""
        with tempfile.TemporaryDirectory(prefix="attnviz-") as d:
            p = os.path.join(d, "page.html")
            self.write_page(p, view)
            with open(p, encoding="utf-8") as f:
                return f.read()

    def head_view(self, html_action="view"):
        """The page on its head view, in the notebook (html_action='return': an attnviz.Page)."""
        return show_or_return(Page(self.page("head"), frame_height(len(self.tokens))), html_action)

    def model_view(self, html_action="view"):
        """The page on its model view (every kept layer x head as a thumbnail)."""
        return show_or_return(Page(self.page("model"), model_frame_height(len(self.layers))), html_action)
