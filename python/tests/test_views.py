"""head_view / model_view on synthetic tensors: the page's numbers are the tensors', arguments map
to the page's state, and bad input is refused with a clear message."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import pagedata
from conftest import probs, read_json

import attnviz
from attnviz import head_view, model_view

TOKS5 = ["[CLS]", "the", "cat", "sat", "[SEP]"]


def test_numpy_arrays_page_and_json_hold_the_tensors(binary, tmp_path):
    rng = np.random.default_rng(1)
    att = probs(rng, 3, 4, 5, 5)
    page = head_view(att, TOKS5, html_action="return", json_path=tmp_path / "a.json")
    want = np.stack([a[0] for a in att])
    got = pagedata.attention(page.data)
    assert got.shape == want.shape == (3, 4, 5, 5)
    # the page stores round(a * 1e4): within half a step
    assert np.abs(got - want).max() <= 0.5e-4 + 1e-7
    j = read_json(tmp_path / "a.json")
    assert np.abs(np.array(j["attention"]) - want).max() <= 1e-6
    assert j["tokens"] == TOKS5 and j["layers"] == [0, 1, 2] and j["heads"] == [0, 1, 2, 3]


def test_torch_tensors_give_the_same_page_as_numpy(binary):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    att = probs(rng, 2, 3, 5, 5)
    a = pagedata.attention(head_view(att, TOKS5, html_action="return").data)
    as_torch = tuple(torch.from_numpy(x) for x in att)
    b = pagedata.attention(head_view(as_torch, TOKS5, html_action="return").data)
    assert np.array_equal(a, b)
    # bfloat16 and float64 tensors convert too (bf16 has no NumPy type)
    c = pagedata.attention(head_view(tuple(x.double() for x in as_torch), TOKS5, html_action="return").data)
    assert np.array_equal(a, c)
    d = pagedata.attention(head_view(tuple(x.to(torch.bfloat16) for x in as_torch), TOKS5, html_action="return",
                                     json_path=None).data)
    assert np.abs(d - a).max() < 1e-2  # bf16 keeps ~3 digits


def test_include_layers_and_layer_map_to_the_original_layers(binary, tmp_path):
    rng = np.random.default_rng(3)
    att = probs(rng, 4, 2, 5, 5)
    page = head_view(att, TOKS5, include_layers=[3, 1], layer=3, heads=[1], html_action="return",
                     json_path=tmp_path / "l.json")
    md = pagedata.meta(page.data)
    assert md["layers"] == [1, 3]  # in order, under their own indices
    assert md["init_layer"] == 3 and md["init_head"] == 1
    got = pagedata.attention(page.data)
    assert np.abs(got[0] - att[1][0]).max() <= 0.5e-4 + 1e-7
    assert np.abs(got[1] - att[3][0]).max() <= 0.5e-4 + 1e-7
    assert np.abs(got[1] - att[2][0]).max() > 1e-2  # the test can tell layers apart
    assert read_json(tmp_path / "l.json")["layers"] == [1, 3]
    with pytest.raises(ValueError, match=r"Layer 2 is not in include_layers: \[1, 3\]"):
        head_view(att, TOKS5, include_layers=[1, 3], layer=2, html_action="return")
    with pytest.raises(ValueError, match="include_layers: 7 is not a layer"):
        head_view(att, TOKS5, include_layers=[7], html_action="return")


def test_heads_and_include_heads_select_the_shown_heads(binary):
    rng = np.random.default_rng(4)
    att = probs(rng, 2, 6, 5, 5)
    md = pagedata.meta(head_view(att, TOKS5, heads=[4, 2], html_action="return").data)
    assert md["init_head"] == 4 and sorted(md["init_heads"]) == [2, 4]
    page = model_view(att, TOKS5, include_heads=[5, 0], display_mode="light", html_action="return")
    md = pagedata.meta(page.data)
    assert sorted(md["init_heads"]) == [0, 5] and md["heads"] == list(range(6))  # every head kept, under its own index
    assert md["init_view"] == "model" and md["theme"] == "light"
    got = pagedata.attention(page.data)
    assert np.abs(got[:, 5] - np.stack(att)[:, 0, 5]).max() <= 0.5e-4 + 1e-7
    with pytest.raises(ValueError, match="include_heads: 6 is not a head"):
        model_view(att, TOKS5, include_heads=[6], html_action="return")


def test_model_view_defaults_to_dark_like_bertviz(binary):
    rng = np.random.default_rng(5)
    md = pagedata.meta(model_view(probs(rng, 1, 2, 5, 5), TOKS5, html_action="return").data)
    assert md["theme"] == "dark" and md["init_view"] == "model"


def test_sentence_pair_and_tokens(binary):
    rng = np.random.default_rng(6)
    toks = ["[CLS]", "the", "cat", "[SEP]", "it", "sat", "[SEP]"]
    md = pagedata.meta(head_view(probs(rng, 1, 2, 7, 7), toks, sentence_b_start=4, html_action="return").data)
    assert md["sentence_b_start"] == 4 and md["tokens"] == toks
    assert md["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]


def test_prettify_tokens(binary):
    rng = np.random.default_rng(7)
    toks = ["Ġthe", "Ġcat", "Ġsat", "Ċ", "."]
    att = probs(rng, 1, 1, 5, 5, causal=True)
    md = pagedata.meta(head_view(att, toks, html_action="return").data)
    assert md["tokens"] == toks and md["display_tokens"] == [" the", " cat", " sat", "\n", "."]
    md = pagedata.meta(head_view(att, toks, prettify_tokens=False, html_action="return").data)
    assert md["display_tokens"] == toks
    md = pagedata.meta(head_view(att, ["a</w>", "b", "c", "d", "e"], html_action="return").data)
    assert md["display_tokens"][0] == "a"


def test_causal_is_detected_from_the_mask(binary):
    rng = np.random.default_rng(8)
    assert pagedata.meta(head_view(probs(rng, 1, 2, 5, 5, causal=True), TOKS5, html_action="return").data)["config"]["causal"]
    assert not pagedata.meta(head_view(probs(rng, 1, 2, 5, 5), TOKS5, html_action="return").data)["config"]["causal"]


def test_bertviz_argument_errors():
    att = probs(np.random.default_rng(9), 1, 2, 5, 5)
    with pytest.raises(ValueError, match="'tokens' is required"):
        head_view(att, html_action="return")
    with pytest.raises(ValueError, match="You must specify at least one attention argument"):
        head_view(html_action="return")
    with pytest.raises(ValueError, match="Attention has 5 positions, while number of tokens is 4"):
        head_view(att, TOKS5[:4], html_action="return")
    with pytest.raises(ValueError, match="may not specify any encoder-decoder arguments"):
        head_view(att, TOKS5, encoder_tokens=TOKS5, html_action="return")
    with pytest.raises(ValueError, match="'html_action' parameter must be 'view' or 'return"):
        head_view(att, TOKS5, html_action="save")
    with pytest.raises(ValueError, match="correct number of dimensions"):
        head_view([att[0][0, 0]], TOKS5, html_action="return")
    with pytest.raises(ValueError, match="batch size is 2"):
        head_view([np.concatenate([att[0], att[0]])], TOKS5, html_action="return")
    with pytest.raises(ValueError, match="'encoder_tokens' required"):
        head_view(encoder_attention=att, html_action="return")


def test_bad_values_raise_the_binarys_message(binary):
    att = np.stack(probs(np.random.default_rng(10), 1, 2, 5, 5))
    nan = att.copy()
    nan[0, 0, 1, 1, 2] = np.nan
    with pytest.raises(attnviz.AttnvizError, match=r"attention, layer 0, head 1, row 1, column 2 is nan: not a probability"):
        head_view(list(nan), TOKS5, html_action="return")
    bad = att * 1.5
    with pytest.raises(attnviz.AttnvizError, match=r"row 0 sums to 1\.5000, not 1") as e:
        head_view(list(bad), TOKS5, html_action="return")
    assert "/tmp" not in str(e.value)  # our temporary files are not the caller's business
    with pytest.raises(attnviz.AttnvizError, match="attends to later token"):
        head_view(list(att), TOKS5, causal=True, html_action="return")
    # a layer that is not a square matrix per head: the binary's shape message
    with pytest.raises(attnviz.AttnvizError, match=r"'attention' is 5 x 4 per head; the tokens say 5 x 5|x 4"):
        from attnviz._render import render
        render({"attention": att[:, 0, :, :, :4] / att[:, 0, :, :, :4].sum(-1, keepdims=True)},
               {"tokens": TOKS5, "layers": [0]})


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_BIN", str(tmp_path / "nowhere" / "attnviz"))
    att = probs(np.random.default_rng(11), 1, 1, 5, 5)
    with pytest.raises(attnviz.BinaryNotFoundError, match=r"ATTNVIZ_BIN=.*nowhere/attnviz is not an executable.*make"):
        head_view(att, TOKS5, html_action="return")
    # nothing set, nothing on PATH, package outside a checkout: says how to build it
    code = ("import attnviz, numpy as np\n"
            "try:\n    attnviz.find_binary()\nexcept attnviz.BinaryNotFoundError as e:\n    print('ERR', e)\n")
    pkg = tmp_path / "site"
    import shutil
    shutil.copytree(os.path.dirname(attnviz.__file__), pkg / "attnviz")
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_BIN"}
    env["PATH"] = str(tmp_path)  # no attnviz there
    env["PYTHONPATH"] = str(pkg)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.startswith("ERR no attnviz binary found"), out.stdout + out.stderr
    assert "`make`" in out.stdout and "ATTNVIZ_BIN" in out.stdout


def test_binary_found_on_path(binary, tmp_path, monkeypatch):
    d = tmp_path / "bin"
    d.mkdir()
    os.symlink(binary, d / "attnviz")
    monkeypatch.delenv("ATTNVIZ_BIN")
    monkeypatch.setenv("PATH", str(d) + os.pathsep + os.environ.get("PATH", ""))
    assert attnviz.find_binary() == str(d / "attnviz")


def test_view_displays_an_isolated_offline_iframe(binary):
    pytest.importorskip("IPython")
    from IPython.core.formatters import DisplayFormatter
    att = probs(np.random.default_rng(12), 2, 2, 5, 5)
    page = head_view(att, TOKS5, html_action="return")
    fmt, _ = DisplayFormatter().format(page)
    frag = fmt["text/html"]
    assert frag.startswith("<iframe ") and frag.endswith("</iframe>")
    assert re.search(r'sandbox="allow-scripts allow-downloads"', frag)  # no allow-same-origin: isolated
    assert "allow-same-origin" not in frag
    assert pagedata.srcdoc(frag) == page.data
    assert not re.search(r'<(script|link|img|iframe)[^>]*\s(src|href)=', page.data)  # nothing loaded from anywhere
    assert 'http-equiv="Content-Security-Policy"' in page.data and "default-src 'none'" in page.data
    # html_action="view" hands the same object to IPython's display
    shown = []
    import IPython.display
    orig = IPython.display.display
    IPython.display.display = lambda *a, **k: shown.extend(a)
    try:
        assert head_view(att, TOKS5) is None
    finally:
        IPython.display.display = orig
    assert len(shown) == 1 and isinstance(shown[0], attnviz.Page)
    assert np.array_equal(pagedata.attention(shown[0].data), pagedata.attention(page.data))


def test_saved_page_is_the_whole_page(binary, tmp_path):
    att = probs(np.random.default_rng(13), 1, 2, 5, 5)
    page = head_view(att, TOKS5, html_action="return")
    page.save(tmp_path / "p.html")
    text = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert text == page.data and text.lstrip().lower().startswith("<!doctype html")
