#!/bin/bash
# The README's quick start on a fresh Debian machine. A minimal Debian 12 root (debootstrap
# --variant=minbase bookworm: no compiler, no make, no git), then, inside it (chroot), what the
# README tells a person to do: install its prerequisites (`apt-get install -y make git`), clone the
# repository (HEAD of the checkout under test: the committed tree, as a git bundle) and run
# `make demo`, which must install the build packages itself (tools/deps.sh), build, and write
# attnviz.html. Before that, in the same bare root: plain `make` stops with the one-line
# missing-packages error, and `make -n demo` / `make -n test` reach tools/deps.sh first instead of
# stopping at parse time. (`make test` itself is far too heavy to run in here.)
# The base root is debootstrapped once and cached as a tar outside the repository,
# ${ATTNVIZ_CACHE:-~/.cache/attnviz}/debroot-bookworm-minbase-ARCH.tar; each run unpacks a fresh
# copy, and everything mounted for it (/proc, a tmpfs /dev) lives in a mount namespace of its own,
# so it is gone when the test ends however it ends. Needs root (debootstrap, chroot, mount; CI
# runs as root) and debootstrap (tools/deps.sh test installs it): without them it FAILs.
set -u
cd "$(dirname "$0")/../.."
if [ -z "${ATTNVIZ_FRESH_NS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "FAIL fresh_machine: needs root (debootstrap, chroot and mount); run it as root, as CI does"
        exit 1
    fi
    for c in debootstrap unshare chroot git tar; do
        if ! command -v $c >/dev/null 2>&1; then
            echo "FAIL fresh_machine: $c is not installed (tools/deps.sh test installs debootstrap)"
            exit 1
        fi
    done
    # a private mount namespace: /proc and /dev mounted below vanish with this process
    exec unshare --mount --propagation private env ATTNVIZ_FRESH_NS=1 "$0" "$@"
fi
. tests/e2e/lib.sh # T: removed on exit (after the unmounts below)
failed=0
fail() { echo "FAIL $1: $2"; failed=1; }

suite=bookworm
mirror=${ATTNVIZ_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${ATTNVIZ_CACHE:-$HOME/.cache/attnviz}
base=$cache/debroot-$suite-minbase-$(dpkg --print-architecture).tar
prereq="make git" # what the README's quick start installs first
R=$T/root

cleanup() {
    local m
    for m in "$R/dev" "$R/proc"; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
    if grep -q " $R/" /proc/self/mounts; then
        echo "FAIL fresh_machine: still mounted under $R, left in place: $(grep " $R/" /proc/self/mounts)"
        return
    fi
    rm -rf --one-file-system "$T"
    echo "  fresh_machine_test.sh: $(($(date +%s) - start)) s (the root's removal included)"
}
start=$(date +%s)
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the cached base root ---
if [ ! -s "$base" ]; then
    echo "  building the base root (debootstrap --variant=minbase $suite; once, cached in $base)"
    mkdir -p "$cache" "$T/base" || exit 1
    if ! debootstrap --variant=minbase "$suite" "$T/base" "$mirror" >"$T/debootstrap.log" 2>&1; then
        echo "FAIL fresh_machine: debootstrap failed: $(tail -5 "$T/debootstrap.log")"
        exit 1
    fi
    rm -rf "$T/base/var/cache/apt/archives/"*.deb
    tar -C "$T/base" -cf "$base.tmp$$" . && mv "$base.tmp$$" "$base" || { echo "FAIL fresh_machine: cannot write $base"; exit 1; }
    rm -rf --one-file-system "$T/base"
    echo "  base root built in $(($(date +%s) - start)) s"
fi
mkdir "$R" && tar -C "$R" -xf "$base" || { echo "FAIL fresh_machine: cannot unpack $base"; exit 1; }
if [ -e "$R/usr/bin/make" ] || [ -e "$R/usr/bin/cc" ] || [ -e "$R/usr/bin/git" ]; then
    fail base_root_is_bare "the base root already has make, cc or git: not a fresh machine ($base)"
else
    pass base_root_is_bare
fi

# --- what a booted machine has: /proc, a minimal /dev, name resolution ---
mount -t proc proc "$R/proc" || { echo "FAIL fresh_machine: cannot mount /proc"; exit 1; }
mount -t tmpfs -o mode=755,size=16m devtmp "$R/dev" || { echo "FAIL fresh_machine: cannot mount /dev"; exit 1; }
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    set -- $n
    mknod -m 666 "$R/dev/$1" c "$2" "$3"
done
mkdir -m 1777 "$R/dev/shm" && mkdir "$R/dev/pts"
ln -s /proc/self/fd "$R/dev/fd" && ln -s fd/0 "$R/dev/stdin" && ln -s fd/1 "$R/dev/stdout" && ln -s fd/2 "$R/dev/stderr"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"

# in_root NAME CMD: runs CMD (sh -c) in the root as root with a login's bare environment;
# output to $T/NAME.out, status returned
in_root() {
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        chroot "$R" /bin/sh -c "$2" </dev/null >"$T/$1.out" 2>&1
}

# --- the README's prerequisites, and the clone (of the committed HEAD) ---
if ! git show HEAD:README.md | grep -q "apt-get install -y $prereq"; then
    fail readme_names_the_prerequisites "the committed README.md has no 'apt-get install -y $prereq'"
else
    pass readme_names_the_prerequisites
fi
head=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
    echo "  note: the work tree has uncommitted changes; this tests the committed HEAD $head"
git bundle create -q "$R/tmp/attnviz.bundle" HEAD 2>"$T/bundle.err" || { echo "FAIL fresh_machine: git bundle: $(cat "$T/bundle.err")"; exit 1; }
t0=$(date +%s)
if in_root prereq "apt-get update && apt-get install -y $prereq"; then
    pass "prerequisites_install ($(($(date +%s) - t0)) s)"
else
    fail prerequisites_install "$(tail -5 "$T/prereq.out")"
    exit 1
fi
if in_root clone "git clone -q /tmp/attnviz.bundle /src/attnviz && cd /src/attnviz && git checkout -q --detach $head && git rev-parse HEAD" &&
    [ "$(tail -1 "$T/clone.out")" = "$head" ]; then
    pass "clone_of_head (${head:0:12})"
else
    fail clone_of_head "$(tail -5 "$T/clone.out")"
    exit 1
fi

# --- before any build package is there ---
in_root plain_make "cd /src/attnviz && make"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$T/plain_make.out")" -eq 1 ] &&
    grep -qE '^Makefile:[0-9]+: \*\*\* missing pkg-config packages: libcjson .*\(run tools/deps.sh or `make deps`\)\.  Stop\.$' "$T/plain_make.out"; then
    pass plain_make_names_the_missing_packages_in_one_line
else
    fail plain_make_names_the_missing_packages_in_one_line "exit $rc: $(cat "$T/plain_make.out")"
fi
for goal in demo test; do
    mode=build
    [ $goal = test ] && mode=test
    in_root "n_$goal" "cd /src/attnviz && make -n $goal"
    if [ "$(head -1 "$T/n_$goal.out")" = "tools/deps.sh $mode" ]; then
        pass "make_${goal}_runs_deps_sh_before_the_package_check"
    else
        fail "make_${goal}_runs_deps_sh_before_the_package_check" "make -n $goal began with: $(head -3 "$T/n_$goal.out")"
    fi
done

# --- the README's first command ---
t0=$(date +%s)
in_root demo "cd /src/attnviz && make demo"
rc=$?
demo_s=$(($(date +%s) - t0))
page=$R/src/attnviz/attnviz.html
if [ $rc -ne 0 ]; then
    fail make_demo_on_a_fresh_machine "exit $rc after $demo_s s: $(tail -20 "$T/demo.out")"
elif ! grep -q '^attnviz: installing from Debian:.* gcc.* libcjson-dev' "$T/demo.out"; then
    fail make_demo_on_a_fresh_machine "tools/deps.sh did not install the build packages: $(head -5 "$T/demo.out")"
elif ! grep -q 'Page written: /src/attnviz/attnviz.html' "$T/demo.out"; then
    fail make_demo_on_a_fresh_machine "no 'Page written' line: $(tail -20 "$T/demo.out")"
else
    pass "make_demo_on_a_fresh_machine ($demo_s s)"
fi
size=$(stat -c %s "$page" 2>/dev/null || echo 0)
if [ "$size" -gt 100000 ] && grep -q '<title>attnviz — time flies like an arrow</title>' "$page" &&
    grep -q '"tokens":\["\[CLS\]","time","flies","like","an","arrow","\[SEP\]"\]' "$page" &&
    tail -c 20 "$page" | grep -q '</html>'; then
    pass "demo_page_written ($size bytes)"
else
    fail demo_page_written "$page: $size bytes; title: $(grep -o '<title>[^<]*</title>' "$page" 2>/dev/null)"
fi
exit $failed
