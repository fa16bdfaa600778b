#!/bin/bash
# docs/batch.md's `parallel --sshlogin` form for real: a corpus sharded across two "hosts" (network
# namespaces on this machine, each with its own OpenSSH server, reached over veth pairs on
# loopback-range addresses; tests/e2e/hosts_lib.sh), the binary and model run in place (the
# namespaces share the filesystem). The merged JSON Lines must equal a single-process run byte
# for byte, in input order, and `attnviz stats --merge` of the per-shard statistics must equal
# the single run's. Needs root, network namespaces, sshd and GNU parallel; says SKIP otherwise.
set -u
cd "$(dirname "$0")/../.."
# an overall limit: a hung ssh or sshd must not hang CI (the EXIT trap still cleans up)
if [ -z "${CORPUS_HOSTS_TIMED:-}" ]; then
    CORPUS_HOSTS_TIMED=1 exec timeout -k 10 "${CORPUS_HOSTS_TIMEOUT:-180}" "$0" "$@"
fi
BIN=$PWD/attnviz
M=$PWD/weights/demo
T=$(mktemp -d)
. tests/e2e/lib.sh
. tests/e2e/hosts_lib.sh
finished=0
on_exit() {
    hosts_down
    rm -rf "$T"
    # fd 3: a trap runs under the redirections of the command it interrupted
    [ $finished -eq 1 ] || echo "FAIL corpus_hosts: interrupted or out of time (${CORPUS_HOSTS_TIMEOUT:-180} s)" >&3
}
exec 3>&1
trap on_exit EXIT
trap 'exit 1' TERM INT HUP

names="sshlogin_shards_merge_to_the_single_run sshlogin_jobs_ran_on_both_hosts stats_merge_of_host_shards_equals_the_single_run"
skip_all() { for n in $names; do skip "$n" "$1"; done; finished=1; exit 0; }

[ -f "$M/model.safetensors" ] || skip_all "the demo model is not generated (make)"
if why=$(hosts_unavailable); then skip_all "$why"; fi
hosts_up "$T/hosts" 2 || { for n in $names; do fail "$n" "could not make the hosts: $HOSTS_WHY"; done; finished=1; exit 1; }

# 300 sentences of varied length (1 to 40 words), from the demo model's word list
python3 - tools/demo_words.txt >"$T/corpus.txt" <<'PY'
import random, sys
words = [w.strip() for w in open(sys.argv[1]) if w.strip() and not w.startswith("[")]
r = random.Random(20)
for i in range(300):
    print(" ".join(r.choice(words) for _ in range(r.randint(1, 40))))
PY

# Every product is gemm.h's chains, so a shard's numbers do not depend on the kernel or the
# CPU: the shards run the plain C kernel and another OpenBLAS core type, the single run the
# best kernel here, and the merged output must still be the single run's, byte for byte.
cmd="ATTNVIZ_KERNEL=scalar OPENBLAS_CORETYPE=Prescott $BIN --model $M --batch - --quiet"

"$BIN" --model "$M" --batch "$T/corpus.txt" --quiet >"$T/single.jsonl"
# docs/batch.md's form (two hosts and ":", this machine): -k keeps input order; 25 lines a job so
# every host gets several jobs
hosts_run parallel --ssh "$HOSTS_SSH" --sshlogin "${HOSTS// /,},:" --joblog "$T/jobs.log" \
    --pipe -k -N 25 "$cmd" <"$T/corpus.txt" >"$T/merged.jsonl" 2>"$T/parallel.err"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$T/single.jsonl" "$T/merged.jsonl"; then
    pass sshlogin_shards_merge_to_the_single_run
else
    fail sshlogin_shards_merge_to_the_single_run "parallel exit $rc, $(wc -l <"$T/merged.jsonl") of $(wc -l <"$T/single.jsonl") lines; $(cmp "$T/single.jsonl" "$T/merged.jsonl" 2>&1 | head -c 200) $(head -c 300 "$T/parallel.err")"
fi
# both hosts took jobs, and none failed (joblog: Seq Host ... Exitval)
check sshlogin_jobs_ran_on_both_hosts python3 - "$T/jobs.log" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
assert len(rows) == 12, f"{len(rows)} jobs, want 12"
hosts = {r[1] for r in rows}
assert {"av1", "av2"} <= hosts <= {"av1", "av2", ":"}, hosts
assert all(r[6] == "0" and r[7] == "0" for r in rows), [r[6:8] for r in rows]
PY

# per-shard statistics come back over ssh as each job's stdout (parallel --results: no shared
# filesystem needed; not named *.json, which parallel takes as a request for its own JSON format)
# and are merged on the client
"$BIN" --model "$M" --batch "$T/corpus.txt" --quiet --stats --json "$T/single_stats.json"
hosts_run parallel --ssh "$HOSTS_SSH" --sshlogin "${HOSTS// /,}" --pipe -N 25 \
    --results "$T/stats/shard{#}.stats" "$BIN --model $M --batch - --quiet --stats --json -" \
    <"$T/corpus.txt" >/dev/null 2>"$T/parallel.err"
rc=$?
"$BIN" stats --merge "$T"/stats/shard*.stats --json "$T/merged_stats.json" 2>"$T/merge.err"
mrc=$?
if [ $rc -eq 0 ] && [ $mrc -eq 0 ] && cmp -s "$T/single_stats.json" "$T/merged_stats.json"; then
    pass stats_merge_of_host_shards_equals_the_single_run
else
    fail stats_merge_of_host_shards_equals_the_single_run "parallel exit $rc, merge exit $mrc ($(head -c 200 "$T/merge.err")); $(ls "$T"/stats/shard*.stats 2>/dev/null | wc -l) shard files; $(cmp "$T/single_stats.json" "$T/merged_stats.json" 2>&1)"
fi
finished=1
exit 0
