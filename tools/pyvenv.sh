#!/bin/sh
# Prints the path of a small reference Python for one kind of check: the reference venv's
# packages (tools/pyref.sh: torch, transformers, safetensors, gguf) plus what
# tools/NAME-requirements.txt pins, which the reference venv lacks or must not change:
#   pyimg    Pillow, which transformers' PIL image processors (ViTImageProcessorPil,
#            CLIPImageProcessorPil, ...) need (tests/ref/image_check.sh and the other image checks)
#   pyllava  transformers 4 over the reference venv's, for llama.cpp's legacy LLaVA converter
#            (tests/ref/vlm_check.sh; tools/pyllava-requirements.txt says why)
# A venv of its own under $ATTNVIZ_CACHE (default ~/.cache/attnviz), NAME-KEY, that sees the
# reference venv's site-packages through a .pth file and installs only what the requirements file
# pins, ahead of the reference venv's; KEY is both requirement files' sha256, so either changing
# builds a new one; the reference venv is never touched. tools/pyimg.sh and tools/pyllava.sh are
# this script for their NAME.
#   tools/pyvenv.sh NAME          print the interpreter's path (building the venv if needed)
#   tools/pyvenv.sh NAME --check  print it only if the venv is already built; exit 1 otherwise
# Exit status: 0 with the path on stdout; 1 with one line on stderr (2: no such NAME).
set -u
here=$(cd "$(dirname "$0")" && pwd)
name=${1:-}
case $name in
    pyimg) what="the image reference Python"; over="Pillow" ;;
    pyllava) what="the LLaVA converter's Python"; over="transformers 4" ;;
    *) echo "attnviz: pyvenv.sh: usage: tools/pyvenv.sh pyimg|pyllava [--check] (got '$name')" >&2; exit 2 ;;
esac
shift
req=$here/$name-requirements.txt
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(cat "$here/pyref-requirements.txt" "$req" | sha256sum | cut -c1-12)
venv=$cache/$name-$key
py=$venv/bin/python
if [ -x "$py" ] && [ -f "$venv/.complete" ]; then echo "$py"; exit 0; fi
[ "${1:-}" = --check ] && exit 1
ref=$("$here/pyref.sh") || exit 1
site=$("$ref" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1
mkdir -p "$cache" || exit 1
rm -rf "$venv"
echo "attnviz: building $what in $venv ($over over the reference venv; once)" >&2
log=$cache/$name-$key.log
if ! { "$ref" -m venv --without-pip "$venv" >"$log" 2>&1 &&
       mysite=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') &&
       echo "$site" >"$mysite/attnviz_pyref.pth" &&
       "$ref" -m pip install -q --disable-pip-version-check --no-deps --target "$mysite" -r "$req"; } >>"$log" 2>&1; then
    echo "attnviz: $name: building the venv failed (see $log): $(grep -m1 -iE 'error' "$log")" >&2
    exit 1
fi
touch "$venv/.complete"
echo "$py"
