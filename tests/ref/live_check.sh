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
# transformers' own model classes (BertModel, GPT2Model, RobertaModel, DistilBertModel) as a
# second, independent reference, from the reference Python (tools/pyref.sh) when it is built.
hfpy=$(tools/pyref.sh --check) ||
    echo "SKIP transformers_live_check: the reference Python is not built (tools/pyref.sh)"
hf_check() { # NAME DIR LABEL TEXT...
    local name=$1 dir=$2 label=$3 out
    shift 3
    [ -n "$hfpy" ] || return 0
    if out=$("$hfpy" tests/ref/hf_compare.py ./attnviz "$dir" --label "$label" "$@" 2>&1); then
        echo "$out"
        echo "PASS transformers_live_check_$name"
    else
        echo "FAIL transformers_live_check_$name: $out"
    fi
}
trap '[ -z "${ATTNVIZ_LIVE_DIR:-}" ] && rm -rf "$T"' EXIT
# The real vocabularies (tools/refdata.sh: bert-base-uncased's vocab.txt, GPT-2's encoder.json +
# vocab.bpe): without them the checkpoints would get small made-up ones, so that is a failure.
rd=${ATTNVIZ_REFDATA:-}
if [ -z "$rd" ] && ! rd=$(tools/refdata.sh); then
    echo "FAIL torch_live_check: no reference vocabularies (tools/refdata.sh said why above)"
    exit 1
fi
vocab_arg=(--vocab "$rd/bert-base-uncased/vocab.txt")
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
    [ "$2" = google ] || hf_check "bert_$1_$2" "$d" "bert-base shape $1 ($2 names)" \
        "time flies like an arrow" "the cat sat on the mat	it was tired" "$long"
done

# The other families at their published shapes: GPT-2 (768/12/12, 1024
# positions; the real GPT-2 vocabulary), RoBERTa (positions from padding_idx + 1,
# 514) and DistilBERT (6 layers).
gpt2_vocab=(--vocab "$rd/gpt2/encoder.json" --merges "$rd/gpt2/vocab.bpe")
for spec in "gpt2 F32 hf 24" "gpt2 F16 prefixed 25" "roberta F32 prefixed 26" "distilbert BF16 hf 27"; do
    set -- $spec
    d="$T/base-$1-$2-$3"
    extra=()
    case $1 in
    gpt2 | roberta) extra=("${gpt2_vocab[@]}") ;;
    distilbert) extra=("${vocab_arg[@]}") ;;
    esac
    [ -f "$d/model.safetensors" ] || /usr/bin/python3 tests/ref/make_checkpoint.py "$d" --family "$1" --shape base \
        --dtype "$2" --naming "$3" --seed "$4" "${extra[@]}" >/dev/null
    if out=$(/usr/bin/python3 tests/ref/compare.py ./attnviz "$d" --label "$1 base shape $2 ($3 names)" \
        "time flies like an arrow" "the cat sat on the mat	it was tired" "$long" 2>&1); then
        echo "$out"
        echo "PASS torch_live_check_$1_$2_$3"
    else
        echo "FAIL torch_live_check_$1_$2_$3: $out"
    fi
    hf_check "$1_$2_$3" "$d" "$1 base shape $2 ($3 names)" \
        "time flies like an arrow" "the cat sat on the mat	it was tired" "$long"
done
