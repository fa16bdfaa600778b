#!/bin/bash
# The progress line (run/progress.c, batch.c): on a terminal, work that runs past a couple of seconds shows
# done / total, the rate and the time left, redrawn in place; nothing when stderr is not a terminal, nothing
# with --quiet, nothing for work done within the threshold. ATTNVIZ_PROGRESS_AFTER=0 (seconds) shows it at
# once, so these runs take a fraction of a second each. tests/e2e/tty.py puts stderr on a pseudo-terminal.
set -u
cd "$(dirname "$0")/../.."
BIN=$PWD/attnviz
LL=$PWD/tests/data/small-llama
PY=python3
. tests/e2e/lib.sh

# on_tty NAME PATTERN CMD...: with stderr on a terminal, the run shows PATTERN (ERE) in a redrawn line
on_tty() {
    local name=$1 pat=$2
    shift 2
    if ATTNVIZ_PROGRESS_AFTER=0 "$PY" tests/e2e/tty.py stderr "$T/tty" "$@" >/dev/null &&
        tr '\r' '\n' <"$T/tty" | grep -qE "^$(printf '\033')\\[Kattnviz: $pat" && grep -qE "$pat" "$T/tty"; then
        pass "$name"
    else
        fail "$name" "$(tr '\r' '\n' <"$T/tty" | cat -v | head -20)"
    fi
}
on_tty progress_of_a_pass_layer_by_layer "forward pass: 2/2 layers, [0-9.]+ layers/s, 0:00 in all" \
    "$BIN" --model weights/demo --html "$T/p.html" "the cat sat on the mat"
on_tty progress_of_generation_token_by_token "generating: 5/5 tokens, [0-9.]+ tokens/s" \
    "$BIN" --model "$LL" --generate 5 --html "$T/g.html" "hello world"
on_tty progress_of_the_induction_score "induction score: 8/8 sequences" "$BIN" heads --model "$LL" "hello world"
mkdir -p "$T/l8k"
sed 's/"max_position_embeddings": *64/"max_position_embeddings": 8192/' "$LL/config.json" >"$T/l8k/config.json"
ln -s "$LL/model.safetensors" "$LL/tokenizer.json" "$T/l8k/"
on_tty progress_of_a_long_pages_tiles "tiles: 16/16 heads" \
    "$BIN" --model "$T/l8k" --long-from 256 --html "$T/l.html" "$(printf 'the cat sat. %.0s' $(seq 60))"
printf 'the cat sat\nhello world\n' >"$T/lines.txt"
on_tty progress_of_a_batch "batch: 2/2 lines, [0-9.]+ lines/s, 0:00 in all" "$BIN" --model "$LL" --batch "$T/lines.txt" --json "$T/b.jsonl"
on_tty progress_of_a_batch_from_stdin "batch: 2 lines, [0-9.]+ lines/s, 0:00 in all" \
    bash -c 'cat "$3" | "$0" --model "$1" --batch - --json "$2"' "$BIN" "$LL" "$T/b.jsonl" "$T/lines.txt"
on_tty progress_of_corpus_statistics "batch: 2/2 lines" "$BIN" --model "$LL" --batch "$T/lines.txt" --stats --json "$T/s.json"

# absent: stderr piped, --quiet, or work done within the threshold (here 60 s)
ATTNVIZ_PROGRESS_AFTER=0 "$BIN" --model weights/demo --html "$T/p.html" "the cat sat on the mat" 2>"$T/err"
if grep -q "layers" "$T/err" || grep -q "$(printf '\033')" "$T/err"; then
    fail no_progress_when_stderr_is_piped "$(cat -v "$T/err")"
else
    pass no_progress_when_stderr_is_piped
fi
for case in "no_progress_with_quiet:0:--quiet" "no_progress_within_the_threshold:60:--html"; do
    IFS=: read -r name after opt <<<"$case"
    [ "$opt" = --html ] && opt=
    # shellcheck disable=SC2086
    ATTNVIZ_PROGRESS_AFTER=$after "$PY" tests/e2e/tty.py stderr "$T/tty" "$BIN" --model weights/demo $opt --html "$T/p.html" \
        "the cat sat on the mat" >/dev/null
    if grep -q "layers" "$T/tty"; then fail "$name" "$(tr '\r' '\n' <"$T/tty" | cat -v)"; else pass "$name"; fi
done
# a batch done within the threshold leaves no line either (it showed one at once)
ATTNVIZ_PROGRESS_AFTER=60 "$PY" tests/e2e/tty.py stderr "$T/tty" "$BIN" --model "$LL" --batch "$T/lines.txt" --json "$T/b.jsonl" >/dev/null
if grep -q "lines" "$T/tty" || grep -q "$(printf '\033')" "$T/tty"; then
    fail no_batch_progress_within_the_threshold "$(tr '\r' '\n' <"$T/tty" | cat -v)"
else
    pass no_batch_progress_within_the_threshold
fi
exit 0
