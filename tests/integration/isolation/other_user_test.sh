#!/usr/bin/env bash
# Another user's process may not use this user's uroced (issue 15;
# daemon/peer_check.h). A root uroced is started under this test's daemon
# name; a process of user `nobody` that names the same daemon
# (UROCE_DAEMON_NAME) gets EACCES from ibv_get_device_list (ibv_devices:
# "Permission denied") and so does a pingpong, while root's own programs on
# that daemon still work. At d6939fc the nobody process was served: it
# opened the device and connected a QP to a root process's.
#
# Every program here, root's and nobody's, runs on a copy of the library
# and uroced in a directory user nobody can read (../other_user_lib.sh):
# the build tree may sit in a mode-0700 directory, as a clone in /root does.
set -u
# shellcheck source=../other_user_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../other_user_lib.sh"
fail() {
  echo "FAIL: $*"
  exit 1
}
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: needs root (to run a process as another user)"
  exit 77
fi
command -v setpriv >/dev/null || {
  echo "SKIP: no setpriv (util-linux)"
  exit 77
}
id nobody >/dev/null 2>&1 || {
  echo "SKIP: no user nobody"
  exit 77
}
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env "$@"; }
copy_for_user as_nobody
trap 'rm -rf "$user_copy"' EXIT
lib=$UROCE_LIBDIR
uroced=$UROCE_UROCED

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-other-user.XXXXXX") || exit 1
export UROCED_IDLE_MS=20000
"$uroced" </dev/null >"$work/uroced.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work" "$user_copy"' EXIT

# root, on its own daemon: the devices are listed (the daemon is up).
ok=0
for _ in $(seq 50); do
  if ibv_devices >"$work/root.out" 2>&1 && grep -q uroce_lo "$work/root.out"; then
    ok=1
    break
  fi
  sleep 0.1
done
((ok)) || { cat "$work/root.out"; fail "root's ibv_devices on its own daemon"; }

# nobody, naming root's daemon: refused.
as_nobody LD_LIBRARY_PATH="$lib" UROCE_UROCED="$uroced" UROCE_DAEMON_NAME="$UROCE_DAEMON_NAME" \
  ibv_devices >"$work/nobody.out" 2>&1
rc=$?
cat "$work/nobody.out"
((rc != 0)) || fail "nobody's ibv_devices succeeded on root's daemon"
grep -q "Permission denied" "$work/nobody.out" || fail "nobody's ibv_devices: no 'Permission denied'"
grep -q "uroce_lo" "$work/nobody.out" && fail "nobody was shown root's devices"

as_nobody LD_LIBRARY_PATH="$lib" UROCE_UROCED="$uroced" UROCE_DAEMON_NAME="$UROCE_DAEMON_NAME" \
  timeout 20 ibv_rc_pingpong -d uroce_lo -g 1 -n 5 >"$work/pp.out" 2>&1
rc=$?
cat "$work/pp.out"
((rc != 0 && rc != 124)) || fail "nobody's ibv_rc_pingpong: status $rc (expected a refusal, not success or a hang)"
grep -q "Permission denied" "$work/pp.out" || fail "nobody's ibv_rc_pingpong: no 'Permission denied'"

# The refused connections did not disturb the daemon: root is still served.
ibv_devices >"$work/root2.out" 2>&1 && grep -q uroce_lo "$work/root2.out" || {
  cat "$work/root2.out"
  fail "root's ibv_devices after the refusals"
}
# Across users, RDMA goes over the network link, as between two hosts: a
# root server and a nobody client, each with its own uroced (the default
# daemon names, one per user), in a network namespace of their own (its
# loopback; no port shared with other tests), UROCE_LINK unset: each side's
# uroced does not know the other's QP, so the library takes the network
# link though the address is this host's. At c5dfe68 it took shared memory
# and the client's QP ended in RETRY_EXC_ERR.
unshare -n bash -c '
  ip link set lo up
  unset UROCE_LINK UROCE_DAEMON_NAME
  timeout 30 ibv_rc_pingpong -d uroce_lo -g 1 -n 20 -p 18515 >"$1/srv.out" 2>&1 &
  sleep 0.5
  setpriv --reuid=nobody --regid=nogroup --clear-groups env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
    UROCE_UROCED="$UROCE_UROCED" UROCED_IDLE_MS=300 \
    timeout 30 ibv_rc_pingpong -d uroce_lo -g 1 -n 20 -p 18515 127.0.0.1 >"$1/cli.out" 2>&1
  c=$?
  wait $!
  s=$?
  echo "client $c server $s" >"$1/rcs"
' _ "$work"
cat "$work/srv.out" "$work/cli.out"
[[ $(cat "$work/rcs") == "client 0 server 0" ]] || fail "root/nobody ibv_rc_pingpong: $(cat "$work/rcs")"
grep -q "20 iters" "$work/cli.out" || fail "the nobody client did not finish its 20 iterations"
echo "PASS: another user's process was refused (EACCES); root's still served; a root/nobody pair works over the network link"
