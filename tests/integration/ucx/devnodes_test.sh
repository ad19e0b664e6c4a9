#!/usr/bin/env bash
# `uroce devnodes` (tools/devnodes.cc) in a directory of its own (--dir), so
# it needs neither root nor /dev: the entries are what UCX accepts (stat:
# a character device; access: readable and writable), one per chosen
# device, named as ibv_device.dev_name; a second run changes nothing; an
# entry that is not its own is left alone and reported; an unknown device
# is an error; --remove takes its links and the emptied directory away.
# On this test's uroced the devices are those of the host (uroce_lo at least).
set -u
cli=${UROCE_CLI:?UROCE_CLI: the uroce tool (set by CTest)}
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-devnodes.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
dir=$work/infiniband
fail() {
  echo "FAIL: $*"
  exit 1
}

# uroce_lo is named: exactly one entry, UCX would take it.
"$cli" devnodes --dir "$dir" uroce_lo >"$work/out" 2>&1 || { cat "$work/out"; fail "devnodes uroce_lo failed"; }
cat "$work/out"
mapfile -t entries < <(ls "$dir")
((${#entries[@]} == 1)) || fail "expected one entry, got: ${entries[*]}"
e=$dir/${entries[0]}
[[ ${entries[0]} =~ ^uverbs[0-9]+$ ]] || fail "entry ${entries[0]} is not uverbs<N>"
[[ -c $e && -r $e && -w $e ]] || fail "$e is no readable and writable character device"
[[ $(readlink "$e") == /dev/null ]] || fail "$e does not lead to /dev/null"
grep -q "${entries[0]} -> /dev/null: created (uroce_lo)" "$work/out" || fail "no 'created' line"

# Again: nothing changes.
"$cli" devnodes --dir "$dir" uroce_lo >"$work/out" 2>&1 || fail "second run failed"
grep -q "there already (uroce_lo)" "$work/out" || fail "second run did not find its entry"

# Someone else's entry is left alone and reported.
rm "$e"
: >"$e"
if "$cli" devnodes --dir "$dir" uroce_lo >"$work/out" 2>&1; then fail "a plain file was accepted"; fi
grep -q "left alone" "$work/out" || fail "no 'left alone' line"
[[ -f $e && ! -L $e ]] || fail "the other entry was touched"
rm "$e"

# An unknown device.
if "$cli" devnodes --dir "$dir" uroce_nosuchdevice >"$work/out" 2>&1; then fail "an unknown device was accepted"; fi
grep -q "no device uroce_nosuchdevice" "$work/out" || fail "no error line for an unknown device"

# The default choice: an entry for every device, except uroce_lo when there
# are others; --remove takes every one away, and the directory.
"$cli" devnodes --dir "$dir" >"$work/out" 2>&1 || { cat "$work/out"; fail "devnodes (default) failed"; }
cat "$work/out"
n=$(grep -c -- "-> /dev/null: created" "$work/out")
((n >= 1)) || fail "no entry made by default"
if grep -q "created (uroce_lo)" "$work/out" && ((n != 1)); then
  fail "uroce_lo got an entry beside other devices"
fi
"$cli" devnodes --remove --dir "$dir" >"$work/out" 2>&1 || fail "--remove failed"
[[ ! -e $dir ]] || fail "$dir is still there after --remove: $(ls "$dir")"
echo "PASS"
