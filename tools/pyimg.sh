#!/bin/sh
# Prints the path of the reference Python for images: the reference venv's packages
# (tools/pyref.sh: torch, transformers) plus Pillow, which transformers' PIL image
# processors (ViTImageProcessorPil, CLIPImageProcessorPil, ...) need and the reference
# venv lacks. A small venv of its own under $ATTNVIZ_CACHE (default ~/.cache/attnviz) that
# sees the reference venv's site-packages through a .pth file and installs only what
# tools/pyimg-requirements.txt pins; keyed by both requirement files' sha256, so either
# changing builds a new one, and the reference venv is never touched.
#   tools/pyimg.sh          print the interpreter's path (building the venv if needed)
#   tools/pyimg.sh --check  print it only if the venv is already built; exit 1 otherwise
# Exit status: 0 with the path on stdout; 1 with one line on stderr.
set -u
here=$(cd "$(dirname "$0")" && pwd)
req=$here/pyimg-requirements.txt
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(cat "$here/pyref-requirements.txt" "$req" | sha256sum | cut -c1-12)
venv=$cache/pyimg-$key
py=$venv/bin/python
if [ -x "$py" ] && [ -f "$venv/.complete" ]; then echo "$py"; exit 0; fi
[ "${1:-}" = --check ] && exit 1
ref=$("$here/pyref.sh") || exit 1
site=$("$ref" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1
mkdir -p "$cache" || exit 1
rm -rf "$venv"
echo "attnviz: building the image reference Python in $venv (Pillow over the reference venv; once)" >&2
log=$cache/pyimg-$key.log
if ! { "$ref" -m venv --without-pip "$venv" >"$log" 2>&1 &&
       mysite=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
       echo "$site" >"$mysite/attnviz_pyref.pth" &&
       "$ref" -m pip install -q --disable-pip-version-check --no-deps --target "$mysite" -r "$req"; } >>"$log" 2>&1; then
    echo "attnviz: pyimg: building the venv failed (see $log): $(grep -m1 -iE 'error' "$log")" >&2
    exit 1
fi
touch "$venv/.complete"
echo "$py"
