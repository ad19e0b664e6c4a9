#!/usr/bin/env bash
# The Debian package, end to end: `cpack -G DEB` builds
# uroce_<version>_amd64.deb from this build tree; dpkg installs it inside a
# private mount namespace whose /usr, /etc and /var are overlays on tmpfs (the
# host's files and dpkg database are never written); there, with no
# LD_LIBRARY_PATH and no UROCE_UROCED:
#   - Debian's ibv_devices lists uroce_lo (the ld.so.conf.d entry put uroce's
#     libibverbs.so.1 ahead of rdma-core's; the library started the installed
#     /usr/libexec/uroce/uroced);
#   - an ibv_rc_pingpong pair runs (tests/integration/debian/run_pair.sh);
#   - man -l renders each man page, and man finds them by name;
# then dpkg -r removes it and nothing of it is left: none of its paths, no
# ld.so.cache entry, ibv_devices back on rdma-core's library.
# Usage: deb_package_test.sh CPACK BUILD_DIR PORT
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (not root, or a tool missing).
set -u
if [[ ${1:-} == --inside ]]; then
  inside=1
  shift
fi
if (($# != 3)); then
  echo "usage: $0 CPACK BUILD_DIR PORT" >&2
  exit 2
fi
cpack_bin=$1
build_dir=$2
port=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() {
  echo "FAIL: $*"
  exit 1
}

if [[ -z ${inside:-} ]]; then
  ((EUID == 0)) || { echo "SKIP: needs root (mount namespace, dpkg)"; exit 77; }
  for tool in unshare dpkg dpkg-deb ldconfig man ibv_devices ibv_rc_pingpong; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not installed"; exit 77; }
  done
  work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-deb.XXXXXX")
  trap 'umount -R "$work/fs" 2>/dev/null; rm -rf "$work"' EXIT
  echo "+ cpack -G DEB"
  (cd "$build_dir" && timeout 120 "$cpack_bin" -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) ||
    { cat "$work/cpack.log"; fail "cpack failed"; }
  debs=("$work"/pkg/uroce_*_amd64.deb)
  [[ -f ${debs[0]} ]] || fail "no uroce_<version>_amd64.deb in $(ls "$work/pkg")"
  echo "package: $(basename "${debs[0]}")"
  export UROCE_DEB=${debs[0]} UROCE_DEB_WORK=$work
  timeout --kill-after=5 150 unshare -m --propagation private bash "$0" --inside "$@"
  exit $?
fi

# --- inside the private mount namespace ---
work=$UROCE_DEB_WORK
deb=$UROCE_DEB
mkdir -p "$work/fs"
mount -t tmpfs tmpfs "$work/fs" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
for d in usr etc var; do
  mkdir -p "$work/fs/$d-up" "$work/fs/$d-work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$work/fs/$d-up,workdir=$work/fs/$d-work" "/$d" ||
    { echo "SKIP: no overlayfs for /$d"; exit 77; }
done

# Processes of ours that outlive a step (the daemon) are found by mount
# namespace and stopped at the end, bounded.
my_ns=$(readlink /proc/self/ns/mnt)
stop_daemons() {
  local p pids=()
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$my_ns" ]] || continue
    [[ $(readlink "$p/exe" 2>/dev/null) == /usr/libexec/uroce/uroced ]] && pids+=("${p#/proc/}")
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  for _ in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null
}
trap stop_daemons EXIT

unset LD_LIBRARY_PATH UROCE_UROCED UROCE_LIBDIR
export UROCE_DAEMON_NAME="deb-package-test-$$" UROCED_IDLE_MS=2000

echo "+ dpkg -i $(basename "$deb")"
dpkg -i "$deb" || fail "dpkg -i failed"
mapfile -t paths < <(dpkg -L uroce | grep -v '^/\.$')
echo "installed: ${#paths[@]} paths"
[[ -f /etc/ld.so.conf.d/00-uroce.conf ]] || fail "no /etc/ld.so.conf.d/00-uroce.conf"
ldconfig -p | grep -q 'libibverbs.so.1 .*=> /usr/lib/uroce/libibverbs.so.1$' || fail "ld.so.cache does not know /usr/lib/uroce"
lib=$(ldd "$(command -v ibv_devices)" | awk '/libibverbs.so.1/ {print $3}')
[[ $lib == /usr/lib/uroce/libibverbs.so.1 ]] || fail "ibv_devices loads $lib"
echo "ok: ibv_devices loads $lib"

echo "+ ibv_devices"
out=$(timeout --kill-after=5 20 ibv_devices 2>&1) || { echo "$out"; fail "ibv_devices failed"; }
echo "$out"
grep -Eq '^[[:space:]]+uroce_lo[[:space:]]' <<<"$out" || fail "uroce_lo not listed"

echo "+ ibv_rc_pingpong pair"
bash "$here/../debian/run_pair.sh" "$port" ibv_rc_pingpong -d uroce_lo -g 1 || fail "ibv_rc_pingpong pair failed"

for page in /usr/share/man/man1/uroce.1 /usr/share/man/man8/uroced.8 /usr/share/man/man7/uroce.7; do
  [[ -f $page ]] || fail "$page not installed"
  text=$(MANWIDTH=80 man -l "$page" 2>"$work/man.err") || fail "man -l $page failed"
  [[ -s $work/man.err ]] && { cat "$work/man.err"; fail "man -l $page warned"; }
  grep -q '^NAME' <<<"$text" || fail "man -l $page rendered no NAME section"
done
MANWIDTH=80 man 7 uroce 2>/dev/null | grep -q 'UROCE_LINK' || fail "man 7 uroce does not find the page"
echo "ok: man pages render"

stop_daemons
echo "+ dpkg -r uroce"
dpkg -r uroce || fail "dpkg -r failed"
left=0
for p in "${paths[@]}"; do
  # Directories the package shares with others (/usr/bin, ...) stay.
  if [[ -e $p || -L $p ]] && ! { [[ -d $p ]] && [[ $p != */uroce ]]; }; then
    echo "left behind: $p"
    left=1
  fi
done
((left == 0)) || fail "dpkg -r left files"
if ldconfig -p | grep -q /usr/lib/uroce; then fail "ld.so.cache still names /usr/lib/uroce"; fi
lib=$(ldd "$(command -v ibv_devices)" | awk '/libibverbs.so.1/ {print $3}')
[[ $lib != /usr/lib/uroce/* ]] || fail "ibv_devices still loads $lib"
echo "ok: removed; ibv_devices loads $lib again"
echo "PASS"
