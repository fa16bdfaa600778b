"""The package as published: version, licence, dependencies, no torch at import, pip-installable
(compiling libattnviz), and the one-line error when the build's -dev packages are missing."""

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
    with open(os.path.join(REPO, "src/base/version.h"), encoding="utf-8") as f:
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
    # the copy is outside the repository: ATTNVIZ_SRC says where libattnviz's sources are
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True, env={**os.environ, "ATTNVIZ_SRC": REPO})
    assert p.returncode == 0, p.stdout + p.stderr
    dist = [d for d in os.listdir(target) if d.startswith("attnviz-") and d.endswith(".dist-info")]
    assert dist == [f"attnviz-{attnviz.__version__}.dist-info"]
    lic = [os.path.join(r, f) for r, _, fs in os.walk(target / dist[0]) for f in fs if f == "LICENSE"]
    assert lic, "the wheel carries no LICENSE"
    assert os.path.isfile(target / "attnviz" / "_lib" / "libattnviz.so"), "the package carries no libattnviz"
    code = ("import numpy as np, attnviz, sys\n"
            "a = np.full((1, 1, 2, 3, 3), 1 / 3, np.float32)\n"
            "p = attnviz.head_view(list(a), ['a', 'b', 'c'], html_action='return')\n"
            "r = attnviz.Model(sys.argv[1]).run('time flies')\n"
            "print(attnviz.__file__, len(p.data), attnviz.library_path(), r.attention.shape)\n")
    for env in ({"ATTNVIZ_BIN": binary}, {}):  # through the binary when named, else the package's library
        base = {k: v for k, v in os.environ.items() if k not in ("ATTNVIZ_BIN", "ATTNVIZ_LIB")}
        out = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "weights", "demo")], capture_output=True,
                             text=True, cwd=tmp_path, env={**base, "PYTHONPATH": str(target), **env})
        assert out.returncode == 0, out.stderr
        f = out.stdout.split()
        assert f[0].startswith(str(target)) and int(f[1]) > 10000, out.stdout
        assert f[2] == str(target / "attnviz" / "_lib" / "libattnviz.so") and out.stdout.rstrip().endswith("(2, 12, 4, 4)")


def test_missing_dev_packages_are_named_in_one_line(tmp_path):
    """Without pkg-config's libraries the build stops before compiling, naming the Debian packages."""
    fake = tmp_path / "bin"
    fake.mkdir()
    # a pkg-config that knows every library but Oniguruma and cJSON
    (fake / "pkg-config").write_text('#!/bin/sh\ncase "$*" in *oniguruma*|*libcjson*) exit 1;; esac\nexit 0\n')
    (fake / "pkg-config").chmod(0o755)
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "b")],
                       cwd=PY_DIR, capture_output=True, text=True,
                       env={**os.environ, "PATH": str(fake) + os.pathsep + os.environ["PATH"]})
    assert p.returncode != 0
    line = [ln for ln in p.stderr.splitlines() if "attnviz:" in ln]
    assert line == ["attnviz: building libattnviz needs these Debian packages: libcjson-dev libonig-dev "
                    "(apt-get install libcjson-dev libonig-dev)"], p.stderr
    assert not (tmp_path / "b" / "attnviz" / "_lib").exists()
