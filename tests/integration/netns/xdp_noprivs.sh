#!/usr/bin/env bash
# Without the privileges the AF_XDP link needs, the UDP-socket link serves,
# and says why once: an ibv_rc_pingpong pair run as user nobody (so the
# uroced it starts has no capabilities) between the two hosts of
# ../netns/with_netns.sh, with UROCE_LINK_XDP unset (the default: AF_XDP when lent), must
# pass, and each side must log exactly one line naming the missing
# capabilities (UROCE_LOG=info). The pair runs on a copy of the library
# and uroced in a directory user nobody can read (../other_user_lib.sh):
# the build tree may sit in a mode-0700 directory, as a clone in /root does.
#
# Usage: xdp_noprivs.sh PORT
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../other_user_lib.sh
source "$here/../other_user_lib.sh"
port=$1
command -v setpriv >/dev/null 2>&1 || { echo "SKIP: setpriv not installed (util-linux)"; exit 77; }
command -v ibv_rc_pingpong >/dev/null 2>&1 || { echo "SKIP: ibv_rc_pingpong not installed"; exit 77; }
unset UROCE_LINK_XDP
export UROCE_LOG=info
# Every process of the pair (and the uroced each starts) as nobody, with no
# capabilities left; in its namespace (ip netns exec needs root: it comes first).
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)
out=$(mktemp "${TMPDIR:-/tmp}/uroce-noprivs.XXXXXX")
trap 'rm -rf "$out" "$user_copy"' EXIT
copy_for_user "${nobody[@]}"
chmod 644 "$out"
UROCE_AS="${nobody[*]}" bash "$here/../debian/run_pair.sh" "$port" ibv_rc_pingpong -d uroce_rnic0 -g 1 -c -n 100 \
  -s 4096 >"$out" 2>&1
rc=$?
cat "$out"
((rc == 0)) || exit "$rc"
n=$(grep -c 'RoCE v2 through UDP sockets, not AF_XDP: uroced lacks CAP_NET_RAW, CAP_NET_ADMIN or CAP_BPF' "$out")
if ((n != 2)); then
  echo "FAIL: expected one line per side saying why AF_XDP is not used, found $n"
  exit 1
fi
echo "PASS: without privileges the UDP-socket link serves, one line per process says why"
