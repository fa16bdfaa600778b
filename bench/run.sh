#!/bin/sh
# make bench: attnviz vs the PyTorch peer, measured in the same run.
set -eu
cd "$(dirname "$0")/.."
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "bench: needs Debian's python3-torch (make deps-test)" >&2; exit 1; }
exec /usr/bin/python3 bench/bench.py
