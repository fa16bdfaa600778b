"""attnviz.Model: the engine in-process (libattnviz through ctypes), checked against the CLI's JSON
of the same inputs on every family fixture of tests/unit/test_model.c and the SmolLM2 GGUF: tokens, ids,
attention, queries, keys and predictions equal (the CLI writes 9 significant digits, which hold a
float32 exactly). Runs without torch: tests/ref/python_check.sh runs this file in a fresh venv holding
numpy and pytest only, with the package installed from a wheel and no attnviz binary on PATH.
The CLI (./attnviz, or $ATTNVIZ_CLI) is only the reference here."""

import json
import os
import re
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from conftest import REPO

import attnviz

TEXT, TEXT_B = "The cat sat on the mat.", "It was tired"


def fixtures():
    with open(os.path.join(REPO, "tests", "unit", "test_model.c"), encoding="utf-8") as f:
        src = f.read()
    block = re.search(r"static const char \*FIXTURES\[\] = \{(.*?)\};", src, re.S).group(1)
    return re.findall(r'"(tests/data/[^"]+)"', block)


FIXTURES = fixtures()


@pytest.fixture(scope="session")
def cli():
    b = os.environ.get("ATTNVIZ_CLI") or os.path.join(REPO, "attnviz")
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        pytest.fail(f"no attnviz binary at {b} to compare with: run make")  # the reference, not optional
    return b


@pytest.fixture(scope="session")
def smollm2():
    p = os.environ.get("ATTNVIZ_SMOLLM2_GGUF")
    if not p:
        out = subprocess.run([os.path.join(REPO, "tools", "pymodel.sh"), "smollm2"], capture_output=True, text=True)
        p = os.path.join(out.stdout.strip(), "SmolLM2-135M-Instruct.Q4_1.gguf") if out.returncode == 0 else ""
    if not p or not os.path.isfile(p):
        pytest.skip("no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)")
    return p


def cli_json(cli, tmp_path, model, text, text_b=None, layers=None, heads=None, predict=0):
    out = tmp_path / "cli.json"
    cmd = [cli, "--model", model, "--quiet", "--qk", "--precision", "9", "--json", str(out)]
    if layers is not None:
        cmd += ["--layers", ",".join(map(str, layers))]
    if heads is not None:
        cmd += ["--heads", ",".join(map(str, heads))]
    if predict:
        cmd += ["--predict", str(predict)]
    cmd += [text] + ([text_b] if text_b is not None else [])
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def assert_equals_cli(r, d):
    """The Result and the CLI's JSON hold the same tokens and the same float32 numbers, bit for bit."""
    assert r.tokens == d["tokens"]
    assert r.ids.tolist() == d["input_ids"]
    assert r.layers == d["layers"] and r.heads == d["heads"]
    for name, arr in (("attention", r.attention), ("queries", r.queries), ("keys", r.keys)):
        want = np.array(d[name], dtype=np.float32)
        assert arr.dtype == np.float32 and arr.shape == want.shape, (name, arr.shape, want.shape)
        assert np.array_equal(arr, want), f"{name}: max |diff| {np.abs(arr - want).max()}"
    if "predictions" in d:
        want = d["predictions"]
        assert r.prediction_positions.tolist() == [p["position"] for p in want]
        assert r.prediction_ids.tolist() == [[t["id"] for t in p["top"]] for p in want]
        assert np.array_equal(r.prediction_probs, np.array([[t["prob"] for t in p["top"]] for p in want], np.float32))
        assert [[t for t, _ in p] for p in r.predictions] == [[t["token"] for t in p["top"]] for p in want]
    else:
        assert r.predictions is None


def runnable(fixture, tmp_path):
    """The fixture's folder; the decoder fixtures other than small-llama have no tokenizer (the C
    suites feed them ids): a copy with small-llama's tokenizer.json, the same 40-token vocabulary,
    as tools/same_outputs.sh runs them."""
    path = os.path.join(REPO, fixture)
    if os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(os.path.join(path, "vocab.txt")) \
            or os.path.isfile(os.path.join(path, "vocab.json")):
        return path
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["vocab_size"] == 40, fixture
    copy = tmp_path / (os.path.basename(fixture) + "-tok")
    copy.mkdir()
    for name in os.listdir(path):
        os.symlink(os.path.join(path, name), copy / name)
    os.symlink(os.path.join(REPO, "tests", "data", "small-llama", "tokenizer.json"), copy / "tokenizer.json")
    return str(copy)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[os.path.basename(f) for f in FIXTURES])
def test_fixture_equals_the_cli(cli, tmp_path, fixture):
    path = runnable(fixture, tmp_path)
    m = attnviz.Model(path)
    text_b = None if m.causal else TEXT_B  # a pair through the encoders' templates
    k = 3 if m.can_predict and m.causal else 0
    r = m.run(TEXT, text_b, predict=k)
    assert r.attention.shape == (m.n_layers, m.n_heads, len(r.tokens), len(r.tokens))
    doc = cli_json(cli, tmp_path, path, TEXT, text_b, predict=k)
    # a model with attention sinks (gpt-oss): each row's weights and its sink's share make 1
    sinks = np.array(doc["sinks"]) if "sinks" in doc else 0
    assert np.allclose(r.attention.sum(-1) + sinks, 1, atol=1e-5)
    assert_equals_cli(r, doc)
    # a selection keeps those blocks, the same numbers
    layers, heads = [m.n_layers - 1], [m.n_heads - 1, 0]
    s = m.run(TEXT, text_b, layers=layers, heads=heads)
    assert s.layers == layers and s.heads == [0, m.n_heads - 1]
    assert np.array_equal(s.attention, r.attention[np.ix_(layers, [0, m.n_heads - 1])])
    assert_equals_cli(s, cli_json(cli, tmp_path, path, TEXT, text_b, layers=layers, heads=sorted(heads)))


def test_gguf_equals_the_cli(cli, tmp_path, smollm2):
    m = attnviz.Model(smollm2)
    assert (m.n_layers, m.n_heads, m.n_kv_heads, m.causal) == (30, 9, 3, True)
    text = "The cat sat on the mat. The cat sat"
    r = m.run(text, layers=[0, 29], heads=[0, 1, 2], predict=5)
    assert r.attention.shape == (2, 3, len(r.tokens), len(r.tokens))
    assert_equals_cli(r, cli_json(cli, tmp_path, smollm2, text, layers=[0, 29], heads=[0, 1, 2], predict=5))


def test_masked_model_predicts_fill_ins(cli, tmp_path):
    path = os.path.join(REPO, "tests", "data", "small-f32")
    m = attnviz.Model(path)
    if not m.can_predict:
        with pytest.raises(attnviz.AttnvizError, match="predict"):
            m.run("the [MASK] sat", predict=2)
        return
    r = m.run("the [MASK] sat", predict=2)
    assert_equals_cli(r, cli_json(cli, tmp_path, path, "the [MASK] sat", predict=2))


def test_demo_model_page_is_the_clis(cli, tmp_path):
    demo = os.path.join(REPO, "weights", "demo")
    r = attnviz.Model(demo).run("time flies like an arrow")
    html = tmp_path / "cli.html"
    p = subprocess.run([cli, "--model", demo, "--quiet", "--html", str(html), "time flies like an arrow"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert r.page() == html.read_text(encoding="utf-8")  # the same writer over the same document
    head = r.head_view(html_action="return")
    model = r.model_view(html_action="return")
    assert isinstance(head, attnviz.Page) and isinstance(model, attnviz.Page)
    assert '"init_view":"model"' in model.data and '"init_view":"head"' in head.data
    r.write_json(tmp_path / "r.json", precision=9, qk=True)
    d = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert_equals_cli(r, d)


def test_hidden_states_and_tokenize(cli, tmp_path):
    demo = os.path.join(REPO, "weights", "demo")
    m = attnviz.Model(demo)
    r = m.run("time flies", hidden=True)
    assert r.hidden.shape == (m.n_layers + 1, len(r.tokens), m.hidden_size)
    assert m.tokenize("time flies").tolist() == r.ids.tolist()
    out = tmp_path / "h.json"
    p = subprocess.run([cli, "--model", demo, "--quiet", "--hidden", "--precision", "9", "--json", str(out), "time flies"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert np.array_equal(r.hidden, np.array(json.loads(out.read_text())["hidden_states"], np.float32))


@pytest.mark.parametrize("pack,chunk", [(256, 64), (12, 2), (0, 64)])
def test_batches_are_a_generator_of_the_same_results(pack, chunk):
    """Packed (short inputs sharing a pass, the long one alone), in chunks, or one pass each: the
    same bits as single runs, in input order."""
    m = attnviz.Model(os.path.join(REPO, "weights", "demo"))
    texts = ["time flies like an arrow", ("the cat sat", "it was tired"), "fruit flies like a banana",
             "the cat sat on the mat and looked at the dog for a very long time", "a b"]
    g = m.run_batch(iter(texts), layers=[1], pack_tokens=pack, chunk=chunk)
    assert isinstance(g, types.GeneratorType)
    got = list(g)
    assert len(got) == 5 and got[1].text_b == "it was tired"
    for t, r in zip(texts, got):
        one = m.run(*(t if isinstance(t, tuple) else (t,)), layers=[1])
        assert r.tokens == one.tokens
        for name in ("attention", "queries", "keys"):
            assert np.array_equal(getattr(r, name), getattr(one, name)), name


def test_a_batch_names_the_input_that_failed():
    m = attnviz.Model(os.path.join(REPO, "weights", "demo"))
    with pytest.raises(attnviz.AttnvizError, match="layers: 5 is out of range"):
        next(m.run_batch(["a", "b"], layers=[5]))
    with pytest.raises(TypeError):
        next(m.run_batch(["a", 3]))


def test_threads_share_a_model():
    m = attnviz.Model(os.path.join(REPO, "weights", "demo"))
    want = {t: m.run(t).attention for t in ("a b c", "the cat sat on the mat", "time flies")}
    bad = []

    def work(i):
        for t in list(want)[i % 3:] + list(want)[:i % 3]:
            if not np.array_equal(m.run(t).attention, want[t]):
                bad.append((i, t))

    th = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not bad


def test_errors_are_one_line_attnviz_errors(tmp_path):
    with pytest.raises(attnviz.AttnvizError, match="no-such-model"):
        attnviz.Model(tmp_path / "no-such-model")
    m = attnviz.Model(os.path.join(REPO, "weights", "demo"))
    with pytest.raises(attnviz.AttnvizError, match=r"layers: 2 is out of range: the model has 2 \(0-1\)"):
        m.run("x", layers=[2])
    with pytest.raises(attnviz.AttnvizError, match="predict is 0"):
        m.run("x", predict=101)
    r = m.run("x")
    with pytest.raises(attnviz.AttnvizError, match="nonexistent-dir"):
        r.write_page(tmp_path / "nonexistent-dir" / "p.html")
    with pytest.raises(attnviz.AttnvizError, match="view is"):
        r.page(view="nope")
    m.close()
    assert r.tokens[0] == "[CLS]" and r.page()  # a result outlives its model
    with pytest.raises(attnviz.AttnvizError, match="closed"):
        m.run("x")


@pytest.mark.parametrize("kwargs, error", [
    ({"layers": [2 ** 32 + 1]}, OverflowError),  # ctypes would wrap it to layer 1
    ({"heads": [2 ** 31]}, OverflowError),
    ({"max_tokens": 2 ** 32 + 3}, OverflowError),  # would run 3 tokens
    ({"predict": 2 ** 32}, OverflowError),  # would predict none
    ({"predict": -(2 ** 31) - 1}, OverflowError),
    ({"layers": [-1]}, ValueError),
    ({"max_tokens": -5}, ValueError),
    ({"layers": [1.5]}, TypeError),  # int() would cut it to 1
    ({"predict": True}, TypeError),
])
def test_ints_a_c_int_cannot_hold_or_out_of_range_are_refused_before_the_library(kwargs, error):
    m = attnviz.Model(os.path.join(REPO, "weights", "demo"))
    with pytest.raises(error, match=next(iter(kwargs))):
        m.run("the cat sat", **kwargs)
    with pytest.raises(error, match=next(iter(kwargs))):
        next(m.run_batch(["the cat sat"], **kwargs))


def test_strings_holding_a_nul_are_refused_before_the_library(tmp_path):
    demo = os.path.join(REPO, "weights", "demo")
    m = attnviz.Model(demo)
    with pytest.raises(ValueError, match="text holds a NUL"):
        m.run("the cat sat\x00 and a secret tail")  # the C string would end at the NUL
    with pytest.raises(ValueError, match="text_b holds a NUL"):
        m.run("the cat sat", "on\x00 the mat")
    with pytest.raises(ValueError, match="text holds a NUL"):
        m.tokenize("a\x00b")
    with pytest.raises(ValueError, match="text holds a NUL"):
        next(m.run_batch(["fine", "b\x00c"]))
    with pytest.raises(ValueError, match="path holds a NUL"):
        attnviz.Model(demo + "\x00/../../nonexistent")  # would open the demo
    r = m.run("the cat sat")
    with pytest.raises(ValueError, match="path holds a NUL"):
        r.write_page(str(tmp_path / "p.html") + "\x00.txt")
    with pytest.raises(OverflowError, match="i = "):
        m.token(2 ** 40)
    assert r.text == "the cat sat" and r.tokens[0] == "[CLS]"


def test_the_engine_imports_no_torch():
    code = ("import sys, attnviz, os\n"
            "r = attnviz.Model(os.path.join(sys.argv[1], 'weights', 'demo')).run('a b')\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules), r.attention.shape)\n")
    out = subprocess.run([sys.executable, "-c", code, REPO], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[] (2, 12, 4, 4)"), out.stdout


def test_bertviz_functions_need_no_binary(tmp_path):
    """head_view/model_view with no ATTNVIZ_BIN and no attnviz on PATH: drawn by the library,
    the same page the binary draws (when there is one to compare with)."""
    code = ("import numpy as np, attnviz, shutil, sys\n"
            "assert shutil.which('attnviz') is None\n"
            "a = np.full((2, 1, 2, 3, 3), 1 / 3, np.float32)\n"
            "p = attnviz.head_view(list(a), ['a', 'b', 'c'], html_action='return')\n"
            "q = attnviz.model_view(list(a), ['a', 'b', 'c'], html_action='return', display_mode='light')\n"
            "open(sys.argv[1], 'w').write(p.data); open(sys.argv[2], 'w').write(q.data)\n")
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_BIN"}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.isfile(os.path.join(d, "attnviz")))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "h.html"), str(tmp_path / "m.html")],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lib_head = (tmp_path / "h.html").read_text(encoding="utf-8")
    assert len(lib_head) > 10000 and "<!doctype html" in lib_head.lower()
    b = os.environ.get("ATTNVIZ_CLI") or os.path.join(REPO, "attnviz")
    if os.access(b, os.X_OK):  # the binary's page of the same arrays is the same page
        env["ATTNVIZ_BIN"] = b
        out = subprocess.run([sys.executable, "-c", code.replace("assert shutil.which('attnviz') is None\n", ""),
                              str(tmp_path / "h2.html"), str(tmp_path / "m2.html")],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert (tmp_path / "h2.html").read_text(encoding="utf-8") == lib_head
        assert (tmp_path / "m2.html").read_text(encoding="utf-8") == (tmp_path / "m.html").read_text(encoding="utf-8")


def readme_block(marker, lang):
    """The fenced block of lang that follows marker in docs/python.md."""
    with open(os.path.join(REPO, "docs", "python.md"), encoding="utf-8") as f:
        text = f.read()
    i = text.index(marker)
    start = text.index(f"```{lang}\n", i) + len(lang) + 4
    return text[start:text.index("```", start)]


def test_readme_python_block_runs_as_written(smollm2, monkeypatch, tmp_path):
    code = readme_block("python/tests/test_engine.py runs this block", "python")
    pages = []
    # head_view() in a notebook displays the page; here it is kept to look at
    monkeypatch.setattr(attnviz._engine, "show_or_return", lambda page, action: pages.append(page) or page)
    # where the docs run from: the repository's root, the model installed by make weights MODEL=smollm2
    (tmp_path / "weights").mkdir()
    os.symlink(smollm2, tmp_path / "weights" / os.path.basename(smollm2))
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(code, "docs/python.md", "exec"), ns)
    r = ns["r"]
    n = len(r.tokens)
    assert r.attention.shape == (2, 3, n, n) and r.queries.shape == (2, 3, n, 64)
    assert r.tokens[:2] == ["The", "Ġcat"]
    # what the block's comments show
    top = r.predictions[-1]
    assert [t for t, _ in top[:2]] == ["Ġon", "Ġalone"] and f"{top[0][1]:.2f}" == "0.74" and f"{top[1][1]:.2f}" == "0.05"
    assert len(pages) == 1 and '"init_view":"head"' in pages[0].data
    assert ns["res"].attention.shape[:2] == (1, 9)  # the batch's last: layer 0, every head


# ---------------------------------------------------------------- generation


def cli_generate(cli, tmp_path, model, text, n, *extra):
    out = tmp_path / "gen.json"
    subprocess.run([cli, "--model", model, "--quiet", "--precision", "9", "--generate", str(n), "--json", str(out),
                    *extra, text], check=True, capture_output=True)
    with open(out, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("fixture", ["tests/data/small-llama", "tests/data/small-gpt2"])
def test_generate_yields_the_clis_tokens_and_rows(cli, tmp_path, fixture):
    """Model.generate, greedy with every layer's and head's rows, against the CLI's --generate --json:
    the same ids and texts, each token's probability, and its attention row in every layer and head."""
    model = os.path.join(REPO, fixture)
    d = cli_generate(cli, tmp_path, model, "the cat sat", 10)
    m = attnviz.Model(model)
    gen = m.generate("the cat sat", max_tokens=10, top_logprobs=3, attention={"rows": True, "prompt": True})
    toks = list(gen)
    steps = d["generation"]["steps"]
    prompt = [t for t in toks if t.index < 0]
    out = [t for t in toks if t.index >= 0]
    P = d["generation"]["prompt_tokens"]
    assert [t.position for t in prompt] == list(range(P))
    assert [t.id for t in prompt] == d["input_ids"][:P]
    assert [t.id for t in out] == [s["id"] for s in steps]
    assert [t.position for t in out] == [s["position"] for s in steps]
    assert "".join(t.text for t in out) == d["generation"]["text"]
    assert gen.finish == ("eos" if d["generation"]["stop_reason"] == "eos" else "length")
    np.testing.assert_allclose([np.exp(t.logprob) for t in out], [s["prob"] for s in steps], rtol=1e-5)
    A = np.asarray(d["attention"], dtype=np.float32)  # (L, H, n, n)
    for t in prompt + out:
        assert t.rows.shape == (m.n_layers, m.n_heads, t.position + 1)
        np.testing.assert_allclose(t.rows, A[:, :, t.position, :t.position + 1], atol=1e-6)
        np.testing.assert_allclose(t.sink, t.rows[:, :, 0], atol=1e-6)
        np.testing.assert_allclose(t.top_weights[:, :, 0], t.rows.max(-1), atol=1e-6)
    for t in out:  # greedy: the chosen token is the most probable
        assert t.top[0][0] == t.id and abs(t.top[0][2] - t.logprob) < 1e-12


def test_generate_plain_stops_and_seeds():
    """No attention: none is computed; stopping the iteration early stops the model; a seed repeats."""
    m = attnviz.Model(os.path.join(REPO, "tests/data/small-llama"))
    toks = list(m.generate("the cat sat", max_tokens=8))
    assert toks and all(t.rows is None and t.entropy is None and t.layers == [] for t in toks)
    gen = m.generate("the cat sat", max_tokens=8)
    first = next(iter(gen))
    gen.close()
    assert first.id == toks[0].id and gen.finish == "stopped"
    a = [t.id for t in m.generate("the cat sat", max_tokens=12, temperature=1.0, seed=5)]
    b = [t.id for t in m.generate("the cat sat", max_tokens=12, temperature=1.0, seed=5)]
    assert a == b
    with pytest.raises(attnviz.AttnvizError, match="causal"):
        list(attnviz.Model(os.path.join(REPO, "weights/demo")).generate("the cat"))
    with pytest.raises(ValueError, match="unknown keys"):
        m.generate("x", attention={"row": True})


def test_generate_gguf_equals_the_cli(cli, tmp_path, smollm2):
    d = cli_generate(cli, tmp_path, smollm2, "The capital of France is", 8)
    toks = list(attnviz.Model(smollm2).generate("The capital of France is", max_tokens=8,
                                                attention={"layers": [0, 29], "top_k": 4}))
    assert [t.id for t in toks] == [s["id"] for s in d["generation"]["steps"]]
    A = np.asarray(d["attention"], dtype=np.float32)
    for t in toks:
        assert t.layers == [0, 29] and t.top_keys.shape == (2, 9, 4)
        ref = A[[0, 29], :, t.position, :t.position + 1]
        np.testing.assert_allclose(t.top_weights, -np.sort(-ref, axis=-1)[:, :, :4], atol=1e-6)
