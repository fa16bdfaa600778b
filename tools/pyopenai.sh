#!/bin/sh
# Prints the path of a Python interpreter that has the official openai client (the versions pinned
# in tools/pyopenai-requirements.txt), for tests/ref/openai_check.sh. Built on first use under
# $ATTNVIZ_CACHE (default ~/.cache/attnviz), keyed by the requirements file's sha256, as
# tools/pyref.sh builds the reference venv.
#   tools/pyopenai.sh          print the interpreter's path (building the venv if needed)
#   tools/pyopenai.sh --check  print it only if the venv is already built; exit 1 otherwise
# Exit status: 0 with the path on stdout; 1 with one line on stderr when it can't be had.
set -u
here=$(cd "$(dirname "$0")" && pwd)
req=$here/pyopenai-requirements.txt
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(sha256sum "$req" | cut -c1-12)
venv=$cache/pyopenai-$key
py=$venv/bin/python
if [ -x "$py" ] && [ -f "$venv/.complete" ]; then echo "$py"; exit 0; fi
[ "${1:-}" = --check ] && exit 1
base=${ATTNVIZ_PYTHON:-python3}
command -v "$base" >/dev/null 2>&1 || { echo "attnviz: pyopenai: no $base to build the venv" >&2; exit 1; }
mkdir -p "$cache" || exit 1
rm -rf "$venv"
log=$cache/pyopenai-$key.log
if ! { "$base" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; } >"$log" 2>&1; then
    # Debian's python3 may lack ensurepip: the reference venv's interpreter builds it then
    ref=$("$here/pyref.sh" --check 2>/dev/null) &&
        { "$ref" -m venv --without-pip "$venv" && "$ref" -m pip --python "$venv/bin/python" install -q \
              --disable-pip-version-check -r "$req"; } >>"$log" 2>&1 ||
        { echo "attnviz: pyopenai: pip install failed (see $log): $(grep -m1 -iE 'error' "$log")" >&2; exit 1; }
fi
touch "$venv/.complete"
echo "$py"
