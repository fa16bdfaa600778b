"""The package as published: version, licence, dependencies, no torch at import, pip-installable."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

import attnviz

PY_DIR = os.path.join(REPO, "python")


def pyproject():
    with open(os.path.join(PY_DIR, "pyproject.toml"), encoding="utf-8") as f:
        return f.read()


def test_version_matches_the_binary():
    with open(os.path.join(REPO, "include/version.h"), encoding="utf-8") as f:
        want = re.search(r'#define ATTNVIZ_VERSION "([^"]+)"', f.read()).group(1)
    assert attnviz.__version__ == want
    assert re.search(r'^version = "([^"]+)"', pyproject(), re.M).group(1) == want


def test_licence_is_the_repositorys():
    with open(os.path.join(REPO, "LICENSE"), "rb") as a, open(os.path.join(PY_DIR, "LICENSE"), "rb") as b:
        assert a.read() == b.read()
    assert 'license = "Apache-2.0"' in pyproject() and "Apache License" in open(os.path.join(REPO, "LICENSE")).read()


def test_depends_on_numpy_only():
    deps = re.search(r"^dependencies = \[(.*?)\]", pyproject(), re.M | re.S).group(1)
    assert re.findall(r'"([^"]+)"', deps) == ["numpy"]


def test_import_does_not_import_torch():
    code = "import sys, attnviz; print(sorted(m for m in ('torch', 'transformers', 'IPython') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.path.join(PY_DIR, "src")})
    assert out.returncode == 0, out.stderr
    assert "torch" not in out.stdout and "transformers" not in out.stdout, out.stdout


def test_pip_install_builds_and_the_installed_package_draws(binary, tmp_path):
    pytest.importorskip("setuptools")
    target = tmp_path / "site"
    src = tmp_path / "src"  # a copy: setuptools builds in the tree it is given (build/, *.egg-info)
    shutil.copytree(PY_DIR, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", ".pytest_cache"))
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    dist = [d for d in os.listdir(target) if d.startswith("attnviz-") and d.endswith(".dist-info")]
    assert dist == [f"attnviz-{attnviz.__version__}.dist-info"]
    lic = [os.path.join(r, f) for r, _, fs in os.walk(target / dist[0]) for f in fs if f == "LICENSE"]
    assert lic, "the wheel carries no LICENSE"
    code = ("import numpy as np, attnviz\n"
            "a = np.full((1, 1, 2, 3, 3), 1 / 3, np.float32)\n"
            "p = attnviz.head_view(list(a), ['a', 'b', 'c'], html_action='return')\n"
            "print(attnviz.__file__, len(p.data))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(target), "ATTNVIZ_BIN": binary})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(target)) and int(out.stdout.split()[1]) > 10000
