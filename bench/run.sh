#!/bin/sh
# make bench: attnviz vs the PyTorch peer, measured in the same run; long inputs (telemetry and
# the --stats/heads score sums at 2k-32k tokens: bench/long_bench.py); generation through the OpenAI-compatible
# routes against llama-server (bench/openai_bench.py); then corpus throughput
# (one process, local shards, shards over ssh: bench/corpus_bench.sh).
set -eu
cd "$(dirname "$0")/.."
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "bench: needs Debian's python3-torch (make deps-test)" >&2; exit 1; }
/usr/bin/python3 bench/bench.py
/usr/bin/python3 bench/long_bench.py
# attnviz serve's /v1 generation against llama-server (when built beside the repo), attention on vs off
/usr/bin/python3 bench/openai_bench.py
# 7-8B and 20B GGUF shapes against llama-bench (issue 50): ATTNVIZ_SHAPES holds the files (made once, 36 GB)
/usr/bin/python3 bench/scale_bench.py --rounds "${BENCH_SCALE_ROUNDS:-1}"
exec bench/corpus_bench.sh
