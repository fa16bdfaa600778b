import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def binary():
    b = os.environ.get("ATTNVIZ_BIN") or os.path.join(REPO, "attnviz")
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        pytest.skip(f"no attnviz binary at {b}: run make")
    os.environ["ATTNVIZ_BIN"] = b
    return b


@pytest.fixture(scope="session")
def minilm_dir():
    d = os.environ.get("ATTNVIZ_MINILM")
    if not d:
        try:
            d = subprocess.run([os.path.join(REPO, "tools/pymodel.sh"), "all-MiniLM-L6-v2"], capture_output=True,
                               text=True, timeout=600).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            d = ""
    if not d or not os.path.isfile(os.path.join(d, "config.json")):
        pytest.skip("all-MiniLM-L6-v2 not available (tools/pymodel.sh all-MiniLM-L6-v2)")
    return d


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    model = transformers.AutoModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    return model, tok


def probs(rng, L, H, r, c, causal=False):
    """[L] tuple of [1, H, r, c] float32 rows that sum to 1."""
    a = rng.random((L, 1, H, r, c)) + 0.05
    if causal:
        a = a * np.tril(np.ones((r, c)))
    a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
    return tuple(a)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
