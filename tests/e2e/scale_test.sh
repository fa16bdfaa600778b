#!/bin/bash
# scale_test.sh — a model of a laptop's size held without copying it, and refused before it runs when it
# would not fit (docs/models-at-scale.md). On a Llama-3.1-8B-shaped Q4_K_M GGUF cut to 2 layers (the real
# widths, vocabulary and tokenizer: bench/make_shape_gguf.py, made once into $ATTNVIZ_CACHE, ~1 GB, ~15 s):
#   - the weights are mapped, not copied: after the load and after a pass the process's anonymous
#     memory (RssAnon: its own copies and buffers) stays far below the file; a process that makes many
#     passes (--generate) holds quantized weights mapped too; an F32 fixture is copied (resident) there;
#   - a run refused after the load (a layer out of range) reads none of the weights (RSS far below them);
#   - with the memory available set by ATTNVIZ_MEMORY: weights larger than it are refused at the load,
#     in one line, with a smaller quantization as the remedy; an input whose buffers pass it is refused
#     naming the longest that fits, and that length then runs within the same memory;
#   - the capture plan: past --max-capture the default page switches to the long input's page, saying so,
#     holding what it said; where even that does not fit, refused before the pass in one line naming what fits;
#   - what --telemetry holds grows linearly with the input, to 32,768 tokens (the estimate the check
#     makes, refused before anything is allocated), and that estimate covers what a pass measures;
#   - gpt-oss-20b on a 16 GB laptop: the whole 24-layer file (12.1 GB, its matrices left as holes: --sparse,
#     ~40 MB of disk, ~4 s) refused in one line before a weight is read where ~10 GB is free, accepted
#     where 16 GB is, an input past the memory refused naming the longest that fits;
#   - the real trained GGUFs (SmolLM2, Gemma 3 270M: tools/pymodel.sh) held the same way.
# Sizes come from attnviz's --profile line (RssAnon/RssFile read from /proc/self/status) and from the
# kernel's peak RSS of the process; nothing is timed.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
PY=python3
. tests/e2e/lib.sh

if ! py=$(tools/pyref.sh --check 2>/dev/null); then
    skip "scale" "reference Python not built (tools/pyref.sh): it writes the 8B-shaped file"
    exit 0
fi
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
key=$(sha256sum bench/make_shape_gguf.py | cut -c1-12)
F=$cache/shapes-$key/llama31-8b-q4_k_m-2l.gguf
if [ ! -f "$F" ]; then
    mkdir -p "$(dirname "$F")" || exit 1
    if ! "$py" bench/make_shape_gguf.py llama31-8b q4_k_m "$F.tmp" --layers 2 >"$T/gen.log" 2>&1; then
        fail "scale_shape_file" "bench/make_shape_gguf.py failed: $(tail -2 "$T/gen.log")"
        rm -f "$F.tmp"
        exit 1
    fi
    mv "$F.tmp" "$F"
fi
FILE_MB=$(($(stat -c %s "$F") / 1000000))
G=$cache/shapes-$key/gptoss-20b-mxfp4-sparse.gguf
if [ ! -f "$G" ]; then
    if ! "$py" bench/make_shape_gguf.py gptoss-20b mxfp4 "$G.tmp" --sparse >"$T/gen.log" 2>&1; then
        fail "scale_sparse_20b_file" "bench/make_shape_gguf.py --sparse failed: $(tail -2 "$T/gen.log")"
        rm -f "$G.tmp"
        exit 1
    fi
    mv "$G.tmp" "$G"
fi

# profile KEY: a value of the --profile line in $T/err
profile() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$T/err" | tail -1; }
# peak_rss CMD...: runs CMD (stdout, stderr to $T/out, $T/err), prints its exit code and peak RSS in MB
peak_rss() {
    $PY - "$@" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    out = os.open(os.environ["T"] + "/out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(os.environ["T"] + "/err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1), os.dup2(err, 2)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss // 1024)
PY
}
export T
words() { $PY -c "import sys; print(' '.join(['x'] * int(sys.argv[1])))" "$1"; }
TEXT="the people who ask for attention out of llama.cpp run models of seven or eight billion parameters on laptops"

# -- the weights mapped, not copied
if "$BIN" --model "$F" --quiet --profile --json "$T/o.json" "$TEXT" 2>"$T/err"; then
    anon=$(profile anon_mb) load_anon=$(profile load_anon_mb) file=$(profile file_mb) load_file=$(profile load_file_mb)
    hold=$(profile weights)
    if [ "$load_anon" -lt $((FILE_MB / 5)) ] && [ "$anon" -lt $((FILE_MB / 5)) ] && [ "$load_file" -lt $((FILE_MB / 10)) ] &&
        [ "$file" -le $((FILE_MB + 20)) ] && [ "$hold" = mapped ]; then
        pass "scale_weights_mapped_not_copied ($FILE_MB MB file: anonymous $load_anon MB after the load, $anon MB after a pass; mapped $load_file MB after the load, $file MB after it)"
    else
        fail "scale_weights_mapped_not_copied" "$FILE_MB MB file: weights=$hold anonymous $load_anon/$anon MB, mapped $load_file/$file MB (load/pass)"
    fi
else
    fail "scale_weights_mapped_not_copied" "$(head -2 "$T/err")"
fi
# many passes (--generate) ask for a resident copy: quantized weights gain nothing from it (they are
# widened per panel) and stay mapped; an F32 checkpoint's are copied
if "$BIN" --model "$F" --quiet --profile --generate 2 --json "$T/o.json" "$TEXT" 2>"$T/err" &&
    [ "$(profile weights)" = mapped ] && [ "$(profile anon_mb)" -lt $((FILE_MB / 5)) ]; then
    pass "scale_generation_keeps_quantized_weights_mapped (anonymous $(profile anon_mb) MB)"
else
    fail "scale_generation_keeps_quantized_weights_mapped" "weights=$(profile weights) anonymous $(profile anon_mb) MB: $(grep -v load_ms "$T/err" | head -2)"
fi
if "$BIN" --model tests/data/small-llama --quiet --profile --generate 2 --json "$T/o.json" "time flies" 2>"$T/err" &&
    [ "$(profile weights)" = resident ]; then
    pass "scale_generation_copies_small_f32_weights"
else
    fail "scale_generation_copies_small_f32_weights" "weights=$(profile weights): $(head -2 "$T/err")"
fi

# -- a run refused after the load reads none of the weights
read -r rc rss < <(peak_rss "$BIN" --model "$F" --layers 5 --json "$T/o.json" "$TEXT")
if [ "$rc" = 2 ] && grep -q "out of range: the model has 2 layers" "$T/err" && [ "$rss" -lt $((FILE_MB / 4)) ]; then
    pass "scale_refusal_reads_no_weights (peak RSS $rss MB, file $FILE_MB MB)"
else
    fail "scale_refusal_reads_no_weights" "exit $rc, peak RSS $rss MB of a $FILE_MB MB file: $(head -2 "$T/err")"
fi

# -- the memory available (ATTNVIZ_MEMORY): weights past it refused at the load, in one line
read -r rc rss < <(ATTNVIZ_MEMORY=$((FILE_MB * 9 / 10))M peak_rss "$BIN" --model "$F" --quiet --json "$T/o.json" "$TEXT")
if [ "$rc" = 1 ] && [ "$(grep -c '' "$T/err")" = 1 ] &&
    grep -qE "the weights take [0-9.]+ GB \(mapped from the file\).*available \(ATTNVIZ_MEMORY\).*a smaller quantization of the model.*ATTNVIZ_MEMORY=[0-9]+G runs it anyway" "$T/err" &&
    [ "$rss" -lt $((FILE_MB / 4)) ]; then
    pass "scale_weights_past_the_memory_refused (peak RSS $rss MB): $(cut -c1-160 "$T/err")..."
else
    fail "scale_weights_past_the_memory_refused" "exit $rc, peak RSS $rss MB: $(cat "$T/err")"
fi
# an input whose buffers pass it: refused naming the longest that fits, which then runs
budget=$((FILE_MB + 60))M
ATTNVIZ_MEMORY=$budget "$BIN" --model "$F" --quiet --json "$T/o.json" "$(words 2047)" 2>"$T/err" >/dev/null
rc=$?
fits=$(sed -n 's/.*(--max-tokens \([0-9]*\) fits).*/\1/p' "$T/err")
if [ "$rc" = 1 ] && [ "$(grep -c '' "$T/err")" = 1 ] && [ -n "$fits" ] &&
    grep -qE "2047 tokens need .* of memory \(weights [0-9.]+ GB mapped, the pass's buffers .*, the capture .*\) but .* is available" "$T/err"; then
    if ATTNVIZ_MEMORY=$budget "$BIN" --model "$F" --quiet --max-tokens "$fits" --json "$T/o.json" "$(words 2047)" 2>"$T/err2" &&
        ! ATTNVIZ_MEMORY=$budget "$BIN" --model "$F" --quiet --max-tokens $((fits + 1)) --json "$T/o.json" "$(words 2047)" 2>/dev/null; then
        pass "scale_input_past_the_memory_refused_with_what_fits (--max-tokens $fits runs, $((fits + 1)) does not)"
    else
        fail "scale_input_past_the_memory_refused_with_what_fits" "--max-tokens $fits: $(head -2 "$T/err2")"
    fi
else
    fail "scale_input_past_the_memory_refused_with_what_fits" "exit $rc: $(cat "$T/err")"
fi

# -- the capture plan: the whole matrices of 599 tokens past --max-capture, the long input's page instead,
# said before the pass, holding what it said
rm -f "$T/p.html"
read -r rc rss < <(peak_rss "$BIN" --model "$F" --max-capture 60M --profile --html "$T/p.html" "$(words 599)")
held=$(sed -n "s/.*writing the long input's page (.*; \([0-9.]*\) MB held).*/\1/p" "$T/err")
if [ "$rc" = 0 ] && [ -n "$held" ] && grep -q "a long input's page" "$T/err" && [ -s "$T/p.html" ] &&
    [ "$(($(profile anon_mb) - $(profile load_anon_mb)))" -le "${held%.*}" ] && [ "$rss" -lt $((FILE_MB / 2 + ${held%.*})) ]; then
    pass "scale_capture_plan_switches_to_the_long_page (said $held MB held; anonymous grew $(($(profile anon_mb) - $(profile load_anon_mb))) MB, peak RSS $rss MB)"
else
    fail "scale_capture_plan_switches_to_the_long_page" "exit $rc, held '$held', peak RSS $rss MB: $(grep -v load_ms "$T/err" | head -3)"
fi
# where neither fits: refused after tokenizing, before the pass (no weight read, nothing written)
rm -f "$T/p.html"
read -r rc rss < <(peak_rss "$BIN" --model "$F" --max-capture 200k --html "$T/p.html" "$(words 127)")
if [ "$rc" = 1 ] && [ "$(grep -vc '^attnviz: model ' "$T/err")" = 1 ] && [ ! -e "$T/p.html" ] && [ "$rss" -lt $((FILE_MB / 4)) ] &&
    grep -qE "capturing 127 tokens x 2 layers x 32 heads needs .* above the 200 kB allowed \(--max-capture\): what fits: .*--max-tokens [0-9]+ fits" "$T/err"; then
    pass "scale_capture_plan_refuses_before_the_pass (peak RSS $rss MB)"
else
    fail "scale_capture_plan_refuses_before_the_pass" "exit $rc, peak RSS $rss MB: $(cat "$T/err")"
fi

# -- --telemetry's memory, linear in the input to 32,768 tokens: the check's estimate (every buffer the
# pass makes), read from its refusals under a budget nothing passes
for n in 8192 16384 32768; do
    ATTNVIZ_MEMORY=$budget "$BIN" --model "$F" --telemetry 8 --json "$T/o.json" "$(words $((n - 1)))" 2>"$T/tel$n" >/dev/null
done
if $PY - "$T" <<'PY'; then
import re, sys
def mb(s):
    v, u = s.split()
    return float(v) * {"kB": 1e-3, "MB": 1, "GB": 1e3}[u]
need = {}
for n in (8192, 16384, 32768):
    t = open(f"{sys.argv[1]}/tel{n}").read()
    m = re.search(r"the pass's buffers ([\d.]+ [kMG]B), the capture ([\d.]+ [kMG]B)", t)
    assert m, t
    need[n] = mb(m.group(1)) + mb(m.group(2))
ratio = (need[32768] - need[16384]) / (need[16384] - need[8192])
print(f"buffers {need[8192]:.0f} / {need[16384]:.0f} / {need[32768]:.0f} MB; growth ratio {ratio:.3f}")
assert 1.95 <= ratio <= 2.05, ratio
PY
    pass "scale_telemetry_memory_linear_to_32768_tokens"
else
    fail "scale_telemetry_memory_linear_to_32768_tokens" "$(head -c 600 "$T/tel32768")"
fi
# the estimate covers a pass: 256 tokens' --telemetry run, its anonymous memory after the pass against
# the estimate the check makes (read from a refusal of the same input)
ATTNVIZ_MEMORY=$budget "$BIN" --model "$F" --quiet --telemetry 8 --json "$T/o.json" "$(words 255)" 2>"$T/est" >/dev/null
est=$($PY -c "
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r\"the pass's buffers ([\d.]+) MB, the capture ([\d.]+) ([kM])B\", t)
print(int(float(m.group(1)) + float(m.group(2)) * (1e-3 if m.group(3) == 'k' else 1)) if m else '')" "$T/est")
if [ -n "$est" ] && "$BIN" --model "$F" --quiet --profile --telemetry 8 --json "$T/o.json" "$(words 255)" 2>"$T/err"; then
    grew=$(($(profile anon_mb) - $(profile load_anon_mb)))
    if [ "$grew" -le $((est + 30)) ] && [ "$grew" -ge $((est / 3)) ]; then
        pass "scale_estimate_covers_a_pass (256 tokens: estimated $est MB, anonymous memory grew $grew MB)"
    else
        fail "scale_estimate_covers_a_pass" "estimated $est MB, grew $grew MB"
    fi
else
    fail "scale_estimate_covers_a_pass" "estimate '$est': $(head -2 "$T/est") $(head -2 "$T/err")"
fi

# -- gpt-oss-20b (12.1 GB) on a 16 GB laptop: with a browser and an editor open (~10 GB free) refused before
# a weight is read, naming the remedy; with 16 GB free accepted (the run then refused for its --layers, after
# the check); an input past 13 GB refused naming the longest that fits (a real pass over the holes would
# read 2.5 GB of zeros: not run here)
G_MB=$(($(stat -c %s "$G") / 1000000))
read -r rc rss < <(ATTNVIZ_MEMORY=10G peak_rss "$BIN" --model "$G" --json "$T/o.json" "$TEXT")
if [ "$rc" = 1 ] && [ "$(grep -c '' "$T/err")" = 1 ] && [ "$rss" -lt 200 ] &&
    grep -qE "the weights take 12.1 GB \(mapped from the file\).* but 10.0 GB is available \(ATTNVIZ_MEMORY\).*a smaller quantization of the model, or free memory; ATTNVIZ_MEMORY=13G runs it anyway" "$T/err"; then
    pass "scale_20b_refused_on_a_16gb_laptop_before_reading ($G_MB MB file, peak RSS $rss MB)"
else
    fail "scale_20b_refused_on_a_16gb_laptop_before_reading" "exit $rc, peak RSS $rss MB: $(cat "$T/err")"
fi
read -r rc rss < <(ATTNVIZ_MEMORY=16G peak_rss "$BIN" --model "$G" --layers 30 --json "$T/o.json" "$TEXT")
if [ "$rc" = 2 ] && grep -q "out of range: the model has 24 layers" "$T/err" && [ "$rss" -lt 400 ]; then
    pass "scale_20b_accepted_with_16gb_free (peak RSS $rss MB)"
else
    fail "scale_20b_accepted_with_16gb_free" "exit $rc, peak RSS $rss MB: $(cat "$T/err")"
fi
read -r rc rss < <(ATTNVIZ_MEMORY=13G peak_rss "$BIN" --model "$G" --quiet --telemetry 8 --json "$T/o.json" "$(words 8191)")
if [ "$rc" = 1 ] && [ "$(grep -c '' "$T/err")" = 1 ] && [ "$rss" -lt 400 ] &&
    grep -qE "8191 tokens need [0-9.]+ GB of memory \(weights 12.1 GB mapped, .*\) but 13.0 GB is available \(ATTNVIZ_MEMORY\): a shorter input \(--max-tokens [0-9]+ fits\)" "$T/err"; then
    pass "scale_20b_input_past_the_memory_refused ($(grep -o -- '--max-tokens [0-9]* fits' "$T/err"), peak RSS $rss MB)"
else
    fail "scale_20b_input_past_the_memory_refused" "exit $rc, peak RSS $rss MB: $(cat "$T/err")"
fi

# -- the real trained GGUFs, held the same way (their tokenizers' tables are the anonymous part)
for m in smollm2:SmolLM2-135M-Instruct.Q4_1.gguf gemma3-270m:gemma-3-270m-q4_k_m.gguf; do
    if ! d=$(tools/pymodel.sh "${m%%:*}" 2>"$T/pm"); then
        fail "scale_trained_${m%%:*}" "tools/pymodel.sh ${m%%:*}: $(tail -1 "$T/pm")"
        continue
    fi
    g=$d/${m#*:}
    mb=$(($(stat -c %s "$g") / 1000000))
    if "$BIN" --model "$g" --quiet --profile --generate 2 --json "$T/o.json" "$TEXT" 2>"$T/err" &&
        [ "$(profile weights)" = mapped ] && [ "$(profile anon_mb)" -lt $((mb / 2)) ] && [ "$(profile file_mb)" -le $((mb + 20)) ]; then
        pass "scale_trained_${m%%:*}_weights_mapped ($mb MB file: anonymous $(profile anon_mb) MB, mapped $(profile file_mb) MB after --generate)"
    else
        fail "scale_trained_${m%%:*}_weights_mapped" "$mb MB file: weights=$(profile weights) anonymous $(profile anon_mb) MB mapped $(profile file_mb) MB: $(grep -v load_ms "$T/err" | head -2)"
    fi
done
