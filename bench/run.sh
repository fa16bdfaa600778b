#!/bin/sh
# make bench: attnviz vs the PyTorch peer, measured in the same run; then corpus throughput
# (one process, local shards, shards over ssh: bench/corpus_bench.sh).
set -eu
cd "$(dirname "$0")/.."
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "bench: needs Debian's python3-torch (make deps-test)" >&2; exit 1; }
/usr/bin/python3 bench/bench.py
exec bench/corpus_bench.sh
