"""Builds libattnviz from the attnviz repository's C sources into the package (attnviz/_lib/),
where attnviz._engine loads it with ctypes: `pip install ./python` and `python -m build` both
compile the engine; the package needs no attnviz binary and no torch.

The sources are found in $ATTNVIZ_SRC, else csrc/ beside this file (an sdist carries a copy
there), else the repository this folder sits in. Building needs a C compiler, make, pkg-config
and seven Debian -dev packages; when any is missing the build stops with one line naming them.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
# pkg-config name -> the Debian package that provides it (tools/deps.sh installs the same)
PKGS = {"libcjson": "libcjson-dev", "libutf8proc": "libutf8proc-dev", "openblas": "libopenblas-dev",
        "zlib": "zlib1g-dev", "oniguruma": "libonig-dev", "libpng": "libpng-dev", "libjpeg": "libjpeg62-turbo-dev"}
# what an sdist copies from the repository: the library's sources and what its build reads
SOURCES = ["Makefile", "LICENSE", "include", "src", "templates", "tools/embed.c", "abi/libattnviz.map"]


def source_root():
    for d in (os.environ.get("ATTNVIZ_SRC"), os.path.join(HERE, "csrc"), os.path.dirname(HERE)):
        if d and os.path.isfile(os.path.join(d, "include", "attnviz.h")) and os.path.isfile(os.path.join(d, "Makefile")):
            return os.path.abspath(d)
    sys.exit("attnviz: the C sources are not here (no csrc/ and no attnviz repository above python/): "
             "install from the repository (pip install ./python) or set ATTNVIZ_SRC=/path/to/attnviz")


def missing_tools():
    """Debian packages to install before the build can run: one list, not a wall of compiler errors."""
    need = []
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        need.append("gcc")
    if not shutil.which("make"):
        need.append("make")
    if not shutil.which("pkg-config"):
        return need + ["pkg-config"] + list(PKGS.values())
    for name, deb in PKGS.items():
        if subprocess.run(["pkg-config", "--exists", name]).returncode != 0:
            need.append(deb)
    return need


def build_library(out_dir, build_dir):
    need = missing_tools()
    if need:
        sys.exit(f"attnviz: building libattnviz needs these Debian packages: {' '.join(need)} "
                 f"(apt-get install {' '.join(need)})")
    src = source_root()
    jobs = os.environ.get("ATTNVIZ_JOBS") or str(os.cpu_count() or 1)
    os.makedirs(build_dir, exist_ok=True)
    # PKGS: the library's seven only (the CLI's server library is not needed here)
    cmd = ["make", "-C", src, f"-j{jobs}", "--no-print-directory", f"B={build_dir}", f"PKGS={' '.join(PKGS)}",
           f"{build_dir}/libattnviz.so"]
    print("attnviz: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    real = os.path.realpath(os.path.join(build_dir, "libattnviz.so"))
    os.makedirs(out_dir, exist_ok=True)
    # one file, loaded by path: no symlinks in a wheel
    shutil.copyfile(real, os.path.join(out_dir, "libattnviz.so"))


class BuildPy(build_py):
    def run(self):
        super().run()
        build_library(os.path.join(self.build_lib, "attnviz", "_lib"),
                      os.path.abspath(os.path.join(self.build_lib, "..", "attnviz-cbuild")))


class SDist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = source_root()
        for rel in SOURCES:
            a, b = os.path.join(src, rel), os.path.join(base_dir, "csrc", rel)
            os.makedirs(os.path.dirname(b), exist_ok=True)
            if os.path.isdir(a):
                shutil.copytree(a, b, ignore=shutil.ignore_patterns("*.o", "*.d"))
            else:
                shutil.copyfile(a, b)


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPy, "sdist": SDist}, distclass=BinaryDistribution)
