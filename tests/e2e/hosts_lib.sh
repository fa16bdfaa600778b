# hosts_lib.sh — throw-away "hosts" on this machine for testing `parallel --sshlogin` for real
# (sourced by tests/e2e/corpus_hosts_test.sh and bench/corpus_bench.sh, not run).
#
# hosts_up DIR N makes N network namespaces, each running its own OpenSSH server, and one
# client namespace joined to each host by a veth pair. The addresses are in the loopback range
# (127.77.I.1 client side, 127.77.I.2 host I): the client and hosts keep their own lo down, so
# 127/8 is not claimed as local there and route_localnet lets it cross the veths. Nothing is
# added to the caller's namespace, and every key, known_hosts and config lives in DIR: the
# user's ~/.ssh is never read or written (HOME points into DIR for the client).
# The namespaces share the filesystem, so a binary and a model run in place on every host.
#
# hosts_run CMD... (or "${HOSTS_EXEC[@]}" CMD...) runs CMD in the client namespace, where ssh
# reaches the hosts by the names in HOSTS (av1, av2, ...) through $HOSTS_SSH. hosts_down (idempotent) kills the sshd processes
# and deletes the namespaces; callers trap it on EXIT.

HOSTS=""              # the hosts' names for --sshlogin, space separated
HOSTS_SSH=""          # the ssh command parallel should use (--ssh)
HOSTS_WHY=""          # why hosts_up failed
HOSTS_EXEC=()         # the command prefix of hosts_run (for wrappers that need a program, e.g. time)
_hosts_ns=()          # namespaces made, the client first
_hosts_pids=()        # sshd processes started
_hosts_dir=""
_hosts_made_run_sshd=0

# hosts_unavailable: prints why this machine cannot make the hosts (and returns 0), else returns 1
hosts_unavailable() {
    if [ "$(id -u)" -ne 0 ]; then echo "needs root (network namespaces)"; return 0; fi
    command -v ip >/dev/null || { echo "no ip (Debian's iproute2)"; return 0; }
    [ -x /usr/sbin/sshd ] || { echo "no /usr/sbin/sshd (Debian's openssh-server)"; return 0; }
    command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || { echo "no ssh/ssh-keygen (openssh-client)"; return 0; }
    command -v parallel >/dev/null || { echo "no GNU parallel"; return 0; }
    local probe="avprobe$$" err
    if ! err=$(ip netns add "$probe" 2>&1); then
        echo "cannot create a network namespace here (no CAP_NET_ADMIN or netns unsupported): $err"
        return 0
    fi
    ip netns del "$probe" 2>/dev/null
    return 1
}

hosts_down() {
    local p ns
    for p in "${_hosts_pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${_hosts_pids[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
    _hosts_pids=()
    # sessions still open in a host (an interrupted job) would keep its namespace alive
    for ns in "${_hosts_ns[@]}"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    done
    # deleting a namespace destroys the veth ends inside it, and so their peers
    for ns in "${_hosts_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
    _hosts_ns=()
    if [ "$_hosts_made_run_sshd" -eq 1 ]; then rmdir /run/sshd 2>/dev/null; _hosts_made_run_sshd=0; fi
}

_hosts_fail() { HOSTS_WHY=$1; hosts_down; return 1; }

# hosts_up DIR N
hosts_up() {
    local d=$1 n=$2 p="av$$" i ns cl addr user
    _hosts_dir=$d
    user=$(id -un)
    mkdir -p "$d/home" && chmod 700 "$d" "$d/home" || { _hosts_fail "cannot make $d"; return 1; }
    ssh-keygen -q -t ed25519 -N "" -C attnviz-test-client -f "$d/id" || { _hosts_fail "ssh-keygen failed"; return 1; }
    ssh-keygen -q -t ed25519 -N "" -C attnviz-test-host -f "$d/hostkey" || { _hosts_fail "ssh-keygen failed"; return 1; }
    cp "$d/id.pub" "$d/authorized_keys"
    if [ ! -d /run/sshd ]; then # sshd's privilege separation directory (systemd makes it for ssh.service)
        mkdir -m 755 /run/sshd && _hosts_made_run_sshd=1
    fi
    cl="${p}c"
    ip netns add "$cl" || { _hosts_fail "ip netns add $cl failed"; return 1; }
    _hosts_ns+=("$cl")
    ip netns exec "$cl" sysctl -q -w net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.default.route_localnet=1 \
        || { _hosts_fail "cannot set route_localnet in $cl"; return 1; }
    : >"$d/known_hosts"
    {
        echo "Host *"
        echo "  User $user"
        echo "  IdentityFile $d/id"
        echo "  IdentitiesOnly yes"
        echo "  UserKnownHostsFile $d/known_hosts"
        echo "  GlobalKnownHostsFile /dev/null"
        echo "  StrictHostKeyChecking yes"
        echo "  BatchMode yes"
        echo "  ConnectTimeout 5"
        echo "  ControlMaster no"
        echo "  LogLevel ERROR"
    } >"$d/ssh_config"
    HOSTS=""
    for i in $(seq 1 "$n"); do
        ns="${p}h$i"
        addr="127.77.$i.2"
        ip netns add "$ns" || { _hosts_fail "ip netns add $ns failed"; return 1; }
        _hosts_ns+=("$ns")
        ip link add "${p}c$i" netns "$cl" type veth peer name "${p}h$i" netns "$ns" \
            || { _hosts_fail "cannot make a veth pair"; return 1; }
        ip netns exec "$ns" sysctl -q -w net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.default.route_localnet=1 \
            && ip -n "$cl" addr add "127.77.$i.1/30" dev "${p}c$i" \
            && ip -n "$ns" addr add "$addr/30" dev "${p}h$i" \
            && ip -n "$cl" link set "${p}c$i" up \
            && ip -n "$ns" link set "${p}h$i" up \
            || { _hosts_fail "cannot address the veth pair of host $i"; return 1; }
        cat >"$d/sshd$i.conf" <<EOF
ListenAddress $addr:22
HostKey $d/hostkey
PidFile $d/sshd$i.pid
AuthorizedKeysFile $d/authorized_keys
AllowUsers $user
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
MaxStartups 64
MaxSessions 64
LogLevel VERBOSE
EOF
        ip netns exec "$ns" /usr/sbin/sshd -D -e -f "$d/sshd$i.conf" 2>>"$d/sshd$i.log" &
        _hosts_pids+=($!)
        echo "$addr $(cut -d' ' -f1,2 "$d/hostkey.pub")" >>"$d/known_hosts"
        printf 'Host av%s\n  HostName %s\n' "$i" "$addr" >>"$d/ssh_config"
        HOSTS="$HOSTS av$i"
    done
    HOSTS=${HOSTS# }
    HOSTS_SSH="ssh -F $d/ssh_config"
    HOSTS_EXEC=(ip netns exec "$cl" env HOME="$d/home")
    # wait until every server answers (sshd -D listens within milliseconds; allow 10 s)
    local h ok
    for h in $HOSTS; do
        ok=0
        for _ in $(seq 1 50); do
            if hosts_run $HOSTS_SSH "$h" true 2>"$d/probe.err"; then ok=1; break; fi
            sleep 0.2
        done
        [ $ok -eq 1 ] || { _hosts_fail "ssh to $h failed: $(tail -n 2 "$d/probe.err") $(tail -n 3 "$d/sshd${h#av}.log")"; return 1; }
    done
    return 0
}

hosts_run() { "${HOSTS_EXEC[@]}" "$@"; }
