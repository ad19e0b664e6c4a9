#!/usr/bin/env bash
# uroce sysfs -- COMMAND: the command sees /sys/class/infiniband/<dev>/ for
# uroce's devices (the attribute files the library answers, and for a
# device with a non-loopback interface device/net/<ifname>, a link to the
# interface), the rest of /sys/class as it was, and exits with the
# command's status; nothing is left behind (no scratch directory, the
# host's /sys/class unchanged).
# Usage: sysfs_view_test.sh UROCE_TOOL
#   Run under tests/integration/netns/with_netns.sh, it also checks the
#   server namespace's uroce_rnic0 (rnic0).
set -u
tool=$1
fail() {
  echo "FAIL: $*"
  exit 1
}
tmp=${TMPDIR:-/tmp}
before=$(ls -d "$tmp"/uroce-sysfs-* 2>/dev/null | wc -l)
had_ib=0
[[ -e /sys/class/infiniband ]] && had_ib=1

out=$("$tool" sysfs -- sh -c '
  cat /sys/class/infiniband/uroce_lo/node_type
  cat /sys/class/infiniband/uroce_lo/board_id
  cat /sys/class/infiniband/uroce_lo/node_guid
  [ -e /sys/class/infiniband/uroce_lo/device/net ] && echo "lo has device/net"
  cat /sys/class/net/lo/mtu' 2>&1) || fail "uroce sysfs: $out"
echo "$out"
grep -qx '1: CA' <<<"$out" || fail "node_type"
grep -qx 'uroce soft RoCE (lo)' <<<"$out" || fail "board_id"
grep -qE '^[0-9a-f]{4}(:[0-9a-f]{4}){3}$' <<<"$out" || fail "node_guid"
grep -q 'lo has device/net' <<<"$out" && fail "uroce_lo has a device/net entry (a loopback bind takes no device)"
[[ $(tail -1 <<<"$out") == "$(cat /sys/class/net/lo/mtu)" ]] || fail "the real /sys/class/net is not seen"

"$tool" sysfs -- sh -c 'exit 7'
rc=$?
((rc == 7)) || fail "exit status $rc, not the command's 7"
"$tool" sysfs -- /nonexistent/command 2>/dev/null
rc=$?
((rc == 127)) || fail "exit status $rc for a missing command, not 127"

after=$(ls -d "$tmp"/uroce-sysfs-* 2>/dev/null | wc -l)
((after == before)) || fail "a scratch directory was left in $tmp"
[[ -e /sys/class/infiniband ]] && ((had_ib == 0)) && fail "/sys/class/infiniband appeared outside the view"

if [[ -n ${UROCE_NETNS_SERVER:-} ]]; then
  out=$(ip netns exec "$UROCE_NETNS_SERVER" "$tool" sysfs -- sh -c '
    ls /sys/class/infiniband/uroce_rnic0/device/net/
    cat /sys/class/infiniband/uroce_rnic0/device/net/rnic0/address
    cat /sys/class/net/rnic0/address' 2>&1) || fail "uroce sysfs in the namespace: $out"
  echo "$out"
  [[ $(head -1 <<<"$out") == rnic0 ]] || fail "device/net of uroce_rnic0 does not list rnic0"
  [[ $(sed -n 2p <<<"$out") == "$(sed -n 3p <<<"$out")" ]] || fail "device/net/rnic0 is not the interface"
fi
echo "PASS"
