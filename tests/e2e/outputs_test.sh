#!/bin/bash
# A run's outputs are committed together (util.h's AvOutSet): every one is written to a temporary
# file and renamed into place only once all are written, so a failure of any (a full disk, a
# missing folder) leaves every old output as it was and no temporary behind. The full disk is a
# small tmpfs mounted here (root only: SKIP otherwise).
cd "$(dirname "$0")/../.." || exit 1
. tests/e2e/lib.sh
BIN=$PWD/attnviz
M=$PWD/weights/demo
TEXT="the cat sat on the mat"

# olds DIR NAMES...: each output holds the text "old NAME" before a run
olds() {
    local d=$1
    shift
    for n in "$@"; do echo "old $n" >"$d/$n"; done
}
# unchanged NAME DIR NAMES...: every output still old, nothing else in DIR (no temporary)
unchanged() {
    local name=$1 d=$2
    shift 2
    for n in "$@"; do
        [ "$(cat "$d/$n" 2>/dev/null)" = "old $n" ] || { fail "$name" "$n was replaced: $(head -c 80 "$d/$n")"; return; }
    done
    local left
    left=$(ls -A "$d" | grep -vxF -f <(printf '%s\n' "$@" filler) || true)
    [ -z "$left" ] || { fail "$name" "left behind: $left"; return; }
    pass "$name"
}

# a missing folder for the second output: the first is not replaced either
D=$T/dir && mkdir -p "$D"
olds "$D" a.json
expect_exit outputs_second_in_a_missing_folder_fails 1 "missing/b.html: cannot write: No such file or directory" \
    "$BIN" --model "$M" --quiet --json "$D/a.json" --html "$D/missing/b.html" "$TEXT"
unchanged outputs_first_kept_when_the_second_folder_is_missing "$D" a.json
olds "$D" a.json a.npy
expect_exit outputs_npy_set_then_a_missing_folder_fails 1 "missing/b.html: cannot write" \
    "$BIN" --model "$M" --quiet --json "$D/a.json" --npy "$D/a.npy" --qk --html "$D/missing/b.html" "$TEXT"
unchanged outputs_json_and_npy_set_kept_when_the_page_cannot_be_written "$D" a.json a.npy
E=$T/diff && mkdir -p "$E"
olds "$E" d.json
expect_exit outputs_diff_second_in_a_missing_folder_fails 1 "missing/d.html: cannot write" \
    "$BIN" diff --model "$M" --quiet --json "$E/d.json" --html "$E/missing/d.html" "$TEXT" "the dog sat on the mat"
unchanged outputs_diff_json_kept_when_its_page_folder_is_missing "$E" d.json
# and when everything can be written, everything is
"$BIN" --model "$M" --quiet --json "$D/a.json" --npy "$D/a.npy" --html "$D/a.html" "$TEXT"
if grep -q '"tokens"' "$D/a.json" && [ -s "$D/a.html" ] && [ "$(head -c 6 "$D/a.npy" | tail -c 5)" = "NUMPY" ]; then
    pass outputs_all_written_together_when_they_can_be
else
    fail outputs_all_written_together_when_they_can_be "$(ls -la "$D")"
fi

# a full disk: a tmpfs of 320 kB holds the JSON (about 107 kB) and the .npy set (105 kB) of this
# input, not its page (287 kB) as well
F=$T/full && mkdir -p "$F"
if [ "$(id -u)" != 0 ]; then
    skip outputs_on_a_full_disk "mounting a tmpfs needs root"
elif ! mount -t tmpfs -o size=320k attnviz-full "$F" 2>"$T/mount.err"; then
    skip outputs_on_a_full_disk "cannot mount a tmpfs: $(cat "$T/mount.err")"
else
    olds "$F" a.json a.npy a.queries.npy a.keys.npy a.html
    expect_exit outputs_full_disk_fails_with_the_reason 1 "a.html: .*No space left on device" \
        "$BIN" --model "$M" --quiet --json "$F/a.json" --npy "$F/a.npy" --qk --html "$F/a.html" "$TEXT"
    unchanged outputs_full_disk_leaves_every_old_output_and_no_temporary "$F" a.json a.npy a.queries.npy a.keys.npy a.html
    # the same outputs fit once the page is not asked for
    "$BIN" --model "$M" --quiet --json "$F/a.json" --npy "$F/a.npy" --qk "$TEXT" 2>"$T/err"
    if [ $? -eq 0 ] && grep -q '"tokens"' "$F/a.json"; then pass outputs_full_disk_what_fits_is_written
    else fail outputs_full_disk_what_fits_is_written "$(cat "$T/err")"; fi
    umount "$F" || fail outputs_tmpfs_unmounted "umount $F failed"
fi
exit 0
