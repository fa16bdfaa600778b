#!/bin/bash
# docs/batch.md's Slurm job array for real: a single-node Slurm started here (Debian's slurm-wlm and
# munge: munged with a temporary key, slurmctld and slurmd on this machine over loopback, a
# temporary slurm.conf and state folders, no cgroups), the docs' attnviz-shards.sbatch and its
# submit-and-merge block extracted from docs/batch.md and run as written. The merged statistics, head
# scores and JSON Lines must equal one unsharded run byte for byte; each task must have taken its
# own shard; a failing task must fail sbatch --wait; and every daemon is stopped on every exit
# path (none may remain). Without slurm-wlm/munge the cases FAIL with the reason
# (tools/deps.sh test installs them). Prints the time each phase took.
set -u
cd "$(dirname "$0")/../.."
# an overall limit: a daemon that never answers must not hang CI (the EXIT trap still stops them)
if [ -z "${SLURM_TEST_TIMED:-}" ]; then
    SLURM_TEST_TIMED=1 exec timeout -k 30 "${SLURM_TEST_TIMEOUT:-180}" "$0" "$@"
fi
ROOT=$PWD
BIN=$ROOT/attnviz
M=$ROOT/weights/demo
T=$(mktemp -d /tmp/attnviz-slurm.XXXXXX)
. tests/e2e/lib.sh
# a surrounding Slurm job's variables must not reach the unsharded runs or the client commands
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX \
    SLURM_ARRAY_TASK_STEP SLURM_JOB_ID SLURM_CONF

names="slurm_array_stats_merge_to_the_single_run slurm_array_heads_merge_to_the_single_run
slurm_array_json_lines_interleave_to_the_single_run slurm_array_tasks_took_their_shards
slurm_wait_fails_when_a_shard_fails slurm_daemons_stopped"
fail_all() { for n in $names; do fail "$n" "$1"; done; finished=1; exit 1; }

PIDS=""   # the daemons this script started (munged, slurmctld, slurmd), stopped by id
finished=0
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# every Slurm and munge daemon process on this machine (slurmscriptd is slurmctld's helper,
# slurmstepd runs a job for slurmd)
slurm_pids() { for n in slurmctld slurmscriptd slurmd slurmstepd munged; do pgrep -x $n; done; }
# running: exists and has not ended (a zombie has ended; it waits to be reaped)
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Stops the daemons started here (TERM, then KILL after 5 s) and reaps them, then checks that none
# of them and no slurmstepd of our jobs is left: any left is killed by its id and named in STRAYS.
daemons_down() {
    local p left="" i
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    for i in $(seq 1 50); do
        left=""
        for p in $PIDS; do alive "$p" && left="$left $p"; done
        [ -z "$left" ] && break
        sleep 0.1
    done
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    # a job step outlives slurmd only if something went wrong: its slurmstepd runs our job scripts
    local strays=""
    for i in $(seq 1 30); do
        strays=""
        for p in $(slurm_pids); do
            case " $BEFORE " in *" $p "*) continue ;; esac
            alive "$p" && strays="$strays $p"
        done
        [ -z "$strays" ] && break
        sleep 0.1
    done
    local named=""
    for p in $strays; do
        named="$named $p($(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | head -c 80))"
        kill -KILL "$p" 2>/dev/null
    done
    PIDS=""
    STRAYS="${left:+still running 5 s after TERM:$left; }${named:+left behind:$named}"
}
on_exit() {
    if [ -n "$PIDS" ]; then
        daemons_down
        [ $finished -eq 1 ] || [ -z "$STRAYS" ] || echo "FAIL slurm_daemons_stopped: $STRAYS" >&3
    fi
    rm -rf "$T"
    # fd 3: a trap runs under the redirections of the command it interrupted
    [ $finished -eq 1 ] || echo "FAIL slurm_test: interrupted or out of time (${SLURM_TEST_TIMEOUT:-180} s)" >&3
}
exec 3>&1
trap on_exit EXIT
trap 'exit 1' TERM INT HUP

t_start=$(now)
[ -f "$M/model.safetensors" ] || fail_all "the demo model is not generated (make)"
missing=""
for c in munged munge slurmctld slurmd sbatch sinfo; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing="$missing $c"
done
[ -z "$missing" ] || fail_all "Slurm is not installed (missing:$missing): tools/deps.sh test installs Debian's slurm-wlm and munge"
PATH=$PATH:/usr/sbin:/sbin

# docs/batch.md's two blocks, each the fenced block after its marker comment.
readme_block() {
    awk -v mark="$1" 'index($0, mark) { on = 1; next }
        on == 1 && /^```/ { on = 2; next }
        on == 2 && /^```/ { exit }
        on == 2 { print }' docs/batch.md
}
readme_block "tests/e2e/slurm_test.sh runs this block as attnviz-shards.sbatch" >"$T/attnviz-shards.sbatch"
readme_block "tests/e2e/slurm_test.sh runs this block -->" >"$T/submit.sh"
grep -q '^#SBATCH --array=0-3' "$T/attnviz-shards.sbatch" && grep -q 'sbatch --wait attnviz-shards.sbatch' "$T/submit.sh" ||
    fail_all "docs/batch.md: the Slurm section's blocks were not found"

# ---- the daemons: munged, slurmctld and slurmd, all in $T/slurm, over 127.0.0.1
# what ran before (another Slurm on this machine): not ours, never stopped or counted
BEFORE=$(echo $(slurm_pids))
S=$T/slurm
mkdir -p "$S/state" "$S/spool" "$S/key" "$S/run" && chmod 700 "$S/key" && chmod 755 "$T" "$S" "$S/run" || fail_all "cannot make $S"
head -c 1024 /dev/urandom >"$S/key/munge.key" && chmod 600 "$S/key/munge.key" || fail_all "cannot write the munge key"
# -F: stays in the foreground, so $! is the daemon (stopped by that id); --force: root and /tmp are fine here
munged -F --force --socket="$S/run/munge.sock" --key-file="$S/key/munge.key" --pid-file="$S/run/munged.pid" \
    --seed-file="$S/key/munged.seed" --log-file="$S/munged.log" >"$S/munged.out" 2>&1 &
PIDS="$PIDS $!"
for i in $(seq 1 50); do [ -S "$S/run/munge.sock" ] && break; sleep 0.1; done
munge -S "$S/run/munge.sock" -n 2>"$S/munge.err" | unmunge -S "$S/run/munge.sock" >/dev/null 2>>"$S/munge.err" ||
    fail_all "munged does not answer: $(tail -c 300 "$S/munged.out" "$S/munge.err")"

ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))') || fail_all "no free ports"
set -- $ports
host=$(hostname -s)   # slurmctld runs only on the host its SlurmctldHost names
# The node says it has 8 CPUs whatever this machine has (config_overrides), so the script's 4 tasks
# of --cpus-per-task=2 run at once, as on a cluster: one at a time, each task's end waits for
# the scheduler's next pass and sbatch --wait's next poll (measured: 42 s instead of ~10 s).
user=$(id -un)
cat >"$S/slurm.conf" <<EOF
ClusterName=attnviztest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$S/run/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=attnviz1 NodeAddr=127.0.0.1 NodeHostname=$host CPUs=8 State=UNKNOWN
PartitionName=attnviz Nodes=attnviz1 Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$S/slurm.conf
# -D: foreground, so $! is the daemon; -i: no state to recover
slurmctld -D -i >"$S/slurmctld.out" 2>&1 &
ctld=$!
PIDS="$PIDS $ctld"
slurmd -D -N attnviz1 >"$S/slurmd.out" 2>&1 &
slurmd=$!
PIDS="$PIDS $slurmd"
# up: the node idle within 30 s; a daemon that exits fails at once with its last words (each
# sinfo bounded: it retries a controller that does not answer)
up=0 end=$(($(date +%s) + 30))
while [ "$(date +%s)" -lt $end ]; do
    alive "$ctld" || fail_all "slurmctld exited: $(grep -v -e pmix -e PMIx -e 'MPI:' "$S/slurmctld.out" | tail -n 3 | tr '\n' ' ')"
    alive "$slurmd" || fail_all "slurmd exited: $(grep -v -e pmix -e PMIx -e 'MPI:' "$S/slurmd.out" | tail -n 3 | tr '\n' ' ')"
    if [ "$(timeout 5 sinfo -h -n attnviz1 -o %t 2>/dev/null)" = idle ]; then up=1; break; fi
    sleep 0.2
done
t_up=$(now)
[ $up -eq 1 ] || fail_all "the node did not come up in 30 s: $(timeout 5 sinfo 2>&1 | tail -2); $(tail -c 300 "$S/slurmctld.out"); $(tail -c 300 "$S/slurmd.out")"

# ---- the docs' job array, from its folder, with attnviz on PATH and the model in ATTNVIZ_MODEL
W=$T/work
mkdir -p "$W/bin" && ln -s "$BIN" "$W/bin/attnviz" && cp "$T/attnviz-shards.sbatch" "$T/submit.sh" "$W/"
# 30 sentences of varied length from the demo model's word list: 4 shards of 8, 8, 7, 7 lines
python3 - tools/demo_words.txt >"$W/corpus.txt" <<'PY'
import random, sys
words = [w.strip() for w in open(sys.argv[1]) if w.strip() and not w.startswith("[")]
r = random.Random(33)
for i in range(30):
    print(" ".join(r.choice(words) for _ in range(r.randint(1, 40))))
PY
export ATTNVIZ_MODEL=$M
t0=$(now)
(cd "$W" && PATH="$W/bin:$PATH" sh -eu ./submit.sh) >"$T/submit.out" 2>&1
rc=$?
t_wait=$(secs "$t0" "$(now)")
# the single, unsharded run
"$BIN" --batch "$W/corpus.txt" --quiet --stats --json "$T/single.stats.json"
"$BIN" heads --batch "$W/corpus.txt" --quiet --json "$T/single.heads.json"
"$BIN" --batch "$W/corpus.txt" --quiet --json "$T/single.jsonl"
why="submit block exit $rc: $(tail -c 400 "$T/submit.out"); $(cat "$W"/shards/*.log 2>/dev/null | tail -c 400)"
same() { # NAME MERGED SINGLE
    if [ $rc -eq 0 ] && [ -s "$3" ] && cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$why $(cmp "$2" "$3" 2>&1 | head -c 200)"; fi
}
same slurm_array_stats_merge_to_the_single_run "$W/stats.json" "$T/single.stats.json"
same slurm_array_heads_merge_to_the_single_run "$W/heads.json" "$T/single.heads.json"
same slurm_array_json_lines_interleave_to_the_single_run "$W/maps.jsonl" "$T/single.jsonl"
# each task's files hold its own shard: 8, 8, 7, 7 inputs, task I's maps the lines I+1, I+5, ...
took=$(for i in 0 1 2 3; do
    f=$(printf '%s/shards/stats.%04d.json' "$W" $i)
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["inputs"], end=" ")' "$f" 2>/dev/null || echo -n "none "
done)
lines_ok=1
for i in 0 1 2 3; do
    cmp -s <(sed -n "$((i + 1))~4p" "$T/single.jsonl") "$(printf '%s/shards/maps.%04d.jsonl' "$W" $i)" || lines_ok=0
done
if [ "$took" = "8 8 7 7 " ] && [ $lines_ok -eq 1 ] && [ "$(ls "$W"/shards/*.log 2>/dev/null | wc -l)" -eq 4 ]; then
    pass slurm_array_tasks_took_their_shards
else
    fail slurm_array_tasks_took_their_shards "inputs per task: $took; lines in place: $lines_ok; logs: $(ls "$W"/shards 2>&1 | tr '\n' ' ')"
fi

# a failing task fails sbatch --wait, so the docs' merge does not run: line 6 is blank (task 1's)
mkdir -p "$T/bad/shards" && cp "$T/attnviz-shards.sbatch" "$T/bad/" && sed '6s/.*//' "$W/corpus.txt" >"$T/bad/corpus.txt"
t0=$(now)
(cd "$T/bad" && PATH="$W/bin:$PATH" sbatch --wait attnviz-shards.sbatch) >"$T/bad.out" 2>&1
brc=$?
t_bad=$(secs "$t0" "$(now)")
if [ $brc -ne 0 ] && grep -q 'corpus.txt:6: empty line; skipped' "$T/bad/shards/1.log" 2>/dev/null &&
    ! grep -q 'empty line' "$T/bad/shards/0.log" "$T/bad/shards/2.log" "$T/bad/shards/3.log" 2>/dev/null; then
    pass slurm_wait_fails_when_a_shard_fails
else
    fail slurm_wait_fails_when_a_shard_fails "sbatch --wait exit $brc: $(tail -c 300 "$T/bad.out"); $(cat "$T/bad/shards/"*.log 2>/dev/null | head -c 300)"
fi

t0=$(now)
daemons_down
t_down=$(secs "$t0" "$(now)")
if [ -z "$STRAYS" ]; then pass slurm_daemons_stopped; else fail slurm_daemons_stopped "$STRAYS"; fi
echo "slurm: daemons up in $(secs "$t_start" "$t_up") s; docs job array (4 tasks, 30 lines, stats + heads + maps) and merge $t_wait s; failing array $t_bad s; stopped in $t_down s; total $(secs "$t_start" "$(now)") s"
finished=1
exit 0
