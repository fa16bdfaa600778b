"""python/examples/notebook.ipynb executed headlessly (nbclient, a fresh ipykernel), saved, read
back: every view is plain HTML output (an iframe whose srcdoc is the page), no JavaScript or
widget outputs, and the pages hold the model's numbers. The saved outputs are also written as a
host page (ATTNVIZ_NOTEBOOK_OUT) that tests/browser/notebook_check.mjs opens in Chromium."""

import json
import os
import re

import numpy as np
import pytest

import pagedata
from conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
torch = pytest.importorskip("torch")

NOTEBOOK = os.path.join(REPO, "python/examples/notebook.ipynb")
STEP = 0.5e-4 + 1e-7

HOST = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>attnviz notebook outputs</title>
<style>body{font:14px sans-serif;margin:16px;background:#fafafa}.cell{margin:0 0 18px}
pre{background:#f0f0f0;padding:6px 8px;margin:0 0 6px;font-size:12px}</style></head>
<body><div id="nb"></div>
<script type="application/json" id="cells">%s</script>
<script>
// as a notebook front end does: each text/html output is set as innerHTML of its output area
for (const c of JSON.parse(document.getElementById('cells').textContent)) {
  const d = document.createElement('div'); d.className = 'cell';
  const p = document.createElement('pre'); p.textContent = c.source; d.appendChild(p);
  const o = document.createElement('div'); o.className = 'output'; o.innerHTML = c.html; d.appendChild(o);
  document.getElementById('nb').appendChild(d);
}
</script></body></html>
"""


def test_notebook_runs_offline_and_survives_save_and_reopen(binary, minilm, minilm_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MINILM", minilm_dir)
    monkeypatch.setenv("PYTHONPATH", os.path.join(REPO, "python/src"))
    # only ipykernel's own kernel (this interpreter), whatever kernels the machine has installed
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jd"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jc"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    saved = tmp_path / "executed.ipynb"
    nbformat.write(nb, str(saved))
    nb = nbformat.read(str(saved), as_version=4)  # reopened
    nbformat.validate(nb)

    views = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            assert o.output_type != "error", "".join(o.get("traceback", []))
            if o.output_type == "stream":
                # (tqdm's "IProgress not found" from transformers' loading bar is not ours)
                assert o.name != "stderr" or "Warning: attnviz" not in o.text, o.text
            if o.output_type in ("display_data", "execute_result"):
                assert set(o.data) <= {"text/html", "text/plain"}, set(o.data)  # no JS, no widget state
                views.append((c.source, o.data["text/html"]))
    assert len(views) == 3
    for _, frag in views:
        assert re.fullmatch(r'<iframe [^>]*sandbox="allow-scripts allow-downloads"[^>]*srcdoc="[^"]*"></iframe>', frag)
        assert "<script" not in frag  # the page's scripts are inside srcdoc, escaped
    pages = [pagedata.srcdoc(f) for _, f in views]
    metas = [pagedata.meta(p) for p in pages]
    assert [m["init_view"] for m in metas] == ["head", "model", "neuron"]
    assert metas[0]["sentence_b_start"] == 8 and metas[0]["init_layer"] == 2 and metas[0]["init_head"] == 3
    assert metas[1]["layers"] == [4, 5] and metas[1]["theme"] == "light"
    assert metas[2]["qk"] is not None and metas[2]["init_layer"] == 1 and metas[2]["init_head"] == 4

    # the numbers are the model's (computed again here, outside the kernel)
    model, tok = minilm
    enc = tok("The cat sat on the mat", "The cat lay on the rug", return_tensors="pt")
    with torch.no_grad():
        att = np.stack([a[0].numpy() for a in model(**enc, output_attentions=True).attentions])
    assert np.abs(pagedata.attention(pages[0]) - att).max() <= STEP
    assert np.abs(pagedata.attention(pages[1]) - att[4:6]).max() <= STEP

    out = os.environ.get("ATTNVIZ_NOTEBOOK_OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        cells = json.dumps([{"source": s, "html": f} for s, f in views]).replace("<", "\\u003c")
        with open(os.path.join(out, "notebook.html"), "w", encoding="utf-8") as f:
            f.write(HOST % cells)
        nbformat.write(nb, os.path.join(out, "executed.ipynb"))


ENGINE_NOTEBOOK = os.path.join(REPO, "python/examples/engine.ipynb")


def test_engine_notebook_runs_without_torch(tmp_path, monkeypatch):
    """python/examples/engine.ipynb under nbclient: attnviz.Model on the SmolLM2 GGUF in the kernel
    (libattnviz, no binary), its two views as plain HTML whose numbers are the run's, and torch never
    imported."""
    gguf = os.environ.get("ATTNVIZ_SMOLLM2_GGUF")
    if not gguf:
        import subprocess
        out = subprocess.run([os.path.join(REPO, "tools", "pymodel.sh"), "smollm2"], capture_output=True, text=True)
        gguf = os.path.join(out.stdout.strip(), "SmolLM2-135M-Instruct.Q4_1.gguf") if out.returncode == 0 else ""
    if not gguf or not os.path.isfile(gguf):
        pytest.skip("no SmolLM2 GGUF from PyPI (tools/pymodel.sh smollm2)")
    monkeypatch.setenv("ATTNVIZ_GGUF", gguf)
    monkeypatch.setenv("PYTHONPATH", os.path.join(REPO, "python/src"))
    monkeypatch.delenv("ATTNVIZ_BIN", raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jd"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jc"))
    nb = nbformat.read(ENGINE_NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    saved = tmp_path / "engine.ipynb"
    nbformat.write(nb, str(saved))
    nb = nbformat.read(str(saved), as_version=4)
    nbformat.validate(nb)
    views, text = [], []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            assert o.output_type != "error", "".join(o.get("traceback", []))
            if o.output_type == "stream":
                text.append(o.text)
            if o.output_type in ("display_data", "execute_result") and "text/html" in o.data:
                assert set(o.data) <= {"text/html", "text/plain"}, set(o.data)
                views.append(o.data["text/html"])
    out = "".join(text)
    # what the kernel printed is what this process computes (the same library, run again here)
    import attnviz
    r = attnviz.Model(gguf).run("The cat sat on the mat. The cat sat", layers=[0, 29], heads=[0, 1, 2], predict=5)
    assert f"{r.attention.shape} {r.queries.shape} {r.tokens[:4]}" in out, out
    assert str([t for t, _ in r.predictions[-1]]) in out, out
    assert "torch imported: False" in out, out
    assert len(views) == 2
    pages = [pagedata.srcdoc(f) for f in views]
    metas = [pagedata.meta(p) for p in pages]
    assert [m["init_view"] for m in metas] == ["head", "model"]
    assert metas[0]["layers"] == [0, 29] and metas[0]["heads"] == [0, 1, 2]
    # the page's numbers are the run's (the page holds codes round(a * 1e4))
    assert np.abs(pagedata.attention(pages[0]) - r.attention).max() <= STEP
