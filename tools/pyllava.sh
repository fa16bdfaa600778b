#!/bin/sh
# Prints the path of the Python that runs llama.cpp's legacy LLaVA converter (tests/ref/vlm_check.sh):
# the reference venv's packages (tools/pyref.sh: torch, safetensors, gguf) with transformers 4 over
# them (tools/pyllava-requirements.txt says why). A small venv of its own under $ATTNVIZ_CACHE
# (default ~/.cache/attnviz) that sees the reference venv's site-packages through a .pth file and
# installs only what tools/pyllava-requirements.txt pins, ahead of the reference venv's; keyed by
# both requirement files' sha256, so either changing builds a new one; the reference venv is never
# touched.
#   tools/pyllava.sh          print the interpreter's path (building the venv if needed)
#   tools/pyllava.sh --check  print it only if the venv is already built; exit 1 otherwise
# Exit status: 0 with the path on stdout; 1 with one line on stderr.
set -u
here=$(cd "$(dirname "$0")" && pwd)
req=$here/pyllava-requirements.txt
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(cat "$here/pyref-requirements.txt" "$req" | sha256sum | cut -c1-12)
venv=$cache/pyllava-$key
py=$venv/bin/python
if [ -x "$py" ] && [ -f "$venv/.complete" ]; then echo "$py"; exit 0; fi
[ "${1:-}" = --check ] && exit 1
ref=$("$here/pyref.sh") || exit 1
site=$("$ref" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1
mkdir -p "$cache" || exit 1
rm -rf "$venv"
echo "attnviz: building the LLaVA converter's Python in $venv (transformers 4 over the reference venv; once)" >&2
log=$cache/pyllava-$key.log
if ! { "$ref" -m venv --without-pip "$venv" >"$log" 2>&1 &&
       mysite=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
       echo "$site" >"$mysite/attnviz_pyref.pth" &&
       "$ref" -m pip install -q --disable-pip-version-check --no-deps --target "$mysite" -r "$req"; } >>"$log" 2>&1; then
    echo "attnviz: pyllava: building the venv failed (see $log): $(grep -m1 -iE 'error' "$log")" >&2
    exit 1
fi
touch "$venv/.complete"
echo "$py"
