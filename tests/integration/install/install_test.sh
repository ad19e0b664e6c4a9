#!/usr/bin/env bash
# Installs the build into a temporary prefix P and checks the installed layout
# works on its own, without the build tree:
#   P/lib/uroce/libibverbs.so.1   ibv_devices (Debian) runs on it with only
#                                 LD_LIBRARY_PATH=P/lib/uroce and no
#                                 UROCE_UROCED, so the library must start
#                                 P/libexec/uroce/uroced by itself;
#   P/lib/pkgconfig/uroce.pc      flags that build a verbs program which
#                                 loads P's library through its rpath;
#   P/include/uroce/uroce.h       compiles as C and C++, same version as uroce.pc.
# Usage: install_test.sh CMAKE BUILD_DIR
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (ibv_devices or pkg-config missing).
set -u
if (($# != 2)); then
  echo "usage: $0 CMAKE BUILD_DIR" >&2
  exit 2
fi
cmake_bin=$1
build_dir=$2
for tool in ibv_devices pkg-config cc c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not installed"; exit 77; }
done

prefix=$(mktemp -d "${TMPDIR:-/tmp}/uroce-install.XXXXXX")
daemon_pid=
cleanup() {
  # The daemon this test started (identified by its executable in P) is
  # stopped before P goes away; bounded wait for it to exit.
  if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null
    for _ in $(seq 50); do
      kill -0 "$daemon_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -rf "$prefix"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  exit 1
}

echo "+ cmake --install $build_dir --prefix $prefix"
timeout 60 "$cmake_bin" --install "$build_dir" --prefix "$prefix" || fail "cmake --install failed"
(cd "$prefix" && find . -mindepth 1 | sort)

libdir=$prefix/lib/uroce
[[ -L $libdir/libibverbs.so.1 ]] || fail "lib/uroce/libibverbs.so.1 is not a symlink"
[[ -L $libdir/libibverbs.so ]] || fail "lib/uroce/libibverbs.so is not a symlink"
real=$(readlink -f "$libdir/libibverbs.so.1")
[[ -f $real && $real == "$libdir"/libibverbs.so.1.* ]] || fail "libibverbs.so.1 -> $real"
[[ -x $prefix/libexec/uroce/uroced ]] || fail "libexec/uroce/uroced missing"
[[ -x $prefix/bin/uroce ]] || fail "bin/uroce missing"
[[ -f $prefix/include/uroce/uroce.h ]] || fail "include/uroce/uroce.h missing"
[[ -f $prefix/lib/pkgconfig/uroce.pc ]] || fail "lib/pkgconfig/uroce.pc missing"
echo "ok: layout"

# A daemon name of our own: a daemon is found by name, and this test must see
# the one started from P, not one from the build tree. A long idle time keeps
# it alive long enough to be identified; cleanup stops it.
export UROCE_DAEMON_NAME="${UROCE_DAEMON_NAME:-uroce-install-test}-$$"
export UROCED_IDLE_MS=20000
unset UROCE_UROCED UROCE_LIBDIR
installed_uroced=$(readlink -f "$prefix/libexec/uroce/uroced")

echo "+ LD_LIBRARY_PATH=$libdir ibv_devices"
out=$(LD_LIBRARY_PATH=$libdir timeout --kill-after=5 20 ibv_devices 2>&1)
rc=$?
echo "$out"
((rc == 0)) || fail "ibv_devices exited with $rc"
grep -Eq '^[[:space:]]+uroce_lo[[:space:]]' <<<"$out" || fail "uroce_lo not listed"

# Which uroced serves us: the one whose executable is P's (its /proc/PID/exe).
find_daemon() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    if [[ $exe == "$installed_uroced" ]]; then
      echo "${p#/proc/}"
      return 0
    fi
  done
  return 1
}
daemon_pid=$(find_daemon) || fail "no process runs $installed_uroced: the library did not start the installed daemon"
echo "ok: ibv_devices on P/lib/uroce, served by $installed_uroced (pid $daemon_pid)"

# pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs uroce) || fail "pkg-config --cflags --libs uroce failed"
echo "pkg-config --cflags --libs uroce: $flags"
for want in "-I$prefix/include" "-L$libdir" "-Wl,-rpath,$libdir" "-libverbs"; do
  [[ " $flags " == *" $want "* ]] || fail "pkg-config flags lack '$want'"
done
pc_version=$(pkg-config --modversion uroce)
echo "ok: pkg-config, version $pc_version"

# A verbs program built only from the installed flags: the header compiles as
# C and C++, its version equals uroce.pc's, and the rpath (not
# LD_LIBRARY_PATH) makes it load P's library, which lists uroce_lo.
src=$prefix/probe.c
cat >"$src" <<'PROBE'
#include <uroce/uroce.h>
#include <infiniband/verbs.h>
#include <stdio.h>
int main(void) {
  int n = 0, i;
  struct ibv_device** list = ibv_get_device_list(&n);
  printf("version %s env %s %s %s %s %s\n", UROCE_VERSION_STRING, UROCE_ENV_LOG, UROCE_ENV_NETDEVS,
         UROCE_ENV_DAEMON_NAME, UROCE_ENV_UROCED, UROCE_ENV_UROCED_IDLE_MS);
  if (!list) return 1;
  for (i = 0; i < n; ++i) printf("device %s\n", ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return 0;
}
PROBE
# shellcheck disable=SC2086 # flags are words on purpose
timeout 60 cc -std=c99 -Wall -Wextra -Werror -o "$prefix/probe" "$src" $flags || fail "cc with uroce.pc flags"
cflags=$(pkg-config --cflags uroce)
# shellcheck disable=SC2086
timeout 60 c++ -std=c++20 -Wall -Wextra -Werror -x c++ -fsyntax-only "$src" $cflags ||
  fail "uroce.h does not compile as C++"
ldd_out=$(env -u LD_LIBRARY_PATH ldd "$prefix/probe" | grep libibverbs)
echo "ldd: $ldd_out"
[[ $ldd_out == *"=> $libdir/libibverbs.so.1 "* ]] || fail "probe does not resolve libibverbs.so.1 to $libdir"
probe_out=$(env -u LD_LIBRARY_PATH timeout --kill-after=5 20 "$prefix/probe" 2>&1)
rc=$?
echo "$probe_out"
((rc == 0)) || fail "probe exited with $rc"
grep -qx "device uroce_lo" <<<"$probe_out" || fail "probe did not list uroce_lo"
grep -q "^version $pc_version " <<<"$probe_out" || fail "uroce.h version differs from uroce.pc ($pc_version)"
echo "ok: program built with uroce.pc runs on P's library"
echo "PASS: install layout"
