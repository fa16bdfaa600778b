#!/bin/sh
# Prints the path of the reference Python interpreter: a venv holding PyPI's torch,
# transformers, tokenizers (Rust), safetensors, gguf and bertviz at the versions pinned in
# tools/pyref-requirements.txt. Built on first use under $ATTNVIZ_CACHE (default
# ~/.cache/attnviz), keyed by the requirements file's sha256, so a changed pin builds a new
# venv and an unchanged one is reused. PyPI's torch wheel pulls its CUDA packages (several GB;
# measured in bench/README.md): they are downloaded once into the cache's wheel folder.
#   tools/pyref.sh          print the interpreter's path (building the venv if needed)
#   tools/pyref.sh --check  print it only if the venv is already built; exit 1 otherwise
# Exit status: 0 with the path on stdout; 1 with one line on stderr when it can't be had
# (no python3 >= 3.10, PyPI unreachable).
set -u
here=$(cd "$(dirname "$0")" && pwd)
req=$here/pyref-requirements.txt
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(sha256sum "$req" | cut -c1-12)
venv=$cache/pyref-$key
py=$venv/bin/python
if [ -x "$py" ] && [ -f "$venv/.complete" ]; then echo "$py"; exit 0; fi
[ "${1:-}" = --check ] && exit 1
base=${ATTNVIZ_PYTHON:-python3}
command -v "$base" >/dev/null 2>&1 || { echo "attnviz: pyref: no $base to build the reference venv" >&2; exit 1; }
"$base" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    { echo "attnviz: pyref: $base is older than 3.10" >&2; exit 1; }
mkdir -p "$cache" || exit 1
rm -rf "$venv"
echo "attnviz: building the reference Python in $venv (torch, transformers, bertviz; once)" >&2
log=$cache/pyref-$key.log
if ! { "$base" -m venv "$venv" &&
       "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; } >"$log" 2>&1; then
    echo "attnviz: pyref: pip install failed (see $log): $(grep -m1 -iE 'error' "$log")" >&2
    exit 1
fi
touch "$venv/.complete"
echo "$py"
