#!/usr/bin/env bash
# A clone anywhere passes (issue 30): the tests that run something as
# another user (those that source ../other_user_lib.sh:
# isolation/other_user_test.sh and netns/xdp_noprivs.sh; a new one goes in
# `names` below) are run again from a tree laid out as a clone built in
# place under a mode-0700 directory, as /root is, where user nobody can
# read nothing. At 331d140 both failed there: other_user_test.sh at its
# check that nobody can read the library, and xdp_noprivs.sh's pair, whose
# loader skipped the unreadable build/lib and took Debian's
# libibverbs.so.1 ("Failed to get IB devices list: Function not
# implemented").
#
# What lies under the 0700 directory: this checkout's tests/integration
# (the scripts as they are in the working tree, uncommitted changes
# included) and this build's libraries and uroced, at build/lib and
# build/bin as in the build tree. Not a `git clone` and a fresh build: a
# build takes most of the time CI has left, copying the built files a
# second, and a clone of HEAD would leave out the working tree's changes
# to the scripts under test. Every path the inner tests are given lies
# under the 0700 directory, as does their working directory, with the
# environment CTest gives them (tests/CMakeLists.txt, uroce_script_test),
# so they meet what they meet in such a clone.
#
# Usage: clone_anywhere_test.sh SOURCE_DIR (UROCE_LIBDIR and UROCE_UROCED
# from CTest)
# Exit: 0 pass, 1 fail, 77 skipped (not root, or an inner test skipped:
# one line says which and why).
set -u
src=${1:?usage: clone_anywhere_test.sh SOURCE_DIR}
lib=${UROCE_LIBDIR:?UROCE_LIBDIR (set by CTest)}
uroced=${UROCE_UROCED:?UROCE_UROCED (set by CTest)}
if ((EUID != 0)); then
  echo "SKIP: needs root (the other-user tests run processes as user nobody)"
  exit 77
fi
command -v setpriv >/dev/null 2>&1 || { echo "SKIP: no setpriv (util-linux)"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }

priv=$(mktemp -d "${TMPDIR:-/tmp}/uroce-clone0700.XXXXXX") || exit 1
trap 'rm -rf "$priv"' EXIT
trap 'exit 1' INT TERM
clone=$priv/uroce
if ! chmod 700 "$priv" ||
  ! mkdir -p "$clone/tests" "$clone/build/lib" "$clone/build/bin" "$clone/build/tests" ||
  ! cp -a "$src/tests/integration" "$clone/tests/" ||
  ! cp -P "$lib"/libibverbs.so* "$lib"/librdmacm.so* "$clone/build/lib/" ||
  ! cp "$uroced" "$clone/build/bin/uroced"; then
  echo "FAIL: cannot lay out the clone in $priv"
  exit 1
fi
# The premise: user nobody cannot read the clone's library.
if setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$clone/build/lib/libibverbs.so.1"; then
  echo "FAIL: user nobody can read $clone/build/lib/libibverbs.so.1 in a mode-0700 directory: this test would prove nothing"
  exit 1
fi

t=$clone/tests/integration
names=(isolation_other_user netns_xdp_noprivs)
declare -A rc
for name in "${names[@]}"; do
  case $name in
    isolation_other_user) c=(bash "$t/isolation/other_user_test.sh") ;;
    netns_xdp_noprivs) c=(bash "$t/netns/with_netns.sh" -- bash "$t/netns/xdp_noprivs.sh" 18515) ;;
  esac
  (cd "$clone/build/tests" &&
    exec env UROCE_LIBDIR="$clone/build/lib" LD_LIBRARY_PATH="$clone/build/lib" \
      UROCE_UROCED="$clone/build/bin/uroced" UROCED_IDLE_MS=300 \
      UROCE_DAEMON_NAME="${UROCE_DAEMON_NAME:-ctest-clone_anywhere}-$name" RUN_PAIR_TIMEOUT_S=40 \
      timeout --kill-after=5 60 "${c[@]}") >"$priv/$name.out" 2>&1
  rc[$name]=$?
done

skipped=()
failed=()
for name in "${names[@]}"; do
  case ${rc[$name]} in
    0) ;;
    77) skipped+=("$name: $(grep -m1 '^SKIP' "$priv/$name.out")") ;;
    *) failed+=("$name") ;;
  esac
done
if ((${#failed[@]} == 0 && ${#skipped[@]})); then
  echo "SKIP: in a clone under a mode-0700 directory, ${skipped[*]}"
  exit 77
fi
for name in "${names[@]}"; do
  echo "----- $name, in $clone (exit ${rc[$name]}) -----"
  cat "$priv/$name.out"
done
echo "-----"
if ((${#failed[@]})); then
  echo "FAIL: in a clone under a mode-0700 directory: ${failed[*]}"
  exit 1
fi
echo "PASS: in a clone under a mode-0700 directory the other-user tests pass: ${names[*]}"
