#!/bin/bash
# Live comparison with PyTorch at bert-base shape (768 wide, 12 layers, 12
# heads, 30522 vocab): synthetic checkpoints in F32 (google naming: "bert."
# prefix, gamma/beta), F16 and BF16 (transformers naming). Needs Debian's
# python3-torch; skips visibly without it.
set -u
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "SKIP torch_live_check: /usr/bin/python3 has no torch (apt-get install python3-torch)"
    exit 0
fi
T=${ATTNVIZ_LIVE_DIR:-$(mktemp -d)}
trap '[ -z "${ATTNVIZ_LIVE_DIR:-}" ] && rm -rf "$T"' EXIT
vocab_arg=()
[ -f ../shared/models/bert-base-uncased/vocab.txt ] && vocab_arg=(--vocab ../shared/models/bert-base-uncased/vocab.txt)
long=$(for i in $(seq 1 20); do printf 'the quick brown fox jumps over the lazy dog. '; done)
for spec in "F32 google 21" "F16 hf 22" "BF16 hf 23"; do
    set -- $spec
    d="$T/base-$1-$2"
    [ -f "$d/model.safetensors" ] || /usr/bin/python3 tests/ref/make_checkpoint.py "$d" --shape base --dtype "$1" \
        --naming "$2" --seed "$3" "${vocab_arg[@]}" >/dev/null
    if out=$(/usr/bin/python3 tests/ref/compare.py ./attnviz "$d" --label "bert-base shape $1 ($2 names)" \
        "time flies like an arrow" "the cat sat on the mat	it was tired" "$long" 2>&1); then
        echo "$out"
        echo "PASS torch_live_check_$1_$2"
    else
        echo "FAIL torch_live_check_$1_$2: $out"
    fi
done
